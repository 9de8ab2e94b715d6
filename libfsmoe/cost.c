/* Implements: the α-β cost model of design.md §3 (FSMoE §4.1, Parm §IV-A, MoNTA's efficiency
 * curves) over a loaded cluster profile: line lookup with the documented derivations, and
 * piecewise-linear interpolation through measured points.
 *
 * Derivations (cost.h) never hide: each appends a sentence to the caller's note, which the
 * planner copies into the plan, so a reader of the plan sees which lines were not measured. */
#include "cost.h"

#include <stdio.h>
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
    fsmoe_line l = {0.0, 0.0, NULL};
    return l;
}

/* Appends each line of `text` to `note` unless that exact line is already there, so a note
 * gathered over many lookups lists every derivation once, one per line. */
static void note_lines_add(char *note, size_t note_len, const char *text)
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
    note_lines_add(note, note_len, line);
}

static const fsmoe_cost_entry *entry(const fsmoe_cluster *c, fsmoe_op op, fsmoe_tier tier)
{
    const fsmoe_cost_entry *e = &c->ops[op][tier];
    return e->present ? e : NULL;
}

/* Depth guards the recursion: world -> inter, allreduce -> rs + ag, saa -> a2a + ag. */
static int lookup(const fsmoe_cluster *c, fsmoe_op op, fsmoe_tier tier, fsmoe_line *out,
                  char *note, size_t note_len, int depth)
{
    const fsmoe_cost_entry *e = entry(c, op, tier);
    if (e) {
        out->alpha_s = e->alpha_s;
        out->beta_s = e->beta_s;
        out->entry = e;
        return 1;
    }
    if (depth > 3 || op == FSMOE_OP_GEMM || op == FSMOE_OP_COPY)
        return 0;
    if (op == FSMOE_OP_SAA) {
        /* No overlap credit: the two halves of SAA run back to back. */
        fsmoe_line a2a, ag;
        char sub[256] = "";
        if (lookup(c, FSMOE_OP_ALLTOALL, tier, &a2a, sub, sizeof sub, depth + 1) &&
            lookup(c, FSMOE_OP_ALLGATHER, FSMOE_TIER_INTRA, &ag, sub, sizeof sub, depth + 1)) {
            out->alpha_s = a2a.alpha_s + ag.alpha_s;
            out->beta_s = a2a.beta_s + ag.beta_s;
            out->entry = NULL;
            note_add(note, note_len,
                     "saa %s: not in the profile, derived as alltoall(%s) + allgather(intra) "
                     "run back to back (no overlap credit)",
                     fsmoe_tier_name(tier), fsmoe_tier_name(tier));
            if (sub[0])
                note_lines_add(note, note_len, sub);
            return 1;
        }
        return 0;
    }
    if (tier == FSMOE_TIER_WORLD) {
        char sub[256] = "";
        if (lookup(c, op, FSMOE_TIER_INTER, out, sub, sizeof sub, depth + 1)) {
            note_add(note, note_len,
                     "%s world: not in the profile, using the inter tier (the inter-node link "
                     "bounds a group spanning nodes)%s",
                     fsmoe_op_name(op), "");
            if (sub[0])
                note_lines_add(note, note_len, sub);
            return 1;
        }
    }
    if (op == FSMOE_OP_ALLREDUCE) {
        fsmoe_line rs, ag;
        char sub[256] = "";
        if (lookup(c, FSMOE_OP_REDUCESCATTER, tier, &rs, sub, sizeof sub, depth + 1) &&
            lookup(c, FSMOE_OP_ALLGATHER, tier, &ag, sub, sizeof sub, depth + 1)) {
            /* Ring AllReduce = ReduceScatter + AllGather on the same buffer bytes n. */
            out->alpha_s = rs.alpha_s + ag.alpha_s;
            out->beta_s = rs.beta_s + ag.beta_s;
            out->entry = NULL;
            note_add(note, note_len,
                     "allreduce %s: not in the profile, derived as reducescatter + allgather on "
                     "%s (ring AllReduce)",
                     fsmoe_tier_name(tier), fsmoe_tier_name(tier));
            if (sub[0])
                note_lines_add(note, note_len, sub);
            return 1;
        }
    }
    return 0;
}

fsmoe_status fsmoe_cost_line(const fsmoe_cluster *c, const char *cluster_path, fsmoe_op op,
                             fsmoe_tier tier, fsmoe_line *out, char *note, size_t note_len,
                             fsmoe_error *err)
{
    *out = fsmoe_line_zero();
    if ((unsigned)op >= FSMOE_OP_COUNT || (unsigned)tier >= FSMOE_TIER_COUNT)
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "fsmoe_cost_line: op %d tier %d out of range",
                          (int)op, (int)tier);
    char sub[512] = "";
    if (lookup(c, op, tier, out, sub, sizeof sub, 0)) {
        if (sub[0])
            note_lines_add(note, note_len, sub);
        return FSMOE_OK;
    }
    const char *tried = "";
    if (op == FSMOE_OP_ALLREDUCE)
        tried = "; also tried reducescatter + allgather on that tier";
    else if (op == FSMOE_OP_SAA)
        tried = "; also tried alltoall on that tier + allgather intra";
    /* at the profile's `ops` list when it was read from a file ("path:line:col: ops") */
    char where[700];
    snprintf(where, sizeof where, "%s", cluster_path ? cluster_path : c->name);
    if (c->at.ops.where[0])
        snprintf(where, sizeof where, "%s", c->at.ops.where);
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
