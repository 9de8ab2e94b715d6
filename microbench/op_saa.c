/* Implements: Parm's SAA as one measured operation (op_saa.h). */
#include "op_saa.h"

void saa_shape_of(const saa_groups *g, size_t bytes, size_t esize, saa_shape *s)
{
    s->per_peer = bytes / esize / (size_t)g->P_a2a;
    s->send_elems = s->a2a_elems = s->per_peer * (size_t)g->P_a2a;
    s->ag_elems = s->a2a_elems * (size_t)g->P_ag;
    s->bytes = s->send_elems * esize;
}

void saa_fill(const saa_groups *g, const saa_shape *s, comm_dtype t, void *send)
{
    comm_pattern_fill(t, send, g->rank_a2a, 0, s->send_elems);
}

fsmoe_status saa_run(comm_backend *b, const saa_groups *g, const saa_shape *s, comm_dtype t,
                     const void *send, void *a2a_out, void *ag_out, fsmoe_error *err)
{
    fsmoe_status st;
    size_t block = s->per_peer * comm_dtype_size(t);
    int P = g->P_a2a, r = g->rank_a2a;
    for (int k = 0; k < P; k++) {
        int dst = (r + k) % P, src = (r - k + P) % P;
        char *got = (char *)a2a_out + (size_t)src * block;
        char *out = (char *)ag_out + (size_t)k * (size_t)g->P_ag * block;
        int ev = k % COMM_EVENTS;
        if ((st = b->sendrecv(b, g->a2a, (const char *)send + (size_t)dst * block, dst, got, src,
                              s->per_peer, t, 1, err)) ||
            (st = b->event_record(b, 1, ev, err)) || (st = b->stream_wait(b, 2, ev, err)) ||
            (st = b->allgather(b, g->ag, got, out, s->per_peer, t, 2, err)))
            return st;
    }
    fsmoe_status st1 = b->sync(b, 1, err);
    fsmoe_status st2 = b->sync(b, 2, st1 ? NULL : err);
    return st1 ? st1 : st2;
}

size_t saa_check(const saa_groups *g, const saa_shape *s, comm_dtype t, const void *ag_out)
{
    size_t wrong = 0, c = s->per_peer, es = comm_dtype_size(t);
    int P = g->P_a2a;
    for (int k = 0; k < P; k++) {
        for (int q = 0; q < g->P_ag; q++) {
            int rq = g->a2a_rank_of[q], src = (rq - k + P) % P;
            /* What q received in phase k: src's block for q. */
            const char *blk = (const char *)ag_out + ((size_t)k * (size_t)g->P_ag + (size_t)q) * c * es;
            wrong += comm_pattern_wrong(t, blk, src, (size_t)rq * c, c);
        }
    }
    return wrong;
}
