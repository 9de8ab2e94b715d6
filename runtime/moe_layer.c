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

#define RANGES_ESP RT_MOE_MAX_LOCAL_SLICED /* moe_alloc checks */

static int esp_size(const rt_moe *m) { return m->esp.size > 0 ? m->esp.size : 1; }
static int ep_size(const rt_moe *m) { return m->ep.size > 0 ? m->ep.size : 1; }

/* Whether each MP member exchanges its slice of every expert's slots (S2, MoNTA). */
static int split_slots(const rt_moe *m) { return m->s2 || m->monta; }

/* Whether the exchange addresses every ESP slice itself (PauseMP, S2: moe_layer.h). */
static int per_slice(const rt_moe *m) { return m->pause_mp || m->s2; }

/* The exchange group: EP, or EP&ESP when it reaches every slice. */
static const rt_group *xgroup(const rt_moe *m) { return per_slice(m) ? &m->epesp : &m->ep; }
static int group_size(const rt_moe *m) { return xgroup(m)->size > 0 ? xgroup(m)->size : 1; }

/* The task an exchange is traced as: the AllToAll of the graph, or on an exchange group of one
 * member (one rank, ep = 1) the local copy it is: the graph plans no AllToAll there, so the
 * report's conformance check compares collectives only where ranks exchange. */
static fsmoe_task_kind xkind(const rt_moe *m, fsmoe_task_kind k)
{
    return group_size(m) > 1 ? k : FSMOE_TASK_COPY;
}

int moe_exchange_size(const rt_moe *m, int *hierarchical)
{
    *hierarchical = dist_group_2dh(xgroup(m)) != NULL;
    return group_size(m);
}

/* Experts the exchange addresses: E, or under PauseMP each expert once per ESP slice, owner-
 * major: virtual expert v belongs to exchange member v / E_local = q·S + u (EP member q, slice
 * u) and is local expert v % E_local of it. */
static long xexperts(const rt_moe *m) { return per_slice(m) ? m->E * esp_size(m) : m->E; }
static long real_expert(const rt_moe *m, long v)
{
    long El = m->E_local;
    return per_slice(m) ? v / El / esp_size(m) * El + v % El : v;
}

/* ESP slices exchanging rows by AllGather/ReduceScatter (the ESP pipeline); 1 under PauseMP,
 * whose AllToAll reaches every slice itself, and under DeepSpeed's expert tensor parallelism,
 * whose slices hold the same rows. */
static int stacked(const rt_moe *m) { return per_slice(m) || m->etp ? 1 : esp_size(m); }

/* Whether the layer needs every ESP member's row counts (Tall) and its own chunk rows. */
static int esp_rows(const rt_moe *m) { return stacked(m) > 1 || (m->etp && esp_size(m) > 1); }

static fsmoe_status xmap_alloc(rt_xmap *x, rt_backend *be, int P, int S, int Pm, long E_local,
                               long nA, long nB, long EC)
{
    int R = RT_MOE_MAX_CHUNKS;
    if (Pm > 1) { /* S2: own rows per unit ≤ Pm·EC in all (padded to the largest member's); at
                   * most P units (SAA phases) per chunk; ph_cnt grows in mp_build as needed */
        long nS = Pm * EC, U = (long)R * P;
        x->Rm = calloc((size_t)U, sizeof(long));
        x->offS = calloc((size_t)U + 1, sizeof(long));
        x->offAll = calloc((size_t)U + 1, sizeof(long));
        x->h_cnt = calloc((size_t)(U * (Pm + 1)), sizeof(long));
        x->h_sl = calloc((size_t)((Pm + 1) * nS + 1), sizeof(long));
        x->h_sidx = calloc((size_t)((Pm + 1) * nS + 1), sizeof(int));
        x->sidx = rt_alloc(be, RT_MEM_BUFFERS, (size_t)(nS + 1) * sizeof(int));
        x->aidx = rt_alloc(be, RT_MEM_BUFFERS, (size_t)(Pm * nS + 1) * sizeof(int));
        if (!x->Rm || !x->offS || !x->offAll || !x->h_cnt || !x->h_sl || !x->h_sidx ||
            !x->sidx || !x->aidx)
            return FSMOE_ERR_NOMEM;
    }
    if (S > 1) { /* own rows ≤ S·nB in all chunks (each ≤ the largest member's), stacked S× */
        x->R = calloc((size_t)R, sizeof(long));
        x->offO = calloc((size_t)R + 1, sizeof(long));
        x->offG = calloc((size_t)R + 1, sizeof(long));
        x->g0 = calloc((size_t)(R * S * E_local), sizeof(long));
        x->g1 = calloc((size_t)(R * S * E_local), sizeof(long));
        /* twice: MoNTA's whole-layer lists follow the chunks' in gidx */
        x->h_eidx = calloc((size_t)(2 * (S + 1) * S * nB) + 1, sizeof(int));
        x->eidx = rt_alloc(be, RT_MEM_BUFFERS, (size_t)(S * nB + 1) * sizeof(int));
        x->gidx = rt_alloc(be, RT_MEM_BUFFERS, (size_t)(2 * (S + 1) * S * nB + 1) * sizeof(int));
        if (!x->R || !x->offO || !x->offG || !x->g0 || !x->g1 || !x->h_eidx || !x->eidx ||
            !x->gidx)
            return FSMOE_ERR_NOMEM;
    }
    x->send_rows = calloc((size_t)(R * P), sizeof(int));
    x->recv_rows = calloc((size_t)(R * P), sizeof(int));
    x->offA = calloc((size_t)R + 1, sizeof(long));
    x->offB = calloc((size_t)R + 1, sizeof(long));
    x->h_idx = calloc((size_t)(nA + nB) + 1, sizeof(int));
    x->r0 = calloc((size_t)(R * E_local), sizeof(long));
    x->r1 = calloc((size_t)(R * E_local), sizeof(long));
    x->idxA = rt_alloc(be, RT_MEM_BUFFERS, (size_t)(nA + 1) * sizeof(int));
    x->idxB = rt_alloc(be, RT_MEM_BUFFERS, (size_t)(nB + 1) * sizeof(int));
    if (!x->send_rows || !x->recv_rows || !x->offA || !x->offB || !x->h_idx || !x->r0 || !x->r1 ||
        !x->idxA || !x->idxB)
        return FSMOE_ERR_NOMEM;
    return FSMOE_OK;
}

static void xmap_free(rt_xmap *x, rt_backend *be)
{
    free(x->all_rows);
    free(x->send_rows), free(x->recv_rows), free(x->offA), free(x->offB), free(x->h_idx);
    free(x->r0), free(x->r1);
    free(x->R), free(x->offO), free(x->offG), free(x->g0), free(x->g1), free(x->h_eidx);
    free(x->Rm), free(x->offS), free(x->offAll), free(x->h_cnt), free(x->h_sl), free(x->h_sidx);
    free(x->ph_cnt);
    if (x->sidx)
        rt_free(be, x->sidx);
    if (x->aidx)
        rt_free(be, x->aidx);
    if (x->eidx)
        rt_free(be, x->eidx);
    if (x->gidx)
        rt_free(be, x->gidx);
    if (x->idxA)
        rt_free(be, x->idxA);
    if (x->idxB)
        rt_free(be, x->idxB);
    memset(x, 0, sizeof *x);
}

/* The layer's device buffers (moe_alloc, moe_free): the size of each, where its pointer lives,
 * its memory category, and whether it is one of the phase temporaries the MoE layers share
 * (moe_layer.h) rather than what the forward keeps for the backward: the expert input rows
 * (Xe, with ESP Xg) and the combined expert outputs (Yc, read by the gate's backward). Sizes
 * need the layer's E_local, C_max and Crep_max set. */
enum { MOE_BUFS = 23 };
static void moe_buffers(rt_moe *m, size_t *sizes, real ***ptr, int *cat, int *shared)
{
    int S = esp_size(m), Pm = m->mpg.size > 1 ? m->mpg.size : 1;
    long M = m->M, H = m->ex.H, EC = m->E * m->C_max, ER = m->E_local * m->Crep_max;
    long ECS = S * EC;
    size_t bl = (size_t)(EC * M + 1) * sizeof(real), br = (size_t)(ER * M + 1) * sizeof(real);
    size_t bs = (size_t)((ECS > ER ? ECS : ER) * M + 1) * sizeof(real);
    size_t bn = (size_t)(m->N_max * M + 1) * sizeof(real);
    size_t bm = Pm > 1 ? (size_t)(EC * M + 1) * sizeof(real) : 0;
    size_t bh = (size_t)(S * ER * H + 1) * sizeof(real);
    size_t bg = S > 1 ? (size_t)(S * ER * M + 1) * sizeof(real) : 0;
    enum { B_ = RT_MEM_BUFFERS, W_ = RT_MEM_WORKSPACE, A_ = RT_MEM_ACTIVATIONS };
    const struct {
        real **p;
        size_t bytes;
        int cat, shared;
    } t[MOE_BUFS] = {
        {&m->Xd, bl, B_, 1},         {&m->Yc, bl, A_, 0},         {&m->dYc, bl, B_, 1},
        {&m->dXd, bl, B_, 1},        {&m->Xe, br, A_, 0},         {&m->Ye, br, B_, 1},
        {&m->dYe, br, B_, 1},        {&m->dXe, br, B_, 1},        {&m->dh, bh, W_, 1},
        {&m->da, bh, W_, 1},         {&m->dg, m->ex.kind == 1 ? bh : 0, W_, 1},
        {&m->send_stage, bs, B_, 1}, {&m->recv_stage, bs, B_, 1}, {&m->Xg, bg, A_, 0},
        {&m->Yg, bg, B_, 1},         {&m->dYg, bg, B_, 1},        {&m->dXg, bg, B_, 1},
        {&m->ag_send, bg, B_, 1},    {&m->ag_recv, S * bg, B_, 1}, {&m->own, bn, B_, 1},
        {&m->whole, bn, B_, 1},      {&m->mp_send, bm, B_, 1},    {&m->mp_recv, Pm * bm, B_, 1}};
    for (int i = 0; i < MOE_BUFS; i++)
        sizes[i] = t[i].bytes, ptr[i] = t[i].p, cat[i] = t[i].cat, shared[i] = t[i].shared;
}

fsmoe_status moe_alloc(rt_moe *m, rt_backend *be, const rt_moe *share)
{
    /* sized for both ways of running a layer (the ESP pipeline, PauseMP), which a schedule
     * may switch between */
    int S = esp_size(m), P = ep_size(m) * S, Pm = m->mpg.size > 1 ? m->mpg.size : 1;
    long M = m->M;
    m->buf_owner = !share;
    m->xm = share ? share->xm : m->xm_own;
    m->E_local = m->E / ep_size(m);
    if (S > 1 && m->E_local > RANGES_ESP)
        return FSMOE_ERR_VALUE;
    /* token-choice gates fill at most one slot per token and expert on this rank, and at most
     * the global capacity (GShard's ceil(k·f·N_global/E), which may exceed this rank's share
     * ceil(k·f·N/E) when the batch is spread over DP); a dropless gate (f <= 0) up to every
     * token */
    long Cg = 0; /* the global capacity (0: none) */
    if (m->gate.kind != RT_GATE_EXPERT_CHOICE && m->gate.kind != RT_GATE_SOFTMOE) {
        Cg = gate_capacity(&m->gate, m->gate.N_global > m->N_max ? m->gate.N_global : m->N_max);
        m->gate.C_max = Cg > 0 && Cg < m->N_max ? Cg : m->N_max;
    }
    m->C_max = m->gate.C_max;
    /* Rows one local expert receives in an exchange: each of the P members sends at most its
     * C_max, and together at most the global capacity per copy of the tokens. GShard's slot
     * positions are counted over the capacity group (gate.c), so one expert's kept rows add up
     * to at most Cg over ranks holding distinct tokens; MP members hold copies of them (up to
     * mp copies reach an expert unless the members split the slots). */
    m->Crep_max = (long)P * m->C_max;
    long copies = m->mpg.size > 1 ? m->mpg.size : 1;
    if (Cg > 0 && copies * Cg < m->Crep_max)
        m->Crep_max = copies * Cg;
    long EC = m->E * m->C_max, ER = m->E_local * m->Crep_max, ECS = S * EC;
    fsmoe_status st = gate_alloc(&m->gate, &m->route, be);
    if (st != FSMOE_OK)
        return st;
    long A_max = m->gate.kind == RT_GATE_EXPERT_CHOICE ? EC : m->N_max * m->gate.k;
    st = order_alloc(&m->order, &m->route, be, m->order.kind, M, m->N_max, m->C_max, m->E, A_max);
    if (st != FSMOE_OK)
        return st;
    st = expert_acts_alloc(&m->eacts, &m->ex, be, S * m->Crep_max);
    if (st != FSMOE_OK)
        return st;
    if (share && (share->comp != m->comp || share->ex.kind != m->ex.kind ||
                  share->E != m->E || share->E_local != m->E_local || share->M != m->M ||
                  share->ex.H != m->ex.H || share->N_max != m->N_max ||
                  share->C_max != m->C_max || share->Crep_max != m->Crep_max ||
                  esp_size(share) != esp_size(m) || share->mpg.size != m->mpg.size))
        return FSMOE_ERR_INTERNAL; /* another shape or stream: nothing to share */
    size_t sizes[MOE_BUFS];
    real **mine[MOE_BUFS], **theirs[MOE_BUFS];
    int cat[MOE_BUFS], shared[MOE_BUFS];
    moe_buffers(m, sizes, mine, cat, shared);
    if (share)
        moe_buffers((rt_moe *)share, sizes, theirs, cat, shared);
    for (int i = 0; i < MOE_BUFS; i++) {
        if (share && shared[i])
            *mine[i] = *theirs[i];
        else if (sizes[i] && !(*mine[i] = rt_alloc(be, cat[i], sizes[i])))
            return FSMOE_ERR_NOMEM;
    }
    m->K = calloc((size_t)(P * m->E * S), sizeof(long));
    m->load_v = calloc((size_t)(m->E * S), sizeof(long));
    m->slot0 = calloc((size_t)m->E, sizeof(long));
    m->own_cnt = calloc((size_t)m->E, sizeof(long));
    if (!m->slot0 || !m->own_cnt)
        return FSMOE_ERR_NOMEM;
    m->Tall = calloc((size_t)(S * m->E_local), sizeof(long));
    if (!m->K || !m->load_v || !m->Tall)
        return FSMOE_ERR_NOMEM;
    for (int ph = 0; ph < 2 && !share; ph++)
        if ((st = xmap_alloc(&m->xm[ph], be, P, S, Pm, m->E_local, ECS, ER, EC)) != FSMOE_OK)
            return st;
    m->ev_start = be->event_create(be);
    m->ev_phase = be->event_create(be);
    if (!m->ev_start || !m->ev_phase)
        return FSMOE_ERR_NOMEM;
    for (int i = 0; i < 5 * RT_MOE_MAX_CHUNKS; i++)
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
    size_t sizes[MOE_BUFS];
    real **mine[MOE_BUFS];
    int cat[MOE_BUFS], shared[MOE_BUFS];
    moe_buffers(m, sizes, mine, cat, shared);
    for (int i = 0; i < MOE_BUFS; i++) {
        if (*mine[i] && (m->buf_owner || !shared[i]))
            rt_free(be, *mine[i]);
        *mine[i] = NULL;
    }
    if (m->buf_owner)
        for (int ph = 0; ph < 2; ph++)
            xmap_free(&m->xm_own[ph], be);
    m->xm = NULL;
    free(m->K);
    free(m->Tall);
    free(m->load_v), free(m->slot0), free(m->own_cnt);
    m->K = NULL, m->Tall = NULL, m->load_v = NULL, m->slot0 = m->own_cnt = NULL;
    if (m->ev_start)
        be->event_destroy(be, m->ev_start);
    if (m->ev_phase)
        be->event_destroy(be, m->ev_phase);
    for (int i = 0; i < 5 * RT_MOE_MAX_CHUNKS; i++)
        if (m->ev[i])
            be->event_destroy(be, m->ev[i]);
    m->ev_start = m->ev_phase = NULL;
}

/* K[s][e] for every member s of the EP group; Crep for this step; with ESP, every member's
 * replica rows (Tall) and the stacked rows per block (Cs). */
static fsmoe_status exchange_counts(rt_moe *m, rt_backend *be)
{
    int P = group_size(m);
    long E = xexperts(m);
    fsmoe_error err = {0};
    const long *load = m->route.load;
    if (split_slots(m)) { /* this MP member's slice of every expert's filled slots */
        long Pm = m->mpg.size > 1 ? m->mpg.size : 1, i = m->mpg.size > 1 ? m->mpg.rank : 0;
        for (long e = 0; e < m->E; e++) {
            long F = m->route.load[e];
            m->slot0[e] = i * F / Pm;
            m->own_cnt[e] = (i + 1) * F / Pm - m->slot0[e];
        }
        load = m->own_cnt;
    }
    if (per_slice(m)) { /* every slice of an expert receives its rows */
        for (long v = 0; v < E; v++)
            m->load_v[v] = load[real_expert(m, v)];
        load = m->load_v;
    }
    if (P == 1 || !m->dist) {
        memcpy(m->K, load, (size_t)E * sizeof(long));
    } else {
        fsmoe_status st = dist_allgather_longs(m->dist, per_slice(m) ? RT_EP_ESP : RT_EP, load,
                                               m->K, (int)E, "MoE token-count exchange", &err);
        if (st != FSMOE_OK) {
            rt_backend_fail(be, st, "%s", err.msg);
            return st;
        }
    }
    long q = xgroup(m)->rank, Crep = 1;
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
    int S = esp_size(m);
    if (!esp_rows(m))
        return FSMOE_OK;
    /* every ESP member's replica rows per local expert (the same experts on every member) */
    long T[RANGES_ESP];
    for (long el = 0; el < m->E_local; el++) {
        T[el] = 0;
        for (int s = 0; s < P; s++)
            T[el] += m->K[s * E + q * m->E_local + el];
    }
    fsmoe_status st = dist_allgather_longs(m->dist, RT_ESP, T, m->Tall, (int)m->E_local,
                                           "MoE token-count exchange (esp)", &err);
    if (st != FSMOE_OK) {
        rt_backend_fail(be, st, "%s", err.msg);
        return st;
    }
    m->Cs = 1;
    for (long i = 0; i < S * m->E_local; i++)
        m->Cs = m->Tall[i] > m->Cs ? m->Tall[i] : m->Cs;
    return FSMOE_OK;
}

/* Of an expert's T replica rows, chunk j of r is [j·T/r, (j+1)·T/r); the part of it in a
 * member's rows [o, o + k) is [lo, hi), empty when hi <= lo. */
static void chunk_cut(long T, long o, long k, int j, int r, long *lo, long *hi)
{
    long a = (long)j * T / r, b = (long)(j + 1) * T / r;
    *lo = a > o ? a : o;
    *hi = b < o + k ? b : o + k;
}

/* Rows [lo, hi) of member s's part of chunk j of expert e (in the replica's numbering);
 * empty when hi <= lo. */
static void chunk_part(const rt_moe *m, int P, long e, int s, int j, int r, long *lo, long *hi,
                       long *off)
{
    long E = xexperts(m), T = 0, o = 0;
    for (int t = 0; t < P; t++) {
        if (t < s)
            o += m->K[t * E + e];
        T += m->K[t * E + e];
    }
    chunk_cut(T, o, m->K[s * E + e], j, r, lo, hi);
    *off = o;
}

/* The ESP part of a phase's plan (moe_layer.h): per chunk, every member's rows of every local
 * expert ([j·T/r, (j+1)·T/r) of its T replica rows, as its own xmap cuts them), padded to the
 * largest member's; this member's replica positions and every member's stacked positions. */
static void esp_build(rt_moe *m, rt_backend *be, rt_xmap *x, int r)
{
    int S = esp_size(m), u = m->esp.rank;
    long El = m->E_local, Cs = m->Cs, Crep = m->Crep, nO = 0, nG = 0;
    for (int j = 0; j < r; j++) {
        long R = 0;
        for (int v = 0; v < S; v++) {
            long n = 0;
            for (long el = 0; el < El; el++) {
                long T = m->Tall[v * El + el], i = (j * S + v) * El + el;
                x->g0[i] = (long)j * T / r, x->g1[i] = (long)(j + 1) * T / r;
                n += x->g1[i] - x->g0[i];
            }
            R = n > R ? n : R;
        }
        x->R[j] = R;
    }
    int *O = x->h_eidx;
    for (int j = 0; j < r; j++) {
        x->offO[j] = nO;
        long n0 = nO;
        for (long el = 0; el < El; el++) {
            long i = (j * S + u) * El + el;
            for (long row = x->g0[i]; row < x->g1[i]; row++)
                O[nO++] = (int)(el * Crep + row);
        }
        while (nO < n0 + x->R[j])
            O[nO++] = -1;
    }
    x->offO[r] = nO;
    int *G = O + nO;
    for (int j = 0; j < r; j++) {
        x->offG[j] = nG;
        for (int v = 0; v < S; v++) {
            long n0 = nG;
            for (long el = 0; el < El; el++) {
                long i = (j * S + v) * El + el;
                for (long row = x->g0[i]; row < x->g1[i]; row++)
                    G[nG++] = (int)((v * El + el) * Cs + row);
            }
            while (nG < n0 + x->R[j])
                G[nG++] = -1;
        }
    }
    x->offG[r] = nG;
    if (m->monta) { /* MoNTA's whole-layer ReduceScatter: every chunk's rows in one block per
                     * member, chunk after chunk (own list after the stacked lists) */
        x->RW = x->offO[r];
        for (int v = 0; v < S; v++)
            for (int j = 0; j < r; j++)
                for (long k = 0; k < x->R[j]; k++)
                    G[nG++] = G[x->offG[j] + v * x->R[j] + k];
        for (long k = 0; k < x->RW; k++)
            G[nG++] = O[k];
    }
    if (nO)
        be->copy(be, NULL, x->eidx, O, (size_t)nO * sizeof(int), RT_H2D);
    if (nG)
        be->copy(be, NULL, x->gidx, G, (size_t)nG * sizeof(int), RT_H2D);
}

/* S2's SAA: whether the Combine runs in phases (moe_layer.h), and the phases' peers. */
static int saa_phased(const rt_moe *m)
{
    return m->s2 && m->s2 != RT_S2_DS_GATHER && m->mpg.size > 1;
}
static int saa_phases(const rt_moe *m) { return group_size(m) / esp_size(m); }
/* The EP members whose slices' rows phase k sends to and receives from. */
static int saa_to(const rt_moe *m, int k)
{
    return (xgroup(m)->rank / esp_size(m) + k) % saa_phases(m);
}
/* ... as exchange-group member q sees them (saa_from: this member's) */
static int saa_from_q(const rt_moe *m, int q, int k)
{
    int Pe = saa_phases(m);
    return (q / esp_size(m) - k + Pe) % Pe;
}
static int saa_from(const rt_moe *m, int k) { return saa_from_q(m, xgroup(m)->rank, k); }

/* MP member mi's local slot rows of one unit (chunk j of r; under S2's SAA the phase whose rows
 * come from EP member `from`, -1: every phase), as its Combine fills them: its idxA rows
 * (xmap_build) sent to slice 0 of each expert (every row once), cut with its exchange-group
 * rank q, from its first slot mi·F/mp of each expert's F filled slots (exchange_counts). Into
 * out (NULL: counted only); returns the count. */
static long member_unit_rows(const rt_moe *m, int q, int mi, int j, int r, int from, long *out)
{
    int P = group_size(m), S = per_slice(m) ? esp_size(m) : 1, Pm = m->mpg.size;
    long El = m->E_local, C = m->route.C, n = 0;
    if (!per_slice(m) && r == 1) { /* one chunk takes each expert's rows whole: its own slots */
        for (long e = 0; e < m->E; e++) {
            long F = m->route.load[e], s0 = mi * F / Pm, s1 = (mi + 1) * F / Pm;
            for (long i = s0; i < s1; i++, n++)
                if (out)
                    out[n] = e * C + i;
        }
        return n;
    }
    for (int p = 0; p < P; p += S) {
        if (from >= 0 && p / S != from)
            continue;
        for (long e = p * El; e < (p + 1) * El; e++) {
            long lo, hi, off, re = real_expert(m, e), s0 = mi * m->route.load[re] / Pm;
            chunk_part(m, P, e, q, j, r, &lo, &hi, &off);
            for (long i = lo; i < hi; i++, n++)
                if (out)
                    out[n] = re * C + s0 + (i - off);
        }
    }
    return n;
}

/* Unit u (of r chunks x U phases) of MP member i, whose exchange-group rank is q0 + i: its
 * chunk u / U and, under S2's SAA (U > 1), the phase's EP member as that member sees it. */
static long member_unit(const rt_moe *m, int q0, int i, int u, int U, int r, long *out)
{
    return member_unit_rows(m, q0 + i, i, u / U, r, U > 1 ? saa_from_q(m, q0 + i, u % U) : -1,
                            out);
}

/* Whether every MP member's lists follow from what this member holds, with no exchange. The
 * members route the same duplicated tokens alike (they split each expert's filled slots, which
 * adds up only because their loads agree). Under S2 (and DeepSpeed's drop_tokens) they
 * exchange over EP&ESP, whose counts K every member holds; where the MP group lies inside the
 * EP&ESP group (mp divides ep·esp, consecutive ranks: layout.h), member i's rank there is this
 * member's less its MP rank plus i. MoNTA's members (the ESP group) exchange over different EP
 * groups, whose counts cut each other's chunks: in one chunk (r = 1) a member's unit is all of
 * its own slots, expert after expert (member_unit_rows), else the lists are exchanged. */
static int mp_lists_local(const rt_moe *m, int r)
{
    return per_slice(m) ? m->epesp.size % m->mpg.size == 0 : r == 1;
}

/* S2's and MoNTA's MP AllGathers (moe_layer.h): per unit (a chunk, or under S2's SAA a phase
 * of it) the local slot rows this member's Combine fills (member_unit_rows; in phase k those
 * from EP member saa_from(k)), padded to the MP group's largest count; every member's lists,
 * this member's own block -1 (its rows are in place). Computed here where mp_lists_local
 * (four host collectives less per layer and step than exchanging them: the forward's and the
 * backward's count and row exchanges, each a rendezvous of the MP group); else exchanged over
 * MP on the host (MoNTA in chunks). */
static void mp_build(rt_moe *m, rt_backend *be, rt_xmap *x, int r)
{
    int P = group_size(m), S = per_slice(m) ? esp_size(m) : 1, Pm = m->mpg.size;
    int me = m->mpg.rank, local = mp_lists_local(m, r), U = saa_phased(m) ? saa_phases(m) : 1;
    int nu = r * U;
    int q0 = xgroup(m)->rank - me; /* S2: MP member 0's EP&ESP rank (MoNTA: q0 + me is this
                                    * member's EP rank, and its one-chunk lists need none) */
    long *cnt = x->h_cnt, *all = x->h_cnt + nu, *sl = x->h_sl;
    fsmoe_error err = {0};
    fsmoe_status st = FSMOE_OK;
    x->units = U;
    for (int u = 0; u < nu; u++) {
        if (!local) /* this member's count, exchanged below */
            cnt[u] = member_unit(m, q0, me, u, U, r, NULL);
        for (int i = 0; local && i < Pm; i++)
            all[i * nu + u] = member_unit(m, q0, i, u, U, r, NULL);
    }
    if (!local)
        st = dist_allgather_longs(m->dist, RT_MP, cnt, all, nu, "MoE S2 row-count exchange (mp)",
                                  &err);
    long nS = 0;
    for (int u = 0; u < nu && st == FSMOE_OK; u++) {
        long R = 0;
        for (int i = 0; i < Pm; i++)
            R = all[i * nu + u] > R ? all[i * nu + u] : R;
        x->Rm[u] = R;
        x->offS[u] = nS;
        nS += R;
    }
    x->offS[nu] = nS;
    /* the units' lists, each padded to Rm: this member's in sl, every member's after it */
    long *sall = sl + nS;
    for (int i = local ? 0 : me; i < (local ? Pm : me + 1) && st == FSMOE_OK; i++) {
        long *dst = i == me && !local ? sl : sall + (long)i * nS;
        for (int u = 0; u < nu; u++) {
            long n = member_unit(m, q0, i, u, U, r, dst + x->offS[u]);
            for (long k = x->offS[u] + n; k < x->offS[u + 1]; k++)
                dst[k] = -1;
        }
    }
    if (local && st == FSMOE_OK)
        memcpy(sl, sall + (long)me * nS, (size_t)nS * sizeof(long));
    else if (st == FSMOE_OK)
        st = dist_allgather_longs(m->dist, RT_MP, sl, sall, (int)nS,
                                  "MoE S2 row exchange (mp)", &err);
    if (st != FSMOE_OK) {
        rt_backend_fail(be, st, "%s", err.msg);
        return;
    }
    int *hs = x->h_sidx, *ha = hs + nS;
    long na = 0;
    for (long k = 0; k < nS; k++)
        hs[k] = (int)sl[k];
    for (int u = 0; u < nu; u++) {
        x->offAll[u] = na;
        for (int i = 0; i < Pm; i++)
            for (long k = x->offS[u]; k < x->offS[u + 1]; k++)
                ha[na++] = i == me ? -1 : (int)sall[(long)i * nS + k];
    }
    x->offAll[nu] = na;
    if (nS)
        be->copy(be, NULL, x->sidx, hs, (size_t)nS * sizeof(int), RT_H2D);
    if (na)
        be->copy(be, NULL, x->aidx, ha, (size_t)na * sizeof(int), RT_H2D);
    if (!saa_phased(m))
        return;
    /* the phases' Combine counts: to EP member q+k's slices, from q−k's (r·U·2·P ints) */
    long need = (long)nu * 2 * P;
    if (need > x->n_ph_cnt) {
        free(x->ph_cnt);
        x->n_ph_cnt = 0;
        if (!(x->ph_cnt = malloc((size_t)need * sizeof(int)))) {
            rt_backend_fail(be, FSMOE_ERR_NOMEM, "MoE layer %d: out of memory for the SAA's "
                            "phase counts", m->index);
            return;
        }
        x->n_ph_cnt = need;
    }
    for (int u = 0; u < nu; u++) {
        int j = u / U, k = u % U, to = saa_to(m, k), from = saa_from(m, k);
        int *snd = x->ph_cnt + (long)u * 2 * P, *rcv = snd + P;
        for (int p = 0; p < P; p++) {
            snd[p] = p / S == to ? x->recv_rows[j * P + p] : 0;
            rcv[p] = p / S == from ? x->send_rows[j * P + p] : 0;
        }
    }
}

/* 2DH (moe_layer.h all_rows): every member's rows to every member per chunk, from the counts
 * every member knows (K), cut as chunk_part cuts them (each expert's member offsets summed
 * once: O(r·E·P) per phase, not chunk_part's O(P) per member and expert); this member's row
 * and column must be its own send_rows and recv_rows. */
static void all_rows_build(rt_moe *m, rt_backend *be, rt_xmap *x, int r)
{
    int P = group_size(m), q = xgroup(m)->rank;
    long El = m->E_local, E = xexperts(m), need = 2L * r * P * P;
    if (need > x->n_all_rows) {
        free(x->all_rows);
        x->n_all_rows = 0;
        if (!(x->all_rows = malloc((size_t)need * sizeof(int)))) {
            rt_backend_fail(be, FSMOE_ERR_NOMEM, "MoE layer %d: out of memory for the 2DH counts",
                            m->index);
            return;
        }
        x->n_all_rows = need;
    }
    memset(x->all_rows, 0, (size_t)need * sizeof(int));
    for (long e = 0; e < E; e++) {
        long T = 0;
        for (int s = 0; s < P; s++)
            T += m->K[s * E + e];
        int d = (int)(e / El); /* the member holding expert e */
        long o = 0;
        for (int s = 0; s < P; o += m->K[s * E + e], s++)
            for (int j = 0; j < r; j++) {
                long lo, hi;
                chunk_cut(T, o, m->K[s * E + e], j, r, &lo, &hi);
                if (hi > lo)
                    x->all_rows[((long)j * P + s) * P + d] += (int)(hi - lo);
            }
    }
    for (int j = 0; j < r; j++) {
        int *D = x->all_rows + (long)j * P * P, *Cb = D + (long)r * P * P;
        for (int s = 0; s < P; s++) /* the Combine: the Dispatch's transpose */
            for (int d = 0; d < P; d++)
                Cb[d * P + s] = D[s * P + d];
        for (int p = 0; p < P; p++)
            if (D[q * P + p] != x->send_rows[j * P + p] || D[p * P + q] != x->recv_rows[j * P + p])
                rt_backend_fail(be, FSMOE_ERR_INTERNAL, "MoE layer %d: the 2DH counts of chunk %d "
                                "disagree with the exchange plan's (member %d)", m->index, j, p);
    }
}

/* Builds phase ph's exchange plan for r chunks and uploads its index arrays. */
static void xmap_build(rt_moe *m, rt_backend *be, int ph, int r)
{
    rt_xmap *x = &m->xm[ph];
    int P = group_size(m), q = xgroup(m)->rank;
    long El = m->E_local, C = m->route.C, Crep = m->Crep, E = xexperts(m);
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
                {
                    long re = real_expert(m, e);
                    A[nA++] = (int)(re * C + (split_slots(m) ? m->slot0[re] : 0) + (i - off));
                }
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
    if (m->a2a_2dh)
        all_rows_build(m, be, x, r);
    if (nA)
        be->copy(be, NULL, x->idxA, A, (size_t)nA * sizeof(int), RT_H2D);
    if (nB)
        be->copy(be, NULL, x->idxB, B, (size_t)nB * sizeof(int), RT_H2D);
    if (esp_rows(m))
        esp_build(m, be, x, r);
    if (split_slots(m) && m->mpg.size > 1)
        mp_build(m, be, x, r);
    be->stream_sync(be, NULL);
}

/* Chunk j of one exchange. Towards the experts (Dispatch): local slots of src (E, C, M), in
 * idxA order, to replica rows of dst (idxB). Back (Combine): the same exchange reversed —
 * replica rows of src in idxB order to local slots of dst (idxA), the row counts swapped. dst
 * was zeroed; every row of it is written once (a copy), or under PauseMP once per ESP slice
 * (the slices' partial outputs add up to the expert's). */
static void exchange_chunk(rt_moe *m, rt_backend *be, const rt_xmap *x, int j, int to_experts,
                           const real *src, real *dst, const char *what, int hier)
{
    int P = group_size(m);
    const int *A = x->idxA + x->offA[j], *B = x->idxB + x->offB[j];
    long nA = x->offA[j + 1] - x->offA[j], nB = x->offB[j + 1] - x->offB[j];
    const int *ra = x->send_rows + j * P, *rb = x->recv_rows + j * P;
    be->gather_rows(be, m->comm, m->send_stage, src, to_experts ? A : B, to_experts ? nA : nB,
                    m->M);
    if (hier && m->a2a_2dh)
        be->alltoallv_rows_2dh(be, m->comm, xgroup(m), m->recv_stage, m->send_stage,
                               x->all_rows + (long)(to_experts ? j : x->r + j) * P * P, m->M,
                               what);
    else
        be->alltoallv_rows(be, m->comm, xgroup(m), m->recv_stage, m->send_stage,
                           to_experts ? ra : rb, to_experts ? rb : ra, m->M, what);
    be->scatter_add_rows(be, m->comm, dst, m->recv_stage, to_experts ? B : A, NULL,
                         to_experts ? nB : nA, m->M);
}

static int chunks(int r)
{
    if (r < 1)
        r = 1;
    return r > RT_MOE_MAX_CHUNKS ? RT_MOE_MAX_CHUNKS : r;
}

/* An AllGather of rows on the intra stream: this member's R rows of src (pack, -1 pads)
 * staged in send, every member's gathered into recv and added into dst (unpack: g->size·R
 * rows, -1 skips; dst's rows were zero or are this member's own). With *h a running trace
 * task (else NULL), copy_j >= 0 ends it after the AllGather and traces the unpacking as the
 * graph's re-layout copy of chunk copy_j (MoNTA's O2/O3). */
static void gather_over(rt_moe *m, rt_backend *be, const rt_group *g, const real *src,
                        const int *pack, long R, real *dst, const int *unpack, real *send,
                        real *recv, const char *what, long *h, int backward, int copy_j)
{
    long M = m->M;
    be->gather_rows(be, m->intra, send, src, pack, R, M);
    be->allgather(be, m->intra, g, recv, send, R * M, what);
    if (h && copy_j >= 0) {
        rt_trace_end(m->trace, m->intra, *h);
        *h = rt_trace_begin(m->trace, m->intra, RT_TRACE_INTRA, FSMOE_TASK_COPY, backward,
                            m->index, copy_j);
    }
    be->scatter_add_rows(be, m->intra, dst, recv, unpack, NULL, g->size * R, M);
}

/* Chunk j's ESP AllGather (own replica rows → every member's stacked rows) on the intra
 * stream; stk was zeroed and every stacked row is written once. */
static void esp_gather(rt_moe *m, rt_backend *be, const rt_xmap *x, int j, const real *own,
                       real *stk, const char *what)
{
    gather_over(m, be, &m->esp, own, x->eidx + x->offO[j], x->R[j], stk, x->gidx + x->offG[j],
                m->ag_send, m->ag_recv, what, NULL, 0, -1);
}

/* Chunk j's ESP ReduceScatter: the slices' partial outputs of every member's stacked rows,
 * summed into this member's own replica rows (own was zeroed). */
static void esp_reduce(rt_moe *m, rt_backend *be, const rt_xmap *x, int j, const real *stk,
                       real *own, const char *what)
{
    long R = x->R[j], M = m->M;
    be->gather_rows(be, m->intra, m->ag_recv, stk, x->gidx + x->offG[j], esp_size(m) * R, M);
    be->reducescatter_sum(be, m->intra, &m->esp, m->ag_send, m->ag_recv, R * M, what);
    be->scatter_add_rows(be, m->intra, own, m->ag_send, x->eidx + x->offO[j], NULL, R, M);
}

/* DeepSpeed's expert tensor parallelism: chunk j's partial outputs of this member's replica rows
 * (part, replica layout) summed over ESP into own (zeroed). */
static void esp_allreduce(rt_moe *m, rt_backend *be, const rt_xmap *x, int j, const real *part,
                          real *own, const char *what)
{
    long R = x->R[j], M = m->M;
    be->gather_rows(be, m->intra, m->ag_send, part, x->eidx + x->offO[j], R, M);
    be->allreduce_sum(be, m->intra, &m->esp, m->ag_send, R * M, what);
    be->scatter_add_rows(be, m->intra, own, m->ag_send, x->eidx + x->offO[j], NULL, R, M);
}

/* The same sum as MoNTA's layer without EP has it (RT_ETP_RS_AG): an ESP ReduceScatter of the
 * rows padded to S equal blocks, then an ESP AllGather of the blocks, each a task of the graph. */
static void esp_rs_ag(rt_moe *m, rt_backend *be, const rt_xmap *x, int j, int backward,
                      const real *part, real *own)
{
    int S = esp_size(m);
    long R = x->R[j], M = m->M, per = (R + S - 1) / S; /* rows of each member's block */
    be->gather_rows(be, m->intra, m->ag_recv, part, x->eidx + x->offO[j], R, M);
    if (S * per > R) /* the padding rows: summed and gathered, never read back */
        be->zero(be, m->intra, m->ag_recv + R * M, (size_t)((S * per - R) * M) * sizeof(real));
    long h = rt_trace_begin(m->trace, m->intra, RT_TRACE_INTRA, FSMOE_TASK_RS, backward,
                            m->index, j);
    be->reducescatter_sum(be, m->intra, &m->esp, m->ag_send, m->ag_recv, per * M,
                          backward ? "MoE backward MoNTA ReduceScatter (esp)"
                                   : "MoE MoNTA ReduceScatter (esp)");
    rt_trace_end(m->trace, m->intra, h);
    h = rt_trace_begin(m->trace, m->intra, RT_TRACE_INTRA, FSMOE_TASK_AG, backward, m->index, j);
    be->allgather(be, m->intra, &m->esp, m->ag_recv, m->ag_send, per * M,
                  backward ? "MoE backward MoNTA AllGather (esp)" : "MoE MoNTA AllGather (esp)");
    rt_trace_end(m->trace, m->intra, h);
    be->scatter_add_rows(be, m->intra, own, m->ag_recv, x->eidx + x->offO[j], NULL, R, M);
}

/* S2: unit u's rows of out (local slots) from every MP member (its Combine filled this
 * member's own rows; the others are still 0), on the intra stream. */
static void mp_gather_unit(rt_moe *m, rt_backend *be, const rt_xmap *x, int u, real *out,
                           const char *what)
{
    gather_over(m, be, &m->mpg, out, x->sidx + x->offS[u], x->Rm[u], out,
                x->aidx + x->offAll[u], m->mp_send, m->mp_recv, what, NULL, 0, -1);
}

/* S2's SAA of chunk j (moe_layer.h): the Combine (replica rows of src back to the local slots
 * of dst) in phases; after each, on the intra stream, the MP AllGather of the slots it filled,
 * beside the next phase's exchange. Each phase's counts name its peers only (ph_cnt), and its
 * blocks are contiguous in both layouts (an EP member's slices are consecutive members). */
static void saa_chunk(rt_moe *m, rt_backend *be, const rt_xmap *x, int j, const real *src,
                      real *dst, const char *c_what, const char *m_what)
{
    int P = group_size(m), S = esp_size(m), U = x->units;
    long M = m->M;
    const int *A = x->idxA + x->offA[j], *ra = x->send_rows + j * P, *rb = x->recv_rows + j * P;
    be->gather_rows(be, m->comm, m->send_stage, src, x->idxB + x->offB[j],
                    x->offB[j + 1] - x->offB[j], M);
    for (int k = 0; k < U; k++) {
        int to = saa_to(m, k), from = saa_from(m, k);
        const int *cnt = x->ph_cnt + ((long)j * U + k) * 2 * P;
        long so = 0, ro = 0, n = 0; /* rows before to's block (sent), from's (received) */
        for (int p = 0; p < to * S; p++)
            so += rb[p];
        for (int p = 0; p < from * S; p++)
            ro += ra[p];
        for (int p = from * S; p < (from + 1) * S; p++)
            n += ra[p];
        be->alltoallv_rows(be, m->comm, xgroup(m), m->recv_stage + ro * M,
                           m->send_stage + so * M, cnt, cnt + P, M, c_what);
        be->scatter_add_rows(be, m->comm, dst, m->recv_stage + ro * M, A + ro, NULL, n, M);
        be->event_record(be, m->ev_phase, m->comm);
        be->stream_wait(be, m->intra, m->ev_phase);
        mp_gather_unit(m, be, x, j * U + k, dst, m_what);
    }
}

/* MoNTA: the layer's whole ESP ReduceScatter (every chunk's rows at once: esp_build's whole
 * lists). */
static void esp_reduce_whole(rt_moe *m, rt_backend *be, const rt_xmap *x, const real *stk,
                             real *own, const char *what)
{
    int S = esp_size(m);
    long R = x->RW, M = m->M;
    const int *G = x->gidx + x->offG[x->r], *O = G + S * R;
    be->gather_rows(be, m->intra, m->ag_recv, stk, G, S * R, M);
    be->reducescatter_sum(be, m->intra, &m->esp, m->ag_send, m->ag_recv, R * M, what);
    be->scatter_add_rows(be, m->intra, own, m->ag_send, O, NULL, R, M);
}

/* Chunk j's expert work. Without ESP on the replica rows; with ESP on every member's block of
 * the stacked rows (moe_layer.h). in/out: the phase's expert input and output (replica or
 * stacked); xf: the forward's expert input (the backward's x). */
static void expert_chunk(rt_moe *m, rt_backend *be, int backward, const rt_xmap *x, int j,
                         const real *in, real *out, const real *xf)
{
    int S = stacked(m);
    long El = m->E_local, M = m->M, H = m->ex.H;
    long C = S > 1 ? m->Cs : m->Crep;
    for (int v = 0; v < S; v++) {
        const long *r0 = S > 1 ? x->g0 + ((long)j * S + v) * El : x->r0 + j * El;
        const long *r1 = S > 1 ? x->g1 + ((long)j * S + v) * El : x->r1 + j * El;
        long bm = v * El * C * M, bh = v * El * C * H;
        rt_expert_acts acts = {m->eacts.a + bh, m->eacts.g ? m->eacts.g + bh : NULL,
                               m->eacts.h + bh};
        if (!backward)
            experts_forward_ranges(&m->ex, be, m->comp, in + bm, out + bm, &acts, C, r0, r1);
        else
            experts_backward_ranges(&m->ex, be, m->comp, in + bm, xf + bm, out + bm, &acts,
                                    m->dh + bh, m->da + bh, m->ex.kind == 1 ? m->dg + bh : NULL,
                                    C, r0, r1);
    }
}

/* The pipelined middle of both phases: per chunk Dispatch (comm) → [ESP AllGather (intra)] →
 * expert (comp) → [ESP ReduceScatter (intra)] → Combine (comm), issued D0 D1 C0 D2 C1 … on
 * the communication stream and G0 G1 R0 G2 R1 … on the intra stream (see moe_layer.h). in/out
 * are local (E, C, M); xe/ye replica buffers; with ESP, xg/yg the stacked ones. backward
 * selects the expert pass. */
static void run_chunks(rt_moe *m, rt_backend *be, int backward, const real *in, real *xe,
                       real *ye, real *xg, real *yg, real *out)
{
    const rt_xmap *x = &m->xm[backward];
    int r = x->r, S = stacked(m), etp = m->etp && esp_size(m) > 1;
    int saa = m->s2 && m->mpg.size > 1;
    long El = m->E_local, M = m->M;
    rt_event **ev_d = m->ev, **ev_e = m->ev + RT_MOE_MAX_CHUNKS,
             **ev_c = m->ev + 2 * RT_MOE_MAX_CHUNKS, **ev_g = m->ev + 3 * RT_MOE_MAX_CHUNKS,
             **ev_r = m->ev + 4 * RT_MOE_MAX_CHUNKS;
    const char *d_what = backward ? "MoE backward Dispatch AllToAllv (ep)"
                                  : "MoE Dispatch AllToAllv (ep)";
    const char *c_what = backward ? "MoE backward Combine AllToAllv (ep)"
                                  : "MoE Combine AllToAllv (ep)";
    const char *g_what = backward ? "MoE backward ESP AllGather" : "MoE ESP AllGather";
    const char *s_what = backward ? "MoE backward ESP ReduceScatter" : "MoE ESP ReduceScatter";
    const char *a_what = backward ? "MoE backward ESP AllReduce" : "MoE ESP AllReduce";
    const char *m_what = backward ? "MoE backward S2 AllGather (mp)" : "MoE S2 AllGather (mp)";
    be->event_record(be, m->ev_start, NULL);
    be->stream_wait(be, m->comm, m->ev_start);
    be->stream_wait(be, m->comp, m->ev_start);
    be->zero(be, m->comm, xe, (size_t)(El * m->Crep * M) * sizeof(real));
    be->zero(be, m->comm, out, (size_t)(m->E * m->route.C * M) * sizeof(real));
    if (S > 1 || etp || saa) {
        be->stream_wait(be, m->intra, m->ev_start);
        if (S > 1)
            be->zero(be, m->intra, xg, (size_t)(S * El * m->Cs * M) * sizeof(real));
        if (S > 1 || etp)
            be->zero(be, m->intra, ye, (size_t)(El * m->Crep * M) * sizeof(real));
    }
    for (int j = 0; j <= r; j++) {
        if (j < r) {
            hook(m, RT_HOOK_BEFORE_DISPATCH, j, backward);
            long h = rt_trace_begin(m->trace, m->comm, RT_TRACE_COMM, xkind(m, FSMOE_TASK_A2A), backward,
                                    m->index, j);
            exchange_chunk(m, be, x, j, 1, in, xe, d_what, 1);
            rt_trace_end(m->trace, m->comm, h);
            be->event_record(be, ev_d[j], m->comm);
            hook(m, RT_HOOK_AFTER_DISPATCH, j, backward);
            if (backward && j == r - 1 && m->gsync)
                gsync_at(m->gsync, FSMOE_AT_DISPATCHED, m->index);
            rt_event *ready = ev_d[j];
            if (S > 1) {
                be->stream_wait(be, m->intra, ev_d[j]);
                h = rt_trace_begin(m->trace, m->intra, RT_TRACE_INTRA, FSMOE_TASK_AG, backward,
                                   m->index, j);
                esp_gather(m, be, x, j, xe, xg, g_what);
                rt_trace_end(m->trace, m->intra, h);
                be->event_record(be, ev_g[j], m->intra);
                ready = ev_g[j];
            }
            be->stream_wait(be, m->comp, ready);
            h = rt_trace_begin(m->trace, m->comp, RT_TRACE_COMPUTE, FSMOE_TASK_EXPERT, backward,
                               m->index, j);
            expert_chunk(m, be, backward, x, j, S > 1 ? xg : xe, S > 1 || etp ? yg : ye,
                         S > 1 ? m->Xg : m->Xe);
            rt_trace_end(m->trace, m->comp, h);
            be->event_record(be, ev_e[j], m->comp);
        }
        if (j >= 1) {
            rt_event *done = ev_e[j - 1];
            if (S > 1) {
                be->stream_wait(be, m->intra, ev_e[j - 1]);
                long h = rt_trace_begin(m->trace, m->intra, RT_TRACE_INTRA, FSMOE_TASK_RS,
                                        backward, m->index, j - 1);
                esp_reduce(m, be, x, j - 1, yg, ye, s_what);
                rt_trace_end(m->trace, m->intra, h);
                be->event_record(be, ev_r[j - 1], m->intra);
                done = ev_r[j - 1];
            } else if (etp && m->etp == RT_ETP_RS_AG) {
                be->stream_wait(be, m->intra, ev_e[j - 1]);
                esp_rs_ag(m, be, x, j - 1, backward, yg, ye);
                be->event_record(be, ev_r[j - 1], m->intra);
                done = ev_r[j - 1];
            } else if (etp) {
                be->stream_wait(be, m->intra, ev_e[j - 1]);
                long h = rt_trace_begin(m->trace, m->intra, RT_TRACE_INTRA, FSMOE_TASK_AR_ESP,
                                        backward, m->index, j - 1);
                esp_allreduce(m, be, x, j - 1, yg, ye, a_what);
                rt_trace_end(m->trace, m->intra, h);
                be->event_record(be, ev_r[j - 1], m->intra);
                done = ev_r[j - 1];
            }
            hook(m, RT_HOOK_BEFORE_COMBINE, j - 1, backward);
            be->stream_wait(be, m->comm, done);
            /* S2's SAA task is the Combine and the MP AllGather together; DeepSpeed's
             * gather_tokens is an AllGather task of its own after the Combine */
            int saa_task = saa && m->s2 != RT_S2_DS_GATHER;
            long h = rt_trace_begin(m->trace, m->comm, RT_TRACE_COMM,
                                    xkind(m, saa_task ? FSMOE_TASK_SAA : FSMOE_TASK_A2A), backward,
                                    m->index, j - 1);
            if (saa_task) { /* phases, each one's MP AllGather beside the next's exchange */
                saa_chunk(m, be, x, j - 1, ye, out, c_what, m_what);
                rt_trace_end(m->trace, m->intra, h);
                be->event_record(be, ev_r[j - 1], m->intra);
                be->event_record(be, ev_c[j - 1], m->comm);
            } else {
                exchange_chunk(m, be, x, j - 1, 0, ye, out, c_what, 1);
                rt_trace_end(m->trace, m->comm, h);
                be->event_record(be, ev_c[j - 1], m->comm);
            }
            if (saa && !saa_task) { /* gather_tokens: the MP AllGather after the Combine */
                be->stream_wait(be, m->intra, ev_c[j - 1]);
                h = rt_trace_begin(m->trace, m->intra, RT_TRACE_INTRA, FSMOE_TASK_AG, backward,
                                   m->index, j - 1);
                mp_gather_unit(m, be, x, j - 1, out, m_what);
                rt_trace_end(m->trace, m->intra, h);
                be->event_record(be, ev_r[j - 1], m->intra);
            }
            hook(m, RT_HOOK_AFTER_COMBINE, j - 1, backward);
        }
    }
    be->stream_wait(be, NULL, saa ? ev_r[r - 1] : ev_c[r - 1]);
}

/* MoNTA's layer (O1-O3, moe_layer.h): per chunk the Dispatch (comm) and the ESP AllGather of
 * its rows (intra; with copy tasks — O2/O3 — the unpacking into the stacked layout is the
 * graph's re-layout copy, traced apart); the experts once on all stacked rows (comp); one
 * ReduceScatter (intra); per chunk the Combine (comm) and the MP AllGather of the slots it
 * filled (intra, the copy likewise). */
static void run_monta(rt_moe *m, rt_backend *be, int backward, const real *in, real *xe,
                      real *ye, real *xg, real *yg, real *out)
{
    const rt_xmap *x = &m->xm[backward];
    int r = x->r, S = esp_size(m), copy = m->monta >= 2;
    long El = m->E_local, M = m->M, H = m->ex.H, Cs = m->Cs;
    rt_event **ev_d = m->ev, **ev_e = m->ev + RT_MOE_MAX_CHUNKS,
             **ev_c = m->ev + 2 * RT_MOE_MAX_CHUNKS, **ev_g = m->ev + 3 * RT_MOE_MAX_CHUNKS,
             **ev_r = m->ev + 4 * RT_MOE_MAX_CHUNKS;
    be->event_record(be, m->ev_start, NULL);
    be->stream_wait(be, m->comm, m->ev_start);
    be->stream_wait(be, m->comp, m->ev_start);
    be->stream_wait(be, m->intra, m->ev_start);
    be->zero(be, m->comm, xe, (size_t)(El * m->Crep * M) * sizeof(real));
    be->zero(be, m->comm, out, (size_t)(m->E * m->route.C * M) * sizeof(real));
    be->zero(be, m->intra, xg, (size_t)(S * El * Cs * M) * sizeof(real));
    be->zero(be, m->intra, ye, (size_t)(El * m->Crep * M) * sizeof(real));
    for (int j = 0; j < r; j++) {
        hook(m, RT_HOOK_BEFORE_DISPATCH, j, backward);
        long h = rt_trace_begin(m->trace, m->comm, RT_TRACE_COMM, xkind(m, FSMOE_TASK_A2A), backward,
                                m->index, j);
        exchange_chunk(m, be, x, j, 1, in, xe, backward ? "MoE backward Dispatch AllToAllv (ep)"
                                                        : "MoE Dispatch AllToAllv (ep)", 1);
        rt_trace_end(m->trace, m->comm, h);
        be->event_record(be, ev_d[j], m->comm);
        hook(m, RT_HOOK_AFTER_DISPATCH, j, backward);
        if (backward && j == r - 1 && m->gsync)
            gsync_at(m->gsync, FSMOE_AT_DISPATCHED, m->index);
        be->stream_wait(be, m->intra, ev_d[j]);
        h = rt_trace_begin(m->trace, m->intra, RT_TRACE_INTRA, FSMOE_TASK_AG, backward, m->index,
                           j);
        gather_over(m, be, &m->esp, xe, x->eidx + x->offO[j], x->R[j], xg, x->gidx + x->offG[j],
                    m->ag_send, m->ag_recv, "MoE MoNTA AllGather (esp)", &h, backward,
                    copy ? j : -1);
        rt_trace_end(m->trace, m->intra, h);
        be->event_record(be, ev_g[j], m->intra);
    }
    /* the experts on every member's rows: block v's rows [0, T) of each local expert */
    be->stream_wait(be, m->comp, ev_g[r - 1]);
    long h = rt_trace_begin(m->trace, m->comp, RT_TRACE_COMPUTE, FSMOE_TASK_EXPERT, backward,
                            m->index, -1);
    long r0[RANGES_ESP], r1[RANGES_ESP];
    for (int v = 0; v < S; v++) {
        for (long el = 0; el < El; el++)
            r0[el] = 0, r1[el] = m->Tall[v * El + el];
        long bm = v * El * Cs * M, bh = v * El * Cs * H;
        rt_expert_acts acts = {m->eacts.a + bh, m->eacts.g ? m->eacts.g + bh : NULL,
                               m->eacts.h + bh};
        if (!backward)
            experts_forward_ranges(&m->ex, be, m->comp, xg + bm, yg + bm, &acts, Cs, r0, r1);
        else
            experts_backward_ranges(&m->ex, be, m->comp, xg + bm, m->Xg + bm, yg + bm, &acts,
                                    m->dh + bh, m->da + bh, m->ex.kind == 1 ? m->dg + bh : NULL,
                                    Cs, r0, r1);
    }
    rt_trace_end(m->trace, m->comp, h);
    be->event_record(be, ev_e[0], m->comp);
    be->stream_wait(be, m->intra, ev_e[0]);
    h = rt_trace_begin(m->trace, m->intra, RT_TRACE_INTRA, FSMOE_TASK_RS, backward, m->index, -1);
    esp_reduce_whole(m, be, x, yg, ye, "MoE MoNTA ReduceScatter (esp)");
    rt_trace_end(m->trace, m->intra, h);
    be->event_record(be, ev_r[0], m->intra);
    be->stream_wait(be, m->comm, ev_r[0]);
    for (int j = 0; j < r; j++) {
        hook(m, RT_HOOK_BEFORE_COMBINE, j, backward);
        h = rt_trace_begin(m->trace, m->comm, RT_TRACE_COMM, xkind(m, FSMOE_TASK_A2A), backward, m->index,
                           j);
        exchange_chunk(m, be, x, j, 0, ye, out, backward ? "MoE backward Combine AllToAllv (ep)"
                                                         : "MoE Combine AllToAllv (ep)", 1);
        rt_trace_end(m->trace, m->comm, h);
        be->event_record(be, ev_c[j], m->comm);
        hook(m, RT_HOOK_AFTER_COMBINE, j, backward);
        be->stream_wait(be, m->intra, ev_c[j]);
        h = rt_trace_begin(m->trace, m->intra, RT_TRACE_INTRA, FSMOE_TASK_AG, backward, m->index,
                           j);
        gather_over(m, be, &m->mpg, out, x->sidx + x->offS[j], x->Rm[j], out, /* units: 1 */
                    x->aidx + x->offAll[j], m->mp_send, m->mp_recv, "MoE MoNTA AllGather (mp)",
                    &h, backward, copy ? j : -1);
        rt_trace_end(m->trace, m->intra, h);
        be->event_record(be, ev_g[j], m->intra);
    }
    be->stream_wait(be, NULL, ev_g[r - 1]);
}

/* The expert gradients of one layer divided by the copies of each token (moe_layer.h), on the
 * default stream after the layer's backward. */
static void undo_duplicates(rt_moe *m, rt_backend *be)
{
    if (m->dup <= 1 || per_slice(m) || m->etp || m->monta)
        return;
    const rt_experts *ex = &m->ex;
    long E = ex->E, M = ex->M, H = ex->H;
    real f = (real)(1.0 / m->dup);
    be->scale(be, NULL, ex->dw1, f, E * M * H);
    be->scale(be, NULL, ex->dw2, f, E * H * M);
    if (ex->kind == 1) {
        be->scale(be, NULL, ex->dw3, f, E * M * H);
    } else {
        be->scale(be, NULL, ex->db1, f, E * H);
        be->scale(be, NULL, ex->db2, f, E * M);
    }
}

/* PauseMP (Parm S1): this MP member's rows of the layer's (N, M) input. */
static long own_rows(const rt_moe *m, long N, long *row0)
{
    int P = m->mpg.size > 0 ? m->mpg.size : 1;
    *row0 = (m->mpg.rank > 0 ? m->mpg.rank : 0) * (N / P);
    return N / P;
}

/* PauseMP: every MP member's rows of a (N, M) tensor from its own (m->own) into out, as a task
 * of the graph (the MP AllGather of the layer, chunk -1; with one MP member the local copy it
 * is: the graph has no AllGather there). add: out += instead of =. */
static void mp_gather(rt_moe *m, rt_backend *be, int backward, long n, real *out, int add)
{
    long h = rt_trace_begin(m->trace, NULL, RT_TRACE_HOST,
                            m->mpg.size > 1 ? FSMOE_TASK_AG : FSMOE_TASK_COPY, backward, m->index,
                            -1);
    be->allgather(be, NULL, &m->mpg, add ? m->whole : out, m->own, n * m->M,
                  backward ? "MoE input-gradient AllGather (mp)" : "MoE output AllGather (mp)");
    if (add)
        be->add(be, NULL, out, out, m->whole, m->mpg.size * n * m->M);
    rt_trace_end(m->trace, NULL, h);
}

/* The expert rows every member of the exchange group runs this step (from K): the busiest
 * one's and the mean, into the routing statistics. */
static void count_rows(rt_moe *m)
{
    int P = group_size(m);
    long E = xexperts(m);
    double mx = 0, sum = 0;
    for (int q = 0; q < P; q++) {
        double rows = 0;
        for (int s = 0; s < P; s++)
            for (long el = 0; el < m->E_local; el++)
                rows += (double)m->K[s * E + q * m->E_local + el];
        mx = rows > mx ? rows : mx;
        sum += rows;
    }
    m->stats.rows_max += mx;
    m->stats.rows_mean += sum / P;
}

fsmoe_status moe_forward(rt_moe *m, rt_backend *be, const real *x, real *y, long N, int training,
                         uint64_t seed, long step)
{
    hook(m, RT_HOOK_BEFORE_MOE_START, -1, 0);
    long row0 = 0, n = m->pause_mp ? own_rows(m, N, &row0) : N;
    const real *xo = x + row0 * m->M;
    real *yo = m->pause_mp ? m->own : y;
    /* the gate's global statistics are over the ranks holding other tokens: DP, or under
     * PauseMP every rank (the MP members split theirs) */
    m->gate.tok0 = m->tok0 + row0;
    m->gate.group = m->pause_mp ? RT_WORLD : RT_DP;
    long h = rt_trace_begin(m->trace, NULL, RT_TRACE_HOST, FSMOE_TASK_GATE, FSMOE_PHASE_FWD,
                            m->index, -1);
    /* the gate's statistics over its group and the token counts over the exchange group: the
     * ranks meet here (trace.h rt_trace_meets) */
    if (m->dist && (m->dist->g[m->gate.group].size > 1 || group_size(m) > 1))
        rt_trace_meets(m->trace, h);
    fsmoe_status st = gate_forward(&m->gate, be, NULL, xo, n, training, seed, step, m->freeze,
                                   &m->route);
    if (st != FSMOE_OK)
        return st;
    if (training) {
        rt_moe_routing_stats *rs = &m->stats;
        long kept = 0;
        for (long e = 0; e < m->route.E; e++)
            kept += m->route.load[e];
        rs->forwards++;
        rs->kept += kept;
        rs->dropped += m->route.dropped;
        long Ng = m->gate.N_global > 0 ? m->gate.N_global : n;
        rs->copies_global += (double)m->gate.k * (double)Ng;
        rs->slots_global += (double)m->E * (double)m->route.C_global;
        if (m->order.kind == RT_ORDER_GSHARD && !m->route.dense && m->gate.f > 0) {
            rs->dense_cols += (double)(m->route.E * m->route.C);
            rs->dense_priced += m->gate.k * m->gate.f * (double)n;
        }
    }
    order_forward(&m->order, be, NULL, &m->route, xo, m->Xd);
    if ((st = exchange_counts(m, be)) != FSMOE_OK)
        return rt_backend_check(be, NULL);
    if (training)
        count_rows(m);
    xmap_build(m, be, 0, chunks(m->r_fwd));
    rt_trace_end(m->trace, NULL, h);
    (m->monta ? run_monta : run_chunks)(m, be, 0, m->Xd, m->Xe, m->Ye, m->Xg, m->Yg, m->Yc);
    h = rt_trace_begin(m->trace, NULL, RT_TRACE_HOST, FSMOE_TASK_GATE, FSMOE_PHASE_FWD, m->index,
                       -1);
    iorder_forward(&m->order, be, NULL, &m->route, m->Yc, yo);
    rt_trace_end(m->trace, NULL, h);
    if (m->pause_mp)
        mp_gather(m, be, 0, n, y, 0);
    hook(m, RT_HOOK_BEFORE_MOE_END, -1, 0);
    return rt_backend_check(be, NULL);
}

fsmoe_status moe_backward(rt_moe *m, rt_backend *be, const real *dy, const real *x, real *dx,
                          double aux_coef)
{
    hook(m, RT_HOOK_BEFORE_MOE_START, -1, 1);
    /* under PauseMP the layer ran on this member's n rows: their gradients first */
    long n = m->route.N, row0 = m->pause_mp ? (long)m->mpg.rank * n : 0;
    const real *dyo = dy + row0 * m->M, *xo = x + row0 * m->M;
    real *dxo = dx;
    if (m->pause_mp) {
        dxo = m->own;
        be->zero(be, NULL, dxo, (size_t)(n * m->M) * sizeof(real));
    }
    long h = rt_trace_begin(m->trace, NULL, RT_TRACE_HOST, FSMOE_TASK_GATE, FSMOE_PHASE_BWD,
                            m->index, -1);
    iorder_backward(&m->order, be, NULL, &m->route, dyo, m->Yc, m->dYc);
    xmap_build(m, be, 1, chunks(m->r_bwd));
    rt_trace_end(m->trace, NULL, h);
    /* the backward of Combine is an AllToAll in the Dispatch direction and vice versa; empty
     * local slots of dXd stay 0 (run_chunks zeroes it), whichever order reads them */
    (m->monta ? run_monta : run_chunks)(m, be, 1, m->dYc, m->dYe, m->dXe, m->dYg, m->dXg,
                                        m->dXd);
    undo_duplicates(m, be);
    h = rt_trace_begin(m->trace, NULL, RT_TRACE_HOST, FSMOE_TASK_GATE, FSMOE_PHASE_BWD, m->index,
                       -1);
    order_backward(&m->order, be, NULL, &m->route, m->dXd, xo, dxo);
    gate_backward(&m->gate, be, NULL, xo, dxo, aux_coef, &m->route);
    rt_trace_end(m->trace, NULL, h);
    if (m->pause_mp) {
        /* the gate saw this member's rows only: its gradients are summed over MP (the gate is
         * whole on every member); then every member's input gradient rows */
        rt_gate *g = &m->gate;
        real *gg[] = {g->dwg, g->dwp, g->demb};
        long gn[] = {m->M * m->E * (g->kind == RT_GATE_SOFTMOE ? g->slots : 1), g->D * m->M,
                     g->D * m->E};
        for (int i = 0; i < 3; i++)
            if (gg[i])
                be->allreduce_sum(be, NULL, &m->mpg, gg[i], gn[i],
                                  "MoE gate gradient allreduce (mp)");
        mp_gather(m, be, 1, n, dx, 1);
    }
    hook(m, RT_HOOK_BEFORE_MOE_END, -1, 1);
    return rt_backend_check(be, NULL);
}

fsmoe_status moe_routing_summary(const rt_moe *m, double *copies_kept, double *fill,
                                 double *imbalance, double *dense_width, fsmoe_error *err)
{
    const rt_moe_routing_stats *rs = &m->stats;
    long c[2] = {rs->kept, rs->dropped};
    double w[2] = {rs->dense_cols, rs->dense_priced};
    *copies_kept = *fill = *imbalance = *dense_width = 0.0;
    if (m->dist) {
        fsmoe_status st = dist_sum_longs(m->dist, RT_WORLD, c, 2, "routing statistics", err);
        if (st == FSMOE_OK)
            st = dist_sum_doubles(m->dist, RT_WORLD, w, 2, "dense routing widths", err);
        if (st != FSMOE_OK)
            return st;
    }
    if (rs->forwards == 0 || c[0] + c[1] == 0)
        return FSMOE_OK;
    /* the world holds every token copy dup times (MP members route the same tokens), or once
     * (PauseMP splits them): the kept fraction of the world's copies is the global one */
    *copies_kept = (double)c[0] / (double)(c[0] + c[1]);
    if (rs->slots_global > 0)
        *fill = *copies_kept * rs->copies_global / rs->slots_global;
    if (rs->rows_mean > 0)
        *imbalance = rs->rows_max / rs->rows_mean;
    if (w[1] > 0)
        *dense_width = w[0] / w[1];
    return FSMOE_OK;
}
