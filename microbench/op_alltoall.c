/* Implements: AllToAll as a measured collective (op_collective.h), in two algorithms with the
 * same n, data, check and bus bandwidth: `alltoall` (the backend's flat AllToAll) and
 * `alltoall_2dh` (the hierarchical 2DH AllToAll, libfsmoe/a2a_2dh.h: an AllToAll inside each node,
 * then one among the ranks with the same local index, with re-layouts between; measured only
 * on groups that span nodes with several members on each, suite.c). Each of the P members
 * sends n/P bytes to every member; busbw = algbw·(P−1)/P (nccl-tests). Expected output on
 * rank r: block p holds what p placed at block r of its input. */
#include "op_collective.h"

static double a2a_busbw(int P)
{
    return (double)(P - 1) / P;
}

static void a2a_shape(size_t bytes, size_t esize, int P, coll_shape *s)
{
    size_t per_peer = bytes / esize / (size_t)P;
    s->call_count = per_peer;
    s->count = per_peer * (size_t)P;
    s->send_elems = s->recv_elems = s->count;
    s->bytes = s->count * esize;
}

static void a2a_fill(comm_dtype t, int rank, int P, const coll_shape *s, void *send)
{
    (void)P;
    comm_pattern_fill(t, send, rank, 0, s->send_elems);
}

static size_t a2a_check(comm_dtype t, comm_redop op, int rank, int P, const coll_shape *s,
                        const void *recv)
{
    (void)op;
    size_t wrong = 0, c = s->call_count, es = comm_dtype_size(t);
    for (int p = 0; p < P; p++)
        wrong += comm_pattern_wrong(t, (const char *)recv + (size_t)p * c * es, p,
                                   (size_t)rank * c, c);
    return wrong;
}

static fsmoe_status a2a_run(comm_backend *b, comm_group *c, const void *send, void *recv,
                            const coll_shape *s, comm_dtype t, comm_redop op, int stream,
                            fsmoe_error *err)
{
    (void)op;
    return b->alltoall(b, c, send, recv, s->call_count, t, stream, err);
}

const coll_op op_alltoall = {
    .op = FSMOE_OP_ALLTOALL, .name = "alltoall", .reduces = 0, .busbw_factor = a2a_busbw,
    .shape = a2a_shape, .fill = a2a_fill, .check = a2a_check, .run = a2a_run,
};

static fsmoe_status a2a_2dh_run(comm_backend *b, comm_group *c, const void *send, void *recv,
                                const coll_shape *s, comm_dtype t, comm_redop op, int stream,
                                fsmoe_error *err)
{
    (void)op;
    return b->alltoall_2dh(b, c, send, recv, s->call_count, t, stream, err);
}

const coll_op op_alltoall_2dh = {
    .op = FSMOE_OP_ALLTOALL_2DH, .name = "alltoall_2dh", .reduces = 0,
    .busbw_factor = a2a_busbw, .shape = a2a_shape, .fill = a2a_fill, .check = a2a_check,
    .run = a2a_2dh_run,
};

const coll_op *coll_op_find(fsmoe_op op)
{
    switch (op) {
    case FSMOE_OP_ALLTOALL: return &op_alltoall;
    case FSMOE_OP_ALLTOALL_2DH: return &op_alltoall_2dh;
    case FSMOE_OP_ALLGATHER: return &op_allgather;
    case FSMOE_OP_REDUCESCATTER: return &op_reducescatter;
    case FSMOE_OP_ALLREDUCE: return &op_allreduce;
    default: return NULL;
    }
}
