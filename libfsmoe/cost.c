/* Implements: the α-β cost model of design.md §3 (FSMoE §4.1, Parm §IV-A, MoNTA's efficiency
 * curves) over a loaded cluster profile: line lookup with the documented derivations, and
 * piecewise-linear interpolation through measured points.
 *
 * Derivations (cost.h) never hide: each appends a sentence to the caller's note, which the
 * planner copies into the plan, so a reader of the plan sees which lines were not measured. */
#include "cost.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const fsmoe_comm_need fsmoe_comm_needs[FSMOE_NEED_COUNT] = {
    [FSMOE_NEED_A2A_EP] = {FSMOE_OP_ALLTOALL, FSMOE_GROUP_EP},
    [FSMOE_NEED_A2A_EP_ESP] = {FSMOE_OP_ALLTOALL, FSMOE_GROUP_EP_ESP},
    [FSMOE_NEED_AG_ESP] = {FSMOE_OP_ALLGATHER, FSMOE_GROUP_ESP},
    [FSMOE_NEED_AG_MP] = {FSMOE_OP_ALLGATHER, FSMOE_GROUP_MP},
    [FSMOE_NEED_RS_ESP] = {FSMOE_OP_REDUCESCATTER, FSMOE_GROUP_ESP},
    [FSMOE_NEED_AR_ESP] = {FSMOE_OP_ALLREDUCE, FSMOE_GROUP_ESP},
    [FSMOE_NEED_AR_MP] = {FSMOE_OP_ALLREDUCE, FSMOE_GROUP_MP},
    [FSMOE_NEED_AR_DP] = {FSMOE_OP_ALLREDUCE, FSMOE_GROUP_DP},
};

fsmoe_line fsmoe_line_zero(void)
{
    fsmoe_line l = {0.0, 0.0, NULL, {NULL, NULL}};
    return l;
}

void fsmoe_note_add(char *note, size_t note_len, const char *text)
{
    if (!note || note_len == 0)
        return;
    while (*text) {
        const char *nl = strchr(text, '\n');
        size_t len = nl ? (size_t)(nl - text) : strlen(text);
        int seen = 0;
        for (const char *l = note; *l && !seen;) {
            const char *lend = strchr(l, '\n');
            size_t ll = lend ? (size_t)(lend - l) : strlen(l);
            seen = ll == len && strncmp(l, text, len) == 0;
            l = lend ? lend + 1 : l + ll;
        }
        size_t used = strnlen(note, note_len);
        if (!seen && len > 0 && used + len + 2 <= note_len) {
            if (used)
                note[used++] = '\n';
            memcpy(note + used, text, len);
            note[used + len] = '\0';
        }
        text += nl ? len + 1 : len;
    }
}

static void note_add(char *note, size_t note_len, const char *fmt, const char *a, const char *b)
{
    char line[512];
    snprintf(line, sizeof line, fmt, a, b);
    fsmoe_note_add(note, note_len, line);
}

double fsmoe_busbw_factor(fsmoe_op op, int ranks)
{
    if (op == FSMOE_OP_GEMM || op == FSMOE_OP_COPY || ranks < 1)
        return 1.0;
    double s = (double)(ranks - 1) / ranks;
    return op == FSMOE_OP_ALLREDUCE ? 2.0 * s : s;
}

fsmoe_line fsmoe_line_at_ranks(fsmoe_op op, const fsmoe_cost_entry *const *entries, int n,
                               int ranks, char *how, size_t how_len)
{
    fsmoe_line l = fsmoe_line_zero();
    if (how && how_len)
        how[0] = '\0';
    if (n <= 0)
        return l;
    for (int i = 0; i < n; i++)
        if (entries[i]->ranks == ranks || (ranks <= 0 && i == n - 1)) {
            l.alpha_s = entries[i]->alpha_s;
            l.beta_s = entries[i]->beta_s;
            l.entry = l.from[0] = entries[i];
            return l;
        }
    /* The entries that can be scaled: groups of 2 or more ranks (s(1) = 0); ascending, so
     * they follow a 1-rank entry if there is one. */
    int first = entries[0]->ranks < 2 ? 1 : 0;
    const fsmoe_cost_entry *const *e = entries + first;
    int k = n - first;
    if (k == 0 || op == FSMOE_OP_GEMM || op == FSMOE_OP_COPY || ranks < 2) {
        /* nothing to scale from (or by): the widest entry as it is */
        const fsmoe_cost_entry *w = entries[n - 1];
        l.alpha_s = w->alpha_s;
        l.beta_s = w->beta_s;
        l.from[0] = w;
        if (how)
            snprintf(how, how_len, "measured at %d rank%s, used unscaled for %d", w->ranks,
                     w->ranks == 1 ? "" : "s", ranks);
        return l;
    }
    /* lo: the widest measured below ranks, hi: the narrowest above (-1: none) */
    int lo = -1, hi = -1;
    for (int i = 0; i < k; i++) {
        if (e[i]->ranks < ranks)
            lo = i;
        else if (hi < 0)
            hi = i;
    }
    const double s = fsmoe_busbw_factor(op, ranks);
    /* β/s(p) = 1/busbw: seconds per byte on the bus, constant in p for one measured size */
    double u_lo = lo >= 0 ? e[lo]->beta_s / fsmoe_busbw_factor(op, e[lo]->ranks) : 0.0;
    double u_hi = hi >= 0 ? e[hi]->beta_s / fsmoe_busbw_factor(op, e[hi]->ranks) : 0.0;
    if (lo >= 0 && hi >= 0) {
        double w = (double)(ranks - e[lo]->ranks) / (e[hi]->ranks - e[lo]->ranks);
        l.beta_s = s * ((1.0 - w) * u_lo + w * u_hi);
        l.alpha_s = (1.0 - w) * e[lo]->alpha_s + w * e[hi]->alpha_s;
        l.from[0] = e[lo], l.from[1] = e[hi];
        if (how)
            snprintf(how, how_len,
                     "measured at %d and %d ranks, interpolated to %d (bus bandwidth and alpha "
                     "linear in ranks between them)",
                     e[lo]->ranks, e[hi]->ranks, ranks);
        return l;
    }
    /* outside the measured sizes: busbw of the nearest; α along the line through the two
     * nearest (never falling with more ranks, never below 0), constant with one size */
    int near = lo >= 0 ? lo : hi;
    int other = lo >= 0 ? lo - 1 : hi + 1;
    l.beta_s = s * (lo >= 0 ? u_lo : u_hi);
    l.alpha_s = e[near]->alpha_s;
    double factor = s / fsmoe_busbw_factor(op, e[near]->ranks);
    l.from[0] = e[near];
    if (other < 0 || other >= k) {
        if (how)
            snprintf(how, how_len,
                     "measured at %d ranks, scaled to %d by bus bandwidth (beta x %.4g = "
                     "s(%d)/s(%d), s(n) = %s(n-1)/n; alpha as measured)",
                     e[near]->ranks, ranks, factor, ranks, e[near]->ranks,
                     op == FSMOE_OP_ALLREDUCE ? "2" : "");
        return l;
    }
    double slope = (e[near]->alpha_s - e[other]->alpha_s) / (e[near]->ranks - e[other]->ranks);
    if (slope < 0.0)
        slope = 0.0;
    l.alpha_s = e[near]->alpha_s + slope * (ranks - e[near]->ranks);
    l.from[1] = e[other];
    if (l.alpha_s < 0.0)
        l.alpha_s = 0.0;
    if (how)
        snprintf(how, how_len,
                 "measured at %d and %d ranks, extrapolated to %d (bus bandwidth of %d ranks: "
                 "beta x %.4g; alpha linear in ranks through both, %.3g s)",
                 e[other < near ? other : near]->ranks, e[other < near ? near : other]->ranks,
                 ranks, e[near]->ranks, factor, l.alpha_s);
    return l;
}

/* One note per measured entry behind l whose fit is below the profile's r2 threshold: the
 * times the plan puts on it are as uncertain as the fit. */
static void low_r2_note(const fsmoe_cluster *c, fsmoe_op op, fsmoe_tier tier, const fsmoe_line *l,
                        char *note, size_t note_len)
{
    for (int i = 0; i < 2; i++) {
        const fsmoe_cost_entry *e = l->from[i];
        if (!e || !e->low_r2)
            continue;
        char line[400], shape[48] = "";
        if (op == FSMOE_OP_GEMM && e->shape_m > 0)
            snprintf(shape, sizeof shape, " shape %d:%d", e->shape_m, e->shape_h);
        snprintf(line, sizeof line,
                 FSMOE_LOW_R2_NOTE "%s %s%s at %d rank%s (profile line %d) fits with r2 %.4f < %.4g: "
                 "times on it are uncertain",
                 fsmoe_op_name(op), fsmoe_tier_name(tier), shape, e->ranks,
                 e->ranks == 1 ? "" : "s", e->line, e->r2, c->r2_threshold);
        fsmoe_note_add(note, note_len, line);
    }
}

/* The line of (op, tier) at `ranks` (<= 0: the widest measured, as it is); 0 when absent. */
static int entry_line(const fsmoe_cluster *c, fsmoe_op op, fsmoe_tier tier, int ranks,
                      fsmoe_line *out, char *note, size_t note_len)
{
    int n = fsmoe_cluster_entries(c, op, tier, NULL, 0);
    if (n == 0)
        return 0;
    const fsmoe_cost_entry **all = malloc((size_t)n * sizeof *all);
    if (!all) { /* without memory for the list, the widest entry as it is */
        const fsmoe_cost_entry *w = &c->ops[op][tier];
        *out = fsmoe_line_zero();
        out->alpha_s = w->alpha_s;
        out->beta_s = w->beta_s;
        out->entry = out->from[0] = w;
        low_r2_note(c, op, tier, out, note, note_len);
        return 1;
    }
    fsmoe_cluster_entries(c, op, tier, all, n);
    char how[320];
    *out = fsmoe_line_at_ranks(op, all, n, ranks, how, sizeof how);
    free(all);
    low_r2_note(c, op, tier, out, note, note_len);
    if (how[0]) {
        char line[400];
        snprintf(line, sizeof line, "%s %s: %s", fsmoe_op_name(op), fsmoe_tier_name(tier), how);
        fsmoe_note_add(note, note_len, line);
    }
    return 1;
}

/* Depth guards the recursion: world -> inter, allreduce -> rs + ag, saa -> a2a + ag. `ranks`
 * is the group size planned for (<= 0: the widest measured, as it is). Sub-notes are gathered
 * apart and added after the derivation's own line, so a reader sees the cause first. */
static int lookup(const fsmoe_cluster *c, fsmoe_op op, fsmoe_tier tier, int ranks,
                  fsmoe_line *out, char *note, size_t note_len, int depth)
{
    char sub[1024] = "";
    if (entry_line(c, op, tier, ranks, out, note, note_len))
        return 1;
    if (depth > 3 || op == FSMOE_OP_GEMM || op == FSMOE_OP_COPY)
        return 0;
    if (op == FSMOE_OP_SAA) {
        /* No overlap credit: the two halves of SAA run back to back. The MP AllGather's group
         * size is not known here: its widest measured line stands in. */
        fsmoe_line a2a, ag;
        if (lookup(c, FSMOE_OP_ALLTOALL, tier, ranks, &a2a, sub, sizeof sub, depth + 1) &&
            lookup(c, FSMOE_OP_ALLGATHER, FSMOE_TIER_INTRA, 0, &ag, sub, sizeof sub,
                   depth + 1)) {
            *out = fsmoe_line_zero(); /* derived: no measured entry of its own */
            out->alpha_s = a2a.alpha_s + ag.alpha_s;
            out->beta_s = a2a.beta_s + ag.beta_s;
            note_add(note, note_len,
                     "saa %s: not in the profile, derived as alltoall(%s) + allgather(intra) "
                     "run back to back (no overlap credit)",
                     fsmoe_tier_name(tier), fsmoe_tier_name(tier));
            if (sub[0])
                fsmoe_note_add(note, note_len, sub);
            return 1;
        }
        return 0;
    }
    if (tier == FSMOE_TIER_WORLD) {
        /* A group over nodes with several ranks on each: the inter-node tier at the number of
         * nodes it spans, ranks/G rounded up (every node full in the layouts of design.md §2). */
        int G = c->gpus_per_node > 0 ? c->gpus_per_node : 1;
        int nodes = ranks <= 0 ? 0 : (ranks + G - 1) / G < 2 ? 2 : (ranks + G - 1) / G;
        sub[0] = '\0';
        if (lookup(c, op, FSMOE_TIER_INTER, nodes, out, sub, sizeof sub, depth + 1)) {
            note_add(note, note_len,
                     "%s world: not in the profile, using the inter tier (the inter-node link "
                     "bounds a group spanning nodes)%s",
                     fsmoe_op_name(op), "");
            if (sub[0])
                fsmoe_note_add(note, note_len, sub);
            return 1;
        }
    }
    if (op == FSMOE_OP_ALLREDUCE) {
        fsmoe_line rs, ag;
        sub[0] = '\0';
        if (lookup(c, FSMOE_OP_REDUCESCATTER, tier, ranks, &rs, sub, sizeof sub, depth + 1) &&
            lookup(c, FSMOE_OP_ALLGATHER, tier, ranks, &ag, sub, sizeof sub, depth + 1)) {
            /* Ring AllReduce = ReduceScatter + AllGather on the same buffer bytes n. */
            *out = fsmoe_line_zero(); /* derived: no measured entry of its own */
            out->alpha_s = rs.alpha_s + ag.alpha_s;
            out->beta_s = rs.beta_s + ag.beta_s;
            note_add(note, note_len,
                     "allreduce %s: not in the profile, derived as reducescatter + allgather on "
                     "%s (ring AllReduce)",
                     fsmoe_tier_name(tier), fsmoe_tier_name(tier));
            if (sub[0])
                fsmoe_note_add(note, note_len, sub);
            return 1;
        }
    }
    return 0;
}

/* "path:line:col: ops" when the profile was read from a file, else its path or name. */
static void profile_where(const fsmoe_cluster *c, const char *cluster_path, char *where,
                          size_t len)
{
    snprintf(where, len, "%s", cluster_path ? cluster_path : c->name);
    if (c->at.ops.where[0])
        snprintf(where, len, "%s", c->at.ops.where);
}

/* The hierarchical AllToAll over nodes × locals ranks (cost.h): the measured world entry at
 * that size, else alltoall(intra, locals) + alltoall(inter, nodes) + 3 × copy at the same n.
 * 0 when neither; *missing then names the first part the derivation lacks. */
static int lookup_2dh(const fsmoe_cluster *c, int nodes, int locals, fsmoe_line *out, char *note,
                      size_t note_len, const char **missing)
{
    char sub[1024] = "";
    *missing = NULL;
    if (entry_line(c, FSMOE_OP_ALLTOALL_2DH, FSMOE_TIER_WORLD, nodes * locals, out, note,
                   note_len))
        return 1;
    fsmoe_line intra, inter, copy;
    if (!lookup(c, FSMOE_OP_ALLTOALL, FSMOE_TIER_INTRA, locals, &intra, sub, sizeof sub, 1)) {
        *missing = "alltoall intra";
        return 0;
    }
    if (!lookup(c, FSMOE_OP_ALLTOALL, FSMOE_TIER_INTER, nodes, &inter, sub, sizeof sub, 1)) {
        *missing = "alltoall inter";
        return 0;
    }
    if (!entry_line(c, FSMOE_OP_COPY, FSMOE_TIER_LOCAL, 0, &copy, sub, sizeof sub)) {
        *missing = "copy local";
        return 0;
    }
    *out = fsmoe_line_zero(); /* derived: no measured entry of its own */
    out->alpha_s = intra.alpha_s + inter.alpha_s + 3.0 * copy.alpha_s;
    out->beta_s = intra.beta_s + inter.beta_s + 3.0 * copy.beta_s;
    char line[400];
    snprintf(line, sizeof line,
             "alltoall_2dh world (%d nodes x %d): not in the profile, derived as alltoall(intra, "
             "%d ranks) + alltoall(inter, %d ranks) + 3 x copy at the same bytes (hierarchical "
             "AllToAll: two phases and three re-layouts of one rank's buffer, no overlap)",
             nodes, locals, locals, nodes);
    fsmoe_note_add(note, note_len, line);
    if (sub[0])
        fsmoe_note_add(note, note_len, sub);
    return 1;
}

fsmoe_status fsmoe_cost_line_2dh(const fsmoe_cluster *c, const char *cluster_path, int nodes,
                                 int locals, fsmoe_line *out, char *note, size_t note_len,
                                 fsmoe_error *err)
{
    *out = fsmoe_line_zero();
    if (nodes < 2 || locals < 2)
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL,
                          "fsmoe_cost_line_2dh: a group of %d node%s x %d member%s is not "
                          "hierarchical (2DH needs >= 2 nodes with >= 2 members on each; "
                          "otherwise it is the flat alltoall)",
                          nodes, nodes == 1 ? "" : "s", locals, locals == 1 ? "" : "s");
    char sub[1024] = "";
    const char *missing = NULL;
    if (lookup_2dh(c, nodes, locals, out, sub, sizeof sub, &missing)) {
        if (sub[0])
            fsmoe_note_add(note, note_len, sub);
        return FSMOE_OK;
    }
    char where[700];
    profile_where(c, cluster_path, where, sizeof where);
    return fsmoe_fail(err, FSMOE_ERR_VALUE,
                      "%s: no alltoall_2dh entry for tier world, and no %s entry to derive it "
                      "from (expected an `ops` entry with op: alltoall_2dh, tier: world, or the "
                      "entries alltoall intra, alltoall inter and copy local: 2DH over %d nodes "
                      "x %d = alltoall(intra, %d) + alltoall(inter, %d) + 3 x copy)",
                      where, missing, nodes, locals, locals, nodes);
}

fsmoe_status fsmoe_cost_line(const fsmoe_cluster *c, const char *cluster_path, fsmoe_op op,
                             fsmoe_tier tier, fsmoe_line *out, char *note, size_t note_len,
                             fsmoe_error *err)
{
    return fsmoe_cost_line_at(c, cluster_path, op, tier, 0, out, note, note_len, err);
}

fsmoe_status fsmoe_cost_line_at(const fsmoe_cluster *c, const char *cluster_path, fsmoe_op op,
                                fsmoe_tier tier, int ranks, fsmoe_line *out, char *note,
                                size_t note_len, fsmoe_error *err)
{
    *out = fsmoe_line_zero();
    if ((unsigned)op >= FSMOE_OP_COUNT || (unsigned)tier >= FSMOE_TIER_COUNT)
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "fsmoe_cost_line: op %d tier %d out of range",
                          (int)op, (int)tier);
    if (op == FSMOE_OP_ALLTOALL_2DH) {
        /* a world-tier group of full nodes (the shape of fsmoe-bench's world measurement);
         * a group with fewer members per node has its shape: fsmoe_cost_line_2dh */
        int G = c->gpus_per_node > 0 ? c->gpus_per_node : 1;
        if (tier != FSMOE_TIER_WORLD || (ranks > 0 && ranks % G != 0))
            return fsmoe_fail(err, FSMOE_ERR_INTERNAL,
                              "fsmoe_cost_line_at: alltoall_2dh on tier %s at %d ranks of %d per "
                              "node is not a hierarchical group of full nodes (use alltoall, "
                              "or fsmoe_cost_line_2dh with the group's shape)",
                              fsmoe_tier_name(tier), ranks, G);
        if (ranks <= 0) {
            const fsmoe_cost_entry *w = &c->ops[FSMOE_OP_ALLTOALL_2DH][FSMOE_TIER_WORLD];
            ranks = w->present ? w->ranks : c->nodes * G;
        }
        return fsmoe_cost_line_2dh(c, cluster_path, ranks / G, G, out, note, note_len, err);
    }
    char sub[1024] = "";
    if (lookup(c, op, tier, ranks, out, sub, sizeof sub, 0)) {
        if (sub[0])
            fsmoe_note_add(note, note_len, sub);
        return FSMOE_OK;
    }
    const char *tried = "";
    if (op == FSMOE_OP_ALLREDUCE)
        tried = "; also tried reducescatter + allgather on that tier";
    else if (op == FSMOE_OP_SAA)
        tried = "; also tried alltoall on that tier + allgather intra";
    /* at the profile's `ops` list when it was read from a file ("path:line:col: ops") */
    char where[700];
    profile_where(c, cluster_path, where, sizeof where);
    return fsmoe_fail(err, FSMOE_ERR_VALUE,
                      "%s: no %s entry for tier %s (expected an `ops` entry with op: %s, tier: %s%s%s)",
                      where, fsmoe_op_name(op),
                      fsmoe_tier_name(tier), fsmoe_op_name(op), fsmoe_tier_name(tier),
                      tier == FSMOE_TIER_WORLD ? "; the inter tier was tried too" : "", tried);
}

double fsmoe_entry_time_interp(const fsmoe_cost_entry *e, double n)
{
    if (n <= 0.0)
        return 0.0;
    const fsmoe_point *p = e->points;
    int k = e->n_points;
    if (k < 2 || n < p[0].n || n > p[k - 1].n)
        return e->alpha_s + e->beta_s * n;
    for (int i = 1; i < k; i++) {
        if (n <= p[i].n) {
            double w = (n - p[i - 1].n) / (p[i].n - p[i - 1].n);
            return p[i - 1].seconds + w * (p[i].seconds - p[i - 1].seconds);
        }
    }
    return p[k - 1].seconds;
}

fsmoe_status fsmoe_cost_line_gemm(const fsmoe_cluster *c, const char *cluster_path, double M,
                                  double H, fsmoe_line *out, char *note, size_t note_len,
                                  fsmoe_error *err)
{
    enum { MAX_SHAPES = 64 };
    const fsmoe_cost_entry *e[MAX_SHAPES];
    int n = fsmoe_cluster_entries(c, FSMOE_OP_GEMM, FSMOE_TIER_LOCAL, e, MAX_SHAPES);
    if (n == 0) /* absent: the common lookup says so */
        return fsmoe_cost_line(c, cluster_path, FSMOE_OP_GEMM, FSMOE_TIER_LOCAL, out, note,
                               note_len, err);
    if (n > MAX_SHAPES)
        n = MAX_SHAPES;
    int known = M >= 1.0 && H >= 1.0, pick = -1;
    for (int i = 0; i < n && pick < 0; i++) /* the shape itself */
        if (known && e[i]->shape_m == M && e[i]->shape_h == H)
            pick = i;
    for (int i = 0; i < n && pick < 0; i++) /* a line for every shape */
        if (e[i]->shape_m == 0)
            pick = i;
    char line[320];
    line[0] = '\0';
    if (pick < 0 && known) { /* the nearest measured shape, by the ratio of each dimension */
        double best = 0.0;
        for (int i = 0; i < n; i++) {
            double d = fabs(log(M / e[i]->shape_m)) + fabs(log(H / e[i]->shape_h));
            if (pick < 0 || d < best)
                pick = i, best = d;
        }
        snprintf(line, sizeof line,
                 "gemm local: measured at shape %d:%d, used for %.0f:%.0f (the nearest of %d "
                 "measured shape%s)",
                 e[pick]->shape_m, e[pick]->shape_h, M, H, n, n == 1 ? "" : "s");
    } else if (pick < 0) { /* no shape asked for: the last in order, as fsmoe_cost_line */
        pick = n - 1;
        snprintf(line, sizeof line, "gemm local: no shape given, using the line measured at "
                 "shape %d:%d", e[pick]->shape_m, e[pick]->shape_h);
    }
    *out = fsmoe_line_zero();
    out->alpha_s = e[pick]->alpha_s;
    out->beta_s = e[pick]->beta_s;
    out->entry = out->from[0] = e[pick];
    if (line[0])
        fsmoe_note_add(note, note_len, line);
    low_r2_note(c, FSMOE_OP_GEMM, FSMOE_TIER_LOCAL, out, note, note_len);
    return FSMOE_OK;
}
