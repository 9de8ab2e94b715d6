/* Implements: the cluster profile writer (profile_write.h). */
#include "profile_write.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "yaml_write.h"

/* Measured values carry about 3 meaningful digits; 6 keep the file readable and exact enough. */
static double round_sig(double v, int digits)
{
    char buf[40];
    snprintf(buf, sizeof buf, "%.*g", digits, v);
    return strtod(buf, NULL);
}

static int point_cmp(const void *a, const void *b)
{
    const fsmoe_point *x = a, *y = b;
    return (x->n > y->n) - (x->n < y->n);
}

/* Points of (op, tier) sorted by n, equal n averaged; returns how many (≤ rows). */
static int profile_points(const bench_results *res, int op, int tier, fsmoe_point *pts)
{
    int n = 0;
    for (int i = 0; i < res->n_rows; i++)
        if ((int)res->rows[i].op == op && (int)res->rows[i].tier == tier) {
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
    fsmoe_status st;
    fsmoe_point *pts = malloc((size_t)(res->n_rows ? res->n_rows : 1) * sizeof *pts);
    if (!pts)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for the profile's points");
    fsmoe_atomic_file af;
    if ((st = fsmoe_atomic_open(&af, path, err))) {
        free(pts);
        return st;
    }
    fsmoe_yaml_writer w;
    fsmoe_yw_init(&w, af.f);
    char line[512], a[FSMOE_YW_DOUBLE_CHARS], b[FSMOE_YW_DOUBLE_CHARS];
    fsmoe_yw_comment(&w, "Cluster profile measured by fsmoe-bench (microbench/): t = alpha_s + "
                         "beta * n per operation and tier, least squares over the points.");
    fsmoe_yw_comment(&w, "n: bytes as nccl-tests counts them (alltoall/saa: one rank's buffer, "
                         "allgather: gathered output, reducescatter: input, allreduce: buffer); "
                         "gemm: multiply-accumulates m*n*k.");
    fsmoe_yw_comment(&w, "Points are [n, seconds] medians over the timed runs; each run's time "
                         "is combined over ranks as fsmoe-bench -a says (default: the average).");
    fsmoe_yw_long(&w, 0, "fsmoe_cluster", FSMOE_CLUSTER_VERSION);
    fsmoe_yw_str(&w, 0, "name", m->name);
    fsmoe_yw_str(&w, 0, "source", m->source);
    fsmoe_yw_str(&w, 0, "device", m->device);
    fsmoe_yw_long(&w, 0, "nodes", m->nodes);
    fsmoe_yw_long(&w, 0, "gpus_per_node", m->gpus_per_node);
    fsmoe_yw_double(&w, 0, "r2_threshold", m->r2_threshold);
    if (m->notes)
        fsmoe_yw_str(&w, 0, "notes", m->notes);
    fsmoe_yw_block(&w, 0, "ops");
    int entries = 0;
    for (int op = 0; op < FSMOE_OP_COUNT; op++) {
        for (int tier = 0; tier < FSMOE_TIER_COUNT; tier++) {
            const bench_fit *f = &res->fits[op][tier];
            if (!f->present)
                continue;
            if (f->status) {
                snprintf(line, sizeof line, "%s on %s not written: %s", fsmoe_op_name(op),
                         fsmoe_tier_name(tier), f->msg);
                fprintf(af.f, "  ");
                fsmoe_yw_comment(&w, line);
                continue;
            }
            if (f->low_r2) {
                snprintf(line, sizeof line, "LOW R2: %s on %s fits with r2 %.6f < %.4g; the "
                         "line is a poor model of the points below", fsmoe_op_name(op),
                         fsmoe_tier_name(tier), f->fit.r2, m->r2_threshold);
                fprintf(af.f, "  ");
                fsmoe_yw_comment(&w, line);
            }
            snprintf(line, sizeof line, "%d points, rms residual %.3g s, max relative residual "
                     "%.3g%s", f->fit.n, f->fit.rms_residual,
                     f->fit.max_rel_residual,
                     f->fit.bound == FIT_ALPHA_ZERO  ? ", alpha bound at 0 (free fit < 0)"
                     : f->fit.bound == FIT_BETA_ZERO ? ", beta bound at 0 (free fit < 0)"
                                                     : "");
            fprintf(af.f, "  ");
            fsmoe_yw_comment(&w, line);
            fsmoe_yw_item(&w);
            fsmoe_yw_str(&w, 2, "op", fsmoe_op_name(op));
            fsmoe_yw_str(&w, 4, "tier", fsmoe_tier_name(tier));
            fsmoe_yw_long(&w, 4, "ranks", tier == FSMOE_TIER_LOCAL ? 1 : f->ranks);
            fsmoe_yw_double(&w, 4, "alpha_s", round_sig(f->fit.alpha, 6));
            fsmoe_yw_double(&w, 4, op == FSMOE_OP_GEMM ? "beta_s_per_mac" : "beta_s_per_byte",
                            round_sig(f->fit.beta, 6));
            /* r2 keeps enough digits to stay on the same side of the threshold. */
            fsmoe_yw_double(&w, 4, "r2", f->fit.r2 < 0.0 ? 0.0 : round_sig(f->fit.r2, 9));
            int n = profile_points(res, op, tier, pts);
            if (n >= 2) {
                fsmoe_yw_block(&w, 4, "points");
                for (int i = 0; i < n; i++) {
                    /* Sizes are whole bytes or MACs: written as integers (5242880, not the
                     * shortest round-trip form 5.24288e+06), easier to read and diff. */
                    if (pts[i].n == floor(pts[i].n) && fabs(pts[i].n) < 1e15)
                        snprintf(a, sizeof a, "%.0f", pts[i].n);
                    else
                        fsmoe_yaml_format_double(pts[i].n, a);
                    fprintf(af.f, "      - [%s, %s]\n", a,
                            fsmoe_yaml_format_double(round_sig(pts[i].seconds, 6), b));
                }
            }
            entries++;
        }
    }
    free(pts);
    if (entries == 0) {
        fsmoe_atomic_abort(&af);
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: nothing to write: no operation could be fitted (every fit needs "
                          "at least two sizes)", path);
    }
    if (w.error) {
        fsmoe_atomic_abort(&af);
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s: write failed: %s", path, strerror(w.error));
    }
    return fsmoe_atomic_commit(&af, err);
}
