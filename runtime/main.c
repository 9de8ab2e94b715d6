/* Implements: fsmoe-run (design.md §10, §10.1): trains an MoE transformer with the host (or cuda)
 * backend, on one rank or on many under mpirun/srun (data parallelism over every rank, expert
 * parallelism over EP groups of --ep ranks), optionally following a plan's layout and per-layer
 * pipeline degrees.
 *
 *   [mpirun -np P] fsmoe-run --model M [--plan P] [--ep N] [--data FILE] [--steps N] [--seed S]
 *             [--save DIR] [--save-every K] [--resume DIR] [--eval-every K] [training flags]
 *
 * Rank 0 prints the resolved configuration once, one line per step and validation lines; the
 * other ranks print only errors, prefixed with their rank. MPI is initialised only when the
 * program was launched by mpirun/srun (a plain start is one rank and needs no MPI). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>
#include <unistd.h>

#include "checkpoint.h"
#include "dist.h"
#include "mpi_coll.h"
#include "topology.h"
#include "cli.h"
#include "config.h"
#include "data.h"
#include "transformer.h"
#include "plan.h"
#include "plan_check.h"
#include "train.h"

#ifndef FSMOE_DEFAULT_DATA
#define FSMOE_DEFAULT_DATA "data/jargon.txt"
#endif

static const char *prog = "fsmoe-run";
static char prog_rank[48];

/* Launched by mpirun (Open MPI, PMIx) or srun (Slurm's PMI)? */
static int launched_by_mpi(void)
{
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE",
                          "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i]))
            return 1;
    return 0;
}

/* Ranks per node as the MPI library places them (MPI_Comm_split_type), when every node holds
 * the same number and ranks are numbered node-major (what a plan's layout assumes); else 0,
 * unknown, and the plan's gpus_per_node is not compared. */
static int ranks_per_node(void)
{
    comm_topology t;
    fsmoe_error e = {0};
    if (topology_init(&t, MPI_COMM_WORLD, 0, &e) != FSMOE_OK)
        return 0;
    int g = t.node_major ? t.gpus_per_node : 0;
    topology_free(&t);
    return g;
}

static void usage(const char *reason)
{
    if (reason)
        fprintf(stderr, "%s: %s\n", prog, reason);
    fprintf(reason ? stderr : stdout,
            "usage: fsmoe-run --model M [--plan P] [--data FILE] [--steps N] [--seed S]\n"
            "                 [--save DIR] [--save-every K] [--resume DIR] [--eval-every K]\n"
            "                 [--stop-at STEP] (stop after STEP, saving; the schedule stays --steps')\n"
            "training flags: --backend host|cuda --threads T --batch B --seq L --lr X\n"
            "                --min-lr X --warmup N --weight-decay X --clip X --aux-loss X\n"
            "                --gate-noise X --capacity-factor X|none --gate NAME --order NAME\n"
            "                --expert gpt|swiglu --chunks R --eval-batches N\n"
            "many ranks:     --ep N (expert-parallel group size; default the plan's, else 1)\n"
            "                --comm-timeout S (a peer silent this long ends the run; 30)\n"
            "                --no-overlap (compute and communication one after the other)\n"
            "Without --data it trains on the shipped corpus (%s);\n"
            "without --plan it runs unpipelined (r = 1) unless --chunks is given.\n",
            FSMOE_DEFAULT_DATA);
    exit(reason ? 2 : 0);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int die(const fsmoe_error *err)
{
    fsmoe_error_print(prog, err);
    return fsmoe_exit_code(err->status);
}

/* What the run keeps of its plan: the per-layer r it applied and the plan's prediction. */
typedef struct {
    double iteration_s; /* the plan's predicted iteration time on its cluster profile */
    char cluster[64];
    char rs[256]; /* "fwd r 1,1,1,1 / bwd r 1,1,1,1" */
} plan_info;

/* Sets r per MoE layer from the checked plan and keeps what the step lines report. */
static void plan_apply(const plan_check_result *r, rt_model *md, plan_info *info)
{
    memset(info, 0, sizeof *info);
    for (int i = 0; i < r->n_moe; i++) {
        md->blocks[r->block[i]].moe.r_fwd = r->r_fwd[i];
        md->blocks[r->block[i]].moe.r_bwd = r->r_bwd[i];
    }
    info->iteration_s = r->iteration_s;
    snprintf(info->cluster, sizeof info->cluster, "%s", r->cluster);
    size_t o = 0;
    for (int dir = 0; dir < 2; dir++) {
        o += (size_t)snprintf(info->rs + o, sizeof info->rs - o, "%s", dir ? " / bwd r " : "fwd r ");
        for (int i = 0; i < r->n_moe && o < sizeof info->rs; i++)
            o += (size_t)snprintf(info->rs + o, sizeof info->rs - o, "%s%d", i ? "," : "",
                                  dir ? r->r_bwd[i] : r->r_fwd[i]);
        if (o >= sizeof info->rs)
            break;
    }
}

/* Every rank writes its shard; once all succeeded (the gather of the shard descriptions is the
 * barrier) rank 0 writes the manifest, and every rank learns whether it did (checkpoint.h). */
static fsmoe_status save_checkpoint(const char *dir, long step, const rt_ckpt_rank *ck, int world,
                                    int rank, fsmoe_error *err)
{
    if (world == 1)
        return checkpoint_save(dir, step, ck, err);
    rt_ckpt_shard_info info, *infos = NULL;
    memset(&info, 0, sizeof info);
    fsmoe_status st = checkpoint_save_shard(dir, step, ck, &info, err);
    int ok = st == FSMOE_OK;
    fsmoe_error e2 = {0};
    fsmoe_status cs = fsmoe_mpi_allreduce(MPI_COMM_WORLD, &ok, &ok, 1, MPI_INT, MPI_LAND,
                                          "checkpoint shard agreement (world)", &e2);
    if (cs != FSMOE_OK) {
        *err = e2;
        return cs;
    }
    if (!ok)
        return st != FSMOE_OK ? st
                              : fsmoe_fail(err, FSMOE_ERR_IO, "%s: another rank could not write "
                                           "its checkpoint shard (see its message); the previous "
                                           "checkpoint stays", dir);
    if (rank == 0 && !(infos = calloc((size_t)world, sizeof *infos)))
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "checkpoint: out of memory");
    MPI_Request req;
    MPI_Igather(&info, (int)sizeof info, MPI_BYTE, infos, (int)sizeof info, MPI_BYTE, 0,
                MPI_COMM_WORLD, &req);
    if ((st = fsmoe_mpi_wait(&req, 1, MPI_COMM_WORLD, "checkpoint shard gather (world)", err)) !=
        FSMOE_OK) {
        free(infos);
        return st;
    }
    int written = 1;
    if (rank == 0)
        written = checkpoint_write_manifest(dir, step, ck, infos, world, err) == FSMOE_OK;
    free(infos);
    MPI_Ibcast(&written, 1, MPI_INT, 0, MPI_COMM_WORLD, &req);
    if ((st = fsmoe_mpi_wait(&req, 1, MPI_COMM_WORLD, "checkpoint manifest (world)", &e2)) !=
        FSMOE_OK) {
        *err = e2;
        return st;
    }
    if (!written)
        return rank == 0 ? err->status
                         : fsmoe_fail(err, FSMOE_ERR_IO, "%s: rank 0 could not write the "
                                      "checkpoint manifest (see its message)", dir);
    return FSMOE_OK;
}

int main(int argc, char **argv)
{
    enum {
        O_MODEL = 256, O_PLAN, O_DATA, O_STEPS, O_SEED, O_SAVE, O_SAVE_EVERY, O_RESUME,
        O_EVAL_EVERY, O_BACKEND, O_THREADS, O_BATCH, O_SEQ, O_LR, O_MIN_LR, O_WARMUP, O_WD,
        O_CLIP, O_AUX, O_NOISE, O_CF, O_GATE, O_ORDER, O_EXPERT, O_CHUNKS, O_EVAL_BATCHES, O_HELP,
        O_EP, O_COMM_TIMEOUT, O_NO_OVERLAP, O_STOP_AT
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
        {"stop-at", 1, 0, O_STOP_AT},   {0, 0, 0, 0}};
    static const fsmoe_cli_enum gates[] = {{"gshard", RT_GATE_GSHARD}, {"sigmoid", RT_GATE_SIGMOID},
                                           {"xmoe", RT_GATE_XMOE},
                                           {"expert_choice", RT_GATE_EXPERT_CHOICE},
                                           {"softmoe", RT_GATE_SOFTMOE}, {NULL, 0}};
    static const fsmoe_cli_enum orders[] = {{"gshard", RT_ORDER_GSHARD},
                                            {"tutel", RT_ORDER_TUTEL}, {NULL, 0}};
    static const fsmoe_cli_enum experts[] = {{"gpt", 0}, {"swiglu", 1}, {NULL, 0}};
    const char *model_path = NULL, *plan_path = NULL, *data_path = NULL, *save_dir = NULL,
               *resume_dir = NULL, *backend = "host";
    int threads = 0, ep = 0;
    double comm_timeout = FSMOE_COMM_TIMEOUT_DEFAULT_S;
    int world = 1, rank = 0, mpi = launched_by_mpi();
    if (mpi) {
        int provided = 0;
        if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
            fprintf(stderr, "%s: MPI_Init_thread failed\n", prog);
            return 1;
        }
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_size(MPI_COMM_WORLD, &world);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        if (world > 1) {
            snprintf(prog_rank, sizeof prog_rank, "fsmoe-run[rank %d]", rank);
            prog = prog_rank;
        }
        if (provided < MPI_THREAD_MULTIPLE) {
            fprintf(stderr, "%s: the MPI library grants thread level %d, fsmoe-run needs "
                    "MPI_THREAD_MULTIPLE (its stream threads communicate)\n", prog, provided);
            return 1;
        }
        /* only rank 0 reports; errors go to stderr on every rank */
        if (rank > 0 && !freopen("/dev/null", "w", stdout))
            return 1;
    }
    /* overrides, applied after the model file */
    long steps = -1, seed = -1, save_every = -1, eval_every = -1, batch = -1, seq = -1,
         warmup = -2, chunks = -1, eval_batches = -1, stop_at = -1;
    double lr = -1, min_lr = -1, wd = -1, clip = -1, aux = -1, noise = -1, cf = -2;
    int gate = -1, order = -1, expert = -1, no_overlap = 0;
    fsmoe_error err = {0};
    fsmoe_status st = FSMOE_OK;
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case O_MODEL: model_path = optarg; break;
        case O_PLAN: plan_path = optarg; break;
        case O_DATA: data_path = optarg; break;
        case O_SAVE: save_dir = optarg; break;
        case O_RESUME: resume_dir = optarg; break;
        case O_BACKEND: backend = optarg; break;
        case O_STEPS: st = fsmoe_cli_long("--steps", optarg, 1, 100000000, &steps, &err); break;
        case O_SEED: st = fsmoe_cli_long("--seed", optarg, 0, 2147483647L, &seed, &err); break;
        case O_SAVE_EVERY:
            st = fsmoe_cli_long("--save-every", optarg, 0, 100000000, &save_every, &err);
            break;
        case O_EVAL_EVERY:
            st = fsmoe_cli_long("--eval-every", optarg, 0, 100000000, &eval_every, &err);
            break;
        case O_EVAL_BATCHES:
            st = fsmoe_cli_long("--eval-batches", optarg, 1, 100000, &eval_batches, &err);
            break;
        case O_THREADS: st = fsmoe_cli_int("--threads", optarg, 1, 1024, &threads, &err); break;
        case O_BATCH: st = fsmoe_cli_long("--batch", optarg, 1, 1000000, &batch, &err); break;
        case O_SEQ: st = fsmoe_cli_long("--seq", optarg, 1, 1000000, &seq, &err); break;
        case O_WARMUP: st = fsmoe_cli_long("--warmup", optarg, 0, 100000000, &warmup, &err); break;
        case O_CHUNKS: st = fsmoe_cli_long("--chunks", optarg, 1, 64, &chunks, &err); break;
        case O_LR: st = fsmoe_cli_double("--lr", optarg, 0, 10, &lr, &err); break;
        case O_MIN_LR: st = fsmoe_cli_double("--min-lr", optarg, 0, 10, &min_lr, &err); break;
        case O_WD: st = fsmoe_cli_double("--weight-decay", optarg, 0, 10, &wd, &err); break;
        case O_CLIP: st = fsmoe_cli_double("--clip", optarg, 0, 1e9, &clip, &err); break;
        case O_AUX: st = fsmoe_cli_double("--aux-loss", optarg, 0, 100, &aux, &err); break;
        case O_NOISE: st = fsmoe_cli_double("--gate-noise", optarg, 0, 100, &noise, &err); break;
        case O_CF:
            if (strcmp(optarg, "none") == 0)
                cf = 0;
            else
                st = fsmoe_cli_double("--capacity-factor", optarg, 0, 1000, &cf, &err);
            break;
        case O_GATE: st = fsmoe_cli_enum_parse("--gate", optarg, gates, &gate, &err); break;
        case O_ORDER: st = fsmoe_cli_enum_parse("--order", optarg, orders, &order, &err); break;
        case O_EXPERT: st = fsmoe_cli_enum_parse("--expert", optarg, experts, &expert, &err); break;
        case O_EP: st = fsmoe_cli_int("--ep", optarg, 1, 65536, &ep, &err); break;
        case O_COMM_TIMEOUT:
            st = fsmoe_cli_double("--comm-timeout", optarg, 0, 1e6, &comm_timeout, &err);
            break;
        case O_NO_OVERLAP: no_overlap = 1; break;
        case O_STOP_AT: st = fsmoe_cli_long("--stop-at", optarg, 1, 100000000, &stop_at, &err); break;
        case O_HELP: usage(NULL); break;
        default: usage("unknown option (see --help)");
        }
        if (st != FSMOE_OK) {
            fsmoe_error_print(prog, &err);
            return 2;
        }
    }
    if (optind < argc)
        usage("unexpected argument");
    if (!model_path)
        usage("--model is required");
    if (plan_path && chunks > 0)
        usage("--plan and --chunks both set r; give one");

    rt_config cfg;
    config_defaults(&cfg);
    fsmoe_model mf;
    memset(&mf, 0, sizeof mf);
    if ((st = fsmoe_model_load(model_path, &mf, &err)) != FSMOE_OK)
        return die(&err);
    if ((st = config_from_model(&cfg, &mf, model_path, &err)) != FSMOE_OK)
        return die(&err);
    if (steps > 0) cfg.steps = steps;
    if (seed >= 0) cfg.seed = (uint64_t)seed;
    if (save_every >= 0) cfg.save_every = save_every;
    if (eval_every >= 0) cfg.eval_every = eval_every;
    if (eval_batches > 0) cfg.eval_batches = eval_batches;
    if (batch > 0) cfg.B = batch;
    if (seq > 0) cfg.L = seq;
    if (warmup >= 0) cfg.warmup = warmup;
    if (chunks > 0) cfg.r = (int)chunks;
    if (lr >= 0) cfg.lr = lr;
    if (min_lr >= 0) cfg.lr_min = min_lr;
    else if (lr >= 0) cfg.lr_min = lr / 10;
    if (wd >= 0) cfg.wd = wd;
    if (clip >= 0) cfg.clip = clip;
    if (aux >= 0) cfg.aux_coef = aux;
    if (noise >= 0) cfg.gate_noise = noise;
    if (cf >= 0) cfg.f = cf;
    if (gate >= 0) cfg.gate = (rt_gate_kind)gate;
    if (order >= 0) cfg.order = (rt_order_kind)order;
    if (expert >= 0) cfg.expert = expert;
    cfg.serial = no_overlap;
    if (cfg.save_every > 0 && !save_dir)
        usage("--save-every needs --save DIR");
    if (stop_at > cfg.steps)
        usage("--stop-at must not exceed --steps (the run's schedule)");
    long last = stop_at > 0 ? stop_at : cfg.steps; /* the step this invocation ends after */
    if ((st = config_validate(&cfg, &err)) != FSMOE_OK)
        return die(&err);
    fsmoe_comm_set_timeout(comm_timeout);
    /* The plan is read and checked once, before anything is built (design.md §9); without
     * --ep the run takes the plan's expert parallelism. */
    plan_check_result pcheck;
    memset(&pcheck, 0, sizeof pcheck);
    int gpus_per_node = world > 1 ? ranks_per_node() : 0;
    if (plan_path && (st = plan_check_file(plan_path, model_path, &cfg, world, rank, gpus_per_node,
                                           &ep, &pcheck, &err)) != FSMOE_OK)
        return die(&err);
    if (ep == 0)
        ep = 1;
    if (world % ep != 0 || cfg.E % ep != 0) {
        fsmoe_fail(&err, FSMOE_ERR_USAGE,
                   "--ep %d: the expert-parallel group size must divide the %d ranks and the %ld "
                   "experts", ep, world, cfg.E);
        return die(&err);
    }
    if (world > 1 && (cfg.gate == RT_GATE_EXPERT_CHOICE || cfg.gate == RT_GATE_SOFTMOE)) {
        fsmoe_fail(&err, FSMOE_ERR_USAGE,
                   "--gate %s: fsmoe-run runs this gate on one rank only (its routing mixes "
                   "tokens of the whole batch, which is not distributed yet); use gshard, "
                   "sigmoid or xmoe on %d ranks", gate_kind_name(cfg.gate), world);
        return die(&err);
    }
    rt_layout layout = layout_make(world, rank, gpus_per_node, ep, cfg.E, cfg.B);
    rt_dist dist;
    if ((st = dist_init(&dist, &layout, &err)) != FSMOE_OK)
        return die(&err);

    rt_data data;
    if (!data_path)
        data_path = FSMOE_DEFAULT_DATA;
    if ((st = data_load(&data, data_path, cfg.V, cfg.L, &err)) != FSMOE_OK)
        return die(&err);

    rt_backend *be = NULL;
    rt_trainer tr;
    memset(&tr, 0, sizeof tr);
    int rc = 0;
    if ((st = rt_backend_create(backend, threads, &be, &err)) != FSMOE_OK)
        goto fail;
    if ((st = trainer_init_dist(&tr, &cfg, be, &data, world > 1 ? &dist : NULL, &err)) !=
        FSMOE_OK)
        goto fail;
    plan_info pinfo;
    plan_apply(&pcheck, &tr.model, &pinfo);
    if (resume_dir) {
        /* every rank reads the shards it needs itself (no MPI; reshards by tensor name) */
        rt_ckpt_rank ck = checkpoint_rank(&tr.model, &tr.opt, &layout);
        if ((st = checkpoint_load(resume_dir, &ck, &tr.step, &err)) != FSMOE_OK)
            goto fail;
        printf("resumed from %s/%s at step %ld\n", resume_dir, RT_CKPT_MANIFEST, tr.step);
    }
    char bdesc[64];
    snprintf(bdesc, sizeof bdesc, "%s%s%s", be->name, plan_path ? ", plan " : "",
             plan_path ? plan_path : "");
    config_print(&cfg, stdout, bdesc, data_path, tr.model.params.total);
    if (plan_path)
        printf("| %-14s | %s; predicts %.2f ms/iteration on cluster %s ('pred' in the "
               "step lines); it matches the measured time only when that profile was measured on "
               "this host |\n", "plan", pinfo.rs, 1e3 * pinfo.iteration_s, pinfo.cluster);
    printf("# corpus: %ld bytes (train %ld), unigram entropy %.4f nats/byte\n", data.n,
           data.train_end, data_unigram_entropy(&data));
    fflush(stdout);
    if (world > 1)
        printf("# %d ranks: dp %d, ep %d (experts %ld-%ld on rank 0), edp %d; global batch %ld "
               "samples, %ld per rank\n", world, layout.dp, layout.ep, layout.expert0,
               layout.expert0 + layout.E_local - 1, layout.edp, layout.B_global, layout.B);
    long tokens_per_step = layout.B_global * cfg.L;
    double t_all = 0;
    long n_timed = 0;
    if (tr.step >= last)
        printf("# nothing to do: the run is at step %ld, this invocation stops at %ld\n", tr.step,
               last);
    while (tr.step < last) {
        double loss = 0, ce = 0, gnorm = 0, t0 = now_s();
        if ((st = trainer_step(&tr, &loss, &ce, &gnorm, &err)) != FSMOE_OK)
            goto fail;
        double dt = now_s() - t0;
        if (tr.step > 1) { /* the first step warms caches */
            t_all += dt;
            n_timed++;
        }
        double tps = (double)tokens_per_step / dt;
        char pred[32] = "";
        if (plan_path)
            snprintf(pred, sizeof pred, " | pred %.1f ms", 1e3 * pinfo.iteration_s);
        printf("step %ld/%ld | loss %.4f | %.1f ms%s | %.1fk tok/s | lr %.2e | gnorm %.3f\n",
               tr.step, cfg.steps, ce, 1e3 * dt, pred, tps / 1e3, lr_at(&cfg, tr.step - 1), gnorm);
        if (cfg.eval_every > 0 && (tr.step % cfg.eval_every == 0 || tr.step == last)) {
            double val = 0;
            if ((st = trainer_eval(&tr, &val, &err)) != FSMOE_OK)
                goto fail;
            printf("eval step %ld | val loss %.4f\n", tr.step, val);
        }
        if (save_dir && ((cfg.save_every > 0 && tr.step % cfg.save_every == 0) ||
                         tr.step == last)) {
            rt_ckpt_rank ck = checkpoint_rank(&tr.model, &tr.opt, &layout);
            if ((st = save_checkpoint(save_dir, tr.step, &ck, world, rank, &err)) != FSMOE_OK)
                goto fail;
        }
        fflush(stdout);
    }
    if (n_timed > 0)
        printf("# mean step %.2f ms, %.1f tok/s over %ld steps\n", 1e3 * t_all / (double)n_timed,
               (double)tokens_per_step * (double)n_timed / t_all, n_timed);
    goto done;
fail:
    rc = die(&err);
done:
    trainer_free(&tr);
    rt_backend_destroy(&be);
    data_free(&data);
    plan_check_result_free(&pcheck);
    if (mpi) {
        fflush(stdout);
        if (rc != 0) /* peers may be waiting in a collective: leave, mpirun ends the job */
            _exit(rc);
        dist_free(&dist);
        MPI_Finalize();
    }
    return rc;
}
