/* Implements: the cluster profile schema (clusters/<name>.yaml, design.md §3) and its loader.
 *
 * A profile holds, per (operation, tier, group size), the fitted line t = alpha_s + beta·n, its
 * r², the group size (`ranks`) it was measured with, and optionally the measured points (n, t)
 * so that a planner may interpolate instead of using the line (MoNTA's efficiency curves). An
 * (op, tier) may be measured at several group sizes (e.g. the inter-node AllToAll over 2, 4 and
 * 6 nodes); the cost model (cost.h) picks or scales the one a plan's group needs. A GEMM may be
 * measured at several expert shapes (`shape: [M, H]`); the cost model picks the one for the
 * shape it costs. Each (op, tier, ranks, shape) appears at most once; entries of an (op, tier)
 * are ordered by ranks, then shape. n follows nccl-tests:
 * AllToAll = one rank's buffer bytes, AllGather = gathered output bytes, ReduceScatter = input
 * bytes, AllReduce = buffer bytes, SAA = one rank's AllToAll buffer bytes, copy = bytes,
 * GEMM = multiply-accumulates m·n·k (beta then is seconds per MAC). */
#ifndef FSMOE_CLUSTER_H
#define FSMOE_CLUSTER_H

#include <stddef.h>

#include "names.h"
#include "parallel.h"
#include "status.h"

#define FSMOE_CLUSTER_VERSION 1

typedef enum {
    FSMOE_OP_ALLTOALL = 0,
    FSMOE_OP_ALLTOALL_2DH, /* the hierarchical AllToAll (libfsmoe/a2a_2dh.h), same n as AllToAll */
    FSMOE_OP_ALLGATHER,
    FSMOE_OP_REDUCESCATTER,
    FSMOE_OP_ALLREDUCE,
    FSMOE_OP_SAA,   /* Parm's simultaneous AllToAll (EP&ESP) + AllGather (MP), measured as one */
    FSMOE_OP_GEMM,
    FSMOE_OP_COPY,  /* device-to-device memory copy */
    FSMOE_OP_COUNT
} fsmoe_op;

typedef struct {
    double n;       /* bytes (MACs for gemm) */
    double seconds;
} fsmoe_point;

typedef struct {
    int present;
    double alpha_s;
    double beta_s;     /* seconds per byte (per MAC for gemm) */
    double r2;
    int ranks;         /* group size it was measured with (1 for local ops) */
    /* gemm only: the expert shape M:H it was measured at (fsmoe-bench's (T×M)(M×H) and
     * (T×H)(H×M) sweep); 0, 0: one line for every shape. GEMM efficiency depends on the shape
     * (a CPU core runs 256:1024 at about twice the rate of 64:256), so a profile may hold one
     * entry per shape and the cost model uses the one for the shape it costs (cost.h). */
    int shape_m, shape_h;
    int low_r2;        /* r2 < the profile's r2_threshold */
    char derived[256]; /* non-empty: not measured; how it was obtained */
    int n_points;
    fsmoe_point *points; /* sorted by n, owned */
    int line;          /* 1-based source line of the entry, for messages */
} fsmoe_cost_entry;

typedef struct {
    char name[64];
    char source[512];
    char notes[4096]; /* the profile's `notes` (how it was measured; empty when absent) */
    char device[64];
    /* memory of one device (one rank), bytes: what a layout must fit in (fsmoe-plan --search);
     * 0 when the profile does not say (`device_memory_bytes`, optional, between the limits
     * below: 1 MiB and 1 PiB; fsmoe-bench writes no key for a size outside them) */
#define FSMOE_MIN_DEVICE_MEMORY 1048576.0
#define FSMOE_MAX_DEVICE_MEMORY 1125899906842624.0
    double device_memory_bytes;
    /* threads per rank the GEMM and copy lines were measured with on a CPU (`compute_threads`,
     * optional, 1..FSMOE_MAX_COMPUTE_THREADS; 0 when the profile does not say, as on a GPU):
     * fsmoe-run on the host backend says when it computes on another number (its lines
     * then do not hold) */
#define FSMOE_MAX_COMPUTE_THREADS 1024
    int compute_threads;
    int nodes;
    int gpus_per_node;
    double r2_threshold;
    /* Interference between communication and computation on one rank (the profile's optional
     * `interference:` mapping): a collective in its bandwidth phase progresses comm_slowdown
     * times slower while a GEMM runs beside it, and a GEMM compute_slowdown times slower while
     * a collective moves data beside it (both ≥ 1; 1, 1 when absent: they do not interfere,
     * the premise of the papers' overlap). fsmoe-bench measures them as the simulator applies
     * them (sim.h); measured: how (a string, may be empty).
     * sync_s (`sync_latency_s`, optional, 0 when absent, at most 1 s): how much longer than
     * alone a blocking collective takes when the ranks come to it from computation, as every
     * collective of a training step does — they arrive at different times (their computation
     * and the machine's scheduling differ) and each waits for the last; the cost model adds it
     * to the α of every collective of a group of more than one rank (workload.h).
     * sync_growth (`sync_growth`, optional, 0 when absent, at most 10): how much the ranks'
     * arrival skew grows per second of computation since their previous collective (seconds per
     * second; sync_s is then the skew where there was none): the simulator adds it to a
     * collective's latency (sim.h), the per-layer closed forms do not. Calibrated from a
     * training run (fsmoe-run --calibrate).
     * sync_growth_from_s (`sync_growth_from_s`, optional, 0 when absent, at most 1000 s): the
     * segment the growth starts at: the skew is sync_s + sync_growth·max(0, segment − this).
     * fsmoe-run --calibrate sets it to the shortest segment its fit saw (or where the fitted
     * line crosses zero, if later), so the line is not extrapolated below its points: a
     * collective right after another one pays the skew measured at the shortest segment. */
#define FSMOE_MAX_SLOWDOWN 100.0  /* the largest factor the profile accepts (at least 1) */
#define FSMOE_MAX_SYNC_S 1.0       /* the largest sync latency it accepts, seconds */
#define FSMOE_MAX_SYNC_GROWTH 10.0 /* the largest skew growth it accepts, seconds per second */
#define FSMOE_MAX_SYNC_GROWTH_FROM_S 1000.0 /* the latest segment growth may start at, s */
    struct {
        int present;
        double comm_slowdown, compute_slowdown;
        double sync_s, sync_growth, sync_growth_from_s;
        char measured[512]; /* fsmoe-bench's description, and --calibrate's after it */
    } interference;
    /* Ranks that share one host's cores (the profile's optional `host:` mapping; absent: a
     * device, or at least a core, per rank): `ranks` ranks of the cluster run on one host of
     * `cores` cores (an emulated cluster: its nodes are namespaces of one machine), and its
     * computation lines (gemm, copy) were measured with `ranks_at_once` of them computing at
     * once. A rank computes only part of a training step and waits on collectives the rest,
     * so a computing rank shares the cores with fewer than all of them: the simulator scales
     * compute by the share of a core it gets against the share the lines were measured with
     * (sim.h, host sharing). fsmoe-bench writes it where ranks outnumber a host's cores. */
#define FSMOE_MAX_HOST_RANKS 4096
    struct {
        int present;
        int ranks, cores, ranks_at_once;
    } host;
    /* The widest group measured per (op, tier): the entry with the most ranks (the only one in
     * a profile with one size per op and tier). */
    fsmoe_cost_entry ops[FSMOE_OP_COUNT][FSMOE_TIER_COUNT];
    /* The other group sizes of the same (op, tier), ascending by ranks, all narrower than
     * ops[op][tier]; owned (with their points). Read them through fsmoe_cluster_entries. */
    fsmoe_cost_entry *narrower[FSMOE_OP_COUNT][FSMOE_TIER_COUNT];
    int n_narrower[FSMOE_OP_COUNT][FSMOE_TIER_COUNT];
    /* where the sizes a layout is derived from were read (for messages made after loading,
     * e.g. the common layout's ep = nodes not dividing a model's experts) */
    struct {
        fsmoe_mark nodes, gpus_per_node, ops;
    } at;
} fsmoe_cluster;

/* The operations' names, {name, fsmoe_op} rows ended by {NULL, 0}: what profiles, fsmoe-bench's
 * --ops and every message spell. */
extern const fsmoe_name fsmoe_op_names[];
const char *fsmoe_op_name(fsmoe_op op); /* "alltoall", "alltoall_2dh", ..., "gemm", "copy" */
int fsmoe_op_from_name(const char *s);  /* -1 when unknown */

fsmoe_status fsmoe_cluster_load(const char *path, fsmoe_cluster *out, fsmoe_error *err);
/* The same on a document in memory; `name` stands for the path in messages. */
fsmoe_status fsmoe_cluster_parse(const char *name, const char *text, size_t len,
                                 fsmoe_cluster *out, fsmoe_error *err);
void fsmoe_cluster_free(fsmoe_cluster *c); /* frees points; safe on a zeroed struct */

/* Every entry of (op, tier), ascending by ranks (the narrower ones, then ops[op][tier]): writes
 * at most max pointers to out and returns how many entries there are (0 when absent). */
int fsmoe_cluster_entries(const fsmoe_cluster *c, fsmoe_op op, fsmoe_tier tier,
                          const fsmoe_cost_entry **out, int max);

/* Adds e (its points owned from now on) as one more group size of (op, tier): it becomes
 * ops[op][tier] when it is wider than the entry there, else joins the narrower ones. Fails
 * with FSMOE_ERR_VALUE when that (op, tier, ranks) is already present (nothing taken) and
 * FSMOE_ERR_NOMEM. Used by the loader and by writers that build a profile in memory. */
fsmoe_status fsmoe_cluster_add(fsmoe_cluster *c, fsmoe_op op, fsmoe_tier tier,
                               const fsmoe_cost_entry *e, fsmoe_error *err);

/* The order of an (op, tier)'s entries: by ranks, then by shape (gemm); <0, 0, >0. */
int fsmoe_cost_entry_order(const fsmoe_cost_entry *a, const fsmoe_cost_entry *b);

#endif
