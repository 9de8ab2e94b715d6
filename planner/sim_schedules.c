/* Implements: the schedule generators of sim_schedules.h: one iteration of every
 * schedule the papers compare (FSMoE Fig. 3 / Table 5 schedules, Parm S1/S2 + SAA, MoNTA
 * O1/O2/O3, Lina's micro-op gradient AllReduce, DeepSpeed-MoE, Tutel/PipeMoE) as simulator tasks.
 * Relies on: sim.h (engine), workload.h (per-layer costs and cost lines). */
#include "sim_schedules.h"
#include "gpipe.h"

#include "grad_partition.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baselines.h"
#include "locate.h"
#include "moe_seq.h"
#include "monta_a2a.h"
#include "parm_schedule.h"
#include "plan_model.h"

static const char *const sched_names[SIM_SCHED_COUNT] = {
    "deepspeed", "parm-baseline", "tutel", "tutel-improved", "pipemoe-lina", "fsmoe-no-iio",
    "fsmoe", "parm-s1", "parm-s2", "monta-o1", "monta-o2", "monta-o3", "plan",
};

const char *sim_schedule_name(sim_schedule k)
{
    return (unsigned)k < SIM_SCHED_COUNT ? sched_names[k] : "?";
}

int sim_schedule_from_name(const char *s)
{
    for (int i = 0; i < SIM_SCHED_COUNT; i++)
        if (strcmp(s, sched_names[i]) == 0)
            return i;
    return -1;
}

/* Priorities: dispatch-side collectives and compute first, the Gradient-AllReduce placed after
 * the last dispatch next, combine-side collectives after, Lina's micro-ops last. */
enum { PRIO_DISPATCH = 1, PRIO_GAR = 2, PRIO_COMBINE = 3, PRIO_LINA = 6 };

typedef enum { GRAD_NONE, GRAD_DENSE_ONLY, GRAD_LINA, GRAD_PLAN } grad_style;

typedef struct {
    sim *s;
    const sim_model *m;
    sim_schedule k;
    int st_inter, st_intra, st_comm, st_ar;
    int phase, layer;
    int tutel_r;
    grad_style grad;
    double available;  /* dense-only: gradient bytes ready and not yet sent */
} gen;

static int add(gen *g, int res, int stream, fsmoe_task_kind kind, double alpha, double beta, double n,
               int prio, int chunk, int prev)
{
    if (!(n > 0.0))
        return prev;
    int id = sim_add_task(g->s, res, stream, kind, alpha, beta * n);
    if (id < 0)
        return prev;
    sim_task *t = &g->s->tasks[id];
    t->bytes = res == SIM_R_COMPUTE ? 0.0 : n;
    t->priority = prio;
    t->phase = g->phase;
    t->layer = g->layer;
    t->chunk = chunk;
    sim_add_dep(g->s, id, prev);
    return id;
}

static int add_line(gen *g, int res, int stream, fsmoe_task_kind kind, const fsmoe_line *l, double n,
                    int prio, int chunk, int prev)
{
    return add(g, res, stream, kind, l->alpha_s, l->beta_s, n, prio, chunk, prev);
}

/* A Gradient-AllReduce of n bytes on stream st after prev; the runtime issues it when its
 * backward reaches anchor `at` of the current layer (task.h). */
static int gar(gen *g, int st, double n, int prio, int prev, fsmoe_anchor at)
{
    int id = add_line(g, SIM_R_INTER, st, FSMOE_TASK_GRAD_AR, &g->m->lines.ar_dp, n, prio, -1, prev);
    if (id >= 0 && id != prev)
        g->s->tasks[id].anchor = at;
    return id;
}

/* Work of t seconds on compute after prev: `kind`'s label at the current phase and layer
 * (none when t ≤ 0: a profile without a copy line prices element-wise work at zero). */
static int compute(gen *g, fsmoe_task_kind kind, double t, int prev)
{
    return t > 0.0 ? add(g, SIM_R_COMPUTE, -1, kind, 0.0, 1.0, t, 0, -1, prev) : prev;
}

/* A zero-cost task after every id in deps (n of them); the single dep itself when n == 1. */
static int join(gen *g, const int *deps, int n)
{
    if (n == 1)
        return deps[0];
    int id = sim_add_task(g->s, SIM_R_SYNC, -1, FSMOE_TASK_GATE, 0.0, 0.0);
    if (id < 0)
        return -1;
    g->s->tasks[id].phase = g->phase;
    g->s->tasks[id].layer = g->layer;
    for (int i = 0; i < n; i++)
        sim_add_dep(g->s, id, deps[i]);
    return id;
}

/* Whether schedule k plays layer L on the hierarchical AllToAll: the plan's schedule where the
 * plan says 2dh (what fsmoe-run executes, runtime/schedule.c); every other schedule is a
 * reference on the flat AllToAll — fsmoe and fsmoe-no-iio are FSMoE as published (its own
 * model is planned with `dispatch: nccl`, sim_model_from_plan), and DeepSpeed-MoE and Tutel,
 * which both have a hierarchical AllToAll option, are kept flat as the papers ran them. */
static int plays_2dh(const gen *g, const sim_layer *L)
{
    return L->a2a_2dh && g->m->has_2dh && g->k == SIM_SCHED_PLAN;
}

static const workload_lines *layer_lines(const gen *g, const sim_layer *L)
{
    return plays_2dh(g, L) ? &g->m->lines_2dh : &g->m->lines;
}

static const workload_layer *layer_wl(const gen *g, const sim_layer *L)
{
    return plays_2dh(g, L) ? &L->wl_2dh : &L->wl;
}

/* The shape of the MoE layer being generated: the model's, at that layer's routing
 * (sim_model_at_routing; as planned where none is set). */
static workload_shape layer_shape(const gen *g)
{
    workload_shape s = g->m->shape;
    if (g->layer >= 0 && g->layer < g->m->n_layers) {
        s.run_rows = g->m->layers[g->layer].run_rows;
        s.run_width = g->m->layers[g->layer].run_width;
    }
    return s;
}

static double tokens_bytes(const sim_model *m)
{
    return (double)m->shape.B * (double)m->shape.L * (double)m->shape.M *
           m->shape.bytes_per_element;
}

/* Backward of an attention block's output projection (its first two GEMMs: dX and dW of wo,
 * (B·L, M) × (M, M/N_MP)); the block's wo and bo gradients are ready when it ends. */
double sim_out_proj_bwd_s(const sim_model *m)
{
    const fsmoe_line *gemm = &m->lines.gemm_dense;
    double mp = m->par.mp > 0 ? m->par.mp : 1.0;
    double macs = (double)m->shape.B * (double)m->shape.L * (double)m->shape.M *
                  ((double)m->shape.M / mp);
    return 2.0 * gemm->alpha_s + 2.0 * macs * gemm->beta_s;
}

/* Dense blocks: compute (block time minus its MP AllReduce) then the MP AllReduce (intra).
 * early_at (backward only, may be NULL): the first attention block the backward visits is
 * split into its output projection and the rest, and *early_at gets the task after which the
 * projection's gradients are ready (prev when there is no attention block). */
static int dense(gen *g, const workload_layer *wl, int n_attn, int n_ffn, int prev,
                 int *early_at)
{
    const sim_model *m = g->m;
    double x = tokens_bytes(m);
    double t_ar = fsmoe_line_time(&m->lines.ar_mp, x);
    int bwd = g->phase != SIM_PHASE_FWD;
    if (early_at)
        *early_at = prev;
    for (int i = 0; i < n_attn + n_ffn; i++) {
        int is_attn = bwd ? i >= n_ffn : i < n_attn;
        double t = is_attn ? (bwd ? wl->attn_bwd_s : wl->attn_fwd_s)
                           : (bwd ? wl->ffn_bwd_s : wl->ffn_fwd_s);
        double c = t - t_ar;
        if (c < 0.0)
            c = 0.0;
        if (early_at && bwd && i == n_ffn && is_attn) {
            double o = sim_out_proj_bwd_s(m);
            if (o > c)
                o = c;
            prev = add(g, SIM_R_COMPUTE, -1, FSMOE_TASK_ATTN, 0.0, 1.0, o, 0, -1, prev);
            *early_at = prev;
            c -= o;
        }
        prev = add(g, SIM_R_COMPUTE, -1, is_attn ? FSMOE_TASK_ATTN : FSMOE_TASK_FFN, 0.0, 1.0, c, 0, -1,
                   prev);
        prev = add_line(g, SIM_R_INTRA, -1, FSMOE_TASK_AR_MP, &m->lines.ar_mp, x, 0, -1, prev);
        /* one per transformer block (each has one attention): its norms and additions */
        if (is_attn)
            prev = compute(g, FSMOE_TASK_ELEMWISE, bwd ? wl->elem_bwd_s : wl->elem_fwd_s, prev);
    }
    return prev;
}

static double dense_time(const workload_layer *wl, int n_attn, int n_ffn, int bwd)
{
    return n_attn * (bwd ? wl->attn_bwd_s : wl->attn_fwd_s) +
           n_ffn * (bwd ? wl->ffn_bwd_s : wl->ffn_fwd_s);
}

/* Chunks of a pipelined MoE phase. sim_model_check has refused every r past SIM_MAX_CHUNKS
 * (the size of the arrays of chunk ends below) before the build; r < 1 means "not pipelined". */
static int sim_chunks(int r)
{
    return r < 1 ? 1 : r > SIM_MAX_CHUNKS ? SIM_MAX_CHUNKS : r;
}

/* FSMoE/Tutel pipelined MoE phase: per chunk Dispatch-A2A → ESP-AG → Expert → ESP-RS →
 * Combine-A2A. one_stream puts intra and inter collectives on one stream (Tutel, No-IIO).
 * gar_bytes > 0: a Gradient-AllReduce on the same inter stream right after the last dispatch. */
static int moe_pipelined(gen *g, const workload_layer *wl, int r, int prev, double gar_bytes,
                         int one_stream)
{
    const pipeline_problem *p = g->phase == SIM_PHASE_FWD ? &wl->fwd : &wl->bwd;
    int sx = one_stream ? g->st_comm : g->st_inter;
    int sy = one_stream ? g->st_comm : g->st_intra;
    int ends[SIM_MAX_CHUNKS];
    r = sim_chunks(r);
    int last_d = prev;
    for (int j = 0; j < r; j++) {
        int d = add(g, SIM_R_INTER, sx, FSMOE_TASK_A2A, p->a2a_alpha, p->a2a_beta, p->n_a2a / r,
                    PRIO_DISPATCH, j, prev);
        last_d = d;
        int a = add(g, SIM_R_INTRA, sy, FSMOE_TASK_AG, p->ag_alpha, p->ag_beta, p->n_ag / r,
                    PRIO_DISPATCH, j, d);
        int e = add(g, SIM_R_COMPUTE, -1, FSMOE_TASK_EXPERT, p->exp_alpha, p->exp_beta, p->n_exp / r,
                    PRIO_DISPATCH, j, a);
        int rs = add(g, SIM_R_INTRA, sy, FSMOE_TASK_RS, p->rs_alpha, p->rs_beta, p->n_rs / r,
                     PRIO_COMBINE, j, e);
        ends[j] = add(g, SIM_R_INTER, sx, FSMOE_TASK_A2A, p->a2a_alpha, p->a2a_beta, p->n_a2a / r,
                      PRIO_COMBINE, j, rs);
    }
    if (gar_bytes > 0.0)
        gar(g, sx, gar_bytes, PRIO_GAR, last_d, FSMOE_AT_DISPATCHED);
    return join(g, ends, r);
}

/* DeepSpeed-MoE or Parm's baseline (moe_seq.h): every operation after the previous one on one
 * stream. */
static int moe_sequential(gen *g, moe_seq_kind kind, int prev)
{
    static const int res[] = {[MOE_SEQ_COMPUTE] = SIM_R_COMPUTE, [MOE_SEQ_INTRA] = SIM_R_INTRA,
                              [MOE_SEQ_INTER] = SIM_R_INTER};
    const sim_model *m = g->m;
    moe_seq_op ops[MOE_SEQ_MAX_OPS];
    workload_shape s = layer_shape(g);
    int n = moe_seq_ops(kind, &s, &m->par, &m->lines, g->phase != SIM_PHASE_FWD, ops);
    for (int i = 0; i < n; i++)
        prev = add(g, res[ops[i].where], ops[i].where == MOE_SEQ_COMPUTE ? -1 : g->st_comm,
                   ops[i].kind, ops[i].alpha_s, ops[i].beta_s, ops[i].n, 1, -1, prev);
    return prev;
}

/* Parm's PauseMP schedules S1/S2 in r chunks (parm_schedule.h): per chunk dispatch (EP&ESP
 * A2A) → expert → combine (A2A for S1, SAA for S2) on one inter-node stream, dispatches first by
 * priority; gar_bytes > 0: the Gradient-AllReduce after the last dispatch; S1 then the MP
 * AllGather of the layer output on the intra-node link. This is the flow whose makespan
 * parm_schedule.h states in closed form. */
static int moe_pausemp(gen *g, const workload_lines *w, const workload_layer *wl,
                       fsmoe_schedule kind, int r, int prev, double gar_bytes, int stream)
{
    const sim_model *m = g->m;
    pausemp_problem pf, pb;
    workload_shape s = layer_shape(g);
    parm_pausemp_problems(&s, &m->par, w, wl, kind, &pf, &pb);
    const pausemp_problem *p = g->phase == SIM_PHASE_FWD ? &pf : &pb;
    int ends[SIM_MAX_CHUNKS];
    r = sim_chunks(r);
    int last_d = prev;
    for (int j = 0; j < r; j++) {
        int d = add(g, SIM_R_INTER, stream, FSMOE_TASK_A2A, p->d_alpha, p->d_beta, p->u / r,
                    PRIO_DISPATCH, j, prev);
        last_d = d;
        int e = add(g, SIM_R_COMPUTE, -1, FSMOE_TASK_EXPERT, p->exp_alpha, p->exp_beta, p->n_exp / r,
                    PRIO_DISPATCH, j, d);
        ends[j] = add(g, SIM_R_INTER, stream,
                      kind == FSMOE_SCHED_S2 && m->par.mp > 1 ? FSMOE_TASK_SAA : FSMOE_TASK_A2A,
                      p->c_alpha, p->c_beta, p->u / r, PRIO_COMBINE, j, e);
    }
    if (gar_bytes > 0.0)
        gar(g, stream, gar_bytes, PRIO_GAR, last_d, FSMOE_AT_DISPATCHED);
    int end = join(g, ends, r);
    if (kind == FSMOE_SCHED_S1 && m->par.mp > 1)
        end = add_line(g, SIM_R_INTRA, stream == g->st_comm ? g->st_comm : g->st_intra, FSMOE_TASK_AG,
                       &m->lines.ag_mp, tokens_bytes(m), PRIO_COMBINE, -1, end);
    return end;
}

/* MoNTA's AllToAll of I bytes (duplicated tokens over t = N_MP) by strategy 1..3 (O1..O3) with
 * N chunks; strategy 0 = the plain AllToAll. Unchunked operations go on stream st. */
static int monta_a2a(gen *g, const workload_lines *w, int strategy, int N, double I, int prev,
                     int st)
{
    const sim_model *m = g->m;
    int t = m->par.mp;
    if (m->par.ep <= 1)
        return prev;
    if (strategy == 0 || t <= 1)
        return add_line(g, SIM_R_INTER, st, FSMOE_TASK_A2A, &w->a2a_ep, I, 1, -1, prev);
    if (strategy == 1) {
        prev = add_line(g, SIM_R_INTER, st, FSMOE_TASK_A2A, &w->a2a_ep, I / t, 1, -1, prev);
        return add_line(g, SIM_R_INTRA, st, FSMOE_TASK_AG, &w->ag_mp, I, 1, -1, prev);
    }
    /* sim_model_check refused N past SIM_MAX_A2A_CHUNKS before the build */
    if (N < 1)
        N = 1;
    if (N > SIM_MAX_A2A_CHUNKS)
        N = SIM_MAX_A2A_CHUNKS;
    int ends[SIM_MAX_A2A_CHUNKS];
    int prev_ag = -1, prev_d = -1;
    for (int j = 0; j < N; j++) {
        int a = add_line(g, SIM_R_INTER, g->st_inter, FSMOE_TASK_A2A, &w->a2a_ep, I / ((double)N * t),
                         1, j, prev);
        int ag = add_line(g, SIM_R_INTRA, g->st_intra, FSMOE_TASK_AG, &w->ag_mp, I / N, 1, j, a);
        if (strategy == 2 && prev_d >= 0 && ag != a)
            sim_add_dep(g->s, ag, prev_d); /* O2: AG_{j+1} after D_j */
        (void)prev_ag;
        int d = add_line(g, SIM_R_COPY, -1, FSMOE_TASK_COPY, &w->copy, w->have_copy ? I / N : 0.0, 1,
                         j, ag);
        prev_ag = ag;
        prev_d = d;
        ends[j] = d;
    }
    return join(g, ends, N);
}

/* MoNTA's sequential layer: monta-o1/o2/o3 at their strategy and chunk counts (on one stream),
 * the plan's layer at its own a2a and a2a_chunks with its inter-node operations on the plan's
 * inter stream and the ReduceScatter on the intra stream; gar_bytes > 0 (the plan): that
 * Gradient-AllReduce on the inter stream right after the dispatch AllToAll, so the combine
 * starts after both it and the ReduceScatter (plan_model.h plan_monta_problems, in closed form). */
static int moe_monta(gen *g, const sim_layer *L, int prev, double gar_bytes)
{
    const sim_model *m = g->m;
    int strategy, N;
    if (g->k == SIM_SCHED_PLAN) {
        strategy = (int)L->a2a;
        N = L->a2a_chunks > 0 ? L->a2a_chunks : 1;
    } else {
        strategy = g->k - SIM_SCHED_MONTA_O1 + 1;
        N = strategy == 2 ? L->monta_chunks_o2 : strategy == 3 ? L->monta_chunks_o3 : 1;
    }
    if (strategy < 2)
        N = 1;
    workload_shape s = layer_shape(g);
    double I = workload_ran_copies(&s) * (double)s.M * (double)s.bytes_per_element;
    const workload_layer *wl = layer_wl(g, L);
    const workload_lines *w = layer_lines(g, L);
    const pipeline_problem *p = g->phase == SIM_PHASE_FWD ? &wl->fwd : &wl->bwd;
    int plan = g->k == SIM_SCHED_PLAN;
    int sx = plan ? g->st_inter : g->st_comm, sy = plan ? g->st_intra : g->st_comm;
    prev = monta_a2a(g, w, strategy, N, I, prev, sx);
    if (gar_bytes > 0.0)
        gar(g, g->st_inter, gar_bytes, PRIO_GAR, prev, FSMOE_AT_DISPATCHED);
    /* every rank holds all I bytes of tokens again and computes its H/N_ESP slice (p->n_exp
     * is the ESP pipeline's: N_ESP gathered copies on the slice) */
    prev = add(g, SIM_R_COMPUTE, -1, FSMOE_TASK_EXPERT, p->exp_alpha, p->exp_beta,
               p->n_exp / m->par.esp, 1, -1, prev);
    prev = add_line(g, SIM_R_INTRA, sy, FSMOE_TASK_RS, &m->lines.rs_esp, m->par.esp > 1 ? I : 0.0,
                    1, -1, prev);
    /* without EP there is no combine AllToAll (nor O1's AllGather after it) to bring the
     * ReduceScatter's 1/N_ESP of the tokens back: an ESP AllGather does (RS + AG = the
     * AllReduce of DeepSpeed's expert tensor parallelism) */
    if (m->par.ep <= 1 && m->par.esp > 1)
        prev = add_line(g, SIM_R_INTRA, sy, FSMOE_TASK_AG, &m->lines.ag_esp, I, 1, -1, prev);
    return monta_a2a(g, w, strategy, N, I, prev, sx);
}

int sim_schedule_applies(const sim_model *m, sim_schedule k, const char **why)
{
    int monta = k == SIM_SCHED_MONTA_O1 || k == SIM_SCHED_MONTA_O2 || k == SIM_SCHED_MONTA_O3;
    if (why)
        *why = NULL;
    if (monta && !monta_layout_ok(&m->par)) {
        if (why)
            *why = "MoNTA's layer needs the MP group to slice the experts (mp = esp)";
        return 0;
    }
    if (k == SIM_SCHED_DEEPSPEED && !deepspeed_layout_ok(&m->par)) {
        if (why)
            *why = "DeepSpeed-MoE slices experts only over its tensor-parallel group (esp = mp; "
                   "esp = 1: drop_tokens)";
        return 0;
    }
    return 1;
}

static int layer_r(const gen *g, const sim_layer *L, const sim_build_opts *o)
{
    int bwd = g->phase != SIM_PHASE_FWD;
    switch (g->k) {
    case SIM_SCHED_TUTEL:
    case SIM_SCHED_TUTEL_IMPROVED:
    case SIM_SCHED_PIPEMOE_LINA:
        return g->tutel_r;
    case SIM_SCHED_PARM_S1:
    case SIM_SCHED_PARM_S2:
        return 1; /* Parm does not pipeline */
    case SIM_SCHED_FSMOE_NO_IIO:
        if (o && (bwd ? o->r_b : o->r_f) > 0)
            return bwd ? o->r_b : o->r_f;
        if ((bwd ? L->noiio_r_b : L->noiio_r_f) > 0)
            return bwd ? L->noiio_r_b : L->noiio_r_f;
        /* fall through */
    case SIM_SCHED_FSMOE:
        if (o && (bwd ? o->r_b : o->r_f) > 0)
            return bwd ? o->r_b : o->r_f;
        if ((bwd ? L->esp_r_b : L->esp_r_f) > 0)
            return bwd ? L->esp_r_b : L->esp_r_f;
        return bwd ? L->r_b : L->r_f;
    default:
        if (o && (bwd ? o->r_b : o->r_f) > 0)
            return bwd ? o->r_b : o->r_f;
        return bwd ? L->r_b : L->r_f;
    }
}

static int moe_phase(gen *g, const sim_layer *L, int prev, double gar_bytes,
                     const sim_build_opts *o)
{
    switch (g->k) {
    case SIM_SCHED_DEEPSPEED:
        return moe_sequential(g, MOE_SEQ_DEEPSPEED, prev);
    case SIM_SCHED_PARM_BASELINE:
        return moe_sequential(g, MOE_SEQ_PARM_BASELINE, prev);
    case SIM_SCHED_PARM_S1:
    case SIM_SCHED_PARM_S2:
        return moe_pausemp(g, &g->m->lines, &L->wl,
                           g->k == SIM_SCHED_PARM_S2 ? FSMOE_SCHED_S2 : FSMOE_SCHED_S1, 1, prev,
                           0.0, g->st_comm);
    case SIM_SCHED_MONTA_O1:
    case SIM_SCHED_MONTA_O2:
    case SIM_SCHED_MONTA_O3:
        return moe_monta(g, L, prev, 0.0);
    case SIM_SCHED_PLAN:
        if (L->schedule == FSMOE_SCHED_MONTA)
            return moe_monta(g, L, prev, gar_bytes);
        if (L->schedule == FSMOE_SCHED_S1 || L->schedule == FSMOE_SCHED_S2)
            return moe_pausemp(g, layer_lines(g, L), layer_wl(g, L), L->schedule,
                               layer_r(g, L, o), prev, gar_bytes, g->st_inter);
        return moe_pipelined(g, layer_wl(g, L), layer_r(g, L, o), prev, gar_bytes, 0);
    case SIM_SCHED_FSMOE_NO_IIO: /* FSMoE's ESP pipeline everywhere, one stream */
        return moe_pipelined(g, layer_wl(g, L), layer_r(g, L, o), prev, gar_bytes, 1);
    case SIM_SCHED_FSMOE:
        return moe_pipelined(g, layer_wl(g, L), layer_r(g, L, o), prev, gar_bytes, 0);
    default: /* tutel, tutel-improved, pipemoe-lina */
        return moe_pipelined(g, &L->wl, layer_r(g, L, o), prev, gar_bytes, 1);
    }
}

int sim_schedule_forced_order(sim_schedule k)
{
    switch (k) {
    case SIM_SCHED_DEEPSPEED: return WORKLOAD_ORDER_GSHARD;
    case SIM_SCHED_TUTEL:
    case SIM_SCHED_TUTEL_IMPROVED:
    case SIM_SCHED_PIPEMOE_LINA: return WORKLOAD_ORDER_TUTEL;
    default: return -1;
    }
}

workload_order sim_schedule_order(sim_schedule k, const workload_shape *s)
{
    int o = sim_schedule_forced_order(k);
    return o >= 0 ? (workload_order)o : s->order;
}

/* MoE layer L in the current phase: its gate and token order (the one schedule k runs) around
 * schedule k's MoE operations (moe_phase). Forward: the gate and the dispatch before, the
 * combine after; backward: the combine's backward before, the dispatch's and the gate's after. */
static int moe_layer(gen *g, const sim_layer *L, int prev, double gar_bytes,
                     const sim_build_opts *o)
{
    const workload_layer *wl = &L->wl;
    int bwd = g->phase != SIM_PHASE_FWD;
    workload_order ord = sim_schedule_order(g->k, &g->m->shape);
    /* Parm's S1 (PauseMP): each MP member routes only its own share of the tokens */
    int pausemp = g->k == SIM_SCHED_PARM_S1 ||
                  (g->k == SIM_SCHED_PLAN && L->schedule == FSMOE_SCHED_S1);
    const workload_routing *r = workload_route(wl, pausemp);
    double d = workload_order_s(wl, r, ord, bwd, 0), c = workload_order_s(wl, r, ord, bwd, 1);
    int gate = compute(g, FSMOE_TASK_GATE, bwd ? c : r->gate_fwd_s + d, prev);
    /* the forward gate's statistics and counts: the ranks meet there first after the
     * attention (sim.h SIM_TASK_MEETS) */
    if (!bwd && gate != prev && workload_gate_meets(&g->m->par))
        g->s->tasks[gate].flags |= SIM_TASK_MEETS;
    prev = moe_phase(g, L, gate, gar_bytes, o);
    return compute(g, FSMOE_TASK_GATE, bwd ? d + r->gate_bwd_s : c, prev);
}

/* Lina: gradients of one generalised layer cut into 30 MB micro-ops (never mixing layers),
 * launched only while no A2A is ready or running on the inter link. */
static void lina_micro_ops(gen *g, double bytes, int ready, fsmoe_anchor at)
{
    const double mo = GRAD_LINA_MICRO_OP_BYTES;
    /* a count, not a subtraction loop: sim_model_check bounded it (1e30 - 30e6 == 1e30) */
    double count = ceil(bytes / mo);
    int n = count > SIM_MAX_LINA_OPS ? SIM_MAX_LINA_OPS : (int)count;
    for (int i = 0; i < n; i++) {
        double size = i + 1 < n ? mo : bytes - (double)(n - 1) * mo;
        int id = gar(g, g->st_ar, size, PRIO_LINA, ready, at);
        if (id >= 0 && id != ready)
            g->s->tasks[id].flags |= SIM_TASK_DEFER;
    }
}

/* Gradient bytes that became ready; what the schedule does with them. */
static void grads_ready(gen *g, double bytes, int ready, fsmoe_anchor at)
{
    if (!(bytes > 0.0))
        return;
    if (g->grad == GRAD_LINA)
        lina_micro_ops(g, bytes, ready, at);
    else if (g->grad == GRAD_DENSE_ONLY)
        g->available += bytes;
}

/* Tutel-Improved: as much of the ready gradients as fits a dense window of win seconds, in one
 * AllReduce from its start (the closed form's dense-only rule, grad_partition.c). */
static double dense_window(gen *g, double win, int window_start, fsmoe_anchor at)
{
    const fsmoe_line *ar = &g->m->lines.ar_dp;
    if (!(g->available > 0.0))
        return 0.0;
    double fit = ar->alpha_s + ar->beta_s * g->available <= win ? g->available
                 : ar->beta_s > 0.0 ? (win - ar->alpha_s) / ar->beta_s
                                    : g->available;
    if (fit > g->available)
        fit = g->available;
    if (fit > 0.0) {
        gar(g, g->st_ar, fit, PRIO_GAR, window_start, at);
        g->available -= fit;
        return fit;
    }
    return 0.0;
}

double sim_model_grad_bytes(const sim_model *m)
{
    double sum = m->prefix_grad_bytes;
    for (int i = 0; i < m->n_layers; i++)
        sum += m->layers[i].dense_grad_bytes + m->layers[i].moe_grad_bytes;
    return sum;
}

static void resources(sim *s)
{
    sim_add_resource(s, "compute", SIM_RES_EXCLUSIVE);
    sim_add_resource(s, "intra-node link", SIM_RES_SHARED);
    sim_add_resource(s, "inter-node link", SIM_RES_SHARED);
    sim_add_resource(s, "copy engine", SIM_RES_EXCLUSIVE);
    sim_add_resource(s, "sync", SIM_RES_SHARED);
}

/* Activation recomputation at the start of a generalised layer's backward (sim_model
 * recompute): the layer's forward again (L; NULL: the prefix, dense blocks only), or its
 * attention blocks' scores; the tasks belong to the backward phase. */
static int recompute(gen *g, const sim_layer *L, const workload_layer *wl, int n_attn, int n_ffn,
                     int prev, const sim_build_opts *o)
{
    if (g->m->recompute == FSMOE_RECOMPUTE_SELECTIVE)
        return compute(g, FSMOE_TASK_ATTN, n_attn * wl->attn_core_s, prev);
    if (g->m->recompute != FSMOE_RECOMPUTE_FULL)
        return prev;
    int first = g->s->n_tasks;
    g->phase = SIM_PHASE_FWD;
    if (L)
        prev = moe_layer(g, L, prev, 0.0, o);
    prev = dense(g, wl, n_attn, n_ffn, prev, NULL);
    g->phase = SIM_PHASE_BWD;
    for (int t = first; t < g->s->n_tasks; t++)
        g->s->tasks[t].phase = SIM_PHASE_BWD;
    return prev;
}

fsmoe_status sim_build(sim *s, const sim_model *m, sim_schedule k, const sim_build_opts *opts,
                       fsmoe_error *err)
{
    if ((unsigned)k >= SIM_SCHED_COUNT)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "simulate: unknown schedule %d", (int)k);
    if (m->n_layers < 1)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "simulate: the model has no MoE layer");
    if ((k == SIM_SCHED_FSMOE || k == SIM_SCHED_FSMOE_NO_IIO) && m->fsmoe_own)
        m = m->fsmoe_own; /* FSMoE's own degrees and gradient partition */
    fsmoe_status cst = sim_model_check(m, err);
    if (cst != FSMOE_OK)
        return cst;
    if (opts && (opts->r_f < 0 || opts->r_f > SIM_MAX_CHUNKS || opts->r_b < 0 ||
                 opts->r_b > SIM_MAX_CHUNKS || opts->tutel_r < 0 || opts->tutel_r > SIM_MAX_CHUNKS))
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "simulate: degrees r_f %d, r_b %d, tutel r %d (expected 0..%d)",
                          opts->r_f, opts->r_b, opts->tutel_r, SIM_MAX_CHUNKS);
    sim_clear(s);
    resources(s);
    sim_mark_compute(s, SIM_R_COMPUTE);
    sim_set_interference(s, m->lines.comm_slowdown, m->lines.compute_slowdown);
    sim_set_host_sharing(s, m->lines.host_ranks, m->lines.host_cores, m->lines.host_at_once);
    sim_set_sync_growth(s, m->lines.sync_growth, m->lines.sync_growth_from_s);
    gen g;
    memset(&g, 0, sizeof g);
    g.s = s;
    g.m = m;
    g.k = k;
    g.st_inter = sim_add_stream(s, "inter", SIM_R_INTER);
    g.st_intra = sim_add_stream(s, "intra", SIM_R_INTRA);
    g.st_comm = sim_add_stream(s, "comm", SIM_R_INTER);
    g.st_ar = sim_add_stream(s, "allreduce", SIM_R_INTER);
    g.tutel_r = opts && opts->tutel_r > 0 ? opts->tutel_r : m->tutel_r > 0 ? m->tutel_r : 1;
    switch (k) {
    case SIM_SCHED_TUTEL_IMPROVED: g.grad = GRAD_DENSE_ONLY; break;
    case SIM_SCHED_PIPEMOE_LINA: g.grad = GRAD_LINA; break;
    case SIM_SCHED_PLAN: g.grad = m->plan_lina ? GRAD_LINA : GRAD_PLAN; break;
    case SIM_SCHED_FSMOE:
    case SIM_SCHED_FSMOE_NO_IIO: g.grad = GRAD_PLAN; break;
    default: g.grad = GRAD_NONE; break;
    }
    const workload_layer *wl0 = &m->layers[0].wl;
    int gar_stream = k == SIM_SCHED_PLAN || k == SIM_SCHED_FSMOE ? g.st_inter : g.st_comm;
    int prev = -1;

    /* forward */
    g.phase = SIM_PHASE_FWD;
    g.layer = -1;
    prev = dense(&g, wl0, m->prefix_attn, m->prefix_ffn, prev, NULL);
    for (int i = 0; i < m->n_layers; i++) {
        const sim_layer *L = &m->layers[i];
        g.layer = i;
        prev = moe_layer(&g, L, prev, 0.0, opts);
        prev = dense(&g, &L->wl, L->n_attn, L->n_ffn, prev, NULL);
    }
    g.layer = -1;
    prev = compute(&g, FSMOE_TASK_HEAD, m->head_fwd_s, prev);

    /* backward */
    g.phase = SIM_PHASE_BWD;
    prev = compute(&g, FSMOE_TASK_HEAD, m->head_bwd_s, prev);
    for (int i = m->n_layers - 1; i >= 0; i--) {
        const sim_layer *L = &m->layers[i];
        g.layer = i;
        prev = recompute(&g, L, &L->wl, L->n_attn, L->n_ffn, prev, opts);
        int window_start = prev;
        if (g.grad == GRAD_PLAN && L->gar_dense_bytes > 0.0)
            gar(&g, gar_stream, L->gar_dense_bytes, PRIO_GAR, window_start, FSMOE_AT_WINDOW);
        if (g.grad == GRAD_DENSE_ONLY)
            dense_window(&g, dense_time(&L->wl, L->n_attn, L->n_ffn, 1), window_start,
                         FSMOE_AT_WINDOW);
        prev = dense(&g, &L->wl, L->n_attn, L->n_ffn, prev, NULL);
        grads_ready(&g, L->dense_grad_bytes, prev, FSMOE_AT_DENSE_READY);
        prev = moe_layer(&g, L, prev, g.grad == GRAD_PLAN ? L->gar_moe_bytes : 0.0, opts);
        grads_ready(&g, L->moe_grad_bytes, prev, FSMOE_AT_MOE_READY);
    }
    /* the prefix's backward: a dense window for the gradients already ready, for every schedule
     * that overlaps gradients with dense work (Lina's micro-ops find it on their own) */
    g.layer = -1;
    if (g.grad == GRAD_PLAN && m->fsmoe_prefix_window_bytes > 0.0)
        gar(&g, gar_stream, m->fsmoe_prefix_window_bytes, PRIO_GAR, prev, FSMOE_AT_WINDOW);
    double prefix_win = dense_time(wl0, m->prefix_attn, m->prefix_ffn, 1), first_sent = 0.0;
    if (g.grad == GRAD_DENSE_ONLY)
        first_sent = dense_window(&g, prefix_win, prev, FSMOE_AT_WINDOW);
    prev = recompute(&g, NULL, wl0, m->prefix_attn, m->prefix_ffn, prev, opts);
    int early_at = prev;
    prev = dense(&g, wl0, m->prefix_attn, m->prefix_ffn, prev, &early_at);
    /* the prefix's early gradients (wo, bo of its last attention block): ready after that
     * block's output projection, sent from there (grad_partition.h: after the window's first
     * AllReduce, in what is left of the window) */
    double early = m->prefix_early_grad_bytes < m->prefix_grad_bytes ? m->prefix_early_grad_bytes
                                                                      : m->prefix_grad_bytes;
    if (!(early > 0.0) || m->prefix_attn < 1)
        early = 0.0; /* no attention block in the prefix: all ready at its end */
    if (g.grad == GRAD_PLAN && early > 0.0 && m->fsmoe_prefix_early_bytes > 0.0)
        gar(&g, gar_stream, m->fsmoe_prefix_early_bytes, PRIO_GAR, early_at, FSMOE_AT_EARLY_READY);
    if (g.grad == GRAD_DENSE_ONLY && early > 0.0) {
        double o = sim_out_proj_bwd_s(m);
        double t0 = first_sent > 0.0 ? fsmoe_line_time(&m->lines.ar_dp, first_sent) : 0.0;
        g.available += early;
        dense_window(&g, prefix_win - (o > t0 ? o : t0), early_at, FSMOE_AT_EARLY_READY);
    } else if (g.grad == GRAD_LINA && early > 0.0) {
        grads_ready(&g, early, early_at, FSMOE_AT_EARLY_READY);
    }
    grads_ready(&g, m->prefix_grad_bytes - early, prev, FSMOE_AT_DENSE_READY);

    /* what is left of the Gradient-AllReduce, after the backward */
    g.phase = SIM_PHASE_TAIL;
    double tail = 0.0;
    int tail_stream = g.st_comm;
    switch (g.grad) {
    case GRAD_NONE: tail = sim_model_grad_bytes(m); break;
    case GRAD_DENSE_ONLY: tail = g.available, tail_stream = g.st_ar; break;
    case GRAD_PLAN: tail = m->fsmoe_tail_bytes, tail_stream = gar_stream; break;
    case GRAD_LINA: tail = 0.0; break; /* the micro-ops already exist */
    }
    gar(&g, tail_stream, tail, PRIO_GAR, prev, FSMOE_AT_TAIL);
    /* the optimizer: after the backward and every Gradient-AllReduce (clipping needs the norm
     * of the summed gradients) */
    if (m->optim_s > 0.0) {
        int n = s->n_tasks, opt = compute(&g, FSMOE_TASK_OPTIM, m->optim_s, prev);
        for (int i = 0; i < n && opt != prev; i++)
            if (s->tasks[i].kind == FSMOE_TASK_GRAD_AR)
                sim_add_dep(s, opt, i);
    }
    if (s->build_status != FSMOE_OK)
        return fsmoe_fail(err, s->build_status, "%s", s->build_msg);
    return FSMOE_OK;
}

fsmoe_status sim_schedule_time(sim *s, const sim_model *m, sim_schedule k,
                               const sim_build_opts *opts, double *iteration_s,
                               fsmoe_error *err)
{
    sim_build_opts o;
    if (opts)
        o = *opts;
    else
        memset(&o, 0, sizeof o);
    if ((k == SIM_SCHED_TUTEL || k == SIM_SCHED_TUTEL_IMPROVED || k == SIM_SCHED_PIPEMOE_LINA) &&
        o.tutel_r <= 0 && m->tutel_r <= 0) {
        fsmoe_status st = sim_tutel_degree(s, m, &o.tutel_r, err);
        if (st != FSMOE_OK)
            return st;
    }
    fsmoe_status st = sim_build(s, m, k, &o, err);
    if (st == FSMOE_OK)
        st = sim_run(s, err);
    if (st == FSMOE_OK)
        *iteration_s = s->makespan_s;
    return st;
}

fsmoe_status sim_tutel_degree(sim *s, const sim_model *m, int *r_out, fsmoe_error *err)
{
    int r_max = PIPELINE_R_CAP;
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i].wl.r_max < r_max)
            r_max = m->layers[i].wl.r_max;
    int best = 1;
    double best_t = INFINITY;
    for (int r = 1; r <= 8 && r <= r_max; r *= 2) {
        sim_build_opts o = {0, 0, r};
        double t;
        fsmoe_status st = sim_build(s, m, SIM_SCHED_TUTEL, &o, err);
        if (st == FSMOE_OK)
            st = sim_run(s, err);
        if (st != FSMOE_OK)
            return st;
        t = s->makespan_s;
        if (t < best_t) {
            best_t = t;
            best = r;
        }
    }
    *r_out = best;
    return FSMOE_OK;
}

/* Lina's micro-ops for `bytes` of one tensor; -1 when not a finite non-negative size. */
static double lina_ops(double bytes)
{
    if (!(bytes >= 0.0) || !isfinite(bytes))
        return -1.0;
    return ceil(bytes / GRAD_LINA_MICRO_OP_BYTES);
}

static int bad_r(int r, int zero_ok)
{
    return r > SIM_MAX_CHUNKS || r < (zero_ok ? 0 : 1);
}

static int bad_chunks(int n)
{
    return n > SIM_MAX_A2A_CHUNKS || n < 1;
}

fsmoe_status sim_model_check(const sim_model *m, fsmoe_error *err)
{
    if (bad_r(m->tutel_r, 1))
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "simulate: tutel degree %d (expected 0..%d)",
                          m->tutel_r, SIM_MAX_CHUNKS);
    double ops = lina_ops(m->prefix_grad_bytes);
    const double fields[] = {m->prefix_grad_bytes, m->fsmoe_prefix_window_bytes,
                             m->fsmoe_tail_bytes, m->prefix_early_grad_bytes,
                             m->fsmoe_prefix_early_bytes};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (!(fields[i] >= 0.0) || !isfinite(fields[i]))
            return fsmoe_fail(err, FSMOE_ERR_VALUE,
                              "simulate: gradient bytes %g before the first MoE layer or after "
                              "the backward (expected a finite size >= 0)",
                              fields[i]);
    for (int i = 0; i < m->n_layers; i++) {
        const sim_layer *L = &m->layers[i];
        if (bad_r(L->r_f, 0) || bad_r(L->r_b, 0) || bad_r(L->esp_r_f, 1) ||
            bad_r(L->esp_r_b, 1) || bad_r(L->noiio_r_f, 1) || bad_r(L->noiio_r_b, 1) || bad_chunks(L->monta_chunks_o2) ||
            bad_chunks(L->monta_chunks_o3) || L->a2a_chunks < 0 ||
            L->a2a_chunks > SIM_MAX_A2A_CHUNKS)
            return fsmoe_fail(err, FSMOE_ERR_VALUE,
                              "simulate: layer %d: degrees r_f %d, r_b %d, ESP r_f %d, r_b %d, "
                              "MoNTA chunks %d/%d (expected 1..%d, chunks 1..%d)",
                              i, L->r_f, L->r_b, L->esp_r_f, L->esp_r_b, L->monta_chunks_o2,
                              L->monta_chunks_o3, SIM_MAX_CHUNKS, SIM_MAX_A2A_CHUNKS);
        if (L->a2a_2dh && !m->has_2dh)
            return fsmoe_fail(err, FSMOE_ERR_VALUE,
                              "simulate: layer %d runs the hierarchical AllToAll but the model "
                              "has no 2DH lines",
                              i);
        if ((unsigned)L->schedule >= FSMOE_SCHED_COUNT || (unsigned)L->a2a > FSMOE_A2A_O3)
            return fsmoe_fail(err, FSMOE_ERR_VALUE,
                              "simulate: layer %d: schedule %d, AllToAll strategy %d (expected "
                              "0..%d and 0..%d)",
                              i, (int)L->schedule, (int)L->a2a, FSMOE_SCHED_COUNT - 1,
                              (int)FSMOE_A2A_O3);
        double d = lina_ops(L->dense_grad_bytes), e = lina_ops(L->moe_grad_bytes);
        if (d < 0.0 || e < 0.0 || !(L->gar_dense_bytes >= 0.0) || !isfinite(L->gar_dense_bytes) ||
            !(L->gar_moe_bytes >= 0.0) || !isfinite(L->gar_moe_bytes))
            return fsmoe_fail(err, FSMOE_ERR_VALUE,
                              "simulate: layer %d: gradient bytes %g/%g/%g/%g (expected finite "
                              "sizes >= 0)",
                              i, L->dense_grad_bytes, L->moe_grad_bytes, L->gar_dense_bytes,
                              L->gar_moe_bytes);
        ops += d + e;
    }
    if (ops > SIM_MAX_LINA_OPS)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "simulate: %.4g bytes of gradients make %.4g Lina micro-ops of 30 MB "
                          "(the simulator plays at most %d)",
                          sim_model_grad_bytes(m), ops, SIM_MAX_LINA_OPS);
    return FSMOE_OK;
}

/* Refuses a field of the plan, naming it (in the file when its path is known). */
static fsmoe_status plan_field_fail(const char *plan_path, const char *field, fsmoe_error *err,
                                    const char *fmt, double v, long lo, long hi)
{
    char text[256];
    snprintf(text, sizeof text, fmt, v, lo, hi);
    if (plan_path)
        return locate_fail(plan_path, field, err, FSMOE_ERR_VALUE, "%s", text);
    return fsmoe_fail(err, FSMOE_ERR_VALUE, "plan: %s: %s", field, text);
}

fsmoe_status sim_plan_check(const fsmoe_plan *p, const char *plan_path, fsmoe_error *err)
{
    char field[96];
    static const char r_fmt[] = "%.0f chunks is more than the simulator plays (expected %ld..%ld)";
    static const char b_fmt[] = "%g is not a gradient size the simulator plays (expected a finite "
                                "number of bytes >= 0; at most %ld Lina micro-ops of %ld bytes in "
                                "all)";
    const long mo = (long)GRAD_LINA_MICRO_OP_BYTES;
    double ops = 0.0;
    const struct {
        const char *field;
        double v;
    } top[] = {{"prefix_grad_bytes", p->prefix_grad_bytes},
               {"prefix_window_bytes", p->prefix_window_bytes},
               {"gradient_tail_bytes", p->gradient_tail_bytes}};
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++) {
        double n = lina_ops(top[i].v);
        if (n < 0.0 || n > SIM_MAX_LINA_OPS)
            return plan_field_fail(plan_path, top[i].field, err, b_fmt, top[i].v,
                                   SIM_MAX_LINA_OPS, mo);
    }
    ops += lina_ops(p->prefix_grad_bytes);
    for (int i = 0; i < p->n_layers; i++) {
        const fsmoe_layer_plan *lp = &p->layers[i];
        const struct {
            const char *name;
            int r;
            int max;
        } deg[] = {{"forward.r", lp->fwd.r, SIM_MAX_CHUNKS},
                   {"backward.r", lp->bwd.r, SIM_MAX_CHUNKS},
                   {"a2a.chunks", lp->a2a_chunks, SIM_MAX_A2A_CHUNKS}};
        for (size_t j = 0; j < sizeof deg / sizeof deg[0]; j++)
            if (deg[j].r < 1 || deg[j].r > deg[j].max) {
                snprintf(field, sizeof field, "layers[%d].%s", i, deg[j].name);
                return plan_field_fail(plan_path, field, err, r_fmt, (double)deg[j].r, 1,
                                       deg[j].max);
            }
        /* "" (a plan written before the field was decided) is the flat AllToAll, as
         * fsmoe-run reads it */
        if (plan_dispatch_from_name(lp->a2a_algorithm) < 0 ||
            plan_dispatch_from_name(lp->a2a_algorithm) == PLAN_DISPATCH_AUTO) {
            snprintf(field, sizeof field, "layers[%d].a2a.algorithm", i);
            char text[160];
            snprintf(text, sizeof text,
                     "`%.32s` is not an AllToAll algorithm the simulator plays (expected nccl or "
                     "2dh)",
                     lp->a2a_algorithm);
            if (plan_path)
                return locate_fail(plan_path, field, err, FSMOE_ERR_VALUE, "%s", text);
            return fsmoe_fail(err, FSMOE_ERR_VALUE, "plan: %s: %s", field, text);
        }
        const struct {
            const char *name;
            double v;
        } bytes[] = {{"gradients.bytes", lp->grad_bytes},
                     {"gradients.in_window_bytes", lp->window_bytes},
                     {"gradients.step2_bytes", lp->step2_bytes},
                     {"gradients.carried_bytes", lp->carried_bytes}};
        for (size_t j = 0; j < sizeof bytes / sizeof bytes[0]; j++) {
            double n = lina_ops(bytes[j].v);
            if (n < 0.0 || n > SIM_MAX_LINA_OPS || (j == 0 && ops + n > SIM_MAX_LINA_OPS)) {
                snprintf(field, sizeof field, "layers[%d].%s", i, bytes[j].name);
                return plan_field_fail(plan_path, field, err, b_fmt, bytes[j].v,
                                       SIM_MAX_LINA_OPS, mo);
            }
        }
        ops += lina_ops(lp->grad_bytes);
    }
    return FSMOE_OK;
}

void sim_model_free(sim_model *m)
{
    if (!m)
        return;
    free(m->layers);
    m->layers = NULL;
    m->n_layers = 0;
    if (m->fsmoe_own) {
        sim_model_free(m->fsmoe_own);
        free(m->fsmoe_own);
        m->fsmoe_own = NULL;
    }
}

/* Combination c of sim_noiio_degrees into every layer: bit 0 the forward at Tutel's degree,
 * bit 1 the backward; own[2i], own[2i + 1] layer i's one-stream optima. */
static void noiio_set(sim_model *m, const int *own, int c)
{
    for (int i = 0; i < m->n_layers; i++) {
        m->layers[i].noiio_r_f = c & 1 ? m->tutel_r : own[2 * i];
        m->layers[i].noiio_r_b = c & 2 ? m->tutel_r : own[2 * i + 1];
    }
}

fsmoe_status sim_noiio_degrees(sim *s, sim_model *m, fsmoe_error *err)
{
    fsmoe_status st = m->tutel_r > 0 ? FSMOE_OK : sim_tutel_degree(s, m, &m->tutel_r, err);
    if (st != FSMOE_OK)
        return st;
    int n = m->n_layers;
    int *own = malloc(2 * (size_t)(n > 0 ? n : 1) * sizeof *own);
    if (!own)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "simulate: out of memory");
    for (int i = 0; i < n; i++) {
        sim_layer *L = &m->layers[i];
        double t_gar = fsmoe_line_time(&m->lines.ar_dp, L->gar_moe_bytes);
        own[2 * i] = baseline_one_stream_best_r(&L->wl.fwd, 0.0, NULL);
        own[2 * i + 1] =
            baseline_one_stream_best_r(&L->wl.bwd, L->gar_moe_bytes > 0.0 ? t_gar : 0.0, NULL);
    }
    int best = 0;
    double best_t = INFINITY;
    for (int c = 0; c < 4 && st == FSMOE_OK; c++) {
        noiio_set(m, own, c);
        double t;
        st = sim_schedule_time(s, m, SIM_SCHED_FSMOE_NO_IIO, NULL, &t, err);
        if (st == FSMOE_OK && t < best_t)
            best_t = t, best = c;
    }
    noiio_set(m, own, best);
    free(own);
    return st;
}

/* m->fsmoe_own: `model` at p's shape and layout planned as FSMoE publishes it (the ESP pipeline
 * in every layer, its degrees and gradient partition), as the simulator's model. */
static fsmoe_status fsmoe_own_model(const fsmoe_plan *p, const fsmoe_model *model,
                                    const fsmoe_cluster *c, const char *cluster_path,
                                    sim_model *m, fsmoe_error *err)
{
    fsmoe_model mm = *model;
    mm.B = p->B, mm.L = p->L, mm.M = p->M, mm.H = p->H, mm.E = p->E, mm.experts_is_ep = 0;
    /* as published: the flat AllToAll (plays_2dh) */
    snprintf(mm.dispatch, sizeof mm.dispatch, "%s", plan_a2a_algorithm_name(PLAN_DISPATCH_NCCL));
    mm.k = p->k, mm.f = p->f, mm.expert = p->expert, mm.bytes_per_element = p->bytes_per_element;
    plan_options o = {.method = PLAN_METHOD_FSMOE};
    fsmoe_plan q;
    memset(&q, 0, sizeof q);
    fsmoe_status st = plan_model(&mm, c, cluster_path, &p->parallel, &o, &q, err);
    if (st == FSMOE_OK && !(m->fsmoe_own = calloc(1, sizeof *m->fsmoe_own)))
        st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "simulate: out of memory");
    if (st == FSMOE_OK)
        st = sim_model_from_plan(&q, &mm, c, cluster_path, m->fsmoe_own, err);
    fsmoe_plan_free(&q);
    if (st == FSMOE_OK) { /* FSMoE-No-IIO plays this model at its own degrees */
        sim s;
        sim_init(&s);
        st = sim_noiio_degrees(&s, m->fsmoe_own, err);
        sim_free(&s);
    }
    return st;
}

void sim_model_at_routing(sim_model *m, const double *rows, const double *width)
{
    for (int i = 0; i < m->n_layers; i++) {
        sim_layer *L = &m->layers[i];
        workload_shape s = m->shape;
        s.run_rows = L->run_rows = rows[i] > 0.0 ? rows[i] : 0.0;
        s.run_width = L->run_width = width[i] > 0.0 ? width[i] : 0.0;
        workload_layer_init(&s, &m->par, &m->lines, &L->wl);
        L->wl_2dh = L->wl;
        if (m->has_2dh)
            workload_layer_init(&s, &m->par, &m->lines_2dh, &L->wl_2dh);
    }
    if (m->fsmoe_own && m->fsmoe_own->n_layers == m->n_layers)
        sim_model_at_routing(m->fsmoe_own, rows, width);
}

fsmoe_status sim_model_from_plan(const fsmoe_plan *p, const fsmoe_model *model,
                                 const fsmoe_cluster *c, const char *cluster_path,
                                 sim_model *m, fsmoe_error *err)
{
    fsmoe_status st = sim_model_of_plan(p, model, c, cluster_path, m, err);
    if (st == FSMOE_OK && strcmp(p->method, plan_method_name(PLAN_METHOD_FSMOE)) != 0)
        st = fsmoe_own_model(p, model, c, cluster_path, m, err);
    if (st != FSMOE_OK)
        sim_model_free(m);
    return st;
}

fsmoe_status sim_model_of_plan(const fsmoe_plan *p, const fsmoe_model *model,
                               const fsmoe_cluster *c, const char *cluster_path, sim_model *m,
                               fsmoe_error *err)
{
    memset(m, 0, sizeof *m);
    fsmoe_status pst = sim_plan_check(p, NULL, err);
    if (pst != FSMOE_OK)
        return pst;
    /* a pipeline plan (gpipe.h): its layers are one stage's, planned for one micro-batch */
    fsmoe_model stage_model;
    fsmoe_parallel stage_par = p->parallel;
    long B = p->B;
    if (p->parallel.pp > 1) {
        if (!p->pipeline.present)
            return fsmoe_fail(err, FSMOE_ERR_VALUE,
                              "simulate: the plan has pp %d but no pipeline section",
                              p->parallel.pp);
        fsmoe_model whole = *model;
        whole.B = p->B;
        pst = gpipe_stage(&whole, &p->parallel, p->pipeline.micro_batches, &stage_model,
                          &stage_par, err);
        if (pst != FSMOE_OK)
            return pst;
        model = &stage_model;
        B = stage_model.B;
    }
    long n_moe = fsmoe_model_moe_count(model);
    if (n_moe != p->n_layers || p->n_layers < 1)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "simulate: the plan has %d MoE layers but model '%s' has %ld",
                          p->n_layers, model->name, n_moe);
    workload_shape_from_model(model, &m->shape);
    /* the plan's shape wins: it records every override it was made with */
    m->shape.B = B, m->shape.L = p->L, m->shape.M = p->M, m->shape.H = p->H;
    m->shape.E = p->E, m->shape.k = p->k, m->shape.f = p->f, m->shape.expert = p->expert;
    m->shape.bytes_per_element = p->bytes_per_element;
    m->par = stage_par;
    m->recompute = p->memory.present ? p->memory.recompute : FSMOE_RECOMPUTE_NONE;
    fsmoe_status st = workload_lines_init(c, cluster_path, &m->par, &m->shape, &m->lines, err);
    if (st != FSMOE_OK)
        return st;
    workload_layer wl, wl_2dh;
    workload_layer_init(&m->shape, &m->par, &m->lines, &wl);
    wl_2dh = wl;
    /* the hierarchical lines, when a layer runs on them: the planner's (plan_model.h); a 2dh
     * layer must run its AllToAll on a hierarchical group, as the planner only writes it there */
    for (int i = 0; i < p->n_layers; i++) {
        const fsmoe_layer_plan *lp = &p->layers[i];
        if (strcmp(lp->a2a_algorithm, plan_a2a_algorithm_name(PLAN_DISPATCH_2DH)) != 0)
            continue;
        fsmoe_group g = plan_schedule_group(lp->schedule);
        if (!workload_group_2dh(&m->par, g, NULL, NULL))
            return fsmoe_fail(err, FSMOE_ERR_VALUE,
                              "simulate: plan layer %d: a2a.algorithm 2dh, but its schedule %s "
                              "runs its AllToAll on the %s group of %d, which is not "
                              "hierarchical (2DH needs >= 2 nodes with >= 2 members on each)",
                              i, fsmoe_schedule_name(lp->schedule), fsmoe_group_name(g),
                              fsmoe_group_size(&m->par, g));
        if (!m->has_2dh) {
            st = workload_lines_2dh(c, cluster_path, &m->par, &m->lines, &m->lines_2dh, err);
            if (st != FSMOE_OK)
                return st;
            m->has_2dh = 1;
            workload_layer_init(&m->shape, &m->par, &m->lines_2dh, &wl_2dh);
        }
    }
    m->layers = calloc((size_t)p->n_layers, sizeof *m->layers);
    if (!m->layers)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "simulate: out of memory");
    m->n_layers = p->n_layers;
    long *blocks = malloc((size_t)n_moe * sizeof *blocks);
    if (!blocks) {
        sim_model_free(m);
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "simulate: out of memory");
    }
    long j = 0;
    for (long b = 0; b < model->layers; b++)
        if (fsmoe_model_is_moe_block(model, b))
            blocks[j++] = b;
    m->prefix_attn = (int)blocks[0] + 1;
    m->prefix_ffn = (int)blocks[0];
    /* the model's ends, and the optimizer on this GPU's parameters (every block's attention
     * and norms, dense FFNs, gates, its expert shards, embeddings and head: the tensors
     * fsmoe-run holds) */
    m->head_fwd_s = wl.head_fwd_s;
    m->head_bwd_s = wl.head_bwd_s;
    m->param_bytes = workload_param_bytes(&wl, model->layers, n_moe);
    m->optim_s = workload_optimizer_s(&m->lines, m->param_bytes);
    m->prefix_grad_bytes = p->prefix_grad_bytes;
    m->fsmoe_tail_bytes = p->gradient_tail_bytes;
    m->fsmoe_prefix_window_bytes = p->prefix_window_bytes;
    m->plan_lina = p->gradients == FSMOE_GRADS_LINA;
    const fsmoe_line *ar = &m->lines.ar_dp;
    for (int i = 0; i < p->n_layers; i++) {
        sim_layer *L = &m->layers[i];
        const fsmoe_layer_plan *lp = &p->layers[i];
        long next = i + 1 < p->n_layers ? blocks[i + 1] : model->layers;
        L->wl = wl;
        L->wl_2dh = wl_2dh;
        L->a2a_2dh = strcmp(lp->a2a_algorithm, plan_a2a_algorithm_name(PLAN_DISPATCH_2DH)) == 0;
        L->n_ffn = (int)(next - blocks[i] - 1);
        L->n_attn = L->n_ffn + (i + 1 < p->n_layers ? 1 : 0);
        /* the planner's model (grad_partition.h): a generalised layer's gradients are ready when
         * its backward ends */
        L->dense_grad_bytes = 0.0;
        L->moe_grad_bytes = lp->grad_bytes;
        L->schedule = lp->schedule;
        L->r_f = lp->fwd.r > 0 ? lp->fwd.r : 1;
        L->r_b = lp->bwd.r > 0 ? lp->bwd.r : 1;
        double total = lp->window_bytes + lp->step2_bytes;
        double fit = ar->beta_s > 0.0 ? (lp->olp_dense_s - ar->alpha_s) / ar->beta_s : total;
        if (fit < 0.0)
            fit = 0.0;
        L->gar_dense_bytes = total < fit ? total : fit;
        L->gar_moe_bytes = total - L->gar_dense_bytes;
        int chunked = lp->a2a == FSMOE_A2A_O2 || lp->a2a == FSMOE_A2A_O3;
        L->a2a = lp->a2a;
        L->a2a_chunks = chunked && lp->a2a_chunks > 0 ? lp->a2a_chunks : 1;
        L->monta_chunks_o2 = L->monta_chunks_o3 = chunked && lp->a2a_chunks > 0 ? lp->a2a_chunks : 1;
    }
    free(blocks);
    if (st != FSMOE_OK)
        sim_model_free(m);
    return st;
}
