/* Implements: the host backend's thread pool (host_pool.h).
 *
 * One loop runs on the pool at a time; its owner publishes it in `ticket`, one 64-bit word:
 * the loop's generation (32 bits), its number of parts (16) and the next unclaimed part (16).
 * A thread claims a part by a compare-and-swap that raises the index while the generation is
 * the one it woke for and parts remain. Whoever holds a claim may read the loop's fields (fn,
 * ctx, n): the owner does not return, and so does not publish another loop, before every part
 * is counted done. A worker waits for a new generation spinning, then asleep on a condition
 * variable; the owner signals sleepers only (their count and the ticket are sequentially
 * consistent, so a worker going to sleep either sees the new loop or is seen asleep). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "host_pool.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POOL_MAX_THREADS 1024 /* parts fit the ticket's 16 bits */

struct host_pool {
    int threads, spin_us;
    pthread_t *th;
    int n_th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int busy;     /* an owner holds the pool */
    atomic_int sleepers; /* workers waiting on cv */
    atomic_int stop;
    _Atomic uint64_t ticket;
    atomic_int done; /* parts of the current loop finished */
    uint32_t gen;    /* the owner's last generation (under busy) */
    host_range_fn fn;
    const void *ctx;
    long n;
};

#define T_GEN(t) ((uint32_t)((t) >> 32))
#define T_PARTS(t) ((int)(((t) >> 16) & 0xffff))
#define T_NEXT(t) ((int)((t)&0xffff))

static inline void pool_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static long long pool_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Claims and runs parts of generation g until none is left. */
static void pool_run_parts(host_pool *p, uint32_t g)
{
    for (;;) {
        uint64_t t = atomic_load_explicit(&p->ticket, memory_order_acquire);
        if (T_GEN(t) != g || T_NEXT(t) >= T_PARTS(t))
            return;
        if (!atomic_compare_exchange_weak_explicit(&p->ticket, &t, t + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        long k = T_NEXT(t), parts = T_PARTS(t);
        long lo = p->n / parts * k + (k < p->n % parts ? k : p->n % parts);
        long hi = lo + p->n / parts + (k < p->n % parts);
        p->fn(p->ctx, lo, hi);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
    }
}

static void *pool_worker(void *arg)
{
    host_pool *p = arg;
    uint32_t seen = 0; /* the generation at creation: a loop (or the stop) published before
                        * this thread first looks is still new to it */
    for (;;) {
        uint64_t t = atomic_load_explicit(&p->ticket, memory_order_acquire);
        if (T_GEN(t) == seen && p->spin_us > 0) {
            long long until = pool_now_ns() + 1000LL * p->spin_us;
            for (unsigned i = 1; T_GEN(t) == seen; i++) {
                pool_relax();
                if ((i & 63) == 0 && pool_now_ns() > until)
                    break;
                t = atomic_load_explicit(&p->ticket, memory_order_acquire);
            }
        }
        if (T_GEN(t) == seen) {
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (T_GEN(t = atomic_load(&p->ticket)) == seen)
                pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop))
            return NULL;
        seen = T_GEN(t);
        pool_run_parts(p, seen);
    }
}

/* Publishes a new generation with `parts` parts and wakes the sleepers. */
static void pool_publish(host_pool *p, int parts)
{
    p->gen++;
    atomic_store(&p->ticket, (uint64_t)p->gen << 32 | (uint64_t)parts << 16);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}

static int pool_cpus(void)
{
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
#endif
    return 1;
}

int host_pool_default_threads(void)
{
    const char *e = getenv("OMP_NUM_THREADS");
    if (e && *e) {
        char *end;
        long v = strtol(e, &end, 10);
        if (*end == '\0' && v >= 1 && v <= POOL_MAX_THREADS)
            return (int)v;
    }
    int c = pool_cpus();
    return c < POOL_MAX_THREADS ? c : POOL_MAX_THREADS;
}

fsmoe_status host_pool_create(int threads, int spin_us, host_pool **out, fsmoe_error *err)
{
    *out = NULL;
    if (threads < 1 || threads > POOL_MAX_THREADS)
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "threads: %d is not in 1..%d", threads,
                          POOL_MAX_THREADS);
    host_pool *p = calloc(1, sizeof *p);
    if (!p)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "thread pool: out of memory");
    p->threads = threads;
    /* spinning only pays where every thread has a CPU of its own */
    p->spin_us = threads <= pool_cpus() ? spin_us : 0;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (threads > 1 && !(p->th = calloc((size_t)threads - 1, sizeof *p->th))) {
        host_pool_free(p);
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "thread pool: out of memory");
    }
    for (int i = 0; i < threads - 1; i++) {
        int rc = pthread_create(&p->th[i], NULL, pool_worker, p);
        if (rc != 0) {
            host_pool_free(p);
            return fsmoe_fail(err, FSMOE_ERR_NOMEM, "thread pool: cannot start thread %d of %d: %s",
                              i + 2, threads, strerror(rc));
        }
        p->n_th++;
    }
    *out = p;
    return FSMOE_OK;
}

void host_pool_free(host_pool *p)
{
    if (!p)
        return;
    if (p->n_th > 0) {
        atomic_store(&p->stop, 1);
        pool_publish(p, 0);
        for (int i = 0; i < p->n_th; i++)
            pthread_join(p->th[i], NULL);
    }
    free(p->th);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int host_pool_threads(const host_pool *p) { return p ? p->threads : 1; }

void host_pool_for(host_pool *p, long n, double work, host_range_fn fn, const void *ctx)
{
    if (n <= 0)
        return;
    int parts = p ? (p->threads < n ? p->threads : (int)n) : 1;
    int idle = 0;
    if (parts <= 1 || work < HOST_POOL_MIN_WORK || p->n_th == 0 ||
        !atomic_compare_exchange_strong(&p->busy, &idle, 1)) {
        fn(ctx, 0, n); /* small, no workers, or another stream's loop holds the pool */
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    pool_publish(p, parts);
    pool_run_parts(p, p->gen);
    while (atomic_load_explicit(&p->done, memory_order_acquire) < parts)
        pool_relax();
    atomic_store_explicit(&p->busy, 0, memory_order_release);
}
