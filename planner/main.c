/* Implements: the fsmoe-plan command line (design.md §1, §9; style.md "Command lines"):
 *   fsmoe-plan --model M --cluster C [-o plan.yaml] [--method ...] [overrides] [--quiet]
 *   fsmoe-plan --regenerate PLAN [-o OUT]
 *   fsmoe-plan explain PLAN
 *   fsmoe-plan diff A B [--rtol X] [--strict]
 *   fsmoe-plan simulate PLAN ... / fsmoe-plan sweep ...   (planner/sim_cli.c)
 * Exit codes: 0 success (diff: plans agree), 1 diff found differences or an internal/IO failure
 * while writing, 2 usage or input error (bad flag, missing or invalid input file).
 *
 * The layout is resolved in a fixed order (design.md §2): the cluster's common layout
 * (mp = esp = G, ep = dp = nodes), replaced by the model file's `parallel` section when present,
 * then by command-line overrides. Every override given is recorded in the plan, normalised and in
 * a fixed order, so `--regenerate` can replay it. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cluster.h"
#include "diff.h"
#include "explain.h"
#include "sim_cli.h"
#include "model.h"
#include "parallel.h"
#include "plan.h"
#include "plan_model.h"
#include "sha256.h"
#include "yaml_read.h"
#include "yaml_write.h"

#ifndef FSMOE_VERSION
#error "FSMOE_VERSION must be defined by the build (meson.build: add_project_arguments)"
#endif

static const char *prog = "fsmoe-plan";

static const char usage_text[] =
    "usage: fsmoe-plan --model MODEL.yaml --cluster CLUSTER.yaml [-o PLAN.yaml]\n"
    "                  [--method auto|fsmoe|fsmoe-paper|parm|monta]\n"
    "                  [--batch N] [--seq N] [--world N] [--gpus-per-node N]\n"
    "                  [--dp N] [--mp N] [--ep N] [--esp N] [--capacity-factor F|none]\n"
    "                  [--quiet]\n"
    "       fsmoe-plan --regenerate PLAN.yaml [-o OUT.yaml] [--quiet]\n"
    "       fsmoe-plan explain PLAN.yaml\n"
    "       fsmoe-plan diff A.yaml B.yaml [--rtol X] [--strict]\n"
    "       fsmoe-plan simulate PLAN.yaml [--schedule NAME|all] [--svg FILE] [--trace FILE]\n"
    "                  [--refine]\n"
    "       fsmoe-plan sweep --cluster CLUSTER.yaml --grid fsmoe-table4|parm-table3\n"
    "                  [--csv FILE] [--regret]\n"
    "       fsmoe-plan --help | --version\n"
    "\n"
    "Plans an MoE model on a cluster profile (FSMoE pipeline degrees and gradient partition,\n"
    "Parm S1/S2 schedule, MoNTA AllToAll strategy) and writes a YAML plan; without -o the plan\n"
    "goes to stdout. Overrides replace the model's training shape and the parallel layout\n"
    "(default: mp = esp = GPUs per node, ep = dp = nodes). diff exits 0 when the plans agree,\n"
    "1 when they differ, 2 on bad input. simulate plays one iteration of the plan (or of a\n"
    "baseline schedule) on the discrete-event simulator; sweep compares every schedule on a\n"
    "paper's grid of configurations.\n";

static int usage(const char *reason)
{
    if (reason)
        fprintf(stderr, "%s: %s\n", prog, reason);
    fputs(usage_text, stderr);
    return 2;
}

/* Input errors (a missing file included) exit 2; what fails later, e.g. writing, keeps the
 * status's own code. */
static int input_error(const fsmoe_error *err)
{
    fsmoe_error_print(prog, err);
    return err->status == FSMOE_ERR_IO ? 2 : fsmoe_exit_code(err->status);
}

/* ---- overrides ---------------------------------------------------------------------------- */

/* The override flags in the fixed order they are recorded in a plan. */
enum {
    OV_BATCH = 0,
    OV_SEQ,
    OV_WORLD,
    OV_GPN,
    OV_DP,
    OV_MP,
    OV_EP,
    OV_ESP,
    OV_CAPACITY,
    OV_COUNT
};
static const char *const ov_flags[OV_COUNT] = {"batch", "seq", "world", "gpus-per-node", "dp",
                                                "mp",    "ep",  "esp",   "capacity-factor"};

typedef struct {
    const char *model_path, *cluster_path, *out_path, *regenerate;
    const char *method;
    int quiet;
    const char *ov[OV_COUNT]; /* text as given; NULL when not given */
} plan_args;

typedef struct {
    long batch, seq;
    int world, gpn, dp, mp, ep, esp;
    double f;
} ov_values;

static const fsmoe_cli_enum method_table[] = {
    {"auto", PLAN_METHOD_AUTO},   {"fsmoe", PLAN_METHOD_FSMOE}, {"fsmoe-paper", PLAN_METHOD_FSMOE_PAPER},
    {"parm", PLAN_METHOD_PARM},   {"monta", PLAN_METHOD_MONTA}, {NULL, 0}};

/* Parses every given override; values are range-checked here, combinations later. */
static fsmoe_status parse_overrides(const plan_args *a, ov_values *v, fsmoe_error *err)
{
    fsmoe_status st = FSMOE_OK;
    const int big = 1 << 20;
    if (a->ov[OV_BATCH] &&
        (st = fsmoe_cli_long("--batch", a->ov[OV_BATCH], 1, 1000000, &v->batch, err)))
        return st;
    if (a->ov[OV_SEQ] && (st = fsmoe_cli_long("--seq", a->ov[OV_SEQ], 1, 10000000, &v->seq, err)))
        return st;
    if (a->ov[OV_WORLD] && (st = fsmoe_cli_int("--world", a->ov[OV_WORLD], 1, big, &v->world, err)))
        return st;
    if (a->ov[OV_GPN] &&
        (st = fsmoe_cli_int("--gpus-per-node", a->ov[OV_GPN], 1, 1024, &v->gpn, err)))
        return st;
    if (a->ov[OV_DP] && (st = fsmoe_cli_int("--dp", a->ov[OV_DP], 1, big, &v->dp, err)))
        return st;
    if (a->ov[OV_MP] && (st = fsmoe_cli_int("--mp", a->ov[OV_MP], 1, big, &v->mp, err)))
        return st;
    if (a->ov[OV_EP] && (st = fsmoe_cli_int("--ep", a->ov[OV_EP], 1, big, &v->ep, err)))
        return st;
    if (a->ov[OV_ESP] && (st = fsmoe_cli_int("--esp", a->ov[OV_ESP], 1, big, &v->esp, err)))
        return st;
    if (a->ov[OV_CAPACITY]) {
        if (strcmp(a->ov[OV_CAPACITY], "none") == 0)
            v->f = 0;
        else if ((st = fsmoe_cli_double("--capacity-factor", a->ov[OV_CAPACITY], 1e-3, 1e3, &v->f,
                                        err))) {
            char msg[FSMOE_ERROR_MAX];
            snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
            return fsmoe_fail(err, st, "%.900s, or none", msg);
        }
    }
    return FSMOE_OK;
}

/* The canonical text of an override as recorded in the plan (so "08" and "8" give one plan). */
static void ov_canonical(int i, const ov_values *v, char *buf, size_t len)
{
    switch (i) {
    case OV_BATCH: snprintf(buf, len, "%ld", v->batch); break;
    case OV_SEQ: snprintf(buf, len, "%ld", v->seq); break;
    case OV_WORLD: snprintf(buf, len, "%d", v->world); break;
    case OV_GPN: snprintf(buf, len, "%d", v->gpn); break;
    case OV_DP: snprintf(buf, len, "%d", v->dp); break;
    case OV_MP: snprintf(buf, len, "%d", v->mp); break;
    case OV_EP: snprintf(buf, len, "%d", v->ep); break;
    case OV_ESP: snprintf(buf, len, "%d", v->esp); break;
    case OV_CAPACITY: {
        char d[FSMOE_YW_DOUBLE_CHARS];
        snprintf(buf, len, "%s", v->f == 0 ? "none" : fsmoe_yaml_format_double(v->f, d));
        break;
    }
    default: buf[0] = '\0';
    }
}

/* ---- planning ------------------------------------------------------------------------------ */

static void print_summary(const fsmoe_plan *p, const char *dest)
{
    const fsmoe_parallel *par = &p->parallel;
    char t[4][32];
    fprintf(stderr, "%s: %s on %s: %d GPUs (dp %d, mp %d, ep %d, esp %d), %d MoE layers, method %s\n",
            prog, p->model_name, p->cluster_name, par->world, par->dp, par->mp, par->ep, par->esp,
            p->n_layers, p->method);
    explain_time(p->predicted.iteration_s, t[0], sizeof t[0]);
    explain_time(p->predicted.forward_s, t[1], sizeof t[1]);
    explain_time(p->predicted.backward_s, t[2], sizeof t[2]);
    explain_time(p->predicted.tail_s, t[3], sizeof t[3]);
    fprintf(stderr, "  predicted iteration %s (forward %s, backward %s, gradient tail %s)\n", t[0],
            t[1], t[2], t[3]);
    const fsmoe_predicted *pr = &p->predicted;
    if (pr->iteration_s > 0)
        fprintf(stderr,
                "  speed-up: %.2fx over deepspeed, %.2fx over tutel, %.2fx over tutel-improved, "
                "%.2fx over pipemoe+lina\n",
                pr->deepspeed_s / pr->iteration_s, pr->tutel_s / pr->iteration_s,
                pr->tutel_improved_s / pr->iteration_s, pr->pipemoe_lina_s / pr->iteration_s);
    /* r distribution: count of layers per distinct r, in increasing r */
    for (int phase = 0; phase < 2; phase++) {
        fprintf(stderr, "  %s r:", phase == 0 ? "forward " : "backward");
        int last = 0;
        for (;;) {
            int next = 0, count = 0;
            for (int i = 0; i < p->n_layers; i++) {
                int r = phase == 0 ? p->layers[i].fwd.r : p->layers[i].bwd.r;
                if (r > last && (next == 0 || r < next))
                    next = r;
            }
            if (next == 0)
                break;
            for (int i = 0; i < p->n_layers; i++)
                count += (phase == 0 ? p->layers[i].fwd.r : p->layers[i].bwd.r) == next;
            fprintf(stderr, " %d (x%d)", next, count);
            last = next;
        }
        fprintf(stderr, "\n");
    }
    if (dest)
        fprintf(stderr, "  wrote %s\n", dest);
}

static int run_plan(const plan_args *a)
{
    fsmoe_error err = {0};
    fsmoe_model m;
    fsmoe_cluster c;
    fsmoe_plan p;
    ov_values v = {0};
    int method = PLAN_METHOD_AUTO;
    int rc = 0;
    memset(&m, 0, sizeof m);
    memset(&c, 0, sizeof c);
    memset(&p, 0, sizeof p);

    /* Command-line problems first, before any file is read. */
    if (a->method && fsmoe_cli_enum_parse("--method", a->method, method_table, &method, &err))
        return usage(err.msg);
    if (parse_overrides(a, &v, &err))
        return usage(err.msg);
    if (a->ov[OV_WORLD] && a->ov[OV_GPN] && v.world % v.gpn != 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "--world %d is not a multiple of --gpus-per-node %d", v.world,
                 v.gpn);
        return usage(msg);
    }

    if (fsmoe_model_load(a->model_path, &m, &err))
        return input_error(&err);
    if (fsmoe_cluster_load(a->cluster_path, &c, &err)) {
        rc = input_error(&err);
        goto done;
    }

    fsmoe_parallel par = fsmoe_parallel_common(c.nodes, c.gpus_per_node);
    char where[600];
    snprintf(where, sizeof where, "%s: common layout of %d nodes x %d GPUs", a->cluster_path,
             c.nodes, c.gpus_per_node);
    if (m.has_parallel) {
        par = m.parallel;
        snprintf(where, sizeof where, "%s: parallel", a->model_path);
    }
    if (a->ov[OV_WORLD] || a->ov[OV_GPN]) {
        /* A new cluster size: start again from the common layout of that size. */
        int gpn = a->ov[OV_GPN] ? v.gpn : par.gpus_per_node;
        int world = a->ov[OV_WORLD] ? v.world : par.world;
        if (gpn <= 0 || world % gpn != 0) {
            char msg[200];
            snprintf(msg, sizeof msg, "--world %d is not a multiple of %d GPUs per node", world,
                     gpn);
            rc = usage(msg);
            goto done;
        }
        par = fsmoe_parallel_common(world / gpn, gpn);
    }
    if (a->ov[OV_DP])
        par.dp = v.dp;
    if (a->ov[OV_MP])
        par.mp = v.mp;
    if (a->ov[OV_EP])
        par.ep = v.ep;
    if (a->ov[OV_ESP])
        par.esp = v.esp;
    for (int i = OV_WORLD; i <= OV_ESP; i++)
        if (a->ov[i]) {
            snprintf(where, sizeof where, "command line (layout after overrides)");
            break;
        }
    if (a->ov[OV_BATCH])
        m.B = v.batch;
    if (a->ov[OV_SEQ])
        m.L = v.seq;
    if (a->ov[OV_CAPACITY])
        m.f = v.f;
    /* After every override: the layout, E = ep for `experts: ep`, top_k <= E, capacity >= 1. */
    if (fsmoe_model_resolve(&m, &par, where, &err)) {
        rc = input_error(&err);
        goto done;
    }

    plan_options opt = {.method = (plan_method)method};
    if (plan_model(&m, &c, a->cluster_path, &par, &opt, &p, &err)) {
        rc = input_error(&err);
        goto done;
    }

    /* provenance */
    snprintf(p.model_path, sizeof p.model_path, "%s", a->model_path);
    snprintf(p.cluster_path, sizeof p.cluster_path, "%s", a->cluster_path);
    if (fsmoe_sha256_file(a->model_path, p.model_sha256, &err) ||
        fsmoe_sha256_file(a->cluster_path, p.cluster_sha256, &err)) {
        rc = input_error(&err);
        goto done;
    }
    snprintf(p.planner_version, sizeof p.planner_version, "%s", FSMOE_VERSION);
    snprintf(p.method, sizeof p.method, "%s", method_table[method].name);
    if (p.model_name[0] == '\0')
        snprintf(p.model_name, sizeof p.model_name, "%s", m.name);
    if (p.cluster_name[0] == '\0')
        snprintf(p.cluster_name, sizeof p.cluster_name, "%s", c.name);
    p.n_overrides = 0;
    for (int i = 0; i < OV_COUNT; i++) {
        if (!a->ov[i])
            continue;
        fsmoe_override *o = &p.overrides[p.n_overrides++];
        snprintf(o->flag, sizeof o->flag, "%s", ov_flags[i]);
        ov_canonical(i, &v, o->value, sizeof o->value);
    }

    if (a->out_path) {
        if (fsmoe_plan_write(&p, a->out_path, &err)) {
            fsmoe_error_print(prog, &err);
            rc = fsmoe_exit_code(err.status);
            goto done;
        }
    } else {
        if (fsmoe_plan_emit(&p, stdout, &err) || fflush(stdout) != 0) {
            if (err.status == FSMOE_OK)
                fsmoe_fail(&err, FSMOE_ERR_IO, "writing the plan to stdout failed");
            fsmoe_error_print(prog, &err);
            rc = 1;
            goto done;
        }
    }
    if (!a->quiet)
        print_summary(&p, a->out_path);
done:
    fsmoe_plan_free(&p);
    fsmoe_cluster_free(&c);
    return rc;
}

/* Replays a plan's recorded inputs: its model, cluster, method and overrides. Only the
 * provenance is read, so a plan of an older schema version can be regenerated too. */
static int run_regenerate(plan_args *a)
{
    fsmoe_error err = {0};
    fsmoe_plan old; /* a holds pointers into it until run_plan returns */
    if (fsmoe_plan_load_provenance(a->regenerate, &old, &err))
        return input_error(&err);
    a->model_path = old.model_path;
    a->cluster_path = old.cluster_path;
    a->method = old.method;
    for (int i = 0; i < old.n_overrides; i++) {
        int found = 0;
        for (int j = 0; j < OV_COUNT; j++)
            if (strcmp(old.overrides[i].flag, ov_flags[j]) == 0) {
                a->ov[j] = old.overrides[i].value;
                found = 1;
            }
        if (!found) {
            fsmoe_fail(&err, FSMOE_ERR_VALUE,
                       "%s: provenance.overrides[%d]: unknown flag '%s' (this fsmoe-plan records "
                       "only batch, seq, world, gpus-per-node, dp, mp, ep, esp, capacity-factor)",
                       a->regenerate, i, old.overrides[i].flag);
            fsmoe_plan_free(&old);
            return input_error(&err);
        }
    }
    int rc = run_plan(a);
    fsmoe_plan_free(&old);
    return rc;
}

/* Suggests the closest long option for a misspelt one ("--bach" -> "--batch"). */
static void unknown_option(const char *arg, const struct option *opts)
{
    const char *name = arg;
    while (*name == '-')
        name++;
    char word[64];
    snprintf(word, sizeof word, "%.*s", (int)strcspn(name, "="), name);
    const char *best = NULL;
    int best_d = 3;
    for (const struct option *o = opts; o->name; o++) {
        int d = fsmoe_edit_distance(word, o->name);
        if (d < best_d) {
            best_d = d;
            best = o->name;
        }
    }
    char msg[256];
    if (best)
        snprintf(msg, sizeof msg, "unknown option '%s' (did you mean --%s?)", arg, best);
    else
        snprintf(msg, sizeof msg, "unknown option '%s'", arg);
    usage(msg);
}

static int cmd_plan(int argc, char **argv)
{
    enum { O_MODEL = 256, O_CLUSTER, O_METHOD, O_REGEN, O_QUIET, O_HELP, O_VERSION, O_OV };
    static const struct option opts[] = {
        {"model", required_argument, NULL, O_MODEL},
        {"cluster", required_argument, NULL, O_CLUSTER},
        {"output", required_argument, NULL, 'o'},
        {"method", required_argument, NULL, O_METHOD},
        {"regenerate", required_argument, NULL, O_REGEN},
        {"quiet", no_argument, NULL, O_QUIET},
        {"help", no_argument, NULL, O_HELP},
        {"version", no_argument, NULL, O_VERSION},
        {"batch", required_argument, NULL, O_OV + OV_BATCH},
        {"seq", required_argument, NULL, O_OV + OV_SEQ},
        {"world", required_argument, NULL, O_OV + OV_WORLD},
        {"gpus-per-node", required_argument, NULL, O_OV + OV_GPN},
        {"dp", required_argument, NULL, O_OV + OV_DP},
        {"mp", required_argument, NULL, O_OV + OV_MP},
        {"ep", required_argument, NULL, O_OV + OV_EP},
        {"esp", required_argument, NULL, O_OV + OV_ESP},
        {"capacity-factor", required_argument, NULL, O_OV + OV_CAPACITY},
        {NULL, 0, NULL, 0},
    };
    plan_args a;
    memset(&a, 0, sizeof a);
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:hqV", opts, NULL)) != -1) {
        switch (c) {
        case O_MODEL: a.model_path = optarg; break;
        case O_CLUSTER: a.cluster_path = optarg; break;
        case 'o': a.out_path = optarg; break;
        case O_METHOD: a.method = optarg; break;
        case O_REGEN: a.regenerate = optarg; break;
        case 'q':
        case O_QUIET: a.quiet = 1; break;
        case 'h':
        case O_HELP: fputs(usage_text, stdout); return 0;
        case 'V':
        case O_VERSION: printf("fsmoe-plan %s\n", FSMOE_VERSION); return 0;
        case ':': {
            char msg[128];
            snprintf(msg, sizeof msg, "option '%s' needs a value", argv[optind - 1]);
            return usage(msg);
        }
        case '?':
            unknown_option(argv[optind - 1], opts);
            return 2;
        default:
            if (c >= O_OV && c < O_OV + OV_COUNT) {
                a.ov[c - O_OV] = optarg;
                break;
            }
            return usage("internal: unhandled option");
        }
    }
    if (optind < argc) {
        char msg[256];
        snprintf(msg, sizeof msg, "unexpected argument '%s'", argv[optind]);
        return usage(msg);
    }
    if (a.regenerate) {
        if (a.model_path || a.cluster_path || a.method)
            return usage("--regenerate takes the model, cluster and method from the plan; "
                         "do not give --model, --cluster or --method with it");
        for (int i = 0; i < OV_COUNT; i++)
            if (a.ov[i]) {
                char msg[128];
                snprintf(msg, sizeof msg,
                         "--regenerate replays the plan's own overrides; --%s is not allowed "
                         "with it",
                         ov_flags[i]);
                return usage(msg);
            }
        return run_regenerate(&a);
    }
    if (!a.model_path)
        return usage("--model is required");
    if (!a.cluster_path)
        return usage("--cluster is required");
    return run_plan(&a);
}

static int cmd_explain(int argc, char **argv)
{
    if (argc != 2)
        return usage("explain takes exactly one plan file");
    if (strcmp(argv[1], "--help") == 0) {
        fputs(usage_text, stdout);
        return 0;
    }
    fsmoe_error err = {0};
    fsmoe_plan p;
    if (fsmoe_plan_load(argv[1], &p, &err))
        return input_error(&err);
    explain_plan(&p, argv[1], stdout);
    fsmoe_plan_free(&p);
    return fflush(stdout) == 0 ? 0 : 1;
}

static int cmd_diff(int argc, char **argv)
{
    enum { O_RTOL = 256, O_STRICT, O_HELP };
    static const struct option opts[] = {
        {"rtol", required_argument, NULL, O_RTOL},
        {"strict", no_argument, NULL, O_STRICT},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    diff_options opt = {.rtol = DIFF_DEFAULT_RTOL, .strict = 0};
    fsmoe_error err = {0};
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (c) {
        case O_RTOL:
            if (fsmoe_cli_double("--rtol", optarg, 0, 1, &opt.rtol, &err))
                return usage(err.msg);
            break;
        case O_STRICT: opt.strict = 1; break;
        case O_HELP: fputs(usage_text, stdout); return 0;
        case ':': return usage("--rtol needs a value");
        default: unknown_option(argv[optind - 1], opts); return 2;
        }
    }
    if (argc - optind != 2)
        return usage("diff takes exactly two plan files");
    fsmoe_plan a, b;
    if (fsmoe_plan_load(argv[optind], &a, &err))
        return input_error(&err);
    if (fsmoe_plan_load(argv[optind + 1], &b, &err)) {
        fsmoe_plan_free(&a);
        return input_error(&err);
    }
    int n = diff_plans(&a, &b, &opt, stdout);
    if (n > 0)
        printf("%d difference%s between %s and %s\n", n, n == 1 ? "" : "s", argv[optind],
               argv[optind + 1]);
    fsmoe_plan_free(&a);
    fsmoe_plan_free(&b);
    fflush(stdout);
    return n > 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "explain") == 0)
        return cmd_explain(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "diff") == 0)
        return cmd_diff(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "simulate") == 0)
        return sim_cli_simulate(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "sweep") == 0)
        return sim_cli_sweep(argc - 1, argv + 1);
    if (argc == 1)
        return usage("nothing to do: give --model and --cluster, or a subcommand");
    return cmd_plan(argc, argv);
}
