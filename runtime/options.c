/* Implements: fsmoe-run's command line and run limits (options.h). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE /* getopt_long */
#endif

#include "options.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli.h"
#include "real.h"

enum {
    O_MODEL = 256, O_PLAN, O_DATA, O_STEPS, O_SEED, O_SAVE, O_SAVE_EVERY, O_RESUME,
    O_EVAL_EVERY, O_BACKEND, O_THREADS, O_BATCH, O_SEQ, O_LR, O_MIN_LR, O_WARMUP, O_WD,
    O_CLIP, O_AUX, O_NOISE, O_CF, O_GATE, O_ORDER, O_EXPERT, O_CHUNKS, O_EVAL_BATCHES, O_HELP,
    O_EP, O_COMM_TIMEOUT, O_NO_OVERLAP, O_STOP_AT, O_MEM_LIMIT, O_TRACE, O_SCHEDULE, O_CLUSTER, O_REPORT, O_PROFILE,
    O_CALIBRATE,
    O_MP, O_ESP, O_GPN
};

static const struct option opts[] = {
    {"model", 1, 0, O_MODEL},       {"plan", 1, 0, O_PLAN},
    {"data", 1, 0, O_DATA},         {"steps", 1, 0, O_STEPS},
    {"seed", 1, 0, O_SEED},         {"save", 1, 0, O_SAVE},
    {"save-every", 1, 0, O_SAVE_EVERY}, {"resume", 1, 0, O_RESUME},
    {"eval-every", 1, 0, O_EVAL_EVERY}, {"backend", 1, 0, O_BACKEND},
    {"threads", 1, 0, O_THREADS},   {"batch", 1, 0, O_BATCH},
    {"seq", 1, 0, O_SEQ},           {"lr", 1, 0, O_LR},
    {"min-lr", 1, 0, O_MIN_LR},     {"warmup", 1, 0, O_WARMUP},
    {"weight-decay", 1, 0, O_WD},   {"clip", 1, 0, O_CLIP},
    {"aux-loss", 1, 0, O_AUX},      {"gate-noise", 1, 0, O_NOISE},
    {"capacity-factor", 1, 0, O_CF}, {"gate", 1, 0, O_GATE},
    {"order", 1, 0, O_ORDER},       {"expert", 1, 0, O_EXPERT},
    {"chunks", 1, 0, O_CHUNKS},     {"eval-batches", 1, 0, O_EVAL_BATCHES},
    {"help", 0, 0, O_HELP},         {"ep", 1, 0, O_EP},
    {"comm-timeout", 1, 0, O_COMM_TIMEOUT}, {"no-overlap", 0, 0, O_NO_OVERLAP},
    {"stop-at", 1, 0, O_STOP_AT},   {"mem-limit", 1, 0, O_MEM_LIMIT},
    {"trace", 1, 0, O_TRACE},       {"schedule", 1, 0, O_SCHEDULE},
    {"cluster", 1, 0, O_CLUSTER},   {"report", 0, 0, O_REPORT},
    {"mp", 1, 0, O_MP},             {"esp", 1, 0, O_ESP},
    {"gpus-per-node", 1, 0, O_GPN}, {"profile", 0, 0, O_PROFILE},
    {"calibrate", 1, 0, O_CALIBRATE},
    {0, 0, 0, 0}};

/* A path flag's value: not empty (an empty name would open "" or the current directory). */
static fsmoe_status path_arg(const char *flag, const char *text, const char **out,
                             fsmoe_error *err)
{
    if (!text[0])
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "%s: empty path", flag);
    *out = text;
    return FSMOE_OK;
}

fsmoe_status options_parse(rt_options *o, int argc, char **argv, fsmoe_error *err)
{
    memset(o, 0, sizeof *o);
    o->backend = "host";
    o->comm_timeout = -1;
    o->steps = o->seed = o->save_every = o->eval_every = o->batch = o->seq = -1;
    o->chunks = o->eval_batches = o->stop_at = -1;
    o->warmup = -2;
    o->lr = o->min_lr = o->wd = o->clip = o->aux = o->noise = -1;
    o->cf = -2;
    o->gate = o->order = o->expert = -1;
    optind = 0; /* glibc: start over (main and the fuzz harness parse more than once) */
    opterr = 0; /* the messages below name the option instead */
    fsmoe_status st = FSMOE_OK;
    int c;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        const char *a = optarg;
        switch (c) {
        case O_MODEL: st = path_arg("--model", a, &o->model_path, err); break;
        case O_PLAN: st = path_arg("--plan", a, &o->plan_path, err); break;
        case O_DATA: st = path_arg("--data", a, &o->data_path, err); break;
        case O_SAVE: st = path_arg("--save", a, &o->save_dir, err); break;
        case O_RESUME: st = path_arg("--resume", a, &o->resume_dir, err); break;
        case O_TRACE: st = path_arg("--trace", a, &o->trace_path, err); break;
        case O_CLUSTER: st = path_arg("--cluster", a, &o->cluster_path, err); break;
        case O_SCHEDULE: o->schedule = a; break; /* checked by main (schedule.h) */
        case O_REPORT: o->report = 1; break;
        case O_CALIBRATE:
            st = path_arg("--calibrate", a, &o->calibrate_path, err);
            o->report = 1; /* the fit is the report's */
            break;
        case O_PROFILE: o->profile = 1; break;
        case O_BACKEND: o->backend = a; break;
        case O_STEPS: st = fsmoe_cli_long("--steps", a, 1, 100000000, &o->steps, err); break;
        case O_SEED: st = fsmoe_cli_long("--seed", a, 0, 2147483647L, &o->seed, err); break;
        case O_SAVE_EVERY:
            st = fsmoe_cli_long("--save-every", a, 0, 100000000, &o->save_every, err);
            break;
        case O_EVAL_EVERY:
            st = fsmoe_cli_long("--eval-every", a, 0, 100000000, &o->eval_every, err);
            break;
        case O_EVAL_BATCHES:
            st = fsmoe_cli_long("--eval-batches", a, 1, 100000, &o->eval_batches, err);
            break;
        case O_THREADS: st = fsmoe_cli_int("--threads", a, 1, 1024, &o->threads, err); break;
        case O_BATCH: st = fsmoe_cli_long("--batch", a, 1, 1000000, &o->batch, err); break;
        case O_SEQ: st = fsmoe_cli_long("--seq", a, 1, RT_MAX_SEQ, &o->seq, err); break;
        case O_WARMUP: st = fsmoe_cli_long("--warmup", a, 0, 100000000, &o->warmup, err); break;
        case O_CHUNKS: st = fsmoe_cli_long("--chunks", a, 1, 64, &o->chunks, err); break;
        case O_LR: st = fsmoe_cli_double("--lr", a, 0, 10, &o->lr, err); break;
        case O_MIN_LR: st = fsmoe_cli_double("--min-lr", a, 0, 10, &o->min_lr, err); break;
        case O_WD: st = fsmoe_cli_double("--weight-decay", a, 0, 10, &o->wd, err); break;
        case O_CLIP: st = fsmoe_cli_double("--clip", a, 0, 1e9, &o->clip, err); break;
        case O_AUX: st = fsmoe_cli_double("--aux-loss", a, 0, 100, &o->aux, err); break;
        case O_NOISE: st = fsmoe_cli_double("--gate-noise", a, 0, 100, &o->noise, err); break;
        case O_CF:
            if (strcmp(a, "none") == 0)
                o->cf = 0;
            else
                st = fsmoe_cli_double("--capacity-factor", a, 0, 1000, &o->cf, err);
            break;
        case O_GATE: st = fsmoe_cli_enum_parse("--gate", a, config_gate_names, &o->gate, err); break;
        case O_ORDER: st = fsmoe_cli_enum_parse("--order", a, config_order_names, &o->order, err); break;
        case O_EXPERT: st = fsmoe_cli_enum_parse("--expert", a, config_expert_names, &o->expert, err); break;
        case O_EP: st = fsmoe_cli_int("--ep", a, 1, 65536, &o->ep, err); break;
        case O_MP: st = fsmoe_cli_int("--mp", a, 1, 65536, &o->mp, err); break;
        case O_ESP: st = fsmoe_cli_int("--esp", a, 1, 65536, &o->esp, err); break;
        case O_GPN:
            st = fsmoe_cli_int("--gpus-per-node", a, 1, 65536, &o->gpus_per_node, err);
            break;
        case O_COMM_TIMEOUT:
            st = fsmoe_cli_double("--comm-timeout", a, 0, 1e6, &o->comm_timeout, err);
            break;
        case O_NO_OVERLAP: o->no_overlap = 1; break;
        case O_STOP_AT: st = fsmoe_cli_long("--stop-at", a, 1, 100000000, &o->stop_at, err); break;
        case O_MEM_LIMIT:
            st = fsmoe_cli_size("--mem-limit", a, 1LL << 20, 1LL << 50, &o->mem_limit, err);
            break;
        case O_HELP: o->help = 1; return FSMOE_OK;
        case ':':
            return fsmoe_fail(err, FSMOE_ERR_USAGE, "%s: needs a value",
                              optind > 0 && optind <= argc ? argv[optind - 1] : "option");
        default:
            if (optopt > 0 && optopt < 256)
                return fsmoe_fail(err, FSMOE_ERR_USAGE, "unknown option '-%c' (see --help)",
                                  optopt);
            return fsmoe_fail(err, FSMOE_ERR_USAGE, "unknown option '%.200s' (see --help)",
                              optind > 0 && optind <= argc ? argv[optind - 1] : "?");
        }
        if (st != FSMOE_OK)
            return st;
    }
    if (optind < argc)
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "unexpected argument '%.200s' (see --help)",
                          argv[optind]);
    if (!o->model_path)
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "--model is required (see --help)");
    if (o->plan_path && o->chunks > 0)
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "--plan and --chunks both set r; give one");
    if ((o->schedule || o->cluster_path || o->report) && !o->plan_path)
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "%s needs --plan (the schedule graph is made "
                          "from a plan and its cluster profile)",
                          o->schedule         ? "--schedule"
                          : o->cluster_path   ? "--cluster"
                          : o->calibrate_path ? "--calibrate"
                                              : "--report");
    if (o->save_every > 0 && !o->save_dir)
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "--save-every needs --save DIR");
    return FSMOE_OK;
}

fsmoe_status options_apply(const rt_options *o, rt_config *c, rt_config_origin *origin,
                           fsmoe_error *err)
{
    memset(origin, 0, sizeof *origin);
    origin->model_path = o->model_path;
    if (o->steps > 0) c->steps = o->steps, origin->steps = "--steps";
    if (o->seed >= 0) c->seed = (uint64_t)o->seed;
    if (o->save_every >= 0) c->save_every = o->save_every;
    if (o->eval_every >= 0) c->eval_every = o->eval_every;
    if (o->eval_batches > 0) c->eval_batches = o->eval_batches;
    if (o->batch > 0) c->B = o->batch, origin->B = "--batch";
    if (o->seq > 0) c->L = o->seq, origin->L = "--seq";
    if (o->warmup >= 0) c->warmup = o->warmup;
    if (o->chunks > 0) c->r = (int)o->chunks, origin->r = "--chunks";
    if (o->lr >= 0) c->lr = o->lr;
    if (o->min_lr >= 0) c->lr_min = o->min_lr;
    else if (o->lr >= 0) c->lr_min = o->lr / 10;
    if (o->wd >= 0) c->wd = o->wd;
    if (o->clip >= 0) c->clip = o->clip;
    if (o->aux >= 0) c->aux_coef = o->aux;
    if (o->noise >= 0) c->gate_noise = o->noise;
    if (o->cf >= 0) c->f = o->cf, origin->f = "--capacity-factor";
    if (o->gate >= 0) c->gate = (rt_gate_kind)o->gate, origin->gate = "--gate";
    if (o->order >= 0) c->order = (rt_order_kind)o->order, origin->order = "--order";
    if (o->expert >= 0) c->expert = o->expert, origin->expert = "--expert";
    c->serial = o->no_overlap;
    if (c->save_every > 0 && !o->save_dir)
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "--save-every needs --save DIR");
    if (o->stop_at > c->steps)
        return fsmoe_fail(err, FSMOE_ERR_USAGE,
                          "--stop-at %ld: must not exceed --steps (%ld, the run's schedule)",
                          o->stop_at, c->steps);
    char w[64];
    snprintf(w, sizeof w, "%s", o->seq > 0 ? "--seq" : "training.seq");
    if (c->L > RT_MAX_SEQ)
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "%s%s%s: %ld is more than %ld tokens",
                          o->seq > 0 ? "" : o->model_path, o->seq > 0 ? "" : ": ", w, c->L,
                          RT_MAX_SEQ);
    if (c->B > RT_MAX_TOKENS_PER_STEP / (c->L > 0 ? c->L : 1))
        return fsmoe_fail(err, FSMOE_ERR_USAGE,
                          "%s %ld x %s %ld = %ld tokens per step: more than the %ld fsmoe-run "
                          "takes (lower --batch or --seq)",
                          o->batch > 0 ? "--batch" : "training.batch", c->B,
                          o->seq > 0 ? "--seq" : "training.seq", c->L, c->B * c->L,
                          RT_MAX_TOKENS_PER_STEP);
    return FSMOE_OK;
}

rt_memory_need options_memory_need(const rt_config *c, const rt_layout *lay, long data_bytes)
{
    fsmoe_mem_shape sh = {
        .V = c->V, .M = c->M, .H = c->H, .heads = c->heads, .kv_heads = c->kv_heads,
        .layers = c->layers, .E = c->E, .k = c->k, .expert = c->expert,
        .moe_every = (int)c->moe_every, .moe_first = (int)c->moe_first,
        .gshard_order = c->order == RT_ORDER_GSHARD, .gate_xmoe = c->gate == RT_GATE_XMOE,
        .f = c->f,
        .gate_dim = fsmoe_gate_dim(c->M),
        .B = lay->B, .L = c->L, .bytes_per_element = (int)sizeof(real),
        .dp = lay->dp, .mp = lay->mp, .ep = lay->ep, .esp = lay->esp};
    rt_memory_need n;
    fsmoe_memory_estimate(&sh, &n.model);
    n.data = (double)data_bytes;
    n.total = n.model.total + n.data;
    return n;
}

double options_memory_limit(const rt_options *o, int ranks_on_node, const char **what)
{
    static char buf[96];
    if (o->mem_limit > 0) {
        *what = "--mem-limit";
        return (double)o->mem_limit;
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    double lim = pages > 0 && page > 0 ? (double)pages * (double)page : 1e30;
    *what = "physical memory";
    if (ranks_on_node > 1) {
        lim /= ranks_on_node;
        snprintf(buf, sizeof buf, "physical memory / %d ranks on this node", ranks_on_node);
        *what = buf;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (double)rl.rlim_cur < lim) {
        lim = (double)rl.rlim_cur;
        *what = "the address-space limit (ulimit -v)";
    }
    return lim;
}

static void human(double b, char *buf, size_t n)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int i = 0;
    while (b >= 1024 && i < 6)
        b /= 1024, i++;
    snprintf(buf, n, "%.1f %s", b, u[i]);
}

fsmoe_status options_check_memory(const rt_options *o, const rt_config *c, rt_memory_need need,
                                  double limit, const char *limit_what, fsmoe_error *err)
{
    if (need.total <= limit)
        return FSMOE_OK;
    /* what grows with the model (parameters, gradients, AdamW) and with the batch (the rest) */
    const double *b = need.model.bytes;
    double params = b[FSMOE_MEM_WEIGHTS] + b[FSMOE_MEM_GRADS] + b[FSMOE_MEM_OPTIMIZER];
    double acts = need.model.total - params;
    char t[32], p[32], a[32], d[32], l[32], src[700];
    human(need.total, t, sizeof t);
    human(params, p, sizeof p);
    human(acts, a, sizeof a);
    human(need.data, d, sizeof d);
    human(limit, l, sizeof l);
    if (params >= acts)
        snprintf(src, sizeof src, "%s: the model's parameters (%s)",
                 o->model_path ? o->model_path : "the model file", c->name);
    else if (o->batch > 0 || o->seq > 0)
        snprintf(src, sizeof src, "%s%s%s", o->batch > 0 ? "--batch" : "",
                 o->batch > 0 && o->seq > 0 ? " and " : "", o->seq > 0 ? "--seq" : "");
    else
        snprintf(src, sizeof src, "%s: training.batch and training.seq",
                 o->model_path ? o->model_path : "the model file");
    return fsmoe_fail(err, FSMOE_ERR_USAGE,
                      "%s: batch %ld x seq %ld needs at least %s per rank (%.0f bytes: parameters, "
                      "gradients and AdamW moments %s, activations and buffers %s%s%s), more "
                      "than the "
                      "limit of %s (%.0f bytes, %s)\nHINT: lower --batch or --seq, or set "
                      "--mem-limit SIZE", src, c->B, c->L, t, need.total, p, a,
                      need.data > 0 ? ", data " : "", need.data > 0 ? d : "", l, limit,
                      limit_what);
}
