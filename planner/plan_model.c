/* Implements: planning a whole model on a cluster (design.md §4–§9; FSMoE §4–§5, Parm §IV,
 * MoNTA §4): per MoE layer the S1/S2 schedule, the AllToAll strategy, the forward and backward
 * pipeline degrees and the gradient partition, and the predicted iteration time of the plan and
 * of the baselines.
 *
 * Structure. Block b holds attention then an FFN (MoE when fsmoe_model_is_moe_block). Generalised
 * layer i = the MoE FFN (gate and experts) of the i-th MoE block + every dense op after it up to
 * the next MoE FFN (the following blocks' LayerNorms, attention and dense FFNs; for the last one
 * also the final LayerNorm and the LM head). A block's second LayerNorm goes with its attention:
 * its gradient is ready after the MoE layer's backward. The "prefix" = the token and position
 * embeddings and every op before the first MoE FFN; its gradients are always all-reduced after
 * the backward (grad_partition.h). Compute time of the embedding
 * lookup and the LM head is not modelled (the same in every schedule).
 *
 * Methods. auto: per layer the schedule among FSMoE's ESP pipeline, Parm's S1/S2
 * (as chunked pipelines, parm_schedule.h) and MoNTA's sequential layer at the layer's AllToAll
 * strategy and chunks (plan_monta_problems: a closed form equal to the simulated layer) with the
 * smallest predicted forward + backward time
 * at the layer's gradient share (the gradient partition makes that choice, grad_partition.h);
 * r of the ESP pipeline by SLSQP + integer check, of S1/S2 exhaustively (decided_by
 * "slsqp+integer"). fsmoe: FSMoE as published, the ESP pipeline in every layer at SLSQP +
 * integer-check degrees and its own gradient partition (what the simulator's `fsmoe` schedule
 * plays). fsmoe-paper: FSMoE Algorithm 1 on the ESP pipeline ("algorithm1"). parm:
 * the schedule Parm's Algorithm 1 picks (S1 iff t_D1 ≤ t_D2; the ESP pipeline when N_MP = 1) at
 * r = 1 as Parm runs it; monta: the ESP pipeline at r = 1 ("fixed r=1") — MoNTA's O1/O2/O3 and
 * Parm's t_D1/t_D2 are recorded for every method (auto also folds MoNTA's strategy into the
 * monta candidate). Every method partitions the gradients for the schedules it runs. The deepspeed baseline is
 * moe_seq_time(MOE_SEQ_DEEPSPEED) forward + backward per MoE layer, the list the simulator plays.
 *
 * AllToAll algorithm (the model's `dispatch`, plan_model.h plan_dispatch): nccl plans every layer
 * on the flat AllToAll and looks nothing of 2DH up, so such plans are what they were; 2dh moves
 * every candidate whose group is hierarchical onto the 2DH lines (workload_lines_2dh); auto
 * offers each candidate schedule on both, flat first, and the gradient partition keeps per layer
 * the one with the smallest predicted forward + backward at the layer's gradient share — the
 * same rule, in the same solve, that picks the schedule (a tie keeps the flat AllToAll). The
 * layer's a2a.algorithm, t_D1/t_D2 and MoNTA strategy follow the candidate run; a note per run
 * of layers gives the margin. Baselines stay flat.
 *
 * Interference (a profile whose collectives and GEMMs slow each other, cluster.h): the closed
 * forms take overlapped work at the longer of the two, so auto's plan is compared by simulation
 * (which applies the factors) with the plans of --method parm, monta and fsmoe, and the fastest
 * is kept with a note (pick_by_simulation); its predicted times stay the closed forms'.
 *
 * All MoE layers of a model share one workload, so their forward problems are solved once; the
 * gradient partition builds one f_moe table for all of them (layers may still run different
 * schedules: their gradient shares differ). The FSMoE plan is checked never to be predicted
 * slower than Tutel-Improved (the ESP pipeline with r free per phase ⊇ Tutel's shared r; the
 * other schedules are only taken when faster; partition ⊇ dense-only) — unless `dispatch: 2dh`
 * takes the flat ESP pipeline away.
 *
 * Relies on: workload.h, pipeline_degree.h, parm_schedule.h, monta_a2a.h, grad_partition.h,
 * baselines.h. Provenance fields of the plan are the caller's (main). */
#include "plan_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baselines.h"
#include "gpipe.h"
#include "explain.h"
#include "grad_partition.h"
#include "moe_seq.h"
#include "monta_a2a.h"
#include "parm_schedule.h"
#include "pipeline_degree.h"
#include "sim_schedules.h"
#include "workload.h"


static const char *const method_names[PLAN_METHOD_COUNT] = {"auto", "fsmoe", "fsmoe-paper",
                                                            "parm", "monta"};

const char *plan_method_name(plan_method m)
{
    return (unsigned)m < PLAN_METHOD_COUNT ? method_names[m] : "?";
}

int plan_method_from_name(const char *s)
{
    if (!s)
        return -1;
    for (int i = 0; i < PLAN_METHOD_COUNT; i++)
        if (strcmp(s, method_names[i]) == 0)
            return i;
    return -1;
}

double plan_monta_a2a_s(const workload_shape *s, const fsmoe_parallel *par,
                        const workload_lines *w, fsmoe_a2a_strategy a2a, int chunks)
{
    const double I = workload_ran_copies(s) * (double)s->M * (double)s->bytes_per_element;
    const double t = par->mp;
    if (par->ep <= 1)
        return 0.0; /* no AllToAll (the simulator plays none, nor O1's AllGather) */
    if (a2a == FSMOE_A2A_BASE || par->mp <= 1)
        return fsmoe_line_time(&w->a2a_ep, I);
    if (a2a == FSMOE_A2A_O1)
        return fsmoe_line_time(&w->a2a_ep, I / t) + fsmoe_line_time(&w->ag_mp, I);
    const double N = chunks > 1 ? chunks : 1;
    const double aa = fsmoe_line_time(&w->a2a_ep, I / (N * t));
    const double ag = fsmoe_line_time(&w->ag_mp, I / N);
    const double d = w->have_copy ? fsmoe_line_time(&w->copy, I / N) : 0.0;
    double a = aa + N * (ag + d), b = N * aa + ag + d;
    if (a2a == FSMOE_A2A_O2)
        return a > b ? a : b;
    a = aa + N * ag + d;
    double c = aa + ag + N * d, m = a > b ? a : b;
    return m > c ? m : c;
}

void plan_monta_problems(const workload_shape *s, const fsmoe_parallel *par,
                         const workload_lines *w, const workload_layer *wl,
                         fsmoe_a2a_strategy a2a, int chunks, pausemp_problem *fwd,
                         pausemp_problem *bwd)
{
    const double I = workload_ran_copies(s) * (double)s->M * (double)s->bytes_per_element;
    const double t_a2a = plan_monta_a2a_s(s, par, w, a2a, chunks);
    /* the ReduceScatter of the slices' partial outputs; without EP an ESP AllGather brings the
     * tokens back (sim_schedules.c moe_monta) */
    const double t_rs = par->esp > 1 ? fsmoe_line_time(&w->rs_esp, I) +
                                           (par->ep <= 1 ? fsmoe_line_time(&w->ag_esp, I) : 0.0)
                                     : 0.0;
    for (int ph = 0; ph < 2; ph++) {
        const pipeline_problem *p = ph ? &wl->bwd : &wl->fwd;
        pausemp_problem *q = ph ? bwd : fwd;
        double n_exp = p->n_exp / par->esp;
        memset(q, 0, sizeof *q);
        q->kind = FSMOE_SCHED_S1; /* the chains' form only; serial_s = 0 */
        q->d_alpha = q->c_alpha = t_a2a;
        q->u = 1.0;
        q->exp_alpha = (n_exp > 0.0 ? p->exp_alpha + p->exp_beta * n_exp : 0.0) + t_rs;
        q->n_exp = 1.0;
        q->r_max = 1;
    }
}

static void copy_str(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

int plan_dispatch_from_name(const char *s)
{
    return !s || !s[0] || strcmp(s, "nccl") == 0 ? PLAN_DISPATCH_NCCL
           : strcmp(s, "2dh") == 0      ? PLAN_DISPATCH_2DH
           : strcmp(s, "auto") == 0     ? PLAN_DISPATCH_AUTO
                                        : -1;
}

fsmoe_group plan_schedule_group(fsmoe_schedule k)
{
    return k == FSMOE_SCHED_S1 || k == FSMOE_SCHED_S2 ? FSMOE_GROUP_EP_ESP : FSMOE_GROUP_EP;
}

/* "ep 4 (4 nodes x 1)" for messages. */
static void group_shape(const fsmoe_parallel *par, fsmoe_group g, char *buf, size_t len)
{
    int P = fsmoe_group_size(par, g), G = par->gpus_per_node > 0 ? par->gpus_per_node : 1;
    int nodes, locals;
    if (workload_group_2dh(par, g, &nodes, &locals))
        snprintf(buf, len, "%s %d: %d nodes x %d", fsmoe_group_name(g), P, nodes, locals);
    else if (P <= 1)
        snprintf(buf, len, "%s 1: no AllToAll", fsmoe_group_name(g));
    else if (fsmoe_group_tier(par, g) == FSMOE_TIER_INTRA)
        snprintf(buf, len, "%s %d: on one node", fsmoe_group_name(g), P);
    else if (fsmoe_group_tier(par, g) == FSMOE_TIER_INTER)
        snprintf(buf, len, "%s %d: one member on each of %d nodes", fsmoe_group_name(g), P, P);
    else
        snprintf(buf, len, "%s %d: uneven over nodes of %d", fsmoe_group_name(g), P, G);
}

/* One schedule on one set of cost lines: a candidate of the layer. */
typedef struct {
    fsmoe_schedule kind;
    int h;                  /* 1: the hierarchical AllToAll's lines (a2a_algorithm 2dh) */
    pipeline_result fwd;    /* its forward */
} plan_cand;

/* One iteration's work beside the chains (workload_extra_time) for schedule k, in the token
 * order it runs. */
static double extra_s(const workload_layer *wl, const workload_lines *w, long blocks,
                      long moe_layers, sim_schedule k, const workload_shape *s)
{
    workload_extra e = workload_extra_time(wl, w, blocks, moe_layers, sim_schedule_order(k, s));
    return e.fwd_s + e.bwd_s + e.tail_s;
}

static fsmoe_status plan_model_one(const fsmoe_model *m, const fsmoe_cluster *c,
                                   const char *cluster_path,
                        const fsmoe_parallel *par, const plan_options *opt, fsmoe_plan *out,
                        fsmoe_error *err)
{
    fsmoe_status st = FSMOE_OK;
    plan_method method = opt ? opt->method : PLAN_METHOD_AUTO;
    if ((unsigned)method >= PLAN_METHOD_COUNT)
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "plan: unknown method %d", (int)method);
    const int dispatch = plan_dispatch_from_name(m->dispatch);
    if (dispatch < 0) /* 1dh: the schema keeps Hetu's name (model.h), nothing runs it */
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: %s%s is not implemented by fsmoe-run, so no plan can use it "
                          "(expected nccl: the flat AllToAll, 2dh: the hierarchical one, or auto: "
                          "the planner chooses per layer)",
                          fsmoe_mark_where(&m->at.dispatch, "model: moe.dispatch"), m->dispatch,
                          strcmp(m->dispatch, "1dh") == 0 ? " (Hetu's hierarchical AllToAll)"
                                                          : "");
    pipeline_method pm = PIPELINE_SLSQP;
    const char *decided_by = "slsqp+integer";
    int fixed_r1 = 0;
    if (method == PLAN_METHOD_FSMOE_PAPER) {
        pm = PIPELINE_PAPER;
        decided_by = "algorithm1";
    } else if (method == PLAN_METHOD_PARM || method == PLAN_METHOD_MONTA) {
        pm = PIPELINE_EXHAUSTIVE; /* over r_max = 1 */
        decided_by = "fixed r=1";
        fixed_r1 = 1;
    }

    /* Cost lines: w (flat AllToAll) for every layer and baseline; wh (the hierarchical
     * AllToAll where a group is hierarchical) for the candidates `dispatch` allows on it. */
    workload_lines w, wh;
    workload_shape shape;
    workload_shape_from_model(m, &shape);
    st = workload_lines_init(c, cluster_path, par, &shape, &w, err);
    if (st != FSMOE_OK)
        return st;
    char notes[sizeof out->notes] = "";
    fsmoe_note_add(notes, sizeof notes, w.notes);
    if (c->interference.present) {
        char line[400];
        snprintf(line, sizeof line,
                 "interference: fsmoe-plan simulate and fsmoe-run's predictions slow a "
                 "collective beside a GEMM %.3gx and a GEMM beside a collective %.3gx (the "
                 "profile's); the per-layer closed forms and this plan's predicted times do "
                 "not",
                 c->interference.comm_slowdown,
                 c->interference.compute_slowdown);
        fsmoe_note_add(notes, sizeof notes, line);
        if (c->interference.sync_s > 0.0) {
            snprintf(line, sizeof line,
                     "sync latency: every collective's alpha includes the profile's %.3g ms, "
                     "the ranks' arrival skew at a collective issued after computation (each "
                     "pipeline chunk pays it)",
                     1e3 * c->interference.sync_s);
            fsmoe_note_add(notes, sizeof notes, line);
        }
    }
    if (c->host.present && c->host.ranks > c->host.cores) {
        char line[400];
        snprintf(line, sizeof line,
                 "host sharing: %d ranks on %d cores (the profile's host); fsmoe-plan simulate "
                 "and fsmoe-run's predictions scale compute to every rank computing at once "
                 "(lockstep: C/R of a core) against the %d computing at once its lines were "
                 "measured with; the per-layer closed forms do not",
                 c->host.ranks, c->host.cores, c->host.ranks_at_once);
        fsmoe_note_add(notes, sizeof notes, line);
    }
    int hier[2] = {0, 0}; /* [0]: EP, [1]: EP&ESP hierarchical (and 2dh costed on it) */
    if (dispatch != PLAN_DISPATCH_NCCL) {
        char ep[96], epesp[96], line[512];
        group_shape(par, FSMOE_GROUP_EP, ep, sizeof ep);
        group_shape(par, FSMOE_GROUP_EP_ESP, epesp, sizeof epesp);
        fsmoe_error herr = {0};
        st = workload_lines_2dh(c, cluster_path, par, &w, &wh, &herr);
        if (st != FSMOE_OK && dispatch == PLAN_DISPATCH_2DH)
            return fsmoe_fail(err, st,
                              "%s: 2dh needs the hierarchical AllToAll's cost (or dispatch: auto "
                              "plans without it): %s",
                              fsmoe_mark_where(&m->at.dispatch, "model: moe.dispatch"), herr.msg);
        if (st != FSMOE_OK) {
            /* auto on a profile that cannot cost 2DH: the flat AllToAll, said so */
            snprintf(line, sizeof line, "dispatch auto: nccl in every layer, 2dh not costed: %.400s",
                     herr.msg);
            fsmoe_note_add(notes, sizeof notes, line);
            st = FSMOE_OK;
        } else if (dispatch == PLAN_DISPATCH_AUTO && (wh.a2a_ep_2dh || wh.a2a_ep_esp_2dh) &&
                   fsmoe_cluster_entries(c, FSMOE_OP_ALLTOALL_2DH, FSMOE_TIER_WORLD, NULL, 0) ==
                       0) {
            /* auto switches algorithms on measured lines only: the 2DH line derived from its
             * phases leaves out what the phases cost together (on the emulated 2 x 2 cluster
             * 1.23e-9 s/B derived against 2.40e-9 measured), and a plan built on it chose 2dh
             * with many chunks and measured 21-26 % slower than Tutel there */
            fsmoe_note_add(notes, sizeof notes,
                           "dispatch auto: nccl in every layer, the hierarchical AllToAll is not "
                           "measured in this profile (auto does not choose it on the line "
                           "derived from its phases; fsmoe-bench --ops +alltoall_2dh measures "
                           "it, dispatch: 2dh forces it)");
        } else {
            hier[0] = wh.a2a_ep_2dh;
            hier[1] = wh.a2a_ep_esp_2dh;
            fsmoe_note_add(notes, sizeof notes, wh.notes);
            const char *d = dispatch == PLAN_DISPATCH_2DH ? "2dh" : "auto";
            if (!hier[0] && !hier[1]) {
                snprintf(line, sizeof line,
                         "dispatch %s: neither the EP group (%s) nor the EP&ESP group (%s) is "
                         "hierarchical (2DH needs >= 2 nodes with >= 2 members on each): the flat "
                         "AllToAll (nccl) in every layer",
                         d, ep, epesp);
                fsmoe_note_add(notes, sizeof notes, line);
            } else if (dispatch == PLAN_DISPATCH_2DH && (!hier[0] || !hier[1])) {
                snprintf(line, sizeof line,
                         "dispatch 2dh: the %s group (%s) is not hierarchical (2DH needs >= 2 "
                         "nodes with >= 2 members on each): a layer running %s uses the flat "
                         "AllToAll (nccl)",
                         hier[0] ? "EP&ESP" : "EP", hier[0] ? epesp : ep,
                         hier[0] ? "S1 or S2" : "the ESP pipeline or MoNTA's layer");
                fsmoe_note_add(notes, sizeof notes, line);
            }
        }
    }
    /* the algorithms a candidate of schedule k may run: with 2dh forced the hierarchical one
     * where its group is hierarchical (else flat), with auto both there (flat first: a tie
     * keeps the flat AllToAll, the lower candidate index) */
#define HIER_OF(k) (hier[plan_schedule_group(k) == FSMOE_GROUP_EP_ESP])
#define ALG_LO(k) (dispatch == PLAN_DISPATCH_2DH && HIER_OF(k) ? 1 : 0)
#define ALG_HI(k) (dispatch == PLAN_DISPATCH_NCCL ? 0 : HIER_OF(k) ? 1 : 0)

    workload_layer wls[2];
    workload_layer_init(&shape, par, &w, &wls[0]);
    if (hier[0] || hier[1])
        workload_layer_init(&shape, par, &wh, &wls[1]);
    else
        wls[1] = wls[0];
    const workload_lines *ws[2] = {&w, hier[0] || hier[1] ? &wh : &w};
    const workload_layer wl = wls[0];

    /* The MoE blocks and the generalised layers around them. */
    const long n_blocks = m->layers;
    const long n = fsmoe_model_moe_count(m);
    size_t nn = (size_t)(n > 0 ? n : 1);
    fsmoe_layer_plan *layers = calloc(nn, sizeof *layers);
    grad_layer_in *gin = calloc(nn, sizeof *gin), *gin_base = calloc(nn, sizeof *gin_base);
    grad_layer_out *gout = calloc(nn, sizeof *gout);
    pipeline_problem *fwd_probs = calloc(nn, sizeof *fwd_probs);
    double *dense_fwd = calloc(nn, sizeof *dense_fwd), *ds_layer = calloc(nn, sizeof *ds_layer);
    if (!layers || !gin || !gin_base || !gout || !fwd_probs || !dense_fwd || !ds_layer) {
        st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "plan: out of memory");
        goto fail;
    }
    double prefix_fwd = 0.0, prefix_bwd = 0.0, prefix_grad = wl.embed_grad_bytes;
    long i = -1;
    for (long b = 0; b < n_blocks; b++) {
        /* attention: belongs to the generalised layer of the previous MoE FFN, or the prefix */
        if (i < 0) {
            prefix_fwd += wl.attn_fwd_s, prefix_bwd += wl.attn_bwd_s;
            prefix_grad += wl.attn_grad_bytes;
        } else {
            layers[i].dense_fwd_s += wl.attn_fwd_s, layers[i].dense_bwd_s += wl.attn_bwd_s;
            layers[i].grad_bytes += wl.attn_grad_bytes;
        }
        if (fsmoe_model_is_moe_block(m, b) && i + 1 < n) {
            i++;
            layers[i].index = (int)i;
            layers[i].block = (int)b;
            layers[i].grad_bytes += wl.gate_grad_bytes + wl.expert_grad_bytes;
        } else if (i < 0) {
            prefix_fwd += wl.ffn_fwd_s, prefix_bwd += wl.ffn_bwd_s;
            prefix_grad += wl.ffn_grad_bytes;
        } else {
            layers[i].dense_fwd_s += wl.ffn_fwd_s, layers[i].dense_bwd_s += wl.ffn_bwd_s;
            layers[i].grad_bytes += wl.ffn_grad_bytes;
        }
    }
    if (n > 0)
        layers[n - 1].grad_bytes += wl.head_grad_bytes;
    else
        prefix_grad += wl.head_grad_bytes;

    /* Per-layer decisions that do not depend on the layer's position: solved once, on each
     * set of lines a candidate uses (ws[1] = ws[0] when no group is hierarchical). */
    parm_choice parm[2];
    monta_result mr[2];
    for (int h = 0; h < 2; h++) {
        parm_choose(&shape, par, ws[h], &parm[h]);
        monta_entries me;
        monta_problem mp;
        monta_problem_init(&mp, &shape, par, ws[h], &me);
        monta_solve(&mp, &mr[h]);
    }
    /* DeepSpeed-MoE's layer as it runs, the operation list the simulator plays: a baseline, on
     * the flat AllToAll (DeepSpeed-MoE and Tutel both offer a hierarchical AllToAll; the
     * baselines are kept as the papers ran them, flat) */
    const double ds_layer_s = moe_seq_time(MOE_SEQ_DEEPSPEED, &shape, par, &w, 0) +
                              moe_seq_time(MOE_SEQ_DEEPSPEED, &shape, par, &w, 1);
    if (!deepspeed_layout_ok(par)) {
        char line[320];
        snprintf(line, sizeof line,
                 "baselines.deepspeed: DeepSpeed-MoE slices experts only over its tensor-parallel "
                 "group (esp = mp) and has no mode for this layout (mp %d, esp %d); the figure "
                 "times its expert-TP layer as if the ESP group held the same tokens: compare "
                 "with tutel instead", par->mp, par->esp);
        fsmoe_note_add(notes, sizeof notes, line);
    }

    /* The candidates this method chooses among: cand[0] is the ESP pipeline (grad_partition.h
     * moe_bwd), cand[1 + a] alternative a. Flat before hierarchical, so ties keep nccl. */
    plan_cand cand[1 + GRAD_MAX_ALT];
    int n_alt = 0, esp_off = 0;
    pausemp_problem alt_f[GRAD_MAX_ALT], alt_b[GRAD_MAX_ALT];
    pipeline_problem alt_pb[GRAD_MAX_ALT];
    int alt_esp[GRAD_MAX_ALT] = {0};
    const int h0 = ALG_LO(FSMOE_SCHED_ESP_PIPELINE);
    pipeline_problem pf = wls[h0].fwd, pb = wls[h0].bwd;
    if (fixed_r1)
        pf.r_max = pb.r_max = 1;
    cand[0].kind = FSMOE_SCHED_ESP_PIPELINE;
    cand[0].h = h0;
    st = pipeline_solve(&pf, pm, &cand[0].fwd, err);
    if (st != FSMOE_OK)
        goto fail;
    /* the ESP pipeline once more on the hierarchical AllToAll (auto) */
    for (int h = h0 + 1; h <= ALG_HI(FSMOE_SCHED_ESP_PIPELINE); h++) {
        pipeline_problem q = wls[h].fwd;
        alt_pb[n_alt] = wls[h].bwd;
        if (fixed_r1)
            q.r_max = alt_pb[n_alt].r_max = 1;
        st = pipeline_solve(&q, pm, &cand[1 + n_alt].fwd, err);
        if (st != FSMOE_OK)
            goto fail;
        alt_esp[n_alt] = 1;
        cand[1 + n_alt].kind = FSMOE_SCHED_ESP_PIPELINE;
        cand[1 + n_alt].h = h;
        n_alt++;
    }
    fsmoe_schedule ks[3];
    int n_ks = 0;
    if (method == PLAN_METHOD_AUTO) {
        ks[n_ks++] = FSMOE_SCHED_S1, ks[n_ks++] = FSMOE_SCHED_S2;
        /* MoNTA's layer only where it describes an execution (monta_a2a.h; with ep = 1 it is
         * expert tensor parallelism with the AllReduce as ReduceScatter + AllGather) */
        if (monta_layout_ok(par))
            ks[n_ks++] = FSMOE_SCHED_MONTA;
        else if (par->mp > 1) {
            char line[256];
            snprintf(line, sizeof line,
                     "MoNTA's layer not offered: it needs the MP group to slice the experts "
                     "(mp = esp); this layout has mp %d, esp %d", par->mp, par->esp);
            fsmoe_note_add(notes, sizeof notes, line);
        }
    } else if (method == PLAN_METHOD_PARM) {
        /* Parm's Algorithm 1 (on the lines its schedules run with `dispatch: 2dh`, else flat),
         * instead of the ESP pipeline */
        const int hp = ALG_LO(FSMOE_SCHED_S1);
        const fsmoe_schedule want =
            opt && opt->parm_schedule != FSMOE_SCHED_ESP_PIPELINE ? opt->parm_schedule
                                                                   : parm[hp].schedule;
        pausemp_problem tf, tb;
        if (want != FSMOE_SCHED_ESP_PIPELINE &&
            parm_pausemp_problems(&shape, par, ws[hp], &wls[hp], want, &tf, &tb)) {
            ks[n_ks++] = want;
            esp_off = 1;
            n_alt = 0; /* no ESP pipeline on any lines */
        }
    }
    for (int h = 0; h < 2; h++)
        for (int x = 0; x < n_ks; x++) {
            fsmoe_schedule k = ks[x];
            if (h < ALG_LO(k) || h > ALG_HI(k) || n_alt >= GRAD_MAX_ALT)
                continue;
            if (k == FSMOE_SCHED_MONTA) {
                /* MoNTA's layer at the layer's own AllToAll strategy and chunks */
                plan_monta_problems(&shape, par, ws[h], &wls[h], mr[h].best, mr[h].chunks,
                                    &alt_f[n_alt], &alt_b[n_alt]);
            } else if (!parm_pausemp_problems(&shape, par, ws[h], &wls[h], k, &alt_f[n_alt],
                                              &alt_b[n_alt])) {
                continue;
            }
            if (esp_off)
                alt_f[n_alt].r_max = alt_b[n_alt].r_max = 1; /* Parm does not pipeline */
            alt_esp[n_alt] = 0;
            cand[1 + n_alt].kind = k;
            cand[1 + n_alt].h = h;
            pipeline_result *R = &cand[1 + n_alt].fwd;
            memset(R, 0, sizeof *R);
            R->r = pausemp_best_r(&alt_f[n_alt], NULL);
            R->time_s = pausemp_chains(&alt_f[n_alt], R->r, R->f);
            R->binding_case = 1;
            for (int c2 = 2; c2 <= 4; c2++)
                if (R->f[c2 - 1] > R->f[R->binding_case - 1])
                    R->binding_case = c2;
            n_alt++;
        }

    for (long j = 0; j < n; j++) {
        gin[j].grad_bytes = layers[j].grad_bytes;
        gin[j].dense_bwd_s = layers[j].dense_bwd_s;
        gin[j].moe_bwd = pb;
        gin[j].moe_fwd_s = cand[0].fwd.time_s;
        gin[j].esp_off = esp_off;
        gin[j].n_alt = n_alt;
        for (int a = 0; a < n_alt; a++) {
            gin[j].alt_esp[a] = alt_esp[a];
            if (alt_esp[a])
                gin[j].alt_pipe[a] = alt_pb[a];
            else
                gin[j].alt[a] = alt_b[a];
            gin[j].alt_fwd_s[a] = cand[1 + a].fwd.time_s;
        }
        /* the baselines pick their own r whatever this plan's method fixes, on Tutel's layout
         * and the flat AllToAll */
        memset(&gin_base[j], 0, sizeof gin_base[j]);
        gin_base[j].grad_bytes = gin[j].grad_bytes;
        gin_base[j].dense_bwd_s = gin[j].dense_bwd_s;
        gin_base[j].moe_bwd = wl.bwd;
        gin_base[j].moe_fwd_s = 0.0;
        fwd_probs[j] = wl.fwd;
        dense_fwd[j] = layers[j].dense_fwd_s;
        ds_layer[j] = ds_layer_s;
    }
    grad_problem gp = {
        .n_layers = (int)n,
        .layers = gin,
        .prefix_grad_bytes = prefix_grad,
        .prefix_bwd_s = prefix_bwd,
        .ar = w.ar_dp,
        .method = pm,
        .step2 = GRAD_STEP2_BEST,
        .grid_steps = 0,
        .tail_only = opt && opt->gradients != PLAN_GRADS_WINDOWS,
    };
    const int lina_grads = opt && opt->gradients == PLAN_GRADS_LINA;
    grad_result gr;
    st = grad_partition_solve(&gp, gout, &gr, err);
    if (st != FSMOE_OK)
        goto fail;
    grad_problem gp_base = gp;
    gp_base.layers = gin_base;
    gp_base.tail_only = 0; /* the baselines overlap as they do */
    baselines_input bi = {
        .grad = &gp_base,
        .moe_fwd = fwd_probs,
        .dense_fwd_s = dense_fwd,
        .prefix_fwd_s = prefix_fwd,
        .ds_layer_s = ds_layer,
        .lina_micro_op_bytes = GRAD_LINA_MICRO_OP_BYTES,
    };
    baselines_result br;
    baselines_predict(&bi, &br);
    /* Lina's micro-ops on this plan's layers: what they leave exposed after the backward and
     * the delay their overruns add to it (grad_partition.h grad_baseline_eval) */
    grad_baseline_result lina = {0};
    if (lina_grads) {
        grad_problem q = gp;
        q.tail_only = 0;
        grad_baseline_eval(&q, GRAD_BASE_LINA, GRAD_LINA_MICRO_OP_BYTES, &lina);
    }

    double forward = prefix_fwd;
    for (long j = 0; j < n; j++) {
        fsmoe_layer_plan *L = &layers[j];
        const plan_cand *C = &cand[gout[j].cand];
        const pipeline_result *F = &C->fwd;
        const int h = C->h;
        L->schedule = C->kind;
        /* per schedule its best candidate (flat or hierarchical); 0 where none */
        for (int x = 0; x <= n_alt; x++) {
            double t = gout[j].cand_s[x];
            double *sl = &L->schedule_s[cand[x].kind];
            if ((x > 0 || !esp_off) && t > 0.0 && (!(*sl > 0.0) || t < *sl))
                *sl = t;
        }
        /* Parm's t_D1/t_D2 and MoNTA's strategy on the lines the layer runs */
        L->t_d1_s = parm[h].t_d1_s;
        L->t_d2_s = parm[h].t_d2_s;
        L->a2a = mr[h].best;
        L->a2a_chunks = mr[h].chunks;
        L->a2a_s[0] = mr[h].t_base, L->a2a_s[1] = mr[h].t_o1;
        L->a2a_s[2] = mr[h].t_o2, L->a2a_s[3] = mr[h].t_o3;
        copy_str(L->a2a_algorithm, sizeof L->a2a_algorithm,
                 plan_a2a_algorithm_name(h ? PLAN_DISPATCH_2DH : PLAN_DISPATCH_NCCL));
        L->fwd.r = F->r;
        L->fwd.binding_case = F->binding_case;
        L->fwd.q = F->q;
        L->fwd.t_gar_s = 0.0;
        L->fwd.predicted_s = F->time_s;
        L->bwd.r = gout[j].bwd.r;
        L->bwd.binding_case = gout[j].bwd.binding_case;
        L->bwd.q = gout[j].bwd.q;
        L->bwd.t_gar_s = gout[j].t_gar_s;
        L->bwd.predicted_s = gout[j].bwd.time_s;
        L->olp_dense_s = gout[j].olp_dense_s;
        L->olp_moe_s = gout[j].olp_moe_s;
        L->window_bytes = gout[j].window_bytes;
        L->step2_bytes = gout[j].step2_bytes;
        L->carried_bytes = gout[j].carried_bytes;
        forward += L->dense_fwd_s + F->time_s;
    }
    /* auto: which algorithm each run of layers chose, and by how much (the layer's forward +
     * backward at its gradient share, its best candidate on each algorithm) */
    if (dispatch == PLAN_DISPATCH_AUTO && (hier[0] || hier[1]))
        for (long j = 0; j < n;) {
            long e = j;
            double t_own = 0.0, t_other = 0.0;
            int h = cand[gout[j].cand].h, other_all = 1;
            fsmoe_schedule k = cand[gout[j].cand].kind;
            for (; e < n && cand[gout[e].cand].h == h && cand[gout[e].cand].kind == k; e++) {
                double best_other = 0.0;
                for (int x = 0; x <= n_alt; x++)
                    if (cand[x].h != h && (x > 0 || !esp_off) && gout[e].cand_s[x] > 0.0 &&
                        (!(best_other > 0.0) || gout[e].cand_s[x] < best_other))
                        best_other = gout[e].cand_s[x];
                t_own += gout[e].cand_s[gout[e].cand];
                t_other += best_other;
                other_all &= best_other > 0.0;
            }
            char range[48], a[24], b[24], line[400];
            if (e - j == 1)
                snprintf(range, sizeof range, "layer %ld", j);
            else
                snprintf(range, sizeof range, "layers %ld-%ld", j, e - 1);
            explain_time(t_own, a, sizeof a);
            explain_time(t_other, b, sizeof b);
            if (other_all)
                snprintf(line, sizeof line,
                         "dispatch auto: %s (%s): %s, predicted forward + backward %s%s against "
                         "%s with %s (%.3fx)",
                         range, fsmoe_schedule_name(k), h ? "2dh" : "nccl", a,
                         e - j > 1 ? " in all" : "", b, h ? "nccl" : "2dh", t_other / t_own);
            else
                snprintf(line, sizeof line,
                         "dispatch auto: %s (%s): %s, the only algorithm this method offers there",
                         range, fsmoe_schedule_name(k), h ? "2dh" : "nccl");
            fsmoe_note_add(notes, sizeof notes, line);
            j = e;
        }
#undef HIER_OF
#undef ALG_LO
#undef ALG_HI

    /* the gate and token order, element-wise work, head and optimizer: the same serial work
     * beside every schedule's chains, each in the token order it runs */
    workload_extra ex = workload_extra_time(&wl, &w, n_blocks, n, shape.order);
    double ex_s = ex.fwd_s + ex.bwd_s + ex.tail_s;
    double ex_ds = extra_s(&wl, &w, n_blocks, n, SIM_SCHED_DEEPSPEED, &shape);
    double ex_tutel = extra_s(&wl, &w, n_blocks, n, SIM_SCHED_TUTEL, &shape);
    const double grad_tail_s = lina_grads ? lina.exposed_s : gr.tail_s;
    const double backward_s = gr.backward_s + (lina_grads ? lina.delay_s : 0.0);
    fsmoe_predicted pr = {
        .forward_s = forward + ex.fwd_s,
        .backward_s = backward_s + ex.bwd_s,
        .tail_s = grad_tail_s + ex.tail_s,
        .iteration_s = forward + backward_s + grad_tail_s + ex_s,
        .deepspeed_s = br.deepspeed_s + ex_ds,
        .tutel_s = br.tutel_s + ex_tutel,
        .tutel_improved_s = br.tutel_improved_s + ex_tutel,
        .pipemoe_lina_s = br.pipemoe_lina_s + ex_tutel,
    };
    /* Our plan chooses r per phase from a superset of Tutel's choices, under chains that never
     * exceed Tutel's, and its partition never leaves more exposed than Tutel-Improved's (with
     * no window: than Tutel's, which has none either): if that does not hold, a formula above
     * is wrong. Only where the flat ESP pipeline is a candidate: with `dispatch: 2dh` on a
     * hierarchical EP group the plan may lose to the flat baseline. */
    double chains_s = forward + backward_s + grad_tail_s; /* the extras' order may differ */
    const double bound_s = lina_grads     ? br.pipemoe_lina_s
                           : gp.tail_only ? br.tutel_s
                                          : br.tutel_improved_s;
    if ((method == PLAN_METHOD_AUTO || method == PLAN_METHOD_FSMOE) && h0 == 0 &&
        chains_s > bound_s * (1.0 + 1e-9)) {
        st = fsmoe_fail(err, FSMOE_ERR_INTERNAL,
                        "plan: predicted FSMoE iteration %.9g s exceeds %s's %.9g s (an "
                        "invariant of the cost model is broken)",
                        chains_s,
                        lina_grads ? "PipeMoE+Lina" : gp.tail_only ? "Tutel" : "Tutel-Improved",
                        bound_s);
        goto fail;
    }

    free(out->layers);
    out->layers = layers;
    layers = NULL;
    out->n_layers = (int)n;
    copy_str(out->method, sizeof out->method, plan_method_name(method));
    copy_str(out->decided_by, sizeof out->decided_by, decided_by);
    copy_str(out->model_name, sizeof out->model_name, m->name);
    copy_str(out->cluster_name, sizeof out->cluster_name, c->name);
    out->parallel = *par;
    out->ranks = FSMOE_RANKS_NODE_MAJOR; /* the numbering of parallel.h, the only one */
    out->edp = fsmoe_group_size(par, FSMOE_GROUP_EDP);
    out->B = m->B, out->L = m->L, out->M = m->M, out->H = m->H, out->E = shape.E;
    out->B_global = (long)par->dp * m->B;
    out->k = m->k;
    out->capacity = m->f > 0 ? FSMOE_CAPACITY_FACTOR : FSMOE_CAPACITY_DROPLESS;
    out->f = m->f;
    /* fsmoe-run sends each peer exactly its rows (AllToAllv); the cost model's n_a2a is the
     * capacity-sized buffer, i.e. the balanced-routing volume of either split. */
    out->split = FSMOE_SPLIT_ALLTOALLV;
    out->expert = m->expert;
    out->bytes_per_element = m->bytes_per_element;
    /* after the backward: what the partition carries there, or what Lina's micro-ops leave */
    out->gradient_tail_bytes = lina_grads ? lina.tail_bytes : gr.tail_bytes;
    out->prefix_grad_bytes = prefix_grad;
    out->prefix_window_bytes = gr.prefix_window_bytes;
    out->gradients = lina_grads ? FSMOE_GRADS_LINA : FSMOE_GRADS_PARTITION;
    if (lina_grads) {
        char line[240];
        snprintf(line, sizeof line,
                 "gradients: Lina's micro-ops of %.3g MB, each started while no AllToAll runs "
                 "(%ld of them; the partition's fields hold no window)",
                 GRAD_LINA_MICRO_OP_BYTES / 1e6, lina.micro_ops);
        fsmoe_note_add(notes, sizeof notes, line);
    }
    out->predicted = pr;
    fsmoe_mem_shape ms;
    fsmoe_memory mem;
    fsmoe_model_mem_shape(m, par, &ms);
    fsmoe_memory_estimate(&ms, &mem);
    out->memory.present = 1;
    out->memory.zero_stage = m->zero_stage, out->memory.recompute = m->recompute;
    for (int cat = 0; cat < FSMOE_MEM_CATS; cat++)
        out->memory.bytes[cat] = mem.bytes[cat];
    out->memory.total = mem.total;
    copy_str(out->notes, sizeof out->notes, notes);

fail:
    free(layers);
    free(gin);
    free(gin_base);
    free(gout);
    free(fwd_probs);
    free(dense_fwd);
    free(ds_layer);
    return st;
}

/* The simulated iteration of plan p (its own schedule, `plan`) on profile c. */
static fsmoe_status simulated_s(sim *s, const fsmoe_plan *p, const fsmoe_model *m,
                                const fsmoe_cluster *c, const char *cluster_path, double *t,
                                fsmoe_error *err)
{
    sim_model sm;
    fsmoe_status st = sim_model_of_plan(p, m, c, cluster_path, &sm, err);
    if (st == FSMOE_OK)
        st = sim_schedule_time(s, &sm, SIM_SCHED_PLAN, NULL, t, err);
    sim_model_free(&sm);
    return st;
}

int plan_pieces(const fsmoe_plan *p)
{
    int n = p->prefix_window_bytes > 0.0;
    if (p->gradients == FSMOE_GRADS_LINA)
        n += p->n_layers + 1;
    /* S2's SAA: a combine in ep phases, each an exchange and an MP AllGather of its own
     * (runtime/moe_layer.h), where S1 has one Combine and one AllGather */
    const int saa_extra = p->parallel.mp > 1 && p->parallel.ep > 1 ? p->parallel.ep - 1 : 0;
    for (int i = 0; i < p->n_layers; i++) {
        const fsmoe_layer_plan *L = &p->layers[i];
        n += L->fwd.r + L->bwd.r;
        if (L->schedule == FSMOE_SCHED_S2)
            n += saa_extra * (L->fwd.r + L->bwd.r);
        if ((L->a2a == FSMOE_A2A_O2 || L->a2a == FSMOE_A2A_O3) && L->a2a_chunks > 1)
            n += L->a2a_chunks - 1;
        n += L->window_bytes + L->step2_bytes > 0.0;
    }
    return n;
}

/* Under interference (a profile whose collectives and GEMMs slow each other, cluster.h) the
 * closed forms behind auto's per-layer choices still assume that overlapped work costs the
 * longer of the two, so overlap is worth less than they say: auto's plan is compared, by the
 * simulator that does apply the factors, with the plans of the methods that overlap less
 * (parm: S1/S2 unchunked, as its Algorithm 1 chooses and S1 or S2 in every layer; monta;
 * fsmoe: the ESP pipeline), each with its gradient windows, with none and with Lina's
 * micro-ops instead (the one gradient schedule of the baselines a partition cannot say). The
 * plan is the candidate with the fewest pieces (plan_pieces) among those within
 * PLAN_SIMPLER_MARGIN of the fastest (ties: the faster, then the earlier, auto's first), with a
 * note. So the plan
 * simulates within that margin of Tutel, Parm's S1 and S2 and MoNTA's layer on the profile
 * (tests/test_plan_model.c). Deterministic, so regenerate reproduces it. */
static fsmoe_status pick_by_simulation(const fsmoe_model *m, const fsmoe_cluster *c,
                                       const char *cluster_path, const fsmoe_parallel *par,
                                       fsmoe_plan *out, fsmoe_error *err)
{
    static const struct {
        plan_method method;
        fsmoe_schedule parm;
    } others[] = {{PLAN_METHOD_AUTO, FSMOE_SCHED_ESP_PIPELINE},
                  {PLAN_METHOD_PARM, FSMOE_SCHED_ESP_PIPELINE},
                  {PLAN_METHOD_PARM, FSMOE_SCHED_S1},
                  {PLAN_METHOD_PARM, FSMOE_SCHED_S2},
                  {PLAN_METHOD_MONTA, FSMOE_SCHED_ESP_PIPELINE},
                  {PLAN_METHOD_FSMOE, FSMOE_SCHED_ESP_PIPELINE}};
    enum {
        N_GRADS = PLAN_GRADS_COUNT,
        N_CAND = N_GRADS * (int)(sizeof others / sizeof others[0])
    };
    /* candidate i: others[i / N_GRADS] with gradients i % N_GRADS; 0 is *out (auto, windows);
     * one that cannot be planned keeps an infinite time */
    fsmoe_plan *cand = calloc(N_CAND, sizeof *cand);
    double t[N_CAND];
    int pieces[N_CAND];
    if (!cand)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "plan: out of memory");
    for (int i = 0; i < N_CAND; i++)
        t[i] = INFINITY, pieces[i] = 0;
    sim s;
    sim_init(&s);
    fsmoe_status st = FSMOE_OK;
    for (int i = 0; i < N_CAND && st == FSMOE_OK; i++) {
        plan_options o = {.method = others[i / N_GRADS].method,
                          .gradients = (plan_grads)(i % N_GRADS),
                          .parm_schedule = others[i / N_GRADS].parm};
        /* a method that cannot plan this layout is no candidate (auto could) */
        fsmoe_error qerr = {0};
        const fsmoe_plan *p = i == 0 ? out : &cand[i];
        if (i > 0 && plan_model_one(m, c, cluster_path, par, &o, &cand[i], &qerr) != FSMOE_OK) {
            fsmoe_plan_free(&cand[i]);
            continue;
        }
        st = simulated_s(&s, p, m, c, cluster_path, &t[i], err);
        pieces[i] = plan_pieces(p);
    }
    sim_free(&s);
    int fastest = 0, chosen = -1;
    for (int i = 1; i < N_CAND; i++)
        if (t[i] < t[fastest] * (1.0 - 1e-9))
            fastest = i;
    for (int i = 0; i < N_CAND; i++)
        if (t[i] <= t[fastest] * (1.0 + PLAN_SIMPLER_MARGIN) &&
            (chosen < 0 || pieces[i] < pieces[chosen] ||
             (pieces[i] == pieces[chosen] && t[i] < t[chosen] * (1.0 - 1e-9))))
            chosen = i;
    if (st == FSMOE_OK && chosen > 0) {
        fsmoe_plan_free(out);
        *out = cand[chosen];
        memset(&cand[chosen], 0, sizeof cand[chosen]);
    }
    for (int i = 1; i < N_CAND; i++)
        fsmoe_plan_free(&cand[i]);
    free(cand);
    if (st != FSMOE_OK)
        return st;
    const plan_method method = others[chosen / N_GRADS].method;
    const fsmoe_schedule parm = others[chosen / N_GRADS].parm;
    const int grads = chosen % N_GRADS;
    static const char *const grads_what[N_GRADS] = {
        "", "every gradient all-reduced after the backward", "Lina's gradient micro-ops"};
    const int forced = parm != FSMOE_SCHED_ESP_PIPELINE;
    char what[200], line[640];
    snprintf(what, sizeof what, "method %s's plan%s%s%s%s%s", plan_method_name(method),
             forced ? " with " : "", forced ? fsmoe_schedule_name(parm) : "",
             forced ? " in every layer" : "", grads ? (forced ? " and " : " with ") : "",
             grads_what[grads]);
    if (chosen == 0 && fastest == 0)
        snprintf(line, sizeof line,
                 "interference: auto's per-layer choice simulates %.4g ms per iteration, no "
                 "faster plan among the methods parm, monta and fsmoe, with their gradient "
                 "windows, without or with Lina's micro-ops", 1e3 * t[0]);
    else if (chosen == fastest)
        snprintf(line, sizeof line,
                 "interference: this is %s, simulated %.4g ms per iteration against %.4g ms for "
                 "auto's per-layer choice with its windows (whose closed forms take overlapped "
                 "work at the longer of the two)",
                 what, 1e3 * t[chosen], 1e3 * t[0]);
    else
        snprintf(line, sizeof line,
                 "interference: this is %s, simulated %.4g ms per iteration in %d pieces "
                 "(pipeline chunks, gradient windows), against %.4g ms in %d for the fastest "
                 "candidate: within %.3g %%, the one with fewer pieces is kept (on the emulated "
                 "cluster chunked and windowed collectives measured 1.5-2.4x what the simulator "
                 "gives them)",
                 what, 1e3 * t[chosen], pieces[chosen], 1e3 * t[fastest], pieces[fastest],
                 100.0 * PLAN_SIMPLER_MARGIN);
    fsmoe_note_add(out->notes, sizeof out->notes, line);
    return FSMOE_OK;
}

/* pp > 1 (gpipe.h): one stage planned for one micro-batch, then every schedule's stage in the
 * pipeline of stages. The schedules the simulator cannot play on this layout (DeepSpeed-MoE
 * where its expert slicing does not fit) take the plan's stage times scaled by their closed-form
 * stage iteration over the plan's. */
static fsmoe_status plan_model_pp(const fsmoe_model *m, const fsmoe_cluster *c,
                                  const char *cluster_path, const fsmoe_parallel *par,
                                  const plan_options *opt, fsmoe_plan *out, fsmoe_error *err)
{
    int micro = opt->micro_batches > 0 ? opt->micro_batches : gpipe_default_micro(m->B, par->pp);
    fsmoe_model sm;
    fsmoe_parallel spar;
    fsmoe_status st = gpipe_stage(m, par, micro, &sm, &spar, err);
    if (st != FSMOE_OK)
        return st;
    plan_options o = *opt;
    o.micro_batches = 0;
    if ((st = plan_model(&sm, c, cluster_path, &spar, &o, out, err)) != FSMOE_OK)
        return st;
    double bytes = 0, p2p = 0;
    if ((st = gpipe_p2p(c, cluster_path, &sm, par, &bytes, &p2p, out->notes, sizeof out->notes,
                        err)) != FSMOE_OK)
        return st;
    sim s;
    sim_init(&s);
    sim_model smod;
    memset(&smod, 0, sizeof smod);
    st = sim_model_of_plan(out, &sm, c, cluster_path, &smod, err);
    static const sim_schedule ks[5] = {SIM_SCHED_PLAN, SIM_SCHED_DEEPSPEED, SIM_SCHED_TUTEL,
                                       SIM_SCHED_TUTEL_IMPROVED, SIM_SCHED_PIPEMOE_LINA};
    fsmoe_predicted *pr = &out->predicted;
    double stage_s[5] = {pr->iteration_s, pr->deepspeed_s, pr->tutel_s, pr->tutel_improved_s,
                         pr->pipemoe_lina_s};
    double T[5] = {0};
    gpipe_input g0 = {0};
    for (int i = 0; i < 5 && st == FSMOE_OK; i++) {
        gpipe_input g = {.stages = par->pp, .micro_batches = micro, .p2p_s = p2p,
                         .priorities = 1, .one_f_one_b = opt->one_f_one_b};
        if (i == 0 || sim_schedule_applies(&smod, ks[i], NULL)) {
            st = gpipe_stage_times(&s, &smod, ks[i], &g.fwd_s, &g.bwd_s, &g.grad_s, err);
        } else {
            double f = stage_s[0] > 0 ? stage_s[i] / stage_s[0] : 1.0;
            g.fwd_s = f * g0.fwd_s, g.bwd_s = f * g0.bwd_s, g.grad_s = f * g0.grad_s;
        }
        if (st == FSMOE_OK)
            st = gpipe_simulate(&s, &g, &T[i], err);
        if (i == 0)
            g0 = g;
    }
    sim_model_free(&smod);
    sim_free(&s);
    if (st != FSMOE_OK)
        return st;
    pr->iteration_s = T[0], pr->deepspeed_s = T[1], pr->tutel_s = T[2];
    pr->tutel_improved_s = T[3], pr->pipemoe_lina_s = T[4];
    out->parallel = *par;
    out->B = m->B;
    out->B_global = (long)par->dp * m->B;
    out->pipeline.present = 1;
    out->pipeline.micro_batches = micro;
    out->pipeline.one_f_one_b = opt->one_f_one_b;
    out->pipeline.stage_blocks = sm.layers;
    out->pipeline.fwd_s = g0.fwd_s, out->pipeline.bwd_s = g0.bwd_s;
    out->pipeline.grad_s = g0.grad_s;
    out->pipeline.p2p_bytes = bytes, out->pipeline.p2p_s = p2p;
    /* memory: one stage's blocks and the micro-batches in flight (gpipe.h) */
    fsmoe_memory mem;
    gpipe_memory(m, par, micro, opt->one_f_one_b, &mem);
    for (int cat = 0; cat < FSMOE_MEM_CATS; cat++)
        out->memory.bytes[cat] = mem.bytes[cat];
    out->memory.total = mem.total;
    char line[400];
    double fb = g0.fwd_s + g0.bwd_s;
    snprintf(line, sizeof line,
             "pipeline: %s over %d stages of %ld blocks, %d micro-batches of %ld samples; the "
             "bubble idles each stage (pp-1)(F+B) = %.4g ms, %.1f %% of its compute; sends of "
             "%.4g MB take %.4g ms; layers[] and the forward/backward times are one stage's "
             "micro-batch",
             opt->one_f_one_b ? "1F1B" : "GPipe", par->pp, sm.layers, micro, sm.B,
             1e3 * (par->pp - 1) * fb,
             100.0 * (par->pp - 1) / (micro + par->pp - 1), bytes / 1e6, 1e3 * p2p);
    fsmoe_note_add(out->notes, sizeof out->notes, line);
    return FSMOE_OK;
}

/* Activation recomputation (the model's training.recompute): the closed forms behind the
 * decisions do not run the forward again, the simulator does (sim_schedules.h recompute), so
 * the plan's predicted times are the simulator's, for the plan and each baseline; a baseline
 * the simulator cannot play on this layout keeps its closed form plus the plan's simulated
 * recomputation time. */
static fsmoe_status predicted_with_recompute(const fsmoe_model *m, const fsmoe_cluster *c,
                                             const char *cluster_path, fsmoe_plan *out,
                                             fsmoe_error *err)
{
    sim s;
    sim_init(&s);
    sim_model sm;
    memset(&sm, 0, sizeof sm);
    fsmoe_status st = sim_model_of_plan(out, m, c, cluster_path, &sm, err);
    fsmoe_predicted *pr = &out->predicted;
    double t_plan = 0, t_none = 0, extra = 0;
    if (st == FSMOE_OK)
        st = sim_schedule_time(&s, &sm, SIM_SCHED_PLAN, NULL, &t_plan, err);
    if (st == FSMOE_OK) {
        double f, b;
        sim_phase_ends(&s, &f, &b);
        pr->forward_s = f, pr->backward_s = b - f, pr->tail_s = t_plan - b;
        sm.recompute = FSMOE_RECOMPUTE_NONE;
        st = sim_schedule_time(&s, &sm, SIM_SCHED_PLAN, NULL, &t_none, err);
        sm.recompute = out->memory.recompute;
        extra = t_plan > t_none ? t_plan - t_none : 0;
    }
    static const sim_schedule ks[4] = {SIM_SCHED_DEEPSPEED, SIM_SCHED_TUTEL,
                                       SIM_SCHED_TUTEL_IMPROVED, SIM_SCHED_PIPEMOE_LINA};
    double *dst[4] = {&pr->deepspeed_s, &pr->tutel_s, &pr->tutel_improved_s, &pr->pipemoe_lina_s};
    for (int i = 0; i < 4 && st == FSMOE_OK; i++) {
        if (sim_schedule_applies(&sm, ks[i], NULL))
            st = sim_schedule_time(&s, &sm, ks[i], NULL, dst[i], err);
        else
            *dst[i] += extra;
    }
    if (st == FSMOE_OK) {
        pr->iteration_s = t_plan;
        char line[300];
        snprintf(line, sizeof line,
                 "recomputation %s: the predicted times are the simulator's (it runs the "
                 "recomputed work in the backward: %.4g ms here; the per-layer times and the "
                 "closed forms behind the decisions leave it out)",
                 fsmoe_name_of(fsmoe_recompute_table, out->memory.recompute), 1e3 * extra);
        fsmoe_note_add(out->notes, sizeof out->notes, line);
    }
    sim_model_free(&sm);
    sim_free(&s);
    return st;
}

fsmoe_status plan_model(const fsmoe_model *m, const fsmoe_cluster *c, const char *cluster_path,
                        const fsmoe_parallel *par, const plan_options *opt, fsmoe_plan *out,
                        fsmoe_error *err)
{
    if (par->pp > 1)
        return plan_model_pp(m, c, cluster_path, par, opt, out, err);
    fsmoe_status st = plan_model_one(m, c, cluster_path, par, opt, out, err);
    if (st == FSMOE_OK && opt->method == PLAN_METHOD_AUTO && c->interference.present)
        st = pick_by_simulation(m, c, cluster_path, par, out, err);
    if (st == FSMOE_OK && out->memory.recompute != FSMOE_RECOMPUTE_NONE)
        st = predicted_with_recompute(m, c, cluster_path, out, err);
    return st;
}
