/* Tests: the pipeline degree of PIPELINE_SLSQP equals an exhaustive integer search of
 * F(r) = max f_i over r = 1..r_max on all 1458 configured layers of FSMoE Table 4, forward and
 * backward, on both testbeds (clusters/testbed-a.yaml, testbed-b.yaml). Also checks that the
 * profiles carry the coefficients of FSMoE Fig. 5 (design.md §3), the source of both files. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "table4.h"

/* FSMoE Fig. 5 in ms and ms per float element (design.md §3): gemm, a2a, allgather,
 * reducescatter, allreduce; alpha then beta. */
static const double fig5[2][5][2] = {
    {{4.26e-2, 2.29e-11}, {2.87e-1, 2.21e-7}, {3.37e-1, 2.32e-7}, {3.95e-1, 2.34e-7},
     {5.11e-1, 4.95e-6}}, /* A's AllGather beta: Fig. 5 prints 2.32e-6 (clusters/testbed-a.yaml) */
    {{9.24e-2, 4.42e-11}, {1.75e-1, 3.06e-7}, {3.20e-2, 1.68e-7}, {3.91e-2, 1.67e-7},
     {8.37e-2, 5.99e-7}},
};

static int load_testbed(char tb, fsmoe_cluster *c)
{
    const char *root = getenv("FSMOE_SOURCE_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/clusters/testbed-%c.yaml", root ? root : ".", tb);
    fsmoe_error err = {0};
    memset(c, 0, sizeof *c);
    if (fsmoe_cluster_load(path, c, &err) != FSMOE_OK) {
        print_error("%s\n", err.msg);
        return -1;
    }
    return 0;
}

static void check_close(double got, double want, const char *what, char tb)
{
    if (!(fabs(got - want) <= 1e-9 * fabs(want)))
        fail_msg("testbed-%c: %s = %.6g, FSMoE Fig. 5 gives %.6g", tb, what, got, want);
}

static void check_fig5(char tb, const fsmoe_cluster *c)
{
    const double (*t)[2] = fig5[tb == 'a' ? 0 : 1];
    const fsmoe_cost_entry *g = &c->ops[FSMOE_OP_GEMM][FSMOE_TIER_LOCAL];
    /* ms -> s; per float element -> per byte (comm) or per MAC (gemm: Fig. 5 counts MACs) */
    check_close(g->alpha_s, t[0][0] / 1e3, "gemm alpha", tb);
    check_close(c->ops[FSMOE_OP_ALLTOALL][FSMOE_TIER_INTER].alpha_s, t[1][0] / 1e3, "a2a alpha",
                tb);
    check_close(c->ops[FSMOE_OP_ALLTOALL][FSMOE_TIER_INTER].beta_s, t[1][1] / 4e3, "a2a beta",
                tb);
    check_close(c->ops[FSMOE_OP_ALLGATHER][FSMOE_TIER_INTRA].beta_s, t[2][1] / 4e3, "ag beta",
                tb);
    check_close(c->ops[FSMOE_OP_REDUCESCATTER][FSMOE_TIER_INTRA].beta_s, t[3][1] / 4e3,
                "rs beta", tb);
}

static void run_testbed(char tb)
{
    fsmoe_cluster c;
    if (load_testbed(tb, &c) != 0)
        fail_msg("cannot load clusters/testbed-%c.yaml", tb);
    check_fig5(tb, &c);
    fsmoe_parallel par = table4_layout(&c);
    fsmoe_error err = {0};
    workload_lines w;
    if (workload_lines_init(&c, "testbed", &par, NULL, &w, &err) != FSMOE_OK)
        fail_msg("%s", err.msg);

    int r_differ = 0, ties = 0, paper_worse = 0, cases[2][5] = {{0}};
    double worst_paper = 1.0;
    for (int i = 0; i < TABLE4_COUNT; i++) {
        workload_shape s;
        assert_int_equal(table4_shape(tb, i, &par, &s, &err), FSMOE_OK);
        table4_plan plan;
        if (table4_plan_config(&s, &par, &w, PIPELINE_SLSQP, &plan, &err) != FSMOE_OK)
            fail_msg("config %d: %s", i, err.msg);
        const pipeline_problem *probs[2] = {&plan.layer.fwd, &plan.layer.bwd};
        const pipeline_result *got[2] = {&plan.fwd, &plan.bwd};
        assert_true(plan.layer.bwd.t_gar == 0.0); /* attention then MoE: table4.h */
        for (int ph = 0; ph < 2; ph++) {
            pipeline_result ex, pa;
            assert_int_equal(pipeline_solve(probs[ph], PIPELINE_EXHAUSTIVE, &ex, &err), FSMOE_OK);
            assert_int_equal(pipeline_solve(probs[ph], PIPELINE_PAPER, &pa, &err), FSMOE_OK);
            double rel = fabs(got[ph]->time_s - ex.time_s) / ex.time_s;
            if (rel > 1e-12)
                fail_msg("testbed-%c config %d %s: SLSQP r=%d F=%.17g, exhaustive r=%d F=%.17g",
                         tb, i, ph ? "bwd" : "fwd", got[ph]->r, got[ph]->time_s, ex.r,
                         ex.time_s);
            if (got[ph]->r != ex.r)
                ties++;
            if (pa.time_s > ex.time_s * (1 + 1e-12))
                paper_worse++;
            if (pa.time_s / ex.time_s > worst_paper)
                worst_paper = pa.time_s / ex.time_s;
            cases[ph][got[ph]->binding_case]++;
        }
        if (plan.fwd.r != plan.bwd.r)
            r_differ++;
    }
    print_message("testbed-%c (%d nodes x %d GPUs): forward and backward r differ in %d/%d "
                  "configurations (paper, testbed B: 912/1458); SLSQP == exhaustive on all %d "
                  "problems (%d r ties); binding cases fwd 1:%d 2:%d 3:%d 4:%d, bwd 1:%d 2:%d "
                  "3:%d 4:%d; Algorithm 1 slower in %d problems (worst %.3fx)\n",
                  tb, c.nodes, c.gpus_per_node, r_differ, TABLE4_COUNT, 2 * TABLE4_COUNT, ties,
                  cases[0][1], cases[0][2], cases[0][3], cases[0][4], cases[1][1], cases[1][2],
                  cases[1][3], cases[1][4], paper_worse, worst_paper);
    assert_true(ties <= TABLE4_COUNT / 100);
    fsmoe_cluster_free(&c);
}

static void test_testbed_a(void **state)
{
    (void)state;
    run_testbed('a');
}

static void test_testbed_b(void **state)
{
    (void)state;
    run_testbed('b');
}

static void test_grid(void **state)
{
    (void)state;
    fsmoe_parallel par = fsmoe_parallel_common(8, 4);
    workload_shape s;
    fsmoe_error err = {0};
    /* first, last and one in the middle, decoded by hand from the documented order */
    assert_int_equal(table4_shape('b', 0, &par, &s, &err), FSMOE_OK);
    assert_true(s.B == 1 && s.heads == 8 && s.L == 256 && s.M == 1024 && s.H == 2048);
    assert_true(s.f == 1.2 && s.expert == FSMOE_EXPERT_GPT && s.E == 8 && s.k == 2);
    assert_int_equal(table4_shape('a', TABLE4_COUNT - 1, &par, &s, &err), FSMOE_OK);
    assert_true(s.B == 4 && s.heads == 32 && s.L == 2048 && s.M == 4096 && s.H == 4 * 4096);
    assert_true(s.f == 0.0 && s.expert == FSMOE_EXPERT_SWIGLU);
    /* i = 1 + 2·(1 + 3·(2 + 3·(1 + 3·(0 + 3·(2 + 3·1))))) : B=2 heads=32 L=256 M=2048 H/M=4
     * f=2.4 swiglu */
    int i = 1 + 2 * (1 + 3 * (2 + 3 * (1 + 3 * (0 + 3 * (2 + 3 * 1)))));
    assert_int_equal(table4_shape('b', i, &par, &s, &err), FSMOE_OK);
    assert_true(s.B == 2 && s.heads == 32 && s.L == 256 && s.M == 2048 && s.H == 8192);
    assert_true(s.f == 2.4 && s.expert == FSMOE_EXPERT_SWIGLU);
    assert_int_equal(table4_shape('c', 0, &par, &s, &err), FSMOE_ERR_VALUE);
    assert_int_equal(table4_shape('a', TABLE4_COUNT, &par, &s, &err), FSMOE_ERR_VALUE);
}

/* FSMoE §4 workloads of configuration 0 on Testbed B (B=1, L=256, M=1024, H=2048, f=1.2, GPT,
 * E = ep = 8, esp = mp = 4, k = 2, fp32), by hand: k·f·B·L = 614.4 routed tokens;
 * n_a2a = 614.4·1024·4 (the MP duplicates travel), n_ag = n_rs = 4·n_a2a (N_ESP gathered
 * copies), n_exp = 614.4·1024·2048·2 MACs (4·614.4 tokens on a 2048/4 shard),
 * T = 614.4/8 = 76.8, r_max = min(64, 76, floor(2516582.4/65536) = 38) = 38. Backward: 2× GEMM
 * calls and MACs, same β per MAC. Attention gradients (M·3M/4 + M·M/4 + 2M)·4 bytes. */
static void test_workload_config0(void **state)
{
    (void)state;
    fsmoe_cluster c;
    if (load_testbed('b', &c) != 0)
        fail_msg("cannot load clusters/testbed-b.yaml");
    fsmoe_parallel par = table4_layout(&c);
    assert_true(par.mp == 4 && par.esp == 4 && par.ep == 8 && par.dp == 8);
    fsmoe_error err = {0};
    workload_lines w;
    assert_int_equal(workload_lines_init(&c, "testbed-b", &par, NULL, &w, &err), FSMOE_OK);
    workload_shape s;
    assert_int_equal(table4_shape('b', 0, &par, &s, &err), FSMOE_OK);
    workload_layer l;
    workload_layer_init(&s, &par, &w, &l);
    assert_true(fabs(l.n_a2a - 2516582.4) < 1e-6);
    assert_true(fabs(l.n_ag - 10066329.6) < 1e-6 && l.n_rs == l.n_ag);
    assert_true(fabs(l.n_exp - 2576980377.6) < 1e-3);
    assert_true(fabs(l.tokens_per_expert - 76.8) < 1e-12);
    assert_int_equal(l.r_max, 38);
    const double a_gemm = 9.24e-2 / 1e3;
    assert_true(fabs(l.fwd.exp_alpha - 2 * a_gemm) < 1e-15);
    assert_true(fabs(l.bwd.exp_alpha - 4 * a_gemm) < 1e-15);
    assert_true(l.bwd.exp_beta == l.fwd.exp_beta && l.bwd.n_exp == 2 * l.fwd.n_exp);
    assert_true(fabs(l.fwd.a2a_beta - 3.06e-7 / 4e3) < 1e-20);
    /* wqkv + bqkv (M+1)·3M/mp, wo M²/mp, bo M, ln1 + ln2 4M; M = 1024, mp = 4, 4 bytes */
    assert_true(fabs(l.attn_grad_bytes - 4217856.0) < 1e-6);
    assert_true(l.expert_grad_bytes == 0.0); /* world = ep·esp: no replicated experts */
    fsmoe_cluster_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grid),
        cmocka_unit_test(test_workload_config0),
        cmocka_unit_test(test_testbed_a),
        cmocka_unit_test(test_testbed_b),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    pipeline_thread_release();
    return rc;
}
