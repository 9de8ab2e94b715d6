/* Implements: the fitted rows of a run as a cluster profile (profile_write.h); the file itself
 * is written by libfsmoe's fsmoe_cluster_write, beside the reader. */
#include "profile_write.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_write.h"

static int point_cmp(const void *a, const void *b)
{
    const fsmoe_point *x = a, *y = b;
    return (x->n > y->n) - (x->n < y->n);
}

/* Points of fit f of (op, tier) sorted by n, equal n averaged; returns how many (≤ rows). */
static int profile_points(const bench_results *res, int op, int tier, const bench_fit *f,
                          fsmoe_point *pts)
{
    int n = 0;
    for (int i = 0; i < res->n_rows; i++)
        if (results_row_in(&res->rows[i], op, tier, f)) {
            pts[n].n = res->rows[i].n;
            pts[n].seconds = res->rows[i].seconds;
            n++;
        }
    qsort(pts, (size_t)n, sizeof *pts, point_cmp);
    int out = 0;
    for (int i = 0; i < n;) {
        int j = i;
        double sum = 0.0;
        while (j < n && pts[j].n == pts[i].n)
            sum += pts[j++].seconds;
        pts[out].n = pts[i].n;
        pts[out].seconds = sum / (j - i);
        out++;
        i = j;
    }
    return out;
}

fsmoe_status profile_write(const char *path, const profile_meta *m, const bench_results *res,
                           fsmoe_error *err)
{
    char(*comments)[FSMOE_TIER_COUNT][768] = calloc(FSMOE_OP_COUNT, sizeof *comments);
    fsmoe_cluster *c = calloc(1, sizeof *c);
    fsmoe_cluster_write_extra *x = calloc(1, sizeof *x);
    fsmoe_point *pts = malloc((size_t)(res->n_rows ? res->n_rows : 1) * sizeof *pts);
    if (!comments || !c || !x || !pts) {
        free(comments);
        free(c);
        free(x);
        free(pts);
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for the profile");
    }
    snprintf(c->name, sizeof c->name, "%s", m->name);
    snprintf(c->source, sizeof c->source, "%s", m->source);
    snprintf(c->device, sizeof c->device, "%s", m->device);
    c->device_memory_bytes = m->device_memory_bytes;
    c->compute_threads = m->compute_threads;
    c->nodes = m->nodes;
    c->gpus_per_node = m->gpus_per_node;
    c->r2_threshold = m->r2_threshold;
    x->notes = m->notes;
    if (m->host_ranks > m->host_cores && m->host_cores > 0 && m->host_at_once > 0) {
        c->host.present = 1;
        c->host.ranks = m->host_ranks;
        c->host.cores = m->host_cores;
        c->host.ranks_at_once = m->host_at_once;
    }
    const bench_interference *in = &res->interference;
    if (bench_intf_usable(in)) {
        c->interference.present = 1;
        c->interference.comm_slowdown = in->comm_slowdown;
        c->interference.compute_slowdown = in->compute_slowdown;
        c->interference.sync_s = in->sync_s; /* 0 writes no key (cluster_write.c) */
        snprintf(c->interference.measured, sizeof c->interference.measured, "%s",
                 in->measured_how);
    }
    fsmoe_point *next = pts;
    for (int op = 0; op < FSMOE_OP_COUNT; op++) {
        for (int tier = 0; tier < FSMOE_TIER_COUNT; tier++) {
            const bench_fit *f = &res->fits[op][tier];
            char *line = comments[op][tier];
            if (!f->present)
                continue;
            x->comment[op][tier] = line;
            if (f->status) {
                snprintf(line, sizeof comments[0][0], "%s on %s not written: %s",
                         fsmoe_op_name(op), fsmoe_tier_name(tier), f->msg);
                continue;
            }
            snprintf(line, sizeof comments[0][0],
                     "%s%d points, rms residual %.3g s, max relative residual %.3g%s",
                     op == FSMOE_OP_ALLTOALL_2DH
                         ? "hierarchical AllToAll (2DH: an AllToAll inside each node, then one "
                           "among the ranks with the same local index across nodes); "
                         : "",
                     f->fit.n,
                     f->fit.rms_residual, f->fit.max_rel_residual,
                     f->fit.bound == FIT_ALPHA_ZERO  ? ", alpha bound at 0 (free fit < 0)"
                     : f->fit.bound == FIT_BETA_ZERO ? ", beta bound at 0 (free fit < 0)"
                                                     : "");
            if (f->low_r2) { /* what the residuals show (fit.h) */
                char what[384];
                fit_pattern_describe(&f->pattern, what, sizeof what);
                size_t used = strlen(line);
                snprintf(line + used, sizeof comments[0][0] - used, "; residuals: %s", what);
            }
            /* the narrower group sizes (fitted, others skipped), then the widest */
            int n = res->n_narrower[op][tier];
            for (int k = 0; k <= n; k++) {
                const bench_fit *g = k < n ? &res->narrower[op][tier][k] : f;
                if (!g->present || g->status)
                    continue;
                fsmoe_cost_entry e;
                memset(&e, 0, sizeof e);
                e.alpha_s = g->fit.alpha;
                e.beta_s = g->fit.beta;
                e.r2 = g->fit.r2;
                e.ranks = g->ranks;
                e.shape_m = g->shape_m, e.shape_h = g->shape_h;
                e.low_r2 = g->low_r2;
                e.points = next;
                e.n_points = profile_points(res, op, tier, g, next);
                next += e.n_points;
                fsmoe_error add_err = {0};
                if (fsmoe_cluster_add(c, (fsmoe_op)op, (fsmoe_tier)tier, &e, &add_err))
                    snprintf(line, sizeof comments[0][0], "%.300s", add_err.msg);
            }
        }
    }
    fsmoe_status st = fsmoe_cluster_write(path, c, x, err);
    /* the points live in pts; only the lists of narrower entries belong to c */
    for (int op = 0; op < FSMOE_OP_COUNT; op++)
        for (int tier = 0; tier < FSMOE_TIER_COUNT; tier++)
            free(c->narrower[op][tier]);
    free(pts);
    free(x);
    free(c);
    free(comments);
    return st;
}
