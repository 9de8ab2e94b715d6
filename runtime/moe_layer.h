/* Implements: the MoE layer as an executor of per-chunk tasks on streams (design.md §2, §10,
 * §10.1; FSMoE §4): Gate → Order → [Dispatch (AllToAllv) → Expert → Combine (AllToAllv)] × r
 * chunks → I-Order, with the six hooks.
 *
 * Layouts. The gate (gate.h) routes this rank's tokens with global decisions and fills the
 * local buffer Xd (E, C, M): expert e's kept tokens of this rank in slots [0, load[e]). The
 * experts of the EP group are split over its members (E_local each, member p owns experts
 * [p·E_local, (p+1)·E_local)). Before a phase the members exchange their loads (K[s][e], rows
 * member s holds for expert e) so that everyone knows every count. An owner keeps expert e's
 * rows in a replica buffer (E_local, Crep, M), member 0's rows first, then member 1's, ...;
 * T[e] = Σ_s K[s][e] rows in all. Chunk j of r covers replica rows [j·T/r, (j+1)·T/r) of every
 * local expert: each sender's part of it is one contiguous run of its own slots, so a chunk's
 * Dispatch is one AllToAllv (packed by member, then expert) and its Combine the same exchange
 * backwards. The replica layout does not depend on r, so forward and backward may use
 * different pipeline degrees (the plan's r_fwd, r_bwd), and the result does not depend on r at
 * all: every token row meets the same expert weights whatever the chunking.
 *
 * Streams. Dispatch and Combine run on the communication stream, experts on the compute stream,
 * ordered by events. Issue order on the communication stream: D0 D1 C0 D2 C1 … D(r−1) C(r−2)
 * C(r−1): the next chunk's Dispatch is queued before this chunk's Combine, so it moves while
 * the experts compute (issuing D_j C_j pairs would serialise the layer on any asynchronous
 * stream: C_j waits for the expert). A single rank is the P = 1 case of the EP group.
 *
 * Expert slicing (ESP, FSMoE §4). With an ESP group of S > 1 members, each holds columns
 * [u·H/S, (u+1)·H/S) of the same local experts. After chunk j's Dispatch, an AllGather over ESP
 * brings every member's chunk rows into a stacked buffer (S, E_local, Cs, M) — member u's
 * replica rows of expert e at block (u, e), at the same rows as in its replica, so the stacked
 * layout does not depend on r either; every member runs its slice on all stacked rows, and a
 * ReduceScatter sums the slices' partial outputs back into each member's own replica rows,
 * which the Combine returns. AllGather and ReduceScatter run on a stream of their own
 * (`intra`), so chunk j's intra-node collectives overlap chunk j±1's AllToAll (FSMoE's IIO).
 * Rows are padded per chunk to the largest member's count (the collectives move equal
 * blocks; with MP duplicates all members hold the same counts). The backward runs the same
 * pattern on the gradients.
 *
 * PauseMP (Parm S1, design.md §6). The MP group's members split their (identical) tokens:
 * member i gates, orders and sends rows [i·N/mp, (i+1)·N/mp) only. The exchange runs over the
 * EP&ESP group with every expert addressed once per ESP slice (virtual expert v = (q·S + u)·
 * E_local + e: EP member q's local expert e, slice u), so each row reaches every slice of its
 * expert and the Combine adds the slices' partial outputs in the sender's slot. An MP AllGather
 * rebuilds the (N, M) output; in the backward the same for the input gradient, and the gate's
 * gradients (of this member's rows) are summed over MP. No token is duplicated.
 *
 * S2 (Parm, design.md §6). The gate and the order run on the MP group's duplicated tokens;
 * member i then takes slots [i·F_e/mp, (i+1)·F_e/mp) of each expert's F_e filled slots and
 * exchanges only those, over EP&ESP to every slice as under PauseMP. Each chunk's Combine and
 * the MP AllGather of the slots it fills are the graph's SAA task, run as Parm's SAA and as
 * fsmoe-bench measures it (microbench/op_saa.c): in phases, one per EP member. In phase k
 * member q (EP index) returns the rows of EP member q+k's slices and receives those of
 * q−k's (every slice of one expert arrives in the same phase, so the slots it fills are
 * complete), and the MP AllGather of those slots runs on the intra stream while phase k+1
 * moves. Every member ends with all slots; the I-Order, the order's backward and the gate's
 * run on the whole as on one rank. The backward does the same on the gradients.
 *
 * MoNTA (O1-O3, design.md §7), with the MP group the ESP group (mp = esp). As under S2 each
 * member exchanges its slice of the slots, over EP; per chunk an ESP AllGather brings the MP
 * group's rows together (the stacked layout), the experts run once on all of them, one
 * ReduceScatter returns the sums, and per chunk the Combine is followed by an MP AllGather of
 * the slots it filled. O2/O3's re-layout copies are the unpacking of each AllGather into its
 * layout (traced as the graph's copy tasks). Each slice sees every token once.
 *
 * DeepSpeed-MoE's drop_tokens/gather_tokens (tensor parallelism without expert slices): the
 * gate and the dense dispatch run on the duplicated tokens, each MP member keeps its share of
 * every expert's slots (drop_tokens splits the dispatched tensor along its capacity) and
 * exchanges those over EP, and gather_tokens AllGathers the combined slots over MP before the
 * combine einsum: S2's data path in one chunk, the AllGather a task of its own after the
 * Combine. Every expert sees each token once; all holders of an expert shard are its EDP group
 * (the numbering of parallel.h), so no MP AllReduce of expert gradients is needed.
 *
 * Expert tensor parallelism (DeepSpeed-MoE's enable_expert_tensor_parallelism, design.md §6
 * mode b). With the MP group the ESP group (mp = esp), its members hold the same tokens and
 * receive the same rows; each runs its slice on its own rows and an AllReduce over ESP sums
 * the partial outputs (and, backward, the partial input gradients). Each slice sees every token
 * once: no duplicate gradients. MoNTA's layer without expert parallelism (ep = 1: no AllToAll,
 * every member holds all tokens) is this with the sum as its graph has it, an ESP
 * ReduceScatter then an ESP AllGather (RT_ETP_RS_AG).
 *
 * Duplicated tokens. Under tensor parallelism the MP group's members hold the same tokens and
 * each dispatches its copy, as FSMoE and Tutel run it: every expert sees each token `dup`
 * times, outputs are right, and the expert gradients are `dup` times the single copy's; the
 * backward divides them by dup (exact for powers of two). */
#ifndef RT_MOE_LAYER_H
#define RT_MOE_LAYER_H

#include "expert_ffn.h"
#include "gate.h"
#include "order.h"

typedef enum {
    RT_HOOK_BEFORE_MOE_START = 0,
    RT_HOOK_BEFORE_DISPATCH,
    RT_HOOK_AFTER_DISPATCH,
    RT_HOOK_BEFORE_COMBINE,
    RT_HOOK_AFTER_COMBINE,
    RT_HOOK_BEFORE_MOE_END,
    RT_HOOK_COUNT
} rt_hook;

const char *moe_hook_name(rt_hook h);

/* chunk is -1 for BeforeMoeStart/BeforeMoeEnd. */
typedef void (*rt_hook_fn)(void *user, rt_hook h, int layer, int chunk, int backward);

#define RT_MOE_MAX_CHUNKS 64
#define RT_S2_DS_GATHER 2 /* rt_moe.s2: DeepSpeed's drop_tokens (S2's data path, unchunked) */
#define RT_ETP_RS_AG 2    /* rt_moe.etp: the slices' sum as an ESP ReduceScatter then AllGather
                           * (MoNTA's layer without EP, below) instead of one AllReduce */
#define RT_MOE_MAX_LOCAL_SLICED 256 /* local experts per rank with expert slices (esp > 1) */

struct rt_dist;

/* One phase's exchange plan (host arrays sized at allocation). */
typedef struct {
    int r;
    int *send_rows, *recv_rows; /* (r, P) rows to / from each member per chunk */
    int *all_rows;              /* 2DH: (2, r, P, P) every member's rows to every member per
                                 * chunk, Dispatch then Combine ([s·P + d]: s to d) */
    long n_all_rows;            /* entries all_rows holds */
    long *offA, *offB;          /* (r + 1) where chunk j starts in idxA / idxB */
    int *h_idx;                 /* host staging of idxA then idxB */
    int *idxA;                  /* backend: local slot row (e·C + c) of each sent row */
    int *idxB;                  /* backend: replica row (e'·Crep + i) of each received row */
    long *r0, *r1;              /* (r, E_local) replica row range of each chunk */
    /* ESP (S > 1): per chunk, R[j] rows per member (padded); own replica rows (eidx, R[j] per
     * chunk) and every member's stacked rows (gidx, S·R[j] per chunk), -1 for padding; each
     * member's stacked row ranges (r, S, E_local) */
    long *R, *offO, *offG, *g0, *g1, RW; /* RW: MoNTA's whole-layer rows per member */
    int *h_eidx, *eidx, *gidx;
    /* S2 and MoNTA: the MP AllGathers of the Combine's slots, `units` per chunk (1, or under
     * S2's SAA one per phase: unit j·units + k): per unit Rm rows per MP member (padded), this
     * member's (sidx) and every member's (aidx) local slot rows; host staging */
    int units;
    long *Rm, *offS, *offAll, *h_cnt, *h_sl;
    int *h_sidx, *sidx, *aidx;
    /* S2's SAA: per chunk and phase, the phase's Combine row counts to (send) and from (recv)
     * each exchange member, 0 outside the phase's peers: ((r, phases, 2, P), send then recv) */
    int *ph_cnt;
    long n_ph_cnt;              /* entries ph_cnt holds */
} rt_xmap;

/* What the gate did with the tokens, summed over training forwards (the routing lines fsmoe-run
 * prints after training): the cost model prices every expert at its capacity, the executor runs only
 * the rows the gate kept, and the slowest member of the exchange group sets when an AllToAll
 * ends. */
typedef struct {
    long forwards;
    long kept, dropped;       /* this rank's token copies: kept in a slot, or found it full */
    double copies_global;     /* k · global tokens, per forward summed */
    double slots_global;      /* E · the capacity, per forward summed (0: no capacity) */
    double rows_max, rows_mean; /* expert rows of the busiest member of the exchange group,
                                 * and the members' mean, per forward summed */
    /* The GShard order's dense routing matrices (N, E·C), C this rank's busiest expert's kept
     * rows: their columns, and the k·f·N routed copies the cost model prices them at, per
     * forward summed (0 under another order or a dense gate) */
    double dense_cols, dense_priced;
} rt_moe_routing_stats;

typedef struct {
    int index; /* among MoE layers */
    long M, E, N_max, C_max;
    long E_local, expert0;    /* experts on this rank */
    long Crep_max, Crep;      /* replica rows per local expert: allocated, this step */
    rt_gate gate;
    rt_routing route;
    rt_order order;
    rt_experts ex;            /* this rank's E_local experts */
    rt_group ep;
    rt_group esp;             /* expert slicing (one member: none) */
    rt_group mpg, epesp;      /* the MP and EP&ESP groups (PauseMP) */
    int dup;                  /* copies of each token in the world (MP group size; 0 or 1: one) */
    int pause_mp;             /* run the layer as Parm's S1 (PauseMP) instead of the ESP pipeline */
    int etp;                  /* run it as DeepSpeed's expert tensor parallelism (mp = esp);
                               * RT_ETP_RS_AG: summed by ReduceScatter + AllGather */
    int s2;                   /* run it as Parm's S2 (slots split over MP, SAA); RT_S2_DS_GATHER:
                               * as DeepSpeed's drop_tokens/gather_tokens (below) */
    int monta;                /* 1..3: run it as MoNTA's O1..O3 (mp = esp; r: its chunks) */
    int a2a_2dh;              /* the Dispatch/Combine AllToAll hierarchical (libfsmoe/a2a_2dh.h); the
                               * exchange group must have a 2DH shape (dist.h). S2's SAA Combine
                               * stays flat (one measured SAA line costs it) */
    long tok0;                /* this rank's first token in the global batch */
    const struct rt_dist *dist; /* NULL: one rank */
    int r_fwd, r_bwd;         /* chunks (pipeline degree) */
    rt_hook_fn hook;
    struct rt_trace *trace;   /* NULL: not traced (trace.h) */
    struct rt_grad_sync *gsync; /* NULL: none; else told when the last backward Dispatch is
                               * issued (grad_sync.h FSMOE_AT_DISPATCHED) */
    void *hook_user;
    rt_stream *comp, *comm;   /* the model's streams */
    rt_stream *intra;         /* ESP AllGather / ReduceScatter (NULL: comm) */
    rt_event *ev_start, *ev[5 * RT_MOE_MAX_CHUNKS];
    rt_event *ev_phase;       /* S2's SAA: a phase's Combine rows are in place (re-recorded) */
    long *K;                  /* (P, E) rows every member holds for every expert */
    /* What a layer's forward keeps for its backward is the layer's own: the expert input
     * rows (Xe, with ESP also Xg), the combined expert outputs (Yc), the activations (eacts),
     * the routing (route, K, ...). Everything else below lives only inside one phase of one
     * layer and is one set shared by the model's MoE layers (moe_alloc's `share`). */
    rt_xmap xm_own[2];        /* the shared set's owner: forward, backward */
    rt_xmap *xm;              /* the exchange plans in use: xm_own, or the owner's */
    real *send_stage, *recv_stage;
    /* local (E, C_max, M) */
    real *Xd, *Yc, *dYc, *dXd;
    /* replica (E_local, Crep_max, M) */
    real *Xe, *Ye, *dYe, *dXe;
    rt_expert_acts eacts;
    real *dh, *da, *dg;       /* (S, E_local, Crep_max, H) (H: this member's slice): the
                               * experts' backward temporaries */
    int buf_owner;            /* this layer allocated the shared set (and frees it) */
    /* ESP: replica rows of every member's local experts (S, E_local), stacked rows per block
     * this step, stacked buffers (S, E_local, Crep_max, M) and the collectives' staging */
    long *Tall, Cs;
    real *Xg, *Yg, *dYg, *dXg, *ag_send, *ag_recv;
    long *load_v;             /* PauseMP, S2: rows per (expert, slice) (E·S) */
    long *slot0, *own_cnt;    /* S2: this MP member's first slot and slots of each expert (E) */
    real *mp_send, *mp_recv;  /* S2: the MP AllGather's staging */
    real *own, *whole;        /* PauseMP: this member's rows, all members' (N_max, M) */
    int freeze; /* hold routing fixed (tests) */
    rt_moe_routing_stats stats; /* summed over the training forwards */
} rt_moe;

/* Needs comp and comm set (or NULL for the default stream). share: an allocated MoE layer of
 * the same shape whose phase temporaries (the exchange plans and staging, the dispatched and
 * gathered rows, their gradients, the experts' backward temporaries) this one uses too, or
 * NULL. Sharing is safe because a phase of a layer is fork-join: it starts with every stream
 * waiting for the default stream (ev_start) and ends with the default stream waiting for the
 * last task of every stream it used, so one layer's phase has finished with the shared set
 * before the next layer's begins. */
fsmoe_status moe_alloc(rt_moe *m, rt_backend *be, const rt_moe *share);
void moe_free(rt_moe *m, rt_backend *be);
/* y = MoE(x) (overwrites y); x, y (N, M). */
fsmoe_status moe_forward(rt_moe *m, rt_backend *be, const real *x, real *y, long N, int training,
                         uint64_t seed, long step);
/* dx += ∂/∂x; parameter gradients accumulate. */
fsmoe_status moe_backward(rt_moe *m, rt_backend *be, const real *dy, const real *x, real *dx,
                          double aux_coef);

/* The size of the group the layer's Dispatch/Combine AllToAll runs on as the layer is now set
 * up (EP, or EP&ESP under PauseMP), and whether that group can run it hierarchically (2DH). */
int moe_exchange_size(const rt_moe *m, int *hierarchical);

/* The layer's routing statistics summed over the ranks (every rank calls it; dist NULL: this
 * rank's): *copies_kept, the fraction of the k·N token copies the gate kept (the rest dropped at
 * capacity); *fill, the rows the experts ran over the slots the capacity gives (0 without a
 * capacity); *imbalance, the busiest exchange-group member's expert rows over the members'
 * mean (1: even); *dense_width, the GShard order's dense routing columns over the k·f·N the
 * cost model prices them at (0 under another order, a dense gate or no capacity). All 0 when no
 * training forward ran. */
fsmoe_status moe_routing_summary(const rt_moe *m, double *copies_kept, double *fill,
                                 double *imbalance, double *dense_width, fsmoe_error *err);

#endif
