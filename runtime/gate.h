/* Implements: the gate interface of the MoE layer and the routing it produces (design.md §10).
 *
 * A gate maps the layer input x (N, M) to a routing: for every filled capacity slot (e, c) of
 * the (E, C) expert buffers, the token it holds and the combine weight. Sparse gates (GShard
 * noisy top-k, sigmoid, X-MoE, expert-choice) describe it as A assignments (token, slot =
 * e·C + c, weight); SoftMoE is dense: every slot is a softmax mixture of all tokens (dispatch
 * matrix) and every token a softmax mixture of all slots (combine matrix), so it needs the
 * GShard (dense) order.
 *
 * Routing decisions (top-k, capacity, dropping) are made on the host from the logits; the
 * weights stay differentiable. `freeze` reuses the previous decisions and recomputes only the
 * weights (finite-difference tests hold routing fixed this way). Gate noise is a pure function
 * of (seed, step, layer, token, expert). */
#ifndef RT_GATE_H
#define RT_GATE_H

#include <stdint.h>

#include "backend.h"
#include "params.h"

typedef enum {
    RT_GATE_GSHARD = 0,
    RT_GATE_SIGMOID,
    RT_GATE_XMOE,
    RT_GATE_EXPERT_CHOICE,
    RT_GATE_SOFTMOE,
    RT_GATE_COUNT
} rt_gate_kind;

const char *gate_kind_name(rt_gate_kind k);
int gate_kind_from_name(const char *s); /* -1 when unknown */

typedef struct {
    long N, E, C; /* tokens, experts, slots per expert this step */
    long A;       /* sparse: assignments */
    int dense;
    /* host */
    int *tok, *slot;  /* (A) */
    real *w;          /* (A) combine weight */
    int *topk;        /* (N, k) chosen experts per token (token-choice gates) */
    int *slot_tok;    /* (E·C) token in each slot or -1 */
    double *dw;       /* (A) ∂L/∂w, filled by the order's backward */
    /* backend copies */
    int *d_tok, *d_slot, *d_slot_tok;
    real *d_w, *d_dw;
    /* dense matrices (N, E·C): dispatch and combine weights and their gradients */
    real *d_disp, *d_comb, *d_ddisp, *d_dcomb;
    /* statistics */
    long dropped;   /* token-expert pairs that found their expert full */
    long *load;     /* (E) tokens per expert */
    long C_global;  /* slots per expert for the global batch (the capacity; expert choice: the
                     * tokens each expert takes); 0: the gate has none (SoftMoE) */
} rt_routing;

typedef struct {
    rt_gate_kind kind;
    long M, E;
    int k;
    double f;        /* capacity factor; 0 = no dropping */
    double noise;    /* GShard: std of the Gaussian noise on logits while training */
    double tau;      /* X-MoE temperature */
    long D;          /* X-MoE projection dim */
    long layer;      /* for noise streams */
    real *wg, *dwg;  /* (M, E) or, SoftMoE, (M, E·S) with S fixed at registration */
    real *wp, *dwp;  /* X-MoE (M, D) */
    real *emb, *demb; /* X-MoE (E, D) */
    long slots;      /* SoftMoE: slots per expert and sequence */
    long L;          /* tokens per sequence (SoftMoE mixes within a sequence) */
    /* scratch (host and backend), sized for N_max */
    long N_max, C_max;
    real *d_logits, *d_dlogits, *d_proj, *d_dproj, *d_tmp;
    double *h_logits, *h_probs, *h_dlogits, *h_proj, *h_dproj, *h_emb, *h_demb;
    real *h_buf; /* staging */
    double aux;  /* auxiliary load-balancing loss of the last forward (unweighted) */
    /* Many ranks (design.md §10.1): the statistics are global. The ranks of the DP group hold
     * different tokens; this rank's token n is token tok0 + n of the N_global in the global
     * batch. Capacity (GShard: ceil(k·f·N_global/E), dropless: the largest global load) and
     * which tokens are dropped are decided over the global batch in global token order (first
     * choices of all tokens first, then second choices, …), so the same global batch is
     * routed the same whatever the world size; noise and the auxiliary loss use global token
     * indices and global means. dist NULL: one rank. */
    const struct rt_dist *dist;
    int group;       /* rt_group_kind holding the other tokens: RT_DP (MP members hold copies),
                      * RT_WORLD when the MP group splits its tokens (Parm's PauseMP) */
    long tok0, N_global;
    fsmoe_error dist_err; /* a failed collective of the last routing (status OK if none) */
    double *aux_grad_coef; /* (E) ∂aux/∂p[n,e]·N */
    double *h_stat;        /* (2E) per-expert statistics summed over the DP group */
    /* the routing's own tables, allocated once (a step allocates nothing): top-k counts,
     * prefixes and totals (3·k·E), kept flags (N·k), expert choice's token order (N), SoftMoE's
     * compacted dispatch and combine gradients (2·N·E·slots) */
    long *h_cnt;
    unsigned char *h_kept;
    int *h_order;
    double *h_compact;
} rt_gate;

/* Capacity C for N tokens (GShard: ceil(k·f·N/E), at least 1, at most N; f = 0: 0 here, the
 * routing decides). */
long gate_capacity(const rt_gate *g, long N);

void gate_register(rt_gate *g, rt_params *t, const char *prefix, rt_gate_kind kind, long M,
                   long E, int k, double f, long layer, long N_max, double std);
fsmoe_status gate_alloc(rt_gate *g, rt_routing *r, rt_backend *be);
void gate_free(rt_gate *g, rt_routing *r, rt_backend *be);

/* Computes the routing of x (N, M). training enables noise; seed/step select it. */
fsmoe_status gate_forward(rt_gate *g, rt_backend *be, rt_stream *s, const real *x, long N,
                          int training, uint64_t seed, long step, int freeze, rt_routing *r);
/* From r->dw (sparse) or r->d_ddisp/d_dcomb (dense) and aux_coef·∂aux: parameter gradients
 * accumulate, dx += ∂/∂x. */
void gate_backward(rt_gate *g, rt_backend *be, rt_stream *s, const real *x, real *dx,
                   double aux_coef, rt_routing *r);

/* Per-gate routing on host logits (gate_<name>.c). probs/dlogits are (N, E) doubles. */
void gate_topk_route(rt_gate *g, rt_routing *r, const double *probs, long N, int freeze,
                     int renormalise);
void gate_topk_weights_backward(const rt_gate *g, const rt_routing *r, const double *probs,
                                long N, int renormalise, double *dprobs);
void gate_softmax_rows(const double *logits, double *probs, long N, long E);
void gate_softmax_rows_backward(const double *probs, const double *dprobs, double *dlogits,
                                long N, long E);

void gate_gshard_route(rt_gate *g, rt_routing *r, long N, int training, uint64_t seed, long step,
                       int freeze);
void gate_gshard_backward(rt_gate *g, rt_routing *r, long N, double aux_coef);
void gate_sigmoid_route(rt_gate *g, rt_routing *r, long N, int freeze);
void gate_sigmoid_backward(rt_gate *g, rt_routing *r, long N);
void gate_xmoe_logits(rt_gate *g, long N);
void gate_xmoe_backward_logits(rt_gate *g, long N);
void gate_expert_choice_route(rt_gate *g, rt_routing *r, long N, int freeze);
void gate_expert_choice_backward(rt_gate *g, rt_routing *r, long N);
void gate_softmoe_route(rt_gate *g, rt_routing *r, long N);
long gate_softmoe_col(const rt_gate *g, long C, long n, long j);
void gate_softmoe_backward_compact(rt_gate *g, long N, const double *dD, const double *dCw);

#endif
