/* Implements: the discrete-event simulator of one training iteration on the α-β cost model
 * (the contention model is Lina §3's "all-to-all and allreduce share the inter-node
 * link", the resources are those of FSMoE §4: compute, intra-node link, inter-node link).
 *
 * Model.
 *   - A resource is EXCLUSIVE (a compute unit or a copy engine: one task at a time; among the
 *     waiting tasks the smallest priority value wins, then the earliest created) or SHARED (a
 *     link: every active transfer progresses at 1/k of the link's rate when k transfers are in
 *     their bandwidth phase at once — a fluid fair share, so bytes are conserved).
 *   - A stream is an in-order queue of a CUDA/NCCL-like stream: a task on a stream starts only
 *     when the stream is free, and the stream picks among its ready tasks by (priority, creation
 *     order). Tasks without a stream go straight to their resource.
 *   - A task costs alpha_s (latency: occupies its stream/resource but consumes no bandwidth, so
 *     it is never slowed by sharing) followed by work_s (the β·n part, in seconds at the full
 *     rate of the resource; stretched by fair sharing).
 *   - Interference (sim_set_interference; off by default, the papers' premise): while a task
 *     of a compute resource (sim_mark_compute) is in its work phase, every transfer on a SHARED
 *     resource progresses comm_slowdown times slower, and while any transfer moves data, the
 *     compute task progresses compute_slowdown times slower — the cluster profile's measured
 *     factors (on a CPU the collectives' copies and the GEMMs share the cores; on a GPU NCCL's
 *     kernels take SMs and memory bandwidth from the GEMMs).
 *   - Host sharing (sim_set_host_sharing; off by default: a device or a core per rank): R
 *     ranks share a host of C cores (an emulated cluster) and the compute lines were measured
 *     with m of them computing at once. Every rank runs the same graph between the same
 *     collectives, so when one computes the others do too (lockstep): a computing rank gets
 *     C/R of a core, against min(1, C/m) when its lines were measured, and compute work
 *     progresses that ratio faster (host_speed; 1 where the lines were measured with all R at
 *     once). A model that let the other ranks compute at independent times (a binomial share)
 *     credited the experts with speed they never ran at: README, host sharing.
 *   - Arrival skew growing with the segment (sim_set_sync_growth; 0 by default): a collective
 *     task (task.h fsmoe_task_collective) on a shared resource, with a cost (a group of one rank
 *     has a zero line: nothing to wait for), that starts at t waits
 *     ρ·max(0, t − e − g) more before its latency, e the end of the latest collective that
 *     ended by then (0 before the first), g the segment the growth starts at (cluster.h
 *     sync_growth_from_s; 0 by default): ranks that computed for a while since they last met
 *     arrive farther apart. A calibrated profile's g is the shortest segment its line was
 *     fitted on, and its constant part the line's value there: below its points the line is
 *     held, not extrapolated (a chunk's collective issued right after another was once
 *     given no skew at all, and a plan cut its AllToAll into 38 chunks). The segment is the one fsmoe-run --report measures the skew against (and
 *     --calibrate fits ρ on; scripts/trace-skew.py the same from a trace). The constant part of
 *     the skew is the profile's sync latency, already in the collectives' α (workload.h).
 *   - SIM_TASK_MEETS: a task of another kind in which the ranks meet as in a collective (the
 *     gate's forward, whose statistics and token counts are small collectives over DP and EP:
 *     the first collective after the attention, it is where the ranks' arrival skew is
 *     waited). The growing skew is charged to it and its end ends a segment, as a
 *     collective's does.
 *   - SIM_TASK_DEFER (Lina's allreduce micro-ops): the task is launched only while no task of a
 *     strictly smaller priority value is ready, queued or running on its resource. Once
 *     launched it is not preempted (it then shares the link).
 * Event-driven: the clock jumps to the next latency end or completion, rates are recomputed.
 * Everything is deterministic (no randomness; ties broken by creation order).
 *
 * Results: per task start/end and the task whose completion let it start ("trigger": the last
 * dependency, or the task that freed its stream or resource); per resource the busy time (≥ 1
 * task active), the bandwidth-busy time (≥ 1 task in its work phase) and the work it carried;
 * the makespan; the critical path (walk the triggers back from the last task to finish).
 *
 * Memory: a sim owns growable arrays; sim_clear() keeps them for the next run (the sweep
 * builds hundreds of thousands of small simulations). Builders return ids and never fail
 * loudly: an allocation failure or a bad id is remembered and reported by sim_run. */
#ifndef FSMOE_SIM_H
#define FSMOE_SIM_H

#include "status.h"
#include "task.h"

typedef enum { SIM_RES_EXCLUSIVE = 0, SIM_RES_SHARED } sim_res_mode;

/* Operation kinds: task.h's (one name table with fsmoe-run --trace). */

enum { SIM_PHASE_FWD = FSMOE_PHASE_FWD, SIM_PHASE_BWD = FSMOE_PHASE_BWD, SIM_PHASE_TAIL = FSMOE_PHASE_TAIL };
#define SIM_PRIO_LEVELS 8 /* priorities are 0 (most urgent) .. 7 */
#define SIM_TASK_DEFER 1u
#define SIM_TASK_MEETS 2u /* not a collective kind, yet the ranks meet in it (above) */

typedef struct {
    /* input */
    int resource, stream;  /* stream -1 = none */
    int priority;          /* 0..SIM_PRIO_LEVELS-1, smaller first */
    unsigned flags;
    int anchor;            /* Gradient-AllReduce: where the runtime issues it (task.h fsmoe_anchor) */
    double alpha_s, work_s;
    double bytes;          /* informational (what work_s moves), 0 for compute */
    fsmoe_task_kind kind;
    int phase, layer, chunk; /* layer/chunk -1 when not applicable */
    int dep_first, n_deps;   /* internal: predecessor ids in sim.dep_ids */
    /* output */
    double start_s, end_s;
    double skew_s;         /* the growing arrival skew it waited (sim_set_sync_growth), 0 = none */
    int trigger;           /* task whose completion let this one start, -1 = none */
    /* engine state */
    double ready_s, pick_s, rem_alpha, rem_work;
    int deps_left, state;
} sim_task;

typedef struct {
    char name[24];
    sim_res_mode mode;
    /* output */
    double busy_s;        /* time with at least one task active */
    double bw_busy_s;     /* time with at least one task in its work (bandwidth) phase */
    double work_s;        /* Σ work_s of the tasks it ran (= bw_busy_s on a shared link) */
    int n_tasks;
    int compute;          /* slowed by transfers beside it (sim_mark_compute) */
    /* engine state */
    int holder, n_active, n_transfer, last_release;
    int waiting[SIM_PRIO_LEVELS]; /* ready/queued/active tasks per priority (for DEFER) */
    int *pend, n_pend, cap_pend;  /* tasks waiting for this resource, sorted (prio, id) */
} sim_resource;

typedef struct {
    char name[24];
    int resource;
    int holder, last_release;
    int *queue, n_queue, cap_queue;
} sim_stream;

typedef struct {
    sim_resource *res;
    int n_res, cap_res;
    sim_stream *streams;
    int n_streams, cap_streams;
    sim_task *tasks;
    int n_tasks, cap_tasks;
    /* dependency edges (pred -> succ), collected then turned into CSR by sim_run */
    int (*edges)[2]; /* {pred, succ} */
    int n_edges, cap_edges;
    int *dep_ids;   /* CSR predecessors, per task dep_first.. */
    int *succ_first, *succ_ids;
    int cap_csr_tasks, cap_csr_edges;
    int *active;    /* ids of active tasks */
    int n_active, cap_active;
    double comm_slowdown, compute_slowdown; /* interference (sim_set_interference; 1 = none) */
    int host_ranks, host_cores, host_at_once;  /* host sharing (sim_set_host_sharing; 0 = off) */
    double host_speed; /* output of host sharing: compute's speed against its lines (1 when off) */
    double sync_growth; /* ρ of the growing arrival skew (sim_set_sync_growth; 0 = off) */
    double sync_growth_from; /* g: the segment the growth starts at (seconds, ≥ 0) */
    double last_coll_end; /* engine state: when the last collective ended */
    /* output */
    double makespan_s;
    int *critical;  /* critical path, first to last */
    int n_critical, cap_critical;
    double critical_s; /* Σ (end − start) over the critical path */
    /* sticky builder error */
    fsmoe_status build_status;
    char build_msg[160];
} sim;

/* The most tasks (and dependency edges) one simulation holds: the builders refuse more, so a
 * simulation's memory and time are bounded whatever the model (an iteration of the largest
 * shipped plan has a few thousand tasks). */
#define SIM_MAX_TASKS (1 << 20)
#define SIM_MAX_EDGES (1 << 22)

void sim_init(sim *s);
void sim_clear(sim *s); /* forget resources, streams and tasks; keep the memory */
void sim_free(sim *s);  /* safe on a zeroed or half-built sim */

int sim_add_resource(sim *s, const char *name, sim_res_mode mode);
int sim_add_stream(sim *s, const char *name, int resource);
/* The resource runs computation, which transfers slow down and which slows transfers down
 * (the interference factors). */
void sim_mark_compute(sim *s, int resource);
/* Both factors ≥ 1 (values below are taken as 1); sim_clear resets them to 1. */
void sim_set_interference(sim *s, double comm_slowdown, double compute_slowdown);
/* R ranks on a host of C cores, the compute lines measured with m computing at once
 * (cluster.h host); off unless R > C ≥ 1 and 1 ≤ m ≤ R. sim_clear turns it off. */
void sim_set_host_sharing(sim *s, int ranks, int cores, int at_once);
/* ρ ≥ 0 of the growing arrival skew and the segment g ≥ 0 it starts at (above; values
 * below 0 are taken as 0, NaN as 0); sim_clear resets both to 0. */
void sim_set_sync_growth(sim *s, double rho, double from_s);
/* Whether the ranks meet in task `task` (above: a collective kind on a link with a cost, or a
 * task marked SIM_TASK_MEETS): what the growing skew is charged to and what ends a segment. */
int sim_task_meets(const sim *s, int task);
/* Compute's speed against its lines under host sharing in lockstep (above): C/R over
 * min(1, C/m); 1 where it is off (R ≤ C, or m outside 1..R). */
double sim_host_speed(int ranks, int cores, int at_once);
/* A task on `resource` (and on `stream` when ≥ 0). A stream may carry tasks of several
 * resources (Tutel's single communication stream for intra- and inter-node collectives); its
 * own resource is only where reports draw it. */
int sim_add_task(sim *s, int resource, int stream, fsmoe_task_kind kind, double alpha_s,
                 double work_s);
void sim_add_dep(sim *s, int task, int pred); /* task starts after pred ends; -1 ignored */

/* Runs the simulation. FSMOE_ERR_VALUE for a bad build (message names the task),
 * FSMOE_ERR_NOMEM, FSMOE_ERR_INTERNAL for a dependency cycle (names a stuck task). */
fsmoe_status sim_run(sim *s, fsmoe_error *err);

/* After sim_run: where the forward ends (the last forward task's end) and the backward (the last
 * backward task's end, at least the forward's); the tail is the makespan after it. */
void sim_phase_ends(const sim *s, double *fwd_end, double *bwd_end);

/* A one-line description of task i, e.g. "bwd L3 c2 alltoall" (into buf, returns buf). */
const char *sim_task_label(const sim *s, int i, char *buf, int len);

#endif
