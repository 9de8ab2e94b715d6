/* Implements: Parm's schedules (Parm §IV, Algorithm 1; design.md §6) — the S1/S2 choice by
 * communication alone, as Parm makes it, and S1/S2 as pipeline problems in r chunks so that the
 * planner can compare them with FSMoE's ESP pipeline on whole-layer time.
 *   x = B·L·M·b, T = k·f·B·L/E tokens, y = E·T·M·N_ESP·b, u = y/N_MP
 *   t_D1 = 2·A2A_{EP&ESP}(u) + AG_MP(x)
 *   t_D2 = A2A_{EP&ESP}(u) + SAA(u)
 * Parm picks S1 iff t_D1 <= t_D2. With N_MP = 1 there is nothing to pause: "esp-pipeline". */
#ifndef FSMOE_PARM_SCHEDULE_H
#define FSMOE_PARM_SCHEDULE_H

#include "plan.h"
#include "status.h"
#include "workload.h"

typedef struct {
    fsmoe_schedule schedule;
    double t_d1_s, t_d2_s;
} parm_choice;

void parm_choose(const workload_shape *s, const fsmoe_parallel *par, const workload_lines *w,
                 parm_choice *out);

/* One phase of a PauseMP layer (S1 or S2) in r chunks. Per chunk j: dispatch D_j (EP&ESP
 * AllToAll of u/r bytes), expert X_j (n_exp/r MACs), combine C_j (S1: the same AllToAll; S2: SAA
 * of u/r bytes, which carries the MP AllGather with it); after the last combine S1 runs the MP
 * AllGather of x (serial_s, not chunked). D and C share the inter-node link, every D before any
 * C (the dispatches are ready at once and have priority); a Gradient-AllReduce of t_gar seconds
 * runs on the link after the last dispatch, before the combines (FSMoE Fig. 3d's placement).
 *
 * With t_d, t_e, t_c the per-chunk times, the layer takes exactly (the makespan of this
 * three-stage flow shop; the expert chain is maximal at a corner of 1 ≤ i ≤ j ≤ r where expert
 * i starts after D_i and C_j after X_j):
 *   F(r) = serial_s + max( c1 = r·t_d + t_gar + r·t_c        the link,
 *                          c2 = t_d + r·t_e + t_c            the compute unit,
 *                          c3 = t_d + t_e + r·t_c            the combines after the first expert,
 *                          c4 = r·t_d + t_e + t_c )          the last chunk after all dispatches
 * FSMoE's f1..f4 are the case t_d = t_c with the ESP collectives added; when t_d = t_c, c3 and c4
 * never exceed max(c1, c2). Ops with no work (0 bytes or MACs) cost nothing, α included. */
typedef struct {
    fsmoe_schedule kind;   /* S1 or S2 */
    double d_alpha, d_beta, c_alpha, c_beta; /* s, s/byte */
    double u;              /* bytes per GPU per AllToAll (whole layer) */
    double exp_alpha, exp_beta, n_exp;       /* as pipeline_problem */
    double serial_s;       /* S1: AG_MP(x) after the last combine; S2: 0 */
    /* The layer's gate and token order (in the model's token order) under this schedule less
     * their time on every token, which the closed forms price beside the chains
     * (workload_extra_time): under S1 each MP member routes its own 1/N_MP share, so ≤ 0 there
     * (workload_route_own_saving_s; 0 where mp = 1), 0 under S2. The simulator does not read
     * it: its gate tasks price each layer's own routing (sim_schedules.c moe_layer). */
    double routing_s;
    double t_gar;
    int r_max;
} pausemp_problem;

/* c1..c4 at r (index 0..3), serial_s, routing_s and t_gar included where they apply; returns
 * F(r). */
double pausemp_chains(const pausemp_problem *p, int r, double c[4]);
double pausemp_F(const pausemp_problem *p, int r);
/* The smallest F over r = 1..r_max (ties: the smaller r), exhaustively (F is O(1), r ≤ 64). */
int pausemp_best_r(const pausemp_problem *p, double *F_out);

/* Fills the forward and backward PauseMP problems of schedule S1 or S2 for one MoE layer
 * (backward: the same communication, the expert's GEMMs and MACs doubled as in workload.h).
 * Returns 0 when the schedule is not a candidate — S2 without MP (it equals S1: its SAA is the
 * AllToAll), S1 without MP and without expert slices (the ESP pipeline's AllToAll alone), or S2
 * with no AllToAll to overlap (N_EP·N_ESP = 1) — but fills the problems anyway (the simulator
 * still plays Parm's schedules there). Without MP but with slices S1 is a candidate: one
 * AllToAll to every slice instead of the ESP pipeline's AllGather/ReduceScatter. */
int parm_pausemp_problems(const workload_shape *s, const fsmoe_parallel *par,
                          const workload_lines *w, const workload_layer *wl, fsmoe_schedule kind,
                          pausemp_problem *fwd, pausemp_problem *bwd);

/* S1 or S2 for one MoE layer at its best degrees: the problems of parm_pausemp_problems, the
 * backward with t_gar, each phase's r by pausemp_best_r. Returns 0 (outputs untouched) when the
 * schedule is not a candidate; else *r_f, *r_b and *F_s = forward + backward seconds. */
int parm_pausemp_best(const workload_shape *s, const fsmoe_parallel *par, const workload_lines *w,
                      const workload_layer *wl, fsmoe_schedule kind, double t_gar, int *r_f,
                      int *r_b, double *F_s);

#endif
