/* Implements: fsmoe-bench, the cluster profiler of issue 4 (design.md §1, §3): under mpirun it
 * measures AllToAll, AllGather, ReduceScatter and AllReduce on every tier (intra-node,
 * inter-node, world), Parm's SAA, GEMM and memory copy, prints an nccl-tests table, fits
 * t = α + β·n per (operation, tier) with GSL and writes a cluster profile fsmoe-plan reads.
 *
 * Relies on: options.c (command line), topology.c (groups), comm_mpi.c / comm_nccl.cu
 * (backends), suite.c (measuring loops), results.c + fit.c (fits), report.c (table, JSON),
 * profile_write.c (profile), plot_svg.c (figure). Exit codes: 0 ok, 1 wrong results or a
 * failure while measuring, 2 bad command line or impossible configuration. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "atomic_file.h"
#include "comm_backend.h"
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

/* Rank 0 makes sure every output can be written before minutes of measuring. */
static fsmoe_status bench_outputs_writable(const bench_options *o, fsmoe_error *err)
{
    const char *paths[3] = {o->output, o->json, o->plot};
    for (int i = 0; i < 3; i++) {
        if (!paths[i])
            continue;
        fsmoe_atomic_file af;
        fsmoe_status st = fsmoe_atomic_open(&af, paths[i], err);
        if (st)
            return st;
        fsmoe_atomic_abort(&af);
    }
    return FSMOE_OK;
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
    int code = 0;
    if ((st = topology_init(&topo, MPI_COMM_WORLD, o.gpus_per_node, &err))) {
        /* Same outcome on every rank: one message. */
        if (world_rank == 0)
            bench_error(&err);
        topology_free(&topo);
        return bench_finish(fsmoe_exit_code(st));
    }
    if (o.backend == BACKEND_NCCL) {
        st = comm_nccl_init(&b, MPI_COMM_WORLD, &err);
    } else {
        int threads = o.blas_threads;
        if (threads == 0) {
            long cores = sysconf(_SC_NPROCESSORS_ONLN);
            threads = cores > topo.gpus_per_node ? (int)(cores / topo.gpus_per_node) : 1;
        }
        st = comm_mpi_init(&b, threads, o.huge_pages, &err);
    }
    if (st) {
        bench_error(&err);
        code = fsmoe_exit_code(st);
        goto done;
    }

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
    if (o.n_shapes > 0) {
        memcpy(s.shapes, o.shapes, sizeof o.shapes);
        s.n_shapes = o.n_shapes;
    } else {
        s.n_shapes = gemm_default_shapes(o.backend, topo.gpus_per_node, s.shapes,
                                         BENCH_MAX_SHAPES);
    }
    report rep = {stdout, world_rank == 0};
    progress prog;
    int show = o.progress < 0 ? isatty(STDERR_FILENO) : o.progress;
    s.rep = &rep;
    s.prog = &prog;
    progress_init(&prog, suite_rows(&s) * o.iters, world_rank == 0 && show);
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
                 s.oversubscription > 1 || o.group_rounds > 1
                     ? "rounds, the others asleep"
                     : "one round",
                 o.rotate_bytes >> 20, o.huge_pages ? ", huge pages" : "",
                 results_wrong(&res));
        profile_meta meta = {name, source, b.device, topo.nodes, topo.gpus_per_node,
                             o.r2_threshold, notes};
        fsmoe_error e = {0};
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
    }
    MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
done:
    results_free(&res);
    if (b.fini)
        b.fini(&b);
    topology_free(&topo);
    return bench_finish(code);
}
