/* Implements: the MoE transformer of fsmoe-run (design.md §10): token + learned position
 * embedding; `layers` pre-LayerNorm blocks x += Attn(LN1(x)); x += FFN_or_MoE(LN2(x)); final
 * LayerNorm; LM head (untied); mean cross-entropy over B·L next-byte targets, plus
 * aux_coef·Σ auxiliary gate losses. Explicit forward and backward; all activations kept.
 * Dense blocks use one expert of the model's expert kind applied to every token.
 *
 * Tensor parallelism over the MP group (Megatron): the embedding and the LM head hold a
 * vocabulary slice each (the embedding's partial rows summed over the group, the cross-entropy
 * from every member's row statistics), the attention its heads, a dense FFN its columns of the
 * hidden width; each block's partial output and partial input gradient are summed over the
 * group, so every member holds the same activations. MoE layers slice their experts over ESP
 * (moe_layer.h). */
#ifndef RT_TRANSFORMER_H
#define RT_TRANSFORMER_H

#include "attention.h"
#include "backend.h"
#include "config.h"
#include "expert_ffn.h"
#include "grad_sync.h"
#include "moe_layer.h"
#include "params.h"

typedef struct {
    int is_moe;
    real *ln1w, *dln1w, *ln1b, *dln1b, *ln2w, *dln2w, *ln2b, *dln2b;
    rt_attention attn;
    rt_experts ffn; /* dense blocks (E = 1) */
    rt_moe moe;     /* MoE blocks */
    /* activations (N, M) unless noted */
    real *x_in, *ln1, *ln1_mean, *ln1_rstd, *attn_out, *x_mid, *ln2, *ln2_mean, *ln2_rstd, *ffn_out;
    rt_attn_acts aacts;
    rt_expert_acts facts; /* dense FFN, (1, N, H) */
} rt_block;

struct rt_dist;

typedef struct {
    rt_config cfg;
    rt_backend *be;
    const struct rt_dist *dist; /* NULL: one rank */
    long N_global;              /* tokens of the global batch (B·L·world) */
    rt_stream *comp, *comm;     /* the MoE layers' compute and communication streams */
    rt_stream *grad;            /* the Gradient-AllReduce's own stream (grad_sync.h) */
    rt_stream *intra;           /* the MoE layers' ESP AllGather / ReduceScatter stream */
    int streams_on_caller;      /* one rank: the streams run on the caller (backend.h) */
    rt_grad_sync gsync;         /* where the gradients are all-reduced (default: at the end) */
    struct rt_trace *trace;     /* NULL: not traced (trace.h) */
    rt_params params;
    rt_group mp;          /* tensor parallelism (one rank: none) */
    long V_local, v0;     /* this rank's vocabulary slice of the embedding and the LM head */
    long N; /* B·L */
    real *wte, *dwte, *wpe, *dwpe, *lnfw, *dlnfw, *lnfb, *dlnfb, *head, *dhead;
    rt_block *blocks;
    real *x_out, *lnf, *lnf_mean, *lnf_rstd, *logits, *dlogits, *losses;
    real *ce_stats, *ce_all; /* vocabulary-parallel cross-entropy: (N, 3), (mp, N, 3) */
    int *tokens, *targets; /* backend */
    /* backward scratch */
    real *dres, *dln, *dh, *da, *dg;
    rt_attn_scratch ascr;
    real *h_losses; /* host (N) */
    int *h_tokens;  /* host (N): token ids in this rank's vocabulary slice (-1: another's) */
    /* results of the last forward */
    double ce, aux, loss;
} rt_model;

/* Builds the model on `be` with parameters initialised from cfg->seed (one rank). */
fsmoe_status model_init(rt_model *md, const rt_config *cfg, rt_backend *be, fsmoe_error *err);
/* The same on one rank of a multi-rank run (dist NULL: one rank): cfg->B samples per rank,
 * this rank's experts only. Losses are means over the global batch; after model_backward the
 * gradients are those of the global loss (DP AllReduce of replicated tensors, EDP AllReduce of
 * expert shards), equal to the one-rank run's up to summation order. */
fsmoe_status model_init_dist(rt_model *md, const rt_config *cfg, rt_backend *be,
                             const struct rt_dist *dist, fsmoe_error *err);
/* Global gradient norm (replicated tensors counted once) and the factor that clips it to
 * `clip` (1 when clip is 0 or the norm is below it). The gradients are not touched: AdamW
 * applies the factor as it reads them (adamw_step). */
fsmoe_status model_grad_norm(rt_model *md, double clip, double *norm, double *scale,
                             fsmoe_error *err);
void model_free(rt_model *md);

/* Forward on tokens/targets (host arrays of B·L ints). training: gate noise on. step selects
 * the noise. Sets md->ce, md->aux, md->loss. */
fsmoe_status model_forward(rt_model *md, const int *tokens, const int *targets, int training,
                           long step, fsmoe_error *err);
/* Backward of the last forward: gradients accumulate into md->params.g (zero them first). */
fsmoe_status model_backward(rt_model *md, fsmoe_error *err);
void model_zero_grad(rt_model *md);
/* Routing held fixed (finite-difference tests). */
void model_freeze_routing(rt_model *md, int freeze);
/* Hooks on every MoE layer. */
void model_set_hook(rt_model *md, rt_hook_fn fn, void *user);
/* The Gradient-AllReduce tasks of the schedule (grad_sync.h; kept by reference; NULL, 0: all
 * after the backward on the default stream). */
fsmoe_status model_set_grad_tasks(rt_model *md, const rt_gar_task *t, int n, fsmoe_error *err);
/* Times every task of the following steps into tr (trace.h; NULL stops). */
void model_set_trace(rt_model *md, struct rt_trace *tr);

#endif
