/* Implements: fsmoe-run --report — the measured run against the schedule graph it executed
 * (design.md §10.1: "measured vs predicted per operation is a join on task ids").
 *
 * Join. A task's id is its label (phase, layer, chunk, kind: libfsmoe/task.h). Per step, the
 * measured time of an id is the sum over the trace's tasks with that id; the predicted time is
 * the sum over the graph's tasks with that id (the simulator may cut one block in two, e.g. the
 * prefix's output projection; the sums compare like with like). Tasks the graph times at zero
 * (joins, collectives of one-rank groups, element-wise work on a profile without a copy line)
 * are listed apart.
 *
 * Conformance ("the run follows the plan" as a check): for the kinds the executor issues as
 * tasks of the graph — AllToAll, AllGather, ReduceScatter and SAA chunks, expert chunks, MP and
 * ESP AllReduces, Gradient-AllReduces — every id must occur as often in every measured step as
 * in the graph, and the Gradient-AllReduce bytes executed per id are compared with the graph's.
 * Every rank checks its own trace (fsmoe-run sums the results over the ranks). Join: every id
 * the graph times, of any kind, must have a task in every measured step.
 *
 * Tables: per task kind and per MoE layer, the mean measured and predicted time per step, their
 * ratio, and the median and 90th percentile of the per-task ratios; then the step, and the part
 * of it no traced task covers (work neither timed nor modelled).
 *
 * Collectives on all ranks (more than one rank): a collective ends on its ranks at about the
 * same time, when the last to arrive has moved its data, so of the time rank i spends in one
 * collective task, the least any rank spent there is the collective alone (the last to arrive
 * waits for no one) and the rest is waiting for the last rank. Durations only, so the ranks' clocks need not
 * agree. Per collective kind, per step and as the mean over the ranks: measured = alone +
 * waiting, against the predicted time and the part of it that is the profile's sync latency
 * (the arrival skew the cost model adds to every collective's α: workload.h). The least is
 * taken over all ranks, not the task's group: where groups of one kind run at different
 * speeds, alone is the fastest group's, and where ranks move different amounts (an
 * AllToAllv's rows follow the routing), the lightest rank's. */
#ifndef RT_REPORT_H
#define RT_REPORT_H

#include <stdio.h>

#include "schedule.h"
#include "status.h"
#include "trace.h"

typedef struct {
    int steps;              /* measured steps compared */
    int ids_planned;        /* ids of the conformance kinds in the graph */
    int ids_mismatched;     /* ... whose count differs in some step, or executed but not planned */
    double gar_planned_bytes, gar_executed_bytes; /* per step (executed: the first step's) */
    double gar_max_diff_bytes; /* the largest |executed − planned| bytes of one id */
    int ids_predicted;      /* ids the graph times above zero, of every kind */
    int ids_unmeasured;     /* ... that some measured step has no task of (a graph task the
                             * executor did not run, or ran under another label) */
    /* The ranks' arrival skew against the segment (several ranks; skew_tasks 0: not fitted):
     * per collective id the median over the steps of the ranks' waiting (rt_report_split) and
     * of their mean segment (the time since the rank's previous collective ended), and the
     * least-squares line skew = a + rho·segment through those points (rt_report_skew_fit). */
    double skew_a_s, skew_rho, skew_r2;
    int skew_tasks;
    /* What --calibrate writes: skew = cal_a_s + cal_rho·max(0, segment − cal_from_s), every
     * part ≥ 0 (cluster.h sync_latency_s, sync_growth, sync_growth_from_s). Where rho ≤ 0 the
     * points' mean (rho 0, from 0); else the fitted line from the shortest segment g of its
     * points on, or from where it crosses zero if that is later (a 0), held at that value
     * below it: never extrapolated below its points, nor negative. */
    double cal_a_s, cal_rho, cal_from_s;
    /* The run's median and p90 step and the graph's predicted step (0: no step times given). */
    double step_median_s, step_p90_s, step_predicted_s;
} rt_report_result;

/* Why a calibration on this run is suspect, or NULL: its median step more than 1.5x its
 * prediction (the machine ran slower than the profile says: a skew fitted there describes a
 * slow stretch, as one of 94 ms per collective on a 2-core VM did), or its p90 step more than
 * 1.5x its median (the machine's speed moved during the run). */
const char *rt_report_calibration_suspect(const rt_report_result *res);

/* The most ranks the collectives' table compares (more: it says so and is left out). */
#define RT_REPORT_MAX_RANKS 4096

/* One collective task of one step on W ranks, rank w's time in it t[w] (s): *alone = the least
 * (the last rank to arrive waits for no one), *waiting = the ranks' mean beyond it; the mean
 * over the ranks is their sum. */
void rt_report_split(const double *t, int W, double *alone, double *waiting);

/* The least-squares line y = a + rho·x through n points, r2 against their mean (0 where every x
 * is the same: rho 0, a the mean). */
void rt_report_skew_fit(const double *x, const double *y, int n, double *a, double *rho,
                        double *r2);

/* The skew line y = a + rho·x fitted through points whose shortest x is xmin and whose mean y
 * is ymean, as --calibrate writes it (rt_report_result cal_*): *c + *r·max(0, x − *from), each
 * ≥ 0. */
void rt_report_skew_hold(double a, double rho, double xmin, double ymean, double *c, double *r,
                         double *from);

/* The ranks of a multi-rank run, for the collectives' table: allgather puts every rank's n
 * longs into all (world·n, rank after rank), called by every rank at once. */
typedef struct {
    int world;
    fsmoe_status (*allgather)(void *ctx, const long *mine, long *all, int n, fsmoe_error *err);
    void *ctx;
} rt_report_ranks;

/* Writes the report of the trace's kept steps after the first `skip` to f (executed gradient
 * bytes counted in the plan's element size); step_s: the measured step times (n_steps of them,
 * for the step line; may be NULL); ranks: NULL or world 1 on one rank, else every rank calls
 * this at once and the collectives' table follows. */
fsmoe_status rt_report_write(FILE *f, const rt_trace *tr, const rt_schedule *rs, long skip,
                             const double *step_s, int n_steps, const rt_report_ranks *ranks,
                             rt_report_result *res, fsmoe_error *err);

#endif
