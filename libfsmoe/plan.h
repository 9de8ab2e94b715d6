/* Implements: the plan (plans/<model>@<cluster>.yaml, design.md §9): its in-memory form, atomic
 * YAML writer and validating reader. Owned by the planner; read by fsmoe-run later.
 *
 * A plan is deterministic: the same inputs give a byte-identical file (no timestamps; floats are
 * written with the shortest representation that reads back to the same double). */
#ifndef FSMOE_PLAN_H
#define FSMOE_PLAN_H

#include <stddef.h>

#include "model.h"
#include "memory.h"
#include "parallel.h"
#include "status.h"

/* Version 2: the schedule value "baseline" became "esp-pipeline" (it names FSMoE's ESP pipeline,
 * not DeepSpeed-MoE's pattern), layers gained schedule_s (the predicted time of every candidate
 * schedule) and the plan gained prefix_window_bytes.
 * Version 3: the layout facts a multi-rank run checks (design.md §10.1): parallel.ranks (the rank
 * numbering) and parallel.edp, model.global_batch (model.batch is per DP rank), model.capacity
 * (factor | dropless) and alltoall.split; gradient bytes count every tensor the runtime holds. */
#define FSMOE_PLAN_VERSION 3
#define FSMOE_PLAN_MAX_OVERRIDES 16

/* How a MoE layer moves its tokens (design.md §4, §6):
 *   ESP_PIPELINE  FSMoE: Dispatch A2A on EP → ESP-AllGather → Expert → ESP-ReduceScatter →
 *                 Combine A2A on EP, pipelined in r chunks;
 *   S1            Parm's PauseMP with MP paused from the Gate to after the Combine: EP&ESP A2A →
 *                 Expert → EP&ESP A2A, pipelined in r chunks, then the MP AllGather (unchunked);
 *   S2            PauseMP with the Combine A2A and the MP AllGather run together (SAA), r chunks;
 *   MONTA         MoNTA's layer (MoNTA §4/§6): DeepSpeed-style, every op after the previous one,
 *                 the Dispatch and Combine AllToAll by the layer's `a2a` strategy (O1/O2/O3; base
 *                 when N_MP = 1) in `a2a_chunks` chunks, the expert on the H/N_ESP slice of every
 *                 gathered token, ESP-ReduceScatter before the Combine; not pipelined (r = 1).
 * A reader that predates MONTA refuses the value "monta" (and the key schedule_s.monta) with a
 * message naming the line: no older reader misreads such a plan, so the version stays 3. */
typedef enum {
    FSMOE_SCHED_ESP_PIPELINE = 0,
    FSMOE_SCHED_S1,
    FSMOE_SCHED_S2,
    FSMOE_SCHED_MONTA
} fsmoe_schedule;
#define FSMOE_SCHED_COUNT 4
typedef enum { FSMOE_A2A_BASE = 0, FSMOE_A2A_O1, FSMOE_A2A_O2, FSMOE_A2A_O3 } fsmoe_a2a_strategy;

/* How ranks are numbered: node-major (rank = node·G + local) with the group nesting of
 * parallel.h (ESP consecutive, EP stride esp, EDP stride ep·esp; MP consecutive, DP stride mp).
 * The only numbering there is today; the field exists so a run can refuse another one. */
typedef enum { FSMOE_RANKS_NODE_MAJOR = 0 } fsmoe_rank_order;
/* Capacity: FACTOR drops the token copies past C = ceil(k·f·N_global/E) per expert, decided over
 * the global batch (N_global = global_batch·seq tokens; ties broken by global token index);
 * DROPLESS keeps every copy (f = 0 in the struct, "none" in the file). */
typedef enum { FSMOE_CAPACITY_FACTOR = 0, FSMOE_CAPACITY_DROPLESS } fsmoe_capacity_mode;
/* How the Dispatch/Combine AllToAll splits its buffer: ALLTOALLV sends each peer exactly the
 * rows routed to it (row counts exchanged first); PADDED would send C rows per expert. */
typedef enum { FSMOE_SPLIT_ALLTOALLV = 0, FSMOE_SPLIT_PADDED } fsmoe_a2a_split;

const char *fsmoe_schedule_name(fsmoe_schedule s);    /* "esp-pipeline", "S1", "S2", "monta" */
const char *fsmoe_rank_order_name(fsmoe_rank_order o); /* "node-major" */
const char *fsmoe_capacity_mode_name(fsmoe_capacity_mode c); /* "factor", "dropless" */
const char *fsmoe_a2a_split_name(fsmoe_a2a_split s);  /* "alltoallv", "padded" */
const char *fsmoe_a2a_strategy_name(fsmoe_a2a_strategy s); /* "base", "O1", "O2", "O3" */

/* One phase (forward or backward) of one MoE layer, FSMoE §4. */
typedef struct {
    int r;              /* pipeline degree (chunks) */
    int binding_case;   /* 1..4: which f_i equals F(r) */
    unsigned q;         /* bit i-1 set iff condition Qi holds at r (i = 1..7) */
    double t_gar_s;     /* Gradient-AllReduce time placed inside the layer (0 forward) */
    double predicted_s; /* F(r) */
} fsmoe_phase_plan;

typedef struct {
    int index;          /* among MoE layers, 0-based, forward order */
    int block;          /* transformer block it sits in */
    /* Parm §6: the schedule the layer runs, chosen by the smallest predicted forward + backward
     * time (with the layer's gradient share) among the candidates the method allows;
     * schedule_s[s] = that time under schedule s, 0 where s was not a candidate. t_d1/t_d2 are
     * Parm's communication-only comparison (Algorithm 1), recorded for every method. */
    fsmoe_schedule schedule;
    double schedule_s[FSMOE_SCHED_COUNT];
    double t_d1_s, t_d2_s;
    /* MoNTA §7 */
    fsmoe_a2a_strategy a2a;
    int a2a_chunks;
    double a2a_s[4];    /* predicted AllToAll time of base, O1, O2, O3 */
    char a2a_algorithm[16];
    /* FSMoE §4 */
    fsmoe_phase_plan fwd, bwd;
    /* FSMoE §5 for the generalised layer (this MoE layer + dense ops up to the next one) */
    double dense_fwd_s, dense_bwd_s;
    double olp_dense_s, olp_moe_s;     /* overlappable windows in backward */
    double grad_bytes;                 /* gradients that become ready at its end */
    double window_bytes;               /* all-reduced inside its windows by step 1 */
    double step2_bytes;                /* assigned to its MoE layer by step 2 */
    double carried_bytes;              /* not yet sent when it finishes */
} fsmoe_layer_plan;

/* How the Gradient-AllReduce runs (design.md §5). PARTITION: FSMoE's windows, as the layers'
 * gradients fields and prefix_window_bytes say, the rest after the backward. LINA: Lina's
 * micro-ops (each generalised layer's gradients, when ready, cut into micro-ops of
 * FSMOE_LINA_MICRO_OP_BYTES on a stream of their own, each started only while no AllToAll runs
 * or is queued); the partition's fields then hold no window. */
typedef enum { FSMOE_GRADS_PARTITION = 0, FSMOE_GRADS_LINA } fsmoe_grad_schedule;
const char *fsmoe_grad_schedule_name(fsmoe_grad_schedule g); /* "partition", "lina" */
/* Lina's micro-op size (Lina §4: 30 MB; MB = 1e6 bytes as in design.md §7). */
#define FSMOE_LINA_MICRO_OP_BYTES 30e6

typedef struct {
    char flag[24];   /* without the leading "--" */
    char value[64];
} fsmoe_override;

typedef struct {
    double iteration_s, forward_s, backward_s, tail_s;
    double deepspeed_s, tutel_s, tutel_improved_s, pipemoe_lina_s;
} fsmoe_predicted;

typedef struct {
    /* provenance */
    char model_path[512], model_sha256[65];
    char cluster_path[512], cluster_sha256[65];
    char planner_version[32];
    char method[16];     /* auto | fsmoe | fsmoe-paper | parm | monta */
    char decided_by[32]; /* the solver that chose r (e.g. "slsqp+integer", "algorithm1") */
    int n_overrides;
    fsmoe_override overrides[FSMOE_PLAN_MAX_OVERRIDES];
    /* what the plan is for */
    char model_name[64], cluster_name[64];
    fsmoe_parallel parallel;
    fsmoe_rank_order ranks;
    int edp;             /* ranks holding the same expert shard: mp·dp/(ep·esp) */
    long B;              /* samples per DP rank; DP rank d holds samples [d·B, (d+1)·B) */
    long B_global;       /* dp·B: the global batch */
    long L, M, H, E;
    int k;
    fsmoe_capacity_mode capacity;
    double f;            /* capacity factor; 0 iff capacity == DROPLESS */
    fsmoe_a2a_split split;
    fsmoe_expert_kind expert;
    int bytes_per_element;
    /* decisions */
    int n_layers;
    fsmoe_layer_plan *layers; /* owned */
    double gradient_tail_bytes;
    double prefix_grad_bytes; /* gradients of the ops before the first MoE layer (always tail) */
    double prefix_window_bytes; /* gradients all-reduced during the backward of those ops */
    fsmoe_grad_schedule gradients; /* `gradient_schedule` (optional, partition when absent) */
    fsmoe_predicted predicted;
    /* the memory model's prediction per GPU (memory.h) with the model's ZeRO stage and
     * recomputation; present = 0 in a plan written without it (the section is optional) */
    struct {
        int present;
        int zero_stage, recompute;
        double bytes[FSMOE_MEM_CATS];
        double total;
    } memory;
    /* pipeline parallelism (parallel.pp > 1; planner/gpipe.h): GPipe or 1F1B over pp stages of
     * stage_blocks blocks, micro_batches per DP rank's batch; layers[] and the times in them are
     * one stage's, planned for one micro-batch (model.batch / micro_batches samples); the
     * stage's micro-batch forward and backward without gradient communication, what the
     * gradients and optimizer add once (grad_s) and one send between stages (p2p_bytes per
     * rank, p2p_s). predicted.iteration_s is the pipeline's makespan, the baselines' too (each
     * schedule's stage in the same pipeline); forward_s, backward_s and tail_s are the stage's.
     * present = 0 (no `pipeline:` section) exactly when pp = 1. */
    struct {
        int present;
        int micro_batches;
        int one_f_one_b;     /* `schedule: 1f1b` (PipeDream-flush, Megatron's); 0: `gpipe` */
        long stage_blocks;
        double fwd_s, bwd_s, grad_s, p2p_bytes, p2p_s;
    } pipeline;
    char notes[4096];    /* cost-model derivations used, one per line */
} fsmoe_plan;

void fsmoe_plan_free(fsmoe_plan *p); /* frees layers; safe on a zeroed plan */

/* Writes p to path atomically (path.tmp.<pid>, fsync, rename). */
fsmoe_status fsmoe_plan_write(const fsmoe_plan *p, const char *path, fsmoe_error *err);
/* Writes to an open stream (used by the writer and for stdout). */
fsmoe_status fsmoe_plan_emit(const fsmoe_plan *p, void *FILE_stream, fsmoe_error *err);
/* Reads and validates a plan of this version. A plan of an older version fails with
 * FSMOE_ERR_SCHEMA and a message giving the command that regenerates it. */
fsmoe_status fsmoe_plan_load(const char *path, fsmoe_plan *out, fsmoe_error *err);
/* The same on a document in memory; `name` stands for the path in messages. */
fsmoe_status fsmoe_plan_parse(const char *name, const char *text, size_t len, fsmoe_plan *out,
                              fsmoe_error *err);
/* Reads only the provenance (model, cluster, method, overrides: the same keys since version 2)
 * of a plan of any version from 2 on, so `fsmoe-plan --regenerate` can replay an old plan. */
fsmoe_status fsmoe_plan_load_provenance(const char *path, fsmoe_plan *out, fsmoe_error *err);
/* The fsmoe-plan command line that makes p again from its provenance (shell-quoted), with
 * `-o out` appended when out is not NULL. */
void fsmoe_plan_command(const fsmoe_plan *p, const char *out, char *buf, size_t len);

#endif
