/* Implements: the measured trace of fsmoe-run (--trace FILE): every task the executor runs —
 * per MoE layer and phase the gate, each chunk's Dispatch AllToAll, expert and Combine
 * AllToAll; attention and dense FFN blocks; the gradient AllReduce — timed on the stream it runs
 * on by the backend's marks (backend.h mark/marks_read: a stamp taken when the stream reaches
 * it, so asynchronous work is timed where it runs, not where it is issued), labelled with
 * libfsmoe/task.h's names as fsmoe-plan simulate --trace labels them, and written as Chrome
 * trace-event JSON (one process per rank, one thread per stream) that Perfetto opens.
 *
 * A NULL recorder is valid everywhere and records nothing, so the executor calls it
 * unconditionally. Steps are recorded until RT_TRACE_MAX_EVENTS tasks are kept; later steps are
 * dropped (and counted), never the run. Memory: 64 bytes per kept task. */
#ifndef RT_TRACE_H
#define RT_TRACE_H

#include <stdio.h>

#include "backend.h"
#include "status.h"
#include "task.h"

#define RT_TRACE_MAX_EVENTS 1000000L

/* The streams a task runs on, as the trace's threads. */
enum {
    RT_TRACE_HOST = 0,
    RT_TRACE_COMPUTE,
    RT_TRACE_COMM,
    RT_TRACE_GRAD,
    RT_TRACE_INTRA, /* the ESP AllGather / ReduceScatter stream */
    RT_TRACE_STREAMS
};

typedef struct {
    long step;
    int phase, layer, chunk, stream;
    fsmoe_task_kind kind;
    double bytes;      /* what a collective moved (the Gradient-AllReduce's), else 0 */
    int meets;         /* not a collective kind, yet the ranks met in it (rt_trace_meets) */
    int mark0, mark1;  /* its begin and end marks, until rt_trace_step reads them */
    double t0_s, t1_s; /* on the backend's clock */
} rt_trace_event;

typedef struct rt_trace {
    rt_backend *be;
    rt_trace_event *ev; /* kept tasks; the current step's are completed by rt_trace_step */
    long n_ev, cap_ev, step_first;
    long n_marks_used;
    long dropped_steps;
    int failed; /* a mark could not be taken this step: its tasks are dropped */
} rt_trace;

void rt_trace_init(rt_trace *tr, rt_backend *be);
void rt_trace_free(rt_trace *tr);
/* Opens a task on stream s (the stream it is issued to; trace thread `stream`); returns its
 * handle for rt_trace_end, or -1 (tr NULL, full, or a failed mark). */
long rt_trace_begin(rt_trace *tr, rt_stream *s, int stream, fsmoe_task_kind kind, int phase,
                    int layer, int chunk);
void rt_trace_end(rt_trace *tr, rt_stream *s, long h);
/* Task h, of a kind that is not a collective, holds collectives the ranks meet in (the forward
 * gate's statistics and token counts): --report and scripts/trace-skew.py count it where
 * the ranks' arrival skew is waited, and its end as the end of a segment (planner/sim.h
 * SIM_TASK_MEETS); the trace says "meets":1 in its args. */
void rt_trace_meets(rt_trace *tr, long h);
/* The bytes task h moved (kept in the trace, compared with the plan's by --report). */
void rt_trace_bytes(rt_trace *tr, long h, double bytes);
/* After the step's streams are synchronised: reads the marks and keeps the step's tasks. */
fsmoe_status rt_trace_step(rt_trace *tr, long step, fsmoe_error *err);
/* Chrome trace-event JSON of the kept tasks of this rank (pid = rank + 1), times in µs after
 * the first kept task; written atomically. */
/* The time of the first kept task (the trace's zero). */
double rt_trace_origin(const rt_trace *tr);
/* This rank's process and thread names and kept tasks as trace events, times from origin;
 * first: no separator before the first. */
void rt_trace_write_events(const rt_trace *tr, FILE *f, int rank, const char *title,
                           double origin, int first);
fsmoe_status rt_trace_write(const rt_trace *tr, int rank, const char *title, const char *path,
                            fsmoe_error *err);

#endif
