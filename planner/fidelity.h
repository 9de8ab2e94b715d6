/* Implements: `fsmoe-plan fidelity` — the planner's predictions side by side with the numbers
 * the papers publish, on the papers' own configurations: FSMoE Table 5 (speed-ups over Tutel on
 * the 1458 configured layers of Table 4, both testbeds), Fig. 6 (whole models over DS-MoE),
 * Fig. 7 (Testbed A at P = 16/32/48 and L = 512/1024/2048), Parm Table IV (Parm over its
 * baseline on the 8-GPU server and Testbed B) and Table V (BERT-Base and GPT-2), MoNTA Table 8
 * (AllToAll component times) and MoNTA's end-to-end gain. Each row prints the paper's figure,
 * ours, their ratio and whether the row meets its target (Table 5 within 5 %, Parm within 10 %,
 * Table 8 within 0.5 %, the end-to-end gain within 5 points; Fig. 6/7 inside the paper's range
 * or "—" where the paper gives no single figure).
 *
 * FSMoE's "DS-MoE" is reported twice: against `deepspeed` (DeepSpeed-MoE's real modes) and
 * against `parm-baseline` (the pattern Parm §III-A measured as DeepSpeed-MoE v0.8.1), because the
 * paper's figures follow the second (see the rows). Inputs are read from root/clusters and
 * root/models (root "." by default). Relies on: sweep.h, sim_schedules.h, plan_model.h,
 * monta_a2a.h. */
#ifndef FSMOE_FIDELITY_H
#define FSMOE_FIDELITY_H

#include <stdio.h>

#include "status.h"

/* Writes the report (Markdown tables) to out. *n_off = rows outside their target. */
fsmoe_status fidelity_report(const char *root, FILE *out, int *n_off, fsmoe_error *err);

#endif
