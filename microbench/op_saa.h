/* Implements: Parm's simultaneous AllToAll + AllGather (SAA, design.md §6, Parm §IV-B),
 * measured as one operation. The rank's buffer of n bytes is cut into S slices; slice j is an
 * AllToAll over the EP&ESP group on stream 1, and the MP-AllGather of its output runs on
 * stream 2 as soon as it is there, so the AllGather of slice j overlaps the AllToAll of slice
 * j+1 (Parm builds the same from ncclSend/ncclRecv on two streams). n = one rank's AllToAll
 * buffer bytes; the AllGather output is N_MP·n.
 *
 * Output check: slice j of the AllGather output holds, for each MP member q, q's AllToAll
 * output of slice j, which is known exactly from the input pattern. */
#ifndef BENCH_OP_SAA_H
#define BENCH_OP_SAA_H

#include <stddef.h>

#include "backend.h"

typedef struct {
    bench_comm *a2a, *ag;   /* EP&ESP group (streams 1) and MP group (stream 2) */
    int P_a2a, P_ag;        /* group sizes */
    int rank_a2a;           /* this rank in the EP&ESP group */
    const int *a2a_rank_of; /* [P_ag]: EP&ESP rank of each MP member */
    int slices;
} saa_groups;

typedef struct {
    size_t bytes;     /* n after rounding to slices·P_a2a elements */
    size_t per_peer;  /* elements per peer per slice */
    size_t send_elems, a2a_elems, ag_elems;
} saa_shape;

void saa_shape_of(const saa_groups *g, size_t bytes, size_t esize, saa_shape *s);
void saa_fill(const saa_groups *g, const saa_shape *s, bench_dtype t, void *send);
fsmoe_status saa_run(bench_backend *b, const saa_groups *g, const saa_shape *s, bench_dtype t,
                     const void *send, void *a2a_out, void *ag_out, fsmoe_error *err);
/* Wrong elements of the AllGather output (which contains every AllToAll output of the group). */
size_t saa_check(const saa_groups *g, const saa_shape *s, bench_dtype t, const void *ag_out);

#endif
