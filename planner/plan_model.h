/* Implements: planning a whole model on a cluster (design.md §4–§9): per MoE layer the S1/S2
 * schedule, the AllToAll strategy, the forward and backward pipeline degrees and the gradient
 * partition, plus the predicted iteration time of the plan and of the baselines.
 * Provenance (paths, SHA-256, version, overrides) is filled by the caller. */
#ifndef FSMOE_PLAN_MODEL_H
#define FSMOE_PLAN_MODEL_H

#include "cluster.h"
#include "model.h"
#include "parallel.h"
#include "plan.h"
#include "parm_schedule.h"
#include "status.h"
#include "workload.h"

typedef enum {
    PLAN_METHOD_AUTO = 0,    /* per layer the fastest of ESP pipeline, S1, S2, MoNTA's layer */
    PLAN_METHOD_FSMOE,       /* FSMoE as published: the ESP pipeline in every layer (SLSQP) */
    PLAN_METHOD_FSMOE_PAPER, /* FSMoE Algorithm 1 as printed */
    PLAN_METHOD_PARM,        /* r = 1, Parm's S1/S2 */
    PLAN_METHOD_MONTA,       /* r = 1, MoNTA's O1/O2/O3 */
    PLAN_METHOD_COUNT
} plan_method;

const char *plan_method_name(plan_method m); /* "auto", "fsmoe", "fsmoe-paper", "parm", "monta" */
int plan_method_from_name(const char *s);    /* -1 when unknown */

/* How a plan's Gradient-AllReduce runs: FSMoE's partition with its windows; no window, every
 * gradient after the backward as Tutel's (grad_partition.h tail_only); or no window and Lina's
 * micro-ops instead (plan.h FSMOE_GRADS_LINA). */
typedef enum {
    PLAN_GRADS_WINDOWS = 0,
    PLAN_GRADS_AFTER_BACKWARD,
    PLAN_GRADS_LINA,
    PLAN_GRADS_COUNT
} plan_grads;

typedef struct {
    plan_method method;
    int micro_batches; /* pp > 1: micro-batches per DP rank's batch (0: gpipe.h's default) */
    int one_f_one_b;   /* pp > 1: 1F1B instead of GPipe (gpipe.h) */
    plan_grads gradients;
    fsmoe_schedule parm_schedule; /* method parm: S1 or S2 in every layer (where its problems
                                   * exist); ESP_PIPELINE (0): Parm's Algorithm 1 chooses */
} plan_options;

/* The model's `dispatch` (model.h): how the layers' Dispatch/Combine AllToAll runs. NCCL: flat
 * everywhere (every shipped model; nothing of the 2DH cost is looked up, so such plans are as
 * before). 2DH: every candidate schedule whose AllToAll group (EP for the ESP pipeline and
 * MoNTA's layer, EP&ESP for S1/S2) is hierarchical (workload_group_2dh) on the hierarchical
 * AllToAll's lines, the others flat (a note says which group is not hierarchical); a profile
 * that cannot cost 2DH is an error at the model's dispatch field. AUTO: per layer the better
 * of the two — each candidate schedule is offered on the flat lines and, where its group is
 * hierarchical, once more on the 2DH lines, and the gradient partition runs each layer's
 * candidate with the smallest predicted forward + backward at its gradient share (as it
 * chooses the schedule, grad_partition.h; ties: the flat one); a profile that cannot cost 2DH
 * leaves every layer flat, with a note. The layer's a2a.algorithm records the result (`nccl`
 * or `2dh`); its t_D1/t_D2 and MoNTA strategy are computed on the lines it runs; a note per
 * run of layers gives, for auto, the chosen algorithm's time against the other's. Baselines
 * (deepspeed, tutel, tutel-improved, pipemoe+lina) stay flat. `1dh` (Hetu) and any other
 * value are refused (FSMOE_ERR_VALUE at the model's file:line:col). */
typedef enum { PLAN_DISPATCH_NCCL = 0, PLAN_DISPATCH_2DH, PLAN_DISPATCH_AUTO } plan_dispatch;
int plan_dispatch_from_name(const char *s); /* NULL, "" = nccl; -1 when not nccl, 2dh, auto */
/* The logical group whose AllToAll schedule k runs: EP for the ESP pipeline and MoNTA's layer,
 * EP&ESP for Parm's PauseMP schedules S1/S2. */
fsmoe_group plan_schedule_group(fsmoe_schedule k);
/* a2a.algorithm of a layer: "nccl" (NCCL) or "2dh" (2DH) */
static inline const char *plan_a2a_algorithm_name(plan_dispatch d)
{
    return d == PLAN_DISPATCH_2DH ? "2dh" : "nccl";
}

/* MoNTA's layer (plan.h FSMOE_SCHED_MONTA) at AllToAll strategy a2a in `chunks` chunks, in
 * closed form: the time of each operation the simulator plays for it (sim_schedules.c), on the
 * profile's lines. One AllToAll of I = k·f·B·L·M·b (none when N_EP = 1):
 *   base (or N_MP = 1)  A2A_EP(I)
 *   O1                  A2A_EP(I/t) + AG_MP(I)                                   (t = N_MP)
 *   O2                  max(aa + N·(ag + d), N·aa + ag + d)
 *   O3                  max(aa + N·ag + d, aa + ag + N·d, N·aa + ag + d)
 * with aa = A2A_EP(I/(N·t)), ag = AG_MP(I/N), d = COPY(I/N) (0 without a copy entry): O2 holds
 * AG_{j+1} until the copy D_j ends, O3 only orders the copies, so its makespan is the longest
 * of the three corner paths through the chunk grid. These are monta_a2a.c's formulas with the
 * per-chunk sync and O3 stall at 0, on the fitted lines (monta_a2a.c interpolates measured
 * points to choose the strategy; the simulator plays lines), plus O3's copy-bound corner.
 * Per phase the layer is dispatch → expert (n_exp/N_ESP: the H/N_ESP slice of every gathered
 * token) → ESP-ReduceScatter(I) (and ESP-AllGather(I) when N_EP = 1: no combine AllToAll brings
 * the tokens back) → combine; the backward's Gradient-AllReduce runs on the
 * inter-node link between the dispatch and the combine. As PauseMP problems at r_max = 1 (u = 1
 * byte as a unit, t_d = t_c = one AllToAll, t_e = expert + ReduceScatter) F = t_d + t_c +
 * max(t_gar, t_e): the grad partition's candidate form (grad_partition.h). */
double plan_monta_a2a_s(const workload_shape *s, const fsmoe_parallel *par,
                        const workload_lines *w, fsmoe_a2a_strategy a2a, int chunks);
void plan_monta_problems(const workload_shape *s, const fsmoe_parallel *par,
                         const workload_lines *w, const workload_layer *wl,
                         fsmoe_a2a_strategy a2a, int chunks, pausemp_problem *fwd,
                         pausemp_problem *bwd);

/* Under interference (a measured profile, cluster.h) the planner keeps the candidate plan with
 * the fewest pieces (pipeline chunks, gradient windows) among those whose simulated iteration
 * is within this fraction of the fastest: on the emulated 2 x 2 cluster the chunked
 * collectives and gradient windows beside the experts measured 1.5-2.4x their simulated time
 * (the factors are measured on one long collective beside one long GEMM), and plans the
 * simulator put 0.1-0.3 % ahead of their unchunked, windowless variants measured 3-10 %
 * behind them. */
#define PLAN_SIMPLER_MARGIN 0.02

/* What that rule counts: the pieces plan p issues per iteration beyond one per operation —
 * every pipeline chunk (r_f + r_b per layer), S2's SAA phases beyond the first (ep − 1 per
 * chunk where mp > 1: the Combine in one exchange and MP AllGather per EP member, where S1
 * issues one of each; on the emulated 2 x 2 cluster, dp 2 · mp 2 · ep 2 · esp 2, S1 measured
 * 7-9 % ahead of S2 in 5 of 6 runs and 2 % in the sixth, simulated 0.5 % behind it), MoNTA's
 * AllToAll chunks, and one per gradient window (a layer's, the prefix's) or, with Lina's
 * micro-ops, one per generalised layer and the prefix (at least). */
int plan_pieces(const fsmoe_plan *p);

/* Plans `m` (whose E is already resolved against par->ep) under the layout `par` (already
 * validated). Fills everything in *out except the provenance fields. */
fsmoe_status plan_model(const fsmoe_model *m, const fsmoe_cluster *c, const char *cluster_path,
                        const fsmoe_parallel *par, const plan_options *opt, fsmoe_plan *out,
                        fsmoe_error *err);

#endif
