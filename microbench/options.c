/* Implements: parsing and checking fsmoe-bench's command line (options.h). */
#include "options.h"

#include <getopt.h>
#include <limits.h>
#include <string.h>

#include "cli.h"

void options_default_ops(int *ops)
{
    /* Every operation but the 2DH AllToAll: the planner reads the flat one, and measuring
     * both would take the default suite on the emulated 2 x 2 cluster past its 60 s. */
    for (int i = 0; i < FSMOE_OP_COUNT; i++)
        ops[i] = i != FSMOE_OP_ALLTOALL_2DH;
}

void options_defaults(bench_options *o)
{
    memset(o, 0, sizeof *o);
    /* FSMoE §6.2: 2^18 .. 24·2^18 floats step 2^18 for communication, 2^19 .. 12·2^19 for
     * GEMM; 5 runs per point. */
    o->min_bytes = 4LL << 18;
    o->max_bytes = 24 * (4LL << 18);
    o->step_bytes = 4LL << 18;
    o->step_factor = 0.0;
    o->small_min_bytes = 16LL << 10;
    o->gemm_min = 1LL << 19;
    o->gemm_max = 12LL << 19;
    o->gemm_step = 1LL << 19;
    /* 5 timed runs of at least 5 ms each, the fewest for which the median has a 90 %
     * distribution-free interval ([min, max], 93.75 %); then up to 15 for sizes whose median
     * is not known to +-3 % and a fresh set of 5 for sizes more than 5 % off the robust line,
     * all in at most 25 % more time (measure.h). With 7 fixed runs the default suite on the
     * emulated 2 x 2 cluster (4 ranks on 2 cores, 8 Gbit/s) took 61 s with the world AllToAll
     * and SAA scattering by +-15 % and 1 to 4 fits below r2 0.99. */
    o->iters = 5;
    o->warmup = 1;
    o->max_iters = 15;
    o->precision = 0.03;
    o->outlier = 0.05;
    o->extra_time = 0.25;
    o->dtype = COMM_FLOAT;
    o->redop = COMM_SUM;
    o->average = MEASURE_AVG; /* nccl-tests' default; a collective ends together anyway */
    o->check = 1;
    o->interference = 1;
    options_default_ops(o->ops);
    for (int i = 0; i < FSMOE_TIER_COUNT; i++)
        o->tiers[i] = 1;
    o->min_sample_s = 0.005;
    o->group_rounds = 0;
    o->huge_pages = 1;
    o->rotate_bytes = 256LL << 20;
    o->r2_threshold = 0.99;
    o->backend = BACKEND_MPI;
    o->progress = -1;
    o->comm_timeout_s = BENCH_COMM_TIMEOUT_DEFAULT_S;
}

void options_usage(FILE *f)
{
    fputs(
        "usage: mpirun -np P fsmoe-bench [options]\n"
        "Measures collectives, Parm's SAA, GEMM and memory copy on this cluster, fits\n"
        "t = alpha + beta*n per (operation, tier) and writes a cluster profile.\n"
        "\n"
        "  -o, --output FILE        cluster profile to write (YAML, atomically)\n"
        "      --json FILE          every measured row and fit as JSON\n"
        "      --plot FILE.svg      measured points and fitted lines per operation\n"
        "      --name NAME          profile name (default: the output file's base name)\n"
        "  -b, --minbytes SIZE      smallest message (default 1M = 2^18 floats)\n"
        "  -e, --maxbytes SIZE      largest message (default 24M)\n"
        "  -i, --stepbytes SIZE     add this between sizes (default 1M)\n"
        "  -f, --stepfactor X       multiply by X between sizes instead (X > 1)\n"
        "      --small-min SIZE     also SIZE, 2*SIZE, ... below -b: what small AllToAll chunks\n"
        "                           and element-wise passes move (fsmoe-plan prices those from\n"
        "                           the measured points; default 16K; 0 = only -b .. -e)\n"
        "  -n, --iters N            timed runs every size gets; the median is kept (default 5)\n"
        "      --max-iters N        while the line's slope is not known to --precision (or its\n"
        "                           r2 is below the threshold), a size whose median is not\n"
        "                           either gets more runs, up to N (default 15; at least -n)\n"
        "      --precision X        wanted: the slope's and each median's 90 % confidence\n"
        "                           interval within +-X of it (default 0.03; 0 = exactly -n runs)\n"
        "      --outlier X          a size whose median lies more than X (relative) off the\n"
        "                           robust line through all sizes is measured again, once\n"
        "                           (default 0.05; 0 = never)\n"
        "      --extra-time F       more runs and re-measures take at most F times the first\n"
        "                           -n passes of a section, plus what the sections before left\n"
        "                           unused (default 0.25; 0 = none)\n"
        "  -w, --warmup_iters N     untimed runs first (default 1)\n"
        "  -d, --datatype TYPE      float double int32 uint32 int64 uint64 uint8 (default float)\n"
        "      --op OP              reduction: sum prod min max (default sum)\n"
        "  -a, --average N          combine ranks' times: 0 rank 0, 1 avg, 2 min, 3 max (default 1)\n"
        "  -c, --check 0|1          verify every result (default 1)\n"
        "      --interference 0|1   measure how a world AllToAll (comm stream) and a GEMM\n"
        "                           (stream 0, the first GEMM shape) slow each other down when\n"
        "                           every rank runs both at once, and how much longer a small\n"
        "                           AllToAll takes right after GEMMs than back to back (the\n"
        "                           ranks arrive at different times: sync_latency_s), for the\n"
        "                           profile's interference: (default 1; needs more than one\n"
        "                           rank and alltoall and gemm among --ops)\n"
        "      --gemm-min ELEMS     GEMM sweep over T*M activation elements (default 512K = 2^19)\n"
        "      --gemm-max ELEMS     (default 6M = 12*2^19)\n"
        "      --gemm-step ELEMS    (default 512K)\n"
        "      --gemm-shapes M:H,.. expert shapes, one fitted line each (default: the\n"
        "                           reference models' on a GPU, tiny-moe's 64:256 on a CPU)\n"
        "      --ops LIST           operations to measure (default: alltoall,allgather,\n"
        "                           reducescatter,allreduce,saa,gemm,copy); alltoall_2dh, the\n"
        "                           hierarchical (2DH) AllToAll, is measured only when named:\n"
        "                           an AllToAll inside each node, then one among the ranks with\n"
        "                           the same local index across nodes (re-layouts between), on\n"
        "                           groups over >= 2 nodes with >= 2 ranks on each (the world\n"
        "                           tier; with a layout, EP or EP&ESP); +LIST: the default\n"
        "                           operations plus LIST (--ops +alltoall_2dh)\n"
        "      --tiers LIST         intra,inter,world: every selected op on these tiers\n"
        "      --all-tiers          every op on every tier that exists (default: the groups the\n"
        "                           planner reads: alltoall intra/inter/world, allgather and\n"
        "                           reducescatter intra (ESP, MP), allreduce intra and inter (DP))\n"
        "      --min-sample-time S  repeat fast operations so one timed run lasts S seconds\n"
        "                           (default 0.005; 0 = time single operations)\n"
        "      --group-rounds N     measure a tier's groups in N rounds, the others asleep\n"
        "                           (default 0 = auto: one round, all groups at once, unless the\n"
        "                           ranks on a machine outnumber its cores; 1 = always at once)\n"
        "      --rotate SIZE        runs cycle through buffers of SIZE per role so that no run\n"
        "                           finds its data in cache (default 256M; 0 = reuse one buffer)\n"
        "      --huge-pages 0|1     mpi backend: transparent huge pages for buffers (default 1)\n"
        "      --gpus-per-node G    ranks per node (default: from the ranks' placement; no short\n"
        "                           form: nccl-tests' -G means CUDA graphs)\n"
        "      --dp --mp --ep --esp N   a layout (default: the common one, mp = esp = G,\n"
        "                           ep = dp = nodes): measure its logical groups instead\n"
        "      --blas-threads N     OpenBLAS threads per rank (default: the machine's cores\n"
        "                           over the ranks sharing them)\n"
        "      --r2-threshold X     flag fits with r^2 below X (default 0.99)\n"
        "      --backend mpi|nccl   (default mpi)\n"
        "      --progress | --no-progress   progress bar on stderr (default: when a terminal)\n"
        "      --comm-timeout S     a collective that makes no progress for S seconds ends the\n"
        "                           run with a message naming the ranks (default 30; 0 = never)\n"
        "  -h, --help\n",
        f);
}

/* A comma-separated list of names into flags; with `defaults` (NULL: not allowed), a leading
 * '+' adds the list to the defaults instead of replacing them. */
static fsmoe_status options_list(const char *opt, const char *text, const fsmoe_cli_enum *table,
                                 const int *defaults, int *flags, int n_flags, fsmoe_error *err)
{
    char buf[256];
    int add = defaults && text[0] == '+';
    if (add)
        text++;
    if (strlen(text) >= sizeof buf)
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "%s: list too long", opt);
    strcpy(buf, text);
    for (int i = 0; i < n_flags; i++)
        flags[i] = add ? defaults[i] : 0;
    char *save = NULL;
    int any = 0;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int v;
        fsmoe_status st = fsmoe_cli_enum_parse(opt, tok, table, &v, err);
        if (st)
            return st;
        flags[v] = 1;
        any = 1;
    }
    if (!any)
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "%s: empty list", opt);
    return FSMOE_OK;
}

/* Output flags: a usable name each, and no file written twice (the later would replace the
 * earlier without a word). Whether the files can be written is main's check (file I/O). */
static fsmoe_status options_outputs(const bench_options *o, fsmoe_error *err)
{
    const char *flag[3] = {"-o", "--json", "--plot"};
    const char *path[3] = {o->output, o->json, o->plot};
    for (int i = 0; i < 3; i++) {
        if (!path[i])
            continue;
        size_t n = strlen(path[i]);
        if (n == 0)
            return fsmoe_fail(err, FSMOE_ERR_USAGE, "%s: expected a file name, got ''", flag[i]);
        if (path[i][n - 1] == '/')
            return fsmoe_fail(err, FSMOE_ERR_USAGE,
                              "%s %s: expected a file name, got a directory", flag[i], path[i]);
        if (n > BENCH_PATH_MAX)
            return fsmoe_fail(err, FSMOE_ERR_USAGE, "%s: a path of %zu bytes (at most %d)",
                              flag[i], n, BENCH_PATH_MAX);
        for (int j = 0; j < i; j++)
            if (path[j] && strcmp(path[i], path[j]) == 0)
                return fsmoe_fail(err, FSMOE_ERR_USAGE,
                                  "%s and %s name the same file %s (expected different files)",
                                  flag[j], flag[i], path[i]);
    }
    if (o->name) {
        size_t n = strlen(o->name);
        if (n == 0 || n > BENCH_NAME_MAX)
            return fsmoe_fail(err, FSMOE_ERR_USAGE,
                              "--name: expected 1 to %d characters, got %zu",
                              BENCH_NAME_MAX, n);
    }
    return FSMOE_OK;
}

static fsmoe_status options_shapes(const char *text, bench_options *o, fsmoe_error *err)
{
    char buf[512];
    if (strlen(text) >= sizeof buf)
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "--gemm-shapes: list too long");
    strcpy(buf, text);
    o->n_shapes = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        if (!colon)
            return fsmoe_fail(err, FSMOE_ERR_USAGE,
                              "--gemm-shapes: '%s' is not M:H (e.g. 4096:14336)", tok);
        *colon = '\0';
        if (o->n_shapes == BENCH_MAX_SHAPES)
            return fsmoe_fail(err, FSMOE_ERR_USAGE, "--gemm-shapes: at most %d shapes",
                              BENCH_MAX_SHAPES);
        gemm_shape *s = &o->shapes[o->n_shapes];
        fsmoe_status st;
        if ((st = fsmoe_cli_int("--gemm-shapes M", tok, 1, 1 << 20, &s->M, err)) ||
            (st = fsmoe_cli_int("--gemm-shapes H", colon + 1, 1, 1 << 20, &s->H, err)))
            return st;
        o->n_shapes++;
    }
    if (o->n_shapes == 0)
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "--gemm-shapes: empty list");
    return FSMOE_OK;
}

enum {
    OPT_JSON = 256, OPT_PLOT, OPT_NAME, OPT_OP, OPT_GEMM_MIN, OPT_GEMM_MAX, OPT_GEMM_STEP,
    OPT_GEMM_SHAPES, OPT_OPS, OPT_TIERS, OPT_BLAS_THREADS, OPT_R2, OPT_BACKEND,
    OPT_PROGRESS, OPT_NO_PROGRESS, OPT_ALL_TIERS, OPT_MIN_SAMPLE, OPT_GPN, OPT_GROUP_ROUNDS, OPT_HUGE_PAGES, OPT_ROTATE, OPT_DP, OPT_MP, OPT_EP, OPT_ESP,
    OPT_COMM_TIMEOUT, OPT_MAX_ITERS, OPT_PRECISION, OPT_OUTLIER, OPT_EXTRA_TIME,
    OPT_INTERFERENCE, OPT_SMALL_MIN,
};

static const fsmoe_cli_enum tier_names[] = {
    {"intra", FSMOE_TIER_INTRA}, {"inter", FSMOE_TIER_INTER}, {"world", FSMOE_TIER_WORLD},
    {NULL, 0},
};
static const fsmoe_cli_enum backend_names[] = {
    {"mpi", BACKEND_MPI}, {"nccl", BACKEND_NCCL}, {NULL, 0},
};

fsmoe_status options_parse(int argc, char **argv, bench_options *o, fsmoe_error *err)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        {"json", required_argument, NULL, OPT_JSON},
        {"plot", required_argument, NULL, OPT_PLOT},
        {"name", required_argument, NULL, OPT_NAME},
        {"minbytes", required_argument, NULL, 'b'},
        {"maxbytes", required_argument, NULL, 'e'},
        {"stepbytes", required_argument, NULL, 'i'},
        {"stepfactor", required_argument, NULL, 'f'},
        {"iters", required_argument, NULL, 'n'},
        {"warmup_iters", required_argument, NULL, 'w'},
        {"max-iters", required_argument, NULL, OPT_MAX_ITERS},
        {"precision", required_argument, NULL, OPT_PRECISION},
        {"outlier", required_argument, NULL, OPT_OUTLIER},
        {"extra-time", required_argument, NULL, OPT_EXTRA_TIME},
        {"datatype", required_argument, NULL, 'd'},
        {"op", required_argument, NULL, OPT_OP},
        {"average", required_argument, NULL, 'a'},
        {"check", required_argument, NULL, 'c'},
        {"interference", required_argument, NULL, OPT_INTERFERENCE},
        {"gemm-min", required_argument, NULL, OPT_GEMM_MIN},
        {"gemm-max", required_argument, NULL, OPT_GEMM_MAX},
        {"gemm-step", required_argument, NULL, OPT_GEMM_STEP},
        {"small-min", required_argument, NULL, OPT_SMALL_MIN},
        {"gemm-shapes", required_argument, NULL, OPT_GEMM_SHAPES},
        {"ops", required_argument, NULL, OPT_OPS},
        {"tiers", required_argument, NULL, OPT_TIERS},
        {"all-tiers", no_argument, NULL, OPT_ALL_TIERS},
        {"dp", required_argument, NULL, OPT_DP},
        {"mp", required_argument, NULL, OPT_MP},
        {"ep", required_argument, NULL, OPT_EP},
        {"esp", required_argument, NULL, OPT_ESP},
        {"min-sample-time", required_argument, NULL, OPT_MIN_SAMPLE},
        {"gpus-per-node", required_argument, NULL, OPT_GPN},
        {"group-rounds", required_argument, NULL, OPT_GROUP_ROUNDS},
        {"huge-pages", required_argument, NULL, OPT_HUGE_PAGES},
        {"rotate", required_argument, NULL, OPT_ROTATE},
        {"blas-threads", required_argument, NULL, OPT_BLAS_THREADS},
        {"r2-threshold", required_argument, NULL, OPT_R2},
        {"backend", required_argument, NULL, OPT_BACKEND},
        {"progress", no_argument, NULL, OPT_PROGRESS},
        {"no-progress", no_argument, NULL, OPT_NO_PROGRESS},
        {"comm-timeout", required_argument, NULL, OPT_COMM_TIMEOUT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const long long max_size = 1LL << 40;
    int tiers[3] = {1, 1, 1};
    int c, v;
    fsmoe_status st = FSMOE_OK;
    int step_bytes_given = 0, step_factor_given = 0, max_iters_given = 0;
    opterr = 0; /* we word the messages ourselves */
    optind = 0; /* 0, not 1: glibc then also forgets a half-read cluster of short options (-xyz)
                   left by an earlier parse, whose argv may be gone */
    while ((c = getopt_long(argc, argv, ":o:b:e:i:f:n:w:d:a:c:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': o->output = optarg; break;
        case OPT_JSON: o->json = optarg; break;
        case OPT_PLOT: o->plot = optarg; break;
        case OPT_NAME: o->name = optarg; break;
        case 'b': st = fsmoe_cli_size("-b", optarg, 1, max_size, &o->min_bytes, err); break;
        case 'e': st = fsmoe_cli_size("-e", optarg, 1, max_size, &o->max_bytes, err); break;
        case 'i':
            st = fsmoe_cli_size("-i", optarg, 1, max_size, &o->step_bytes, err);
            step_bytes_given = 1;
            break;
        case 'f':
            st = fsmoe_cli_double("-f", optarg, 1.0, 1e6, &o->step_factor, err);
            if (!st && o->step_factor <= 1.0)
                st = fsmoe_fail(err, FSMOE_ERR_USAGE,
                                "-f: %s must be greater than 1 (the sizes would not grow)",
                                optarg);
            step_factor_given = 1;
            break;
        case 'n': st = fsmoe_cli_int("-n", optarg, 1, 1000000, &o->iters, err); break;
        case 'w': st = fsmoe_cli_int("-w", optarg, 0, 1000000, &o->warmup, err); break;
        case OPT_MAX_ITERS:
            st = fsmoe_cli_int("--max-iters", optarg, 1, 1000000, &o->max_iters, err);
            max_iters_given = 1;
            break;
        case OPT_PRECISION:
            st = fsmoe_cli_double("--precision", optarg, 0.0, 1.0, &o->precision, err);
            break;
        case OPT_OUTLIER:
            st = fsmoe_cli_double("--outlier", optarg, 0.0, 10.0, &o->outlier, err);
            break;
        case OPT_EXTRA_TIME:
            st = fsmoe_cli_double("--extra-time", optarg, 0.0, 1000.0, &o->extra_time, err);
            break;
        case 'd':
            st = fsmoe_cli_enum_parse("-d", optarg, comm_dtype_names, &v, err);
            o->dtype = (comm_dtype)v;
            break;
        case OPT_OP:
            st = fsmoe_cli_enum_parse("--op", optarg, comm_redop_names, &v, err);
            o->redop = (comm_redop)v;
            break;
        case 'a':
            st = fsmoe_cli_int("-a", optarg, 0, 3, &v, err);
            o->average = (measure_average)v;
            break;
        case 'c': st = fsmoe_cli_int("-c", optarg, 0, 1, &o->check, err); break;
        case OPT_INTERFERENCE:
            st = fsmoe_cli_int("--interference", optarg, 0, 1, &o->interference, err);
            break;
        case OPT_GEMM_MIN:
            st = fsmoe_cli_size("--gemm-min", optarg, 1, max_size, &o->gemm_min, err);
            break;
        case OPT_GEMM_MAX:
            st = fsmoe_cli_size("--gemm-max", optarg, 1, max_size, &o->gemm_max, err);
            break;
        case OPT_GEMM_STEP:
            st = fsmoe_cli_size("--gemm-step", optarg, 1, max_size, &o->gemm_step, err);
            break;
        case OPT_GEMM_SHAPES: st = options_shapes(optarg, o, err); break;
        case OPT_OPS: {
            int defaults[FSMOE_OP_COUNT];
            options_default_ops(defaults);
            st = options_list("--ops", optarg, fsmoe_op_names, defaults, o->ops, FSMOE_OP_COUNT,
                              err);
            break;
        }
        case OPT_TIERS:
            st = options_list("--tiers", optarg, tier_names, NULL, tiers, 3, err);
            for (int t = 0; t < 3; t++)
                o->tiers[t] = tiers[t];
            o->every_tier = 1;
            break;
        case OPT_ALL_TIERS: o->every_tier = 1; break;
        case OPT_DP: st = fsmoe_cli_int("--dp", optarg, 1, 1 << 20, &o->dp, err); o->layout_given = 1; break;
        case OPT_MP: st = fsmoe_cli_int("--mp", optarg, 1, 1 << 20, &o->mp, err); o->layout_given = 1; break;
        case OPT_EP: st = fsmoe_cli_int("--ep", optarg, 1, 1 << 20, &o->ep, err); o->layout_given = 1; break;
        case OPT_ESP: st = fsmoe_cli_int("--esp", optarg, 1, 1 << 20, &o->esp, err); o->layout_given = 1; break;
        case OPT_MIN_SAMPLE:
            st = fsmoe_cli_double("--min-sample-time", optarg, 0.0, 10.0, &o->min_sample_s, err);
            break;
        case OPT_GROUP_ROUNDS:
            st = fsmoe_cli_int("--group-rounds", optarg, 0, 1 << 20, &o->group_rounds, err);
            break;
        case OPT_SMALL_MIN:
            if (strcmp(optarg, "0") == 0)
                o->small_min_bytes = 0;
            else
                st = fsmoe_cli_size("--small-min", optarg, 1, max_size, &o->small_min_bytes,
                                    err);
            break;
        case OPT_ROTATE:
            if (strcmp(optarg, "0") == 0)
                o->rotate_bytes = 0;
            else
                st = fsmoe_cli_size("--rotate", optarg, 1, max_size, &o->rotate_bytes, err);
            break;
        case OPT_HUGE_PAGES:
            st = fsmoe_cli_int("--huge-pages", optarg, 0, 1, &o->huge_pages, err);
            break;
        case OPT_GPN: st = fsmoe_cli_int("--gpus-per-node", optarg, 1, 1 << 20, &o->gpus_per_node, err); break;
        case OPT_BLAS_THREADS:
            st = fsmoe_cli_int("--blas-threads", optarg, 1, 4096, &o->blas_threads, err);
            break;
        case OPT_R2: st = fsmoe_cli_double("--r2-threshold", optarg, 0.0, 1.0, &o->r2_threshold, err); break;
        case OPT_BACKEND:
            st = fsmoe_cli_enum_parse("--backend", optarg, backend_names, &v, err);
            o->backend = (bench_backend_kind)v;
            break;
        case OPT_PROGRESS: o->progress = 1; break;
        case OPT_NO_PROGRESS: o->progress = 0; break;
        case OPT_COMM_TIMEOUT:
            st = fsmoe_cli_double("--comm-timeout", optarg, 0.0, 1e6, &o->comm_timeout_s, err);
            break;
        case 'h': o->help = 1; return FSMOE_OK;
        case ':':
            return fsmoe_fail(err, FSMOE_ERR_USAGE, "%s needs a value", argv[optind - 1]);
        default:
            if (optopt)
                return fsmoe_fail(err, FSMOE_ERR_USAGE, "unknown option -%c", optopt);
            return fsmoe_fail(err, FSMOE_ERR_USAGE, "unknown option %s", argv[optind - 1]);
        }
        if (st)
            return st;
    }
    if (optind < argc)
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "unexpected argument '%s'", argv[optind]);
    /* Combinations. */
    if ((st = options_outputs(o, err)))
        return st;
    if (o->max_iters < o->iters) {
        if (max_iters_given)
            return fsmoe_fail(err, FSMOE_ERR_USAGE,
                              "--max-iters %d is smaller than -n %d (expected at least -n)",
                              o->max_iters, o->iters);
        o->max_iters = o->iters; /* -n alone above the default ceiling: exactly -n runs */
    }
    if (step_bytes_given && step_factor_given)
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "-i and -f exclude each other (add or multiply)");
    if (o->min_bytes > o->max_bytes)
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "-b %lld is larger than -e %lld", o->min_bytes,
                          o->max_bytes);
    if (o->gemm_min > o->gemm_max)
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "--gemm-min %lld is larger than --gemm-max %lld",
                          o->gemm_min, o->gemm_max);
    if (options_comm_sizes(o, NULL, 0) > BENCH_MAX_SIZES)
        return fsmoe_fail(err, FSMOE_ERR_USAGE,
                          "-b %lld -e %lld --small-min %lld gives more than %d sizes",
                          o->min_bytes, o->max_bytes, o->small_min_bytes, BENCH_MAX_SIZES);
    /* MPI counts are ints: the largest message in elements of the datatype must be one. */
    size_t elem = comm_dtype_size(o->dtype);
    if (elem && (unsigned long long)o->max_bytes / elem > (unsigned long long)INT_MAX)
        return fsmoe_fail(err, FSMOE_ERR_USAGE,
                          "-e %lld: %lld %s elements exceed MPI's largest count %d "
                          "(expected at most %lld bytes)",
                          o->max_bytes, o->max_bytes / (long long)elem, comm_dtype_name(o->dtype),
                          INT_MAX, (long long)INT_MAX * (long long)elem);
    /* GEMM operands are indexed with BLAS ints: A (T x max(M, H)) and B (M x H). */
    for (int i = 0; i < o->n_shapes; i++) {
        long long M = o->shapes[i].M, H = o->shapes[i].H, K = M > H ? M : H;
        if (M * H > INT_MAX || (o->gemm_max / M) * K > INT_MAX)
            return fsmoe_fail(err, FSMOE_ERR_USAGE,
                              "--gemm-shapes %lld:%lld with --gemm-max %lld: a matrix of more "
                              "than %d elements (expected M*H and --gemm-max/M*max(M,H) at "
                              "most that)",
                              M, H, o->gemm_max, INT_MAX);
    }
    if (o->output && (options_comm_sizes(o, NULL, 0) < 2 || (o->ops[FSMOE_OP_GEMM] &&
        (o->gemm_max - o->gemm_min) / o->gemm_step < 1)))
        return fsmoe_fail(err, FSMOE_ERR_USAGE,
                          "-o needs at least two sizes per operation to fit a line "
                          "(check -b/-e/-i/-f and --gemm-min/--gemm-max/--gemm-step)");
    return FSMOE_OK;
}

double options_rank_bytes(const bench_options *o, int group_ranks, const gemm_shape *shapes,
                          int n_shapes)
{
    /* suite.c: two pools of max(-e, --rotate) and two host copies of -e for the collectives
     * and copy; SAA adds three pools of max(-e x MP group, --rotate) and host copies of -e and
     * -e x MP group while those exist; the 2DH AllToAll's stage pool max(3 x -e, --rotate)
     * while its group exists; a GEMM shape holds A and C (T_max x max(M, H)), B and B2
     * (M x H) in fp32 on the backend and on the host. */
    double e = (double)o->max_bytes, rot = (double)o->rotate_bytes;
    double g = group_ranks > 1 ? (double)group_ranks : 1.0;
    double pool = e > rot ? e : rot, saa_pool = e * g > rot ? e * g : rot;
    double bytes = 2 * pool + 2 * e;
    if (o->ops[FSMOE_OP_SAA])
        bytes += 3 * saa_pool + e + e * g;
    if (o->ops[FSMOE_OP_ALLTOALL_2DH])
        bytes += 3 * e > rot ? 3 * e : rot;
    double gemm = 0.0;
    if (o->ops[FSMOE_OP_GEMM]) {
        for (int i = 0; i < n_shapes; i++) {
            double M = shapes[i].M, H = shapes[i].H, K = M > H ? M : H;
            double T = (double)(o->gemm_max / shapes[i].M);
            double one = 2.0 * 4.0 * (2.0 * (T > 1 ? T : 1) * K + 2.0 * M * H);
            if (one > gemm)
                gemm = one; /* one shape at a time */
        }
    }
    return bytes + gemm;
}

int options_comm_sizes(const bench_options *o, long long *out, int max)
{
    int n = 0;
    for (long long s = o->small_min_bytes; s > 0 && s < o->min_bytes && n <= BENCH_MAX_SIZES;
         s *= 2) {
        if (out && n < max)
            out[n] = s;
        n++;
    }
    long long s = o->min_bytes;
    while (s <= o->max_bytes) {
        if (out && n < max)
            out[n] = s;
        n++;
        if (n > BENCH_MAX_SIZES)
            break;
        long long next = o->step_factor > 1.0 ? (long long)((double)s * o->step_factor)
                                              : s + o->step_bytes;
        if (next <= s)
            next = s + 1;
        s = next;
    }
    return n;
}
