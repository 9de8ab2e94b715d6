/* Implements: the description of one measured collective (nccl-tests' per-test hooks): how the
 * size n maps to counts, the predictable input, the exact check of the output, the call, and
 * the bus-bandwidth factor. One file per collective: op_alltoall.c (with its hierarchical
 * variant alltoall_2dh), op_allgather.c, op_reducescatter.c, op_allreduce.c.
 *
 * n follows the cost model's convention (design.md §3, nccl-tests' "size"): AllToAll = one
 * rank's buffer, AllGather = the gathered output, ReduceScatter = the input, AllReduce = the
 * buffer. A size that does not split evenly over the group is rounded down (as nccl-tests does)
 * and the row shows, and the fit uses, the bytes actually moved. */
#ifndef BENCH_OP_COLLECTIVE_H
#define BENCH_OP_COLLECTIVE_H

#include <stddef.h>

#include "comm_backend.h"
#include "cluster.h"

typedef struct {
    size_t bytes;      /* n, after rounding */
    size_t count;      /* nccl-tests' count column (elements) */
    size_t call_count; /* the count argument of the backend call */
    size_t send_elems, recv_elems;
} coll_shape;

typedef struct {
    fsmoe_op op;
    const char *name;
    int reduces; /* takes a reduction operator */
    double (*busbw_factor)(int P);
    void (*shape)(size_t bytes, size_t esize, int P, coll_shape *s);
    void (*fill)(comm_dtype t, int rank, int P, const coll_shape *s, void *send);
    /* Number of elements of recv that differ from the exact expected output. */
    size_t (*check)(comm_dtype t, comm_redop op, int rank, int P, const coll_shape *s,
                    const void *recv);
    fsmoe_status (*run)(comm_backend *b, comm_group *c, const void *send, void *recv,
                        const coll_shape *s, comm_dtype t, comm_redop op, int stream,
                        fsmoe_error *err);
} coll_op;

extern const coll_op op_alltoall;
extern const coll_op op_alltoall_2dh; /* the same exchange, hierarchical (op_alltoall.c) */
extern const coll_op op_allgather;
extern const coll_op op_reducescatter;
extern const coll_op op_allreduce;

/* The collective measuring fsmoe op `op`, or NULL (saa, gemm, copy have their own drivers). */
const coll_op *coll_op_find(fsmoe_op op);

#endif
