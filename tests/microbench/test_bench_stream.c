/* Implements: tests of the host streams and events (microbench/stream_thread.c): jobs on one
 * stream run in order on another thread; an event makes a second stream wait for the first;
 * a failure is reported by the next sync and then cleared. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "stream_thread.h"

typedef struct {
    int *log;
    atomic_int *pos;
    int value;
    int sleep_ms;
} log_job;

static fsmoe_status log_run(void *arg, fsmoe_error *err)
{
    (void)err;
    log_job *j = arg;
    if (j->sleep_ms) {
        struct timespec ts = {0, j->sleep_ms * 1000000L};
        nanosleep(&ts, NULL);
    }
    j->log[atomic_fetch_add(j->pos, 1)] = j->value;
    return FSMOE_OK;
}

static fsmoe_status fail_run(void *arg, fsmoe_error *err)
{
    (void)arg;
    return fsmoe_fail(err, FSMOE_ERR_IO, "job failed on purpose");
}

static void test_in_order(void **state)
{
    (void)state;
    stream_thread *s = NULL;
    assert_int_equal(stream_thread_init(&s, NULL), FSMOE_OK);
    int log[600];
    atomic_int pos = 0;
    for (int i = 0; i < 600; i++) { /* more than the queue holds: submit must wait */
        log_job j = {log, &pos, i, 0};
        assert_int_equal(stream_submit(s, log_run, &j, sizeof j, NULL), FSMOE_OK);
    }
    assert_int_equal(stream_sync(s, NULL), FSMOE_OK);
    assert_int_equal(atomic_load(&pos), 600);
    for (int i = 0; i < 600; i++)
        assert_int_equal(log[i], i);
    stream_thread_free(&s);
    assert_null(s);
}

/* Stream 1 sleeps, then logs 1 and records e; stream 2 waits for e and logs 2. Without the
 * event stream 2 would log first. */
static void test_event_orders_streams(void **state)
{
    (void)state;
    stream_thread *s1 = NULL, *s2 = NULL;
    stream_events *ev = NULL;
    assert_int_equal(stream_thread_init(&s1, NULL), FSMOE_OK);
    assert_int_equal(stream_thread_init(&s2, NULL), FSMOE_OK);
    assert_int_equal(stream_events_init(&ev, 4, NULL), FSMOE_OK);
    for (int round = 0; round < 3; round++) {
        int log[2];
        atomic_int pos = 0;
        log_job a = {log, &pos, 1, 30}, b = {log, &pos, 2, 0};
        assert_int_equal(stream_submit(s1, log_run, &a, sizeof a, NULL), FSMOE_OK);
        assert_int_equal(stream_record(s1, ev, 3, NULL), FSMOE_OK);
        assert_int_equal(stream_wait(s2, ev, 3, NULL), FSMOE_OK);
        assert_int_equal(stream_submit(s2, log_run, &b, sizeof b, NULL), FSMOE_OK);
        assert_int_equal(stream_sync(s2, NULL), FSMOE_OK);
        assert_int_equal(stream_sync(s1, NULL), FSMOE_OK);
        assert_int_equal(log[0], 1);
        assert_int_equal(log[1], 2);
    }
    fsmoe_error err = {0};
    assert_int_equal(stream_record(s1, ev, 4, &err), FSMOE_ERR_INTERNAL);
    stream_thread_free(&s1);
    stream_thread_free(&s2);
    stream_events_free(&ev);
}

static void test_failure_is_sticky_until_sync(void **state)
{
    (void)state;
    stream_thread *s = NULL;
    assert_int_equal(stream_thread_init(&s, NULL), FSMOE_OK);
    int log[2];
    atomic_int pos = 0;
    log_job j = {log, &pos, 7, 0};
    assert_int_equal(stream_submit(s, fail_run, &j, sizeof j, NULL), FSMOE_OK);
    assert_int_equal(stream_submit(s, log_run, &j, sizeof j, NULL), FSMOE_OK);
    fsmoe_error err = {0};
    assert_int_equal(stream_sync(s, &err), FSMOE_ERR_IO);
    assert_string_equal(err.msg, "job failed on purpose");
    assert_int_equal(atomic_load(&pos), 1); /* later jobs still ran (events must complete) */
    assert_int_equal(stream_sync(s, NULL), FSMOE_OK);
    /* Stream 0 (NULL) runs on the caller, at once. */
    assert_int_equal(stream_submit(NULL, log_run, &j, sizeof j, NULL), FSMOE_OK);
    assert_int_equal(atomic_load(&pos), 2);
    assert_int_equal(stream_submit(NULL, fail_run, &j, sizeof j, &err), FSMOE_ERR_IO);
    stream_thread_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_order),
        cmocka_unit_test(test_event_orders_streams),
        cmocka_unit_test(test_failure_is_sticky_until_sync),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
