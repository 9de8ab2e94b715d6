/* Implements: causal multi-head self-attention with explicit backward.
 * Tensor-parallel-ready: the QKV projection's columns and the output projection's rows are
 * grouped by head, so an MP rank owns `nh` = heads/N_MP consecutive heads (Megatron split). With
 * N_MP > 1 each member's output and input gradient are partial sums (bo added by member 0
 * only): the caller sums them over the MP group (the schedule's tensor-parallel AllReduce
 * tasks). Grouped-query attention: nkv key/value heads, query head h reads kv
 * head h / (nh/nkv) (nkv = nh is ordinary multi-head attention).
 *
 * No head split/merge copies: Q, K and V are read in place from the (B·L, ·) projection output
 * and each head's result is written in place into y (B·L, nh·d), by GEMMs whose leading
 * dimensions step over the other heads (one batched GEMM per sample over its heads). */
#ifndef RT_ATTENTION_H
#define RT_ATTENTION_H

#include "backend.h"
#include "params.h"

typedef struct {
    long M, nh, nkv, d; /* model width, local query heads, local kv heads, head dim */
    rt_group mp;
    real *wqkv, *dwqkv; /* (M, (nh + 2·nkv)·d): columns [q | k | v], head-major inside each */
    real *bqkv, *dbqkv; /* ((nh + 2·nkv)·d) */
    real *wo, *dwo;     /* (nh·d, M) */
    real *bo, *dbo;     /* (M) */
} rt_attention;

typedef struct {
    real *qkv; /* (B, L, (nh + 2·nkv)·d) */
    real *att; /* (B, nh, L, L) probabilities */
    real *y;   /* (B, L, nh·d) */
} rt_attn_acts;

/* Backward scratch, shared by all layers. */
typedef struct {
    real *dqkv, *datt, *dy;
} rt_attn_scratch;

void attention_register(rt_attention *at, rt_params *t, const char *prefix, long M, long nh,
                        long nkv, long d, double std, double std_out);
/* Member mp.rank's slice of attention with `heads` query and `kv_heads` key/value heads in all
 * (Megatron split: heads/N_MP consecutive query heads and their kv heads; the caller has checked
 * divisibility), registered as slices of the whole tensors (params.h RT_PART_MP). */
void attention_register_mp(rt_attention *at, rt_params *t, const char *prefix, long M,
                           long heads, long kv_heads, long d, rt_group mp, double std,
                           double std_out);
fsmoe_status attn_acts_alloc(rt_attn_acts *a, const rt_attention *at, rt_backend *be, long B,
                             long L);
void attn_acts_free(rt_attn_acts *a, rt_backend *be);
fsmoe_status attn_scratch_alloc(rt_attn_scratch *s, const rt_attention *at, rt_backend *be,
                                long B, long L);
void attn_scratch_free(rt_attn_scratch *s, rt_backend *be);

/* out = Attention(x); x, out (B·L, M). */
void attention_forward(const rt_attention *at, rt_backend *be, rt_stream *s, const real *x,
                       real *out, const rt_attn_acts *a, long B, long L);
/* dx += ∂/∂x; parameter gradients accumulate. */
void attention_backward(const rt_attention *at, rt_backend *be, rt_stream *s, const real *dout,
                        const real *x, real *dx, const rt_attn_acts *a, const rt_attn_scratch *w,
                        long B, long L);

#endif
