/* Implements: the layout-search benchmark — fsmoe-plan --search for mixtral-8x22b on 256 GPUs of
 * FSMoE Testbed A (32 nodes × 8), end to end in one process (load the model and the profile,
 * enumerate, size and plan every layout, rank), repeated; prints the median and best time of one
 * search against the 1 s target, and how many layouts it planned. A meson benchmark(), not a
 * timed test. The global batch is the common layout's (batch 2 × dp 32 = 64 samples).
 * Usage: bench_search [repetitions] [world]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"
#include "cluster.h"
#include "model.h"
#include "plan_model.h"
#include "search.h"


int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 10, world = argc > 2 ? atoi(argv[2]) : 256;
    if (reps < 1 || reps > 10000 || world < 8 || world % 8 != 0) {
        fprintf(stderr, "bench_search: usage: bench_search [repetitions 1..10000] [world, a "
                        "multiple of 8]\n");
        return 2;
    }
    const char *root = getenv("FSMOE_SOURCE_ROOT");
    char mpath[1024], cpath[1024];
    snprintf(mpath, sizeof mpath, "%s/models/mixtral-8x22b.yaml", root ? root : ".");
    snprintf(cpath, sizeof cpath, "%s/clusters/testbed-a.yaml", root ? root : ".");
    double *t = malloc(sizeof(double) * (size_t)reps);
    if (!t)
        return 1;
    search_result r;
    memset(&r, 0, sizeof r);
    for (int i = 0; i < reps; i++) {
        fsmoe_error err = {0};
        fsmoe_model m;
        fsmoe_cluster c;
        memset(&c, 0, sizeof c);
        double t0 = bench_now_s();
        plan_options opt = {.method = PLAN_METHOD_AUTO};
        search_free(&r);
        if (fsmoe_model_load(mpath, &m, &err) || fsmoe_cluster_load(cpath, &c, &err) ||
            search_layouts(&m, &c, cpath, world, c.gpus_per_node, m.B * (world / c.gpus_per_node),
                           c.device_memory_bytes, &opt, &r, &err)) {
            fprintf(stderr, "bench_search: %s\n", err.msg);
            free(t);
            return 1;
        }
        t[i] = bench_now_s() - t0;
        fsmoe_cluster_free(&c);
    }
    qsort(t, (size_t)reps, sizeof *t, bench_cmp_double);
    int planned = 0, f1b = 0;
    for (int i = 0; i < r.n; i++) {
        planned += r.c[i].state != SEARCH_UNPLANNED && !r.c[i].one_f_one_b;
        f1b += r.c[i].one_f_one_b;
    }
    printf("layout search, mixtral-8x22b on %d GPUs of testbed-a: %d layouts (%d planned, %d of "
           "them pipelines also as 1F1B; %d against a rule), median %.1f ms, best %.1f ms per "
           "search over %d runs (target < 1000 ms): %s\n",
           world, r.n + r.n_invalid - f1b, planned, f1b, r.n_invalid, 1e3 * t[reps / 2],
           1e3 * t[0], reps, t[reps / 2] < 1.0 ? "met" : "MISSED");
    search_free(&r);
    free(t);
    return 0;
}
