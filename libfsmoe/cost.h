/* Implements: the α-β cost model (design.md §3) over a cluster profile.
 *
 * t(n) = alpha + beta·n for n > 0 and 0 for n <= 0 (nothing to move costs nothing). A
 * collective on a group of size 1 is not run at all: callers pass size 1 and get a zero line.
 * Where a profile lacks an entry, a few documented derivations stand in (listed in the note the
 * lookup returns, which the planner copies into the plan):
 *   - world tier missing -> inter tier (the inter-node link bounds an EP&ESP AllToAll);
 *   - allreduce missing on a tier -> reducescatter + allgather on it (ring AllReduce = RS + AG);
 *   - saa missing -> alltoall(world) + allgather(intra) run back to back (no overlap credit);
 *   - alltoall_2dh missing -> over a group of P = nodes × g ranks (g members on each of `nodes`
 *     nodes), alltoall(intra, g ranks) + alltoall(inter, nodes ranks) + 3 × copy, every term at
 *     the same n (each phase of the hierarchical AllToAll, libfsmoe/a2a_2dh.h, moves one rank's
 *     whole buffer, and each of its three re-layouts copies it once); the lines add (α and β
 *     sum). No overlap credit between the phases (they depend on each other).
 * Anything else missing is an error naming the profile, the op and the tier.
 *
 * The hierarchical AllToAll (FSMOE_OP_ALLTOALL_2DH, "2DH") exists only on a group that spans
 * at least two nodes with the same number (≥ 2) of members on each — a world-tier group
 * (parallel.h). On one node, or with one member per node, 2DH is the flat AllToAll: there is no
 * 2DH line to ask for, and fsmoe_cost_line_2dh refuses such a shape (FSMOE_ERR_INTERNAL: the
 * caller, not the profile, is wrong). Its measured entries (fsmoe-bench measures it on the
 * world tier) follow the group-size rule below by their rank count, as alltoall's do.
 *
 * Group size. A profile may hold an (op, tier) at several group sizes (cluster.h `ranks`); a
 * plan needs it at the size p of its logical group (fsmoe_group_size). The line used is:
 *   - p measured: that entry, exactly (no note);
 *   - otherwise scaled by bus bandwidth (nccl-tests' busbw = algbw·s(p), with
 *     s(p) = (p−1)/p for AllToAll, AllGather, ReduceScatter and SAA and 2(p−1)/p for
 *     AllReduce; busbw is the per-link rate, which does not depend on p): β/s(p) is seconds
 *     per bus byte, so from one measured size p0, β(p) = β(p0)·s(p)/s(p0);
 *     between two measured sizes p0 < p < p1, β(p)/s(p) and α are linear in p between theirs;
 *     below or above every measured size, β from the nearest (as above) and α on the line
 *     through the two nearest sizes (α(p) = α_near + k·(p − p_near), k ≥ 0, α ≥ 0): the ring
 *     algorithms NCCL and MPI use for AllGather, ReduceScatter and AllReduce take p−1 (2(p−1))
 *     latency-bound steps, and an AllToAll posts p−1 sends, so α grows linearly in p when the
 *     per-step latency matters; with a single measured size α is kept as measured — one size
 *     cannot separate the per-step part from the fixed launch and synchronisation cost, which
 *     dominates measured α (FSMoE Testbed A: α_a2a = 287 µs over 6 nodes, against a few µs
 *     per InfiniBand step), so scaling it with p−1 would move most of a fixed cost;
 *   - the world tier, when absent, falls back to the inter tier at ⌈p/G⌉ nodes.
 * Scaled lines carry no measured entry (fsmoe_line.entry = NULL: their points are not at this
 * size) and add one note, e.g. "alltoall inter: measured at 6 ranks, scaled to 4 by bus
 * bandwidth (beta x 0.9 = s(4)/s(6), ...)". Caveat: on 2 nodes NCCL may pick its tree
 * algorithm, whose busbw can exceed the ring's; the model then over-estimates β there. */
#ifndef FSMOE_COST_H
#define FSMOE_COST_H

#include <stddef.h>

#include "cluster.h"
#include "status.h"

typedef struct {
    double alpha_s;
    double beta_s; /* per byte, or per MAC for gemm */
    const fsmoe_cost_entry *entry; /* the measured entry (NULL for derived or zero lines) */
    /* the measured entries the line was read, scaled or interpolated from (NULL: fewer) */
    const fsmoe_cost_entry *from[2];
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

/* The start of a note line for a measured fit below the profile's r2 threshold that a cost
 * line rests on (one per such fit; fsmoe-plan counts them to warn). */
#define FSMOE_LOW_R2_NOTE "LOW R2: "

/* Appends each line of `text` ("\n"-separated) to `note` (note_len bytes, NUL-terminated)
 * unless that exact line is already there, and only whole lines that fit: a note gathered over
 * many lookups lists every derivation once, one per line. */
void fsmoe_note_add(char *note, size_t note_len, const char *text);

/* A line that costs nothing (group of size 1). */
fsmoe_line fsmoe_line_zero(void);

/* Looks up (op, tier) in c, applying the derivations above. When a derivation was used and note
 * is not NULL, appends one line per derivation to note (lines separated by "\n", each listed
 * once however often it is used; size note_len, NUL-terminated). */
fsmoe_status fsmoe_cost_line(const fsmoe_cluster *c, const char *cluster_path, fsmoe_op op,
                             fsmoe_tier tier, fsmoe_line *out, char *note, size_t note_len,
                             fsmoe_error *err);

/* The same at a group of `ranks` (the group-size rule above; ranks <= 0: the widest entry as
 * measured, which is what fsmoe_cost_line does). */
fsmoe_status fsmoe_cost_line_at(const fsmoe_cluster *c, const char *cluster_path, fsmoe_op op,
                                fsmoe_tier tier, int ranks, fsmoe_line *out, char *note,
                                size_t note_len, fsmoe_error *err);

/* The GEMM line for an expert of shape M:H (M, H < 1: not known). A profile may hold gemm
 * entries at several shapes (cluster.h); the line used is:
 *   - the entry measured at M:H, else the entry without a shape (one line for every shape),
 *     with no note;
 *   - else the measured shape nearest to M:H (smallest |ln(M/m)| + |ln(H/h)|, ties the first in
 *     the profile's order), noted, e.g. "gemm local: measured at shape 256:1024, used for
 *     512:2048 (the nearest of 2 measured shapes)";
 *   - M:H not known: the last in order (what fsmoe_cost_line gives), noted.
 * Fails as fsmoe_cost_line does when the profile has no gemm entry. */
fsmoe_status fsmoe_cost_line_gemm(const fsmoe_cluster *c, const char *cluster_path, double M,
                                  double H, fsmoe_line *out, char *note, size_t note_len,
                                  fsmoe_error *err);

/* The hierarchical AllToAll over a group of nodes × locals ranks (locals members on each of
 * `nodes` nodes, both ≥ 2): the measured alltoall_2dh world entry at that rank count (or scaled
 * from the sizes measured, as alltoall), else the derivation above (noted). Fails with
 * FSMOE_ERR_VALUE naming the missing entry when neither exists, FSMOE_ERR_INTERNAL for a shape
 * that is not hierarchical. fsmoe_cost_line_at(FSMOE_OP_ALLTOALL_2DH, world, P) is this with
 * locals = the profile's gpus_per_node (full nodes). */
fsmoe_status fsmoe_cost_line_2dh(const fsmoe_cluster *c, const char *cluster_path, int nodes,
                                 int locals, fsmoe_line *out, char *note, size_t note_len,
                                 fsmoe_error *err);

/* nccl-tests' bus-bandwidth factor s(p): 2(p−1)/p for AllReduce, (p−1)/p for the other
 * collectives (the hierarchical AllToAll counts as AllToAll: the same bytes leave each rank),
 * 1 for local operations. */
double fsmoe_busbw_factor(fsmoe_op op, int ranks);

/* The group-size rule on entries of one (op, tier), ascending by ranks (n >= 1; no two with
 * the same ranks). Writes how the line was obtained to `how` ("" when an entry matched). */
fsmoe_line fsmoe_line_at_ranks(fsmoe_op op, const fsmoe_cost_entry *const *entries, int n,
                               int ranks, char *how, size_t how_len);

/* Time from the entry's measured points: piecewise-linear in n between points, the fitted line
 * outside their range or when the entry has fewer than two points. */
double fsmoe_entry_time_interp(const fsmoe_cost_entry *e, double n);

#endif
