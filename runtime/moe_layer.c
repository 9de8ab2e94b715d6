/* Implements: the MoE layer executor (moe_layer.h). */
#include "moe_layer.h"
#include "trace.h"

#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "grad_sync.h"

static const char *const hook_names[RT_HOOK_COUNT] = {
    "BeforeMoeStart", "BeforeDispatch", "AfterDispatch",
    "BeforeCombine",  "AfterCombine",   "BeforeMoeEnd"};

const char *moe_hook_name(rt_hook h) { return h < RT_HOOK_COUNT ? hook_names[h] : "?"; }

static void hook(rt_moe *m, rt_hook h, int chunk, int backward)
{
    if (m->hook)
        m->hook(m->hook_user, h, m->index, chunk, backward);
}

static int group_size(const rt_moe *m) { return m->ep.size > 0 ? m->ep.size : 1; }

static fsmoe_status xmap_alloc(rt_xmap *x, rt_backend *be, int P, long E_local, long nA, long nB)
{
    int R = RT_MOE_MAX_CHUNKS;
    x->send_rows = calloc((size_t)(R * P), sizeof(int));
    x->recv_rows = calloc((size_t)(R * P), sizeof(int));
    x->offA = calloc((size_t)R + 1, sizeof(long));
    x->offB = calloc((size_t)R + 1, sizeof(long));
    x->h_idx = calloc((size_t)(nA + nB) + 1, sizeof(int));
    x->r0 = calloc((size_t)(R * E_local), sizeof(long));
    x->r1 = calloc((size_t)(R * E_local), sizeof(long));
    x->idxA = be->alloc(be, (size_t)(nA + 1) * sizeof(int));
    x->idxB = be->alloc(be, (size_t)(nB + 1) * sizeof(int));
    if (!x->send_rows || !x->recv_rows || !x->offA || !x->offB || !x->h_idx || !x->r0 || !x->r1 ||
        !x->idxA || !x->idxB)
        return FSMOE_ERR_NOMEM;
    return FSMOE_OK;
}

static void xmap_free(rt_xmap *x, rt_backend *be)
{
    free(x->send_rows), free(x->recv_rows), free(x->offA), free(x->offB), free(x->h_idx);
    free(x->r0), free(x->r1);
    if (x->idxA)
        be->free(be, x->idxA);
    if (x->idxB)
        be->free(be, x->idxB);
    memset(x, 0, sizeof *x);
}

fsmoe_status moe_alloc(rt_moe *m, rt_backend *be)
{
    int P = group_size(m);
    long M = m->M, H = m->ex.H;
    m->E_local = m->E / P;
    /* token-choice gates fill at most one slot per token and expert on this rank */
    if (m->gate.kind != RT_GATE_EXPERT_CHOICE && m->gate.kind != RT_GATE_SOFTMOE &&
        m->gate.C_max < m->N_max)
        m->gate.C_max = m->N_max;
    m->C_max = m->gate.C_max;
    m->Crep_max = (long)P * m->C_max;
    long EC = m->E * m->C_max, ER = m->E_local * m->Crep_max;
    fsmoe_status st = gate_alloc(&m->gate, &m->route, be);
    if (st != FSMOE_OK)
        return st;
    long A_max = m->gate.kind == RT_GATE_EXPERT_CHOICE ? EC : m->N_max * m->gate.k;
    st = order_alloc(&m->order, &m->route, be, m->order.kind, M, m->N_max, m->C_max, m->E, A_max);
    if (st != FSMOE_OK)
        return st;
    st = expert_acts_alloc(&m->eacts, &m->ex, be, m->Crep_max);
    if (st != FSMOE_OK)
        return st;
    size_t bl = (size_t)(EC * M + 1) * sizeof(real), br = (size_t)(ER * M + 1) * sizeof(real);
    size_t bs = (size_t)((EC > ER ? EC : ER) * M + 1) * sizeof(real);
    size_t bh = (size_t)(ER * H + 1) * sizeof(real);
    struct {
        real **p;
        size_t bytes;
    } bufs[] = {{&m->Xd, bl},  {&m->Yc, bl},  {&m->dYc, bl}, {&m->dXd, bl},
                {&m->Xe, br},  {&m->Ye, br},  {&m->dYe, br}, {&m->dXe, br},
                {&m->dh, bh},  {&m->da, bh},  {&m->dg, bh},  {&m->send_stage, bs},
                {&m->recv_stage, bs}};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (!(*bufs[i].p = be->alloc(be, bufs[i].bytes)))
            return FSMOE_ERR_NOMEM;
    m->K = calloc((size_t)(P * m->E), sizeof(long));
    if (!m->K)
        return FSMOE_ERR_NOMEM;
    for (int ph = 0; ph < 2; ph++)
        if ((st = xmap_alloc(&m->xm[ph], be, P, m->E_local, EC, ER)) != FSMOE_OK)
            return st;
    m->ev_start = be->event_create(be);
    if (!m->ev_start)
        return FSMOE_ERR_NOMEM;
    for (int i = 0; i < 3 * RT_MOE_MAX_CHUNKS; i++)
        if (!(m->ev[i] = be->event_create(be)))
            return FSMOE_ERR_NOMEM;
    return FSMOE_OK;
}

void moe_free(rt_moe *m, rt_backend *be)
{
    if (!be)
        return;
    /* order first: gate_free clears the whole routing record, including the order's buffers */
    order_free(&m->order, &m->route, be);
    gate_free(&m->gate, &m->route, be);
    expert_acts_free(&m->eacts, be);
    real *bufs[] = {m->Xd, m->Yc, m->dYc, m->dXd, m->Xe, m->Ye, m->dYe, m->dXe,
                    m->dh, m->da, m->dg, m->send_stage, m->recv_stage};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i])
            be->free(be, bufs[i]);
    for (int ph = 0; ph < 2; ph++)
        xmap_free(&m->xm[ph], be);
    free(m->K);
    m->K = NULL;
    if (m->ev_start)
        be->event_destroy(be, m->ev_start);
    for (int i = 0; i < 3 * RT_MOE_MAX_CHUNKS; i++)
        if (m->ev[i])
            be->event_destroy(be, m->ev[i]);
    m->ev_start = NULL;
}

/* K[s][e] for every member s of the EP group; Crep for this step. */
static fsmoe_status exchange_counts(rt_moe *m, rt_backend *be)
{
    int P = group_size(m);
    long E = m->E;
    fsmoe_error err = {0};
    if (P == 1 || !m->dist) {
        memcpy(m->K, m->route.load, (size_t)E * sizeof(long));
    } else {
        fsmoe_status st = dist_allgather_longs(m->dist, RT_EP, m->route.load, m->K, (int)E,
                                               "MoE token-count exchange (ep)", &err);
        if (st != FSMOE_OK) {
            rt_backend_fail(be, st, "%s", err.msg);
            return st;
        }
    }
    long q = m->ep.rank, Crep = 1;
    for (long el = 0; el < m->E_local; el++) {
        long T = 0;
        for (int s = 0; s < P; s++)
            T += m->K[s * E + q * m->E_local + el];
        Crep = T > Crep ? T : Crep;
    }
    if (Crep > m->Crep_max) {
        rt_backend_fail(be, FSMOE_ERR_INTERNAL, "MoE layer %d: %ld rows for one expert (room for %ld)",
                        m->index, Crep, m->Crep_max);
        return FSMOE_ERR_INTERNAL;
    }
    m->Crep = Crep;
    return FSMOE_OK;
}

/* Rows [lo, hi) of member s's part of chunk j of expert e (in the replica's numbering);
 * empty when hi <= lo. */
static void chunk_part(const rt_moe *m, int P, long e, int s, int j, int r, long *lo, long *hi,
                       long *off)
{
    long E = m->E, T = 0, o = 0;
    for (int t = 0; t < P; t++) {
        if (t < s)
            o += m->K[t * E + e];
        T += m->K[t * E + e];
    }
    long a = (long)j * T / r, b = (long)(j + 1) * T / r, k = m->K[s * E + e];
    *lo = a > o ? a : o;
    *hi = b < o + k ? b : o + k;
    *off = o;
}

/* Builds phase ph's exchange plan for r chunks and uploads its index arrays. */
static void xmap_build(rt_moe *m, rt_backend *be, int ph, int r)
{
    rt_xmap *x = &m->xm[ph];
    int P = group_size(m), q = m->ep.rank;
    long El = m->E_local, C = m->route.C, Crep = m->Crep, E = m->E;
    x->r = r;
    long nA = 0, nB = 0;
    int *A = x->h_idx;
    /* all idxA entries first (their total is at most E·C_max), then idxB */
    for (int j = 0; j < r; j++) {
        x->offA[j] = nA;
        for (int p = 0; p < P; p++) {
            int rows = 0;
            for (long e = p * El; e < (p + 1) * El; e++) {
                long lo, hi, off;
                chunk_part(m, P, e, q, j, r, &lo, &hi, &off);
                for (long i = lo; i < hi; i++, rows++)
                    A[nA++] = (int)(e * C + (i - off));
            }
            x->send_rows[j * P + p] = rows;
        }
    }
    x->offA[r] = nA;
    int *B = A + nA;
    for (int j = 0; j < r; j++) {
        x->offB[j] = nB;
        for (int s = 0; s < P; s++) {
            int rows = 0;
            for (long el = 0; el < El; el++) {
                long lo, hi, off;
                chunk_part(m, P, (long)q * El + el, s, j, r, &lo, &hi, &off);
                for (long i = lo; i < hi; i++, rows++)
                    B[nB++] = (int)(el * Crep + i);
            }
            x->recv_rows[j * P + s] = rows;
        }
        for (long el = 0; el < El; el++) {
            long T = 0, e = (long)q * El + el;
            for (int s = 0; s < P; s++)
                T += m->K[s * E + e];
            x->r0[j * El + el] = (long)j * T / r;
            x->r1[j * El + el] = (long)(j + 1) * T / r;
        }
    }
    x->offB[r] = nB;
    if (nA)
        be->copy(be, NULL, x->idxA, A, (size_t)nA * sizeof(int), RT_H2D);
    if (nB)
        be->copy(be, NULL, x->idxB, B, (size_t)nB * sizeof(int), RT_H2D);
    be->stream_sync(be, NULL);
}

/* Chunk j of one exchange. Towards the experts (Dispatch): local slots of src (E, C, M), in
 * idxA order, to replica rows of dst (idxB). Back (Combine): the same exchange reversed —
 * replica rows of src in idxB order to local slots of dst (idxA), the row counts swapped. dst
 * was zeroed, and every row of it is written once, so the scatter-add is a copy. */
static void exchange_chunk(rt_moe *m, rt_backend *be, const rt_xmap *x, int j, int to_experts,
                           const real *src, real *dst, const char *what)
{
    int P = group_size(m);
    const int *A = x->idxA + x->offA[j], *B = x->idxB + x->offB[j];
    long nA = x->offA[j + 1] - x->offA[j], nB = x->offB[j + 1] - x->offB[j];
    const int *ra = x->send_rows + j * P, *rb = x->recv_rows + j * P;
    be->gather_rows(be, m->comm, m->send_stage, src, to_experts ? A : B, to_experts ? nA : nB,
                    m->M);
    be->alltoallv_rows(be, m->comm, &m->ep, m->recv_stage, m->send_stage, to_experts ? ra : rb,
                       to_experts ? rb : ra, m->M, what);
    be->scatter_add_rows(be, m->comm, dst, m->recv_stage, to_experts ? B : A, NULL,
                         to_experts ? nB : nA, m->M);
}

static int chunks(int r)
{
    if (r < 1)
        r = 1;
    return r > RT_MOE_MAX_CHUNKS ? RT_MOE_MAX_CHUNKS : r;
}

/* The pipelined middle of both phases: per chunk Dispatch (comm) → expert (comp) → Combine
 * (comm), issued D0 D1 C0 D2 C1 … (see moe_layer.h). in/out are local (E, C, M); xe/ye replica
 * buffers. backward selects the expert pass. */
static void run_chunks(rt_moe *m, rt_backend *be, int backward, const real *in, real *xe,
                       real *ye, real *out)
{
    const rt_xmap *x = &m->xm[backward];
    int r = x->r;
    long El = m->E_local, M = m->M;
    rt_event **ev_d = m->ev, **ev_e = m->ev + RT_MOE_MAX_CHUNKS,
             **ev_c = m->ev + 2 * RT_MOE_MAX_CHUNKS;
    const char *d_what = backward ? "MoE backward Dispatch AllToAllv (ep)"
                                  : "MoE Dispatch AllToAllv (ep)";
    const char *c_what = backward ? "MoE backward Combine AllToAllv (ep)"
                                  : "MoE Combine AllToAllv (ep)";
    be->event_record(be, m->ev_start, NULL);
    be->stream_wait(be, m->comm, m->ev_start);
    be->stream_wait(be, m->comp, m->ev_start);
    be->zero(be, m->comm, xe, (size_t)(El * m->Crep * M) * sizeof(real));
    be->zero(be, m->comm, out, (size_t)(m->E * m->route.C * M) * sizeof(real));
    for (int j = 0; j <= r; j++) {
        if (j < r) {
            hook(m, RT_HOOK_BEFORE_DISPATCH, j, backward);
            long h = rt_trace_begin(m->trace, m->comm, RT_TRACE_COMM, FSMOE_TASK_A2A, backward,
                                    m->index, j);
            exchange_chunk(m, be, x, j, 1, in, xe, d_what);
            rt_trace_end(m->trace, m->comm, h);
            be->event_record(be, ev_d[j], m->comm);
            hook(m, RT_HOOK_AFTER_DISPATCH, j, backward);
            if (backward && j == r - 1 && m->gsync)
                gsync_at(m->gsync, FSMOE_AT_DISPATCHED, m->index);
            be->stream_wait(be, m->comp, ev_d[j]);
            const long *r0 = x->r0 + j * El, *r1 = x->r1 + j * El;
            h = rt_trace_begin(m->trace, m->comp, RT_TRACE_COMPUTE, FSMOE_TASK_EXPERT, backward,
                               m->index, j);
            if (!backward)
                experts_forward_ranges(&m->ex, be, m->comp, xe, ye, &m->eacts, m->Crep, r0, r1);
            else
                experts_backward_ranges(&m->ex, be, m->comp, xe, m->Xe, ye, &m->eacts, m->dh,
                                        m->da, m->ex.kind == 1 ? m->dg : NULL, m->Crep, r0, r1);
            rt_trace_end(m->trace, m->comp, h);
            be->event_record(be, ev_e[j], m->comp);
        }
        if (j >= 1) {
            hook(m, RT_HOOK_BEFORE_COMBINE, j - 1, backward);
            be->stream_wait(be, m->comm, ev_e[j - 1]);
            long h = rt_trace_begin(m->trace, m->comm, RT_TRACE_COMM, FSMOE_TASK_A2A, backward,
                                    m->index, j - 1);
            exchange_chunk(m, be, x, j - 1, 0, ye, out, c_what);
            rt_trace_end(m->trace, m->comm, h);
            be->event_record(be, ev_c[j - 1], m->comm);
            hook(m, RT_HOOK_AFTER_COMBINE, j - 1, backward);
        }
    }
    be->stream_wait(be, NULL, ev_c[r - 1]);
}

fsmoe_status moe_forward(rt_moe *m, rt_backend *be, const real *x, real *y, long N, int training,
                         uint64_t seed, long step)
{
    hook(m, RT_HOOK_BEFORE_MOE_START, -1, 0);
    long h = rt_trace_begin(m->trace, NULL, RT_TRACE_HOST, FSMOE_TASK_GATE, FSMOE_PHASE_FWD,
                            m->index, -1);
    fsmoe_status st = gate_forward(&m->gate, be, NULL, x, N, training, seed, step, m->freeze,
                                   &m->route);
    if (st != FSMOE_OK)
        return st;
    order_forward(&m->order, be, NULL, &m->route, x, m->Xd);
    if ((st = exchange_counts(m, be)) != FSMOE_OK)
        return rt_backend_check(be, NULL);
    xmap_build(m, be, 0, chunks(m->r_fwd));
    rt_trace_end(m->trace, NULL, h);
    run_chunks(m, be, 0, m->Xd, m->Xe, m->Ye, m->Yc);
    h = rt_trace_begin(m->trace, NULL, RT_TRACE_HOST, FSMOE_TASK_GATE, FSMOE_PHASE_FWD, m->index,
                       -1);
    iorder_forward(&m->order, be, NULL, &m->route, m->Yc, y);
    rt_trace_end(m->trace, NULL, h);
    hook(m, RT_HOOK_BEFORE_MOE_END, -1, 0);
    return rt_backend_check(be, NULL);
}

fsmoe_status moe_backward(rt_moe *m, rt_backend *be, const real *dy, const real *x, real *dx,
                          double aux_coef)
{
    hook(m, RT_HOOK_BEFORE_MOE_START, -1, 1);
    long h = rt_trace_begin(m->trace, NULL, RT_TRACE_HOST, FSMOE_TASK_GATE, FSMOE_PHASE_BWD,
                            m->index, -1);
    iorder_backward(&m->order, be, NULL, &m->route, dy, m->Yc, m->dYc);
    xmap_build(m, be, 1, chunks(m->r_bwd));
    rt_trace_end(m->trace, NULL, h);
    /* the backward of Combine is an AllToAll in the Dispatch direction and vice versa; empty
     * local slots of dXd stay 0 (run_chunks zeroes it), whichever order reads them */
    run_chunks(m, be, 1, m->dYc, m->dYe, m->dXe, m->dXd);
    h = rt_trace_begin(m->trace, NULL, RT_TRACE_HOST, FSMOE_TASK_GATE, FSMOE_PHASE_BWD, m->index,
                       -1);
    order_backward(&m->order, be, NULL, &m->route, m->dXd, x, dx);
    gate_backward(&m->gate, be, NULL, x, dx, aux_coef, &m->route);
    rt_trace_end(m->trace, NULL, h);
    hook(m, RT_HOOK_BEFORE_MOE_END, -1, 1);
    return rt_backend_check(be, NULL);
}
