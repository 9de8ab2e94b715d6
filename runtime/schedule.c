/* Implements: the executor's schedule from the schedule graph (schedule.h). */
#include "schedule.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "locate.h"
#include "model.h"
#include "moe_layer.h"
#include "moe_seq.h"
#include "monta_a2a.h"
#include "order.h"
#include "plan.h"
#include "sim_schedules.h"

static unsigned long long fnv(unsigned long long h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

unsigned long long rt_schedule_digest(const rt_schedule *rs)
{
    unsigned long long h = 14695981039346656037ULL;
    const sim *g = &rs->graph;
    /* a stream by the order of its first task: builders create and name them apart ("inter"
     * in the plan's, "comm" in the baselines') for the same stream */
    int *first = calloc((size_t)g->n_streams + 1, sizeof(int)), n_seen = 0;
    for (int i = 0; i < g->n_tasks; i++) {
        const sim_task *t = &g->tasks[i];
        int st = -1;
        if (first && t->stream >= 0 && t->stream < g->n_streams)
            st = first[t->stream] ? first[t->stream] - 1 : (first[t->stream] = ++n_seen) - 1;
        int v[10] = {t->resource, st,     t->priority, (int)t->flags, t->anchor,
                     (int)t->kind, t->phase, t->layer,  t->chunk,      t->n_deps};
        double d[3] = {t->alpha_s, t->work_s, t->bytes};
        h = fnv(h, v, sizeof v);
        h = fnv(h, d, sizeof d);
        if (g->dep_ids && t->n_deps > 0)
            h = fnv(h, g->dep_ids + t->dep_first, (size_t)t->n_deps * sizeof(int));
    }
    free(first);
    const int *per_layer[7] = {rs->r_fwd, rs->r_bwd, rs->pause_mp, rs->etp,
                               rs->s2,    rs->monta, rs->a2a_2dh};
    for (int k = 0; k < 7; k++)
        if (per_layer[k])
            h = fnv(h, per_layer[k], (size_t)rs->n_layers * sizeof(int));
    int v[3] = {rs->n_layers, rs->lina, rs->order};
    return fnv(h, v, sizeof v);
}

void rt_schedule_free(rt_schedule *rs)
{
    free(rs->r_fwd), free(rs->r_bwd), free(rs->pause_mp), free(rs->etp), free(rs->s2);
    free(rs->monta), free(rs->a2a_2dh);
    free(rs->gar);
    sim_free(&rs->graph);
    sim_free(&rs->routing);
    sim_model_free(&rs->model);
    fsmoe_cluster_free(&rs->cluster);
    memset(rs, 0, sizeof *rs);
}

fsmoe_status rt_schedule_at_routing(rt_schedule *rs, const double *rows, const double *width,
                                    fsmoe_error *err)
{
    sim_model_at_routing(&rs->model, rows, width);
    fsmoe_status st = sim_schedule_time(&rs->routing, &rs->model, (sim_schedule)rs->kind, NULL,
                                        &rs->routing_iteration_s, err);
    if (st != FSMOE_OK)
        return st;
    if (rs->routing.n_tasks != rs->graph.n_tasks)
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL,
                          "schedule %s at the run's routing has %d tasks, as planned %d",
                          rs->name, rs->routing.n_tasks, rs->graph.n_tasks);
    for (int i = 0; i < rs->graph.n_tasks; i++) {
        const sim_task *a = &rs->graph.tasks[i], *b = &rs->routing.tasks[i];
        if (a->kind != b->kind || a->phase != b->phase || a->layer != b->layer ||
            a->chunk != b->chunk)
            return fsmoe_fail(err, FSMOE_ERR_INTERNAL,
                              "schedule %s at the run's routing: task %d differs from the plan's",
                              rs->name, i);
    }
    rs->at_routing = 1;
    return FSMOE_OK;
}

/* Work of the graph the executor does not run yet (schedule.h); NULL when it runs all of it. */
static const sim_task *unsupported(const sim *s, const fsmoe_parallel *par)
{
    /* MoNTA's layer runs where its MP AllGather is the ESP group's (moe_layer.h); without EP as
     * expert tensor parallelism, whose sum is a ReduceScatter + AllGather */
    int sliced_by_mp = monta_layout_ok(par) && par->mp > 1;
    int monta_ok = sliced_by_mp && par->ep > 1;
    for (int i = 0; i < s->n_tasks; i++) {
        const sim_task *t = &s->tasks[i];
        switch (t->kind) {
        case FSMOE_TASK_RS: /* MoNTA's whole-layer ReduceScatter runs where mp = esp (without
                             * EP as expert tensor parallelism's RS + AG) */
            if (t->chunk < 0 && t->end_s - t->start_s > 0.0 && !sliced_by_mp)
                return t;
            break;
        case FSMOE_TASK_AR_ESP: /* expert tensor parallelism: the slices must hold the same rows */
            if (!deepspeed_layout_ok(par) && t->end_s - t->start_s > 0.0)
                return t;
            break;
        case FSMOE_TASK_COPY:
            if (!monta_ok && t->end_s - t->start_s > 0.0)
                return t;
            break;
        default: break;
        }
    }
    return NULL;
}

/* Reads the degrees, the Gradient-AllReduce tasks and the order from the timed graph. */
static fsmoe_status read_graph(rt_schedule *rs, const sim_model *m, int esp, fsmoe_error *err)
{
    const sim *s = &rs->graph;
    int n = m->n_layers;
    rs->n_layers = n;
    rs->r_fwd = calloc((size_t)n, sizeof(int));
    rs->r_bwd = calloc((size_t)n, sizeof(int));
    rs->pause_mp = calloc((size_t)n, sizeof(int));
    rs->etp = calloc((size_t)n, sizeof(int));
    rs->s2 = calloc((size_t)n, sizeof(int));
    rs->monta = calloc((size_t)n, sizeof(int));
    rs->a2a_2dh = calloc((size_t)n, sizeof(int));
    rs->gar = calloc((size_t)(s->n_tasks > 0 ? s->n_tasks : 1), sizeof *rs->gar);
    if (!rs->r_fwd || !rs->r_bwd || !rs->pause_mp || !rs->etp || !rs->s2 || !rs->monta ||
        !rs->a2a_2dh || !rs->gar)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "schedule %s: out of memory", rs->name);
    for (int i = 0; i < n; i++)
        rs->r_fwd[i] = rs->r_bwd[i] = 1;
    for (int i = 0; i < s->n_tasks; i++) {
        const sim_task *t = &s->tasks[i];
        if ((t->kind == FSMOE_TASK_A2A || t->kind == FSMOE_TASK_EXPERT) && t->layer >= 0 &&
            t->layer < n && t->chunk >= 0) {
            int *r = t->phase == SIM_PHASE_FWD ? rs->r_fwd : rs->r_bwd;
            if (t->chunk + 1 > r[t->layer])
                r[t->layer] = t->chunk + 1;
        }
        /* a layer with an MP AllGather of its output runs as S1 (PauseMP), DeepSpeed's as
         * drop_tokens/gather_tokens */
        if (t->kind == FSMOE_TASK_AG && t->chunk < 0 && t->layer >= 0 && t->layer < n) {
            if (rs->kind == SIM_SCHED_DEEPSPEED)
                rs->s2[t->layer] = RT_S2_DS_GATHER;
            else
                rs->pause_mp[t->layer] = 1;
        }
        /* one with an ESP AllReduce of the expert output as DeepSpeed's expert tensor
         * parallelism */
        if (t->kind == FSMOE_TASK_AR_ESP && t->layer >= 0 && t->layer < n)
            rs->etp[t->layer] = 1;
        /* one with SAA as Parm's S2 */
        if (t->kind == FSMOE_TASK_SAA && t->layer >= 0 && t->layer < n)
            rs->s2[t->layer] = 1;
        /* one with a whole-layer ReduceScatter as MoNTA's, O2/O3 where it has copies */
        if (t->kind == FSMOE_TASK_RS && t->chunk < 0 && t->layer >= 0 && t->layer < n &&
            !rs->monta[t->layer])
            rs->monta[t->layer] = 1;
        if (t->kind == FSMOE_TASK_COPY && t->layer >= 0 && t->layer < n)
            rs->monta[t->layer] = 2;
        if (t->kind != FSMOE_TASK_GRAD_AR || !(t->bytes > 0.0))
            continue;
        if (t->anchor <= FSMOE_AT_NONE || t->anchor >= FSMOE_AT_COUNT)
            return fsmoe_fail(err, FSMOE_ERR_INTERNAL,
                              "schedule %s: a Gradient-AllReduce task without an anchor",
                              rs->name);
        rt_gar_task *g = &rs->gar[rs->n_gar++];
        g->at = (fsmoe_anchor)t->anchor;
        g->layer = t->layer;
        g->elems = llround(t->bytes / rs->elem_bytes);
        g->stream = t->stream < 0                                      ? RT_GS_DEFAULT
                    : strcmp(s->streams[t->stream].name, "allreduce") == 0 ? RT_GS_OWN
                                                                          : RT_GS_COMM;
    }
    /* with expert slices, a layer whose AllToAll is not followed by the ESP pipeline's chunked
     * AllGather/ReduceScatter reaches every slice itself: S1's EP&ESP AllToAll */
    for (int l = 0; l < n; l++) { /* MoNTA's layer has MP AllGathers of its own */
        if (rs->monta[l])
            rs->pause_mp[l] = 0;
        /* without EP it has no AllToAll to split: the experts' slices on every (duplicated)
         * token and their sum as ReduceScatter + AllGather, expert tensor parallelism's data
         * path (moe_layer.h) */
        if (rs->monta[l] && m->par.ep <= 1 && esp > 1)
            rs->monta[l] = 0, rs->etp[l] = RT_ETP_RS_AG;
    }
    for (int l = 0; l < n && esp > 1; l++) {
        int chunked = 0, a2a = 0;
        for (int i = 0; i < s->n_tasks; i++) {
            const sim_task *t = &s->tasks[i];
            if (t->layer != l)
                continue;
            chunked |= (t->kind == FSMOE_TASK_AG || t->kind == FSMOE_TASK_RS) && t->chunk >= 0;
            a2a |= t->kind == FSMOE_TASK_A2A;
        }
        if (a2a && !chunked && !rs->etp[l] && !rs->s2[l] && !rs->monta[l])
            rs->pause_mp[l] = 1;
    }
    rs->lina = rs->kind == SIM_SCHED_PIPEMOE_LINA || (rs->kind == SIM_SCHED_PLAN && m->plan_lina);
    switch (sim_schedule_forced_order((sim_schedule)rs->kind)) {
    case WORKLOAD_ORDER_GSHARD: rs->order = RT_ORDER_GSHARD; break;
    case WORKLOAD_ORDER_TUTEL: rs->order = RT_ORDER_TUTEL; break;
    default: rs->order = -1; break; /* the model's */
    }
    return FSMOE_OK;
}

fsmoe_status rt_schedule_check_name(const char *name, fsmoe_error *err)
{
    if (sim_schedule_from_name(name) >= 0)
        return FSMOE_OK;
    char names[400] = "";
    for (int k = 0; k < SIM_SCHED_COUNT; k++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k ? ", " : "",
                 sim_schedule_name((sim_schedule)k));
    return fsmoe_fail(err, FSMOE_ERR_USAGE, "--schedule: unknown schedule '%s' (expected %s)",
                      name, names);
}

fsmoe_status rt_schedule_make(rt_schedule *rs, const char *plan_path, const char *model_path,
                              const char *cluster_path, const char *name, fsmoe_error *err)
{
    memset(rs, 0, sizeof *rs);
    sim_init(&rs->graph);
    sim_init(&rs->routing);
    snprintf(rs->name, sizeof rs->name, "%s", name);
    fsmoe_status st = rt_schedule_check_name(name, err);
    if (st != FSMOE_OK)
        return st;
    rs->kind = sim_schedule_from_name(name);
    fsmoe_plan plan = {0};
    fsmoe_model model = {0};
    fsmoe_cluster *cl = &rs->cluster;
    sim_model *m = &rs->model;
    st = fsmoe_plan_load(plan_path, &plan, err);
    if (st == FSMOE_OK)
        st = sim_plan_check(&plan, plan_path, err);
    if (st != FSMOE_OK)
        goto out;
    if (cluster_path)
        snprintf(rs->cluster_path, sizeof rs->cluster_path, "%s", cluster_path);
    else
        locate_input(plan_path, plan.cluster_path, rs->cluster_path, sizeof rs->cluster_path);
    if ((st = fsmoe_model_load(model_path, &model, err)) != FSMOE_OK)
        goto out;
    if ((st = fsmoe_cluster_load(rs->cluster_path, cl, err)) != FSMOE_OK) {
        if (!cluster_path) {
            locate_named_by(plan_path, "provenance.cluster", err);
            char msg[FSMOE_ERROR_MAX];
            snprintf(msg, sizeof msg, "%s", err->msg);
            fsmoe_fail(err, err->status, "%.900s (fsmoe-run predicts and schedules the run from "
                       "that profile; --cluster FILE names another)", msg);
        }
        goto out;
    }
    snprintf(rs->cluster_name, sizeof rs->cluster_name, "%s", cl->name);
    if (model.experts_is_ep)
        model.E = plan.parallel.ep;
    if ((st = sim_model_from_plan(&plan, &model, cl, rs->cluster_path, m, err)) != FSMOE_OK)
        goto out;
    rs->elem_bytes = m->shape.bytes_per_element > 0 ? m->shape.bytes_per_element : 4;
    rs->sync_s = m->lines.sync_s;
    /* Tutel's degree chosen once (sim_schedule_time would choose it on every build): a
     * rebuild at the run's routing keeps the graph's tasks */
    if (m->tutel_r <= 0 && (st = sim_tutel_degree(&rs->graph, m, &m->tutel_r, err)) != FSMOE_OK)
        goto out;
    if ((st = sim_schedule_time(&rs->graph, m, (sim_schedule)rs->kind, NULL, &rs->iteration_s,
                                err)) != FSMOE_OK)
        goto out;
    const sim_task *u = unsupported(&rs->graph, &plan.parallel);
    if (u) {
        char lb[64];
        st = fsmoe_fail(err, FSMOE_ERR_VALUE,
                        "schedule %s of %s needs '%s' (layout mp %d, esp %d): fsmoe-run runs "
                        "the ESP pipeline's AllGather/ReduceScatter chunks, Parm's S1 and S2, "
                        "DeepSpeed-MoE's two modes (expert tensor parallelism where mp = esp), "
                        "and MoNTA's O1-O3 where mp = esp (MoNTA's layer assumes the MP group "
                        "slices the experts, so fsmoe-plan offers it only there); run --schedule "
                        "fsmoe, parm-s1, parm-s2 or a Tutel-family schedule on this layout",
                        name, plan_path,
                        fsmoe_task_label(u->phase, u->layer, u->chunk, u->kind, lb, sizeof lb),
                        plan.parallel.mp, plan.parallel.esp);
        goto out;
    }
    if ((st = read_graph(rs, m, plan.parallel.esp, err)) != FSMOE_OK)
        goto out;
    /* the AllToAll's algorithm per layer: the plan's own for its schedule */
    for (int i = 0; i < plan.n_layers && i < rs->n_layers; i++) {
        const char *a = plan.layers[i].a2a_algorithm;
        if (strcmp(a, "2dh") == 0)
            rs->a2a_2dh[i] = rs->kind == SIM_SCHED_PLAN;
        else if (strcmp(a, "nccl") != 0 && a[0]) {
            char field[64];
            snprintf(field, sizeof field, "layers[%d].a2a.algorithm", i);
            st = locate_fail(plan_path, field, err, FSMOE_ERR_VALUE, "fsmoe-run runs nccl (the "
                             "flat AllToAll) and 2dh (hierarchical), not '%s'", a);
            goto out;
        }
    }
out:
    fsmoe_plan_free(&plan);
    return st;
}
