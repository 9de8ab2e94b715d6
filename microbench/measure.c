/* Implements: warm-ups, timed runs, combining ranks, median (measure.h). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_SET (Linux) */
#include "measure.h"

#include <dirent.h>
#include <malloc.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "fit.h"
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

fsmoe_status measure_combine_rows(const measure_cfg *cfg, const double *mine, double *out, int n,
                                  fsmoe_error *err)
{
    int size = 1;
    MPI_Comm_size(cfg->world, &size);
    const char *what = "combining the ranks' times (MPI_Allreduce)";
    fsmoe_status st = FSMOE_OK;
    MPI_Request r;
    switch (cfg->average) {
    case MEASURE_RANK0:
        for (int i = 0; i < n; i++)
            out[i] = mine[i];
        MPI_CHECK(MPI_Ibcast(out, n, MPI_DOUBLE, 0, cfg->world, &r), err);
        st = fsmoe_mpi_wait(&r, 1, cfg->world, "rank 0's time (MPI_Bcast)", err);
        break;
    case MEASURE_AVG:
        st = fsmoe_mpi_allreduce(cfg->world, mine, out, n, MPI_DOUBLE, MPI_SUM, what, err);
        for (int i = 0; i < n && !st; i++)
            out[i] /= size;
        break;
    case MEASURE_MIN:
        st = fsmoe_mpi_allreduce(cfg->world, mine, out, n, MPI_DOUBLE, MPI_MIN, what, err);
        break;
    case MEASURE_MAX:
        st = fsmoe_mpi_allreduce(cfg->world, mine, out, n, MPI_DOUBLE, MPI_MAX, what, err);
        break;
    }
    return st;
}

fsmoe_status measure_combine(const measure_cfg *cfg, double *t, int n, double *seconds,
                             fsmoe_error *err)
{
    double mine = measure_median(t, n);
    return measure_combine_rows(cfg, &mine, seconds, 1, err);
}

void measure_steady_allocator(size_t largest)
{
#if defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD)
    /* A temporary of 2 x the message, with room to spare (a group's whole output). */
    size_t cap = (size_t)1 << 30, want = largest > cap / 8 ? cap : 8 * largest;
    if (want < ((size_t)64 << 20))
        want = (size_t)64 << 20;
    (void)mallopt(M_MMAP_THRESHOLD, (int)want);
    (void)mallopt(M_TRIM_THRESHOLD, (int)(want > cap / 2 ? cap : 2 * want));
#else
    (void)largest;
#endif
}

/* ---- the stopping rule and the outlier re-measure ---- */

int measure_gross(double rel)
{
    return rel >= 0.5 || rel <= -1.0; /* median ≥ 2x its line, or ≤ half of it */
}

int measure_median_ci_rank(int n, double conf)
{
    if (n < 1)
        return 0;
    /* P(B <= j) summed in logs (n may be large): P(B = i) = C(n, i) / 2^n. */
    double cdf = 0.0, ln2n = n * log(2.0);
    int best = 0;
    for (int k = 1; 2 * k <= n + 1; k++) {
        int j = k - 1;
        cdf += exp(lgamma(n + 1.0) - lgamma(j + 1.0) - lgamma(n - j + 1.0) - ln2n);
        if (1.0 - 2.0 * cdf >= conf - 1e-12)
            best = k;
        else
            break;
    }
    return best;
}

double measure_median_ci_rel(const double *sorted, int n, double conf)
{
    int k = measure_median_ci_rank(n, conf);
    if (k == 0)
        return INFINITY;
    double med = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    if (med <= 0.0)
        return INFINITY;
    double lo = med - sorted[k - 1], hi = sorted[n - k] - med;
    return (lo > hi ? lo : hi) / med;
}

fsmoe_status measure_refine_init(measure_refine *r, int n, int cap, fsmoe_error *err)
{
    memset(r, 0, sizeof *r);
    size_t m = (size_t)(n > 0 ? n : 1);
    r->n = n;
    r->cap = cap > 0 ? cap : 1;
    r->t = calloc(m * (size_t)r->cap, sizeof *r->t);
    r->runs = calloc(m, sizeof *r->runs);
    r->remeasured = calloc(m, sizeof *r->remeasured);
    r->first_rel = calloc(m, sizeof *r->first_rel);
    r->x = calloc(m, sizeof *r->x);
    r->y = calloc(m, sizeof *r->y);
    r->ci = calloc(m, sizeof *r->ci);
    r->rel = calloc(m, sizeof *r->rel);
    r->want = calloc(m, sizeof *r->want);
    if (!r->t || !r->runs || !r->remeasured || !r->first_rel || !r->x || !r->y || !r->ci ||
        !r->rel || !r->want) {
        measure_refine_free(r);
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for %d x %d runs", n, cap);
    }
    return FSMOE_OK;
}

void measure_refine_free(measure_refine *r)
{
    free(r->t);
    free(r->runs);
    free(r->remeasured);
    free(r->first_rel);
    free(r->x);
    free(r->y);
    free(r->ci);
    free(r->rel);
    free(r->want);
    memset(r, 0, sizeof *r);
}

void measure_refine_add(measure_refine *r, int i, double seconds)
{
    if (r->runs[i] >= 0 && r->runs[i] < r->cap)
        r->t[(size_t)i * r->cap + r->runs[i]++] = seconds;
}

int measure_refine_decide(const measure_rule *rule, measure_refine *r, fsmoe_error *err)
{
    int fresh = 0, valid = 0, count = 0;
    for (int i = 0; i < r->n; i++) {
        r->want[i] = MEASURE_DONE;
        if (r->runs[i] < 0)
            continue;
        valid++;
        if (r->runs[i] < rule->min_runs) {
            r->want[i] = MEASURE_MORE;
            fresh++;
        }
    }
    if (fresh)
        return fresh; /* no size is judged while some median stands on fewer runs */
    /* The valid rows, packed: rule 1 judges them, rule 2 asks how well they fix the slope. */
    double *x = malloc((size_t)(valid ? valid : 1) * sizeof *x);
    double *y = malloc((size_t)(valid ? valid : 1) * sizeof *y);
    double *rel = malloc((size_t)(valid ? valid : 1) * sizeof *rel);
    int packed = x && y && rel; /* without memory the points stay as measured */
    if (packed) {
        int k = 0;
        for (int i = 0; i < r->n; i++)
            if (r->runs[i] >= 0) {
                x[k] = r->x[i];
                y[k] = r->y[i];
                k++;
            }
    }
    /* Rule 1 (outliers). A failure (e.g. every size equal) leaves nothing to judge. */
    if (packed && rule->outlier > 0.0 && valid >= 4 &&
        fit_robust_rel_residuals(x, y, valid, rel, err) == FSMOE_OK) {
        int k = 0;
        for (int i = 0; i < r->n; i++) {
            if (r->runs[i] < 0)
                continue;
            r->rel[i] = rel[k++];
            if (!r->remeasured[i] && fabs(r->rel[i]) > rule->outlier)
                r->want[i] = MEASURE_AGAIN;
        }
    }
    /* Rule 2 (confidence) on the others, while the line is not good yet: its slope not known
     * to +-precision, or its r² below the threshold. */
    fit_result f;
    fsmoe_error ignored = {0};
    int fitted = packed && valid >= 2 && fit_line(x, y, valid, &f, NULL, &ignored) == FSMOE_OK;
    r->slope_rel = fitted ? fit_slope_rel_halfwidth(&f, MEASURE_CONFIDENCE) : INFINITY;
    r->r2 = fitted ? f.r2 : 0.0;
    free(x);
    free(y);
    free(rel);
    int line_good = rule->precision > 0.0 && r->slope_rel <= rule->precision &&
                    r->r2 >= rule->r2_threshold;
    for (int i = 0; i < r->n; i++) {
        if (r->runs[i] >= 0 && r->want[i] == MEASURE_DONE && r->runs[i] < rule->max_runs &&
            rule->precision > 0.0 && !line_good && !(r->ci[i] <= rule->precision))
            r->want[i] = MEASURE_MORE;
        count += r->want[i] != MEASURE_DONE;
    }
    return count;
}

fsmoe_status measure_refine_next(const measure_cfg *cfg, const measure_rule *rule,
                                 measure_refine *r, const int *reps, int *count,
                                 fsmoe_error *err)
{
    int n = r->n;
    *count = 0;
    double *mine = malloc((size_t)(n + 1) * sizeof *mine);
    double *wide = malloc((size_t)(n + 1) * sizeof *wide);
    fsmoe_status st = FSMOE_OK;
    if (!mine || !wide) {
        st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for %d rows", n);
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        double *v = &r->t[(size_t)i * r->cap];
        int k = r->runs[i] > 0 ? r->runs[i] : 0;
        mine[i] = measure_median(v, k); /* sorts: the order of runs carries nothing */
        wide[i] = k ? measure_median_ci_rel(v, k, MEASURE_CONFIDENCE) : INFINITY;
        if (isinf(wide[i]))
            wide[i] = 1e300; /* MPI_MAX over infinities is fine, but keep it finite */
    }
    wide[n] = measure_now() - r->start_s; /* the budget is judged on the slowest clock */
    if ((st = measure_combine_rows(cfg, mine, r->y, n, err)) ||
        (st = fsmoe_mpi_allreduce(cfg->world, MPI_IN_PLACE, wide, n + 1, MPI_DOUBLE, MPI_MAX,
                                  "the widest interval (MPI_Allreduce)", err)))
        goto fail;
    for (int i = 0; i < n; i++)
        r->ci[i] = wide[i];
    double elapsed = wide[n];
    fsmoe_error ignored = {0};
    measure_refine_decide(rule, r, &ignored);
    if ((st = fsmoe_mpi_allreduce(cfg->world, MPI_IN_PLACE, r->want, n, MPI_INT, MPI_MAX,
                                  "the rows to measure again (MPI_Allreduce)", err)))
        goto fail;
    /* Rule 3, on the agreed values (medians and wants are the same on every rank). The cost
     * of one run of row i: repetitions x median x rounds, times the calibration. */
    int rounds = cfg->rounds > 1 ? cfg->rounds : 1;
    if (r->calib <= 0.0) {
        double op = 0.0;
        for (int i = 0; i < n; i++)
            if (r->runs[i] > 0)
                op += (double)r->runs[i] * (reps ? reps[i] : 1) * r->y[i] * rounds;
        r->calib = op > 0.0 && r->first_s > 0.0 ? r->first_s / op : 1.0;
    }
    double left = r->budget_s - elapsed;
    for (int i = 0; i < n; i++)
        if (r->want[i] == MEASURE_MORE && r->runs[i] < rule->min_runs)
            left -= r->calib * (reps ? reps[i] : 1) * r->y[i] * rounds; /* a fresh set: kept */
    /* The budget goes first to re-measuring the sizes farthest off the line (a fresh set
     * each), then to one more run for the sizes with the widest intervals; granted rows are
     * marked negative while the search goes on. */
    for (int pass = 0; pass < 2; pass++) {
        int kind = pass == 0 ? MEASURE_AGAIN : MEASURE_MORE;
        for (;;) {
            int pick = -1;
            for (int i = 0; i < n; i++) {
                if (r->want[i] != kind || r->runs[i] < rule->min_runs)
                    continue;
                double key = kind == MEASURE_AGAIN ? fabs(r->rel[i]) : r->ci[i];
                double best = pick < 0 ? 0.0
                              : kind == MEASURE_AGAIN ? fabs(r->rel[pick]) : r->ci[pick];
                if (pick < 0 || key > best)
                    pick = i;
            }
            if (pick < 0)
                break;
            /* a size off the line costs what the line says it takes (rel is relative to its
             * median: line = y·(1 − rel)), not its stalled median */
            double y = r->y[pick];
            if (kind == MEASURE_AGAIN && r->rel[pick] < 1.0)
                y *= 1.0 - r->rel[pick];
            double one = r->calib * (reps ? reps[pick] : 1) * y * rounds *
                         (kind == MEASURE_AGAIN ? rule->min_runs : 1);
            if (one <= left || (kind == MEASURE_AGAIN && measure_gross(r->rel[pick]))) {
                left -= one;
                r->want[pick] = -kind;
            } else {
                r->want[pick] = MEASURE_DONE;
            }
        }
    }
    for (int i = 0; i < n; i++)
        if (r->want[i] < 0)
            r->want[i] = -r->want[i];
    /* Agreed once more: should a last bit of a combined median differ between ranks and tip a
     * choice, every rank still runs the same rows (the union). */
    if ((st = fsmoe_mpi_allreduce(cfg->world, MPI_IN_PLACE, r->want, n, MPI_INT, MPI_MAX,
                                  "the rows to measure again (MPI_Allreduce)", err)))
        goto fail;
    for (int i = 0; i < n; i++) {
        if (r->want[i] == MEASURE_AGAIN) {
            r->first_rel[i] = r->rel[i];
            r->remeasured[i] = 1;
            r->runs[i] = 0;
        }
        *count += r->want[i] != MEASURE_DONE;
    }
    if (*count)
        r->passes++;
fail:
    free(mine);
    free(wide);
    return st;
}
