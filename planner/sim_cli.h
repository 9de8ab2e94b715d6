/* Implements: the `fsmoe-plan simulate` and `fsmoe-plan sweep` subcommands.
 *   fsmoe-plan simulate PLAN [--schedule NAME|all] [--svg FILE] [--trace FILE] [--refine]
 *   fsmoe-plan sweep --cluster C --grid fsmoe-table4|parm-table3 [--csv FILE] [--regret]
 *                    [--testbed a|b]
 * The options come parsed and checked (cli_parse.h); the return value is the exit code (0 ok,
 * 2 usage or input error or an unwritable output, 1 other failures). main.c dispatches here. */
#ifndef FSMOE_SIM_CLI_H
#define FSMOE_SIM_CLI_H

#include "cli_parse.h"

/* cli: what plan_cli_parse returned for PLAN_CMD_SIMULATE / PLAN_CMD_SWEEP. */
int sim_cli_simulate(const plan_cli *cli);
int sim_cli_sweep(const plan_cli *cli);

#endif
