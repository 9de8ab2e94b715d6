/* Implements: the per-rank memory model (memory.h). Each term names the executor's tensor it
 * stands for (runtime/transformer.c, attention.c, moe_layer.c, gate.c, order.c,
 * expert_ffn.c); runtime_memory checks the sum per category against what fsmoe-run
 * allocates. */
#include "memory.h"

#include <math.h>
#include <stddef.h>

const char *const fsmoe_mem_names[FSMOE_MEM_CATS] = {"weights",     "gradients", "optimizer",
                                                     "activations", "workspace", "buffers"};
const fsmoe_name fsmoe_recompute_table[] = {{"none", FSMOE_RECOMPUTE_NONE},
                                             {"selective", FSMOE_RECOMPUTE_SELECTIVE},
                                             {"full", FSMOE_RECOMPUTE_FULL},
                                             {NULL, 0}};

static int is_moe_block(const fsmoe_mem_shape *s, long b)
{
    return s->moe_every > 0 && b >= s->moe_first && (b - s->moe_first) % s->moe_every == 0;
}

/* GShard's capacity of one expert over the global batch, ceil(k·f·N_global/E) rows (at least 1,
 * at most every token); 0 for a dropless gate. */
static double global_capacity(const fsmoe_mem_shape *s, double N_global)
{
    if (s->f <= 0)
        return 0;
    double C = ceil((double)s->k * s->f * N_global / (double)s->E - 1e-9);
    C = C < 1 ? 1 : C;
    return C > N_global ? N_global : C;
}

void fsmoe_memory_estimate(const fsmoe_mem_shape *s, fsmoe_memory *out)
{
    double e = (double)s->bytes_per_element;
    double M = (double)s->M, H = (double)s->H, V = (double)s->V, L = (double)s->L;
    double B = (double)s->B, N = B * L, N_global = N * (double)s->dp;
    double mp = s->mp, ep = s->ep, esp = s->esp;
    double kv = (double)(s->kv_heads > 0 ? s->kv_heads : s->heads), heads = (double)s->heads;
    double d = M / heads, nh = heads / mp, nkv = kv / mp;
    double W = (nh + 2 * nkv) * d, D = nh * d; /* this rank's q, k, v and attention widths */
    double Vl = V / mp, Hd = H / mp;           /* vocabulary and dense FFN slices over MP */
    double E = (double)s->E, El = E / ep, Hs = H / esp, k = (double)s->k;
    int swiglu = s->expert == 1;
    double acts = 0, work = 0, bufs = 0, params = 0, eparams = 0;
    double probs = B * nh * L * L; /* one layer's attention probabilities */
    double block_max = 0;          /* the largest block's activations (full recomputation) */
    double expert_work = 0;        /* the MoE layers' shared backward temporaries */
    double xbufs = 0;              /* and their shared exchange buffers */
    int dense = 0;

    /* embedding (vocabulary slice), positions, final norm, LM head (vocabulary slice) */
    params += Vl * M + L * M + 2 * M + M * Vl;
    for (long b = 0; b < s->layers; b++) {
        double acts0 = acts;
        /* two layer norms; attention: QKV and output projections with biases (this rank's
         * heads) */
        params += 4 * M + M * W + W + D * M + M;
        /* block input, first norm, attention output, residual, second norm, FFN output; the
         * norms' means and reciprocal deviations */
        acts += 6 * N * M + 4 * N;
        /* attention (attention.c attn_acts_alloc): q, k, v; the probabilities; the heads'
         * output */
        acts += N * W + probs + N * D;
        if (!is_moe_block(s, b)) {
            dense = 1;
            params += swiglu ? 3 * M * Hd : 2 * M * Hd + Hd + M;
            acts += (swiglu ? 3 : 2) * N * Hd; /* pre-activation, activation (SwiGLU's gate) */
            block_max = acts - acts0 > block_max ? acts - acts0 : block_max;
            continue;
        }
        /* the gate (GShard, sigmoid: M x E; X-MoE: its projection M x D and the experts'
         * embeddings E x D) and the local experts' slices */
        params += s->gate_xmoe ? (M + E) * (double)s->gate_dim : M * E;
        eparams += El * (swiglu ? 3 * M * Hs : 2 * M * Hs + Hs + M);
        /* moe_alloc: P = the exchange group, S = the expert slices */
        /* each expert's rows on this rank (moe_layer.c moe_alloc): the global capacity, at
         * most one per local token (every local token without a capacity); the rows a local
         * expert receives: P members' C each, at most the global capacity per copy of the
         * tokens (MP members hold copies) */
        double S = esp, P = ep * esp, Cg = global_capacity(s, N_global);
        double C = Cg > 0 && Cg < N ? Cg : N;
        double Crep = P * C, EC = E * C;
        if (Cg > 0 && mp * Cg < Crep)
            Crep = mp * Cg;
        double ER = El * Crep, ECS = S * EC;
        double Pm = mp > 1 ? mp : 1;
        /* the experts' pre-activations and activations (SwiGLU's gate too), every slice's
         * rows: E_local · S·Crep · H/S */
        acts += (swiglu ? 3 : 2) * El * Crep * H;
        /* the gate's logits (gate.c): N x max(E, D) kept, its gradient and projection scratch */
        double cols = E > (double)s->gate_dim ? E : (double)s->gate_dim;
        acts += N * cols;
        work += N * cols + E * (double)s->gate_dim;
        /* GShard's order: dense dispatch and combine tensors and their gradients */
        if (s->gshard_order) {
            acts += 2 * N * EC;
            work += 2 * N * EC;
        }
        /* the order's row scratch (A_max = N·k rows) */
        work += N * k * M;
        /* the experts' backward temporaries: dh, da (SwiGLU: dg), S·ER rows of H/S, one set
         * for every MoE layer (their backward runs on one stream) */
        expert_work = (swiglu ? 3 : 2) * ER * H;
        /* what the forward keeps for the backward (moe_alloc's table): the expert input
         * rows (with ESP also the gathered ones) and the combined expert outputs */
        acts += (EC + ER + (S > 1 ? S * ER : 0)) * M;
        /* the routing indices (ints, as wide as reals here): tokens, slots, weights and their
         * gradients per assignment, slot tokens */
        bufs += 4 * N * k + EC;
        /* one set for every MoE layer (a phase of a layer is fork-join): the dispatched rows,
         * the expert outputs, their gradients (token and replica side), staging, own and whole
         * token rows; ESP's stacked outputs, gradients and gathers; MP's shares; both phases'
         * row maps */
        xbufs = (3 * EC + 3 * ER + 2 * (ECS > ER ? ECS : ER) + 2 * N) * M;
        if (S > 1)
            xbufs += (4 + S) * S * ER * M;
        if (Pm > 1)
            xbufs += (1 + Pm) * EC * M;
        xbufs += 2 * (ECS + ER);
        if (Pm > 1) /* S2's own-row and all-row maps */
            xbufs += 2 * (Pm * EC + Pm * Pm * EC);
        if (S > 1) /* the slices' expert and gather maps (MoNTA's whole-layer lists too) */
            xbufs += 2 * (S * ER + 2 * (S + 1) * S * ER);
        block_max = acts - acts0 > block_max ? acts - acts0 : block_max;
    }
    /* the model's own (transformer.c): final norm and its statistics; logits and their
     * gradient, the loss statistics, losses, tokens, targets, the residual stream's and the
     * norm's gradients; the dense FFN's temporaries; attention's backward scratch (one, shared
     * by the blocks) */
    acts += 2 * N * M + 2 * N;
    work += 2 * N * Vl + 3 * N + 3 * N * mp + 3 * N + 2 * N * M;
    if (dense)
        work += (swiglu ? 3 : 2) * N * H;
    work += N * W + probs + N * D + expert_work;
    bufs += xbufs;

    /* activation recomputation: the attention probabilities recomputed into one more buffer,
     * or every block from its input (one block's activations live at a time) */
    if (s->recompute == FSMOE_RECOMPUTE_SELECTIVE) {
        acts -= (double)s->layers * probs;
        work += probs;
    } else if (s->recompute == FSMOE_RECOMPUTE_FULL) {
        acts = (double)s->layers * N * M + 2 * N * M + 2 * N;
        work += block_max;
    }

    /* ZeRO: each copy of a parameter shared by its replicas, dense ones over DP, the experts'
     * over the expert-data-parallel group */
    double world = (double)s->dp * mp, edp = world / (ep * esp), dpd = (double)s->dp;
    double per_param = 8.0 + (e < 4 ? 4.0 : 0.0); /* fp32 moments (and master weights) */
    /* weights, gradients, optimizer states: sharded from stage 3, 2, 1 on */
    int sharded[3] = {s->zero_stage >= 3, s->zero_stage >= 2, s->zero_stage >= 1};
    double div[3][2]; /* [what][dense, experts] */
    for (int i = 0; i < 3; i++) {
        div[i][0] = sharded[i] ? dpd : 1;
        div[i][1] = sharded[i] ? edp : 1;
    }
    out->params = params + eparams;
    out->expert_params = eparams;
    out->bytes[FSMOE_MEM_WEIGHTS] = (params / div[0][0] + eparams / div[0][1]) * e;
    out->bytes[FSMOE_MEM_GRADS] = (params / div[1][0] + eparams / div[1][1]) * e;
    out->bytes[FSMOE_MEM_OPTIMIZER] = (params / div[2][0] + eparams / div[2][1]) * per_param;
    out->bytes[FSMOE_MEM_ACTIVATIONS] = acts * e;
    out->bytes[FSMOE_MEM_WORKSPACE] = work * e;
    out->bytes[FSMOE_MEM_BUFFERS] = bufs * e;
    out->total = 0;
    for (int c = 0; c < FSMOE_MEM_CATS; c++)
        out->total += out->bytes[c];
}
