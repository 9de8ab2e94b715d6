/* Implements: MoNTA's AllToAll strategies under tensor parallelism (MoNTA §4, Algorithm 1 and
 * Table 8; design.md §7).
 *
 * I bytes per AllToAll on each GPU, t-way tensor parallelism (the t GPUs of a TP group hold the
 * same tokens), e expert-parallel nodes.
 *   base: one AllToAll of I bytes (duplicates included)            T = A2A(I)
 *   O1:   drop the duplicates, AllToAll I/t, AllGather back to I   T = A2A(I/t) + AG(I)
 *   O2:   O1 in N chunks, AllGather+copy of chunk j overlapping the AllToAll of chunk j+1
 *   O3:   like O2, the re-layout copy also pipelined behind the AllGathers
 * with AA_j = A2A(I/(N·t)), AG_j = AG(I/N), D_j = COPY(I/N) and the piecewise formulas of
 * design.md §7. The profile's entries already hold MoNTA's (e−1)/e and (t−1)/t factors and the
 * efficiency curves r(n): an entry with measured points is interpolated, else its line is used.
 * The paper's chunk search writes `T = T_min` where it means `T_min = T`; we keep the smallest T.
 * Relies on: libfsmoe cost.h (fsmoe_entry_time_interp). */
#include "monta_a2a.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#define MONTA_MAX_CHUNKS 1024

/* A missing entry costs nothing (the copy is optional; a group of one rank moves nothing). */
static double entry_time(const fsmoe_cost_entry *e, double bytes)
{
    if (!e || !e->present || !(bytes > 0.0))
        return 0.0;
    return fsmoe_entry_time_interp(e, bytes);
}

double monta_time_a2a(const monta_problem *p, double bytes)
{
    return entry_time(p->a2a, bytes);
}

double monta_time_ag(const monta_problem *p, double bytes)
{
    return p->t > 1 ? entry_time(p->ag, bytes) : 0.0;
}

double monta_time_copy(const monta_problem *p, double bytes)
{
    return entry_time(p->copy, bytes);
}

/* T of O2 and O3 with N chunks (design.md §7): whichever stream is slower runs N times and the
 * other is exposed once. O2 pipelines AllGather+copy as one stage; O3 also hides the copies
 * behind the AllGathers, so only the last one is exposed. */
static void chunked_times(const monta_problem *p, int N, double *o2, double *o3)
{
    double aa = monta_time_a2a(p, p->I / ((double)N * p->t));
    double ag = monta_time_ag(p, p->I / N);
    double d = monta_time_copy(p, p->I / N);
    *o2 = aa < ag + d ? aa + (ag + d) * N : aa * N + ag + d;
    *o3 = aa < ag ? aa + ag * N + d : aa * N + ag + d;
}

void monta_solve(const monta_problem *p, monta_result *out)
{
    out->t_base = monta_time_a2a(p, p->I);
    if (p->t <= 1) {
        /* No duplicates to drop: O1..O3 degenerate to the plain AllToAll. */
        out->t_o1 = out->t_o2 = out->t_o3 = out->t_base;
        out->n_o2 = out->n_o3 = 1;
        out->best = FSMOE_A2A_BASE;
        out->chunks = 1;
        return;
    }
    out->t_o1 = monta_time_a2a(p, p->I / p->t) + monta_time_ag(p, p->I);
    chunked_times(p, 1, &out->t_o2, &out->t_o3);
    out->n_o2 = out->n_o3 = 1;
    for (int N = 2; N <= MONTA_MAX_CHUNKS; N++) {
        /* chunks smaller than I_minimal run at a poor link efficiency the curves may not cover */
        if (p->I / ((double)N * p->t) < p->I_minimal || p->I / N < p->I_minimal)
            break;
        double t2, t3;
        chunked_times(p, N, &t2, &t3);
        if (t2 < out->t_o2)
            out->t_o2 = t2, out->n_o2 = N;
        if (t3 < out->t_o3)
            out->t_o3 = t3, out->n_o3 = N;
    }
    out->best = FSMOE_A2A_O1;
    out->chunks = 1;
    if (out->t_o2 < out->t_o1)
        out->best = FSMOE_A2A_O2, out->chunks = out->n_o2;
    if (out->t_o3 < (out->best == FSMOE_A2A_O2 ? out->t_o2 : out->t_o1))
        out->best = FSMOE_A2A_O3, out->chunks = out->n_o3;
}

/* A derived line (no measured entry) as a line-only entry; a zero line as an absent one. */
static const fsmoe_cost_entry *entry_of(const fsmoe_line *l, fsmoe_cost_entry *tmp)
{
    if (l->entry)
        return l->entry;
    memset(tmp, 0, sizeof *tmp);
    tmp->present = l->alpha_s > 0.0 || l->beta_s > 0.0;
    tmp->alpha_s = l->alpha_s;
    tmp->beta_s = l->beta_s;
    tmp->ranks = 1;
    return tmp;
}

void monta_problem_init(monta_problem *mp, const workload_shape *s, const fsmoe_parallel *par,
                        const workload_lines *w, monta_entries *store)
{
    const double f = s->f > 0.0 ? s->f : 1.0; /* no dropping: planned as balanced routing */
    memset(mp, 0, sizeof *mp);
    /* One EP rank: no AllToAll at all, so no strategy has anything to move. */
    mp->I = par->ep > 1
                ? s->k * f * (double)s->B * (double)s->L * (double)s->M * s->bytes_per_element
                : 0.0;
    mp->t = par->mp;
    mp->e = par->ep;
    mp->I_minimal = MONTA_DEFAULT_I_MINIMAL;
    mp->a2a = entry_of(&w->a2a_ep, &store->a2a);
    mp->ag = entry_of(&w->ag_mp, &store->ag);
    mp->copy = w->have_copy ? entry_of(&w->copy, &store->copy) : NULL;
}
