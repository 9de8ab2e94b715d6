/* Tests: GPipe pipeline parallelism (planner/gpipe.h). The discrete-event pipeline against the
 * closed form for uniform stages, (m + pp − 1)(F + B0) + 2(pp − 1)·p2p + X, on a grid of stage and
 * micro-batch counts; MoNTA's priorities measured in simulation (without them every stage's
 * last gradient send shares its link with the DP gradient work: (pp − 1)·p2p later); a send
 * longer than a stage's compute makes the pipeline slower than the closed form; a planned
 * pipeline (mixtral-8x7b, 2 stages on Testbed A) predicts its own pipeline section's closed
 * form, writes and reads back, and its stage rules refuse what does not split. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster.h"
#include "test_load.h"
#include "gpipe.h"
#include "model.h"
#include "plan.h"
#include "plan_model.h"
#include "sim.h"

static void near(double got, double want, double rtol)
{
    if (fabs(got - want) > rtol * fabs(want) + 1e-15)
        fail_msg("got %.12g, want %.12g", got, want);
}

/* The grid the tests play: pp in {1, 2, 3, 4, 8} x m in {1, 2, 4, 7, 16}, F 3 ms, B0 5 ms,
 * X 4 ms, with priorities; i in 0..24. */
enum { GRID = 25 };
static gpipe_input grid_input(int i, double p2p_s, int one_f_one_b)
{
    static const int pps[] = {1, 2, 3, 4, 8}, ms[] = {1, 2, 4, 7, 16};
    gpipe_input g = {.stages = pps[i / 5], .micro_batches = ms[i % 5], .fwd_s = 3e-3,
                     .bwd_s = 5e-3, .grad_s = 4e-3, .p2p_s = p2p_s, .priorities = 1,
                     .one_f_one_b = one_f_one_b};
    return g;
}

static void test_closed_form_grid(void **state)
{
    (void)state;
    sim s;
    sim_init(&s);
    for (int i = 0; i < GRID; i++) {
        gpipe_input g = grid_input(i, 0.5e-3, 0);
        double t = 0;
        assert_int_equal(gpipe_simulate(&s, &g, &t, NULL), FSMOE_OK);
        near(t, gpipe_closed_form(&g), 1e-9);
        /* the bubble: pp − 1 stage-micro-batches of idle compute per stage */
        double m = g.micro_batches, pp = g.stages;
        near(gpipe_closed_form(&g) - g.grad_s - 2 * (pp - 1) * g.p2p_s,
             (m + pp - 1) * (g.fwd_s + g.bwd_s), 1e-12);
    }
    sim_free(&s);
}

/* 1F1B: with sends that take no time the same makespan as GPipe (the same bubble); with sends,
 * never faster (each send between a forward and a backward is exposed in its steady state) */
static void test_one_f_one_b(void **state)
{
    (void)state;
    sim s;
    sim_init(&s);
    for (int i = 0; i < GRID; i++) {
        gpipe_input g = grid_input(i, 0, 1);
        double t = 0, gp = 0;
        assert_int_equal(gpipe_simulate(&s, &g, &t, NULL), FSMOE_OK);
        near(t, gpipe_closed_form(&g), 1e-9);
        g.p2p_s = 0.5e-3;
        assert_int_equal(gpipe_simulate(&s, &g, &t, NULL), FSMOE_OK);
        g.one_f_one_b = 0;
        assert_int_equal(gpipe_simulate(&s, &g, &gp, NULL), FSMOE_OK);
        assert_true(t >= gp - 1e-12);
    }
    /* the stages' orders: on stage 0 of 4 with 8 micro-batches, 3 warm-up forwards, then a
     * backward after every forward */
    gpipe_input g = {.stages = 4, .micro_batches = 8, .fwd_s = 3e-3, .bwd_s = 5e-3,
                     .priorities = 1, .one_f_one_b = 1};
    double t = 0;
    assert_int_equal(gpipe_simulate(&s, &g, &t, NULL), FSMOE_OK);
    int seq[16], n = 0;
    for (int k = 0; k < s.n_tasks && n < 16; k++) /* creation order = stage 0's order */
        if (s.tasks[k].layer == 0 && s.tasks[k].resource == 0 && s.tasks[k].chunk >= 0)
            seq[n++] = (s.tasks[k].phase == SIM_PHASE_FWD ? 1 : -1) * (s.tasks[k].chunk + 1);
    static const int want[16] = {1, 2, 3, 4, -1, 5, -2, 6, -3, 7, -4, 8, -5, -6, -7, -8};
    assert_int_equal(n, 16);
    assert_memory_equal(seq, want, sizeof want);
    for (int k = 1; k < 16; k++) /* and they run in that order */
        assert_true(s.tasks[k].start_s >= s.tasks[k - 1].end_s - 1e-15 ||
                    s.tasks[k].layer != 0 || s.tasks[k - 1].layer != 0);
    assert_int_equal(gpipe_in_flight(4, 8, 1), 4);
    assert_int_equal(gpipe_in_flight(4, 8, 0), 8);
    assert_int_equal(gpipe_in_flight(8, 4, 1), 4);
    sim_free(&s);
}

static void test_priorities_effect(void **state)
{
    (void)state;
    sim s;
    sim_init(&s);
    for (int pp = 2; pp <= 6; pp++) {
        gpipe_input g = {.stages = pp, .micro_batches = 8, .fwd_s = 3e-3, .bwd_s = 5e-3,
                         .grad_s = 20e-3, .p2p_s = 1e-3, .priorities = 1};
        double with = 0, without = 0;
        assert_int_equal(gpipe_simulate(&s, &g, &with, NULL), FSMOE_OK);
        g.priorities = 0;
        assert_int_equal(gpipe_simulate(&s, &g, &without, NULL), FSMOE_OK);
        /* each stage's last send shares the link with its gradient work: twice as long */
        near(without - with, (pp - 1) * g.p2p_s, 1e-9);
    }
    sim_free(&s);
}

static void test_send_bound(void **state)
{
    (void)state;
    sim s;
    sim_init(&s);
    gpipe_input g = {.stages = 4, .micro_batches = 8, .fwd_s = 3e-3, .bwd_s = 5e-3,
                     .grad_s = 1e-3, .p2p_s = 6e-3, .priorities = 1};
    double t = 0;
    assert_int_equal(gpipe_simulate(&s, &g, &t, NULL), FSMOE_OK);
    /* sends longer than a forward: the link, not the compute, paces the fill */
    assert_true(t > gpipe_closed_form(&g) * 1.05);
    g.stages = 65;
    assert_int_equal(gpipe_simulate(&s, &g, &t, NULL), FSMOE_ERR_VALUE);
    sim_free(&s);
}


static void test_planned_pipeline(void **state)
{
    (void)state;
    fsmoe_model m;
    fsmoe_cluster c;
    char cpath[1024];
    test_load_inputs("mixtral-8x7b", "testbed-a", &m, &c, cpath, sizeof cpath);
    fsmoe_parallel par = {.world = 32, .gpus_per_node = 8, .dp = 2, .mp = 8, .ep = 2, .esp = 8,
                          .pp = 2};
    fsmoe_error err = {0};
    assert_int_equal(fsmoe_model_resolve(&m, &par, "test", &err), FSMOE_OK);
    plan_options opt = {.method = PLAN_METHOD_AUTO, .micro_batches = 2};
    fsmoe_plan p;
    memset(&p, 0, sizeof p);
    assert_int_equal(plan_model(&m, &c, cpath, &par, &opt, &p, &err), FSMOE_OK);
    assert_true(p.pipeline.present);
    assert_int_equal(p.pipeline.micro_batches, 2);
    assert_int_equal(p.pipeline.stage_blocks, 16);
    assert_int_equal(p.n_layers, 16);
    assert_int_equal(p.parallel.pp, 2);
    assert_int_equal(p.B, m.B);
    /* one send: the micro-batch's B/2·L·M·2 bytes over 8 MP ranks */
    near(p.pipeline.p2p_bytes, (double)(m.B / 2) * m.L * m.M * 2 / 8, 1e-12);
    gpipe_input g = {.stages = 2, .micro_batches = 2, .fwd_s = p.pipeline.fwd_s,
                     .bwd_s = p.pipeline.bwd_s, .grad_s = p.pipeline.grad_s,
                     .p2p_s = p.pipeline.p2p_s, .priorities = 1};
    near(p.predicted.iteration_s, gpipe_closed_form(&g), 1e-9);
    /* more micro-batches: a smaller bubble share, the same total work */
    fsmoe_plan q;
    memset(&q, 0, sizeof q);
    opt.micro_batches = 4;
    assert_int_equal(plan_model(&m, &c, cpath, &par, &opt, &q, &err), FSMOE_OK);
    assert_int_equal(q.pipeline.micro_batches, 4);
    /* round trip through the plan file */
    char path[] = "/tmp/fsmoe-gpipe-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(fsmoe_plan_write(&p, path, &err), FSMOE_OK);
    fsmoe_plan back;
    if (fsmoe_plan_load(path, &back, &err) != FSMOE_OK)
        fail_msg("%s", err.msg);
    assert_true(back.pipeline.present);
    assert_int_equal(back.pipeline.micro_batches, 2);
    near(back.pipeline.fwd_s, p.pipeline.fwd_s, 1e-15);
    near(back.pipeline.p2p_s, p.pipeline.p2p_s, 1e-15);
    fsmoe_plan_free(&back);
    unlink(path);
    /* stages that do not split: 32 layers into 3, a batch of 4 into 3 micro-batches */
    fsmoe_model st;
    fsmoe_parallel sp;
    fsmoe_parallel p3 = par;
    p3.pp = 3;
    assert_int_equal(gpipe_stage(&m, &p3, 1, &st, &sp, &err), FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "do not split into pp=3"));
    assert_int_equal(gpipe_stage(&m, &par, 3, &st, &sp, &err), FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "micro-batches"));
    assert_int_equal(gpipe_default_micro(4, 2), 4);
    assert_int_equal(gpipe_default_micro(12, 2), 6);
    assert_int_equal(gpipe_default_micro(1, 8), 1);
    /* 1F1B: the same stage, at most pp = 2 of the 4 micro-batches' activations held */
    fsmoe_plan f;
    memset(&f, 0, sizeof f);
    opt.one_f_one_b = 1;
    assert_int_equal(plan_model(&m, &c, cpath, &par, &opt, &f, &err), FSMOE_OK);
    assert_true(f.pipeline.one_f_one_b);
    near(f.pipeline.fwd_s, q.pipeline.fwd_s, 1e-12);
    assert_true(f.memory.bytes[FSMOE_MEM_ACTIVATIONS] <
                0.6 * q.memory.bytes[FSMOE_MEM_ACTIVATIONS]);
    assert_true(f.predicted.iteration_s >= q.predicted.iteration_s - 1e-12);
    fsmoe_plan_free(&f);
    fsmoe_plan_free(&p);
    fsmoe_plan_free(&q);
    fsmoe_cluster_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_closed_form_grid),
        cmocka_unit_test(test_one_f_one_b),
        cmocka_unit_test(test_priorities_effect),
        cmocka_unit_test(test_send_bound),
        cmocka_unit_test(test_planned_pipeline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
