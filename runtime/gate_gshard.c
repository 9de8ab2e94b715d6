/* Implements: the GShard noisy top-k gate (GShard, Lepikhin et al. 2020 §2.2; noise as in
 * Shazeer et al. 2017): p = softmax(x·Wg + ε), ε ~ N(0, noise²) while training; top-k experts
 * per token, weights renormalised over the k chosen (k = 1: the raw probability); capacity
 * C = ceil(k·f·N/E) filled first choices first, the rest dropped. Load-balancing loss
 * aux = E · Σ_e f_e · P_e, f_e = fraction of tokens whose first choice is e (a constant),
 * P_e = mean probability of e. X-MoE reuses this routing on its cosine logits. */
#include <string.h>

#include "dist.h"
#include "gate.h"
#include "rng.h"

void gate_gshard_route(rt_gate *g, rt_routing *r, long N, int training, uint64_t seed, long step,
                       int freeze)
{
    long E = g->E;
    if (training && g->noise > 0)
        for (long n = 0; n < N; n++)
            for (long e = 0; e < E; e++)
                g->h_logits[n * E + e] +=
                    g->noise * rng_normal(seed, 0x6a7e0000u + (uint64_t)g->layer, (uint64_t)step,
                                          (uint64_t)((g->tok0 + n) * E + e));
    gate_softmax_rows(g->h_logits, g->h_probs, N, E);
    gate_topk_route(g, r, g->h_probs, N, freeze, g->k > 1);
    /* auxiliary loss over the global batch: first-choice counts and probability sums are summed
     * over the DP group, so every rank computes the same aux and its own tokens' share of the
     * gradient (the DP AllReduce of the gate's weight gradient adds the shares) */
    double *stat = g->h_stat;
    for (long e = 0; e < E; e++) {
        long cnt = 0;
        double P = 0;
        for (long n = 0; n < N; n++) {
            cnt += r->topk[n * g->k] == e;
            P += g->h_probs[n * E + e];
        }
        stat[e] = (double)cnt;
        stat[E + e] = P;
    }
    if (g->dist && g->dist_err.status == FSMOE_OK)
        dist_sum_doubles(g->dist, g->group, stat, (int)(2 * E), "gate auxiliary-loss statistics",
                         &g->dist_err);
    double Ng = (double)(g->N_global > 0 ? g->N_global : N), aux = 0;
    for (long e = 0; e < E; e++) {
        double f = stat[e] / Ng, P = stat[E + e] / Ng;
        aux += (double)E * f * P;
        g->aux_grad_coef[e] = (double)E * f / Ng;
    }
    g->aux = aux;
}

void gate_gshard_backward(rt_gate *g, rt_routing *r, long N, double aux_coef)
{
    long E = g->E;
    double *dprobs = g->h_dlogits + N * E; /* scratch after the (N, E) block */
    gate_topk_weights_backward(g, r, g->h_probs, N, g->k > 1, dprobs);
    for (long n = 0; n < N; n++)
        for (long e = 0; e < E; e++)
            dprobs[n * E + e] += aux_coef * g->aux_grad_coef[e];
    gate_softmax_rows_backward(g->h_probs, dprobs, g->h_dlogits, N, E);
}
