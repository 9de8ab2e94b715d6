/* Implements: the layout search (search.h). Relies on: fsmoe_model_resolve (the layout rules),
 * the memory model (libfsmoe/memory.h) and plan_model (the planner, with its own schedule
 * choices, on each candidate). */
#include "search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "explain.h"
#include "gpipe.h"
#include "sim.h"
#include "sim_schedules.h"

enum { RULE_HEADS = 0, RULE_VOCAB, RULE_BATCH, RULE_LAYOUT, RULE_STAGES };

static int push(search_result *r, const search_candidate *c)
{
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 64;
        search_candidate *p = realloc(r->c, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        r->c = p, r->cap = cap;
    }
    r->c[r->n++] = *c;
    return 0;
}

/* The first rule of search.h that layout par breaks for m, or -1; resolves a copy of m. */
static int broken_rule(const fsmoe_model *m, const fsmoe_parallel *par, long global_batch,
                       fsmoe_model *resolved)
{
    long kv = m->kv_heads > 0 ? m->kv_heads : m->heads;
    if (m->heads % par->mp != 0 || kv % par->mp != 0)
        return RULE_HEADS;
    if (m->vocab % par->mp != 0)
        return RULE_VOCAB;
    if (global_batch % par->dp != 0)
        return RULE_BATCH;
    *resolved = *m;
    resolved->B = global_batch / par->dp;
    resolved->has_parallel = 1;
    resolved->parallel = *par;
    fsmoe_error err = {0};
    if (fsmoe_model_resolve(resolved, par, "search", &err) != FSMOE_OK)
        return RULE_LAYOUT;
    fsmoe_model stage;
    fsmoe_parallel spar;
    if (par->pp > 1 && gpipe_stage(resolved, par, gpipe_default_micro(resolved->B, par->pp),
                                   &stage, &spar, &err) != FSMOE_OK)
        return RULE_STAGES;
    return -1;
}

/* The memory model on layout par of the resolved model m with the given recomputation and ZeRO
 * stage, as the plan applies it: one pipeline stage's blocks with the micro-batches it holds
 * at once (gpipe.h, with gpipe.h's default micro-batches; 1F1B: one_f_one_b). */
static void layout_memory(const fsmoe_model *m, const fsmoe_parallel *par, int one_f_one_b,
                          int recompute, int zero_stage, fsmoe_memory *out)
{
    fsmoe_model mm = *m;
    mm.recompute = recompute, mm.zero_stage = zero_stage;
    gpipe_memory(&mm, par, gpipe_default_micro(m->B, par->pp), one_f_one_b, out);
}

/* A candidate's memory per GPU (its layout and pipeline schedule), and what full
 * recomputation, then ZeRO stage 3 as well, would leave. */
static void candidate_memory(search_candidate *c, const fsmoe_model *rm)
{
    fsmoe_memory mem;
    layout_memory(rm, &c->par, c->one_f_one_b, rm->recompute, rm->zero_stage, &mem);
    for (int i = 0; i < FSMOE_MEM_CATS; i++)
        c->mem[i] = mem.bytes[i];
    c->mem_total = mem.total;
    layout_memory(rm, &c->par, c->one_f_one_b, FSMOE_RECOMPUTE_FULL, rm->zero_stage, &mem);
    c->mem_saving[0] = mem.total;
    layout_memory(rm, &c->par, c->one_f_one_b, FSMOE_RECOMPUTE_FULL, 3, &mem);
    c->mem_saving[1] = mem.total;
}

static const search_result *sort_r; /* qsort has no context argument */

static int by_time(const void *a, const void *b)
{
    const search_candidate *x = &sort_r->c[*(const int *)a], *y = &sort_r->c[*(const int *)b];
    if (x->iteration_s != y->iteration_s)
        return x->iteration_s < y->iteration_s ? -1 : 1;
    if (x->mem_total != y->mem_total)
        return x->mem_total < y->mem_total ? -1 : 1;
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

fsmoe_status search_layouts(const fsmoe_model *m, const fsmoe_cluster *c,
                            const char *cluster_path, int world, int gpus_per_node,
                            long global_batch, double mem_limit, const plan_options *opt,
                            search_result *out, fsmoe_error *err)
{
    memset(out, 0, sizeof *out);
    out->global_batch = global_batch, out->world = world, out->gpus_per_node = gpus_per_node;
    out->mem_limit = mem_limit;
    out->recompute = m->recompute, out->zero_stage = m->zero_stage;
    if (world < 1 || gpus_per_node < 1 || world % gpus_per_node != 0 || global_batch < 1)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "search: %d ranks on nodes of %d with a global batch of %ld (expected "
                          "whole nodes and at least one sample)",
                          world, gpus_per_node, global_batch);
    sim s;
    sim_init(&s);
    for (int pp = 1; pp <= world && pp <= GPIPE_MAX_STAGES; pp++) {
        if (world % pp != 0)
            continue;
        for (int mp = 1; mp <= world / pp; mp++) {
            if ((world / pp) % mp != 0)
                continue;
            for (int ep = 1; ep <= world / pp; ep++) {
                if ((world / pp) % ep != 0)
                    continue;
                for (int esp = 1; esp <= world / pp / ep; esp++) {
                    if ((world / pp / ep) % esp != 0)
                        continue;
                    fsmoe_parallel par = {.world = world, .gpus_per_node = gpus_per_node,
                                          .dp = world / pp / mp, .mp = mp, .ep = ep, .esp = esp,
                                          .pp = pp};
                    fsmoe_model rm;
                    int rule = broken_rule(m, &par, global_batch, &rm);
                    if (rule >= 0) {
                        out->n_invalid++;
                        out->invalid_by_rule[rule]++;
                        continue;
                    }
                    search_candidate cand;
                    memset(&cand, 0, sizeof cand);
                    cand.par = par, cand.B = rm.B;
                    fsmoe_plan p;
                    memset(&p, 0, sizeof p);
                    fsmoe_error perr = {0};
                    plan_options o = *opt;
                    o.micro_batches = 0; /* gpipe.h's default */
                    fsmoe_status st = plan_model(&rm, c, cluster_path, &par, &o, &p, &perr);
                    /* the memory model as the plan applies it (a pipeline stage's blocks), and
                     * what full recomputation, then ZeRO stage 3 as well, would leave */
                    candidate_memory(&cand, &rm);
                    if (st == FSMOE_OK && p.pipeline.present) {
                        /* a pipeline: the plan's makespan is the simulated pipeline (gpipe.h) */
                        cand.iteration_s = p.predicted.iteration_s;
                    } else if (st == FSMOE_OK) { /* the simulated iteration, as `simulate` */
                        sim_model sm;
                        st = sim_model_of_plan(&p, &rm, c, cluster_path, &sm, &perr);
                        if (st == FSMOE_OK)
                            st = sim_schedule_time(&s, &sm, SIM_SCHED_PLAN, NULL, &cand.iteration_s,
                                                   &perr);
                        sim_model_free(&sm);
                    }
                    if (st == FSMOE_ERR_NOMEM) {
                        fsmoe_plan_free(&p);
                        sim_free(&s);
                        search_free(out);
                        return fsmoe_fail(err, st, "search: out of memory");
                    }
                    if (st != FSMOE_OK) {
                        cand.state = SEARCH_UNPLANNED;
                        snprintf(cand.why, sizeof cand.why, "%.300s", perr.msg);
                    } else {
                        cand.forward_s = p.predicted.forward_s;
                        cand.backward_s = p.predicted.backward_s;
                        cand.tail_s = p.predicted.tail_s;
                        cand.state = mem_limit > 0 && cand.mem_total > mem_limit ? SEARCH_NO_FIT
                                                                                 : SEARCH_RANKED;
                    }
                    /* a pipeline also as 1F1B: the same stage in the other schedule, with the
                     * micro-batches it holds */
                    search_candidate c2 = cand;
                    int both = st == FSMOE_OK && p.pipeline.present;
                    if (both) {
                        gpipe_input g = {.stages = par.pp,
                                         .micro_batches = p.pipeline.micro_batches,
                                         .fwd_s = p.pipeline.fwd_s, .bwd_s = p.pipeline.bwd_s,
                                         .grad_s = p.pipeline.grad_s, .p2p_s = p.pipeline.p2p_s,
                                         .priorities = 1, .one_f_one_b = 1};
                        c2.one_f_one_b = 1;
                        st = gpipe_simulate(&s, &g, &c2.iteration_s, &perr);
                        candidate_memory(&c2, &rm);
                        c2.state = mem_limit > 0 && c2.mem_total > mem_limit ? SEARCH_NO_FIT
                                                                             : SEARCH_RANKED;
                    }
                    fsmoe_plan_free(&p);
                    if (push(out, &cand) != 0 ||
                        (both && (st != FSMOE_OK || push(out, &c2) != 0))) {
                        sim_free(&s);
                        search_free(out);
                        return fsmoe_fail(err, st != FSMOE_OK ? st : FSMOE_ERR_NOMEM,
                                          "search: %.300s",
                                          st != FSMOE_OK ? perr.msg : "out of memory");
                    }
                }
            }
        }
    }
    sim_free(&s);
    out->rank = malloc((size_t)(out->n > 0 ? out->n : 1) * sizeof *out->rank);
    if (!out->rank) {
        search_free(out);
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "search: out of memory");
    }
    for (int i = 0; i < out->n; i++)
        if (out->c[i].state == SEARCH_RANKED)
            out->rank[out->n_ranked++] = i;
    sort_r = out;
    qsort(out->rank, (size_t)out->n_ranked, sizeof *out->rank, by_time);
    sort_r = NULL;
    return FSMOE_OK;
}

void search_free(search_result *r)
{
    free(r->c);
    free(r->rank);
    r->c = NULL, r->rank = NULL;
    r->n = r->cap = r->n_ranked = 0;
}

static void layout_text(const fsmoe_parallel *p, int one_f_one_b, char *buf, size_t len)
{
    if (p->pp > 1)
        snprintf(buf, len, "dp %d mp %d ep %d esp %d pp %d%s", p->dp, p->mp, p->ep, p->esp, p->pp,
                 one_f_one_b ? " 1f1b" : "");
    else
        snprintf(buf, len, "dp %d mp %d ep %d esp %d", p->dp, p->mp, p->ep, p->esp);
}

/* Where a runner-up loses against the best: the phase (forward, backward, the gradient tail)
 * whose predicted time grew the most, and by how much; or its memory when the times tie. */
static void lost_by(const search_candidate *x, const search_candidate *best, char *buf,
                    size_t len)
{
    if (x->par.pp != best->par.pp || x->one_f_one_b != best->one_f_one_b) {
        /* other pipelines: their phases do not compare */
        char t[32] = "";
        double d = x->iteration_s - best->iteration_s;
        if (d > 0)
            explain_time(d, t, sizeof t);
        snprintf(buf, len, "%s%s (pp %d%s against %d%s)", d > 0 ? "iteration +" : "as fast",
                 t, x->par.pp, x->one_f_one_b ? " 1f1b" : "", best->par.pp,
                 best->one_f_one_b ? " 1f1b" : "");
        return;
    }
    /* the same pipeline depth: the phases of one stage's micro-batch (pp > 1), or of the
     * iteration */
    static const char *const stage_names[3] = {"stage forward", "stage backward",
                                               "stage gradient tail"};
    static const char *const iter_names[3] = {"forward", "backward", "gradient tail"};
    const char *const *names = x->par.pp > 1 ? stage_names : iter_names;
    double d[3] = {x->forward_s - best->forward_s, x->backward_s - best->backward_s,
                   x->tail_s - best->tail_s};
    int w = 0;
    for (int i = 1; i < 3; i++)
        if (d[i] > d[w])
            w = i;
    char t[32];
    if (d[w] <= 0) {
        snprintf(buf, len, "as fast; more memory per GPU");
        return;
    }
    explain_time(d[w], t, sizeof t);
    snprintf(buf, len, "%s +%s%s", names[w], t, x->par.pp > 1 ? " per micro-batch" : "");
}

void search_print(const search_result *r, const char *model, const char *cluster, int top,
                  FILE *f)
{
    int n_nofit = 0, n_unplanned = 0, n_1f1b = 0;
    for (int i = 0; i < r->n; i++) {
        n_nofit += r->c[i].state == SEARCH_NO_FIT;
        n_unplanned += r->c[i].state == SEARCH_UNPLANNED;
        n_1f1b += r->c[i].one_f_one_b;
    }
    char lim[32] = "no limit";
    if (r->mem_limit > 0)
        explain_bytes(r->mem_limit, lim, sizeof lim);
    fprintf(f,
            "# layout search: %s on %s, %d GPUs (%d per node), global batch %ld; memory per "
            "GPU: %s\n"
            "# %d layouts, %d against a rule (heads %d, vocabulary %d, global batch %d, layout "
            "%d, pipeline stages %d); %d candidates (a pipeline as GPipe and as 1F1B, with "
            "the default micro-batches): %d ranked, %d over the memory limit, %d the planner "
            "could not plan\n",
            model, cluster, r->world, r->gpus_per_node, r->global_batch, lim,
            r->n + r->n_invalid - n_1f1b, r->n_invalid,
            r->invalid_by_rule[RULE_HEADS], r->invalid_by_rule[RULE_VOCAB],
            r->invalid_by_rule[RULE_BATCH], r->invalid_by_rule[RULE_LAYOUT],
            r->invalid_by_rule[RULE_STAGES], r->n, r->n_ranked, n_nofit, n_unplanned);
    fprintf(f, "| rank | dp | mp | ep | esp | pp | batch/rank | memory/GPU | simulated iteration | "
               "vs best | loses in |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    const search_candidate *best = r->n_ranked > 0 ? &r->c[r->rank[0]] : NULL;
    for (int i = 0; i < r->n_ranked && i < top; i++) {
        const search_candidate *x = &r->c[r->rank[i]];
        char mem[32], t[32], why[96] = "-";
        explain_bytes(x->mem_total, mem, sizeof mem);
        explain_time(x->iteration_s, t, sizeof t);
        if (i > 0)
            lost_by(x, best, why, sizeof why);
        fprintf(f, "| %d | %d | %d | %d | %d | %d%s | %ld | %s | %s | %.3fx | %s |\n", i + 1,
                x->par.dp, x->par.mp, x->par.ep, x->par.esp, x->par.pp,
                x->one_f_one_b ? " 1f1b" : "", x->B, mem, t,
                x->iteration_s / best->iteration_s, why);
    }
    if (!best)
        fprintf(f, "| - | no layout fits and plans ||||||||||\n");
    /* the `top` fastest layouts over the limit, each with its need: what more memory would
     * buy */
    int *over = malloc((size_t)(n_nofit > 0 ? n_nofit : 1) * sizeof *over), n_over = 0;
    for (int i = 0; over && i < r->n; i++)
        if (r->c[i].state == SEARCH_NO_FIT)
            over[n_over++] = i;
    sort_r = r;
    if (over)
        qsort(over, (size_t)n_over, sizeof *over, by_time);
    sort_r = NULL;
    if (n_over > top)
        n_over = top;
    for (int k = 0; k < n_over; k++) {
        const search_candidate *x = &r->c[over[k]];
        char lay[64], mem[32], t[32];
        layout_text(&x->par, x->one_f_one_b, lay, sizeof lay);
        explain_bytes(x->mem_total, mem, sizeof mem);
        explain_time(x->iteration_s, t, sizeof t);
        fprintf(f, "# over the limit: %s would take %s per iteration but needs %s per GPU\n", lay,
                t, mem);
    }
    if (n_nofit > n_over)
        fprintf(f, "# over the limit: %d more (--top shows more)\n", n_nofit - n_over);
    free(over);
    /* what the model file's memory savings would let through (the memory model only: the
     * layouts are not planned that way) */
    if (n_nofit > 0) {
        int fit[2] = {0, 0};
        for (int i = 0; i < r->n; i++)
            for (int k = 0; k < 2; k++)
                fit[k] += r->c[i].state == SEARCH_NO_FIT && r->c[i].mem_saving[k] <= r->mem_limit;
        if (r->recompute != FSMOE_RECOMPUTE_FULL && fit[0] > 0)
            fprintf(f, "# with training.recompute: full in the model file, %d of the %d over "
                       "the limit would fit (slower: the forward runs twice)\n",
                    fit[0], n_nofit);
        if (r->zero_stage < 3 && fit[1] > fit[0])
            fprintf(f, "# with training.zero_stage: 3 as well, %d (ZeRO's collectives are not "
                       "in the time model)\n",
                    fit[1]);
    }
    /* the layouts the planner refused, one line per distinct reason (most often the profile
     * holding no line for an operation on the tier a layout puts it on) */
    int missing_line = 0;
    for (int i = 0; i < r->n; i++) {
        if (r->c[i].state != SEARCH_UNPLANNED)
            continue;
        int seen = 0, count = 0;
        for (int j = 0; j < r->n && !seen; j++)
            seen = j < i && r->c[j].state == SEARCH_UNPLANNED &&
                   strcmp(r->c[j].why, r->c[i].why) == 0;
        if (seen)
            continue;
        for (int j = i; j < r->n; j++)
            count += r->c[j].state == SEARCH_UNPLANNED && strcmp(r->c[j].why, r->c[i].why) == 0;
        char lay[64];
        layout_text(&r->c[i].par, r->c[i].one_f_one_b, lay, sizeof lay);
        fprintf(f, "# not planned: %d layout%s (first %s): %s\n", count, count == 1 ? "" : "s",
                lay, r->c[i].why);
        missing_line |= strstr(r->c[i].why, "entry for tier") != NULL;
    }
    if (missing_line)
        fprintf(f, "# HINT: a profile that lacks an operation on a tier cannot cost the layouts "
                   "that put it there; fsmoe-bench --all-tiers measures every operation on every "
                   "tier\n");
}

fsmoe_status search_svg(const search_result *r, const char *title, const char *path,
                        fsmoe_error *err)
{
    double xmax = r->mem_limit, ymax = 0;
    for (int i = 0; i < r->n; i++)
        if (r->c[i].state != SEARCH_UNPLANNED) {
            xmax = fmax(xmax, r->c[i].mem_total);
            ymax = fmax(ymax, r->c[i].iteration_s);
        }
    xmax = xmax > 0 ? 1.05 * xmax : 1;
    ymax = ymax > 0 ? 1.05 * ymax : 1;
    const double W = 720, H = 440, x0 = 80, y0 = 40, pw = 600, ph = 330;
    fsmoe_atomic_file af;
    fsmoe_status st = fsmoe_atomic_open(&af, path, err);
    if (st != FSMOE_OK)
        return st;
    FILE *f = af.f;
    double gib = 1024.0 * 1024.0 * 1024.0;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
            "<text x=\"%.0f\" y=\"22\" font-size=\"14\">%s</text>\n"
            "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
            "stroke=\"#444\"/>\n",
            W, H, x0, title, x0, y0, pw, ph);
    for (int t = 0; t <= 4; t++) { /* ticks */
        double xv = xmax * t / 4, yv = ymax * t / 4;
        fprintf(f,
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.3g</text>\n"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n",
                x0 + pw * t / 4, y0 + ph + 16, xv / gib, x0 - 6, y0 + ph - ph * t / 4 + 4,
                1e3 * yv);
    }
    fprintf(f,
            "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">memory per GPU (GiB, the "
            "memory model)</text>\n"
            "<text x=\"18\" y=\"%.0f\" transform=\"rotate(-90 18 %.0f)\" "
            "text-anchor=\"middle\">simulated iteration (ms)</text>\n",
            x0 + pw / 2, y0 + ph + 34, y0 + ph / 2, y0 + ph / 2);
    if (r->mem_limit > 0) {
        double lx = x0 + pw * r->mem_limit / xmax;
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#e41a1c\" "
                "stroke-dasharray=\"4 3\"/>\n<text x=\"%.1f\" y=\"%.0f\" fill=\"#e41a1c\">"
                "memory limit</text>\n",
                lx, y0, lx, y0 + ph, lx + 4, y0 + 14);
    }
    for (int i = 0; i < r->n; i++) {
        const search_candidate *x = &r->c[i];
        if (x->state == SEARCH_UNPLANNED)
            continue;
        double px = x0 + pw * x->mem_total / xmax, py = y0 + ph - ph * x->iteration_s / ymax;
        int best = r->n_ranked > 0 && r->rank[0] == i;
        char lay[64];
        layout_text(&x->par, x->one_f_one_b, lay, sizeof lay);
        fprintf(f,
                "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%d\" fill=\"%s\" stroke=\"#377eb8\">"
                "<title>%s: %.4g ms, %.4g GiB</title></circle>\n",
                px, py, best ? 6 : 4,
                x->state == SEARCH_RANKED ? (best ? "#4daf4a" : "#377eb8") : "none", lay,
                1e3 * x->iteration_s, x->mem_total / gib);
        if (best)
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">best: %s</text>\n", px + 8, py - 6, lay);
    }
    fprintf(f, "</svg>\n");
    if (fflush(f) != 0) {
        fsmoe_atomic_abort(&af);
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s: write failed", path);
    }
    return fsmoe_atomic_commit(&af, err);
}
