/* Implements: the Tutel order (Hwang et al. 2023, "fast encode/decode"): sparse indices.
 * Order: Xd[slot] = x[slot_tok[slot]] (zeros in empty slots), a row gather.
 * I-Order: y[tok[a]] += w[a]·Yc[slot[a]], a gather of the filled slots then a weighted
 * scatter-add in assignment order (deterministic). */
#include "order.h"

void order_tutel_forward(rt_order *o, rt_backend *be, rt_stream *s, rt_routing *r, const real *x,
                         real *Xd)
{
    be->gather_rows(be, s, Xd, x, r->d_slot_tok, r->E * r->C, o->M);
}

void iorder_tutel_forward(rt_order *o, rt_backend *be, rt_stream *s, const rt_routing *r,
                          const real *Yc, real *y)
{
    be->zero(be, s, y, (size_t)(r->N * o->M) * sizeof(real));
    be->gather_rows(be, s, o->d_tmp, Yc, r->d_slot, r->A, o->M);
    be->scatter_add_rows(be, s, y, o->d_tmp, r->d_tok, r->d_w, r->A, o->M);
}

void iorder_tutel_backward(rt_order *o, rt_backend *be, rt_stream *s, rt_routing *r,
                           const real *dy, const real *Yc, real *dYc)
{
    /* ∂w[a] = dy[tok[a]] · Yc[slot[a]] */
    be->row_dot(be, s, r->d_dw, dy, r->d_tok, Yc, r->d_slot, r->A, o->M);
    real *h = (real *)r->dw; /* staging: A reals fit in A doubles */
    be->copy(be, s, h, r->d_dw, (size_t)r->A * sizeof(real), RT_D2H);
    be->stream_sync(be, s);
    for (long a = r->A - 1; a >= 0; a--)
        r->dw[a] = (double)h[a];
    /* dYc[slot[a]] = w[a]·dy[tok[a]] (each slot holds at most one assignment) */
    be->zero(be, s, dYc, (size_t)(r->E * r->C * o->M) * sizeof(real));
    be->gather_rows(be, s, o->d_tmp, dy, r->d_tok, r->A, o->M);
    be->scatter_add_rows(be, s, dYc, o->d_tmp, r->d_slot, r->d_w, r->A, o->M);
}

void order_tutel_backward(rt_order *o, rt_backend *be, rt_stream *s, rt_routing *r,
                          const real *dXd, const real *x, real *dx)
{
    (void)x;
    be->scatter_add_rows(be, s, dx, dXd, r->d_slot_tok, NULL, r->E * r->C, o->M);
}
