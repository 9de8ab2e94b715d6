/* Implements: AllReduce as a measured collective (op_collective.h). n = the buffer; every
 * member ends with the reduction over all members; busbw = algbw·2(P−1)/P (nccl-tests). */
#include "op_collective.h"

static double ar_busbw(int P)
{
    return 2.0 * (P - 1) / P;
}

static void ar_shape(size_t bytes, size_t esize, int P, coll_shape *s)
{
    (void)P;
    s->call_count = bytes / esize;
    s->count = s->call_count;
    s->send_elems = s->recv_elems = s->count;
    s->bytes = s->count * esize;
}

static void ar_fill(comm_dtype t, int rank, int P, const coll_shape *s, void *send)
{
    (void)P;
    comm_pattern_fill(t, send, rank, 0, s->send_elems);
}

static size_t ar_check(comm_dtype t, comm_redop op, int rank, int P, const coll_shape *s,
                       const void *recv)
{
    (void)rank;
    return comm_pattern_wrong_reduced(t, op, P, recv, 0, s->count);
}

static fsmoe_status ar_run(comm_backend *b, comm_group *c, const void *send, void *recv,
                           const coll_shape *s, comm_dtype t, comm_redop op, int stream,
                           fsmoe_error *err)
{
    return b->allreduce(b, c, send, recv, s->call_count, t, op, stream, err);
}

const coll_op op_allreduce = {
    .op = FSMOE_OP_ALLREDUCE, .name = "allreduce", .reduces = 1, .busbw_factor = ar_busbw,
    .shape = ar_shape, .fill = ar_fill, .check = ar_check, .run = ar_run,
};
