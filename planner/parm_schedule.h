/* Implements: Parm's choice between schedules S1 and S2 (Parm Algorithm 1, design.md §6).
 *   x = B·L·M·b, T = k·f·B·L/E tokens, y = E·T·M·N_ESP·b
 *   t_D1 = 2·A2A_{EP&ESP}(y/N_MP) + AG_MP(x)
 *   t_D2 = A2A_{EP&ESP}(y/N_MP) + SAA(y/N_MP)
 * S1 iff t_D1 <= t_D2. With N_MP = 1 there is nothing to pause: the schedule is "baseline". */
#ifndef FSMOE_PARM_SCHEDULE_H
#define FSMOE_PARM_SCHEDULE_H

#include "plan.h"
#include "workload.h"

typedef struct {
    fsmoe_schedule schedule;
    double t_d1_s, t_d2_s;
    double t_baseline_s; /* DeepSpeed-MoE's dispatch+combine communication, for comparison */
} parm_choice;

void parm_choose(const workload_shape *s, const fsmoe_parallel *par, const workload_lines *w,
                 parm_choice *out);

#endif
