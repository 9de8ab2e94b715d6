/* Implements: a "stream" on the host — one worker thread that runs submitted jobs in order —
 * and host events that order jobs across streams (the CUDA stream/event model, comm_backend.h).
 *
 * Why a thread per stream: Open MPI has no progress thread, so a nonblocking collective barely
 * advances while its rank does something else (toolchain.md). A blocking collective on its own
 * thread (and its own communicator) really overlaps another one (Parm's SAA). */
#ifndef FSMOE_COMM_STREAM_THREAD_H
#define FSMOE_COMM_STREAM_THREAD_H

#include <stddef.h>

#include "status.h"

#define STREAM_JOB_ARG_MAX 192

typedef fsmoe_status (*stream_job_fn)(void *arg, fsmoe_error *err);

typedef struct stream_thread stream_thread;

/* Host events shared by the streams of one backend. */
typedef struct stream_events stream_events;

fsmoe_status stream_events_init(stream_events **out, int n, fsmoe_error *err);
void stream_events_free(stream_events **ev);

fsmoe_status stream_thread_init(stream_thread **out, fsmoe_error *err);
/* Joins the thread after its queue drains; safe on NULL. */
void stream_thread_free(stream_thread **s);

/* Copies arg (arg_size ≤ STREAM_JOB_ARG_MAX bytes) into the queue; fn runs later on the
 * thread. s == NULL runs fn now on the caller (stream 0). */
fsmoe_status stream_submit(stream_thread *s, stream_job_fn fn, const void *arg, size_t arg_size,
                           fsmoe_error *err);
/* Waits until every job submitted so far has run; returns (and clears) the first failure. */
fsmoe_status stream_sync(stream_thread *s, fsmoe_error *err);

/* Event e completes when the stream reaches this point; a wait makes the stream pause until
 * the most recent record of e (at submission time) has completed. */
fsmoe_status stream_record(stream_thread *s, stream_events *ev, int e, fsmoe_error *err);
fsmoe_status stream_wait(stream_thread *s, stream_events *ev, int e, fsmoe_error *err);
/* Queues on s a wait until `other` has nothing queued or running (no job of it before or after
 * this call remains), e.g. no AllToAll running or about to run. other must never wait for
 * work queued on s after this call. NULL s: the caller waits. */
fsmoe_status stream_wait_idle(stream_thread *s, stream_thread *other, fsmoe_error *err);

#endif
