/* Implements: the least-squares α-β fit of design.md §3 (t = α + β·n, FSMoE §6.2 Fig. 5) with
 * GSL, its r² and residuals.
 *
 * A fitted line must describe a cost, so α ≥ 0 and β ≥ 0 (the profile schema rejects negative
 * values). When the free fit gives α < 0 (a nearly proportional cost whose small sizes run a
 * little faster than the line) the constrained least-squares optimum lies on α = 0, i.e. the
 * fit through the origin (gsl_fit_mul); likewise β < 0 gives β = 0, α = mean(t). The result
 * says which bound was active. */
#ifndef BENCH_FIT_H
#define BENCH_FIT_H

#include "status.h"

typedef enum { FIT_FREE = 0, FIT_ALPHA_ZERO, FIT_BETA_ZERO } fit_bound;

typedef struct {
    double alpha, beta;  /* seconds, seconds per unit of x */
    double r2;           /* 1 − SS_res/SS_tot (1 when every t is equal and fitted exactly) */
    double rms_residual; /* sqrt(SS_res/n), seconds */
    double max_rel_residual; /* max |t − fit| / t */
    int n;
    fit_bound bound;
    /* the free least-squares slope's standard error (from the scatter about the free line)
     * over that slope; INFINITY where it cannot be told (n < 3, a slope ≤ 0) */
    double slope_rel_se;
} fit_result;

/* x: sizes (bytes or MACs), y: seconds, n ≥ 2 points with at least two distinct x.
 * residuals (may be NULL) receives y_i − (α + β·x_i). */
fsmoe_status fit_line(const double *x, const double *y, int n, fit_result *out,
                      double *residuals, fsmoe_error *err);

/* How well a fit's points fix its slope: the half-width of the slope's two-sided `conf`
 * interval (Student's t with n − 2 degrees of freedom times slope_rel_se), relative to the
 * slope. INFINITY where it cannot be told. */
double fit_slope_rel_halfwidth(const fit_result *f, double conf);

/* The relative residual of every point from a line that a few bad points cannot pull:
 * rel[i] = (y_i − (a + b·x_i)) / y_i, signed, with a, b from GSL's robust regression
 * (gsl_multifit_robust, bisquare weights). It only judges points (fsmoe-bench re-measures those
 * far off); the profile's α, β and r² stay fit_line's over every point. Where the robust
 * solver fails or has too few points (< 4) the line is fit_line's. */
fsmoe_status fit_robust_rel_residuals(const double *x, const double *y, int n, double *rel,
                                      fsmoe_error *err);

#endif
