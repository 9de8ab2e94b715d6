/* Implements: schedule generators for the simulator — one training iteration (forward of every
 * generalised layer, backward, Gradient-AllReduce) as simulator tasks, for our plan and for the
 * systems the papers compare with (FSMoE §3–§5 and Fig. 3, Parm §4 (S1/S2/SAA),
 * MoNTA §4 (O1/O2/O3), Lina §4 (30 MB micro-ops, all-to-all priority), DeepSpeed-MoE as Parm
 * describes it (design.md §6 baseline), Tutel/PipeMoE (A2A pipelined with experts)).
 *
 * The iteration is a chain of generalised layers (design.md §5): an optional prefix of dense
 * ops, then per MoE layer i the MoE layer followed by the dense ops up to the next MoE layer.
 * Forward visits i = 0..n-1, backward n-1..0 (dense part first, then the MoE layer).
 *
 * Resources: compute (exclusive), intra-node link, inter-node link (fair-shared), a copy engine
 * (exclusive; MoNTA's re-layout copy) and a zero-cost "sync" resource for joins that reports
 * hide. Dense compute is one task per block, its tensor-parallel MP AllReduce a task on the intra
 * link, then the block's layer norms and residual additions (an `elementwise` task); an MoE
 * layer's gate and token order are `gate` tasks on compute before and after its MoE operations
 * (workload.h); a whole model adds its `head` (embedding, LM head, loss) at the end of the
 * forward and the start of the backward, and the `optimizer` after everything else. Where a schedule has several chunks per MoE op, chunk j of every op waits for chunk j of
 * the op before it; streams order communication as the real systems do:
 *   deepspeed      every op in sequence (one stream, nothing overlaps), tokens duplicated over
 *                  MP: ESP-AG(B·L·M·N_ESP) → A2A(y) → Expert(N_ESP× the MACs) → ESP-AR(y) →
 *                  A2A(y), y = k·f·B·L·M·N_ESP·b; backward mirrors (ESP-RS for the AG);
 *                  AllReduce after backward.
 *   tutel          r chunks, A2A pipelined with experts, intra and inter collectives on ONE
 *                  stream, the same r forward and backward (Tutel/PipeMoE's degree: the best of
 *                  r ∈ {1,2,4,8} simulated, as Tutel's adaptive pipelining profiles), AllReduce
 *                  after backward.
 *   tutel-improved tutel + Gradient-AllReduce overlapped with the dense backward windows only.
 *   pipemoe-lina   tutel + gradients cut into 30 MB micro-ops per generalised layer, launched
 *                  only while no A2A is ready or running on the inter link (A2A has priority).
 *   fsmoe-no-iio   FSMoE's ESP pipeline in every layer with intra and inter collectives on ONE
 *                  stream (FSMoE Table 5), at its own degrees noiio_r_f/_b (the one-stream
 *                  optimum at the layer's t_gar, not FSMoE's two-stream r) and FSMoE's
 *                  gradient partition (fsmoe_own's window, t_gar and tail bytes).
 *   plan           the plan: every MoE layer plays the schedule the plan chose for it (its
 *                  `schedule`), its AllToAll by the layer's a2a.algorithm (flat, or 2DH on the
 *                  lines the planner priced it with, workload_lines_2dh; every other schedule
 *                  here is flat): the ESP pipeline (A2A on an inter-node stream, AG/RS on an
 *                  intra-node stream), PauseMP S1/S2 in r chunks (below) or MoNTA's layer
 *                  (monta-o1/o2/o3 below, at the layer's a2a strategy and chunks; its share of
 *                  the Gradient-AllReduce right after its dispatch AllToAll); the window
 *                  AllReduce at the start of the dense backward window and the rest right after
 *                  the last dispatch chunk of the MoE backward (FSMoE Fig. 3d); the prefix
 *                  window's AllReduce at the start of the prefix's backward.
 *   fsmoe          FSMoE as published: the ESP pipeline in every layer at FSMoE's own degrees
 *                  (esp_r_f, esp_r_b) and gradient partition — fsmoe_own, the model planned by
 *                  --method fsmoe, when the plan's layers run other schedules.
 *   parm-s1/s2     PauseMP (Parm: r = 1, gradients after the backward). Per chunk: EP&ESP
 *                  A2A(y/N_MP/r) → Expert → EP&ESP A2A (S1) or SAA (S2: one task on the
 *                  inter-node link, its measured line covers the MP AllGather riding along);
 *                  S1 then runs MP-AG(x) on the intra-node link, unchunked.
 *   monta-o1/o2/o3 deepspeed's sequential layer whose AllToAll of I = k·f·B·L·M·b (duplicated
 *                  tokens under t = N_MP) is MoNTA's strategy: O1 A2A(I/t) then AG(I); O2 per
 *                  chunk A2A_j → AG_j → copy D_j with AG_{j+1} after D_j; O3 AG and D pipelined.
 *                  The expert runs on the H/N_ESP slice of the gathered tokens (n_exp/N_ESP),
 *                  ESP-RS(I) before combining; without EP (no AllToAll) an ESP-AG(I) after it
 *                  brings the tokens back.
 * Units: seconds and bytes. */
#ifndef FSMOE_SIM_SCHEDULES_H
#define FSMOE_SIM_SCHEDULES_H

#include "plan.h"
#include "sim.h"
#include "status.h"
#include "workload.h"

typedef enum {
    SIM_SCHED_DEEPSPEED = 0,
    SIM_SCHED_PARM_BASELINE,
    SIM_SCHED_TUTEL,
    SIM_SCHED_TUTEL_IMPROVED,
    SIM_SCHED_PIPEMOE_LINA,
    SIM_SCHED_FSMOE_NO_IIO,
    SIM_SCHED_FSMOE,
    SIM_SCHED_PARM_S1,
    SIM_SCHED_PARM_S2,
    SIM_SCHED_MONTA_O1,
    SIM_SCHED_MONTA_O2,
    SIM_SCHED_MONTA_O3,
    SIM_SCHED_PLAN,
    SIM_SCHED_COUNT
} sim_schedule;

const char *sim_schedule_name(sim_schedule k); /* "deepspeed", "parm-baseline", ..., "plan" */
int sim_schedule_from_name(const char *s);     /* -1 when unknown */

/* One generalised layer: MoE layer i + the dense ops after it. */
typedef struct {
    workload_layer wl;        /* costs of the MoE layer (and of one attention / dense FFN block) */
    int n_attn, n_ffn;        /* dense blocks after the MoE layer (attention, dense FFN) */
    double dense_grad_bytes;  /* DP gradients of those dense ops, ready after their backward */
    double moe_grad_bytes;    /* replicated experts' gradients, ready after the MoE backward */
    /* the plan (fsmoe, fsmoe-no-iio) */
    fsmoe_schedule schedule;  /* the MoE layer's schedule (ESP pipeline, S1, S2, MoNTA) */
    fsmoe_a2a_strategy a2a;   /* schedule MONTA: its AllToAll strategy (base = plain A2A) */
    int a2a_chunks;           /* ... and chunks (O2/O3; ≥ 1, 0 = 1) */
    int r_f, r_b;
    int esp_r_f, esp_r_b;     /* the ESP pipeline's degrees (fsmoe); 0 = r_f, r_b */
    int noiio_r_f, noiio_r_b; /* fsmoe-no-iio's own degrees (its one-stream optimum,
                               * baselines.h baseline_one_stream_best_r); 0 = esp_r_f, esp_r_b */
    double gar_dense_bytes;   /* all-reduced from the start of this layer's dense backward */
    double gar_moe_bytes;     /* all-reduced after the last dispatch chunk of its MoE backward */
    /* MoNTA's chunk counts for O2 and O3 (≥ 1) */
    int monta_chunks_o2, monta_chunks_o3;
    /* The plan's a2a.algorithm is 2dh: the `plan` schedule costs this layer's AllToAll on the
     * hierarchical lines (sim_model.lines_2dh, wl_2dh: the planner's lines for it), as
     * fsmoe-run executes it; every other schedule (FSMoE as published, the baselines) keeps
     * the flat AllToAll (wl, lines). */
    int a2a_2dh;
    workload_layer wl_2dh;
    /* The routing a run met in this layer (workload_shape run_rows, run_width; 0 = as planned):
     * set by sim_model_at_routing, which prices wl and wl_2dh at it. */
    double run_rows, run_width;
} sim_layer;

typedef struct sim_model {
    workload_shape shape;
    fsmoe_parallel par;
    workload_lines lines;
    workload_lines lines_2dh; /* workload_lines_2dh of lines, when has_2dh */
    int has_2dh;
    int n_layers;
    sim_layer *layers;        /* forward order; owned by whoever filled it */
    /* dense ops before the first MoE layer */
    int prefix_attn, prefix_ffn;
    double prefix_grad_bytes; /* ready at the end of the prefix's backward, except: */
    double prefix_early_grad_bytes; /* the part of prefix_grad_bytes ready after the output
                               * projection's backward of the prefix's last attention block (wo,
                               * bo: the first weights its backward reaches), overlappable with the
                               * rest of that backward (grad_partition.h prefix_early_*) */
    double fsmoe_prefix_window_bytes; /* the plan's AllReduce in the prefix's backward */
    double fsmoe_prefix_early_bytes;  /* the plan's AllReduce of early prefix gradients, from the
                                       * moment they are ready (≤ prefix_early_grad_bytes) */
    double fsmoe_tail_bytes;  /* the plan's AllReduce after backward (incl. the prefix) */
    int plan_lina;            /* the plan's gradient_schedule is lina (plan.h): `plan` runs
                               * Lina's micro-ops, as pipemoe-lina, instead of the partition */
    int tutel_r;              /* Tutel's degree; 0 = sim_build chooses (best of 1,2,4,8) */
    /* The whole model's ends, set by sim_model_of_plan (0 where the model is MoE layers alone,
     * as the sweeps' configured layers): the embedding, LM head and loss (workload_layer
     * head_fwd_s, head_bwd_s: a `head` task at the end of the forward and at the start of the
     * backward) and the optimizer step (workload_optimizer_s on this GPU's parameters: an
     * `optimizer` task after the backward and every Gradient-AllReduce). */
    double head_fwd_s, head_bwd_s, optim_s;
    double param_bytes;       /* this GPU's parameters (the optimizer's; 0 with optim_s) */
    /* Activation recomputation (memory.h fsmoe_recompute, the plan's memory.recompute): full
     * runs each generalised layer's forward again (its MoE layer with the schedule's own
     * operations, then its dense blocks) at the start of its backward, and the prefix's before
     * the prefix's backward; selective runs each attention block's scores and scores·V again
     * (workload_layer attn_core_s) before its backward. The recomputed tasks belong to the
     * backward phase. 0 (none) for the sweeps' configured layers. */
    int recompute;
    /* FSMoE as published (fsmoe, fsmoe-no-iio): the same model planned with the ESP pipeline in
     * every layer, its own degrees and gradient partition — a plan whose layers run S1/S2/MoNTA
     * partitions its gradients for those. NULL: this model's own layers and partition are
     * FSMoE's (configured layers, plans made by --method fsmoe). Owned (sim_model_free). */
    struct sim_model *fsmoe_own;
} sim_model;

typedef struct {
    int r_f, r_b;   /* > 0: override every layer's degree (the regret study); 0: the model's */
    int tutel_r;    /* > 0: override Tutel's degree */
} sim_build_opts;

/* Resource indices every generated simulation uses. */
enum { SIM_R_COMPUTE = 0, SIM_R_INTRA, SIM_R_INTER, SIM_R_COPY, SIM_R_SYNC };

/* Prices every MoE layer i of m (and of m->fsmoe_own, layer for layer) at the routing a run
 * met: rows[i] of the capacity's expert rows and exchanged copies, GShard's dense matrices
 * width[i] times k·f·B·L wide (workload_shape run_rows, run_width; 0 = as planned). The layers'
 * degrees, schedules and gradient partition stay the plan's, so the graph keeps its tasks; their
 * times and bytes move. */
void sim_model_at_routing(sim_model *m, const double *rows, const double *width);

/* Clears s and fills it with schedule k of one iteration of m. opts may be NULL. */
fsmoe_status sim_build(sim *s, const sim_model *m, sim_schedule k, const sim_build_opts *opts,
                       fsmoe_error *err);

/* The token order schedule k forces, as fsmoe-run runs it (runtime/schedule.c): GShard's
 * einsums for DeepSpeed-MoE, Tutel's indices for Tutel's family; -1: the model's. */
int sim_schedule_forced_order(sim_schedule k);
/* The order schedule k runs on a model of shape s (forced, else the model's). */
workload_order sim_schedule_order(sim_schedule k, const workload_shape *s);

/* Whether schedule k describes an execution on m's layout: MoNTA's O1-O3 where
 * monta_layout_ok (monta_a2a.h), DeepSpeed-MoE where deepspeed_layout_ok (moe_seq.h), every
 * other schedule everywhere. NULL or a reason (static text) in *why. */
int sim_schedule_applies(const sim_model *m, sim_schedule k, const char **why);

/* Builds and runs; *iteration_s = the makespan. */
fsmoe_status sim_schedule_time(sim *s, const sim_model *m, sim_schedule k,
                               const sim_build_opts *opts, double *iteration_s,
                               fsmoe_error *err);

/* Tutel's degree for m: the r in {1,2,4,8} (≤ r_max) with the smallest simulated tutel
 * iteration (ties: the smaller r). */
fsmoe_status sim_tutel_degree(sim *s, const sim_model *m, int *r_out, fsmoe_error *err);

/* FSMoE-No-IIO's degrees in every layer of m (noiio_r_f, noiio_r_b): per phase, each layer's
 * one-stream optimum (baselines.h baseline_one_stream_best_r, with the AllReduce time the plan
 * puts inside its MoE backward) or Tutel's degree in every layer, whichever of the four
 * combinations the simulator finds fastest. The closed form prices one stream's pipeline a
 * little differently from the simulator; alone it left No-IIO slower than Tutel on 516 of
 * FSMoE Table 4's layers of Testbed A, which no schedule at its own optimum is. Sets
 * m->tutel_r when unset. */
fsmoe_status sim_noiio_degrees(sim *s, sim_model *m, fsmoe_error *err);

/* Backward of one attention block's output projection (dX and dW of wo: 2 GEMMs of
 * B·L × M × M/N_MP): the prefix's early gradients (prefix_early_grad_bytes) are ready after it. */
double sim_out_proj_bwd_s(const sim_model *m);

/* The whole sum of DP gradient bytes of one iteration. */
double sim_model_grad_bytes(const sim_model *m);

/* Fills m (layers allocated, free with sim_model_free) from a plan and the model/cluster it was
 * made for: dense blocks from the model's MoE placement, r_f/r_b and the gradient partition
 * from the plan, MoNTA chunks from the plan's a2a choice (O2/O3 only; else 1), for a layer
 * whose schedule is MoNTA's its strategy and chunks (a2a, a2a_chunks), and its AllToAll
 * algorithm (a2a_2dh; a 2dh layer whose schedule's group is not hierarchical is refused). */
/* Limits on what one simulation plays, checked before anything is built: the degrees r_f, r_b
 * (and the ESP pipeline's, Tutel's) in 1..SIM_MAX_CHUNKS, MoNTA's chunks in
 * 1..SIM_MAX_A2A_CHUNKS, and Lina's 30 MB
 * micro-ops over the whole iteration at most SIM_MAX_LINA_OPS (about 2 TB of gradients; the
 * largest shipped plan has a few GB). A value past a limit is refused, never clamped. */
#define SIM_MAX_CHUNKS (PIPELINE_R_CAP * 2)
#define SIM_MAX_A2A_CHUNKS 1024 /* MoNTA's chunks (planner/monta_a2a.c searches up to 1024) */
#define SIM_MAX_LINA_OPS 65536
/* Every count and byte total of m against those limits (finite, non-negative, in range);
 * FSMOE_ERR_VALUE names the layer and the value. sim_build calls it. */
fsmoe_status sim_model_check(const sim_model *m, fsmoe_error *err);
/* The same limits on a plan's own fields, before sim_model_from_plan: the message names
 * plan_path:line:col and the field (e.g. layers[2].forward.r); plan_path NULL: the field only. */
fsmoe_status sim_plan_check(const fsmoe_plan *p, const char *plan_path, fsmoe_error *err);
/* The simulator's model of plan p for `model` (its shape overridden by the plan's) on profile c;
 * unless p was made by --method fsmoe, fsmoe_own is planned too (plan_model.h
 * PLAN_METHOD_FSMOE). */
fsmoe_status sim_model_from_plan(const fsmoe_plan *p, const fsmoe_model *model,
                                 const fsmoe_cluster *c, const char *cluster_path,
                                 sim_model *m, fsmoe_error *err);
/* The same without fsmoe_own (NULL): enough for every schedule but fsmoe and fsmoe-no-iio,
 * and one planner run cheaper (plan_model's comparison by simulation plays only `plan`). */
fsmoe_status sim_model_of_plan(const fsmoe_plan *p, const fsmoe_model *model,
                               const fsmoe_cluster *c, const char *cluster_path, sim_model *m,
                               fsmoe_error *err);
void sim_model_free(sim_model *m);

#endif
