/* Implements: table-driven tests of fsmoe-bench's command line (microbench/options.c): every
 * bad flag or combination gives FSMOE_ERR_USAGE (exit 2) with a message naming the problem;
 * nccl-tests' flags keep their meaning. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "options.h"

typedef struct {
    const char *args[16];
    fsmoe_status status;
    const char *fragment;
} option_case;

static const option_case cases[] = {
    {{"-b", "abc"}, FSMOE_ERR_USAGE, "-b"},
    {{"-b", "0"}, FSMOE_ERR_USAGE, "-b"},
    {{"-b", "8M", "-e", "1M"}, FSMOE_ERR_USAGE, "larger than -e"},
    {{"-f", "1"}, FSMOE_ERR_USAGE, "greater than 1"},
    {{"-f", "2", "-i", "1M"}, FSMOE_ERR_USAGE, "exclude each other"},
    {{"-n", "0"}, FSMOE_ERR_USAGE, "-n"},
    {{"-w", "-1"}, FSMOE_ERR_USAGE, "-w"},
    {{"-d", "half"}, FSMOE_ERR_USAGE, "float"},
    {{"--op", "avg"}, FSMOE_ERR_USAGE, "sum"},
    {{"-a", "4"}, FSMOE_ERR_USAGE, "-a"},
    {{"-c", "2"}, FSMOE_ERR_USAGE, "-c"},
    {{"--interference", "2"}, FSMOE_ERR_USAGE, "--interference: 2 is out of range"},
    {{"--interference", "yes"}, FSMOE_ERR_USAGE, "--interference"},
    {{"--interference", "0"}, FSMOE_OK, NULL},
    {{"--ops", "alltoall,bogus"}, FSMOE_ERR_USAGE, "reducescatter"},
    {{"--ops", "alltoall_3dh"}, FSMOE_ERR_USAGE, "alltoall_2dh"},
    {{"--ops", "+bogus"}, FSMOE_ERR_USAGE, "alltoall_2dh"},
    {{"--ops", "+"}, FSMOE_ERR_USAGE, "empty"},
    {{"--ops", "alltoall,alltoall_2dh"}, FSMOE_OK, NULL},
    {{"--tiers", "+world"}, FSMOE_ERR_USAGE, "intra"},
    {{"--tiers", "local"}, FSMOE_ERR_USAGE, "intra"},
    {{"--tiers", ","}, FSMOE_ERR_USAGE, "empty"},
    {{"--gpus-per-node", "0"}, FSMOE_ERR_USAGE, "--gpus-per-node"},
    {{"--gemm-shapes", "4096"}, FSMOE_ERR_USAGE, "M:H"},
    {{"--gemm-shapes", "4096:x"}, FSMOE_ERR_USAGE, "--gemm-shapes H"},
    {{"--gemm-min", "4M", "--gemm-max", "1M"}, FSMOE_ERR_USAGE, "--gemm-min"},
    {{"--r2-threshold", "1.5"}, FSMOE_ERR_USAGE, "--r2-threshold"},
    {{"--backend", "gloo"}, FSMOE_ERR_USAGE, "nccl"},
    {{"--saa-slices", "4"}, FSMOE_ERR_USAGE, "--saa-slices"},
    {{"--group-rounds", "-1"}, FSMOE_ERR_USAGE, "--group-rounds"},
    {{"--huge-pages", "2"}, FSMOE_ERR_USAGE, "--huge-pages"},
    {{"--rotate", "lots"}, FSMOE_ERR_USAGE, "--rotate"},
    {{"--small-min", "-4K"}, FSMOE_ERR_USAGE, "--small-min"},
    {{"--small-min", "0"}, FSMOE_OK, NULL},
    {{"-b", "1M", "-e", "1M", "--small-min", "1", "-o", "x.yaml"}, FSMOE_OK, NULL},
    {{"--rotate", "0", "--group-rounds", "2", "--huge-pages", "0"}, FSMOE_OK, NULL},
    {{"--max-iters", "0"}, FSMOE_ERR_USAGE, "--max-iters"},
    {{"--max-iters", "4"}, FSMOE_ERR_USAGE, "--max-iters 4 is smaller than -n 5"},
    {{"-n", "9", "--max-iters", "8"}, FSMOE_ERR_USAGE, "--max-iters 8 is smaller than -n 9"},
    {{"--precision", "1.5"}, FSMOE_ERR_USAGE, "--precision"},
    {{"--precision", "tight"}, FSMOE_ERR_USAGE, "--precision"},
    {{"--outlier", "-0.1"}, FSMOE_ERR_USAGE, "--outlier"},
    {{"--extra-time", "-1"}, FSMOE_ERR_USAGE, "--extra-time"},
    {{"--precision", "0", "--outlier", "0", "--extra-time", "0", "--max-iters", "5"}, FSMOE_OK,
     NULL},
    {{"--comm-timeout", "-1"}, FSMOE_ERR_USAGE, "--comm-timeout"},
    {{"--comm-timeout", "0"}, FSMOE_OK, NULL},
    {{"--name", ""}, FSMOE_ERR_USAGE, "--name: expected 1 to 63"},
    {{"-o", ""}, FSMOE_ERR_USAGE, "-o: expected a file name"},
    {{"--plot", "out/"}, FSMOE_ERR_USAGE, "got a directory"},
    {{"-o", "a", "--plot", "a"}, FSMOE_ERR_USAGE, "-o and --plot name the same file"},
    {{"-b", "16G", "-e", "16G"}, FSMOE_ERR_USAGE, "exceed MPI's largest count"},
    {{"-b", "2G", "-e", "2G", "-d", "int64"}, FSMOE_OK, NULL},
    {{"--gemm-shapes", "65536:65536"}, FSMOE_ERR_USAGE, "--gemm-shapes 65536:65536"},
    {{"--bogus"}, FSMOE_ERR_USAGE, "unknown option --bogus"},
    {{"-x"}, FSMOE_ERR_USAGE, "unknown option -x"},
    {{"-o"}, FSMOE_ERR_USAGE, "needs a value"},
    {{"stray"}, FSMOE_ERR_USAGE, "unexpected argument"},
    {{"-o", "x.yaml", "-b", "1M", "-e", "1M", "--small-min", "0"}, FSMOE_ERR_USAGE,
     "at least two sizes"},
    {{"-b", "1", "-e", "1G", "-i", "1"}, FSMOE_ERR_USAGE, "more than"},
    {{"-b", "64K", "-e", "1M", "-f", "2", "-n", "3", "-w", "0", "-d", "int32"}, FSMOE_OK, NULL},
    {{"-o", "p.yaml", "--ops", "alltoall,saa", "--tiers", "inter,world", "--gpus-per-node", "2"}, FSMOE_OK,
     NULL},
};

static void test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[20] = {"fsmoe-bench"};
        int argc = 1;
        for (int j = 0; cases[i].args[j]; j++)
            argv[argc++] = (char *)cases[i].args[j];
        bench_options o;
        fsmoe_error err = {0};
        options_defaults(&o);
        fsmoe_status st = options_parse(argc, argv, &o, &err);
        if (st != cases[i].status)
            fail_msg("case %zu (%s ...): status %d, expected %d (%s)", i, cases[i].args[0],
                     st, cases[i].status, err.msg);
        if (cases[i].fragment && !strstr(err.msg, cases[i].fragment))
            fail_msg("case %zu: message '%s' lacks '%s'", i, err.msg, cases[i].fragment);
    }
}

static void test_defaults_follow_fsmoe(void **state)
{
    (void)state;
    bench_options o;
    options_defaults(&o);
    long long sizes[64];
    int n = options_comm_sizes(&o, sizes, 64);
    assert_int_equal(n, 6 + 24); /* 16K .. 512K, then 2^18 .. 24·2^18 floats, step 2^18 */
    assert_int_equal(sizes[6], 1 << 20);
    assert_int_equal(sizes[29], 24LL << 20);
    assert_int_equal(o.gemm_min, 1 << 19);
    assert_int_equal(o.gemm_max, 12 << 19);
    assert_int_equal(o.average, MEASURE_AVG); /* nccl-tests' default */
    assert_true(o.comm_timeout_s == 30.0);    /* fsmoe-run's default */
    assert_int_equal(o.interference, 1);      /* measured unless --interference 0 */
    char *argv[] = {"fsmoe-bench", "-b", "1K", "-e", "64K", "-f", "2", "--op", "max", "-a", "3"};
    fsmoe_error err = {0};
    assert_int_equal(options_parse(11, argv, &o, &err), FSMOE_OK);
    n = options_comm_sizes(&o, sizes, 64);
    assert_int_equal(n, 7);
    assert_int_equal(sizes[6], 65536);
    assert_int_equal(o.redop, COMM_MAX);
    assert_int_equal(o.average, MEASURE_MAX);
}

/* The small sizes: --small-min doubling below -b, then -b .. -e; none below with 0 or a
 * --small-min at or above -b. */
static void test_small_sizes(void **state)
{
    (void)state;
    bench_options o;
    options_defaults(&o);
    long long sizes[64];
    int n = options_comm_sizes(&o, sizes, 64);
    assert_int_equal(sizes[0], 16384);
    assert_int_equal(sizes[5], 512 * 1024);
    assert_int_equal(sizes[6], 1 << 20);
    /* a short array: the first entries, the full count */
    long long few[3];
    assert_int_equal(options_comm_sizes(&o, few, 3), n);
    assert_int_equal(few[2], 65536);
    char *argv[] = {"fsmoe-bench", "--small-min", "100K", "-b", "256K", "-e", "512K", "-f", "2"};
    fsmoe_error err = {0};
    assert_int_equal(options_parse(9, argv, &o, &err), FSMOE_OK);
    n = options_comm_sizes(&o, sizes, 64);
    assert_int_equal(n, 2 + 2); /* 100K, 200K; 256K, 512K */
    assert_int_equal(sizes[0], 100 * 1024);
    assert_int_equal(sizes[1], 200 * 1024);
    assert_int_equal(sizes[2], 256 * 1024);
    assert_int_equal(sizes[3], 512 * 1024);
    o.small_min_bytes = 256 * 1024; /* not below -b */
    assert_int_equal(options_comm_sizes(&o, NULL, 0), 2);
    o.small_min_bytes = 0;
    assert_int_equal(options_comm_sizes(&o, NULL, 0), 2);
}

/* A parse that stops inside a cluster of short options (-jx: -j is unknown, x unread) must not
 * leave getopt's position in that argv for the next parse, whose argv is another one (the first
 * may be freed by then: the fuzzer found a use after free). */
/* The stopping rule's defaults, and -n alone above --max-iters' default: exactly -n runs. */
static void test_refine_defaults(void **state)
{
    (void)state;
    bench_options o;
    options_defaults(&o);
    assert_int_equal(o.iters, 5); /* the fewest runs with a 90 % interval of the median */
    assert_int_equal(o.max_iters, 15);
    assert_true(o.precision == 0.03 && o.outlier == 0.05 && o.extra_time == 0.25);
    char *argv[] = {"fsmoe-bench", "-n", "20", NULL};
    fsmoe_error err = {0};
    assert_int_equal(options_parse(3, argv, &o, &err), FSMOE_OK);
    assert_int_equal(o.iters, 20);
    assert_int_equal(o.max_iters, 20);
}

/* The default operations leave out the 2DH AllToAll (the default suite's time budget);
 * --ops +LIST adds LIST to them, --ops LIST replaces them; a bad name lists the allowed ones. */
static void test_ops_2dh(void **state)
{
    (void)state;
    bench_options o;
    fsmoe_error err = {0};
    options_defaults(&o);
    assert_false(o.ops[FSMOE_OP_ALLTOALL_2DH]);
    for (int op = 0; op < FSMOE_OP_COUNT; op++)
        if (op != FSMOE_OP_ALLTOALL_2DH)
            assert_true(o.ops[op]);
    char *plus[] = {"fsmoe-bench", "--ops", "+alltoall_2dh", NULL};
    assert_int_equal(options_parse(3, plus, &o, &err), FSMOE_OK);
    for (int op = 0; op < FSMOE_OP_COUNT; op++)
        assert_true(o.ops[op]);
    options_defaults(&o);
    char *two[] = {"fsmoe-bench", "--ops", "alltoall,alltoall_2dh", NULL};
    assert_int_equal(options_parse(3, two, &o, &err), FSMOE_OK);
    for (int op = 0; op < FSMOE_OP_COUNT; op++)
        assert_int_equal(o.ops[op], op == FSMOE_OP_ALLTOALL || op == FSMOE_OP_ALLTOALL_2DH);
    /* +LIST adds to the defaults, not to an earlier --ops */
    options_defaults(&o);
    char *later[] = {"fsmoe-bench", "--ops", "gemm", "--ops", "+alltoall_2dh", NULL};
    assert_int_equal(options_parse(5, later, &o, &err), FSMOE_OK);
    assert_true(o.ops[FSMOE_OP_ALLTOALL] && o.ops[FSMOE_OP_ALLTOALL_2DH] && o.ops[FSMOE_OP_SAA]);
    options_defaults(&o);
    char *bad[] = {"fsmoe-bench", "--ops", "+alltoall_2dx", NULL};
    assert_int_equal(options_parse(3, bad, &o, &err), FSMOE_ERR_USAGE);
    const char *names[] = {"alltoall", "alltoall_2dh", "allgather", "reducescatter", "allreduce",
                           "saa", "gemm", "copy", "alltoall_2dx"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strstr(err.msg, names[i]))
            fail_msg("message '%s' lacks '%s'", err.msg, names[i]);
    /* the stage of the 2DH AllToAll is counted in the memory check */
    bench_options a, b;
    options_defaults(&a);
    options_defaults(&b);
    b.ops[FSMOE_OP_ALLTOALL_2DH] = 1;
    assert_true(options_rank_bytes(&b, 2, NULL, 0) - options_rank_bytes(&a, 2, NULL, 0) ==
                (double)a.rotate_bytes); /* 256M > 3 x 24M */
    a.rotate_bytes = b.rotate_bytes = 0;
    assert_true(options_rank_bytes(&b, 2, NULL, 0) - options_rank_bytes(&a, 2, NULL, 0) ==
                3.0 * (double)a.max_bytes);
}

static void test_reparse_after_short_cluster(void **state)
{
    (void)state;
    char *bad = strdup("-jx");
    char *argv1[] = {"fsmoe-bench", bad, NULL};
    bench_options o;
    fsmoe_error err = {0};
    options_defaults(&o);
    assert_int_equal(options_parse(2, argv1, &o, &err), FSMOE_ERR_USAGE);
    assert_non_null(strstr(err.msg, "unknown option -j"));
    free(bad);
    char *argv2[] = {"fsmoe-bench", "-n", "3", NULL};
    options_defaults(&o);
    memset(&err, 0, sizeof err);
    if (options_parse(3, argv2, &o, &err) != FSMOE_OK)
        fail_msg("second parse: %s", err.msg);
    assert_int_equal(o.iters, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_defaults_follow_fsmoe),
        cmocka_unit_test(test_small_sizes),
        cmocka_unit_test(test_refine_defaults),
        cmocka_unit_test(test_reparse_after_short_cluster),
        cmocka_unit_test(test_ops_2dh),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
