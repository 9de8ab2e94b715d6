/* Implements: Parm's choice between the schedules S1 and S2 (Parm §IV, Algorithm 1; design.md §6),
 * DeepSpeed-MoE's communication for comparison, and S1/S2 as chunked pipeline problems.
 *
 *   x = B·L·M·b                 the MoE layer's input per GPU, bytes
 *   T = k·f·B·L / E             tokens per expert (Parm's Algorithm 1 line 2 multiplies by M:
 *                               that is bytes, not tokens; we do not)
 *   y = E·T·M·N_ESP·b           one EP&ESP AllToAll's worth of expert input, bytes
 *   t_D1 = 2·A2A_{EP&ESP}(y/N_MP) + AG_MP(x)        (S1: MP paused from Gate to Combine)
 *   t_D2 =   A2A_{EP&ESP}(y/N_MP) + SAA(y/N_MP)     (S2: the Combine A2A and the MP AllGather
 *                                                    run together, measured as one op)
 * S1 iff t_D1 ≤ t_D2. This follows Algorithm 1 rather than Eq. 13/14 (which drop N_ESP and add
 * an extra AG_MP(E·T·M)); SAA is measured directly instead of modelled.
 *
 * Baseline (DeepSpeed-MoE, tokens duplicated over MP): ESP-AllGather of B·L·M·N_ESP·b (gathered
 * output), EP-AllToAll of y (Dispatch), ESP-AllReduce of y (partial expert outputs), EP-AllToAll
 * of y (Combine). The ESP-Split at the end is local and free.
 *
 * Chunked PauseMP (our extension; Parm itself runs r = 1): pipelining the EP&ESP AllToAll with
 * the experts is orthogonal to pausing MP, so S1 and S2 are split into r chunks like FSMoE's
 * layer. PauseMP computes each token once (the MP-Split removed the N_MP duplicates), so the
 * expert work per GPU is the ESP pipeline's n_exp (which carries the duplicates) / N_MP.
 * The S1 MP AllGather gathers the whole layer output and is not chunked (it
 * follows the last combine). The makespan is the exact max of chains in parm_schedule.h.
 * Relies on: workload.h lines (cost.h). */
#include "parm_schedule.h"

#include <math.h>
#include <string.h>

void parm_choose(const workload_shape *s, const fsmoe_parallel *par, const workload_lines *w,
                 parm_choice *out)
{
    const double b = s->bytes_per_element;
    const double B = (double)s->B, L = (double)s->L, M = (double)s->M;
    const double x = B * L * M * b;
    const double y = workload_ran_copies(s) * M * par->esp * b; /* E·T·M·N_ESP·b */
    const double u = y / par->mp;

    out->t_d1_s = 2.0 * fsmoe_line_time(&w->a2a_ep_esp, u) + fsmoe_line_time(&w->ag_mp, x);
    out->t_d2_s = fsmoe_line_time(&w->a2a_ep_esp, u) + fsmoe_line_time(&w->saa, u);
    if (par->mp <= 1)
        out->schedule = FSMOE_SCHED_ESP_PIPELINE; /* no MP to pause: FSMoE's/DeepSpeed's layout */
    else
        out->schedule = out->t_d1_s <= out->t_d2_s ? FSMOE_SCHED_S1 : FSMOE_SCHED_S2;
}

static double chunk_time(double alpha, double beta, double n, double r)
{
    return n > 0.0 ? alpha + (n / r) * beta : 0.0;
}

double pausemp_chains(const pausemp_problem *p, int r_int, double c[4])
{
    double r = r_int < 1 ? 1.0 : (double)r_int;
    double t_d = chunk_time(p->d_alpha, p->d_beta, p->u, r);
    double t_c = chunk_time(p->c_alpha, p->c_beta, p->u, r);
    double t_e = chunk_time(p->exp_alpha, p->exp_beta, p->n_exp, r);
    c[0] = r * t_d + p->t_gar + r * t_c;
    c[1] = t_d + r * t_e + t_c;
    c[2] = t_d + t_e + r * t_c;
    c[3] = r * t_d + t_e + t_c;
    double F = -INFINITY;
    for (int i = 0; i < 4; i++) {
        c[i] += p->serial_s + p->routing_s;
        if (c[i] > F)
            F = c[i];
    }
    return F;
}

double pausemp_F(const pausemp_problem *p, int r)
{
    double c[4];
    return pausemp_chains(p, r, c);
}

int pausemp_best_r(const pausemp_problem *p, double *F_out)
{
    int r_max = p->r_max < 1 ? 1 : p->r_max, best = 1;
    double best_F = pausemp_F(p, 1);
    for (int r = 2; r <= r_max; r++) {
        double F = pausemp_F(p, r);
        if (F < best_F) {
            best_F = F;
            best = r;
        }
    }
    if (F_out)
        *F_out = best_F;
    return best;
}

int parm_pausemp_problems(const workload_shape *s, const fsmoe_parallel *par,
                          const workload_lines *w, const workload_layer *wl, fsmoe_schedule kind,
                          pausemp_problem *fwd, pausemp_problem *bwd)
{
    memset(fwd, 0, sizeof *fwd);
    memset(bwd, 0, sizeof *bwd);
    int has_a2a = fsmoe_group_size(par, FSMOE_GROUP_EP_ESP) > 1;
    if (kind != FSMOE_SCHED_S1 && kind != FSMOE_SCHED_S2)
        return 0;
    const double b = s->bytes_per_element;
    const double B = (double)s->B, L = (double)s->L, M = (double)s->M;
    const double x = B * L * M * b;
    /* y = E·T·M·N_ESP·b with T = k·f·B·L/E, the copies the step runs of them */
    const double y = workload_ran_copies(s) * M * par->esp * b;
    const double y_cap = workload_routed_copies(s) * M * par->esp * b; /* bounds the chunks */
    fwd->kind = kind;
    fwd->u = has_a2a ? y / par->mp : 0.0;
    fwd->d_alpha = w->a2a_ep_esp.alpha_s, fwd->d_beta = w->a2a_ep_esp.beta_s;
    if (kind == FSMOE_SCHED_S1) {
        fwd->c_alpha = fwd->d_alpha, fwd->c_beta = fwd->d_beta;
        fwd->serial_s = fsmoe_line_time(&w->ag_mp, x);
    } else if (par->mp > 1) {
        fwd->c_alpha = w->saa.alpha_s, fwd->c_beta = w->saa.beta_s;
        fwd->serial_s = 0.0;
    } else { /* no MP AllGather to overlap: SAA is the plain AllToAll */
        fwd->c_alpha = fwd->d_alpha, fwd->c_beta = fwd->d_beta;
        fwd->serial_s = 0.0;
    }
    fwd->exp_alpha = wl->fwd.exp_alpha, fwd->exp_beta = wl->fwd.exp_beta;
    fwd->n_exp = wl->fwd.n_exp / par->mp; /* the duplicates are gone (see the header) */
    fwd->t_gar = 0.0;
    fwd->r_max = workload_r_max(wl->tokens_per_expert, has_a2a ? y_cap / par->mp : 0.0,
                                workload_min_chunk(&w->a2a_ep_esp));
    *bwd = *fwd;
    bwd->exp_alpha = wl->bwd.exp_alpha, bwd->exp_beta = wl->bwd.exp_beta;
    bwd->n_exp = wl->bwd.n_exp / par->mp;
    if (kind == FSMOE_SCHED_S1) { /* each MP member routes its own share (header) */
        fwd->routing_s = workload_route_own_saving_s(wl, s->order, 0);
        bwd->routing_s = workload_route_own_saving_s(wl, s->order, 1);
    }
    /* without MP, S1 is still a way to run a layer with expert slices (one AllToAll to every
     * slice of an expert instead of the ESP pipeline's AllToAll + AllGather/ReduceScatter);
     * S2 then equals it (SAA is the AllToAll) */
    if (par->mp <= 1)
        return par->esp > 1 && has_a2a && kind == FSMOE_SCHED_S1;
    return kind == FSMOE_SCHED_S1 || has_a2a;
}

int parm_pausemp_best(const workload_shape *s, const fsmoe_parallel *par, const workload_lines *w,
                      const workload_layer *wl, fsmoe_schedule kind, double t_gar, int *r_f,
                      int *r_b, double *F_s)
{
    pausemp_problem pf, pb;
    if (!parm_pausemp_problems(s, par, w, wl, kind, &pf, &pb))
        return 0;
    pb.t_gar = t_gar;
    double Ff, Fb;
    *r_f = pausemp_best_r(&pf, &Ff);
    *r_b = pausemp_best_r(&pb, &Fb);
    *F_s = Ff + Fb;
    return 1;
}
