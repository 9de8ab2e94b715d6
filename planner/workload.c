/* Implements: the per-GPU workloads and times of one MoE layer and the dense blocks around it
 * (FSMoE §4 workloads, design.md §3–§5), on the α-β cost model of libfsmoe/cost.h.
 *
 * FSMoE's ESP pipeline as the paper ran it (and Tutel, which it extends): the B·L tokens on a
 * GPU are duplicated over its MP group (Megatron tensor parallelism of the attention) and enter
 * the MoE layer as they are — nothing removes the duplicates:
 *   n_a2a = k·f·B·L·M·b                    bytes per AllToAll (0 when N_EP = 1)
 *   n_ag  = n_rs = N_ESP·k·f·B·L·M·b       bytes, the gathered output (0 when N_ESP = 1)
 *   n_exp = k·f·B·L·M·H·n_gemm             MACs (N_ESP·k·f·B·L tokens on an H/N_ESP shard)
 *   T     = k·f·B·L / E                    tokens per expert (capacity)
 * n_gemm = 2 for a GPT FFN, 3 for SwiGLU. The per-GPU cost of this layer does not depend on
 * N_MP; N_MP enters where a schedule removes the duplicates (Parm's S1/S2, DeepSpeed's
 * drop_tokens, MoNTA's O1–O3: their files divide by N_MP) and in the attention.
 *
 * Evidence (FSMoE Table 2: B = 4, L = 1024, k = 2, f = 1.2 as in §6, fp32; measured time over
 * the time Fig. 5's lines give for the two readings; design.md first divided n_a2a and n_exp by
 * N_ESP and did not multiply n_ag):
 *                       this reading          the ÷N_ESP reading
 *   AllToAll            0.92–1.13 (A and B)   4.1–7.0
 *   expert              0.39–0.76             2.8–4.7
 *   AllGather/RS, B     1.46–1.51             5.8–6.0
 *   AllGather/RS, A     0.16–0.18             1.15–1.40
 * The AllToAll and the expert settle it: neither shrinks with N_ESP (A has N_ESP = 8, B 4).
 * Testbed A's AllGather/ReduceScatter fit neither reading of its Fig. 5 lines consistently with
 * B's (see clusters/testbed-a.yaml); B's, where the paper's lines and Table 2 agree, is kept.
 *
 * Backward (FSMoE §4.4 says "α_exp, β_exp and n_exp are doubled"): taken literally that doubles
 * β·n twice, i.e. quadruples the expert's MAC time. Physically the backward of each GEMM is two
 * GEMMs of the same size (input gradient and weight gradient): twice the GEMM calls (α_exp × 2)
 * and twice the MACs (n_exp × 2) at the same time per MAC (β_exp × 1). We implement that, so the
 * backward expert takes 2× the forward, as design.md §3 states ("backward = 2× forward").
 *
 * Dense blocks are GEMM-only estimates (element-wise work ignored) plus the tensor-parallel
 * AllReduce of the block output on the MP group (Megatron: one per attention block and one per
 * dense FFN block in each direction). Relies on: libfsmoe cost.h, parallel.h, model.h. */
#include "workload.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "a2a_2dh.h"

void workload_shape_from_model(const fsmoe_model *m, workload_shape *out)
{
    memset(out, 0, sizeof *out);
    out->B = m->B;
    out->L = m->L;
    out->M = m->M;
    out->H = m->H;
    out->heads = m->heads;
    out->kv_heads = m->kv_heads > 0 ? m->kv_heads : m->heads;
    out->E = m->E;
    out->vocab = m->vocab;
    out->k = m->k;
    out->f = m->f;
    out->expert = m->expert;
    out->gate = strcmp(m->gate, "xmoe") == 0      ? WORKLOAD_GATE_XMOE
                : strcmp(m->gate, "softmoe") == 0 ? WORKLOAD_GATE_SOFTMOE
                                                  : WORKLOAD_GATE_LINEAR;
    out->order = strcmp(m->order, "gshard") == 0 ? WORKLOAD_ORDER_GSHARD : WORKLOAD_ORDER_TUTEL;
    out->bytes_per_element = m->bytes_per_element;
}

double workload_routed_copies(const workload_shape *s)
{
    const double f = s->f > 0.0 ? s->f : 1.0; /* "none": planned as balanced routing */
    return s->k * f * (double)s->B * (double)s->L;
}

double workload_ran_copies(const workload_shape *s)
{
    return (s->run_rows > 0.0 ? s->run_rows : 1.0) * workload_routed_copies(s);
}

double workload_elementwise_s(const workload_lines *w, int passes, double arrays, double n)
{
    if (!w->have_copy || !(n > 0.0))
        return 0.0;
    double bytes = arrays * n / 2.0; /* what a copy of the same traffic copies */
    const fsmoe_cost_entry *e = w->copy.entry;
    if (passes < 1)
        return w->copy.beta_s * bytes;
    if (e) /* each pass at its own size, from the measured points (its line beyond them) */
        return passes * fsmoe_entry_time_interp(e, bytes / passes);
    return passes * w->copy.alpha_s + w->copy.beta_s * bytes;
}

/* A collective of a few bytes on line l that the ranks reach together (no sync latency): the
 * line's α less the sync latency, or the time measured at the line's smallest size where that
 * is less — a collective does not get faster as its message grows, so a few bytes cost at most
 * what the smallest measured message did. A line's α is where it meets n = 0, fitted mostly on
 * large messages; on the emulated 2 x 2 cluster the world AllReduce's line over 16 KB-24 MB
 * met it at 4.2 ms (the time stepped from 2.7 to 8.5 ms between 128 and 256 KB) where 16 KB
 * took 1.4 ms. */
static double small_collective_s(const workload_lines *w, const fsmoe_line *l)
{
    double t = l->alpha_s > w->sync_s ? l->alpha_s - w->sync_s : 0.0;
    const fsmoe_cost_entry *e = l->entry;
    if (e && e->n_points > 0 && e->points[0].seconds < t)
        t = e->points[0].seconds;
    return t;
}

double workload_optimizer_s(const workload_lines *w, double param_bytes)
{
    /* the norm's partial sums over MP, ESP and EP: a few bytes each (small_collective_s; a
     * zero line where the group has one member; EP: its AllReduce line, or its AllToAll's). The
     * ranks reach them together — they leave the step's last Gradient-AllReduce and each sums
     * the squares of an equal share — so no arrival skew: on the emulated 2 x 2 cluster the
     * optimizer task measured 3.4-4.1 ms per step against 11.8 predicted with the skew
     * (2.5 ms) in each of the three. */
    double norm_sums = small_collective_s(w, &w->ar_mp) + small_collective_s(w, &w->ar_esp) +
                       small_collective_s(w, &w->ar_ep);
    return workload_elementwise_s(w, 2, 9.0, param_bytes) + norm_sums;
}

double workload_param_bytes(const workload_layer *wl, long blocks, long moe_layers)
{
    return (double)blocks * wl->attn_grad_bytes +
           (double)(blocks - moe_layers) * wl->ffn_grad_bytes +
           (double)moe_layers * (wl->gate_grad_bytes + wl->expert_param_bytes) +
           wl->embed_grad_bytes + wl->head_grad_bytes;
}

const workload_routing *workload_route(const workload_layer *wl, int pausemp)
{
    return pausemp ? &wl->route_own : &wl->route;
}

double workload_order_s(const workload_layer *wl, const workload_routing *r, workload_order o,
                        int bwd, int combine)
{
    /* runtime/order_gshard.c: forward one GEMM each; backward the combine two (its input's
     * gradient and its weights'), the dispatch one (its input's), two where the routing is
     * dense and learnt (SoftMoE: the dispatch matrix has a gradient too) */
    if (o == WORKLOAD_ORDER_GSHARD)
        return (!bwd ? 1.0 : combine ? 2.0 : wl->order_dispatch_bwd_gemms) * r->order_einsum_s +
               (!bwd && !combine ? r->order_dense_build_s : 0.0) +
               (bwd && combine ? r->order_dense_dw_s : 0.0);
    return combine ? r->order_tutel_combine_s : r->order_tutel_dispatch_s;
}

double workload_routing_s(const workload_layer *wl, const workload_routing *r, workload_order o,
                          int bwd)
{
    return (bwd ? r->gate_bwd_s : r->gate_fwd_s) + workload_order_s(wl, r, o, bwd, 0) +
           workload_order_s(wl, r, o, bwd, 1);
}

double workload_route_own_saving_s(const workload_layer *wl, workload_order o, int bwd)
{
    return workload_routing_s(wl, &wl->route_own, o, bwd) -
           workload_routing_s(wl, &wl->route, o, bwd);
}

workload_extra workload_extra_time(const workload_layer *wl, const workload_lines *w, long blocks,
                                   long moe_layers, workload_order o)
{
    return (workload_extra){
        .fwd_s = (double)moe_layers * workload_routing_s(wl, &wl->route, o, 0) +
                 (double)blocks * wl->elem_fwd_s + wl->head_fwd_s,
        .bwd_s = (double)moe_layers * workload_routing_s(wl, &wl->route, o, 1) +
                 (double)blocks * wl->elem_bwd_s + wl->head_bwd_s,
        .tail_s = workload_optimizer_s(w, workload_param_bytes(wl, blocks, moe_layers)),
    };
}

/* The line of `op` for logical group g: a zero line when the group has one member (nothing is
 * communicated), else the profile's line on the tier the group spans at the group's size
 * (measured there, or scaled from the sizes measured: cost.h, noted in w->notes). */
static fsmoe_status group_line(const fsmoe_cluster *c, const char *path, const fsmoe_parallel *par,
                               fsmoe_group g, fsmoe_op op, fsmoe_line *out, workload_lines *w,
                               fsmoe_error *err)
{
    int size = fsmoe_group_size(par, g);
    if (size <= 1) {
        *out = fsmoe_line_zero();
        return FSMOE_OK;
    }
    return fsmoe_cost_line_at(c, path, op, fsmoe_group_tier(par, g), size, out, w->notes,
                              sizeof w->notes, err);
}

fsmoe_status workload_lines_init(const fsmoe_cluster *c, const char *cluster_path,
                                 const fsmoe_parallel *par, const workload_shape *shape,
                                 workload_lines *out, fsmoe_error *err)
{
    memset(out, 0, sizeof *out);
    /* Where each needed collective's line goes; the (op, group) pairs are libfsmoe's
     * (cost.h), the same that fsmoe-bench measures. */
    fsmoe_line *dst[FSMOE_NEED_COUNT] = {
        [FSMOE_NEED_A2A_EP] = &out->a2a_ep,   [FSMOE_NEED_A2A_EP_ESP] = &out->a2a_ep_esp,
        [FSMOE_NEED_AG_ESP] = &out->ag_esp,   [FSMOE_NEED_AG_MP] = &out->ag_mp,
        [FSMOE_NEED_RS_ESP] = &out->rs_esp,   [FSMOE_NEED_AR_ESP] = &out->ar_esp,
        [FSMOE_NEED_AR_MP] = &out->ar_mp,     [FSMOE_NEED_AR_DP] = &out->ar_dp,
    };
    /* Every collective a step issues comes after computation: the ranks' arrival skew
     * (cluster.h interference.sync_s) adds to its α. */
    out->sync_s = c->interference.present ? c->interference.sync_s : 0.0;
    out->sync_growth = c->interference.present ? c->interference.sync_growth : 0.0;
    out->sync_growth_from_s = c->interference.present ? c->interference.sync_growth_from_s : 0.0;
    for (int i = 0; i < FSMOE_NEED_COUNT; i++) {
        fsmoe_status st = group_line(c, cluster_path, par, fsmoe_comm_needs[i].group,
                                     fsmoe_comm_needs[i].op, dst[i], out, err);
        if (st != FSMOE_OK)
            return st;
        if (fsmoe_group_size(par, fsmoe_comm_needs[i].group) > 1)
            dst[i]->alpha_s += out->sync_s;
    }
    /* The norm's sum over EP is an AllReduce: priced on its own line where the profile has
     * AllReduce on EP's tier. Before, always the EP AllToAll's α: on the emulated 2 x 2 cluster
     * (dp 4, ep 4) that put tiny-moe's optimizer task at 2.4 ms, 1.7 ms of it the AllToAll's α,
     * against 0.65 ms measured; the world AllReduce measured there has α = 0. */
    if (fsmoe_group_size(par, FSMOE_GROUP_EP) > 1 &&
        c->ops[FSMOE_OP_ALLREDUCE][fsmoe_group_tier(par, FSMOE_GROUP_EP)].present) {
        fsmoe_status st = group_line(c, cluster_path, par, FSMOE_GROUP_EP, FSMOE_OP_ALLREDUCE,
                                     &out->ar_ep, out, err);
        if (st != FSMOE_OK)
            return st;
        out->ar_ep.alpha_s += out->sync_s;
    } else {
        out->ar_ep = out->a2a_ep;
    }
    /* SAA = EP&ESP AllToAll run together with the MP AllGather; measured on the EP&ESP tier.
     * When EP&ESP has a single member there is no AllToAll and SAA degenerates to the MP
     * AllGather alone; when MP has one, there is no AllGather and it is the AllToAll alone
     * (fsmoe-bench measures SAA only beside an MP AllGather). */
    fsmoe_status st = FSMOE_OK;
    const int n_x = fsmoe_group_size(par, FSMOE_GROUP_EP_ESP);
    if (n_x > 1 && fsmoe_group_size(par, FSMOE_GROUP_MP) <= 1) {
        out->saa = out->a2a_ep_esp; /* its sync latency included */
    } else if (n_x > 1) {
        st = fsmoe_cost_line_at(c, cluster_path, FSMOE_OP_SAA,
                                fsmoe_group_tier(par, FSMOE_GROUP_EP_ESP),
                                fsmoe_group_size(par, FSMOE_GROUP_EP_ESP), &out->saa, out->notes,
                                sizeof out->notes, err);
        out->saa.alpha_s += out->sync_s;
    } else {
        out->saa = out->ag_mp; /* its sync latency included */
    }
    if (st != FSMOE_OK)
        return st;
    /* GEMMs at the shapes they run at: an expert slice is M × H/N_ESP, a dense FFN slice
     * M × H/N_MP (attention and the gate use the dense line) */
    double M = shape ? (double)shape->M : 0.0, H = shape ? (double)shape->H : 0.0;
    int esp = par->esp > 0 ? par->esp : 1, mp = par->mp > 0 ? par->mp : 1;
    double d = shape && shape->heads > 0 ? M / (double)shape->heads : 0.0;
    double L = shape ? (double)shape->L : 0.0;
    if ((st = fsmoe_cost_line_gemm(c, cluster_path, M, H / esp, &out->gemm, out->notes,
                                   sizeof out->notes, err)) ||
        (st = fsmoe_cost_line_gemm(c, cluster_path, M, H / mp, &out->gemm_dense, out->notes,
                                   sizeof out->notes, err)) ||
        (st = fsmoe_cost_line_gemm(c, cluster_path, d, L, &out->gemm_scores, out->notes,
                                   sizeof out->notes, err)))
        return st;
    /* The device copy only matters to MoNTA's O2/O3; a profile without it plans them with a
     * free copy (have_copy = 0 tells the caller). */
    out->comm_slowdown = c->interference.present ? c->interference.comm_slowdown : 1.0;
    out->compute_slowdown = c->interference.present ? c->interference.compute_slowdown : 1.0;
    out->host_ranks = c->host.present ? c->host.ranks : 0;
    out->host_cores = c->host.present ? c->host.cores : 0;
    out->host_at_once = c->host.present ? c->host.ranks_at_once : 0;
    out->have_copy = c->ops[FSMOE_OP_COPY][FSMOE_TIER_LOCAL].present;
    if (out->have_copy) {
        st = fsmoe_cost_line(c, cluster_path, FSMOE_OP_COPY, FSMOE_TIER_LOCAL, &out->copy,
                             out->notes, sizeof out->notes, err);
        if (st != FSMOE_OK)
            return st;
    } else {
        out->copy = fsmoe_line_zero();
    }
    return FSMOE_OK;
}

int workload_group_2dh(const fsmoe_parallel *par, fsmoe_group g, int *nodes, int *locals)
{
    fsmoe_a2a_2dh_shape sh; /* only the AllToAll's groups run it */
    if ((g != FSMOE_GROUP_EP && g != FSMOE_GROUP_EP_ESP) || !fsmoe_a2a_2dh_group(par, g, &sh))
        return 0;
    if (nodes)
        *nodes = sh.nodes;
    if (locals)
        *locals = sh.locals;
    return 1;
}

fsmoe_status workload_lines_2dh(const fsmoe_cluster *c, const char *cluster_path,
                                const fsmoe_parallel *par, const workload_lines *w,
                                workload_lines *out, fsmoe_error *err)
{
    *out = *w;
    out->notes[0] = '\0';
    out->a2a_ep_2dh = out->a2a_ep_esp_2dh = 0;
    const struct {
        fsmoe_group g;
        fsmoe_line *line;
        int *flag;
    } groups[] = {{FSMOE_GROUP_EP, &out->a2a_ep, &out->a2a_ep_2dh},
                  {FSMOE_GROUP_EP_ESP, &out->a2a_ep_esp, &out->a2a_ep_esp_2dh}};
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        int nodes, locals;
        if (!workload_group_2dh(par, groups[i].g, &nodes, &locals))
            continue;
        fsmoe_status st = fsmoe_cost_line_2dh(c, cluster_path, nodes, locals, groups[i].line,
                                              out->notes, sizeof out->notes, err);
        if (st != FSMOE_OK)
            return st;
        groups[i].line->alpha_s += out->sync_s; /* as the flat line's (workload_lines_init) */
        *groups[i].flag = 1;
        const fsmoe_cost_entry *e = groups[i].line->entry;
        if (e) { /* measured at this size: say which fit (derived and scaled lines say so) */
            char line[256];
            snprintf(line, sizeof line,
                     "alltoall_2dh world (%d nodes x %d): measured at %d ranks (profile line %d, "
                     "r2 %.4g)",
                     nodes, locals, e->ranks, e->line, e->r2);
            fsmoe_note_add(out->notes, sizeof out->notes, line);
        }
    }
    return FSMOE_OK;
}

double workload_min_chunk(const fsmoe_line *l)
{
    double m = WORKLOAD_MIN_CHUNK_BYTES;
    if (l && l->entry && l->entry->n_points > 0 && l->entry->points[0].n > m)
        m = l->entry->points[0].n;
    return m;
}

int workload_r_max(double tokens_per_expert, double n_a2a, double min_chunk_bytes)
{
    double r = PIPELINE_R_CAP;
    double by_tokens = floor(tokens_per_expert);       /* ≥ 1 token per expert per chunk */
    if (by_tokens < r)
        r = by_tokens;
    if (n_a2a > 0.0) {                                 /* no AllToAll: no message bound */
        double by_bytes = floor(n_a2a / min_chunk_bytes);
        if (by_bytes < r)
            r = by_bytes;
    }
    return r < 1.0 ? 1 : (int)r;
}

static void phase_problem(pipeline_problem *p, const workload_lines *w, double n_a2a, double n_ag,
                          double n_rs, double n_exp, int n_gemm, int r_max)
{
    memset(p, 0, sizeof *p);
    p->a2a_alpha = w->a2a_ep.alpha_s, p->a2a_beta = w->a2a_ep.beta_s, p->n_a2a = n_a2a;
    p->ag_alpha = w->ag_esp.alpha_s, p->ag_beta = w->ag_esp.beta_s, p->n_ag = n_ag;
    p->rs_alpha = w->rs_esp.alpha_s, p->rs_beta = w->rs_esp.beta_s, p->n_rs = n_rs;
    p->exp_alpha = n_gemm * w->gemm.alpha_s, p->exp_beta = w->gemm.beta_s, p->n_exp = n_exp;
    p->t_gar = 0.0;
    p->r_max = r_max;
}

/* The gate and token order on `tokens` of this GPU's tokens, `routed` token copies of them
 * (workload.h workload_routing). The collectives' part gate_coll is paid whatever the share:
 * under PauseMP the gate's statistics go over the world instead of DP (runtime/moe_layer.c),
 * priced at DP's latencies all the same. */
static void routing_price(const workload_lines *w, const workload_shape *s, const fsmoe_line *g,
                          double tokens, double routed, double gate_numel, double gate_coll,
                          workload_routing *r)
{
    const double b = s->bytes_per_element, M = (double)s->M, E = (double)s->E;
    const double rows = s->run_rows > 0.0 ? s->run_rows : 1.0;
    const double width = s->run_width > 0.0 ? s->run_width : 1.0;
    const double x = tokens * M * b, gate_macs = tokens * gate_numel;
    const double r_bytes = rows * routed * M * b, cols = width * routed;
    memset(r, 0, sizeof *r);
    r->gate_fwd_s = g->alpha_s + gate_macs * g->beta_s +
                    workload_elementwise_s(w, 2, 4.0, tokens * E * b) + gate_coll;
    r->gate_bwd_s = 2.0 * g->alpha_s + 2.0 * gate_macs * g->beta_s +
                    workload_elementwise_s(w, 2, 4.0, tokens * E * b);
    /* Tutel: scatter R rows into the capacity slots (a copy), gather them back weighted;
     * GShard: "sec,sm->ecm" and "sec,ecm->sm", S·E·C·M = R·S·M MACs each */
    r->order_tutel_dispatch_s = workload_elementwise_s(w, 1, 2.0, r_bytes);
    r->order_tutel_combine_s = workload_elementwise_s(w, 1, 1.0, r_bytes) +
                               workload_elementwise_s(w, 0, 1.0, x);
    r->order_einsum_s = g->alpha_s + cols * tokens * M * g->beta_s;
    /* runtime/order_gshard.c: per forward, the mask and the weights, S·R elements each, are
     * cleared (a write), filled and copied host to device (a read and a write): 4 passes over
     * 6 arrays; in the backward the weights' gradient comes back (a read and a write).
     * DeepSpeed-MoE materialises the same (S, E, C) tensors on the device. */
    if (s->gate != WORKLOAD_GATE_SOFTMOE) {
        const double dense = tokens * cols * b;
        r->order_dense_build_s = workload_elementwise_s(w, 4, 6.0, dense);
        r->order_dense_dw_s = workload_elementwise_s(w, 1, 2.0, dense);
    }
}

void workload_layer_init(const workload_shape *s, const fsmoe_parallel *par,
                         const workload_lines *w, workload_layer *out)
{
    memset(out, 0, sizeof *out);
    const double b = s->bytes_per_element;
    const double f = s->f > 0.0 ? s->f : 1.0;
    const double B = (double)s->B, L = (double)s->L, M = (double)s->M, H = (double)s->H;
    const double heads = (double)s->heads;
    const double kv = (double)(s->kv_heads > 0 ? s->kv_heads : s->heads);
    const double E = (double)s->E;
    const double mp = par->mp, ep = par->ep, esp = par->esp;
    const int n_gemm = fsmoe_expert_gemms(s->expert);
    const double routed = workload_routed_copies(s), ran = workload_ran_copies(s);

    out->n_a2a = par->ep > 1 ? ran * M * b : 0.0;
    out->n_ag = out->n_rs = par->esp > 1 ? esp * ran * M * b : 0.0;
    out->n_exp = ran * M * H * n_gemm; /* esp·ran tokens on an H/esp shard */
    out->tokens_per_expert = E > 0.0 ? routed / E : 0.0;
    out->r_max = workload_r_max(out->tokens_per_expert, par->ep > 1 ? routed * M * b : 0.0,
                                workload_min_chunk(&w->a2a_ep));

    phase_problem(&out->fwd, w, out->n_a2a, out->n_ag, out->n_rs, out->n_exp, n_gemm,
                  out->r_max);
    /* backward: twice the GEMM calls and MACs, same β per MAC (see the header comment). */
    phase_problem(&out->bwd, w, out->n_a2a, out->n_ag, out->n_rs, 2.0 * out->n_exp, 2 * n_gemm,
                  out->r_max);

    /* Attention with heads split over MP: QKV (K and V have kv_heads of M/heads each) and the
     * output projection on the dense line, scores and scores·V per head on the line of their
     * own shape (the same line where the profile has one GEMM line). */
    const double tokens = B * L;
    const double qkv_cols = M + 2.0 * M * kv / heads;
    double proj_macs = tokens * M * qkv_cols / mp               /* QKV */
                       + tokens * M * M / mp;                   /* output projection */
    double score_macs = 2.0 * B * (heads / mp) * L * L * (M / heads); /* QKᵀ and ·V */
    double t_ar = fsmoe_line_time(&w->ar_mp, tokens * M * b);  /* zero line when mp = 1 */
    const fsmoe_line *g = &w->gemm_dense, *gs = &w->gemm_scores;
    double attn_s = 2.0 * g->alpha_s + 2.0 * gs->alpha_s + proj_macs * g->beta_s +
                    score_macs * gs->beta_s;
    out->attn_fwd_s = attn_s + t_ar;
    out->attn_bwd_s = 2.0 * attn_s + t_ar;
    out->attn_core_s = 2.0 * gs->alpha_s + score_macs * gs->beta_s;

    double ffn_macs = n_gemm * tokens * M * H / mp;
    out->ffn_fwd_s = n_gemm * g->alpha_s + ffn_macs * g->beta_s + t_ar;
    out->ffn_bwd_s = 2.0 * n_gemm * g->alpha_s + 2.0 * ffn_macs * g->beta_s + t_ar;

    /* Gradients per GPU: exactly the tensors fsmoe-run registers (runtime/transformer.c,
     * attention.c, expert_ffn.c, gate.c; tests/test_plan_model.c compares the two), all fp
     * elements of bytes_per_element. Under MP the Megatron split: column-parallel weights and
     * their biases (wqkv, bqkv, w1, w3, b1, wte, head) over MP, row-parallel output biases (bo, b2),
     * norms, wpe and the gate replicated; experts the same over ESP.
     *   block:  ln1.{w,b}, attn.{wqkv (M, W), bqkv (W), wo (M, M), bo (M)}, ln2.{w,b},
     *           W = (heads + 2·kv_heads)·M/heads;
     *   FFN:    w1 (M, H), w2 (H, M), and b1 (H), b2 (M) for GPT or w3 (M, H) for SwiGLU: a dense
     *           block is one expert of the model's kind applied to every token;
     *   MoE:    the gate, and E/ep of the E experts on this GPU;
     *   ends:   wte (V, M), wpe (L, M); lnf.{w,b}, head (M, V) (untied). */
    const int gpt = s->expert == FSMOE_EXPERT_GPT;
    out->attn_grad_bytes = ((M + 1.0) * qkv_cols / mp + M * M / mp + M + 4.0 * M) * b;
    out->ffn_grad_bytes = (n_gemm * M * H / mp + (gpt ? H / mp + M : 0.0)) * b;
    double gate_numel = M * E;
    if (s->gate == WORKLOAD_GATE_XMOE) {
        double D = M < 16.0 ? M : 16.0;
        gate_numel = M * D + E * D;
    } else if (s->gate == WORKLOAD_GATE_SOFTMOE && E > 0.0) {
        gate_numel = M * E * ceil(s->k * f * L / E); /* as runtime/transformer.c */
    }
    out->gate_grad_bytes = gate_numel * b;
    /* Experts are all-reduced only over EDP, the GPUs holding the same expert shard. */
    double per_expert = n_gemm * M * (H / esp) + (gpt ? H / esp + M : 0.0);
    out->expert_param_bytes = (E / ep) * per_expert * b;
    out->expert_grad_bytes =
        fsmoe_group_size(par, FSMOE_GROUP_EDP) > 1 ? out->expert_param_bytes : 0.0;
    out->embed_grad_bytes = ((double)s->vocab * M / mp + L * M) * b;
    out->head_grad_bytes = (M * (double)s->vocab / mp + 2.0 * M) * b;

    /* The work that is not a GEMM of the attention, FFN or experts (the header lists it), as
     * fsmoe-run does it (runtime/transformer.c, moe_layer.c, gate.c, order_*.c); x: one
     * activation of every token, B·L·M elements. Element-wise array counts: an addition reads 2
     * and writes 1; a layer norm's forward reads its input twice (statistics, then output) and
     * writes 1; its backward reads the output gradient and the input per row and accumulates
     * into the input gradient (5), then per column reads both again for the weight and bias
     * gradients (2); a clear writes 1; softmax and top-k over E read and write S·E twice. */
    const double x = tokens * M * b, Vl = (double)s->vocab / mp;
    /* The gate's collectives (runtime/gate.c, moe_layer.c): over DP its statistics, the
     * capacity prefix and the load totals, then over EP the token counts — small, back to
     * back: the first pays the ranks' arrival skew after the gate's computation (sync_s), the
     * others their latency alone. */
    double gate_coll = (par->dp > 1 ? 3.0 * small_collective_s(w, &w->ar_dp) : 0.0) +
                       (par->ep > 1 ? small_collective_s(w, &w->a2a_ep) : 0.0);
    if (workload_gate_meets(par))
        gate_coll += w->sync_s;
    out->order_dispatch_bwd_gemms = s->gate == WORKLOAD_GATE_SOFTMOE ? 2.0 : 1.0;
    routing_price(w, s, g, tokens, routed, gate_numel, gate_coll, &out->route);
    if (mp > 1.0)
        routing_price(w, s, g, tokens / mp, routed / mp, gate_numel, gate_coll, &out->route_own);
    else
        out->route_own = out->route;
    out->elem_fwd_s = workload_elementwise_s(w, 3, 9.0, x);
    out->elem_bwd_s = workload_elementwise_s(w, 5, 15.0, x);
    double head_macs = tokens * M * Vl, logits = tokens * Vl * b;
    double ag_stats = fsmoe_line_time(&w->ag_mp, 3.0 * tokens * mp * b); /* zero when mp = 1 */
    out->head_fwd_s = workload_elementwise_s(w, 2, 6.0, x) + t_ar               /* embedding */
                      + workload_elementwise_s(w, 1, 3.0, x)                   /* final norm */
                      + g->alpha_s + head_macs * g->beta_s                      /* LM head */
                      + workload_elementwise_s(w, 2, 3.0, logits) + ag_stats;   /* loss */
    out->head_bwd_s = 2.0 * g->alpha_s + 2.0 * head_macs * g->beta_s + t_ar
                      + workload_elementwise_s(w, 3, 8.0, x)        /* clear + final norm */
                      + workload_elementwise_s(w, 2, 5.0, x);       /* embedding scatter-add */
}
