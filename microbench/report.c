/* Implements: the nccl-tests-style table, the fit table and the JSON report (report.h). */
#include "json.h"
#include "report.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "atomic_file.h"

void report_banner(report *r, const bench_options *o, const comm_topology *t, const char *device)
{
    if (!r->enabled)
        return;
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
    if (strcmp(op, "gemm") == 0) {
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
    fprintf(r->out, "# Avg bus bandwidth    : %g\n#\n", n_bus ? sum_bus / n_bus : 0.0);
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
            fprintf(r->out, "# %-14s %-6s %5d %6d %12.2f %14.4e %12s %9.6f %s%s\n",
                    fsmoe_op_name(op), fsmoe_tier_name(tier), f->ranks, f->fit.n,
                    f->fit.alpha * 1e6, f->fit.beta, inv, f->fit.r2,
                    f->low_r2 ? "LOW-R2 " : "",
                    f->fit.bound == FIT_ALPHA_ZERO ? "(alpha bound at 0)"
                    : f->fit.bound == FIT_BETA_ZERO ? "(beta bound at 0)" : "");
        }
    }
    fflush(r->out);
    return wrong == 0;
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
            fprintf(f, "\"m\": %d, \"n_cols\": %d, \"k\": %d, ", r->m, r->nn, r->k);
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
            first = 0;
            if (b->status) {
                fprintf(f, "\"error\": ");
                fsmoe_json_string(f, b->msg);
                fputc('}', f);
                continue;
            }
            fprintf(f, "\"alpha_s\": %.9g, \"beta_s\": %.9g, \"r2\": %.9g, \"points\": %d, "
                       "\"rms_residual_s\": %.6g, \"max_rel_residual\": %.6g, "
                       "\"low_r2\": %s, \"bound\": \"%s\"}",
                    b->fit.alpha, b->fit.beta, b->fit.r2, b->fit.n, b->fit.rms_residual,
                    b->fit.max_rel_residual, b->low_r2 ? "true" : "false",
                    b->fit.bound == FIT_ALPHA_ZERO ? "alpha_zero"
                    : b->fit.bound == FIT_BETA_ZERO ? "beta_zero" : "none");
        }
    fprintf(f, "\n  ],\n  \"wrong\": %lld\n}\n", results_wrong(res));
    return fsmoe_atomic_commit(&af, err);
}
