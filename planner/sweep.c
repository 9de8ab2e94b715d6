/* Implements: the grid sweeps and the regret study of sweep.h over FSMoE Table 4
 * (FSMoE §6, Table 5) and Parm Table III (Parm §VI, Table IV).
 * Relies on: table4.h (grid and per-configuration plan), workload.h, pipeline_degree.h,
 * monta_a2a.h, sim_schedules.h. */
#include "sweep.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "baselines.h"
#include "grad_partition.h"
#include "monta_a2a.h"
#include "parm_schedule.h"
#include "table4.h"
#include "workload.h"

static const char *const grid_names[SWEEP_GRID_COUNT] = {"fsmoe-table4", "parm-table3"};

const char *sweep_grid_name(sweep_grid g)
{
    return (unsigned)g < SWEEP_GRID_COUNT ? grid_names[g] : "?";
}

int sweep_grid_from_name(const char *s)
{
    for (int i = 0; i < SWEEP_GRID_COUNT; i++)
        if (strcmp(s, grid_names[i]) == 0)
            return i;
    return -1;
}

/* Parm Table III with N_MP = N_ESP (design.md §11): P, N, B, L, H/N, M/N, f. */
#define PARM_COUNT (3 * 3 * 3 * 3 * 3 * 3 * 2)

int sweep_grid_size(sweep_grid g)
{
    return g == SWEEP_FSMOE_TABLE4 ? TABLE4_COUNT : g == SWEEP_PARM_TABLE3 ? PARM_COUNT : 0;
}

char sweep_testbed_of(const fsmoe_cluster *c)
{
    /* Only the paper's Testbed A used the longer sequences; any other cluster gets B's range
     * unless --testbed says otherwise. */
    return strcmp(c->name, "testbed-a") == 0 ? 'a' : 'b';
}

/* MoNTA's chunk counts for the configuration (1 where MoNTA has nothing to chunk). */
static void monta_chunks(const workload_shape *s, const fsmoe_parallel *par,
                         const workload_lines *w, int *n_o2, int *n_o3)
{
    monta_entries me;
    monta_problem mp;
    monta_result r;
    monta_problem_init(&mp, s, par, w, &me);
    monta_solve(&mp, &r);
    *n_o2 = r.n_o2 > 0 ? r.n_o2 : 1;
    *n_o3 = r.n_o3 > 0 ? r.n_o3 : 1;
}

/* The plan's schedule for a one-layer configuration: FSMoE's ESP pipeline at (esp_f, esp_b) or
 * Parm's S1/S2 in r chunks, whichever predicts the smallest forward + backward with t_gar in the
 * backward (plan_model.c's choice; the paper's own method keeps the ESP pipeline). */
static void choose_schedule(sim_model *m, sim_layer *L, pipeline_method method,
                            const pipeline_result *esp_f, const pipeline_result *esp_b,
                            double t_gar)
{
    L->schedule = FSMOE_SCHED_ESP_PIPELINE;
    L->r_f = L->esp_r_f = esp_f->r;
    L->r_b = L->esp_r_b = esp_b->r;
    if (method == PIPELINE_PAPER)
        return;
    double best = esp_f->time_s + esp_b->time_s;
    for (int k = FSMOE_SCHED_S1; k <= FSMOE_SCHED_S2; k++) {
        int rf, rb;
        double F;
        if (!parm_pausemp_best(&m->shape, &m->par, &m->lines, &L->wl, (fsmoe_schedule)k, t_gar,
                               &rf, &rb, &F))
            continue;
        if (F < best) {
            best = F;
            L->schedule = (fsmoe_schedule)k;
            L->r_f = rf;
            L->r_b = rb;
        }
    }
}

/* FSMoE-No-IIO's degrees (sim_noiio_degrees). */
static fsmoe_status noiio_degrees(sim_model *m, fsmoe_error *err)
{
    sim s;
    sim_init(&s);
    fsmoe_status st = sim_noiio_degrees(&s, m, err);
    sim_free(&s);
    return st;
}

/* The plan of a one-layer configuration, chosen by simulation among what a plan can say for the
 * layer (its schedule, r_f, r_b and, for MoNTA's layer, a2a strategy and chunks): the closed
 * form's choice, the ESP pipeline at FSMoE's, Tutel's and No-IIO's degrees, S1/S2 at their
 * closed-form degrees and unpipelined (Parm's r = 1), and MoNTA's layer at O1, O2 and O3 with
 * monta-o2/o3's chunk counts (base alone when N_MP = 1: nothing to drop). The simulated `plan`
 * iteration is the smallest of them (ties: the closed form's), so the plan is never slower than
 * fsmoe, parm-s1/s2, monta-o1/o2/o3 or the ESP pipeline at another schedule's degrees; fsmoe-run
 * plays the result like any other plan. */
static fsmoe_status pick_by_sim(sim_model *m, sim_layer *L, fsmoe_error *err)
{
    sim s;
    sim_init(&s);
    /* Tutel's degree does not depend on the plan's layer: found once (noiio_degrees), kept for
     * the sweep */
    fsmoe_status st = m->tutel_r > 0 ? FSMOE_OK : sim_tutel_degree(&s, m, &m->tutel_r, err);
    int tutel_r = m->tutel_r;
    typedef struct {
        fsmoe_schedule k;
        int r_f, r_b;
        fsmoe_a2a_strategy a2a;
        int chunks;
    } cand;
    cand c[20];
    int n = 0;
    c[n++] = (cand){L->schedule, L->r_f, L->r_b, L->a2a, L->a2a_chunks};
    c[n++] = (cand){FSMOE_SCHED_ESP_PIPELINE, L->esp_r_f, L->esp_r_b, FSMOE_A2A_BASE, 1};
    c[n++] = (cand){FSMOE_SCHED_ESP_PIPELINE, tutel_r, tutel_r, FSMOE_A2A_BASE, 1};
    c[n++] = (cand){FSMOE_SCHED_ESP_PIPELINE, L->noiio_r_f, L->noiio_r_b, FSMOE_A2A_BASE, 1};
    double t_gar = fsmoe_line_time(&m->lines.ar_dp, L->gar_moe_bytes);
    for (int k = FSMOE_SCHED_S1; k <= FSMOE_SCHED_S2; k++) {
        int rf, rb;
        double F;
        if (!parm_pausemp_best(&m->shape, &m->par, &m->lines, &L->wl, (fsmoe_schedule)k, t_gar,
                               &rf, &rb, &F))
            continue;
        c[n++] = (cand){(fsmoe_schedule)k, rf, rb, FSMOE_A2A_BASE, 1};
        c[n++] = (cand){(fsmoe_schedule)k, 1, 1, FSMOE_A2A_BASE, 1};
        c[n++] = (cand){(fsmoe_schedule)k, rf, 1, FSMOE_A2A_BASE, 1};
        c[n++] = (cand){(fsmoe_schedule)k, 1, rb, FSMOE_A2A_BASE, 1};
    }
    if (m->par.mp > 1) {
        c[n++] = (cand){FSMOE_SCHED_MONTA, 1, 1, FSMOE_A2A_O1, 1};
        c[n++] = (cand){FSMOE_SCHED_MONTA, 1, 1, FSMOE_A2A_O2, L->monta_chunks_o2};
        c[n++] = (cand){FSMOE_SCHED_MONTA, 1, 1, FSMOE_A2A_O3, L->monta_chunks_o3};
    } else {
        c[n++] = (cand){FSMOE_SCHED_MONTA, 1, 1, FSMOE_A2A_BASE, 1};
    }
    int best = 0;
    double best_t = INFINITY;
    for (int j = 0; j < n && st == FSMOE_OK; j++) {
        if (c[j].r_f < 1 || c[j].r_b < 1 || c[j].r_f > L->wl.r_max || c[j].r_b > L->wl.r_max)
            continue;
        L->schedule = c[j].k, L->r_f = c[j].r_f, L->r_b = c[j].r_b;
        L->a2a = c[j].a2a, L->a2a_chunks = c[j].chunks;
        double t;
        st = sim_schedule_time(&s, m, SIM_SCHED_PLAN, NULL, &t, err);
        if (st == FSMOE_OK && t < best_t)
            best_t = t, best = j;
    }
    L->schedule = c[best].k, L->r_f = c[best].r_f, L->r_b = c[best].r_b;
    L->a2a = c[best].a2a, L->a2a_chunks = c[best].chunks;
    sim_free(&s);
    return st;
}

static fsmoe_status config_table4(char testbed, const fsmoe_cluster *c, const char *path, int i,
                                  pipeline_method method, sim_model *m, sim_layer *L,
                                  char *describe, fsmoe_error *err)
{
    m->par = table4_layout(c);
    fsmoe_status st = table4_shape(testbed, i, &m->par, &m->shape, err);
    if (st == FSMOE_OK)
        st = workload_lines_init(c, path, &m->par, &m->shape, &m->lines, err);
    table4_plan tp;
    if (st == FSMOE_OK)
        st = table4_plan_config(&m->shape, &m->par, &m->lines, method, &tp, err);
    if (st != FSMOE_OK)
        return st;
    /* One transformer block (table4.h): the attention is the prefix, then the MoE layer, with
     * nothing after it. DP gradients: the gate and ln2 (ready when the MoE backward ends), the
     * attention's wo, bo (ready after its output projection's backward) and wqkv, bqkv, ln1
     * (ready at the end); the experts' only where EDP > 1. */
    const double b = m->shape.bytes_per_element, M = (double)m->shape.M;
    const double mp = m->par.mp > 0 ? m->par.mp : 1.0;
    const double ln2 = 2.0 * M * b;
    L->wl = tp.layer;
    m->prefix_attn = 1;
    m->prefix_ffn = 0;
    L->n_attn = L->n_ffn = 0;
    m->prefix_grad_bytes = tp.layer.attn_grad_bytes - ln2;
    m->prefix_early_grad_bytes = (M * M / mp + M) * b;
    L->dense_grad_bytes = 0.0;
    L->moe_grad_bytes = tp.layer.gate_grad_bytes + ln2 + tp.layer.expert_grad_bytes;
    choose_schedule(m, L, method, &tp.fwd, &tp.bwd, tp.t_gar_s);
    /* the plan's partition: nothing inside the MoE backward (t_gar = 0), the prefix window and
     * its early AllReduce (grad_partition.h), the rest after the backward */
    grad_problem gp = {.prefix_grad_bytes = m->prefix_grad_bytes,
                       .prefix_bwd_s = tp.layer.attn_bwd_s,
                       .prefix_early_bytes = m->prefix_early_grad_bytes,
                       .prefix_early_s = sim_out_proj_bwd_s(m),
                       .ar = m->lines.ar_dp};
    L->gar_moe_bytes = L->gar_dense_bytes = 0.0;
    m->fsmoe_prefix_window_bytes = grad_prefix_window_bytes(&gp, L->moe_grad_bytes);
    m->fsmoe_prefix_early_bytes = grad_prefix_early_window_bytes(&gp, L->moe_grad_bytes);
    m->fsmoe_tail_bytes = sim_model_grad_bytes(m) - m->fsmoe_prefix_window_bytes -
                          m->fsmoe_prefix_early_bytes;
    L->monta_chunks_o2 = tp.monta.n_o2 > 0 ? tp.monta.n_o2 : 1;
    L->monta_chunks_o3 = tp.monta.n_o3 > 0 ? tp.monta.n_o3 : 1;
    if ((st = noiio_degrees(m, err)) != FSMOE_OK)
        return st;
    if (method != PIPELINE_PAPER && (st = pick_by_sim(m, L, err)) != FSMOE_OK)
        return st;
    if (describe)
        snprintf(describe, 160, "B=%ld heads=%ld L=%ld M=%ld H=%ld f=%s%.1f expert=%s", m->shape.B,
                 m->shape.heads, m->shape.L, m->shape.M, m->shape.H,
                 m->shape.f > 0.0 ? "" : "none/", m->shape.f > 0.0 ? m->shape.f : 1.0,
                 fsmoe_expert_name(m->shape.expert));
    return FSMOE_OK;
}

static fsmoe_status config_parm(const fsmoe_cluster *c, const char *path, int i,
                                pipeline_method method, sim_model *m, sim_layer *L, int *valid,
                                char *describe, fsmoe_error *err)
{
    static const int Ps[3] = {8, 16, 32};
    static const int Ns[3] = {1, 2, 4};
    static const long Bs[3] = {2, 4, 8};
    static const long Ls[3] = {512, 1024, 2048};
    static const long HMs[3] = {1024, 2048, 4096};
    static const double fs[2] = {1.2, 2.4};
    int rest = i;
    double f = fs[rest % 2];
    rest /= 2;
    long Mn = HMs[rest % 3];
    rest /= 3;
    long Hn = HMs[rest % 3];
    rest /= 3;
    long L_ = Ls[rest % 3];
    rest /= 3;
    long B = Bs[rest % 3];
    rest /= 3;
    int N = Ns[rest % 3];
    rest /= 3;
    int P = Ps[rest % 3];
    *valid = 0;
    int G = c->gpus_per_node;
    if (P > c->nodes * G || N > (G < P ? G : P))
        return FSMOE_OK;
    fsmoe_parallel *par = &m->par;
    par->world = P;
    par->gpus_per_node = G < P ? G : P;
    par->mp = par->esp = N;
    par->ep = par->dp = P / N;
    par->pp = 1;
    if (fsmoe_parallel_validate(par, par->ep, "parm-table3", NULL) != FSMOE_OK)
        return FSMOE_OK;
    workload_shape *s = &m->shape;
    s->B = B;
    s->L = L_;
    s->M = Mn * N;
    s->H = Hn * N;
    s->heads = s->kv_heads = 16;
    s->E = par->ep;
    s->vocab = 0;
    s->k = 2;
    s->f = f;
    s->expert = FSMOE_EXPERT_GPT;
    s->bytes_per_element = 4;
    fsmoe_status st = workload_lines_init(c, path, par, s, &m->lines, err);
    if (st != FSMOE_OK)
        return st;
    workload_layer_init(s, par, &m->lines, &L->wl);
    pipeline_result rf, rb;
    st = pipeline_solve(&L->wl.fwd, method, &rf, err);
    if (st == FSMOE_OK)
        st = pipeline_solve(&L->wl.bwd, method, &rb, err);
    if (st != FSMOE_OK)
        return st;
    choose_schedule(m, L, method, &rf, &rb, 0.0);
    /* Parm's runs exclude attention and the gradient AllReduce (Parm §VI-A) */
    L->n_attn = L->n_ffn = 0;
    monta_chunks(s, par, &m->lines, &L->monta_chunks_o2, &L->monta_chunks_o3);
    if ((st = noiio_degrees(m, err)) != FSMOE_OK)
        return st;
    if (method != PIPELINE_PAPER && (st = pick_by_sim(m, L, err)) != FSMOE_OK)
        return st;
    *valid = 1;
    if (describe)
        snprintf(describe, 160, "P=%d N_MP=N_ESP=%d B=%ld L=%ld H=%ld M=%ld f=%.1f", P, N, B, L_,
                 s->H, s->M, f);
    return FSMOE_OK;
}

fsmoe_status sweep_config(sweep_grid g, char testbed, const fsmoe_cluster *c,
                          const char *cluster_path, int i, pipeline_method method, sim_model *m,
                          sim_layer *layer, int *valid, char *describe, fsmoe_error *err)
{
    memset(m, 0, sizeof *m);
    memset(layer, 0, sizeof *layer);
    m->layers = layer;
    m->n_layers = 1;
    *valid = 0;
    if (i < 0 || i >= sweep_grid_size(g))
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "sweep: configuration %d is not in 0..%d of %s", i,
                          sweep_grid_size(g) - 1, sweep_grid_name(g));
    if (g == SWEEP_FSMOE_TABLE4) {
        fsmoe_status st = config_table4(testbed, c, cluster_path, i, method, m, layer, describe,
                                        err);
        *valid = st == FSMOE_OK;
        return st;
    }
    return config_parm(c, cluster_path, i, method, m, layer, valid, describe, err);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void sweep_result_free(sweep_result *r)
{
    if (!r)
        return;
    free(r->index);
    free(r->t);
    free(r->tutel_r);
    free(r->r_f);
    free(r->r_b);
    free(r->key);
    memset(r, 0, sizeof *r);
}

fsmoe_status sweep_run(sweep_grid g, char testbed, const fsmoe_cluster *c,
                       const char *cluster_path, sweep_result *out, fsmoe_error *err)
{
    memset(out, 0, sizeof *out);
    int n = sweep_grid_size(g);
    if (n <= 0)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "sweep: unknown grid %d", (int)g);
    double t0 = now_s();
    out->n_grid = n;
    out->index = malloc((size_t)n * sizeof *out->index);
    out->t = malloc((size_t)n * sizeof *out->t);
    out->tutel_r = malloc((size_t)n * sizeof(int));
    out->r_f = malloc((size_t)n * sizeof(int));
    out->r_b = malloc((size_t)n * sizeof(int));
    out->key = malloc((size_t)n * sizeof *out->key);
    sim s;
    sim_init(&s);
    fsmoe_status st = FSMOE_OK;
    if (!out->index || !out->t || !out->tutel_r || !out->r_f || !out->r_b || !out->key) {
        st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "sweep: out of memory");
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        sim_model m;
        sim_layer layer;
        int valid;
        st = sweep_config(g, testbed, c, cluster_path, i, PIPELINE_SLSQP, &m, &layer, &valid,
                          NULL, err);
        if (st != FSMOE_OK)
            goto fail;
        if (!valid)
            continue;
        int j = out->n;
        if (m.tutel_r <= 0 && (st = sim_tutel_degree(&s, &m, &m.tutel_r, err)) != FSMOE_OK)
            goto fail;
        for (int k = 0; k < SIM_SCHED_COUNT; k++) {
            st = sim_schedule_time(&s, &m, (sim_schedule)k, NULL, &out->t[j][k], err);
            if (st != FSMOE_OK)
                goto fail;
        }
        out->index[j] = i;
        out->tutel_r[j] = m.tutel_r;
        out->r_f[j] = layer.r_f;
        out->r_b[j] = layer.r_b;
        out->key[j] = (sweep_key){.L = m.shape.L, .world = m.par.world, .mp = m.par.mp,
                                  .esp = m.par.esp};
        out->n++;
    }
    out->wall_s = now_s() - t0;
    sim_free(&s);
    return FSMOE_OK;
fail:
    sim_free(&s);
    sweep_result_free(out);
    return st;
}

void sweep_speedup(const sweep_result *r, int k, int ref, sweep_stat *out)
{
    memset(out, 0, sizeof *out);
    if (r->n == 0)
        return;
    out->min = INFINITY;
    out->max = -INFINITY;
    double sum = 0.0;
    for (int j = 0; j < r->n; j++) {
        double sp = r->t[j][ref] / r->t[j][k];
        sum += sp;
        if (sp < out->min)
            out->min = sp;
        if (sp > out->max)
            out->max = sp;
        if (r->t[j][k] > r->t[j][ref] * (1.0 + 1e-9))
            out->n_slower++;
    }
    out->mean = sum / r->n;
}

static int model_r_max(const sim_model *m)
{
    int r_max = PIPELINE_R_CAP;
    for (int i = 0; i < m->n_layers; i++) {
        /* the plan's layer: on the lines its AllToAll algorithm runs (sim_schedules.h) */
        const sim_layer *L = &m->layers[i];
        const workload_layer *wl = L->a2a_2dh && m->has_2dh ? &L->wl_2dh : &L->wl;
        if (wl->r_max < r_max)
            r_max = wl->r_max;
    }
    return r_max < 1 ? 1 : r_max;
}

static fsmoe_status time_with(sim *s, const sim_model *m, int r_f, int r_b, double *t,
                              fsmoe_error *err)
{
    sim_build_opts o = {r_f, r_b, 0};
    return sim_schedule_time(s, m, SIM_SCHED_PLAN, &o, t, err);
}

fsmoe_status sweep_regret_config(sim *s, const sim_model *m, sweep_regret *out, fsmoe_error *err)
{
    memset(out, 0, sizeof *out);
    const sim_layer *L = &m->layers[0];
    out->r_f_plan = L->r_f;
    out->r_b_plan = L->r_b;
    out->r_max = model_r_max(m);
    fsmoe_status st = time_with(s, m, 0, 0, &out->t_plan_s, err);
    if (st != FSMOE_OK)
        return st;
    double best_f = INFINITY, best_b = INFINITY;
    for (int r = 1; r <= out->r_max; r++) {
        double t;
        if ((st = time_with(s, m, r, L->r_b, &t, err)) != FSMOE_OK)
            return st;
        if (t < best_f * (1.0 - 1e-12))
            best_f = t, out->r_f_best = r;
        if ((st = time_with(s, m, L->r_f, r, &t, err)) != FSMOE_OK)
            return st;
        if (t < best_b * (1.0 - 1e-12))
            best_b = t, out->r_b_best = r;
    }
    if ((st = time_with(s, m, out->r_f_best, out->r_b_best, &out->t_best_s, err)) != FSMOE_OK)
        return st;
    if (out->t_plan_s < out->t_best_s) { /* the search is per phase; never report below 0 */
        out->t_best_s = out->t_plan_s;
        out->r_f_best = out->r_f_plan;
        out->r_b_best = out->r_b_plan;
    }
    out->regret = out->t_plan_s / out->t_best_s - 1.0;
    return FSMOE_OK;
}

fsmoe_status sim_refine_plan(sim *s, sim_model *m, int *changed, fsmoe_error *err)
{
    *changed = 0;
    for (int i = 0; i < m->n_layers; i++) {
        if (m->layers[i].schedule == FSMOE_SCHED_MONTA)
            continue; /* not pipelined: r stays 1 */
        sim_model one = *m;
        sim_layer L = m->layers[i];
        one.layers = &L;
        one.n_layers = 1;
        one.prefix_attn = one.prefix_ffn = 0;
        one.prefix_grad_bytes = 0.0;
        one.fsmoe_tail_bytes = 0.0;
        one.tutel_r = 1;
        sweep_regret rg;
        fsmoe_status st = sweep_regret_config(s, &one, &rg, err);
        if (st != FSMOE_OK)
            return st;
        if (rg.r_f_best != m->layers[i].r_f || rg.r_b_best != m->layers[i].r_b)
            (*changed)++;
        m->layers[i].r_f = rg.r_f_best;
        m->layers[i].r_b = rg.r_b_best;
    }
    return FSMOE_OK;
}

fsmoe_status sim_refine_fsmoe_plan(fsmoe_plan *p, const fsmoe_model *model,
                                   const fsmoe_cluster *c, const char *cluster_path, int *changed,
                                   fsmoe_error *err)
{
    sim_model m;
    sim s;
    sim_init(&s);
    *changed = 0;
    fsmoe_status st = sim_model_from_plan(p, model, c, cluster_path, &m, err);
    if (st == FSMOE_OK)
        st = sim_refine_plan(&s, &m, changed, err);
    if (st == FSMOE_OK)
        for (int i = 0; i < p->n_layers; i++) {
            p->layers[i].fwd.r = m.layers[i].r_f;
            p->layers[i].bwd.r = m.layers[i].r_b;
        }
    sim_model_free(&m);
    sim_free(&s);
    return st;
}
