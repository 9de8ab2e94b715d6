/* Implements: expert-choice routing (Zhou et al. 2022): S = softmax(x·Wg) over experts; each
 * expert takes the C = ceil(k·f·N/E) tokens with the highest score for it (ties: lower token
 * index), combine weight S[n, e]. Every expert is exactly full (perfect balance); a token may be
 * taken by no expert or by several. Note: the choice looks at all tokens of the batch, later
 * positions included, as in the paper (it is not causal). */
#include <stdlib.h>

#include "gate.h"

static const double *ec_col;
static long ec_E;

static int ec_cmp(const void *pa, const void *pb)
{
    int a = *(const int *)pa, b = *(const int *)pb;
    double va = ec_col[(long)a * ec_E], vb = ec_col[(long)b * ec_E];
    if (va != vb)
        return va > vb ? -1 : 1;
    return a - b;
}

void gate_expert_choice_route(rt_gate *g, rt_routing *r, long N, int freeze)
{
    long E = g->E, C = gate_capacity(g, N);
    gate_softmax_rows(g->h_logits, g->h_probs, N, E);
    if (!freeze) {
        int *order = g->h_order;
        for (long e = 0; e < E; e++) {
            for (long n = 0; n < N; n++)
                order[n] = (int)n;
            ec_col = g->h_probs + e, ec_E = E;
            qsort(order, (size_t)N, sizeof(int), ec_cmp);
            for (long c = 0; c < C; c++)
                r->slot_tok[e * C + c] = order[c];
        }
    }
    r->N = N, r->E = E, r->C = C, r->A = E * C, r->dense = 0, r->dropped = 0,
    r->C_global = C;
    for (long e = 0; e < E; e++) {
        r->load[e] = C;
        for (long c = 0; c < C; c++) {
            long a = e * C + c, n = r->slot_tok[a];
            r->tok[a] = (int)n;
            r->slot[a] = (int)a;
            r->w[a] = (real)g->h_probs[n * E + e];
        }
    }
    /* tokens no expert took */
    for (long n = 0; n < N; n++) {
        int taken = 0;
        for (long a = 0; a < r->A && !taken; a++)
            taken = r->tok[a] == n;
        r->dropped += !taken;
    }
}

void gate_expert_choice_backward(rt_gate *g, rt_routing *r, long N)
{
    long E = g->E;
    double *dprobs = g->h_dlogits + N * E;
    for (long i = 0; i < N * E; i++)
        dprobs[i] = 0;
    for (long a = 0; a < r->A; a++)
        dprobs[(long)r->tok[a] * E + a / r->C] += r->dw[a];
    gate_softmax_rows_backward(g->h_probs, dprobs, g->h_dlogits, N, E);
}
