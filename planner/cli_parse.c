/* Implements: cli_parse.h — fsmoe-plan's options for every subcommand, checked before any file
 * is touched. getopt_long with opterr = 0 (the messages are ours, naming the flag) and a full
 * re-initialisation (optind = 0) per call, so the parser can run many times in one process. */
#include "cli_parse.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "diff.h"
#include "plan_model.h"
#include "sim_schedules.h"
#include "sweep.h"
#include "yaml_read.h"
#include "yaml_write.h"

const char *const plan_cli_ov_flags[OV_COUNT] = {"batch", "seq",           "world", "gpus-per-node",
                                                 "dp",    "mp",            "ep",    "esp",
                                                 "capacity-factor", "pp", "micro-batches",
                                                 "pipeline-schedule"};

const char plan_cli_usage[] =
    "usage: fsmoe-plan --model MODEL.yaml --cluster CLUSTER.yaml [-o PLAN.yaml]\n"
    "                  [--method auto|fsmoe|fsmoe-paper|parm|monta]\n"
    "                  [--batch N] [--seq N] [--world N] [--gpus-per-node N]\n"
    "                  [--dp N] [--mp N] [--ep N] [--esp N] [--capacity-factor F|none]\n"
    "                  [--pp N [--micro-batches N] [--pipeline-schedule gpipe|1f1b]]\n"
    "                  [--mem-limit SIZE]  (K/M/G: refuse a plan whose memory model needs\n"
    "                                       more per GPU)\n"
    "                  [--quiet]\n"
    "       fsmoe-plan --model M --cluster C --search [--world N] [--gpus-per-node N]\n"
    "                  [--mem-limit SIZE|none] [--global-batch N] [--top N] [--svg FILE]\n"
    "                  [-o PLAN.yaml]\n"
    "                  [overrides]\n"
    "       fsmoe-plan --regenerate PLAN.yaml [-o OUT.yaml] [--quiet]\n"
    "       fsmoe-plan explain PLAN.yaml\n"
    "       fsmoe-plan diff A.yaml B.yaml [--rtol X] [--strict]\n"
    "       fsmoe-plan simulate PLAN.yaml [--schedule NAME|all] [--svg FILE] [--trace FILE]\n"
    "                  [--refine]\n"
    "       fsmoe-plan sweep --cluster CLUSTER.yaml --grid fsmoe-table4|parm-table3\n"
    "                  [--csv FILE] [--regret]\n"
    "       fsmoe-plan fidelity [--root DIR]\n"
    "       fsmoe-plan --help | --version\n"
    "\n"
    "Plans an MoE model on a cluster profile (FSMoE pipeline degrees and gradient partition,\n"
    "Parm S1/S2 schedule, MoNTA AllToAll strategy) and writes a YAML plan; without -o the plan\n"
    "goes to stdout. Overrides replace the model's training shape and the parallel layout\n"
    "(default: mp = esp = GPUs per node, ep = dp = nodes). diff exits 0 when the plans agree,\n"
    "1 when they differ, 2 on bad input. simulate plays one iteration of the plan (or of a\n"
    "baseline schedule) on the discrete-event simulator; sweep compares every schedule on a\n"
    "paper's grid of configurations. --search chooses the layout: every (dp, mp, ep, esp, pp)\n"
    "of the world is checked against the model, sized by the memory model (limit:\n"
    "--mem-limit, else the profile's device_memory_bytes; none: no limit), planned and\n"
    "simulated (a pipeline as GPipe and as 1F1B), and ranked by its iteration at one global\n"
    "batch (--global-batch, else batch x dp of the layout the plan would otherwise use); the\n"
    "table goes to stderr, the best layout's plan to -o. Outputs are written atomically and\n"
    "never replace an input; an interrupted run exits 128+signal and leaves no output behind.\n";

const char plan_cli_sim_usage[] =
    "usage: fsmoe-plan simulate PLAN.yaml [--schedule NAME|all] [--svg FILE] [--trace FILE]\n"
    "                           [--window FROM_MS:TO_MS] [--refine]\n"
    "Simulates one training iteration of the plan (default schedule: plan) on the cost model\n"
    "of its cluster profile and prints the iteration time, each resource's busy time and\n"
    "utilisation, and the critical path. --schedule all compares every schedule. --svg draws a\n"
    "Gantt chart (--window zooms it to a time range, in ms), --trace writes Chrome\n"
    "trace-event JSON (open it in ui.perfetto.dev).\n"
    "--refine re-chooses every layer's r_f, r_b with the simulator first.\n"
    "Schedules: deepspeed parm-baseline tutel tutel-improved pipemoe-lina fsmoe-no-iio fsmoe\n"
    "           parm-s1 parm-s2 monta-o1 monta-o2 monta-o3 plan\n"
    "(plan plays each layer's chosen schedule; fsmoe FSMoE's ESP pipeline in every layer)\n";

const char plan_cli_sweep_usage[] =
    "usage: fsmoe-plan sweep --cluster CLUSTER.yaml --grid fsmoe-table4|parm-table3\n"
    "                        [--csv FILE] [--regret] [--testbed a|b]\n"
    "Simulates every configuration of the grid with every schedule and prints the mean, min and\n"
    "max speedup of each schedule over tutel and over deepspeed. --regret also compares the\n"
    "planner's closed-form r_f, r_b (fsmoe-table4) with the best r found by simulation.\n"
    "--testbed picks Table 4's L range (default: from the profile's name).\n";

const char plan_cli_fidelity_usage[] =
    "usage: fsmoe-plan fidelity [--root DIR]\n"
    "Prints the papers' published figures (FSMoE Table 5, Fig. 6, Fig. 7; Parm Tables IV and V;\n"
    "MoNTA Table 8 and its end-to-end gain) next to this planner's predictions for the same\n"
    "configurations, with their ratio and whether each row meets its target. Profiles and\n"
    "models are read from DIR/clusters and DIR/models (default: the current directory).\n";

static const fsmoe_cli_enum method_table[] = {{"auto", PLAN_METHOD_AUTO},
                                              {"fsmoe", PLAN_METHOD_FSMOE},
                                              {"fsmoe-paper", PLAN_METHOD_FSMOE_PAPER},
                                              {"parm", PLAN_METHOD_PARM},
                                              {"monta", PLAN_METHOD_MONTA},
                                              {NULL, 0}};

const char *plan_cli_method_name(int method)
{
    for (const fsmoe_cli_enum *e = method_table; e->name; e++)
        if (e->value == method)
            return e->name;
    return "?";
}

static fsmoe_status usage_fail(fsmoe_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static fsmoe_status usage_fail(fsmoe_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fsmoe_status st = fsmoe_vfail(err, FSMOE_ERR_USAGE, fmt, ap);
    va_end(ap);
    return st;
}

/* getopt's ':' and '?': a flag without its value, or an unknown flag with the closest long
 * option suggested ("--bach" -> "--batch"). */
static fsmoe_status bad_option(int c, char **argv, const struct option *opts, fsmoe_error *err)
{
    const char *arg = optind > 0 ? argv[optind - 1] : "";
    if (c == ':')
        return usage_fail(err, "option '%.200s' needs a value", arg);
    if (optopt && optopt < 256 && (arg[0] != '-' || arg[1] != '-')) {
        char flag[3] = {'-', (char)optopt, '\0'};
        return usage_fail(err, "unknown option '%s'", flag);
    }
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
    if (best)
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "unknown option '%.200s' (did you mean --%s?)",
                          arg, best);
    return usage_fail(err, "unknown option '%.200s'", arg);
}

fsmoe_status plan_cli_overrides(const char *const ov[OV_COUNT], plan_cli_ov_values *v, int *bad,
                                fsmoe_error *err)
{
    static const struct {
        const char *flag;
        long lo, hi;
    } ints[OV_CAPACITY] = {/* the readers' limits (yaml_read.h): an override cannot make a plan
                            * that the plan reader refuses for its size */
                           {"--batch", 1, FSMOE_LIMIT_BATCH},
                           {"--seq", 1, FSMOE_LIMIT_SEQ},
                           {"--world", 1, FSMOE_LIMIT_WORLD},
                           {"--gpus-per-node", 1, FSMOE_LIMIT_GPUS_PER_NODE},
                           {"--dp", 1, FSMOE_LIMIT_WORLD},
                           {"--mp", 1, FSMOE_LIMIT_WORLD},
                           {"--ep", 1, FSMOE_LIMIT_WORLD},
                           {"--esp", 1, FSMOE_LIMIT_WORLD}};
    for (int i = 0; i < OV_CAPACITY; i++) {
        if (!ov[i])
            continue;
        long x;
        *bad = i;
        fsmoe_status st = fsmoe_cli_long(ints[i].flag, ov[i], ints[i].lo, ints[i].hi, &x, err);
        if (st != FSMOE_OK)
            return st;
        switch (i) {
        case OV_BATCH: v->batch = x; break;
        case OV_SEQ: v->seq = x; break;
        case OV_WORLD: v->world = (int)x; break;
        case OV_GPN: v->gpn = (int)x; break;
        case OV_DP: v->dp = (int)x; break;
        case OV_MP: v->mp = (int)x; break;
        case OV_EP: v->ep = (int)x; break;
        default: v->esp = (int)x; break;
        }
    }
    if (ov[OV_CAPACITY]) {
        *bad = OV_CAPACITY;
        if (strcmp(ov[OV_CAPACITY], "none") == 0) {
            v->f = 0;
        } else {
            fsmoe_status st =
                fsmoe_cli_double("--capacity-factor", ov[OV_CAPACITY], 1e-3, 1e3, &v->f, err);
            if (st != FSMOE_OK) {
                char msg[FSMOE_ERROR_MAX];
                snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
                return fsmoe_fail(err, st, "%.900s, or none", msg);
            }
        }
    }
    static const struct {
        int ov;
        const char *flag;
        long hi;
    } more[] = {{OV_PP, "--pp", 64}, {OV_MICRO, "--micro-batches", 1024}}; /* gpipe.h's limits */
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
        if (!ov[more[i].ov])
            continue;
        long x;
        *bad = more[i].ov;
        fsmoe_status st = fsmoe_cli_long(more[i].flag, ov[more[i].ov], 1, more[i].hi, &x, err);
        if (st != FSMOE_OK)
            return st;
        if (more[i].ov == OV_PP)
            v->pp = (int)x;
        else
            v->micro = (int)x;
    }
    if (ov[OV_PSCHED]) {
        *bad = OV_PSCHED;
        if (strcmp(ov[OV_PSCHED], "gpipe") != 0 && strcmp(ov[OV_PSCHED], "1f1b") != 0)
            return fsmoe_fail(err, FSMOE_ERR_USAGE,
                              "--pipeline-schedule: '%.100s' is not one of gpipe, 1f1b",
                              ov[OV_PSCHED]);
        v->one_f_one_b = strcmp(ov[OV_PSCHED], "1f1b") == 0;
    }
    if (ov[OV_WORLD] && ov[OV_GPN] && v->world % v->gpn != 0) {
        *bad = OV_WORLD;
        return fsmoe_fail(err, FSMOE_ERR_USAGE,
                          "--world %d is not a multiple of --gpus-per-node %d", v->world, v->gpn);
    }
    *bad = -1;
    return FSMOE_OK;
}

void plan_cli_ov_canonical(int i, const plan_cli_ov_values *v, char *buf, unsigned long len)
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
    case OV_PP: snprintf(buf, len, "%d", v->pp); break;
    case OV_MICRO: snprintf(buf, len, "%d", v->micro); break;
    case OV_PSCHED: snprintf(buf, len, "%s", v->one_f_one_b ? "1f1b" : "gpipe"); break;
    case OV_CAPACITY:
        if (v->f == 0) {
            snprintf(buf, len, "none");
        } else {
            char d[FSMOE_YW_DOUBLE_CHARS];
            snprintf(buf, len, "%s", fsmoe_yaml_format_double(v->f, d));
        }
        break;
    default: buf[0] = '\0';
    }
}

static fsmoe_status parse_plan(int argc, char **argv, plan_cli *a, fsmoe_error *err)
{
    enum { O_MODEL = 256, O_CLUSTER, O_METHOD, O_REGEN, O_QUIET, O_HELP, O_VERSION, O_MEM,
           O_SEARCH, O_TOP, O_SVG, O_GBATCH, O_OV };
    static const struct option opts[] = {
        {"model", required_argument, NULL, O_MODEL},
        {"cluster", required_argument, NULL, O_CLUSTER},
        {"output", required_argument, NULL, 'o'},
        {"method", required_argument, NULL, O_METHOD},
        {"regenerate", required_argument, NULL, O_REGEN},
        {"quiet", no_argument, NULL, O_QUIET},
        {"mem-limit", required_argument, NULL, O_MEM},
        {"search", no_argument, NULL, O_SEARCH},
        {"top", required_argument, NULL, O_TOP},
        {"svg", required_argument, NULL, O_SVG},
        {"global-batch", required_argument, NULL, O_GBATCH},
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
        {"pp", required_argument, NULL, O_OV + OV_PP},
        {"micro-batches", required_argument, NULL, O_OV + OV_MICRO},
        {"pipeline-schedule", required_argument, NULL, O_OV + OV_PSCHED},
        {NULL, 0, NULL, 0},
    };
    const char *method = NULL;
    int c, help = 0, version = 0;
    while ((c = getopt_long(argc, argv, ":o:hqV", opts, NULL)) != -1) {
        switch (c) {
        case O_MODEL: a->model_path = optarg; break;
        case O_CLUSTER: a->cluster_path = optarg; break;
        case 'o': a->out_path = optarg; break;
        case O_METHOD: method = optarg; break;
        case O_REGEN: a->regenerate = optarg; break;
        case 'q':
        case O_QUIET: a->quiet = 1; break;
        case O_MEM:
            if (strcmp(optarg, "none") == 0)
                a->mem_limit = -1; /* no limit, whatever the profile's device memory */
            else if (fsmoe_cli_size("--mem-limit", optarg, 1LL << 20, 1LL << 50, &a->mem_limit,
                                    err))
                return FSMOE_ERR_USAGE;
            break;
        case O_SEARCH: a->search = 1; break;
        case O_TOP:
            if (fsmoe_cli_int("--top", optarg, 1, 10000, &a->top, err))
                return FSMOE_ERR_USAGE;
            break;
        case O_SVG: a->svg = optarg; break;
        case O_GBATCH:
            if (fsmoe_cli_long("--global-batch", optarg, 1, FSMOE_LIMIT_BATCH * FSMOE_LIMIT_WORLD,
                               &a->global_batch, err))
                return FSMOE_ERR_USAGE;
            break;
        case 'h':
        case O_HELP: help = 1; break;
        case 'V':
        case O_VERSION: version = 1; break;
        default:
            if (c >= O_OV && c < O_OV + OV_COUNT) {
                a->ov[c - O_OV] = optarg;
                break;
            }
            return bad_option(c, argv, opts, err);
        }
    }
    /* --help / --version win over everything else that parsed */
    if (help) {
        a->cmd = PLAN_CMD_HELP;
        return FSMOE_OK;
    }
    if (version) {
        a->cmd = PLAN_CMD_VERSION;
        return FSMOE_OK;
    }
    if (optind < argc)
        return usage_fail(err, "unexpected argument '%.200s'", argv[optind]);
    if (a->out_path && a->out_path[0] == '\0')
        return usage_fail(err, "-o: an empty path");
    if (!a->search && (a->top || a->svg || a->global_batch))
        return usage_fail(err, "--%s belongs to --search",
                          a->top ? "top" : a->svg ? "svg" : "global-batch");
    if (a->global_batch && a->ov[OV_BATCH])
        return usage_fail(err, "--global-batch and --batch: the search sets each DP rank's batch "
                               "from the global one; give one of them");
    if (a->svg && a->svg[0] == '\0')
        return usage_fail(err, "--svg: an empty path");
    if (a->search) {
        if (a->regenerate)
            return usage_fail(err, "--search and --regenerate: a searched plan records its "
                                   "layout; regenerate it without --search");
        for (int i = OV_DP; i <= OV_PSCHED; i++)
            if (a->ov[i] && i != OV_CAPACITY)
                return usage_fail(err, "--search chooses the layout; --%s is not allowed with it",
                                  plan_cli_ov_flags[i]);
        if (!a->top)
            a->top = 5;
    }
    if (a->regenerate) {
        if (a->model_path || a->cluster_path || method)
            return usage_fail(err,
                              "--regenerate takes the model, cluster and method from the plan; "
                              "do not give --model, --cluster or --method with it");
        for (int i = 0; i < OV_COUNT; i++)
            if (a->ov[i])
                return usage_fail(err,
                                  "--regenerate replays the plan's own overrides; --%s is not "
                                  "allowed with it",
                                  plan_cli_ov_flags[i]);
        a->cmd = PLAN_CMD_REGENERATE;
        return FSMOE_OK;
    }
    if (method && fsmoe_cli_enum_parse("--method", method, method_table, &a->method, err))
        return FSMOE_ERR_USAGE;
    int bad;
    if (plan_cli_overrides(a->ov, &a->v, &bad, err) != FSMOE_OK)
        return FSMOE_ERR_USAGE;
    if (!a->model_path)
        return usage_fail(err, "--model is required");
    if (!a->cluster_path)
        return usage_fail(err, "--cluster is required");
    a->cmd = PLAN_CMD_PLAN;
    return FSMOE_OK;
}

/* explain PLAN / diff A B: argv[0] is the subcommand. */
static fsmoe_status parse_explain_diff(int argc, char **argv, plan_cli *a, int diff,
                                       fsmoe_error *err)
{
    enum { O_RTOL = 256, O_STRICT, O_HELP };
    static const struct option diff_opts[] = {
        {"rtol", required_argument, NULL, O_RTOL},
        {"strict", no_argument, NULL, O_STRICT},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    static const struct option explain_opts[] = {
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    const struct option *opts = diff ? diff_opts : explain_opts;
    a->rtol = DIFF_DEFAULT_RTOL;
    int c, help = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case O_RTOL:
            if (fsmoe_cli_double("--rtol", optarg, 0, 1, &a->rtol, err))
                return FSMOE_ERR_USAGE;
            break;
        case O_STRICT: a->strict = 1; break;
        case 'h':
        case O_HELP: help = 1; break;
        default: return bad_option(c, argv, opts, err);
        }
    }
    if (help) {
        a->cmd = PLAN_CMD_HELP;
        return FSMOE_OK;
    }
    int want = diff ? 2 : 1;
    if (argc - optind != want)
        return usage_fail(err, "%s", diff ? "diff takes exactly two plan files"
                                         : "explain takes exactly one plan file");
    for (int i = 0; i < want; i++) {
        if (argv[optind + i][0] == '\0')
            return usage_fail(err, "%s: an empty plan path", diff ? "diff" : "explain");
        a->inputs[i] = argv[optind + i];
    }
    a->cmd = diff ? PLAN_CMD_DIFF : PLAN_CMD_EXPLAIN;
    return FSMOE_OK;
}

static fsmoe_status parse_simulate(int argc, char **argv, plan_cli *a, fsmoe_error *err)
{
    static const struct option opts[] = {
        {"schedule", required_argument, NULL, 's'}, {"svg", required_argument, NULL, 'g'},
        {"trace", required_argument, NULL, 't'},    {"refine", no_argument, NULL, 'r'},
        {"window", required_argument, NULL, 'w'},   {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *sched_name = "plan";
    int c, help = 0;
    a->usage = plan_cli_sim_usage;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 's': sched_name = optarg; break;
        case 'g': a->svg = optarg; break;
        case 't': a->trace = optarg; break;
        case 'r': a->refine = 1; break;
        case 'w': {
            char spec[128];
            double x, y;
            if (strlen(optarg) >= sizeof spec)
                return usage_fail(err, "--window: '%.60s...' is too long (expected FROM_MS:TO_MS)",
                                  optarg);
            snprintf(spec, sizeof spec, "%s", optarg); /* argv stays untouched */
            char *colon = strchr(spec, ':');
            if (!colon)
                return usage_fail(err, "--window: expected FROM_MS:TO_MS, e.g. 100:250");
            *colon = '\0';
            if (fsmoe_cli_double("--window FROM_MS", spec, 0.0, 1e12, &x, err) ||
                fsmoe_cli_double("--window TO_MS", colon + 1, 0.0, 1e12, &y, err))
                return FSMOE_ERR_USAGE;
            if (y <= x)
                return usage_fail(err, "--window: TO_MS must be larger than FROM_MS");
            a->win_from_s = x * 1e-3;
            a->win_to_s = y * 1e-3;
            break;
        }
        case 'h': help = 1; break;
        default: return bad_option(c, argv, opts, err);
        }
    }
    if (help) {
        a->cmd = PLAN_CMD_HELP;
        return FSMOE_OK;
    }
    if (optind != argc - 1)
        return usage_fail(err, "%s", optind >= argc ? "simulate: PLAN.yaml is missing"
                                                      : "simulate: exactly one PLAN.yaml");
    a->inputs[0] = argv[optind];
    if (a->inputs[0][0] == '\0')
        return usage_fail(err, "simulate: an empty plan path");
    a->all = strcmp(sched_name, "all") == 0;
    a->schedule = a->all ? SIM_SCHED_PLAN : sim_schedule_from_name(sched_name);
    if (a->schedule < 0)
        return usage_fail(err, "--schedule: '%.100s' is not a schedule (or 'all')", sched_name);
    if (a->all && (a->svg || a->trace))
        return usage_fail(err, "--svg/--trace draw one schedule, not --schedule all");
    if ((a->svg && a->svg[0] == '\0') || (a->trace && a->trace[0] == '\0'))
        return usage_fail(err, "%s: an empty path", a->svg && !a->svg[0] ? "--svg" : "--trace");
    if ((a->win_to_s > 0.0) && !a->svg)
        return usage_fail(err, "--window zooms the --svg chart; give --svg FILE with it");
    a->cmd = PLAN_CMD_SIMULATE;
    return FSMOE_OK;
}

static fsmoe_status parse_sweep(int argc, char **argv, plan_cli *a, fsmoe_error *err)
{
    static const struct option opts[] = {
        {"cluster", required_argument, NULL, 'c'}, {"grid", required_argument, NULL, 'g'},
        {"csv", required_argument, NULL, 'o'},     {"regret", no_argument, NULL, 'r'},
        {"testbed", required_argument, NULL, 't'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const fsmoe_cli_enum grids[] = {
        {"fsmoe-table4", SWEEP_FSMOE_TABLE4}, {"parm-table3", SWEEP_PARM_TABLE3}, {NULL, 0}};
    static const fsmoe_cli_enum testbeds[] = {{"a", 'a'}, {"b", 'b'}, {NULL, 0}};
    int c, help = 0;
    a->usage = plan_cli_sweep_usage;
    a->grid = -1;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': a->cluster_path = optarg; break;
        case 'g':
            if (fsmoe_cli_enum_parse("--grid", optarg, grids, &a->grid, err) != FSMOE_OK)
                return FSMOE_ERR_USAGE;
            break;
        case 'o': a->csv = optarg; break;
        case 'r': a->regret = 1; break;
        case 't':
            if (fsmoe_cli_enum_parse("--testbed", optarg, testbeds, &a->testbed, err) != FSMOE_OK)
                return FSMOE_ERR_USAGE;
            break;
        case 'h': help = 1; break;
        default: return bad_option(c, argv, opts, err);
        }
    }
    if (help) {
        a->cmd = PLAN_CMD_HELP;
        return FSMOE_OK;
    }
    if (optind != argc)
        return usage_fail(err, "sweep: unexpected argument '%.200s'", argv[optind]);
    if (!a->cluster_path)
        return usage_fail(err, "sweep: --cluster is required");
    if (a->grid < 0)
        return usage_fail(err, "sweep: --grid is required");
    if (a->cluster_path[0] == '\0' || (a->csv && a->csv[0] == '\0'))
        return usage_fail(err, "%s: an empty path", a->cluster_path[0] ? "--csv" : "--cluster");
    a->cmd = PLAN_CMD_SWEEP;
    return FSMOE_OK;
}

static fsmoe_status parse_fidelity(int argc, char **argv, plan_cli *a, fsmoe_error *err)
{
    static const struct option opts[] = {
        {"root", required_argument, NULL, 'r'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c, help = 0;
    a->usage = plan_cli_fidelity_usage;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'r': a->root = optarg; break;
        case 'h': help = 1; break;
        default: return bad_option(c, argv, opts, err);
        }
    }
    if (help) {
        a->cmd = PLAN_CMD_HELP;
        return FSMOE_OK;
    }
    if (optind != argc)
        return usage_fail(err, "fidelity: unexpected argument '%.200s'", argv[optind]);
    if (a->root && a->root[0] == '\0')
        return usage_fail(err, "--root: an empty path");
    a->cmd = PLAN_CMD_FIDELITY;
    return FSMOE_OK;
}

fsmoe_status plan_cli_parse(int argc, char **argv, plan_cli *cli, fsmoe_error *err)
{
    memset(cli, 0, sizeof *cli);
    cli->usage = plan_cli_usage;
    cli->method = PLAN_METHOD_AUTO;
    optind = 0; /* glibc: a full re-initialisation, so the parser can run again */
    opterr = 0;
    if (argc < 2)
        return usage_fail(err, "nothing to do: give --model and --cluster, or a subcommand");
    const char *sub = argv[1];
    if (strcmp(sub, "explain") == 0)
        return parse_explain_diff(argc - 1, argv + 1, cli, 0, err);
    if (strcmp(sub, "diff") == 0)
        return parse_explain_diff(argc - 1, argv + 1, cli, 1, err);
    if (strcmp(sub, "simulate") == 0)
        return parse_simulate(argc - 1, argv + 1, cli, err);
    if (strcmp(sub, "sweep") == 0)
        return parse_sweep(argc - 1, argv + 1, cli, err);
    if (strcmp(sub, "fidelity") == 0)
        return parse_fidelity(argc - 1, argv + 1, cli, err);
    return parse_plan(argc, argv, cli, err);
}
