/* Implements: the constrained least-squares line and the robust line that judges points, with
 * GSL (fit.h). */
#include "fit.h"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_fit.h>
#include <gsl/gsl_multifit.h>
#include <math.h>

fsmoe_status fit_line(const double *x, const double *y, int n, fit_result *out,
                      double *residuals, fsmoe_error *err)
{
    gsl_set_error_handler_off(); /* GSL aborts on errors otherwise (toolchain.md) */
    if (n < 2)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "a line needs at least 2 points, got %d", n);
    int distinct = 0;
    for (int i = 1; i < n; i++)
        distinct |= x[i] != x[0];
    if (!distinct)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "all %d points have the same size %g: use at least two sizes", n, x[0]);
    double c0, c1, cov00, cov01, cov11, sumsq;
    int rc = gsl_fit_linear(x, 1, y, 1, (size_t)n, &c0, &c1, &cov00, &cov01, &cov11, &sumsq);
    if (rc != GSL_SUCCESS)
        return fsmoe_fail(err, FSMOE_ERR_SOLVER, "gsl_fit_linear: %s", gsl_strerror(rc));
    /* the free fit's slope, before any bound: how well the points fix it */
    double slope_rel_se = n >= 3 && c1 > 0.0 && cov11 >= 0.0 ? sqrt(cov11) / c1 : INFINITY;
    fit_bound bound = FIT_FREE;
    if (c0 < 0.0) {
        double c, cov;
        rc = gsl_fit_mul(x, 1, y, 1, (size_t)n, &c, &cov, &sumsq);
        if (rc != GSL_SUCCESS)
            return fsmoe_fail(err, FSMOE_ERR_SOLVER, "gsl_fit_mul: %s", gsl_strerror(rc));
        c0 = 0.0;
        c1 = c;
        bound = FIT_ALPHA_ZERO;
    }
    if (c1 < 0.0) {
        double mean = 0.0;
        for (int i = 0; i < n; i++)
            mean += y[i];
        c0 = mean / n;
        c1 = 0.0;
        bound = FIT_BETA_ZERO;
    }
    double mean = 0.0, ss_tot = 0.0, ss_res = 0.0, max_rel = 0.0;
    for (int i = 0; i < n; i++)
        mean += y[i];
    mean /= n;
    for (int i = 0; i < n; i++) {
        double r = y[i] - (c0 + c1 * x[i]);
        if (residuals)
            residuals[i] = r;
        ss_res += r * r;
        ss_tot += (y[i] - mean) * (y[i] - mean);
        if (y[i] != 0.0 && fabs(r / y[i]) > max_rel)
            max_rel = fabs(r / y[i]);
    }
    out->alpha = c0;
    out->beta = c1;
    out->r2 = ss_tot > 0.0 ? 1.0 - ss_res / ss_tot : (ss_res == 0.0 ? 1.0 : 0.0);
    out->rms_residual = sqrt(ss_res / n);
    out->max_rel_residual = max_rel;
    out->n = n;
    out->bound = bound;
    out->slope_rel_se = slope_rel_se;
    return FSMOE_OK;
}

fsmoe_status fit_robust_rel_residuals(const double *x, const double *y, int n, double *rel,
                                      fsmoe_error *err)
{
    gsl_set_error_handler_off();
    fit_result ls;
    fsmoe_status st = fit_line(x, y, n, &ls, NULL, err);
    if (st)
        return st;
    double a = ls.alpha, b = ls.beta;
    if (n >= 4) {
        /* Scaled to O(1) columns: bytes (1e7) next to a column of ones would leave the solver
         * a badly conditioned problem. */
        double xs = 0.0, ys = 0.0;
        for (int i = 0; i < n; i++) {
            xs = fabs(x[i]) > xs ? fabs(x[i]) : xs;
            ys = fabs(y[i]) > ys ? fabs(y[i]) : ys;
        }
        gsl_matrix *X = gsl_matrix_alloc((size_t)n, 2);
        gsl_vector *Y = gsl_vector_alloc((size_t)n), *c = gsl_vector_alloc(2);
        gsl_matrix *cov = gsl_matrix_alloc(2, 2);
        gsl_multifit_robust_workspace *w =
            gsl_multifit_robust_alloc(gsl_multifit_robust_bisquare, (size_t)n, 2);
        if (!X || !Y || !c || !cov || !w) {
            st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for a robust fit of %d points",
                            n);
        } else if (xs > 0.0 && ys > 0.0) {
            for (int i = 0; i < n; i++) {
                gsl_matrix_set(X, (size_t)i, 0, 1.0);
                gsl_matrix_set(X, (size_t)i, 1, x[i] / xs);
                gsl_vector_set(Y, (size_t)i, y[i] / ys);
            }
            /* GSL_EMAXITER still leaves the last iterate, a usable line; other failures fall
             * back to least squares. */
            int rc = gsl_multifit_robust(X, Y, c, cov, w);
            if (rc == GSL_SUCCESS || rc == GSL_EMAXITER) {
                a = gsl_vector_get(c, 0) * ys;
                b = gsl_vector_get(c, 1) * ys / xs;
            }
        }
        if (w)
            gsl_multifit_robust_free(w);
        if (X)
            gsl_matrix_free(X);
        if (cov)
            gsl_matrix_free(cov);
        if (Y)
            gsl_vector_free(Y);
        if (c)
            gsl_vector_free(c);
        if (st)
            return st;
    }
    for (int i = 0; i < n; i++) {
        double r = y[i] - (a + b * x[i]);
        rel[i] = y[i] != 0.0 ? r / fabs(y[i]) : (r == 0.0 ? 0.0 : INFINITY);
    }
    return FSMOE_OK;
}

double fit_slope_rel_halfwidth(const fit_result *f, double conf)
{
    if (!isfinite(f->slope_rel_se) || f->n < 3 || !(conf > 0.0 && conf < 1.0))
        return INFINITY;
    return gsl_cdf_tdist_Pinv(0.5 + 0.5 * conf, (double)(f->n - 2)) * f->slope_rel_se;
}
