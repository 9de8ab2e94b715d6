/* Implements: writing a cluster profile (cluster_write.h). Moved here from fsmoe-bench
 * (microbench/profile_write.c), which now only turns its fitted rows into an fsmoe_cluster. */
#include "cluster_write.h"

#include <math.h>
#include <stdio.h>
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

static void entry_comment(fsmoe_yaml_writer *w, FILE *f, const char *text)
{
    fprintf(f, "  ");
    fsmoe_yw_comment(w, text);
}

static void write_entry(fsmoe_yaml_writer *w, FILE *f, const fsmoe_cluster *c, int op, int tier,
                        const fsmoe_cost_entry *e)
{
    char line[512], a[FSMOE_YW_DOUBLE_CHARS], b[FSMOE_YW_DOUBLE_CHARS];
    if (e->r2 < c->r2_threshold) {
        snprintf(line, sizeof line, "LOW R2: %s on %s at %d ranks fits with r2 %.6f < %.4g; the "
                 "line is a poor model of the points below", fsmoe_op_name((fsmoe_op)op),
                 fsmoe_tier_name((fsmoe_tier)tier), e->ranks, e->r2, c->r2_threshold);
        entry_comment(w, f, line);
    }
    fsmoe_yw_item(w);
    fsmoe_yw_str(w, 2, "op", fsmoe_op_name((fsmoe_op)op));
    fsmoe_yw_str(w, 4, "tier", fsmoe_tier_name((fsmoe_tier)tier));
    fsmoe_yw_long(w, 4, "ranks", tier == FSMOE_TIER_LOCAL ? 1 : e->ranks);
    if (op == FSMOE_OP_GEMM && e->shape_m > 0)
        fprintf(f, "    shape: [%d, %d]\n", e->shape_m, e->shape_h);
    fsmoe_yw_double(w, 4, "alpha_s", round_sig(e->alpha_s, 6));
    fsmoe_yw_double(w, 4, op == FSMOE_OP_GEMM ? "beta_s_per_mac" : "beta_s_per_byte",
                    round_sig(e->beta_s, 6));
    fsmoe_yw_double(w, 4, "r2", e->r2 < 0.0 ? 0.0 : round_sig(e->r2, 9));
    if (e->n_points < 2)
        return;
    fsmoe_yw_block(w, 4, "points");
    for (int i = 0; i < e->n_points; i++) {
        const fsmoe_point *p = &e->points[i];
        /* Sizes are whole bytes or MACs: written as integers (5242880, not the shortest
         * round-trip form 5.24288e+06), easier to read and diff. */
        if (p->n == floor(p->n) && fabs(p->n) < 1e15)
            snprintf(a, sizeof a, "%.0f", p->n);
        else
            fsmoe_yaml_format_double(p->n, a);
        fprintf(f, "      - [%s, %s]\n", a,
                fsmoe_yaml_format_double(round_sig(p->seconds, 6), b));
    }
}

fsmoe_status fsmoe_cluster_write(const char *path, const fsmoe_cluster *c,
                                 const fsmoe_cluster_write_extra *extra, fsmoe_error *err)
{
    fsmoe_status st;
    fsmoe_atomic_file af;
    if ((st = fsmoe_atomic_open(&af, path, err)))
        return st;
    fsmoe_yaml_writer w;
    fsmoe_yw_init(&w, af.f);
    fsmoe_yw_comment(&w, "Cluster profile (libfsmoe/cluster.h): t = alpha_s + beta * n per "
                         "operation and tier, least squares over the points.");
    fsmoe_yw_comment(&w, "n: bytes as nccl-tests counts them (alltoall/alltoall_2dh/saa: one "
                         "rank's buffer, allgather: gathered output, reducescatter: input, "
                         "allreduce: buffer); gemm: multiply-accumulates m*n*k.");
    fsmoe_yw_comment(&w, "Points are [n, seconds] as measured (fsmoe-bench: medians over the "
                         "timed runs, each combined over ranks as its -a says, default the "
                         "average).");
    fsmoe_yw_long(&w, 0, "fsmoe_cluster", FSMOE_CLUSTER_VERSION);
    fsmoe_yw_str(&w, 0, "name", c->name);
    fsmoe_yw_str(&w, 0, "source", c->source);
    fsmoe_yw_str(&w, 0, "device", c->device);
    if (c->device_memory_bytes > 0)
        fsmoe_yw_double(&w, 0, "device_memory_bytes", c->device_memory_bytes);
    if (c->compute_threads > 0)
        fsmoe_yw_long(&w, 0, "compute_threads", c->compute_threads);
    fsmoe_yw_long(&w, 0, "nodes", c->nodes);
    fsmoe_yw_long(&w, 0, "gpus_per_node", c->gpus_per_node);
    fsmoe_yw_double(&w, 0, "r2_threshold", c->r2_threshold);
    if (extra && extra->notes)
        fsmoe_yw_str(&w, 0, "notes", extra->notes);
    else if (c->notes[0])
        fsmoe_yw_str(&w, 0, "notes", c->notes);
    if (c->interference.present) {
        fsmoe_yw_block(&w, 0, "interference");
        fsmoe_yw_double(&w, 2, "comm_slowdown", c->interference.comm_slowdown);
        fsmoe_yw_double(&w, 2, "compute_slowdown", c->interference.compute_slowdown);
        if (c->interference.sync_s > 0.0)
            fsmoe_yw_double(&w, 2, "sync_latency_s", c->interference.sync_s);
        if (c->interference.sync_growth > 0.0)
            fsmoe_yw_double(&w, 2, "sync_growth", c->interference.sync_growth);
        if (c->interference.sync_growth_from_s > 0.0)
            fsmoe_yw_double(&w, 2, "sync_growth_from_s", c->interference.sync_growth_from_s);
        if (c->interference.measured[0])
            fsmoe_yw_str(&w, 2, "measured", c->interference.measured);
    }
    if (c->host.present) {
        fsmoe_yw_comment(&w, "ranks sharing one host's cores; ranks_at_once: how many computed at "
                             "once while gemm and copy were measured");
        fsmoe_yw_block(&w, 0, "host");
        fsmoe_yw_long(&w, 2, "ranks", c->host.ranks);
        fsmoe_yw_long(&w, 2, "cores", c->host.cores);
        fsmoe_yw_long(&w, 2, "ranks_at_once", c->host.ranks_at_once);
    }
    fsmoe_yw_block(&w, 0, "ops");
    int entries = 0;
    for (int op = 0; op < FSMOE_OP_COUNT; op++)
        for (int tier = 0; tier < FSMOE_TIER_COUNT; tier++) {
            const char *note = extra ? extra->comment[op][tier] : NULL;
            if (note)
                entry_comment(&w, af.f, note);
            if (!c->ops[op][tier].present)
                continue;
            /* every group size of (op, tier), narrowest first (cluster.h) */
            int n = c->n_narrower[op][tier];
            for (int i = 0; i <= n; i++) {
                const fsmoe_cost_entry *e = i < n ? &c->narrower[op][tier][i] : &c->ops[op][tier];
                if (e->derived[0])
                    continue;
                write_entry(&w, af.f, c, op, tier, e);
                entries++;
            }
        }
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
