/* Implements: how communication and computation slow each other down on one rank, measured the
 * way a training run overlaps them (design.md §10.1: collectives on a communication stream, the
 * GEMMs on the caller's stream 0), for the cluster profile's `interference:` mapping that the
 * simulator applies as a fluid rate (planner/sim.h: while a GEMM runs, a collective in its
 * bandwidth phase progresses 1/comm_slowdown as fast; while a collective moves data, a GEMM
 * progresses 1/compute_slowdown as fast); and the sync latency the cost model adds to the α
 * of every collective (`sync_latency_s`): a blocking collective of a training step is reached
 * from computation, and the ranks arrive at different times (their GEMMs and the machine's
 * scheduling differ), each waiting for the last. A collective timed back to back, as the
 * sweeps time them, never sees that wait (on 4 ranks sharing 2 cores small collectives in
 * training took about 3 ms more than their α-β time).
 *
 * Every rank at once (the condition training creates), over the world group:
 *  - calibration: one world AllToAll of -e bytes and one GEMM (T x M)(M x H) of the first GEMM
 *    shape at the sweep's largest T; the slowest rank's times (agreed by all) shrink a size that
 *    takes longer than 40 ms and set the repetitions K (AllToAlls) and J (GEMMs) that bring
 *    each phase to about 30 ms;
 *  - one concurrent run whose outputs (the AllToAll's exact data, a sample of the GEMM's) are
 *    checked over poisoned buffers: a broken overlap gives wrong values, not a number;
 *  - R = -n (at least 5) repetitions of three phases, each started from a barrier of all ranks
 *    (measure_sample): T_a = K AllToAlls alone, T_g = J GEMMs alone, and together (the
 *    AllToAlls submitted on the comm stream, then the GEMMs at once), t_a and t_g the end of
 *    each from the common start; odd repetitions run the phases in the reverse order, so that a
 *    drift of the machine's speed does not favour either; then two sync phases, each started
 *    from the barrier as well: L = 8 rounds of about 5 ms of GEMMs (G of the calibrated
 *    shape, or one of fewer rows) on stream 0, synced, then one small world AllToAll (one element per
 *    peer) on the comm stream, synced; and the same L AllToAlls back to back. Each rank times
 *    only the AllToAlls (submission to the sync's return), per call;
 *  - per repetition the factors of the fluid model (interference_factors) from the group's
 *    times, the last rank's (interference.c says why not each rank's factors combined by -a),
 *    and the profile's factors their medians over the repetitions; per repetition the sync
 *    latency, the mean over the ranks of the per-call time after the GEMMs less that back to
 *    back (at least 0; interference.c says why the mean), and the profile's its median.
 * Relies on suite.c for the buffers, barriers and checks the other sections use. */
#ifndef BENCH_INTERFERENCE_H
#define BENCH_INTERFERENCE_H

#include "suite.h"

/* Whether the run measures it: --interference 1, more than one rank, alltoall and gemm among
 * --ops. */
int interference_wanted(const bench_suite *s);
/* Its steps on the progress bar (0 when not wanted). */
long interference_steps(const bench_suite *s);

/* The section (collective over s->mcfg.world): dsend/drecv are the suite's two pools (at least
 * -e bytes), hsend/hrecv host buffers of -e bytes. Fills s->res->interference and prints. */
fsmoe_status interference_run(bench_suite *s, void *dsend, void *drecv, void *hsend, void *hrecv,
                              fsmoe_error *err);

/* The sync latency of one repetition from the small AllToAll's time per call after the GEMMs
 * and back to back (each the mean over the ranks): their difference, in [0, 1] s (the
 * profile's range; faster after the GEMMs is noise, 0). Pure (unit-tested). */
double interference_sync(double after_s, double alone_s);

/* The fluid model inverted: from the K AllToAlls' and the J GEMMs' times alone (T_a, T_g) and
 * together from a common start (t_a, t_g), the slowdowns that explain them, each in [1, 100].
 * Pure (unit-tested). */
void interference_factors(double T_a, double T_g, double t_a, double t_g, double *comm_slowdown,
                          double *compute_slowdown);

#endif
