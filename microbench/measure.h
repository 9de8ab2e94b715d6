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
 * Every rank calls these functions together, each with its own group's operation, so all
 * groups of a tier run at once (as in training). */
#ifndef BENCH_MEASURE_H
#define BENCH_MEASURE_H

#include <mpi.h>
#include <stddef.h>

#include "status.h"

typedef enum { MEASURE_RANK0 = 0, MEASURE_AVG, MEASURE_MIN, MEASURE_MAX } measure_average;

typedef struct {
    int warmup, iters;
    measure_average average;
    double min_sample_s; /* 0: one operation per timed run */
    MPI_Comm world;
} measure_cfg;

/* One complete, synchronised run of the operation. */
typedef fsmoe_status (*measure_fn)(void *ctx, fsmoe_error *err);

/* Warm-up runs, then the repetitions per timed run, the same on every rank. */
fsmoe_status measure_warm(const measure_cfg *cfg, measure_fn fn, void *ctx, int *reps,
                          fsmoe_error *err);
/* One timed run (after a barrier): seconds per operation on this rank. */
fsmoe_status measure_sample(const measure_cfg *cfg, measure_fn fn, void *ctx, int reps,
                            double *seconds, fsmoe_error *err);
/* This rank's median of n runs (sorts t), combined over ranks by cfg->average; the same on
 * every rank. */
fsmoe_status measure_combine(const measure_cfg *cfg, double *t, int n, double *seconds,
                             fsmoe_error *err);

/* Monotonic wall clock in seconds. */
double measure_now(void);

/* Median of n values (sorts v). */
double measure_median(double *v, int n);

#endif
