/* Implements: the names of the tasks of one training iteration (design.md §10.1), one table for
 * the simulator (fsmoe-plan simulate: Gantt chart, Perfetto trace, reports) and the runtime
 * (fsmoe-run --trace), so a simulated and a measured trace name the same work alike:
 * "<phase> L<layer> c<chunk> <kind>", e.g. "fwd L0 c1 alltoall". */
#ifndef FSMOE_TASK_H
#define FSMOE_TASK_H

typedef enum {
    FSMOE_TASK_ATTN = 0,  /* attention block (GEMMs + its MP AllReduce) */
    FSMOE_TASK_FFN,       /* dense FFN */
    FSMOE_TASK_GATE,      /* gate/order/dump local work */
    FSMOE_TASK_EXPERT,    /* expert GEMMs */
    FSMOE_TASK_A2A,       /* dispatch/combine AllToAll (EP or EP&ESP) */
    FSMOE_TASK_AG,        /* ESP/MP AllGather */
    FSMOE_TASK_RS,        /* ESP ReduceScatter */
    FSMOE_TASK_AR_ESP,    /* ESP AllReduce (DeepSpeed) */
    FSMOE_TASK_AR_MP,     /* tensor-parallel (MP) AllReduce of a dense block */
    FSMOE_TASK_SAA,       /* Parm's simultaneous AllToAll + AllGather */
    FSMOE_TASK_COPY,      /* device re-layout copy (MoNTA D) */
    FSMOE_TASK_GRAD_AR,   /* Gradient-AllReduce (DP) */
    FSMOE_TASK_ELEMWISE,  /* a block's layer norms, residual additions, gradient clearing */
    FSMOE_TASK_HEAD,      /* embedding, final layer norm, LM head and loss */
    FSMOE_TASK_OPTIM,     /* optimizer step: gradient clearing and norm, AdamW */
    FSMOE_TASK_COUNT
} fsmoe_task_kind;

enum { FSMOE_PHASE_FWD = 0, FSMOE_PHASE_BWD = 1, FSMOE_PHASE_TAIL = 2 };

/* Where a Gradient-AllReduce task hangs in the backward pass of one iteration: the schedule
 * graph's builder (planner/sim_schedules.c) tags each such task with the point after which it is
 * issued, and the runtime (runtime/grad_sync.h) issues it when its backward reaches that point.
 * Per generalised layer i (layer -1: the prefix) the backward passes, in this order: WINDOW (the
 * start of its dense backward), DENSE_READY (its dense gradients are final), DISPATCHED (the last
 * Dispatch chunk of its MoE backward was issued), MOE_READY (its MoE gradients are final); the
 * prefix has EARLY_READY (the output projection of its last attention block) between WINDOW and
 * DENSE_READY; TAIL is after the whole backward. */
typedef enum {
    FSMOE_AT_NONE = 0,
    FSMOE_AT_WINDOW,
    FSMOE_AT_EARLY_READY,
    FSMOE_AT_DENSE_READY,
    FSMOE_AT_DISPATCHED,
    FSMOE_AT_MOE_READY,
    FSMOE_AT_TAIL,
    FSMOE_AT_COUNT
} fsmoe_anchor;

/* "window", "early-ready", "dense-ready", "dispatched", "moe-ready", "tail"; "-" for NONE. */
const char *fsmoe_anchor_name(fsmoe_anchor a);

/* "attention", "ffn", "gate", "expert", "alltoall", ...; "?" out of range. */
const char *fsmoe_task_name(fsmoe_task_kind k);
/* Whether tasks of kind k are collectives of a group (AllToAll, AllGather, ReduceScatter, the ESP
 * and MP AllReduces, SAA, the Gradient-AllReduce): the ranks meet in them, so each pays their
 * arrival skew. */
int fsmoe_task_collective(fsmoe_task_kind k);
/* "fwd", "bwd", "tail"; "?" out of range. */
const char *fsmoe_phase_name(int phase);
/* The task's label into buf (len bytes): layer and chunk are left out when < 0. Returns buf. */
const char *fsmoe_task_label(int phase, int layer, int chunk, fsmoe_task_kind k, char *buf,
                             int len);

#endif
