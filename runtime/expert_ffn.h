/* Implements: the experts of an MoE layer, and the dense FFN (one expert over all tokens).
 * GPT FFN: y = gelu(x·W1 + b1)·W2 + b2.  Mixtral FFN (SwiGLU): y = (silu(x·W1) ⊙ x·W3)·W2.
 * Inputs are laid out (E, C, M): C capacity slots per expert; forward and backward work on the
 * slot range [c0, c1) so that the MoE layer can pipeline them per chunk (FSMoE §4). */
#ifndef RT_EXPERT_FFN_H
#define RT_EXPERT_FFN_H

#include "backend.h"
#include "params.h"

typedef struct {
    int kind; /* 0 GPT (GELU), 1 SwiGLU */
    long E, M, H;
    real *w1, *dw1; /* (E, M, H) */
    real *b1, *db1; /* (E, H), GPT only */
    real *w3, *dw3; /* (E, M, H), SwiGLU only */
    real *w2, *dw2; /* (E, H, M) */
    real *b2, *db2; /* (E, M), GPT only */
    int skip_b2;    /* a slice of H other than the first: its partial output leaves b2 out */
} rt_experts;

/* Per-layer activations kept for backward, (E, C, H) each (g only for SwiGLU). */
typedef struct {
    real *a, *g, *h;
} rt_expert_acts;

void experts_register(rt_experts *ex, rt_params *t, const char *prefix, int kind, long E, long M,
                      long H, double std, double std_out);
/* The experts [e0, e0 + E_local) of E_total, registered as EP shards of the whole tensors
 * (params_shard_since): the same names, shapes and initial values as on one rank. */
void experts_register_shard(rt_experts *ex, rt_params *t, const char *prefix, int kind,
                            long E_total, long e0, long E_local, long M, long H, double std,
                            double std_out);
/* The same on a slice of the hidden width: columns [h0, h0 + H_local) of H_total (of W1, W3,
 * b1; rows of W2), so that the slices' outputs sum to the whole FFN's (b2 is whole on every
 * slice and only the first adds it). dense: the dense FFN's tensor-parallel slice (RT_PART_MP,
 * E_total = E_local = 1, e0 = 0); else expert slices over ESP (RT_PART_EXPERT, rows over EP). */
void experts_register_slice(rt_experts *ex, rt_params *t, const char *prefix, int kind,
                            int dense, long E_total, long e0, long E_local, long M, long H_total,
                            long h0, long H_local, double std, double std_out);
/* Allocates acts for C slots per expert. */
fsmoe_status expert_acts_alloc(rt_expert_acts *a, const rt_experts *ex, rt_backend *be, long C);
void expert_acts_free(rt_expert_acts *a, rt_backend *be);

/* y[e, c0:c1] = FFN_e(x[e, c0:c1]); arrays have C slots per expert. fill (host, E entries, or
 * NULL = all C) is how many leading slots of each expert hold a token: slots at or after
 * fill[e] are skipped (no GEMM rows, no activation; y and acts keep whatever they held there),
 * which is exact because no token reads an empty slot's output and its gradient is zero. */
void experts_forward(const rt_experts *ex, rt_backend *be, rt_stream *s, const real *x, real *y,
                     const rt_expert_acts *acts, long C, long c0, long c1, const long *fill);
/* dx[e, c0:c1] = ∂/∂x (overwritten on the filled slots); parameter gradients accumulate. dh,
 * da, dg are scratch (E, C, H). fill as for the forward. */
void experts_backward(const rt_experts *ex, rt_backend *be, rt_stream *s, const real *dy,
                      const real *x, real *dx, const rt_expert_acts *acts, real *dh, real *da,
                      real *dg, long C, long c0, long c1, const long *fill);

/* The same on per-expert row ranges: expert e runs rows [r0[e], r1[e]) of its C slots (every
 * row in range holds a token; nothing else is touched). The MoE layer's chunks use this. */
void experts_forward_ranges(const rt_experts *ex, rt_backend *be, rt_stream *s, const real *x,
                            real *y, const rt_expert_acts *acts, long C, const long *r0,
                            const long *r1);
void experts_backward_ranges(const rt_experts *ex, rt_backend *be, rt_stream *s, const real *dy,
                             const real *x, real *dx, const rt_expert_acts *acts, real *dh,
                             real *da, real *dg, long C, const long *r0, const long *r1);

#endif
