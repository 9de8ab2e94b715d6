/* Implements: the profile round trip — rows fitted by results_fit, written by profile_write,
 * read back by fsmoe_cluster_load (the planner's reader): every line, r², rank count and point
 * survives; a noisy entry is flagged low_r2; equal-n GEMM rows are merged; writing is atomic;
 * the interference factors and the sync latency go into the profile only when their run was
 * correct. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster.h"
#include "profile_write.h"
#include "results.h"

static void add_line(bench_results *r, fsmoe_op op, fsmoe_tier tier, int ranks, double alpha,
                     double beta, double wobble)
{
    for (int i = 1; i <= 12; i++) {
        bench_row row = {.op = op, .tier = tier, .ranks = ranks, .n = i * 1048576.0};
        row.seconds = (alpha + beta * row.n) * (1.0 + ((i % 3) - 1) * wobble);
        assert_int_equal(results_add(r, &row, NULL), FSMOE_OK);
    }
}

static int near(double a, double b, double rel)
{
    return fabs(a - b) <= rel * fabs(b) + 1e-300;
}

static void test_round_trip(void **state)
{
    (void)state;
    char dir[] = "/tmp/fsmoe-bench-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/mine.yaml", dir);

    bench_results res;
    memset(&res, 0, sizeof res);
    add_line(&res, FSMOE_OP_ALLTOALL, FSMOE_TIER_INTRA, 2, 2e-5, 2e-10, 0.0);
    add_line(&res, FSMOE_OP_ALLTOALL, FSMOE_TIER_INTER, 2, 3e-4, 1.2e-8, 0.0);
    add_line(&res, FSMOE_OP_ALLTOALL, FSMOE_TIER_WORLD, 4, 4e-4, 1.5e-8, 0.0);
    add_line(&res, FSMOE_OP_ALLTOALL_2DH, FSMOE_TIER_WORLD, 4, 2.5e-4, 1.7e-8, 0.0);
    add_line(&res, FSMOE_OP_ALLGATHER, FSMOE_TIER_INTRA, 2, 1e-5, 1e-10, 0.0);
    add_line(&res, FSMOE_OP_REDUCESCATTER, FSMOE_TIER_INTRA, 2, 1e-5, 3e-10, 0.0);
    add_line(&res, FSMOE_OP_ALLREDUCE, FSMOE_TIER_INTER, 2, 5e-4, 2.5e-8, 0.4); /* noisy */
    add_line(&res, FSMOE_OP_SAA, FSMOE_TIER_WORLD, 4, 6e-4, 1.6e-8, 0.0);
    add_line(&res, FSMOE_OP_COPY, FSMOE_TIER_LOCAL, 1, 1e-6, 1e-10, 0.0);
    /* GEMM: two rows per n (the up and down projections), 2 and 2.2 ms per GMAC. */
    for (int i = 1; i <= 6; i++) {
        for (int dir2 = 0; dir2 < 2; dir2++) {
            bench_row row = {.op = FSMOE_OP_GEMM, .tier = FSMOE_TIER_LOCAL, .ranks = 1,
                             .n = i * 67108864.0};
            row.seconds = 1e-5 + (dir2 ? 2.2e-11 : 2e-11) * row.n;
            assert_int_equal(results_add(&res, &row, NULL), FSMOE_OK);
        }
    }
    assert_int_equal(results_fit(&res, 0.99, NULL), FSMOE_OK);

    /* 4 ranks on one host of 2 cores, its GEMMs measured with 2 at once: the host mapping;
     * one BLAS thread per rank */
    profile_meta meta = {"mine", "test_bench_profile (synthetic)", "cpu (test)", 2, 2, 0.99,
                         "synthetic rows", 34359738368.0, 1, 4, 2, 2};
    fsmoe_error err = {0};
    assert_int_equal(profile_write(path, &meta, &res, &err), FSMOE_OK);

    fsmoe_cluster c;
    fsmoe_status st = fsmoe_cluster_load(path, &c, &err);
    if (st)
        fail_msg("fsmoe_cluster_load: %s", err.msg);
    assert_string_equal(c.name, "mine");
    assert_int_equal(c.nodes, 2);
    assert_int_equal(c.gpus_per_node, 2);
    assert_true(near(c.r2_threshold, 0.99, 1e-12));
    assert_true(c.device_memory_bytes == 34359738368.0); /* 32 GiB, exactly */
    assert_int_equal(c.compute_threads, 1);
    assert_true(c.host.present && c.host.ranks == 4 && c.host.cores == 2 &&
                c.host.ranks_at_once == 2);

    const fsmoe_cost_entry *e = &c.ops[FSMOE_OP_ALLTOALL][FSMOE_TIER_INTER];
    assert_true(e->present);
    assert_int_equal(e->ranks, 2);
    assert_true(near(e->alpha_s, 3e-4, 1e-5));
    assert_true(near(e->beta_s, 1.2e-8, 1e-5));
    assert_true(e->r2 > 0.99999);
    assert_false(e->low_r2);
    assert_int_equal(e->n_points, 12);
    assert_true(near(e->points[3].n, 4 * 1048576.0, 1e-12));
    assert_true(near(e->points[3].seconds, 3e-4 + 1.2e-8 * 4 * 1048576.0, 1e-5));
    assert_int_equal(c.ops[FSMOE_OP_ALLTOALL][FSMOE_TIER_WORLD].ranks, 4);
    /* the 2DH AllToAll: its own entry beside the flat one, every point kept */
    const fsmoe_cost_entry *h = &c.ops[FSMOE_OP_ALLTOALL_2DH][FSMOE_TIER_WORLD];
    assert_true(h->present);
    assert_int_equal(h->ranks, 4);
    assert_true(near(h->alpha_s, 2.5e-4, 1e-5));
    assert_true(near(h->beta_s, 1.7e-8, 1e-5));
    assert_true(h->r2 > 0.99999);
    assert_int_equal(h->n_points, 12);
    assert_true(near(h->points[11].seconds, 2.5e-4 + 1.7e-8 * 12 * 1048576.0, 1e-5));
    assert_false(c.ops[FSMOE_OP_ALLTOALL_2DH][FSMOE_TIER_INTER].present);
    assert_true(c.ops[FSMOE_OP_SAA][FSMOE_TIER_WORLD].present);
    assert_true(c.ops[FSMOE_OP_ALLGATHER][FSMOE_TIER_INTRA].present);
    assert_false(c.ops[FSMOE_OP_ALLGATHER][FSMOE_TIER_INTER].present);

    /* The noisy entry is written but flagged. */
    const fsmoe_cost_entry *ar = &c.ops[FSMOE_OP_ALLREDUCE][FSMOE_TIER_INTER];
    assert_true(ar->present);
    assert_true(ar->r2 < 0.99);
    assert_true(ar->low_r2);
    assert_true(near(ar->r2, res.fits[FSMOE_OP_ALLREDUCE][FSMOE_TIER_INTER].fit.r2, 1e-8));

    /* GEMM per MAC, the two projections merged into one point per n. */
    const fsmoe_cost_entry *g = &c.ops[FSMOE_OP_GEMM][FSMOE_TIER_LOCAL];
    assert_true(g->present);
    assert_int_equal(g->n_points, 6);
    assert_true(near(g->beta_s, 2.1e-11, 1e-4));
    assert_true(near(g->points[0].seconds, 1e-5 + 2.1e-11 * 67108864.0, 1e-5));
    assert_true(c.ops[FSMOE_OP_COPY][FSMOE_TIER_LOCAL].present);

    /* The file says LOW R2 next to the flagged entry. */
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[512];
    int low = 0, op2dh = 0, said = 0;
    while (fgets(line, sizeof line, f)) {
        low += strstr(line, "LOW R2: allreduce on inter") != NULL;
        op2dh += strstr(line, "op: alltoall_2dh") != NULL;
        said += line[0] == ' ' && strstr(line, "# hierarchical AllToAll (2DH") != NULL;
    }
    fclose(f);
    assert_int_equal(low, 1);
    assert_int_equal(op2dh, 1);
    assert_int_equal(said, 1); /* the entry says what 2DH is */

    /* Atomic: nothing but the profile in the directory. */
    DIR *d = opendir(dir);
    struct dirent *de;
    int files = 0;
    while ((de = readdir(d)))
        files += de->d_name[0] != '.';
    closedir(d);
    assert_int_equal(files, 1);

    /* A failed write leaves the old file untouched. */
    char bad[300];
    snprintf(bad, sizeof bad, "%s/missing-dir/x.yaml", dir);
    assert_int_equal(profile_write(bad, &meta, &res, &err), FSMOE_ERR_IO);
    assert_non_null(strstr(err.msg, "missing-dir"));

    fsmoe_cluster_free(&c);
    results_free(&res);
    unlink(path);
    rmdir(dir);
}

static void test_nothing_to_write(void **state)
{
    (void)state;
    bench_results res;
    memset(&res, 0, sizeof res);
    bench_row row = {.op = FSMOE_OP_ALLTOALL, .tier = FSMOE_TIER_INTRA, .ranks = 2, .n = 1e6,
                     .seconds = 1e-3};
    assert_int_equal(results_add(&res, &row, NULL), FSMOE_OK);
    assert_int_equal(results_fit(&res, 0.99, NULL), FSMOE_OK);
    assert_int_not_equal(res.fits[FSMOE_OP_ALLTOALL][FSMOE_TIER_INTRA].status, FSMOE_OK);
    profile_meta meta = {"x", "test", "cpu", 1, 2, 0.99, NULL, 0, 0, 0, 0, 0};
    fsmoe_error err = {0};
    assert_int_equal(profile_write("/tmp/fsmoe-bench-never.yaml", &meta, &res, &err),
                     FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "at least two sizes"));
    assert_int_equal(access("/tmp/fsmoe-bench-never.yaml", F_OK), -1);
    results_free(&res);
}

/* A tier measured at two group sizes (suite.c's narrower size): each size is fitted on its own
 * rows and written as its own entry, which the reader lists narrowest first. */
static void test_two_group_sizes(void **state)
{
    (void)state;
    char dir[] = "/tmp/fsmoe-bench-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/sizes.yaml", dir);
    bench_results res;
    memset(&res, 0, sizeof res);
    add_line(&res, FSMOE_OP_ALLGATHER, FSMOE_TIER_INTRA, 4, 5e-5, 3e-10, 0.0);
    add_line(&res, FSMOE_OP_ALLGATHER, FSMOE_TIER_INTRA, 2, 2e-5, 1e-10, 0.0);
    assert_int_equal(results_fit(&res, 0.99, NULL), FSMOE_OK);
    assert_int_equal(res.fits[FSMOE_OP_ALLGATHER][FSMOE_TIER_INTRA].ranks, 4);
    assert_int_equal(res.n_narrower[FSMOE_OP_ALLGATHER][FSMOE_TIER_INTRA], 1);
    /* as many cores as ranks: no host mapping */
    profile_meta meta = {"sizes", "test_bench_profile (synthetic)", "cpu (test)", 1, 4, 0.99,
                         NULL, 0, 0, 4, 4, 4};
    fsmoe_error err = {0};
    assert_int_equal(profile_write(path, &meta, &res, &err), FSMOE_OK);
    fsmoe_cluster c;
    if (fsmoe_cluster_load(path, &c, &err))
        fail_msg("fsmoe_cluster_load: %s", err.msg);
    const fsmoe_cost_entry *e[3];
    assert_int_equal(fsmoe_cluster_entries(&c, FSMOE_OP_ALLGATHER, FSMOE_TIER_INTRA, e, 3), 2);
    assert_int_equal(e[0]->ranks, 2);
    assert_int_equal(e[1]->ranks, 4);
    assert_true(near(e[0]->alpha_s, 2e-5, 1e-5) && near(e[0]->beta_s, 1e-10, 1e-5));
    assert_true(near(e[1]->alpha_s, 5e-5, 1e-5) && near(e[1]->beta_s, 3e-10, 1e-5));
    assert_int_equal(e[0]->n_points, 12);
    assert_int_equal(e[1]->n_points, 12);
    assert_false(c.host.present);
    assert_int_equal(c.compute_threads, 0); /* not said: no key */
    fsmoe_cluster_free(&c);
    results_free(&res);
    remove(path);
    rmdir(dir);
}

/* Whether the file at path holds s (a key the reader would take as absent otherwise). */
static int file_has(const char *path, const char *s)
{
    char buf[8192];
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, s) != NULL;
}

/* The interference section's factors and sync latency reach the profile's `interference:`
 * mapping, which the reader takes back with its description; wrong values in its concurrent run
 * keep them out (the JSON still reports them), a run without the section writes none, and a
 * sync latency of 0 writes no key (the reader's default). */
static void test_interference(void **state)
{
    (void)state;
    char dir[] = "/tmp/fsmoe-bench-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/intf.yaml", dir);
    profile_meta meta = {"intf", "test_bench_profile (synthetic)", "cpu (test)", 2, 2, 0.99, NULL,
                         0, 0, 0, 0, 0};
    fsmoe_error err = {0};
    for (int k = 0; k < 4; k++) { /* correct, wrong values, not measured, correct without sync */
        bench_results res;
        memset(&res, 0, sizeof res);
        add_line(&res, FSMOE_OP_ALLTOALL, FSMOE_TIER_WORLD, 4, 4e-4, 1.5e-8, 0.0);
        assert_int_equal(results_fit(&res, 0.99, NULL), FSMOE_OK);
        bench_interference *x = &res.interference;
        x->measured = k != 2;
        x->wrong = k == 1 ? 3 : 0;
        x->comm_slowdown = 1.75;
        x->compute_slowdown = 3.5;
        x->sync_s = k == 3 ? 0.0 : 0.0025;
        snprintf(x->measured_how, sizeof x->measured_how, "fsmoe-bench: synthetic");
        assert_int_equal(results_wrong(&res), k == 1 ? 3 : 0); /* the footer's count */
        assert_int_equal(profile_write(path, &meta, &res, &err), FSMOE_OK);
        fsmoe_cluster c;
        if (fsmoe_cluster_load(path, &c, &err))
            fail_msg("fsmoe_cluster_load: %s", err.msg);
        assert_int_equal(c.interference.present, k == 0 || k == 3);
        if (k == 0 || k == 3) {
            assert_true(c.interference.comm_slowdown == 1.75);
            assert_true(c.interference.compute_slowdown == 3.5);
            assert_string_equal(c.interference.measured, "fsmoe-bench: synthetic");
        }
        assert_true(near(c.interference.sync_s, k == 0 ? 0.0025 : 0.0, 1e-12));
        assert_int_equal(file_has(path, "sync_latency_s"), k == 0);
        fsmoe_cluster_free(&c);
        results_free(&res);
    }
    remove(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_nothing_to_write),
        cmocka_unit_test(test_two_group_sizes),
        cmocka_unit_test(test_interference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
