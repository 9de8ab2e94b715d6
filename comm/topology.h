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

#endif
