/* Implements: the `fsmoe-plan simulate` and `fsmoe-plan sweep` subcommands (issue 3).
 *   fsmoe-plan simulate PLAN [--schedule NAME|all] [--svg FILE] [--trace FILE] [--refine]
 *   fsmoe-plan sweep --cluster C --grid fsmoe-table4|parm-table3 [--csv FILE] [--regret]
 *                    [--testbed a|b]
 * argv[0] is the subcommand's name ("simulate" / "sweep"); the return value is the exit code
 * (0 ok, 2 usage or input error, 1 other failures). main.c (owned by "planio") dispatches to
 * these. */
#ifndef FSMOE_SIM_CLI_H
#define FSMOE_SIM_CLI_H

int sim_cli_simulate(int argc, char **argv);
int sim_cli_sweep(int argc, char **argv);

#endif
