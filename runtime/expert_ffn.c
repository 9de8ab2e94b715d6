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

void experts_register_shard(rt_experts *ex, rt_params *t, const char *prefix, int kind,
                            long E_total, long e0, long E_local, long M, long H, double std,
                            double std_out)
{
    experts_register_slice(ex, t, prefix, kind, 0, E_total, e0, E_local, M, H, 0, H, std,
                           std_out);
}

void experts_register_slice(rt_experts *ex, rt_params *t, const char *prefix, int kind,
                            int dense, long E_total, long e0, long E_local, long M, long H_total,
                            long h0, long H_local, double std, double std_out)
{
    int first = t->n;
    experts_register(ex, t, prefix, kind, E_local, M, H_local, std, std_out);
    if (!dense)
        params_shard_since(t, first, e0, E_total);
    if (H_local == H_total)
        return;
    int sliced = dense ? RT_PART_MP : RT_PART_EXPERT;
    long seg_len = H_local;
    for (int i = first; i < t->n; i++) {
        rt_param *p = &t->p[i];
        real **slot = p->w; /* the tensor's pointer slot names it */
        if (slot == &ex->w1 || slot == &ex->w3 || slot == &ex->b1)
            params_slice_cols(t, i, 1, &h0, &seg_len, H_total, sliced);
        else if (slot == &ex->w2)
            params_slice_dim(t, i, 1, h0, H_total, sliced);
        else /* b2: whole on every slice, added by the first */
            p->part = dense ? RT_PART_REPLICA : RT_PART_EXPERT_REPLICA;
    }
    ex->skip_b2 = h0 != 0;
}

fsmoe_status expert_acts_alloc(rt_expert_acts *a, const rt_experts *ex, rt_backend *be, long C)
{
    size_t bytes = (size_t)(ex->E * C * ex->H) * sizeof(real);
    a->a = rt_alloc(be, RT_MEM_ACTIVATIONS, bytes);
    a->h = rt_alloc(be, RT_MEM_ACTIVATIONS, bytes);
    a->g = ex->kind == 1 ? rt_alloc(be, RT_MEM_ACTIVATIONS, bytes) : NULL;
    if (!a->a || !a->h || (ex->kind == 1 && !a->g))
        return FSMOE_ERR_NOMEM;
    return FSMOE_OK;
}

void expert_acts_free(rt_expert_acts *a, rt_backend *be)
{
    if (!be)
        return;
    if (a->a)
        rt_free(be, a->a);
    if (a->g)
        rt_free(be, a->g);
    if (a->h)
        rt_free(be, a->h);
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

/* Expert e runs rows [r0[e], r1[e]) of its C slots. When every expert runs the same rows, one
 * strided-batched GEMM covers all experts; otherwise one GEMM per expert with its own rows.
 * `ta` = 1 means the rows are op(A)'s columns (the k dimension: weight gradients). */
static int uniform(const long *r0, const long *r1, long E)
{
    for (long e = 1; e < E; e++)
        if (r0[e] != r0[0] || r1[e] != r1[0])
            return 0;
    return 1;
}

/* A and B point at slot/row 0 of expert 0 (the row offset r0[e] is applied per expert through
 * the *_row strides: a_row for A when its rows are slots, b_row likewise, c_row for C). */
static void gemm_ranges(rt_backend *be, rt_stream *s, const long *r0, const long *r1, long E,
                        int ta, int tb, long m, long n, long k, const real *A, long lda, long sA,
                        long a_row, const real *B, long ldb, long sB, long b_row, real beta,
                        real *C, long ldc, long sC, long c_row)
{
    if (uniform(r0, r1, E)) {
        long r = r1[0] - r0[0];
        if (r <= 0)
            return;
        be->gemm(be, s, ta, tb, ta ? m : r, n, ta ? r : k, 1, A + r0[0] * a_row, lda, sA,
                 B + r0[0] * b_row, ldb, sB, beta, C + r0[0] * c_row, ldc, sC, E);
        return;
    }
    for (long e = 0; e < E; e++) {
        long r = r1[e] - r0[e];
        if (r <= 0)
            continue;
        be->gemm(be, s, ta, tb, ta ? m : r, n, ta ? r : k, 1, A + e * sA + r0[e] * a_row, lda, 0,
                 B + e * sB + r0[e] * b_row, ldb, 0, beta, C + e * sC + r0[e] * c_row, ldc, 0, 1);
    }
}

void experts_forward_ranges(const rt_experts *ex, rt_backend *be, rt_stream *s, const real *x,
                            real *y, const rt_expert_acts *acts, long C, const long *r0,
                            const long *r1)
{
    long E = ex->E, M = ex->M, H = ex->H;
    real *a = acts->a, *h = acts->h, *g = acts->g;
    /* a = x·W1 (g = x·W3) */
    gemm_ranges(be, s, r0, r1, E, 0, 0, 0, H, M, x, M, C * M, M, ex->w1, H, M * H, 0, 0, a, H,
                C * H, H);
    if (ex->kind == 1)
        gemm_ranges(be, s, r0, r1, E, 0, 0, 0, H, M, x, M, C * M, M, ex->w3, H, M * H, 0, 0, g,
                    H, C * H, H);
    for (long e = 0; e < E; e++) {
        long r = r1[e] - r0[e], o = e * C * H + r0[e] * H;
        if (r > 0)
            be->act_fwd(be, s, ex->kind, h + o, a + o, g ? g + o : NULL,
                        ex->kind == 0 ? ex->b1 + e * H : NULL, r, H);
    }
    gemm_ranges(be, s, r0, r1, E, 0, 0, 0, M, H, h, H, C * H, H, ex->w2, M, H * M, 0, 0, y, M,
                C * M, M);
    if (ex->kind == 0 && !ex->skip_b2)
        for (long e = 0; e < E; e++) {
            long r = r1[e] - r0[e];
            if (r > 0)
                be->bias_add(be, s, y + e * C * M + r0[e] * M, ex->b2 + e * M, r, M);
        }
}

void experts_backward_ranges(const rt_experts *ex, rt_backend *be, rt_stream *s, const real *dy,
                             const real *x, real *dx, const rt_expert_acts *acts, real *dh,
                             real *da, real *dg, long C, const long *r0, const long *r1)
{
    long E = ex->E, M = ex->M, H = ex->H;
    const real *a = acts->a, *h = acts->h, *g = acts->g;
    /* dh = dy·W2ᵀ; dW2 += hᵀ·dy; db2 += Σ dy */
    gemm_ranges(be, s, r0, r1, E, 0, 1, 0, H, M, dy, M, C * M, M, ex->w2, M, H * M, 0, 0, dh, H,
                C * H, H);
    gemm_ranges(be, s, r0, r1, E, 1, 0, H, M, 0, h, H, C * H, H, dy, M, C * M, M, 1, ex->dw2, M,
                H * M, 0);
    for (long e = 0; e < E; e++) {
        long r = r1[e] - r0[e], oh = e * C * H + r0[e] * H, om = e * C * M + r0[e] * M;
        if (r <= 0)
            continue;
        if (ex->kind == 0)
            be->bias_grad(be, s, ex->db2 + e * M, dy + om, r, M);
        be->act_bwd(be, s, ex->kind, da + oh, dg ? dg + oh : NULL, dh + oh, a + oh,
                    g ? g + oh : NULL, r * H);
        if (ex->kind == 0)
            be->bias_grad(be, s, ex->db1 + e * H, da + oh, r, H);
    }
    /* dx = da·W1ᵀ (+ dg·W3ᵀ); dW1 += xᵀ·da; dW3 += xᵀ·dg */
    gemm_ranges(be, s, r0, r1, E, 0, 1, 0, M, H, da, H, C * H, H, ex->w1, H, M * H, 0, 0, dx, M,
                C * M, M);
    gemm_ranges(be, s, r0, r1, E, 1, 0, M, H, 0, x, M, C * M, M, da, H, C * H, H, 1, ex->dw1, H,
                M * H, 0);
    if (ex->kind == 1) {
        gemm_ranges(be, s, r0, r1, E, 0, 1, 0, M, H, dg, H, C * H, H, ex->w3, H, M * H, 0, 1, dx,
                    M, C * M, M);
        gemm_ranges(be, s, r0, r1, E, 1, 0, M, H, 0, x, M, C * M, M, dg, H, C * H, H, 1, ex->dw3,
                    H, M * H, 0);
    }
}

#define RANGES_MAX 256

/* The slot range [c0, c1) of every expert, cut at its fill; 0 (nothing to run, or a failure
 * recorded on be) when there is nothing to do. */
static int slot_ranges(rt_backend *be, const long *fill, long E, long c0, long c1, long *r0,
                       long *r1)
{
    if (c1 <= c0)
        return 0;
    if (E > RANGES_MAX) {
        rt_backend_fail(be, FSMOE_ERR_VALUE, "experts: %ld experts per rank (at most %d)", E,
                        RANGES_MAX);
        return 0;
    }
    for (long e = 0; e < E; e++) {
        r0[e] = c0;
        r1[e] = c0 + filled_rows(fill, e, c0, c1);
    }
    return 1;
}

void experts_forward(const rt_experts *ex, rt_backend *be, rt_stream *s, const real *x, real *y,
                     const rt_expert_acts *acts, long C, long c0, long c1, const long *fill)
{
    long r0[RANGES_MAX], r1[RANGES_MAX];
    if (!slot_ranges(be, fill, ex->E, c0, c1, r0, r1))
        return;
    experts_forward_ranges(ex, be, s, x, y, acts, C, r0, r1);
    zero_empty(be, s, fill, ex->E, C, c0, c1, y, ex->M);
}

void experts_backward(const rt_experts *ex, rt_backend *be, rt_stream *s, const real *dy,
                      const real *x, real *dx, const rt_expert_acts *acts, real *dh, real *da,
                      real *dg, long C, long c0, long c1, const long *fill)
{
    long r0[RANGES_MAX], r1[RANGES_MAX];
    if (!slot_ranges(be, fill, ex->E, c0, c1, r0, r1))
        return;
    experts_backward_ranges(ex, be, s, dy, x, dx, acts, dh, da, dg, C, r0, r1);
    zero_empty(be, s, fill, ex->E, C, c0, c1, dx, ex->M);
}
