/* Implements: MoNTA's AllToAll strategies O1/O2/O3 with chunk search (MoNTA §4, design.md §7).
 *
 * I bytes per AllToAll, t-way tensor parallelism, e expert-parallel nodes. Times come from the
 * profile: inter-node AllToAll over e ranks, intra-node AllGather over t ranks, device copy;
 * each evaluated by interpolating the measured points (MoNTA's efficiency curves r(n)) when the
 * entry has them, else by the fitted line. */
#ifndef FSMOE_MONTA_A2A_H
#define FSMOE_MONTA_A2A_H

#include "cost.h"
#include "plan.h"
#include "workload.h"

typedef struct {
    double I;          /* bytes per AllToAll (per GPU, before dropping the t duplicates) */
    int t, e;
    double I_minimal;  /* smallest chunk message, bytes */
    const fsmoe_cost_entry *a2a;  /* inter-node AllToAll over e ranks */
    const fsmoe_cost_entry *ag;   /* intra-node AllGather over t ranks */
    const fsmoe_cost_entry *copy; /* D2D copy; NULL = free */
} monta_problem;

typedef struct {
    double t_base, t_o1, t_o2, t_o3;
    int n_o2, n_o3;                /* chosen chunk counts */
    fsmoe_a2a_strategy best;       /* smallest of O1..O3 (base only when t = 1) */
    int chunks;                    /* of the best */
} monta_result;

/* Component times (exposed for tests against MoNTA Table 8). */
double monta_time_a2a(const monta_problem *p, double bytes); /* AllToAll of a bytes buffer */
double monta_time_ag(const monta_problem *p, double bytes);  /* AllGather of bytes output */
double monta_time_copy(const monta_problem *p, double bytes);

/* Default smallest chunk message of the chunk search: below about 1 MB MoNTA's measured link
 * efficiencies fall steeply and the fitted lines are least trustworthy. */
#define MONTA_DEFAULT_I_MINIMAL 1e6

void monta_solve(const monta_problem *p, monta_result *out);

/* Storage for entries made from derived lines (a monta_problem points at entries). */
typedef struct {
    fsmoe_cost_entry a2a, ag, copy;
} monta_entries;

/* MoNTA's problem for one MoE layer of shape s under par, the one definition every caller uses:
 * I = k·f·B·L·M·b (the dispatch AllToAll before the t tensor-parallel duplicates are dropped;
 * 0 when N_EP = 1: there is no AllToAll),
 * t = N_MP, e = N_EP, AllToAll on EP's tier, AllGather on MP's tier, the device copy if the
 * profile has one, I_minimal = MONTA_DEFAULT_I_MINIMAL. Measured entries are used with their
 * points; a derived line becomes a line-only entry kept in *store. */
void monta_problem_init(monta_problem *mp, const workload_shape *s, const fsmoe_parallel *par,
                        const workload_lines *w, monta_entries *store);

#endif
