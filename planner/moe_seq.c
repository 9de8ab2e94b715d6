/* Implements: the unpipelined MoE layers of moe_seq.h (DeepSpeed-MoE's two modes, Parm's
 * baseline) as operation lists; see the header for the derivation of every size.
 * Relies on: workload.h, cost.h (fsmoe_line), sim.h (operation kinds). */
#include "moe_seq.h"

#include <string.h>

ds_mode deepspeed_mode(const fsmoe_parallel *par)
{
    return par->esp > 1 ? DS_MODE_EXPERT_TP : DS_MODE_DROP_TOKENS;
}

int deepspeed_layout_ok(const fsmoe_parallel *par)
{
    return par->esp <= 1 || par->esp == par->mp;
}

const char *ds_mode_name(ds_mode m)
{
    return m == DS_MODE_EXPERT_TP ? "expert-tp" : "drop-tokens";
}

typedef struct {
    moe_seq_op *out;
    int n;
} seq;

static void push(seq *q, moe_seq_where where, fsmoe_task_kind kind, double alpha, double beta,
                 double n)
{
    if (!(n > 0.0) || q->n >= MOE_SEQ_MAX_OPS)
        return;
    q->out[q->n++] = (moe_seq_op){.where = where, .kind = kind, .alpha_s = alpha, .beta_s = beta,
                                  .n = n};
}

static void push_line(seq *q, moe_seq_where where, fsmoe_task_kind kind, const fsmoe_line *l,
                      double n)
{
    push(q, where, kind, l->alpha_s, l->beta_s, n);
}

/* The expert's GEMMs on `macs` (forward; the backward twice the calls and the MACs). */
static void push_expert(seq *q, const workload_shape *s, const workload_lines *w, double macs,
                        int bwd)
{
    int calls = fsmoe_expert_gemms(s->expert) * (bwd ? 2 : 1);
    push(q, MOE_SEQ_COMPUTE, FSMOE_TASK_EXPERT, calls * w->gemm.alpha_s, w->gemm.beta_s,
         macs * (bwd ? 2.0 : 1.0));
}

/* The sizes of moe_seq.h: b bytes per element, M, H, S = B·L tokens, R = k·f·S routed copies
 * (f = "none" planned as 1; those the step runs: workload_ran_copies). */
typedef struct {
    double b, M, H, S, R;
} seq_sizes;

static seq_sizes sizes_of(const workload_shape *s)
{
    return (seq_sizes){.b = s->bytes_per_element, .M = (double)s->M, .H = (double)s->H,
                       .S = (double)s->B * (double)s->L, .R = workload_ran_copies(s)};
}

static void deepspeed_ops(seq *q, const workload_shape *s, const fsmoe_parallel *par,
                          const workload_lines *w, int bwd)
{
    const seq_sizes z = sizes_of(s);
    const double b = z.b, M = z.M, H = z.H, R = z.R;
    const double mp = par->mp, esp = par->esp;
    const int n_gemm = fsmoe_expert_gemms(s->expert);
    const int a2a_ep = par->ep > 1;

    if (deepspeed_mode(par) == DS_MODE_DROP_TOKENS) {
        /* forward: drop_tokens is a local slice; backward: gather_tokens' is */
        double sent = R * M * b / mp;
        push_line(q, MOE_SEQ_INTER, FSMOE_TASK_A2A, &w->a2a_ep, a2a_ep ? sent : 0.0);
        push_expert(q, s, w, R * M * H * n_gemm / mp, bwd);
        push_line(q, MOE_SEQ_INTER, FSMOE_TASK_A2A, &w->a2a_ep, a2a_ep ? sent : 0.0);
        /* forward: gather_tokens after the combine A2A; backward: drop_tokens' AllGather */
        push_line(q, MOE_SEQ_INTRA, FSMOE_TASK_AG, &w->ag_mp, mp > 1 ? R * M * b : 0.0);
    } else {
        double sent = R * M * b;
        push_line(q, MOE_SEQ_INTER, FSMOE_TASK_A2A, &w->a2a_ep, a2a_ep ? sent : 0.0);
        push_expert(q, s, w, R * M * H * n_gemm / esp, bwd);
        push_line(q, MOE_SEQ_INTRA, FSMOE_TASK_AR_ESP, &w->ar_esp, R * M * b);
        push_line(q, MOE_SEQ_INTER, FSMOE_TASK_A2A, &w->a2a_ep, a2a_ep ? sent : 0.0);
    }
}

static void parm_baseline_ops(seq *q, const workload_shape *s, const fsmoe_parallel *par,
                              const workload_lines *w, int bwd)
{
    const seq_sizes z = sizes_of(s);
    const double b = z.b, M = z.M, H = z.H, S = z.S, R = z.R;
    const double esp = par->esp;
    const double y = R * M * esp * b;
    const double gathered = esp > 1 ? S * M * esp * b : 0.0;
    const double a2a = par->ep > 1 ? y : 0.0;

    if (!bwd)
        push_line(q, MOE_SEQ_INTRA, FSMOE_TASK_AG, &w->ag_esp, gathered);
    push_line(q, MOE_SEQ_INTER, FSMOE_TASK_A2A, &w->a2a_ep, a2a);
    push_expert(q, s, w, R * M * H * fsmoe_expert_gemms(s->expert), bwd);
    push_line(q, MOE_SEQ_INTRA, FSMOE_TASK_AR_ESP, &w->ar_esp, esp > 1 ? y : 0.0);
    push_line(q, MOE_SEQ_INTER, FSMOE_TASK_A2A, &w->a2a_ep, a2a);
    if (bwd)
        push_line(q, MOE_SEQ_INTRA, FSMOE_TASK_RS, &w->rs_esp, gathered);
}

int moe_seq_ops(moe_seq_kind k, const workload_shape *s, const fsmoe_parallel *par,
                const workload_lines *w, int bwd, moe_seq_op out[MOE_SEQ_MAX_OPS])
{
    seq q = {.out = out, .n = 0};
    if (k == MOE_SEQ_DEEPSPEED)
        deepspeed_ops(&q, s, par, w, bwd);
    else
        parm_baseline_ops(&q, s, par, w, bwd);
    return q.n;
}

double moe_seq_time(moe_seq_kind k, const workload_shape *s, const fsmoe_parallel *par,
                    const workload_lines *w, int bwd)
{
    moe_seq_op ops[MOE_SEQ_MAX_OPS];
    int n = moe_seq_ops(k, s, par, w, bwd, ops);
    double t = 0.0;
    for (int i = 0; i < n; i++)
        t += ops[i].alpha_s + ops[i].beta_s * ops[i].n;
    return t;
}
