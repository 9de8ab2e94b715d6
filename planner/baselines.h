/* Implements: predicted iteration times of the schedules the papers compare with, on the same
 * α-β cost model as the plan (FSMoE §6 evaluation baselines, design.md §5/§6/§12):
 *   deepspeed       DeepSpeed-MoE as it runs (moe_seq.h MOE_SEQ_DEEPSPEED, the operation list
 *                   the simulator plays): no pipelining, every op after the previous one, every
 *                   gradient all-reduced after the backward pass;
 *   tutel           PipeMoE/Tutel: one r for forward and backward, intra- and inter-node
 *                   collectives on one stream, gradients after the backward pass;
 *   tutel_improved  tutel + Gradient-AllReduce overlapped with the dense parts;
 *   pipemoe_lina    tutel + Lina's 30 MB gradient micro-ops launched in dense windows.
 * These are closed forms; fsmoe-plan simulate plays every schedule (sim_schedules.h). deepspeed is
 * sequential, so its closed form is the simulated iteration (tests/test_plan_model.c checks it).
 *
 * Owner: engineer "gradients". Relies on: pipeline_degree.h, grad_partition.h. */
#ifndef FSMOE_BASELINES_H
#define FSMOE_BASELINES_H

#include "grad_partition.h"
#include "pipeline_degree.h"

/* Tutel's MoE layer at pipeline degree r (t_gar ignored): per chunk the one communication
 * stream carries 2·t_a2a + t_ag + t_rs and the compute unit one expert chunk; the layer takes
 *   max(r·(2·t_a2a + t_ag + t_rs) + t_exp,  2·t_a2a + t_ag + r·t_exp + t_rs)
 * (the stream's total work plus one expert chunk that cannot overlap it, and the compute chain
 * with the first dispatch and the last combine around it; all t_x at r). Each term is ≥ the
 * matching FSMoE chain, so F(r) ≤ this for every r. */
double baseline_tutel_layer_s(const pipeline_problem *p, int r);

/* The same one-stream layer with a Gradient-AllReduce of t_gar seconds on that stream after the
 * last dispatch (FSMoE-No-IIO: FSMoE's ESP pipeline without the inter/intra overlap):
 *   max(r·(2·t_a2a + t_ag + t_rs) + t_gar + t_exp,  2·t_a2a + t_ag + r·t_exp + t_rs). */
double baseline_one_stream_layer_s(const pipeline_problem *p, int r, double t_gar);

/* The r in 1..p->r_max minimising baseline_one_stream_layer_s (ties: the smaller r); *time_s
 * (may be NULL) gets its time. FSMoE-No-IIO's degree, forward (t_gar = 0) and backward. */
int baseline_one_stream_best_r(const pipeline_problem *p, double t_gar, double *time_s);

typedef struct {
    const grad_problem *grad;        /* MoE backward problems, dense backward, gradients, AR line */
    const pipeline_problem *moe_fwd; /* per MoE layer, forward order */
    const double *dense_fwd_s;       /* per generalised layer */
    double prefix_fwd_s;             /* forward of the ops before the first MoE layer */
    const double *ds_layer_s;        /* per MoE layer: DeepSpeed-MoE's forward + backward,
                                      * moe_seq_time(MOE_SEQ_DEEPSPEED) of both phases */
    double lina_micro_op_bytes;      /* 0 = GRAD_LINA_MICRO_OP_BYTES */
} baselines_input;

typedef struct {
    double deepspeed_s, tutel_s, tutel_improved_s, pipemoe_lina_s; /* iteration seconds */
    double dense_s;       /* dense forward + backward, the same in all */
    int tutel_r;          /* Tutel's degree for MoE layer 0 */
    double tutel_moe_s;   /* Σ Tutel MoE forward + backward */
    double deepspeed_moe_s;
    grad_baseline_result none, dense_only, lina;
} baselines_result;

void baselines_predict(const baselines_input *in, baselines_result *out);

#endif
