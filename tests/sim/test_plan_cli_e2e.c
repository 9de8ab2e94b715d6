/* Implements: end-to-end regression tests of fsmoe-plan's refusals (the program run as a child
 * process): each row is {arguments, expected exit code, expected stderr fragment}, and every run
 * must end on its own within a generous bound (a bounded case that had to be killed fails; the
 * bound is not a benchmark). Inputs are the shipped models, clusters and plans, and mutations of
 * them written to a temporary directory: a plan with 1e30 gradient bytes, a plan whose r the
 * simulator cannot play, a plan recording a bad override, a model at the readers' size limits.
 * Also: outputs that are an input (another spelling, a symbolic link), unwritable outputs, flag
 * errors, stale temporaries of a killed writer, and an atomic writer interrupted by SIGTERM.
 *   test_plan_cli_e2e FSMOE_PLAN_EXE      (FSMOE_SOURCE_ROOT: the repository root) */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../test_fs.h"
#include "atomic_file.h"

static const char *exe;
static char root[1024], dir[64];

enum { BOUND_S = 120 }; /* generous: ASan on a shared 2-core machine */

/* Runs exe with args (NULL-terminated) in the repository root; stderr into err. Returns the exit
 * code, 128+signal when killed by a signal, -1 when it had to be killed for running too long. */
static int run(char *err, size_t err_len, const char *const *args)
{
    char errpath[128];
    snprintf(errpath, sizeof errpath, "%s/stderr.txt", dir);
    pid_t pid = fork();
    if (pid == 0) {
        const char *argv[64] = {exe};
        int n = 1;
        for (; args[n - 1] && n < 63; n++)
            argv[n] = args[n - 1];
        argv[n] = NULL;
        int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int nul = open("/dev/null", O_WRONLY);
        if (fd < 0 || nul < 0 || chdir(root) != 0)
            _exit(99);
        dup2(fd, 2);
        dup2(nul, 1);
        execv(exe, (char *const *)argv);
        _exit(98);
    }
    int status = 0;
    struct timespec t0, now, nap = {0, 10 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec > BOUND_S) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        nanosleep(&nap, NULL);
    }
    FILE *f = fopen(errpath, "r");
    size_t n = f ? fread(err, 1, err_len - 1, f) : 0;
    err[n] = '\0';
    if (f)
        fclose(f);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    if (b)
        b[n] = '\0';
    fclose(f);
    return b;
}

/* Writes src (repository-relative) to dir/name with the first `from` replaced by `to`. */
static void mutate(const char *src, const char *name, const char *from, const char *to)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", root, src);
    char *s = slurp(p);
    assert_non_null(s);
    char *at = strstr(s, from);
    assert_non_null(at);
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fprintf(f, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
    fclose(f);
    free(s);
}

static void write_file(const char *name, const char *text)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    const char *r = getenv("FSMOE_SOURCE_ROOT");
    snprintf(root, sizeof root, "%s", r ? r : ".");
    snprintf(dir, sizeof dir, "/tmp/fsmoe-plan-e2e-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    test_remove_tree(dir);
    return 0;
}

typedef struct {
    const char *args[16]; /* "@" at the start of an argument stands for the temporary dir */
    int exit;
    const char *fragment; /* in stderr; "@" stands for the temporary dir; NULL: not checked */
} row;

static void check_rows(const row *rows, size_t n)
{
    char err[8192];
    for (size_t i = 0; i < n; i++) {
        char store[16][1200];
        const char *args[17];
        int k = 0;
        for (; rows[i].args[k]; k++) {
            const char *a = rows[i].args[k];
            if (a[0] == '@')
                snprintf(store[k], sizeof store[k], "%s%s", dir, a + 1);
            else
                snprintf(store[k], sizeof store[k], "%s", a);
            args[k] = store[k];
        }
        args[k] = NULL;
        int rc = run(err, sizeof err, args);
        char frag[1200] = "";
        if (rows[i].fragment)
            snprintf(frag, sizeof frag, "%s%s", rows[i].fragment[0] == '@' ? dir : "",
                     rows[i].fragment + (rows[i].fragment[0] == '@'));
        if (rc == -1)
            fail_msg("row %zu (%s %s): had to be killed after %d s", i, args[0],
                     args[1] ? args[1] : "", BOUND_S);
        if (rc != rows[i].exit || (rows[i].fragment && !strstr(err, frag)))
            fail_msg("row %zu (%s %s ...): exit %d, expected %d; stderr:\n%s\nexpected to "
                     "contain: %s",
                     i, args[0], args[1] ? args[1] : "", rc, rows[i].exit, err, frag);
    }
}

/* Reproducers of the simulator's and planner's bounds: every case ends on its own. */
static void test_bounded(void **state)
{
    (void)state;
    mutate("plans/tiny-moe@testbed-b.yaml", "g.yaml", "gradients: {bytes: 1.888e+04,",
           "gradients: {bytes: 1e30,");
    mutate("plans/tiny-moe@testbed-b.yaml", "r.yaml", "forward: {r: 1,", "forward: {r: 1000,");
    mutate("plans/tiny-moe@testbed-b.yaml", "c.yaml", "chunks: 1,", "chunks: 5000,");
    /* a design-size model at the readers' limits (hidden, ffn_hidden, layers, experts, top_k,
     * capacity factor, seq): plans in seconds */
    write_file("huge.yaml", "fsmoe_model: 1\nname: huge\narchitecture:\n  hidden: 131072\n"
                            "  ffn_hidden: 524288\n  heads: 4096\n  layers: 4096\n"
                            "  vocab: 4194304\nmoe:\n  experts: 65536\n  top_k: 256\n"
                            "  expert: gpt\n  every: 1\n  first: 0\n  capacity_factor: 65536\n"
                            "training:\n  batch: 8\n  seq: 2097152\n  dtype: fp32\n");
    mutate("plans/tiny-moe@testbed-b.yaml", "nomodel.yaml", "  model: models/tiny-moe.yaml",
           "  model: .inf");
    const row rows[] = {
        /* a plan naming a model file that cannot be read: the plan's field is named */
        {{"simulate", "@/nomodel.yaml"}, 2,
         "@/nomodel.yaml:4:10: provenance.model: names a file that cannot be read: .inf"},
        {{"--regenerate", "@/nomodel.yaml", "-q", "-o", "@/nomodel2.yaml"}, 2,
         "@/nomodel.yaml:4:10: provenance.model: names a file that cannot be read: .inf"},
        {{"simulate", "@/g.yaml", "--schedule", "all"}, 2,
         "@/g.yaml:41:24: layers[0].gradients.bytes: 1e+30 is not a gradient size"},
        {{"simulate", "@/r.yaml"}, 2,
         "@/r.yaml:37:18: layers[0].forward.r: 1000 chunks is more than the simulator plays"},
        {{"simulate", "@/c.yaml", "--schedule", "monta-o2"}, 2, "layers[0].a2a.chunks: 5000"},
        {{"--model", "@/huge.yaml", "--cluster", "clusters/testbed-b.yaml", "-q", "-o",
          "@/huge-plan.yaml"},
         0, NULL},
        {{"simulate", "@/huge-plan.yaml", "--schedule", "all"}, 2, "@/huge-plan.yaml:"},
        {{"--regenerate", "@/huge-plan.yaml", "-q", "-o", "@/huge-plan2.yaml"}, 0, NULL},
    };
    check_rows(rows, sizeof rows / sizeof rows[0]);
}

/* Flags: every error exits 2 naming the flag, help exits 0. */
static void test_flags(void **state)
{
    (void)state;
    const char *M = "models/tiny-moe.yaml", *C = "clusters/testbed-b.yaml",
               *P = "plans/tiny-moe@testbed-b.yaml";
    const row rows[] = {
        {{"--help"}, 0, NULL},
        {{"-h"}, 0, NULL},
        {{"explain", "--help"}, 0, NULL},
        {{"explain", "-h"}, 0, NULL},
        {{"diff", "-h"}, 0, NULL},
        {{"simulate", "--help"}, 0, NULL},
        {{"sweep", "-h"}, 0, NULL},
        {{"explain", "--bogus"}, 2, "unknown option '--bogus'"},
        {{"explain", "-x", P}, 2, "unknown option '-x'"},
        {{"diff", "--rtol", "2", P, P}, 2, "--rtol: 2 is out of range"},
        {{"diff", "--strict=1", P, P}, 2, "'--strict=1'"},
        {{"simulate", P, "--window", "1:2"}, 2, "--window"},
        {{"simulate", P, "--svg", ""}, 2, "--svg: an empty path"},
        {{"simulate", ""}, 2, "empty plan path"},
        {{"simulate", P, "--schedule"}, 2, "'--schedule' needs a value"},
        {{"sweep", "--cluster", C, "--grid", "fsmoe-table4", "--testbed", "c"}, 2, "--testbed"},
        {{"sweep", "--cluster", C}, 2, "--grid is required"},
        {{"sweep", "--grid", "parm-table3"}, 2, "--cluster is required"},
        {{"sweep", "--cluster", C, "--grid", "parm-table3", "extra"}, 2, "'extra'"},
        {{"--model", M, "--cluster", C, "--quiet=1"}, 2, "'--quiet=1'"},
        {{"--model", M, "--cluster", C, "-o", ""}, 2, "-o: an empty path"},
        {{"--model", M, "--cluster", C, "--batch", "0"}, 2, "--batch: 0 is out of range"},
        {{"--model", M, "--cluster", C, "--capacity-factor", "nan"}, 2, "--capacity-factor"},
        {{"--model", M, "--cluster", C, "--world", "16", "--gpus-per-node", "3"}, 2,
         "--world 16 is not a multiple of --gpus-per-node 3"},
        {{"--model", M, "--cluster", C, "--method", "best"}, 2, "--method: 'best' is not one of"},
        {{"--model", M, "--cluster", C, "--mem-limit", "12x"}, 2, "--mem-limit: '12x' is not a size"},
        /* the memory model's prediction above the limit: refused, naming the need per GPU */
        {{"--model", M, "--cluster", C, "--world", "16", "--mem-limit", "1M", "-o", "@never.yaml"}, 2,
         "--mem-limit 1.0 MiB: tiny-moe on this layout (dp 4, mp 4, ep 4, esp 4) needs "},
        {{"--regenerate", P, "--batch", "3"}, 2, "--batch is not allowed"},
        {{"--model", M}, 2, "--cluster is required"},
        /* the layout search */
        {{"--model", M, "--cluster", C, "--search", "--dp", "2"}, 2,
         "--search chooses the layout; --dp is not allowed with it"},
        {{"--model", M, "--cluster", C, "--top", "3"}, 2, "--top belongs to --search"},
        {{"--model", M, "--cluster", C, "--svg", "@/s.svg"}, 2, "--svg belongs to --search"},
        {{"--model", M, "--cluster", C, "--global-batch", "8"}, 2,
         "--global-batch belongs to --search"},
        {{"--model", M, "--cluster", C, "--search", "--global-batch", "0"}, 2,
         "--global-batch: 0 is out of range"},
        {{"--model", M, "--cluster", C, "--search", "--global-batch", "8", "--batch", "2"}, 2,
         "--global-batch and --batch"},
        /* a global batch of 3 samples: dp 1 or 3, and 32 GPUs leave dp 1 with mp·pp = 32,
         * which tiny-moe's 4 heads (mp ≤ 4) and 4 blocks (pp ≤ 4) cannot reach */
        {{"--model", M, "--cluster", C, "--world", "32", "--search", "--global-batch", "3", "-q",
          "-o", "@/never.yaml"},
         2, "--search: no layout of 32 GPUs fits"},
        {{"--model", M, "--cluster", C, "--search", "--top", "0"}, 2, "--top: 0 is out of range"},
        {{"--regenerate", P, "--search"}, 2, "--search and --regenerate"},
        {{"--model", M, "--cluster", C, "--search", "--svg", ""}, 2, "--svg: an empty path"},
        {{"--model", M, "--cluster", C, "--search", "--svg", "/nonexistent/s.svg"}, 2,
         "--svg /nonexistent/s.svg: cannot write"},
        {{"--model", M, "--cluster", C, "--search", "--svg", M}, 2, "is the input"},
        {{"--model", M, "--cluster", C, "--world", "16", "--search", "--mem-limit", "1M", "-q",
          "-o", "@/never.yaml"},
         2, "--search: no layout of 16 GPUs fits 1.0 MiB per GPU and plans"},
        {{"--model", M, "--cluster", C, "--world", "16", "--search", "-q", "-o", "@/s.yaml",
          "--svg", "@/s.svg"},
         0, NULL},
        {{"--regenerate", "@/s.yaml", "-q", "-o", "@/s2.yaml"}, 0, NULL},
        {{"--model", M, "--cluster", C, "--world", "16", "--search", "--mem-limit", "none", "-q",
          "-o", "@/n.yaml"},
         0, NULL},
        {{"diff", "@/s.yaml", "@/s2.yaml"}, 0, NULL},
        /* pipeline stages */
        {{"--model", M, "--cluster", C, "--pp", "0"}, 2, "--pp: 0 is out of range"},
        {{"--model", M, "--cluster", C, "--pp", "65"}, 2, "--pp: 65 is out of range"},
        {{"--model", M, "--cluster", C, "--micro-batches", "2"}, 2,
         "--micro-batches: a pipeline's micro-batches need --pp 2 or more"},
        {{"--model", M, "--cluster", C, "--search", "--pp", "2"}, 2,
         "--search chooses the layout; --pp is not allowed with it"},
        {{"--model", M, "--cluster", C, "--world", "16", "--pp", "3", "-o", "@/never.yaml"}, 2,
         "world=16 but dp·mp·pp = 4·4·3 = 48"},
        {{"--model", M, "--cluster", C, "--world", "16", "--pp", "2", "--ep", "2",
          "--micro-batches", "3", "-o", "@/never.yaml"},
         2, "does not split into 3 micro-batches"},
        {{"--model", M, "--cluster", C, "--world", "16", "--pp", "2", "--ep", "2", "-q", "-o",
          "@/pp.yaml"},
         0, NULL},
        {{"--regenerate", "@/pp.yaml", "-q", "-o", "@/pp2.yaml"}, 0, NULL},
        {{"diff", "--strict", "@/pp.yaml", "@/pp2.yaml"}, 0, NULL},
        {{"simulate", "@/pp.yaml", "--schedule", "all"}, 0, NULL},
        {{"--model", M, "--cluster", C, "--pipeline-schedule", "zb"}, 2,
         "--pipeline-schedule: 'zb' is not one of gpipe, 1f1b"},
        {{"--model", M, "--cluster", C, "--pipeline-schedule", "1f1b"}, 2,
         "--pipeline-schedule: a pipeline needs --pp 2 or more"},
        {{"--model", M, "--cluster", C, "--world", "16", "--pp", "2", "--ep", "2",
          "--pipeline-schedule", "1f1b", "-q", "-o", "@/pp1.yaml"},
         0, NULL},
        {{"--regenerate", "@/pp1.yaml", "-q", "-o", "@/pp1b.yaml"}, 0, NULL},
        {{"diff", "--strict", "@/pp1.yaml", "@/pp1b.yaml"}, 0, NULL},
        {{"diff", "@/pp.yaml", "@/pp1.yaml"}, 1, NULL},
    };
    check_rows(rows, sizeof rows / sizeof rows[0]);
}

/* Outputs: never an input, checked before the work, unwritable ones exit 2 naming the flag. */
static void test_outputs(void **state)
{
    (void)state;
    char m[1200], link[1200], other[1200];
    mutate("models/tiny-moe.yaml", "m.yaml", "name: tiny-moe", "name: tiny-moe");
    snprintf(m, sizeof m, "%s/m.yaml", dir);
    snprintf(link, sizeof link, "%s/link.yaml", dir);
    snprintf(other, sizeof other, "%s/../%s/m.yaml", dir, strrchr(dir, '/') + 1);
    assert_int_equal(symlink(m, link), 0);
    char fifo[1200];
    snprintf(fifo, sizeof fifo, "%s/fifo.yaml", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    char *before = slurp(m);
    const char *C = "clusters/testbed-b.yaml", *P = "plans/tiny-moe@testbed-b.yaml";
    const row rows[] = {
        /* a FIFO (like /dev/null, a special file) is neither read (it would block) nor replaced
         * by the renamed output */
        {{"--model", "@/m.yaml", "--cluster", C, "--world", "16", "-o", "@/fifo.yaml"}, 2,
         "fifo.yaml: not a regular file"},
        {{"--model", "@/fifo.yaml", "--cluster", C, "--world", "16"}, 2,
         "fifo.yaml: not a regular file (a FIFO)"},
        {{"explain", "@/fifo.yaml"}, 2, "fifo.yaml: not a regular file (a FIFO)"},
        {{"--model", "@/m.yaml", "--cluster", C, "--world", "16", "-o", "@/m.yaml"}, 2,
         "is the input"},
        {{"--model", "@/m.yaml", "--cluster", C, "--world", "16", "-o", "@/link.yaml"}, 2,
         "link.yaml: is the input"},
        {{"--model", "@/link.yaml", "--cluster", C, "--world", "16", "-o", other}, 2,
         "is the input"},
        {{"--model", "@/m.yaml", "--cluster", C, "--world", "16", "-o", C}, 2, "is the input"},
        {{"--model", "@/m.yaml", "--cluster", C, "--world", "16", "-o", "/nonexistent/p.yaml"},
         2, "-o /nonexistent/p.yaml: cannot write"},
        {{"--model", "@/m.yaml", "--cluster", C, "--world", "16", "-o", "@"}, 2,
         "is a directory"},
        {{"simulate", P, "--svg", P}, 2, "--svg plans/tiny-moe@testbed-b.yaml: is the input"},
        {{"simulate", P, "--svg", "@/a.svg", "--trace", "@/a.svg"}, 2, "is also the --svg output"},
        {{"simulate", P, "--trace", "/nonexistent/t.json"}, 2, "--trace /nonexistent/t.json"},
        {{"sweep", "--cluster", C, "--grid", "fsmoe-table4", "--regret", "--csv",
          "/nonexistent/x.csv"},
         2, "--csv /nonexistent/x.csv: cannot write"},
        {{"sweep", "--cluster", C, "--grid", "parm-table3", "--csv", C}, 2, "is the input"},
        /* a plan the plan reader would refuse is not written; the override is named */
        {{"--model", "@/m.yaml", "--cluster", C, "--world", "16", "--batch", "65536", "--seq",
          "1024", "-o", "@/refused.yaml"},
         2, "--seq 1024: gives a plan that fsmoe-plan's plan reader refuses (model.seq: batch"},
        /* each override alone is held to the readers' limits */
        {{"--model", "@/m.yaml", "--cluster", C, "--world", "16", "--batch", "100000"}, 2,
         "--batch: 100000 is out of range"},
        {{"--model", "@/m.yaml", "--cluster", C, "--world", "16", "--batch", "65536", "--seq",
          "1024"},
         2, "nothing written"},
    };
    check_rows(rows, sizeof rows / sizeof rows[0]);
    char *after = slurp(m);
    assert_non_null(after);
    assert_string_equal(before, after); /* the model was not replaced */
    free(before);
    free(after);
    struct stat fs;
    assert_int_equal(lstat(fifo, &fs), 0);
    assert_true(S_ISFIFO(fs.st_mode)); /* not replaced by the output */
    char p[1200];
    snprintf(p, sizeof p, "%s/refused.yaml", dir);
    assert_int_equal(access(p, F_OK), -1);
}

/* A plan on a profile with fits below its r2 threshold says so on stderr (the plan's notes
 * list them); a plan on a profile without such fits does not; --quiet keeps stderr empty. */
static void test_low_r2_warning(void **state)
{
    (void)state;
    const char *E = "tests/data/emulated-2x2-8gbit.yaml";
    const row rows[] = {
        {{"--model", "models/comm-moe.yaml", "--cluster", E, "--world", "4", "--gpus-per-node",
          "2", "--dp", "2", "--ep", "2", "-o", "@/low.yaml"},
         0,
         "fsmoe-plan: warning: tests/data/emulated-2x2-8gbit.yaml: 5 of the fits this plan uses "
         "are below the profile's r2 threshold"},
    };
    check_rows(rows, 1);
    char err[8192], p[1200];
    snprintf(p, sizeof p, "%s/low.yaml", dir);
    char *plan = slurp(p);
    assert_non_null(plan);
    assert_non_null(strstr(plan, "LOW R2: alltoall inter at 2 ranks (profile line 57) fits with "
                                 "r2 0.9312 < 0.99"));
    free(plan);
    const char *quiet[] = {"--model", "models/comm-moe.yaml", "--cluster", E, "--world", "4",
                           "--gpus-per-node", "2", "--dp", "2", "--ep", "2", "-o", p, "--quiet",
                           NULL};
    assert_int_equal(run(err, sizeof err, quiet), 0);
    assert_string_equal(err, "");
    const char *clean[] = {"--model", "models/tiny-moe.yaml", "--cluster",
                           "clusters/testbed-b.yaml", "--world", "16", "-o", p, NULL};
    assert_int_equal(run(err, sizeof err, clean), 0);
    assert_null(strstr(err, "warning"));
}

/* Messages name the input field: the model's experts, a plan's recorded override. */
static void test_locations(void **state)
{
    (void)state;
    mutate("plans/tiny-moe@testbed-b.yaml", "rg.yaml", "{flag: world, value: \"16\"}",
           "{flag: batch, value: \"abc\"}");
    mutate("plans/tiny-moe@testbed-b.yaml", "rg2.yaml", "{flag: world, value: \"16\"}",
           "{flag: color, value: \"16\"}");
    /* a plan whose model changed under it: simulate names the plan's layers and the model */
    char to[1200];
    mutate("models/tiny-moe.yaml", "m5.yaml", "layers: 4\n", "layers: 5\n");
    snprintf(to, sizeof to, "model: %s/m5.yaml", dir);
    mutate("plans/tiny-moe@testbed-b.yaml", "p5.yaml", "model: models/tiny-moe.yaml", to);
    const row rows[] = {
        {{"simulate", "@/p5.yaml"}, 2, "@/p5.yaml:30:3: layers (model "},
        {{"--model", "models/tiny-moe.yaml", "--cluster", "clusters/testbed-b.yaml"}, 2,
         "models/tiny-moe.yaml:13:12: moe.experts: 4 is not divisible by ep=8"},
        {{"--regenerate", "@/rg.yaml"}, 2,
         "@/rg.yaml:12:28: provenance.overrides[0].value: recorded override --batch: 'abc'"},
        {{"--regenerate", "@/rg2.yaml"}, 2,
         "@/rg2.yaml:12:14: provenance.overrides[0].flag: unknown flag 'color'"},
    };
    check_rows(rows, sizeof rows / sizeof rows[0]);
    /* no usage text for an error in a file */
    char err[8192];
    char rg[1200];
    snprintf(rg, sizeof rg, "%s/rg.yaml", dir);
    const char *args[] = {"--regenerate", rg, NULL};
    assert_int_equal(run(err, sizeof err, args), 2);
    assert_null(strstr(err, "usage:"));
}

/* A killed writer's temporary is removed by the next write of the same path. */
static void test_stale_temporary(void **state)
{
    (void)state;
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
    char stale[1300], out[1200];
    snprintf(out, sizeof out, "%s/p.yaml", dir);
    snprintf(stale, sizeof stale, "%s.tmp.%ld.AbCdEf", out, (long)dead);
    write_file(strrchr(stale, '/') + 1, "half a plan");
    const row rows[] = {{{"--model", "models/tiny-moe.yaml", "--cluster",
                          "clusters/testbed-b.yaml", "--world", "16", "-q", "-o", "@/p.yaml"},
                         0, NULL}};
    check_rows(rows, 1);
    assert_int_equal(access(stale, F_OK), -1);
    assert_int_equal(access(out, F_OK), 0);
}

/* SIGTERM while an atomic file is open: exit 128+15, neither the file nor its temporary left. */
static void test_interrupted_writer(void **state)
{
    (void)state;
    char out[1200];
    snprintf(out, sizeof out, "%s/interrupted.yaml", dir);
    pid_t pid = fork();
    if (pid == 0) {
        fsmoe_atomic_on_signals();
        fsmoe_atomic_file af;
        if (fsmoe_atomic_open(&af, out, NULL) != FSMOE_OK)
            _exit(97);
        fputs("fsmoe_plan: 3\n", af.f);
        fflush(af.f);
        raise(SIGTERM);
        _exit(96);
    }
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 128 + SIGTERM);
    assert_int_equal(access(out, F_OK), -1);
    DIR *d = opendir(dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        assert_null(strstr(e->d_name, "interrupted.yaml.tmp."));
    closedir(d);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s FSMOE_PLAN_EXE\n", argv[0]);
        return 2;
    }
    exe = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flags, setup, teardown),
        cmocka_unit_test_setup_teardown(test_outputs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_locations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_low_r2_warning, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_temporary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interrupted_writer, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
