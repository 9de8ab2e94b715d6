/* Implements: where the ranks sit and the groups of each physical tier (design.md §2,
 * libfsmoe/parallel.h): intra-node (ranks of one node: ESP/MP), inter-node (the same local rank
 * on every node: EP/DP) and world (several ranks per node on several nodes: Parm's EP&ESP).
 *
 * Nodes come from --gpus-per-node G (rank = node·G + local, the numbering parallel.h assumes)
 * or, when G is 0, from MPI_Comm_split_type(SHARED), i.e. the ranks' actual placement. A tier
 * exists only when it is a distinct group of more than one rank: one node has no inter tier
 * and its world tier is the intra tier; G = 1 has no intra tier. */
#ifndef FSMOE_COMM_TOPOLOGY_H
#define FSMOE_COMM_TOPOLOGY_H

#include <mpi.h>

#include "a2a_2dh.h"
#include "parallel.h"
#include "status.h"

typedef struct {
    int rank, size;          /* in the world communicator */
    int nodes, gpus_per_node;
    int node, local;         /* this rank's node and its rank inside the node */
    int detected;            /* 1: from MPI_Comm_split_type, 0: from --gpus-per-node */
    int node_major;          /* every rank = node·G + local (what parallel.h numbers by) */
    char host[64];
    MPI_Comm tier[FSMOE_TIER_COUNT];  /* MPI_COMM_NULL where the tier does not exist */
    int tier_size[FSMOE_TIER_COUNT];  /* group size per tier (1 for local) */
} comm_topology;

/* gpus_per_node = 0: detect. An impossible request (G not dividing the world, nodes holding
 * different numbers of ranks) gives FSMOE_ERR_USAGE with one message, on every rank. */
fsmoe_status topology_init(comm_topology *t, MPI_Comm world, int gpus_per_node,
                           fsmoe_error *err);
void topology_free(comm_topology *t); /* safe on a zeroed or half-built topology */

int topology_has_tier(const comm_topology *t, fsmoe_tier tier);

/* This rank's index among the ranks of its node (MPI_Comm_split_type SHARED over world; 0
 * when MPI is not initialised): the GPU a rank uses is this modulo the node's devices. */
int topology_local_rank(MPI_Comm world);

/* The communicator of this rank's logical group g under layout p (libfsmoe/parallel.h
 * numbering: ESP consecutive, EP stride esp inside an EP&ESP block, MP consecutive, DP stride
 * mp). Collective over world; the caller frees *out. */
fsmoe_status topology_group_comm(const comm_topology *t, MPI_Comm world, const fsmoe_parallel *p,
                                 fsmoe_group g, MPI_Comm *out, fsmoe_error *err);

/* ---- the hierarchical (2DH) AllToAll's view of a group (libfsmoe/a2a_2dh.h) ---- */

/* What a backend's group keeps for alltoall_2dh: whether the group is hierarchical and, when it
 * is, this member's plan of the uniform exchange (one row per (source, destination) pair: the
 * backend scales a row to count_per_peer elements, so one plan serves every size). */
typedef struct {
    int hierarchical;
    int P, nodes;      /* members; nodes among them (hierarchical only) */
    fsmoe_a2a_2dh_shape shape; /* hierarchical only: where the members sit */
    fsmoe_a2a_2dh_plan plan; /* hierarchical only; peers are group ranks */
    char why[192];     /* not hierarchical: why, for the op's error message */
} topology_2dh;

/* Collective over group: all-gathers each member's node (this rank's is `node`, -1 when
 * unknown) and fills h. Fails only on MPI errors and memory. */
fsmoe_status topology_2dh_init(MPI_Comm group, int node, topology_2dh *h, fsmoe_error *err);
void topology_2dh_free(topology_2dh *h); /* safe on a zeroed or freed one */

/* The two communicators a phase of the 2DH AllToAll runs on, split from comm (collective over
 * it) for member (node, local) of a hierarchical group (h->plan.node, .local): the node's
 * members ranked by local index, and the members with this local index ranked by node. */
fsmoe_status topology_2dh_split(MPI_Comm comm, const topology_2dh *h, MPI_Comm *intra,
                                MPI_Comm *inter, fsmoe_error *err);

/* Whether alltoall_2dh applies to a measured group, decided without communication (every rank
 * decides the same): the world tier of t (it exists only with ≥ 2 nodes of ≥ 2 ranks each);
 * or, with a layout p (node-major numbering, rank = node·G + local, which fsmoe-bench requires
 * for layouts), every logical group g. At most FSMOE_A2A_2DH_MAX_MEMBERS members. */
int topology_tier_2dh(const comm_topology *t, fsmoe_tier tier);
int topology_group_2dh(const comm_topology *t, const fsmoe_parallel *p, fsmoe_group g);

#endif
