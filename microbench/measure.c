/* Implements: warm-ups, timed runs, combining ranks, median (measure.h). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_SET (Linux) */
#include "measure.h"

#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"
#include "mpi_coll.h"

double measure_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#ifdef CPU_SET
/* The process's affinity before the first pin; one per process (the pins are per sweep and
 * always undone before the next). */
static cpu_set_t measure_start_set;
static int measure_start_saved, measure_pinned;

/* Every thread of this process (the stream threads of SAA included) gets `set`. */
static int measure_set_all(const cpu_set_t *set)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return sched_setaffinity(0, sizeof *set, set) == 0;
    int ok = 1;
    for (struct dirent *e; (e = readdir(d));) {
        char *end;
        long tid = strtol(e->d_name, &end, 10);
        if (*end || tid <= 0)
            continue;
        ok &= sched_setaffinity((pid_t)tid, sizeof *set, set) == 0;
    }
    closedir(d);
    return ok;
}

void measure_pin(int cpu)
{
    if (cpu < 0)
        return;
    if (!measure_start_saved) {
        if (sched_getaffinity(0, sizeof measure_start_set, &measure_start_set) != 0)
            return; /* cannot tell which CPUs exist: leave it to the scheduler */
        measure_start_saved = 1;
    }
    int n = CPU_COUNT(&measure_start_set);
    if (n <= 0)
        return;
    int want = cpu % n, seen = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &measure_start_set) || seen++ != want)
            continue;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        /* A refusal (a cpuset that forbids it) leaves the scheduler in charge, as before. */
        measure_pinned = 1;
        if (!measure_set_all(&one))
            measure_unpin();
        return;
    }
}

void measure_unpin(void)
{
    if (measure_pinned && measure_start_saved)
        measure_set_all(&measure_start_set);
    measure_pinned = 0;
}
#else
void measure_pin(int cpu)
{
    (void)cpu;
}

void measure_unpin(void) {}
#endif

static int measure_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double measure_median(double *v, int n)
{
    if (n <= 0)
        return 0.0;
    qsort(v, (size_t)n, sizeof *v, measure_cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The barrier that starts the timed runs: it spins like MPI_Barrier (the ranks must leave it
 * together, a nap would add its length to the skew) but under the communication layer's
 * watchdog (mpi_coll.h), so that a rank that died or stalled ends the run instead of hanging
 * every other rank here. */
static fsmoe_status measure_spin_barrier(MPI_Comm comm, const char *what, fsmoe_error *err)
{
    MPI_Request r;
    MPI_CHECK(MPI_Ibarrier(comm, &r), err);
    double limit = fsmoe_comm_timeout(), start = measure_now();
    for (unsigned i = 1;; i++) {
        int done = 0;
        MPI_CHECK(MPI_Test(&r, &done, MPI_STATUS_IGNORE), err);
        if (done)
            return FSMOE_OK;
        if (limit > 0 && (i & 1023) == 0 && measure_now() - start > limit) {
            int me = 0;
            MPI_Comm_rank(MPI_COMM_WORLD, &me);
            return fsmoe_fail(err, FSMOE_ERR_TIMEOUT,
                              "rank %d: %s made no progress for %.3g s: a peer rank died, "
                              "stalled or cannot be reached (--comm-timeout sets the limit)",
                              me, what, limit);
        }
    }
}

fsmoe_status measure_sleep_barrier(MPI_Comm comm, fsmoe_error *err)
{
    /* Naps doubling to 1 ms (mpi_coll.h): the ranks waiting for another round to finish
     * measuring must not take its cores. */
    return fsmoe_mpi_barrier_sleeping(comm, "the barrier between measuring rounds", err);
}

/* Every rank: wait for the previous round (asleep where the machine is oversubscribed). */
static fsmoe_status measure_round_barrier(const measure_cfg *cfg, fsmoe_error *err)
{
    if (cfg->sleep)
        return measure_sleep_barrier(cfg->world, err);
    return measure_spin_barrier(cfg->world, "the barrier between measuring rounds", err);
}

static int measure_rounds(const measure_cfg *cfg)
{
    return cfg->rounds > 1 ? cfg->rounds : 1;
}

int measure_warm_runs(const measure_cfg *cfg)
{
    return cfg->warmup > 0 ? cfg->warmup : cfg->min_sample_s > 0.0 ? 1 : 0;
}

fsmoe_status measure_warm(const measure_cfg *cfg, measure_fn fn, void *ctx, int *reps,
                          fsmoe_error *err)
{
    fsmoe_status st;
    double tw = 0.0;
    *reps = 1;
    int runs = measure_warm_runs(cfg);
    for (int r = 0; r < measure_rounds(cfg); r++) {
        if (cfg->rounds > 1 || cfg->sleep) {
            if ((st = measure_round_barrier(cfg, err)))
                return st;
        }
        if (r != cfg->round && cfg->rounds > 1)
            continue;
        for (int i = 0; i < runs; i++) {
            double t0 = measure_now();
            if ((st = fn(ctx, err)))
                return st;
            tw = measure_now() - t0;
        }
    }
    if (cfg->min_sample_s <= 0.0)
        return FSMOE_OK;
    if ((cfg->rounds > 1 || cfg->sleep) && (st = measure_round_barrier(cfg, err)))
        return st;
    double slowest = tw;
    if ((st = fsmoe_mpi_allreduce(cfg->world, &tw, &slowest, 1, MPI_DOUBLE, MPI_MAX,
                                  "the slowest warm-up run (MPI_Allreduce)", err)))
        return st;
    if (slowest < cfg->min_sample_s)
        *reps = slowest > 0.0 ? (int)(cfg->min_sample_s / slowest) + 1 : 100;
    if (*reps > 100)
        *reps = 100;
    return FSMOE_OK;
}

fsmoe_status measure_sample(const measure_cfg *cfg, measure_fn fn, void *ctx, int reps,
                            double *seconds, fsmoe_error *err)
{
    fsmoe_status st;
    if (cfg->rounds <= 1 && !cfg->sleep) {
        if ((st = measure_spin_barrier(cfg->world, "the barrier before a timed run", err)))
            return st;
    } else {
        for (int r = 0; r < measure_rounds(cfg); r++) {
            if ((st = measure_round_barrier(cfg, err)))
                return st;
            if (r == cfg->round || cfg->rounds <= 1)
                break;
        }
        /* The measured ranks start together: a (short) spinning barrier among them only. */
        if (cfg->group != MPI_COMM_NULL && cfg->group != MPI_COMM_SELF &&
            (st = measure_spin_barrier(cfg->group, "the barrier before a timed run", err)))
            return st;
    }
    double t0 = measure_now();
    for (int r = 0; r < reps; r++)
        if ((st = fn(ctx, err)))
            return st;
    *seconds = (measure_now() - t0) / reps;
    if (cfg->rounds > 1) {
        /* Sleep through the rounds after this rank's, so that every rank leaves together. */
        for (int r = cfg->round + 1; r < cfg->rounds; r++)
            if ((st = measure_round_barrier(cfg, err)))
                return st;
    }
    return FSMOE_OK;
}

fsmoe_status measure_combine(const measure_cfg *cfg, double *t, int n, double *seconds,
                             fsmoe_error *err)
{
    int size = 1;
    MPI_Comm_size(cfg->world, &size);
    double mine = measure_median(t, n), combined = mine;
    const char *what = "combining the ranks' times (MPI_Allreduce)";
    fsmoe_status st = FSMOE_OK;
    MPI_Request r;
    switch (cfg->average) {
    case MEASURE_RANK0:
        MPI_CHECK(MPI_Ibcast(&combined, 1, MPI_DOUBLE, 0, cfg->world, &r), err);
        st = fsmoe_mpi_wait(&r, 1, cfg->world, "rank 0's time (MPI_Bcast)", err);
        break;
    case MEASURE_AVG:
        st = fsmoe_mpi_allreduce(cfg->world, &mine, &combined, 1, MPI_DOUBLE, MPI_SUM, what, err);
        combined /= size;
        break;
    case MEASURE_MIN:
        st = fsmoe_mpi_allreduce(cfg->world, &mine, &combined, 1, MPI_DOUBLE, MPI_MIN, what, err);
        break;
    case MEASURE_MAX:
        st = fsmoe_mpi_allreduce(cfg->world, &mine, &combined, 1, MPI_DOUBLE, MPI_MAX, what, err);
        break;
    }
    if (st)
        return st;
    *seconds = combined;
    return FSMOE_OK;
}
