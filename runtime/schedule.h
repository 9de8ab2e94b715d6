/* Implements: what fsmoe-run executes, taken from the schedule graph (design.md §10.1). The
 * plan (or, with --schedule, a baseline on the plan's layout) is expanded by the simulator's
 * graph builder (planner/sim_schedules.h) — the same code `fsmoe-plan simulate` times — and
 * the executor reads from that graph:
 *   - per MoE layer and phase, the pipeline degree: the chunks of its AllToAll and expert
 *     tasks (one rank has no AllToAll);
 *   - every Gradient-AllReduce task: its anchor in the backward (libfsmoe/task.h), its layer,
 *     its bytes (as elements of the plan's element size) and its stream (the AllToAll's stream,
 *     or the graph's "allreduce" stream of its own);
 *   - the token order: DeepSpeed-MoE's dense one-hot einsums for `deepspeed`, Tutel's sparse
 *     indices for tutel, tutel-improved and pipemoe-lina, the model's own otherwise;
 *   - the graph's timed tasks: the prediction `--report` compares every measured task with.
 * The ESP pipeline's per-chunk AllGather and ReduceScatter and the tensor-parallel AllReduce
 * run as the model executes them (moe_layer.h, transformer.h); a layer whose graph has an MP
 * AllGather of its output, or with expert slices no chunked AllGather/ReduceScatter, runs as
 * Parm's S1 (PauseMP) — DeepSpeed's as its drop_tokens/gather_tokens (S2's slot split in one
 * chunk); one with SAA as Parm's S2; one with a whole-layer ReduceScatter as MoNTA's O1-O3
 * (where mp = esp, ep > 1); one with an ESP AllReduce of the expert output as DeepSpeed's
 * expert tensor parallelism (where mp = esp). A graph holding work fsmoe-run does not execute
 * yet — MoNTA's layer on other layouts — is refused by name. Lina's micro-ops run on their
 * own stream in the graph's order, each started only while the communication stream is idle
 * (no AllToAll running or queued: Lina's priority; backend.h stream_wait_idle), for
 * pipemoe-lina and for a plan whose gradient_schedule is lina. The AllToAll's
 * algorithm is the plan's per layer (a2a.algorithm: nccl, the flat AllToAll, or 2dh, the
 * hierarchical one of libfsmoe/a2a_2dh.h) for the plan's schedule, the flat one for baselines. */
#ifndef RT_SCHEDULE_H
#define RT_SCHEDULE_H

#include "cluster.h"
#include "grad_sync.h"
#include "sim.h"
#include "sim_schedules.h"
#include "status.h"

typedef struct {
    int kind;          /* sim_schedule */
    char name[32];
    int n_layers;
    int *r_fwd, *r_bwd; /* per MoE layer */
    int *pause_mp;      /* per MoE layer: Parm's S1 (PauseMP, moe_layer.h) */
    int *etp;           /* per MoE layer: DeepSpeed's expert tensor parallelism (moe_layer.h) */
    int *s2;            /* per MoE layer: Parm's S2, or RT_S2_DS_GATHER (moe_layer.h) */
    int *monta;         /* per MoE layer: MoNTA's O1 (1) or O2/O3 (2, copies; moe_layer.h) */
    int *a2a_2dh;       /* per MoE layer: the hierarchical AllToAll (the plan's a2a.algorithm
                         * 2dh; baselines run the flat one) */
    int lina;           /* Lina's micro-ops start only while no AllToAll runs or is queued */
    int order;         /* -1: the model's (fsmoe-run then sets it to that); else rt_order_kind */
    rt_gar_task *gar;  /* in the graph's order */
    int n_gar;
    int elem_bytes;    /* the plan's bytes per element */
    sim graph;         /* the simulated iteration: per task start/end */
    double iteration_s;
    sim_model model;   /* what graph was built from (its Tutel degree fixed, so a rebuild keeps
                        * the tasks) */
    fsmoe_cluster cluster; /* the profile model's lines point into (their fitted points) */
    /* The same graph at the routing the run met (rt_schedule_at_routing; at_routing 0 until
     * then): what --report compares the measured tasks with, iteration_s staying the plan's. */
    sim routing;
    double routing_iteration_s;
    int at_routing;
    double sync_s;     /* the profile's sync latency, in the α of every collective of a group of
                        * more than one rank (planner/workload.h) */
    char cluster_path[1200];
    char cluster_name[64]; /* the profile's own name */
} rt_schedule;

/* Builds schedule `name` ("plan", "deepspeed", "tutel", ...: sim_schedules.h) for the plan at
 * plan_path, the model at model_path and the cluster profile at cluster_path (NULL: the one the
 * plan names). Errors name the file and field, or the schedule and the work it cannot run. */
fsmoe_status rt_schedule_make(rt_schedule *rs, const char *plan_path, const char *model_path,
                              const char *cluster_path, const char *name, fsmoe_error *err);
void rt_schedule_free(rt_schedule *rs);
/* Simulates the graph again with MoE layer i at the routing the run met (sim_model_at_routing:
 * rows[i] of the capacity's expert rows, width[i] the GShard matrices' width over the priced;
 * 0 = as planned) into rs->routing. Fails (FSMOE_ERR_INTERNAL) if the graph's tasks change. */
fsmoe_status rt_schedule_at_routing(rt_schedule *rs, const double *rows, const double *width,
                                    fsmoe_error *err);
/* A 64-bit digest (FNV-1a) of everything the executor runs from the schedule: every task of the
 * graph (kind, phase, layer, chunk, resource, stream — by the order of its first task —,
 * priority, flags, anchor, its α, work and bytes, its predecessors) and what the layers are run
 * as (degrees, S1/S2/MoNTA/expert tensor parallelism, the AllToAll's algorithm, Lina, the token
 * order). Two schedules with one digest run the same work (`--report` prints it), so their
 * measured difference is the machine's. */
unsigned long long rt_schedule_digest(const rt_schedule *rs);
/* FSMOE_ERR_USAGE naming --schedule and the known names unless `name` is one. */
fsmoe_status rt_schedule_check_name(const char *name, fsmoe_error *err);

#endif
