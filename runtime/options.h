/* Implements: fsmoe-run's command line (runtime/main.c): parsing every flag into rt_options,
 * applying the overrides to the model file's configuration, and the limits a run is checked
 * against before anything is allocated (tokens per step, the memory the run needs). No MPI, no
 * file I/O, no exit: main() and the fuzz harness (tests/runtime/reliability/fuzz_run_cli.c) call
 * the same functions, and main() turns the status into the exit code (2 for every usage error).
 * Relies on: libfsmoe/cli.h (number and enum parsing), runtime/config.h. */
#ifndef RT_OPTIONS_H
#define RT_OPTIONS_H

#include "config.h"
#include "layout.h"
#include "memory.h"
#include "status.h"

/* Largest sequence length and tokens per step (B·L, global) fsmoe-run accepts: attention holds
 * B·heads·L² scores per layer, the output layer B·L·V logits. */
#define RT_MAX_SEQ 65536L
#define RT_MAX_TOKENS_PER_STEP (1L << 24)

typedef struct {
    const char *model_path, *plan_path, *data_path, *save_dir, *resume_dir, *backend;
    const char *trace_path; /* --trace FILE (NULL: none) */
    const char *schedule;     /* --schedule NAME (NULL: the plan's) */
    const char *cluster_path; /* --cluster FILE (NULL: the profile the plan names) */
    int report;               /* --report (also set by --calibrate) */
    const char *calibrate_path; /* --calibrate FILE (NULL: none) */
    int profile;              /* --profile: kernel time per category */
    int threads, ep, mp, esp; /* 0: not given */
    int gpus_per_node;        /* --gpus-per-node: ranks per node the layout assumes (0: as MPI
                               * places them) */
    double comm_timeout; /* seconds; -1: not given (comm/mpi_coll.h's default) */
    /* overrides of the model file and the defaults; negative = not given (warmup: -2, cf: -2;
     * cf 0 = --capacity-factor none) */
    long steps, seed, save_every, eval_every, batch, seq, warmup, chunks, eval_batches, stop_at;
    double lr, min_lr, wd, clip, aux, noise, cf;
    int gate, order, expert, no_overlap;
    long long mem_limit; /* --mem-limit bytes; 0: physical memory */
    int help;            /* --help given: print the usage, exit 0 */
} rt_options;

/* Parses argv (getopt_long; restartable: it resets getopt's state). Every error, including an
 * unknown option, a missing value, a stray argument, a missing --model and a combination of
 * flags that cannot go together, is FSMOE_ERR_USAGE naming the flag. With --help it returns
 * FSMOE_OK with o->help set and checks nothing else. Keeps pointers into argv. */
fsmoe_status options_parse(rt_options *o, int argc, char **argv, fsmoe_error *err);

/* Applies the overrides to c (loaded from the model file), records which fields came from
 * flags in *origin, and checks what needs both (--save-every needs --save, --stop-at within
 * --steps, --seq and tokens per step within the limits above). */
fsmoe_status options_apply(const rt_options *o, rt_config *c, rt_config_origin *origin,
                           fsmoe_error *err);

/* Bytes one rank needs for the run before anything is allocated: the memory model's prediction
 * of the backend's tensors by category (libfsmoe/memory.h, from the configuration and the
 * rank's layout; fsmoe-run prints it beside what it allocated) and the token file. */
typedef struct {
    fsmoe_memory model; /* the backend's tensors by category */
    double data;        /* the token file, held in memory */
    double total;
} rt_memory_need;
rt_memory_need options_memory_need(const rt_config *c, const rt_layout *lay, long data_bytes);

/* The limit a rank's need is compared with: --mem-limit when given, else the physical memory
 * (sysconf) shared by the ranks_on_node ranks of this node (0 or 1: the whole), lowered to the
 * address-space limit (ulimit -v) when that is smaller. `what` (a static buffer) says which. */
double options_memory_limit(const rt_options *o, int ranks_on_node, const char **what);

/* FSMOE_ERR_USAGE when need.total > limit, naming the flags (or model file fields) that set
 * the size, the bytes needed (with their parts) and the limit. */
fsmoe_status options_check_memory(const rt_options *o, const rt_config *c, rt_memory_need need,
                                  double limit, const char *limit_what, fsmoe_error *err);

#endif
