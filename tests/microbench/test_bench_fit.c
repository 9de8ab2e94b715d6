/* Implements: tests of the α-β least-squares fit (microbench/fit.c) against synthetic data with
 * known α, β and noise, including the bounds α ≥ 0, β ≥ 0 and the degenerate inputs. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fit.h"

/* Deterministic Gaussian noise (Box-Muller over a 64-bit LCG). */
static uint64_t rng_state = 42;
static double rng_uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return ((rng_state >> 11) + 0.5) / 9007199254740992.0;
}
static double rng_normal(void)
{
    return sqrt(-2.0 * log(rng_uniform())) * cos(2.0 * 3.14159265358979323846 * rng_uniform());
}

static void test_exact_line(void **state)
{
    (void)state;
    double x[24], y[24], res[24];
    for (int i = 0; i < 24; i++) {
        x[i] = (i + 1) * 1048576.0;
        y[i] = 2.5e-5 + 1.25e-10 * x[i];
    }
    fit_result f;
    assert_int_equal(fit_line(x, y, 24, &f, res, NULL), FSMOE_OK);
    assert_true(fabs(f.alpha - 2.5e-5) < 1e-12);
    assert_true(fabs(f.beta - 1.25e-10) / 1.25e-10 < 1e-9);
    assert_true(f.r2 > 1.0 - 1e-12);
    assert_int_equal(f.bound, FIT_FREE);
    for (int i = 0; i < 24; i++)
        assert_true(fabs(res[i]) < 1e-15);
}

/* FSMoE's sizes, 2 % multiplicative noise: α and β within a few standard errors. */
static void test_noisy_line(void **state)
{
    (void)state;
    const double alpha = 3e-4, beta = 8e-10; /* seconds, s/byte: ~1.25 GB/s */
    double x[24], y[24];
    for (int trial = 0; trial < 20; trial++) {
        for (int i = 0; i < 24; i++) {
            x[i] = (i + 1) * 1048576.0;
            y[i] = (alpha + beta * x[i]) * (1.0 + 0.02 * rng_normal());
        }
        fit_result f;
        assert_int_equal(fit_line(x, y, 24, &f, NULL, NULL), FSMOE_OK);
        assert_true(fabs(f.beta - beta) / beta < 0.05);
        assert_true(fabs(f.alpha - alpha) < 0.5e-3); /* α is the small term: wider */
        assert_true(f.r2 > 0.99);
        assert_true(f.r2 <= 1.0);
        /* The residuals measure the noise: 2 % of each time, i.e. 2-3 % of the mean. */
        double mean = 0.0;
        for (int i = 0; i < 24; i++)
            mean += y[i] / 24;
        assert_true(f.rms_residual / mean > 0.01 && f.rms_residual / mean < 0.04);
        assert_true(f.max_rel_residual > 0.0 && f.max_rel_residual < 0.2);
    }
}

/* Heavy noise: r² drops below the threshold, which is what the profile must flag. */
static void test_noise_lowers_r2(void **state)
{
    (void)state;
    double x[24], y[24];
    for (int i = 0; i < 24; i++) {
        x[i] = (i + 1) * 1048576.0;
        y[i] = (1e-4 + 1e-10 * x[i]) * (1.0 + 0.6 * rng_normal());
        if (y[i] < 0)
            y[i] = -y[i];
    }
    fit_result f;
    assert_int_equal(fit_line(x, y, 24, &f, NULL, NULL), FSMOE_OK);
    assert_true(f.r2 < 0.99);
}

/* A line through the origin measured slightly convex: the free fit has α < 0; the bounded
 * fit is the least-squares line through the origin (α = 0, β = Σxy/Σx²). */
static void test_alpha_bound(void **state)
{
    (void)state;
    double x[10], y[10], sxy = 0, sxx = 0;
    for (int i = 0; i < 10; i++) {
        x[i] = i + 1.0;
        y[i] = 0.1 * x[i] * x[i]; /* free fit: slope 1.1, intercept −2.2 */
        sxy += x[i] * y[i];
        sxx += x[i] * x[i];
    }
    fit_result f;
    assert_int_equal(fit_line(x, y, 10, &f, NULL, NULL), FSMOE_OK);
    assert_int_equal(f.bound, FIT_ALPHA_ZERO);
    assert_true(f.alpha == 0.0);
    assert_true(fabs(f.beta - sxy / sxx) < 1e-12);
}

static void test_beta_bound(void **state)
{
    (void)state;
    double x[4] = {1, 2, 3, 4}, y[4] = {4, 3, 2, 1};
    fit_result f;
    assert_int_equal(fit_line(x, y, 4, &f, NULL, NULL), FSMOE_OK);
    assert_int_equal(f.bound, FIT_BETA_ZERO);
    assert_true(f.beta == 0.0);
    assert_true(fabs(f.alpha - 2.5) < 1e-12);
}

static void test_degenerate(void **state)
{
    (void)state;
    double x[3] = {5, 5, 5}, y[3] = {1, 2, 3};
    fit_result f;
    fsmoe_error err = {0};
    assert_int_equal(fit_line(x, y, 1, &f, NULL, &err), FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "at least 2 points"));
    assert_int_equal(fit_line(x, y, 3, &f, NULL, &err), FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "same size"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_line),      cmocka_unit_test(test_noisy_line),
        cmocka_unit_test(test_noise_lowers_r2), cmocka_unit_test(test_alpha_bound),
        cmocka_unit_test(test_beta_bound),      cmocka_unit_test(test_degenerate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
