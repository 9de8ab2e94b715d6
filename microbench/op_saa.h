/* Implements: Parm's simultaneous AllToAll + AllGather (SAA, design.md §6, Parm §III-D and
 * its Fig. 5), measured as one operation. The AllToAll over the EP&ESP group (P ranks) runs
 * in P phases on stream 1: in phase k each rank sends its block for member r+k and receives
 * the block of member r−k (k = 0: its own), one ncclSend/ncclRecv (MPI_Sendrecv) pair; the
 * MP-AllGather of the block received in phase k runs on stream 2 as soon as it is there, so
 * it overlaps phase k+1. n = one rank's AllToAll buffer bytes; the AllGather output is N_MP·n.
 * (Until 2026-11 each "slice" was a whole AllToAll over the group: P collectives per phase
 * instead of one exchange, whose start-up latency dominated on oversubscribed machines.)
 *
 * Output check: block (k, q) of the AllGather output is what MP member q received in phase k,
 * known exactly from the input pattern. */
#ifndef BENCH_OP_SAA_H
#define BENCH_OP_SAA_H

#include <stddef.h>

#include "comm_backend.h"

typedef struct {
    comm_group *a2a, *ag;   /* EP&ESP group (streams 1) and MP group (stream 2) */
    int P_a2a, P_ag;        /* group sizes */
    int rank_a2a;           /* this rank in the EP&ESP group */
    const int *a2a_rank_of; /* [P_ag]: EP&ESP rank of each MP member */
} saa_groups;

typedef struct {
    size_t bytes;     /* n after rounding to P_a2a elements */
    size_t per_peer;  /* elements for each peer (one phase's block) */
    size_t send_elems, a2a_elems, ag_elems;
} saa_shape;

void saa_shape_of(const saa_groups *g, size_t bytes, size_t esize, saa_shape *s);
void saa_fill(const saa_groups *g, const saa_shape *s, comm_dtype t, void *send);
fsmoe_status saa_run(comm_backend *b, const saa_groups *g, const saa_shape *s, comm_dtype t,
                     const void *send, void *a2a_out, void *ag_out, fsmoe_error *err);
/* Wrong elements of the AllGather output (which contains every AllToAll output of the group). */
size_t saa_check(const saa_groups *g, const saa_shape *s, comm_dtype t, const void *ag_out);

#endif
