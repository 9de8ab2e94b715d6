/* Implements: the MoE layer executor (moe_layer.h). */
#include "moe_layer.h"

#include <string.h>

static const char *const hook_names[RT_HOOK_COUNT] = {
    "BeforeMoeStart", "BeforeDispatch", "AfterDispatch",
    "BeforeCombine",  "AfterCombine",   "BeforeMoeEnd"};

const char *moe_hook_name(rt_hook h) { return h < RT_HOOK_COUNT ? hook_names[h] : "?"; }

static void hook(rt_moe *m, rt_hook h, int chunk, int backward)
{
    if (m->hook)
        m->hook(m->hook_user, h, m->index, chunk, backward);
}

fsmoe_status moe_alloc(rt_moe *m, rt_backend *be)
{
    long EC = m->E * m->C_max, M = m->M, H = m->ex.H;
    size_t bm = (size_t)(EC * M + 1) * sizeof(real), bh = (size_t)(EC * H + 1) * sizeof(real);
    fsmoe_status st = gate_alloc(&m->gate, &m->route, be);
    if (st != FSMOE_OK)
        return st;
    long A_max = m->gate.kind == RT_GATE_EXPERT_CHOICE ? EC : m->N_max * m->gate.k;
    st = order_alloc(&m->order, &m->route, be, m->order.kind, M, m->N_max, m->C_max, m->E, A_max);
    if (st != FSMOE_OK)
        return st;
    st = expert_acts_alloc(&m->eacts, &m->ex, be, m->C_max);
    if (st != FSMOE_OK)
        return st;
    real **bufs_m[] = {&m->Xd, &m->Xe, &m->Ye, &m->Yc, &m->dYc, &m->dYe, &m->dXe, &m->dXd};
    for (size_t i = 0; i < sizeof bufs_m / sizeof bufs_m[0]; i++)
        if (!(*bufs_m[i] = be->alloc(be, bm)))
            return FSMOE_ERR_NOMEM;
    if (!(m->dh = be->alloc(be, bh)) || !(m->da = be->alloc(be, bh)) ||
        !(m->dg = be->alloc(be, bh)))
        return FSMOE_ERR_NOMEM;
    m->comp = be->stream_create(be);
    m->comm = be->stream_create(be);
    m->ev_start = be->event_create(be);
    if (!m->comp || !m->comm || !m->ev_start)
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
    real *bufs[] = {m->Xd, m->Xe, m->Ye, m->Yc, m->dYc, m->dYe, m->dXe, m->dXd,
                    m->dh, m->da, m->dg};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i])
            be->free(be, bufs[i]);
    if (m->comp)
        be->stream_destroy(be, m->comp);
    if (m->comm)
        be->stream_destroy(be, m->comm);
    if (m->ev_start)
        be->event_destroy(be, m->ev_start);
    for (int i = 0; i < 3 * RT_MOE_MAX_CHUNKS; i++)
        if (m->ev[i])
            be->event_destroy(be, m->ev[i]);
    m->comp = m->comm = NULL;
}

static int chunks(int r, long C)
{
    if (r < 1)
        r = 1;
    if (r > RT_MOE_MAX_CHUNKS)
        r = RT_MOE_MAX_CHUNKS;
    return (long)r > C ? (int)C : r;
}

fsmoe_status moe_forward(rt_moe *m, rt_backend *be, const real *x, real *y, long N, int training,
                         uint64_t seed, long step)
{
    hook(m, RT_HOOK_BEFORE_MOE_START, -1, 0);
    fsmoe_status st = gate_forward(&m->gate, be, NULL, x, N, training, seed, step, m->freeze,
                                   &m->route);
    if (st != FSMOE_OK)
        return st;
    order_forward(&m->order, be, NULL, &m->route, x, m->Xd);
    long C = m->route.C, M = m->M;
    int r = chunks(m->r_fwd, C);
    rt_event **ev_d = m->ev, **ev_e = m->ev + RT_MOE_MAX_CHUNKS,
             **ev_c = m->ev + 2 * RT_MOE_MAX_CHUNKS;
    be->event_record(be, m->ev_start, NULL);
    be->stream_wait(be, m->comm, m->ev_start);
    for (int j = 0; j < r; j++) {
        long c0 = j * C / r, c1 = (j + 1) * C / r;
        hook(m, RT_HOOK_BEFORE_DISPATCH, j, 0);
        be->alltoall_rows(be, m->comm, &m->ep, m->Xe, m->Xd, m->E, C, c0, c1, M, 0);
        be->event_record(be, ev_d[j], m->comm);
        hook(m, RT_HOOK_AFTER_DISPATCH, j, 0);
        be->stream_wait(be, m->comp, ev_d[j]);
        experts_forward(&m->ex, be, m->comp, m->Xe, m->Ye, &m->eacts, C, c0, c1, m->route.load);
        be->event_record(be, ev_e[j], m->comp);
        hook(m, RT_HOOK_BEFORE_COMBINE, j, 0);
        be->stream_wait(be, m->comm, ev_e[j]);
        be->alltoall_rows(be, m->comm, &m->ep, m->Yc, m->Ye, m->E, C, c0, c1, M, 1);
        be->event_record(be, ev_c[j], m->comm);
        hook(m, RT_HOOK_AFTER_COMBINE, j, 0);
    }
    be->stream_wait(be, NULL, ev_c[r - 1]);
    iorder_forward(&m->order, be, NULL, &m->route, m->Yc, y);
    hook(m, RT_HOOK_BEFORE_MOE_END, -1, 0);
    return rt_backend_check(be, NULL);
}

fsmoe_status moe_backward(rt_moe *m, rt_backend *be, const real *dy, const real *x, real *dx,
                          double aux_coef)
{
    hook(m, RT_HOOK_BEFORE_MOE_START, -1, 1);
    long C = m->route.C, M = m->M;
    iorder_backward(&m->order, be, NULL, &m->route, dy, m->Yc, m->dYc);
    int r = chunks(m->r_bwd, C);
    rt_event **ev_d = m->ev, **ev_e = m->ev + RT_MOE_MAX_CHUNKS,
             **ev_c = m->ev + 2 * RT_MOE_MAX_CHUNKS;
    be->event_record(be, m->ev_start, NULL);
    be->stream_wait(be, m->comm, m->ev_start);
    for (int j = 0; j < r; j++) {
        long c0 = j * C / r, c1 = (j + 1) * C / r;
        /* the backward of Combine is an AllToAll in the dispatch direction */
        hook(m, RT_HOOK_BEFORE_DISPATCH, j, 1);
        be->alltoall_rows(be, m->comm, &m->ep, m->dYe, m->dYc, m->E, C, c0, c1, M, 0);
        be->event_record(be, ev_d[j], m->comm);
        hook(m, RT_HOOK_AFTER_DISPATCH, j, 1);
        be->stream_wait(be, m->comp, ev_d[j]);
        experts_backward(&m->ex, be, m->comp, m->dYe, m->Xe, m->dXe, &m->eacts, m->dh, m->da,
                         m->ex.kind == 1 ? m->dg : NULL, C, c0, c1, m->route.load);
        be->event_record(be, ev_e[j], m->comp);
        hook(m, RT_HOOK_BEFORE_COMBINE, j, 1);
        be->stream_wait(be, m->comm, ev_e[j]);
        be->alltoall_rows(be, m->comm, &m->ep, m->dXd, m->dXe, m->E, C, c0, c1, M, 1);
        be->event_record(be, ev_c[j], m->comm);
        hook(m, RT_HOOK_AFTER_COMBINE, j, 1);
    }
    be->stream_wait(be, NULL, ev_c[r - 1]);
    /* experts_backward wrote dXe = 0 in empty slots (it skips them), so order_backward sees
     * zeros there whichever order it is. */
    order_backward(&m->order, be, NULL, &m->route, m->dXd, x, dx);
    gate_backward(&m->gate, be, NULL, x, dx, aux_coef, &m->route);
    hook(m, RT_HOOK_BEFORE_MOE_END, -1, 1);
    return rt_backend_check(be, NULL);
}
