/* Implements: measured rows and their fits (results.h). */
#include "results.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

fsmoe_status results_add(bench_results *r, const bench_row *row, fsmoe_error *err)
{
    if (r->n_rows == r->cap) {
        int cap = r->cap ? 2 * r->cap : 64;
        bench_row *rows = realloc(r->rows, (size_t)cap * sizeof *rows);
        if (!rows)
            return fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for %d rows", cap);
        r->rows = rows;
        r->cap = cap;
    }
    r->rows[r->n_rows++] = *row;
    return FSMOE_OK;
}

void results_free(bench_results *r)
{
    free(r->rows);
    memset(r, 0, sizeof *r);
}

long long results_wrong(const bench_results *r)
{
    long long w = r->interference.wrong;
    for (int i = 0; i < r->n_rows; i++)
        w += r->rows[i].wrong;
    return w;
}

int results_row_in(const bench_row *row, int op, int tier, const bench_fit *f)
{
    return (int)row->op == op && (int)row->tier == tier && row->ranks == f->ranks &&
           row->shape_m == f->shape_m && row->shape_h == f->shape_h;
}

/* Fits the rows of (op, tier) with k's group size and GEMM shape into f. */
static void fit_group(const bench_results *r, int op, int tier, fsmoe_cost_entry k, double *x,
                      double *y, double r2_threshold, bench_fit *f)
{
    memset(f, 0, sizeof *f);
    f->ranks = k.ranks, f->shape_m = k.shape_m, f->shape_h = k.shape_h;
    int n = 0;
    for (int i = 0; i < r->n_rows; i++) {
        const bench_row *row = &r->rows[i];
        if (!results_row_in(row, op, tier, f))
            continue;
        x[n] = row->n;
        y[n] = row->seconds;
        n++;
    }
    if (n == 0)
        return;
    f->present = 1;
    fsmoe_error e = {0};
    f->status = fit_line(x, y, n, &f->fit, NULL, &e);
    if (f->status) {
        snprintf(f->msg, sizeof f->msg, "%.200s", e.msg);
        return;
    }
    f->low_r2 = f->fit.r2 < r2_threshold;
    /* out of memory leaves the pattern unjudged (NONE) */
    (void)fit_residual_pattern(x, y, n, &f->fit, &f->pattern, &e);
}

fsmoe_status results_fit(bench_results *r, double r2_threshold, fsmoe_error *err)
{
    double *x = malloc((size_t)(r->n_rows ? r->n_rows : 1) * sizeof *x);
    double *y = malloc((size_t)(r->n_rows ? r->n_rows : 1) * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for the fits");
    }
    for (int op = 0; op < FSMOE_OP_COUNT; op++) {
        for (int tier = 0; tier < FSMOE_TIER_COUNT; tier++) {
            /* the group sizes (GEMM shapes) of (op, tier), ascending; the last goes to
             * fits[][] */
            /* keys in the order of a profile's entries (cluster.h) */
            fsmoe_cost_entry sizes[BENCH_MAX_NARROWER + 1];
            int n_sizes = 0;
            for (int i = 0; i < r->n_rows; i++) {
                const bench_row *row = &r->rows[i];
                if ((int)row->op != op || (int)row->tier != tier)
                    continue;
                fsmoe_cost_entry key = {.ranks = row->ranks, .shape_m = row->shape_m,
                                        .shape_h = row->shape_h};
                int k = 0;
                while (k < n_sizes && fsmoe_cost_entry_order(&sizes[k], &key) < 0)
                    k++;
                if ((k < n_sizes && fsmoe_cost_entry_order(&sizes[k], &key) == 0) ||
                    n_sizes == BENCH_MAX_NARROWER + 1)
                    continue;
                memmove(&sizes[k + 1], &sizes[k], (size_t)(n_sizes - k) * sizeof *sizes);
                sizes[k] = key;
                n_sizes++;
            }
            memset(&r->fits[op][tier], 0, sizeof r->fits[op][tier]);
            r->n_narrower[op][tier] = 0;
            if (n_sizes == 0)
                continue;
            for (int k = 0; k + 1 < n_sizes; k++)
                fit_group(r, op, tier, sizes[k], x, y, r2_threshold, &r->narrower[op][tier][k]);
            r->n_narrower[op][tier] = n_sizes - 1;
            fit_group(r, op, tier, sizes[n_sizes - 1], x, y, r2_threshold, &r->fits[op][tier]);
        }
    }
    free(x);
    free(y);
    return FSMOE_OK;
}
