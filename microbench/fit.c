/* Implements: the constrained least-squares line and the robust line that judges points, with
 * GSL (fit.h). */
#include "fit.h"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_fit.h>
#include <gsl/gsl_multifit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Frees what a GSL fit allocated (NULL where it was not). */
static void fit_gsl_free(gsl_matrix *X, gsl_matrix *cov, gsl_vector *Y, gsl_vector *c)
{
    if (X)
        gsl_matrix_free(X);
    if (cov)
        gsl_matrix_free(cov);
    if (Y)
        gsl_vector_free(Y);
    if (c)
        gsl_vector_free(c);
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
        fit_gsl_free(X, cov, Y, c);
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

/* ln C(n, k) */
static double ln_choose(int n, int k)
{
    return lgamma(n + 1.0) - lgamma(k + 1.0) - lgamma(n - k + 1.0);
}

/* C(n, k) / C(total, n_pos) in logs; 0 where k is out of range. */
static double runs_term(int n, int k, double ln_all)
{
    if (k < 0 || k > n)
        return 0.0;
    return exp(ln_choose(n, k) - ln_all / 2.0);
}

double fit_runs_p(int runs, int n_pos, int n_neg)
{
    if (n_pos <= 0 || n_neg <= 0)
        return 1.0;
    double ln_all = ln_choose(n_pos + n_neg, n_pos), p = 0.0;
    /* R = 2k: 2 C(n1−1, k−1) C(n2−1, k−1); R = 2k+1: C(n1−1, k) C(n2−1, k−1) +
     * C(n1−1, k−1) C(n2−1, k); each over C(n1+n2, n1) (split as two square roots so that
     * neither product overflows) */
    for (int r = 2; r <= runs; r++) {
        int k = r / 2;
        if (r % 2 == 0)
            p += 2.0 * runs_term(n_pos - 1, k - 1, ln_all) * runs_term(n_neg - 1, k - 1, ln_all);
        else
            p += runs_term(n_pos - 1, k, ln_all) * runs_term(n_neg - 1, k - 1, ln_all) +
                 runs_term(n_pos - 1, k - 1, ln_all) * runs_term(n_neg - 1, k, ln_all);
    }
    return p > 1.0 ? 1.0 : p;
}

typedef struct {
    double x, r;
} fit_xr;

static int fit_xr_cmp(const void *a, const void *b)
{
    double p = ((const fit_xr *)a)->x, q = ((const fit_xr *)b)->x;
    return (p > q) - (p < q);
}

fsmoe_status fit_residual_pattern(const double *x, const double *y, int n,
                                  const fit_result *line, fit_pattern *out, fsmoe_error *err)
{
    gsl_set_error_handler_off();
    memset(out, 0, sizeof *out);
    out->runs_p = out->quad_p = 1.0;
    if (n < 4)
        return FSMOE_OK; /* a quadratic through 3 points is exact: nothing to judge */
    fit_xr *v = malloc((size_t)n * sizeof *v);
    gsl_matrix *X = gsl_matrix_alloc((size_t)n, 3), *cov = gsl_matrix_alloc(3, 3);
    gsl_vector *Y = gsl_vector_alloc((size_t)n), *c = gsl_vector_alloc(3);
    gsl_multifit_linear_workspace *w = gsl_multifit_linear_alloc((size_t)n, 3);
    fsmoe_status st = FSMOE_OK;
    if (!v || !X || !cov || !Y || !c || !w) {
        st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for the residuals of %d points", n);
        goto done;
    }
    /* runs of signs in size order; exact zeros carry no sign */
    double ss_line = 0.0, xs = 0.0, ys = 0.0;
    for (int i = 0; i < n; i++) {
        v[i].x = x[i];
        v[i].r = y[i] - (line->alpha + line->beta * x[i]);
        ss_line += v[i].r * v[i].r;
        xs = fabs(x[i]) > xs ? fabs(x[i]) : xs;
        ys = fabs(y[i]) > ys ? fabs(y[i]) : ys;
    }
    qsort(v, (size_t)n, sizeof *v, fit_xr_cmp);
    int last = 0;
    for (int i = 0; i < n; i++) {
        int s = (v[i].r > 0.0) - (v[i].r < 0.0);
        if (!s)
            continue;
        out->n_pos += s > 0, out->n_neg += s < 0;
        out->runs += s != last;
        last = s;
    }
    out->runs_p = fit_runs_p(out->runs, out->n_pos, out->n_neg);
    /* the quadratic, on columns scaled to O(1) */
    if (xs > 0.0 && ys > 0.0) {
        for (int i = 0; i < n; i++) {
            double u = x[i] / xs;
            gsl_matrix_set(X, (size_t)i, 0, 1.0);
            gsl_matrix_set(X, (size_t)i, 1, u);
            gsl_matrix_set(X, (size_t)i, 2, u * u);
            gsl_vector_set(Y, (size_t)i, y[i] / ys);
        }
        double chisq;
        int rc = gsl_multifit_linear(X, Y, c, cov, &chisq, w);
        double c2 = gsl_vector_get(c, 2), var = gsl_matrix_get(cov, 2, 2);
        if (rc == GSL_SUCCESS && n > 3 && var > 0.0 && isfinite(var)) {
            double ss_quad = chisq * ys * ys;
            double t = c2 / sqrt(var);
            out->quad_p = 2.0 * gsl_cdf_tdist_Q(fabs(t), (double)(n - 3));
            out->quad_share = ss_line > 0.0 ? 1.0 - ss_quad / ss_line : 0.0;
            if (out->quad_share < 0.0)
                out->quad_share = 0.0;
            out->quad_c = c2 * ys / (xs * xs);
        }
    }
    if (out->quad_p < FIT_PATTERN_LEVEL && out->quad_share >= 0.5)
        out->kind = out->quad_c > 0.0 ? FIT_PATTERN_CONVEX : FIT_PATTERN_CONCAVE;
    else if (out->runs_p < FIT_PATTERN_LEVEL)
        out->kind = FIT_PATTERN_RUNS;
    else
        out->kind = FIT_PATTERN_SCATTER;
done:
    free(v);
    fit_gsl_free(X, cov, Y, c);
    if (w)
        gsl_multifit_linear_free(w);
    return st;
}

const char *fit_pattern_name(fit_pattern_kind k)
{
    switch (k) {
    case FIT_PATTERN_SCATTER: return "scatter";
    case FIT_PATTERN_CONVEX: return "convex";
    case FIT_PATTERN_CONCAVE: return "concave";
    case FIT_PATTERN_RUNS: return "runs";
    case FIT_PATTERN_NONE: break;
    }
    return "-";
}

void fit_pattern_describe(const fit_pattern *p, char *buf, size_t len)
{
    const char *what;
    switch (p->kind) {
    case FIT_PATTERN_CONVEX:
        what = "systematic: the cost bends upward (a quadratic term removes";
        break;
    case FIT_PATTERN_CONCAVE:
        what = "systematic: the cost bends downward (a quadratic term removes";
        break;
    case FIT_PATTERN_RUNS:
        what = "systematic: steps or bumps, residuals in runs of one sign (a quadratic term "
               "removes";
        break;
    case FIT_PATTERN_SCATTER:
        what = "scatter about the line, no pattern (a quadratic term removes";
        break;
    default:
        snprintf(buf, len, "too few points to judge the residuals");
        return;
    }
    snprintf(buf, len, "%s %.0f %% of the residuals, p %.2g; %d runs of signs in %d points, "
                       "p %.2g): %s",
             what, 100.0 * p->quad_share, p->quad_p, p->runs, p->n_pos + p->n_neg, p->runs_p,
             p->kind == FIT_PATTERN_SCATTER
                 ? "noise, which more runs or a quieter machine reduce"
                 : "no line fits these sizes, more runs will not raise r2");
}
