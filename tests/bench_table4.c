/* Benchmark: planning all 1458 configured layers of FSMoE Table 4 on Testbed B
 * (clusters/testbed-b.yaml): forward + backward pipeline degree, Parm's S1/S2 and MoNTA's
 * O1/O2/O3 with chunk search, per configuration — what the paper times at 193 ms per
 * configuration (FSMoE §6). Compares the three pipeline-degree solvers on one core.
 * A meson benchmark(), never a timed test. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "table4.h"

#define REPS 9

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    const fsmoe_cluster *c;
    const workload_lines *w;
    fsmoe_parallel par;
    workload_shape shapes[TABLE4_COUNT];
} bench_input;

/* One pass over the grid; returns seconds, or -1 on failure. `sink` keeps the work observable. */
static double one_pass(const bench_input *in, pipeline_method m, double *sink)
{
    fsmoe_error err = {0};
    table4_plan plan;
    double t0 = now_s();
    for (int i = 0; i < TABLE4_COUNT; i++) {
        if (table4_plan_config(&in->shapes[i], &in->par, in->w, m, &plan, &err)
            != FSMOE_OK) {
            fprintf(stderr, "bench_table4: config %d: %s\n", i, err.msg);
            return -1.0;
        }
        *sink += plan.fwd.time_s + plan.bwd.time_s + plan.parm.t_d1_s + plan.monta.t_o3;
    }
    return now_s() - t0;
}

int main(void)
{
    const char *root = getenv("FSMOE_SOURCE_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/clusters/testbed-b.yaml", root ? root : ".");
    fsmoe_cluster c;
    memset(&c, 0, sizeof c);
    fsmoe_error err = {0};
    if (fsmoe_cluster_load(path, &c, &err) != FSMOE_OK) {
        fsmoe_error_print("bench_table4", &err);
        return 1;
    }
    static bench_input in;
    workload_lines w;
    in.c = &c;
    in.w = &w;
    in.par = table4_layout(&c);
    if (workload_lines_init(&c, path, &in.par, NULL, &w, &err) != FSMOE_OK) {
        fsmoe_error_print("bench_table4", &err);
        return 1;
    }
    for (int i = 0; i < TABLE4_COUNT; i++)
        if (table4_shape('b', i, &in.par, &in.shapes[i], &err) != FSMOE_OK) {
            fsmoe_error_print("bench_table4", &err);
            return 1;
        }

    static const struct {
        pipeline_method m;
        const char *name;
    } methods[] = {
        {PIPELINE_SLSQP, "slsqp+integer (ours)"},
        {PIPELINE_EXHAUSTIVE, "exhaustive r=1..r_max"},
        {PIPELINE_PAPER, "algorithm 1 (paper)"},
    };
    double sink = 0.0;
    printf("# Plan all %d FSMoE Table 4 configurations on %s (%d nodes x %d GPUs): forward +\n"
           "# backward pipeline degree, S1/S2 (Parm), O1/O2/O3 + chunk search (MoNTA).\n"
           "# %d passes per method after one warm-up pass; one core; times per configuration.\n",
           TABLE4_COUNT, c.name, c.nodes, c.gpus_per_node, REPS);
    printf("# %-24s %12s %12s %12s %14s %12s\n", "method", "median_us", "min_us", "max_us",
           "vs_193ms_paper", "vs_30us");

    for (size_t k = 0; k < sizeof methods / sizeof methods[0]; k++) {
        double t[REPS];
        if (one_pass(&in, methods[k].m, &sink) < 0.0) /* warm-up: NLopt object, caches */
            return 1;
        for (int r = 0; r < REPS; r++) {
            t[r] = one_pass(&in, methods[k].m, &sink);
            if (t[r] < 0.0)
                return 1;
            t[r] *= 1e6 / TABLE4_COUNT;
        }
        qsort(t, REPS, sizeof t[0], cmp_double);
        double med = t[REPS / 2];
        printf("  %-24s %12.3f %12.3f %12.3f %13.0fx %11.2fx\n", methods[k].name, med, t[0],
               t[REPS - 1], 193e3 / med, 30.0 / med);
    }
    printf("# target: < 30 us per configuration (paper: 193 ms; SciPy SLSQP of Algorithm 1: "
           "~3 ms)\n# checksum %.6e\n", sink);
    pipeline_thread_release();
    fsmoe_cluster_free(&c);
    return 0;
}
