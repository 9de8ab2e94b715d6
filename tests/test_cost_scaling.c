/* Tests: the group-size rule of the cost model (libfsmoe/cost.h): a profile's (op, tier) at
 * several group sizes, the exact match, bus-bandwidth scaling from one size, interpolation
 * between two, extrapolation outside them, and the planner's lines for FSMoE Testbed A at
 * 2 / 4 / 6 nodes (FSMoE Fig. 7's P = 16 / 32 / 48). Expected values are computed by hand in
 * the comments (nccl-tests' busbw factors: s(p) = (p−1)/p, AllReduce 2(p−1)/p). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster.h"
#include "cluster_write.h"
#include "cost.h"
#include "parallel.h"
#include "test_fs.h"
#include "workload.h"

static void assert_rel(double got, double want, double tol)
{
    double d = fabs(got - want), s = fabs(want) > 0.0 ? fabs(want) : 1.0;
    if (d / s > tol)
        fail_msg("got %.12g, want %.12g (relative error %.3g > %.3g)", got, want, d / s, tol);
}

static fsmoe_cost_entry mk(int ranks, double alpha, double beta)
{
    fsmoe_cost_entry e;
    memset(&e, 0, sizeof e);
    e.present = 1;
    e.ranks = ranks;
    e.alpha_s = alpha;
    e.beta_s = beta;
    e.r2 = 1.0;
    return e;
}

static void test_busbw_factor(void **state)
{
    (void)state;
    assert_rel(fsmoe_busbw_factor(FSMOE_OP_ALLTOALL, 6), 5.0 / 6.0, 1e-15);
    assert_rel(fsmoe_busbw_factor(FSMOE_OP_ALLGATHER, 8), 7.0 / 8.0, 1e-15);
    assert_rel(fsmoe_busbw_factor(FSMOE_OP_REDUCESCATTER, 2), 0.5, 1e-15);
    assert_rel(fsmoe_busbw_factor(FSMOE_OP_ALLREDUCE, 4), 1.5, 1e-15);
    assert_rel(fsmoe_busbw_factor(FSMOE_OP_GEMM, 8), 1.0, 1e-15);
}

/* One measured size: β scales by s(p)/s(p0), α stays. */
static void test_one_size(void **state)
{
    (void)state;
    fsmoe_cost_entry six = mk(6, 2.87e-4, 5.525e-11);
    const fsmoe_cost_entry *e[1] = {&six};
    char how[320];
    /* alltoall 6 -> 4: (3/4)/(5/6) = 0.9; 6 -> 2: (1/2)/(5/6) = 0.6; 6 -> 8: (7/8)/(5/6) = 1.05 */
    const int to[3] = {4, 2, 8};
    const double ratio[3] = {0.9, 0.6, 1.05};
    for (int i = 0; i < 3; i++) {
        fsmoe_line l = fsmoe_line_at_ranks(FSMOE_OP_ALLTOALL, e, 1, to[i], how, sizeof how);
        assert_rel(l.beta_s, 5.525e-11 * ratio[i], 1e-12);
        assert_true(l.alpha_s == 2.87e-4);
        assert_null(l.entry);
        assert_non_null(strstr(how, "measured at 6 ranks, scaled to"));
    }
    /* AllReduce: the factor 2 cancels, same ratios: 6 -> 4 is 1.5/(5/3) = 0.9 */
    fsmoe_line l = fsmoe_line_at_ranks(FSMOE_OP_ALLREDUCE, e, 1, 4, how, sizeof how);
    assert_rel(l.beta_s, 5.525e-11 * 0.9, 1e-12);
    assert_non_null(strstr(how, "s(n) = 2(n-1)/n"));
    /* the measured size itself: the entry, no note */
    l = fsmoe_line_at_ranks(FSMOE_OP_ALLTOALL, e, 1, 6, how, sizeof how);
    assert_ptr_equal(l.entry, &six);
    assert_string_equal(how, "");
    /* ranks <= 0: the widest as measured */
    l = fsmoe_line_at_ranks(FSMOE_OP_ALLTOALL, e, 1, 0, how, sizeof how);
    assert_ptr_equal(l.entry, &six);
}

/* Several sizes: the exact one wins even where the others would scale to something else. */
static void test_exact_match(void **state)
{
    (void)state;
    fsmoe_cost_entry a = mk(2, 1e-4, 1e-10), b = mk(4, 7e-4, 9e-10), c = mk(6, 3e-4, 5e-10);
    const fsmoe_cost_entry *e[3] = {&a, &b, &c};
    char how[320];
    fsmoe_line l = fsmoe_line_at_ranks(FSMOE_OP_ALLGATHER, e, 3, 4, how, sizeof how);
    assert_ptr_equal(l.entry, &b);
    assert_true(l.alpha_s == 7e-4 && l.beta_s == 9e-10);
    assert_string_equal(how, "");
}

/* Two sizes, 2 and 6: between them β/s and α are linear in p; outside, busbw of the nearest and
 * α on the line through both. */
static void test_two_sizes(void **state)
{
    (void)state;
    fsmoe_cost_entry a = mk(2, 1e-4, 2e-10), c = mk(6, 3e-4, 5e-10);
    const fsmoe_cost_entry *e[2] = {&a, &c};
    char how[320];
    /* p = 4: w = 1/2; β/s: 2e-10/(1/2) = 4e-10 and 5e-10/(5/6) = 6e-10 -> 5e-10; β = 5e-10·3/4 */
    fsmoe_line l = fsmoe_line_at_ranks(FSMOE_OP_ALLTOALL, e, 2, 4, how, sizeof how);
    assert_rel(l.beta_s, 3.75e-10, 1e-12);
    assert_rel(l.alpha_s, 2e-4, 1e-12);
    assert_non_null(strstr(how, "measured at 2 and 6 ranks, interpolated to 4"));
    /* p = 3: w = 1/4; β/s = 4.5e-10; β = 4.5e-10·2/3 = 3e-10; α = 1.5e-4 */
    l = fsmoe_line_at_ranks(FSMOE_OP_ALLTOALL, e, 2, 3, how, sizeof how);
    assert_rel(l.beta_s, 3e-10, 1e-12);
    assert_rel(l.alpha_s, 1.5e-4, 1e-12);
    /* p = 8: busbw of 6 (β/s = 6e-10): β = 6e-10·7/8 = 5.25e-10; α slope 5e-5/rank: 4e-4 */
    l = fsmoe_line_at_ranks(FSMOE_OP_ALLTOALL, e, 2, 8, how, sizeof how);
    assert_rel(l.beta_s, 5.25e-10, 1e-12);
    assert_rel(l.alpha_s, 4e-4, 1e-12);
    assert_non_null(strstr(how, "extrapolated to 8"));
    /* below both (4 and 6 measured, p = 2): β = (5e-10/(5/6))·(1/2) = 3e-10; α = 3e-4 − 2·5e-5 */
    fsmoe_cost_entry b4 = mk(4, 2e-4, 4e-10);
    const fsmoe_cost_entry *e46[2] = {&b4, &c};
    l = fsmoe_line_at_ranks(FSMOE_OP_ALLTOALL, e46, 2, 2, how, sizeof how);
    assert_rel(l.beta_s, (4e-10 / 0.75) * 0.5, 1e-12);
    assert_rel(l.alpha_s, 1e-4, 1e-12);
    /* α falling with more ranks (noise): held at the nearest beyond the measured sizes */
    fsmoe_cost_entry hi = mk(2, 3e-4, 2e-10), lo = mk(6, 1e-4, 5e-10);
    const fsmoe_cost_entry *ef[2] = {&hi, &lo};
    l = fsmoe_line_at_ranks(FSMOE_OP_ALLTOALL, ef, 2, 8, how, sizeof how);
    assert_rel(l.alpha_s, 1e-4, 1e-12);
    /* and never below zero going down */
    fsmoe_cost_entry s4 = mk(4, 1e-5, 4e-10), s6 = mk(6, 1e-3, 5e-10);
    const fsmoe_cost_entry *es[2] = {&s4, &s6};
    l = fsmoe_line_at_ranks(FSMOE_OP_ALLTOALL, es, 2, 2, how, sizeof how);
    assert_true(l.alpha_s == 0.0);
}

static const char two_sizes_doc[] =
    "fsmoe_cluster: 1\n"
    "name: two\n"
    "source: test\n"
    "nodes: 6\n"
    "gpus_per_node: 8\n"
    "ops:\n"
    "  - op: alltoall\n"
    "    tier: inter\n"
    "    ranks: 6\n"
    "    alpha_s: 3e-4\n"
    "    beta_s_per_byte: 5e-10\n"
    "    r2: 0.999\n"
    "    points: [[1048576, 8.2e-4], [4194304, 2.4e-3]]\n"
    "  - op: alltoall\n"
    "    tier: inter\n"
    "    ranks: 2\n"
    "    alpha_s: 1e-4\n"
    "    beta_s_per_byte: 2e-10\n"
    "    r2: 0.998\n"
    "  - op: gemm\n"
    "    tier: local\n"
    "    alpha_s: 1e-5\n"
    "    beta_s_per_mac: 1e-14\n"
    "    r2: 1\n";

/* A profile with two sizes of one (op, tier): read in any order, interpolated through the
 * public lookup with a note, and written back with both. */
static void test_profile_two_sizes(void **state)
{
    (void)state;
    fsmoe_cluster c;
    fsmoe_error err = {0};
    if (fsmoe_cluster_parse("two.yaml", two_sizes_doc, sizeof two_sizes_doc - 1, &c, &err))
        fail_msg("%s", err.msg);
    const fsmoe_cost_entry *all[4];
    assert_int_equal(fsmoe_cluster_entries(&c, FSMOE_OP_ALLTOALL, FSMOE_TIER_INTER, all, 4), 2);
    assert_int_equal(all[0]->ranks, 2);
    assert_int_equal(all[1]->ranks, 6);
    assert_int_equal(all[0]->line, 14);
    assert_int_equal(all[1]->n_points, 2);
    /* the widest stays where single-size readers look */
    assert_int_equal(c.ops[FSMOE_OP_ALLTOALL][FSMOE_TIER_INTER].ranks, 6);
    fsmoe_line l;
    char note[1024] = "";
    assert_int_equal(fsmoe_cost_line_at(&c, "two.yaml", FSMOE_OP_ALLTOALL, FSMOE_TIER_INTER, 4,
                                        &l, note, sizeof note, &err),
                     FSMOE_OK);
    assert_rel(l.beta_s, 3.75e-10, 1e-12);
    assert_rel(l.alpha_s, 2e-4, 1e-12);
    assert_non_null(strstr(note, "alltoall inter: measured at 2 and 6 ranks, interpolated to 4"));
    /* exact: the 2-rank entry itself, no note */
    note[0] = '\0';
    assert_int_equal(fsmoe_cost_line_at(&c, "two.yaml", FSMOE_OP_ALLTOALL, FSMOE_TIER_INTER, 2,
                                        &l, note, sizeof note, &err),
                     FSMOE_OK);
    assert_ptr_equal(l.entry, all[0]);
    assert_string_equal(note, "");
    /* the world tier falls back to inter at ceil(p/G) nodes: 32 ranks of 8 per node -> 4 */
    note[0] = '\0';
    assert_int_equal(fsmoe_cost_line_at(&c, "two.yaml", FSMOE_OP_ALLTOALL, FSMOE_TIER_WORLD, 32,
                                        &l, note, sizeof note, &err),
                     FSMOE_OK);
    assert_rel(l.beta_s, 3.75e-10, 1e-12);
    assert_non_null(strstr(note, "interpolated to 4"));
    assert_non_null(strstr(note, "alltoall world: not in the profile"));

    /* written and read back: both sizes, narrowest first */
    char dir[] = "/tmp/fsmoe-cost-scaling-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/p.yaml", dir);
    if (fsmoe_cluster_write(path, &c, NULL, &err))
        fail_msg("%s", err.msg);
    fsmoe_cluster d;
    if (fsmoe_cluster_load(path, &d, &err))
        fail_msg("%s", err.msg);
    const fsmoe_cost_entry *back[4];
    assert_int_equal(fsmoe_cluster_entries(&d, FSMOE_OP_ALLTOALL, FSMOE_TIER_INTER, back, 4), 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(back[i]->ranks, all[i]->ranks);
        assert_rel(back[i]->alpha_s, all[i]->alpha_s, 1e-6);
        assert_rel(back[i]->beta_s, all[i]->beta_s, 1e-6);
        assert_int_equal(back[i]->n_points, all[i]->n_points);
    }
    assert_true(back[0]->line < back[1]->line);
    fsmoe_cluster_free(&d);
    test_remove_tree(dir);
    fsmoe_cluster_free(&c);
}

/* fsmoe_cluster_add refuses a second (op, tier, ranks) and keeps the widest in ops[][]. */
static void test_add(void **state)
{
    (void)state;
    fsmoe_cluster c;
    memset(&c, 0, sizeof c);
    fsmoe_error err = {0};
    const int order[4] = {4, 8, 2, 6};
    for (int i = 0; i < 4; i++) {
        fsmoe_cost_entry e = mk(order[i], 1e-4 * order[i], 1e-10);
        assert_int_equal(fsmoe_cluster_add(&c, FSMOE_OP_ALLGATHER, FSMOE_TIER_INTRA, &e, &err),
                         FSMOE_OK);
    }
    fsmoe_cost_entry dup = mk(6, 1.0, 1.0);
    dup.line = 3;
    assert_int_equal(fsmoe_cluster_add(&c, FSMOE_OP_ALLGATHER, FSMOE_TIER_INTRA, &dup, &err),
                     FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "second entry for allgather on tier intra at 6 ranks"));
    const fsmoe_cost_entry *all[8];
    assert_int_equal(fsmoe_cluster_entries(&c, FSMOE_OP_ALLGATHER, FSMOE_TIER_INTRA, all, 8), 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(all[i]->ranks, 2 * (i + 1));
    assert_int_equal(c.ops[FSMOE_OP_ALLGATHER][FSMOE_TIER_INTRA].ranks, 8);
    assert_rel(all[2]->alpha_s, 6e-4, 1e-12);
    fsmoe_cluster_free(&c);
}

static void load_testbed_a(fsmoe_cluster *c)
{
    const char *root = getenv("FSMOE_SOURCE_ROOT");
    char path[1024];
    fsmoe_error err = {0};
    snprintf(path, sizeof path, "%s/clusters/testbed-a.yaml", root ? root : ".");
    if (fsmoe_cluster_load(path, c, &err))
        fail_msg("%s", err.msg);
}

/* FSMoE Fig. 7: Testbed A at P = 16 / 32 / 48 (2 / 4 / 6 nodes of 8, common layout). The
 * profile is Fig. 5's lines at 6 nodes, so the inter-node AllToAll (EP) and Gradient-AllReduce
 * (DP) at 2 and 4 nodes have β scaled by s(p)/s(6) = 0.6 and 0.9 and α as measured; the
 * intra-node lines (8 ranks in every case) do not change. */
static void test_testbed_a_nodes(void **state)
{
    (void)state;
    fsmoe_cluster c;
    load_testbed_a(&c);
    const fsmoe_cost_entry *a2a = &c.ops[FSMOE_OP_ALLTOALL][FSMOE_TIER_INTER];
    const fsmoe_cost_entry *ar = &c.ops[FSMOE_OP_ALLREDUCE][FSMOE_TIER_INTER];
    const fsmoe_cost_entry *ag = &c.ops[FSMOE_OP_ALLGATHER][FSMOE_TIER_INTRA];
    const int nodes[3] = {2, 4, 6};
    const double ratio[3] = {0.6, 0.9, 1.0};
    workload_lines w[3];
    for (int i = 0; i < 3; i++) {
        fsmoe_parallel par = fsmoe_parallel_common(nodes[i], 8);
        fsmoe_error err = {0};
        if (workload_lines_init(&c, "clusters/testbed-a.yaml", &par, &w[i], &err))
            fail_msg("%s", err.msg);
        assert_rel(w[i].a2a_ep.beta_s, a2a->beta_s * ratio[i], 1e-12);
        assert_rel(w[i].ar_dp.beta_s, ar->beta_s * ratio[i], 1e-12);
        assert_true(w[i].a2a_ep.alpha_s == a2a->alpha_s);
        assert_true(w[i].ar_dp.alpha_s == ar->alpha_s);
        assert_true(w[i].ag_esp.beta_s == ag->beta_s);
        char want[128];
        if (nodes[i] == 6) {
            assert_ptr_equal(w[i].a2a_ep.entry, a2a);
            assert_null(strstr(w[i].notes, "scaled"));
        } else {
            snprintf(want, sizeof want, "alltoall inter: measured at 6 ranks, scaled to %d by bus "
                     "bandwidth", nodes[i]);
            assert_non_null(strstr(w[i].notes, want));
            snprintf(want, sizeof want, "allreduce inter: measured at 6 ranks, scaled to %d by bus "
                     "bandwidth", nodes[i]);
            assert_non_null(strstr(w[i].notes, want));
        }
    }
    /* a 1 MB AllToAll: 2 nodes < 4 nodes < 6 nodes */
    double t[3];
    for (int i = 0; i < 3; i++)
        t[i] = fsmoe_line_time(&w[i].a2a_ep, 1 << 20);
    assert_true(t[0] < t[1] && t[1] < t[2]);
    fsmoe_cluster_free(&c);
}

/* The pipeline degree never cuts an AllToAll below the smallest message the profile measured
 * for its line (workload.h workload_min_chunk), nor below 64 KB; a line without points keeps
 * the 64 KB bound. Independent side: the counts by hand. */
static void test_min_chunk_from_points(void **state)
{
    (void)state;
    fsmoe_point pts[2] = {{1048576.0, 1e-3}, {2097152.0, 2e-3}};
    fsmoe_cost_entry e;
    memset(&e, 0, sizeof e);
    e.n_points = 2, e.points = pts;
    fsmoe_line measured = {0.0, 1e-9, &e}, fitted_only = {0.0, 1e-9, NULL};
    assert_true(workload_min_chunk(&measured) == 1048576.0);
    assert_true(workload_min_chunk(&fitted_only) == WORKLOAD_MIN_CHUNK_BYTES);
    e.n_points = 0; /* an entry without its points */
    assert_true(workload_min_chunk(&measured) == WORKLOAD_MIN_CHUNK_BYTES);
    /* 2.5 MB of AllToAll and 600 tokens per expert: 2 chunks of ≥ 1 MB, 38 of ≥ 64 KB */
    assert_int_equal(workload_r_max(600.0, 2.5 * 1048576.0, 1048576.0), 2);
    assert_int_equal(workload_r_max(600.0, 2.5 * 1048576.0, WORKLOAD_MIN_CHUNK_BYTES), 40);
    /* below one chunk: 1; no AllToAll: the token bound only */
    assert_int_equal(workload_r_max(600.0, 0.5 * 1048576.0, 1048576.0), 1);
    assert_int_equal(workload_r_max(20.0, 0.0, 1048576.0), 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_busbw_factor),   cmocka_unit_test(test_one_size),
        cmocka_unit_test(test_exact_match),    cmocka_unit_test(test_two_sizes),
        cmocka_unit_test(test_profile_two_sizes), cmocka_unit_test(test_add),
        cmocka_unit_test(test_testbed_a_nodes),
        cmocka_unit_test(test_min_chunk_from_points),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
