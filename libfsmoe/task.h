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
    FSMOE_TASK_COUNT
} fsmoe_task_kind;

enum { FSMOE_PHASE_FWD = 0, FSMOE_PHASE_BWD = 1, FSMOE_PHASE_TAIL = 2 };

/* "attention", "ffn", "gate", "expert", "alltoall", ...; "?" out of range. */
const char *fsmoe_task_name(fsmoe_task_kind k);
/* "fwd", "bwd", "tail"; "?" out of range. */
const char *fsmoe_phase_name(int phase);
/* The task's label into buf (len bytes): layer and chunk are left out when < 0. Returns buf. */
const char *fsmoe_task_label(int phase, int layer, int chunk, fsmoe_task_kind k, char *buf,
                             int len);

#endif
