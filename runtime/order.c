/* Implements: order selection and buffers (order.h). */
#include "order.h"

#include <stdlib.h>
#include <string.h>

static const char *const order_names[RT_ORDER_COUNT] = {"gshard", "tutel"};

const char *order_kind_name(rt_order_kind k) { return k < RT_ORDER_COUNT ? order_names[k] : "?"; }

int order_kind_from_name(const char *s)
{
    for (int i = 0; i < RT_ORDER_COUNT; i++)
        if (strcmp(s, order_names[i]) == 0)
            return i;
    return -1;
}

fsmoe_status order_alloc(rt_order *o, rt_routing *r, rt_backend *be, rt_order_kind kind, long M,
                         long N_max, long C_max, long E, long A_max)
{
    memset(o, 0, sizeof(*o));
    o->kind = kind;
    o->M = M;
    o->d_tmp = rt_alloc(be, RT_MEM_WORKSPACE, (size_t)(A_max + 1) * (size_t)M * sizeof(real));
    if (!o->d_tmp)
        return FSMOE_ERR_NOMEM;
    if (kind == RT_ORDER_GSHARD) {
        size_t n = (size_t)N_max * (size_t)(E * C_max);
        o->h_dense = calloc(n + 1, sizeof(real));
        r->d_disp = rt_alloc(be, RT_MEM_ACTIVATIONS, (n + 1) * sizeof(real));
        r->d_comb = rt_alloc(be, RT_MEM_ACTIVATIONS, (n + 1) * sizeof(real));
        r->d_ddisp = rt_alloc(be, RT_MEM_WORKSPACE, (n + 1) * sizeof(real));
        r->d_dcomb = rt_alloc(be, RT_MEM_WORKSPACE, (n + 1) * sizeof(real));
        if (!o->h_dense || !r->d_disp || !r->d_comb || !r->d_ddisp || !r->d_dcomb)
            return FSMOE_ERR_NOMEM;
    }
    return FSMOE_OK;
}

void order_free(rt_order *o, rt_routing *r, rt_backend *be)
{
    if (be) {
        void *dev[] = {o->d_tmp, r->d_disp, r->d_comb, r->d_ddisp, r->d_dcomb};
        for (int i = 0; i < 5; i++)
            if (dev[i])
                rt_free(be, dev[i]);
    }
    free(o->h_dense);
    r->d_disp = r->d_comb = r->d_ddisp = r->d_dcomb = NULL;
    memset(o, 0, sizeof(*o));
}

void order_forward(rt_order *o, rt_backend *be, rt_stream *s, rt_routing *r, const real *x,
                   real *Xd)
{
    if (o->kind == RT_ORDER_GSHARD)
        order_gshard_forward(o, be, s, r, x, Xd);
    else
        order_tutel_forward(o, be, s, r, x, Xd);
}

void iorder_forward(rt_order *o, rt_backend *be, rt_stream *s, const rt_routing *r,
                    const real *Yc, real *y)
{
    if (o->kind == RT_ORDER_GSHARD)
        iorder_gshard_forward(o, be, s, r, Yc, y);
    else
        iorder_tutel_forward(o, be, s, r, Yc, y);
}

void iorder_backward(rt_order *o, rt_backend *be, rt_stream *s, rt_routing *r, const real *dy,
                     const real *Yc, real *dYc)
{
    if (o->kind == RT_ORDER_GSHARD)
        iorder_gshard_backward(o, be, s, r, dy, Yc, dYc);
    else
        iorder_tutel_backward(o, be, s, r, dy, Yc, dYc);
}

void order_backward(rt_order *o, rt_backend *be, rt_stream *s, rt_routing *r, const real *dXd,
                    const real *x, real *dx)
{
    if (o->kind == RT_ORDER_GSHARD)
        order_gshard_backward(o, be, s, r, dXd, x, dx);
    else
        order_tutel_backward(o, be, s, r, dXd, x, dx);
}
