/* Implements: the baselines' predicted iteration times (see baselines.h; FSMoE §6, Parm §III
 * for DeepSpeed-MoE's pattern, Lina §4 for its gradient micro-ops).
 *
 * Every schedule pays the same dense forward and backward time (attention, dense FFN blocks,
 * the ops before the first MoE layer); they differ in the MoE layers and in how much of the
 * Gradient-AllReduce is left exposed after the backward pass (grad_partition.h baselines):
 *   deepspeed      = dense + Σ DS(fwd) + Σ DS(bwd)            + t_ar(all gradients)
 *                    (DS = moe_seq_time(MOE_SEQ_DEEPSPEED), given per layer by the caller)
 *   tutel          = dense + Σ min_r [Tutel_f(r) + Tutel_b(r)] + t_ar(all gradients)
 *   tutel_improved = the same MoE layers                       + dense-only partition tail
 *   pipemoe_lina   = the same MoE layers + Lina's overrun delays + Lina's exposed micro-ops
 * Relies on: pipeline_degree.h (problems), grad_partition.h (gradient baselines). */
#include "baselines.h"

#include <math.h>
#include <string.h>

static double chunk(double alpha, double beta, double n, double r)
{
    return n > 0.0 ? alpha + (n / r) * beta : 0.0; /* an op with no work does not run */
}

double baseline_one_stream_layer_s(const pipeline_problem *p, int r_int, double t_gar)
{
    double r = r_int < 1 ? 1.0 : (double)r_int;
    double a2a = chunk(p->a2a_alpha, p->a2a_beta, p->n_a2a, r);
    double ag = chunk(p->ag_alpha, p->ag_beta, p->n_ag, r);
    double rs = chunk(p->rs_alpha, p->rs_beta, p->n_rs, r);
    double ex = chunk(p->exp_alpha, p->exp_beta, p->n_exp, r);
    double stream = r * (2.0 * a2a + ag + rs) + (t_gar > 0.0 ? t_gar : 0.0) + ex;
    double compute = 2.0 * a2a + ag + r * ex + rs;
    return stream > compute ? stream : compute;
}

double baseline_tutel_layer_s(const pipeline_problem *p, int r)
{
    return baseline_one_stream_layer_s(p, r, 0.0);
}

int baseline_one_stream_best_r(const pipeline_problem *p, double t_gar, double *time_s)
{
    int r_max = p->r_max < 1 ? 1 : p->r_max;
    int best_r = 1;
    double best = INFINITY;
    for (int r = 1; r <= r_max; r++) {
        double t = baseline_one_stream_layer_s(p, r, t_gar);
        if (t < best) {
            best = t;
            best_r = r;
        }
    }
    if (time_s)
        *time_s = best;
    return best_r;
}

void baselines_predict(const baselines_input *in, baselines_result *out)
{
    memset(out, 0, sizeof *out);
    const grad_problem *g = in->grad;
    const int n = g->n_layers;
    double dense = in->prefix_fwd_s + g->prefix_bwd_s;
    for (int i = 0; i < n; i++)
        dense += in->dense_fwd_s[i] + g->layers[i].dense_bwd_s;
    out->dense_s = dense;

    double tutel = 0.0, ds = 0.0;
    for (int i = 0; i < n; i++) {
        const pipeline_problem *f = &in->moe_fwd[i], *b = &g->layers[i].moe_bwd;
        /* One degree for both phases, bounded like ours (both problems carry the same r_max). */
        int r_max = f->r_max < b->r_max ? f->r_max : b->r_max;
        if (r_max < 1)
            r_max = 1;
        int best_r = 1;
        double best = INFINITY;
        for (int r = 1; r <= r_max; r++) {
            double t = baseline_tutel_layer_s(f, r) + baseline_tutel_layer_s(b, r);
            if (t < best) {
                best = t;
                best_r = r;
            }
        }
        if (i == 0)
            out->tutel_r = best_r;
        tutel += best;
        ds += in->ds_layer_s ? in->ds_layer_s[i] : 0.0;
    }
    out->tutel_moe_s = tutel;
    out->deepspeed_moe_s = ds;

    double micro = in->lina_micro_op_bytes > 0.0 ? in->lina_micro_op_bytes
                                                 : GRAD_LINA_MICRO_OP_BYTES;
    grad_baseline_eval(g, GRAD_BASE_NONE, 0.0, &out->none);
    grad_baseline_eval(g, GRAD_BASE_DENSE_ONLY, 0.0, &out->dense_only);
    grad_baseline_eval(g, GRAD_BASE_LINA, micro, &out->lina);

    out->deepspeed_s = dense + ds + out->none.exposed_s;
    out->tutel_s = dense + tutel + out->none.exposed_s;
    out->tutel_improved_s = dense + tutel + out->dense_only.exposed_s;
    out->pipemoe_lina_s = dense + tutel + out->lina.delay_s + out->lina.exposed_s;
}
