/* Implements: pipeline parallelism as GPipe runs it (FSMoE §6 "with PP enabled", N_PP stages;
 * Huang et al. 2019): the model's blocks cut into pp stages of layers/pp blocks each, every DP
 * rank's batch cut into m micro-batches; every stage runs the forward of all m micro-batches, then
 * their backwards in reverse order (the flush), then its gradient AllReduce and optimizer step
 * once. Or as 1F1B runs it (PipeDream-flush, Megatron-LM's default): stage st runs min(pp − st −
 * 1, m) forwards, then alternates one forward and one backward, then the remaining backwards: the
 * same bubble with sends that take no time, at most pp micro-batches' activations held instead of
 * m, but each send between a forward and a backward is exposed. Between neighbouring stages each
 * micro-batch's activations go forward and their gradients back (point to point, B/m·L·M bytes per
 * MP rank split over the MP group as Megatron does, on the tier the stage boundary crosses).
 *
 * One stage is planned and simulated as an iteration of its own (layers/pp blocks, one micro-
 * batch: plan_model with pp = 1 on dp·mp ranks): its forward F and backward B0 without any
 * gradient communication (every gradient byte set to 0), and X, how much longer the iteration with
 * the gradients and the optimizer is (what the last backward and the tail add once per iteration).
 * Every stage is taken as that one (the embedding and LM head are counted in every stage: the
 * slowest stage, the last, sets the pace).
 *
 * The iteration is a discrete-event simulation (sim.h) of pp stages × m micro-batches: per stage
 * one compute stream carrying its forwards and backwards in its schedule's order, one link
 * carrying its sends (activations forward, gradients back) and, after its last backward, its
 * gradient work X. MoNTA's communication priorities (EP > PP > CP > DP on a shared link) hold the
 * DP gradient work back while a pipeline send is ready or running on the link (`priorities`);
 * without them the two share the link's bandwidth. For uniform stages with sends no longer than F
 * and B0, and with priorities, the makespan is the closed form
 *     T = (m + pp − 1)·(F + B0) + 2·(pp − 1)·p2p + X,
 * the bubble being (pp − 1)·(F + B0) (GPipe's (pp−1)/(m+pp−1) of the compute). The EP, MP and ESP
 * collectives stay inside F and B0 (their stage's links are not shared with the sends in this
 * model). */
#ifndef FSMOE_PLANNER_GPIPE_H
#define FSMOE_PLANNER_GPIPE_H

#include "cluster.h"
#include "model.h"
#include "parallel.h"
#include "sim.h"
#include "sim_schedules.h"
#include "status.h"

#define GPIPE_MAX_STAGES 64
#define GPIPE_MAX_MICRO 1024

typedef struct {
    int stages, micro_batches;
    double fwd_s, bwd_s; /* one micro-batch on one stage, no gradient communication */
    double grad_s;       /* X: what the gradients and the optimizer add once per iteration */
    double p2p_s;        /* one send between neighbouring stages (activations or gradients) */
    int priorities;      /* pipeline sends before DP gradient work on a link (MoNTA) */
    int one_f_one_b;     /* 1F1B (PipeDream-flush, Megatron's) instead of GPipe */
} gpipe_input;

/* The closed form above (uniform stages, priorities, sends shorter than F and B0). */
double gpipe_closed_form(const gpipe_input *g);

/* The discrete-event simulation of the iteration into s (cleared first); *makespan_s. Tasks are
 * labelled with their stage in `layer`, their micro-batch in `chunk`. */
fsmoe_status gpipe_simulate(sim *s, const gpipe_input *g, double *makespan_s, fsmoe_error *err);

/* The stage model and layout of m on par (pp > 1) with `micro` micro-batches: layers/pp blocks,
 * B/micro samples, pp = 1 on world/pp ranks. Refuses (FSMOE_ERR_VALUE, a message naming what
 * does not divide) layers not divisible by pp, stages with different MoE placement (layers/pp
 * must be a multiple of moe.every and moe.first below moe.every), B not divisible by micro, micro
 * or pp out of range. */
fsmoe_status gpipe_stage(const fsmoe_model *m, const fsmoe_parallel *par, int micro,
                         fsmoe_model *stage, fsmoe_parallel *stage_par, fsmoe_error *err);

/* Micro-batches whose activations a stage holds at once (the first stage, the most): GPipe
 * every one until the flush, 1F1B at most pp (its warm-up forwards and one more). */
static inline int gpipe_in_flight(int pp, int micro, int one_f_one_b)
{
    return one_f_one_b && pp < micro ? pp : micro;
}

/* The memory model (memory.h) per GPU of resolved model m on layout par with `micro`
 * micro-batches: one stage's blocks with the micro-batches it holds at once (gpipe_in_flight);
 * with pp = 1 the whole model. A layout gpipe_stage refuses is taken whole as well. */
void gpipe_memory(const fsmoe_model *m, const fsmoe_parallel *par, int micro, int one_f_one_b,
                  fsmoe_memory *out);

/* The default micro-batch count: the largest divisor of B that is at most 4·pp (GPipe's
 * guidance of m ≥ 4·pp keeps the bubble under a fifth when B allows it). */
int gpipe_default_micro(long B, int pp);

/* One send between stages for a stage model (the micro-batch's B·L·M·bytes split over the MP
 * group) on the slowest tier a stage boundary crosses (inter once the pipeline spans nodes: a
 * boundary then lies on a node's edge; intra within one node), costed as a 2-rank AllToAll of
 * twice the bytes (each rank of it sends half its buffer to the other), or AllGather where the
 * profile has no AllToAll on that tier. note: where the line came from (appended). */
fsmoe_status gpipe_p2p(const fsmoe_cluster *c, const char *cluster_path, const fsmoe_model *stage,
                       const fsmoe_parallel *par, double *bytes, double *seconds, char *note,
                       size_t note_len, fsmoe_error *err);

/* F, B0 and X of schedule k on one stage's simulator model (sim_model_of_plan of the stage's
 * plan); s is used for the runs. */
fsmoe_status gpipe_stage_times(sim *s, const sim_model *sm, sim_schedule k, double *fwd_s,
                               double *bwd_s, double *grad_s, fsmoe_error *err);

/* Schedule k of a pipeline plan (p->pipeline present; sm: sim_model_of_plan of p, one stage)
 * in the plan's pipeline (its micro-batches and sends, with priorities): the makespan, and the
 * stage times used (g, may be NULL). s is used for the runs and holds the pipeline after. */
fsmoe_status gpipe_schedule_time(sim *s, const sim_model *sm, const fsmoe_plan *p,
                                 sim_schedule k, double *makespan_s, gpipe_input *g,
                                 fsmoe_error *err);

#endif
