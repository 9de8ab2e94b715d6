/* Implements: the Order and I-Order steps of the MoE layer (design.md §2, §10).
 * Order lays the layer input out per expert, Xd (E, C, M); I-Order combines the experts'
 * outputs back to tokens with the gate's weights, y (N, M).
 *  - GShard order (order_gshard.c): dense one-hot dispatch/combine matrices (N, E·C) and two
 *    GEMMs, the einsum formulation of GShard/DeepSpeed ("nec,nm->ecm", "nec,ecm->nm").
 *  - Tutel order (order_tutel.c): sparse indices, a row gather and a weighted scatter-add.
 * Both compute the same function (tests check it); SoftMoE's dense routing needs GShard's. */
#ifndef RT_ORDER_H
#define RT_ORDER_H

#include "backend.h"
#include "gate.h"

typedef enum { RT_ORDER_GSHARD = 0, RT_ORDER_TUTEL, RT_ORDER_COUNT } rt_order_kind;

const char *order_kind_name(rt_order_kind k);
int order_kind_from_name(const char *s); /* -1 when unknown */

typedef struct {
    rt_order_kind kind;
    long M;
    real *d_tmp;  /* (A_max, M) gathered rows (Tutel) */
    real *h_dense; /* (N·E·C) host staging (GShard order with a sparse gate) */
} rt_order;

fsmoe_status order_alloc(rt_order *o, rt_routing *r, rt_backend *be, rt_order_kind kind, long M,
                         long N_max, long C_max, long E, long A_max);
void order_free(rt_order *o, rt_routing *r, rt_backend *be);

/* Xd = Order(x). */
void order_forward(rt_order *o, rt_backend *be, rt_stream *s, rt_routing *r, const real *x,
                   real *Xd);
/* y = I-Order(Yc) (overwrites y). */
void iorder_forward(rt_order *o, rt_backend *be, rt_stream *s, const rt_routing *r,
                    const real *Yc, real *y);
/* dYc from dy (overwrites); the combine-weight gradient into r->dw (sparse, host) or
 * r->d_dcomb (dense). */
void iorder_backward(rt_order *o, rt_backend *be, rt_stream *s, rt_routing *r, const real *dy,
                     const real *Yc, real *dYc);
/* dx += Orderᵀ(dXd); dense routing: r->d_ddisp = x·dXdᵀ. */
void order_backward(rt_order *o, rt_backend *be, rt_stream *s, rt_routing *r, const real *dXd,
                    const real *x, real *dx);

/* gshard/tutel implementations */
void order_gshard_build(rt_order *o, rt_backend *be, rt_stream *s, rt_routing *r);
void order_gshard_forward(rt_order *o, rt_backend *be, rt_stream *s, rt_routing *r,
                          const real *x, real *Xd);
void iorder_gshard_forward(rt_order *o, rt_backend *be, rt_stream *s, const rt_routing *r,
                           const real *Yc, real *y);
void iorder_gshard_backward(rt_order *o, rt_backend *be, rt_stream *s, rt_routing *r,
                            const real *dy, const real *Yc, real *dYc);
void order_gshard_backward(rt_order *o, rt_backend *be, rt_stream *s, rt_routing *r,
                           const real *dXd, const real *x, real *dx);
void order_tutel_forward(rt_order *o, rt_backend *be, rt_stream *s, rt_routing *r, const real *x,
                         real *Xd);
void iorder_tutel_forward(rt_order *o, rt_backend *be, rt_stream *s, const rt_routing *r,
                          const real *Yc, real *y);
void iorder_tutel_backward(rt_order *o, rt_backend *be, rt_stream *s, rt_routing *r,
                           const real *dy, const real *Yc, real *dYc);
void order_tutel_backward(rt_order *o, rt_backend *be, rt_stream *s, rt_routing *r,
                          const real *dXd, const real *x, real *dx);

#endif
