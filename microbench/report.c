/* Implements: the nccl-tests-style table, the fit table and the JSON report (report.h). */
#include "json.h"
#include "report.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"

/* The 1, 5 and 15 minute load averages (Linux), "" elsewhere: timings on a shared machine
 * are read next to them. */
static void report_loadavg(char *buf, size_t len)
{
    buf[0] = '\0';
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f)
        return;
    double a, b, c;
    if (fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3)
        snprintf(buf, len, "%.2f %.2f %.2f", a, b, c);
    fclose(f);
}

/* The load average when the banner was printed (one report per process). */
static char report_load_start[48];

void report_banner(report *r, const bench_options *o, const comm_topology *t, const char *device)
{
    if (!r->enabled)
        return;
    report_loadavg(report_load_start, sizeof report_load_start);
    fprintf(r->out, "# fsmoe-bench %s: %d ranks = %d node%s x %d (%s), backend %s on %s\n",
            FSMOE_VERSION, t->size, t->nodes, t->nodes == 1 ? "" : "s", t->gpus_per_node,
            t->detected ? "from node placement" : "--gpus-per-node",
            o->backend == BACKEND_NCCL ? "nccl" : "mpi", device);
    fprintf(r->out,
            "# sizes %lld..%lld bytes %s %g, gemm %lld..%lld elements step %lld, "
            "%d warm-up + %d timed runs (median), -a %d, check %d\n",
            o->min_bytes, o->max_bytes, o->step_factor > 1.0 ? "factor" : "step",
            o->step_factor > 1.0 ? o->step_factor : (double)o->step_bytes, o->gemm_min,
            o->gemm_max, o->gemm_step, o->warmup, o->iters, (int)o->average, o->check);
    if (o->extra_time > 0.0 && (o->outlier > 0.0 || (o->precision > 0.0 && o->max_iters > o->iters)))
        fprintf(r->out,
                "# then, within %.3g x the time of those runs (plus what earlier sections left): "
                "sizes > %.3g %% off the robust line measured again (once); until the line's "
                "slope is known to +-%.3g %% at %.0f %% confidence and its r2 reaches %.3g, up "
                "to %d runs for a median within +-%.3g %%\n",
                o->extra_time, 100.0 * o->outlier, 100.0 * o->precision,
                100.0 * MEASURE_CONFIDENCE, o->r2_threshold, o->max_iters,
                100.0 * o->precision);
    fflush(r->out);
}

void report_section(report *r, const char *op, const char *tier, int ranks, int groups,
                    const char *detail)
{
    if (!r->enabled)
        return;
    fprintf(r->out, "#\n# %s on tier %s: %d group%s of %d rank%s%s%s\n", op, tier, groups,
            groups == 1 ? "" : "s", ranks, ranks == 1 ? "" : "s", detail ? ", " : "",
            detail ? detail : "");
    if (strcmp(op, "interference") == 0) {
        /* per repetition: the phases' order, the times from each phase's start, the factors,
         * the small AllToAll's time per call after the GEMMs and back to back, the sync
         * latency */
        fprintf(r->out, "#%4s  %-8s %10s %10s %10s %10s %8s %8s %10s %10s %10s\n", "rep",
                "order", "T_a", "T_g", "t_a", "t_g", "comm", "compute", "after", "b2b", "sync");
        fprintf(r->out, "#%4s  %-8s %10s %10s %10s %10s %8s %8s %10s %10s %10s\n", "", "",
                "(us)", "(us)", "(us)", "(us)", "(x)", "(x)", "(us)", "(us)", "(us)");
    } else if (strcmp(op, "gemm") == 0) {
        fprintf(r->out, "#%7s %7s %7s %14s %10s %9s %6s\n", "m", "n", "k", "MACs", "time",
                "GFLOP/s", "#wrong");
        fprintf(r->out, "#%7s %7s %7s %14s %10s %9s %6s\n", "", "", "", "", "(us)", "", "");
    } else {
        fprintf(r->out, "#%58s%s\n", "", "out-of-place");
        fprintf(r->out, "#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s\n", "size", "count",
                "type", "redop", "root", "time", "algbw", "busbw", "#wrong");
        fprintf(r->out, "#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s\n", "(B)", "(elements)",
                "", "", "", "(us)", "(GB/s)", "(GB/s)", "");
    }
    fflush(r->out);
}

void report_section_time(report *r, double seconds)
{
    if (!r->enabled)
        return;
    fprintf(r->out, "# section took %.2f s\n", seconds);
    fflush(r->out);
}

void report_note(report *r, const char *fmt, ...)
{
    if (!r->enabled)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("# ", r->out);
    vfprintf(r->out, fmt, ap);
    fputc('\n', r->out);
    va_end(ap);
    fflush(r->out);
}

static void report_time(char *buf, size_t len, double seconds)
{
    double us = seconds * 1e6;
    if (us < 10000.0)
        snprintf(buf, len, "%7.2f", us);
    else if (us < 100000.0)
        snprintf(buf, len, "%7.1f", us);
    else
        snprintf(buf, len, "%7.0f", us);
}

void report_row(report *r, const bench_row *row, const char *type, const char *redop)
{
    if (!r->enabled)
        return;
    char t[32];
    report_time(t, sizeof t, row->seconds);
    fprintf(r->out, "%12.0f  %12zu  %8s  %6s  %6d  %7s  %6.2f  %6.2f  %5lld\n", row->n,
            row->count, type, redop, -1, t, row->algbw, row->busbw, row->wrong);
    fflush(r->out);
}

void report_refine(report *r, const measure_refine *rf, const measure_rule *rule)
{
    if (!r->enabled)
        return;
    int lo = 0, hi = 0, valid = 0, precise = 0, again = 0;
    double *x = malloc((size_t)(rf->n ? rf->n : 1) * sizeof *x);
    double *y = malloc((size_t)(rf->n ? rf->n : 1) * sizeof *y);
    double *res = malloc((size_t)(rf->n ? rf->n : 1) * sizeof *res);
    int *row = malloc((size_t)(rf->n ? rf->n : 1) * sizeof *row);
    if (!x || !y || !res || !row)
        goto done;
    for (int i = 0; i < rf->n; i++) {
        if (rf->runs[i] < 0)
            continue;
        int k = rf->runs[i];
        lo = valid == 0 || k < lo ? k : lo;
        hi = valid == 0 || k > hi ? k : hi;
        precise += rf->ci[i] <= rule->precision;
        again += rf->remeasured[i];
        x[valid] = rf->x[i];
        y[valid] = rf->y[i];
        row[valid++] = i;
    }
    if (valid == 0)
        goto done;
    fprintf(r->out, "# runs per size %d", lo);
    if (hi != lo)
        fprintf(r->out, "-%d", hi);
    if (rule->precision > 0.0) {
        fprintf(r->out, "; median within +-%.3g %% at %.0f %% confidence: %d of %d sizes",
                100.0 * rule->precision, 100.0 * MEASURE_CONFIDENCE, precise, valid);
        double widest = 0.0;
        for (int k = 0; k < valid; k++)
            widest = rf->ci[row[k]] > widest ? rf->ci[row[k]] : widest;
        if (precise < valid && widest < 1e299)
            fprintf(r->out, " (widest +-%.1f %%)", 100.0 * widest);
        else if (precise < valid)
            fprintf(r->out, " (too few runs for an interval)");
    }
    fit_result f;
    int fitted = valid >= 2 && fit_line(x, y, valid, &f, res, NULL) == FSMOE_OK;
    double slope = fitted ? fit_slope_rel_halfwidth(&f, MEASURE_CONFIDENCE) : INFINITY;
    if (isfinite(slope))
        fprintf(r->out, "; slope within +-%.2g %%", 100.0 * slope);
    if (rf->passes)
        fprintf(r->out, "; %d extra pass%s", rf->passes, rf->passes == 1 ? "" : "es");
    fputc('\n', r->out);
    if (again) {
        fprintf(r->out, "# measured again (> %.3g %% off the robust line):", 100.0 * rule->outlier);
        for (int k = 0, shown = 0; k < valid; k++) {
            int i = row[k];
            if (!rf->remeasured[i])
                continue;
            if (shown++ == 8) {
                fprintf(r->out, " and %d more", again - 8);
                break;
            }
            fprintf(r->out, " %.0f (%+.1f %%", rf->x[i], 100.0 * rf->first_rel[i]);
            if (fitted && y[k] != 0.0)
                fprintf(r->out, ", now %+.1f %% off the fit", 100.0 * res[k] / y[k]);
            fputc(')', r->out);
        }
        fputc('\n', r->out);
    }
    if (fitted) {
        /* the size farthest off the line in seconds: what r2 weighs (relative to the median,
         * the smallest sizes would always look worst: the line's α is fitted on the large) */
        int worst = 0;
        for (int k = 1; k < valid; k++)
            if (fabs(res[k]) > fabs(res[worst]))
                worst = k;
        fprintf(r->out, "# largest residual %+.3g ms (%+.1f %%) at %.0f (least-squares line, "
                "r2 %.4f)\n", 1e3 * res[worst],
                y[worst] != 0.0 ? 100.0 * res[worst] / y[worst] : 0.0, x[worst], f.r2);
    }
    fflush(r->out);
done:
    free(x);
    free(y);
    free(res);
    free(row);
}

void report_interference(report *r, const bench_interference *x)
{
    if (!r->enabled)
        return;
    for (int i = 0; i < x->reps; i++) {
        const bench_intf_rep *p = &x->rep[i];
        char t[7][32];
        const double v[7] = {p->T_a, p->T_g, p->t_a, p->t_g, p->sync_after_s, p->sync_alone_s,
                             p->sync_s};
        for (int k = 0; k < 7; k++)
            report_time(t[k], sizeof t[k], v[k]);
        fprintf(r->out, "%5d  %-8s %10s %10s %10s %10s %8.3f %8.3f %10s %10s %10s\n", i + 1,
                p->together_first ? "ag,g,a" : "a,g,ag", t[0], t[1], t[2], t[3],
                p->comm_slowdown, p->compute_slowdown, t[4], t[5], t[6]);
    }
    fprintf(r->out,
            "# a: the AllToAlls alone, g: the GEMMs alone, ag: together; times of the last rank "
            "from each phase's start; the factor of the one that ended first is its time over "
            "its time alone, the other's from the fluid model\n");
    fprintf(r->out,
            "# after: one small world AllToAll (%zu B) right after %d GEMMs, b2b: back to back, "
            "each per call and the mean over the ranks; sync: after - b2b (at least 0)\n",
            x->sync_bytes, x->G);
    fprintf(r->out,
            "# comm_slowdown %.3f, compute_slowdown %.3f (medians of %d repetitions); #wrong "
            "%lld %s\n",
            x->comm_slowdown, x->compute_slowdown, x->reps, x->wrong,
            x->wrong ? "FAILED: not written to the profile" : "OK");
    fprintf(r->out,
            "# sync_latency %.3f ms per collective (median of %d repetitions: small world "
            "alltoall after ~%.1f ms of GEMMs %.3f ms, back to back %.3f ms)\n",
            1e3 * x->sync_s, x->reps, 1e3 * x->sync_gemm_s, 1e3 * x->sync_after_s,
            1e3 * x->sync_alone_s);
    fflush(r->out);
}

void report_gemm_row(report *r, const bench_row *row)
{
    if (!r->enabled)
        return;
    char t[32];
    report_time(t, sizeof t, row->seconds);
    fprintf(r->out, "%8d %7d %7d %14.0f %10s %9.2f %6lld\n", row->m, row->nn, row->k, row->n, t,
            row->algbw, row->wrong);
    fflush(r->out);
}

int report_footer(report *r, const bench_results *res, double r2_threshold)
{
    long long wrong = results_wrong(res);
    double sum_bus = 0.0;
    int n_bus = 0;
    for (int i = 0; i < res->n_rows; i++)
        if (res->rows[i].op != FSMOE_OP_GEMM) {
            sum_bus += res->rows[i].busbw;
            n_bus++;
        }
    if (!r->enabled)
        return wrong == 0;
    fprintf(r->out, "#\n# Out of bounds values : %lld %s\n", wrong, wrong ? "FAILED" : "OK");
    fprintf(r->out, "# Avg bus bandwidth    : %g\n", n_bus ? sum_bus / n_bus : 0.0);
    char load_end[48];
    report_loadavg(load_end, sizeof load_end);
    if (report_load_start[0] && load_end[0])
        fprintf(r->out, "# Load average         : %s at the start, %s at the end (1, 5, 15 min)\n",
                report_load_start, load_end);
    fprintf(r->out, "#\n");
    fprintf(r->out, "# Fitted t = alpha + beta*n (n: bytes; gemm: multiply-accumulates), "
                    "r2 threshold %.4g\n", r2_threshold);
    fprintf(r->out, "# %-14s %-6s %5s %6s %12s %14s %12s %9s %s\n", "op", "tier", "ranks",
            "points", "alpha (us)", "beta (s/unit)", "1/beta", "r2", "");
    for (int op = 0; op < FSMOE_OP_COUNT; op++) {
        for (int tier = 0; tier < FSMOE_TIER_COUNT; tier++)
        for (int k = 0; k <= res->n_narrower[op][tier]; k++) { /* narrowest group first */
            const bench_fit *f = k < res->n_narrower[op][tier] ? &res->narrower[op][tier][k]
                                                                : &res->fits[op][tier];
            if (!f->present)
                continue;
            if (f->status) {
                fprintf(r->out, "# %-14s %-6s %5d  fit failed: %s\n", fsmoe_op_name(op),
                        fsmoe_tier_name(tier), f->ranks, f->msg);
                continue;
            }
            char inv[32];
            if (f->fit.beta > 0.0)
                snprintf(inv, sizeof inv, op == FSMOE_OP_GEMM ? "%.2f GMAC/s" : "%.3f GB/s",
                         1e-9 / f->fit.beta);
            else
                snprintf(inv, sizeof inv, "inf");
            char name[48];
            if (f->shape_m) /* one line per GEMM shape */
                snprintf(name, sizeof name, "%s %d:%d", fsmoe_op_name(op), f->shape_m,
                         f->shape_h);
            else
                snprintf(name, sizeof name, "%s", fsmoe_op_name(op));
            char low[48] = "";
            if (f->low_r2)
                snprintf(low, sizeof low, "LOW-R2 (%s) ", fit_pattern_name(f->pattern.kind));
            fprintf(r->out, "# %-14s %-6s %5d %6d %12.2f %14.4e %12s %9.6f %s%s\n",
                    name, fsmoe_tier_name(tier), f->ranks, f->fit.n,
                    f->fit.alpha * 1e6, f->fit.beta, inv, f->fit.r2, low,
                    f->fit.bound == FIT_ALPHA_ZERO ? "(alpha bound at 0)"
                    : f->fit.bound == FIT_BETA_ZERO ? "(beta bound at 0)" : "");
        }
    }
    /* what the residuals of each fit below the threshold show */
    for (int op = 0; op < FSMOE_OP_COUNT; op++)
        for (int tier = 0; tier < FSMOE_TIER_COUNT; tier++)
            for (int k = 0; k <= res->n_narrower[op][tier]; k++) {
                const bench_fit *f = k < res->n_narrower[op][tier] ? &res->narrower[op][tier][k]
                                                                    : &res->fits[op][tier];
                if (!f->present || f->status || !f->low_r2)
                    continue;
                char what[384];
                fit_pattern_describe(&f->pattern, what, sizeof what);
                fprintf(r->out, "# residuals of %s on %s at %d ranks (r2 %.4f): %s\n",
                        fsmoe_op_name(op), fsmoe_tier_name(tier), f->ranks, f->fit.r2, what);
            }
    fflush(r->out);
    return wrong == 0;
}

/* "interference": the section's sizes, each repetition, the factors and the sync latency
 * (absent when it did not run; "ok": false when its outputs were wrong and the profile got
 * none). */
static void report_json_interference(FILE *f, const bench_interference *x)
{
    if (!x->measured)
        return;
    fprintf(f, "  \"interference\": {\"ok\": %s, \"comm_slowdown\": %.6g, "
               "\"compute_slowdown\": %.6g, \"ranks\": %d, \"alltoall_bytes\": %zu, "
               "\"alltoalls\": %d, \"gemm\": {\"m\": %d, \"n\": %d, \"k\": %d, "
               "\"shape\": [%d, %d]}, \"gemms\": %d, \"wrong\": %lld,\n    \"sync_latency_s\": "
               "%.6g, \"sync_after_s\": %.6g, \"sync_alone_s\": %.6g, \"sync_alltoall_bytes\": "
               "%zu, \"sync_rounds\": %d, \"sync_gemms\": %d, \"measured\": ",
            bench_intf_usable(x) ? "true" : "false", x->comm_slowdown, x->compute_slowdown, x->ranks,
            x->bytes, x->K, x->T, x->H, x->M, x->M, x->H, x->J, x->wrong, x->sync_s,
            x->sync_after_s, x->sync_alone_s, x->sync_bytes, x->L, x->G);
    fsmoe_json_string(f, x->measured_how);
    fprintf(f, ",\n    \"repetitions\": [");
    for (int i = 0; i < x->reps; i++) {
        const bench_intf_rep *p = &x->rep[i];
        fprintf(f, "%s\n      {\"order\": \"%s\", \"T_a_s\": %.9g, \"T_g_s\": %.9g, "
                   "\"t_a_s\": %.9g, \"t_g_s\": %.9g, \"comm_slowdown\": %.6g, "
                   "\"compute_slowdown\": %.6g, \"sync_after_s\": %.9g, \"sync_alone_s\": %.9g, "
                   "\"sync_latency_s\": %.9g}",
                i ? "," : "", p->together_first ? "ag,g,a" : "a,g,ag", p->T_a, p->T_g, p->t_a,
                p->t_g, p->comm_slowdown, p->compute_slowdown, p->sync_after_s, p->sync_alone_s,
                p->sync_s);
    }
    fprintf(f, "\n    ]},\n");
}

fsmoe_status report_json(const char *path, const bench_options *o, const comm_topology *t,
                         const char *device, const bench_results *res, fsmoe_error *err)
{
    fsmoe_atomic_file af;
    fsmoe_status st = fsmoe_atomic_open(&af, path, err);
    if (st)
        return st;
    FILE *f = af.f;
    fprintf(f, "{\n  \"fsmoe_bench\": 1,\n  \"version\": ");
    fsmoe_json_string(f, FSMOE_VERSION);
    fprintf(f, ",\n  \"world\": %d,\n  \"nodes\": %d,\n  \"gpus_per_node\": %d,\n", t->size,
            t->nodes, t->gpus_per_node);
    fprintf(f, "  \"backend\": \"%s\",\n  \"device\": ",
            o->backend == BACKEND_NCCL ? "nccl" : "mpi");
    fsmoe_json_string(f, device);
    fprintf(f, ",\n  \"datatype\": \"%s\",\n  \"redop\": \"%s\",\n  \"iters\": %d,\n"
               "  \"warmup\": %d,\n  \"average\": %d,\n  \"r2_threshold\": %.17g,\n",
            comm_dtype_name(o->dtype), comm_redop_name(o->redop), o->iters, o->warmup, (int)o->average,
            o->r2_threshold);
    fprintf(f, "  \"rows\": [");
    for (int i = 0; i < res->n_rows; i++) {
        const bench_row *r = &res->rows[i];
        fprintf(f, "%s\n    {\"op\": \"%s\", \"tier\": \"%s\", \"ranks\": %d, \"n\": %.17g, "
                   "\"count\": %zu, ",
                i ? "," : "", fsmoe_op_name(r->op), fsmoe_tier_name(r->tier), r->ranks, r->n,
                r->count);
        if (r->op == FSMOE_OP_GEMM)
            fprintf(f, "\"m\": %d, \"n_cols\": %d, \"k\": %d, \"shape\": [%d, %d], ", r->m,
                    r->nn, r->k, r->shape_m, r->shape_h);
        fprintf(f, "\"time_s\": %.9g, \"algbw\": %.6g, \"busbw\": %.6g, \"wrong\": %lld}",
                r->seconds, r->algbw, r->busbw, r->wrong);
    }
    fprintf(f, "\n  ],\n  \"fits\": [");
    int first = 1;
    for (int op = 0; op < FSMOE_OP_COUNT; op++)
        for (int tier = 0; tier < FSMOE_TIER_COUNT; tier++)
        for (int k = 0; k <= res->n_narrower[op][tier]; k++) { /* narrowest group first */
            const bench_fit *b = k < res->n_narrower[op][tier] ? &res->narrower[op][tier][k]
                                                                : &res->fits[op][tier];
            if (!b->present)
                continue;
            fprintf(f, "%s\n    {\"op\": \"%s\", \"tier\": \"%s\", \"ranks\": %d, ",
                    first ? "" : ",", fsmoe_op_name(op), fsmoe_tier_name(tier), b->ranks);
            if (b->shape_m)
                fprintf(f, "\"shape\": [%d, %d], ", b->shape_m, b->shape_h);
            first = 0;
            if (b->status) {
                fprintf(f, "\"error\": ");
                fsmoe_json_string(f, b->msg);
                fputc('}', f);
                continue;
            }
            fprintf(f, "\"alpha_s\": %.9g, \"beta_s\": %.9g, \"r2\": %.9g, \"points\": %d, "
                       "\"rms_residual_s\": %.6g, \"max_rel_residual\": %.6g, "
                       "\"low_r2\": %s, \"bound\": \"%s\", \"residuals\": {\"pattern\": "
                       "\"%s\", \"runs\": %d, \"positive\": %d, \"negative\": %d, "
                       "\"runs_p\": %.6g, \"quadratic_share\": %.6g, \"quadratic_p\": %.6g}}",
                    b->fit.alpha, b->fit.beta, b->fit.r2, b->fit.n, b->fit.rms_residual,
                    b->fit.max_rel_residual, b->low_r2 ? "true" : "false",
                    b->fit.bound == FIT_ALPHA_ZERO ? "alpha_zero"
                    : b->fit.bound == FIT_BETA_ZERO ? "beta_zero" : "none",
                    fit_pattern_name(b->pattern.kind), b->pattern.runs, b->pattern.n_pos,
                    b->pattern.n_neg, b->pattern.runs_p, b->pattern.quad_share,
                    b->pattern.quad_p);
        }
    fprintf(f, "\n  ],\n");
    report_json_interference(f, &res->interference);
    fprintf(f, "  \"wrong\": %lld\n}\n", results_wrong(res));
    return fsmoe_atomic_commit(&af, err);
}
