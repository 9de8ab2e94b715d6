/* Implements: the MoE layer as an executor of per-chunk tasks on streams (design.md §2, §10;
 * FSMoE §4): Gate → Order → [Dispatch (AllToAll) → Expert → Combine (AllToAll)] × r chunks →
 * I-Order, with the six hooks. Chunk j covers capacity slots [j·C/r, (j+1)·C/r) of every
 * expert; dispatch and combine run on the communication stream, experts on the compute
 * stream, ordered by events, so that chunk j's expert overlaps chunk j+1's dispatch where the
 * backend overlaps streams. The result does not depend on r. A single rank is the P = 1 case
 * of the EP group. */
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

typedef struct {
    int index; /* among MoE layers */
    long M, E, N_max, C_max;
    rt_gate gate;
    rt_routing route;
    rt_order order;
    rt_experts ex;
    rt_group ep;
    int r_fwd, r_bwd; /* chunks (pipeline degree) */
    rt_hook_fn hook;
    void *hook_user;
    rt_stream *comp, *comm;
    rt_event *ev_start, *ev[3 * RT_MOE_MAX_CHUNKS];
    /* activations (E, C_max, M) */
    real *Xd, *Xe, *Ye, *Yc;
    rt_expert_acts eacts;
    /* backward scratch */
    real *dYc, *dYe, *dXe, *dXd, *dh, *da, *dg;
    int freeze; /* hold routing fixed (tests) */
} rt_moe;

fsmoe_status moe_alloc(rt_moe *m, rt_backend *be);
void moe_free(rt_moe *m, rt_backend *be);
/* y = MoE(x) (overwrites y); x, y (N, M). */
fsmoe_status moe_forward(rt_moe *m, rt_backend *be, const real *x, real *y, long N, int training,
                         uint64_t seed, long step);
/* dx += ∂/∂x; parameter gradients accumulate. */
fsmoe_status moe_backward(rt_moe *m, rt_backend *be, const real *dy, const real *x, real *dx,
                          double aux_coef);

#endif
