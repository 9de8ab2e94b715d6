/* Implements: ReduceScatter as a measured collective (op_collective.h). n = the input; each
 * member keeps n/P bytes, the reduction over all members of its block; busbw = algbw·(P−1)/P
 * (nccl-tests). */
#include "op_collective.h"

static double rs_busbw(int P)
{
    return (double)(P - 1) / P;
}

static void rs_shape(size_t bytes, size_t esize, int P, coll_shape *s)
{
    size_t per_rank = bytes / esize / (size_t)P;
    s->call_count = per_rank;
    s->count = per_rank; /* nccl-tests shows the receive count for ReduceScatter */
    s->send_elems = per_rank * (size_t)P;
    s->recv_elems = per_rank;
    s->bytes = s->send_elems * esize;
}

static void rs_fill(comm_dtype t, int rank, int P, const coll_shape *s, void *send)
{
    (void)P;
    comm_pattern_fill(t, send, rank, 0, s->send_elems);
}

static size_t rs_check(comm_dtype t, comm_redop op, int rank, int P, const coll_shape *s,
                       const void *recv)
{
    size_t c = s->call_count;
    return comm_pattern_wrong_reduced(t, op, P, recv, (size_t)rank * c, c);
}

static fsmoe_status rs_run(comm_backend *b, comm_group *c, const void *send, void *recv,
                           const coll_shape *s, comm_dtype t, comm_redop op, int stream,
                           fsmoe_error *err)
{
    return b->reducescatter(b, c, send, recv, s->call_count, t, op, stream, err);
}

const coll_op op_reducescatter = {
    .op = FSMOE_OP_REDUCESCATTER, .name = "reducescatter", .reduces = 1,
    .busbw_factor = rs_busbw, .shape = rs_shape, .fill = rs_fill, .check = rs_check,
    .run = rs_run,
};
