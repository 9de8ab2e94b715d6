/* Implements: sweeps of the simulator over the papers' configuration grids: FSMoE
 * Table 4 (1458 configured layers, Table 5's comparison) and Parm Table III (Table IV's
 * comparison), every schedule of sim_schedules.h per configuration; and the regret study of the
 * planner's closed-form pipeline degree against the best degree found by simulation.
 *
 * A configuration is one generalised layer (design.md §5): the MoE layer followed by its
 * dense op (one attention block for FSMoE Table 4, none for Parm, whose runs exclude attention
 * and the gradient AllReduce — Parm §VI-A), simulated for one iteration (forward, backward,
 * Gradient-AllReduce of the attention's DP gradients). The fsmoe plan of a Table 4 configuration
 * is table4_plan_config's (SLSQP r_f, r_b with t_gar = the attention AllReduce inside the MoE
 * backward); of a Parm configuration pipeline_solve with t_gar = 0. */
#ifndef FSMOE_SWEEP_H
#define FSMOE_SWEEP_H

#include "cluster.h"
#include "model.h"
#include "pipeline_degree.h"
#include "plan.h"
#include "sim.h"
#include "sim_schedules.h"
#include "status.h"

typedef enum { SWEEP_FSMOE_TABLE4 = 0, SWEEP_PARM_TABLE3, SWEEP_GRID_COUNT } sweep_grid;

const char *sweep_grid_name(sweep_grid g); /* "fsmoe-table4", "parm-table3" */
int sweep_grid_from_name(const char *s);   /* -1 when unknown */
int sweep_grid_size(sweep_grid g);         /* configurations enumerated (some may be invalid) */

/* Testbed letter for Table 4's L range: 'a' for the profile named testbed-a, else 'b' (the
 * smaller L of the 11 GB GPUs); `sweep --testbed a|b` overrides it. */
char sweep_testbed_of(const fsmoe_cluster *c);

/* Configuration i of the grid as a one-layer sim_model (m->layers = layer, caller's storage).
 * *valid = 0 (and FSMOE_OK) when the configuration does not fit the cluster (Parm: P larger than
 * the cluster, or an invalid layout); describe (≥ 160 bytes, may be NULL) gets a short label. */
fsmoe_status sweep_config(sweep_grid g, char testbed, const fsmoe_cluster *c,
                          const char *cluster_path, int i, pipeline_method method, sim_model *m,
                          sim_layer *layer, int *valid, char *describe, fsmoe_error *err);

/* What a configuration is, for reports that group the sweep's rows (the sequence length and
 * the layout it was simulated with). */
typedef struct {
    long L;
    int world, mp, esp;
} sweep_key;

typedef struct {
    int n_grid;     /* configurations enumerated */
    int n;          /* valid ones simulated */
    int *index;     /* grid index of each simulated configuration */
    double (*t)[SIM_SCHED_COUNT]; /* iteration time, s */
    int *tutel_r, *r_f, *r_b;
    sweep_key *key;
    double wall_s;  /* time the sweep took */
} sweep_result;

fsmoe_status sweep_run(sweep_grid g, char testbed, const fsmoe_cluster *c,
                       const char *cluster_path, sweep_result *out, fsmoe_error *err);
void sweep_result_free(sweep_result *r);

/* Speedup of schedule k over schedule ref (t_ref / t_k) across the sweep. */
typedef struct {
    double mean, min, max;
    int n_slower; /* configurations where k is slower than ref by more than 1e-9 relative */
} sweep_stat;
void sweep_speedup(const sweep_result *r, int k, int ref, sweep_stat *out);

/* Regret of a degree choice: simulated iteration with (r_f, r_b) over the best simulated
 * iteration with r_f, r_b ∈ 1..r_max (the phases are separable: the backward starts after the
 * whole forward, so each phase is searched with the other fixed). */
typedef struct {
    int r_f_plan, r_b_plan, r_f_best, r_b_best, r_max;
    double t_plan_s, t_best_s, regret; /* regret = t_plan / t_best − 1 */
} sweep_regret;

fsmoe_status sweep_regret_config(sim *s, const sim_model *m, sweep_regret *out,
                                 fsmoe_error *err);

/* The simulator's choice of (r_f, r_b) for every layer of m (each layer searched alone inside
 * its own one-layer model, with its share of the gradient AllReduce), written into m->layers.
 * This is what a plan uses when the closed form's regret is too large; *changed counts the
 * layers whose r moved. */
fsmoe_status sim_refine_plan(sim *s, sim_model *m, int *changed, fsmoe_error *err);

/* sim_refine_plan on a whole plan: builds the sim_model of p (sim_model_from_plan), re-chooses
 * every layer's r_f, r_b with the simulator and writes them into p->layers[i].fwd.r / .bwd.r
 * (binding case, predicted times and the gradient partition are left as the closed form gave
 * them). *changed = layers whose r moved. The caller records the method, e.g. decided_by =
 * "slsqp+integer+sim". */
fsmoe_status sim_refine_fsmoe_plan(fsmoe_plan *p, const fsmoe_model *model,
                                   const fsmoe_cluster *c, const char *cluster_path, int *changed,
                                   fsmoe_error *err);

#endif
