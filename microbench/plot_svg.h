/* Implements: `--plot FILE.svg`: one panel per operation (like FSMoE Fig. 5) with the measured
 * points of each tier as markers and the fitted line α + β·n drawn over the same range, axes in
 * MB (GMAC for gemm) and milliseconds, legend with α, β and r². Plain SVG 1.1, no scripts,
 * written atomically. */
#ifndef BENCH_PLOT_SVG_H
#define BENCH_PLOT_SVG_H

#include "results.h"
#include "status.h"

fsmoe_status plot_svg_write(const char *path, const char *title, const bench_results *res,
                            fsmoe_error *err);

#endif
