/* Implements: fsmoe-plan's command line, parsed and validated without reading or writing any
 * file (design.md §1, §9; style.md "Command lines"): every subcommand (plan, --regenerate,
 * explain, diff, simulate, sweep) and every flag value, range and combination. main.c runs what
 * it returns; the fuzz harness tests/sim/fuzz_plan_cli.c calls it alone.
 *
 * A usage error returns FSMOE_ERR_USAGE with a message naming the flag; main prints it with
 * the subcommand's usage text and exits 2. --help and --version are results, not errors. */
#ifndef FSMOE_PLANNER_CLI_PARSE_H
#define FSMOE_PLANNER_CLI_PARSE_H

#include "status.h"

typedef enum {
    PLAN_CMD_PLAN = 0,   /* --model M --cluster C */
    PLAN_CMD_REGENERATE, /* --regenerate PLAN */
    PLAN_CMD_EXPLAIN,
    PLAN_CMD_DIFF,
    PLAN_CMD_SIMULATE,
    PLAN_CMD_SWEEP,
    PLAN_CMD_FIDELITY,   /* the papers' figures against ours */
    PLAN_CMD_HELP,       /* print cli->usage to stdout, exit 0 */
    PLAN_CMD_VERSION
} plan_cmd;

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
    OV_PP,    /* pipeline stages (GPipe, planner/gpipe.h) */
    OV_MICRO, /* a pipeline's micro-batches per DP rank's batch */
    OV_PSCHED, /* the pipeline schedule: gpipe or 1f1b */
    OV_COUNT
};
extern const char *const plan_cli_ov_flags[OV_COUNT]; /* "batch", ..., "capacity-factor" */

typedef struct {
    long batch, seq;
    int world, gpn, dp, mp, ep, esp;
    double f; /* 0 = none (dropless) */
    int pp, micro, one_f_one_b;
} plan_cli_ov_values;

typedef struct {
    plan_cmd cmd;
    const char *usage; /* the usage text of the subcommand (for HELP and for errors) */
    /* plan, --regenerate */
    const char *model_path, *cluster_path, *out_path, *regenerate;
    int method; /* plan_method */
    int quiet;
    long long mem_limit; /* --mem-limit bytes per GPU (0: not given; -1: `none`) */
    int search;          /* --search: choose the layout (search.h) */
    int top;             /* --top: rows of the search table (default 5) */
    long global_batch;   /* --global-batch: samples per iteration the search holds (0: batch ×
                          * the starting layout's dp) */
    const char *ov[OV_COUNT]; /* text as given; NULL when not given */
    plan_cli_ov_values v;
    /* explain (inputs[0]), diff (inputs[0..1]), simulate (inputs[0]) */
    const char *inputs[2];
    double rtol;
    int strict;
    /* simulate */
    int schedule; /* sim_schedule */
    int all;      /* --schedule all */
    const char *svg, *trace; /* svg: also the search's plot */
    int refine;
    double win_from_s, win_to_s;
    /* sweep (cluster_path too) */
    const char *csv;
    int grid, regret, testbed; /* testbed 0 = from the profile's name */
    /* fidelity */
    const char *root;          /* NULL = "." */
} plan_cli;

extern const char plan_cli_usage[];     /* fsmoe-plan (all subcommands) */
extern const char plan_cli_sim_usage[]; /* fsmoe-plan simulate */
extern const char plan_cli_sweep_usage[];
extern const char plan_cli_fidelity_usage[];

/* Parses argv (argv[0] the program; getopt_long may permute argv). On FSMOE_ERR_USAGE err
 * names the flag or argument and cli->usage is the text to print with it. */
fsmoe_status plan_cli_parse(int argc, char **argv, plan_cli *cli, fsmoe_error *err);

/* Range-checks the override texts in ov (as given or as recorded in a plan) into v; on failure
 * *bad is the index of the override at fault. The world/gpus-per-node combination too. */
fsmoe_status plan_cli_overrides(const char *const ov[OV_COUNT], plan_cli_ov_values *v, int *bad,
                                fsmoe_error *err);

const char *plan_cli_method_name(int method); /* "auto", "fsmoe", ... */

/* The canonical text of override i as recorded in a plan ("08" and "8" give one plan). */
void plan_cli_ov_canonical(int i, const plan_cli_ov_values *v, char *buf, unsigned long len);

#endif
