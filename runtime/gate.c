/* Implements: what all gates share (gate.h): logits on the backend, host staging, token-choice
 * top-k with capacity and dropping (GShard §2.2's order: first choices of all tokens before
 * second choices), softmax rows and their backward, upload of the routing. */
#include "gate.h"

#include "dist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const gate_names[RT_GATE_COUNT] = {"gshard", "sigmoid", "xmoe",
                                                      "expert_choice", "softmoe"};

const char *gate_kind_name(rt_gate_kind k) { return k < RT_GATE_COUNT ? gate_names[k] : "?"; }

int gate_kind_from_name(const char *s)
{
    for (int i = 0; i < RT_GATE_COUNT; i++)
        if (strcmp(s, gate_names[i]) == 0)
            return i;
    return -1;
}

long gate_capacity(const rt_gate *g, long N)
{
    double f = g->f;
    if (g->kind == RT_GATE_EXPERT_CHOICE && f <= 0)
        f = 1; /* expert choice always has a capacity: k·N/E */
    if (f <= 0)
        return 0;
    long C = (long)ceil((double)g->k * f * (double)N / (double)g->E - 1e-9);
    if (C < 1)
        C = 1;
    if (C > N)
        C = N;
    return C;
}

void gate_register(rt_gate *g, rt_params *t, const char *prefix, rt_gate_kind kind, long M,
                   long E, int k, double f, long layer, long N_max, double std)
{
    /* caller sets noise, tau, D, slots, L beforehand when it wants non-defaults */
    g->kind = kind;
    g->M = M, g->E = E, g->k = k, g->f = f, g->layer = layer, g->N_max = N_max;
    if (g->tau <= 0)
        g->tau = 0.07;
    if (g->D <= 0)
        g->D = fsmoe_gate_dim(M);
    switch (kind) {
    case RT_GATE_XMOE:
        params_add(t, &g->wp, &g->dwp, RT_INIT_NORMAL, std, (const long[]){M, g->D}, 2, "%s.wp", prefix);
        params_add(t, &g->emb, &g->demb, RT_INIT_NORMAL, 1.0, (const long[]){E, g->D}, 2, "%s.emb", prefix);
        g->C_max = g->f > 0 ? gate_capacity(g, N_max) : N_max;
        break;
    case RT_GATE_SOFTMOE:
        params_add(t, &g->wg, &g->dwg, RT_INIT_NORMAL, std, (const long[]){M, E * g->slots}, 2, "%s.phi", prefix);
        g->C_max = (N_max / g->L) * g->slots;
        break;
    default:
        params_add(t, &g->wg, &g->dwg, RT_INIT_NORMAL, std, (const long[]){M, E}, 2, "%s.wg", prefix);
        g->C_max = (g->f > 0 || kind == RT_GATE_EXPERT_CHOICE) ? gate_capacity(g, N_max) : N_max;
        break;
    }
}

static long gate_cols(const rt_gate *g) { return g->kind == RT_GATE_SOFTMOE ? g->E * g->slots : g->E; }

fsmoe_status gate_alloc(rt_gate *g, rt_routing *r, rt_backend *be)
{
    long N = g->N_max, E = g->E, k = g->k, C = g->C_max, cols = gate_cols(g);
    long A = g->kind == RT_GATE_EXPERT_CHOICE ? E * C : N * k;
    long big = N * cols > N * g->D ? N * cols : N * g->D;
    memset(r, 0, sizeof(*r));
    g->d_logits = rt_alloc(be, RT_MEM_ACTIVATIONS, (size_t)big * sizeof(real));
    g->d_dlogits = rt_alloc(be, RT_MEM_WORKSPACE, (size_t)big * sizeof(real));
    g->d_tmp = rt_alloc(be, RT_MEM_WORKSPACE, (size_t)(E * g->D + 1) * sizeof(real));
    g->h_logits = calloc((size_t)big, sizeof(double));
    g->h_probs = calloc((size_t)big, sizeof(double));
    g->h_dlogits = calloc((size_t)(2 * big), sizeof(double));
    g->h_proj = calloc((size_t)(N * g->D), sizeof(double));
    g->h_dproj = calloc((size_t)(N * g->D), sizeof(double));
    g->h_emb = calloc((size_t)(E * g->D), sizeof(double));
    g->h_demb = calloc((size_t)(E * g->D), sizeof(double));
    long stage = N * E * C > big ? N * E * C : big;
    g->h_buf = calloc((size_t)stage + A + 1, sizeof(real));
    g->aux_grad_coef = calloc((size_t)E, sizeof(double));
    g->h_stat = calloc((size_t)(2 * E), sizeof(double));
    g->h_cnt = calloc((size_t)(3 * k * E), sizeof(long));
    g->h_kept = calloc((size_t)(N * k) + 1, 1);
    if (g->kind == RT_GATE_EXPERT_CHOICE && !(g->h_order = calloc((size_t)N, sizeof(int))))
        return FSMOE_ERR_NOMEM;
    if (g->kind == RT_GATE_SOFTMOE &&
        !(g->h_compact = calloc((size_t)(2 * N * cols), sizeof(double))))
        return FSMOE_ERR_NOMEM;
    r->tok = calloc((size_t)A + 1, sizeof(int));
    r->slot = calloc((size_t)A + 1, sizeof(int));
    r->w = calloc((size_t)A + 1, sizeof(real));
    r->dw = calloc((size_t)A + 1, sizeof(double));
    r->topk = calloc((size_t)(N * k), sizeof(int));
    r->slot_tok = calloc((size_t)(E * C) + 1, sizeof(int));
    r->load = calloc((size_t)E, sizeof(long));
    r->d_tok = rt_alloc(be, RT_MEM_BUFFERS, (size_t)(A + 1) * sizeof(int));
    r->d_slot = rt_alloc(be, RT_MEM_BUFFERS, (size_t)(A + 1) * sizeof(int));
    r->d_slot_tok = rt_alloc(be, RT_MEM_BUFFERS, (size_t)(E * C + 1) * sizeof(int));
    r->d_w = rt_alloc(be, RT_MEM_BUFFERS, (size_t)(A + 1) * sizeof(real));
    r->d_dw = rt_alloc(be, RT_MEM_BUFFERS, (size_t)(A + 1) * sizeof(real));
    if (!g->d_logits || !g->d_dlogits || !g->d_tmp || !g->h_logits || !g->h_probs ||
        !g->h_dlogits || !g->h_proj || !g->h_dproj || !g->h_emb || !g->h_demb || !g->h_buf ||
        !g->aux_grad_coef || !g->h_stat || !g->h_cnt || !g->h_kept || !r->tok || !r->slot || !r->w || !r->dw || !r->topk ||
        !r->slot_tok || !r->load || !r->d_tok || !r->d_slot || !r->d_slot_tok || !r->d_w ||
        !r->d_dw)
        return FSMOE_ERR_NOMEM;
    return FSMOE_OK;
}

void gate_free(rt_gate *g, rt_routing *r, rt_backend *be)
{
    if (be) {
        void *dev[] = {g->d_logits, g->d_dlogits, g->d_tmp, r->d_tok, r->d_slot, r->d_slot_tok,
                       r->d_w, r->d_dw};
        for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
            if (dev[i])
                rt_free(be, dev[i]);
    }
    free(g->h_logits), free(g->h_probs), free(g->h_dlogits), free(g->h_proj), free(g->h_dproj);
    free(g->h_emb), free(g->h_demb), free(g->h_buf), free(g->aux_grad_coef), free(g->h_stat);
    free(g->h_cnt), free(g->h_kept), free(g->h_order), free(g->h_compact);
    g->h_cnt = NULL, g->h_kept = NULL, g->h_order = NULL, g->h_compact = NULL;
    free(r->tok), free(r->slot), free(r->w), free(r->dw), free(r->topk), free(r->slot_tok);
    free(r->load);
    g->d_logits = g->d_dlogits = g->d_tmp = NULL;
    memset(r, 0, sizeof(*r));
}

/* ---- shared routing math ---- */

void gate_softmax_rows(const double *logits, double *probs, long N, long E)
{
    for (long n = 0; n < N; n++) {
        const double *z = logits + n * E;
        double mx = z[0], s = 0;
        for (long e = 1; e < E; e++)
            mx = z[e] > mx ? z[e] : mx;
        for (long e = 0; e < E; e++)
            s += (probs[n * E + e] = exp(z[e] - mx));
        for (long e = 0; e < E; e++)
            probs[n * E + e] /= s;
    }
}

void gate_softmax_rows_backward(const double *probs, const double *dprobs, double *dlogits,
                                long N, long E)
{
    for (long n = 0; n < N; n++) {
        double dot = 0;
        for (long e = 0; e < E; e++)
            dot += probs[n * E + e] * dprobs[n * E + e];
        for (long e = 0; e < E; e++)
            dlogits[n * E + e] = probs[n * E + e] * (dprobs[n * E + e] - dot);
    }
}

void gate_topk_route(rt_gate *g, rt_routing *r, const double *probs, long N, int freeze,
                     int renormalise)
{
    long E = g->E;
    int k = g->k;
    if (!freeze) {
        for (long n = 0; n < N; n++) {
            const double *p = probs + n * E;
            for (int j = 0; j < k; j++) {
                long best = -1;
                for (long e = 0; e < E; e++) {
                    int taken = 0;
                    for (int i = 0; i < j; i++)
                        taken |= r->topk[n * k + i] == e;
                    if (!taken && (best < 0 || p[e] > p[best]))
                        best = e;
                }
                r->topk[n * k + j] = (int)best;
            }
        }
    }
    /* positions: an assignment (token n, choice j) to expert e sits behind every choice-j'<j
     * assignment to e of the whole batch and every choice-j assignment of an earlier global
     * token; it is kept when its position is below the capacity */
    long kE = (long)k * E;
    long *cnt = g->h_cnt;
    unsigned char *kept = g->h_kept;
    memset(cnt, 0, (size_t)kE * sizeof(long));
    long *pre = cnt + kE, *tot = cnt + 2 * kE;
    for (int j = 0; j < k; j++)
        for (long n = 0; n < N; n++)
            cnt[j * E + r->topk[n * k + j]]++;
    memcpy(tot, cnt, (size_t)kE * sizeof(long));
    memset(pre, 0, (size_t)kE * sizeof(long));
    if (g->dist) {
        fsmoe_status st = dist_exscan_longs(g->dist, g->group, cnt, pre, (int)kE,
                                            "gate capacity prefix", &g->dist_err);
        if (st == FSMOE_OK)
            st = dist_sum_longs(g->dist, g->group, tot, (int)kE, "gate load totals",
                                &g->dist_err);
        if (st != FSMOE_OK)
            return;
    }
    long C = gate_capacity(g, g->N_global > 0 ? g->N_global : N);
    if (C == 0) { /* no dropping: the capacity is the largest global load */
        for (long e = 0; e < E; e++) {
            long l = 0;
            for (int j = 0; j < k; j++)
                l += tot[j * E + e];
            C = l > C ? l : C;
        }
        if (C < 1)
            C = 1;
    }
    /* first pass: which assignments are kept, and this rank's load per expert */
    memset(r->load, 0, (size_t)E * sizeof(long));
    r->dropped = 0;
    for (int j = 0; j < k; j++) {
        for (long n = 0; n < N; n++) {
            int e = r->topk[n * k + j];
            long pos = pre[j * E + e]++;
            for (int i = 0; i < j; i++)
                pos += tot[i * E + e];
            kept[n * k + j] = pos < C;
            if (pos >= C)
                r->dropped++;
            else
                r->load[e]++;
        }
    }
    /* this rank's slots: expert e's kept assignments in (choice, token) order */
    long Cl = 1;
    for (long e = 0; e < E; e++)
        Cl = r->load[e] > Cl ? r->load[e] : Cl;
    r->N = N, r->E = E, r->C = Cl, r->A = 0, r->dense = 0, r->C_global = C;
    for (long i = 0; i < E * Cl; i++)
        r->slot_tok[i] = -1;
    memset(r->load, 0, (size_t)E * sizeof(long));
    for (int j = 0; j < k; j++) {
        for (long n = 0; n < N; n++) {
            int e = r->topk[n * k + j];
            if (!kept[n * k + j])
                continue;
            long c = r->load[e]++;
            double s = 1;
            if (renormalise) {
                s = 0;
                for (int i = 0; i < k; i++)
                    s += probs[n * E + r->topk[n * k + i]];
            }
            r->tok[r->A] = (int)n;
            r->slot[r->A] = (int)(e * Cl + c);
            r->w[r->A] = (real)(probs[n * E + e] / s);
            r->slot_tok[e * Cl + c] = (int)n;
            r->A++;
        }
    }
}

void gate_topk_weights_backward(const rt_gate *g, const rt_routing *r, const double *probs,
                                long N, int renormalise, double *dprobs)
{
    long E = g->E;
    int k = g->k;
    memset(dprobs, 0, (size_t)(N * E) * sizeof(double));
    for (long a = 0; a < r->A; a++) {
        long n = r->tok[a], e = r->slot[a] / r->C;
        double dw = r->dw[a];
        if (!renormalise) {
            dprobs[n * E + e] += dw;
            continue;
        }
        double s = 0;
        for (int i = 0; i < k; i++)
            s += probs[n * E + r->topk[n * k + i]];
        dprobs[n * E + e] += dw / s;
        for (int i = 0; i < k; i++)
            dprobs[n * E + r->topk[n * k + i]] -= dw * probs[n * E + e] / (s * s);
    }
}

/* ---- staging between host doubles and backend reals ---- */

static void to_host(rt_gate *g, rt_backend *be, rt_stream *s, double *dst, const real *src,
                    long n)
{
    be->copy(be, s, g->h_buf, src, (size_t)n * sizeof(real), RT_D2H);
    be->stream_sync(be, s);
    for (long i = 0; i < n; i++)
        dst[i] = (double)g->h_buf[i];
}

static void to_dev(rt_gate *g, rt_backend *be, rt_stream *s, real *dst, const double *src, long n)
{
    for (long i = 0; i < n; i++)
        g->h_buf[i] = (real)src[i];
    be->copy(be, s, dst, g->h_buf, (size_t)n * sizeof(real), RT_H2D);
    be->stream_sync(be, s); /* h_buf is reused by the next staging */
}

static void upload_sparse(rt_backend *be, rt_stream *s, rt_routing *r)
{
    be->copy(be, s, r->d_tok, r->tok, (size_t)r->A * sizeof(int), RT_H2D);
    be->copy(be, s, r->d_slot, r->slot, (size_t)r->A * sizeof(int), RT_H2D);
    be->copy(be, s, r->d_slot_tok, r->slot_tok, (size_t)(r->E * r->C) * sizeof(int), RT_H2D);
    be->copy(be, s, r->d_w, r->w, (size_t)r->A * sizeof(real), RT_H2D);
    be->stream_sync(be, s);
}

/* SoftMoE: dense (N, E·C) dispatch and combine matrices from the compact (N, E·S) ones. */
static void softmoe_upload(rt_gate *g, rt_backend *be, rt_stream *s, rt_routing *r)
{
    long N = r->N, J = g->E * g->slots, EC = r->E * r->C;
    const double *src[2] = {g->h_logits, g->h_probs};
    real *dst[2] = {r->d_disp, r->d_comb};
    for (int m = 0; m < 2; m++) {
        memset(g->h_buf, 0, (size_t)(N * EC) * sizeof(real));
        for (long n = 0; n < N; n++)
            for (long j = 0; j < J; j++)
                g->h_buf[n * EC + gate_softmoe_col(g, r->C, n, j)] = (real)src[m][n * J + j];
        be->copy(be, s, dst[m], g->h_buf, (size_t)(N * EC) * sizeof(real), RT_H2D);
        be->stream_sync(be, s);
    }
}

static void softmoe_download_backward(rt_gate *g, rt_backend *be, rt_stream *s, rt_routing *r)
{
    long N = r->N, J = g->E * g->slots, EC = r->E * r->C;
    double *compact[2] = {g->h_compact, g->h_compact + N * J}; /* every element written */
    const real *src[2] = {r->d_ddisp, r->d_dcomb};
    for (int m = 0; m < 2; m++) {
        be->copy(be, s, g->h_buf, src[m], (size_t)(N * EC) * sizeof(real), RT_D2H);
        be->stream_sync(be, s);
        for (long n = 0; n < N; n++)
            for (long j = 0; j < J; j++)
                compact[m][n * J + j] = g->h_buf[n * EC + gate_softmoe_col(g, r->C, n, j)];
    }
    gate_softmoe_backward_compact(g, N, compact[0], compact[1]);
}

fsmoe_status gate_forward(rt_gate *g, rt_backend *be, rt_stream *s, const real *x, long N,
                          int training, uint64_t seed, long step, int freeze, rt_routing *r)
{
    long M = g->M, E = g->E, cols = gate_cols(g);
    if (N > g->N_max)
        return FSMOE_ERR_INTERNAL;
    g->aux = 0;
    memset(&g->dist_err, 0, sizeof g->dist_err);
    if (g->kind == RT_GATE_XMOE) {
        be->gemm(be, s, 0, 0, N, g->D, M, 1, x, M, 0, g->wp, g->D, 0, 0, g->d_logits, g->D, 0, 1);
        to_host(g, be, s, g->h_proj, g->d_logits, N * g->D);
        to_host(g, be, s, g->h_emb, g->emb, E * g->D);
        gate_xmoe_logits(g, N);
    } else {
        be->gemm(be, s, 0, 0, N, cols, M, 1, x, M, 0, g->wg, cols, 0, 0, g->d_logits, cols, 0, 1);
        to_host(g, be, s, g->h_logits, g->d_logits, N * cols);
    }
    switch (g->kind) {
    case RT_GATE_GSHARD:
    case RT_GATE_XMOE:
        gate_gshard_route(g, r, N, training && g->kind == RT_GATE_GSHARD, seed, step, freeze);
        break;
    case RT_GATE_SIGMOID:
        gate_sigmoid_route(g, r, N, freeze);
        break;
    case RT_GATE_EXPERT_CHOICE:
        gate_expert_choice_route(g, r, N, freeze);
        break;
    case RT_GATE_SOFTMOE:
        gate_softmoe_route(g, r, N);
        softmoe_upload(g, be, s, r);
        return rt_backend_check(be, NULL);
    default:
        return FSMOE_ERR_INTERNAL;
    }
    if (g->dist_err.status != FSMOE_OK) {
        rt_backend_fail(be, g->dist_err.status, "%s", g->dist_err.msg);
        return g->dist_err.status;
    }
    upload_sparse(be, s, r);
    return FSMOE_OK;
}

void gate_backward(rt_gate *g, rt_backend *be, rt_stream *s, const real *x, real *dx,
                   double aux_coef, rt_routing *r)
{
    long M = g->M, E = g->E, N = r->N, cols = gate_cols(g);
    switch (g->kind) {
    case RT_GATE_GSHARD:
    case RT_GATE_XMOE:
        gate_gshard_backward(g, r, N, aux_coef);
        break;
    case RT_GATE_SIGMOID:
        gate_sigmoid_backward(g, r, N);
        break;
    case RT_GATE_EXPERT_CHOICE:
        gate_expert_choice_backward(g, r, N);
        break;
    case RT_GATE_SOFTMOE:
        softmoe_download_backward(g, be, s, r);
        break;
    default:
        return;
    }
    if (g->kind == RT_GATE_XMOE) {
        gate_xmoe_backward_logits(g, N);
        to_dev(g, be, s, g->d_dlogits, g->h_dproj, N * g->D);
        be->gemm(be, s, 1, 0, M, g->D, N, 1, x, M, 0, g->d_dlogits, g->D, 0, 1, g->dwp, g->D, 0,
                 1);
        be->gemm(be, s, 0, 1, N, M, g->D, 1, g->d_dlogits, g->D, 0, g->wp, g->D, 0, 1, dx, M, 0,
                 1);
        to_dev(g, be, s, g->d_tmp, g->h_demb, E * g->D);
        be->axpy(be, s, g->demb, 1, g->d_tmp, E * g->D);
        return;
    }
    to_dev(g, be, s, g->d_dlogits, g->h_dlogits, N * cols);
    be->gemm(be, s, 1, 0, M, cols, N, 1, x, M, 0, g->d_dlogits, cols, 0, 1, g->dwg, cols, 0, 1);
    be->gemm(be, s, 0, 1, N, M, cols, 1, g->d_dlogits, cols, 0, g->wg, cols, 0, 1, dx, M, 0, 1);
}
