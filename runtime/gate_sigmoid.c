/* Implements: the sigmoid gate (BASE Layers / StableMoE style, design.md §10): s = σ(x·Wg) per
 * expert independently, top-k by s, combine weight = s (not renormalised), capacity as GShard.
 * No auxiliary loss. */
#include <math.h>

#include "gate.h"

void gate_sigmoid_route(rt_gate *g, rt_routing *r, long N, int freeze)
{
    long E = g->E;
    for (long i = 0; i < N * E; i++)
        g->h_probs[i] = 1.0 / (1.0 + exp(-g->h_logits[i]));
    gate_topk_route(g, r, g->h_probs, N, freeze, 0);
}

void gate_sigmoid_backward(rt_gate *g, rt_routing *r, long N)
{
    long E = g->E;
    double *dprobs = g->h_dlogits + N * E;
    gate_topk_weights_backward(g, r, g->h_probs, N, 0, dprobs);
    for (long i = 0; i < N * E; i++)
        g->h_dlogits[i] = dprobs[i] * g->h_probs[i] * (1 - g->h_probs[i]);
}
