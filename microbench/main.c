/* Implements: fsmoe-bench, the cluster profiler (design.md §1, §3): under mpirun it
 * measures AllToAll, AllGather, ReduceScatter and AllReduce on every tier (intra-node,
 * inter-node, world), the hierarchical 2DH AllToAll where asked for (--ops), Parm's SAA, GEMM,
 * how a world AllToAll and a GEMM slow each other down (--interference) and memory copy, prints
 * an nccl-tests table, fits t = α + β·n per (operation, tier) with GSL and writes a cluster
 * profile fsmoe-plan reads.
 *
 * Relies on: options.c (command line), topology.c (groups), comm_mpi.c / comm_nccl.cu
 * (backends), suite.c and interference.c (measuring loops), results.c + fit.c (fits), report.c
 * (table, JSON), profile_write.c (profile), plot_svg.c (figure). Exit codes: 0 ok, 1 wrong
 * results or a failure while measuring (a lost or stalled rank: the watchdog of
 * comm/mpi_coll.h, limit --comm-timeout), 2 bad command line, impossible configuration or an
 * output that cannot be written (checked before measuring), 128+N when signal N (INT, TERM)
 * ends the run. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "atomic_file.h"
#include "comm_backend.h"
#include "mpi_coll.h"
#include "op_gemm.h"
#include "options.h"
#include "plot_svg.h"
#include "profile_write.h"
#include "report.h"
#include "results.h"
#include "suite.h"
#include "topology.h"

static char host[64] = "unknown";
static int world_rank = 0;

/* Errors: stderr, prefixed with host and rank (style.md). */
static void bench_error(const fsmoe_error *err)
{
    fprintf(stderr, "fsmoe-bench: %s:%d: %s\n", host, world_rank,
            err->msg[0] ? err->msg : fsmoe_strerror(err->status));
}

static int bench_finish(int code)
{
    MPI_Finalize();
    return code;
}

static void bench_profile_name(const bench_options *o, char *buf, size_t len)
{
    if (o->name) {
        snprintf(buf, len, "%s", o->name);
        return;
    }
    if (!o->output) {
        snprintf(buf, len, "unnamed");
        return;
    }
    const char *base = strrchr(o->output, '/');
    base = base ? base + 1 : o->output;
    snprintf(buf, len, "%s", base);
    char *dot = strrchr(buf, '.');
    if (dot && dot != buf && (strcmp(dot, ".yaml") == 0 || strcmp(dot, ".yml") == 0))
        *dot = '\0';
}

/* SIGINT and SIGTERM end the run with the signal's own status (128+N to a shell). Outputs are
 * only ever renamed into place whole (atomic_file.h), so an interrupted measurement leaves none;
 * while rank 0 creates temporaries (the writability check, the final writes) the signal waits
 * until they are renamed or removed, so that no temporary is left behind either. */
static volatile sig_atomic_t bench_hold_signals, bench_pending_signal;

static void bench_on_signal(int sig)
{
    if (bench_hold_signals) {
        bench_pending_signal = sig;
        return;
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void bench_signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = bench_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static void bench_signals_hold(int hold)
{
    bench_hold_signals = hold;
    if (!hold && bench_pending_signal) {
        int sig = bench_pending_signal;
        signal(sig, SIG_DFL);
        raise(sig);
    }
}

/* Rank 0 makes sure every output can be written before minutes of measuring: the file is not
 * a directory (the rename at the end would fail) and a temporary can be created beside it.
 * Failures are the command line's (exit 2), naming the flag. */
static fsmoe_status bench_outputs_writable(const bench_options *o, fsmoe_error *err)
{
    const char *flags[3] = {"-o", "--json", "--plot"};
    const char *paths[3] = {o->output, o->json, o->plot};
    fsmoe_status st = FSMOE_OK;
    bench_signals_hold(1);
    for (int i = 0; i < 3 && !st; i++) {
        if (!paths[i])
            continue;
        struct stat sb;
        if (stat(paths[i], &sb) == 0 && !S_ISREG(sb.st_mode)) {
            st = fsmoe_fail(err, FSMOE_ERR_USAGE, "%s %s: expected a file, found a %s", flags[i],
                            paths[i], S_ISDIR(sb.st_mode) ? "directory" : "special file");
            break;
        }
        fsmoe_atomic_file af;
        fsmoe_error e = {0};
        if (fsmoe_atomic_open(&af, paths[i], &e)) {
            st = fsmoe_fail(err, FSMOE_ERR_USAGE, "%s: cannot be written: %s", flags[i], e.msg);
            break;
        }
        fsmoe_atomic_abort(&af);
    }
    bench_signals_hold(0);
    return st;
}

/* The buffers the measurement will allocate against the memory of this machine, before any is
 * allocated: the same on every rank of a machine, the worst machine decides. */
static fsmoe_status bench_memory_check(const bench_options *o, const comm_topology *topo,
                                       const gemm_shape *shapes, int n_shapes, fsmoe_error *err)
{
    MPI_Comm machine;
    int local = 1;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                            &machine) == MPI_SUCCESS) {
        MPI_Comm_size(machine, &local);
        MPI_Comm_free(&machine);
    }
    double need = options_rank_bytes(o, topo->gpus_per_node, shapes, n_shapes);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double have = pages > 0 && page > 0 ? (double)pages * (double)page : 0.0;
    int bad = have > 0.0 && need * local > have, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!any)
        return FSMOE_OK;
    return fsmoe_fail(err, FSMOE_ERR_USAGE,
                      "-e %lld --rotate %lld%s: the buffers need about %.1f GB per rank, %d "
                      "ranks on a machine with %.1f GB (lower -e, --rotate or the GEMM shapes)",
                      o->max_bytes, o->rotate_bytes,
                      o->ops[FSMOE_OP_GEMM] ? " and the GEMM shapes" : "", need / 1e9, local,
                      have / 1e9);
}

int main(int argc, char **argv)
{
    int provided = 0, size = 1;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "fsmoe-bench: MPI_Init_thread failed (run under mpirun)\n");
        return 1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (gethostname(host, sizeof host - 1) != 0)
        strcpy(host, "unknown");
    bench_signals_install();

    bench_options o;
    fsmoe_error err = {0};
    options_defaults(&o);
    fsmoe_status st = options_parse(argc, argv, &o, &err);
    if (st) {
        if (world_rank == 0) {
            fprintf(stderr, "fsmoe-bench: %s\n", err.msg);
            options_usage(stderr);
        }
        return bench_finish(2);
    }
    if (o.help) {
        if (world_rank == 0)
            options_usage(stdout);
        return bench_finish(0);
    }
    fsmoe_comm_set_timeout(o.comm_timeout_s);
    if (provided < MPI_THREAD_MULTIPLE) {
        fsmoe_fail(&err, FSMOE_ERR_MPI, "this MPI grants thread level %d, not "
                   "MPI_THREAD_MULTIPLE: the SAA measurement needs one thread per stream",
                   provided);
        if (world_rank == 0)
            bench_error(&err);
        return bench_finish(1);
    }

    int out_st = world_rank == 0 ? (int)bench_outputs_writable(&o, &err) : 0;
    MPI_Bcast(&out_st, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (out_st) {
        if (world_rank == 0)
            bench_error(&err);
        return bench_finish(fsmoe_exit_code((fsmoe_status)out_st));
    }

    comm_topology topo;
    comm_backend b;
    memset(&b, 0, sizeof b);
    bench_results res;
    memset(&res, 0, sizeof res);
    bench_suite s;
    memset(&s, 0, sizeof s);
    int code = 0, blas_threads = 0;
    if ((st = topology_init(&topo, MPI_COMM_WORLD, o.gpus_per_node, &err))) {
        /* Same outcome on every rank: one message. */
        if (world_rank == 0)
            bench_error(&err);
        topology_free(&topo);
        return bench_finish(fsmoe_exit_code(st));
    }
    if (o.n_shapes > 0) {
        memcpy(s.shapes, o.shapes, sizeof o.shapes);
        s.n_shapes = o.n_shapes;
    } else {
        s.n_shapes = gemm_default_shapes(o.backend, topo.gpus_per_node, s.shapes,
                                         BENCH_MAX_SHAPES);
    }
    if ((st = bench_memory_check(&o, &topo, s.shapes, s.n_shapes, &err))) {
        if (world_rank == 0)
            bench_error(&err);
        topology_free(&topo);
        return bench_finish(fsmoe_exit_code(st));
    }
    if (o.backend == BACKEND_NCCL) {
        st = comm_nccl_init(&b, MPI_COMM_WORLD, &err);
    } else {
        /* default: the machine's cores over the ranks that share them — the ranks of a node,
         * and on an emulated cluster every node's (one host: the nodes are namespaces), where
         * the cores over a node's ranks gave 2 x 1's ranks two threads each on two cores and
         * GEMMs 4x slower than one thread each */
        int threads = o.blas_threads, host_ranks = 1;
        st = threads == 0 ? suite_machine_ranks(MPI_COMM_WORLD, &host_ranks, &err) : FSMOE_OK;
        if (threads == 0) {
            long cores = sysconf(_SC_NPROCESSORS_ONLN);
            threads = cores > host_ranks ? (int)(cores / host_ranks) : 1;
        }
        if (!st)
            st = comm_mpi_init(&b, threads, o.huge_pages, &err);
        blas_threads = threads;
    }
    if (st) {
        bench_error(&err);
        code = fsmoe_exit_code(st);
        goto done;
    }

    b.stage_pool_bytes = (size_t)o.rotate_bytes; /* the 2DH stage rotates like the buffers */
    s.opt = &o;
    s.b = &b;
    s.topo = &topo;
    s.res = &res;
    fsmoe_parallel layout = fsmoe_parallel_common(topo.nodes, topo.gpus_per_node);
    if (o.layout_given) {
        layout.world = topo.size;
        if (o.dp)
            layout.dp = o.dp;
        if (o.mp)
            layout.mp = o.mp;
        if (o.ep)
            layout.ep = o.ep;
        if (o.esp)
            layout.esp = o.esp;
        layout.pp = 1;
        st = fsmoe_parallel_validate(&layout, 0, "command line", &err);
        if (!st && !topo.node_major)
            st = fsmoe_fail(&err, FSMOE_ERR_USAGE,
                            "the layout flags need node-major rank numbering (rank = node x G + "
                            "local); launch with --map-by core or give --gpus-per-node");
        if (st) {
            if (world_rank == 0)
                bench_error(&err);
            code = fsmoe_exit_code(st);
            goto done;
        }
        s.layout = &layout;
    }
    s.mcfg = (measure_cfg){.warmup = o.warmup, .iters = o.iters, .average = o.average,
                           .min_sample_s = o.min_sample_s, .world = MPI_COMM_WORLD, .cpu = -1};
    report rep = {stdout, world_rank == 0};
    progress prog;
    int show = o.progress < 0 ? isatty(STDERR_FILENO) : o.progress;
    s.rep = &rep;
    s.prog = &prog;
    progress_init(&prog, suite_steps(&s), world_rank == 0 && show);
    report_banner(&rep, &o, &topo, b.device);
    double t0 = measure_now();
    if ((st = suite_run(&s, &err))) {
        progress_clear(&prog);
        bench_error(&err);
        /* Other ranks may be blocked inside a collective: take the job down. */
        MPI_Abort(MPI_COMM_WORLD, 1);
        code = 1;
        goto done;
    }
    progress_finish(&prog);
    double elapsed = measure_now() - t0;
    if ((st = results_fit(&res, o.r2_threshold, &err))) {
        bench_error(&err);
        code = 1;
        goto done;
    }
    int ok = report_footer(&rep, &res, o.r2_threshold);
    if (world_rank == 0)
        printf("# Measured in %.1f s\n", elapsed);
    if (!ok)
        code = 1;

    if (world_rank == 0) {
        char name[64], source[512], notes[768], date[32];
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
        bench_profile_name(&o, name, sizeof name);
        snprintf(source, sizeof source,
                 "fsmoe-bench %s, %s backend, %d ranks (%d nodes x %d), started on %s, %s",
                 FSMOE_VERSION, b.name, topo.size, topo.nodes, topo.gpus_per_node, host, date);
        snprintf(notes, sizeof notes,
                 "%s %d warm-up + %d timed runs per size, median; ranks combined by -a %d; "
                 "%s; SAA in Parm's phases (one exchange per member); %d ranks on %d cores per "
                 "machine: groups in %s; "
                 "buffers rotate through %lld MB (cold cache)%s; %lld wrong values",
                 comm_dtype_name(o.dtype), o.warmup, o.iters, (int)o.average,
                 topo.detected ? "nodes from MPI_Comm_split_type" : "nodes from --gpus-per-node",
                 s.machine_ranks, s.machine_cores,
                 o.group_rounds > 1 || (o.group_rounds == 0 && s.oversubscription > 1)
                     ? "rounds, the others asleep"
                     : "one round",
                 o.rotate_bytes >> 20, o.huge_pages ? ", huge pages" : "",
                 results_wrong(&res));
        /* memory per rank: a GPU's own, or the host's RAM shared by the ranks on it */
        double dev_mem = b.device_memory_bytes;
        if (b.host_memory && s.machine_ranks > 1)
            dev_mem /= s.machine_ranks;
        if (dev_mem < FSMOE_MIN_DEVICE_MEMORY || dev_mem > FSMOE_MAX_DEVICE_MEMORY)
            dev_mem = 0.0; /* outside what a profile holds: unknown */
        /* host sharing only where the ranks compute on the host's cores (a GPU computes on
         * its own however many ranks share the CPUs) */
        profile_meta meta = {name,
                             source,
                             b.device,
                             topo.nodes,
                             topo.gpus_per_node,
                             o.r2_threshold,
                             notes,
                             dev_mem,
                             blas_threads, /* 0 on the nccl backend: not a CPU's */
                             b.host_memory ? s.machine_ranks : 0,
                             s.machine_cores,
                             b.host_memory ? s.local_at_once : 0};
        fsmoe_error e = {0};
        bench_signals_hold(1);
        if (o.output) {
            if ((st = profile_write(o.output, &meta, &res, &e))) {
                bench_error(&e);
                code = code ? code : 1;
            } else {
                printf("# Profile written to %s\n", o.output);
            }
        }
        if (o.json && (st = report_json(o.json, &o, &topo, b.device, &res, &e))) {
            bench_error(&e);
            code = code ? code : 1;
        }
        if (o.plot && (st = plot_svg_write(o.plot, name, &res, &e))) {
            bench_error(&e);
            code = code ? code : 1;
        }
        bench_signals_hold(0);
    }
    MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
done:
    results_free(&res);
    if (b.fini)
        b.fini(&b);
    topology_free(&topo);
    return bench_finish(code);
}
