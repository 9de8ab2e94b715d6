/* Implements: the runtime's side of the communication layer (design.md §10.1): the MPI
 * communicators of the groups a multi-rank run uses — DP (the ranks holding different samples
 * and the same dense slice), MP (tensor parallelism: the same samples, different slices of
 * the dense tensors), EP (experts distributed), ESP (slices of the same experts) and EDP (ranks
 * holding the same expert slice), numbered as layout.h says —
 * and the small host-side collectives the executor needs outside the backends' streams (gate
 * statistics, loss sums, gradient norms).
 *
 * A group has one duplicated communicator per stream slot, so that two streams (worker threads
 * of the host backend) never issue collectives on one communicator at once (MPI matches
 * collectives per communicator in call order; MPI_THREAD_MULTIPLE does not order two threads).
 * Slot 0 is the caller's thread. Every wait is the communication layer's polite, watched wait
 * (comm/mpi_coll.h), so a dead or stalled peer ends the run with a message, not a hang.
 *
 * World 1 needs no MPI at all: rt_dist_single() gives groups of one rank whose collectives are
 * no-ops, and the unit tests run that way. */
#ifndef RT_DIST_H
#define RT_DIST_H

#include <mpi.h>

#include "a2a_2dh.h"
#include "backend.h"
#include "layout.h"
#include "status.h"

#define RT_STREAM_SLOTS 8

/* The MPI type of `real` (real.h). */
#if REAL_IS_DOUBLE
#define MPI_REAL_T MPI_DOUBLE
#else
#define MPI_REAL_T MPI_FLOAT
#endif

typedef struct {
    const char *name; /* "dp", "ep", "edp", "mp", "esp", "ep_esp", "world" */
    int size, rank;
    MPI_Comm comm[RT_STREAM_SLOTS]; /* MPI_COMM_NULL on one rank */
    /* The hierarchical (2DH) AllToAll (libfsmoe/a2a_2dh.h) of the EP and EP&ESP groups: their
     * shape when they span nodes with ≥ 2 members on each (NULL otherwise), per slot the
     * node's members (ranked by local index) and the members with this local index (ranked
     * by node), and a staging buffer the slot's thread grows as needed. */
    fsmoe_a2a_2dh_shape *h2;
    MPI_Comm h_intra[RT_STREAM_SLOTS], h_inter[RT_STREAM_SLOTS];
    void *h_stage[RT_STREAM_SLOTS];
    size_t h_stage_bytes[RT_STREAM_SLOTS];
} rt_comm_group;

/* RT_EP_ESP: the EP group's members with all their ESP slices (Parm's EP&ESP AllToAll);
 * RT_WORLD: every rank. */
typedef enum {
    RT_DP = 0,
    RT_EP,
    RT_EDP,
    RT_MP,
    RT_ESP,
    RT_EP_ESP,
    RT_WORLD,
    RT_NGROUPS
} rt_group_kind;

typedef struct rt_dist {
    rt_layout layout;
    rt_comm_group g[RT_NGROUPS];
    int mpi; /* communicators were made (world > 1) */
} rt_dist;

/* Builds the groups of `layout` over MPI_COMM_WORLD (collective over the world). */
fsmoe_status dist_init(rt_dist *d, const rt_layout *layout, fsmoe_error *err);
/* World 1, no MPI. */
void dist_single(rt_dist *d, const rt_layout *layout);
void dist_free(rt_dist *d);

/* The backend's view of a group. */
rt_group dist_group(const rt_dist *d, rt_group_kind k);
/* The group's 2DH shape, or NULL where its AllToAll cannot be hierarchical (one rank, one node,
 * one member per node, nodes unknown). */
const fsmoe_a2a_2dh_shape *dist_group_2dh(const rt_group *g);

/* Host-side collectives on the caller's thread (slot 0); no-ops on a one-rank group.
 * `what` names the operation in error messages. */
fsmoe_status dist_sum_doubles(const rt_dist *d, rt_group_kind k, double *x, int n,
                              const char *what, fsmoe_error *err);
/* Reals summed in place, in pieces of at most 2^28 (MPI's int counts). */
fsmoe_status dist_sum_reals(const rt_dist *d, rt_group_kind k, real *x, long n, const char *what,
                            fsmoe_error *err);
fsmoe_status dist_sum_longs(const rt_dist *d, rt_group_kind k, long *x, int n, const char *what,
                            fsmoe_error *err);
/* out = Σ of x over the members before this one (zeros on the first). */
fsmoe_status dist_exscan_longs(const rt_dist *d, rt_group_kind k, const long *x, long *out, int n,
                               const char *what, fsmoe_error *err);
/* Member i's n_i bytes, in member order, to member 0: *out (malloc'd there, NULL elsewhere)
 * and *out_len; the other members' buffers are not needed after the call. */
fsmoe_status dist_gather_bytes(const rt_dist *d, rt_group_kind k, const char *send, long n,
                               char **out, long *out_len, const char *what, fsmoe_error *err);
/* Every member's n longs, in member order (recv holds size·n). */
fsmoe_status dist_allgather_longs(const rt_dist *d, rt_group_kind k, const long *send, long *recv,
                                  int n, const char *what, fsmoe_error *err);

#endif
