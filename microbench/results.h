/* Implements: the measured rows of one fsmoe-bench run and the α-β fit per (operation, tier)
 * over them (design.md §3), one per (operation, tier, group size), and the interference
 * section's result (interference.h). Rows are the same on every rank (times are combined
 * across ranks, wrong counts summed), so every rank can fit; rank 0 writes. */
#ifndef BENCH_RESULTS_H
#define BENCH_RESULTS_H

#include <stddef.h>

#include "cluster.h"
#include "fit.h"

typedef struct {
    fsmoe_op op;
    fsmoe_tier tier;
    int ranks;        /* group size (1 for local operations) */
    double n;         /* the cost model's size: bytes, or MACs for gemm */
    size_t count;     /* nccl-tests' count column (gemm: m·n·k) */
    int m, nn, k;     /* gemm shape */
    int shape_m, shape_h; /* gemm: the expert shape M:H the row belongs to (0: none) */
    double seconds;   /* median over runs */
    double algbw;     /* GB/s (gemm: GFLOP/s) */
    double busbw;     /* GB/s */
    long long wrong;  /* elements that differ from the exact expected output, all ranks */
} bench_row;

typedef struct {
    int present;
    fit_result fit;
    int ranks;
    int shape_m, shape_h; /* gemm: the expert shape fitted (cluster.h); 0: none */
    int low_r2;
    fit_pattern pattern; /* what the residuals show (fit.h) */
    fsmoe_status status; /* of the fit (e.g. a single size) */
    char msg[256];
} bench_fit;

/* Group sizes (or GEMM shapes) an (op, tier) is measured at besides its widest, last (suite.c
 * measures a tier at a few sizes, the planner scales between them; the GEMM at each expert
 * shape of --gemm-shapes, six on a GPU: libfsmoe/cost.h). */
#define BENCH_MAX_NARROWER 8

/* How a world AllToAll and a GEMM slow each other down on one rank (interference.h): the
 * times of each repetition (seconds, the last rank's) and its factors, and the factors the
 * profile gets (their medians over the repetitions); and how much longer a small blocking
 * AllToAll takes after computation than back to back (per call, the mean over the ranks), the
 * profile's sync latency (the median over the repetitions). */
#define BENCH_INTF_MAX_REPS 32

typedef struct {
    int together_first;      /* its phases' order: 1 together, GEMMs, AllToAlls; 0 reversed */
    double T_a, T_g;         /* the K AllToAlls alone, the J GEMMs alone */
    double t_a, t_g;         /* each of them while the other runs (from a common start) */
    double comm_slowdown, compute_slowdown;
    double sync_after_s;     /* one small AllToAll after G GEMMs (per call, mean over ranks) */
    double sync_alone_s;     /* the same back to back */
    double sync_s;           /* the difference, at least 0 (interference_sync) */
} bench_intf_rep;

typedef struct {
    int measured;            /* the section ran */
    int ranks;
    size_t bytes;            /* the world AllToAll's n */
    int K, J;                /* AllToAlls and GEMMs per phase */
    int T, M, H;             /* the GEMM (T x M)(M x H) */
    int reps;
    bench_intf_rep rep[BENCH_INTF_MAX_REPS];
    double comm_slowdown, compute_slowdown;
    size_t sync_bytes;       /* the sync phases' small AllToAll's n */
    int L, G;                /* sync rounds, GEMMs before each round's AllToAll */
    double sync_s;           /* the profile's sync_latency_s: median of the repetitions' */
    double sync_after_s, sync_alone_s; /* medians of the repetitions' */
    double sync_gemm_s;      /* one round's G GEMMs (median, from T_g) */
    long long wrong;         /* wrong values in the checked concurrent run, all ranks */
    char measured_how[256];  /* the profile's interference.measured */
} bench_interference;

/* Whether the factors go to the profile: measured, and the concurrent run's outputs right (or
 * not checked, -c 0): a broken overlap gives no factors. */
static inline int bench_intf_usable(const bench_interference *x)
{
    return x->measured && x->wrong == 0;
}

typedef struct {
    bench_row *rows;
    int n_rows, cap;
    bench_interference interference;
    bench_fit fits[FSMOE_OP_COUNT][FSMOE_TIER_COUNT]; /* the widest group measured */
    /* the narrower groups of the same (op, tier), ascending by ranks */
    bench_fit narrower[FSMOE_OP_COUNT][FSMOE_TIER_COUNT][BENCH_MAX_NARROWER];
    int n_narrower[FSMOE_OP_COUNT][FSMOE_TIER_COUNT];
} bench_results;

fsmoe_status results_add(bench_results *r, const bench_row *row, fsmoe_error *err);
void results_free(bench_results *r);

/* Fits every (op, tier, ranks) that has rows; flags r² < threshold. Fails only on memory. */
fsmoe_status results_fit(bench_results *r, double r2_threshold, fsmoe_error *err);

/* Wrong values over every row and the interference section. */
long long results_wrong(const bench_results *r);

/* Whether row belongs to fit f of (op, tier): the same group size and GEMM shape. */
int results_row_in(const bench_row *row, int op, int tier, const bench_fit *f);

#endif
