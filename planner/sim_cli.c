/* Implements: `fsmoe-plan simulate` and `fsmoe-plan sweep` (sim_cli.h): load a plan
 * and the model/cluster of its provenance, simulate one iteration under a schedule, report
 * iteration time, per-resource busy time and utilisation and the critical path, draw it (SVG)
 * or trace it (Perfetto JSON); sweep the papers' grids and print Table 5 / Table IV-shaped
 * speedup summaries, a CSV, and the regret study of the closed-form pipeline degree.
 * Relies on: sim.h, sim_schedules.h, sim_out.h, sweep.h, libfsmoe (plan, model, cluster, cli). */
#include "sim_cli.h"
#include "gpipe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cluster.h"
#include "model.h"
#include "plan.h"
#include "locate.h"
#include "sim.h"
#include "atomic_file.h"
#include "sim_out.h"
#include "sim_schedules.h"
#include "sweep.h"

static int fail(const fsmoe_error *err)
{
    fsmoe_error_print("fsmoe-plan", err);
    return fsmoe_exit_code(err->status);
}

/* Reading the inputs (plan, model, cluster): a missing or unreadable file is an input error and
 * exits 2 like every other fsmoe-plan subcommand (main.c input_error); failures later, e.g.
 * writing an output, keep the status's own code. */
static int input_fail(const fsmoe_error *err)
{
    fsmoe_error_print("fsmoe-plan", err);
    return err->status == FSMOE_ERR_IO ? 2 : fsmoe_exit_code(err->status);
}

static void print_report(const sim *s, const sim_model *m, const char *sched)
{
    double fwd_end, bwd_end;
    sim_phase_ends(s, &fwd_end, &bwd_end);
    printf("schedule      %s\n", sched);
    printf("iteration     %.4f ms  (forward %.4f ms, backward %.4f ms, after backward %.4f ms)\n",
           s->makespan_s * 1e3, fwd_end * 1e3, (bwd_end - fwd_end) * 1e3,
           (s->makespan_s - bwd_end) * 1e3);
    printf("layers        %d MoE, degrees r_f/r_b of layer 0: %d/%d, tasks %d\n", m->n_layers,
           m->layers[0].r_f, m->layers[0].r_b, s->n_tasks);
    if (s->host_ranks)
        printf("host sharing  %d ranks on %d cores computing in lockstep, lines measured with %d "
               "computing at once: compute runs %.3fx its lines\n",
               s->host_ranks, s->host_cores, s->host_at_once, s->host_speed);
    printf("\n%-18s %12s %12s %7s %6s\n", "resource", "busy ms", "moving ms", "util", "tasks");
    for (int r = 0; r < s->n_res; r++) {
        if (!sim_out_shown(s, r))
            continue;
        const sim_resource *x = &s->res[r];
        printf("%-18s %12.4f %12.4f %6.1f%% %6d\n", x->name, x->busy_s * 1e3,
               x->mode == SIM_RES_SHARED ? x->bw_busy_s * 1e3 : x->busy_s * 1e3,
               s->makespan_s > 0.0 ? 100.0 * x->busy_s / s->makespan_s : 0.0, x->n_tasks);
    }
    /* critical path, consecutive tasks of one kind/phase/layer/resource merged */
    printf("\ncritical path %.4f ms over %d tasks:\n", s->critical_s * 1e3, s->n_critical);
    double by_kind[FSMOE_TASK_COUNT] = {0};
    for (int a = 0; a < s->n_critical; a++) {
        const sim_task *t = &s->tasks[s->critical[a]];
        by_kind[t->kind] += t->end_s - t->start_s;
    }
    printf("  by operation:");
    for (int k = 0; k < FSMOE_TASK_COUNT; k++)
        if (by_kind[k] > 0.0)
            printf(" %s %.4f ms (%.1f%%);", fsmoe_task_name((fsmoe_task_kind)k), by_kind[k] * 1e3,
                   s->critical_s > 0.0 ? 100.0 * by_kind[k] / s->critical_s : 0.0);
    printf("\n");
    printf("  %10s %10s %10s  %-5s %-6s %-16s %s\n", "start ms", "end ms", "ms", "phase",
           "layer", "resource", "operation (chunks)");
    static const char *const ph[] = {"fwd", "bwd", "tail"};
    int rows = 0, limit = s->n_critical > 60 ? 40 : 1 << 30, skipped = 0;
    for (int a = 0; a < s->n_critical;) {
        const sim_task *t0 = &s->tasks[s->critical[a]];
        int b = a + 1;
        while (b < s->n_critical) {
            const sim_task *t = &s->tasks[s->critical[b]];
            if (t->kind != t0->kind || t->phase != t0->phase || t->layer != t0->layer ||
                t->resource != t0->resource)
                break;
            b++;
        }
        const sim_task *t1 = &s->tasks[s->critical[b - 1]];
        if (t0->resource != SIM_R_SYNC && rows >= limit && b < s->n_critical) {
            skipped++;
        } else if (t0->resource != SIM_R_SYNC) {
            if (skipped > 0) {
                printf("  ... %d rows not shown ...\n", skipped);
                skipped = 0;
            }
            rows++;
            char layer[16];
            snprintf(layer, sizeof layer, t0->layer >= 0 ? "%d" : "-", t0->layer);
            printf("  %10.4f %10.4f %10.4f  %-5s %-6s %-16.16s %s",
                   t0->start_s * 1e3, t1->end_s * 1e3, (t1->end_s - t0->start_s) * 1e3,
                   ph[t0->phase], layer, s->res[t0->resource].name, fsmoe_task_name(t0->kind));
            if (b - a > 1)
                printf(" (%d)", b - a);
            printf("\n");
        }
        a = b;
    }
}

/* Outputs: checked before any work (writable, not an input, not each other). */
static int check_outputs(const char *const *flags, const char *const *outs, int n_out,
                         const char *const *ins, int n_in)
{
    fsmoe_error err = {0};
    for (int i = 0; i < n_out; i++) {
        if (!outs[i])
            continue;
        for (int j = 0; j < n_in; j++)
            if (ins[j] && fsmoe_same_file(outs[i], ins[j])) {
                fsmoe_fail(&err, FSMOE_ERR_USAGE,
                           "%s %s: is the input %s (an output never replaces an input)", flags[i],
                           outs[i], ins[j]);
                return fail(&err);
            }
        for (int j = 0; j < i; j++)
            if (outs[j] && (strcmp(outs[i], outs[j]) == 0 || fsmoe_same_file(outs[i], outs[j]))) {
                fsmoe_fail(&err, FSMOE_ERR_USAGE, "%s %s: is also the %s output", flags[i],
                           outs[i], flags[j]);
                return fail(&err);
            }
        if (fsmoe_atomic_check(flags[i], outs[i], &err) != FSMOE_OK) {
            fsmoe_error_print("fsmoe-plan", &err);
            return 2;
        }
    }
    return 0;
}

int sim_cli_simulate(const plan_cli *cli)
{
    const char *svg = cli->svg, *trace = cli->trace;
    int refine = cli->refine, all = cli->all, sched = cli->schedule;
    double win_from_s = cli->win_from_s, win_to_s = cli->win_to_s;
    const char *plan_path = cli->inputs[0];
    fsmoe_error err = {0};
    fsmoe_plan plan = {0};
    fsmoe_model model = {0};
    fsmoe_cluster cl = {0};
    sim_model m = {0};
    sim s;
    sim_init(&s);
    int rc = 1;
    char model_path[1200], cluster_path[1200];
    if (fsmoe_plan_load(plan_path, &plan, &err) != FSMOE_OK ||
        sim_plan_check(&plan, plan_path, &err) != FSMOE_OK)
        goto in_err;
    locate_input(plan_path, plan.model_path, model_path, sizeof model_path);
    locate_input(plan_path, plan.cluster_path, cluster_path, sizeof cluster_path);
    {
        static const char *const flags[] = {"--svg", "--trace"};
        const char *const outs[] = {svg, trace};
        const char *const ins[] = {plan_path, model_path, cluster_path};
        if ((rc = check_outputs(flags, outs, 2, ins, 3)) != 0)
            goto out;
        rc = 1;
    }
    if (fsmoe_model_load(model_path, &model, &err) != FSMOE_OK) {
        locate_named_by(plan_path, "provenance.model", &err);
        goto in_err;
    }
    if (fsmoe_cluster_load(cluster_path, &cl, &err) != FSMOE_OK) {
        locate_named_by(plan_path, "provenance.cluster", &err);
        goto in_err;
    }
    if (model.experts_is_ep)
        model.E = plan.parallel.ep;
    if (sim_model_from_plan(&plan, &model, &cl, cluster_path, &m, &err) != FSMOE_OK) {
        /* the plan and its model disagree (or a value of the plan cannot be played): name the
         * files, the message names the field */
        if (strncmp(err.msg, "simulate: ", 10) == 0) {
            char msg[FSMOE_ERROR_MAX];
            snprintf(msg, sizeof msg, "%s", err.msg + 10);
            char where[FSMOE_ERROR_MAX / 2];
            locate_field(plan_path, "layers", where, sizeof where);
            fsmoe_fail(&err, err.status, "%s (model %s): %.600s", where, model_path, msg);
        }
        goto out_err;
    }
    printf("# fsmoe-plan simulate %s\n# model %s (%s), cluster %s (%s), %d MoE layers\n",
           plan_path, plan.model_name, model_path, plan.cluster_name, cluster_path, m.n_layers);
    if (cl.interference.present)
        printf("# interference (the profile's): a collective beside a GEMM %.3gx slower, a GEMM "
               "beside a collective %.3gx, every collective %.3g ms later (sync latency)\n",
               cl.interference.comm_slowdown, cl.interference.compute_slowdown,
               1e3 * cl.interference.sync_s);
    if (cl.host.present)
        printf("# host sharing (the profile's): %d ranks on %d cores, its gemm and copy lines "
               "measured with %d computing at once (compute scaled to every rank computing at "
               "once: sim.h)\n",
               cl.host.ranks, cl.host.cores, cl.host.ranks_at_once);
    if (refine) {
        int changed;
        if (sim_refine_plan(&s, &m, &changed, &err) != FSMOE_OK)
            goto out_err;
        printf("# --refine: the simulator changed r of %d of %d layers\n", changed, m.n_layers);
    }
    if (sim_tutel_degree(&s, &m, &m.tutel_r, &err) != FSMOE_OK)
        goto out_err;
    const int pipe = plan.pipeline.present;
    if (pipe)
        printf("# pipeline: %s over %d stages of %ld blocks, %d micro-batches; every time "
               "below is the pipeline's iteration with the schedule's stage (the stage: one "
               "micro-batch of its blocks)\n",
               plan.pipeline.one_f_one_b ? "1F1B" : "GPipe", plan.parallel.pp,
               plan.pipeline.stage_blocks, plan.pipeline.micro_batches);
    if (all) {
        double t[SIM_SCHED_COUNT];
        for (int k = 0; k < SIM_SCHED_COUNT; k++)
            if (sim_schedule_applies(&m, (sim_schedule)k, NULL) &&
                (pipe ? gpipe_schedule_time(&s, &m, &plan, (sim_schedule)k, &t[k], NULL, &err)
                      : sim_schedule_time(&s, &m, (sim_schedule)k, NULL, &t[k], &err)) !=
                    FSMOE_OK)
                goto out_err;
        printf("# tutel degree r = %d (best of 1,2,4,8 by simulation)\n", m.tutel_r);
        printf("%-16s %14s %10s %10s\n", "schedule", "iteration ms", "vs tutel", "vs ds");
        for (int k = 0; k < SIM_SCHED_COUNT; k++) {
            const char *why;
            if (!sim_schedule_applies(&m, (sim_schedule)k, &why))
                printf("%-16s %14s  (%s; this layout has mp %d, esp %d)\n",
                       sim_schedule_name((sim_schedule)k), "-", why, m.par.mp, m.par.esp);
            else if (sim_schedule_applies(&m, SIM_SCHED_DEEPSPEED, NULL))
                printf("%-16s %14.4f %9.3fx %9.3fx\n", sim_schedule_name((sim_schedule)k),
                       t[k] * 1e3, t[SIM_SCHED_TUTEL] / t[k], t[SIM_SCHED_DEEPSPEED] / t[k]);
            else
                printf("%-16s %14.4f %9.3fx %10s\n", sim_schedule_name((sim_schedule)k),
                       t[k] * 1e3, t[SIM_SCHED_TUTEL] / t[k], "-");
        }
        rc = 0;
        goto out;
    }
    const char *why;
    if (!sim_schedule_applies(&m, (sim_schedule)sched, &why)) {
        fsmoe_fail(&err, FSMOE_ERR_USAGE, "--schedule %s: %s; this layout has mp %d, esp %d",
                   sim_schedule_name((sim_schedule)sched), why, m.par.mp, m.par.esp);
        rc = input_fail(&err);
        goto out;
    }
    double it;
    if (sim_schedule_time(&s, &m, (sim_schedule)sched, NULL, &it, &err) != FSMOE_OK)
        goto out_err;
    print_report(&s, &m, sim_schedule_name((sim_schedule)sched));
    if (pipe) {
        /* the pipeline after the stage's report (its Gantt chart and trace are the stage's) */
        sim ps;
        sim_init(&ps);
        gpipe_input g;
        double T = 0;
        fsmoe_status pst = gpipe_schedule_time(&ps, &m, &plan, (sim_schedule)sched, &T, &g, &err);
        /* MoNTA's priorities, measured: the same pipeline with the sends and the gradient work
         * sharing each stage's link */
        gpipe_input fair = g;
        fair.priorities = 0;
        double T_fair = 0;
        if (pst == FSMOE_OK)
            pst = gpipe_simulate(&ps, &fair, &T_fair, &err);
        sim_free(&ps);
        if (pst != FSMOE_OK)
            goto out_err;
        printf("\npipeline      %.4f ms  (%s: %d stages x %d micro-batches; per stage and "
               "micro-batch forward %.4f ms, backward %.4f ms without gradients; gradients and "
               "optimizer once %.4f ms; each send %.4f ms; bubble %.4f ms per stage, %.1f %%; "
               "closed form %.4f ms)\n",
               1e3 * T, g.one_f_one_b ? "1F1B" : "GPipe", g.stages, g.micro_batches,
               1e3 * g.fwd_s, 1e3 * g.bwd_s, 1e3 * g.grad_s,
               1e3 * g.p2p_s, 1e3 * (g.stages - 1) * (g.fwd_s + g.bwd_s),
               100.0 * (g.stages - 1) / (g.micro_batches + g.stages - 1),
               1e3 * gpipe_closed_form(&g));
        printf("              %.4f ms without MoNTA's link priorities (pipeline sends ahead of "
               "DP gradient work; without them they share each stage's link)\n",
               1e3 * T_fair);
    }
    char title[256];
    snprintf(title, sizeof title, "%s on %s: %s", plan.model_name, plan.cluster_name,
             sim_schedule_name((sim_schedule)sched));
    if (svg && sim_write_svg(&s, title, win_from_s, win_to_s, svg, &err) != FSMOE_OK)
        goto out_err;
    if (trace && sim_write_trace(&s, title, trace, &err) != FSMOE_OK)
        goto out_err;
    if (svg)
        printf("\nwrote %s\n", svg);
    if (trace)
        printf("%swrote %s\n", svg ? "" : "\n", trace);
    rc = 0;
    goto out;
in_err:
    rc = input_fail(&err);
    goto out;
out_err:
    rc = fail(&err);
out:
    sim_free(&s);
    sim_model_free(&m);
    fsmoe_cluster_free(&cl);
    fsmoe_plan_free(&plan);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v. */
static double percentile(const double *v, int n, double p)
{
    int k = (int)ceil(p * n) - 1;
    if (k < 0)
        k = 0;
    if (k >= n)
        k = n - 1;
    return v[k];
}

static fsmoe_status regret_study(sweep_grid g, char testbed, const fsmoe_cluster *c,
                                 const char *path, fsmoe_error *err)
{
    int n = sweep_grid_size(g);
    double *reg = malloc((size_t)n * sizeof *reg);
    if (!reg)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "sweep: out of memory");
    sim s;
    sim_init(&s);
    int cnt = 0, same_f = 0, same_b = 0, zero = 0;
    double sum = 0.0;
    fsmoe_status st = FSMOE_OK;
    for (int i = 0; i < n; i++) {
        sim_model m;
        sim_layer L;
        int valid;
        st = sweep_config(g, testbed, c, path, i, PIPELINE_SLSQP, &m, &L, &valid, NULL, err);
        if (st != FSMOE_OK)
            break;
        if (!valid)
            continue;
        sweep_regret rg;
        st = sweep_regret_config(&s, &m, &rg, err);
        if (st != FSMOE_OK)
            break;
        reg[cnt++] = rg.regret;
        sum += rg.regret;
        same_f += rg.r_f_best == rg.r_f_plan;
        same_b += rg.r_b_best == rg.r_b_plan;
        zero += rg.regret <= 1e-12;
    }
    sim_free(&s);
    if (st == FSMOE_OK && cnt > 0) {
        qsort(reg, (size_t)cnt, sizeof *reg, cmp_double);
        printf("\n# regret of the closed-form r_f, r_b (SLSQP on F = max f_i) against the best r "
               "in 1..r_max by simulation (fsmoe schedule), %d configurations\n", cnt);
        printf("regret  mean %.3f%%  p50 %.3f%%  p90 %.3f%%  max %.3f%%\n", 100.0 * sum / cnt,
               100.0 * percentile(reg, cnt, 0.5), 100.0 * percentile(reg, cnt, 0.9),
               100.0 * reg[cnt - 1]);
        printf("same r  forward %d/%d  backward %d/%d  zero regret %d/%d\n", same_f, cnt, same_b,
               cnt, zero, cnt);
    }
    free(reg);
    return st;
}

static fsmoe_status write_csv(const char *path, sweep_grid g, char testbed,
                              const fsmoe_cluster *c, const char *cpath, const sweep_result *r,
                              fsmoe_error *err)
{
    fsmoe_atomic_file af;
    if (fsmoe_atomic_open(&af, path, err) != FSMOE_OK)
        return err ? err->status : FSMOE_ERR_IO;
    FILE *f = af.f;
    fprintf(f, "index,configuration,r_f,r_b,tutel_r");
    for (int k = 0; k < SIM_SCHED_COUNT; k++)
        fprintf(f, ",%s_s", sim_schedule_name((sim_schedule)k));
    fprintf(f, "\n");
    for (int j = 0; j < r->n; j++) {
        sim_model m;
        sim_layer L;
        int valid;
        char desc[160] = "";
        fsmoe_status st = sweep_config(g, testbed, c, cpath, r->index[j], PIPELINE_SLSQP, &m, &L,
                                       &valid, desc, err);
        if (st != FSMOE_OK) {
            fsmoe_atomic_abort(&af);
            return st;
        }
        fprintf(f, "%d,\"%s\",%d,%d,%d", r->index[j], desc, r->r_f[j], r->r_b[j], r->tutel_r[j]);
        for (int k = 0; k < SIM_SCHED_COUNT; k++)
            fprintf(f, ",%.9g", r->t[j][k]);
        fprintf(f, "\n");
    }
    return fsmoe_atomic_commit(&af, err);
}

int sim_cli_sweep(const plan_cli *cli)
{
    const char *cluster_path = cli->cluster_path, *csv = cli->csv;
    int grid = cli->grid, regret = cli->regret, testbed = cli->testbed;
    fsmoe_error err = {0};
    {
        static const char *const flags[] = {"--csv"};
        const char *const outs[] = {csv};
        const char *const ins[] = {cluster_path};
        int rc = check_outputs(flags, outs, 1, ins, 1);
        if (rc != 0)
            return rc;
    }
    fsmoe_cluster cl = {0};
    if (fsmoe_cluster_load(cluster_path, &cl, &err) != FSMOE_OK)
        return input_fail(&err);
    char tb = testbed ? (char)testbed : sweep_testbed_of(&cl);
    sweep_result r;
    if (sweep_run((sweep_grid)grid, tb, &cl, cluster_path, &r, &err) != FSMOE_OK) {
        fsmoe_cluster_free(&cl);
        return fail(&err);
    }
    printf("# fsmoe-plan sweep --grid %s on %s", sweep_grid_name((sweep_grid)grid), cl.name);
    if (grid == SWEEP_FSMOE_TABLE4)
        printf(" (Table 4 L range of testbed %c)", tb);
    printf(": %d of %d configurations valid, %d schedules, %.3f s\n", r.n, r.n_grid,
           SIM_SCHED_COUNT, r.wall_s);
    printf("%-16s %9s %8s %8s %6s   %9s %8s %8s %6s\n", "schedule", "vs tutel", "min", "max",
           "slower", "vs ds", "min", "max", "slower");
    for (int k = 0; k < SIM_SCHED_COUNT; k++) {
        sweep_stat a, b;
        sweep_speedup(&r, k, SIM_SCHED_TUTEL, &a);
        sweep_speedup(&r, k, SIM_SCHED_DEEPSPEED, &b);
        printf("%-16s %8.3fx %7.3fx %7.3fx %6d   %8.3fx %7.3fx %7.3fx %6d\n",
               sim_schedule_name((sim_schedule)k), a.mean, a.min, a.max, a.n_slower, b.mean,
               b.min, b.max, b.n_slower);
    }
    int rc = 0;
    if (csv) {
        if (write_csv(csv, (sweep_grid)grid, tb, &cl, cluster_path, &r, &err) != FSMOE_OK)
            rc = fail(&err);
        else
            printf("wrote %s\n", csv);
    }
    if (rc == 0 && regret && regret_study((sweep_grid)grid, tb, &cl, cluster_path, &err) != FSMOE_OK)
        rc = fail(&err);
    sweep_result_free(&r);
    fsmoe_cluster_free(&cl);
    return rc;
}
