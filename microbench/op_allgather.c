/* Implements: AllGather as a measured collective (op_collective.h). n = the gathered output;
 * each member contributes n/P bytes; busbw = algbw·(P−1)/P (nccl-tests). Expected output:
 * block p = member p's input. */
#include "op_collective.h"

static double ag_busbw(int P)
{
    return (double)(P - 1) / P;
}

static void ag_shape(size_t bytes, size_t esize, int P, coll_shape *s)
{
    size_t per_rank = bytes / esize / (size_t)P;
    s->call_count = per_rank;
    s->count = per_rank; /* nccl-tests shows the send count for AllGather */
    s->send_elems = per_rank;
    s->recv_elems = per_rank * (size_t)P;
    s->bytes = s->recv_elems * esize;
}

static void ag_fill(comm_dtype t, int rank, int P, const coll_shape *s, void *send)
{
    (void)P;
    comm_pattern_fill(t, send, rank, 0, s->send_elems);
}

static size_t ag_check(comm_dtype t, comm_redop op, int rank, int P, const coll_shape *s,
                       const void *recv)
{
    (void)op;
    (void)rank;
    size_t wrong = 0, c = s->call_count, es = comm_dtype_size(t);
    for (int p = 0; p < P; p++)
        wrong += comm_pattern_wrong(t, (const char *)recv + (size_t)p * c * es, p, 0, c);
    return wrong;
}

static fsmoe_status ag_run(comm_backend *b, comm_group *c, const void *send, void *recv,
                           const coll_shape *s, comm_dtype t, comm_redop op, int stream,
                           fsmoe_error *err)
{
    (void)op;
    return b->allgather(b, c, send, recv, s->call_count, t, stream, err);
}

const coll_op op_allgather = {
    .op = FSMOE_OP_ALLGATHER, .name = "allgather", .reduces = 0, .busbw_factor = ag_busbw,
    .shape = ag_shape, .fill = ag_fill, .check = ag_check, .run = ag_run,
};
