/* Implements: adaptive gradient partitioning for the Gradient-AllReduce (FSMoE §5, design.md §5),
 * and the gradient schedules FSMoE compares with (no overlap, Tutel-Improved's dense-only
 * overlap, PipeMoE+Lina's fixed 30 MB micro-ops) as predicted exposed times.
 *
 * Model. Generalised layer i (forward order, i = 0..n-1) = MoE layer i + the dense ops after it
 * up to the next MoE layer. The backward visits i = n-1 .. 0; inside layer i the dense ops run
 * first (a window of dense_bwd_s seconds in which the inter-node link is idle), then the MoE
 * layer (whose link is idle for t_olp,moe at the t_gar = 0 optimum). Gradients of layer i
 * (grad_bytes) are ready when its backward ends; the ops before the first MoE layer (the
 * "prefix") run last: their backward is one more dense window, for the gradients already ready
 * (those of layer 0 and whatever is still carried), and their own gradients always go to the
 * tail, all-reduced after backward — except prefix_early_bytes, the gradients of the output
 * projection (wo, bo) of the prefix's last attention block: an attention block's backward starts
 * with that projection, so they are ready prefix_early_s into the prefix's backward and may be
 * all-reduced in the rest of it (one more AllReduce, started when they are ready and the window's
 * first AllReduce is done, sending what fits before the prefix's backward ends; the rest joins
 * the tail). Every schedule here (FSMoE, dense-only, Lina) uses it alike.
 *
 * FSMoE's configured layer (Table 4, sweep.h) is such a prefix: one transformer block, attention
 * then MoE; its backward visits the MoE layer first (no DP gradient is ready before it: experts
 * have EDP = 1 in the common layout, so t_gar = 0), then the attention, during which the gate's
 * gradients (ready when the MoE backward ends) and the projection's are all-reduced — what
 * Tutel-Improved overlaps ("Gradient-AllReduce with non-MoE parts", FSMoE §6); the rest of the
 * attention's gradients (wqkv, bqkv, ln1) are ready only at the end and are exposed.
 * Each window issues one AllReduce that starts with the window (so it pays α once): what does
 * not fit in the dense part runs inside the MoE layer as its t_gar.
 *
 * Owner: engineer "gradients". Relies on: pipeline_degree.h, cost.h (fsmoe_line), NLopt. */
#ifndef FSMOE_GRAD_PARTITION_H
#define FSMOE_GRAD_PARTITION_H

#include "cost.h"
#include "parm_schedule.h"
#include "pipeline_degree.h"
#include "plan.h"
#include "status.h"

/* Lina's default micro-op size (plan.h) */
#define GRAD_LINA_MICRO_OP_BYTES FSMOE_LINA_MICRO_OP_BYTES

/* A MoE layer may run one of several schedules (plan.h fsmoe_schedule): FSMoE's ESP pipeline
 * (moe_bwd) and up to GRAD_MAX_ALT alternatives — PauseMP problems, or (alt_esp[j] set) one
 * more ESP pipeline (alt_pipe[j], its r chosen like moe_bwd's: the same schedule on other
 * cost lines, e.g. with the hierarchical AllToAll). Each candidate's backward is
 * F(r, t_gar) = max(f1(r) + t_gar, rest(r)) (pipeline_degree.h f1 vs max(f2,f3,f4);
 * parm_schedule.h c1 vs max(c2,c3,c4)); the layer runs the candidate with the smallest
 * forward + backward at its t_gar (ties: the lower index; the forward times *_fwd_s only enter
 * the choice). A zeroed layer has the ESP pipeline alone. The planner offers S1, S2 and
 * MoNTA's layer on the flat AllToAll and, with `dispatch: auto`, each schedule once more on the
 * hierarchical one: 3 + 4. */
#define GRAD_MAX_ALT 7

typedef struct {
    double grad_bytes;        /* gradients needing the DP AllReduce, ready at the layer's end */
    double dense_bwd_s;       /* backward of the dense ops after MoE layer i (t_olp,dense) */
    pipeline_problem moe_bwd; /* backward of MoE layer i's ESP pipeline; its t_gar is ignored */
    double moe_fwd_s;         /* that schedule's forward time (enters the choice only) */
    int esp_off;              /* 1: the ESP pipeline is not a candidate (needs n_alt ≥ 1) */
    int n_alt;                /* PauseMP candidates, 0..GRAD_MAX_ALT */
    pausemp_problem alt[GRAD_MAX_ALT];  /* backward problems; t_gar ignored */
    double alt_fwd_s[GRAD_MAX_ALT];
    int alt_esp[GRAD_MAX_ALT];          /* 1: alternative j is the ESP pipeline alt_pipe[j] */
    pipeline_problem alt_pipe[GRAD_MAX_ALT]; /* its backward; t_gar ignored */
} grad_layer_in;

typedef enum {
    GRAD_STEP2_BEST = 0, /* best of {NLopt COBYLA from the best start, greedy, grid DP, x = 0} */
    GRAD_STEP2_NONE,     /* step 1 only (x = 0) */
    GRAD_STEP2_GREEDY,   /* marginal-cost allocation in small quanta */
    GRAD_STEP2_GRID,     /* exact dynamic programme on a grid of the prefix sums */
    GRAD_STEP2_NLOPT,    /* COBYLA from x = 0 alone (for tests) */
} grad_step2_method;

typedef struct {
    int n_layers;
    const grad_layer_in *layers; /* forward order */
    double prefix_grad_bytes;    /* gradients of the ops before the first MoE layer */
    double prefix_bwd_s;         /* their backward time (added to backward_s): the last dense
                                  * window, for the gradients ready before it */
    double prefix_early_bytes;   /* of prefix_grad_bytes: ready prefix_early_s into the prefix's
                                  * backward (0: none; real models' plans use 0) */
    double prefix_early_s;
    fsmoe_line ar;               /* Gradient-AllReduce over DP: t_ar(n) = α + β·n */
    pipeline_method method;      /* how each MoE layer's r is chosen for a given t_gar */
    grad_step2_method step2;
    int grid_steps;              /* grid of the step-2 dynamic programme (0 = default 128) */
    int tail_only;               /* 1: no window at all (steps 1 and 2, the prefix's): every
                                  * gradient is all-reduced after the backward, as Tutel does;
                                  * the variant the planner also simulates where overlap costs
                                  * more than it hides (plan_model.h) */
} grad_problem;

typedef struct {
    double olp_dense_s, olp_moe_s; /* windows (olp_moe at the t_gar = 0 optimum r0) */
    int r0;
    double available_bytes;        /* carried into this layer's window (ready, not yet sent) */
    double window_bytes;           /* step 1: sent in this layer's window */
    double step2_bytes;            /* step 2: added to the same AllReduce, inside the MoE layer */
    double carried_bytes;          /* ready but not sent when this layer ends (incl. its own) */
    double t_gar_s;                /* AllReduce time that lands inside the MoE layer */
    int cand;                      /* the schedule run: 0 = ESP pipeline, 1 + j = alt[j] */
    double cand_s[1 + GRAD_MAX_ALT]; /* forward + backward of each candidate at t_gar (0: none) */
    pipeline_result bwd;           /* the MoE layer's backward with that t_gar (for a PauseMP
                                    * candidate: binding_case = chain c1..c4, q = 0) */
} grad_layer_out;

typedef struct {
    double prefix_window_bytes; /* all-reduced during the prefix's backward */
    double prefix_early_window_bytes; /* of prefix_early_bytes, all-reduced in the same window */
    double tail_bytes;     /* all-reduced after the backward pass (carried + prefix) */
    double tail_s;         /* t_ar(tail_bytes): exposed */
    double moe_bwd_s;      /* Σ F_i(t_gar_i) of the candidates run */
    double moe_fwd_s;      /* Σ their forward times (moe_fwd_s / alt_fwd_s) */
    double backward_s;     /* prefix_bwd_s + Σ (dense_bwd_s + F_i(t_gar_i)) */
    double objective_step1_s; /* Σ F_i + t_ar(tail) with step 1 alone */
    double objective_s;       /* the same after step 2 (≤ objective_step1_s) */
    const char *step2_by;     /* "none", "greedy", "grid", "nlopt-cobyla" */
} grad_result;

/* AllReduce time t_ar(n) (0 for n ≤ 0) and its inverse g(t) = (t − α)/β (0 for t ≤ α; infinite
 * when β = 0, i.e. no AllReduce is needed). */
double grad_ar_time(const fsmoe_line *ar, double bytes);
double grad_ar_inverse(const fsmoe_line *ar, double t);

/* Bytes the prefix window sends of `ready` bytes (one AllReduce from the window's start). */
double grad_prefix_window_bytes(const grad_problem *p, double ready);
/* Bytes of prefix_early_bytes sent in the prefix window when `ready` bytes reached it: one
 * AllReduce from max(prefix_early_s, end of the window's first AllReduce), what fits before
 * prefix_bwd_s ends. */
double grad_prefix_early_window_bytes(const grad_problem *p, double ready);

/* Step 1 and step 2. `out` has p->n_layers entries (forward order). */
fsmoe_status grad_partition_solve(const grad_problem *p, grad_layer_out *out, grad_result *res,
                                  fsmoe_error *err);

/* The step-2 objective Σ_i F_i(t_gar_i(x_i)) + t_ar(tail) for step-1 windows in `s1` (the
 * output of a solve) and step-2 bytes x (forward order); +∞ when x breaks a prefix constraint
 * (sends a gradient before it exists) by more than a relative 1e-9. */
double grad_step2_objective(const grad_problem *p, const grad_layer_out *s1, const double *x);

typedef enum { GRAD_BASE_NONE = 0, GRAD_BASE_DENSE_ONLY, GRAD_BASE_LINA } grad_baseline;

typedef struct {
    double exposed_s;  /* AllReduce time after the backward pass */
    double prefix_window_bytes; /* sent during the prefix's backward (early bytes included) */
    double delay_s;    /* extra backward time (Lina micro-ops overrunning their window) */
    double tail_bytes; /* bytes left for after the backward */
    long micro_ops;    /* Lina: micro-ops issued in total */
} grad_baseline_result;

/* none: every gradient in one AllReduce after backward. dense-only (Tutel-Improved): step 1 with
 * the dense windows only (the prefix's included), MoE layers untouched. lina: micro-ops of
 * micro_op_bytes cut per generalised layer (never mixing layers), each paying α, launched only
 * inside dense windows (the prefix's included); one started before a window ends runs to
 * completion and delays the MoE layer by its overrun (in the prefix: the overrun is exposed). */
void grad_baseline_eval(const grad_problem *p, grad_baseline b, double micro_op_bytes,
                        grad_baseline_result *out);

#endif
