/* Implements: the hierarchical two-dimensional AllToAll (2DH; Tutel's and DeepSpeed's
 * hierarchical AllToAll, design.md §10 "Dispatch") as a plan of data movements that any backend
 * executes: a group spanning n nodes with g members on each runs its AllToAll(v) as
 *   1. a re-layout: this member's rows ordered by destination local index, then node;
 *   2. an intra-node AllToAll(v) among its node's g members: member (a, i) sends to (a, j) every
 *      row it has for the members (b, j) of all nodes b;
 *   3. a re-layout: the rows received ordered by destination node, then source local index;
 *   4. an inter-node AllToAll(v) among the n members with its local index: (a, i) sends to
 *      (b, i) the rows of all its node's members for (b, i);
 *   5. a re-layout into the flat AllToAllv's receive order (by source member).
 * Every row crosses the inter-node link once, as in the flat AllToAll, but each member sends n−1
 * inter-node messages instead of (n−1)·g, g times larger: 2DH wins where the per-message
 * latency dominates (many nodes, small chunks) and loses the three copies where bandwidth does.
 *
 * The plan is pure arithmetic on the full matrix of row counts (every member of a MoE exchange
 * knows it: the gate's counts are all-gathered before the first chunk), so it is unit-tested
 * without MPI against the flat AllToAllv, and the MPI (comm/mpi_coll.h) and NCCL executors only
 * move blocks and exchange them (point-to-point per phase: a chunk's phase is a sparse exchange).
 * Counts are rows; a row is a caller-chosen number of elements. */
#ifndef FSMOE_A2A_2DH_H
#define FSMOE_A2A_2DH_H

#include <stddef.h>

#include "parallel.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where the members of a group sit: member[b·locals + j] is the group rank of the j-th member
 * (ascending group rank) on the b-th node (nodes in order of their lowest member). */
#define FSMOE_A2A_2DH_MAX_MEMBERS 256

typedef struct {
    int P, nodes, locals;
    int member[FSMOE_A2A_2DH_MAX_MEMBERS];
} fsmoe_a2a_2dh_shape;

/* The shape of a group of P members whose member p sits on node node_of[p]: 1 and *out filled
 * when the group spans at least two nodes with the same number (≥ 2) of members on each, else
 * 0 (2DH is then the flat AllToAll: one node, one member per node, or uneven nodes; or more
 * than FSMOE_A2A_2DH_MAX_MEMBERS members). */
int fsmoe_a2a_2dh_shape_make(const int *node_of, int P, fsmoe_a2a_2dh_shape *out);

/* Whether every logical group g of layout p has the 2DH shape under p's node-major numbering
 * (rank = node·p->gpus_per_node + local; groups as fsmoe_group_color makes them): 1 with
 * *out the shape of rank 0's group (out may be NULL), else 0 — the one rule fsmoe-plan and
 * fsmoe-bench decide with before any rank communicates. */
int fsmoe_a2a_2dh_group(const fsmoe_parallel *p, fsmoe_group g, fsmoe_a2a_2dh_shape *out);

/* One contiguous block moved by a re-layout: rows [src, src + rows) to [dst, dst + rows). */
typedef struct {
    long src, dst, rows;
} fsmoe_a2a_2dh_block;

/* This member's plan. Phase 1 peers are the node's members by local index (peer j is group
 * rank peer1[j]); phase 2 peers are the members with this local index by node (peer b is group
 * rank peer2[b]). Counts and displacements are rows. Buffers: send (the flat AllToAllv's),
 * stage A (rows_a), stage B (rows_b), stage C (rows_b), recv (the flat one's):
 *   pack1: send → A;  phase 1: A → B;  pack2: B → C;  phase 2: C → A;  unpack: A → recv
 * (stage A is reused for phase 2's receive; rows_a is the larger of what it holds). */
typedef struct fsmoe_a2a_2dh_plan {
    int nodes, locals, node, local;
    int peer1[FSMOE_A2A_2DH_MAX_MEMBERS], peer2[FSMOE_A2A_2DH_MAX_MEMBERS];
    long s1c[FSMOE_A2A_2DH_MAX_MEMBERS], s1d[FSMOE_A2A_2DH_MAX_MEMBERS];
    long r1c[FSMOE_A2A_2DH_MAX_MEMBERS], r1d[FSMOE_A2A_2DH_MAX_MEMBERS];
    long s2c[FSMOE_A2A_2DH_MAX_MEMBERS], s2d[FSMOE_A2A_2DH_MAX_MEMBERS];
    long r2c[FSMOE_A2A_2DH_MAX_MEMBERS], r2d[FSMOE_A2A_2DH_MAX_MEMBERS];
    long rows_a, rows_b;
    int n_pack1, n_pack2, n_unpack; /* blocks of each re-layout (empty ones left out) */
    fsmoe_a2a_2dh_block *pack1, *pack2, *unpack; /* one allocation, owned */
} fsmoe_a2a_2dh_plan;

/* The plan of group rank `me` for the exchange counts[s·P + d] rows from member s to member d
 * (P = shape->P). Returns 0, or -1 when out of memory. Free with fsmoe_a2a_2dh_plan_free. */
int fsmoe_a2a_2dh_plan_make(const fsmoe_a2a_2dh_shape *shape, int me, const int *counts,
                      fsmoe_a2a_2dh_plan *out);
void fsmoe_a2a_2dh_plan_free(fsmoe_a2a_2dh_plan *p); /* safe on a zeroed or freed plan */

/* Runs a re-layout on host memory (row_bytes per row). */
void fsmoe_a2a_2dh_move_host(const fsmoe_a2a_2dh_block *b, int n, const void *src, void *dst,
                       size_t row_bytes);

#ifdef __cplusplus
}
#endif

#endif
