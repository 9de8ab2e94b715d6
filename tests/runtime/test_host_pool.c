/* Tests: the host backend's thread pool (runtime/host_pool.h): every iteration of a loop runs
 * exactly once whatever the thread count and the loop length; parts really run on the workers;
 * two threads looping on one pool at once both finish with every iteration done once (one of
 * them alone); small loops stay on the caller; bad FSMOE_HOST_SPIN_US is refused. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "host_pool.h"

typedef struct {
    atomic_int *count; /* per iteration: how often it ran */
    pthread_t *who;    /* per iteration: the thread that ran it */
    atomic_int first;  /* the first part to start sleeps, so that another thread takes the rest */
} loop_ctx;

static void count_range(const void *c, long lo, long hi)
{
    const loop_ctx *q = c;
    for (long i = lo; i < hi; i++) {
        atomic_fetch_add(&q->count[i], 1);
        q->who[i] = pthread_self();
    }
}

static void slow_first_range(const void *c, long lo, long hi)
{
    loop_ctx *q = (loop_ctx *)c;
    int expect = 0;
    if (atomic_compare_exchange_strong(&q->first, &expect, 1)) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    count_range(c, lo, hi);
}

static void check_once(loop_ctx *q, long n)
{
    for (long i = 0; i < n; i++)
        assert_int_equal(atomic_load(&q->count[i]), 1);
}

static void test_every_iteration_once(void **s)
{
    (void)s;
    const long lens[] = {0, 1, 2, 3, 5, 7, 64, 1000, 100003};
    for (int T = 1; T <= 4; T++) {
        host_pool *p = NULL;
        fsmoe_error err = {0};
        assert_int_equal(host_pool_create(T, 50, &p, &err), FSMOE_OK);
        assert_int_equal(host_pool_threads(p), T);
        for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
            long n = lens[k];
            loop_ctx q = {calloc((size_t)n + 1, sizeof(atomic_int)),
                          calloc((size_t)n + 1, sizeof(pthread_t)), 0};
            for (int rep = 0; rep < 3; rep++) {
                for (long i = 0; i < n; i++)
                    atomic_store(&q.count[i], 0);
                host_pool_for(p, n, 1e9, count_range, &q);
                check_once(&q, n);
            }
            free(q.count);
            free(q.who);
        }
        host_pool_free(p);
    }
}

static void test_workers_take_parts(void **s)
{
    (void)s;
    for (int spin = 0; spin <= 100; spin += 100) { /* asleep and spinning workers */
        host_pool *p = NULL;
        fsmoe_error err = {0};
        assert_int_equal(host_pool_create(2, spin, &p, &err), FSMOE_OK);
        const long n = 2;
        loop_ctx q = {calloc(n, sizeof(atomic_int)), calloc(n, sizeof(pthread_t)), 0};
        host_pool_for(p, n, 1e9, slow_first_range, &q);
        check_once(&q, n);
        /* the first part slept 50 ms: the other thread took the second */
        assert_false(pthread_equal(q.who[0], q.who[1]));
        /* a loop below HOST_POOL_MIN_WORK runs on the caller */
        atomic_store(&q.count[0], 0), atomic_store(&q.count[1], 0);
        atomic_store(&q.first, 0);
        host_pool_for(p, n, HOST_POOL_MIN_WORK / 2, slow_first_range, &q);
        check_once(&q, n);
        assert_true(pthread_equal(q.who[0], pthread_self()) &&
                    pthread_equal(q.who[1], pthread_self()));
        free(q.count);
        free(q.who);
        host_pool_free(p);
    }
}

typedef struct {
    host_pool *p;
    long n;
    loop_ctx q;
} caller_arg;

static void *caller(void *arg)
{
    caller_arg *a = arg;
    for (int rep = 0; rep < 200; rep++) {
        for (long i = 0; i < a->n; i++)
            atomic_store(&a->q.count[i], 0);
        host_pool_for(a->p, a->n, 1e9, count_range, &a->q);
        for (long i = 0; i < a->n; i++)
            if (atomic_load(&a->q.count[i]) != 1)
                return (void *)1;
    }
    return NULL;
}

static void test_two_callers(void **s)
{
    (void)s;
    host_pool *p = NULL;
    fsmoe_error err = {0};
    assert_int_equal(host_pool_create(3, 100, &p, &err), FSMOE_OK);
    caller_arg a[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        a[i].p = p;
        a[i].n = 5000 + 17 * i;
        a[i].q.count = calloc((size_t)a[i].n, sizeof(atomic_int));
        a[i].q.who = calloc((size_t)a[i].n, sizeof(pthread_t));
        atomic_init(&a[i].q.first, 0);
        assert_int_equal(pthread_create(&th[i], NULL, caller, &a[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        void *r = NULL;
        pthread_join(th[i], &r);
        assert_null(r);
        free(a[i].q.count);
        free(a[i].q.who);
    }
    host_pool_free(p);
}

/* A pool freed before its workers first looked at it (they must still see the stop). */
static void test_free_at_once(void **s)
{
    (void)s;
    for (int i = 0; i < 100; i++) {
        host_pool *p = NULL;
        fsmoe_error err = {0};
        assert_int_equal(host_pool_create(1 + i % 4, i % 2 ? 100 : 0, &p, &err), FSMOE_OK);
        host_pool_free(p);
    }
}

static void test_bad_settings(void **s)
{
    (void)s;
    host_pool *p = NULL;
    fsmoe_error err = {0};
    assert_int_equal(host_pool_create(0, 0, &p, &err), FSMOE_ERR_USAGE);
    assert_null(p);
    rt_backend *be = NULL;
    setenv("FSMOE_HOST_SPIN_US", "fast", 1);
    assert_int_equal(rt_backend_create("host", 2, &be, &err), FSMOE_ERR_USAGE);
    assert_null(be);
    assert_non_null(strstr(err.msg, "FSMOE_HOST_SPIN_US=fast"));
    setenv("FSMOE_HOST_SPIN_US", "0", 1);
    assert_int_equal(rt_backend_create("host", 2, &be, &err), FSMOE_OK);
    rt_backend_destroy(&be);
    unsetenv("FSMOE_HOST_SPIN_US");
    setenv("OMP_NUM_THREADS", "3", 1);
    assert_int_equal(host_pool_default_threads(), 3);
    unsetenv("OMP_NUM_THREADS");
    assert_true(host_pool_default_threads() >= 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_iteration_once),
        cmocka_unit_test(test_workers_take_parts),
        cmocka_unit_test(test_two_callers),
        cmocka_unit_test(test_free_at_once),
        cmocka_unit_test(test_bad_settings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
