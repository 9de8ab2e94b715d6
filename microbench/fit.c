/* Implements: the constrained least-squares line with GSL (fit.h). */
#include "fit.h"

#include <gsl/gsl_errno.h>
#include <gsl/gsl_fit.h>
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
    return FSMOE_OK;
}
