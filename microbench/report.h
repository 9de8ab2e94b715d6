/* Implements: what fsmoe-bench prints and the JSON it writes. The table follows nccl-tests
 * (style.md): '#' header rows with names and units, fixed-width rows
 * `size count type redop root time algbw busbw #wrong` (out-of-place only), one section per
 * (operation, tier), a footer with the wrong-value count and OK/FAILED, then the fitted α, β,
 * r² per (operation, tier) with low-r² fits flagged. Only rank 0 prints (enabled = 1). */
#ifndef BENCH_REPORT_H
#define BENCH_REPORT_H

#include <stdio.h>

#include "measure.h"
#include "options.h"
#include "results.h"
#include "topology.h"

typedef struct {
    FILE *out;
    int enabled;
} report;

void report_banner(report *r, const bench_options *o, const comm_topology *t, const char *device);
void report_section(report *r, const char *op, const char *tier, int ranks, int groups,
                    const char *detail);
/* "# took X s" after a section (where the time of the default suite goes). */
void report_section_time(report *r, double seconds);
/* One '#' line (printf format): e.g. why a selected operation is not measured. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void report_note(report *r, const char *fmt, ...);
void report_row(report *r, const bench_row *row, const char *type, const char *redop);
void report_gemm_row(report *r, const bench_row *row);
/* The interference section's rows (one per repetition: the group's times and factors) and the
 * factors the profile gets. */
void report_interference(report *r, const bench_interference *x);
/* After a section's rows: how many runs its sizes took, which were measured again and why,
 * and the largest relative residual from the least-squares line through the final rows
 * (rf->y), so that a user sees where the line and the points part. */
void report_refine(report *r, const measure_refine *rf, const measure_rule *rule);
/* Footer and fit table; returns 1 when everything is OK (no wrong values). */
int report_footer(report *r, const bench_results *res, double r2_threshold);

fsmoe_status report_json(const char *path, const bench_options *o, const comm_topology *t,
                         const char *device, const bench_results *res, fsmoe_error *err);

#endif
