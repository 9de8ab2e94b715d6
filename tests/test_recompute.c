/* Tests: activation recomputation in the simulator and the plan's predictions
 * (planner/sim_schedules.h recompute, plan_model.c). On schedules that overlap nothing with the
 * backward (Parm's S1, DeepSpeed-MoE: every gradient after it), full recomputation lengthens
 * the iteration by exactly the forward without the head (the same tasks run again), and
 * selective by exactly every attention block's scores and scores·V (attn_core_s, computed here
 * from the model's shape and the profile's GEMM line); the recomputed tasks belong to the
 * backward; a plan of a model with training.recompute predicts the simulator's iteration, and
 * its memory model shrinks (full keeps one block's activations). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "cluster.h"
#include "test_load.h"
#include "model.h"
#include "plan.h"
#include "plan_model.h"
#include "sim.h"
#include "sim_schedules.h"

static void near(double got, double want, double rtol)
{
    if (fabs(got - want) > rtol * fabs(want) + 1e-12)
        fail_msg("got %.12g, want %.12g", got, want);
}

typedef struct {
    fsmoe_model m;
    fsmoe_cluster c;
    char cpath[1024];
    fsmoe_parallel par;
} input;

static void load(input *in, int recompute)
{
    test_load_inputs("mixtral-8x7b", "testbed-b", &in->m, &in->c, in->cpath, sizeof in->cpath);
    in->m.recompute = recompute;
    in->par = fsmoe_parallel_common(in->c.nodes, in->c.gpus_per_node);
    fsmoe_error err = {0};
    assert_int_equal(fsmoe_model_resolve(&in->m, &in->par, "test", &err), FSMOE_OK);
}

static void plan_of(input *in, fsmoe_plan *p, sim_model *sm)
{
    fsmoe_error err = {0};
    plan_options opt = {.method = PLAN_METHOD_AUTO};
    memset(p, 0, sizeof *p);
    if (plan_model(&in->m, &in->c, in->cpath, &in->par, &opt, p, &err) != FSMOE_OK)
        fail_msg("%s", err.msg);
    if (sim_model_of_plan(p, &in->m, &in->c, in->cpath, sm, &err) != FSMOE_OK)
        fail_msg("%s", err.msg);
}

/* One planned model and its simulator: what every test starts from. */
typedef struct {
    input in;
    fsmoe_plan p;
    sim_model sm;
    sim s;
} fixture;

static void fixture_open(fixture *fx, int recompute)
{
    load(&fx->in, recompute);
    plan_of(&fx->in, &fx->p, &fx->sm);
    sim_init(&fx->s);
}

static void fixture_close(fixture *fx)
{
    sim_free(&fx->s);
    sim_model_free(&fx->sm);
    fsmoe_plan_free(&fx->p);
    fsmoe_cluster_free(&fx->in.c);
}

static double run(sim *s, sim_model *sm, sim_schedule k, int recompute, double *fwd_end)
{
    fsmoe_error err = {0};
    double t = 0;
    sm->recompute = recompute;
    assert_int_equal(sim_schedule_time(s, sm, k, NULL, &t, &err), FSMOE_OK);
    double f = 0;
    for (int i = 0; i < s->n_tasks; i++)
        if (s->tasks[i].phase == SIM_PHASE_FWD && s->tasks[i].end_s > f)
            f = s->tasks[i].end_s;
    if (fwd_end)
        *fwd_end = f;
    return t;
}

static void test_full_adds_the_forward(void **state)
{
    (void)state;
    fixture fx;
    fixture_open(&fx, FSMOE_RECOMPUTE_NONE);
    static const sim_schedule ks[] = {SIM_SCHED_PARM_S1, SIM_SCHED_DEEPSPEED};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        double f_none = 0, f_full = 0;
        double none = run(&fx.s, &fx.sm, ks[i], FSMOE_RECOMPUTE_NONE, &f_none);
        double full = run(&fx.s, &fx.sm, ks[i], FSMOE_RECOMPUTE_FULL, &f_full);
        near(f_full, f_none, 1e-12); /* the recomputed tasks are the backward's */
        near(full - none, f_none - fx.sm.head_fwd_s, 1e-9);
    }
    fixture_close(&fx);
}

static void test_selective_adds_the_scores(void **state)
{
    (void)state;
    fixture fx;
    fixture_open(&fx, FSMOE_RECOMPUTE_NONE);
    const input *in = &fx.in;
    /* every block has one attention: 32 blocks of B·(heads/mp)·L²·(M/heads) MACs twice on the
     * profile's GEMM line (one line in the paper's profile), two GEMM calls each */
    const fsmoe_cost_entry *g = &in->c.ops[FSMOE_OP_GEMM][FSMOE_TIER_LOCAL];
    double B = (double)in->m.B, L = (double)in->m.L, M = (double)in->m.M;
    double macs = 2.0 * B * ((double)in->m.heads / in->par.mp) * L * L * (M / in->m.heads);
    double core = 2.0 * g->alpha_s + macs * g->beta_s;
    double none = run(&fx.s, &fx.sm, SIM_SCHED_PARM_S1, FSMOE_RECOMPUTE_NONE, NULL);
    double sel = run(&fx.s, &fx.sm, SIM_SCHED_PARM_S1, FSMOE_RECOMPUTE_SELECTIVE, NULL);
    near(sel - none, (double)in->m.layers * core, 1e-9);
    fixture_close(&fx);
}

static void test_plan_predicts_the_simulator(void **state)
{
    (void)state;
    fixture none, full;
    fixture_open(&none, FSMOE_RECOMPUTE_NONE);
    fixture_open(&full, FSMOE_RECOMPUTE_FULL);
    const fsmoe_plan *pn = &none.p, *pf = &full.p;
    assert_int_equal(pf->memory.recompute, FSMOE_RECOMPUTE_FULL);
    assert_int_equal(full.sm.recompute, FSMOE_RECOMPUTE_FULL);
    double t = run(&full.s, &full.sm, SIM_SCHED_PLAN, FSMOE_RECOMPUTE_FULL, NULL);
    near(pf->predicted.iteration_s, t, 1e-12);
    near(pf->predicted.forward_s + pf->predicted.backward_s + pf->predicted.tail_s, t, 1e-9);
    /* the same decisions, a longer iteration, far less memory */
    assert_true(pf->predicted.iteration_s > pn->predicted.iteration_s * 1.2);
    assert_true(pf->memory.bytes[FSMOE_MEM_ACTIVATIONS] <
                pn->memory.bytes[FSMOE_MEM_ACTIVATIONS] / 4);
    assert_non_null(strstr(pf->notes, "recomputation full"));
    fixture_close(&none);
    fixture_close(&full);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_adds_the_forward),
        cmocka_unit_test(test_selective_adds_the_scores),
        cmocka_unit_test(test_plan_predicts_the_simulator),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
