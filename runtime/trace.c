/* Implements: trace.h. */
#include "trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "json.h"

void rt_trace_init(rt_trace *tr, rt_backend *be)
{
    memset(tr, 0, sizeof *tr);
    tr->be = be;
}

void rt_trace_free(rt_trace *tr)
{
    if (!tr)
        return;
    free(tr->ev);
    memset(tr, 0, sizeof *tr);
}

static int grow(rt_trace *tr, long need)
{
    if (need <= tr->cap_ev)
        return 1;
    long cap = tr->cap_ev ? 2 * tr->cap_ev : 1024;
    while (cap < need)
        cap *= 2;
    if (cap > RT_TRACE_MAX_EVENTS)
        cap = RT_TRACE_MAX_EVENTS;
    if (need > cap)
        return 0;
    rt_trace_event *ev = realloc(tr->ev, (size_t)cap * sizeof *ev);
    if (!ev)
        return 0;
    tr->ev = ev;
    tr->cap_ev = cap;
    return 1;
}

long rt_trace_begin(rt_trace *tr, rt_stream *s, int stream, fsmoe_task_kind kind, int phase,
                    int layer, int chunk)
{
    if (!tr || tr->failed || !grow(tr, tr->n_ev + 1)) {
        if (tr)
            tr->failed = 1;
        return -1;
    }
    int m = tr->be->mark(tr->be, s);
    if (m < 0) {
        tr->failed = 1;
        return -1;
    }
    long h = tr->n_ev++;
    tr->ev[h] = (rt_trace_event){.step = -1, .phase = phase, .layer = layer, .chunk = chunk,
                                 .stream = stream, .kind = kind, .mark0 = m, .mark1 = -1};
    tr->n_marks_used = m + 1;
    return h;
}

void rt_trace_end(rt_trace *tr, rt_stream *s, long h)
{
    if (!tr || h < 0 || tr->failed)
        return;
    int m = tr->be->mark(tr->be, s);
    if (m < 0) {
        tr->failed = 1;
        return;
    }
    tr->ev[h].mark1 = m;
    tr->n_marks_used = m + 1;
}

void rt_trace_meets(rt_trace *tr, long h)
{
    if (tr && h >= 0 && h < tr->n_ev)
        tr->ev[h].meets = 1;
}

void rt_trace_bytes(rt_trace *tr, long h, double bytes)
{
    if (tr && h >= 0 && h < tr->n_ev)
        tr->ev[h].bytes = bytes;
}

fsmoe_status rt_trace_step(rt_trace *tr, long step, fsmoe_error *err)
{
    if (!tr)
        return FSMOE_OK;
    long first = tr->step_first, n = tr->n_ev - first;
    double *t = NULL;
    if (tr->n_marks_used > 0 && !(t = malloc((size_t)tr->n_marks_used * sizeof *t)))
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "trace: out of memory reading step %ld", step);
    fsmoe_status st = tr->be->marks_read(tr->be, t, (int)tr->n_marks_used, err);
    if (st == FSMOE_OK) {
        for (long i = 0; i < n && !tr->failed; i++)
            if (tr->ev[first + i].mark1 < 0)
                tr->failed = 1; /* a task was opened and never closed: an executor bug */
        if (tr->failed) {
            tr->n_ev = first; /* the step's tasks go; the next step may fit again */
            tr->dropped_steps++;
        } else {
            for (long i = first; i < tr->n_ev; i++) {
                tr->ev[i].step = step;
                tr->ev[i].t0_s = t[tr->ev[i].mark0];
                tr->ev[i].t1_s = t[tr->ev[i].mark1];
            }
            tr->step_first = tr->n_ev;
        }
    }
    tr->failed = 0;
    tr->n_marks_used = 0;
    free(t);
    return st;
}

double rt_trace_origin(const rt_trace *tr)
{
    double origin = tr->step_first > 0 ? tr->ev[0].t0_s : 0.0;
    for (long i = 0; i < tr->step_first; i++)
        if (tr->ev[i].t0_s < origin)
            origin = tr->ev[i].t0_s;
    return origin;
}

void rt_trace_write_events(const rt_trace *tr, FILE *f, int rank, const char *title,
                           double origin, int first)
{
    static const char *const threads[RT_TRACE_STREAMS] = {"host", "compute", "comm",
                                                               "grad-allreduce", "intra-comm"};
    fprintf(f, "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":"
               "{\"name\":", first ? "" : ",\n", rank + 1);
    char name[160];
    snprintf(name, sizeof name, "%s, rank %d", title, rank);
    fsmoe_json_string(f, name);
    fprintf(f, "}}");
    for (int s = 0; s < RT_TRACE_STREAMS; s++)
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                   "\"args\":{\"name\":\"%s\"}}",
                rank + 1, s + 1, threads[s]);
    char lb[64];
    for (long i = 0; i < tr->step_first; i++) {
        const rt_trace_event *e = &tr->ev[i];
        fprintf(f, ",\n{\"name\":");
        fsmoe_json_string(f, fsmoe_task_label(e->phase, e->layer, e->chunk, e->kind, lb,
                                              sizeof lb));
        fprintf(f, ",\"cat\":");
        fsmoe_json_string(f, fsmoe_task_name(e->kind));
        fprintf(f, ",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d,"
                   "\"args\":{\"step\":%ld",
                (e->t0_s - origin) * 1e6, (e->t1_s - e->t0_s) * 1e6, rank + 1, e->stream + 1,
                e->step);
        if (e->bytes > 0)
            fprintf(f, ",\"bytes\":%.0f", e->bytes);
        if (e->meets)
            fprintf(f, ",\"meets\":1");
        fprintf(f, "}}");
    }
}

fsmoe_status rt_trace_write(const rt_trace *tr, int rank, const char *title, const char *path,
                            fsmoe_error *err)
{
    fsmoe_atomic_file af;
    fsmoe_status st = fsmoe_atomic_open(&af, path, err);
    if (st != FSMOE_OK)
        return st;
    fprintf(af.f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    rt_trace_write_events(tr, af.f, rank, title, rt_trace_origin(tr), 1);
    fprintf(af.f, "\n]}\n");
    return fsmoe_atomic_commit(&af, err);
}
