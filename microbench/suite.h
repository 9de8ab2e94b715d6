/* Implements: the measuring loops of fsmoe-bench — every selected operation on every tier
 * that exists, over the configured sizes: allocate once for the largest size, fill the
 * predictable input, time (measure.h), check the output, sum #wrong over all ranks, record the
 * row, print it on rank 0. All ranks run the same loops in the same order. The timed runs of
 * a section are taken in passes over its sizes (measure.h explains why); the section's rows
 * are printed when its last pass is done. After the GEMM section, the interference of a world
 * AllToAll and a GEMM (interference.h). */
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
    /* Ranks of this machine that computed at once in the local sections (gemm, copy): the
     * profile's host.ranks_at_once (cluster.h); 0 until one ran. */
    int local_at_once;
    /* Refining time the sections so far left unspent (measure.h rule 3), for the next. */
    double extra_carry_s;
} bench_suite;

/* How many ranks of `world` run on this rank's machine (the same kernel boot id: the emulated
 * nodes of one host are one machine; a machine per rank where the id cannot be read);
 * collective over world. */
fsmoe_status suite_machine_ranks(MPI_Comm world, int *ranks, fsmoe_error *err);
/* Which ranks share a machine's cores (collective over s->mcfg.world). */
fsmoe_status suite_machine_init(bench_suite *s, fsmoe_error *err);

/* Steps of the progress bar: every row the run will produce once per pass, and the
 * interference section's repetitions. */
long suite_steps(const bench_suite *s);

fsmoe_status suite_run(bench_suite *s, fsmoe_error *err);

/* Output checks, shared by the sections (interference.c too). Fills `bytes` of backend memory
 * p with 0xff (through the host buffer h where the backend's memory is not the host's), so that
 * an operation that writes nothing cannot find an earlier run's correct output in place. */
fsmoe_status suite_poison_buf(comm_backend *b, void *p, void *h, size_t bytes, fsmoe_error *err);
/* Backend memory p readable on the host: p itself, or h after a download. (Skipping the copy
 * on the host backend halves the untimed time the checks take.) */
fsmoe_status suite_host_view(comm_backend *b, const void *p, void *h, size_t bytes,
                             const void **view, fsmoe_error *err);

#endif
