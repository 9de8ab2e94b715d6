/* Implements: Soft MoE (Puigcerver et al. 2023). Per sequence of L tokens, logits
 * Z = X·Φ (L, E·S); dispatch weights D = softmax of Z over the tokens (each slot a convex
 * mixture of the sequence's tokens), combine weights Cw = softmax of Z over the E·S slots.
 * Slot inputs X̃ = Dᵀ·X feed expert e's S slots; outputs Y = Cw·Ỹ. The routing is dense, so it
 * uses the GShard (dense einsum) order; slot c = b·S + s of expert e holds sequence b's slot s.
 * Note: a slot mixes every position of its sequence, so Soft MoE is not causal (the paper
 * targets encoders); we implement the definition as is. */
#include <math.h>
#include <string.h>

#include "gate.h"

void gate_softmoe_route(rt_gate *g, rt_routing *r, long N)
{
    long E = g->E, S = g->slots, J = E * S, L = g->L, B = N / L;
    double *Z = g->h_logits, *Cw = g->h_probs;
    /* combine: softmax over slots, per token */
    gate_softmax_rows(Z, Cw, N, J);
    /* dispatch: softmax over the tokens of each sequence, per slot (in place in Z) */
    for (long b = 0; b < B; b++)
        for (long j = 0; j < J; j++) {
            double mx = -INFINITY, s = 0;
            for (long l = 0; l < L; l++)
                mx = fmax(mx, Z[(b * L + l) * J + j]);
            for (long l = 0; l < L; l++)
                s += (Z[(b * L + l) * J + j] = exp(Z[(b * L + l) * J + j] - mx));
            for (long l = 0; l < L; l++)
                Z[(b * L + l) * J + j] /= s;
        }
    r->N = N, r->E = E, r->C = B * S, r->A = 0, r->dense = 1, r->dropped = 0,
    r->C_global = 0;
    for (long e = 0; e < E; e++)
        r->load[e] = B * S;
}

/* Column of the dense (N, E·C) matrices for token n's sequence and compact slot j = e·S + s. */
long gate_softmoe_col(const rt_gate *g, long C, long n, long j)
{
    long S = g->slots, b = n / g->L;
    return (j / S) * C + b * S + j % S;
}

void gate_softmoe_backward_compact(rt_gate *g, long N, const double *dD, const double *dCw)
{
    long E = g->E, S = g->slots, J = E * S, L = g->L, B = N / L;
    const double *D = g->h_logits, *Cw = g->h_probs;
    double *dZ = g->h_dlogits;
    for (long n = 0; n < N; n++) {
        double dot = 0;
        for (long j = 0; j < J; j++)
            dot += Cw[n * J + j] * dCw[n * J + j];
        for (long j = 0; j < J; j++)
            dZ[n * J + j] = Cw[n * J + j] * (dCw[n * J + j] - dot);
    }
    for (long b = 0; b < B; b++)
        for (long j = 0; j < J; j++) {
            double dot = 0;
            for (long l = 0; l < L; l++)
                dot += D[(b * L + l) * J + j] * dD[(b * L + l) * J + j];
            for (long l = 0; l < L; l++) {
                long i = (b * L + l) * J + j;
                dZ[i] += D[i] * (dD[i] - dot);
            }
        }
}
