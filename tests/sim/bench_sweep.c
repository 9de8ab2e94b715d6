/* Implements: the sweep benchmark — the full FSMoE Table 4 sweep (1458 configured layers ×
 * every schedule of sim_schedules.h) on Testbed A and Testbed B, timed, with the Table 5-shaped
 * speedup summary. Target: under 10 s per testbed on the 2-core development machine.
 * Usage: bench_sweep [CLUSTER.yaml ...] (default: clusters/testbed-a.yaml, testbed-b.yaml under
 * FSMOE_SOURCE_ROOT). */
#include <stdio.h>
#include <stdlib.h>

#include "cluster.h"
#include "sweep.h"

int main(int argc, char **argv)
{
    const char *root = getenv("FSMOE_SOURCE_ROOT");
    char defaults[2][1024];
    const char *paths[16];
    int n = 0;
    for (int i = 1; i < argc && n < 16; i++)
        paths[n++] = argv[i];
    if (n == 0) {
        snprintf(defaults[0], sizeof defaults[0], "%s/clusters/testbed-a.yaml", root ? root : ".");
        snprintf(defaults[1], sizeof defaults[1], "%s/clusters/testbed-b.yaml", root ? root : ".");
        paths[n++] = defaults[0];
        paths[n++] = defaults[1];
    }
    int rc = 0;
    for (int p = 0; p < n; p++) {
        fsmoe_cluster c = {0};
        fsmoe_error err = {0};
        if (fsmoe_cluster_load(paths[p], &c, &err) != FSMOE_OK) {
            fsmoe_error_print("bench_sweep", &err);
            return 1;
        }
        sweep_result r;
        if (sweep_run(SWEEP_FSMOE_TABLE4, sweep_testbed_of(&c), &c, paths[p], &r, &err) !=
            FSMOE_OK) {
            fsmoe_error_print("bench_sweep", &err);
            fsmoe_cluster_free(&c);
            return 1;
        }
        printf("# %s: %d configurations x %d schedules in %.3f s (%.1f us per simulation)\n",
               c.name, r.n, SIM_SCHED_COUNT, r.wall_s, 1e6 * r.wall_s / (r.n * SIM_SCHED_COUNT));
        printf("%-16s %8s %8s %8s   %8s %8s %8s\n", "schedule", "vs-tutel", "min", "max",
               "vs-ds", "min", "max");
        for (int k = 0; k < SIM_SCHED_COUNT; k++) {
            sweep_stat a, b;
            sweep_speedup(&r, k, SIM_SCHED_TUTEL, &a);
            sweep_speedup(&r, k, SIM_SCHED_DEEPSPEED, &b);
            printf("%-16s %8.3f %8.3f %8.3f   %8.3f %8.3f %8.3f\n",
                   sim_schedule_name((sim_schedule)k), a.mean, a.min, a.max, b.mean, b.min,
                   b.max);
        }
        if (r.wall_s > 10.0) {
            printf("# SLOW: %.3f s > 10 s target\n", r.wall_s);
            rc = 1;
        }
        sweep_result_free(&r);
        fsmoe_cluster_free(&c);
    }
    return rc;
}
