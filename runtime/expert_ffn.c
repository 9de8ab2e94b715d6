/* Implements: GPT and Mixtral expert FFNs (expert_ffn.h), forward and explicit backward, as
 * strided-batched GEMMs over experts (one GEMM per weight for all experts of a chunk) when every
 * expert's slots are filled, else one GEMM per expert over its filled slots only (with f = 1.2
 * about a sixth of the capacity is empty on average). */
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

/* Rows of expert e's slot range [c0, c1) that hold tokens. */
static long filled_rows(const long *fill, long e, long c0, long c1)
{
    long f = fill ? fill[e] : c1;
    f = f < c1 ? f : c1;
    return f > c0 ? f - c0 : 0;
}

/* Zeroes the empty slots of [c0, c1) in an (E, C, M) output, so that an empty slot reads 0
 * whatever the order does with it (the GShard order multiplies it by a zero weight). */
static void zero_empty(rt_backend *be, rt_stream *s, const long *fill, long E, long C, long c0,
                       long c1, real *out, long M)
{
    for (long e = 0; fill && e < E; e++) {
        long r = filled_rows(fill, e, c0, c1);
        if (c0 + r < c1)
            be->zero(be, s, out + (e * C + c0 + r) * M, (size_t)((c1 - c0 - r) * M) * sizeof(real));
    }
}

/* Whether every expert runs all rows of the range: then one strided-batched GEMM covers all
 * experts; otherwise one GEMM per expert with its own row count. */
static int all_full(const long *fill, long E, long c0, long c1)
{
    for (long e = 0; fill && e < E; e++)
        if (filled_rows(fill, e, c0, c1) != c1 - c0)
            return 0;
    return 1;
}

/* C_e = op(A_e)·op(B_e) + beta·C_e for every expert, with m (ta = 0) or k (ta = 1) = the
 * expert's filled rows. Strides are per expert. */
static void gemm_experts(rt_backend *be, rt_stream *s, const long *fill, long E, long c0, long c1,
                         int ta, int tb, long m, long n, long k, const real *A, long lda, long sA,
                         const real *B, long ldb, long sB, real beta, real *C, long ldc, long sC)
{
    if (all_full(fill, E, c0, c1)) {
        be->gemm(be, s, ta, tb, m, n, k, 1, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, E);
        return;
    }
    for (long e = 0; e < E; e++) {
        long r = filled_rows(fill, e, c0, c1);
        if (r == 0)
            continue;
        be->gemm(be, s, ta, tb, ta ? m : r, n, ta ? r : k, 1, A + e * sA, lda, 0, B + e * sB, ldb,
                 0, beta, C + e * sC, ldc, 0, 1);
    }
}

void experts_forward(const rt_experts *ex, rt_backend *be, rt_stream *s, const real *x, real *y,
                     const rt_expert_acts *acts, long C, long c0, long c1, const long *fill)
{
    long E = ex->E, M = ex->M, H = ex->H, m = c1 - c0;
    if (m <= 0)
        return;
    real *a = acts->a + c0 * H, *h = acts->h + c0 * H, *g = acts->g ? acts->g + c0 * H : NULL;
    const real *xc = x + c0 * M;
    real *yc = y + c0 * M;
    gemm_experts(be, s, fill, E, c0, c1, 0, 0, m, H, M, xc, M, C * M, ex->w1, H, M * H, 0, a, H,
                 C * H);
    if (ex->kind == 1)
        gemm_experts(be, s, fill, E, c0, c1, 0, 0, m, H, M, xc, M, C * M, ex->w3, H, M * H, 0, g,
                     H, C * H);
    for (long e = 0; e < E; e++) {
        long r = filled_rows(fill, e, c0, c1);
        if (r > 0)
            be->act_fwd(be, s, ex->kind, h + e * C * H, a + e * C * H, g ? g + e * C * H : NULL,
                        ex->kind == 0 ? ex->b1 + e * H : NULL, r, H);
    }
    gemm_experts(be, s, fill, E, c0, c1, 0, 0, m, M, H, h, H, C * H, ex->w2, M, H * M, 0, yc, M,
                 C * M);
    if (ex->kind == 0)
        for (long e = 0; e < E; e++) {
            long r = filled_rows(fill, e, c0, c1);
            if (r > 0)
                be->bias_add(be, s, yc + e * C * M, ex->b2 + e * M, r, M);
        }
    zero_empty(be, s, fill, E, C, c0, c1, y, M);
}

void experts_backward(const rt_experts *ex, rt_backend *be, rt_stream *s, const real *dy,
                      const real *x, real *dx, const rt_expert_acts *acts, real *dh, real *da,
                      real *dg, long C, long c0, long c1, const long *fill)
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
    gemm_experts(be, s, fill, E, c0, c1, 0, 1, m, H, M, dyc, M, C * M, ex->w2, M, H * M, 0, dhc,
                 H, C * H);
    gemm_experts(be, s, fill, E, c0, c1, 1, 0, H, M, m, h, H, C * H, dyc, M, C * M, 1, ex->dw2,
                 M, H * M);
    for (long e = 0; e < E; e++) {
        long r = filled_rows(fill, e, c0, c1);
        if (r == 0)
            continue;
        if (ex->kind == 0)
            be->bias_grad(be, s, ex->db2 + e * M, dyc + e * C * M, r, M);
        be->act_bwd(be, s, ex->kind, dac + e * C * H, dgc ? dgc + e * C * H : NULL,
                    dhc + e * C * H, a + e * C * H, g ? g + e * C * H : NULL, r * H);
        if (ex->kind == 0)
            be->bias_grad(be, s, ex->db1 + e * H, dac + e * C * H, r, H);
    }
    /* dx = da·W1ᵀ (+ dg·W3ᵀ); dW1 += xᵀ·da; dW3 += xᵀ·dg */
    gemm_experts(be, s, fill, E, c0, c1, 0, 1, m, M, H, dac, H, C * H, ex->w1, H, M * H, 0, dxc,
                 M, C * M);
    gemm_experts(be, s, fill, E, c0, c1, 1, 0, M, H, m, xc, M, C * M, dac, H, C * H, 1, ex->dw1,
                 H, M * H);
    if (ex->kind == 1) {
        gemm_experts(be, s, fill, E, c0, c1, 0, 1, m, M, H, dgc, H, C * H, ex->w3, H, M * H, 1,
                     dxc, M, C * M);
        gemm_experts(be, s, fill, E, c0, c1, 1, 0, M, H, m, xc, M, C * M, dgc, H, C * H, 1,
                     ex->dw3, H, M * H);
    }
    zero_empty(be, s, fill, E, C, c0, c1, dx, M);
}
