/* Implements: Parm's SAA as one measured operation (op_saa.h). */
#include "op_saa.h"

void saa_shape_of(const saa_groups *g, size_t bytes, size_t esize, saa_shape *s)
{
    size_t unit = (size_t)g->slices * (size_t)g->P_a2a;
    s->per_peer = bytes / esize / unit;
    s->send_elems = s->a2a_elems = s->per_peer * unit;
    s->ag_elems = s->a2a_elems * (size_t)g->P_ag;
    s->bytes = s->send_elems * esize;
}

void saa_fill(const saa_groups *g, const saa_shape *s, bench_dtype t, void *send)
{
    dtype_fill(t, send, g->rank_a2a, 0, s->send_elems);
}

fsmoe_status saa_run(bench_backend *b, const saa_groups *g, const saa_shape *s, bench_dtype t,
                     const void *send, void *a2a_out, void *ag_out, fsmoe_error *err)
{
    fsmoe_status st;
    size_t esize = dtype_size(t);
    size_t slice = s->per_peer * (size_t)g->P_a2a; /* elements of one slice on one rank */
    for (int j = 0; j < g->slices; j++) {
        const char *in = (const char *)send + (size_t)j * slice * esize;
        char *mid = (char *)a2a_out + (size_t)j * slice * esize;
        char *out = (char *)ag_out + (size_t)j * slice * (size_t)g->P_ag * esize;
        int ev = j % BENCH_EVENTS;
        if ((st = b->alltoall(b, g->a2a, in, mid, s->per_peer, t, 1, err)) ||
            (st = b->event_record(b, 1, ev, err)) || (st = b->stream_wait(b, 2, ev, err)) ||
            (st = b->allgather(b, g->ag, mid, out, slice, t, 2, err)))
            return st;
    }
    fsmoe_status st1 = b->sync(b, 1, err);
    fsmoe_status st2 = b->sync(b, 2, st1 ? NULL : err);
    return st1 ? st1 : st2;
}

size_t saa_check(const saa_groups *g, const saa_shape *s, bench_dtype t, const void *ag_out)
{
    size_t wrong = 0, c = s->per_peer, slice = c * (size_t)g->P_a2a;
    for (int j = 0; j < g->slices; j++) {
        for (int q = 0; q < g->P_ag; q++) {
            int r = g->a2a_rank_of[q]; /* whose AllToAll output this block is */
            size_t base = ((size_t)j * (size_t)g->P_ag + (size_t)q) * slice;
            for (int p = 0; p < g->P_a2a; p++)
                for (size_t i = 0; i < c; i++)
                    wrong += dtype_get(t, ag_out, base + (size_t)p * c + i) !=
                             dtype_pattern(t, p, (size_t)j * slice + (size_t)r * c + i);
        }
    }
    return wrong;
}
