/* Implements: fsmoe-bench's command line (style.md "Command lines"; nccl-tests' flags -b -e -f
 * -i -n -w -d -a -c keep their meaning). Parsing never exits: it returns FSMOE_ERR_USAGE with one
 * message, and main prints it with the usage text and exits 2. */
#ifndef BENCH_OPTIONS_H
#define BENCH_OPTIONS_H

#include <stdio.h>

#include "cluster.h"
#include "comm_dtype.h"
#include "status.h"

#define BENCH_MAX_SHAPES 16
#define BENCH_MAX_SIZES 4096
/* The profile's name field (libfsmoe cluster.h: char name[64]) and the atomic writer's path
 * (atomic_file.h: char path[1024]). */
#define BENCH_NAME_MAX 63
#define BENCH_PATH_MAX 1000

/* How -a combines the ranks' medians (measure.h). */
typedef enum { MEASURE_RANK0 = 0, MEASURE_AVG, MEASURE_MIN, MEASURE_MAX } measure_average;

/* --comm-timeout's default: fsmoe-run's (FSMOE_COMM_TIMEOUT_DEFAULT_S, comm/mpi_coll.h; the
 * parser stays free of MPI headers so that it builds for the fuzzer alone). */
#define BENCH_COMM_TIMEOUT_DEFAULT_S 30.0

typedef enum { BACKEND_MPI = 0, BACKEND_NCCL } bench_backend_kind;

typedef struct {
    int M, H; /* expert GEMMs: (T×M)·(M×H) and (T×H)·(H×M) */
} gemm_shape;

typedef struct {
    /* sizes for communication and copy, in bytes (nccl-tests -b -e -f -i) */
    long long min_bytes, max_bytes, step_bytes;
    double step_factor; /* > 1: multiply instead of add */
    /* also small_min_bytes, doubling, below min_bytes (0: none; options_comm_sizes) */
    long long small_min_bytes;
    /* GEMM sweep: activation elements T·M from gemm_min to gemm_max step gemm_step */
    long long gemm_min, gemm_max, gemm_step;
    gemm_shape shapes[BENCH_MAX_SHAPES];
    int n_shapes; /* 0: the backend's default list */
    int iters, warmup;     /* iters: the timed runs every size gets (-n) */
    /* The stopping rule and the outlier re-measure (measure.h "how many runs a size gets"). */
    int max_iters;         /* at most this many timed runs per size */
    double precision;      /* more runs until the median's 90 % interval is within +-this */
    double outlier;        /* measure a size again when its median is this far off the line */
    double extra_time;     /* refining takes at most this fraction of the first passes' time */
    comm_dtype dtype;
    comm_redop redop;
    measure_average average;
    int check;             /* verify results (-c 1) */
    int interference;      /* measure how communication and computation slow each other down
                              (interference.h; --interference 1) */
    int gpus_per_node;     /* 0: detect from node placement */
    int dp, mp, ep, esp;   /* layout flags (0: the common layout's value, design.md §2) */
    int layout_given;      /* any of them given: measure that layout's logical groups */
    int ops[FSMOE_OP_COUNT];     /* selected operations */
    int tiers[FSMOE_TIER_COUNT]; /* selected tiers (local is always on for gemm/copy) */
    int every_tier;        /* --tiers or --all-tiers given: every selected op on every selected
                              tier; otherwise only the (op, tier) pairs the planner reads */
    double min_sample_s;   /* shortest timed run (fast operations are repeated) */
    int group_rounds;      /* groups of a tier measured in this many rounds (0: auto, one
                              round unless ranks outnumber the cores they share; measure.h) */
    int huge_pages;        /* mpi backend: ask for transparent huge pages on the buffers */
    long long rotate_bytes; /* each buffer role is a pool this large; successive runs use
                               successive slots of it (0: one buffer, as nccl-tests) */
    int blas_threads;      /* 0: cores per node / ranks per node */
    double r2_threshold;
    bench_backend_kind backend;
    const char *output;    /* -o: cluster profile */
    const char *json;
    const char *plot;
    const char *name;      /* profile name; default: from the output file name */
    int progress;          /* -1 auto (stderr is a terminal), 0 off, 1 on */
    double comm_timeout_s; /* a collective without progress this long fails (0 = never) */
    int help;
} bench_options;

void options_defaults(bench_options *o);
/* The operations measured by default (FSMOE_OP_COUNT flags): all but alltoall_2dh. */
void options_default_ops(int *ops);
fsmoe_status options_parse(int argc, char **argv, bench_options *o, fsmoe_error *err);
void options_usage(FILE *f);

/* The communication and copy sizes in bytes, ascending: small_min_bytes, 2·small_min_bytes, ...
 * while below min_bytes, then min_bytes .. max_bytes (-i or -f); returns how many (fills at most
 * max; out may be NULL to count). Stops counting past BENCH_MAX_SIZES.
 * Why the small sizes: a plan moves much less than FSMoE's 1-24 MB in places — a small model's
 * AllToAll chunks, the optimizer's norm sums, and element-wise work (layer norms, residual
 * additions: tens to hundreds of KB per pass, priced from the copy's points, planner/workload.h)
 * — and a line fitted over megabytes says little about them: on the emulated 2 x 2 cluster
 * (4 ranks on 2 cores) the world AllToAll's α came out 2.9 ms from 1-24 MB where a 16 KB
 * AllToAll took 1.3 ms, and the copy's α 179 µs where whole passes took tens of µs. */
int options_comm_sizes(const bench_options *o, long long *out, int max);

/* The bytes one rank allocates for the measurement (communication pools and host copies, SAA's
 * pools, GEMM matrices of the given shapes) when ranks_per_node ranks share a node and the
 * largest group has group_ranks members; main compares it with the machine's memory before
 * anything is allocated. */
double options_rank_bytes(const bench_options *o, int group_ranks, const gemm_shape *shapes,
                          int n_shapes);

#endif
