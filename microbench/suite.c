/* Implements: the measuring loops (suite.h). */
#include "suite.h"

#include <unistd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cost.h"
#include "interference.h"
#include "mpi_coll.h"
#include "op_collective.h"
#include "op_gemm.h"
#include "op_saa.h"

/* The SAA groups: AllToAll over EP&ESP, AllGather over MP. Under the common layout
 * (design.md §2) EP&ESP is every rank (world tier; intra on one node) and MP the node. */
static fsmoe_tier suite_saa_tier(const comm_topology *t)
{
    if (t->tier[FSMOE_TIER_WORLD] != MPI_COMM_NULL)
        return FSMOE_TIER_WORLD;
    return FSMOE_TIER_INTRA;
}

static int suite_saa_possible(const comm_topology *t)
{
    return t->tier[FSMOE_TIER_INTRA] != MPI_COMM_NULL; /* MP needs more than one rank per node */
}

/* The (collective, tier) pairs fsmoe-plan reads under the layouts of design.md §2
 * (planner/workload.c): ESP and MP (intra) AllGather, ReduceScatter, AllReduce; EP (inter)
 * AllToAll; EP&ESP (world) AllToAll; DP (inter) AllReduce; an EP inside a node (intra)
 * AllToAll. With one node every group is intra. The 2DH AllToAll only where it is
 * hierarchical: the world tier (several nodes with several ranks each), whatever the flags. */
static int suite_wanted(const bench_suite *s, int op, int tier)
{
    const bench_options *o = s->opt;
    if (!o->ops[op] || !o->tiers[tier] || !topology_has_tier(s->topo, tier))
        return 0;
    if (op == FSMOE_OP_ALLTOALL_2DH)
        return topology_tier_2dh(s->topo, (fsmoe_tier)tier);
    if (o->every_tier || tier == FSMOE_TIER_INTRA)
        return 1;
    if (op == FSMOE_OP_ALLTOALL)
        return 1;
    return op == FSMOE_OP_ALLREDUCE && tier == FSMOE_TIER_INTER;
}

/* One collective measurement: op on a tier, over the tier's group (group < 0) or over the
 * layout's logical group; size > 0: over groups of `size` ranks of the tier instead (consecutive
 * local ranks inside each node, or consecutive nodes at one local rank), a narrower group size
 * the planner scales from (libfsmoe/cost.h). */
typedef struct {
    fsmoe_op op;
    fsmoe_tier tier;
    int group;
    int size;
} suite_item;

#define SUITE_MAX_ITEMS 24

/* The narrower group size a tier of T ranks is also measured at: its smallest divisor d with
 * 2 <= d < T (groups of d tile the tier, so every rank measures and none idles), 0 when none
 * (T prime or 2). One extra size per tier keeps the cost to one more sweep of the tier's ops;
 * with the full size it brackets every group size a plan can ask of the tier. */
static int suite_narrower_size(int T)
{
    for (int d = 2; d * d <= T; d++)
        if (T % d == 0)
            return d;
    return 0;
}

/* A narrower group size is swept over SUITE_NARROW_POINTS of the message sizes, evenly spread
 * from the smallest to the largest: its line only has to place the group size between the
 * others (cost.h), and a quarter of the default 24 sizes keeps its cost a quarter of a sweep. */
#define SUITE_NARROW_POINTS 6

/* The message sizes item `it` is swept over (sizes may be NULL: just the count). */
static int suite_item_sizes(const bench_options *o, const suite_item *it, long long *sizes,
                            int max)
{
    int n = options_comm_sizes(o, sizes, max);
    if (it->size <= 0 || n <= SUITE_NARROW_POINTS)
        return n;
    for (int k = 0; sizes && k < SUITE_NARROW_POINTS; k++) /* index k·(n−1)/(P−1) >= k */
        sizes[k] = sizes[(long)k * (n - 1) / (SUITE_NARROW_POINTS - 1)];
    return SUITE_NARROW_POINTS;
}

/* What to measure, in order. With a layout: each (op, logical group) the planner reads
 * (fsmoe_comm_needs, libfsmoe/cost.h), recorded on the group's tier; the first group to reach
 * an (op, tier) keeps it. An AllToAll's group (EP, EP&ESP) is also measured with the 2DH
 * AllToAll when that is selected and the group is hierarchical (topology_group_2dh). */
static int suite_plan(const bench_suite *s, suite_item *items)
{
    const bench_options *o = s->opt;
    int n = 0;
    if (!s->layout) {
        /* Per operation, the tiers between nodes first: on a shared host their lines, bound by
         * the links, settle in the first passes, and what they leave of the refining budget
         * goes to the node-local ones after them, bound by memory and noisier (measure.h,
         * rule 3). */
        static const fsmoe_tier order[] = {FSMOE_TIER_INTER, FSMOE_TIER_WORLD, FSMOE_TIER_INTRA};
        for (int op = FSMOE_OP_ALLTOALL; op <= FSMOE_OP_ALLREDUCE; op++)
            for (size_t t = 0; t < sizeof order / sizeof order[0]; t++)
                if (suite_wanted(s, op, order[t]))
                    items[n++] = (suite_item){(fsmoe_op)op, order[t], -1, 0};
        /* the intra and inter tiers once more at a narrower size, where one exists */
        int wide = n;
        for (int i = 0; i < wide; i++) {
            fsmoe_tier t = items[i].tier;
            int d = t == FSMOE_TIER_WORLD ? 0 : suite_narrower_size(s->topo->tier_size[t]);
            if (d > 0 && n < SUITE_MAX_ITEMS)
                items[n++] = (suite_item){items[i].op, t, -1, d};
        }
        return n;
    }
    int done[FSMOE_OP_COUNT][FSMOE_TIER_COUNT] = {{0}};
    for (int i = 0; i < FSMOE_NEED_COUNT; i++) {
        fsmoe_comm_need w = fsmoe_comm_needs[i];
        if (fsmoe_group_size(s->layout, w.group) <= 1)
            continue;
        fsmoe_tier tier = fsmoe_group_tier(s->layout, w.group);
        if (!o->tiers[tier])
            continue;
        if (o->ops[w.op] && !done[w.op][tier]) {
            done[w.op][tier] = 1;
            items[n++] = (suite_item){w.op, tier, w.group, 0};
        }
        fsmoe_op h = FSMOE_OP_ALLTOALL_2DH;
        if (w.op == FSMOE_OP_ALLTOALL && o->ops[h] && !done[h][tier] &&
            topology_group_2dh(s->topo, s->layout, w.group)) {
            done[h][tier] = 1;
            items[n++] = (suite_item){h, tier, w.group, 0};
        }
    }
    return n;
}

/* SAA: AllToAll over EP&ESP with AllGather over MP; possible when both have members. */
static int suite_saa_plan(const bench_suite *s, fsmoe_tier *tier)
{
    const bench_options *o = s->opt;
    if (!o->ops[FSMOE_OP_SAA])
        return 0;
    if (!s->layout) {
        *tier = suite_saa_tier(s->topo);
        return suite_saa_possible(s->topo) && o->tiers[*tier];
    }
    if (fsmoe_group_size(s->layout, FSMOE_GROUP_EP_ESP) <= 1 ||
        fsmoe_group_size(s->layout, FSMOE_GROUP_MP) <= 1)
        return 0;
    *tier = fsmoe_group_tier(s->layout, FSMOE_GROUP_EP_ESP);
    return o->tiers[*tier];
}

/* Rows the run will produce (each measured once per pass). */
static long suite_rows(const bench_suite *s)
{
    const bench_options *o = s->opt;
    long sizes = options_comm_sizes(o, NULL, 0), rows = 0;
    suite_item items[SUITE_MAX_ITEMS];
    fsmoe_tier saa_tier;
    int n_items = suite_plan(s, items);
    for (int i = 0; i < n_items; i++)
        rows += suite_item_sizes(o, &items[i], NULL, 0);
    if (suite_saa_plan(s, &saa_tier))
        rows += sizes;
    if (o->ops[FSMOE_OP_GEMM])
        rows += (long)s->n_shapes * ((o->gemm_max - o->gemm_min) / o->gemm_step + 1);
    if (o->ops[FSMOE_OP_COPY])
        rows += sizes;
    return rows;
}

long suite_steps(const bench_suite *s)
{
    return suite_rows(s) * s->opt->iters + interference_steps(s);
}

/* ---- buffer rotation ----
 * A timed run that reuses the previous run's buffers finds them in cache while the working
 * set (send + receive of every rank running at once) fits the last-level cache, and in DRAM
 * beyond: measured here, a 2-rank copy keeps 14.5 GB/s up to 12 MB per buffer and falls to
 * 6.7 GB/s past ~16 MB, which bent every intra-node fit. In training the tensors a collective
 * moves were written long before (or are larger than the cache), so each run here takes the
 * next slot of a pool of --rotate bytes per buffer role, always cold: the line is straight
 * (6.7 GB/s at every size). The input pattern sits in slot 0 only (every size's input is a
 * prefix of the largest): the other slots hold zeros, which move and add as fast; the
 * untimed warm-up runs use slot 0 and produce the output that is checked. */
typedef struct {
    size_t pool;  /* bytes of each role's pool (at least the largest buffer) */
    int slots, k; /* slots of the current row; the slot of the last run (counts on across
                   * rows and passes, see rot_row) */
    int pin0;     /* verification run: slot 0 */
} suite_rot;

static size_t rot_stride(size_t bytes)
{
    return (bytes + 4095) / 4096 * 4096;
}

/* The row's slots: as many as every role's pool holds (1 = no rotation). The slot counter is
 * not reset: a row's runs in successive passes land on different slots. Restarting it per row
 * put every pass's run of a large row (one operation per run) on the same slot, the same
 * pages, and a row whose pages were slow stayed slow in every pass (measured on this VM:
 * the intra-node AllReduce's points at 5-10 MB 10-20 % below the line in every job, r2
 * 0.991-0.993; counting on: within 6 %, r2 0.998). */
static void rot_row(suite_rot *r, const size_t *bytes, int roles)
{
    r->slots = 0;
    r->pin0 = 0;
    for (int i = 0; i < roles; i++) {
        size_t stride = rot_stride(bytes[i]);
        int n = stride && stride <= r->pool ? (int)(r->pool / stride) : 1;
        if (r->slots == 0 || n < r->slots)
            r->slots = n;
    }
    if (r->slots < 1)
        r->slots = 1;
}

static void rot_next(suite_rot *r)
{
    r->k = r->pin0 || r->slots <= 1 ? 0 : (r->k + 1) % r->slots;
}

static size_t rot_off(const suite_rot *r, size_t bytes)
{
    return (size_t)r->k * rot_stride(bytes);
}

static void *rot_ptr(const suite_rot *r, void *base, size_t bytes)
{
    return (char *)base + rot_off(r, bytes);
}

/* ---- which ranks share cores, and the rounds a tier's groups are measured in ---- */

fsmoe_status suite_machine_ranks(MPI_Comm world, int *ranks, fsmoe_error *err)
{
    /* The kernel's boot id names the machine: emulated nodes (namespaces) share it. */
    char id[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(id, sizeof id, f))
            id[0] = '\0';
        fclose(f);
    }
    unsigned h = 2166136261u; /* FNV-1a */
    for (const char *c = id; *c; c++)
        h = (h ^ (unsigned char)*c) * 16777619u;
    int rank = 0, color = (int)(h & 0x3fffffff);
    MPI_Comm_rank(world, &rank);
    if (!id[0])
        color = rank; /* unknown: assume a machine per rank (no rounds) */
    MPI_Comm machine;
    MPI_CHECK(MPI_Comm_split(world, color, rank, &machine), err);
    *ranks = 1;
    MPI_Comm_size(machine, ranks);
    MPI_Comm_free(&machine);
    return FSMOE_OK;
}

fsmoe_status suite_machine_init(bench_suite *s, fsmoe_error *err)
{
    int ranks = 1;
    fsmoe_status st = suite_machine_ranks(s->mcfg.world, &ranks, err);
    if (st)
        return st;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1)
        cores = 1;
    int over = (int)((ranks + cores - 1) / cores), worst = over;
    st = fsmoe_mpi_allreduce(s->mcfg.world, &over, &worst, 1, MPI_INT, MPI_MAX,
                                          "the machines' oversubscription (MPI_Allreduce)", err);
    if (st)
        return st;
    s->machine_ranks = ranks;
    s->machine_cores = (int)cores;
    s->oversubscription = worst;
    return FSMOE_OK;
}

/* This rank's round for a sweep over `group` (MPI_COMM_SELF: every rank alone), written into
 * cfg, and a note for the section header. Groups are numbered by their lowest world rank;
 * consecutive groups share a round (node-major numbering: a node's ranks run together). */
static fsmoe_status suite_rounds(bench_suite *s, MPI_Comm group, measure_cfg *cfg, char *note,
                                 size_t note_len, fsmoe_error *err)
{
    int wrank = 0, wsize = 1, leader = 0;
    MPI_Comm_rank(s->mcfg.world, &wrank);
    MPI_Comm_size(s->mcfg.world, &wsize);
    *cfg = s->mcfg;
    cfg->group = group;
    cfg->round = 0;
    cfg->rounds = 1;
    cfg->cpu = -1;
    cfg->sleep = s->oversubscription > 1;
    note[0] = '\0';
    fsmoe_status st = fsmoe_mpi_allreduce(group, &wrank, &leader, 1, MPI_INT, MPI_MIN,
                                          "the group's leader (MPI_Allreduce)", err);
    if (st)
        return st;
    int *leaders = malloc((size_t)wsize * sizeof *leaders);
    if (!leaders)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for %d ranks", wsize);
    st = fsmoe_mpi_allgather(s->mcfg.world, &leader, leaders, 1, MPI_INT,
                             "the groups' leaders (MPI_Allgather)", err);
    int n_groups = 0, ordinal = 0;
    for (int r = 0; r < wsize && !st; r++) {
        if (leaders[r] != r)
            continue; /* count each group once, at its leader */
        n_groups++;
        ordinal += r < leader;
    }
    free(leaders);
    if (st)
        return st;
    /* The CPU of this rank while the sweep lasts, where ranks outnumber cores (measure_pin
     * explains why): a group over several nodes runs each rank on its node's CPU; the members
     * of groups inside one node (or alone) measured in rounds get one CPU each, in the order
     * of the round's groups and their ranks. */
    int node_lo = s->topo->node, node_hi = s->topo->node, grank = 0, gsize = 1;
    if ((st = fsmoe_mpi_allreduce(group, &s->topo->node, &node_lo, 1, MPI_INT, MPI_MIN,
                                  "the group's nodes (MPI_Allreduce)", err)) ||
        (st = fsmoe_mpi_allreduce(group, &s->topo->node, &node_hi, 1, MPI_INT, MPI_MAX,
                                  "the group's nodes (MPI_Allreduce)", err)))
        return st;
    MPI_Comm_rank(group, &grank);
    MPI_Comm_size(group, &gsize);
    int spans_nodes = node_lo != node_hi;
    if (cfg->sleep && spans_nodes)
        cfg->cpu = s->topo->node;
    int rounds = s->opt->group_rounds > 0 ? s->opt->group_rounds : s->oversubscription;
    if (rounds > n_groups)
        rounds = n_groups;
    if (rounds <= 1) {
        if (cfg->sleep)
            snprintf(note, note_len, "; all at once, waits asleep%s (%d ranks on %d cores)",
                     spans_nodes ? ", each rank on its node's CPU" : "", s->machine_ranks,
                     s->machine_cores);
        return FSMOE_OK;
    }
    int per = (n_groups + rounds - 1) / rounds;
    cfg->rounds = (n_groups + per - 1) / per;
    cfg->round = ordinal / per;
    if (!spans_nodes)
        cfg->cpu = (ordinal % per) * gsize + grank;
    snprintf(note, note_len, "; in %d rounds of %d group%s, the others asleep (%d ranks on %d "
             "cores)", cfg->rounds, per, per == 1 ? "" : "s", s->machine_ranks,
             s->machine_cores);
    return FSMOE_OK;
}

/* After suite_rounds for MPI_COMM_SELF: how many of this machine's ranks compute at once. */
static void suite_local_at_once(bench_suite *s, const measure_cfg *m)
{
    int rounds = m->rounds > 1 ? m->rounds : 1;
    int at_once = (s->machine_ranks + rounds - 1) / rounds;
    if (at_once > s->local_at_once)
        s->local_at_once = at_once;
}

/* ---- output checks: poison before, a host view after ---- */

fsmoe_status suite_poison_buf(comm_backend *b, void *p, void *h, size_t bytes,
                              fsmoe_error *err)
{
    if (b->host_memory) {
        memset(p, 0xff, bytes);
        return FSMOE_OK;
    }
    memset(h, 0xff, bytes);
    return b->upload(b, p, h, bytes, err);
}

fsmoe_status suite_host_view(comm_backend *b, const void *p, void *h, size_t bytes,
                             const void **view, fsmoe_error *err)
{
    if (b->host_memory) {
        *view = p;
        return FSMOE_OK;
    }
    *view = h;
    return b->download(b, h, p, bytes, err);
}

/* ---- the sweep: n passes over the rows, one timed run of each row per pass ---- */

typedef struct {
    const char *name; /* for the progress bar */
    fsmoe_tier tier;
    const char *type, *redop;
    int n;            /* rows */
    /* Points ctx at row i (shape, buffers); 0 = nothing to measure at this size. Must be
     * cheap and the same on every pass. */
    int (*setup)(void *ctx, int i);
    measure_fn run; /* one synchronised operation of the current row */
    /* After the warm-up of row i, whose output (slot 0) is still in place: the row's
     * description (op, tier, ranks, n, count, shape), its bus-bandwidth factor and this
     * rank's wrong elements. */
    fsmoe_status (*finish)(void *ctx, int i, bench_row *row, double *busbw_factor,
                           size_t *wrong, fsmoe_error *err);
    double flops_per_n; /* 0: algbw = n/t bytes; 2: GFLOP/s from MACs */
    int ops_per_run;    /* operations one run does; a row's time is one of them (0 = 1) */
    const measure_cfg *m; /* with this sweep's rounds (suite_rounds) */
    suite_rot *rot;       /* NULL: the buffers do not rotate */
    /* Overwrites the output that finish checks (slot 0) with a poison pattern before the
     * warm-up run (nccl-tests clears its receive buffer likewise): every size's output is
     * a prefix of the largest one's, so without it an operation that writes nothing would find
     * an earlier run's correct result in place and count 0 wrong. NULL: not checked. */
    fsmoe_status (*poison)(void *ctx, fsmoe_error *err);
} suite_sweep;

/* The first untimed run(s) of row i, which warm up (and set the repetitions per timed run)
 * and produce the output that is checked: on slot 0, the one whose input holds the pattern
 * (see suite_rot), written over a poisoned buffer (see poison). Checking the warm-up's output
 * instead of an extra run after the timed ones saves a run per row (a seventh of the time
 * the default suite spends on the emulated links). */
static fsmoe_status suite_warm_check(bench_suite *s, const suite_sweep *sw, void *ctx, int i,
                                     int *reps, bench_row *row, double *factor, size_t *wrong,
                                     fsmoe_error *err)
{
    const measure_cfg *m = sw->m;
    int check = s->opt->check, pin = sw->rot && sw->rot->slots > 1;
    fsmoe_status st;
    if (pin)
        sw->rot->pin0 = 1;
    if (check && sw->poison && (st = sw->poison(ctx, err)))
        return st;
    if ((st = measure_warm(m, sw->run, ctx, reps, err)))
        return st;
    if (measure_warm_runs(m) == 0 && check) {
        /* -w 0 with --min-sample-time 0: one untimed run, in this rank's round like a timed
         * one (alone it would overlap another round's timed run on the same links). */
        double untimed;
        if ((st = measure_sample(m, sw->run, ctx, 1, &untimed, err)))
            return st;
    }
    if (pin)
        sw->rot->pin0 = 0;
    return sw->finish(ctx, i, row, factor, check ? wrong : NULL, err);
}

static fsmoe_status suite_sweep_run(bench_suite *s, const suite_sweep *sw, void *ctx,
                                    fsmoe_error *err)
{
    const measure_cfg *m = sw->m;
    int n = sw->n, iters = m->iters;
    double per_run = sw->ops_per_run > 1 ? sw->ops_per_run : 1;
    fsmoe_status st = FSMOE_OK;
    measure_rule rule = {iters, s->opt->max_iters, s->opt->precision, s->opt->outlier,
                         s->opt->extra_time, s->opt->r2_threshold};
    measure_refine rf;
    if ((st = measure_refine_init(&rf, n, rule.max_runs, err)))
        return st;
    double *factor = calloc((size_t)(n ? n : 1), sizeof *factor);
    int *reps = calloc((size_t)(n ? n : 1), sizeof *reps);
    bench_row *rows = calloc((size_t)(n ? n : 1), sizeof *rows);
    size_t *wrong = calloc((size_t)(n ? n : 1), sizeof *wrong);
    if (!factor || !reps || !rows || !wrong) {
        st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for %d x %d samples", n, iters);
        goto fail;
    }
    char label[96];
    measure_pin(m->cpu);
    double t_first = measure_now();
    for (int p = 0; p < iters; p++) {
        for (int i = 0; i < n; i++) {
            snprintf(label, sizeof label, "%s %s row %d/%d, pass %d/%d", sw->name,
                     fsmoe_tier_name(sw->tier), i + 1, n, p + 1, iters);
            progress_step(s->prog, label);
            if (!sw->setup(ctx, i)) {
                rf.runs[i] = -1;
                continue;
            }
            if (p == 0 && (st = suite_warm_check(s, sw, ctx, i, &reps[i], &rows[i],
                                                 &factor[i], &wrong[i], err)))
                goto fail;
            double v;
            if ((st = measure_sample(m, sw->run, ctx, reps[i], &v, err)))
                goto fail;
            measure_refine_add(&rf, i, v / per_run);
            rf.x[i] = rows[i].n;
        }
    }
    /* Further passes over the sizes that need them (measure.h: the stopping rule, outliers). */
    rf.start_s = measure_now();
    rf.first_s = rf.start_s - t_first;
    rf.budget_s = rule.extra_time * rf.first_s + s->extra_carry_s;
    for (int more = 1; more;) {
        if ((st = measure_refine_next(m, &rule, &rf, reps, &more, err)))
            goto fail;
        for (int i = 0; i < n && more; i++) {
            if (rf.want[i] == MEASURE_DONE)
                continue;
            snprintf(label, sizeof label, "%s %s row %d/%d, extra pass %d", sw->name,
                     fsmoe_tier_name(sw->tier), i + 1, n, rf.passes);
            progress_step(s->prog, label);
            double v;
            if (!sw->setup(ctx, i) || (st = measure_sample(m, sw->run, ctx, reps[i], &v, err)))
                goto fail;
            measure_refine_add(&rf, i, v / per_run);
        }
    }
    /* What this section left of its budget goes to the next (the ranks' clocks may differ a
     * little: every pass runs the union of their choices). */
    s->extra_carry_s = rf.budget_s - (measure_now() - rf.start_s);
    if (s->extra_carry_s < 0.0)
        s->extra_carry_s = 0.0;
    for (int i = 0; i < n; i++) {
        if (rf.runs[i] < 0)
            continue;
        bench_row *row = &rows[i];
        if ((st = measure_combine(m, &rf.t[(size_t)i * rf.cap], rf.runs[i], &row->seconds, err)))
            goto fail;
        long long w = (long long)wrong[i];
        if ((st = fsmoe_mpi_allreduce(m->world, &w, &row->wrong, 1, MPI_LONG_LONG, MPI_SUM,
                                      "summing the wrong values (MPI_Allreduce)", err)))
            goto fail;
        double work = sw->flops_per_n > 0 ? sw->flops_per_n * row->n : row->n;
        row->algbw = row->seconds > 0 ? work / row->seconds / 1e9 : 0.0;
        row->busbw = row->algbw * factor[i];
        if ((st = results_add(s->res, row, err)))
            goto fail;
        progress_clear(s->prog);
        if (row->op == FSMOE_OP_GEMM)
            report_gemm_row(s->rep, row);
        else
            report_row(s->rep, row, sw->type, sw->redop);
        rf.y[i] = row->seconds;
    }
    report_refine(s->rep, &rf, &rule);
fail:
    measure_unpin();
    measure_refine_free(&rf);
    free(factor);
    free(reps);
    free(rows);
    free(wrong);
    return st;
}

/* ---- collectives ---- */

typedef struct {
    comm_backend *b;
    comm_group *c;
    const coll_op *op;
    fsmoe_tier tier;
    int P, rank;
    const long long *sizes;
    coll_shape shape;
    const void *send;
    void *recv, *hrecv;
    comm_dtype t;
    comm_redop redop;
    suite_rot rot;
} coll_ctx;

static int coll_setup(void *arg, int i)
{
    coll_ctx *c = arg;
    c->op->shape((size_t)c->sizes[i], comm_dtype_size(c->t), c->P, &c->shape);
    size_t bytes[2] = {c->shape.send_elems * comm_dtype_size(c->t),
                       c->shape.recv_elems * comm_dtype_size(c->t)};
    rot_row(&c->rot, bytes, 2);
    return c->shape.count > 0; /* too small to give every member an element */
}

/* One run as the runtime issues a collective (design.md §10.1): submitted to a communication
 * stream (a worker thread on the mpi backend, nonblocking with the polite wait of mpi_coll.h;
 * a CUDA stream on nccl), then that stream synchronised. The time therefore includes the
 * hand-over to the stream thread and back, which a run pays too. */
static fsmoe_status coll_once(void *arg, fsmoe_error *err)
{
    coll_ctx *c = arg;
    rot_next(&c->rot);
    size_t es = comm_dtype_size(c->t);
    fsmoe_status st = c->op->run(c->b, c->c,
                                 rot_ptr(&c->rot, (void *)c->send, c->shape.send_elems * es),
                                 rot_ptr(&c->rot, c->recv, c->shape.recv_elems * es), &c->shape,
                                 c->t, c->redop, COMM_STREAM_COMM, err);
    fsmoe_status st_sync = c->b->sync(c->b, COMM_STREAM_COMM, st ? NULL : err);
    return st ? st : st_sync;
}

static fsmoe_status coll_finish(void *arg, int i, bench_row *row, double *factor,
                                size_t *wrong, fsmoe_error *err)
{
    (void)i;
    coll_ctx *c = arg;
    *row = (bench_row){.op = c->op->op, .tier = c->tier, .ranks = c->P,
                       .n = (double)c->shape.bytes, .count = c->shape.count};
    *factor = c->op->busbw_factor(c->P);
    if (!wrong)
        return FSMOE_OK;
    const void *out;
    fsmoe_status st = suite_host_view(c->b, c->recv, c->hrecv,
                                      c->shape.recv_elems * comm_dtype_size(c->t), &out, err);
    if (st)
        return st;
    *wrong = c->op->check(c->t, c->redop, c->rank, c->P, &c->shape, out);
    return FSMOE_OK;
}

static fsmoe_status coll_poison(void *arg, fsmoe_error *err)
{
    coll_ctx *c = arg;
    return suite_poison_buf(c->b, c->recv, c->hrecv, c->shape.recv_elems * comm_dtype_size(c->t),
                            err);
}

static fsmoe_status suite_collective(bench_suite *s, const suite_item *it, const coll_op *op,
                                     fsmoe_tier tier, MPI_Comm group, const char *detail,
                                     void *dsend, void *drecv, void *hsend, void *hrecv,
                                     size_t pool, fsmoe_error *err)
{
    const bench_options *o = s->opt;
    comm_backend *b = s->b;
    fsmoe_status st;
    long long sizes[BENCH_MAX_SIZES];
    int n_sizes = suite_item_sizes(o, it, sizes, BENCH_MAX_SIZES);
    coll_ctx c = {.b = b, .op = op, .tier = tier, .sizes = sizes, .send = dsend, .recv = drecv,
                  .hrecv = hrecv, .t = o->dtype, .redop = o->redop, .rot = {.pool = pool}};
    MPI_Comm_size(group, &c.P);
    MPI_Comm_rank(group, &c.rank);
    /* The input pattern of every size is a prefix of the largest one's: fill once. */
    coll_shape largest;
    op->shape((size_t)o->max_bytes, comm_dtype_size(o->dtype), c.P, &largest);
    op->fill(o->dtype, c.rank, c.P, &largest, hsend);
    if ((st = b->upload(b, dsend, hsend, largest.send_elems * comm_dtype_size(o->dtype), err)) ||
        (st = b->group_init(b, group, s->topo->node, &c.c, err)))
        return st;
    measure_cfg m;
    char note[160], full[384];
    if ((st = suite_rounds(s, group, &m, note, sizeof note, err))) {
        b->group_free(b, &c.c);
        return st;
    }
    snprintf(full, sizeof full, "%s%s", detail, note);
    report_section(s->rep, op->name, fsmoe_tier_name(tier), c.P, s->topo->size / c.P, full);
    suite_sweep sw = {op->name, tier, comm_dtype_name(o->dtype),
                      op->reduces ? comm_redop_name(o->redop) : "none", n_sizes,
                      coll_setup, coll_once, coll_finish, 0.0, 1, &m, &c.rot, coll_poison};
    st = suite_sweep_run(s, &sw, &c, err);
    b->group_free(b, &c.c);
    return st;
}

/* ---- SAA ---- */

typedef struct {
    comm_backend *b;
    saa_groups g;
    fsmoe_tier tier;
    const long long *sizes;
    saa_shape sh;
    comm_dtype t;
    const void *send;
    void *mid, *out, *hout;
    suite_rot rot;
} saa_ctx;

static int saa_setup(void *arg, int i)
{
    saa_ctx *c = arg;
    saa_shape_of(&c->g, (size_t)c->sizes[i], comm_dtype_size(c->t), &c->sh);
    size_t es = comm_dtype_size(c->t);
    size_t bytes[3] = {c->sh.send_elems * es, c->sh.a2a_elems * es, c->sh.ag_elems * es};
    rot_row(&c->rot, bytes, 3);
    return c->sh.per_peer > 0;
}

static fsmoe_status saa_once(void *arg, fsmoe_error *err)
{
    saa_ctx *c = arg;
    size_t es = comm_dtype_size(c->t);
    rot_next(&c->rot);
    return saa_run(c->b, &c->g, &c->sh, c->t,
                   rot_ptr(&c->rot, (void *)c->send, c->sh.send_elems * es),
                   rot_ptr(&c->rot, c->mid, c->sh.a2a_elems * es),
                   rot_ptr(&c->rot, c->out, c->sh.ag_elems * es), err);
}

static fsmoe_status saa_finish(void *arg, int i, bench_row *row, double *factor, size_t *wrong,
                               fsmoe_error *err)
{
    (void)i;
    saa_ctx *c = arg;
    *row = (bench_row){.op = FSMOE_OP_SAA, .tier = c->tier, .ranks = c->g.P_a2a,
                       .n = (double)c->sh.bytes, .count = c->sh.send_elems};
    *factor = (double)(c->g.P_a2a - 1) / c->g.P_a2a;
    if (!wrong)
        return FSMOE_OK;
    const void *out;
    fsmoe_status st =
        suite_host_view(c->b, c->out, c->hout, c->sh.ag_elems * comm_dtype_size(c->t), &out, err);
    if (st)
        return st;
    *wrong = saa_check(&c->g, &c->sh, c->t, out);
    return FSMOE_OK;
}

static fsmoe_status saa_poison(void *arg, fsmoe_error *err)
{
    saa_ctx *c = arg;
    return suite_poison_buf(c->b, c->out, c->hout, c->sh.ag_elems * comm_dtype_size(c->t), err);
}

/* send and out are the suite's two pools (`pool` bytes each) where the output fits them:
 * only the AllToAll's output (mid) gets a pool of its own. Allocating three pools here took
 * 4.4 s of the default suite's 13 s SAA section on the emulated 2 x 2 cluster (3 GB written on
 * 2 cores). */
static fsmoe_status suite_saa(bench_suite *s, fsmoe_tier tier, MPI_Comm a2a_mpi, MPI_Comm ag_mpi,
                              void *send_pool, void *out_pool, size_t pool, fsmoe_error *err)
{
    const bench_options *o = s->opt;
    comm_backend *b = s->b;
    const comm_topology *t = s->topo;
    fsmoe_status st = FSMOE_OK;
    int *a2a_rank_of = NULL;
    void *dsend = NULL, *dmid = NULL, *dout = NULL, *hsend = NULL, *hout = NULL;
    int own = 0; /* send and out allocated here */
    long long sizes[BENCH_MAX_SIZES];
    saa_ctx c = {.b = b, .tier = tier, .sizes = sizes, .t = o->dtype};
    MPI_Comm_size(a2a_mpi, &c.g.P_a2a);
    MPI_Comm_size(ag_mpi, &c.g.P_ag);
    MPI_Comm_rank(a2a_mpi, &c.g.rank_a2a);
    a2a_rank_of = calloc((size_t)c.g.P_ag, sizeof *a2a_rank_of);
    if (!a2a_rank_of)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory");
    fsmoe_status st0 = fsmoe_mpi_allgather(ag_mpi, &c.g.rank_a2a, a2a_rank_of, 1, MPI_INT,
                                           "the SAA groups' ranks (MPI_Allgather)", err);
    if (st0) {
        free(a2a_rank_of);
        return st0;
    }
    c.g.a2a_rank_of = a2a_rank_of;
    size_t max = (size_t)o->max_bytes, max_out = max * (size_t)c.g.P_ag;
    if (max_out > pool) {
        pool = max_out > (size_t)o->rotate_bytes ? max_out : (size_t)o->rotate_bytes;
        own = 1;
    }
    c.rot.pool = pool;
    if ((st = b->group_init(b, a2a_mpi, t->node, &c.g.a2a, err)) ||
        (st = b->group_init(b, ag_mpi, t->node, &c.g.ag, err)) ||
        (st = b->alloc(b, pool, &dmid, err)))
        goto fail;
    if (!own) {
        dsend = send_pool;
        dout = out_pool;
    } else if ((st = b->alloc(b, pool, &dsend, err)) || (st = b->alloc(b, pool, &dout, err))) {
        goto fail;
    }
    hsend = malloc(max);
    hout = malloc(max_out);
    if (!hsend || !hout) {
        st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for %zu-byte buffers", max_out);
        goto fail;
    }
    saa_shape largest;
    saa_shape_of(&c.g, max, comm_dtype_size(o->dtype), &largest);
    saa_fill(&c.g, &largest, o->dtype, hsend); /* every size's input is a prefix */
    if ((st = b->upload(b, dsend, hsend, largest.send_elems * comm_dtype_size(o->dtype), err)))
        goto fail;
    c.send = dsend;
    c.mid = dmid;
    c.out = dout;
    c.hout = hout;
    char detail[320], note[160];
    measure_cfg m;
    if ((st = suite_rounds(s, a2a_mpi, &m, note, sizeof note, err)))
        goto fail;
    snprintf(detail, sizeof detail,
             "AllToAll over %d ranks in %d exchanges + AllGather over %d (MP) of each, streams "
             "1+2%s",
             c.g.P_a2a, c.g.P_a2a, c.g.P_ag, note);
    report_section(s->rep, "saa", fsmoe_tier_name(tier), c.g.P_a2a, t->size / c.g.P_a2a, detail);
    suite_sweep sw = {"saa", tier, comm_dtype_name(o->dtype), "none",
                      options_comm_sizes(o, sizes, BENCH_MAX_SIZES),
                      saa_setup, saa_once, saa_finish, 0.0, 1, &m, &c.rot, saa_poison};
    st = suite_sweep_run(s, &sw, &c, err);
fail:
    b->group_free(b, &c.g.a2a);
    b->group_free(b, &c.g.ag);
    if (dmid)
        b->release(b, dmid);
    if (own && dsend)
        b->release(b, dsend);
    if (own && dout)
        b->release(b, dout);
    free(hsend);
    free(hout);
    free(a2a_rank_of);
    return st;
}

/* ---- GEMM: one row per (shape, size) ----
 *
 * A run is the expert's two projections as its FFN issues them: (T x M)(M x H), then
 * (T x H)(H x M). The row is one of them: half the run, at the MACs of one (T·M·H). The line
 * is then the mean of the two, which is what the planner charges per expert GEMM (up and down
 * have the same MACs). On the 2-core development VM, one core ran the down projection (inner
 * dimension H) 13-16 % slower per MAC than the up one (inner dimension M): fitted as separate
 * rows at the same n, that spread alone held the line's r² near 0.975, and the outlier rule
 * took every row for an outlier. */

typedef struct {
    comm_backend *b;
    int M, H;
    long long e0, step;
    int m; /* current row: T */
    const float *A, *B_up, *B_down, *hA, *hB_up, *hB_down;
    float *C_up, *C_down, *hC_up, *hC_down;
} gemm_ctx;

static int gemm_setup(void *arg, int i)
{
    gemm_ctx *c = arg;
    long long e = c->e0 + (long long)i * c->step;
    c->m = (int)(e / c->M);
    return c->m > 0;
}

static fsmoe_status gemm_once(void *arg, fsmoe_error *err)
{
    gemm_ctx *c = arg;
    fsmoe_status st = c->b->gemm(c->b, c->m, c->H, c->M, c->A, c->B_up, c->C_up, 0, err);
    if (!st)
        st = c->b->gemm(c->b, c->m, c->M, c->H, c->A, c->B_down, c->C_down, 0, err);
    return st ? st : c->b->sync(c->b, 0, err);
}

static fsmoe_status gemm_finish(void *arg, int i, bench_row *row, double *factor, size_t *wrong,
                                fsmoe_error *err)
{
    (void)i;
    gemm_ctx *c = arg;
    *row = (bench_row){.op = FSMOE_OP_GEMM, .tier = FSMOE_TIER_LOCAL, .ranks = 1, .m = c->m,
                       .nn = c->H, .k = c->M, .shape_m = c->M, .shape_h = c->H};
    row->n = (double)c->m * c->M * c->H;
    row->count = (size_t)c->m * (size_t)c->M * (size_t)c->H;
    *factor = 0.0;
    if (!wrong)
        return FSMOE_OK;
    const void *up, *down;
    fsmoe_status st =
        suite_host_view(c->b, c->C_up, c->hC_up, (size_t)c->m * (size_t)c->H * 4, &up, err);
    if (!st)
        st = suite_host_view(c->b, c->C_down, c->hC_down, (size_t)c->m * (size_t)c->M * 4, &down,
                             err);
    if (st)
        return st;
    *wrong = gemm_check(c->hA, c->hB_up, up, c->m, c->H, c->M) +
             gemm_check(c->hA, c->hB_down, down, c->m, c->M, c->H);
    return FSMOE_OK;
}

static fsmoe_status gemm_poison(void *arg, fsmoe_error *err)
{
    gemm_ctx *c = arg;
    fsmoe_status st =
        suite_poison_buf(c->b, c->C_up, c->hC_up, (size_t)c->m * (size_t)c->H * 4, err);
    return st ? st
              : suite_poison_buf(c->b, c->C_down, c->hC_down, (size_t)c->m * (size_t)c->M * 4,
                                 err);
}

static fsmoe_status suite_gemm(bench_suite *s, fsmoe_error *err)
{
    const bench_options *o = s->opt;
    comm_backend *b = s->b;
    fsmoe_status st = FSMOE_OK;
    measure_cfg m;
    char note[160], detail[320];
    if ((st = suite_rounds(s, MPI_COMM_SELF, &m, note, sizeof note, err)))
        return st;
    suite_local_at_once(s, &m);
    snprintf(detail, sizeof detail,
             "every rank: (T x M)(M x H) then (T x H)(H x M) in each run, T*M swept; a row is "
             "one GEMM (half a run)%s",
             m.rounds > 1 ? note : note[0] ? note : ", all at once");
    report_section(s->rep, "gemm", "local", 1, s->topo->size, detail);
    int n_e = (int)((o->gemm_max - o->gemm_min) / o->gemm_step) + 1;
    for (int si = 0; si < s->n_shapes && !st; si++) {
        int M = s->shapes[si].M, H = s->shapes[si].H, K_max = M > H ? M : H;
        size_t T_max = (size_t)(o->gemm_max / M);
        if (T_max == 0)
            T_max = 1;
        size_t a_elems = T_max * (size_t)K_max, b_elems = (size_t)M * (size_t)H,
               up_elems = T_max * (size_t)H, down_elems = T_max * (size_t)M;
        float *hA = malloc(a_elems * 4), *hB = malloc(b_elems * 4), *hB2 = malloc(b_elems * 4),
              *hCu = malloc(up_elems * 4), *hCd = malloc(down_elems * 4);
        void *dA = NULL, *dB = NULL, *dB2 = NULL, *dCu = NULL, *dCd = NULL;
        if (!hA || !hB || !hB2 || !hCu || !hCd) {
            st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for GEMM %zux%d", T_max, K_max);
            goto shape_done;
        }
        /* A holds T_max·max(M, H) elements: the up projection reads T×M of it, the down one
         * T×H. */
        gemm_fill(hA, a_elems, hB, b_elems, 2);
        gemm_fill(NULL, 0, hB2, b_elems, 3);
        if ((st = b->alloc(b, a_elems * 4, &dA, err)) || (st = b->alloc(b, b_elems * 4, &dB, err)) ||
            (st = b->alloc(b, b_elems * 4, &dB2, err)) ||
            (st = b->alloc(b, up_elems * 4, &dCu, err)) ||
            (st = b->alloc(b, down_elems * 4, &dCd, err)) ||
            (st = b->upload(b, dA, hA, a_elems * 4, err)) ||
            (st = b->upload(b, dB, hB, b_elems * 4, err)) ||
            (st = b->upload(b, dB2, hB2, b_elems * 4, err)))
            goto shape_done;
        gemm_ctx c = {.b = b, .M = M, .H = H, .e0 = o->gemm_min, .step = o->gemm_step,
                      .A = dA, .B_up = dB, .B_down = dB2, .hA = hA, .hB_up = hB, .hB_down = hB2,
                      .C_up = dCu, .C_down = dCd, .hC_up = hCu, .hC_down = hCd};
        suite_sweep sw = {"gemm", FSMOE_TIER_LOCAL, "float", "none", n_e,
                          gemm_setup, gemm_once, gemm_finish, 2.0, 2, &m, NULL, gemm_poison};
        st = suite_sweep_run(s, &sw, &c, err);
    shape_done:
        if (dA)
            b->release(b, dA);
        if (dB)
            b->release(b, dB);
        if (dB2)
            b->release(b, dB2);
        if (dCu)
            b->release(b, dCu);
        if (dCd)
            b->release(b, dCd);
        free(hA);
        free(hB);
        free(hB2);
        free(hCu);
        free(hCd);
    }
    return st;
}

/* ---- copy ---- */

typedef struct {
    comm_backend *b;
    const long long *sizes;
    size_t count;
    comm_dtype t;
    int rank;
    void *dst, *hdst;
    const void *src;
    suite_rot rot;
} copy_ctx;

static int copy_setup(void *arg, int i)
{
    copy_ctx *c = arg;
    c->count = (size_t)c->sizes[i] / comm_dtype_size(c->t);
    size_t bytes = c->count * comm_dtype_size(c->t);
    rot_row(&c->rot, &bytes, 1);
    return c->count > 0;
}

static fsmoe_status copy_once(void *arg, fsmoe_error *err)
{
    copy_ctx *c = arg;
    size_t bytes = c->count * comm_dtype_size(c->t);
    rot_next(&c->rot);
    fsmoe_status st = c->b->copy(c->b, rot_ptr(&c->rot, c->dst, bytes),
                                 rot_ptr(&c->rot, (void *)c->src, bytes), bytes, 0, err);
    return st ? st : c->b->sync(c->b, 0, err);
}

static fsmoe_status copy_finish(void *arg, int i, bench_row *row, double *factor, size_t *wrong,
                                fsmoe_error *err)
{
    (void)i;
    copy_ctx *c = arg;
    size_t bytes = c->count * comm_dtype_size(c->t);
    *row = (bench_row){.op = FSMOE_OP_COPY, .tier = FSMOE_TIER_LOCAL, .ranks = 1,
                       .n = (double)bytes, .count = c->count};
    *factor = 1.0;
    if (!wrong)
        return FSMOE_OK;
    const void *out;
    fsmoe_status st = suite_host_view(c->b, c->dst, c->hdst, bytes, &out, err);
    if (st)
        return st;
    *wrong = comm_pattern_wrong(c->t, out, c->rank, 0, c->count);
    return FSMOE_OK;
}

static fsmoe_status copy_poison(void *arg, fsmoe_error *err)
{
    copy_ctx *c = arg;
    return suite_poison_buf(c->b, c->dst, c->hdst, c->count * comm_dtype_size(c->t), err);
}

static fsmoe_status suite_copy(bench_suite *s, void *dsrc, void *ddst, void *hsrc, void *hdst,
                               size_t pool, fsmoe_error *err)
{
    const bench_options *o = s->opt;
    comm_backend *b = s->b;
    fsmoe_status st;
    long long sizes[BENCH_MAX_SIZES];
    int n_sizes = options_comm_sizes(o, sizes, BENCH_MAX_SIZES);
    size_t max_count = (size_t)o->max_bytes / comm_dtype_size(o->dtype);
    comm_pattern_fill(o->dtype, hsrc, s->topo->rank, 0, max_count); /* every size is a prefix */
    if ((st = b->upload(b, dsrc, hsrc, max_count * comm_dtype_size(o->dtype), err)))
        return st;
    measure_cfg m;
    char note[160], detail[256];
    if ((st = suite_rounds(s, MPI_COMM_SELF, &m, note, sizeof note, err)))
        return st;
    suite_local_at_once(s, &m);
    snprintf(detail, sizeof detail, "device to device, every rank%s",
             m.rounds > 1 ? note : note[0] ? note : ", all at once");
    report_section(s->rep, "copy", "local", 1, s->topo->size, detail);
    copy_ctx c = {.b = b, .sizes = sizes, .t = o->dtype, .rank = s->topo->rank, .dst = ddst,
                  .hdst = hdst, .src = dsrc, .rot = {.pool = pool}};
    suite_sweep sw = {"copy", FSMOE_TIER_LOCAL, comm_dtype_name(o->dtype), "none", n_sizes,
                      copy_setup, copy_once, copy_finish, 0.0, 1, &m, &c.rot, copy_poison};
    return suite_sweep_run(s, &sw, &c, err);
}

fsmoe_status suite_run(bench_suite *s, fsmoe_error *err)
{
    const bench_options *o = s->opt;
    comm_backend *b = s->b;
    fsmoe_status st = FSMOE_OK;
    size_t max = (size_t)o->max_bytes;
    void *dsend = NULL, *drecv = NULL, *hsend = NULL, *hrecv = NULL;
    size_t pool = max > (size_t)o->rotate_bytes ? max : (size_t)o->rotate_bytes;
    if ((st = suite_machine_init(s, err)))
        return st;
    measure_steady_allocator(max);
    if ((st = b->alloc(b, pool, &dsend, err)) || (st = b->alloc(b, pool, &drecv, err)))
        goto fail;
    hsend = malloc(max);
    hrecv = malloc(max);
    if (!hsend || !hrecv) {
        st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for two %zu-byte buffers", max);
        goto fail;
    }
    suite_item items[SUITE_MAX_ITEMS];
    int n_items = suite_plan(s, items), n_2dh = 0;
    for (int i = 0; i < n_items; i++)
        n_2dh += items[i].op == FSMOE_OP_ALLTOALL_2DH;
    if (o->ops[FSMOE_OP_ALLTOALL_2DH] && n_2dh == 0)
        report_note(s->rep, "alltoall_2dh not measured: %s (2DH needs a group over at least "
                            "2 nodes with the same number, at least 2, of its ranks on each)",
                    s->layout ? "neither the layout's EP nor its EP&ESP group is hierarchical "
                                "on a selected tier"
                              : "no world tier selected or present (one node, or one rank "
                                "per node)");
    for (int i = 0; i < n_items; i++) {
        MPI_Comm group = MPI_COMM_NULL;
        char detail[160];
        fsmoe_tier tier = items[i].tier;
        if (items[i].size > 0) {
            /* groups of `size` tiling the tier: consecutive local ranks of a node (intra) or
             * consecutive nodes at one local rank (inter) */
            const comm_topology *t = s->topo;
            int d = items[i].size;
            int color = tier == FSMOE_TIER_INTRA
                            ? t->node * (t->gpus_per_node / d) + t->local / d
                            : t->local * (t->nodes / d) + t->node / d;
            if ((st = MPI_STATUS_OF(MPI_Comm_split(s->mcfg.world, color,
                                                   tier == FSMOE_TIER_INTRA ? t->local : t->node,
                                                   &group),
                                    err)))
                goto fail;
            snprintf(detail, sizeof detail,
                     tier == FSMOE_TIER_INTRA ? "groups of %d inside each node"
                                              : "groups of %d nodes, one rank per node",
                     d);
        } else if (items[i].group < 0) {
            group = s->topo->tier[tier];
            snprintf(detail, sizeof detail, "%s", tier == FSMOE_TIER_INTRA ? "inside each node"
                                                  : tier == FSMOE_TIER_INTER ? "one rank per node"
                                                                             : "all ranks");
        } else {
            if ((st = topology_group_comm(s->topo, s->mcfg.world, s->layout,
                                          (fsmoe_group)items[i].group, &group, err)))
                goto fail;
            snprintf(detail, sizeof detail, "the %s group of the layout",
                     fsmoe_group_name((fsmoe_group)items[i].group));
        }
        if (items[i].op == FSMOE_OP_ALLTOALL_2DH) {
            size_t len = strlen(detail);
            snprintf(detail + len, sizeof detail - len,
                     ", hierarchical (2DH): AllToAll inside each node, then across nodes among "
                     "equal local ranks");
        }
        double t0 = measure_now();
        st = suite_collective(s, &items[i], coll_op_find(items[i].op), tier, group, detail,
                              dsend, drecv, hsend, hrecv, pool, err);
        if (items[i].group >= 0 || items[i].size > 0)
            MPI_Comm_free(&group);
        if (st)
            goto fail;
        report_section_time(s->rep, measure_now() - t0);
    }
    double t0 = measure_now();
    fsmoe_tier saa_tier;
    if (suite_saa_plan(s, &saa_tier)) {
        MPI_Comm a2a = MPI_COMM_NULL, ag = MPI_COMM_NULL;
        if (!s->layout) {
            a2a = s->topo->tier[saa_tier];
            ag = s->topo->tier[FSMOE_TIER_INTRA];
        } else if ((st = topology_group_comm(s->topo, s->mcfg.world, s->layout,
                                             FSMOE_GROUP_EP_ESP, &a2a, err)) ||
                   (st = topology_group_comm(s->topo, s->mcfg.world, s->layout, FSMOE_GROUP_MP,
                                             &ag, err))) {
            if (a2a != MPI_COMM_NULL)
                MPI_Comm_free(&a2a);
            goto fail;
        }
        st = suite_saa(s, saa_tier, a2a, ag, dsend, drecv, pool, err);
        if (s->layout) {
            MPI_Comm_free(&a2a);
            MPI_Comm_free(&ag);
        }
        if (st)
            goto fail;
        report_section_time(s->rep, measure_now() - t0);
    }
    t0 = measure_now();
    if (o->ops[FSMOE_OP_GEMM]) {
        if ((st = suite_gemm(s, err)))
            goto fail;
        report_section_time(s->rep, measure_now() - t0);
    }
    t0 = measure_now();
    if (interference_wanted(s)) {
        if ((st = interference_run(s, dsend, drecv, hsend, hrecv, err)))
            goto fail;
        report_section_time(s->rep, measure_now() - t0);
    }
    t0 = measure_now();
    if (o->ops[FSMOE_OP_COPY]) {
        if ((st = suite_copy(s, dsend, drecv, hsend, hrecv, pool, err)))
            goto fail;
        report_section_time(s->rep, measure_now() - t0);
    }
fail:
    if (dsend)
        b->release(b, dsend);
    if (drecv)
        b->release(b, drecv);
    free(hsend);
    free(hrecv);
    return st;
}
