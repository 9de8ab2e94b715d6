/* Implements: what the benchmark programs share: a monotonic clock and a comparison for qsort of
 * the timed repetitions. */
#ifndef FSMOE_TESTS_BENCH_CLOCK_H
#define FSMOE_TESTS_BENCH_CLOCK_H

#include <time.h>

static inline double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
