/* Implements: the MoE transformer's construction, forward and explicit backward (model.h). */
#include "transformer.h"
#include "trace.h"

#include "dist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DALLOC(p, n)                                                                           \
    do {                                                                                       \
        if (!((p) = md->be->alloc(md->be, (size_t)(n) * sizeof(**&(p)))))                      \
            goto nomem;                                                                        \
    } while (0)

static int gen_layer(const rt_model *md, long b)
{
    int gl = -1;
    for (long i = 0; i < b; i++)
        if (md->blocks[i].is_moe)
            gl = md->blocks[i].moe.index;
    return gl;
}

/* The last block whose attention belongs to the prefix (its output projection's gradients are
 * the prefix's early ones, sim_schedules.h); -1 when there is none. */
static long prefix_last_attention(const rt_model *md)
{
    long last = -1;
    for (long b = 0; b < md->cfg.layers && gen_layer(md, b) < 0; b++)
        last = b;
    return last;
}

/* When each tensor's gradient is final in the backward (grad_sync.h): pidx holds per block its
 * first tensor, the first after its attention and the first after the block; head0 the LM
 * head's first (final norm, head: with the last MoE layer's dense part, whose backward they
 * open). */
static void assign_ready(rt_model *md, const int *pidx, int head0)
{
    rt_grad_sync *gs = &md->gsync;
    long nl = md->cfg.layers, early = prefix_last_attention(md);
    int n_moe = 0;
    for (long b = 0; b < nl; b++)
        n_moe += md->blocks[b].is_moe;
    for (int i = 0; i < pidx[0]; i++) /* the embeddings: the prefix's, at its very end */
        gsync_assign(gs, i, FSMOE_AT_DENSE_READY, -1);
    for (long b = 0; b < nl; b++) {
        const rt_block *bl = &md->blocks[b];
        int gl = gen_layer(md, b);
        for (int i = pidx[3 * b]; i < pidx[3 * b + 1]; i++)
            gsync_assign(gs, i, b == early ? FSMOE_AT_EARLY_READY : FSMOE_AT_DENSE_READY, gl);
        for (int i = pidx[3 * b + 1]; i < pidx[3 * b + 2]; i++)
            gsync_assign(gs, i, bl->is_moe ? FSMOE_AT_MOE_READY : FSMOE_AT_DENSE_READY,
                         bl->is_moe ? bl->moe.index : gl);
    }
    for (int i = head0; i < md->params.n; i++)
        gsync_assign(gs, i, FSMOE_AT_DENSE_READY, n_moe - 1);
}

fsmoe_status model_init(rt_model *md, const rt_config *cfg, rt_backend *be, fsmoe_error *err)
{
    return model_init_dist(md, cfg, be, NULL, err);
}

fsmoe_status model_init_dist(rt_model *md, const rt_config *cfg, rt_backend *be,
                             const rt_dist *dist, fsmoe_error *err)
{
    memset(md, 0, sizeof(*md));
    md->cfg = *cfg;
    md->be = be;
    md->dist = dist;
    const rt_config *c = &md->cfg;
    long V = c->V, M = c->M, H = c->H, L = c->L, N = c->B * c->L, nl = c->layers;
    md->N = N;
    rt_layout one = layout_make(1, 0, 1, 1, c->E, c->B);
    const rt_layout *lay = dist ? &dist->layout : &one;
    md->N_global = lay->B_global * L;
    /* serial: one stream for both, so compute and communication run in issue order on the same
     * kind of worker as otherwise (only the overlap differs, not the threads) */
    md->comp = be->stream_create(be);
    md->comm = c->serial ? md->comp : be->stream_create(be);
    md->grad = c->serial ? md->comp : be->stream_create(be);
    if (!md->comp || !md->comm || !md->grad)
        goto nomem;
    double std = c->init_std, std_out = c->init_std / sqrt(2.0 * (double)nl); /* GPT-2 */
    rt_params *t = &md->params;
    md->blocks = calloc((size_t)nl, sizeof(rt_block));
    if (!md->blocks)
        goto nomem;
    params_add(t, &md->wte, &md->dwte, RT_INIT_NORMAL, std, (const long[]){V, M}, 2, "wte");
    params_add(t, &md->wpe, &md->dwpe, RT_INIT_NORMAL, std, (const long[]){L, M}, 2, "wpe");
    long moe_index = 0;
    /* per block: its first tensor, the first after its attention, the first after the block */
    int *pidx = calloc((size_t)(3 * nl), sizeof(int));
    if (!pidx)
        goto nomem;
    for (long b = 0; b < nl; b++) {
        rt_block *bl = &md->blocks[b];
        char pre[48];
        pidx[3 * b] = t->n;
        params_add(t, &bl->ln1w, &bl->dln1w, RT_INIT_ONE, 0, (const long[]){M}, 1, "h%ld.ln1.w", b);
        params_add(t, &bl->ln1b, &bl->dln1b, RT_INIT_ZERO, 0, (const long[]){M}, 1, "h%ld.ln1.b", b);
        snprintf(pre, sizeof pre, "h%ld.attn", b);
        attention_register(&bl->attn, t, pre, M, c->heads, c->kv_heads > 0 ? c->kv_heads : c->heads,
                           M / c->heads, std, std_out);
        pidx[3 * b + 1] = t->n;
        params_add(t, &bl->ln2w, &bl->dln2w, RT_INIT_ONE, 0, (const long[]){M}, 1, "h%ld.ln2.w", b);
        params_add(t, &bl->ln2b, &bl->dln2b, RT_INIT_ZERO, 0, (const long[]){M}, 1, "h%ld.ln2.b", b);
        bl->is_moe = config_is_moe_block(c, b);
        if (bl->is_moe) {
            rt_moe *m = &bl->moe;
            m->index = (int)moe_index++;
            m->M = M, m->E = c->E, m->N_max = N;
            m->ep = dist ? dist_group(dist, RT_EP) : rt_group_single();
            m->dist = dist;
            m->comp = md->comp, m->comm = md->comm;
            m->gsync = &md->gsync;
            m->r_fwd = m->r_bwd = c->r;
            m->order.kind = c->order;
            m->gate.noise = c->gate_noise;
            m->gate.tau = c->xmoe_tau;
            m->gate.L = L;
            m->gate.slots = c->softmoe_slots > 0
                                ? c->softmoe_slots
                                : (long)ceil((double)c->k * (c->f > 0 ? c->f : 1.0) *
                                             (double)L / (double)c->E);
            snprintf(pre, sizeof pre, "h%ld.gate", b);
            gate_register(&m->gate, t, pre, c->gate, M, c->E, c->k, c->f, b, N, std);
            m->gate.dist = dist;
            m->gate.tok0 = lay->sample0 * L;
            m->gate.N_global = md->N_global;
            snprintf(pre, sizeof pre, "h%ld.experts", b);
            experts_register_shard(&m->ex, t, pre, c->expert, c->E, lay->expert0, lay->E_local, M,
                                   H, std, std_out);
        } else {
            snprintf(pre, sizeof pre, "h%ld.ffn", b);
            experts_register(&bl->ffn, t, pre, c->expert, 1, M, H, std, std_out);
        }
        pidx[3 * b + 2] = t->n;
    }
    int head0 = t->n;
    params_add(t, &md->lnfw, &md->dlnfw, RT_INIT_ONE, 0, (const long[]){M}, 1, "lnf.w");
    params_add(t, &md->lnfb, &md->dlnfb, RT_INIT_ZERO, 0, (const long[]){M}, 1, "lnf.b");
    params_add(t, &md->head, &md->dhead, RT_INIT_NORMAL, std, (const long[]){M, V}, 2, "head");
    fsmoe_status st = params_alloc(t, be, c->seed, err);
    if (st == FSMOE_OK)
        st = gsync_init(&md->gsync, be, dist, t, md->comm, md->grad, err);
    if (st != FSMOE_OK) {
        free(pidx);
        return st;
    }
    assign_ready(md, pidx, head0);
    free(pidx);
    for (long b = 0; b < nl; b++) {
        rt_block *bl = &md->blocks[b];
        DALLOC(bl->x_in, N * M);
        DALLOC(bl->ln1, N * M);
        DALLOC(bl->ln1_mean, N);
        DALLOC(bl->ln1_rstd, N);
        DALLOC(bl->attn_out, N * M);
        DALLOC(bl->x_mid, N * M);
        DALLOC(bl->ln2, N * M);
        DALLOC(bl->ln2_mean, N);
        DALLOC(bl->ln2_rstd, N);
        DALLOC(bl->ffn_out, N * M);
        if (attn_acts_alloc(&bl->aacts, &bl->attn, be, c->B, L) != FSMOE_OK)
            goto nomem;
        if (bl->is_moe) {
            if (moe_alloc(&bl->moe, be) != FSMOE_OK)
                goto nomem;
        } else if (expert_acts_alloc(&bl->facts, &bl->ffn, be, N) != FSMOE_OK) {
            goto nomem;
        }
    }
    DALLOC(md->x_out, N * M);
    DALLOC(md->lnf, N * M);
    DALLOC(md->lnf_mean, N);
    DALLOC(md->lnf_rstd, N);
    DALLOC(md->logits, N * V);
    DALLOC(md->dlogits, N * V);
    DALLOC(md->losses, N);
    DALLOC(md->tokens, N);
    DALLOC(md->targets, N);
    DALLOC(md->dres, N * M);
    DALLOC(md->dln, N * M);
    DALLOC(md->dh, N * H);
    DALLOC(md->da, N * H);
    DALLOC(md->dg, N * H);
    if (attn_scratch_alloc(&md->ascr, &md->blocks[0].attn, be, c->B, L) != FSMOE_OK)
        goto nomem;
    md->h_losses = calloc((size_t)N, sizeof(real));
    if (!md->h_losses)
        goto nomem;
    return FSMOE_OK;
nomem:
    return fsmoe_fail(err, FSMOE_ERR_NOMEM, "model %s: out of memory", c->name);
}

void model_free(rt_model *md)
{
    rt_backend *be = md->be;
    if (!be)
        return;
    for (long b = 0; md->blocks && b < md->cfg.layers; b++) {
        rt_block *bl = &md->blocks[b];
        real *ps[] = {bl->x_in, bl->ln1, bl->ln1_mean, bl->ln1_rstd, bl->attn_out,
                      bl->x_mid, bl->ln2, bl->ln2_mean, bl->ln2_rstd, bl->ffn_out};
        for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
            if (ps[i])
                be->free(be, ps[i]);
        attn_acts_free(&bl->aacts, be);
        if (bl->is_moe)
            moe_free(&bl->moe, be);
        else
            expert_acts_free(&bl->facts, be);
    }
    free(md->blocks);
    gsync_free(&md->gsync);
    if (md->grad && md->grad != md->comp)
        be->stream_destroy(be, md->grad);
    if (md->comm && md->comm != md->comp)
        be->stream_destroy(be, md->comm);
    if (md->comp)
        be->stream_destroy(be, md->comp);
    void *ps[] = {md->x_out, md->lnf, md->lnf_mean, md->lnf_rstd, md->logits, md->dlogits,
                  md->losses, md->tokens, md->targets, md->dres, md->dln, md->dh, md->da, md->dg};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        if (ps[i])
            be->free(be, ps[i]);
    attn_scratch_free(&md->ascr, be);
    params_free(&md->params, be);
    free(md->h_losses);
    memset(md, 0, sizeof(*md));
}

void model_zero_grad(rt_model *md)
{
    md->be->zero(md->be, NULL, md->params.g, (size_t)md->params.total * sizeof(real));
}

void model_freeze_routing(rt_model *md, int freeze)
{
    for (long b = 0; b < md->cfg.layers; b++)
        md->blocks[b].moe.freeze = freeze;
}

fsmoe_status model_set_grad_tasks(rt_model *md, const rt_gar_task *t, int n, fsmoe_error *err)
{
    return gsync_set_tasks(&md->gsync, t, n, err);
}

void model_set_trace(rt_model *md, struct rt_trace *tr)
{
    md->trace = tr;
    md->gsync.trace = tr;
    for (long b = 0; b < md->cfg.layers; b++)
        md->blocks[b].moe.trace = tr;
}

/* The generalised layer block b's dense work belongs to (sim_schedules.h): the MoE layer before
 * it, -1 for the blocks before the first. */

void model_set_hook(rt_model *md, rt_hook_fn fn, void *user)
{
    for (long b = 0; b < md->cfg.layers; b++) {
        md->blocks[b].moe.hook = fn;
        md->blocks[b].moe.hook_user = user;
    }
}

fsmoe_status model_forward(rt_model *md, const int *tokens, const int *targets, int training,
                           long step, fsmoe_error *err)
{
    rt_backend *be = md->be;
    const rt_config *c = &md->cfg;
    long B = c->B, L = c->L, M = c->M, V = c->V, N = md->N;
    for (long n = 0; n < N; n++)
        if (tokens[n] < 0 || tokens[n] >= V || targets[n] < 0 || targets[n] >= V)
            return fsmoe_fail(err, FSMOE_ERR_VALUE, "token %d at position %ld outside the "
                              "vocabulary 0..%ld", tokens[n] < 0 || tokens[n] >= V ? tokens[n]
                              : targets[n], n, V - 1);
    be->copy(be, NULL, md->tokens, tokens, (size_t)N * sizeof(int), RT_H2D);
    be->copy(be, NULL, md->targets, targets, (size_t)N * sizeof(int), RT_H2D);
    be->embed_fwd(be, NULL, md->blocks[0].x_in, md->wte, md->wpe, md->tokens, B, L, M);
    md->aux = 0;
    for (long b = 0; b < c->layers; b++) {
        rt_block *bl = &md->blocks[b];
        real *x_next = b + 1 < c->layers ? md->blocks[b + 1].x_in : md->x_out;
        int gl = gen_layer(md, b);
        long h = rt_trace_begin(md->trace, NULL, RT_TRACE_HOST, FSMOE_TASK_ATTN, FSMOE_PHASE_FWD,
                                gl, -1);
        be->layernorm_fwd(be, NULL, bl->ln1, bl->ln1_mean, bl->ln1_rstd, bl->x_in, bl->ln1w,
                          bl->ln1b, N, M);
        attention_forward(&bl->attn, be, NULL, bl->ln1, bl->attn_out, &bl->aacts, B, L);
        be->add(be, NULL, bl->x_mid, bl->x_in, bl->attn_out, N * M);
        rt_trace_end(md->trace, NULL, h);
        be->layernorm_fwd(be, NULL, bl->ln2, bl->ln2_mean, bl->ln2_rstd, bl->x_mid, bl->ln2w,
                          bl->ln2b, N, M);
        if (bl->is_moe) {
            fsmoe_status st = moe_forward(&bl->moe, be, bl->ln2, bl->ffn_out, N, training,
                                          c->seed, step);
            if (st != FSMOE_OK) {
                fsmoe_status bs = rt_backend_check(be, err);
                return bs != FSMOE_OK ? bs
                                      : fsmoe_fail(err, st, "MoE layer %d: forward failed (%s)",
                                                   bl->moe.index, fsmoe_strerror(st));
            }
            md->aux += bl->moe.gate.aux;
        } else {
            h = rt_trace_begin(md->trace, NULL, RT_TRACE_HOST, FSMOE_TASK_FFN, FSMOE_PHASE_FWD, gl,
                               -1);
            experts_forward(&bl->ffn, be, NULL, bl->ln2, bl->ffn_out, &bl->facts, N, 0, N, NULL);
            rt_trace_end(md->trace, NULL, h);
        }
        be->add(be, NULL, x_next, bl->x_mid, bl->ffn_out, N * M);
    }
    be->layernorm_fwd(be, NULL, md->lnf, md->lnf_mean, md->lnf_rstd, md->x_out, md->lnfw,
                      md->lnfb, N, M);
    be->gemm(be, NULL, 0, 0, N, V, M, 1, md->lnf, M, 0, md->head, V, 0, 0, md->logits, V, 0, 1);
    /* the loss is the mean over the global batch: this rank's share of its gradient */
    be->crossent(be, NULL, md->losses, md->dlogits, md->logits, md->targets, N, V,
                 (real)(1.0 / (double)md->N_global));
    be->copy(be, NULL, md->h_losses, md->losses, (size_t)N * sizeof(real), RT_D2H);
    be->stream_sync(be, NULL);
    double s = 0;
    for (long n = 0; n < N; n++)
        s += (double)md->h_losses[n];
    if (md->dist) {
        fsmoe_status st = dist_sum_doubles(md->dist, RT_DP, &s, 1, "loss sum (dp)", err);
        if (st != FSMOE_OK)
            return st;
    }
    md->ce = s / (double)md->N_global;
    md->loss = md->ce + c->aux_coef * md->aux;
    return rt_backend_check(be, err);
}

fsmoe_status model_backward(rt_model *md, fsmoe_error *err)
{
    rt_backend *be = md->be;
    const rt_config *c = &md->cfg;
    long B = c->B, L = c->L, M = c->M, V = c->V, N = md->N;
    /* LM head and final norm */
    be->gemm(be, NULL, 1, 0, M, V, N, 1, md->lnf, M, 0, md->dlogits, V, 0, 1, md->dhead, V, 0, 1);
    be->gemm(be, NULL, 0, 1, N, M, V, 1, md->dlogits, V, 0, md->head, V, 0, 0, md->dln, M, 0, 1);
    be->zero(be, NULL, md->dres, (size_t)(N * M) * sizeof(real));
    be->layernorm_bwd(be, NULL, md->dres, md->dlnfw, md->dlnfb, md->dln, md->x_out, md->lnf_mean,
                      md->lnf_rstd, md->lnfw, N, M);
    /* the Gradient-AllReduce's anchors (grad_sync.h), generalised layer by layer: WINDOW, its
     * dense part, DENSE_READY, the MoE layer (DISPATCHED inside), MOE_READY */
    rt_grad_sync *gs = &md->gsync;
    gsync_begin(gs);
    int cur = -1;
    for (long b = 0; b < c->layers; b++)
        if (md->blocks[b].is_moe)
            cur = md->blocks[b].moe.index;
    long early = prefix_last_attention(md);
    gsync_at(gs, FSMOE_AT_WINDOW, cur);
    for (long b = c->layers - 1; b >= 0; b--) {
        rt_block *bl = &md->blocks[b];
        /* x_next = x_mid + FFN(LN2(x_mid)): dres is ∂x_next */
        if (bl->is_moe) {
            gsync_at(gs, FSMOE_AT_DENSE_READY, cur);
            be->zero(be, NULL, md->dln, (size_t)(N * M) * sizeof(real));
            fsmoe_status st = moe_backward(&bl->moe, be, md->dres, bl->ln2, md->dln, c->aux_coef);
            if (st != FSMOE_OK) {
                fsmoe_status bs = rt_backend_check(be, err);
                return bs != FSMOE_OK ? bs
                                      : fsmoe_fail(err, st, "MoE layer %d: backward failed",
                                                   bl->moe.index);
            }
        } else {
            long h = rt_trace_begin(md->trace, NULL, RT_TRACE_HOST, FSMOE_TASK_FFN,
                                    FSMOE_PHASE_BWD, gen_layer(md, b), -1);
            experts_backward(&bl->ffn, be, NULL, md->dres, bl->ln2, md->dln, &bl->facts, md->dh,
                             md->da, bl->ffn.kind == 1 ? md->dg : NULL, N, 0, N, NULL);
            rt_trace_end(md->trace, NULL, h);
        }
        be->layernorm_bwd(be, NULL, md->dres, bl->dln2w, bl->dln2b, md->dln, bl->x_mid,
                          bl->ln2_mean, bl->ln2_rstd, bl->ln2w, N, M);
        if (bl->is_moe) {
            gsync_at(gs, FSMOE_AT_MOE_READY, cur);
            cur = bl->moe.index - 1;
            gsync_at(gs, FSMOE_AT_WINDOW, cur);
        }
        /* x_mid = x_in + Attn(LN1(x_in)) */
        long h = rt_trace_begin(md->trace, NULL, RT_TRACE_HOST, FSMOE_TASK_ATTN, FSMOE_PHASE_BWD,
                                gen_layer(md, b), -1);
        be->zero(be, NULL, md->dln, (size_t)(N * M) * sizeof(real));
        attention_backward(&bl->attn, be, NULL, md->dres, bl->ln1, md->dln, &bl->aacts, &md->ascr,
                           B, L);
        be->layernorm_bwd(be, NULL, md->dres, bl->dln1w, bl->dln1b, md->dln, bl->x_in,
                          bl->ln1_mean, bl->ln1_rstd, bl->ln1w, N, M);
        rt_trace_end(md->trace, NULL, h);
        if (b == early)
            gsync_at(gs, FSMOE_AT_EARLY_READY, -1);
    }
    be->embed_bwd(be, NULL, md->dwte, md->dwpe, md->dres, md->tokens, B, L, M);
    /* the gradients of the global loss: replicated tensors summed over DP, expert shards over
     * EDP (the ranks holding the same experts), where the schedule puts them */
    gsync_at(gs, FSMOE_AT_DENSE_READY, -1);
    gsync_at(gs, FSMOE_AT_TAIL, -1);
    fsmoe_status gst = gsync_finish(gs, err);
    be->stream_sync(be, NULL);
    fsmoe_status bst = rt_backend_check(be, err);
    return bst != FSMOE_OK ? bst : gst;
}

fsmoe_status model_clip_grads(rt_model *md, double clip, double *norm, fsmoe_error *err)
{
    rt_backend *be = md->be;
    rt_params *p = &md->params;
    /* replicated tensors are equal on every rank after the AllReduce: counted once; every EP
     * group holds each expert once */
    double sq[2] = {be->sumsq(be, NULL, p->g, p->dense_total),
                    be->sumsq(be, NULL, p->g + p->dense_total, p->total - p->dense_total)};
    if (md->dist) {
        fsmoe_status st = dist_sum_doubles(md->dist, RT_EP, sq + 1, 1,
                                           "expert gradient norm (ep)", err);
        if (st != FSMOE_OK)
            return st;
    }
    double n = sqrt(sq[0] + sq[1]);
    if (clip > 0 && n > clip)
        be->scale(be, NULL, p->g, (real)(clip / n), p->total);
    *norm = n;
    return rt_backend_check(be, err);
}
