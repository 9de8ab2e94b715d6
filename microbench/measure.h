/* Implements: the timing protocol of fsmoe-bench (FSMoE §6.2, nccl-tests): w warm-up runs,
 * then n timed runs, each started together on every rank (a world barrier) and timed from the
 * call to its completion; each rank keeps the median of its runs, and the ranks' medians are
 * combined as -a says (nccl-tests: 0 = rank 0, 1 = average (the default, as in nccl-tests:
 * the members of a collective finish together, and the average damps one rank's hiccup),
 * 2 = minimum, 3 = maximum).
 *
 * Two defences against a shared machine (other jobs, 4 ranks on 2 cores):
 *  - a run lasts at least min_sample_s: a fast operation is repeated back to back inside one
 *    timed run (as nccl-tests times its iterations) and the time divided, so millisecond
 *    scheduler hiccups average out; the repetition count comes from the warm-up and is
 *    agreed on by all ranks (measure_warm);
 *  - the caller sweeps the sizes n times, taking one run of every size per pass (suite.c), so
 *    a burst of foreign load that lasts seconds spoils one run of many sizes, which the median
 *    drops, instead of every run of a few neighbouring sizes.
 * Every rank calls these functions together, each with its own group's operation. On a
 * cluster whose ranks each have their own device (or cores) all groups of a tier run at once,
 * as in training (rounds = 1). Where the ranks on one machine outnumber its cores (the
 * emulated cluster: 4 ranks on 2 cores) running every group at once would time-slice them:
 * a run shorter than the scheduler's slice finishes at full speed, a longer one is cut
 * in pieces by the other group's ranks, so time grows faster than linearly with size and the
 * fits bend. Then the groups are measured in rounds (suite.c chooses them): the ranks of one
 * round run while every other rank waits asleep (measure_sleep_barrier: MPI_Ibarrier polled
 * with nanosleep, not a spinning MPI_Barrier, which with mpi_yield_when_idle still takes its
 * share of the cores), and a barrier over the measured group alone starts its runs
 * together. */
#ifndef BENCH_MEASURE_H
#define BENCH_MEASURE_H

#include <mpi.h>
#include <stddef.h>

#include "options.h" /* measure_average: the values of -a */
#include "status.h"


typedef struct {
    int warmup, iters;
    measure_average average;
    double min_sample_s; /* 0: one operation per timed run */
    MPI_Comm world;
    /* Set per sweep by suite.c: this rank's group (MPI_COMM_SELF for per-rank work), its
     * round and the number of rounds; sleep: wait for other rounds asleep (the machine is
     * oversubscribed) rather than in MPI_Barrier. */
    MPI_Comm group;
    int round, rounds, sleep;
    /* Set by suite.c where ranks outnumber cores: the CPU (an index into the CPUs this process
     * may use) this rank runs on while its sweep lasts; -1: the scheduler decides
     * (measure_pin). */
    int cpu;
} measure_cfg;

/* Pinning a measured rank to one CPU (Linux; elsewhere nothing happens). Where ranks outnumber
 * cores, the scheduler left to itself put both ranks of an inter-node pair on one core
 * now and then, and on an emulated cluster a transfer then took twice as long (the ranks, their
 * packets' processing and the other direction's all on one CPU): measured timings turned
 * bimodal. suite.c picks the CPU: a rank of a group that spans nodes runs on CPU (node mod C) —
 * on an emulated cluster (scripts/emucluster.sh) the CPU that handles the packets node i sends
 * — and the ranks of one node or of per-rank groups get one CPU each. measure_unpin restores
 * the affinity the process started with. Where the kernel refuses, the scheduler decides. */
void measure_pin(int cpu);
void measure_unpin(void);

/* glibc serves an allocation from a fresh mmap() above a threshold that moves with what the
 * process allocated before (up to 32 MiB), and returns freed memory above another: Open MPI's
 * nonblocking ReduceScatter allocates twice the message per call, so from 16 MB on every
 * call mapped and faulted in 32 MB (5 ms more: a step in the line, r2 0.90 on the emulated
 * cluster), and where the step fell depended on the process's history. This fixes the
 * threshold above the largest temporary a collective of `largest` bytes may ask for and keeps
 * freed memory, so that every call reuses the same pages (glibc only; elsewhere nothing). */
void measure_steady_allocator(size_t largest);

/* A barrier over comm that sleeps while it waits (MPI_Ibarrier, MPI_Test, nanosleep). */
fsmoe_status measure_sleep_barrier(MPI_Comm comm, fsmoe_error *err);

/* One complete, synchronised run of the operation. */
typedef fsmoe_status (*measure_fn)(void *ctx, fsmoe_error *err);

/* Warm-up runs, then the repetitions per timed run, the same on every rank. */
fsmoe_status measure_warm(const measure_cfg *cfg, measure_fn fn, void *ctx, int *reps,
                          fsmoe_error *err);
/* How many runs measure_warm makes: -w, or 1 with -w 0 when the repetitions must be found. */
int measure_warm_runs(const measure_cfg *cfg);
/* One timed run (after a barrier): seconds per operation on this rank. */
fsmoe_status measure_sample(const measure_cfg *cfg, measure_fn fn, void *ctx, int reps,
                            double *seconds, fsmoe_error *err);
/* This rank's median of n runs (sorts t), combined over ranks by cfg->average; the same on
 * every rank. */
fsmoe_status measure_combine(const measure_cfg *cfg, double *t, int n, double *seconds,
                             fsmoe_error *err);

/* Combines one value per row over the ranks as cfg->average says (measure_combine for n rows
 * at once); the same on every rank. */
fsmoe_status measure_combine_rows(const measure_cfg *cfg, const double *mine, double *out, int n,
                                  fsmoe_error *err);

/* ---- how many runs a size gets: the stopping rule and the outlier re-measure ----
 * A shared machine gives bursts of foreign load and scheduler hiccups; a fixed number of
 * runs is either too many on a quiet machine or too few on a busy one. So every size starts
 * with min_runs runs (in passes over the sizes, see above), and then, in further passes over
 * just the sizes that need them:
 *  1. outliers: the sizes whose median lies more than `outlier` (relative) off a robust line
 *     through all sizes (fit_robust_rel_residuals) are measured again: their runs are
 *     dropped and min_runs fresh ones taken, at most once per size. The new median replaces
 *     the old one whatever it turns out to be: nothing is dropped from the fit, and a size
 *     that is off the line for a real reason stays off;
 *  2. confidence: while the line through the medians does not yet fix its slope (β, what the
 *     profile is for) to ±precision at MEASURE_CONFIDENCE (fit_slope_rel_halfwidth), or fits
 *     them with an r² below r2_threshold (the profile's own quality flag), a size gets more
 *     runs (up to max_runs) while the distribution-free MEASURE_CONFIDENCE interval of its
 *     median (order statistics, measure_median_ci_rank) is wider than ±precision of the
 *     median on some rank. Once the line is good, runs stop: the unspent budget goes to the
 *     sections after (rule 3), where the noisy ones need it — on a shared host the link-bound
 *     inter-node lines settle in their first passes more often than the memory-bound
 *     node-local ones and the copy. The median, not the minimum, is kept: the minimum rewards
 *     a lucky run and drifts down with the number of runs, so the sizes measured more often
 *     would be biased;
 *  3. budget: the passes after the first min_runs may take extra_time times the first
 *     passes, plus what the sections before left unspent. Each run is costed from the medians
 *     (calibrated on the first passes, whose wall time includes barriers, sleeping rounds and
 *     checks); the budget goes to the sizes farthest off the line first, then to those with
 *     the widest intervals. A fresh set, once started, is completed, and nothing is judged
 *     while one is under way. A re-measure is costed at the line's time for its size, and a
 *     gross outlier (measure_gross: a median at least twice its line or at most half of it,
 *     what a stall of the machine leaves: a GEMM size of an emulated cluster's profile once
 *     took 9x its neighbours, and its least-squares line had α = 65 ms and r² 0.04) is
 *     measured again whatever the budget: one fresh set, at most once per size.
 * Every decision is agreed on by all ranks (allreduce), so they run the same passes. */
#define MEASURE_CONFIDENCE 0.90

/* Whether a relative residual (fit_robust_rel_residuals: of the median) is gross: the median at
 * least twice its line or at most half of it. */
int measure_gross(double rel);

typedef struct {
    int min_runs, max_runs;
    double precision; /* relative half-width of the median's interval (0: stop at min_runs) */
    double outlier;   /* relative residual that gets a size re-measured (0: never) */
    double extra_time;
    double r2_threshold; /* rule 2 goes on below it (0: the slope alone decides) */
} measure_rule;

/* The largest k (1-based) such that [v_(k), v_(n+1-k)] of n sorted runs holds the median of
 * the distribution with probability >= conf: 1 - 2 P(Binomial(n, 1/2) <= k-1) >= conf. 0 where
 * even [min, max] falls short (n < 5 for 0.9). */
int measure_median_ci_rank(int n, double conf);
/* That interval's wider side over the median (v sorted): INFINITY where k is 0 or the median
 * is 0. */
double measure_median_ci_rel(const double *sorted, int n, double conf);

/* What to do with a row in the next pass (the agreed value is the maximum over ranks). */
enum { MEASURE_DONE = 0, MEASURE_MORE = 1, MEASURE_AGAIN = 2 };

/* One sweep's runs and decisions. Arrays have n entries; t has n x cap. */
typedef struct {
    int n, cap;
    double *t;        /* (n, cap) this rank's runs, seconds per operation */
    int *runs;        /* runs held; -1: nothing to measure at this size */
    int *remeasured;  /* 1: its first runs were dropped for a fresh set (rule 1) */
    double *first_rel; /* the residual that got it re-measured */
    double *x;        /* the row's size (bytes or MACs) */
    double *y;        /* combined medians (measure_refine_next) */
    double *ci;       /* every rank's widest relative interval (measure_refine_next) */
    double *rel;      /* relative residuals from the robust line, where rule 1 looked */
    double slope_rel; /* how well the medians fix the slope (rule 2; INFINITY: not known) */
    double r2;        /* the least-squares r² of the medians (rule 2; 0: not fitted) */
    int *want;        /* MEASURE_* per row */
    double start_s, budget_s; /* set by the caller: when the first passes ended, and the
                               * time the further passes may take */
    double first_s;   /* set by the caller: the first passes' wall time, which calibrates
                       * the cost of a further pass (barriers, rounds, checks included) */
    double calib;     /* wall seconds per second of operation (measure_refine_next) */
    int passes;       /* passes after the first min_runs */
} measure_refine;

fsmoe_status measure_refine_init(measure_refine *r, int n, int cap, fsmoe_error *err);
void measure_refine_free(measure_refine *r);
/* Adds one run of row i (ignored when the row is full). */
void measure_refine_add(measure_refine *r, int i, double seconds);
/* Rules 1 and 2 on this rank's view (y, ci and runs filled): sets want[] (every candidate,
 * before the budget) and returns how many rows want a run. Pure, no MPI (unit-tested). */
int measure_refine_decide(const measure_rule *rule, measure_refine *r, fsmoe_error *err);
/* Collective: this rank's medians and intervals, combined; the decision, agreed; rule 3
 * (reps: repetitions per timed run of each row; rounds: cfg's); rows wanting MEASURE_AGAIN
 * lose their runs. *count: rows to run in the next pass (0: the sweep is done). */
fsmoe_status measure_refine_next(const measure_cfg *cfg, const measure_rule *rule,
                                 measure_refine *r, const int *reps, int *count,
                                 fsmoe_error *err);

/* Monotonic wall clock in seconds. */
double measure_now(void);

/* Median of n values (sorts v). */
double measure_median(double *v, int n);

#endif
