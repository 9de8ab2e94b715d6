/* Tests: planner/monta_a2a.c against MoNTA Table 8 (2 nodes × 8 A800, t = 8, e = 2,
 * B1 = 25 GB/s, B2 = 200 GB/s, B3 = 1.6 TB/s, I = 256 MB with MB = 1e6) and the large-message
 * limit T_O3/T_base → 7/32 (design.md §7). The paper truncates its printed times (0.37471 ms is
 * printed 0.374), hence the 0.5 % tolerance. Then the costs the formulas leave out against
 * MoNTA §6: the strategies Fig. 14 measured best per size and the end-to-end run on 2×70B. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "monta_a2a.h"

#define MB 1e6

static void close_rel(double got, double want, double tol, const char *what)
{
    if (!(fabs(got - want) <= tol * fabs(want)))
        fail_msg("%s: got %.6g, want %.6g (tolerance %.2g relative)", what, got, want, tol);
}

/* MoNTA Table 8's printed times in seconds */
static const double base_s = 6.909e-3, o1_a2a_s = 1.012e-3, o1_ag_s = 1.443e-3;
static const double c4_a2a_s = 0.374e-3, c4_ag_s = 0.385e-3, c4_copy_s = 0.05e-3;

/* T of O2 and O3 with N chunks, written from design.md §7 on the component times. */
static double ref_o2(const monta_problem *p, int N)
{
    double aa = monta_time_a2a(p, p->I / (N * (double)p->t)), ag = monta_time_ag(p, p->I / N);
    double d = monta_time_copy(p, p->I / N);
    return aa < ag + d ? aa + N * (ag + d) : N * aa + ag + d;
}

static double ref_o3(const monta_problem *p, int N)
{
    double aa = monta_time_a2a(p, p->I / (N * (double)p->t)), ag = monta_time_ag(p, p->I / N);
    double d = monta_time_copy(p, p->I / N);
    return aa < ag ? aa + N * ag + d : N * aa + ag + d;
}

static void check_table8(const monta_problem *p)
{
    close_rel(monta_time_a2a(p, 256 * MB), base_s, 5e-3, "baseline AllToAll 256 MB");
    close_rel(monta_time_a2a(p, 32 * MB), o1_a2a_s, 5e-3, "O1 AllToAll 32 MB");
    close_rel(monta_time_ag(p, 256 * MB), o1_ag_s, 5e-3, "O1 AllGather 256 MB");
    close_rel(monta_time_a2a(p, 8 * MB), c4_a2a_s, 5e-3, "4-chunk AllToAll 8 MB");
    close_rel(monta_time_ag(p, 64 * MB), c4_ag_s, 5e-3, "4-chunk AllGather 64 MB");
    close_rel(monta_time_copy(p, 64 * MB), c4_copy_s, 5e-3, "4-chunk copy 64 MB");

    monta_result r;
    monta_solve(p, &r);
    close_rel(r.t_base, base_s, 5e-3, "T_base");
    close_rel(r.t_o1, o1_a2a_s + o1_ag_s, 5e-3, "T_O1");
    /* 4 chunks from the printed parts: O2 AA < AG + D, O3 AA < AG */
    close_rel(ref_o2(p, 4), c4_a2a_s + 4 * (c4_ag_s + c4_copy_s), 5e-3, "T_O2(4)");
    close_rel(ref_o3(p, 4), c4_a2a_s + 4 * c4_ag_s + c4_copy_s, 5e-3, "T_O3(4)");
    /* the chunk search keeps the brute-force minimum over the admissible N */
    double best2 = INFINITY, best3 = INFINITY;
    int n2 = 0, n3 = 0;
    for (int N = 1; N <= 1024; N++) {
        if (N > 1 && (p->I / (N * (double)p->t) < p->I_minimal || p->I / N < p->I_minimal))
            break;
        if (ref_o2(p, N) < best2) best2 = ref_o2(p, N), n2 = N;
        if (ref_o3(p, N) < best3) best3 = ref_o3(p, N), n3 = N;
    }
    assert_int_equal(r.n_o2, n2);
    assert_int_equal(r.n_o3, n3);
    close_rel(r.t_o2, best2, 1e-12, "T_O2 search");
    close_rel(r.t_o3, best3, 1e-12, "T_O3 search");
    double m = fmin(r.t_o1, fmin(r.t_o2, r.t_o3));
    double chosen = r.best == FSMOE_A2A_O1 ? r.t_o1 : r.best == FSMOE_A2A_O2 ? r.t_o2 : r.t_o3;
    assert_true(r.best != FSMOE_A2A_BASE);
    assert_true(chosen == m);
    print_message("Table 8: base %.4f ms, O1 %.4f ms, O2 %.4f ms (N=%d), O3 %.4f ms (N=%d), "
                  "best %d\n", r.t_base * 1e3, r.t_o1 * 1e3, r.t_o2 * 1e3, r.n_o2,
                  r.t_o3 * 1e3, r.n_o3, (int)r.best);
}

/* An entry whose measured points are the efficiency form t = n·share/(B·r(n)). */
static void efficiency_entry(fsmoe_cost_entry *e, fsmoe_point *pts, int n, const double *sizes,
                             const double *eff, double share, double bw)
{
    memset(e, 0, sizeof *e);
    e->present = 1;
    e->n_points = n;
    e->points = pts;
    for (int i = 0; i < n; i++) {
        pts[i].n = sizes[i];
        pts[i].seconds = sizes[i] * share / (bw * eff[i]);
    }
    e->alpha_s = 0.0;
    e->beta_s = pts[n - 1].seconds / pts[n - 1].n;
}

static void test_table8_from_efficiencies(void **state)
{
    (void)state;
    /* MoNTA Table 8's efficiency points, independent of any profile file */
    static const double a2a_n[3] = {8 * MB, 32 * MB, 256 * MB}, a2a_r[3] = {0.427, 0.632, 0.741};
    static const double ag_n[2] = {64 * MB, 256 * MB}, ag_r[2] = {0.726, 0.776};
    static const double cp_n[1] = {64 * MB}, cp_r[1] = {0.8};
    fsmoe_point pa[3], pg[2], pc[1];
    fsmoe_cost_entry a2a, ag, cp;
    efficiency_entry(&a2a, pa, 3, a2a_n, a2a_r, 1.0 / 2, 25e9);
    efficiency_entry(&ag, pg, 2, ag_n, ag_r, 7.0 / 8, 200e9);
    efficiency_entry(&cp, pc, 1, cp_n, cp_r, 1.0, 1.6e12);
    monta_problem p = {.I = 256 * MB, .t = 8, .e = 2, .I_minimal = 8 * MB,
                       .a2a = &a2a, .ag = &ag, .copy = &cp};
    check_table8(&p);
}

static void test_table8_from_profile(void **state)
{
    (void)state;
    const char *root = getenv("FSMOE_SOURCE_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/clusters/monta-a800.yaml", root ? root : ".");
    fsmoe_cluster c;
    memset(&c, 0, sizeof c);
    fsmoe_error err = {0};
    if (fsmoe_cluster_load(path, &c, &err) != FSMOE_OK)
        fail_msg("%s", err.msg);
    const fsmoe_cost_entry *a2a = &c.ops[FSMOE_OP_ALLTOALL][FSMOE_TIER_INTER];
    const fsmoe_cost_entry *ag = &c.ops[FSMOE_OP_ALLGATHER][FSMOE_TIER_INTRA];
    const fsmoe_cost_entry *cp = &c.ops[FSMOE_OP_COPY][FSMOE_TIER_LOCAL];
    assert_true(a2a->present && ag->present && cp->present);
    monta_problem p = {.I = 256 * MB, .t = c.gpus_per_node, .e = c.nodes, .I_minimal = 8 * MB,
                       .a2a = a2a, .ag = ag, .copy = cp};
    assert_int_equal(p.t, 8);
    assert_int_equal(p.e, 2);
    check_table8(&p);
    fsmoe_cluster_free(&c);
}

static void test_large_message_limit(void **state)
{
    (void)state;
    /* Efficiencies constant (pure lines through the origin), B2 = 8·B1, copy free:
     * T_base = I/2/B1, T_O3(N) = I/(16·N·B1) + 7·I/(64·B1) -> 7/32 of T_base. */
    const double B1 = 25e9;
    fsmoe_cost_entry a2a = {.present = 1, .alpha_s = 0.0, .beta_s = 0.5 / B1};
    fsmoe_cost_entry ag = {.present = 1, .alpha_s = 0.0, .beta_s = (7.0 / 8) / (8 * B1)};
    double prev = INFINITY, ratio = 0.0;
    for (double I = 1e8; I <= 1e11 * 1.01; I *= 10) {
        monta_problem p = {.I = I, .t = 8, .e = 2, .I_minimal = 1e6, .a2a = &a2a, .ag = &ag,
                           .copy = NULL};
        monta_result r;
        monta_solve(&p, &r);
        ratio = r.t_o3 / r.t_base;
        assert_true(ratio <= prev);
        assert_true(ratio > 7.0 / 32);
        prev = ratio;
    }
    close_rel(ratio, 7.0 / 32, 1e-2, "T_O3/T_base at I = 100 GB");
}

static void test_no_tensor_parallelism(void **state)
{
    (void)state;
    fsmoe_cost_entry a2a = {.present = 1, .alpha_s = 1e-5, .beta_s = 1e-10};
    monta_problem p = {.I = 1e8, .t = 1, .e = 4, .I_minimal = 1e6, .a2a = &a2a};
    monta_result r;
    monta_solve(&p, &r);
    assert_int_equal(r.best, FSMOE_A2A_BASE);
    close_rel(r.t_base, 1e-5 + 1e-2, 1e-12, "T_base");
    assert_int_equal(r.chunks, 1);
}

/* The Table 8 profile with the A800 costs, I = seq/8K · 256 MB, at most 4 chunks (Fig. 14 runs
 * every size in 4 chunks). */
static fsmoe_a2a_strategy fig14_choice(const fsmoe_cluster *c, int seq_k, double sync_s,
                                       double stall_s, monta_result *r)
{
    monta_problem p = {.I = 256 * MB * seq_k / 8, .t = 8, .e = 2,
                       .a2a = &c->ops[FSMOE_OP_ALLTOALL][FSMOE_TIER_INTER],
                       .ag = &c->ops[FSMOE_OP_ALLGATHER][FSMOE_TIER_INTRA],
                       .copy = &c->ops[FSMOE_OP_COPY][FSMOE_TIER_LOCAL],
                       .chunk_sync_s = sync_s, .o3_stall_s = stall_s};
    p.I_minimal = p.I / (4.0 * p.t); /* N ≤ 4 */
    monta_solve(&p, r);
    return r->best;
}

static void load_monta_profile(fsmoe_cluster *c)
{
    const char *root = getenv("FSMOE_SOURCE_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/clusters/monta-a800.yaml", root ? root : ".");
    memset(c, 0, sizeof *c);
    fsmoe_error err = {0};
    if (fsmoe_cluster_load(path, c, &err) != FSMOE_OK)
        fail_msg("%s", err.msg);
}

/* MoNTA §6, Fig. 14: 8K tokens runs best with O1, 32K–128K with O2, 256K with O3 (O3/base
 * 0.253 measured there). The paper's formulas alone pick O3 everywhere (O3 ≤ O2 by
 * construction); the two calibrated costs give the paper's choices, and each bound that
 * monta_a2a.h states is a real edge: just past it a choice flips. */
static void test_fig14_selections(void **state)
{
    (void)state;
    fsmoe_cluster c;
    load_monta_profile(&c);
    const double sync = MONTA_A800_CHUNK_SYNC_S, stall = MONTA_A800_O3_STALL_S;
    monta_result r;
    static const int seq[6] = {8, 16, 32, 64, 128, 256};
    for (int i = 0; i < 6; i++)
        assert_int_equal(fig14_choice(&c, seq[i], 0.0, 0.0, &r), FSMOE_A2A_O3);
    assert_int_equal(fig14_choice(&c, 8, sync, stall, &r), FSMOE_A2A_O1);
    assert_int_equal(fig14_choice(&c, 32, sync, stall, &r), FSMOE_A2A_O2);
    assert_int_equal(fig14_choice(&c, 64, sync, stall, &r), FSMOE_A2A_O2);
    assert_int_equal(fig14_choice(&c, 128, sync, stall, &r), FSMOE_A2A_O2);
    assert_int_equal(fig14_choice(&c, 256, sync, stall, &r), FSMOE_A2A_O3);
    /* Fig. 14's measured O3/base at 256K is 0.253 */
    close_rel(r.t_o3 / r.t_base, 0.253, 0.06, "O3/base at 256K");
    /* the bounds: sync ≥ 75 µs for O1 at 8K, stall > 0.63 ms for O2 at 128K, < 1.5 ms at 256K */
    assert_int_equal(fig14_choice(&c, 8, 60e-6, stall, &r), FSMOE_A2A_O2);
    assert_int_equal(fig14_choice(&c, 128, sync, 0.6e-3, &r), FSMOE_A2A_O3);
    assert_int_equal(fig14_choice(&c, 256, sync, 1.6e-3, &r), FSMOE_A2A_O2);
    fsmoe_cluster_free(&c);
}

/* MoNTA §6 end to end (2×70B, 8K, t = 8, e = 2, 16 A800): O1 and O2 comparable, about 13 %
 * faster than the baseline, O3 behind both; MoNTA chose O1. Tolerance: 5 points on the gain
 * (the baseline's AllToAll share is 27 % here, 22 % measured: compute outside the GEMMs is not
 * modelled), 1 point between O1 and O2. */
static void test_end_to_end(void **state)
{
    (void)state;
    const char *root = getenv("FSMOE_SOURCE_ROOT");
    fsmoe_error err = {0};
    monta_e2e paper, a800;
    if (monta_end_to_end_paper(root, 1, &paper, &err) != FSMOE_OK ||
        monta_end_to_end_paper(root, 0, &a800, &err) != FSMOE_OK)
        fail_msg("%s", err.msg);
    /* the paper's formulas rank O3 first: the defect the two costs fix */
    assert_int_equal(paper.best, FSMOE_A2A_O3);
    const monta_e2e *e = &a800;
    for (int k = 0; k < 4; k++)
        print_message("end to end %s: AllToAll %.3f ms (N=%d), iteration %.3f s, AllToAll share "
                      "%.1f %%, gain %.1f %%\n", fsmoe_a2a_strategy_name((fsmoe_a2a_strategy)k),
                      e->a2a_s[k] * 1e3, e->chunks[k], e->iteration_s[k], 100 * e->a2a_share[k],
                      100 * e->gain[k]);
    assert_int_equal(e->best, FSMOE_A2A_O1);
    assert_true(e->iteration_s[FSMOE_A2A_O1] <= e->iteration_s[FSMOE_A2A_O2]);
    assert_true(e->iteration_s[FSMOE_A2A_O2] < e->iteration_s[FSMOE_A2A_O3]);
    assert_true(e->iteration_s[FSMOE_A2A_O3] < e->iteration_s[FSMOE_A2A_BASE]);
    assert_true(fabs(e->gain[FSMOE_A2A_O1] - 0.13) <= 0.05);
    assert_true(fabs(e->gain[FSMOE_A2A_O2] - 0.13) <= 0.05);
    assert_true(fabs(e->gain[FSMOE_A2A_O1] - e->gain[FSMOE_A2A_O2]) <= 0.01);
    /* the iteration is its parts: I = k·B·L·M·b, 4 AllToAlls per MoE layer */
    close_rel(e->I, 2.0 * 8192 * 8192 * 2, 1e-12, "I");
    assert_int_equal(e->moe_layers, 80);
    close_rel(e->iteration_s[FSMOE_A2A_O2], e->other_s + 4 * 80 * e->a2a_s[FSMOE_A2A_O2], 1e-12,
              "O2 iteration");
    close_rel(e->a2a_share[FSMOE_A2A_BASE], 4 * 80 * e->a2a_s[0] / e->iteration_s[0], 1e-12,
              "baseline share");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table8_from_efficiencies),
        cmocka_unit_test(test_table8_from_profile),
        cmocka_unit_test(test_large_message_limit),
        cmocka_unit_test(test_no_tensor_parallelism),
        cmocka_unit_test(test_fig14_selections),
        cmocka_unit_test(test_end_to_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
