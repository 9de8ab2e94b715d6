/* Implements: the memory model of one rank of an MoE training run (design.md §10; MoNTA's "MoE
 * memory consumption", Tables 3-4, for the split of parameters, gradients and optimizer
 * states): the bytes each category of fsmoe-run's executor holds, predicted from the model's
 * shape and the parallel layout before anything is allocated. fsmoe-run refuses a run whose
 * prediction exceeds its memory limit, and prints the prediction beside what it allocated.
 *
 * The categories are fsmoe-run's (runtime/backend.h RT_MEM_*): weights, gradients, optimizer
 * (AdamW's two fp32 moments, plus an fp32 master copy where the weights are narrower),
 * activations (what the forward keeps for the backward), workspace (the backward's
 * temporaries and the logits), buffers (the MoE layers' capacity-sized exchange buffers, their
 * staging and the routing indices). The sizes follow the executor's tensors: the capacity
 * min(N, ceil(k·f·N_global/E)) rows per expert (N with a dropless gate), the attention
 * probabilities B·heads·L² per layer, the experts' pre-activations and outputs, ...
 *
 * Beyond the executor (fsmoe-run has neither yet; the planner weighs them):
 * - ZeRO (MoNTA Table 3): stage 1 shards the optimizer states, 2 also the gradients, 3 also
 *   the weights, over the ranks holding copies of a parameter: the DP group for the dense
 *   parameters, the expert-data-parallel group (world / (ep·esp)) for the experts'. With 2-byte
 *   weights that is MoNTA's 16·P, (4 + 12/d)·P, (2 + 14/d)·P and 16·P/d bytes.
 * - Activation recomputation (MoNTA Table 4, Megatron): `selective` keeps no attention
 *   probabilities (recomputed into one more B·heads·L² of workspace); `full` keeps each block's
 *   input only and recomputes the block in the backward (its activations once, as workspace).
 * Not modelled: host-side tables, the libraries' own buffers (BLAS, MPI, NCCL). */
#ifndef FSMOE_MEMORY_H
#define FSMOE_MEMORY_H

#include "names.h"

typedef enum {
    FSMOE_RECOMPUTE_NONE = 0,
    FSMOE_RECOMPUTE_SELECTIVE,
    FSMOE_RECOMPUTE_FULL
} fsmoe_recompute;
/* none, selective, full: the names the model schema, the plan and the messages use */
extern const fsmoe_name fsmoe_recompute_table[];

enum {
    FSMOE_MEM_WEIGHTS = 0,
    FSMOE_MEM_GRADS,
    FSMOE_MEM_OPTIMIZER,
    FSMOE_MEM_ACTIVATIONS,
    FSMOE_MEM_WORKSPACE,
    FSMOE_MEM_BUFFERS,
    FSMOE_MEM_CATS
};
/* "weights", "gradients", "optimizer", "activations", "workspace", "buffers" */
extern const char *const fsmoe_mem_names[FSMOE_MEM_CATS];

typedef struct {
    /* the model */
    long V, M, H, heads, kv_heads, layers, E, k;
    int expert;             /* 0 GPT (GELU, biases), 1 SwiGLU */
    int moe_every, moe_first; /* block b is MoE iff b >= moe_first && (b - moe_first) % every == 0 */
    int gshard_order;       /* GShard's dense dispatch/combine tensors (N·E·C each) */
    int gate_xmoe;          /* X-MoE's gate: a projection to gate_dim and expert embeddings */
    double f;               /* capacity factor; <= 0: dropless (up to every token per expert) */
    long gate_dim;          /* the gate's projection width (X-MoE's D; at least E's columns) */
    /* the step */
    long B, L;              /* samples and tokens per sample of this rank's batch */
    int bytes_per_element;  /* of weights, gradients and activations */
    /* the layout */
    int dp, mp, ep, esp;
    /* memory savings */
    int zero_stage;         /* 0..3 */
    int recompute;          /* FSMOE_RECOMPUTE_* */
} fsmoe_mem_shape;

typedef struct {
    double bytes[FSMOE_MEM_CATS];
    double total;
    double params;        /* parameters on this rank */
    double expert_params; /* of which the experts' */
} fsmoe_memory;

/* The gate's projection width for a hidden size M (X-MoE's low-rank routing space; the other
 * gates use it for scratch): min(M, 16). */
static inline long fsmoe_gate_dim(long M) { return M < 16 ? M : 16; }

/* The prediction for one rank (the largest: every rank of a layout holds the same shapes). */
void fsmoe_memory_estimate(const fsmoe_mem_shape *s, fsmoe_memory *out);

#endif
