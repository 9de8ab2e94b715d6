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

/* Monotonic wall clock in seconds. */
double measure_now(void);

/* Median of n values (sorts v). */
double measure_median(double *v, int n);

#endif
