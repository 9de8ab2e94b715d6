/* Implements: the host backend's one thread pool (backend_host.c): T - 1 workers that every
 * thread of the process (the caller's default stream and each stream thread) shares for its
 * parallel loops, in place of a pool per calling thread.
 *
 * Why not OpenMP: an OpenMP runtime keeps one team per thread that opens a parallel region.
 * fsmoe-run computes on its main thread (attention, layer norms, head) and on the MoE layer's
 * compute stream thread (the experts), and copies on its communication stream threads: with
 * --threads 2 that made four teams for two cores. libgomp then stops spinning between regions
 * (more threads than cores) and every one of the step's thousands of loops woke its workers
 * through the kernel: on a 2-core VM a 2-thread tiny-moe step ran 25-35 % slower than a 1-thread
 * one, a quarter of its time in futex wake-ups. Here one pool serves every thread, its workers
 * spin a short while after each loop before they sleep, and a loop that finds the pool busy
 * (another stream's loop runs) runs on its caller alone: two streams never put more threads to
 * work than the pool has.
 *
 * A loop over [0, n) is cut into at most T contiguous parts, the same cut for every run of the
 * same n; parts are taken by whichever thread is free, so each iteration must write only its own
 * outputs (then the results do not depend on the thread count or on who ran what). */
#ifndef RT_HOST_POOL_H
#define RT_HOST_POOL_H

#include "status.h"

typedef struct host_pool host_pool;

/* The loop body over iterations [lo, hi). */
typedef void (*host_range_fn)(const void *ctx, long lo, long hi);

/* threads >= 1 (1: no workers, every loop on its caller). Workers that find no loop spin for
 * spin_us microseconds before they sleep (0: sleep at once). */
fsmoe_status host_pool_create(int threads, int spin_us, host_pool **out, fsmoe_error *err);
void host_pool_free(host_pool *p);
int host_pool_threads(const host_pool *p);

/* Runs fn over [0, n). `work` is the loop's cost in about element operations: below
 * HOST_POOL_MIN_WORK (waking a worker costs more) the caller runs it alone. */
#define HOST_POOL_MIN_WORK 16384.0
void host_pool_for(host_pool *p, long n, double work, host_range_fn fn, const void *ctx);

/* The threads a backend gets when the caller names none: OMP_NUM_THREADS where it is set to a
 * positive count (the convention the scripts and tests already follow), else the CPUs this
 * process may run on. */
int host_pool_default_threads(void);

#endif
