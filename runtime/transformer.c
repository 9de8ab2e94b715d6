/* Implements: the MoE transformer's construction, forward and explicit backward (model.h). */
#include "transformer.h"
#include "trace.h"

#include "dist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DALLOC(p, n, cat)                                                                      \
    do {                                                                                       \
        if (!((p) = rt_alloc(md->be, (cat), (size_t)(n) * sizeof(**&(p)))))                     \
            goto nomem;                                                                        \
    } while (0)

/* x (B·L, M) summed over the MP group (the tensor-parallel blocks' partial results); nothing
 * without tensor parallelism. */
static void mp_sum(rt_model *md, real *x, const char *what)
{
    if (md->mp.size > 1)
        md->be->allreduce_sum(md->be, NULL, &md->mp, x, md->N * md->cfg.M, what);
}

/* The same as a task of the schedule graph (its MP AllReduce of generalised layer gl). */
static void mp_sum_task(rt_model *md, real *x, int phase, int gl, const char *what)
{
    if (md->mp.size == 1)
        return;
    long h = rt_trace_begin(md->trace, NULL, RT_TRACE_HOST, FSMOE_TASK_AR_MP, phase, gl, -1);
    mp_sum(md, x, what);
    rt_trace_end(md->trace, NULL, h);
}

static int gen_layer(const rt_model *md, long b)
{
    int gl = -1;
    for (long i = 0; i < b; i++)
        if (md->blocks[i].is_moe)
            gl = md->blocks[i].moe.index;
    return gl;
}

/* The graph's `head` task (embedding, final norm, LM head, loss; layer -1) and a block's
 * `elementwise` task (its norms and additions outside attention and FFN, labelled with the
 * generalised layer of its attention), as planner/sim_schedules.c places them. */
static long trace_head(rt_model *md, int phase)
{
    return rt_trace_begin(md->trace, NULL, RT_TRACE_HOST, FSMOE_TASK_HEAD, phase, -1, -1);
}

static long trace_elementwise(rt_model *md, int phase, int gl)
{
    return rt_trace_begin(md->trace, NULL, RT_TRACE_HOST, FSMOE_TASK_ELEMWISE, phase, gl, -1);
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
    /* tensor parallelism (Megatron): this rank's vocabulary slice of the embedding and the LM
     * head, its heads of the attention, its columns of the dense FFN; expert slicing: its
     * columns of every local expert */
    md->mp = dist ? dist_group(dist, RT_MP) : rt_group_single();
    long P = md->mp.size, Vl = V / P, v0 = md->mp.rank * Vl;
    md->V_local = Vl, md->v0 = v0;
    /* serial: one stream for both, so compute and communication run in issue order on the same
     * kind of worker as otherwise (only the overlap differs, not the threads). One rank has no
     * collective to overlap with: its streams run on the caller (backend.h stream_create) and
     * no kernel waits for a hand-off between threads (tiny-moe, one thread: about 10 % of the
     * step) */
    md->streams_on_caller = !dist || !dist->mpi;
    md->comp = be->stream_create(be, md->streams_on_caller);
    md->comm = c->serial ? md->comp : be->stream_create(be, md->streams_on_caller);
    md->grad = c->serial ? md->comp : be->stream_create(be, md->streams_on_caller);
    md->intra = c->serial ? md->comp : be->stream_create(be, md->streams_on_caller);
    if (!md->comp || !md->comm || !md->grad || !md->intra)
        goto nomem;
    double std = c->init_std, std_out = c->init_std / sqrt(2.0 * (double)nl); /* GPT-2 */
    rt_params *t = &md->params;
    md->blocks = calloc((size_t)nl, sizeof(rt_block));
    if (!md->blocks)
        goto nomem;
    params_add(t, &md->wte, &md->dwte, RT_INIT_NORMAL, std, (const long[]){Vl, M}, 2, "wte");
    if (P > 1)
        params_slice_dim(t, t->n - 1, 0, v0, V, RT_PART_MP);
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
        attention_register_mp(&bl->attn, t, pre, M, c->heads,
                              c->kv_heads > 0 ? c->kv_heads : c->heads, M / c->heads, md->mp, std,
                              std_out);
        pidx[3 * b + 1] = t->n;
        params_add(t, &bl->ln2w, &bl->dln2w, RT_INIT_ONE, 0, (const long[]){M}, 1, "h%ld.ln2.w", b);
        params_add(t, &bl->ln2b, &bl->dln2b, RT_INIT_ZERO, 0, (const long[]){M}, 1, "h%ld.ln2.b", b);
        bl->is_moe = config_is_moe_block(c, b);
        if (bl->is_moe) {
            rt_moe *m = &bl->moe;
            m->index = (int)moe_index++;
            m->M = M, m->E = c->E, m->N_max = N;
            m->ep = dist ? dist_group(dist, RT_EP) : rt_group_single();
            m->esp = dist ? dist_group(dist, RT_ESP) : rt_group_single();
            m->mpg = md->mp;
            m->epesp = dist ? dist_group(dist, RT_EP_ESP) : rt_group_single();
            m->dup = (int)P;
            m->dist = dist;
            m->comp = md->comp, m->comm = md->comm, m->intra = md->intra;
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
            m->gate.tok0 = m->tok0 = lay->sample0 * L;
            m->gate.N_global = md->N_global;
            snprintf(pre, sizeof pre, "h%ld.experts", b);
            long Hs = H / m->esp.size;
            experts_register_slice(&m->ex, t, pre, c->expert, 0, c->E, lay->expert0, lay->E_local,
                                   M, H, m->esp.rank * Hs, Hs, std, std_out);
        } else {
            snprintf(pre, sizeof pre, "h%ld.ffn", b);
            experts_register_slice(&bl->ffn, t, pre, c->expert, 1, 1, 0, 1, M, H,
                                   md->mp.rank * (H / P), H / P, std, std_out);
        }
        pidx[3 * b + 2] = t->n;
    }
    int head0 = t->n;
    params_add(t, &md->lnfw, &md->dlnfw, RT_INIT_ONE, 0, (const long[]){M}, 1, "lnf.w");
    params_add(t, &md->lnfb, &md->dlnfb, RT_INIT_ZERO, 0, (const long[]){M}, 1, "lnf.b");
    params_add(t, &md->head, &md->dhead, RT_INIT_NORMAL, std, (const long[]){M, Vl}, 2, "head");
    if (P > 1)
        params_slice_cols(t, t->n - 1, 1, &v0, &Vl, V, RT_PART_MP);
    fsmoe_status st = params_alloc(t, be, c->seed, err);
    if (st == FSMOE_OK)
        st = gsync_init(&md->gsync, be, dist, t, md->comm, md->grad, err);
    if (st != FSMOE_OK) {
        free(pidx);
        return st;
    }
    assign_ready(md, pidx, head0);
    free(pidx);
    const rt_moe *first_moe = NULL; /* its experts' backward temporaries serve every layer */
    for (long b = 0; b < nl; b++) {
        rt_block *bl = &md->blocks[b];
        DALLOC(bl->x_in, N * M, RT_MEM_ACTIVATIONS);
        DALLOC(bl->ln1, N * M, RT_MEM_ACTIVATIONS);
        DALLOC(bl->ln1_mean, N, RT_MEM_ACTIVATIONS);
        DALLOC(bl->ln1_rstd, N, RT_MEM_ACTIVATIONS);
        DALLOC(bl->attn_out, N * M, RT_MEM_ACTIVATIONS);
        DALLOC(bl->x_mid, N * M, RT_MEM_ACTIVATIONS);
        DALLOC(bl->ln2, N * M, RT_MEM_ACTIVATIONS);
        DALLOC(bl->ln2_mean, N, RT_MEM_ACTIVATIONS);
        DALLOC(bl->ln2_rstd, N, RT_MEM_ACTIVATIONS);
        DALLOC(bl->ffn_out, N * M, RT_MEM_ACTIVATIONS);
        if (attn_acts_alloc(&bl->aacts, &bl->attn, be, c->B, L) != FSMOE_OK)
            goto nomem;
        if (bl->is_moe) {
            if (moe_alloc(&bl->moe, be, first_moe) != FSMOE_OK)
                goto nomem;
            first_moe = first_moe ? first_moe : &bl->moe;
        } else if (expert_acts_alloc(&bl->facts, &bl->ffn, be, N) != FSMOE_OK) {
            goto nomem;
        }
    }
    DALLOC(md->x_out, N * M, RT_MEM_ACTIVATIONS);
    DALLOC(md->lnf, N * M, RT_MEM_ACTIVATIONS);
    DALLOC(md->lnf_mean, N, RT_MEM_ACTIVATIONS);
    DALLOC(md->lnf_rstd, N, RT_MEM_ACTIVATIONS);
    DALLOC(md->logits, N * Vl, RT_MEM_WORKSPACE);
    DALLOC(md->dlogits, N * Vl, RT_MEM_WORKSPACE);
    DALLOC(md->ce_stats, 3 * N, RT_MEM_WORKSPACE);
    DALLOC(md->ce_all, 3 * N * P, RT_MEM_WORKSPACE);
    DALLOC(md->losses, N, RT_MEM_WORKSPACE);
    DALLOC(md->tokens, N, RT_MEM_WORKSPACE);
    DALLOC(md->targets, N, RT_MEM_WORKSPACE);
    DALLOC(md->dres, N * M, RT_MEM_WORKSPACE);
    DALLOC(md->dln, N * M, RT_MEM_WORKSPACE);
    /* the dense FFN's backward temporaries, where a block has a dense FFN (SwiGLU's gate
     * gradient only for SwiGLU) */
    int dense = 0;
    for (long b = 0; b < nl; b++)
        dense |= !md->blocks[b].is_moe;
    if (dense) {
        DALLOC(md->dh, N * H, RT_MEM_WORKSPACE);
        DALLOC(md->da, N * H, RT_MEM_WORKSPACE);
        if (c->expert == 1)
            DALLOC(md->dg, N * H, RT_MEM_WORKSPACE);
    }
    if (attn_scratch_alloc(&md->ascr, &md->blocks[0].attn, be, c->B, L) != FSMOE_OK)
        goto nomem;
    md->h_losses = calloc((size_t)N, sizeof(real));
    md->h_tokens = calloc((size_t)N, sizeof(int));
    if (!md->h_losses || !md->h_tokens)
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
                rt_free(be, ps[i]);
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
    if (md->intra && md->intra != md->comp)
        be->stream_destroy(be, md->intra);
    if (md->comm && md->comm != md->comp)
        be->stream_destroy(be, md->comm);
    if (md->comp)
        be->stream_destroy(be, md->comp);
    void *ps[] = {md->x_out, md->lnf, md->lnf_mean, md->lnf_rstd, md->logits, md->dlogits,
                  md->losses, md->tokens, md->targets, md->dres, md->dln, md->dh, md->da, md->dg,
                  md->ce_stats, md->ce_all};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        if (ps[i])
            rt_free(be, ps[i]);
    attn_scratch_free(&md->ascr, be);
    params_free(&md->params, be);
    free(md->h_losses);
    free(md->h_tokens);
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
    /* the embedding's vocabulary slice: ids of other slices read a zero row; the position
     * embedding is added once, by MP member 0, before the sum over the group */
    const int *tok = tokens;
    if (md->mp.size > 1) {
        for (long n = 0; n < N; n++)
            md->h_tokens[n] = tokens[n] >= md->v0 && tokens[n] < md->v0 + md->V_local
                                  ? tokens[n] - (int)md->v0
                                  : -1;
        tok = md->h_tokens;
    }
    /* the tasks of the schedule graph that are not a block's GEMMs or collectives (task.h):
     * the embedding and head, and each block's norms and additions */
    long h = trace_head(md, FSMOE_PHASE_FWD);
    be->copy(be, NULL, md->tokens, tok, (size_t)N * sizeof(int), RT_H2D);
    be->copy(be, NULL, md->targets, targets, (size_t)N * sizeof(int), RT_H2D);
    be->embed_fwd(be, NULL, md->blocks[0].x_in, md->wte, md->mp.rank == 0 ? md->wpe : NULL,
                  md->tokens, B, L, M);
    mp_sum(md, md->blocks[0].x_in, "embedding allreduce (mp)");
    rt_trace_end(md->trace, NULL, h);
    md->aux = 0;
    for (long b = 0; b < c->layers; b++) {
        rt_block *bl = &md->blocks[b];
        real *x_next = b + 1 < c->layers ? md->blocks[b + 1].x_in : md->x_out;
        int gl = gen_layer(md, b);
        h = rt_trace_begin(md->trace, NULL, RT_TRACE_HOST, FSMOE_TASK_ATTN, FSMOE_PHASE_FWD, gl,
                           -1);
        be->layernorm_fwd(be, NULL, bl->ln1, bl->ln1_mean, bl->ln1_rstd, bl->x_in, bl->ln1w,
                          bl->ln1b, N, M);
        attention_forward(&bl->attn, be, NULL, bl->ln1, bl->attn_out, &bl->aacts, B, L);
        rt_trace_end(md->trace, NULL, h);
        mp_sum_task(md, bl->attn_out, FSMOE_PHASE_FWD, gl, "attention output allreduce (mp)");
        h = trace_elementwise(md, FSMOE_PHASE_FWD, gl);
        be->add(be, NULL, bl->x_mid, bl->x_in, bl->attn_out, N * M);
        be->layernorm_fwd(be, NULL, bl->ln2, bl->ln2_mean, bl->ln2_rstd, bl->x_mid, bl->ln2w,
                          bl->ln2b, N, M);
        rt_trace_end(md->trace, NULL, h);
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
            mp_sum_task(md, bl->ffn_out, FSMOE_PHASE_FWD, gl, "dense FFN output allreduce (mp)");
        }
        h = trace_elementwise(md, FSMOE_PHASE_FWD, gl);
        be->add(be, NULL, x_next, bl->x_mid, bl->ffn_out, N * M);
        rt_trace_end(md->trace, NULL, h);
    }
    h = trace_head(md, FSMOE_PHASE_FWD);
    be->layernorm_fwd(be, NULL, md->lnf, md->lnf_mean, md->lnf_rstd, md->x_out, md->lnfw,
                      md->lnfb, N, M);
    long Vl = md->V_local;
    be->gemm(be, NULL, 0, 0, N, Vl, M, 1, md->lnf, M, 0, md->head, Vl, 0, 0, md->logits, Vl, 0,
             1);
    /* the loss is the mean over the global batch: this rank's share of its gradient */
    real ce_scale = (real)(1.0 / (double)md->N_global);
    if (md->mp.size == 1) {
        be->crossent(be, NULL, md->losses, md->dlogits, md->logits, md->targets, N, V, ce_scale);
    } else { /* vocabulary-parallel: every member's row statistics, then each its columns */
        be->crossent_stats(be, NULL, md->ce_stats, md->logits, md->targets, N, Vl, md->v0);
        be->allgather(be, NULL, &md->mp, md->ce_all, md->ce_stats, 3 * N,
                      "cross-entropy statistics allgather (mp)");
        be->crossent_finish(be, NULL, md->losses, md->dlogits, md->logits, md->targets,
                            md->ce_all, md->mp.size, N, Vl, md->v0, ce_scale);
    }
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
    rt_trace_end(md->trace, NULL, h);
    md->ce = s / (double)md->N_global;
    md->loss = md->ce + c->aux_coef * md->aux;
    return rt_backend_check(be, err);
}

fsmoe_status model_backward(rt_model *md, fsmoe_error *err)
{
    rt_backend *be = md->be;
    const rt_config *c = &md->cfg;
    long B = c->B, L = c->L, M = c->M, V = md->V_local, N = md->N;
    /* LM head and final norm */
    long h = trace_head(md, FSMOE_PHASE_BWD);
    be->gemm(be, NULL, 1, 0, M, V, N, 1, md->lnf, M, 0, md->dlogits, V, 0, 1, md->dhead, V, 0, 1);
    be->gemm(be, NULL, 0, 1, N, M, V, 1, md->dlogits, V, 0, md->head, V, 0, 0, md->dln, M, 0, 1);
    mp_sum(md, md->dln, "LM head input-gradient allreduce (mp)");
    be->zero(be, NULL, md->dres, (size_t)(N * M) * sizeof(real));
    be->layernorm_bwd(be, NULL, md->dres, md->dlnfw, md->dlnfb, md->dln, md->x_out, md->lnf_mean,
                      md->lnf_rstd, md->lnfw, N, M);
    rt_trace_end(md->trace, NULL, h);
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
        int gl = gen_layer(md, b);
        /* x_next = x_mid + FFN(LN2(x_mid)): dres is ∂x_next */
        if (bl->is_moe) {
            gsync_at(gs, FSMOE_AT_DENSE_READY, cur);
            h = trace_elementwise(md, FSMOE_PHASE_BWD, gl);
            be->zero(be, NULL, md->dln, (size_t)(N * M) * sizeof(real));
            rt_trace_end(md->trace, NULL, h);
            fsmoe_status st = moe_backward(&bl->moe, be, md->dres, bl->ln2, md->dln, c->aux_coef);
            if (st != FSMOE_OK) {
                fsmoe_status bs = rt_backend_check(be, err);
                return bs != FSMOE_OK ? bs
                                      : fsmoe_fail(err, st, "MoE layer %d: backward failed",
                                                   bl->moe.index);
            }
        } else {
            h = rt_trace_begin(md->trace, NULL, RT_TRACE_HOST, FSMOE_TASK_FFN, FSMOE_PHASE_BWD, gl,
                               -1);
            experts_backward(&bl->ffn, be, NULL, md->dres, bl->ln2, md->dln, &bl->facts, md->dh,
                             md->da, bl->ffn.kind == 1 ? md->dg : NULL, N, 0, N, NULL);
            rt_trace_end(md->trace, NULL, h);
            mp_sum_task(md, md->dln, FSMOE_PHASE_BWD, gl,
                        "dense FFN input-gradient allreduce (mp)");
        }
        h = trace_elementwise(md, FSMOE_PHASE_BWD, gl);
        be->layernorm_bwd(be, NULL, md->dres, bl->dln2w, bl->dln2b, md->dln, bl->x_mid,
                          bl->ln2_mean, bl->ln2_rstd, bl->ln2w, N, M);
        rt_trace_end(md->trace, NULL, h);
        if (bl->is_moe) {
            gsync_at(gs, FSMOE_AT_MOE_READY, cur);
            cur = bl->moe.index - 1;
            gsync_at(gs, FSMOE_AT_WINDOW, cur);
        }
        /* x_mid = x_in + Attn(LN1(x_in)) */
        h = rt_trace_begin(md->trace, NULL, RT_TRACE_HOST, FSMOE_TASK_ATTN, FSMOE_PHASE_BWD, gl,
                           -1);
        be->zero(be, NULL, md->dln, (size_t)(N * M) * sizeof(real));
        attention_backward(&bl->attn, be, NULL, md->dres, bl->ln1, md->dln, &bl->aacts, &md->ascr,
                           B, L);
        rt_trace_end(md->trace, NULL, h);
        mp_sum_task(md, md->dln, FSMOE_PHASE_BWD, gl, "attention input-gradient allreduce (mp)");
        h = trace_elementwise(md, FSMOE_PHASE_BWD, gl);
        be->layernorm_bwd(be, NULL, md->dres, bl->dln1w, bl->dln1b, md->dln, bl->x_in,
                          bl->ln1_mean, bl->ln1_rstd, bl->ln1w, N, M);
        rt_trace_end(md->trace, NULL, h);
        if (b == early)
            gsync_at(gs, FSMOE_AT_EARLY_READY, -1);
    }
    h = trace_head(md, FSMOE_PHASE_BWD);
    be->embed_bwd(be, NULL, md->dwte, md->dwpe, md->dres, md->tokens, B, L, M);
    rt_trace_end(md->trace, NULL, h);
    /* the gradients of the global loss: replicated tensors summed over DP, expert shards over
     * EDP (the ranks holding the same experts), where the schedule puts them */
    gsync_at(gs, FSMOE_AT_DENSE_READY, -1);
    gsync_at(gs, FSMOE_AT_TAIL, -1);
    fsmoe_status gst = gsync_finish(gs, err);
    be->stream_sync(be, NULL);
    fsmoe_status bst = rt_backend_check(be, err);
    return bst != FSMOE_OK ? bst : gst;
}

fsmoe_status model_grad_norm(rt_model *md, double clip, double *norm, double *scale,
                             fsmoe_error *err)
{
    rt_backend *be = md->be;
    rt_params *p = &md->params;
    /* after the AllReduce, replicated tensors are equal on every rank: counted once; MP slices
     * summed over the MP group; expert slices over EP and ESP, expert tensors whole over ESP
     * once per ESP group */
    const long *e = p->part_end;
    double part[RT_PART_COUNT];
    for (int k = 0; k < RT_PART_COUNT; k++) {
        long a = k ? e[k - 1] : 0;
        part[k] = e[k] > a ? be->sumsq(be, NULL, p->g + a, e[k] - a) : 0.0;
    }
    int esp = md->dist ? md->dist->g[RT_ESP].size : 1;
    double sq[2] = {part[RT_PART_MP],
                    part[RT_PART_EXPERT] + part[RT_PART_EXPERT_REPLICA] / esp};
    if (md->dist) {
        fsmoe_status st = dist_sum_doubles(md->dist, RT_MP, sq, 1, "dense gradient norm (mp)",
                                           err);
        if (st == FSMOE_OK)
            st = dist_sum_doubles(md->dist, RT_ESP, sq + 1, 1, "expert gradient norm (esp)", err);
        if (st == FSMOE_OK)
            st = dist_sum_doubles(md->dist, RT_EP, sq + 1, 1, "expert gradient norm (ep)", err);
        if (st != FSMOE_OK)
            return st;
    }
    sq[0] += part[RT_PART_REPLICA];
    double n = sqrt(sq[0] + sq[1]);
    *scale = clip > 0 && n > clip ? clip / n : 1.0;
    *norm = n;
    return rt_backend_check(be, err);
}
