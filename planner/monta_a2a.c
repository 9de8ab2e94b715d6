/* Implements: MoNTA's AllToAll strategies under tensor parallelism (MoNTA §4, Algorithm 1 and
 * Table 8; design.md §7).
 *
 * I bytes per AllToAll on each GPU, t-way tensor parallelism (the t GPUs of a TP group hold the
 * same tokens), e expert-parallel nodes.
 *   base: one AllToAll of I bytes (duplicates included)            T = A2A(I)
 *   O1:   drop the duplicates, AllToAll I/t, AllGather back to I   T = A2A(I/t) + AG(I)
 *   O2:   O1 in N chunks, AllGather+copy of chunk j overlapping the AllToAll of chunk j+1
 *   O3:   like O2, the re-layout copy also pipelined behind the AllGathers
 * with AA_j = A2A(I/(N·t)), AG_j = AG(I/N), D_j = COPY(I/N) and the piecewise formulas of
 * design.md §7. The profile's entries already hold MoNTA's (e−1)/e and (t−1)/t factors and the
 * efficiency curves r(n): an entry with measured points is interpolated, else its line is used.
 * The paper's chunk search writes `T = T_min` where it means `T_min = T`; we keep the smallest T.
 * Beyond the paper's formulas (which make O3 ≤ O2 for every size, so O3 would always win where
 * MoNTA measured O1 at 8K and O2 up to 128K): a per-chunk synchronisation cost of the pipelined
 * collectives and O3's copy/AllGather stall (monta_problem; 0 unless a caller sets them).
 * monta_end_to_end: MoNTA §6's whole iteration per strategy, from workload.h's dense costs.
 * Relies on: libfsmoe cost.h (fsmoe_entry_time_interp). */
#include "monta_a2a.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "model.h"

#define MONTA_MAX_CHUNKS 1024

/* A missing entry costs nothing (the copy is optional; a group of one rank moves nothing). */
static double entry_time(const fsmoe_cost_entry *e, double bytes)
{
    if (!e || !e->present || !(bytes > 0.0))
        return 0.0;
    return fsmoe_entry_time_interp(e, bytes);
}

double monta_time_a2a(const monta_problem *p, double bytes)
{
    return entry_time(p->a2a, bytes);
}

double monta_time_ag(const monta_problem *p, double bytes)
{
    return p->t > 1 ? entry_time(p->ag, bytes) : 0.0;
}

double monta_time_copy(const monta_problem *p, double bytes)
{
    return entry_time(p->copy, bytes);
}

/* T of O2 and O3 with N chunks (design.md §7): whichever stream is slower runs N times and the
 * other is exposed once. O2 pipelines AllGather+copy as one stage; O3 also hides the copies
 * behind the AllGathers, so only the last one is exposed.
 * With the costs the paper's formulas leave out (monta_problem: both 0 gives design.md §7
 * exactly): every chunk collective of O2/O3 (AA_j, AG_j) pays sync, and so does O3's copy (it
 * waits on an event from the AllGather stream, where O2 issues it in-stream); in O3 the copy of
 * chunk j stalls the AllGather of chunk j+1 for min(D_j, stall). */
static void chunked_times(const monta_problem *p, int N, double *o2, double *o3)
{
    double aa = monta_time_a2a(p, p->I / ((double)N * p->t)) + p->chunk_sync_s;
    double ag = monta_time_ag(p, p->I / N) + p->chunk_sync_s;
    double d = monta_time_copy(p, p->I / N);
    *o2 = aa < ag + d ? aa + (ag + d) * N : aa * N + ag + d;
    double d3 = d > 0.0 ? d + p->chunk_sync_s : 0.0;
    double x = d3 < p->o3_stall_s ? d3 : p->o3_stall_s; /* AG_{j+1} waits this long on D_j */
    *o3 = aa < ag + x ? aa + ag * N + x * (N - 1) + d3 : aa * N + ag + d3;
}

int monta_layout_ok(const fsmoe_parallel *par) { return par->mp == par->esp; }

void monta_solve(const monta_problem *p, monta_result *out)
{
    out->t_base = monta_time_a2a(p, p->I);
    if (p->t <= 1) {
        /* No duplicates to drop: O1..O3 degenerate to the plain AllToAll. */
        out->t_o1 = out->t_o2 = out->t_o3 = out->t_base;
        out->n_o2 = out->n_o3 = 1;
        out->best = FSMOE_A2A_BASE;
        out->chunks = 1;
        return;
    }
    out->t_o1 = monta_time_a2a(p, p->I / p->t) + monta_time_ag(p, p->I);
    chunked_times(p, 1, &out->t_o2, &out->t_o3);
    out->n_o2 = out->n_o3 = 1;
    for (int N = 2; N <= MONTA_MAX_CHUNKS; N++) {
        /* chunks smaller than I_minimal run at a poor link efficiency the curves may not cover */
        if (p->I / ((double)N * p->t) < p->I_minimal || p->I / N < p->I_minimal)
            break;
        double t2, t3;
        chunked_times(p, N, &t2, &t3);
        if (t2 < out->t_o2)
            out->t_o2 = t2, out->n_o2 = N;
        if (t3 < out->t_o3)
            out->t_o3 = t3, out->n_o3 = N;
    }
    out->best = FSMOE_A2A_O1;
    out->chunks = 1;
    if (out->t_o2 < out->t_o1)
        out->best = FSMOE_A2A_O2, out->chunks = out->n_o2;
    if (out->t_o3 < (out->best == FSMOE_A2A_O2 ? out->t_o2 : out->t_o1))
        out->best = FSMOE_A2A_O3, out->chunks = out->n_o3;
}

/* A derived line (no measured entry) as a line-only entry; a zero line as an absent one. */
static const fsmoe_cost_entry *entry_of(const fsmoe_line *l, fsmoe_cost_entry *tmp)
{
    if (l->entry)
        return l->entry;
    memset(tmp, 0, sizeof *tmp);
    tmp->present = l->alpha_s > 0.0 || l->beta_s > 0.0;
    tmp->alpha_s = l->alpha_s;
    tmp->beta_s = l->beta_s;
    tmp->ranks = 1;
    return tmp;
}

void monta_problem_init(monta_problem *mp, const workload_shape *s, const fsmoe_parallel *par,
                        const workload_lines *w, monta_entries *store)
{
    memset(mp, 0, sizeof *mp);
    /* One EP rank: no AllToAll at all, so no strategy has anything to move. */
    mp->I = par->ep > 1 ? workload_ran_copies(s) * (double)s->M * s->bytes_per_element : 0.0;
    mp->t = par->mp;
    mp->e = par->ep;
    mp->I_minimal = MONTA_DEFAULT_I_MINIMAL;
    mp->a2a = entry_of(&w->a2a_ep, &store->a2a);
    mp->ag = entry_of(&w->ag_mp, &store->ag);
    mp->copy = w->have_copy ? entry_of(&w->copy, &store->copy) : NULL;
}

/* MoNTA's end-to-end iteration (monta_a2a.h). The dense blocks count as in workload.c: every
 * block has one attention (with its MP AllReduce); a block that is not MoE has a dense FFN. */
fsmoe_status monta_end_to_end(const fsmoe_model *m, const fsmoe_parallel *par,
                              const fsmoe_cluster *c, const char *cluster_path,
                              double chunk_sync_s, double o3_stall_s, monta_e2e *out,
                              fsmoe_error *err)
{
    memset(out, 0, sizeof *out);
    workload_lines w;
    workload_shape s;
    workload_shape_from_model(m, &s);
    fsmoe_status st = workload_lines_init(c, cluster_path, par, &s, &w, err);
    if (st != FSMOE_OK)
        return st;
    workload_layer wl;
    workload_layer_init(&s, par, &w, &wl);
    monta_entries me;
    monta_problem mp;
    monta_problem_init(&mp, &s, par, &w, &me);
    mp.chunk_sync_s = chunk_sync_s;
    mp.o3_stall_s = o3_stall_s;
    monta_result r;
    monta_solve(&mp, &r);

    const long n_moe = fsmoe_model_moe_count(m);
    const long n_dense = m->layers - n_moe;
    /* The expert is sliced over the t GPUs holding the same tokens (DeepSpeed's expert tensor
     * parallelism): its output is summed by an AllReduce of I bytes on that group, forward and
     * backward, before the combine (design.md §6 mode (b)); MoNTA changes only the AllToAlls. */
    const double t_sum = fsmoe_line_time(&w.ar_esp, par->esp > 1 ? mp.I : 0.0);
    /* After the dispatch every GPU of a tensor-parallel group holds the same I bytes of tokens
     * (k·f·B·L of them: its group's and the other nodes') and computes its H/t slice of the
     * expert on them; backward twice the GEMMs and MACs (workload.c). */
    const int n_gemm = fsmoe_expert_gemms(m->expert);
    const double n_exp = mp.I / s.bytes_per_element * (double)s.H / par->esp * n_gemm;
    double moe = 3.0 * n_gemm * w.gemm.alpha_s + 3.0 * n_exp * w.gemm.beta_s + 2.0 * t_sum;
    double dense = wl.ffn_fwd_s + wl.ffn_bwd_s;
    double attn = wl.attn_fwd_s + wl.attn_bwd_s;
    /* gradients of everything replicated over DP (experts have EDP = 1 member here, else
     * their bytes too), all-reduced after the backward as DeepSpeed's last bucket would */
    double grad = (double)m->layers * wl.attn_grad_bytes + (double)n_dense * wl.ffn_grad_bytes +
                  (double)n_moe * (wl.gate_grad_bytes + wl.expert_grad_bytes) +
                  wl.embed_grad_bytes + wl.head_grad_bytes;
    out->other_s = (double)m->layers * attn + (double)n_dense * dense + (double)n_moe * moe +
                   fsmoe_line_time(&w.ar_dp, grad);
    out->I = mp.I;
    out->moe_layers = n_moe;
    out->a2a_s[FSMOE_A2A_BASE] = r.t_base;
    out->a2a_s[FSMOE_A2A_O1] = r.t_o1;
    out->a2a_s[FSMOE_A2A_O2] = r.t_o2;
    out->a2a_s[FSMOE_A2A_O3] = r.t_o3;
    out->chunks[FSMOE_A2A_BASE] = out->chunks[FSMOE_A2A_O1] = 1;
    out->chunks[FSMOE_A2A_O2] = r.n_o2;
    out->chunks[FSMOE_A2A_O3] = r.n_o3;
    out->best = FSMOE_A2A_BASE;
    for (int k = 0; k < 4; k++) {
        double a2a = 4.0 * (double)n_moe * out->a2a_s[k]; /* dispatch + combine, fwd + bwd */
        out->iteration_s[k] = out->other_s + a2a;
        out->a2a_share[k] = a2a / out->iteration_s[k];
        if (out->iteration_s[k] < out->iteration_s[out->best])
            out->best = (fsmoe_a2a_strategy)k;
    }
    for (int k = 0; k < 4; k++)
        out->gain[k] = 1.0 - out->iteration_s[k] / out->iteration_s[FSMOE_A2A_BASE];
    return FSMOE_OK;
}

fsmoe_status monta_end_to_end_paper(const char *root, int paper_formulas, monta_e2e *out,
                                    fsmoe_error *err)
{
    char mpath[1024], cpath[1024];
    if (!root)
        root = ".";
    snprintf(mpath, sizeof mpath, "%s/models/llama-2x70b-moe.yaml", root);
    snprintf(cpath, sizeof cpath, "%s/clusters/monta-a800.yaml", root);
    fsmoe_model m;
    fsmoe_status st = fsmoe_model_load(mpath, &m, err);
    if (st != FSMOE_OK)
        return st;
    m.f = 1.0; /* E = k: every token visits both experts, nothing to pad */
    st = fsmoe_model_resolve(&m, &m.parallel, mpath, err);
    if (st != FSMOE_OK)
        return st;
    fsmoe_cluster c;
    memset(&c, 0, sizeof c);
    st = fsmoe_cluster_load(cpath, &c, err);
    if (st == FSMOE_OK)
        st = monta_end_to_end(&m, &m.parallel, &c, cpath,
                              paper_formulas ? 0.0 : MONTA_A800_CHUNK_SYNC_S,
                              paper_formulas ? 0.0 : MONTA_A800_O3_STALL_S, out, err);
    fsmoe_cluster_free(&c);
    return st;
}
