/* Implements: what one MoE layer and the dense ops around it cost on a cluster (design.md §3–§5):
 * the FSMoE workloads n_a2a, n_ag, n_rs, n_exp per GPU, the forward/backward pipeline problems,
 * dense (attention, dense FFN) times, and gradient bytes per generalised layer.
 *
 * Dense costs are GEMM estimates from the same α-β model plus the tensor-parallel AllReduce of
 * the attention output on the MP group. The work around them that is not a GEMM — the gate and
 * the token order of an MoE layer, a block's layer norms and residual additions, the embedding,
 * LM head and loss, the optimizer — is priced separately (the *_s fields below), element-wise
 * passes at the profile's copy rate (workload_elementwise_s); a profile without a copy line
 * prices element-wise work at zero. */
#ifndef FSMOE_WORKLOAD_H
#define FSMOE_WORKLOAD_H

#include <stddef.h>

#include "cluster.h"
#include "cost.h"
#include "model.h"
#include "parallel.h"
#include "pipeline_degree.h"

/* The gate's parameters (runtime/gate.c): LINEAR is one M×E matrix (gshard, sigmoid,
 * expert_choice); XMOE a projection M×D and expert embeddings E×D (D = min(M, 16)); SOFTMOE the
 * slot matrix M×(E·slots), slots = ceil(k·f·L/E) (f = 1 when none). */
typedef enum { WORKLOAD_GATE_LINEAR = 0, WORKLOAD_GATE_XMOE, WORKLOAD_GATE_SOFTMOE } workload_gate;

/* The token order of an MoE layer (runtime/order.h): Tutel's sparse indices (a row scatter and
 * a weighted gather) or GShard's dense dispatch and combine einsums. */
typedef enum { WORKLOAD_ORDER_TUTEL = 0, WORKLOAD_ORDER_GSHARD } workload_order;

/* The layer shape the planner needs (a model or one FSMoE Table 4 configuration). */
typedef struct {
    long B, L, M, H, heads, kv_heads, E, vocab;
    int k;
    double f;             /* 0 = none: planned as 1.0 (balanced routing, nothing dropped) */
    fsmoe_expert_kind expert;
    workload_gate gate;   /* LINEAR unless the model says otherwise */
    workload_order order; /* the model's token order (Tutel's unless it says gshard) */
    int bytes_per_element;
    /* The routing a run met (fsmoe-run --report predicts its steps at it, sim_model_at_routing);
     * 0 = as planned, the worst case: every capacity slot filled, GShard's dense matrices
     * k·f·B·L wide. run_rows: the expert rows and exchanged token copies over the capacity's
     * (the AllToAll, AllGather and ReduceScatter bytes, the experts' MACs and Tutel's row passes
     * scale by it; the pipeline's bound r_max does not); run_width: the dense dispatch/combine
     * matrices' width over k·f·B·L (GShard's einsums and matrices scale by it). */
    double run_rows, run_width;
} workload_shape;

/* Cost lines for each logical collective under a layout (zero lines for groups of size 1). */
typedef struct {
    fsmoe_line a2a_ep;     /* Dispatch/Combine AllToAll on EP */
    fsmoe_line ag_esp, rs_esp, ar_esp;
    fsmoe_line ar_mp, ag_mp;
    fsmoe_line a2a_ep_esp; /* Parm's EP&ESP AllToAll */
    fsmoe_line saa;
    fsmoe_line ar_dp;      /* Gradient-AllReduce */
    /* AllReduce on EP: the gradient norm's partial sum over the experts' shards (a few bytes;
     * runtime/transformer.c model_grad_norm). The profile's AllReduce on EP's tier where it
     * measured one; elsewhere a copy of a2a_ep (the EP AllToAll stands in). */
    fsmoe_line ar_ep;
    fsmoe_line gemm;       /* the expert's GEMMs, at its shape M:H/N_ESP */
    fsmoe_line gemm_dense; /* the dense GEMMs (attention's projections, dense FFN, gate), at
                            * M:H/N_MP */
    fsmoe_line gemm_scores; /* attention's per-head QKᵀ and scores·V, (L×d)(d×L) and (L×L)(L×d)
                             * with d = M/heads: fsmoe-bench's two GEMMs at shape d:L */
    fsmoe_line copy;
    int have_copy;
    /* The profile's interference factors (cluster.h; 1, 1 without them): the simulator slows a
     * collective beside a GEMM by comm_slowdown and a GEMM beside a collective by
     * compute_slowdown. The planner's closed forms do not use them yet. */
    double comm_slowdown, compute_slowdown;
    /* The profile's host sharing (cluster.h host; 0, 0, 0 without it): the simulator scales
     * compute by the share of a core a computing rank gets (sim.h). */
    int host_ranks, host_cores, host_at_once;
    /* The profile's sync latency (cluster.h; 0 without it): already added to the α of every
     * collective line above whose group has more than one member. */
    double sync_s;
    /* The profile's skew growth (cluster.h sync_growth; 0 without it): the simulator adds it per
     * collective (sim.h) for the part of the segment beyond sync_growth_from_s (cluster.h; 0
     * without it); no line holds it. */
    double sync_growth, sync_growth_from_s;
    /* 1: a2a_ep (a2a_ep_esp) is the hierarchical AllToAll's line (workload_lines_2dh); 0: the
     * flat AllToAll's, as workload_lines_init gives every line */
    int a2a_ep_2dh, a2a_ep_esp_2dh;
    char notes[4096];      /* derivations used (cost.h) */
} workload_lines;

/* shape: the model's (its M and H pick the GEMM lines of a profile that holds several GEMM
 * shapes, cost.h fsmoe_cost_line_gemm); NULL: not known (a profile with one GEMM line). */
fsmoe_status workload_lines_init(const fsmoe_cluster *c, const char *cluster_path,
                                 const fsmoe_parallel *par, const workload_shape *shape,
                                 workload_lines *out, fsmoe_error *err);

/* Whether logical group g spans at least two nodes with the same number (at least two) of
 * members on each under par's node-major numbering (parallel.h) — the shape the hierarchical
 * AllToAll (2DH, libfsmoe/a2a_2dh.h fsmoe_a2a_2dh_shape_make) needs; 1 with *nodes and *locals filled,
 * else 0 (one node, one member per node, uneven nodes): 2DH is then the flat AllToAll. */
int workload_group_2dh(const fsmoe_parallel *par, fsmoe_group g, int *nodes, int *locals);

/* The lines a layer whose AllToAll algorithm is 2dh runs on: *out = *w with a2a_ep and
 * a2a_ep_esp replaced by their 2DH lines (cost.h fsmoe_cost_line_2dh) where that group is
 * hierarchical (a2a_ep_2dh / a2a_ep_esp_2dh set), the flat line elsewhere. Everything else,
 * SAA included (a send/recv overlap the runtime issues flat, measured or derived on its own),
 * is w's. out->notes holds only the 2DH lines' derivations. Fails (FSMOE_ERR_VALUE) when a
 * hierarchical group's 2DH line is neither measured nor derivable. */
fsmoe_status workload_lines_2dh(const fsmoe_cluster *c, const char *cluster_path,
                                const fsmoe_parallel *par, const workload_lines *w,
                                workload_lines *out, fsmoe_error *err);

/* The work of the runtime's `gate` tasks on one MoE layer (task.h), seconds, for the tokens the
 * gate routes on this GPU (workload_layer route: all of them; route_own: under Parm's PauseMP
 * (S1) each MP member gates, orders and combines only its own 1/N_MP of them, runtime/moe_layer.c
 * own_rows, so the row passes and the gate's GEMM take 1/N_MP of the time beyond their launch
 * latencies, and GShard's einsums and dense matrices, S·R with both factors 1/N_MP, 1/N_MP²):
 *   gate_fwd_s / gate_bwd_s: the gate's GEMM and routing (softmax, top-k), forward and
 *     backward, on the gemm_dense line and element-wise passes, and forward its small
 *     collectives (statistics, capacity and load over DP, token counts over EP: their
 *     lines' α, the sync latency once);
 *   order_tutel_dispatch_s / order_tutel_combine_s: Tutel's row scatter into the capacity
 *     slots and weighted gather back (element-wise), forward; the backward moves the same
 *     data the other way;
 *   order_einsum_s: one of GShard's dispatch and combine einsums, R·S·M MACs on gemm_dense,
 *     forward; backward the combine's two GEMMs, the dispatch's order_dispatch_bwd_gemms
 *     (workload_layer; workload_order_s);
 *   order_dense_build_s / order_dense_dw_s: the dense (S, R) routing matrices the einsums
 *     multiply by, element-wise: built before the forward's dispatch (the dispatch mask and
 *     the combine weights, each cleared, then filled and copied to the device), and the
 *     combine weights' gradient copied back to the host in the combine's backward (zero
 *     where the gate's routing is dense already: SoftMoE). */
typedef struct {
    double gate_fwd_s, gate_bwd_s;
    double order_tutel_dispatch_s, order_tutel_combine_s, order_einsum_s;
    double order_dense_build_s, order_dense_dw_s;
} workload_routing;

typedef struct {
    double n_a2a, n_ag, n_rs, n_exp; /* bytes, bytes, bytes, MACs per GPU per MoE layer */
    double tokens_per_expert;        /* T = k·f·B·L/E (per GPU) */
    int r_max;
    pipeline_problem fwd, bwd;       /* bwd.t_gar left 0: the caller sets it */
    double attn_fwd_s, attn_bwd_s;   /* one attention block incl. its MP AllReduce */
    double attn_core_s;              /* of which its scores and scores·V (QKᵀ, P·V): what
                                      * selective recomputation runs again in the backward */
    double ffn_fwd_s, ffn_bwd_s;     /* one dense (non-MoE) FFN block */
    /* Gradient bytes per GPU of the tensors fsmoe-run registers (workload.c lists them): */
    double attn_grad_bytes;          /* one block's attention (weights, biases) + both LayerNorms */
    double ffn_grad_bytes;           /* one dense FFN block (one expert of the model's kind) */
    double gate_grad_bytes;          /* one MoE layer's gate (replicated: DP AllReduce) */
    double expert_grad_bytes;        /* this GPU's E/ep experts (0 unless EDP has > 1 member) */
    double embed_grad_bytes;         /* token and position embeddings */
    double head_grad_bytes;          /* final LayerNorm + the (untied) LM head */
    double expert_param_bytes;       /* this GPU's E/ep expert shards, whatever EDP is */
    /* The gate and token order of one MoE layer on all of this GPU's tokens (route) and on an
     * MP member's own share under PauseMP (route_own; route's where mp = 1); the dispatch's
     * backward GEMMs under GShard's order: 1, 2 where the routing matrix is learnt (SoftMoE:
     * the dispatch matrix has a gradient too). */
    workload_routing route, route_own;
    double order_dispatch_bwd_gemms;
    /* The work of the runtime's `elementwise` and `head` tasks (task.h), seconds:
     *   elem_fwd_s / elem_bwd_s: one transformer block's layer norms, residual additions and
     *     gradient clearing outside its attention and FFN (forward: 2 additions and a layer
     *     norm; backward: 2 layer-norm backwards and a clear);
     *   head_fwd_s / head_bwd_s: the embedding (with its MP AllReduce), the final layer norm,
     *     the LM head's GEMM on the vocabulary slice and the cross-entropy (with its MP
     *     AllGather of row statistics); backward the head's two GEMMs, the MP AllReduce of its
     *     input gradient, the final norm's and the embedding's backward. */
    double elem_fwd_s, elem_bwd_s;
    double head_fwd_s, head_bwd_s;
} workload_layer;

/* `passes` kernel launches touching `arrays` arrays of n bytes each (read or written), at the
 * profile's copy rate: a copy of n bytes reads n and writes n, so work touching a·n bytes costs
 * what a copy of a·n/2 bytes does, in `passes` copies of a·n/(2·passes) bytes each. A copy entry
 * with measured points prices each pass by interpolating them (cost.h fsmoe_entry_time_interp;
 * the line beyond their range): a pass moves tens to hundreds of KB, and on a CPU the α of a
 * line fitted over megabytes is no pass's fixed cost (measured on 4 ranks sharing 2 cores:
 * α 179 µs against passes that took 0.14 ms in all; fsmoe-bench --small-min). Otherwise the
 * line: α per pass plus β per byte. passes 0: work added to another pass, β only. 0 without a
 * copy line. */
double workload_elementwise_s(const workload_lines *w, int passes, double arrays, double n);

/* Whether the ranks meet in the gate's forward (its statistics, capacity prefix and load totals
 * over DP, the token counts over EP: runtime/gate.c, moe_layer.c): the gate then pays the sync
 * latency once (workload_layer) and the growing arrival skew in the simulator (sim.h
 * SIM_TASK_MEETS). */
static inline int workload_gate_meets(const fsmoe_parallel *par)
{
    return par->dp > 1 || par->ep > 1;
}

/* This GPU's parameter bytes in a model of `blocks` transformer blocks, `moe_layers` of them
 * MoE: every block's attention and norms, the dense FFNs, the gates and this GPU's expert
 * shards, the embeddings and the LM head (the tensors fsmoe-run holds). */
double workload_param_bytes(const workload_layer *wl, long blocks, long moe_layers);

/* The routing work a layer runs: its MP member's own share under PauseMP (pausemp 1: Parm's S1,
 * runtime/moe_layer.c), else all of its tokens. */
const workload_routing *workload_route(const workload_layer *wl, int pausemp);

/* The token order's dispatch (combine 0) or combine (1) in order o on routing r (one of wl's),
 * forward or backward (bwd): forward the dispatch comes before the experts and the combine
 * after, backward the reverse. */
double workload_order_s(const workload_layer *wl, const workload_routing *r, workload_order o,
                        int bwd, int combine);

/* One MoE layer's gate, dispatch and combine on routing r in token order o, forward or backward
 * (bwd). */
double workload_routing_s(const workload_layer *wl, const workload_routing *r, workload_order o,
                          int bwd);

/* A PauseMP layer's routing (route_own) less the same on every token (route), forward or
 * backward: ≤ 0, what S1's members save by routing only their share (0 where mp = 1). */
double workload_route_own_saving_s(const workload_layer *wl, workload_order o, int bwd);

/* The work of one iteration outside the closed forms' MoE and dense chains (the gate and token
 * order o of each MoE layer on every token — a PauseMP layer's saving is in its chains,
 * parm_schedule.h routing_s —, each block's element-wise work, the head; the optimizer after the
 * last Gradient-AllReduce), per phase. Every schedule runs it serially on compute
 * (planner/sim_schedules.c places it), so it adds exactly to a closed form's forward, backward
 * and tail. */
typedef struct {
    double fwd_s, bwd_s, tail_s;
} workload_extra;
workload_extra workload_extra_time(const workload_layer *wl, const workload_lines *w, long blocks,
                                   long moe_layers, workload_order o);

/* The optimizer's step on `param_bytes` of parameters (this GPU's): the gradients' squared
 * norm for clipping, then AdamW with the clipping factor applied as it reads the gradients and
 * the gradients cleared as it writes (reads parameter, gradient and both moments, writes
 * parameter, both moments and the cleared gradient) — 9 arrays in 2 passes, element-wise — and
 * the norm's sums over the MP, ESP and EP groups (one latency each). */
double workload_optimizer_s(const workload_lines *w, double param_bytes);

void workload_shape_from_model(const fsmoe_model *m, workload_shape *out);

/* The token copies one GPU's gate routes, k·f·B·L (f "none" planned as 1): the capacity's
 * slots, which bound the pipeline's chunks; workload_ran_copies: of them the ones the step
 * exchanges and computes, run_rows of them (all where run_rows is 0). Every cost of the
 * routed tokens starts from these two. */
double workload_routed_copies(const workload_shape *s);
double workload_ran_copies(const workload_shape *s);

/* Fills everything above for one MoE layer of `s` under `par`. */
void workload_layer_init(const workload_shape *s, const fsmoe_parallel *par,
                         const workload_lines *w, workload_layer *out);

/* The pipeline-degree upper bound: each chunk keeps ≥ 1 token per expert and ≥ min_chunk_bytes
 * of AllToAll payload (workload_min_chunk), and never more than PIPELINE_R_CAP chunks. */
#define WORKLOAD_MIN_CHUNK_BYTES 65536.0
#define PIPELINE_R_CAP 64
int workload_r_max(double tokens_per_expert, double n_a2a, double min_chunk_bytes);
/* The smallest AllToAll chunk a plan may use on line l: WORKLOAD_MIN_CHUNK_BYTES, or the
 * smallest message the profile measured for l when that is larger. A fitted line is not trusted
 * below the sizes it was fitted on: a fit over 1–24 MB can put α at 0 (the emulated cluster's
 * world-tier AllToAll did), which prices small chunks as free — the planner then cut a layer
 * into 38 chunks that measured 1.6× slower than 2 (README, schedules benchmark). */
double workload_min_chunk(const fsmoe_line *l);

#endif
