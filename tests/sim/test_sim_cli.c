/* Implements: tests of `fsmoe-plan simulate` and `fsmoe-plan sweep` (planner/sim_cli.c)
 * called as functions: outputs written atomically and well-formed (SVG root element, trace JSON
 * with thread_name metadata and one "X" event per drawn task), CSV row count, and exit code 2
 * with a message for bad command lines. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../test_fs.h"
#include "sim_cli.h"

static char root[1024], dir[64];

static int setup(void **state)
{
    (void)state;
    const char *r = getenv("FSMOE_SOURCE_ROOT");
    snprintf(root, sizeof root, "%s", r ? r : ".");
    snprintf(dir, sizeof dir, "/tmp/fsmoe-sim-cli-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    test_remove_tree(dir);
    return 0;
}

/* What fsmoe-plan's main does with `fsmoe-plan ARGV...`: parse (usage errors exit 2, --help 0),
 * then run the subcommand. */
static int call(int (*fn)(const plan_cli *), int argc, const char **argv)
{
    char *copy[17] = {"fsmoe-plan"};
    for (int i = 0; i < argc && i < 16; i++)
        copy[i + 1] = (char *)argv[i];
    fflush(stdout);
    plan_cli cli;
    fsmoe_error err = {0};
    if (plan_cli_parse(argc + 1, copy, &cli, &err) != FSMOE_OK)
        return 2;
    if (cli.cmd == PLAN_CMD_HELP)
        return 0;
    return fn(&cli);
}

static char *slurp(const char *path, long *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)*len + 1);
    if (b && fread(b, 1, (size_t)*len, f) != (size_t)*len) {
        free(b);
        b = NULL;
    }
    if (b)
        b[*len] = '\0';
    fclose(f);
    return b;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

static void test_simulate_outputs(void **state)
{
    (void)state;
    char plan[1200], svg[128], trace[128];
    snprintf(plan, sizeof plan, "%s/plans/tiny-moe@testbed-b.yaml", root);
    snprintf(svg, sizeof svg, "%s/t.svg", dir);
    snprintf(trace, sizeof trace, "%s/t.json", dir);
    const char *argv[] = {"simulate", plan, "--svg", svg, "--trace", trace};
    assert_int_equal(call(sim_cli_simulate, 6, argv), 0);
    long n;
    char *s = slurp(svg, &n);
    assert_non_null(s);
    assert_true(strncmp(s, "<svg ", 5) == 0);
    assert_non_null(strstr(s, "</svg>\n"));
    assert_non_null(strstr(s, "time (ms)"));
    assert_non_null(strstr(s, "alltoall")); /* legend */
    int rects = count(s, "<title>");
    free(s);
    char *j = slurp(trace, &n);
    assert_non_null(j);
    assert_true(strncmp(j, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", 38) == 0);
    assert_non_null(strstr(j, "\"thread_name\""));
    assert_non_null(strstr(j, "\"name\":\"compute\""));
    assert_non_null(strstr(j, "\"name\":\"inter-node link\""));
    assert_int_equal(count(j, "\"ph\":\"X\""), rects); /* the same tasks in both */
    assert_true(rects > 20);
    free(j);
    /* no temporary left behind */
    DIR *d = opendir(dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        assert_null(strstr(e->d_name, ".tmp."));
    closedir(d);

    /* --window draws only the tasks inside it: fewer boxes, and the title says so */
    const char *zoom[] = {"simulate", plan, "--svg", svg, "--window", "1:2"};
    assert_int_equal(call(sim_cli_simulate, 6, zoom), 0);
    s = slurp(svg, &n);
    assert_non_null(s);
    assert_non_null(strstr(s, "(shown: 1.000–2.000 ms)"));
    int zoomed = count(s, "<title>");
    assert_true(zoomed > 0 && zoomed < rects);
    free(s);

    const char *all[] = {"simulate", plan, "--schedule", "all"};
    assert_int_equal(call(sim_cli_simulate, 4, all), 0);
    const char *one[] = {"simulate", plan, "--schedule", "pipemoe-lina", "--refine"};
    assert_int_equal(call(sim_cli_simulate, 5, one), 0);
}

static void test_bad_command_lines(void **state)
{
    (void)state;
    char plan[1200], cluster[1200];
    snprintf(plan, sizeof plan, "%s/plans/tiny-moe@testbed-b.yaml", root);
    snprintf(cluster, sizeof cluster, "%s/clusters/testbed-b.yaml", root);
    const char *a[] = {"simulate"};
    assert_int_equal(call(sim_cli_simulate, 1, a), 2);
    const char *b[] = {"simulate", plan, "--schedule", "gshard"};
    assert_int_equal(call(sim_cli_simulate, 4, b), 2);
    const char *c[] = {"simulate", plan, "--bogus"};
    assert_int_equal(call(sim_cli_simulate, 3, c), 2);
    const char *d[] = {"simulate", plan, "--schedule", "all", "--svg", "x.svg"};
    assert_int_equal(call(sim_cli_simulate, 6, d), 2);
    /* a missing input file is an input error: 2, as in every other fsmoe-plan command */
    const char *e[] = {"simulate", "/nonexistent/plan.yaml"};
    assert_int_equal(call(sim_cli_simulate, 2, e), 2);
    const char *e2[] = {"sweep", "--cluster", "/nonexistent/cluster.yaml", "--grid", "parm-table3"};
    assert_int_equal(call(sim_cli_sweep, 5, e2), 2);
    const char *f[] = {"sweep", "--grid", "fsmoe-table4"};
    assert_int_equal(call(sim_cli_sweep, 3, f), 2);
    const char *g[] = {"sweep", "--cluster", cluster, "--grid", "table5"};
    assert_int_equal(call(sim_cli_sweep, 5, g), 2);
    const char *h[] = {"sweep", "--cluster", cluster, "--grid", "fsmoe-table4", "--testbed", "c"};
    assert_int_equal(call(sim_cli_sweep, 7, h), 2);
    const char *w1[] = {"simulate", plan, "--svg", "x.svg", "--window", "5:2"};
    assert_int_equal(call(sim_cli_simulate, 6, w1), 2);
    const char *w2[] = {"simulate", plan, "--svg", "x.svg", "--window", "5"};
    assert_int_equal(call(sim_cli_simulate, 6, w2), 2);
    const char *i[] = {"simulate", "--help"};
    assert_int_equal(call(sim_cli_simulate, 2, i), 0);
}

static void test_sweep_csv(void **state)
{
    (void)state;
    char cluster[1200], csv[128];
    snprintf(cluster, sizeof cluster, "%s/clusters/parm-server.yaml", root);
    snprintf(csv, sizeof csv, "%s/parm.csv", dir);
    const char *argv[] = {"sweep", "--cluster", cluster, "--grid", "parm-table3", "--csv", csv};
    assert_int_equal(call(sim_cli_sweep, 7, argv), 0);
    long n;
    char *s = slurp(csv, &n);
    assert_non_null(s);
    assert_true(strncmp(s, "index,configuration,r_f,r_b,tutel_r,deepspeed_s", 47) == 0);
    /* the 8-GPU server runs only P = 8: 3 (N) · 3 · 3 · 3 · 3 · 2 = 486 rows + header */
    assert_int_equal(count(s, "\n"), 487);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simulate_outputs),
        cmocka_unit_test(test_bad_command_lines),
        cmocka_unit_test(test_sweep_csv),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
