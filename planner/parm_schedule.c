/* Implements: Parm's choice between the schedules S1 and S2 (Parm §IV, Algorithm 1; design.md §6)
 * and DeepSpeed-MoE's communication for comparison.
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
 * of y (Combine). The ESP-Split at the end is local and free. Only communication is compared:
 * the expert GEMMs are the same work under all three schedules.
 * Relies on: workload.h lines (cost.h). */
#include "parm_schedule.h"

void parm_choose(const workload_shape *s, const fsmoe_parallel *par, const workload_lines *w,
                 parm_choice *out)
{
    const double b = s->bytes_per_element;
    const double f = s->f > 0.0 ? s->f : 1.0; /* "none" is planned as balanced, f = 1 */
    const double B = (double)s->B, L = (double)s->L, M = (double)s->M, E = (double)s->E;
    const double x = B * L * M * b;
    const double T = E > 0.0 ? s->k * f * B * L / E : 0.0;
    const double y = E * T * M * par->esp * b;
    const double u = y / par->mp;

    out->t_d1_s = 2.0 * fsmoe_line_time(&w->a2a_ep_esp, u) + fsmoe_line_time(&w->ag_mp, x);
    out->t_d2_s = fsmoe_line_time(&w->a2a_ep_esp, u) + fsmoe_line_time(&w->saa, u);
    out->t_baseline_s = fsmoe_line_time(&w->ag_esp, x * par->esp)
                        + 2.0 * fsmoe_line_time(&w->a2a_ep, y) + fsmoe_line_time(&w->ar_esp, y);
    if (par->mp <= 1)
        out->schedule = FSMOE_SCHED_BASELINE; /* no MP to pause: S1 and S2 are the baseline */
    else
        out->schedule = out->t_d1_s <= out->t_d2_s ? FSMOE_SCHED_S1 : FSMOE_SCHED_S2;
}
