/* Implements: the α-β cost model (design.md §3) over a cluster profile.
 *
 * t(n) = alpha + beta·n for n > 0 and 0 for n <= 0 (nothing to move costs nothing). A
 * collective on a group of size 1 is not run at all: callers pass size 1 and get a zero line.
 * Where a profile lacks an entry, a few documented derivations stand in (listed in the note the
 * lookup returns, which the planner copies into the plan):
 *   - world tier missing -> inter tier (the inter-node link bounds an EP&ESP AllToAll);
 *   - allreduce missing on a tier -> reducescatter + allgather on it (ring AllReduce = RS + AG);
 *   - saa missing -> alltoall(world) + allgather(intra) run back to back (no overlap credit).
 * Anything else missing is an error naming the profile, the op and the tier. */
#ifndef FSMOE_COST_H
#define FSMOE_COST_H

#include <stddef.h>

#include "cluster.h"
#include "status.h"

typedef struct {
    double alpha_s;
    double beta_s; /* per byte, or per MAC for gemm */
    const fsmoe_cost_entry *entry; /* the measured entry (NULL for derived or zero lines) */
} fsmoe_line;

static inline double fsmoe_line_time(const fsmoe_line *l, double n)
{
    return n > 0.0 ? l->alpha_s + l->beta_s * n : 0.0;
}

/* The collectives a plan needs, as (operation, logical group) pairs: what fsmoe-plan reads from
 * a profile (planner/workload.c) and what fsmoe-bench measures when given the layout
 * (microbench/suite.c), in the order fsmoe-bench measures them. One table, so that the two
 * cannot drift apart. SAA (EP&ESP AllToAll + MP AllGather), GEMM and copy have their own
 * rules in both programs. */
typedef enum {
    FSMOE_NEED_A2A_EP = 0,  /* the MoE dispatch/combine AllToAll */
    FSMOE_NEED_A2A_EP_ESP,  /* Parm's AllToAll over EP and ESP together */
    FSMOE_NEED_AG_ESP,      /* expert-sharding AllGather (and its ReduceScatter below) */
    FSMOE_NEED_AG_MP,       /* model-parallel AllGather */
    FSMOE_NEED_RS_ESP,
    FSMOE_NEED_AR_ESP,
    FSMOE_NEED_AR_MP,
    FSMOE_NEED_AR_DP,       /* gradient AllReduce */
    FSMOE_NEED_COUNT
} fsmoe_need;

typedef struct {
    fsmoe_op op;
    fsmoe_group group;
} fsmoe_comm_need;

extern const fsmoe_comm_need fsmoe_comm_needs[FSMOE_NEED_COUNT]; /* indexed by fsmoe_need */

/* A line that costs nothing (group of size 1). */
fsmoe_line fsmoe_line_zero(void);

/* Looks up (op, tier) in c, applying the derivations above. When a derivation was used and note
 * is not NULL, appends one line per derivation to note (lines separated by "\n", each listed
 * once however often it is used; size note_len, NUL-terminated). */
fsmoe_status fsmoe_cost_line(const fsmoe_cluster *c, const char *cluster_path, fsmoe_op op,
                             fsmoe_tier tier, fsmoe_line *out, char *note, size_t note_len,
                             fsmoe_error *err);

/* Time from the entry's measured points: piecewise-linear in n between points, the fitted line
 * outside their range or when the entry has fewer than two points. */
double fsmoe_entry_time_interp(const fsmoe_cost_entry *e, double n);

#endif
