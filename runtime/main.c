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
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "dist.h"
#include "mpi_coll.h"
#include "topology.h"
#include "atomic_file.h"
#include "backend_host.h"
#include "cluster_write.h"
#include "config.h"
#include "input_file.h"
#include "data.h"
#include "options.h"
#include "transformer.h"
#include "plan.h"
#include "plan_check.h"
#include "report.h"
#include "schedule.h"
#include "trace.h"
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
    char isas[128];
    rt_backend_host_isa_names(isas, sizeof isas, "|");
    fprintf(reason ? stderr : stdout,
            "usage: fsmoe-run --model M [--plan P] [--data FILE] [--steps N] [--seed S]\n"
            "                 [--save DIR] [--save-every K] [--resume DIR] [--eval-every K]\n"
            "                 [--stop-at STEP] (stop after STEP, saving; the schedule stays --steps')\n"
            "training flags: --backend host|cuda --threads T --batch B --seq L --lr X\n"
            "                --min-lr X --warmup N --weight-decay X --clip X --aux-loss X\n"
            "                --gate-noise X --capacity-factor X|none --gate NAME --order NAME\n"
            "                --expert gpt|swiglu --chunks R --eval-batches N\n"
            "many ranks:     --ep N (expert-parallel group size; default the plan's, else 1)\n"
            "                --mp N (tensor-parallel group size), --esp N (expert slices);\n"
            "                default the plan's, else 1\n"
            "                --gpus-per-node G (ranks per node for the groups and the\n"
            "                hierarchical AllToAll, when nodes are emulated; default as MPI\n"
            "                places the ranks)\n"
            "                --comm-timeout S (a peer silent this long ends the run; 30)\n"
            "                --no-overlap (compute and communication one after the other)\n"
            "schedules:      --schedule NAME (with --plan: run that schedule of the plan's\n"
            "                graph on its layout: plan (default), deepspeed, tutel,\n"
            "                tutel-improved, pipemoe-lina, fsmoe, fsmoe-no-iio, ...)\n"
            "                --cluster FILE (the profile that predicts the run; default the\n"
            "                plan's) --report (measured vs predicted per task kind and layer,\n"
            "                whether every planned task ran, and the graph's digest: two\n"
            "                schedules with one digest run the same work)\n"
            "                --calibrate FILE (on several ranks, with --report's measurements:\n"
            "                write the run's cluster profile to FILE with the ranks' arrival\n"
            "                skew fitted on this run, sync_latency_s + sync_growth x the time\n"
            "                since the previous collective)\n"
            "outputs:        --trace FILE (every task of every training step, timed where it\n"
            "                runs, as Chrome trace JSON for ui.perfetto.dev; on many ranks each\n"
            "                rank writes FILE with .rankN before its extension)\n"
            "                --profile (per step, the time every kind of kernel ran: GEMM,\n"
            "                element-wise, attention, gate/order, communication, optimizer,\n"
            "                and the rest of the step outside kernels; the GEMMs by shape with\n"
            "                their rate; host backend)\n"
            "limits:         --mem-limit SIZE (K/M/G; default the physical memory): a run that\n"
            "                needs more per rank is refused before it starts\n"
            "environment:    FSMOE_HOST_ISA=%s (the host backend's\n"
            "                instruction set; default the best this CPU runs)\n"
            "SIGINT/SIGTERM stop the run after the step in progress (exit 128+signal; the last\n"
            "checkpoint stays); a second one stops it at once.\n"
            "Without --data it trains on the shipped corpus (%s);\n"
            "without --plan it runs unpipelined (r = 1) unless --chunks is given.\n",
            isas, FSMOE_DEFAULT_DATA);
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

/* What the run keeps of its plan: the per-layer r it applied and the graph's prediction. */
typedef struct {
    double iteration_s; /* the plan's predicted iteration time on its cluster profile */
    char cluster[64];
    char rs[256]; /* "fwd r 1,1,1,1 / bwd r 1,1,1,1" */
} plan_info;

/* The schedule graph's degrees and Gradient-AllReduce tasks onto the model (r->block maps MoE
 * layer i to its block), and what the step lines report: the degrees and the graph's predicted
 * iteration on the profile that made it. */
static fsmoe_status schedule_apply(const rt_schedule *rs, const plan_check_result *r,
                                   rt_model *md, plan_info *info, fsmoe_error *err)
{
    for (int i = 0; i < r->n_moe && i < rs->n_layers; i++) {
        md->blocks[r->block[i]].moe.r_fwd = rs->r_fwd[i];
        md->blocks[r->block[i]].moe.r_bwd = rs->r_bwd[i];
        md->blocks[r->block[i]].moe.pause_mp = rs->pause_mp[i];
        md->blocks[r->block[i]].moe.etp = rs->etp[i];
        md->blocks[r->block[i]].moe.s2 = rs->s2[i];
        md->blocks[r->block[i]].moe.monta = rs->monta[i];
        md->blocks[r->block[i]].moe.a2a_2dh = rs->a2a_2dh[i];
        int h = 0, P = moe_exchange_size(&md->blocks[r->block[i]].moe, &h);
        if (rs->a2a_2dh[i] && !h)
            return fsmoe_fail(err, FSMOE_ERR_VALUE,
                              "the plan's MoE layer %d runs its AllToAll as 2dh, but its group of "
                              "%d ranks is not spread over two or more nodes with two or more of "
                              "its ranks on each in this run", i, P);
    }
    md->gsync.yield_to_comm = rs->lina;
    fsmoe_status st = model_set_grad_tasks(md, rs->gar, rs->n_gar, err);
    if (st != FSMOE_OK)
        return st;
    info->iteration_s = rs->iteration_s;
    snprintf(info->cluster, sizeof info->cluster, "%s", rs->cluster_name); /* --cluster's */
    size_t o = 0; /* "fwd r 1,2 / bwd r 2,2; 3 Gradient-AllReduce tasks" */
    for (int dir = 0; dir < 2 && o < sizeof info->rs; dir++) {
        o += (size_t)snprintf(info->rs + o, sizeof info->rs - o, "%s", dir ? " / bwd r " : "fwd r ");
        for (int i = 0; i < rs->n_layers && o < sizeof info->rs; i++)
            o += (size_t)snprintf(info->rs + o, sizeof info->rs - o, "%s%d", i ? "," : "",
                                  dir ? rs->r_bwd[i] : rs->r_fwd[i]);
    }
    if (o < sizeof info->rs)
        o += (size_t)snprintf(info->rs + o, sizeof info->rs - o, "; %d Gradient-AllReduce tasks",
                              rs->n_gar);
    int n2 = 0;
    for (int i = 0; i < rs->n_layers; i++)
        n2 += rs->a2a_2dh[i];
    if (n2 && o < sizeof info->rs)
        snprintf(info->rs + o, sizeof info->rs - o, "; 2DH AllToAll in %d of %d layers", n2,
                 rs->n_layers);
    return FSMOE_OK;
}

/* A run with slices (tensor parallelism, expert slices) writes every tensor in its canonical
 * form (checkpoint.h): each rank's elements at their places, summed over the MP group for the
 * MP slices and over the ESP group for the expert slices. Every rank calls this. */
static fsmoe_status canonical_tensors(const rt_ckpt_rank *ck, const rt_dist *d,
                                      rt_ckpt_canon *c, fsmoe_error *err)
{
    fsmoe_status st = checkpoint_canon_local(ck, c, err);
    int ok = st == FSMOE_OK;
    fsmoe_error e2 = {0};
    fsmoe_status cs = fsmoe_mpi_allreduce(MPI_COMM_WORLD, &ok, &ok, 1, MPI_INT, MPI_LAND,
                                          "checkpoint canonical tensors (world)", &e2);
    if (cs != FSMOE_OK || !ok) {
        if (cs != FSMOE_OK)
            *err = e2;
        else if (st == FSMOE_OK)
            st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "checkpoint: another rank ran out of memory "
                            "for the canonical tensors (see its message)");
        return cs != FSMOE_OK ? cs : st;
    }
    long T = c->table.total;
    for (int a = 0; a < 3 && st == FSMOE_OK; a++) {
        st = dist_sum_reals(d, RT_MP, c->host + a * T + c->mp_begin, c->mp_end - c->mp_begin,
                            "checkpoint MP slices (mp)", err);
        if (st == FSMOE_OK)
            st = dist_sum_reals(d, RT_ESP, c->host + a * T + c->esp_begin,
                                c->esp_end - c->esp_begin, "checkpoint expert slices (esp)", err);
    }
    return st;
}

static fsmoe_status save_shards(const char *dir, long step, const rt_ckpt_rank *ck, int world,
                                int rank, fsmoe_error *err);

static fsmoe_status save_checkpoint(const char *dir, long step, const rt_ckpt_rank *ck,
                                    const rt_dist *d, int world, int rank, fsmoe_error *err)
{
    if (world == 1)
        return checkpoint_save(dir, step, ck, err);
    if (!checkpoint_sliced(ck->params))
        return save_shards(dir, step, ck, world, rank, err);
    rt_ckpt_rank rk = *ck;
    rt_ckpt_canon canon = {0};
    fsmoe_status st = canonical_tensors(ck, d, &canon, err);
    if (st == FSMOE_OK) {
        rk.canon = &canon;
        st = save_shards(dir, step, &rk, world, rank, err);
    }
    checkpoint_canon_free(&canon);
    return st;
}

/* Every rank writes its shard; once all succeeded (the gather of the shard descriptions is the
 * barrier) rank 0 writes the manifest, and every rank learns whether it did (checkpoint.h). */
static fsmoe_status save_shards(const char *dir, long step, const rt_ckpt_rank *ck, int world,
                                int rank, fsmoe_error *err)
{
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

/* The first SIGINT/SIGTERM/SIGHUP asks the run to stop after the step in progress (checked
 * between steps, agreed by every rank); a second one ends it at once, removing the temporaries of
 * a save in progress (libfsmoe/atomic_file.h), so a stuck step can still be interrupted. */
static volatile sig_atomic_t stop_signal = 0;

static void on_stop(int sig)
{
    stop_signal = sig;
    fsmoe_atomic_on_signals(); /* async-signal-safe: sigaction */
}

static void stop_on_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* The signal every rank stops for (0: none): one rank's signal stops all at the same step. */
static int stop_agreed(int world, fsmoe_error *err, fsmoe_status *st)
{
    int sig = stop_signal;
    if (world > 1)
        *st = fsmoe_mpi_allreduce(MPI_COMM_WORLD, &sig, &sig, 1, MPI_INT, MPI_MAX,
                                  "interruption agreement (world)", err);
    return sig;
}

/* An input file must be a regular file, checked before its reader opens it: a FIFO or a
 * device would block the reader or feed it without end. The open does not block (O_NONBLOCK)
 * and reads nothing. */
static fsmoe_status input_regular(const char *flag, const char *path, fsmoe_error *err)
{
    FILE *f = NULL;
    fsmoe_status st = fsmoe_open_input(path, &f, NULL, err);
    if (st != FSMOE_OK) {
        char msg[FSMOE_ERROR_MAX];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return fsmoe_fail(err, st, "%s %.900s", flag, msg);
    }
    fclose(f);
    return FSMOE_OK;
}

/* An input the run cannot use (a flag, the model, the plan, the data, a checkpoint to resume,
 * an output location): exit 2, I/O errors included (a missing or unreadable input file is the
 * user's to fix). Out of memory, MPI and internal failures keep their code. */
static int die_input(const fsmoe_error *err)
{
    fsmoe_error_print(prog, err);
    return err->status == FSMOE_ERR_IO ? 2 : fsmoe_exit_code(err->status);
}

/* --report's gather over the world (report.h rt_report_ranks). */
static fsmoe_status report_allgather(void *ctx, const long *mine, long *all, int n,
                                     fsmoe_error *err)
{
    return dist_allgather_longs(ctx, RT_WORLD, mine, all, n, "report collectives (world)", err);
}

/* --trace on many ranks: every rank's tasks in one file (one process per rank), written by
 * rank 0. Ranks on one host share its monotonic clock, so their tasks get one common zero (the
 * earliest task of any rank) and line up; when the ranks' zeros lie more than 10 s apart
 * (clocks of different hosts), each rank starts at its own first task. */
static fsmoe_status write_trace_all(const rt_trace *tr, const rt_dist *d, const char *title,
                                    const char *path, fsmoe_error *err)
{
    int world = d->layout.world, rank = d->layout.rank;
    double mine = rt_trace_origin(tr), origin = mine;
    long o = (long)(mine * 1e9), *all = calloc((size_t)world, sizeof(long));
    if (!all)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "--trace: out of memory");
    fsmoe_status st = dist_allgather_longs(d, RT_WORLD, &o, all, 1, "trace clocks (world)", err);
    if (st == FSMOE_OK) {
        long lo = all[0], hi = all[0];
        for (int i = 1; i < world; i++)
            lo = all[i] < lo ? all[i] : lo, hi = all[i] > hi ? all[i] : hi;
        if (hi - lo < 10000000000L)
            origin = (double)lo * 1e-9;
    }
    free(all);
    if (st != FSMOE_OK)
        return st;
    char *buf = NULL, *merged = NULL;
    size_t len = 0;
    long n = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "--trace: out of memory");
    rt_trace_write_events(tr, m, rank, title, origin, rank == 0);
    if (fclose(m) != 0) {
        free(buf);
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "--trace: out of memory");
    }
    st = dist_gather_bytes(d, RT_WORLD, buf, (long)len, &merged, &n, "trace gather (world)", err);
    free(buf);
    if (st == FSMOE_OK && rank == 0) {
        fsmoe_atomic_file af;
        if ((st = fsmoe_atomic_open(&af, path, err)) == FSMOE_OK) {
            fprintf(af.f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
            fwrite(merged, 1, (size_t)n, af.f);
            fprintf(af.f, "\n]}\n");
            st = fsmoe_atomic_commit(&af, err);
        }
    }
    free(merged);
    return st;
}

/* The tensor-parallel and expert-slice group sizes against the world and the model's shapes
 * (each slice must be whole: heads, kv heads, the vocabulary and the hidden width). */
static fsmoe_status check_slices(const rt_config *c, int world, int mp, int ep, int esp,
                                 fsmoe_error *err)
{
    long kv = c->kv_heads > 0 ? c->kv_heads : c->heads;
    if (world % mp || c->heads % mp || kv % mp || c->V % mp || c->H % mp)
        return fsmoe_fail(err, FSMOE_ERR_USAGE,
                          "--mp %d: the tensor-parallel group size must divide the %d ranks, the "
                          "%ld heads, the %ld key/value heads, the vocabulary (%ld) and the FFN "
                          "width (%ld)", mp, world, c->heads, kv, c->V, c->H);
    if (world % (ep * esp) || c->H % esp)
        return fsmoe_fail(err, FSMOE_ERR_USAGE,
                          "--esp %d: ep · esp (%d · %d) must divide the %d ranks, and esp the "
                          "expert width (%ld)", esp, ep, esp, world, c->H);
    if (esp > 1 && c->E / ep > RT_MOE_MAX_LOCAL_SLICED)
        return fsmoe_fail(err, FSMOE_ERR_USAGE,
                          "--esp %d: %ld experts per rank; with expert slices fsmoe-run holds at "
                          "most %d per rank (raise --ep)", esp, c->E / ep,
                          RT_MOE_MAX_LOCAL_SLICED);
    return FSMOE_OK;
}

/* The backend memory table at start-up: every tensor the run uses is allocated before the
 * first step (rt_alloc), so this is the run's peak per category; the steps allocate nothing
 * (memory_line says so after the run). Beside it, the memory model's prediction
 * (libfsmoe/memory.h) that the run was admitted with. */
static void memory_print(FILE *f, const rt_mem_stats *m, const fsmoe_memory *pred, int world)
{
    fprintf(f, "# memory per rank%s: backend allocations by category, all made before the "
               "first step, and the memory model's prediction\n", world > 1 ? " (rank 0)" : "");
    fprintf(f, "| %-12s | %14s | %10s | %6s | %13s | %9s |\n", "category", "bytes", "MiB",
            "share", "predicted MiB", "meas/pred");
    for (int c = 0; c <= RT_MEM_CATS; c++) {
        double b = c < RT_MEM_CATS ? (double)m->bytes[c] : (double)m->total;
        double p = c < RT_MEM_CATS ? pred->bytes[c] : pred->total;
        fprintf(f, "| %-12s | %14.0f | %10.2f | %5.1f%% | %13.2f | %9.3f |\n",
                c < RT_MEM_CATS ? fsmoe_mem_names[c] : "total", b, b / 1048576.0,
                m->total ? 100.0 * b / (double)m->total : 0.0, p / 1048576.0,
                p > 0 ? b / p : 0.0);
    }
}

/* Minor page faults of this process so far (every thread): a fault during a step means memory
 * touched for the first time, i.e. allocated or given back to the system between steps. */
static long minor_faults(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_minflt : 0;
}

/* After the run: what the steps allocated (nothing, when every tensor came from start-up) and
 * how many pages they faulted in, the backend's peak and the process's peak resident set. */
static void memory_line(FILE *f, const rt_mem_stats *m, long allocs, long steps, long faults,
                        long steady)
{
    struct rusage ru;
    double rss = getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_maxrss / 1024.0 : 0.0;
    fprintf(f, "# memory: %ld backend allocations in the %ld training steps, %ld page faults in "
               "the %ld steps after the first two; backend peak %.2f MiB, process peak resident "
               "%.1f MiB\n",
            allocs, steps, faults, steady, (double)m->peak / 1048576.0, rss);
}

/* The routing lines after training, per MoE layer: the token copies the gate kept and how much
 * of the capacity the cost model prices the experts ran (every rank takes part in the sums;
 * rank 0's stdout is kept). */
/* --profile's table: each kernel category's mean time per timed step and its share of the
 * mean step; the rest of the step ran no kernel (the executor's own code such as the gate's
 * routing, waits, idle). Kernels on several streams at once can add up to more than the step:
 * then the overlap is printed instead of a rest. */
static void profile_print(FILE *f, const double *sum, double macs, double t_all, long n,
                          const char *backend)
{
    double step = t_all / (double)n, in = 0.0;
    fprintf(f, "# kernel profile (%s): ms per step, mean of the %ld timed steps\n", backend, n);
    fprintf(f, "| %-40s | %8s | %6s |\n", "kernels", "ms/step", "share");
    for (int c = 0; c < RT_PROF_CATS; c++) {
        double ms = 1e3 * sum[c] / (double)n;
        in += sum[c] / (double)n;
        fprintf(f, "| %-40s | %8.2f | %5.1f%% |\n", rt_prof_names[c], ms,
                step > 0 ? 100.0 * sum[c] / (double)n / step : 0.0);
    }
    if (in <= step)
        fprintf(f, "| %-40s | %8.2f | %5.1f%% |\n", "outside kernels (host code, waits, idle)",
                1e3 * (step - in), step > 0 ? 100.0 * (step - in) / step : 0.0);
    else
        fprintf(f, "| %-40s | %8.2f | %6s |\n", "kernels overlapped on streams", 1e3 * (in - step),
                "");
    fprintf(f, "| %-40s | %8.2f | %5.1f%% |\n", "step", 1e3 * step, 100.0);
    if (sum[RT_PROF_GEMM] > 0)
        fprintf(f, "# GEMM: %.4g GMAC per step at %.2f GMAC/s\n", 1e-9 * macs / (double)n,
                1e-9 * macs / sum[RT_PROF_GEMM]);
}

/* Every stream of the model has run what was issued to it. */
static void sync_streams(rt_backend *be, const rt_model *md)
{
    be->stream_sync(be, md->comp);
    be->stream_sync(be, md->comm);
    be->stream_sync(be, md->grad);
    be->stream_sync(be, md->intra);
}

static int by_time_desc(const void *a, const void *b)
{
    double x = ((const rt_prof_gemm *)a)->s, y = ((const rt_prof_gemm *)b)->s;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* "615" or "596-615" */
static const char *dim_range(char *buf, size_t size, const long *r)
{
    if (r[0] == r[1])
        snprintf(buf, size, "%ld", r[0]);
    else
        snprintf(buf, size, "%ld-%ld", r[0], r[1]);
    return buf;
}

/* --profile's GEMM shapes: the ones that took the most time per step, each with its rate (a
 * shape well below the others' rate is one the BLAS runs poorly: small, thin or strided), the
 * rest summed in one row. */
#define PROFILE_GEMM_ROWS 12
static void profile_gemm_print(FILE *f, rt_prof_gemm *sh, int n_sh, long n)
{
    double total = 0.0;
    for (int i = 0; i < n_sh; i++)
        total += sh[i].s;
    if (n_sh == 0 || total <= 0.0)
        return;
    qsort(sh, (size_t)n_sh, sizeof *sh, by_time_desc);
    fprintf(f, "# GEMM shapes by time: C (m x n) = op(A) (m x k) op(B) (k x n), op t = "
               "transposed, batch = problems per call; a range: calls of one binary order "
               "of magnitude\n");
    fprintf(f, "| %-2s | %9s | %9s | %9s | %5s | %10s | %8s | %6s | %7s |\n", "op", "m", "n", "k",
            "batch", "calls/step", "ms/step", "share", "GMAC/s");
    rt_prof_gemm rest = {0};
    int n_rest = 0;
    for (int i = 0; i < n_sh; i++) {
        const rt_prof_gemm *e = &sh[i];
        if (i >= PROFILE_GEMM_ROWS || e->m[0] == 0) {
            rest.calls += e->calls, rest.s += e->s, rest.macs += e->macs;
            n_rest++;
            continue;
        }
        char bm[32], bn[32], bk[32];
        fprintf(f, "| %c%c | %9s | %9s | %9s | %5ld | %10.1f | %8.3f | %5.1f%% | %7.2f |\n",
                e->ta ? 't' : 'n', e->tb ? 't' : 'n', dim_range(bm, sizeof bm, e->m),
                dim_range(bn, sizeof bn, e->n), dim_range(bk, sizeof bk, e->k), e->batch,
                (double)e->calls / (double)n, 1e3 * e->s / (double)n, 100.0 * e->s / total,
                e->s > 0 ? 1e-9 * e->macs / e->s : 0.0);
    }
    if (n_rest > 0)
        fprintf(f, "| %-46s | %10.1f | %8.3f | %5.1f%% | %7.2f |\n", "the other shapes",
                (double)rest.calls / (double)n, 1e3 * rest.s / (double)n, 100.0 * rest.s / total,
                rest.s > 0 ? 1e-9 * rest.macs / rest.s : 0.0);
}

static fsmoe_status routing_report(const rt_model *md, FILE *f, fsmoe_error *err)
{
    int header = 0;
    for (int l = 0; l < md->cfg.layers; l++) {
        const rt_block *bl = &md->blocks[l];
        double kept, fill, imb, width;
        if (!bl->is_moe)
            continue;
        fsmoe_status st = moe_routing_summary(&bl->moe, &kept, &fill, &imb, &width, err);
        if (st != FSMOE_OK)
            return st;
        if (bl->moe.stats.forwards == 0)
            continue;
        if (!header++)
            fprintf(f, "# routing over this run's %ld training steps (the cost model prices every "
                       "expert at its capacity, all slots filled, and every rank alike):\n",
                    bl->moe.stats.forwards);
        fprintf(f, "  routing L%d  %5.1f %% of the token copies kept (%.1f %% dropped at "
                   "capacity)", bl->moe.index, 100.0 * kept, 100.0 * (1.0 - kept));
        if (fill > 0)
            fprintf(f, "; experts ran %5.1f %% of the capacity's rows", 100.0 * fill);
        if (imb > 0)
            fprintf(f, "; busiest rank's expert rows %.2fx the mean", imb);
        if (width > 0) /* the capacity is global: a rank's busiest expert may keep more than
                        * its share, and the dense matrices are as wide as it needs */
            fprintf(f, "; dense dispatch/combine matrices %.2fx the width priced (E x this "
                       "rank's busiest expert's rows, against k*f*tokens)",
                    width);
        fprintf(f, "\n");
    }
    return FSMOE_OK;
}

/* --calibrate: the run's profile with the arrival skew --report fitted (rt_report_result, the
 * line held to a, rho >= 0), the constant part as sync_latency_s and the slope as sync_growth,
 * written by rank 0; the profile's other contents as read (its comments are not kept). */
static fsmoe_status write_calibrated(rt_schedule *rs, const rt_report_result *res,
                                     const rt_config *cfg, int rank, const char *path,
                                     fsmoe_error *err)
{
    if (res->skew_tasks < 2)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "--calibrate: the run met %d collective task(s) "
                          "on every rank in the compared steps: too few to fit the arrival skew "
                          "(run more steps, or a schedule with collectives)",
                          res->skew_tasks);
    if (rank != 0)
        return FSMOE_OK;
    fsmoe_cluster *c = &rs->cluster;
    if (!c->interference.present) /* the factors' absence means 1: no interference */
        c->interference.present = 1, c->interference.comm_slowdown = 1.0,
        c->interference.compute_slowdown = 1.0, c->interference.measured[0] = '\0';
    c->interference.sync_s = res->cal_a_s;
    c->interference.sync_growth = res->cal_rho;
    c->interference.sync_growth_from_s = res->cal_from_s;
    if (c->interference.sync_s > FSMOE_MAX_SYNC_S ||
        c->interference.sync_growth > FSMOE_MAX_SYNC_GROWTH ||
        c->interference.sync_growth_from_s > FSMOE_MAX_SYNC_GROWTH_FROM_S)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "--calibrate: the fitted skew %.3f ms + %.3f x "
                          "max(0, segment - %.3f s) is out of the profile's range (at most %g s, %g "
                          "and %g s)",
                          1e3 * res->cal_a_s, res->cal_rho, res->cal_from_s, FSMOE_MAX_SYNC_S,
                          FSMOE_MAX_SYNC_GROWTH, FSMOE_MAX_SYNC_GROWTH_FROM_S);
    char *m = c->interference.measured;
    size_t len = strlen(m);
    snprintf(m + len, sizeof c->interference.measured - len,
             "%ssync: fsmoe-run --calibrate, schedule %s of %s, %d steps, r2 %.2f over %d tasks",
             len ? "; " : "", rs->name, cfg->name, res->steps, res->skew_r2, res->skew_tasks);
    fsmoe_status st = fsmoe_cluster_write(path, c, NULL, err);
    const char *why = rt_report_calibration_suspect(res);
    if (st == FSMOE_OK && why)
        printf("# warning: --calibrate: this run is a doubtful base for %s: %s (median step "
               "%.1f ms, p90 %.1f, predicted %.1f)\n",
               path, why, 1e3 * res->step_median_s, 1e3 * res->step_p90_s,
               1e3 * res->step_predicted_s);
    if (st == FSMOE_OK)
        printf("# calibrated profile: %s (sync_latency_s %.6g, sync_growth %.4g, "
               "sync_growth_from_s %.4g)\n",
               path, c->interference.sync_s, c->interference.sync_growth,
               c->interference.sync_growth_from_s);
    return st;
}

/* Each MoE layer's routing as the cost model takes it (planner/workload.h run_rows, run_width):
 * the busiest exchange member's expert rows over the capacity's (the step waits for it), and
 * the dense matrices' width over the width priced; 0 (as planned) where the run has no capacity
 * or no dense matrices. Every rank calls it: the statistics are summed over the world. */
static fsmoe_status routing_met(const rt_model *md, double *rows, double *width, int n,
                                fsmoe_error *err)
{
    for (int l = 0; l < md->cfg.layers; l++) {
        const rt_block *bl = &md->blocks[l];
        double kept, fill, imb, dense;
        if (!bl->is_moe)
            continue;
        fsmoe_status st = moe_routing_summary(&bl->moe, &kept, &fill, &imb, &dense, err);
        if (st != FSMOE_OK)
            return st;
        int i = bl->moe.index;
        if (i < 0 || i >= n)
            continue;
        rows[i] = fill > 0.0 ? fill * (imb > 0.0 ? imb : 1.0) : 0.0;
        width[i] = dense;
    }
    return FSMOE_OK;
}

int main(int argc, char **argv)
{
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
    /* until the first step a signal ends the run at once (nothing is written yet; a read that
     * blocks must not make it wait) */
    fsmoe_atomic_on_signals();
    fsmoe_error err = {0};
    fsmoe_status st = FSMOE_OK;
    rt_options opt;
    if ((st = options_parse(&opt, argc, argv, &err)) != FSMOE_OK)
        usage(err.msg);
    if (opt.help)
        usage(NULL);
    if (opt.schedule && (st = rt_schedule_check_name(opt.schedule, &err)) != FSMOE_OK)
        usage(err.msg);
    const char *model_path = opt.model_path, *plan_path = opt.plan_path,
               *data_path = opt.data_path ? opt.data_path : FSMOE_DEFAULT_DATA,
               *save_dir = opt.save_dir, *resume_dir = opt.resume_dir;
    int ep = opt.ep, mp = opt.mp, esp = opt.esp;

    if ((st = input_regular("--model", model_path, &err)) != FSMOE_OK ||
        (plan_path && (st = input_regular("--plan", plan_path, &err)) != FSMOE_OK))
        return die_input(&err);
    rt_config cfg;
    config_defaults(&cfg);
    fsmoe_model mf;
    memset(&mf, 0, sizeof mf);
    rt_config_origin origin;
    if ((st = fsmoe_model_load(model_path, &mf, &err)) != FSMOE_OK ||
        (st = config_from_model(&cfg, &mf, model_path, &err)) != FSMOE_OK ||
        (st = options_apply(&opt, &cfg, &origin, &err)) != FSMOE_OK ||
        (st = config_check(&cfg, &origin, &err)) != FSMOE_OK)
        return die_input(&err);
    long last = opt.stop_at > 0 ? opt.stop_at : cfg.steps; /* the step this invocation ends after */
    fsmoe_comm_set_timeout(opt.comm_timeout >= 0 ? opt.comm_timeout
                                                 : FSMOE_COMM_TIMEOUT_DEFAULT_S);
    /* The plan is read and checked once, before anything is built (design.md §9); without
     * --ep the run takes the plan's expert parallelism. */
    plan_check_result pcheck;
    memset(&pcheck, 0, sizeof pcheck);
    int placed = world > 1 ? ranks_per_node() : 0, gpus_per_node = placed;
    if (opt.gpus_per_node) { /* the nodes the layout assumes, where they are emulated */
        if (world % opt.gpus_per_node != 0) {
            fsmoe_fail(&err, FSMOE_ERR_USAGE, "--gpus-per-node %d does not divide the %d ranks",
                       opt.gpus_per_node, world);
            return die_input(&err);
        }
        gpus_per_node = opt.gpus_per_node;
    }
    if (opt.calibrate_path && world < 2) {
        fsmoe_fail(&err, FSMOE_ERR_USAGE, "--calibrate: the ranks' arrival skew needs two or "
                   "more ranks (this run has 1)");
        return die_input(&err);
    }
    if (plan_path && (st = plan_check_file(plan_path, model_path, &cfg, world, rank, gpus_per_node,
                                           &mp, &ep, &esp, &pcheck, &err)) != FSMOE_OK)
        return die_input(&err);
    ep = ep ? ep : 1, mp = mp ? mp : 1, esp = esp ? esp : 1;
    /* the schedule graph of the plan (or of a baseline on its layout): what the executor runs */
    rt_schedule sched;
    memset(&sched, 0, sizeof sched);
    if (plan_path) {
        if ((st = rt_schedule_make(&sched, plan_path, model_path, opt.cluster_path,
                                   opt.schedule ? opt.schedule : "plan", &err)) != FSMOE_OK) {
            rt_schedule_free(&sched);
            return die_input(&err);
        }
        if (sched.order >= 0)
            cfg.order = (rt_order_kind)sched.order;
        else
            sched.order = (int)cfg.order; /* the model's, which runs (the digest names it) */
    }
    if (world % ep != 0 || cfg.E % ep != 0) {
        fsmoe_fail(&err, FSMOE_ERR_USAGE,
                   "--ep %d: the expert-parallel group size must divide the %d ranks and the %ld "
                   "experts", ep, world, cfg.E);
        return die_input(&err);
    }
    if ((st = check_slices(&cfg, world, mp, ep, esp, &err)) != FSMOE_OK)
        return die_input(&err);
    if (world > 1 && (cfg.gate == RT_GATE_EXPERT_CHOICE || cfg.gate == RT_GATE_SOFTMOE)) {
        fsmoe_fail(&err, FSMOE_ERR_USAGE,
                   "--gate %s: fsmoe-run runs this gate on one rank only (its routing mixes "
                   "tokens of the whole batch, which is not distributed yet); use gshard, "
                   "sigmoid or xmoe on %d ranks", gate_kind_name(cfg.gate), world);
        return die_input(&err);
    }
    rt_layout layout = layout_make_mp(world, rank, gpus_per_node, mp, ep, esp, cfg.E, cfg.B);
    /* What the run needs, before anything of its size is allocated; the data gets what is
     * left. */
    const char *limit_what = "";
    double limit = options_memory_limit(&opt, placed, &limit_what); /* the real node's share */
    rt_memory_need need = options_memory_need(&cfg, &layout, 0);
    if ((st = options_check_memory(&opt, &cfg, need, limit, limit_what, &err)) != FSMOE_OK)
        return die_input(&err);
    double room = limit - need.total;
    rt_dist dist;
    if ((st = dist_init(&dist, &layout, &err)) != FSMOE_OK)
        return die(&err);

    rt_data data;
    if ((st = data_load_limited(&data, data_path, cfg.V, cfg.L,
                                room < 9e18 ? (long)room : LONG_MAX, &err)) != FSMOE_OK)
        return die_input(&err);

    rt_backend *be = NULL;
    rt_trainer tr;
    memset(&tr, 0, sizeof tr);
    rt_trace trace;
    memset(&trace, 0, sizeof trace);
    double *step_times = NULL; /* --report: the timed steps' durations */
    int n_step_times = 0;
    int rc = 0, input_phase = 1;
    long saved = -1; /* the step of the last checkpoint this run wrote */
    /* outputs are checked before the work that produces them (every rank writes a shard) */
    if (save_dir && (st = checkpoint_prepare_dir("--save", save_dir, rank, &err)) != FSMOE_OK)
        goto fail;
    if (opt.calibrate_path &&
        (st = fsmoe_atomic_check("--calibrate", opt.calibrate_path, &err)) != FSMOE_OK)
        goto fail;
    /* one trace file for all ranks, written by rank 0 (write_trace_all) */
    char trace_path[1024] = "";
    if (opt.trace_path) {
        snprintf(trace_path, sizeof trace_path, "%s", opt.trace_path);
        if ((st = fsmoe_atomic_check("--trace", trace_path, &err)) != FSMOE_OK)
            goto fail;
    }
    if ((st = rt_backend_create(opt.backend, opt.threads, &be, &err)) != FSMOE_OK)
        goto fail;
    /* a profile's compute lines hold for the threads they were measured with (cluster.h) */
    if (plan_path && rank == 0 && be->threads > 0 && sched.cluster.compute_threads > 0 &&
        sched.cluster.compute_threads != be->threads)
        printf("# warning: the profile %s measured its GEMM and copy lines with %d thread(s) "
               "per rank, this run computes on %d (--threads): the predictions assume the "
               "profile's rate\n",
               sched.cluster_path, sched.cluster.compute_threads, be->threads);
    if (opt.profile && !be->profile_enable) {
        st = fsmoe_fail(&err, FSMOE_ERR_USAGE,
                        "--profile: the %s backend has no kernel profile yet (use --trace for "
                        "the tasks' times)", be->name);
        goto fail;
    }
    double prof_sum[RT_PROF_CATS] = {0}, prof_step[RT_PROF_CATS] = {0}, macs_sum = 0, macs = 0;
    if (opt.profile)
        be->profile_enable(be, 1);
    input_phase = 0; /* from here a failure is the run's (memory, MPI, the backend) */
    if (resume_dir && cfg.warmup < 0) { /* the saved run's warm-up, whatever --steps is now */
        long w = checkpoint_saved_warmup(resume_dir);
        if (w >= 0)
            cfg.warmup = w;
    }
    if ((st = trainer_init_dist(&tr, &cfg, be, &data, world > 1 ? &dist : NULL, &err)) !=
        FSMOE_OK)
        goto fail;
    rt_trace_init(&trace, be);
    plan_info pinfo;
    memset(&pinfo, 0, sizeof pinfo);
    if (plan_path && (st = schedule_apply(&sched, &pcheck, &tr.model, &pinfo, &err)) != FSMOE_OK)
        goto fail;
    int tracing = trace_path[0] || opt.report;
    step_times = opt.report ? calloc((size_t)(last - tr.step + 1), sizeof(double)) : NULL;
    if (opt.report && !step_times) {
        st = fsmoe_fail(&err, FSMOE_ERR_NOMEM, "--report: out of memory");
        goto fail;
    }
    if (resume_dir) {
        /* every rank reads the shards it needs itself (no MPI; reshards by tensor name) */
        rt_ckpt_rank ck = checkpoint_rank(&tr.model, &tr.opt, &layout);
        input_phase = 1;
        if ((st = checkpoint_load(resume_dir, &ck, &tr.step, &err)) != FSMOE_OK)
            goto fail;
        input_phase = 0;
        printf("resumed from %s/%s at step %ld\n", resume_dir, RT_CKPT_MANIFEST, tr.step);
    }
    char bdesc[512];
    snprintf(bdesc, sizeof bdesc, "%s%s%s%s", be->name,
             tr.model.streams_on_caller && be->on_caller ? ", streams on the caller (one rank)"
                 : "",
             plan_path ? ", plan " : "", plan_path ? plan_path : "");
    config_print(&cfg, stdout, bdesc, data_path, tr.model.params.total);
    if (plan_path)
        printf("| %-14s | schedule %s: %s; predicts %.2f ms/iteration on cluster %s ('pred' in "
               "the step lines); it matches the measured time only when that profile was "
               "measured on this host |\n", "plan", sched.name, pinfo.rs, 1e3 * pinfo.iteration_s,
               pinfo.cluster);
    printf("# corpus: %ld bytes (train %ld), unigram entropy %.4f nats/byte\n", data.n,
           data.train_end, data_unigram_entropy(&data));
    memory_print(stdout, &be->mem, &need.model, world);
    fflush(stdout);
    if (world > 1)
        printf("# %d ranks: dp %d, mp %d, ep %d (experts %ld-%ld on rank 0), esp %d, edp %d; "
               "global batch %ld samples, %ld per rank\n", world, layout.dp, layout.mp,
               layout.ep, layout.expert0, layout.expert0 + layout.E_local - 1, layout.esp,
               layout.edp, layout.B_global, layout.B);
    long tokens_per_step = layout.B_global * cfg.L;
    double t_all = 0;
    long n_timed = 0;
    long step_allocs = 0, n_steps = 0, step_faults = 0, n_steady = 0;
    int sig = 0;
    if (tr.step >= last)
        printf("# nothing to do: the run is at step %ld, this invocation stops at %ld\n", tr.step,
               last);
    stop_on_signals(); /* from here a signal stops the run after the step in progress */
    while (tr.step < last) {
        if ((sig = stop_agreed(world, &err, &st)) != 0 || st != FSMOE_OK)
            break;
        long allocs0 = be->mem.allocs, faults0 = minor_faults();
        double loss = 0, ce = 0, gnorm = 0, t0 = now_s();
        model_set_trace(&tr.model, tracing ? &trace : NULL);
        if ((st = trainer_step(&tr, &loss, &ce, &gnorm, &err)) != FSMOE_OK)
            goto fail;
        double dt = now_s() - t0;
        step_allocs += be->mem.allocs - allocs0;
        n_steps++;
        if (tr.step > 2) { /* steady state: the first two steps touch pages for the first time
                            * (the kernels' and the BLAS's buffers, the stacks) */
            step_faults += minor_faults() - faults0;
            n_steady++;
        }
        if (opt.profile) {
            sync_streams(be, &tr.model); /* the step's kernels all ran: the totals are the step's */
            be->profile_read(be, prof_step, &macs);
            if (tr.step <= 1 && be->profile_gemm_shapes) /* the warm-up step's shapes */
                be->profile_gemm_shapes(be, NULL);
            for (int c = 0; c < RT_PROF_CATS && tr.step > 1; c++)
                prof_sum[c] += prof_step[c];
            macs_sum += tr.step > 1 ? macs : 0.0;
        }
        if (tracing) {
            /* every stream done (the step's marks are all taken), then the step's tasks kept */
            be->stream_sync(be, tr.model.comp);
            be->stream_sync(be, tr.model.comm);
            be->stream_sync(be, tr.model.grad);
            if ((st = rt_backend_check(be, &err)) != FSMOE_OK ||
                (st = rt_trace_step(&trace, tr.step - 1, &err)) != FSMOE_OK)
                goto fail;
            model_set_trace(&tr.model, NULL);
        }
        if (tr.step > 1) { /* the first step warms caches */
            t_all += dt;
            n_timed++;
            if (step_times)
                step_times[n_step_times++] = dt;
        }
        double tps = (double)tokens_per_step / dt;
        char pred[32] = "";
        if (plan_path)
            snprintf(pred, sizeof pred, " | pred %.1f ms", 1e3 * pinfo.iteration_s);
        printf("step %ld/%ld | loss %.4f | %.1f ms%s | %.1fk tok/s | lr %.2e | gnorm %.3f\n",
               tr.step, cfg.steps, ce, 1e3 * dt, pred, tps / 1e3, lr_at(&cfg, tr.step - 1), gnorm);
        /* --profile counts the training steps' kernels only: not evaluation's nor a save's */
        int evaluating = cfg.eval_every > 0 && (tr.step % cfg.eval_every == 0 || tr.step == last);
        int saving = save_dir && ((cfg.save_every > 0 && tr.step % cfg.save_every == 0) ||
                                  tr.step == last);
        if (opt.profile && (evaluating || saving))
            be->profile_enable(be, 0);
        if (evaluating) {
            double val = 0;
            if ((st = trainer_eval(&tr, &val, &err)) != FSMOE_OK)
                goto fail;
            printf("eval step %ld | val loss %.4f\n", tr.step, val);
        }
        if (saving) {
            rt_ckpt_rank ck = checkpoint_rank(&tr.model, &tr.opt, &layout);
            if ((st = save_checkpoint(save_dir, tr.step, &ck, &dist, world, rank, &err)) != FSMOE_OK)
                goto fail;
            saved = tr.step;
        }
        if (opt.profile && (evaluating || saving)) {
            sync_streams(be, &tr.model); /* nothing of theirs still queued */
            be->profile_enable(be, 1);
        }
        fflush(stdout);
    }
    if (st == FSMOE_OK && sig == 0)
        sig = stop_agreed(world, &err, &st); /* a signal during the last step */
    if (st != FSMOE_OK)
        goto fail;
    if (sig != 0) {
        /* No checkpoint at the interruption: the step in progress was finished, but a save now
         * would be one the schedule did not ask for; the last one written stays the
         * checkpoint. */
        char last_ck[1200] = "no checkpoint was written by this run";
        if (saved >= 0)
            snprintf(last_ck, sizeof last_ck, "the checkpoint in %s is at step %ld", save_dir,
                     saved);
        fprintf(stderr, "%s: interrupted by signal %d (%s) after step %ld of %ld; %s\n", prog,
                sig, sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM"
                     : sig == SIGHUP ? "SIGHUP" : "?", tr.step, cfg.steps, last_ck);
        rc = 128 + sig;
        goto done;
    }
    if (n_timed > 0)
        printf("# mean step %.2f ms, %.1f tok/s over %ld steps\n", 1e3 * t_all / (double)n_timed,
               (double)tokens_per_step * (double)n_timed / t_all, n_timed);
    if (opt.profile && n_timed > 0) {
        profile_print(stdout, prof_sum, macs_sum, t_all, n_timed, be->name);
        if (be->profile_gemm_shapes) {
            rt_prof_gemm shapes[RT_PROF_GEMM_SHAPES + 1];
            profile_gemm_print(stdout, shapes, be->profile_gemm_shapes(be, shapes), n_timed);
        }
    }
    if (n_steps > 0)
        memory_line(stdout, &be->mem, step_allocs, n_steps, step_faults, n_steady);
    if ((st = routing_report(&tr.model, stdout, &err)) != FSMOE_OK)
        goto fail;
    if (trace_path[0]) {
        st = world > 1 ? write_trace_all(&trace, &dist, cfg.name, trace_path, &err)
                       : rt_trace_write(&trace, rank, cfg.name, trace_path, &err);
        if (st != FSMOE_OK)
            goto fail;
        printf("# trace: %s (%ld tasks", trace_path, trace.step_first);
        if (trace.dropped_steps > 0)
            printf("; %ld steps not kept: more than %ld tasks", trace.dropped_steps,
                   RT_TRACE_MAX_EVENTS);
        printf(")\n");
    }
    if (opt.report) {
        /* every rank joins its own trace with the graph (only rank 0's stdout is kept); the
         * collectives' times of every rank are gathered for the report's last table, and the
         * conformance of every rank is summed on all */
        rt_report_result res;
        rt_report_ranks ranks = {world, report_allgather, &dist};
        int n_moe = sched.model.n_layers;
        if (n_moe > 0) { /* predicted at the routing the run met */
            double *rw = calloc((size_t)(2 * n_moe), sizeof *rw);
            if (!rw) {
                st = fsmoe_fail(&err, FSMOE_ERR_NOMEM, "--report: out of memory");
                goto fail;
            }
            st = routing_met(&tr.model, rw, rw + n_moe, n_moe, &err);
            if (st == FSMOE_OK)
                st = rt_schedule_at_routing(&sched, rw, rw + n_moe, &err);
            free(rw);
            if (st != FSMOE_OK)
                goto fail;
        }
        if ((st = rt_report_write(stdout, &trace, &sched, 1, step_times, n_step_times,
                                  world > 1 ? &ranks : NULL, &res, &err)) != FSMOE_OK)
            goto fail;
        if (world > 1) {
            long *all = calloc((size_t)(3 * world), sizeof(long));
            long mine[3] = {res.ids_mismatched, lround(res.gar_max_diff_bytes),
                            res.ids_unmeasured};
            if (!all) {
                st = fsmoe_fail(&err, FSMOE_ERR_NOMEM, "--report: out of memory");
                goto fail;
            }
            st = dist_allgather_longs(&dist, RT_WORLD, mine, all, 3, "report conformance (world)",
                                      &err);
            long bad = 0, diff = 0, bad_ranks = 0, unmeasured = 0;
            for (int i = 0; i < world; i++) {
                bad += all[3 * i], bad_ranks += all[3 * i] > 0;
                diff = all[3 * i + 1] > diff ? all[3 * i + 1] : diff;
                unmeasured += all[3 * i + 2];
            }
            free(all);
            if (st != FSMOE_OK)
                goto fail;
            printf("# conformance on all %d ranks: %ld task ids mismatched (on %ld ranks); "
                   "largest Gradient-AllReduce difference of one task on any rank %ld B; "
                   "%ld predicted task ids not measured\n",
                   world, bad, bad_ranks, diff, unmeasured);
        }
        if (opt.calibrate_path && (st = write_calibrated(&sched, &res, &cfg, rank,
                                                         opt.calibrate_path, &err)) != FSMOE_OK)
            goto fail;
    }
    goto done;
fail:
    rc = input_phase ? die_input(&err) : die(&err);
done:
    rt_trace_free(&trace);
    free(step_times);
    trainer_free(&tr);
    rt_schedule_free(&sched);
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
