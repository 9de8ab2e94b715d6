/* Tests: the group-size rule of the cost model (libfsmoe/cost.h): a profile's (op, tier) at
 * several group sizes, the exact match, bus-bandwidth scaling from one size, interpolation
 * between two, extrapolation outside them, and the planner's lines for FSMoE Testbed A at
 * 2 / 4 / 6 nodes (FSMoE Fig. 7's P = 16 / 32 / 48), and the hierarchical AllToAll's line
 * (measured, or derived as the sum of its phases and copies) and which groups have one; GEMM
 * lines per expert shape.
 * Expected values are computed by hand in the comments (nccl-tests' busbw factors: s(p) = (p−1)/p, AllReduce 2(p−1)/p). */
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

static void parse(const char *name, const char *doc, fsmoe_cluster *c)
{
    fsmoe_error err = {0};
    if (fsmoe_cluster_parse(name, doc, strlen(doc), c, &err))
        fail_msg("%s", err.msg);
}

/* c written by fsmoe_cluster_write and read back into d. */
static void write_read(const fsmoe_cluster *c, fsmoe_cluster *d)
{
    char dir[] = "/tmp/fsmoe-cost-scaling-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/p.yaml", dir);
    fsmoe_error err = {0};
    if (fsmoe_cluster_write(path, c, NULL, &err))
        fail_msg("%s", err.msg);
    if (fsmoe_cluster_load(path, d, &err))
        fail_msg("%s", err.msg);
    test_remove_tree(dir);
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

/* doc with the first occurrence of each from[i] replaced by to[i], into out (out_len bytes). */
static void subst(const char *doc, const char *const *from, const char *const *to, int n,
                  char *out, size_t out_len)
{
    snprintf(out, out_len, "%s", doc);
    for (int i = 0; i < n; i++) {
        char *at = strstr(out, from[i]), rest[2048];
        assert_non_null(at);
        snprintf(rest, sizeof rest, "%s", at + strlen(from[i]));
        snprintf(at, out_len - (size_t)(at - out), "%s%s", to[i], rest);
    }
}

/* The notes say which measured fits below the profile's r2 threshold a line rests on: the
 * 2-rank AllToAll (r2 0.93 here) when it is used as measured, interpolated or scaled from; not
 * the 6-rank one alone (0.999); a GEMM shape below the threshold too. */
static void test_low_r2_notes(void **state)
{
    (void)state;
    fsmoe_cluster c;
    fsmoe_error err = {0};
    const char *from[3] = {"    r2: 0.998\n", "    alpha_s: 1e-5\n", "    r2: 1\n"};
    const char *to[3] = {"    r2: 0.93\n", "    shape: [64, 256]\n    alpha_s: 1e-5\n",
                         "    r2: 0.95\n"};
    char low_r2_doc[2048];
    subst(two_sizes_doc, from, to, 3, low_r2_doc, sizeof low_r2_doc);
    parse("low.yaml", low_r2_doc, &c);
    fsmoe_line l;
    const int ranks[4] = {2, 4, 6, 8};
    const int low[4] = {1, 1, 0, 1}; /* 8: scaled from 6, its alpha on the line through 2 */
    for (int i = 0; i < 4; i++) {
        char note[2048] = "";
        assert_int_equal(fsmoe_cost_line_at(&c, "low.yaml", FSMOE_OP_ALLTOALL, FSMOE_TIER_INTER,
                                            ranks[i], &l, note, sizeof note, &err),
                         FSMOE_OK);
        const char *hit = strstr(note, "LOW R2: alltoall inter at 2 ranks (profile line 14) "
                                       "fits with r2 0.9300 < 0.99");
        if (low[i])
            assert_non_null(hit);
        else
            assert_null(strstr(note, "LOW R2"));
    }
    char note[2048] = "";
    assert_int_equal(fsmoe_cost_line_gemm(&c, "low.yaml", 64, 256, &l, note, sizeof note, &err),
                     FSMOE_OK);
    assert_non_null(strstr(note, "LOW R2: gemm local shape 64:256 at 1 rank (profile line 20) "
                                 "fits with r2 0.9500"));
    fsmoe_cluster_free(&c);
}

/* A profile with two sizes of one (op, tier): read in any order, interpolated through the
 * public lookup with a note, and written back with both. */
static void test_profile_two_sizes(void **state)
{
    (void)state;
    fsmoe_cluster c;
    fsmoe_error err = {0};
    parse("two.yaml", two_sizes_doc, &c);
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
    fsmoe_cluster d;
    write_read(&c, &d);
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
        if (workload_lines_init(&c, "clusters/testbed-a.yaml", &par, NULL, &w[i], &err))
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
    fsmoe_line measured = {0.0, 1e-9, &e, {&e, NULL}}, fitted_only = {0.0, 1e-9, NULL, {NULL, NULL}};
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

/* Element-wise passes (workload.h workload_elementwise_s) from the copy's measured points. By
 * hand, 2 passes over 4 arrays of 128 KB: 256 KB of copy traffic, 128 KB per pass, between
 * the points at 64 KB (10 µs) and 256 KB (40 µs): a third of the way, 20 µs; 2 passes 40 µs.
 * The line (α 179 µs, β 1.5e-10) would say 2 x 179 + 39.3 µs = 397 µs. */
static void test_elementwise_from_points(void **state)
{
    (void)state;
    fsmoe_point pts[3] = {{65536.0, 1e-5}, {262144.0, 4e-5}, {1048576.0, 2e-4}};
    fsmoe_cost_entry e;
    memset(&e, 0, sizeof e);
    e.present = 1, e.alpha_s = 179e-6, e.beta_s = 1.5e-10, e.n_points = 3, e.points = pts;
    workload_lines w;
    memset(&w, 0, sizeof w);
    w.have_copy = 1;
    w.copy = (fsmoe_line){179e-6, 1.5e-10, &e, {&e, NULL}};
    assert_rel(workload_elementwise_s(&w, 2, 4.0, 131072.0), 4e-5, 1e-12);
    /* one pass of 1.5 MB, beyond the points: the line */
    assert_rel(workload_elementwise_s(&w, 1, 2.0, 1.5 * 1048576.0),
               179e-6 + 1.5e-10 * 1.5 * 1048576.0, 1e-12);
    /* on a point: the point */
    assert_rel(workload_elementwise_s(&w, 3, 6.0, 262144.0), 3 * 4e-5, 1e-12);
    /* no launch of its own: the bytes at β */
    assert_rel(workload_elementwise_s(&w, 0, 1.0, 262144.0), 1.5e-10 * 131072.0, 1e-12);
    assert_true(workload_elementwise_s(&w, 2, 4.0, 0.0) == 0.0);
    /* a line without points (a derived profile): α per pass plus β per byte */
    w.copy.entry = NULL;
    assert_rel(workload_elementwise_s(&w, 2, 4.0, 131072.0), 2 * 179e-6 + 1.5e-10 * 262144.0,
               1e-12);
    w.copy.entry = &e, e.n_points = 1;
    assert_rel(workload_elementwise_s(&w, 2, 4.0, 131072.0), 2 * 179e-6 + 1.5e-10 * 262144.0,
               1e-12);
    w.have_copy = 0;
    assert_true(workload_elementwise_s(&w, 2, 4.0, 131072.0) == 0.0);
}

/* ---- the hierarchical AllToAll (cost.h fsmoe_cost_line_2dh) ---- */

/* 4 nodes x 4 GPUs: flat AllToAll on the world tier, its two phases on intra and inter, and a
 * copy; `extra` adds entries (e.g. a measured alltoall_2dh). */
static void parse_4x4(fsmoe_cluster *c, const char *extra)
{
    char doc[4096];
    snprintf(doc, sizeof doc,
             "fsmoe_cluster: 1\n"
             "name: four-by-four\n"
             "source: test\n"
             "nodes: 4\n"
             "gpus_per_node: 4\n"
             "ops:\n"
             "  - {op: gemm, tier: local, ranks: 1, alpha_s: 2e-5, beta_s_per_mac: 1e-14, r2: 1}\n"
             "  - {op: alltoall, tier: world, ranks: 16, alpha_s: 1.5e-3, beta_s_per_byte: 1e-10, r2: 1}\n"
             "  - {op: alltoall, tier: inter, ranks: 4, alpha_s: 3e-4, beta_s_per_byte: 1e-10, r2: 1}\n"
             "  - {op: alltoall, tier: intra, ranks: 4, alpha_s: 1e-5, beta_s_per_byte: 6e-12, r2: 1}\n"
             "  - {op: copy, tier: local, ranks: 1, alpha_s: 5e-6, beta_s_per_byte: 2e-12, r2: 1}\n"
             "  - {op: allreduce, tier: inter, ranks: 4, alpha_s: 2e-4, beta_s_per_byte: 2e-10, r2: 1}\n"
             "  - {op: allgather, tier: intra, ranks: 4, alpha_s: 1e-5, beta_s_per_byte: 5e-12, r2: 1}\n"
             "%s",
             extra ? extra : "");
    fsmoe_error err = {0};
    if (fsmoe_cluster_parse("4x4.yaml", doc, strlen(doc), c, &err))
        fail_msg("%s", err.msg);
}

/* Derived: the sum of its parts, each at its own group size. By hand, 4 nodes x 4:
 *   alpha = 1e-5 (intra) + 3e-4 (inter) + 3 x 5e-6 (copy)    = 3.25e-4 s
 *   beta  = 6e-12 + 1e-10 + 3 x 2e-12                        = 1.12e-10 s/byte
 * 4 nodes x 2 (an EP group striding esp = 2): the intra AllToAll measured at 4 ranks scaled to
 * 2 by bus bandwidth, beta x s(2)/s(4) = 0.5/0.75: 6e-12 x 2/3 = 4e-12, alpha as measured:
 *   beta  = 4e-12 + 1e-10 + 6e-12 = 1.1e-10, alpha = 3.25e-4.
 * 2 nodes x 4: inter at 2 ranks, beta x (1/2)/(3/4): 1e-10 x 2/3:
 *   beta  = 6e-12 + 6.6667e-11 + 6e-12 = 7.8667e-11, alpha = 3.25e-4. */
static void test_2dh_derived(void **state)
{
    (void)state;
    fsmoe_cluster c;
    parse_4x4(&c, NULL);
    fsmoe_error err = {0};
    fsmoe_line l;
    char note[1024] = "";
    assert_int_equal(fsmoe_cost_line_2dh(&c, "4x4.yaml", 4, 4, &l, note, sizeof note, &err),
                     FSMOE_OK);
    assert_rel(l.alpha_s, 3.25e-4, 1e-12);
    assert_rel(l.beta_s, 1.12e-10, 1e-12);
    assert_null(l.entry);
    assert_non_null(strstr(note, "alltoall_2dh world (4 nodes x 4): not in the profile, derived "
                                 "as alltoall(intra, 4 ranks) + alltoall(inter, 4 ranks) + 3 x "
                                 "copy"));
    /* the sum of the three lookups, through the public API */
    fsmoe_line a, b, cp;
    assert_int_equal(fsmoe_cost_line_at(&c, NULL, FSMOE_OP_ALLTOALL, FSMOE_TIER_INTRA, 4, &a,
                                        NULL, 0, &err), FSMOE_OK);
    assert_int_equal(fsmoe_cost_line_at(&c, NULL, FSMOE_OP_ALLTOALL, FSMOE_TIER_INTER, 4, &b,
                                        NULL, 0, &err), FSMOE_OK);
    assert_int_equal(fsmoe_cost_line(&c, NULL, FSMOE_OP_COPY, FSMOE_TIER_LOCAL, &cp, NULL, 0,
                                     &err), FSMOE_OK);
    assert_rel(l.alpha_s, a.alpha_s + b.alpha_s + 3.0 * cp.alpha_s, 1e-15);
    assert_rel(l.beta_s, a.beta_s + b.beta_s + 3.0 * cp.beta_s, 1e-15);
    /* fewer members per node: the intra phase scaled (and noted) */
    note[0] = '\0';
    assert_int_equal(fsmoe_cost_line_2dh(&c, "4x4.yaml", 4, 2, &l, note, sizeof note, &err),
                     FSMOE_OK);
    assert_rel(l.alpha_s, 3.25e-4, 1e-12);
    assert_rel(l.beta_s, 1.1e-10, 1e-12);
    assert_non_null(strstr(note, "alltoall intra: measured at 4 ranks, scaled to 2"));
    assert_int_equal(fsmoe_cost_line_2dh(&c, "4x4.yaml", 2, 4, &l, NULL, 0, &err), FSMOE_OK);
    assert_rel(l.beta_s, 6e-12 + 1e-10 * 2.0 / 3.0 + 6e-12, 1e-12);
    /* the generic lookup at the world tier = full nodes (16 ranks of 4: 4 x 4) */
    assert_int_equal(fsmoe_cost_line_at(&c, NULL, FSMOE_OP_ALLTOALL_2DH, FSMOE_TIER_WORLD, 16, &l,
                                        NULL, 0, &err), FSMOE_OK);
    assert_rel(l.beta_s, 1.12e-10, 1e-12);
    /* 2DH moves the bytes AllToAll moves: its bus-bandwidth factor is AllToAll's */
    assert_rel(fsmoe_busbw_factor(FSMOE_OP_ALLTOALL_2DH, 16), 15.0 / 16.0, 1e-15);
    fsmoe_cluster_free(&c);
}

/* A measured alltoall_2dh wins over the derivation; other sizes follow the group-size rule
 * (one size: beta x s(p)/s(16), alpha as measured). */
static void test_2dh_measured(void **state)
{
    (void)state;
    fsmoe_cluster c;
    parse_4x4(&c, "  - {op: alltoall_2dh, tier: world, ranks: 16, alpha_s: 2e-4, "
                  "beta_s_per_byte: 1.2e-10, r2: 0.999}\n");
    fsmoe_error err = {0};
    fsmoe_line l;
    char note[1024] = "";
    assert_int_equal(fsmoe_cost_line_2dh(&c, "4x4.yaml", 4, 4, &l, note, sizeof note, &err),
                     FSMOE_OK);
    assert_ptr_equal(l.entry, &c.ops[FSMOE_OP_ALLTOALL_2DH][FSMOE_TIER_WORLD]);
    assert_rel(l.alpha_s, 2e-4, 1e-15);
    assert_rel(l.beta_s, 1.2e-10, 1e-15);
    assert_string_equal(note, ""); /* measured at this size: nothing derived */
    /* 8 ranks (4 nodes x 2): beta x (7/8)/(15/16) */
    assert_int_equal(fsmoe_cost_line_2dh(&c, "4x4.yaml", 4, 2, &l, note, sizeof note, &err),
                     FSMOE_OK);
    assert_null(l.entry);
    assert_rel(l.alpha_s, 2e-4, 1e-15);
    assert_rel(l.beta_s, 1.2e-10 * (7.0 / 8.0) / (15.0 / 16.0), 1e-12);
    assert_non_null(strstr(note, "alltoall_2dh world: measured at 16 ranks, scaled to 8"));
    assert_null(strstr(note, "derived as"));
    /* the planner's lines name the measured fit in the notes */
    fsmoe_parallel par = {.world = 16, .gpus_per_node = 4, .dp = 16, .mp = 1, .ep = 16,
                          .esp = 1, .pp = 1};
    workload_lines w, wh;
    if (workload_lines_init(&c, "4x4.yaml", &par, NULL, &w, &err) ||
        workload_lines_2dh(&c, "4x4.yaml", &par, &w, &wh, &err))
        fail_msg("%s", err.msg);
    assert_true(wh.a2a_ep_2dh && wh.a2a_ep_esp_2dh);
    assert_rel(wh.a2a_ep.beta_s, 1.2e-10, 1e-15);
    assert_rel(w.a2a_ep.alpha_s, 1.5e-3, 1e-15); /* the flat lines stay */
    assert_non_null(strstr(wh.notes, "alltoall_2dh world (4 nodes x 4): measured at 16 ranks"));
    fsmoe_cluster_free(&c);
}

/* The gradient norm's sum over EP is an AllReduce (workload.c workload_optimizer_s): its line
 * where the profile measured AllReduce on EP's tier, else the EP AllToAll's α. dp 16 · ep 4 on
 * 4 nodes x 4: EP is 4 ranks inside a node. Without an intra AllReduce the norm's EP sum costs
 * the intra AllToAll's α (1e-5 s); with one measured at 4 ranks, its α (2e-6 s). */
static void test_norm_sum_over_ep(void **state)
{
    (void)state;
    fsmoe_parallel par = {.world = 16, .gpus_per_node = 4, .dp = 16, .mp = 1, .ep = 4,
                          .esp = 1, .pp = 1};
    fsmoe_cluster c0, c1;
    parse_4x4(&c0, NULL);
    parse_4x4(&c1, "  - {op: allreduce, tier: intra, ranks: 4, alpha_s: 2e-6, "
                   "beta_s_per_byte: 1e-12, r2: 1}\n");
    fsmoe_error err = {0};
    workload_lines w0, w1;
    if (workload_lines_init(&c0, "4x4.yaml", &par, NULL, &w0, &err) ||
        workload_lines_init(&c1, "4x4.yaml", &par, NULL, &w1, &err))
        fail_msg("%s", err.msg);
    assert_rel(w0.ar_ep.alpha_s, 1e-5, 1e-15); /* no AllReduce inside a node: the AllToAll */
    assert_rel(w0.ar_ep.beta_s, w0.a2a_ep.beta_s, 1e-15);
    assert_rel(w1.ar_ep.alpha_s, 2e-6, 1e-15);
    assert_rel(w1.ar_ep.beta_s, 1e-12, 1e-15);
    assert_rel(w0.a2a_ep.alpha_s, 1e-5, 1e-15);
    double bytes = 1e6;
    assert_rel(workload_optimizer_s(&w0, bytes) - workload_optimizer_s(&w1, bytes), 1e-5 - 2e-6,
               1e-9);
    /* A few bytes cost at most the smallest measured message: an AllReduce whose line meets
     * n = 0 at 4 ms, measured at 16 KB in 1 ms, prices the norm's EP sum at 1 ms; with its
     * smallest point above α (6 ms), at α. */
    fsmoe_cluster c2, c3;
    parse_4x4(&c2, "  - {op: allreduce, tier: intra, ranks: 4, alpha_s: 4e-3, "
                   "beta_s_per_byte: 1e-9, r2: 1, points: [[16384, 1e-3], [1048576, 5e-3]]}\n");
    parse_4x4(&c3, "  - {op: allreduce, tier: intra, ranks: 4, alpha_s: 4e-3, "
                   "beta_s_per_byte: 1e-9, r2: 1, points: [[16384, 6e-3], [1048576, 9e-3]]}\n");
    workload_lines w2, w3;
    if (workload_lines_init(&c2, "4x4.yaml", &par, NULL, &w2, &err) ||
        workload_lines_init(&c3, "4x4.yaml", &par, NULL, &w3, &err))
        fail_msg("%s", err.msg);
    assert_rel(workload_optimizer_s(&w2, bytes) - workload_optimizer_s(&w1, bytes), 1e-3 - 2e-6,
               1e-9);
    assert_rel(workload_optimizer_s(&w3, bytes) - workload_optimizer_s(&w1, bytes), 4e-3 - 2e-6,
               1e-9);
    fsmoe_cluster_free(&c0);
    fsmoe_cluster_free(&c1);
    fsmoe_cluster_free(&c2);
    fsmoe_cluster_free(&c3);
}

/* A group that is not hierarchical has no 2DH (a caller's error), and a profile without the
 * parts says which one it lacks. */
static void test_2dh_refused(void **state)
{
    (void)state;
    fsmoe_cluster c;
    parse_4x4(&c, NULL);
    fsmoe_error err = {0};
    fsmoe_line l;
    assert_int_equal(fsmoe_cost_line_2dh(&c, NULL, 1, 4, &l, NULL, 0, &err), FSMOE_ERR_INTERNAL);
    assert_non_null(strstr(err.msg, "is not hierarchical"));
    assert_int_equal(fsmoe_cost_line_2dh(&c, NULL, 4, 1, &l, NULL, 0, &err), FSMOE_ERR_INTERNAL);
    assert_int_equal(fsmoe_cost_line_at(&c, NULL, FSMOE_OP_ALLTOALL_2DH, FSMOE_TIER_INTER, 4, &l,
                                        NULL, 0, &err),
                     FSMOE_ERR_INTERNAL);
    assert_non_null(strstr(err.msg, "use alltoall"));
    fsmoe_cluster_free(&c);
    /* Testbed B's shape: no alltoall intra */
    char doc[] = "fsmoe_cluster: 1\nname: no-intra\nsource: test\nnodes: 4\ngpus_per_node: 4\n"
                 "ops:\n"
                 "  - {op: alltoall, tier: inter, ranks: 4, alpha_s: 3e-4, beta_s_per_byte: "
                 "1e-10, r2: 1}\n"
                 "  - {op: copy, tier: local, ranks: 1, alpha_s: 5e-6, beta_s_per_byte: 2e-12, "
                 "r2: 1}\n";
    if (fsmoe_cluster_parse("no-intra.yaml", doc, sizeof doc - 1, &c, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(fsmoe_cost_line_2dh(&c, "no-intra.yaml", 4, 4, &l, NULL, 0, &err),
                     FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "no-intra.yaml:7:3: ops: no alltoall_2dh entry for tier "
                                    "world, and no alltoall intra entry to derive it from"));
    fsmoe_cluster_free(&c);
}

/* Which groups are hierarchical under the node-major numbering (parallel.h): EP strides esp,
 * EP&ESP is consecutive. By hand, G = 4:
 *   world 16, ep 16, esp 1: EP = 0..15 -> 4 nodes x 4;
 *   world 16, ep 8, esp 2: EP = 0,2,..,14 -> 4 nodes x 2; EP&ESP = 0..15 -> 4 x 4;
 *   world 16, ep 4, esp 4: EP = 0,4,8,12 -> one per node (no); EP&ESP 4 x 4;
 *   world 16, ep 2, esp 2: EP&ESP = 0..3 -> one node (no);
 *   world 4 (one node): never. */
static void test_group_2dh(void **state)
{
    (void)state;
    const struct {
        int world, ep, esp;
        fsmoe_group g;
        int want, nodes, locals;
    } rows[] = {
        {16, 16, 1, FSMOE_GROUP_EP, 1, 4, 4},    {16, 8, 2, FSMOE_GROUP_EP, 1, 4, 2},
        {16, 8, 2, FSMOE_GROUP_EP_ESP, 1, 4, 4}, {16, 4, 4, FSMOE_GROUP_EP, 0, 0, 0},
        {16, 4, 4, FSMOE_GROUP_EP_ESP, 1, 4, 4}, {16, 2, 2, FSMOE_GROUP_EP_ESP, 0, 0, 0},
        {16, 8, 1, FSMOE_GROUP_EP, 1, 2, 4},     {4, 4, 1, FSMOE_GROUP_EP, 0, 0, 0},
        {16, 16, 1, FSMOE_GROUP_DP, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        fsmoe_parallel p = {.world = rows[i].world, .gpus_per_node = 4, .dp = rows[i].world,
                            .mp = 1, .ep = rows[i].ep, .esp = rows[i].esp, .pp = 1};
        int nodes = 0, locals = 0;
        int got = workload_group_2dh(&p, rows[i].g, &nodes, &locals);
        if (got != rows[i].want || (got && (nodes != rows[i].nodes || locals != rows[i].locals)))
            fail_msg("row %zu: got %d (%d x %d), want %d (%d x %d)", i, got, nodes, locals,
                     rows[i].want, rows[i].nodes, rows[i].locals);
        /* hierarchical groups are exactly the world-tier ones in these layouts */
        if (rows[i].g != FSMOE_GROUP_DP && fsmoe_group_size(&p, rows[i].g) > 1)
            assert_int_equal(got, fsmoe_group_tier(&p, rows[i].g) == FSMOE_TIER_WORLD);
    }
}

/* GEMM lines per expert shape (cost.h fsmoe_cost_line_gemm): the shape itself, else a line
 * without a shape, else the nearest shape (sum of |ln| of the two ratios), each non-exact choice
 * noted; read in any order, written back with the shapes; the planner's expert and dense GEMMs
 * use the line of their own shapes (M:H/N_ESP, M:H/N_MP). */
static const char gemm_shapes_doc[] =
    "fsmoe_cluster: 1\n"
    "name: shapes\n"
    "source: test\n"
    "nodes: 1\n"
    "gpus_per_node: 4\n"
    "ops:\n"
    "  - {op: gemm, tier: local, shape: [256, 1024], alpha_s: 0, beta_s_per_mac: 1.25e-11, r2: 1}\n"
    "  - {op: gemm, tier: local, shape: [64, 256], alpha_s: 1e-6, beta_s_per_mac: 2.5e-11, r2: 1}\n"
    "  - {op: gemm, tier: local, shape: [64, 64], alpha_s: 2e-6, beta_s_per_mac: 4e-11, r2: 1}\n"
    "  - {op: alltoall, tier: intra, ranks: 4, alpha_s: 1e-5, beta_s_per_byte: 1e-9, r2: 1}\n"
    "  - {op: allgather, tier: intra, ranks: 4, alpha_s: 1e-5, beta_s_per_byte: 1e-9, r2: 1}\n"
    "  - {op: reducescatter, tier: intra, ranks: 4, alpha_s: 1e-5, beta_s_per_byte: 1e-9, r2: 1}\n"
    "  - {op: allreduce, tier: intra, ranks: 4, alpha_s: 1e-5, beta_s_per_byte: 1e-9, r2: 1}\n";

static void test_gemm_shapes(void **state)
{
    (void)state;
    fsmoe_cluster c;
    fsmoe_error err = {0};
    parse("shapes.yaml", gemm_shapes_doc, &c);
    const fsmoe_cost_entry *all[4];
    assert_int_equal(fsmoe_cluster_entries(&c, FSMOE_OP_GEMM, FSMOE_TIER_LOCAL, all, 4), 3);
    /* ordered by shape: 64:64, 64:256, 256:1024 */
    assert_int_equal(all[0]->shape_m, 64), assert_int_equal(all[0]->shape_h, 64);
    assert_int_equal(all[1]->shape_m, 64), assert_int_equal(all[1]->shape_h, 256);
    assert_int_equal(all[2]->shape_m, 256), assert_int_equal(all[2]->shape_h, 1024);
    fsmoe_line l;
    char note[1024] = "";
    /* exact: no note */
    assert_int_equal(fsmoe_cost_line_gemm(&c, "shapes.yaml", 256, 1024, &l, note, sizeof note,
                                          &err), FSMOE_OK);
    assert_ptr_equal(l.entry, all[2]);
    assert_rel(l.beta_s, 1.25e-11, 1e-12);
    assert_string_equal(note, "");
    /* 512:2048: 256:1024 is ln 2 + ln 2 away, 64:256 ln 8 + ln 8 */
    assert_int_equal(fsmoe_cost_line_gemm(&c, "shapes.yaml", 512, 2048, &l, note, sizeof note,
                                          &err), FSMOE_OK);
    assert_ptr_equal(l.entry, all[2]);
    assert_non_null(strstr(note, "gemm local: measured at shape 256:1024, used for 512:2048 "
                                 "(the nearest of 3 measured shapes)"));
    /* 64:128: 64:64 and 64:256 are both ln 2 away, the first in order wins; 256:1024 ln 4 + ln 8 */
    note[0] = '\0';
    assert_int_equal(fsmoe_cost_line_gemm(&c, "shapes.yaml", 64, 128, &l, note, sizeof note,
                                          &err), FSMOE_OK);
    assert_ptr_equal(l.entry, all[0]);
    assert_rel(l.alpha_s, 2e-6, 1e-12);
    /* 128:512: 64:256 is ln 2 + ln 2, 256:1024 the same, 64:64 ln 2 + ln 8: the first tie */
    assert_int_equal(fsmoe_cost_line_gemm(&c, "shapes.yaml", 128, 512, &l, NULL, 0, &err),
                     FSMOE_OK);
    assert_ptr_equal(l.entry, all[1]);
    /* no shape asked for: the last in order, as fsmoe_cost_line, noted */
    note[0] = '\0';
    assert_int_equal(fsmoe_cost_line_gemm(&c, "shapes.yaml", 0, 0, &l, note, sizeof note, &err),
                     FSMOE_OK);
    assert_ptr_equal(l.entry, all[2]);
    assert_non_null(strstr(note, "no shape given"));
    fsmoe_line plain;
    assert_int_equal(fsmoe_cost_line(&c, "shapes.yaml", FSMOE_OP_GEMM, FSMOE_TIER_LOCAL, &plain,
                                     NULL, 0, &err), FSMOE_OK);
    assert_ptr_equal(plain.entry, l.entry);

    /* the planner: M 64, H 256, esp 1, mp 4 -> experts at 64:256, dense slices at 64:64 */
    fsmoe_parallel par = {.dp = 1, .mp = 4, .ep = 4, .esp = 1, .pp = 1, .world = 4,
                          .gpus_per_node = 4};
    workload_shape sh;
    memset(&sh, 0, sizeof sh);
    sh.M = 64, sh.H = 256, sh.B = 1, sh.L = 16, sh.heads = 4, sh.kv_heads = 4, sh.E = 4, sh.k = 1;
    sh.f = 1.0, sh.expert = FSMOE_EXPERT_GPT, sh.bytes_per_element = 4;
    workload_lines w;
    assert_int_equal(workload_lines_init(&c, "shapes.yaml", &par, &sh, &w, &err), FSMOE_OK);
    assert_ptr_equal(w.gemm.entry, all[1]);
    assert_ptr_equal(w.gemm_dense.entry, all[0]);
    /* esp 4 as well: the expert slice is 64:64 too */
    par.esp = 4, par.ep = 1;
    assert_int_equal(workload_lines_init(&c, "shapes.yaml", &par, &sh, &w, &err), FSMOE_OK);
    assert_ptr_equal(w.gemm.entry, all[0]);

    /* a line without a shape is every shape's, after the exact one */
    fsmoe_cost_entry any = mk(1, 3e-6, 5e-11);
    assert_int_equal(fsmoe_cluster_add(&c, FSMOE_OP_GEMM, FSMOE_TIER_LOCAL, &any, &err), FSMOE_OK);
    note[0] = '\0';
    assert_int_equal(fsmoe_cost_line_gemm(&c, "shapes.yaml", 512, 2048, &l, note, sizeof note,
                                          &err), FSMOE_OK);
    assert_rel(l.beta_s, 5e-11, 1e-12);
    assert_string_equal(note, "");
    assert_int_equal(fsmoe_cost_line_gemm(&c, "shapes.yaml", 64, 256, &l, NULL, 0, &err),
                     FSMOE_OK);
    assert_rel(l.beta_s, 2.5e-11, 1e-12);

    /* written and read back: the shapes and their order */
    fsmoe_cluster d;
    write_read(&c, &d);
    const fsmoe_cost_entry *back[8], *orig[8];
    int n = fsmoe_cluster_entries(&c, FSMOE_OP_GEMM, FSMOE_TIER_LOCAL, orig, 8);
    assert_int_equal(n, 4);
    assert_int_equal(fsmoe_cluster_entries(&d, FSMOE_OP_GEMM, FSMOE_TIER_LOCAL, back, 8), n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(back[i]->shape_m, orig[i]->shape_m);
        assert_int_equal(back[i]->shape_h, orig[i]->shape_h);
        assert_rel(back[i]->beta_s, orig[i]->beta_s, 1e-6);
    }
    fsmoe_cluster_free(&d);
    fsmoe_cluster_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_busbw_factor),   cmocka_unit_test(test_one_size),
        cmocka_unit_test(test_exact_match),    cmocka_unit_test(test_two_sizes),
        cmocka_unit_test(test_profile_two_sizes), cmocka_unit_test(test_add),
        cmocka_unit_test(test_low_r2_notes),
        cmocka_unit_test(test_testbed_a_nodes),
        cmocka_unit_test(test_min_chunk_from_points),
        cmocka_unit_test(test_elementwise_from_points),
        cmocka_unit_test(test_norm_sum_over_ep),
        cmocka_unit_test(test_2dh_derived),    cmocka_unit_test(test_2dh_measured),
        cmocka_unit_test(test_2dh_refused),    cmocka_unit_test(test_group_2dh),
        cmocka_unit_test(test_gemm_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
