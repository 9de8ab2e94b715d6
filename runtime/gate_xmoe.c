/* Implements: the X-MoE gate (Chi et al. 2022): the token is projected to a low dimension D,
 * h = x·Wp, and scored by cosine similarity with l2-normalised expert embeddings,
 * logits = (h/|h|)·(e_i/|e_i|)ᵀ / τ; routing as GShard on these logits (softmax, top-k,
 * capacity, load-balancing loss), without noise. τ is fixed (the paper learns it; we keep it a
 * hyper-parameter, default 0.07). */
#include <math.h>

#include "gate.h"

void gate_xmoe_logits(rt_gate *g, long N)
{
    long E = g->E, D = g->D;
    double *inv_e = g->h_dproj; /* scratch: 1/|e_i| in the first E entries, restored below */
    for (long e = 0; e < E; e++) {
        double s = 0;
        for (long d = 0; d < D; d++)
            s += g->h_emb[e * D + d] * g->h_emb[e * D + d];
        inv_e[e] = 1.0 / sqrt(s + 1e-12);
    }
    for (long n = 0; n < N; n++) {
        const double *h = g->h_proj + n * D;
        double s = 0;
        for (long d = 0; d < D; d++)
            s += h[d] * h[d];
        double inv_h = 1.0 / sqrt(s + 1e-12);
        for (long e = 0; e < E; e++) {
            double dot = 0;
            for (long d = 0; d < D; d++)
                dot += h[d] * g->h_emb[e * D + d];
            g->h_logits[n * E + e] = dot * inv_h * inv_e[e] / g->tau;
        }
    }
}

void gate_xmoe_backward_logits(rt_gate *g, long N)
{
    long E = g->E, D = g->D;
    for (long i = 0; i < E * D; i++)
        g->h_demb[i] = 0;
    /* normalised expert embeddings */
    double ehat[64 * 64], einv[64];
    double *eh = E * D <= 64 * 64 ? ehat : NULL;
    if (!eh || E > 64)
        return; /* bounded by gate_register's D <= 16 and the runtime's E <= 64 */
    for (long e = 0; e < E; e++) {
        double s = 0;
        for (long d = 0; d < D; d++)
            s += g->h_emb[e * D + d] * g->h_emb[e * D + d];
        einv[e] = 1.0 / sqrt(s + 1e-12);
        for (long d = 0; d < D; d++)
            eh[e * D + d] = g->h_emb[e * D + d] * einv[e];
    }
    double dehat[64 * 64] = {0};
    for (long n = 0; n < N; n++) {
        const double *h = g->h_proj + n * D;
        double s = 0;
        for (long d = 0; d < D; d++)
            s += h[d] * h[d];
        double inv_h = 1.0 / sqrt(s + 1e-12);
        double hh[64], dhh[64] = {0};
        for (long d = 0; d < D; d++)
            hh[d] = h[d] * inv_h;
        for (long e = 0; e < E; e++) {
            double dl = g->h_dlogits[n * E + e] / g->tau;
            for (long d = 0; d < D; d++) {
                dhh[d] += dl * eh[e * D + d];
                dehat[e * D + d] += dl * hh[d];
            }
        }
        /* through h / |h| */
        double dot = 0;
        for (long d = 0; d < D; d++)
            dot += dhh[d] * hh[d];
        for (long d = 0; d < D; d++)
            g->h_dproj[n * D + d] = (dhh[d] - hh[d] * dot) * inv_h;
    }
    for (long e = 0; e < E; e++) {
        double dot = 0;
        for (long d = 0; d < D; d++)
            dot += dehat[e * D + d] * eh[e * D + d];
        for (long d = 0; d < D; d++)
            g->h_demb[e * D + d] = (dehat[e * D + d] - eh[e * D + d] * dot) * einv[e];
    }
}
