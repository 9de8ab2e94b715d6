/* Implements: the discrete-event simulator of sim.h: exclusive compute units, streams,
 * fluid fair-share links (Lina §3's contention between all-to-all and allreduce), α latency not
 * shared, priorities, Lina's deferred launch, critical path by trigger walk-back.
 * Relies on: nothing but libc. */
#include "sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ST_WAIT = 0, ST_READY, ST_LAT, ST_XFER, ST_DONE };

void sim_init(sim *s)
{
    memset(s, 0, sizeof *s);
    s->comm_slowdown = s->compute_slowdown = 1.0;
    s->host_speed = 1.0;
}

void sim_clear(sim *s)
{
    for (int i = 0; i < s->n_res; i++)
        s->res[i].n_pend = 0;
    for (int i = 0; i < s->n_streams; i++)
        s->streams[i].n_queue = 0;
    s->n_res = s->n_streams = s->n_tasks = s->n_edges = 0;
    s->n_active = s->n_critical = 0;
    s->makespan_s = s->critical_s = 0.0;
    s->comm_slowdown = s->compute_slowdown = 1.0;
    s->host_ranks = s->host_cores = s->host_at_once = 0;
    s->host_speed = 1.0;
    s->sync_growth = 0.0;
    s->sync_growth_from = 0.0;
    s->build_status = FSMOE_OK;
    s->build_msg[0] = '\0';
}

void sim_free(sim *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->cap_res; i++)
        free(s->res ? s->res[i].pend : NULL);
    for (int i = 0; i < s->cap_streams; i++)
        free(s->streams ? s->streams[i].queue : NULL);
    free(s->res);
    free(s->streams);
    free(s->tasks);
    free(s->edges);
    free(s->dep_ids);
    free(s->succ_first);
    free(s->succ_ids);
    free(s->active);
    free(s->critical);
    memset(s, 0, sizeof *s);
}

/* Grows *p (elements of size sz) to hold at least need; new memory zeroed. */
static int grow(void **p, int *cap, int need, size_t sz)
{
    if (need <= *cap)
        return 1;
    int n = *cap ? *cap : 16;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, (size_t)n * sz);
    if (!q)
        return 0;
    memset((char *)q + (size_t)*cap * sz, 0, (size_t)(n - *cap) * sz);
    *p = q;
    *cap = n;
    return 1;
}

static void build_fail(sim *s, fsmoe_status st, const char *msg)
{
    if (s->build_status == FSMOE_OK) {
        s->build_status = st;
        snprintf(s->build_msg, sizeof s->build_msg, "%s", msg);
    }
}

int sim_add_resource(sim *s, const char *name, sim_res_mode mode)
{
    if (!grow((void **)&s->res, &s->cap_res, s->n_res + 1, sizeof *s->res)) {
        build_fail(s, FSMOE_ERR_NOMEM, "simulator: out of memory adding a resource");
        return -1;
    }
    sim_resource *r = &s->res[s->n_res];
    snprintf(r->name, sizeof r->name, "%s", name);
    r->mode = mode;
    r->n_pend = 0;
    r->compute = 0;
    return s->n_res++;
}

void sim_mark_compute(sim *s, int resource)
{
    if (resource >= 0 && resource < s->n_res)
        s->res[resource].compute = 1;
}

void sim_set_interference(sim *s, double comm_slowdown, double compute_slowdown)
{
    s->comm_slowdown = comm_slowdown > 1.0 ? comm_slowdown : 1.0;
    s->compute_slowdown = compute_slowdown > 1.0 ? compute_slowdown : 1.0;
}

void sim_set_host_sharing(sim *s, int ranks, int cores, int at_once)
{
    int on = cores >= 1 && ranks > cores && at_once >= 1 && at_once <= ranks;
    s->host_ranks = on ? ranks : 0;
    s->host_cores = on ? cores : 0;
    s->host_at_once = on ? at_once : 0;
}

void sim_set_sync_growth(sim *s, double rho, double from_s)
{
    s->sync_growth = rho > 0.0 ? rho : 0.0;
    s->sync_growth_from = from_s > 0.0 ? from_s : 0.0;
}

double sim_host_speed(int ranks, int cores, int at_once)
{
    if (ranks <= cores || cores < 1 || at_once < 1 || at_once > ranks)
        return 1.0;
    double all = (double)cores / ranks; /* every rank computing: ranks > cores */
    double measured = (double)cores / at_once;
    return all / (measured < 1.0 ? measured : 1.0);
}

/* How many times slower than its resource's full rate task k's work progresses now: the fair
 * share of a link, times the interference factor when the other side is busy; compute over
 * host sharing's speed. */
static double slowdown(const sim *s, const sim_task *k, int compute_busy, int transfer_busy)
{
    const sim_resource *r = &s->res[k->resource];
    double f = r->mode == SIM_RES_SHARED ? (double)r->n_transfer : 1.0;
    if (r->mode == SIM_RES_SHARED && compute_busy)
        f *= s->comm_slowdown;
    else if (r->compute && transfer_busy)
        f *= s->compute_slowdown;
    if (r->compute)
        f /= s->host_speed;
    return f;
}

int sim_add_stream(sim *s, const char *name, int resource)
{
    if (resource < 0 || resource >= s->n_res) {
        build_fail(s, FSMOE_ERR_VALUE, "simulator: stream on a resource that does not exist");
        return -1;
    }
    if (!grow((void **)&s->streams, &s->cap_streams, s->n_streams + 1, sizeof *s->streams)) {
        build_fail(s, FSMOE_ERR_NOMEM, "simulator: out of memory adding a stream");
        return -1;
    }
    sim_stream *q = &s->streams[s->n_streams];
    snprintf(q->name, sizeof q->name, "%s", name);
    q->resource = resource;
    q->n_queue = 0;
    return s->n_streams++;
}

int sim_add_task(sim *s, int resource, int stream, fsmoe_task_kind kind, double alpha_s,
                 double work_s)
{
    if (s->n_tasks >= SIM_MAX_TASKS) {
        build_fail(s, FSMOE_ERR_VALUE, "simulator: more tasks in one iteration than it plays "
                                       "(at most 1048576)");
        return -1;
    }
    if (!grow((void **)&s->tasks, &s->cap_tasks, s->n_tasks + 1, sizeof *s->tasks)) {
        build_fail(s, FSMOE_ERR_NOMEM, "simulator: out of memory adding a task");
        return -1;
    }
    sim_task *t = &s->tasks[s->n_tasks];
    memset(t, 0, sizeof *t);
    t->resource = resource;
    t->stream = stream;
    t->kind = kind;
    t->alpha_s = alpha_s;
    t->work_s = work_s;
    t->phase = SIM_PHASE_FWD;
    t->layer = t->chunk = -1;
    t->trigger = -1;
    return s->n_tasks++;
}

void sim_add_dep(sim *s, int task, int pred)
{
    if (pred < 0)
        return;
    if (task < 0 || task >= s->n_tasks || pred >= s->n_tasks || task == pred) {
        build_fail(s, FSMOE_ERR_VALUE, "simulator: dependency on a task that does not exist");
        return;
    }
    if (s->n_edges >= SIM_MAX_EDGES) {
        build_fail(s, FSMOE_ERR_VALUE, "simulator: more dependencies in one iteration than it "
                                       "plays (at most 4194304)");
        return;
    }
    if (!grow((void **)&s->edges, &s->cap_edges, s->n_edges + 1, sizeof *s->edges)) {
        build_fail(s, FSMOE_ERR_NOMEM, "simulator: out of memory adding a dependency");
        return;
    }
    s->edges[s->n_edges][0] = pred;
    s->edges[s->n_edges][1] = task;
    s->n_edges++;
}

const char *sim_task_label(const sim *s, int i, char *buf, int len)
{
    const sim_task *t = &s->tasks[i];
    return fsmoe_task_label(t->phase, t->layer, t->chunk, t->kind, buf, len);
}

/* ---- queues sorted by (priority, id) ---- */

static int before(const sim *s, int a, int b)
{
    int pa = s->tasks[a].priority, pb = s->tasks[b].priority;
    return pa < pb || (pa == pb && a < b);
}

static int queue_insert(const sim *s, int **q, int *n, int *cap, int id)
{
    if (!grow((void **)q, cap, *n + 1, sizeof(int)))
        return 0;
    int i = *n;
    while (i > 0 && before(s, id, (*q)[i - 1])) {
        (*q)[i] = (*q)[i - 1];
        i--;
    }
    (*q)[i] = id;
    (*n)++;
    return 1;
}

static void queue_remove_at(int *q, int *n, int i)
{
    memmove(q + i, q + i + 1, (size_t)(*n - i - 1) * sizeof(int));
    (*n)--;
}

/* ---- engine ---- */

static int make_ready(sim *s, int i, double t, int trig)
{
    sim_task *k = &s->tasks[i];
    sim_resource *r = &s->res[k->resource];
    k->state = ST_READY;
    k->ready_s = t;
    k->pick_s = t;
    k->trigger = trig;
    r->waiting[k->priority]++;
    if (k->stream >= 0) {
        sim_stream *q = &s->streams[k->stream];
        return queue_insert(s, &q->queue, &q->n_queue, &q->cap_queue, i);
    }
    return queue_insert(s, &r->pend, &r->n_pend, &r->cap_pend, i);
}

static int deferred_blocked(const sim *s, int i)
{
    const sim_task *k = &s->tasks[i];
    if (!(k->flags & SIM_TASK_DEFER))
        return 0;
    const sim_resource *r = &s->res[k->resource];
    for (int p = 0; p < k->priority; p++)
        if (r->waiting[p] > 0)
            return 1;
    return 0;
}

/* Whether the ranks meet in task k (sim.h, the growing arrival skew): a collective kind on a
 * link with a cost, or a task marked SIM_TASK_MEETS; a group of one rank has a zero line and
 * nothing to wait for (a tensor-parallel AllReduce where mp = 1 is such a task). */
static int meets_ranks(const sim *s, const sim_task *k)
{
    return (k->flags & SIM_TASK_MEETS) ||
           (s->res[k->resource].mode == SIM_RES_SHARED && fsmoe_task_collective(k->kind) &&
            (k->alpha_s > 0.0 || k->work_s > 0.0));
}

int sim_task_meets(const sim *s, int task)
{
    return task >= 0 && task < s->n_tasks && meets_ranks(s, &s->tasks[task]);
}

static int start_task(sim *s, int i, double t)
{
    sim_task *k = &s->tasks[i];
    sim_resource *r = &s->res[k->resource];
    /* The trigger is the completion at t that let it start: its last dependency when it became
     * ready now, else whatever freed its stream or its resource (or unblocked a DEFER). */
    if (k->ready_s < t) {
        const sim_stream *st = k->stream >= 0 ? &s->streams[k->stream] : NULL;
        if (st && st->last_release >= 0 && s->tasks[st->last_release].end_s == t)
            k->trigger = st->last_release;
        else if (r->last_release >= 0 && s->tasks[r->last_release].end_s == t)
            k->trigger = r->last_release;
    }
    k->start_s = t;
    k->rem_alpha = k->alpha_s;
    k->rem_work = k->work_s;
    k->skew_s = 0.0;
    if (meets_ranks(s, k)) {
        /* the growing arrival skew (sim.h) */
        double beyond = t - s->last_coll_end - s->sync_growth_from;
        k->skew_s = beyond > 0.0 ? s->sync_growth * beyond : 0.0;
        k->rem_alpha += k->skew_s;
    }
    r->n_active++;
    r->n_tasks++;
    if (r->mode == SIM_RES_EXCLUSIVE)
        r->holder = i;
    if (k->rem_alpha > 0.0) {
        k->state = ST_LAT;
    } else {
        k->state = ST_XFER;
        r->n_transfer++;
    }
    if (!grow((void **)&s->active, &s->cap_active, s->n_active + 1, sizeof(int)))
        return 0;
    s->active[s->n_active++] = i;
    return 1;
}

static int schedule(sim *s, double t)
{
    for (int q = 0; q < s->n_streams; q++) {
        sim_stream *st = &s->streams[q];
        if (st->holder >= 0 || st->n_queue == 0)
            continue;
        /* a deferred task that may not launch yet does not take the stream */
        int j = 0;
        while (j < st->n_queue && deferred_blocked(s, st->queue[j]))
            j++;
        if (j == st->n_queue)
            continue;
        int i = st->queue[j];
        queue_remove_at(st->queue, &st->n_queue, j);
        st->holder = i;
        sim_task *k = &s->tasks[i];
        k->pick_s = t;
        sim_resource *r = &s->res[k->resource];
        if (!queue_insert(s, &r->pend, &r->n_pend, &r->cap_pend, i))
            return 0;
    }
    for (int ri = 0; ri < s->n_res; ri++) {
        sim_resource *r = &s->res[ri];
        if (r->n_pend == 0)
            continue;
        if (r->mode == SIM_RES_EXCLUSIVE) {
            if (r->holder >= 0)
                continue;
            for (int j = 0; j < r->n_pend; j++) {
                int i = r->pend[j];
                if (deferred_blocked(s, i))
                    continue;
                queue_remove_at(r->pend, &r->n_pend, j);
                if (!start_task(s, i, t))
                    return 0;
                break;
            }
        } else {
            for (int j = 0; j < r->n_pend;) {
                int i = r->pend[j];
                if (deferred_blocked(s, i)) {
                    j++;
                    continue;
                }
                queue_remove_at(r->pend, &r->n_pend, j);
                if (!start_task(s, i, t))
                    return 0;
            }
        }
    }
    return 1;
}

static int complete_task(sim *s, int i, double t)
{
    sim_task *k = &s->tasks[i];
    sim_resource *r = &s->res[k->resource];
    if (k->state == ST_XFER)
        r->n_transfer--;
    k->state = ST_DONE;
    k->end_s = t;
    if (meets_ranks(s, k))
        s->last_coll_end = t; /* completions come in time order */
    r->n_active--;
    if (r->holder == i)
        r->holder = -1;
    r->last_release = i;
    r->waiting[k->priority]--;
    r->work_s += k->work_s;
    if (k->stream >= 0) {
        sim_stream *st = &s->streams[k->stream];
        st->holder = -1;
        st->last_release = i;
    }
    for (int e = s->succ_first[i]; e < s->succ_first[i + 1]; e++) {
        int j = s->succ_ids[e];
        if (--s->tasks[j].deps_left == 0 && !make_ready(s, j, t, i))
            return 0;
    }
    return 1;
}

static fsmoe_status validate(const sim *s, fsmoe_error *err)
{
    if (s->build_status != FSMOE_OK)
        return fsmoe_fail(err, s->build_status, "%s", s->build_msg);
    char lb[64];
    for (int i = 0; i < s->n_tasks; i++) {
        const sim_task *k = &s->tasks[i];
        if (k->resource < 0 || k->resource >= s->n_res)
            return fsmoe_fail(err, FSMOE_ERR_VALUE, "simulator: task %d has no valid resource",
                              i);
        sim_task_label(s, i, lb, sizeof lb);
        if (k->stream >= s->n_streams)
            return fsmoe_fail(err, FSMOE_ERR_VALUE,
                              "simulator: task %d (%s): stream %d does not exist", i, lb,
                              k->stream);
        if (k->priority < 0 || k->priority >= SIM_PRIO_LEVELS)
            return fsmoe_fail(err, FSMOE_ERR_VALUE,
                              "simulator: task %d (%s): priority %d outside 0..%d", i, lb,
                              k->priority, SIM_PRIO_LEVELS - 1);
        if (!(k->alpha_s >= 0.0) || !(k->work_s >= 0.0) || !isfinite(k->alpha_s) ||
            !isfinite(k->work_s))
            return fsmoe_fail(err, FSMOE_ERR_VALUE,
                              "simulator: task %d (%s): alpha %g s, work %g s must be finite "
                              "and >= 0", i, lb, k->alpha_s, k->work_s);
    }
    return FSMOE_OK;
}

static fsmoe_status build_csr(sim *s, fsmoe_error *err)
{
    int n = s->n_tasks, m = s->n_edges;
    if (!grow((void **)&s->succ_first, &s->cap_csr_tasks, n + 1, sizeof(int)))
        goto nomem;
    {
        int cap = s->cap_csr_edges;
        if (!grow((void **)&s->succ_ids, &cap, m + 1, sizeof(int)))
            goto nomem;
        int cap2 = s->cap_csr_edges;
        if (!grow((void **)&s->dep_ids, &cap2, m + 1, sizeof(int)))
            goto nomem;
        s->cap_csr_edges = cap < cap2 ? cap : cap2;
    }
    /* successors */
    memset(s->succ_first, 0, (size_t)(n + 1) * sizeof(int));
    for (int e = 0; e < m; e++)
        s->succ_first[s->edges[e][0] + 1]++;
    for (int i = 0; i < n; i++)
        s->succ_first[i + 1] += s->succ_first[i];
    /* predecessors: reuse dep_first/n_deps */
    for (int i = 0; i < n; i++)
        s->tasks[i].n_deps = 0;
    for (int e = 0; e < m; e++)
        s->tasks[s->edges[e][1]].n_deps++;
    int acc = 0;
    for (int i = 0; i < n; i++) {
        s->tasks[i].dep_first = acc;
        acc += s->tasks[i].n_deps;
        s->tasks[i].deps_left = 0;
    }
    /* fill both, edge order preserved (stable) */
    for (int i = 0; i < n; i++)
        s->tasks[i].state = s->succ_first[i]; /* temporary cursor */
    for (int e = 0; e < m; e++) {
        int p = s->edges[e][0], q = s->edges[e][1];
        s->succ_ids[s->tasks[p].state++] = q;
        s->dep_ids[s->tasks[q].dep_first + s->tasks[q].deps_left++] = p;
    }
    return FSMOE_OK;
nomem:
    return fsmoe_fail(err, FSMOE_ERR_NOMEM, "simulator: out of memory (%d tasks, %d edges)", n,
                      m);
}

static fsmoe_status critical_path(sim *s, fsmoe_error *err)
{
    s->n_critical = 0;
    s->critical_s = 0.0;
    if (s->n_tasks == 0)
        return FSMOE_OK;
    int last = 0;
    for (int i = 1; i < s->n_tasks; i++)
        if (s->tasks[i].end_s > s->tasks[last].end_s)
            last = i;
    for (int i = last; i >= 0; i = s->tasks[i].trigger) {
        if (!grow((void **)&s->critical, &s->cap_critical, s->n_critical + 1, sizeof(int)))
            return fsmoe_fail(err, FSMOE_ERR_NOMEM, "simulator: out of memory");
        s->critical[s->n_critical++] = i;
        s->critical_s += s->tasks[i].end_s - s->tasks[i].start_s;
        if (s->n_critical > s->n_tasks)
            return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "simulator: trigger chain has a cycle");
    }
    for (int a = 0, b = s->n_critical - 1; a < b; a++, b--) {
        int x = s->critical[a];
        s->critical[a] = s->critical[b];
        s->critical[b] = x;
    }
    return FSMOE_OK;
}

static fsmoe_status sim_run_once(sim *s, fsmoe_error *err)
{
    fsmoe_status st = validate(s, err);
    if (st != FSMOE_OK)
        return st;
    if ((st = build_csr(s, err)) != FSMOE_OK)
        return st;
    for (int ri = 0; ri < s->n_res; ri++) {
        sim_resource *r = &s->res[ri];
        r->busy_s = r->bw_busy_s = r->work_s = 0.0;
        r->n_tasks = r->n_active = r->n_transfer = 0;
        r->holder = r->last_release = -1;
        r->n_pend = 0;
        memset(r->waiting, 0, sizeof r->waiting);
    }
    for (int q = 0; q < s->n_streams; q++) {
        s->streams[q].holder = s->streams[q].last_release = -1;
        s->streams[q].n_queue = 0;
    }
    s->n_active = 0;
    double t = 0.0;
    for (int i = 0; i < s->n_tasks; i++) {
        sim_task *k = &s->tasks[i];
        k->deps_left = k->n_deps;
        k->state = ST_WAIT;
        k->start_s = k->end_s = NAN;
        k->skew_s = 0.0;
        k->trigger = -1;
    }
    s->last_coll_end = 0.0;
    for (int i = 0; i < s->n_tasks; i++)
        if (s->tasks[i].deps_left == 0 && !make_ready(s, i, 0.0, -1))
            goto nomem;
    if (!schedule(s, t))
        goto nomem;
    int done = 0;
    while (s->n_active > 0) {
        double dt = INFINITY;
        int compute_busy = 0, transfer_busy = 0;
        for (int ri = 0; ri < s->n_res; ri++) {
            const sim_resource *r = &s->res[ri];
            compute_busy |= r->compute && r->n_transfer > 0;
            transfer_busy |= r->mode == SIM_RES_SHARED && r->n_transfer > 0;
        }
        for (int a = 0; a < s->n_active; a++) {
            const sim_task *k = &s->tasks[s->active[a]];
            double c = k->state == ST_LAT
                           ? k->rem_alpha
                           : k->rem_work * slowdown(s, k, compute_busy, transfer_busy);
            if (c < dt)
                dt = c;
        }
        for (int ri = 0; ri < s->n_res; ri++) {
            sim_resource *r = &s->res[ri];
            if (r->n_active > 0)
                r->busy_s += dt;
            if (r->n_transfer > 0)
                r->bw_busy_s += dt;
        }
        /* Pass 1: progress at the rates of this interval; mark the tasks whose event is now. */
        double tol = dt * 1e-12 + 1e-18;
        int n_hit = 0;
        for (int a = 0; a < s->n_active; a++) {
            int i = s->active[a];
            sim_task *k = &s->tasks[i];
            if (k->state == ST_LAT) {
                if (k->rem_alpha <= dt + tol) {
                    k->rem_alpha = 0.0;
                    s->active[a] = -1 - i; /* mark */
                    n_hit++;
                } else {
                    k->rem_alpha -= dt;
                }
            } else {
                double kshare = slowdown(s, k, compute_busy, transfer_busy);
                if (k->rem_work * kshare <= dt + tol) {
                    k->rem_work = 0.0;
                    s->active[a] = -1 - i;
                    n_hit++;
                } else {
                    k->rem_work -= dt / kshare;
                }
            }
        }
        t += dt;
        /* Pass 2: latency ends and completions, in creation order of the active list. */
        int w = 0, n_old = s->n_active;
        for (int a = 0; a < n_old; a++) {
            int v = s->active[a];
            if (v >= 0) {
                s->active[w++] = v;
                continue;
            }
            int i = -1 - v;
            sim_task *k = &s->tasks[i];
            if (k->state == ST_LAT && k->work_s > 0.0) {
                k->state = ST_XFER;
                s->res[k->resource].n_transfer++;
                s->active[w++] = i;
            } else {
                if (!complete_task(s, i, t))
                    goto nomem;
                done++;
            }
        }
        /* complete_task may not append to active (only schedule does), so w is the new size */
        s->n_active = w;
        if (!schedule(s, t))
            goto nomem;
    }
    if (done != s->n_tasks) {
        for (int i = 0; i < s->n_tasks; i++) {
            if (s->tasks[i].state != ST_DONE) {
                char lb[64];
                return fsmoe_fail(err, FSMOE_ERR_INTERNAL,
                                  "simulator: task %d (%s) never ran: its dependencies form a "
                                  "cycle or wait on a deferred task that can never launch "
                                  "(%d of %d tasks ran)",
                                  i, sim_task_label(s, i, lb, sizeof lb), done, s->n_tasks);
            }
        }
    }
    s->makespan_s = t;
    return critical_path(s, err);
nomem:
    return fsmoe_fail(err, FSMOE_ERR_NOMEM, "simulator: out of memory (%d tasks)", s->n_tasks);
}

fsmoe_status sim_run(sim *s, fsmoe_error *err)
{
    /* host sharing in lockstep (sim.h): one constant speed for every compute task */
    s->host_speed = s->host_ranks ? sim_host_speed(s->host_ranks, s->host_cores, s->host_at_once)
                                  : 1.0;
    return sim_run_once(s, err);
}

void sim_phase_ends(const sim *s, double *fwd_end, double *bwd_end)
{
    double f = 0.0, b = 0.0;
    for (int i = 0; i < s->n_tasks; i++) {
        const sim_task *t = &s->tasks[i];
        if (t->phase == SIM_PHASE_FWD && t->end_s > f)
            f = t->end_s;
        if (t->phase == SIM_PHASE_BWD && t->end_s > b)
            b = t->end_s;
    }
    *fwd_end = f;
    *bwd_end = b > f ? b : f;
}
