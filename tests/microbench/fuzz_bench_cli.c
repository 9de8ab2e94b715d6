/* Implements: a libFuzzer harness for fsmoe-bench's option parser (microbench/options.c): every
 * flag, value and combination. The input is one command line, its arguments separated by NUL or
 * newline bytes; it is parsed and validated and nothing else happens (no MPI, no measuring, no
 * file is opened). Checked: no crash, leak or sanitizer report; a refusal is always a usage error
 * with a message that names a flag or argument; an accepted command line satisfies every
 * combination rule (sizes in order and countable, counts within MPI's int, outputs distinct).
 * fuzz-sources: microbench/options.c comm/comm_dtype.c libfsmoe/cli.c libfsmoe/names.c libfsmoe/status.c libfsmoe/cluster.c libfsmoe/yaml_read.c libfsmoe/input_file.c libfsmoe/parallel.c
 * fuzz-libs: -lyaml -lm
 * fuzz-seeds: tests/microbench/fuzz_bench_cli_seeds/[a-z]*
 * fuzz-dict: tests/microbench/fuzz_bench_cli.dict
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../fuzz/fuzz_argv.h"
#include "../../microbench/options.h" /* runtime/ has an options.h too: no -I order decides */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The rules options_parse promises for a command line it accepts. */
static void check_accepted(const bench_options *o)
{
    if (o->help)
        return; /* --help stops parsing: nothing after it is checked */
    if (o->min_bytes < 1 || o->min_bytes > o->max_bytes || o->gemm_min > o->gemm_max ||
        o->gemm_step < 1 || o->iters < 1 || o->warmup < 0)
        abort();
    if (options_comm_sizes(o, NULL, 0) > BENCH_MAX_SIZES)
        abort();
    size_t elem = comm_dtype_size(o->dtype);
    if (elem == 0 || (unsigned long long)o->max_bytes / elem > (unsigned long long)INT_MAX)
        abort();
    if (o->n_shapes < 0 || o->n_shapes > BENCH_MAX_SHAPES)
        abort();
    if ((o->output && o->json && strcmp(o->output, o->json) == 0) ||
        (o->output && o->plot && strcmp(o->output, o->plot) == 0) ||
        (o->json && o->plot && strcmp(o->json, o->plot) == 0))
        abort();
    if (o->name && (o->name[0] == '\0' || strlen(o->name) > BENCH_NAME_MAX))
        abort();
    if (!(o->comm_timeout_s >= 0.0 && o->comm_timeout_s <= 1e6))
        abort();
    /* the buffer estimate main checks against memory is finite for every accepted line */
    double bytes = options_rank_bytes(o, 8, o->shapes, o->n_shapes);
    if (!(bytes > 0.0) || bytes != bytes)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_argv a;
    if (!fuzz_argv_split(&a, "fsmoe-bench", data, size))
        return 0;
    int argc = a.argc;
    char **argv = a.argv;
    bench_options o;
    fsmoe_error err = {0};
    options_defaults(&o);
    fsmoe_status st = options_parse(argc, argv, &o, &err);
    if (st != FSMOE_OK) {
        if (st != FSMOE_ERR_USAGE || err.msg[0] == '\0')
            abort(); /* every refusal is a usage error with a message */
    } else {
        check_accepted(&o);
    }
    fuzz_argv_free(&a);
    return 0;
}
