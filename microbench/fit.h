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

#include <stddef.h>

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

/* What a line's residuals say about its points, for a fit below the r² threshold: do they
 * scatter about the line (noise: more runs or a quieter machine help) or follow a pattern that
 * no line fits (the cost is not linear over the measured sizes: more runs will not help)?
 * Two tests at level FIT_PATTERN_LEVEL:
 *  - curvature: a quadratic term t = a + b·n + c·n² fitted by least squares; its t statistic
 *    (Student, n − 3 degrees of freedom) and the share of the line's residual sum of squares
 *    it removes. Significant and removing at least half: CONVEX (c > 0, the cost bends upward)
 *    or CONCAVE;
 *  - runs (Wald-Wolfowitz): the residuals' signs in size order; too few runs of equal signs
 *    for a random order (exact distribution, one-sided): RUNS (steps or bumps, systematic but
 *    not one bend);
 *  - otherwise SCATTER. */
#define FIT_PATTERN_LEVEL 0.01

typedef enum {
    FIT_PATTERN_NONE = 0, /* not judged (too few points) */
    FIT_PATTERN_SCATTER,
    FIT_PATTERN_CONVEX,
    FIT_PATTERN_CONCAVE,
    FIT_PATTERN_RUNS,
} fit_pattern_kind;

typedef struct {
    fit_pattern_kind kind;
    int runs, n_pos, n_neg; /* runs of equal residual signs in size order; the signs' counts */
    double runs_p;          /* P(as few runs or fewer) for a random order of those signs */
    double quad_share;      /* share of the line's residual sum of squares a quadratic removes */
    double quad_p;          /* two-sided p of the quadratic coefficient (1 where not fitted) */
    double quad_c;          /* the quadratic coefficient, seconds per unit² */
} fit_pattern;

/* The pattern of `line`'s residuals (fit_line's result over the same points, in any order). */
fsmoe_status fit_residual_pattern(const double *x, const double *y, int n,
                                  const fit_result *line, fit_pattern *out, fsmoe_error *err);

/* The exact one-sided p of the runs test: P(R ≤ runs) for n_pos positive and n_neg negative
 * signs in random order; 1 when either count is 0. */
double fit_runs_p(int runs, int n_pos, int n_neg);

/* The pattern's name as reports print it: "scatter", "convex", "concave", "runs", "-". */
const char *fit_pattern_name(fit_pattern_kind k);

/* One sentence on the pattern (what the tests found and what it means for the fit), for
 * reports and the profile's comment. */
void fit_pattern_describe(const fit_pattern *p, char *buf, size_t len);

#endif
