/* Implements: causal self-attention forward/backward (attention.h). Per head:
 * S = Q·Kᵀ, P = softmax(S/√d) (causal), Y = P·V, out = Y·Wo + bo. */
#include "attention.h"

#include <math.h>
#include <string.h>

void attention_register(rt_attention *at, rt_params *t, const char *prefix, long M, long nh,
                        long d, double std, double std_out)
{
    memset(at, 0, sizeof(*at));
    at->M = M, at->nh = nh, at->d = d;
    at->mp = rt_group_single();
    params_add(t, &at->wqkv, &at->dwqkv, RT_INIT_NORMAL, std, (const long[]){M, 3 * nh * d}, 2, "%s.wqkv", prefix);
    params_add(t, &at->bqkv, &at->dbqkv, RT_INIT_ZERO, 0, (const long[]){3 * nh * d}, 1, "%s.bqkv", prefix);
    params_add(t, &at->wo, &at->dwo, RT_INIT_NORMAL, std_out, (const long[]){nh * d, M}, 2, "%s.wo", prefix);
    params_add(t, &at->bo, &at->dbo, RT_INIT_ZERO, 0, (const long[]){M}, 1, "%s.bo", prefix);
}

#define ALLOC(p, n)                                                                            \
    do {                                                                                       \
        if (!((p) = be->alloc(be, (size_t)(n) * sizeof(real))))                                \
            return FSMOE_ERR_NOMEM;                                                            \
    } while (0)

fsmoe_status attn_acts_alloc(rt_attn_acts *a, const rt_attention *at, rt_backend *be, long B,
                             long L)
{
    long D = at->nh * at->d;
    ALLOC(a->qkv, B * L * 3 * D);
    ALLOC(a->q, B * L * D);
    ALLOC(a->k, B * L * D);
    ALLOC(a->v, B * L * D);
    ALLOC(a->att, B * at->nh * L * L);
    ALLOC(a->yh, B * L * D);
    ALLOC(a->y, B * L * D);
    return FSMOE_OK;
}

fsmoe_status attn_scratch_alloc(rt_attn_scratch *w, const rt_attention *at, rt_backend *be,
                                long B, long L)
{
    long D = at->nh * at->d;
    ALLOC(w->dqkv, B * L * 3 * D);
    ALLOC(w->dq, B * L * D);
    ALLOC(w->dk, B * L * D);
    ALLOC(w->dv, B * L * D);
    ALLOC(w->datt, B * at->nh * L * L);
    ALLOC(w->dyh, B * L * D);
    ALLOC(w->dy, B * L * D);
    return FSMOE_OK;
}

static void free_all(rt_backend *be, real **ps, int n)
{
    for (int i = 0; i < n; i++)
        if (ps[i]) {
            be->free(be, ps[i]);
            ps[i] = NULL;
        }
}

void attn_acts_free(rt_attn_acts *a, rt_backend *be)
{
    if (be) {
        real *ps[] = {a->qkv, a->q, a->k, a->v, a->att, a->yh, a->y};
        free_all(be, ps, 7);
    }
    memset(a, 0, sizeof(*a));
}

void attn_scratch_free(rt_attn_scratch *w, rt_backend *be)
{
    if (be) {
        real *ps[] = {w->dqkv, w->dq, w->dk, w->dv, w->datt, w->dyh, w->dy};
        free_all(be, ps, 7);
    }
    memset(w, 0, sizeof(*w));
}

void attention_forward(const rt_attention *at, rt_backend *be, rt_stream *s, const real *x,
                       real *out, const rt_attn_acts *a, long B, long L)
{
    long M = at->M, nh = at->nh, d = at->d, D = nh * d, N = B * L, BH = B * nh;
    real scale = (real)(1.0 / sqrt((double)d));
    be->gemm(be, s, 0, 0, N, 3 * D, M, 1, x, M, 0, at->wqkv, 3 * D, 0, 0, a->qkv, 3 * D, 0, 1);
    be->bias_add(be, s, a->qkv, at->bqkv, N, 3 * D);
    be->qkv_split(be, s, a->q, a->k, a->v, a->qkv, B, nh, L, d);
    /* scores into att, then softmax in place (the kernel reads a row before writing it) */
    be->gemm(be, s, 0, 1, L, L, d, 1, a->q, d, L * d, a->k, d, L * d, 0, a->att, L, L * L, BH);
    be->attn_softmax_fwd(be, s, a->att, a->att, BH * L, L, scale);
    be->gemm(be, s, 0, 0, L, d, L, 1, a->att, L, L * L, a->v, d, L * d, 0, a->yh, d, L * d, BH);
    be->heads_permute(be, s, a->y, a->yh, B, nh, L, d, 1);
    be->gemm(be, s, 0, 0, N, M, D, 1, a->y, D, 0, at->wo, M, 0, 0, out, M, 0, 1);
    if (at->mp.rank == 0)
        be->bias_add(be, s, out, at->bo, N, M);
    if (at->mp.size > 1)
        be->allreduce_sum(be, s, &at->mp, out, N * M);
}

void attention_backward(const rt_attention *at, rt_backend *be, rt_stream *s, const real *dout,
                        const real *x, real *dx, const rt_attn_acts *a, const rt_attn_scratch *w,
                        long B, long L)
{
    long M = at->M, nh = at->nh, d = at->d, D = nh * d, N = B * L, BH = B * nh;
    real scale = (real)(1.0 / sqrt((double)d));
    /* out = y·Wo + bo */
    be->bias_grad(be, s, at->dbo, dout, N, M);
    be->gemm(be, s, 1, 0, D, M, N, 1, a->y, D, 0, dout, M, 0, 1, at->dwo, M, 0, 1);
    be->gemm(be, s, 0, 1, N, D, M, 1, dout, M, 0, at->wo, M, 0, 0, w->dy, D, 0, 1);
    be->heads_permute(be, s, w->dyh, w->dy, B, nh, L, d, 0);
    /* yh = P·V */
    be->gemm(be, s, 0, 1, L, L, d, 1, w->dyh, d, L * d, a->v, d, L * d, 0, w->datt, L, L * L, BH);
    be->gemm(be, s, 1, 0, L, d, L, 1, a->att, L, L * L, w->dyh, d, L * d, 0, w->dv, d, L * d, BH);
    /* P = softmax(scale·S); datt becomes dS in place */
    be->attn_softmax_bwd(be, s, w->datt, w->datt, a->att, BH * L, L, scale);
    /* S = Q·Kᵀ */
    be->gemm(be, s, 0, 0, L, d, L, 1, w->datt, L, L * L, a->k, d, L * d, 0, w->dq, d, L * d, BH);
    be->gemm(be, s, 1, 0, L, d, L, 1, w->datt, L, L * L, a->q, d, L * d, 0, w->dk, d, L * d, BH);
    be->qkv_merge(be, s, w->dqkv, w->dq, w->dk, w->dv, B, nh, L, d);
    /* qkv = x·Wqkv + bqkv */
    be->bias_grad(be, s, at->dbqkv, w->dqkv, N, 3 * D);
    be->gemm(be, s, 1, 0, M, 3 * D, N, 1, x, M, 0, w->dqkv, 3 * D, 0, 1, at->dwqkv, 3 * D, 0, 1);
    be->gemm(be, s, 0, 1, N, M, 3 * D, 1, w->dqkv, 3 * D, 0, at->wqkv, 3 * D, 0, 1, dx, M, 0, 1);
    if (at->mp.size > 1)
        be->allreduce_sum(be, s, &at->mp, dx, N * M);
}
