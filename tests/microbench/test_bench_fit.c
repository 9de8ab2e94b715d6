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

/* The runs test's exact p against every arrangement of the signs, counted. */
static void test_runs_p_brute_force(void **state)
{
    (void)state;
    const int n = 12, pos[] = {1, 3, 5, 6, 9, 11};
    for (size_t c = 0; c < sizeof pos / sizeof *pos; c++) {
        long count[14] = {0}, total = 0;
        for (unsigned m = 0; m < (1u << n); m++) {
            if (__builtin_popcount(m) != pos[c])
                continue;
            int runs = 1;
            for (int i = 1; i < n; i++)
                runs += ((m >> i) & 1u) != ((m >> (i - 1)) & 1u);
            count[runs]++;
            total++;
        }
        long cum = 0;
        for (int r = 1; r <= n + 1; r++) {
            cum += count[r];
            double want = (double)cum / (double)total;
            assert_true(fabs(fit_runs_p(r, pos[c], n - pos[c]) - want) < 1e-12);
        }
    }
    assert_true(fit_runs_p(1, 0, 7) == 1.0);
    assert_true(fit_runs_p(1, 7, 0) == 1.0);
}

/* 24 sizes of 1..24 MiB on y = 1e-4 + 2e-10·n (+ extra), with 1 % Gaussian noise. */
static fit_pattern pattern_of(double (*extra)(int i, double x), fit_result *f)
{
    double x[24], y[24];
    rng_state = 7;
    for (int i = 0; i < 24; i++) {
        x[i] = (i + 1) * 1048576.0;
        double clean = 1e-4 + 2e-10 * x[i];
        y[i] = clean * (1.0 + 0.01 * rng_normal()) + extra(i, x[i]);
    }
    fit_pattern p;
    assert_int_equal(fit_line(x, y, 24, f, NULL, NULL), FSMOE_OK);
    assert_int_equal(fit_residual_pattern(x, y, 24, f, &p, NULL), FSMOE_OK);
    return p;
}

static double none(int i, double x) { (void)i, (void)x; return 0.0; }
/* 1 ms more (less) at the largest size, growing with n² (y there is about 5.1 ms) */
static const double top = 24.0 * 1048576.0;
static double bend_up(int i, double x) { (void)i; return 1e-3 * (x / top) * (x / top); }
static double bend_down(int i, double x) { (void)i; return -1e-3 * (x / top) * (x / top); }
/* blocks of six sizes alternately 8 % above and below: steps, no single bend */
static double steps(int i, double x) { return ((i / 6) % 2 ? 0.08 : -0.08) * 2e-10 * x; }

static void test_pattern_kinds(void **state)
{
    (void)state;
    fit_result f;
    fit_pattern p = pattern_of(none, &f);
    double r2_noise = f.r2;
    assert_int_equal(p.kind, FIT_PATTERN_SCATTER);
    assert_true(p.runs_p >= FIT_PATTERN_LEVEL);
    assert_int_equal(p.n_pos + p.n_neg, 24);

    p = pattern_of(bend_up, &f);
    assert_true(f.r2 < r2_noise); /* the bend lowers r² below what the noise leaves */
    assert_int_equal(p.kind, FIT_PATTERN_CONVEX);
    assert_true(p.quad_share > 0.8 && p.quad_p < 1e-6 && p.quad_c > 0.0);
    assert_true(fabs(p.quad_c * top * top / 1e-3 - 1.0) < 0.1);

    p = pattern_of(bend_down, &f);
    assert_int_equal(p.kind, FIT_PATTERN_CONCAVE);
    assert_true(p.quad_c < 0.0);

    p = pattern_of(steps, &f);
    assert_int_equal(p.kind, FIT_PATTERN_RUNS);
    assert_true(p.runs <= 6 && p.runs_p < FIT_PATTERN_LEVEL && p.quad_share < 0.5);

    char buf[384];
    fit_pattern_describe(&p, buf, sizeof buf);
    assert_non_null(strstr(buf, "more runs will not raise r2"));
    p = pattern_of(none, &f);
    fit_pattern_describe(&p, buf, sizeof buf);
    assert_non_null(strstr(buf, "noise"));
}

static void test_pattern_few_points(void **state)
{
    (void)state;
    double x[3] = {1, 2, 3}, y[3] = {1, 3, 2};
    fit_result f;
    fit_pattern p;
    assert_int_equal(fit_line(x, y, 3, &f, NULL, NULL), FSMOE_OK);
    assert_int_equal(fit_residual_pattern(x, y, 3, &f, &p, NULL), FSMOE_OK);
    assert_int_equal(p.kind, FIT_PATTERN_NONE);
    assert_string_equal(fit_pattern_name(p.kind), "-");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_line),      cmocka_unit_test(test_noisy_line),
        cmocka_unit_test(test_noise_lowers_r2), cmocka_unit_test(test_alpha_bound),
        cmocka_unit_test(test_beta_bound),      cmocka_unit_test(test_degenerate),
        cmocka_unit_test(test_runs_p_brute_force), cmocka_unit_test(test_pattern_kinds),
        cmocka_unit_test(test_pattern_few_points),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
