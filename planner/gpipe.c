/* Implements: GPipe pipeline parallelism over planned stages (gpipe.h). Relies on: the
 * simulator (sim.h) for both the stage's micro-batch and the pipeline of stages, the cost model
 * (cost.h) for the sends between stages. */
#include "gpipe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"

double gpipe_closed_form(const gpipe_input *g)
{
    double pp = g->stages, m = g->micro_batches;
    return (m + pp - 1) * (g->fwd_s + g->bwd_s) + 2 * (pp - 1) * g->p2p_s + g->grad_s;
}

fsmoe_status gpipe_simulate(sim *s, const gpipe_input *g, double *makespan_s, fsmoe_error *err)
{
    int pp = g->stages, m = g->micro_batches;
    if (pp < 1 || pp > GPIPE_MAX_STAGES || m < 1 || m > GPIPE_MAX_MICRO)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "gpipe: %d stages and %d micro-batches (expected 1..%d and 1..%d)", pp,
                          m, GPIPE_MAX_STAGES, GPIPE_MAX_MICRO);
    sim_clear(s);
    int comp[GPIPE_MAX_STAGES], link[GPIPE_MAX_STAGES], stream[GPIPE_MAX_STAGES];
    for (int st = 0; st < pp; st++) {
        char name[24];
        snprintf(name, sizeof name, "stage%d", st);
        comp[st] = sim_add_resource(s, name, SIM_RES_EXCLUSIVE);
        sim_mark_compute(s, comp[st]);
        stream[st] = sim_add_stream(s, name, comp[st]);
        snprintf(name, sizeof name, "stage%d-link", st);
        link[st] = sim_add_resource(s, name, SIM_RES_SHARED);
    }
    /* ids: F[st][j], B[st][j], sends forward out of st (to st+1) and back out of st (to st−1) */
    size_t n = (size_t)pp * (size_t)m;
    int *F = malloc(n * sizeof *F), *B = malloc(n * sizeof *B);
    int *SF = malloc(n * sizeof *SF), *SB = malloc(n * sizeof *SB);
    if (!F || !B || !SF || !SB) {
        free(F), free(B), free(SF), free(SB);
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "gpipe: out of memory");
    }
#define AT(a, st, j) (a)[(size_t)(st) * (size_t)m + (size_t)(j)]
    /* each stage's compute in its schedule's order, each task after the one before it:
     * GPipe F0..F(m−1) then B(m−1)..B0; 1F1B w = min(pp−st−1, m) warm-up forwards, then
     * F(w+j) B(j) alternating, then the remaining backwards in order */
    for (int st = 0; st < pp; st++) {
        int last = -1, w = pp - st - 1 < m ? pp - st - 1 : m;
        for (int i = 0; i < 2 * m; i++) {
            int fwd, j;
            if (!g->one_f_one_b) {
                fwd = i < m;
                j = fwd ? i : 2 * m - 1 - i;
            } else if (i < w) {
                fwd = 1, j = i;
            } else if (i < w + 2 * (m - w)) {
                int k = i - w;
                fwd = k % 2 == 0;
                j = fwd ? w + k / 2 : k / 2;
            } else {
                fwd = 0, j = (m - w) + (i - w - 2 * (m - w));
            }
            int t = sim_add_task(s, comp[st], stream[st], FSMOE_TASK_ATTN, 0.0,
                                 fwd ? g->fwd_s : g->bwd_s);
            s->tasks[t].phase = fwd ? SIM_PHASE_FWD : SIM_PHASE_BWD;
            s->tasks[t].layer = st, s->tasks[t].chunk = j;
            sim_add_dep(s, t, last);
            last = t;
            if (fwd)
                AT(F, st, j) = t;
            else
                AT(B, st, j) = t;
        }
        /* its gradient work once, after its last backward, on its link */
        int t = sim_add_task(s, link[st], -1, FSMOE_TASK_GRAD_AR, 0.0, g->grad_s);
        s->tasks[t].phase = SIM_PHASE_TAIL, s->tasks[t].layer = st, s->tasks[t].chunk = -1;
        s->tasks[t].priority = g->priorities ? 1 : 0;
        s->tasks[t].flags = g->priorities ? SIM_TASK_DEFER : 0u;
        sim_add_dep(s, t, last);
    }
    /* the sends: activations to the next stage, gradients to the previous one */
    for (int st = 0; st < pp; st++)
        for (int j = 0; j < m; j++) {
            for (int fwd = 1; fwd >= 0; fwd--) {
                if (fwd ? st == pp - 1 : st == 0)
                    continue;
                int x = sim_add_task(s, link[st], -1, FSMOE_TASK_COPY, 0.0, g->p2p_s);
                s->tasks[x].phase = fwd ? SIM_PHASE_FWD : SIM_PHASE_BWD;
                s->tasks[x].layer = st, s->tasks[x].chunk = j;
                s->tasks[x].priority = 0;
                sim_add_dep(s, x, fwd ? AT(F, st, j) : AT(B, st, j));
                if (fwd)
                    AT(SF, st, j) = x;
                else
                    AT(SB, st, j) = x;
            }
        }
    /* what each compute task waits for besides its stage's order */
    for (int st = 0; st < pp; st++)
        for (int j = 0; j < m; j++) {
            if (st > 0)
                sim_add_dep(s, AT(F, st, j), AT(SF, st - 1, j));
            sim_add_dep(s, AT(B, st, j), st == pp - 1 ? AT(F, st, j) : AT(SB, st + 1, j));
        }
#undef AT
    free(F), free(B), free(SF), free(SB);
    fsmoe_status st = sim_run(s, err);
    if (st == FSMOE_OK)
        *makespan_s = s->makespan_s;
    return st;
}

fsmoe_status gpipe_stage(const fsmoe_model *m, const fsmoe_parallel *par, int micro,
                         fsmoe_model *stage, fsmoe_parallel *stage_par, fsmoe_error *err)
{
    int pp = par->pp;
    if (pp < 1 || pp > GPIPE_MAX_STAGES)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "pp=%d (expected 1..%d pipeline stages)", pp,
                          GPIPE_MAX_STAGES);
    if (micro < 1 || micro > GPIPE_MAX_MICRO)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "%d micro-batches (expected 1..%d)", micro,
                          GPIPE_MAX_MICRO);
    if (m->layers % pp != 0)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: %ld layers do not split into pp=%d stages of equal blocks",
                          m->name, m->layers, pp);
    long per = m->layers / pp;
    if (pp > 1 && (m->moe_every < 1 || per % m->moe_every != 0 || m->moe_first >= m->moe_every))
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: MoE blocks every %d from block %d: the %d stages of %ld blocks "
                          "would not hold the same blocks (expected the blocks per stage a "
                          "multiple of moe.every and moe.first below it)",
                          m->name, m->moe_every, m->moe_first, pp, per);
    if (m->B % micro != 0)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: a batch of %ld samples per DP rank does not split into %d "
                          "micro-batches",
                          m->name, m->B, micro);
    *stage = *m;
    stage->layers = per;
    stage->B = m->B / micro;
    *stage_par = *par;
    stage_par->pp = 1;
    stage_par->world = par->world / pp;
    return FSMOE_OK;
}

void gpipe_memory(const fsmoe_model *m, const fsmoe_parallel *par, int micro, int one_f_one_b,
                  fsmoe_memory *out)
{
    fsmoe_model mm = *m, stage;
    fsmoe_parallel mpar = *par, spar;
    fsmoe_error err = {0};
    if (par->pp > 1 && gpipe_stage(m, par, micro, &stage, &spar, &err) == FSMOE_OK) {
        mm.layers = stage.layers, mpar = spar;
        mm.B = stage.B * gpipe_in_flight(par->pp, micro, one_f_one_b);
    }
    fsmoe_mem_shape ms;
    fsmoe_model_mem_shape(&mm, &mpar, &ms);
    fsmoe_memory_estimate(&ms, out);
}

int gpipe_default_micro(long B, int pp)
{
    int best = 1;
    for (long d = 1; d <= B && d <= 4L * pp; d++)
        if (B % d == 0)
            best = (int)d;
    return best;
}

fsmoe_status gpipe_p2p(const fsmoe_cluster *c, const char *cluster_path, const fsmoe_model *stage,
                       const fsmoe_parallel *par, double *bytes, double *seconds, char *note,
                       size_t note_len, fsmoe_error *err)
{
    int mp = par->mp > 0 ? par->mp : 1;
    *bytes = (double)stage->B * (double)stage->L * (double)stage->M *
             (double)stage->bytes_per_element / mp;
    /* stages hold whole nodes, or several stages share a node: once the pipeline spans nodes
     * some boundary is a node's edge, and the slowest send paces every stage alike */
    fsmoe_tier tier = par->world > par->gpus_per_node ? FSMOE_TIER_INTER : FSMOE_TIER_INTRA;
    /* a 2-rank AllToAll (or, where the profile has none on that tier, AllGather) of twice the
     * bytes: each of its two ranks sends the other exactly the send's bytes */
    static const fsmoe_op ops[2] = {FSMOE_OP_ALLTOALL, FSMOE_OP_ALLGATHER};
    fsmoe_line l;
    fsmoe_status st = FSMOE_ERR_VALUE;
    int used = 0;
    for (int i = 0; i < 2 && st != FSMOE_OK; i++) {
        fsmoe_error e = {0};
        st = fsmoe_cost_line_at(c, cluster_path, ops[i], tier, 2, &l, note, note_len,
                                i == 0 ? &e : err);
        used = i;
    }
    if (st != FSMOE_OK)
        return st;
    *seconds = fsmoe_line_time(&l, 2.0 * *bytes);
    if (note) {
        char line[200];
        snprintf(line, sizeof line,
                 "pipeline sends: one stage's send of a micro-batch's activations costed as a "
                 "2-rank %s %s of twice the bytes",
                 fsmoe_op_name(ops[used]), fsmoe_tier_name(tier));
        fsmoe_note_add(note, note_len, line);
    }
    return FSMOE_OK;
}

/* A copy of m with every gradient byte and the optimizer at zero: the micro-batches before the
 * last. Its layers (and FSMoE's own model's) are freshly allocated; free with nograd_free. */
static fsmoe_status nograd_copy(const sim_model *m, sim_model *out, fsmoe_error *err)
{
    *out = *m;
    out->layers = malloc((size_t)(m->n_layers > 0 ? m->n_layers : 1) * sizeof *out->layers);
    out->fsmoe_own = NULL;
    if (!out->layers)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "gpipe: out of memory");
    for (int i = 0; i < m->n_layers; i++) {
        sim_layer *l = &out->layers[i];
        *l = m->layers[i];
        l->dense_grad_bytes = l->moe_grad_bytes = 0;
        l->gar_dense_bytes = l->gar_moe_bytes = 0;
    }
    out->prefix_grad_bytes = out->prefix_early_grad_bytes = 0;
    out->fsmoe_prefix_window_bytes = out->fsmoe_prefix_early_bytes = 0;
    out->fsmoe_tail_bytes = 0;
    out->optim_s = 0;
    out->param_bytes = 0;
    if (m->fsmoe_own) {
        out->fsmoe_own = malloc(sizeof *out->fsmoe_own);
        if (!out->fsmoe_own)
            return fsmoe_fail(err, FSMOE_ERR_NOMEM, "gpipe: out of memory");
        fsmoe_status st = nograd_copy(m->fsmoe_own, out->fsmoe_own, err);
        if (st != FSMOE_OK)
            return st;
    }
    return FSMOE_OK;
}

static void nograd_free(sim_model *m)
{
    if (m->fsmoe_own) {
        nograd_free(m->fsmoe_own);
        free(m->fsmoe_own);
    }
    free(m->layers);
    m->layers = NULL, m->fsmoe_own = NULL;
}

fsmoe_status gpipe_stage_times(sim *s, const sim_model *sm, sim_schedule k, double *fwd_s,
                               double *bwd_s, double *grad_s, fsmoe_error *err)
{
    double with = 0, without = 0;
    fsmoe_status st = sim_schedule_time(s, sm, k, NULL, &with, err);
    if (st != FSMOE_OK)
        return st;
    sim_model ng;
    memset(&ng, 0, sizeof ng);
    st = nograd_copy(sm, &ng, err);
    if (st == FSMOE_OK)
        st = sim_schedule_time(s, &ng, k, NULL, &without, err);
    double fwd = 0, bwd_end = 0;
    if (st == FSMOE_OK)
        sim_phase_ends(s, &fwd, &bwd_end);
    nograd_free(&ng);
    if (st != FSMOE_OK)
        return st;
    *fwd_s = fwd;
    *bwd_s = without - fwd;
    *grad_s = with > without ? with - without : 0.0;
    return FSMOE_OK;
}

fsmoe_status gpipe_schedule_time(sim *s, const sim_model *sm, const fsmoe_plan *p,
                                 sim_schedule k, double *makespan_s, gpipe_input *g,
                                 fsmoe_error *err)
{
    gpipe_input in = {.stages = p->parallel.pp, .micro_batches = p->pipeline.micro_batches,
                      .p2p_s = p->pipeline.p2p_s, .priorities = 1,
                      .one_f_one_b = p->pipeline.one_f_one_b};
    fsmoe_status st = gpipe_stage_times(s, sm, k, &in.fwd_s, &in.bwd_s, &in.grad_s, err);
    if (st == FSMOE_OK)
        st = gpipe_simulate(s, &in, makespan_s, err);
    if (st == FSMOE_OK && g)
        *g = in;
    return st;
}
