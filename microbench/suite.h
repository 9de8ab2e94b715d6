/* Implements: the measuring loops of fsmoe-bench — every selected operation on every tier
 * that exists, over the configured sizes: allocate once for the largest size, fill the
 * predictable input, time (measure.h), check the output, sum #wrong over all ranks, record the
 * row, print it on rank 0. All ranks run the same loops in the same order. The timed runs of
 * a section are taken in passes over its sizes (measure.h explains why); the section's rows
 * are printed when its last pass is done. */
#ifndef BENCH_SUITE_H
#define BENCH_SUITE_H

#include "comm_backend.h"
#include "measure.h"
#include "options.h"
#include "progress.h"
#include "report.h"
#include "results.h"
#include "topology.h"

typedef struct {
    const bench_options *opt;
    comm_backend *b;
    const comm_topology *topo;
    measure_cfg mcfg;
    bench_results *res;
    report *rep;
    progress *prog;
    gemm_shape shapes[BENCH_MAX_SHAPES];
    int n_shapes;
    const fsmoe_parallel *layout; /* NULL: the tiers' groups (the common layout of design.md
                                     §2); else measure this layout's logical groups */
    /* Filled by suite_machine_init: the most ranks any machine (same kernel boot id, so the
     * emulated nodes of one host count as one machine) runs per core, rounded up; > 1 means
     * groups are measured in rounds (measure.h). */
    int machine_ranks, machine_cores, oversubscription;
} bench_suite;

/* Which ranks share a machine's cores (collective over s->mcfg.world). */
fsmoe_status suite_machine_init(bench_suite *s, fsmoe_error *err);

/* Rows the run will produce (each measured once per pass), for the progress bar. */
long suite_rows(const bench_suite *s);

fsmoe_status suite_run(bench_suite *s, fsmoe_error *err);

#endif
