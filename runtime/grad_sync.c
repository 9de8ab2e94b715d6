/* Implements: the scheduled Gradient-AllReduce (grad_sync.h). */
#include "grad_sync.h"

#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "trace.h"

fsmoe_status gsync_init(rt_grad_sync *gs, rt_backend *be, const struct rt_dist *dist,
                        rt_params *p, rt_stream *comm, rt_stream *own, fsmoe_error *err)
{
    memset(gs, 0, sizeof *gs);
    gs->be = be, gs->dist = dist, gs->params = p, gs->comm = comm, gs->own = own;
    size_t n = (size_t)(p->n > 0 ? p->n : 1);
    gs->at = calloc(n, sizeof(int));
    gs->layer = calloc(n, sizeof(int));
    gs->q_cap = (int)n;
    gs->q = calloc(n, sizeof *gs->q);
    gs->done_elems = calloc(1, sizeof(long));
    if (!gs->at || !gs->layer || !gs->q || !gs->done_elems) {
        gsync_free(gs);
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "gradient AllReduce: out of memory");
    }
    for (int i = 0; i < p->n; i++)
        gs->at[i] = FSMOE_AT_TAIL, gs->layer[i] = -1;
    return FSMOE_OK;
}

void gsync_free(rt_grad_sync *gs)
{
    for (int i = 0; i < RT_GS_MAX_EVENTS; i++)
        if (gs->ev[i])
            gs->be->event_destroy(gs->be, gs->ev[i]);
    free(gs->at), free(gs->layer), free(gs->q), free(gs->done_elems);
    memset(gs, 0, sizeof *gs);
}

void gsync_assign(rt_grad_sync *gs, int i, fsmoe_anchor at, int layer)
{
    if (i >= 0 && i < gs->params->n)
        gs->at[i] = at, gs->layer[i] = layer;
}

fsmoe_status gsync_set_tasks(rt_grad_sync *gs, const rt_gar_task *t, int n, fsmoe_error *err)
{
    long *d = calloc((size_t)(n > 0 ? n : 1), sizeof(long));
    if (!d)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "gradient AllReduce: out of memory for %d tasks",
                          n);
    free(gs->done_elems);
    gs->done_elems = d;
    gs->tasks = n > 0 ? t : NULL;
    gs->n_tasks = n > 0 ? n : 0;
    return FSMOE_OK;
}

void gsync_begin(rt_grad_sync *gs)
{
    gs->q_head = gs->q_n = 0;
    gs->n_ev = 0;
    memset(gs->done_elems, 0, (size_t)(gs->n_tasks > 0 ? gs->n_tasks : 1) * sizeof(long));
}

static rt_stream *stream_of(const rt_grad_sync *gs, rt_gs_stream s)
{
    return s == RT_GS_COMM ? gs->comm : s == RT_GS_OWN ? gs->own : NULL;
}

/* Ranks in the group that all-reduces a tensor: EDP for expert shards, else DP. */
static int group_size(const rt_grad_sync *gs, int expert)
{
    return gs->dist ? gs->dist->g[expert ? RT_EDP : RT_DP].size : 1;
}

/* The tensors final at (at, layer) join the FIFO (those of a one-rank group have nothing to
 * all-reduce and never do), after an event on the default stream. */
static void make_ready(rt_grad_sync *gs, fsmoe_anchor at, int layer)
{
    const rt_params *p = gs->params;
    int ev = -1;
    for (int i = 0; i < p->n; i++) {
        if (gs->at[i] != (int)at || gs->layer[i] != layer || p->p[i].numel == 0 ||
            group_size(gs, p->p[i].offset >= p->dense_total) < 2)
            continue;
        if (ev < 0) {
            if (gs->n_ev >= RT_GS_MAX_EVENTS) {
                gs->failed = 1;
                return;
            }
            ev = gs->n_ev++;
            if (!gs->ev[ev] && !(gs->ev[ev] = gs->be->event_create(gs->be))) {
                gs->failed = 1;
                return;
            }
            gs->be->event_record(gs->be, gs->ev[ev], NULL);
        }
        int expert = p->p[i].offset >= p->dense_total;
        rt_gs_range *last = gs->q_n > gs->q_head ? &gs->q[gs->q_n - 1] : NULL;
        if (last && last->ev == ev && last->expert == expert &&
            last->off + last->n == p->p[i].offset) {
            last->n += param_span(&p->p[i]);
            continue;
        }
        if (gs->q_n >= gs->q_cap) {
            gs->failed = 1; /* a tensor became ready twice */
            return;
        }
        gs->q[gs->q_n++] = (rt_gs_range){p->p[i].offset, param_span(&p->p[i]), expert, ev};
    }
}

/* Task t (index ti): the next `want` ready elements (all of them when want < 0). */
static void run_task(rt_grad_sync *gs, int ti, fsmoe_anchor at, int layer, long want,
                     rt_gs_stream where)
{
    rt_backend *be = gs->be;
    rt_stream *s = stream_of(gs, where);
    rt_group dp = gs->dist ? dist_group(gs->dist, RT_DP) : rt_group_single();
    rt_group edp = gs->dist ? dist_group(gs->dist, RT_EDP) : rt_group_single();
    int phase = at == FSMOE_AT_TAIL ? FSMOE_PHASE_TAIL : FSMOE_PHASE_BWD;
    int thread = where == RT_GS_COMM ? RT_TRACE_COMM : where == RT_GS_OWN ? RT_TRACE_GRAD
                                                                          : RT_TRACE_HOST;
    if (gs->yield_to_comm && where == RT_GS_OWN && gs->comm && gs->comm != s)
        be->stream_wait_idle(be, s, gs->comm);
    /* with no rank to all-reduce with (one rank) nothing is exchanged and the graph plans
     * no Gradient-AllReduce time: not a task of the run either */
    long h = dp.size > 1 || edp.size > 1
                 ? rt_trace_begin(gs->trace, s, thread, FSMOE_TASK_GRAD_AR, phase,
                                  at == FSMOE_AT_TAIL ? -1 : layer, -1)
                 : -1;
    long done = 0;
    int waited = -1;
    while (gs->q_head < gs->q_n && (want < 0 || done < want)) {
        rt_gs_range *r = &gs->q[gs->q_head];
        long n = want < 0 || r->n <= want - done ? r->n : want - done;
        if (r->ev != waited) {
            be->stream_wait(be, s, gs->ev[r->ev]);
            waited = r->ev;
        }
        be->allreduce_sum(be, s, r->expert ? &edp : &dp, gs->params->g + r->off, n,
                          r->expert ? "expert gradient AllReduce (edp)"
                                    : "gradient AllReduce (dp)");
        done += n;
        r->off += n, r->n -= n;
        if (r->n == 0)
            gs->q_head++;
    }
    rt_trace_bytes(gs->trace, h, (double)done * (double)sizeof(real));
    rt_trace_end(gs->trace, s, h);
    gs->done_elems[ti] += done;
}

void gsync_at(rt_grad_sync *gs, fsmoe_anchor at, int layer)
{
    if (at != FSMOE_AT_WINDOW && at != FSMOE_AT_DISPATCHED && at != FSMOE_AT_TAIL)
        make_ready(gs, at, layer);
    if (at == FSMOE_AT_TAIL)
        make_ready(gs, FSMOE_AT_TAIL, -1); /* tensors no anchor claimed */
    if (!gs->tasks) {
        if (at == FSMOE_AT_TAIL)
            run_task(gs, 0, at, -1, -1, RT_GS_DEFAULT);
        return;
    }
    for (int i = 0; i < gs->n_tasks; i++) {
        const rt_gar_task *t = &gs->tasks[i];
        if (t->at == at && (at == FSMOE_AT_TAIL || t->layer == layer))
            run_task(gs, i, at, layer, at == FSMOE_AT_TAIL ? -1 : t->elems, t->stream);
    }
}

fsmoe_status gsync_finish(rt_grad_sync *gs, fsmoe_error *err)
{
    rt_backend *be = gs->be;
    if (gs->q_head < gs->q_n) /* a plan without a tail task: the default stream takes the rest */
        run_task(gs, 0, FSMOE_AT_TAIL, -1, -1, RT_GS_DEFAULT);
    if (gs->n_ev + 2 > RT_GS_MAX_EVENTS)
        gs->failed = 1;
    rt_stream *ss[2] = {gs->comm, gs->own};
    for (int k = 0; k < 2 && !gs->failed; k++) {
        if (!ss[k])
            continue;
        int e = gs->n_ev++;
        if (!gs->ev[e] && !(gs->ev[e] = be->event_create(be))) {
            gs->failed = 1;
            break;
        }
        be->event_record(be, gs->ev[e], ss[k]);
        be->stream_wait(be, NULL, gs->ev[e]);
    }
    if (gs->failed)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM,
                          "gradient AllReduce: out of events or a gradient made ready twice");
    long sum = 0;
    const rt_params *p = gs->params;
    long need = (group_size(gs, 0) > 1 ? p->dense_total : 0) +
                (group_size(gs, 1) > 1 ? p->total - p->dense_total : 0);
    for (int i = 0; i < (gs->n_tasks > 0 ? gs->n_tasks : 1); i++)
        sum += gs->done_elems[i];
    if (sum != need)
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL,
                          "gradient AllReduce: %ld of %ld gradient elements all-reduced", sum,
                          need);
    return FSMOE_OK;
}
