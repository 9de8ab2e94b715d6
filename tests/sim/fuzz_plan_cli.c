/* Implements: a libFuzzer harness for fsmoe-plan's option parser (planner/cli_parse.c): every
 * subcommand (plan, --regenerate, explain, diff, simulate, sweep, fidelity) and every flag value. The
 * input is one command line, its arguments separated by NUL or newline bytes; it is parsed and
 * validated and nothing is run (no file is read or written). Checked: no crash, leak or
 * sanitizer report; a usage error always carries a message; a success names a subcommand whose
 * required fields are set.
 * fuzz-sources: libfsmoe/a2a_2dh.c planner/cli_parse.c planner/sim_schedules.c planner/moe_seq.c planner/sim.c libfsmoe/task.c planner/workload.c planner/pipeline_degree.c planner/parm_schedule.c planner/grad_partition.c planner/locate.c planner/sweep.c planner/plan_model.c planner/gpipe.c planner/table4.c planner/monta_a2a.c planner/baselines.c planner/diff.c planner/explain.c libfsmoe/cli.c libfsmoe/names.c libfsmoe/status.c libfsmoe/yaml_read.c libfsmoe/input_file.c libfsmoe/yaml_write.c libfsmoe/model.c libfsmoe/cluster.c libfsmoe/cost.c libfsmoe/parallel.c libfsmoe/plan_io.c libfsmoe/atomic_file.c libfsmoe/json.c libfsmoe/sha256.c libfsmoe/memory.c
 * fuzz-libs: -lyaml -lnlopt -lm
 * fuzz-seeds: tests/sim/fuzz_plan_cli_seeds/[a-z]*
 * fuzz-dict: tests/sim/fuzz_plan_cli.dict
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../fuzz/fuzz_argv.h"
#include "cli_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_argv a;
    if (!fuzz_argv_split(&a, "fsmoe-plan", data, size))
        return 0;
    int argc = a.argc;
    char **argv = a.argv;
    plan_cli cli;
    fsmoe_error err = {0};
    fsmoe_status st = plan_cli_parse(argc, argv, &cli, &err);
    if (st != FSMOE_OK) {
        if (st != FSMOE_ERR_USAGE || err.msg[0] == '\0' || !cli.usage)
            abort(); /* every refusal is a usage error with a message */
    } else {
        switch (cli.cmd) {
        case PLAN_CMD_PLAN:
            if (!cli.model_path || !cli.cluster_path)
                abort();
            break;
        case PLAN_CMD_REGENERATE:
            if (!cli.regenerate)
                abort();
            break;
        case PLAN_CMD_EXPLAIN:
        case PLAN_CMD_SIMULATE:
            if (!cli.inputs[0] || (cli.cmd == PLAN_CMD_SIMULATE && cli.all && (cli.svg || cli.trace)))
                abort();
            break;
        case PLAN_CMD_DIFF:
            if (!cli.inputs[0] || !cli.inputs[1] || !(cli.rtol >= 0.0 && cli.rtol <= 1.0))
                abort();
            break;
        case PLAN_CMD_SWEEP:
            if (!cli.cluster_path || cli.grid < 0)
                abort();
            break;
        case PLAN_CMD_FIDELITY:
            if (cli.root && cli.root[0] == '\0')
                abort();
            break;
        case PLAN_CMD_HELP:
        case PLAN_CMD_VERSION: break;
        default: abort();
        }
    }
    fuzz_argv_free(&a);
    return 0;
}
