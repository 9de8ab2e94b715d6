/* Implements: the MoE layers that run unpipelined, every operation after the previous one on one
 * stream — DeepSpeed-MoE in its two real modes and Parm's baseline schedule (design.md §6) — as
 * one list of operations per phase, which the simulator plays (sim_schedules.c) and whose sum is
 * the closed form (the plan's predicted baselines). One list, so the two cannot drift apart.
 *
 * Per GPU, with S = B·L tokens (duplicated over the N_MP ranks of the MP group, as the attention
 * leaves them), R = k·f·S routed token copies, C = k·f·S/E capacity, b bytes per element:
 *
 * deepspeed (DeepSpeed-MoE v0.8, deepspeed/moe/sharded_moe.py): GShard's dense dispatch and
 * combine einsums ("sec,sm->ecm", "sec,ecm->sm": S·E·C·M = R·S·M MACs each on every rank, the
 * one-hot S×E×C tensors built from the gate) around the experts — its token order, priced with
 * every schedule's (workload_order_s, the simulator's gate tasks), not listed here — no
 * pipelining, gradients all reduced after the backward. The layout picks the mode:
 *   drop_tokens (N_ESP = 1, experts whole): each MP rank keeps 1/N_MP of the duplicated
 *     dispatched tensor → EP-A2A(R·M·b/N_MP) → expert on R/N_MP tokens (R·M·H·n_gemm/N_MP
 *     MACs) → EP-A2A → gather_tokens = MP-AllGather(R·M·b); backward mirrors it (the drop's
 *     backward is the AllGather, the gather's a local split). No AllReduce of expert gradients
 *     over MP: every rank holding an expert shard is in that shard's expert-data-parallel group
 *     (parallel.h numbering: MP members are consecutive, EDP strides N_EP·N_ESP), so the
 *     gradient AllReduce over EDP that every schedule has already sums the members' partial
 *     gradients (fsmoe-run executes exactly this and matches one rank).
 *   expert tensor parallelism (N_ESP > 1, enable_expert_tensor_parallelism; N_ESP = N_MP, the
 *     experts sliced over the tensor-parallel group, column- then row-parallel): tokens stay
 *     duplicated → EP-A2A(R·M·b) → expert (R·M·H·n_gemm/N_ESP MACs) → ESP-AllReduce(R·M·b) of
 *     the row-parallel output (backward: of the column-parallel input gradient) → EP-A2A.
 *   Neither mode gathers tokens over ESP or computes a token twice on one rank.
 * parm-baseline (Parm §III-A, Fig. 3(a) — what Parm measured and called DeepSpeed-MoE): tokens
 *   duplicated over MP and gathered over ESP: ESP-AllGather(S·M·N_ESP·b) → EP-A2A(y) → expert
 *   (R·M·H·n_gemm MACs: N_ESP·R tokens on an H/N_ESP shard, each token N_MP times over the MP
 *   group) → ESP-AllReduce(y) → EP-A2A(y) → ESP-Split (local), y = R·M·N_ESP·b; the backward
 *   mirrors it with an ESP-ReduceScatter for the AllGather. Used to reproduce Parm's ratios.
 * Backward: every GEMM twice (input and weight gradients) as in workload.h.
 * Relies on: workload.h (shape, lines), sim.h (operation kinds). */
#ifndef FSMOE_MOE_SEQ_H
#define FSMOE_MOE_SEQ_H

#include "sim.h"
#include "workload.h"

typedef enum { MOE_SEQ_DEEPSPEED = 0, MOE_SEQ_PARM_BASELINE } moe_seq_kind;

typedef enum { DS_MODE_DROP_TOKENS = 0, DS_MODE_EXPERT_TP } ds_mode;

/* The DeepSpeed mode the layout implies (N_ESP > 1: expert tensor parallelism). */
ds_mode deepspeed_mode(const fsmoe_parallel *par);
/* Whether DeepSpeed-MoE has a mode for the layout: experts whole (drop_tokens) or sliced over its
 * tensor-parallel group (esp = mp, expert tensor parallelism); with slices over another group
 * its expert-TP cost (the slices' AllReduce over members holding the same tokens) describes no
 * execution. */
int deepspeed_layout_ok(const fsmoe_parallel *par);
const char *ds_mode_name(ds_mode m); /* "drop-tokens", "expert-tp" */

typedef enum { MOE_SEQ_COMPUTE = 0, MOE_SEQ_INTRA, MOE_SEQ_INTER } moe_seq_where;

typedef struct {
    moe_seq_where where;
    fsmoe_task_kind kind;
    double alpha_s, beta_s, n; /* t = alpha + beta·n when n > 0; n is bytes or MACs */
} moe_seq_op;

#define MOE_SEQ_MAX_OPS 8

/* The operations of one phase (bwd = 0 forward, 1 backward), in order, into out; returns how
 * many (ops with no work are left out). */
int moe_seq_ops(moe_seq_kind k, const workload_shape *s, const fsmoe_parallel *par,
                const workload_lines *w, int bwd, moe_seq_op out[MOE_SEQ_MAX_OPS]);

/* Σ of those operations' times. */
double moe_seq_time(moe_seq_kind k, const workload_shape *s, const fsmoe_parallel *par,
                    const workload_lines *w, int bwd);

#endif
