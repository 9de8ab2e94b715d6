/* Implements: host streams (worker threads with an in-order job queue) and events
 * (stream_thread.h). */
#include "stream_thread.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#endif

#define STREAM_QUEUE 256

typedef struct {
    stream_job_fn fn;
    _Alignas(max_align_t) unsigned char arg[STREAM_JOB_ARG_MAX];
} stream_job;

struct stream_thread {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv_work; /* queue not empty or stopping */
    pthread_cond_t cv_done; /* a job finished */
    stream_job queue[STREAM_QUEUE];
    uint64_t head, tail;    /* submitted = tail, finished = head */
    int running;            /* the job at head is executing */
    int stop;
    fsmoe_error first_err;  /* sticky until the next sync */
};

struct stream_events {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n;
    uint64_t *recorded;  /* records submitted */
    uint64_t *completed; /* highest record that completed */
};

fsmoe_status stream_events_init(stream_events **out, int n, fsmoe_error *err)
{
    stream_events *ev = calloc(1, sizeof *ev);
    if (!ev)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for %d events", n);
    ev->recorded = calloc((size_t)n, sizeof *ev->recorded);
    ev->completed = calloc((size_t)n, sizeof *ev->completed);
    if (!ev->recorded || !ev->completed) {
        free(ev->recorded);
        free(ev->completed);
        free(ev);
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for %d events", n);
    }
    ev->n = n;
    pthread_mutex_init(&ev->mu, NULL);
    pthread_cond_init(&ev->cv, NULL);
    *out = ev;
    return FSMOE_OK;
}

void stream_events_free(stream_events **pev)
{
    stream_events *ev = pev ? *pev : NULL;
    if (!ev)
        return;
    pthread_mutex_destroy(&ev->mu);
    pthread_cond_destroy(&ev->cv);
    free(ev->recorded);
    free(ev->completed);
    free(ev);
    *pev = NULL;
}

static void *stream_main(void *arg)
{
    stream_thread *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (s->head == s->tail && !s->stop)
            pthread_cond_wait(&s->cv_work, &s->mu);
        if (s->head == s->tail && s->stop)
            break;
        stream_job *job = &s->queue[s->head % STREAM_QUEUE];
        s->running = 1;
        pthread_mutex_unlock(&s->mu);
        /* Jobs after a failure still run: an event another stream waits on must complete. */
        fsmoe_error e = {0};
        fsmoe_status st = job->fn(job->arg, &e);
        pthread_mutex_lock(&s->mu);
        if (st != FSMOE_OK && s->first_err.status == FSMOE_OK) {
            s->first_err = e;
            s->first_err.status = st;
        }
        s->running = 0;
        s->head++;
        pthread_cond_broadcast(&s->cv_done);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

fsmoe_status stream_thread_init(stream_thread **out, fsmoe_error *err)
{
    stream_thread *s = calloc(1, sizeof *s);
    if (!s)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for a stream");
    /* Write every page of the job ring now: calloc may return pages the process never touched,
     * and a slot deeper than the queue has been so far would then fault in the middle of a
     * training step (how deep the queue gets depends on timing). */
    volatile unsigned char *ring = (volatile unsigned char *)s->queue;
    for (size_t i = 0; i < sizeof s->queue; i += 1024)
        ring[i] = 0;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv_work, NULL);
    pthread_cond_init(&s->cv_done, NULL);
    int rc = pthread_create(&s->thread, NULL, stream_main, s);
    if (rc != 0) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv_work);
        pthread_cond_destroy(&s->cv_done);
        free(s);
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "cannot start a stream thread: %s",
                          strerror(rc));
    }
    *out = s;
    return FSMOE_OK;
}

void stream_thread_free(stream_thread **ps)
{
    stream_thread *s = ps ? *ps : NULL;
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_signal(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv_work);
    pthread_cond_destroy(&s->cv_done);
    free(s);
    *ps = NULL;
}

fsmoe_status stream_submit(stream_thread *s, stream_job_fn fn, const void *arg, size_t arg_size,
                           fsmoe_error *err)
{
    if (arg_size > STREAM_JOB_ARG_MAX)
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "stream job argument of %zu bytes (max %d)",
                          arg_size, STREAM_JOB_ARG_MAX);
    if (!s) {
        /* Stream 0: the caller's thread, blocking. */
        _Alignas(max_align_t) unsigned char copy[STREAM_JOB_ARG_MAX];
        memcpy(copy, arg, arg_size);
        return fn(copy, err);
    }
    pthread_mutex_lock(&s->mu);
    while (s->tail - s->head >= STREAM_QUEUE)
        pthread_cond_wait(&s->cv_done, &s->mu);
    stream_job *job = &s->queue[s->tail % STREAM_QUEUE];
    job->fn = fn;
    memcpy(job->arg, arg, arg_size);
    s->tail++;
    pthread_cond_signal(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
    return FSMOE_OK;
}

/* Waits (s->mu held) until s has no job queued or running. */
static void wait_drained(stream_thread *s)
{
    while (s->head != s->tail)
        pthread_cond_wait(&s->cv_done, &s->mu);
}

fsmoe_status stream_sync(stream_thread *s, fsmoe_error *err)
{
    if (!s)
        return FSMOE_OK;
    pthread_mutex_lock(&s->mu);
    wait_drained(s);
    fsmoe_error e = s->first_err;
    memset(&s->first_err, 0, sizeof s->first_err);
    pthread_mutex_unlock(&s->mu);
    if (e.status != FSMOE_OK) {
        if (err)
            *err = e;
        return e.status;
    }
    return FSMOE_OK;
}

typedef struct {
    stream_events *ev;
    int e;
    uint64_t target;
} event_arg;

static fsmoe_status event_complete(void *arg, fsmoe_error *err)
{
    (void)err;
    event_arg *a = arg;
    pthread_mutex_lock(&a->ev->mu);
    if (a->ev->completed[a->e] < a->target)
        a->ev->completed[a->e] = a->target;
    pthread_cond_broadcast(&a->ev->cv);
    pthread_mutex_unlock(&a->ev->mu);
    return FSMOE_OK;
}

static fsmoe_status event_await(void *arg, fsmoe_error *err)
{
    (void)err;
    event_arg *a = arg;
    pthread_mutex_lock(&a->ev->mu);
    while (a->ev->completed[a->e] < a->target)
        pthread_cond_wait(&a->ev->cv, &a->ev->mu);
    pthread_mutex_unlock(&a->ev->mu);
    return FSMOE_OK;
}

fsmoe_status stream_record(stream_thread *s, stream_events *ev, int e, fsmoe_error *err)
{
    if (e < 0 || e >= ev->n)
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "event %d out of range (%d events)", e, ev->n);
    pthread_mutex_lock(&ev->mu);
    event_arg a = {ev, e, ++ev->recorded[e]};
    pthread_mutex_unlock(&ev->mu);
    return stream_submit(s, event_complete, &a, sizeof a, err);
}

fsmoe_status stream_wait(stream_thread *s, stream_events *ev, int e, fsmoe_error *err)
{
    if (e < 0 || e >= ev->n)
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "event %d out of range (%d events)", e, ev->n);
    pthread_mutex_lock(&ev->mu);
    event_arg a = {ev, e, ev->recorded[e]};
    pthread_mutex_unlock(&ev->mu);
    return stream_submit(s, event_await, &a, sizeof a, err);
}

typedef struct {
    stream_thread *other;
} idle_arg;

static fsmoe_status await_idle(void *arg, fsmoe_error *err)
{
    (void)err;
    stream_thread *o = ((idle_arg *)arg)->other;
    pthread_mutex_lock(&o->mu);
    wait_drained(o);
    pthread_mutex_unlock(&o->mu);
    return FSMOE_OK;
}

fsmoe_status stream_wait_idle(stream_thread *s, stream_thread *other, fsmoe_error *err)
{
    if (!other || other == s)
        return FSMOE_OK;
    idle_arg a = {other};
    return stream_submit(s, await_idle, &a, sizeof a, err);
}
