/* Implements: causal self-attention forward/backward (attention.h). Per query head h with kv
 * head j = h / g (g = nh/nkv): S = Q_h·K_jᵀ, P = softmax(S/√d) (causal), Y_h = P·V_j,
 * out = Y·Wo + bo. */
#include "attention.h"

#include <math.h>
#include <string.h>

void attention_register(rt_attention *at, rt_params *t, const char *prefix, long M, long nh,
                        long nkv, long d, double std, double std_out)
{
    memset(at, 0, sizeof(*at));
    at->M = M, at->nh = nh, at->nkv = nkv, at->d = d;
    at->mp = rt_group_single();
    long W = (nh + 2 * nkv) * d;
    params_add(t, &at->wqkv, &at->dwqkv, RT_INIT_NORMAL, std, (const long[]){M, W}, 2, "%s.wqkv", prefix);
    params_add(t, &at->bqkv, &at->dbqkv, RT_INIT_ZERO, 0, (const long[]){W}, 1, "%s.bqkv", prefix);
    params_add(t, &at->wo, &at->dwo, RT_INIT_NORMAL, std_out, (const long[]){nh * d, M}, 2, "%s.wo", prefix);
    params_add(t, &at->bo, &at->dbo, RT_INIT_ZERO, 0, (const long[]){M}, 1, "%s.bo", prefix);
}

void attention_register_mp(rt_attention *at, rt_params *t, const char *prefix, long M,
                           long heads, long kv_heads, long d, rt_group mp, double std,
                           double std_out)
{
    int first = t->n, P = mp.size, q = mp.rank;
    long nh = heads / P, nkv = kv_heads / P;
    attention_register(at, t, prefix, M, nh, nkv, d, std, std_out);
    at->mp = mp;
    if (P == 1)
        return;
    /* this member's heads: its q, k and v columns of the whole projection, its rows of Wo */
    long off[3] = {q * nh * d, heads * d + q * nkv * d, (heads + kv_heads) * d + q * nkv * d};
    long len[3] = {nh * d, nkv * d, nkv * d}, W = (heads + 2 * kv_heads) * d;
    params_slice_cols(t, first, 3, off, len, W, RT_PART_MP);     /* wqkv */
    params_slice_cols(t, first + 1, 3, off, len, W, RT_PART_MP); /* bqkv */
    params_slice_dim(t, first + 2, 0, q * nh * d, heads * d, RT_PART_MP); /* wo */
}

#define ALLOC(p, n, cat)                                                                        \
    do {                                                                                       \
        if (!((p) = rt_alloc(be, (cat), (size_t)(n) * sizeof(real))))                              \
            return FSMOE_ERR_NOMEM;                                                            \
    } while (0)

fsmoe_status attn_acts_alloc(rt_attn_acts *a, const rt_attention *at, rt_backend *be, long B,
                             long L)
{
    long D = at->nh * at->d, W = (at->nh + 2 * at->nkv) * at->d;
    ALLOC(a->qkv, B * L * W, RT_MEM_ACTIVATIONS);
    ALLOC(a->att, B * at->nh * L * L, RT_MEM_ACTIVATIONS);
    ALLOC(a->y, B * L * D, RT_MEM_ACTIVATIONS);
    return FSMOE_OK;
}

fsmoe_status attn_scratch_alloc(rt_attn_scratch *w, const rt_attention *at, rt_backend *be,
                                long B, long L)
{
    long D = at->nh * at->d, W = (at->nh + 2 * at->nkv) * at->d;
    ALLOC(w->dqkv, B * L * W, RT_MEM_WORKSPACE);
    ALLOC(w->datt, B * at->nh * L * L, RT_MEM_WORKSPACE);
    ALLOC(w->dy, B * L * D, RT_MEM_WORKSPACE);
    return FSMOE_OK;
}

static void free_all(rt_backend *be, real **ps, int n)
{
    for (int i = 0; i < n; i++)
        if (ps[i]) {
            rt_free(be, ps[i]);
            ps[i] = NULL;
        }
}

void attn_acts_free(rt_attn_acts *a, rt_backend *be)
{
    if (be) {
        real *ps[] = {a->qkv, a->att, a->y};
        free_all(be, ps, 3);
    }
    memset(a, 0, sizeof(*a));
}

void attn_scratch_free(rt_attn_scratch *w, rt_backend *be)
{
    if (be) {
        real *ps[] = {w->dqkv, w->datt, w->dy};
        free_all(be, ps, 3);
    }
    memset(w, 0, sizeof(*w));
}

/* The per-head products of one sample as batched GEMMs. With g = nh/nkv query heads per kv
 * head: g = 1 is one GEMM over all nh heads (the kv operand steps by d like the query one);
 * g > 1 is one GEMM per kv head over its g query heads (the kv operand does not step). Every
 * operand is given by its base at head 0 and its leading dimension; `q`-side operands step by
 * d per query head, `kv`-side ones by d per kv head; att-side ones by L·L per query head. */
typedef struct {
    long nh, nkv, g, d, L;
} heads;

static heads heads_of(const rt_attention *at, long L)
{
    heads h = {at->nh, at->nkv, at->nh / at->nkv, at->d, L};
    return h;
}

/* C_h = op(A_h)·op(B_j) for every query head h, j = h / g; A steps per query head by sA, B
 * per kv head by sB, C per query head by sC. */
static void per_head(rt_backend *be, rt_stream *s, const heads *hd, int ta, int tb, long m, long n,
                     long k, const real *A, long lda, long sA, const real *B, long ldb, long sB,
                     real *C, long ldc, long sC)
{
    if (hd->g == 1) {
        be->gemm(be, s, ta, tb, m, n, k, 1, A, lda, sA, B, ldb, sB, 0, C, ldc, sC, hd->nh);
        return;
    }
    for (long j = 0; j < hd->nkv; j++)
        be->gemm(be, s, ta, tb, m, n, k, 1, A + j * hd->g * sA, lda, sA, B + j * sB, ldb, 0, 0,
                 C + j * hd->g * sC, ldc, sC, hd->g);
}

/* C_j = Σ_{h: h/g = j} op(A_h)·op(B_h) for every kv head j (the K and V gradients). */
static void per_kv_head_sum(rt_backend *be, rt_stream *s, const heads *hd, int ta, int tb, long m,
                            long n, long k, const real *A, long lda, long sA, const real *B,
                            long ldb, long sB, real *C, long ldc, long sC)
{
    if (hd->g == 1) {
        be->gemm(be, s, ta, tb, m, n, k, 1, A, lda, sA, B, ldb, sB, 0, C, ldc, sC, hd->nh);
        return;
    }
    for (long h = 0; h < hd->nh; h++)
        be->gemm(be, s, ta, tb, m, n, k, 1, A + h * sA, lda, 0, B + h * sB, ldb, 0,
                 h % hd->g ? 1 : 0, C + (h / hd->g) * sC, ldc, 0, 1);
}

/* Causal attention by blocks of queries: block [r0, r1) needs the keys [0, r1) only, so the
 * score GEMMs and their gradients skip the blocks above the diagonal (with 4 blocks, 10 of 16).
 * Blocks of at least 32 queries keep each GEMM large enough for the BLAS. */
static long query_block(long L)
{
    long nb = L / 32 < 4 ? L / 32 : 4;
    return nb > 1 ? (L + nb - 1) / nb : L;
}

/* The three causal products of one sample, block by block of bq queries: query block
 * [r0, r1) needs the keys [0, r1) only, and key block [r0, r1) is seen by the queries [r0, L)
 * only. Query-side operands (X, Z) step d per query head with leading dimension ldx / ldz,
 * key-side ones (Y) d per kv head; score-shaped ones (S, P) are (heads, L, L). */
/* S = X·Yᵀ on and below the diagonal blocks */
static void causal_xyt(rt_backend *be, rt_stream *s, const heads *hd, long bq, const real *X,
                       long ldx, const real *Y, long ldy, real *S)
{
    long L = hd->L, d = hd->d;
    for (long r0 = 0; r0 < L; r0 += bq) {
        long r1 = r0 + bq < L ? r0 + bq : L;
        per_head(be, s, hd, 0, 1, r1 - r0, r1, d, X + r0 * ldx, ldx, d, Y, ldy, d, S + r0 * L,
                 L, L * L);
    }
}

/* Z = P·Y (P zero above the diagonal) */
static void causal_py(rt_backend *be, rt_stream *s, const heads *hd, long bq, const real *P,
                      const real *Y, long ldy, real *Z, long ldz)
{
    long L = hd->L, d = hd->d;
    for (long r0 = 0; r0 < L; r0 += bq) {
        long r1 = r0 + bq < L ? r0 + bq : L;
        per_head(be, s, hd, 0, 0, r1 - r0, d, r1, P + r0 * L, L, L * L, Y, ldy, d, Z + r0 * ldz,
                 ldz, d);
    }
}

/* Z_j = Σ_{h of kv head j} P_hᵀ·X_h (P zero above the diagonal; Z key-side) */
static void causal_ptx(rt_backend *be, rt_stream *s, const heads *hd, long bq, const real *P,
                       const real *X, long ldx, real *Z, long ldz)
{
    long L = hd->L, d = hd->d;
    for (long r0 = 0; r0 < L; r0 += bq) {
        long r1 = r0 + bq < L ? r0 + bq : L;
        per_kv_head_sum(be, s, hd, 1, 0, r1 - r0, d, L - r0, P + r0 * L + r0, L, L * L,
                        X + r0 * ldx, ldx, d, Z + r0 * ldz, ldz, d);
    }
}

void attention_forward(const rt_attention *at, rt_backend *be, rt_stream *s, const real *x,
                       real *out, const rt_attn_acts *a, long B, long L)
{
    long M = at->M, nh = at->nh, nkv = at->nkv, d = at->d, D = nh * d, Dk = nkv * d;
    long W = D + 2 * Dk, N = B * L, LL = L * L;
    heads hd = heads_of(at, L);
    real scale = (real)(1.0 / sqrt((double)d));
    long bq = query_block(L);
    be->gemm(be, s, 0, 0, N, W, M, 1, x, M, 0, at->wqkv, W, 0, 0, a->qkv, W, 0, 1);
    be->bias_add(be, s, a->qkv, at->bqkv, N, W);
    /* one sample at a time, so that its scores (nh·L·L) stay in cache from the GEMM through
     * the softmax to the P·V GEMM */
    for (long b = 0; b < B; b++) {
        const real *q = a->qkv + b * L * W, *k = q + D, *v = q + D + Dk;
        real *att = a->att + b * nh * LL;
        /* scores S = Q·Kᵀ into att (the softmax reads no score above the diagonal), softmax
         * in place (a row is read before it is written; it writes the zeros above the
         * diagonal), Y = P·V */
        causal_xyt(be, s, &hd, bq, q, W, k, W, att);
        be->attn_softmax_fwd(be, s, att, att, nh * L, L, scale);
        causal_py(be, s, &hd, bq, att, v, W, a->y + b * L * D, D);
    }
    be->gemm(be, s, 0, 0, N, M, D, 1, a->y, D, 0, at->wo, M, 0, 0, out, M, 0, 1);
    if (at->mp.rank == 0)
        be->bias_add(be, s, out, at->bo, N, M);
}

void attention_backward(const rt_attention *at, rt_backend *be, rt_stream *s, const real *dout,
                        const real *x, real *dx, const rt_attn_acts *a, const rt_attn_scratch *w,
                        long B, long L)
{
    long M = at->M, nh = at->nh, nkv = at->nkv, d = at->d, D = nh * d, Dk = nkv * d;
    long W = D + 2 * Dk, N = B * L, LL = L * L;
    heads hd = heads_of(at, L);
    real scale = (real)(1.0 / sqrt((double)d));
    long bq = query_block(L);
    /* out = y·Wo + bo */
    be->bias_grad(be, s, at->dbo, dout, N, M);
    be->gemm(be, s, 1, 0, D, M, N, 1, a->y, D, 0, dout, M, 0, 1, at->dwo, M, 0, 1);
    be->gemm(be, s, 0, 1, N, D, M, 1, dout, M, 0, at->wo, M, 0, 0, w->dy, D, 0, 1);
    for (long b = 0; b < B; b++) {
        const real *q = a->qkv + b * L * W, *k = q + D, *v = q + D + Dk;
        const real *dy = w->dy + b * L * D, *att = a->att + b * nh * LL;
        real *ds = w->datt + b * nh * LL, *dq = w->dqkv + b * L * W, *dk = dq + D, *dv = dk + Dk;
        /* Y_h = P_h·V_j: dP_h = dY_h·V_jᵀ, dV_j = Σ_h P_hᵀ·dY_h */
        causal_xyt(be, s, &hd, bq, dy, D, v, W, ds);
        causal_ptx(be, s, &hd, bq, att, dy, D, dv, W);
        /* P = softmax(scale·S); dP becomes dS in place (zeros above the diagonal) */
        be->attn_softmax_bwd(be, s, ds, ds, att, nh * L, L, scale);
        /* S_h = Q_h·K_jᵀ: dQ_h = dS_h·K_j, dK_j = Σ_h dS_hᵀ·Q_h */
        causal_py(be, s, &hd, bq, ds, k, W, dq, W);
        causal_ptx(be, s, &hd, bq, ds, q, W, dk, W);
    }
    /* qkv = x·Wqkv + bqkv */
    be->bias_grad(be, s, at->dbqkv, w->dqkv, N, W);
    be->gemm(be, s, 1, 0, M, W, N, 1, x, M, 0, w->dqkv, W, 0, 1, at->dwqkv, W, 0, 1);
    be->gemm(be, s, 0, 1, N, M, W, 1, w->dqkv, W, 0, at->wqkv, W, 0, 1, dx, M, 0, 1);

}
