/* Implements: the cluster profile schema (clusters/<name>.yaml, design.md §3: α-β lines per
 * operation and tier, r², optional measured points as in MoNTA's efficiency curves) and its
 * validating loader.
 *
 * Relies on yaml_read.h for messages. Every entry must carry its r²: a line without a quality
 * figure cannot be trusted by the planner, and entries not measured must say in `derived:`
 * how they were obtained. GEMM lines are per multiply-accumulate (beta_s_per_mac), all other
 * lines per byte (beta_s_per_byte); the wrong key for the op is an error, not a silent default. */
#include "cluster.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "yaml_read.h"

const fsmoe_name fsmoe_op_names[] = {
    {"alltoall", FSMOE_OP_ALLTOALL},   {"alltoall_2dh", FSMOE_OP_ALLTOALL_2DH},
    {"allgather", FSMOE_OP_ALLGATHER}, {"reducescatter", FSMOE_OP_REDUCESCATTER},
    {"allreduce", FSMOE_OP_ALLREDUCE}, {"saa", FSMOE_OP_SAA},
    {"gemm", FSMOE_OP_GEMM},           {"copy", FSMOE_OP_COPY},
    {NULL, 0}};

static const fsmoe_yaml_enum tier_table[] = {{"intra", FSMOE_TIER_INTRA},
                                             {"inter", FSMOE_TIER_INTER},
                                             {"world", FSMOE_TIER_WORLD},
                                             {"local", FSMOE_TIER_LOCAL},
                                             {NULL, 0}};

static const char *const top_keys[] = {"fsmoe_cluster", "name",         "source", "device",
                                       "device_memory_bytes", "compute_threads",
                                       "nodes",         "gpus_per_node", "r2_threshold",
                                       "notes",         "ops",          "interference",
                                       "host",          NULL};
static const char *const interference_keys[] = {"comm_slowdown", "compute_slowdown",
                                                "sync_latency_s", "sync_growth",
                                                "sync_growth_from_s", "measured",
                                                NULL};
static const char *const host_keys[] = {"ranks", "cores", "ranks_at_once", NULL};
static const char *const entry_keys[] = {"op",    "tier",    "ranks",  "alpha_s",
                                         "beta_s_per_byte", "beta_s_per_mac", "r2",
                                         "derived", "points", "shape", NULL};

const char *fsmoe_op_name(fsmoe_op op)
{
    return fsmoe_name_of(fsmoe_op_names, (int)op);
}

int fsmoe_op_from_name(const char *s)
{
    int v = -1;
    return fsmoe_name_lookup(fsmoe_op_names, s, &v) ? v : -1;
}

void fsmoe_cluster_free(fsmoe_cluster *c)
{
    if (!c)
        return;
    for (int o = 0; o < FSMOE_OP_COUNT; o++)
        for (int t = 0; t < FSMOE_TIER_COUNT; t++) {
            free(c->ops[o][t].points);
            c->ops[o][t].points = NULL;
            c->ops[o][t].n_points = 0;
            for (int i = 0; i < c->n_narrower[o][t]; i++)
                free(c->narrower[o][t][i].points);
            free(c->narrower[o][t]);
            c->narrower[o][t] = NULL;
            c->n_narrower[o][t] = 0;
        }
}

int fsmoe_cluster_entries(const fsmoe_cluster *c, fsmoe_op op, fsmoe_tier tier,
                          const fsmoe_cost_entry **out, int max)
{
    if ((unsigned)op >= FSMOE_OP_COUNT || (unsigned)tier >= FSMOE_TIER_COUNT ||
        !c->ops[op][tier].present)
        return 0;
    int n = c->n_narrower[op][tier];
    for (int i = 0; i < n && i < max; i++)
        out[i] = &c->narrower[op][tier][i];
    if (n < max)
        out[n] = &c->ops[op][tier];
    return n + 1;
}

int fsmoe_cost_entry_order(const fsmoe_cost_entry *a, const fsmoe_cost_entry *b)
{
    if (a->ranks != b->ranks)
        return a->ranks < b->ranks ? -1 : 1;
    if (a->shape_m != b->shape_m)
        return a->shape_m < b->shape_m ? -1 : 1;
    return (a->shape_h > b->shape_h) - (a->shape_h < b->shape_h);
}

/* The entry of (op, tier) with e's ranks and shape, or NULL. */
static const fsmoe_cost_entry *entry_at(const fsmoe_cluster *c, int op, int tier,
                                        const fsmoe_cost_entry *e)
{
    if (!c->ops[op][tier].present)
        return NULL;
    if (fsmoe_cost_entry_order(&c->ops[op][tier], e) == 0)
        return &c->ops[op][tier];
    for (int i = 0; i < c->n_narrower[op][tier]; i++)
        if (fsmoe_cost_entry_order(&c->narrower[op][tier][i], e) == 0)
            return &c->narrower[op][tier][i];
    return NULL;
}

/* " and shape M:H" for a gemm entry with a shape, else "". */
static const char *shape_text(const fsmoe_cost_entry *e, char *buf, size_t len)
{
    if (!e->shape_m)
        return "";
    snprintf(buf, len, " and shape %d:%d", e->shape_m, e->shape_h);
    return buf;
}

fsmoe_status fsmoe_cluster_add(fsmoe_cluster *c, fsmoe_op op, fsmoe_tier tier,
                               const fsmoe_cost_entry *e, fsmoe_error *err)
{
    if ((unsigned)op >= FSMOE_OP_COUNT || (unsigned)tier >= FSMOE_TIER_COUNT)
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "fsmoe_cluster_add: op %d tier %d out of range",
                          (int)op, (int)tier);
    const fsmoe_cost_entry *dup = entry_at(c, op, tier, e);
    char sh[48];
    if (dup)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "second entry for %s on tier %s at %d ranks%s (first at line %d)",
                          fsmoe_op_name(op), fsmoe_tier_name(tier), e->ranks,
                          shape_text(e, sh, sizeof sh), dup->line);
    fsmoe_cost_entry *widest = &c->ops[op][tier];
    if (!widest->present) {
        *widest = *e;
        widest->present = 1;
        return FSMOE_OK;
    }
    int n = c->n_narrower[op][tier];
    fsmoe_cost_entry *v = realloc(c->narrower[op][tier], (size_t)(n + 1) * sizeof *v);
    if (!v)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for %d entries of %s on tier %s",
                          n + 1, fsmoe_op_name(op), fsmoe_tier_name(tier));
    c->narrower[op][tier] = v;
    /* The later in order (the wider group; for gemm the larger shape) stays in
     * ops[op][tier]; the other is inserted in order. */
    fsmoe_cost_entry in = *e;
    in.present = 1;
    if (fsmoe_cost_entry_order(&in, widest) > 0) {
        fsmoe_cost_entry t = *widest;
        *widest = in;
        in = t;
    }
    int at = n;
    while (at > 0 && fsmoe_cost_entry_order(&v[at - 1], &in) > 0) {
        v[at] = v[at - 1];
        at--;
    }
    v[at] = in;
    c->n_narrower[op][tier] = n + 1;
    return FSMOE_OK;
}

static int op_is_local(int op)
{
    return op == FSMOE_OP_GEMM || op == FSMOE_OP_COPY;
}

static fsmoe_status load_points(const fsmoe_ynode *seq, fsmoe_cost_entry *e, fsmoe_error *err)
{
    int n = fsmoe_yaml_seq_len(seq);
    if (n > FSMOE_LIMIT_POINTS)
        return fsmoe_yaml_fail(seq, err, FSMOE_ERR_VALUE, "%d points (expected at most %ld)", n,
                               FSMOE_LIMIT_POINTS);
    if (n < 2)
        return fsmoe_yaml_fail(seq, err, FSMOE_ERR_VALUE,
                               "%d point%s (expected at least 2 [bytes, seconds] pairs, or no "
                               "`points` key)",
                               n, n == 1 ? "" : "s");
    e->points = calloc((size_t)n, sizeof *e->points);
    if (!e->points)
        return fsmoe_yaml_fail(seq, err, FSMOE_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        fsmoe_ynode item, x;
        fsmoe_status st;
        if ((st = fsmoe_yaml_seq_item(seq, i, &item, err)))
            return st;
        if (!fsmoe_yaml_is_sequence(&item) || fsmoe_yaml_seq_len(&item) != 2)
            return fsmoe_yaml_fail(&item, err, FSMOE_ERR_SCHEMA,
                                   "expected a pair [bytes, seconds]");
        if ((st = fsmoe_yaml_seq_item(&item, 0, &x, err)) ||
            (st = fsmoe_yaml_node_double(&x, 0.0, FSMOE_LIMIT_POINT_N, &e->points[i].n, err)) ||
            (st = fsmoe_yaml_seq_item(&item, 1, &x, err)) ||
            (st = fsmoe_yaml_node_double(&x, 0.0, FSMOE_LIMIT_POINT_S, &e->points[i].seconds,
                                         err)))
            return st;
        if (i > 0 && !(e->points[i].n > e->points[i - 1].n))
            return fsmoe_yaml_fail(&item, err, FSMOE_ERR_VALUE,
                                   "size %g after %g: points are not sorted (expected strictly "
                                   "ascending sizes)",
                                   e->points[i].n, e->points[i - 1].n);
        e->n_points = i + 1;
    }
    return FSMOE_OK;
}

static fsmoe_status load_entry(const fsmoe_ynode *en, fsmoe_cluster *c, fsmoe_error *err)
{
    fsmoe_status st;
    int op, tier;
    fsmoe_ynode tn, rn;
    if ((st = fsmoe_yaml_node_expect_mapping(en, err)) ||
        (st = fsmoe_yaml_check_keys(en, entry_keys, err)) ||
        (st = fsmoe_yaml_enum_get(en, "op", FSMOE_REQUIRED, fsmoe_op_names, &op, err)) ||
        (st = fsmoe_yaml_get(en, "tier", FSMOE_REQUIRED, &tn, err)) ||
        (st = fsmoe_yaml_node_enum(&tn, tier_table, &tier, err)))
        return st;
    if (op_is_local(op) != (tier == FSMOE_TIER_LOCAL))
        return fsmoe_yaml_fail(&tn, err, FSMOE_ERR_VALUE,
                               op_is_local(op)
                                   ? "tier %s is not valid for %s (expected local: it runs on one "
                                     "device)"
                                   : "tier %s is not valid for %s (expected intra, inter or "
                                     "world: a collective spans several devices)",
                               fsmoe_tier_name((fsmoe_tier)tier), fsmoe_op_name((fsmoe_op)op));
    fsmoe_cost_entry entry, *e = &entry;
    memset(e, 0, sizeof *e);
    e->line = en->line;
    e->ranks = 1;
    int world = c->nodes * c->gpus_per_node;
    if (op_is_local(op)) {
        if ((st = fsmoe_yaml_int(en, "ranks", FSMOE_OPTIONAL, 1, 1, &e->ranks, err)))
            return st;
    } else {
        if ((st = fsmoe_yaml_get(en, "ranks", FSMOE_REQUIRED, &rn, err)) ||
            (st = fsmoe_yaml_int(en, "ranks", FSMOE_REQUIRED, 1, world, &e->ranks, err)))
            return st;
        int most = tier == FSMOE_TIER_INTRA ? c->gpus_per_node
                   : tier == FSMOE_TIER_INTER ? c->nodes
                                              : world;
        if (e->ranks > most)
            return fsmoe_yaml_fail(&rn, err, FSMOE_ERR_VALUE,
                                   "%d ranks on tier %s (expected at most %d: %s)", e->ranks,
                                   fsmoe_tier_name((fsmoe_tier)tier), most,
                                   tier == FSMOE_TIER_INTRA   ? "gpus_per_node"
                                   : tier == FSMOE_TIER_INTER ? "one rank per node"
                                                              : "nodes·gpus_per_node");
    }
    if (fsmoe_yaml_has(en, "shape")) {
        fsmoe_ynode sn, x;
        fsmoe_yaml_get(en, "shape", FSMOE_REQUIRED, &sn, NULL);
        if (op != FSMOE_OP_GEMM)
            return fsmoe_yaml_fail(&sn, err, FSMOE_ERR_SCHEMA,
                                   "not valid for %s (expected only on gemm entries: the "
                                   "expert shape M:H a GEMM line was measured at)",
                                   fsmoe_op_name((fsmoe_op)op));
        if (!fsmoe_yaml_is_sequence(&sn) || fsmoe_yaml_seq_len(&sn) != 2)
            return fsmoe_yaml_fail(&sn, err, FSMOE_ERR_SCHEMA,
                                   "expected a pair [M, H] (the expert's hidden and FFN sizes)");
        long dims[2];
        for (int i = 0; i < 2; i++)
            if ((st = fsmoe_yaml_seq_item(&sn, i, &x, err)) ||
                (st = fsmoe_yaml_node_long(&x, 1, i ? FSMOE_LIMIT_FFN_HIDDEN : FSMOE_LIMIT_HIDDEN,
                                           &dims[i], err)))
                return st;
        e->shape_m = (int)dims[0], e->shape_h = (int)dims[1];
    }
    const fsmoe_cost_entry *first = entry_at(c, op, tier, e);
    char sh[48];
    if (first)
        return fsmoe_yaml_fail(en, err, FSMOE_ERR_VALUE,
                               "second entry for %s on tier %s at %d rank%s%s (first at line %d; "
                               "expected one entry per op, tier, ranks and shape)",
                               fsmoe_op_name((fsmoe_op)op), fsmoe_tier_name((fsmoe_tier)tier),
                               e->ranks, e->ranks == 1 ? "" : "s", shape_text(e, sh, sizeof sh),
                               first->line);
    const char *beta_key = op == FSMOE_OP_GEMM ? "beta_s_per_mac" : "beta_s_per_byte";
    const char *wrong_key = op == FSMOE_OP_GEMM ? "beta_s_per_byte" : "beta_s_per_mac";
    if (fsmoe_yaml_has(en, wrong_key)) {
        fsmoe_ynode wn;
        fsmoe_yaml_get(en, wrong_key, FSMOE_REQUIRED, &wn, NULL);
        return fsmoe_yaml_fail(&wn, err, FSMOE_ERR_SCHEMA,
                               "not valid for %s (expected %s: %s)", fsmoe_op_name((fsmoe_op)op),
                               beta_key,
                               op == FSMOE_OP_GEMM
                                   ? "a GEMM line is seconds per multiply-accumulate"
                                   : "a transfer line is seconds per byte");
    }
    if ((st = fsmoe_yaml_double(en, "alpha_s", FSMOE_REQUIRED, 0.0, FSMOE_LIMIT_ALPHA_S,
                                &e->alpha_s, err)) ||
        (st = fsmoe_yaml_double(en, beta_key, FSMOE_REQUIRED, 0.0, FSMOE_LIMIT_BETA_S, &e->beta_s,
                                err)) ||
        (st = fsmoe_yaml_double(en, "r2", FSMOE_REQUIRED, 0.0, 1.0, &e->r2, err)) ||
        (st = fsmoe_yaml_string(en, "derived", FSMOE_OPTIONAL, e->derived, sizeof e->derived,
                                err)))
        return st;
    if (fsmoe_yaml_has(en, "derived") && e->derived[0] == '\0') {
        fsmoe_ynode dn;
        fsmoe_yaml_get(en, "derived", FSMOE_REQUIRED, &dn, NULL);
        return fsmoe_yaml_fail(&dn, err, FSMOE_ERR_VALUE,
                               "empty (expected how the entry was obtained)");
    }
    e->low_r2 = e->r2 < c->r2_threshold;
    fsmoe_ynode pts;
    if ((st = fsmoe_yaml_sequence(en, "points", FSMOE_OPTIONAL, &pts, err)))
        return st;
    if (pts.node && (st = load_points(&pts, e, err))) {
        free(e->points);
        return st;
    }
    e->present = 1;
    /* Checked above: the only failure left is memory. */
    fsmoe_error add_err = {0};
    if ((st = fsmoe_cluster_add(c, (fsmoe_op)op, (fsmoe_tier)tier, e, &add_err))) {
        free(e->points);
        return fsmoe_yaml_fail(en, err, st, "%s", add_err.msg);
    }
    return FSMOE_OK;
}

static fsmoe_status load_doc(fsmoe_yaml *y, fsmoe_cluster *c, fsmoe_error *err)
{
    fsmoe_ynode root, ops, en;
    fsmoe_status st;
    if ((st = fsmoe_yaml_root(y, &root, err)) ||
        (st = fsmoe_yaml_check_version(&root, "fsmoe_cluster", FSMOE_CLUSTER_VERSION, err)) ||
        (st = fsmoe_yaml_check_keys(&root, top_keys, err)) ||
        (st = fsmoe_yaml_string(&root, "name", FSMOE_REQUIRED, c->name, sizeof c->name, err)) ||
        (st = fsmoe_yaml_string(&root, "source", FSMOE_REQUIRED, c->source, sizeof c->source,
                                err)) ||
        (st = fsmoe_yaml_string(&root, "device", FSMOE_OPTIONAL, c->device, sizeof c->device,
                                err)) ||
        (st = fsmoe_yaml_int(&root, "nodes", FSMOE_REQUIRED, 1, (int)FSMOE_LIMIT_WORLD, &c->nodes,
                             err)) ||
        (st = fsmoe_yaml_int(&root, "gpus_per_node", FSMOE_REQUIRED, 1,
                             (int)FSMOE_LIMIT_GPUS_PER_NODE, &c->gpus_per_node, err)))
        return st;
    fsmoe_ynode gn, nodes_n;
    fsmoe_yaml_get(&root, "nodes", FSMOE_REQUIRED, &nodes_n, NULL);
    fsmoe_yaml_get(&root, "gpus_per_node", FSMOE_REQUIRED, &gn, NULL);
    fsmoe_mark_set(&c->at.nodes, &nodes_n);
    fsmoe_mark_set(&c->at.gpus_per_node, &gn);
    if ((long)c->nodes * c->gpus_per_node > FSMOE_LIMIT_WORLD) {
        return fsmoe_yaml_fail(&gn, err, FSMOE_ERR_VALUE,
                               "nodes·gpus_per_node = %d·%d = %ld GPUs (expected at most %ld)",
                               c->nodes, c->gpus_per_node, (long)c->nodes * c->gpus_per_node,
                               FSMOE_LIMIT_WORLD);
    }
    c->r2_threshold = 0.99;
    if ((st = fsmoe_yaml_double(&root, "r2_threshold", FSMOE_OPTIONAL, 0.0, 1.0, &c->r2_threshold,
                                err)) ||
        (st = fsmoe_yaml_double(&root, "device_memory_bytes", FSMOE_OPTIONAL,
                                FSMOE_MIN_DEVICE_MEMORY, FSMOE_MAX_DEVICE_MEMORY,
                                &c->device_memory_bytes, err)) ||
        (st = fsmoe_yaml_int(&root, "compute_threads", FSMOE_OPTIONAL, 1,
                             FSMOE_MAX_COMPUTE_THREADS, &c->compute_threads, err)))
        return st;
    if ((st = fsmoe_yaml_string(&root, "notes", FSMOE_OPTIONAL, c->notes, sizeof c->notes,
                                err)))
        return st;
    if (fsmoe_yaml_has(&root, "interference")) {
        fsmoe_ynode in;
        if ((st = fsmoe_yaml_mapping(&root, "interference", FSMOE_REQUIRED, &in, err)) ||
            (st = fsmoe_yaml_check_keys(&in, interference_keys, err)) ||
            (st = fsmoe_yaml_double(&in, "comm_slowdown", FSMOE_REQUIRED, 1.0, FSMOE_MAX_SLOWDOWN,
                                    &c->interference.comm_slowdown, err)) ||
            (st = fsmoe_yaml_double(&in, "compute_slowdown", FSMOE_REQUIRED, 1.0,
                                    FSMOE_MAX_SLOWDOWN, &c->interference.compute_slowdown,
                                    err)) ||
            (st = fsmoe_yaml_double(&in, "sync_latency_s", FSMOE_OPTIONAL, 0.0, FSMOE_MAX_SYNC_S,
                                    &c->interference.sync_s, err)) ||
            (st = fsmoe_yaml_double(&in, "sync_growth", FSMOE_OPTIONAL, 0.0,
                                    FSMOE_MAX_SYNC_GROWTH, &c->interference.sync_growth, err)) ||
            (st = fsmoe_yaml_double(&in, "sync_growth_from_s", FSMOE_OPTIONAL, 0.0,
                                    FSMOE_MAX_SYNC_GROWTH_FROM_S, &c->interference.sync_growth_from_s,
                                    err)) ||
            (st = fsmoe_yaml_string(&in, "measured", FSMOE_OPTIONAL, c->interference.measured,
                                    sizeof c->interference.measured, err)))
            return st;
        c->interference.present = 1;
    }
    if (fsmoe_yaml_has(&root, "host")) {
        fsmoe_ynode hn, rn;
        if ((st = fsmoe_yaml_mapping(&root, "host", FSMOE_REQUIRED, &hn, err)) ||
            (st = fsmoe_yaml_check_keys(&hn, host_keys, err)) ||
            (st = fsmoe_yaml_int(&hn, "ranks", FSMOE_REQUIRED, 1, FSMOE_MAX_HOST_RANKS,
                                 &c->host.ranks, err)) ||
            (st = fsmoe_yaml_int(&hn, "cores", FSMOE_REQUIRED, 1, FSMOE_MAX_HOST_RANKS,
                                 &c->host.cores, err)) ||
            (st = fsmoe_yaml_int(&hn, "ranks_at_once", FSMOE_REQUIRED, 1, c->host.ranks,
                                 &c->host.ranks_at_once, err)))
            return st;
        if ((st = fsmoe_yaml_get(&hn, "ranks", FSMOE_REQUIRED, &rn, err)))
            return st;
        if (c->host.ranks > c->nodes * c->gpus_per_node)
            return fsmoe_yaml_fail(&rn, err, FSMOE_ERR_VALUE,
                                   "host.ranks %d is more than the cluster's %d ranks "
                                   "(nodes·gpus_per_node)",
                                   c->host.ranks, c->nodes * c->gpus_per_node);
        c->host.present = 1;
    }
    if ((st = fsmoe_yaml_sequence(&root, "ops", FSMOE_REQUIRED, &ops, err)))
        return st;
    fsmoe_mark_set(&c->at.ops, &ops);
    int n = fsmoe_yaml_seq_len(&ops);
    if (n == 0)
        return fsmoe_yaml_fail(&ops, err, FSMOE_ERR_VALUE,
                               "no entries (expected at least one op entry)");
    for (int i = 0; i < n; i++) {
        if ((st = fsmoe_yaml_seq_item(&ops, i, &en, err)) || (st = load_entry(&en, c, err)))
            return st;
    }
    return FSMOE_OK;
}

/* One document, from the file `path` (text NULL) or from memory (`path` names it). */
static fsmoe_status read_doc(const char *path, const char *text, size_t len, fsmoe_cluster *out,
                             fsmoe_error *err)
{
    fsmoe_yaml y;
    memset(out, 0, sizeof *out);
    fsmoe_status st = text ? fsmoe_yaml_open_string(&y, path, text, len, err)
                           : fsmoe_yaml_open(&y, path, err);
    if (st)
        return st;
    st = load_doc(&y, out, err);
    fsmoe_yaml_close(&y);
    if (st)
        fsmoe_cluster_free(out);
    return st;
}

fsmoe_status fsmoe_cluster_load(const char *path, fsmoe_cluster *out, fsmoe_error *err)
{
    return read_doc(path, NULL, 0, out, err);
}

fsmoe_status fsmoe_cluster_parse(const char *name, const char *text, size_t len, fsmoe_cluster *out,
                                 fsmoe_error *err)
{
    return read_doc(name, text ? text : "", len, out, err);
}
