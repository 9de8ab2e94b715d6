/* Implements: adaptive gradient partitioning (FSMoE §5 steps 1 and 2, design.md §5) and the
 * gradient schedules of the baselines (none, Tutel-Improved dense-only, PipeMoE+Lina micro-ops).
 *
 * Step 1 (FSMoE Eq. 3/4). Walking the backward (layer n-1 first), the gradients already finished
 * and not yet sent ("available") are all-reduced in layer i's window t_olp^i = t_olp,dense^i +
 * t_olp,moe^i:  n_first^i = g(min(t_ar(available), t_olp^i)); the rest is carried on (the
 * paper's Eq. 4 prints its `+` as a list dash). One AllReduce per window, so α is paid once per
 * window and a window shorter than α sends nothing. The prefix's backward (the ops before the
 * first MoE layer) is the walk's last window: it sends what is still carried (layer 0's
 * gradients included) as far as it fits; the prefix's own gradients and the rest are the tail.
 *
 * Schedules. A layer may offer PauseMP candidates (S1/S2, parm_schedule.h) beside FSMoE's ESP
 * pipeline; f_moe^i(t) is then the smallest forward + backward over its candidates at t_gar = t
 * (every candidate's backward has the same form max(f1(r) + t, rest(r))), so step 1 and step 2
 * see the schedule the layer will actually run, and the layer records which one that is.
 *
 * Step 2 (FSMoE Eq. 5, with a fix). The bytes step 1 could not place may be added to MoE layers
 * at the price of a longer layer: x^i bytes join the AllReduce of layer i's window, and the part
 * of it that exceeds the dense window runs in the MoE layer as t_gar^i. We minimise
 *     Σ_i f_moe^i(t_gar^i(x^i)) + t_ar(tail),   tail = remaining − Σ x^i (+ prefix gradients)
 * subject to 0 ≤ x^i and, at every point of the backward, Σ x sent so far ≤ what step 1 left
 * available there (no gradient is sent before it exists, and step 1's later windows still find
 * theirs). The paper's objective has no tail term — with it missing, x = 0 is always optimal,
 * since f_moe is non-decreasing in t_gar — so we add the exposed AllReduce of whatever is not
 * assigned (design.md §5: "counts as exposed time"). The paper uses differential evolution; we
 * keep the best of x = 0, a greedy marginal allocation, an exact dynamic programme on a grid of
 * the prefix sums, and NLopt COBYLA started from the best of those — so step 2 is never worse
 * than step 1 alone.
 *
 * f_moe^i(t) = F at the r the pipeline method picks for t_gar = t. For SLSQP (which the pipeline
 * tests prove equal to the exhaustive integer optimum) and the exhaustive method it is
 * min_r max(f1(r) + t, f2(r), f3(r), f4(r)) — only f1 depends on t — evaluated from a per-layer
 * table of f1 and max(f2, f3, f4); final values always come from pipeline_solve itself.
 *
 * Relies on: pipeline_degree.h (F, f_i, t_olp,moe, pipeline_solve), cost.h, NLopt (COBYLA). */
#include "grad_partition.h"

#include <limits.h>
#include <math.h>
#include <nlopt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GRID_STEPS_DEFAULT 128
#define GREEDY_QUANTA 256
#define COBYLA_MAX_VARS 16

double grad_ar_time(const fsmoe_line *ar, double bytes)
{
    return bytes > 0.0 ? ar->alpha_s + ar->beta_s * bytes : 0.0;
}

double grad_ar_inverse(const fsmoe_line *ar, double t)
{
    if (!(t > ar->alpha_s))
        return 0.0;
    if (!(ar->beta_s > 0.0))
        return INFINITY; /* free bandwidth: anything fits once α is paid */
    return (t - ar->alpha_s) / ar->beta_s;
}

/* ---- f_moe(t): per distinct MoE layer model (its candidate schedules) ---- */

typedef struct {
    int kind;     /* 0 = ESP pipeline, 1 + j = the layer's alternative j */
    int r_max;
    double fwd;   /* forward time of the candidate (enters the choice) */
    double *f1;   /* f1(r) (ESP) or c1(r) (PauseMP) at t_gar = 0, r = 1..r_max (index r-1) */
    double *rest; /* max of the other chains at r */
} cand_tab;

typedef struct {
    const grad_layer_in *src; /* the first layer with this model */
    int n_c;
    cand_tab c[1 + GRAD_MAX_ALT];
    int c0, r0;   /* the candidate run at t_gar = 0 and its r */
    double F0, olp_moe; /* its backward at t_gar = 0, and the link's idle time in it */
} moe_fn;

typedef struct {
    const grad_problem *p;
    int n;            /* layers */
    moe_fn *fns;      /* distinct problems */
    int n_fns;
    int *fn_of;       /* per layer (forward order) */
    /* step 1, indexed by backward position k (layer i = n-1-k) */
    double *avail, *first, *cap, *dense, *grad;
    double carry_end; /* step-1 carry after the last window, incl. layer 0's gradients */
    double scale;     /* largest cap: step-2 variables are fractions of it */
    double obj_scale; /* step-1 objective: COBYLA sees O(1) values */
    /* COBYLA */
    int m;            /* active variables */
    int *act;         /* their backward positions */
    double *xbuf;     /* n entries, backward order */
    double *xfix;     /* the start; positions COBYLA does not move keep it */
} g2ctx;

static int same_problem(const pipeline_problem *a, const pipeline_problem *b)
{
    return a->a2a_alpha == b->a2a_alpha && a->a2a_beta == b->a2a_beta && a->n_a2a == b->n_a2a &&
           a->ag_alpha == b->ag_alpha && a->ag_beta == b->ag_beta && a->n_ag == b->n_ag &&
           a->rs_alpha == b->rs_alpha && a->rs_beta == b->rs_beta && a->n_rs == b->n_rs &&
           a->exp_alpha == b->exp_alpha && a->exp_beta == b->exp_beta &&
           a->n_exp == b->n_exp && a->r_max == b->r_max;
}

static int same_pausemp(const pausemp_problem *a, const pausemp_problem *b)
{
    return a->kind == b->kind && a->d_alpha == b->d_alpha && a->d_beta == b->d_beta &&
           a->c_alpha == b->c_alpha && a->c_beta == b->c_beta && a->u == b->u &&
           a->exp_alpha == b->exp_alpha && a->exp_beta == b->exp_beta && a->n_exp == b->n_exp &&
           a->serial_s == b->serial_s && a->routing_s == b->routing_s && a->r_max == b->r_max;
}

/* The ESP pipeline problem of candidate `kind` of L (0 = moe_bwd, 1 + j = alternative j when it
 * is an ESP pipeline), NULL for a PauseMP candidate. */
static const pipeline_problem *cand_pipe(const grad_layer_in *L, int kind)
{
    if (kind == 0)
        return &L->moe_bwd;
    return L->alt_esp[kind - 1] ? &L->alt_pipe[kind - 1] : NULL;
}

/* Two layers whose MoE layers cost the same under every candidate (dense and gradients aside). */
static int same_moe_model(const grad_layer_in *a, const grad_layer_in *b)
{
    if (!same_problem(&a->moe_bwd, &b->moe_bwd) || a->moe_fwd_s != b->moe_fwd_s ||
        a->esp_off != b->esp_off || a->n_alt != b->n_alt)
        return 0;
    for (int j = 0; j < a->n_alt && j < GRAD_MAX_ALT; j++) {
        if (a->alt_esp[j] != b->alt_esp[j] || a->alt_fwd_s[j] != b->alt_fwd_s[j])
            return 0;
        if (a->alt_esp[j] ? !same_problem(&a->alt_pipe[j], &b->alt_pipe[j])
                          : !same_pausemp(&a->alt[j], &b->alt[j]))
            return 0;
    }
    return 1;
}

/* A PauseMP backward at t_gar as a pipeline_result (binding_case = the chain c1..c4 that binds). */
static void pausemp_result(const pausemp_problem *src, double t_gar, pipeline_result *out)
{
    pausemp_problem q = *src;
    q.t_gar = t_gar;
    memset(out, 0, sizeof *out);
    out->r = pausemp_best_r(&q, NULL);
    out->time_s = pausemp_chains(&q, out->r, out->f);
    out->binding_case = 1;
    for (int i = 2; i <= 4; i++)
        if (out->f[i - 1] > out->f[out->binding_case - 1])
            out->binding_case = i;
}

/* Every candidate of layer L at t_gar: forward + backward in cand_s (0 for a non-candidate), the
 * one run (smallest; ties: the lower index, ESP first) in *cand and its backward in *res. */
static fsmoe_status layer_choose(const grad_layer_in *L, pipeline_method method, double t_gar,
                                 int *cand, double *cand_s, pipeline_result *res,
                                 fsmoe_error *err)
{
    double best = INFINITY;
    *cand = -1;
    for (int j = 0; j < 1 + GRAD_MAX_ALT; j++)
        cand_s[j] = 0.0;
    if (!L->esp_off || L->n_alt < 1) {
        pipeline_problem q = L->moe_bwd;
        q.t_gar = t_gar;
        fsmoe_status st = pipeline_solve(&q, method, res, err);
        if (st != FSMOE_OK)
            return st;
        cand_s[0] = L->moe_fwd_s + res->time_s;
        best = cand_s[0];
        *cand = 0;
    }
    for (int j = 0; j < L->n_alt && j < GRAD_MAX_ALT; j++) {
        pipeline_result r;
        if (L->alt_esp[j]) {
            pipeline_problem q = L->alt_pipe[j];
            q.t_gar = t_gar;
            fsmoe_status st = pipeline_solve(&q, method, &r, err);
            if (st != FSMOE_OK)
                return st;
        } else {
            pausemp_result(&L->alt[j], t_gar, &r);
        }
        cand_s[1 + j] = L->alt_fwd_s[j] + r.time_s;
        if (cand_s[1 + j] < best) {
            best = cand_s[1 + j];
            *cand = 1 + j;
            *res = r;
        }
    }
    return FSMOE_OK;
}

static fsmoe_status moe_fn_init(moe_fn *fn, const grad_layer_in *L, pipeline_method method,
                                fsmoe_error *err)
{
    memset(fn, 0, sizeof *fn);
    fn->src = L;
    int use_esp = !L->esp_off || L->n_alt < 1;
    for (int j = use_esp ? 0 : 1; j <= L->n_alt && j <= GRAD_MAX_ALT; j++) {
        cand_tab *t = &fn->c[fn->n_c++];
        const pipeline_problem *pp = cand_pipe(L, j);
        t->kind = j;
        t->r_max = pp ? pp->r_max : L->alt[j - 1].r_max;
        if (t->r_max < 1)
            t->r_max = 1;
        t->fwd = j == 0 ? L->moe_fwd_s : L->alt_fwd_s[j - 1];
        t->f1 = malloc(sizeof(double) * (size_t)t->r_max);
        t->rest = malloc(sizeof(double) * (size_t)t->r_max);
        if (!t->f1 || !t->rest)
            return fsmoe_fail(err, FSMOE_ERR_NOMEM, "gradient partition: out of memory");
        pipeline_problem q = pp ? *pp : L->moe_bwd;
        q.t_gar = 0.0;
        pausemp_problem a;
        if (!pp) {
            a = L->alt[j - 1];
            a.t_gar = 0.0;
        }
        for (int r = 1; r <= t->r_max; r++) {
            double f[4];
            if (pp)
                for (int c = 1; c <= 4; c++)
                    f[c - 1] = pipeline_case_time(&q, c, r);
            else
                pausemp_chains(&a, r, f);
            double rest = f[1];
            for (int c = 2; c <= 3; c++)
                if (f[c] > rest)
                    rest = f[c];
            t->f1[r - 1] = f[0];
            t->rest[r - 1] = rest;
        }
    }
    int cand;
    double cand_s[1 + GRAD_MAX_ALT];
    pipeline_result res;
    fsmoe_status st = layer_choose(L, method, 0.0, &cand, cand_s, &res, err);
    if (st != FSMOE_OK)
        return st;
    fn->c0 = cand;
    fn->r0 = res.r;
    fn->F0 = res.time_s;
    /* The link's idle time at r0; F − f1 bounds it so that t_gar up to olp_moe never lengthens
     * the layer at r0 (whatever the case formula says). */
    double slack = res.time_s - res.f[0];
    double olp = slack;
    if (cand_pipe(L, cand)) {
        pipeline_problem q = *cand_pipe(L, cand);
        q.t_gar = 0.0;
        olp = pipeline_overlappable(&q, res.r);
        if (olp > slack)
            olp = slack;
    }
    fn->olp_moe = olp > 0.0 ? olp : 0.0;
    return FSMOE_OK;
}

/* Forward + backward of the layer model at t_gar, the best candidate. */
static double moe_time(const moe_fn *fn, pipeline_method method, double t_gar)
{
    double best = INFINITY;
    for (int j = 0; j < fn->n_c; j++) {
        const cand_tab *t = &fn->c[j];
        double v = INFINITY;
        if (method == PIPELINE_PAPER && cand_pipe(fn->src, t->kind)) {
            pipeline_problem q = *cand_pipe(fn->src, t->kind);
            q.t_gar = t_gar;
            pipeline_result res;
            if (pipeline_solve(&q, method, &res, NULL) == FSMOE_OK)
                v = res.time_s;
        } else {
            for (int r = 0; r < t->r_max; r++) {
                double a = t->f1[r] + t_gar, b = t->rest[r];
                double F = a > b ? a : b;
                if (F < v)
                    v = F;
            }
        }
        if (t->fwd + v < best)
            best = t->fwd + v;
    }
    return best;
}

/* t_gar of the MoE layer at backward position k when its window's AllReduce carries
 * first[k] + x bytes. */
static double tgar_of(const g2ctx *c, int k, double x)
{
    double t = grad_ar_time(&c->p->ar, c->first[k] + x) - c->dense[k];
    return t > 0.0 ? t : 0.0;
}

static double h_of(const g2ctx *c, int k, double x)
{
    int i = c->n - 1 - k;
    return moe_time(&c->fns[c->fn_of[i]], c->p->method, tgar_of(c, k, x));
}

double grad_prefix_window_bytes(const grad_problem *p, double ready)
{
    if (!(ready > 0.0) || p->tail_only)
        return 0.0;
    double P = p->prefix_bwd_s > 0.0 ? p->prefix_bwd_s : 0.0;
    if (grad_ar_time(&p->ar, ready) <= P)
        return ready;
    double send = grad_ar_inverse(&p->ar, P);
    return send < ready ? send : ready;
}

static double prefix_early(const grad_problem *p)
{
    double pre = p->prefix_grad_bytes > 0.0 ? p->prefix_grad_bytes : 0.0;
    double e = p->prefix_early_bytes > 0.0 ? p->prefix_early_bytes : 0.0;
    return e < pre ? e : pre;
}

double grad_prefix_early_window_bytes(const grad_problem *p, double ready)
{
    double e = prefix_early(p);
    if (!(e > 0.0) || p->tail_only)
        return 0.0;
    double P = p->prefix_bwd_s > 0.0 ? p->prefix_bwd_s : 0.0;
    double first = grad_prefix_window_bytes(p, ready);
    double t0 = first > 0.0 ? grad_ar_time(&p->ar, first) : 0.0;
    double start = p->prefix_early_s > t0 ? p->prefix_early_s : t0;
    if (grad_ar_time(&p->ar, e) <= P - start)
        return e;
    double send = grad_ar_inverse(&p->ar, P - start);
    return send < e ? send : e;
}

/* Bytes left for after the backward when `rem` ready bytes reach the prefix: its window sends
 * what fits, then what fits of its early gradients; the rest of the prefix's own gradients are
 * ready only at the end. */
static double tail_bytes_after_prefix(const grad_problem *p, double rem)
{
    if (rem < 0.0)
        rem = 0.0;
    double pre = p->prefix_grad_bytes > 0.0 ? p->prefix_grad_bytes : 0.0;
    return rem - grad_prefix_window_bytes(p, rem) + pre - grad_prefix_early_window_bytes(p, rem);
}

static double tail_time(const g2ctx *c, double sent)
{
    return grad_ar_time(&c->p->ar, tail_bytes_after_prefix(c->p, c->carry_end - sent));
}

/* Objective for x in backward order; +inf when a prefix sum exceeds its cap. */
static double objective_bw(const g2ctx *c, const double *x)
{
    double sum = 0.0, total = 0.0;
    for (int k = 0; k < c->n; k++) {
        if (x[k] < 0.0)
            return INFINITY;
        sum += x[k];
        if (sum > c->cap[k] * (1.0 + 1e-9) + 1e-9)
            return INFINITY;
        total += h_of(c, k, x[k]);
    }
    return total + tail_time(c, sum);
}

/* Makes x feasible: clamps to ≥ 0 and trims the latest additions where a prefix sum exceeds
 * its cap (COBYLA may end marginally outside its constraints). */
static void repair(const g2ctx *c, double *x)
{
    double sum = 0.0;
    for (int k = 0; k < c->n; k++) {
        if (!(x[k] > 0.0))
            x[k] = 0.0;
        sum += x[k];
        double over = sum - c->cap[k];
        for (int j = k; over > 0.0 && j >= 0; j--) {
            double cut = x[j] < over ? x[j] : over;
            x[j] -= cut;
            over -= cut;
            sum -= cut;
        }
    }
}

/* ---- step 2 solvers (x in backward order) ---- */

static void step2_greedy(const g2ctx *c, double *x)
{
    memset(x, 0, sizeof(double) * (size_t)c->n);
    if (!(c->scale > 0.0))
        return;
    const double q = c->scale / GREEDY_QUANTA;
    double *slack = malloc(sizeof(double) * (size_t)c->n);
    double *h = malloc(sizeof(double) * (size_t)c->n);
    if (!slack || !h) {
        free(slack);
        free(h);
        return;
    }
    for (int k = 0; k < c->n; k++)
        h[k] = h_of(c, k, 0.0);
    double sent = 0.0;
    for (int iter = 0; iter < GREEDY_QUANTA * 4; iter++) {
        /* slack[k]: how much more may be sent at k without breaking any later cap. */
        double X = 0.0;
        for (int k = 0; k < c->n; k++) {
            X += x[k];
            slack[k] = c->cap[k] - X;
        }
        for (int k = c->n - 2; k >= 0; k--)
            if (slack[k + 1] < slack[k])
                slack[k] = slack[k + 1];
        double t0 = tail_time(c, sent), best = 0.0, best_h = 0.0, best_d = 0.0;
        int best_k = -1;
        for (int k = 0; k < c->n; k++) {
            double d = slack[k] < q ? slack[k] : q;
            if (!(d > 1e-9 * q))
                continue;
            double hk = h_of(c, k, x[k] + d);
            double delta = (hk - h[k]) + (tail_time(c, sent + d) - t0);
            if (delta < best) {
                best = delta;
                best_k = k;
                best_h = hk;
                best_d = d;
            }
        }
        if (best_k < 0 || !(best < -1e-15 * (t0 + 1e-300)))
            break;
        x[best_k] += best_d;
        h[best_k] = best_h;
        sent += best_d;
    }
    free(slack);
    free(h);
}

static fsmoe_status step2_grid(const g2ctx *c, int K, double *x, fsmoe_error *err)
{
    memset(x, 0, sizeof(double) * (size_t)c->n);
    if (!(c->scale > 0.0))
        return FSMOE_OK;
    const double q = c->scale / K;
    size_t W = (size_t)K + 1;
    double *V = malloc(sizeof(double) * W), *NV = malloc(sizeof(double) * W);
    double *H = malloc(sizeof(double) * W);
    int *choice = malloc(sizeof(int) * W * (size_t)c->n);
    if (!V || !NV || !H || !choice) {
        free(V), free(NV), free(H), free(choice);
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "gradient partition: out of memory");
    }
    V[0] = 0.0;
    for (size_t m = 1; m < W; m++)
        V[m] = INFINITY;
    for (int k = 0; k < c->n; k++) {
        int Mk = (int)floor(c->cap[k] / q * (1.0 + 1e-12));
        if (Mk > K)
            Mk = K;
        if (Mk < 0)
            Mk = 0;
        for (int d = 0; d <= Mk; d++)
            H[d] = h_of(c, k, d * q);
        int *ch = choice + (size_t)k * W;
        for (int m = 0; m < (int)W; m++) {
            NV[m] = INFINITY;
            ch[m] = 0;
            if (m > Mk)
                continue;
            for (int d = 0; d <= m; d++) {
                double v = V[m - d] + H[d];
                if (v < NV[m]) {
                    NV[m] = v;
                    ch[m] = d;
                }
            }
        }
        double *t = V;
        V = NV;
        NV = t;
    }
    int best_m = 0;
    double best = INFINITY;
    for (int m = 0; m < (int)W; m++) {
        double v = V[m] + tail_time(c, m * q);
        if (v < best) {
            best = v;
            best_m = m;
        }
    }
    for (int k = c->n - 1, m = best_m; k >= 0; k--) {
        int d = choice[(size_t)k * W + (size_t)m];
        x[k] = d * q;
        m -= d;
    }
    free(V), free(NV), free(H), free(choice);
    repair(c, x); /* d·q may exceed a cap by rounding */
    return FSMOE_OK;
}

/* x = the start with the active positions replaced by u·scale. */
static void cobyla_compose(const g2ctx *c, const double *u)
{
    memcpy(c->xbuf, c->xfix, sizeof(double) * (size_t)c->n);
    for (int j = 0; j < c->m; j++)
        c->xbuf[c->act[j]] = u[j] > 0.0 ? u[j] * c->scale : 0.0;
}

static double cobyla_objective(unsigned m, const double *u, double *grad, void *data)
{
    (void)m;
    (void)grad; /* COBYLA is derivative-free */
    g2ctx *c = data;
    cobyla_compose(c, u);
    double total = 0.0, sum = 0.0;
    for (int k = 0; k < c->n; k++) {
        total += h_of(c, k, c->xbuf[k]);
        sum += c->xbuf[k];
    }
    return (total + tail_time(c, sum)) / c->obj_scale;
}

/* Σ_{j ≤ k} x_j ≤ cap_k at every position from the first active one on, in units of scale. */
static void cobyla_constraints(unsigned n_con, double *result, unsigned n, const double *u,
                               double *grad, void *data)
{
    (void)n;
    (void)grad;
    g2ctx *c = data;
    cobyla_compose(c, u);
    int k0 = c->n - (int)n_con;
    double sum = 0.0;
    for (int k = 0; k < c->n; k++) {
        sum += c->xbuf[k];
        if (k >= k0)
            result[k - k0] = (sum - c->cap[k]) / c->scale;
    }
}

/* A seed from the inputs, so that a plan never depends on NLopt's global random state. */
static unsigned long input_seed(const g2ctx *c)
{
    uint64_t h = 1469598103934665603ull;
    for (int k = 0; k < c->n; k++) {
        double v[3] = {c->cap[k], c->dense[k], c->grad[k]};
        unsigned char bytes[sizeof v];
        memcpy(bytes, v, sizeof v);
        for (size_t b = 0; b < sizeof bytes; b++)
            h = (h ^ bytes[b]) * 1099511628211ull;
    }
    return (unsigned long)h;
}

/* COBYLA from x (backward order, feasible); leaves its result in x. Returns 1 when it produced a
 * result, 0 when NLopt declined (the caller keeps its other candidates), or an error status
 * through *st for failures that are not the solver's (out of memory). */
static int step2_cobyla(g2ctx *c, double *x, fsmoe_error *err, fsmoe_status *st)
{
    *st = FSMOE_OK;
    /* COBYLA's work grows with the cube of its dimension: it polishes at most COBYLA_MAX_VARS
     * variables — the positions where the start already sends bytes (largest first), else
     * the latest positions (largest caps); the others stay at their start value. */
    c->m = 0;
    int with_x = 0;
    for (int k = 0; k < c->n; k++)
        with_x += c->cap[k] > 0.0 && x[k] > 0.0;
    for (int k = c->n - 1; k >= 0 && c->m < COBYLA_MAX_VARS; k--)
        if (c->cap[k] > 0.0 && (!with_x || x[k] > 0.0))
            c->act[c->m++] = k;
    if (with_x > COBYLA_MAX_VARS) { /* keep the largest x instead of the latest */
        int n_pos = 0;
        for (int k = 0; k < c->n; k++)
            if (c->cap[k] > 0.0 && x[k] > 0.0)
                c->act[n_pos++] = k;
        for (int a = 1; a < n_pos; a++) { /* insertion sort by x, descending; stable */
            int v = c->act[a], b = a - 1;
            while (b >= 0 && x[c->act[b]] < x[v]) {
                c->act[b + 1] = c->act[b];
                b--;
            }
            c->act[b + 1] = v;
        }
        c->m = COBYLA_MAX_VARS;
    }
    for (int a = 1; a < c->m; a++) { /* back to backward order for the prefix constraints */
        int v = c->act[a], b = a - 1;
        while (b >= 0 && c->act[b] > v) {
            c->act[b + 1] = c->act[b];
            b--;
        }
        c->act[b + 1] = v;
    }
    if (c->m == 0 || !(c->scale > 0.0))
        return 0;
    unsigned m = (unsigned)c->m;
    double *u = malloc(sizeof(double) * m * 4);
    if (!u) {
        *st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "gradient partition: out of memory");
        return 0;
    }
    double *lb = u + m, *ub = u + 2 * m, *step = u + 3 * m;
    unsigned n_con = (unsigned)(c->n - c->act[0]);
    double *ctol = calloc(n_con, sizeof(double));
    if (!ctol) {
        free(u);
        *st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "gradient partition: out of memory");
        return 0;
    }
    memcpy(c->xfix, x, sizeof(double) * (size_t)c->n);
    for (unsigned j = 0; j < m; j++) {
        u[j] = x[c->act[j]] / c->scale;
        lb[j] = 0.0;
        ub[j] = c->cap[c->act[j]] / c->scale;
        if (u[j] > ub[j])
            u[j] = ub[j];
    }
    nlopt_srand(input_seed(c));
    nlopt_opt o = nlopt_create(NLOPT_LN_COBYLA, m);
    if (!o) {
        free(u);
        free(ctol);
        *st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "gradient partition: nlopt_create failed");
        return 0;
    }
    nlopt_result res = nlopt_set_min_objective(o, cobyla_objective, c);
    if (res >= 0) res = nlopt_add_inequality_mconstraint(o, n_con, cobyla_constraints, c, ctol);
    /* x_k ≤ cap_k follows from x ≥ 0 and the prefix constraints: no upper bounds, which
     * COBYLA would carry as m more linear constraints. */
    if (res >= 0) res = nlopt_set_lower_bounds(o, lb);
    if (res >= 0) res = nlopt_set_xtol_rel(o, 1e-9);
    if (res >= 0) res = nlopt_set_ftol_rel(o, 1e-12);
    /* Evaluations cost O(layers · r_max); this cap keeps a 56-layer model in milliseconds. */
    if (res >= 0) res = nlopt_set_maxeval(o, 200 + 20 * (int)m);
    if (res >= 0) {
        for (unsigned j = 0; j < m; j++)
            step[j] = ub[j] > 0.0 ? 0.1 * ub[j] : 1e-3;
        res = nlopt_set_initial_step(o, step);
    }
    double fmin = 0.0;
    if (res >= 0)
        res = nlopt_optimize(o, u, &fmin);
    nlopt_destroy(o);
    int ok = res > 0 || res == NLOPT_ROUNDOFF_LIMITED;
    if (ok) {
        cobyla_compose(c, u);
        memcpy(x, c->xbuf, sizeof(double) * (size_t)c->n);
        repair(c, x);
    }
    free(u);
    free(ctol);
    return ok;
}

/* ---- step 1 ---- */

static void g2ctx_free(g2ctx *c)
{
    for (int f = 0; f < c->n_fns; f++)
        for (int j = 0; j < 1 + GRAD_MAX_ALT; j++) {
            free(c->fns[f].c[j].f1);
            free(c->fns[f].c[j].rest);
        }
    free(c->fns);
    free(c->fn_of);
    free(c->avail);
    free(c->act);
    memset(c, 0, sizeof *c);
}

static fsmoe_status g2ctx_init(g2ctx *c, const grad_problem *p, int with_moe_windows,
                               fsmoe_error *err)
{
    memset(c, 0, sizeof *c);
    c->p = p;
    c->n = p->n_layers;
    size_t n = (size_t)(c->n > 0 ? c->n : 1);
    c->fns = calloc(n, sizeof *c->fns);
    c->fn_of = calloc(n, sizeof *c->fn_of);
    c->avail = calloc(n * 7, sizeof(double));
    c->act = calloc(n, sizeof *c->act);
    if (!c->fns || !c->fn_of || !c->avail || !c->act) {
        g2ctx_free(c);
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "gradient partition: out of memory");
    }
    c->first = c->avail + n;
    c->cap = c->avail + 2 * n;
    c->dense = c->avail + 3 * n;
    c->grad = c->avail + 4 * n;
    c->xbuf = c->avail + 5 * n;
    c->xfix = c->avail + 6 * n;
    /* All MoE layers of a model usually share one problem: build its table once. */
    for (int i = 0; i < c->n; i++) {
        const grad_layer_in *q = &p->layers[i];
        int f = 0;
        while (f < c->n_fns && !same_moe_model(c->fns[f].src, q))
            f++;
        if (f == c->n_fns) {
            c->n_fns++;
            fsmoe_status st = moe_fn_init(&c->fns[f], q, p->method, err);
            if (st != FSMOE_OK) {
                g2ctx_free(c);
                return st;
            }
        }
        c->fn_of[i] = f;
    }
    double carry = 0.0;
    for (int k = 0; k < c->n; k++) {
        int i = c->n - 1 - k;
        const grad_layer_in *L = &p->layers[i];
        double dense = L->dense_bwd_s > 0.0 ? L->dense_bwd_s : 0.0;
        double t_olp = dense + (with_moe_windows ? c->fns[c->fn_of[i]].olp_moe : 0.0);
        double send = 0.0;
        if (carry > 0.0 && !p->tail_only) { /* Eq. 3: n_first = g(min(t_ar(available), t_olp)) */
            double t = grad_ar_time(&p->ar, carry);
            send = grad_ar_inverse(&p->ar, t < t_olp ? t : t_olp);
            if (send > carry || t <= t_olp)
                send = carry; /* the inverse of the forward map, exactly */
        }
        c->avail[k] = carry;
        c->first[k] = send;
        c->dense[k] = dense;
        c->grad[k] = L->grad_bytes > 0.0 ? L->grad_bytes : 0.0;
        /* what step 2 may still send up to here (Eq. 4's carry); nothing when tail_only */
        c->cap[k] = p->tail_only ? 0.0 : carry - send;
        carry = carry - send + c->grad[k];
    }
    c->carry_end = carry;
    /* Later windows must keep what step 1 gives them: cap = suffix minimum. */
    for (int k = c->n - 2; k >= 0; k--)
        if (c->cap[k + 1] < c->cap[k])
            c->cap[k] = c->cap[k + 1];
    c->scale = c->n > 0 ? c->cap[c->n - 1] : 0.0;
    return FSMOE_OK;
}

/* ---- the partition ---- */

fsmoe_status grad_partition_solve(const grad_problem *p, grad_layer_out *out, grad_result *res,
                                  fsmoe_error *err)
{
    memset(res, 0, sizeof *res);
    if (p->n_layers < 0 || (p->n_layers > 0 && (!p->layers || !out)))
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "gradient partition: bad problem");
    if (!(p->ar.alpha_s >= 0.0) || !(p->ar.beta_s >= 0.0))
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "gradient partition: AllReduce line must have alpha, beta >= 0");
    g2ctx c;
    fsmoe_status st = g2ctx_init(&c, p, 1, err);
    if (st != FSMOE_OK)
        return st;
    const int n = c.n;
    size_t nn = (size_t)(n > 0 ? n : 1);
    double *best = calloc(nn * 2, sizeof(double));
    if (!best) {
        g2ctx_free(&c);
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "gradient partition: out of memory");
    }
    double *cand = best + nn;

    double obj0 = objective_bw(&c, best); /* x = 0: step 1 alone */
    double best_obj = obj0;
    const char *by = "none";
    c.obj_scale = obj0 > 0.0 ? obj0 : 1.0;
    /* A candidate replaces the incumbent only when it is better by more than rounding. */
#define TRY(name)                                                                                 \
    do {                                                                                          \
        double v_ = objective_bw(&c, cand);                                                       \
        if (v_ < best_obj * (1.0 - 1e-12)) {                                                      \
            best_obj = v_;                                                                        \
            memcpy(best, cand, sizeof(double) * (size_t)n);                                      \
            by = name;                                                                            \
        }                                                                                         \
    } while (0)
    int K = GRID_STEPS_DEFAULT;
    if (p->grid_steps > 0)
        K = p->grid_steps;
    if (c.scale > 0.0 && n > 0) {
        switch (p->step2) {
        case GRAD_STEP2_NONE: break;
        case GRAD_STEP2_GREEDY:
            step2_greedy(&c, cand);
            TRY("greedy");
            break;
        case GRAD_STEP2_GRID:
            st = step2_grid(&c, K, cand, err);
            if (st == FSMOE_OK)
                TRY("grid");
            break;
        case GRAD_STEP2_NLOPT:
            memset(cand, 0, sizeof(double) * (size_t)n);
            if (step2_cobyla(&c, cand, err, &st))
                TRY("nlopt-cobyla");
            else if (st == FSMOE_OK)
                st = fsmoe_fail(err, FSMOE_ERR_SOLVER, "gradient partition: NLopt COBYLA failed");
            break;
        case GRAD_STEP2_BEST:
        default:
            step2_greedy(&c, cand);
            TRY("greedy");
            st = step2_grid(&c, K, cand, err);
            if (st != FSMOE_OK)
                break;
            TRY("grid");
            memcpy(cand, best, sizeof(double) * (size_t)n);
            if (step2_cobyla(&c, cand, err, &st))
                TRY("nlopt-cobyla");
            break;
        }
    }
#undef TRY
    if (st != FSMOE_OK) {
        free(best);
        g2ctx_free(&c);
        return st;
    }

    /* Final values from pipeline_solve itself (the plan records its r); memoised on (problem,
     * t_gar) because saturated windows repeat the same t_gar layer after layer. */
    typedef struct {
        int fn, cand;
        double t, cand_s[1 + GRAD_MAX_ALT];
        pipeline_result res;
    } memo_t;
    memo_t m_final = {.fn = -1}, m_step1 = {.fn = -1};
    double sent = 0.0, moe = 0.0, dense_total = 0.0, moe_step1 = 0.0, fwd = 0.0, fwd1 = 0.0;
    for (int k = 0; k < n && st == FSMOE_OK; k++) {
        int i = n - 1 - k;
        const moe_fn *fn = &c.fns[c.fn_of[i]];
        grad_layer_out *o = &out[i];
        memset(o, 0, sizeof *o);
        o->olp_dense_s = c.dense[k];
        o->olp_moe_s = fn->olp_moe;
        o->r0 = fn->r0;
        o->available_bytes = c.avail[k] - sent;
        o->window_bytes = c.first[k];
        o->step2_bytes = best[k];
        sent += best[k];
        o->carried_bytes = c.avail[k] - c.first[k] - sent + c.grad[k];
        o->t_gar_s = tgar_of(&c, k, best[k]);
        for (int pass = 0; pass < 2 && st == FSMOE_OK; pass++) {
            memo_t *mm = pass ? &m_step1 : &m_final;
            double t = pass ? tgar_of(&c, k, 0.0) : o->t_gar_s;
            if (!(c.fn_of[i] == mm->fn && t == mm->t)) {
                st = layer_choose(fn->src, p->method, t, &mm->cand, mm->cand_s, &mm->res, err);
                mm->fn = c.fn_of[i];
                mm->t = t;
            }
            double f = mm->cand_s[mm->cand] - mm->res.time_s; /* the candidate's forward */
            if (pass) {
                moe_step1 += mm->res.time_s;
                fwd1 += f;
            } else {
                o->bwd = mm->res;
                o->cand = mm->cand;
                memcpy(o->cand_s, mm->cand_s, sizeof o->cand_s);
                moe += mm->res.time_s;
                fwd += f;
            }
        }
        dense_total += c.dense[k];
    }
    if (st != FSMOE_OK) {
        free(best);
        g2ctx_free(&c);
        return st;
    }
    double rem = c.carry_end - sent > 0.0 ? c.carry_end - sent : 0.0;
    res->prefix_window_bytes = grad_prefix_window_bytes(p, rem);
    res->prefix_early_window_bytes = grad_prefix_early_window_bytes(p, rem);
    res->tail_bytes = tail_bytes_after_prefix(p, rem);
    res->tail_s = grad_ar_time(&p->ar, res->tail_bytes);
    res->moe_bwd_s = moe;
    res->moe_fwd_s = fwd;
    res->backward_s = p->prefix_bwd_s + dense_total + moe;
    res->objective_step1_s = moe_step1 + tail_time(&c, 0.0);
    res->objective_s = moe + res->tail_s;
    res->step2_by = by;
    free(best);
    if (fwd + res->objective_s > (fwd1 + res->objective_step1_s) * (1.0 + 1e-12) && sent > 0.0) {
        /* The table and pipeline_solve disagreed (a solver that misses the integer optimum):
         * step 2 must never lose to step 1, so fall back to it. */
        grad_problem q = *p;
        q.step2 = GRAD_STEP2_NONE;
        g2ctx_free(&c);
        return grad_partition_solve(&q, out, res, err);
    }
    g2ctx_free(&c);
    return FSMOE_OK;
}

double grad_step2_objective(const grad_problem *p, const grad_layer_out *s1, const double *x)
{
    int n = p->n_layers;
    double carry = 0.0, sum = 0.0, total = 0.0;
    double *caps = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!caps)
        return NAN;
    /* Rebuild step 1's carries from its window bytes (backward order). */
    for (int k = 0; k < n; k++) {
        int i = n - 1 - k;
        caps[k] = carry - s1[i].window_bytes;
        carry = caps[k] + (p->layers[i].grad_bytes > 0.0 ? p->layers[i].grad_bytes : 0.0);
    }
    for (int k = n - 2; k >= 0; k--)
        if (caps[k + 1] < caps[k])
            caps[k] = caps[k + 1];
    for (int k = 0; k < n; k++) {
        int i = n - 1 - k;
        if (x[i] < 0.0) {
            free(caps);
            return INFINITY;
        }
        sum += x[i];
        if (sum > caps[k] * (1.0 + 1e-9) + 1e-9) {
            free(caps);
            return INFINITY;
        }
        double t = grad_ar_time(&p->ar, s1[i].window_bytes + x[i]) - s1[i].olp_dense_s;
        int cand;
        double cand_s[1 + GRAD_MAX_ALT];
        pipeline_result r;
        if (layer_choose(&p->layers[i], p->method, t > 0.0 ? t : 0.0, &cand, cand_s, &r,
                         NULL) != FSMOE_OK) {
            free(caps);
            return NAN;
        }
        total += r.time_s;
    }
    free(caps);
    return total + grad_ar_time(&p->ar, tail_bytes_after_prefix(p, carry - sum));
}

/* ---- baselines ---- */

/* Lina's micro-ops of one tensor (*bytes unsent, cut into micro-ops of `unit` bytes, the last one
 * smaller), launched back to back while *tau < budget_s: each adds its AllReduce time to *tau,
 * one to *ops and its bytes to *sent (when not NULL); *bytes keeps what is left. Equal to the
 * one-micro-op-at-a-time loop, in O(1): k whole micro-ops are launched at once, k the fewest
 * that reach the budget (every micro-op but the last of a tensor has the same time). */
static void lina_send(const fsmoe_line *ar, double *bytes, double unit, double budget_s,
                      double *tau, long *ops, double *sent)
{
    double q = *bytes;
    if (!(q > 0.0) || !(*tau < budget_s))
        return;
    double whole = isfinite(unit) ? floor(q / unit) : 0.0; /* micro-ops of `unit` bytes */
    double rest = whole > 0.0 ? q - whole * unit : q;
    if (rest < 0.0)
        rest = 0.0;
    if (whole > 0.0) {
        double t_unit = grad_ar_time(ar, unit);
        double k = whole;
        if (isfinite(budget_s) && t_unit > 0.0) {
            double need = ceil((budget_s - *tau) / t_unit);
            if (need < k)
                k = need < 1.0 ? 1.0 : need;
        }
        *tau += k * t_unit;
        *ops = k >= (double)(LONG_MAX - *ops) ? LONG_MAX : *ops + (long)k;
        if (sent)
            *sent += k * unit;
        if (k < whole) {
            *bytes = (whole - k) * unit + rest;
            return;
        }
    }
    if (rest > 0.0 && *tau < budget_s) {
        *tau += grad_ar_time(ar, rest);
        *ops += *ops < LONG_MAX;
        if (sent)
            *sent += rest;
        rest = 0.0;
    }
    *bytes = rest;
}

void grad_baseline_eval(const grad_problem *p, grad_baseline b, double micro_op_bytes,
                        grad_baseline_result *out)
{
    memset(out, 0, sizeof *out);
    const int n = p->n_layers;
    double total = p->prefix_grad_bytes > 0.0 ? p->prefix_grad_bytes : 0.0;
    for (int i = 0; i < n; i++)
        total += p->layers[i].grad_bytes > 0.0 ? p->layers[i].grad_bytes : 0.0;
    if (b == GRAD_BASE_NONE) {
        out->tail_bytes = total;
        out->exposed_s = grad_ar_time(&p->ar, total);
        out->micro_ops = total > 0.0;
        return;
    }
    if (b == GRAD_BASE_DENSE_ONLY) {
        /* Tutel-Improved: step 1 with the dense windows alone; the MoE layers keep t_gar = 0. */
        double carry = 0.0;
        for (int i = n - 1; i >= 0; i--) {
            double dense = p->layers[i].dense_bwd_s > 0.0 ? p->layers[i].dense_bwd_s : 0.0;
            if (carry > 0.0) {
                double t = grad_ar_time(&p->ar, carry);
                double send = t <= dense ? carry : grad_ar_inverse(&p->ar, dense);
                if (send > carry)
                    send = carry;
                carry -= send;
                out->micro_ops += send > 0.0;
            }
            carry += p->layers[i].grad_bytes > 0.0 ? p->layers[i].grad_bytes : 0.0;
        }
        /* the prefix's backward: one more dense window for what is ready */
        out->prefix_window_bytes = grad_prefix_window_bytes(p, carry);
        out->micro_ops += out->prefix_window_bytes > 0.0;
        double early = grad_prefix_early_window_bytes(p, carry);
        out->micro_ops += early > 0.0;
        out->prefix_window_bytes += early;
        out->tail_bytes = tail_bytes_after_prefix(p, carry);
        out->exposed_s = grad_ar_time(&p->ar, out->tail_bytes);
        out->micro_ops += out->tail_bytes > 0.0;
        return;
    }
    /* Lina: a FIFO of per-layer tensors, each cut into micro-ops of at most micro_op_bytes. The
     * queue holds, per backward position, the bytes of that layer still unsent. A tensor's
     * micro-ops are counted in closed form (lina_send), so the work does not grow with the bytes:
     * a plan's gradients can be any finite size. */
    double unit = micro_op_bytes > 0.0 ? micro_op_bytes : INFINITY;
    double *q = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    if (!q) { /* cannot happen in practice; report no overlap rather than nothing */
        out->tail_bytes = total;
        out->exposed_s = grad_ar_time(&p->ar, total);
        return;
    }
    int head = 0, tail = 0;
    for (int i = n - 1; i >= 0; i--) {
        double dense = p->layers[i].dense_bwd_s > 0.0 ? p->layers[i].dense_bwd_s : 0.0;
        double tau = 0.0;
        /* Launch while the window is open; the last one may run past its end. */
        while (head < tail && tau < dense) {
            lina_send(&p->ar, &q[head], unit, dense, &tau, &out->micro_ops, NULL);
            if (!(q[head] > 0.0))
                head++;
        }
        if (tau > dense)
            out->delay_s += tau - dense;
        double g = p->layers[i].grad_bytes > 0.0 ? p->layers[i].grad_bytes : 0.0;
        if (g > 0.0)
            q[tail++] = g;
    }
    /* The prefix's backward is the last dense window; what a micro-op launched in it runs past
     * its end is exposed (nothing of the backward is left to delay). */
    /* Its early gradients join the queue when they are ready (prefix_early_s in). */
    double P = p->prefix_bwd_s > 0.0 ? p->prefix_bwd_s : 0.0, tau = 0.0;
    double early = prefix_early(p);
    double E_s = early > 0.0 && p->prefix_early_s < P ? p->prefix_early_s : P;
    while (head < tail && tau < E_s) {
        lina_send(&p->ar, &q[head], unit, E_s, &tau, &out->micro_ops, &out->prefix_window_bytes);
        if (!(q[head] > 0.0))
            head++;
    }
    double early_left = early;
    if (early > 0.0 && E_s < P) {
        if (tau < E_s)
            tau = E_s;
        while (tau < P && (head < tail || early_left > 0.0)) {
            double *buf = head < tail ? &q[head] : &early_left;
            lina_send(&p->ar, buf, unit, P, &tau, &out->micro_ops, &out->prefix_window_bytes);
            if (head < tail && !(q[head] > 0.0))
                head++;
        }
    }
    if (tau > P)
        out->exposed_s += tau - P;
    /* After the backward: the rest, and the prefix tensor (with what is left of its early
     * gradients, or all of them when the window had no time left for them), micro-op by
     * micro-op. */
    double pre_rest = (p->prefix_grad_bytes > 0.0 ? p->prefix_grad_bytes : 0.0) - early +
                      early_left;
    for (int j = head; j <= tail; j++) {
        double rem = j < tail ? q[j] : pre_rest;
        out->tail_bytes += rem;
        lina_send(&p->ar, &rem, unit, INFINITY, &out->exposed_s, &out->micro_ops, NULL);
    }
    free(q);
}
