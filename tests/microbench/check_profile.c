/* Implements: a checker the script tests use on a profile fsmoe-bench wrote: it must load with
 * fsmoe_cluster_load (the planner's reader), describe the expected cluster, hold every
 * expected (op, tier) entry with ≥ 2 points (β ≥ 0 is the loader's own check; on small noisy
 * sizes a flat line, β bound at 0, is a legitimate fit), and optionally show two tiers
 * apart: `ratio=OP:SLOW/FAST:MIN` requires β(OP, SLOW) ≥ MIN·β(OP, FAST); `interference=yes`
 * requires the interference mapping with both factors in [1, 100] and the sync latency in
 * [0, 1) s (the loader checks that too) and a description of how they were measured,
 * `interference=no` its absence.
 *
 * usage: check_profile FILE NODES GPUS_PER_NODE [op:tier ...] [ratio=op:slow/fast:min]
 *                      [interference=yes|no]
 * Prints one line per failed expectation and exits 1; prints the entries and exits 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "parallel.h"

static int split_op_tier(const char *s, int *op, int *tier)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s", s);
    char *colon = strchr(buf, ':');
    if (!colon)
        return -1;
    *colon = '\0';
    *op = fsmoe_op_from_name(buf);
    *tier = fsmoe_tier_from_name(colon + 1);
    return *op < 0 || *tier < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: check_profile FILE NODES G [op:tier ...] [ratio=op:slow/fast:min] "
                        "[interference=yes|no]\n");
        return 2;
    }
    fsmoe_cluster c;
    fsmoe_error err = {0};
    if (fsmoe_cluster_load(argv[1], &c, &err)) {
        fprintf(stderr, "check_profile: %s\n", err.msg);
        return 1;
    }
    int bad = 0;
    if (c.nodes != atoi(argv[2]) || c.gpus_per_node != atoi(argv[3])) {
        fprintf(stderr, "check_profile: %d nodes x %d, expected %s x %s\n", c.nodes,
                c.gpus_per_node, argv[2], argv[3]);
        bad = 1;
    }
    for (int op = 0; op < FSMOE_OP_COUNT; op++)
        for (int t = 0; t < FSMOE_TIER_COUNT; t++) {
            const fsmoe_cost_entry *all[64];
            int n = fsmoe_cluster_entries(&c, (fsmoe_op)op, (fsmoe_tier)t, all, 64);
            for (int i = 0; i < n && i < 64; i++) { /* every group size and GEMM shape */
                const fsmoe_cost_entry *e = all[i];
                char shape[48] = "";
                if (e->shape_m)
                    snprintf(shape, sizeof shape, " shape %d:%d", e->shape_m, e->shape_h);
                printf("%-14s %-6s ranks %d%s alpha %.4g s beta %.4g r2 %.6f points %d%s\n",
                       fsmoe_op_name(op), fsmoe_tier_name(t), e->ranks, shape, e->alpha_s,
                       e->beta_s, e->r2, e->n_points, e->low_r2 ? " LOW-R2" : "");
            }
        }
    if (c.interference.present)
        printf("interference comm_slowdown %.4g compute_slowdown %.4g sync_latency_s %.4g "
               "measured \"%s\"\n",
               c.interference.comm_slowdown, c.interference.compute_slowdown,
               c.interference.sync_s, c.interference.measured);
    for (int i = 4; i < argc; i++) {
        int op, tier, fast;
        if (strncmp(argv[i], "interference=", 13) == 0) {
            int want = strcmp(argv[i] + 13, "yes") == 0;
            double cs = c.interference.comm_slowdown, xs = c.interference.compute_slowdown,
                   sync = c.interference.sync_s;
            if (!want && strcmp(argv[i] + 13, "no") != 0) {
                fprintf(stderr, "check_profile: bad %s (yes or no)\n", argv[i]);
                return 2;
            }
            if (want != c.interference.present) {
                fprintf(stderr, "check_profile: interference %s, expected %s\n",
                        c.interference.present ? "present" : "absent", want ? "present" : "absent");
                bad = 1;
            } else if (want && !(cs >= 1.0 && cs <= 100.0 && xs >= 1.0 && xs <= 100.0 &&
                                 sync >= 0.0 && sync < 1.0 && c.interference.measured[0])) {
                fprintf(stderr, "check_profile: interference comm_slowdown %g compute_slowdown "
                        "%g (expected both in [1, 100]) sync_latency_s %g (expected in [0, 1)) "
                        "measured '%s'\n", cs, xs, sync, c.interference.measured);
                bad = 1;
            }
            continue;
        }
        if (strncmp(argv[i], "ratio=", 6) == 0) {
            char opname[32], slow[16], fastname[16];
            double min = 0;
            if (sscanf(argv[i] + 6, "%31[^:]:%15[^/]/%15[^:]:%lf", opname, slow, fastname, &min) != 4 ||
                (op = fsmoe_op_from_name(opname)) < 0 || (tier = fsmoe_tier_from_name(slow)) < 0 ||
                (fast = fsmoe_tier_from_name(fastname)) < 0) {
                fprintf(stderr, "check_profile: bad %s\n", argv[i]);
                return 2;
            }
            const fsmoe_cost_entry *s = &c.ops[op][tier], *f = &c.ops[op][fast];
            if (!s->present || !f->present || !(s->beta_s >= min * f->beta_s)) {
                fprintf(stderr, "check_profile: %s: beta %s %.4g vs %s %.4g (ratio %.2f < %g)\n",
                        opname, slow, s->beta_s, fastname, f->beta_s,
                        f->beta_s > 0 ? s->beta_s / f->beta_s : 0.0, min);
                bad = 1;
            } else {
                printf("ratio %s %s/%s = %.1f (>= %g)\n", opname, slow, fastname,
                       s->beta_s / f->beta_s, min);
            }
            continue;
        }
        if (split_op_tier(argv[i], &op, &tier)) {
            fprintf(stderr, "check_profile: bad op:tier %s\n", argv[i]);
            return 2;
        }
        const fsmoe_cost_entry *e = &c.ops[op][tier];
        if (!e->present || e->n_points < 2) {
            fprintf(stderr, "check_profile: %s missing or without points\n", argv[i]);
            bad = 1;
        }
    }
    fsmoe_cluster_free(&c);
    return bad;
}
