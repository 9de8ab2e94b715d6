/* Tests: planner/pipeline_degree.c (FSMoE §4, design.md §4) against hand calculations and an
 * exhaustive integer search. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "pipeline_degree.h"

#define Q(i) (1u << ((i) - 1))

/* a2a: 1 + 10/r, ag = rs: 0.5 + 2/r, exp: 2 + 1/r, t_gar 3. */
static pipeline_problem hand_problem(void)
{
    pipeline_problem p = {
        .a2a_alpha = 1.0, .a2a_beta = 1.0, .n_a2a = 10.0,
        .ag_alpha = 0.5, .ag_beta = 0.1, .n_ag = 20.0,
        .rs_alpha = 0.5, .rs_beta = 0.1, .n_rs = 20.0,
        .exp_alpha = 2.0, .exp_beta = 0.01, .n_exp = 100.0,
        .t_gar = 3.0, .r_max = 16,
    };
    return p;
}

static void test_hand_values(void **state)
{
    (void)state;
    pipeline_problem p = hand_problem();
    /* r = 2: t_a2a = 6, t_ag = t_rs = 1.5, t_exp = 2.5 */
    assert_true(fabs(pipeline_case_time(&p, 1, 2) - 27.0) < 1e-12); /* 2·2·6 + 3 */
    assert_true(fabs(pipeline_case_time(&p, 2, 2) - 20.0) < 1e-12); /* 12 + 3 + 2·2.5 */
    assert_true(fabs(pipeline_case_time(&p, 3, 2) - 27.0) < 1e-12); /* 24 + 3 */
    assert_true(fabs(pipeline_case_time(&p, 4, 2) - 18.0) < 1e-12); /* 12 + 2·3 */
    assert_true(fabs(pipeline_F(&p, 2) - 27.0) < 1e-12);
    /* Q1 6>1.5; Q2 5>12 no; Q3 5>3; Q4 3>3 no; Q5 3>-4; Q6 3>-6; Q7 3>-4 */
    unsigned q = pipeline_conditions(&p, 2);
    assert_int_equal(q, Q(1) | Q(3) | Q(5) | Q(6) | Q(7));
    assert_int_equal(pipeline_case_of_conditions(q), 3);
    /* r = 1: t_a2a = 11, t_ag = t_rs = 2.5, t_exp = 3: f = 25, 30, 27, 27 */
    assert_true(fabs(pipeline_case_time(&p, 1, 1) - 25.0) < 1e-12);
    assert_true(fabs(pipeline_case_time(&p, 2, 1) - 30.0) < 1e-12);
    assert_true(fabs(pipeline_case_time(&p, 3, 1) - 27.0) < 1e-12);
    assert_true(fabs(pipeline_case_time(&p, 4, 1) - 27.0) < 1e-12);
    /* The tie f1 = f3 = 27 at r = 2 reports the lowest index. Hand: F(1)=30, F(2)=27,
     * F(3)=max(2·3·(1+10/3)+3=29, ...)=29: r = 2. */
    pipeline_result res;
    assert_int_equal(pipeline_solve(&p, PIPELINE_SLSQP, &res, NULL), FSMOE_OK);
    assert_int_equal(res.r, 2);
    assert_int_equal(res.binding_case, 1);
    assert_true(fabs(res.time_s - 27.0) < 1e-12);
    assert_int_equal(res.q, q);
    assert_true(fabs(res.f[1] - 20.0) < 1e-12);
}

static void test_case_table(void **state)
{
    (void)state;
    /* Each row of the paper's case table, written out independently of the implementation. */
    struct { unsigned q; int c; } rows[] = {
        {Q(1) | Q(4), 1},          {Q(1) | Q(2) | Q(5), 1}, {Q(6), 1},
        {Q(3) | Q(7), 1},          {Q(1) | Q(2), 2},        {Q(3), 2},
        {Q(1), 3},                 {Q(1) | Q(5) | Q(6), 3}, {0, 4},
        {Q(2) | Q(4) | Q(5) | Q(7), 4},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        assert_int_equal(pipeline_case_of_conditions(rows[i].q), rows[i].c);
}

static pipeline_problem base_problem(void)
{
    pipeline_problem p = {
        .a2a_alpha = 1e-4, .a2a_beta = 1e-9, .n_a2a = 1e6,
        .ag_alpha = 1e-4, .ag_beta = 1e-9, .n_ag = 1e6,
        .rs_alpha = 1e-4, .rs_beta = 1e-9, .n_rs = 1e6,
        .exp_alpha = 1e-4, .exp_beta = 1e-12, .n_exp = 1e9,
        .t_gar = 0.0, .r_max = 32,
    };
    return p;
}

static void expect_binding(pipeline_problem *p, int want)
{
    pipeline_result res, ex;
    assert_int_equal(pipeline_solve(p, PIPELINE_SLSQP, &res, NULL), FSMOE_OK);
    assert_int_equal(pipeline_solve(p, PIPELINE_EXHAUSTIVE, &ex, NULL), FSMOE_OK);
    assert_int_equal(res.binding_case, want);
    assert_int_equal(res.r, ex.r);
    assert_true(fabs(res.time_s - res.f[want - 1]) == 0.0);
}

static void test_each_case_binds(void **state)
{
    (void)state;
    pipeline_problem p;
    /* 1: a Gradient-AllReduce longer than everything else */
    p = base_problem();
    p.t_gar = 1.0;
    expect_binding(&p, 1);
    /* 2: the experts dominate (1 s of MACs) */
    p = base_problem();
    p.n_exp = 1e12;
    expect_binding(&p, 2);
    /* 3: AllToAll dominates (slow inter-node link) */
    p = base_problem();
    p.a2a_beta = 1e-7;
    expect_binding(&p, 3);
    /* 4: the intra-node collectives dominate */
    p = base_problem();
    p.ag_beta = p.rs_beta = 1e-7;
    expect_binding(&p, 4);
}

static double urand(void)
{
    return (double)rand() / ((double)RAND_MAX + 1.0);
}

static double logu(double lo, double hi)
{
    return lo * pow(hi / lo, urand());
}

static void test_slsqp_equals_exhaustive(void **state)
{
    (void)state;
    srand(12345);
    int n_ties = 0;
    for (int it = 0; it < 5000; it++) {
        pipeline_problem p = {
            .a2a_alpha = logu(1e-6, 1e-3), .a2a_beta = logu(1e-11, 1e-8), .n_a2a = logu(1e4, 1e9),
            .ag_alpha = logu(1e-6, 1e-3), .ag_beta = logu(1e-11, 1e-8), .n_ag = logu(1e4, 1e9),
            .rs_alpha = logu(1e-6, 1e-3), .rs_beta = logu(1e-11, 1e-8), .n_rs = logu(1e4, 1e9),
            .exp_alpha = logu(1e-6, 1e-3), .exp_beta = logu(1e-14, 1e-11),
            .n_exp = logu(1e6, 1e13), .t_gar = 0.0, .r_max = 1 + rand() % 64,
        };
        if (rand() % 3 == 0) p.t_gar = logu(1e-5, 1.0);
        if (rand() % 8 == 0) p.n_a2a = 0.0;
        if (rand() % 8 == 0) p.n_ag = p.n_rs = 0.0;
        pipeline_result s, e;
        assert_int_equal(pipeline_solve(&p, PIPELINE_SLSQP, &s, NULL), FSMOE_OK);
        assert_int_equal(pipeline_solve(&p, PIPELINE_EXHAUSTIVE, &e, NULL), FSMOE_OK);
        double rel = fabs(s.time_s - e.time_s) / e.time_s;
        if (rel > 1e-12)
            fail_msg("problem %d: SLSQP r=%d F=%.17g, exhaustive r=%d F=%.17g", it, s.r,
                     s.time_s, e.r, e.time_s);
        if (s.r != e.r)
            n_ties++; /* only allowed when F ties to 1e-12 (checked above) */
        assert_true(s.r >= 1 && s.r <= p.r_max);
    }
    assert_true(n_ties < 50);
}

static void test_paper_differs(void **state)
{
    (void)state;
    /* No ESP collectives, cheap AllToAll launches but a heavy payload, costly expert launches.
     * f4 = 2·t_a2a shrinks with r and has the smallest single minimum, so Algorithm 1 takes
     * r = r_max, where the expert launches (r·α_exp) make the layer take ~70 s. Hand: our F at
     * r = 1 is max(f2 = 2·1.001 + 1.101 = 3.103, f3 = 2.002) = 3.103; F(2) = 1.002 + 2.201. */
    pipeline_problem p = {
        .a2a_alpha = 0.001, .a2a_beta = 1.0, .n_a2a = 1.0,
        .exp_alpha = 1.1, .exp_beta = 0.001, .n_exp = 1.0,
        .r_max = 64,
    };
    pipeline_result paper, ours;
    assert_int_equal(pipeline_solve(&p, PIPELINE_PAPER, &paper, NULL), FSMOE_OK);
    assert_int_equal(pipeline_solve(&p, PIPELINE_SLSQP, &ours, NULL), FSMOE_OK);
    assert_int_equal(paper.r, 64);
    assert_int_equal(ours.r, 1);
    assert_true(fabs(ours.time_s - 3.103) < 1e-9);
    assert_int_equal(ours.binding_case, 2);
    /* F(64) = f2(64) = 2(0.001 + 1/64) + 64·1.1 + 0.001 */
    assert_true(fabs(paper.time_s - (2.0 * (0.001 + 1.0 / 64) + 64 * 1.1 + 0.001)) < 1e-9);
    assert_true(paper.time_s > 20.0 * ours.time_s);
}

static void test_zero_workloads(void **state)
{
    (void)state;
    pipeline_problem p = base_problem();
    p.n_a2a = p.n_ag = p.n_rs = p.n_exp = 0.0;
    for (int m = 0; m < 3; m++) {
        pipeline_result res;
        assert_int_equal(pipeline_solve(&p, (pipeline_method)m, &res, NULL), FSMOE_OK);
        assert_int_equal(res.r, 1);
        assert_true(res.time_s == 0.0);
        for (int i = 0; i < 4; i++)
            assert_true(res.f[i] == 0.0);
    }
    assert_true(pipeline_overlappable(&p, 3) == 0.0);
    /* only the AllToAll is off: no α of it may appear */
    p = base_problem();
    p.n_a2a = 0.0;
    assert_true(pipeline_case_time(&p, 1, 5) == 0.0);
    assert_true(fabs(pipeline_case_time(&p, 3, 5) - 2 * (1e-4 + 1e-3 / 5)) < 1e-15);
}

static void test_overlappable(void **state)
{
    (void)state;
    /* §5 formulas, written out with t_x at r = 4 of base_problem variants. */
    pipeline_problem p = base_problem();
    p.n_exp = 1e12; /* case 2 */
    p.t_gar = 5.0;  /* must be ignored */
    double r = 4, t_a2a = 1e-4 + 1e-3 / r, t_ag = t_a2a, t_rs = t_a2a;
    double t_exp = 1e-4 + 1.0 / r;
    double want2 = r * t_exp + t_ag + t_rs - 2 * (r - 1) * t_a2a;
    assert_true(fabs(pipeline_overlappable(&p, 4) - want2) < 1e-12);
    p = base_problem();
    p.a2a_beta = 1e-7; /* case 3 */
    assert_true(fabs(pipeline_overlappable(&p, 4) - (t_ag + t_rs)) < 1e-15);
    p = base_problem();
    p.ag_beta = p.rs_beta = 1e-7; /* case 4 */
    double t_big = 1e-4 + 0.1 / r;
    double want4 = 2 * r * t_big - 2 * (r - 1) * t_a2a;
    assert_true(fabs(pipeline_overlappable(&p, 4) - want4) < 1e-12);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_values),
        cmocka_unit_test(test_case_table),
        cmocka_unit_test(test_each_case_binds),
        cmocka_unit_test(test_slsqp_equals_exhaustive),
        cmocka_unit_test(test_paper_differs),
        cmocka_unit_test(test_zero_workloads),
        cmocka_unit_test(test_overlappable),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    pipeline_thread_release();
    return rc;
}
