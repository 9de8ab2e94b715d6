/* Implements: GPT and Mixtral expert FFNs (expert_ffn.h), forward and explicit backward, as
 * strided-batched GEMMs over experts (one GEMM per weight for all experts of a chunk). */
#include "expert_ffn.h"

#include <string.h>

void experts_register(rt_experts *ex, rt_params *t, const char *prefix, int kind, long E, long M,
                      long H, double std, double std_out)
{
    memset(ex, 0, sizeof(*ex));
    ex->kind = kind;
    ex->E = E, ex->M = M, ex->H = H;
    params_add(t, &ex->w1, &ex->dw1, RT_INIT_NORMAL, std, (const long[]){E, M, H}, 3, "%s.w1", prefix);
    if (kind == 0)
        params_add(t, &ex->b1, &ex->db1, RT_INIT_ZERO, 0, (const long[]){E, H}, 2, "%s.b1", prefix);
    else
        params_add(t, &ex->w3, &ex->dw3, RT_INIT_NORMAL, std, (const long[]){E, M, H}, 3, "%s.w3", prefix);
    params_add(t, &ex->w2, &ex->dw2, RT_INIT_NORMAL, std_out, (const long[]){E, H, M}, 3, "%s.w2", prefix);
    if (kind == 0)
        params_add(t, &ex->b2, &ex->db2, RT_INIT_ZERO, 0, (const long[]){E, M}, 2, "%s.b2", prefix);
}

fsmoe_status expert_acts_alloc(rt_expert_acts *a, const rt_experts *ex, rt_backend *be, long C)
{
    size_t bytes = (size_t)(ex->E * C * ex->H) * sizeof(real);
    a->a = be->alloc(be, bytes);
    a->h = be->alloc(be, bytes);
    a->g = ex->kind == 1 ? be->alloc(be, bytes) : NULL;
    if (!a->a || !a->h || (ex->kind == 1 && !a->g))
        return FSMOE_ERR_NOMEM;
    return FSMOE_OK;
}

void expert_acts_free(rt_expert_acts *a, rt_backend *be)
{
    if (!be)
        return;
    if (a->a)
        be->free(be, a->a);
    if (a->g)
        be->free(be, a->g);
    if (a->h)
        be->free(be, a->h);
    memset(a, 0, sizeof(*a));
}

void experts_forward(const rt_experts *ex, rt_backend *be, rt_stream *s, const real *x, real *y,
                     const rt_expert_acts *acts, long C, long c0, long c1)
{
    long E = ex->E, M = ex->M, H = ex->H, m = c1 - c0;
    if (m <= 0)
        return;
    real *a = acts->a + c0 * H, *h = acts->h + c0 * H, *g = acts->g ? acts->g + c0 * H : NULL;
    const real *xc = x + c0 * M;
    real *yc = y + c0 * M;
    be->gemm(be, s, 0, 0, m, H, M, 1, xc, M, C * M, ex->w1, H, M * H, 0, a, H, C * H, E);
    if (ex->kind == 1)
        be->gemm(be, s, 0, 0, m, H, M, 1, xc, M, C * M, ex->w3, H, M * H, 0, g, H, C * H, E);
    for (long e = 0; e < E; e++) {
        if (ex->kind == 0)
            be->bias_add(be, s, a + e * C * H, ex->b1 + e * H, m, H);
        be->act_fwd(be, s, ex->kind, h + e * C * H, a + e * C * H, g ? g + e * C * H : NULL,
                    m * H);
    }
    be->gemm(be, s, 0, 0, m, M, H, 1, h, H, C * H, ex->w2, M, H * M, 0, yc, M, C * M, E);
    if (ex->kind == 0)
        for (long e = 0; e < E; e++)
            be->bias_add(be, s, yc + e * C * M, ex->b2 + e * M, m, M);
}

void experts_backward(const rt_experts *ex, rt_backend *be, rt_stream *s, const real *dy,
                      const real *x, real *dx, const rt_expert_acts *acts, real *dh, real *da,
                      real *dg, long C, long c0, long c1)
{
    long E = ex->E, M = ex->M, H = ex->H, m = c1 - c0;
    if (m <= 0)
        return;
    const real *a = acts->a + c0 * H, *h = acts->h + c0 * H;
    const real *g = acts->g ? acts->g + c0 * H : NULL;
    const real *xc = x + c0 * M, *dyc = dy + c0 * M;
    real *dxc = dx + c0 * M, *dhc = dh + c0 * H, *dac = da + c0 * H;
    real *dgc = dg ? dg + c0 * H : NULL;
    /* dh = dy·W2ᵀ; dW2 += hᵀ·dy; db2 += Σ dy */
    be->gemm(be, s, 0, 1, m, H, M, 1, dyc, M, C * M, ex->w2, M, H * M, 0, dhc, H, C * H, E);
    be->gemm(be, s, 1, 0, H, M, m, 1, h, H, C * H, dyc, M, C * M, 1, ex->dw2, M, H * M, E);
    for (long e = 0; e < E; e++) {
        if (ex->kind == 0)
            be->bias_grad(be, s, ex->db2 + e * M, dyc + e * C * M, m, M);
        be->act_bwd(be, s, ex->kind, dac + e * C * H, dgc ? dgc + e * C * H : NULL,
                    dhc + e * C * H, a + e * C * H, g ? g + e * C * H : NULL, m * H);
        if (ex->kind == 0)
            be->bias_grad(be, s, ex->db1 + e * H, dac + e * C * H, m, H);
    }
    /* dx = da·W1ᵀ (+ dg·W3ᵀ); dW1 += xᵀ·da; dW3 += xᵀ·dg */
    be->gemm(be, s, 0, 1, m, M, H, 1, dac, H, C * H, ex->w1, H, M * H, 0, dxc, M, C * M, E);
    be->gemm(be, s, 1, 0, M, H, m, 1, xc, M, C * M, dac, H, C * H, 1, ex->dw1, H, M * H, E);
    if (ex->kind == 1) {
        be->gemm(be, s, 0, 1, m, M, H, 1, dgc, H, C * H, ex->w3, H, M * H, 1, dxc, M, C * M, E);
        be->gemm(be, s, 1, 0, M, H, m, 1, xc, M, C * M, dgc, H, C * H, 1, ex->dw3, H, M * H, E);
    }
}
