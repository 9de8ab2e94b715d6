/* Implements: the GShard order (Lepikhin et al. 2020; DeepSpeed-MoE's einsum form): the routing
 * as dense (N, E·C) matrices, dispatch mask Dd (one-hot) and combine weights Dc (= Dd scaled by
 * the gate weight), and GEMMs: Xd = Ddᵀ·x ("nec,nm->ecm"), y = Dc·Yc ("nec,ecm->nm").
 * SoftMoE's routing arrives already dense (softmax matrices). */
#include <string.h>

#include "order.h"

void order_gshard_build(rt_order *o, rt_backend *be, rt_stream *s, rt_routing *r)
{
    long N = r->N, EC = r->E * r->C;
    for (int m = 0; m < 2; m++) {
        memset(o->h_dense, 0, (size_t)(N * EC) * sizeof(real));
        for (long a = 0; a < r->A; a++)
            o->h_dense[(long)r->tok[a] * EC + r->slot[a]] = m == 0 ? (real)1 : r->w[a];
        be->copy(be, s, m == 0 ? r->d_disp : r->d_comb, o->h_dense,
                 (size_t)(N * EC) * sizeof(real), RT_H2D);
        be->stream_sync(be, s);
    }
}

void order_gshard_forward(rt_order *o, rt_backend *be, rt_stream *s, rt_routing *r,
                          const real *x, real *Xd)
{
    long N = r->N, EC = r->E * r->C, M = o->M;
    if (!r->dense)
        order_gshard_build(o, be, s, r);
    be->gemm(be, s, 1, 0, EC, M, N, 1, r->d_disp, EC, 0, x, M, 0, 0, Xd, M, 0, 1);
}

void iorder_gshard_forward(rt_order *o, rt_backend *be, rt_stream *s, const rt_routing *r,
                           const real *Yc, real *y)
{
    long N = r->N, EC = r->E * r->C, M = o->M;
    be->gemm(be, s, 0, 0, N, M, EC, 1, r->d_comb, EC, 0, Yc, M, 0, 0, y, M, 0, 1);
}

void iorder_gshard_backward(rt_order *o, rt_backend *be, rt_stream *s, rt_routing *r,
                            const real *dy, const real *Yc, real *dYc)
{
    long N = r->N, EC = r->E * r->C, M = o->M;
    be->gemm(be, s, 1, 0, EC, M, N, 1, r->d_comb, EC, 0, dy, M, 0, 0, dYc, M, 0, 1);
    /* dDc = dy·Ycᵀ */
    be->gemm(be, s, 0, 1, N, EC, M, 1, dy, M, 0, Yc, M, 0, 0, r->d_dcomb, EC, 0, 1);
    if (!r->dense) {
        be->copy(be, s, o->h_dense, r->d_dcomb, (size_t)(N * EC) * sizeof(real), RT_D2H);
        be->stream_sync(be, s);
        for (long a = 0; a < r->A; a++)
            r->dw[a] = (double)o->h_dense[(long)r->tok[a] * EC + r->slot[a]];
    }
}

void order_gshard_backward(rt_order *o, rt_backend *be, rt_stream *s, rt_routing *r,
                           const real *dXd, const real *x, real *dx)
{
    long N = r->N, EC = r->E * r->C, M = o->M;
    be->gemm(be, s, 0, 0, N, M, EC, 1, r->d_disp, EC, 0, dXd, M, 0, 1, dx, M, 0, 1);
    if (r->dense) /* dDd = x·dXdᵀ */
        be->gemm(be, s, 0, 1, N, EC, M, 1, x, M, 0, dXd, M, 0, 0, r->d_ddisp, EC, 0, 1);
}
