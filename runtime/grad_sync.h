/* Implements: the Gradient-AllReduce of a training step as the schedule graph places it
 * (design.md §5, §10.1; FSMoE §5, Tutel-Improved, Lina): a list of tasks, each "all-reduce the
 * next n gradient elements that are ready, on stream S, when the backward reaches anchor A of
 * generalised layer i" (libfsmoe/task.h fsmoe_anchor), executed by the backward pass.
 *
 * Readiness. Every parameter tensor is assigned the anchor after which its gradient is final
 * (transformer.c: a block's attention and dense FFN at DENSE_READY of its generalised layer, a
 * MoE block's LayerNorm, gate and experts at MOE_READY of its layer, the LM head with the last
 * layer's dense part, the embeddings with the prefix's). When the backward passes a READY anchor
 * the backend records an event on the default stream (where gradients are accumulated) and the
 * tensors of that anchor join a FIFO of ready ranges, in registration order. A task takes the
 * next n elements from the FIFO (splitting a tensor where n ends; the sum of a range does not
 * depend on how the buffer is cut), waits on its stream for the events of the ranges it takes,
 * and all-reduces them — replicated tensors over DP, expert shards over EDP (a group of one
 * rank has nothing to all-reduce: its tensors never enter the FIFO). The TAIL takes
 * whatever is left. Every element is therefore all-reduced exactly once, after it is final,
 * whatever the plan's byte counts: when a task asks for more than is ready it takes what is
 * ready (--report shows the difference), and the tail completes the step.
 *
 * Streams: the default stream (the one-rank-at-the-end behaviour), the MoE communication stream
 * (the ESP pipeline's inter-node stream: FSMoE puts the gradient window there, after the
 * layer's last Dispatch) or a stream of its own (Tutel-Improved, Lina). gsync_finish orders the
 * default stream after all of them, before clipping and the optimizer. */
#ifndef RT_GRAD_SYNC_H
#define RT_GRAD_SYNC_H

#include "backend.h"
#include "params.h"
#include "status.h"
#include "task.h"

struct rt_dist;
struct rt_trace;

typedef enum { RT_GS_DEFAULT = 0, RT_GS_COMM, RT_GS_OWN } rt_gs_stream;

typedef struct {
    fsmoe_anchor at;
    int layer;          /* generalised layer (-1: the prefix) */
    long elems;         /* gradient elements; < 0: everything still pending (the tail) */
    rt_gs_stream stream;
} rt_gar_task;

typedef struct {
    long off, n;
    int expert; /* EDP group (expert shards), else DP */
    int ev;     /* index of the event recorded when it became ready */
} rt_gs_range;

#define RT_GS_MAX_EVENTS 512

typedef struct rt_grad_sync {
    rt_backend *be;
    const struct rt_dist *dist; /* NULL: one rank (the all-reduces are no-ops) */
    rt_params *params;
    rt_stream *comm, *own;
    struct rt_trace *trace;
    const rt_gar_task *tasks;   /* the plan's, in issue order; NULL: one tail task on DEFAULT */
    int n_tasks;
    int *at, *layer;            /* per parameter tensor: its ready anchor and layer */
    rt_gs_range *q;             /* FIFO of ready ranges */
    int q_head, q_n, q_cap;
    rt_event *ev[RT_GS_MAX_EVENTS];
    int n_ev;
    /* Lina: a task on the own stream starts only while the communication stream is idle (no
     * AllToAll running or queued) */
    int yield_to_comm;
    /* this step's results, per task (n_tasks, or 1 without a plan) */
    long *done_elems;
    int failed;
} rt_grad_sync;

/* For the parameters registered in p (already allocated); every tensor starts at TAIL. */
fsmoe_status gsync_init(rt_grad_sync *gs, rt_backend *be, const struct rt_dist *dist,
                        rt_params *p, rt_stream *comm, rt_stream *own, fsmoe_error *err);
void gsync_free(rt_grad_sync *gs);
/* Tensor i's gradient is final at anchor `at` of `layer`. */
void gsync_assign(rt_grad_sync *gs, int i, fsmoe_anchor at, int layer);
/* The tasks to run (kept by reference; NULL: everything at the tail on the default stream). */
fsmoe_status gsync_set_tasks(rt_grad_sync *gs, const rt_gar_task *t, int n, fsmoe_error *err);
void gsync_begin(rt_grad_sync *gs);
/* The backward reached anchor `at` of `layer`: the gradients final there become ready and
 * the tasks anchored there are issued. */
void gsync_at(rt_grad_sync *gs, fsmoe_anchor at, int layer);
/* After the tail: the default stream waits for every all-reduce; checks that every element was
 * all-reduced exactly once. */
fsmoe_status gsync_finish(rt_grad_sync *gs, fsmoe_error *err);

#endif
