/* Implements: tests of fsmoe-bench's stopping rule and outlier re-measure (microbench/measure.h
 * "how many runs a size gets"): the order-statistic interval of the median against exact
 * binomial sums and a Monte Carlo coverage count, the robust line's residuals with planted
 * outliers, the per-row decisions on hand-made rows, and the whole loop (MPI on one rank,
 * MPI_COMM_SELF) on synthetic timings with known true values. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "fit.h"
#include "measure.h"

static uint64_t rng_state = 7;
static double rng_uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return ((rng_state >> 11) + 0.5) / 9007199254740992.0;
}
static double rng_normal(void)
{
    return sqrt(-2.0 * log(rng_uniform())) * cos(2.0 * 3.14159265358979323846 * rng_uniform());
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Brute force: the coverage of [v_(k), v_(n+1-k)] from exact binomial coefficients (Pascal's
 * triangle in integers, n <= 60 fits 64 bits). */
static int ci_rank_exact(int n, double conf)
{
    uint64_t c[61] = {1};
    for (int m = 1; m <= n; m++)
        for (int i = m; i > 0; i--)
            c[i] += c[i - 1];
    long double total = ldexpl(1.0L, n), below = 0.0L;
    int best = 0;
    for (int k = 1; 2 * k <= n + 1; k++) {
        below += (long double)c[k - 1];
        if (1.0L - 2.0L * below / total >= (long double)conf - 1e-12L)
            best = k;
        else
            break;
    }
    return best;
}

static void test_ci_rank(void **state)
{
    (void)state;
    /* By hand, 90 %: n = 4 gives [min, max] 87.5 % (none); n = 5 93.75 %; n = 7 k = 2 only
     * 87.5 %; n = 8 k = 2 93.0 %; n = 11 k = 3 93.5 %. */
    assert_int_equal(measure_median_ci_rank(4, 0.9), 0);
    assert_int_equal(measure_median_ci_rank(5, 0.9), 1);
    assert_int_equal(measure_median_ci_rank(7, 0.9), 1);
    assert_int_equal(measure_median_ci_rank(8, 0.9), 2);
    assert_int_equal(measure_median_ci_rank(11, 0.9), 3);
    const double confs[] = {0.5, 0.8, 0.9, 0.95, 0.99};
    for (int c = 0; c < 5; c++)
        for (int n = 1; n <= 60; n++)
            assert_int_equal(measure_median_ci_rank(n, confs[c]), ci_rank_exact(n, confs[c]));
}

/* The interval holds the true median as often as it says, on a skewed distribution (the
 * exponential, median ln 2, whose long tail is like a timing's): n = 9 gives k = 2, exact
 * coverage 1 - 2 (1 + 9) / 512 = 0.9609. */
static void test_ci_coverage(void **state)
{
    (void)state;
    const int trials = 20000, n = 9;
    int k = measure_median_ci_rank(n, 0.9), hit = 0;
    assert_int_equal(k, 2);
    for (int t = 0; t < trials; t++) {
        double v[9];
        for (int i = 0; i < n; i++)
            v[i] = -log(rng_uniform());
        qsort(v, (size_t)n, sizeof v[0], cmp_double);
        hit += v[k - 1] <= log(2.0) && log(2.0) <= v[n - k];
    }
    double frac = (double)hit / trials;
    assert_true(fabs(frac - (1.0 - 20.0 / 512.0)) < 0.01);
}

static void test_ci_rel(void **state)
{
    (void)state;
    double v[5] = {90, 95, 100, 104, 130};
    assert_true(fabs(measure_median_ci_rel(v, 5, 0.9) - 0.3) < 1e-12);
    /* n = 8 drops one run at each end: [95, 104] around 100.5 (median of the middle pair). */
    double w[8] = {50, 95, 99, 100, 101, 102, 104, 300};
    assert_true(fabs(measure_median_ci_rel(w, 8, 0.9) - 5.5 / 100.5) < 1e-12);
    assert_true(isinf(measure_median_ci_rel(v, 4, 0.9)));
}

/* Three points 30 % high among 24 with 0.1 % noise: the robust line ignores them (least squares
 * would not), so they stand out at 0.3 / 1.3 and the rest stay near 0. */
static void test_robust_residuals(void **state)
{
    (void)state;
    double x[24], y[24], rel[24];
    for (int i = 0; i < 24; i++) {
        x[i] = (i + 1) * 1048576.0;
        y[i] = (1e-4 + 4e-10 * x[i]) * (1.0 + 0.001 * rng_normal());
        if (i == 0 || i == 11 || i == 15)
            y[i] *= 1.3;
    }
    assert_int_equal(fit_robust_rel_residuals(x, y, 24, rel, NULL), FSMOE_OK);
    for (int i = 0; i < 24; i++) {
        if (i == 0 || i == 11 || i == 15)
            assert_true(fabs(rel[i] - 0.3 / 1.3) < 0.01);
        else
            assert_true(fabs(rel[i]) < 0.005);
    }
    /* Least squares is pulled: some good point is off by more than the robust line allows. */
    fit_result f;
    double res[24], worst = 0.0;
    assert_int_equal(fit_line(x, y, 24, &f, res, NULL), FSMOE_OK);
    for (int i = 0; i < 24; i++)
        if (i != 0 && i != 11 && i != 15 && fabs(res[i] / y[i]) > worst)
            worst = fabs(res[i] / y[i]);
    assert_true(worst > 0.01);
}

/* Rows on a line, every other one `wobble` (relative) above it and the rest below: at 4.5 %
 * the line's slope is known to +-3.6 % at 90 % (more than rule 2's 3 %) and no row is more than
 * 7.3 % off the robust line (the tests' outlier rule takes 8 %). */
static void rows_line(measure_refine *r, int runs, double wobble)
{
    for (int i = 0; i < r->n; i++) {
        r->x[i] = (i + 1) * 1048576.0;
        r->y[i] = (2e-4 + 5e-10 * r->x[i]) * (1.0 + (i % 2 ? wobble : -wobble));
        r->ci[i] = 0.01;
        r->runs[i] = runs;
    }
}

static void test_decide(void **state)
{
    (void)state;
    measure_rule rule = {5, 15, 0.03, 0.08, 0.5, 0.0};
    measure_refine r;
    assert_int_equal(measure_refine_init(&r, 24, 15, NULL), FSMOE_OK);
    rows_line(&r, 5, 0.045);
    r.runs[3] = -1; /* nothing measured there: never judged */
    r.y[3] = 1.0;
    assert_int_equal(measure_refine_decide(&rule, &r, NULL), 0);
    assert_true(r.slope_rel > 0.03 && r.slope_rel < 0.05);
    r.y[7] *= 1.2; /* 20 % high (row 7 is 4.5 % above the line already): measured again */
    assert_int_equal(measure_refine_decide(&rule, &r, NULL), 1);
    assert_int_equal(r.want[7], MEASURE_AGAIN);
    assert_true(r.rel[7] > 0.17 && r.rel[7] < 0.23);
    /* While a fresh set is under way nothing else is judged (its median stands on 2 runs). */
    r.ci[10] = 0.08;
    r.runs[12] = 2;
    assert_int_equal(measure_refine_decide(&rule, &r, NULL), 1);
    assert_int_equal(r.want[12], MEASURE_MORE);
    assert_int_equal(r.want[7], MEASURE_DONE);
    assert_int_equal(r.want[10], MEASURE_DONE);
    /* Then: the outlier again, the wide interval one more run. */
    r.runs[12] = 5;
    assert_int_equal(measure_refine_decide(&rule, &r, NULL), 2);
    assert_int_equal(r.want[7], MEASURE_AGAIN);
    assert_int_equal(r.want[10], MEASURE_MORE);
    /* At --max-iters the interval no longer asks for runs; re-measured sizes stay as they are. */
    r.runs[10] = 15;
    r.remeasured[7] = 1;
    assert_int_equal(measure_refine_decide(&rule, &r, NULL), 0);
    for (int i = 0; i < 24; i++)
        assert_int_equal(r.want[i], MEASURE_DONE);
    /* --outlier 0 and --precision 0: exactly min_runs, nothing judged. */
    measure_rule none = {5, 15, 0.0, 0.0, 0.5, 0.0};
    r.remeasured[7] = 0;
    r.ci[10] = 0.5;
    r.runs[10] = 5;
    assert_int_equal(measure_refine_decide(&none, &r, NULL), 0);
    measure_refine_free(&r);
}

/* Rule 2 asks for runs only while the line is not good: a wide interval on a line whose slope
 * the medians already fix, with an r² at the threshold, gets none (the budget goes to the next
 * sections). */
static void test_decide_slope_known(void **state)
{
    (void)state;
    measure_rule rule = {5, 15, 0.03, 0.08, 0.5, 0.0};
    measure_refine r;
    assert_int_equal(measure_refine_init(&r, 24, 15, NULL), FSMOE_OK);
    rows_line(&r, 5, 0.0);
    r.ci[10] = 0.08;
    assert_int_equal(measure_refine_decide(&rule, &r, NULL), 0);
    assert_true(r.slope_rel < 1e-9);
    rows_line(&r, 5, 0.01); /* +-1 %: the slope within +-0.8 % */
    r.ci[10] = 0.08;
    assert_int_equal(measure_refine_decide(&rule, &r, NULL), 0);
    assert_true(r.slope_rel > 0.005 && r.slope_rel < 0.01);
    assert_true(r.r2 > 0.999 && r.r2 < 0.9999);
    /* ... but below the profile's r² threshold the line is not good yet. */
    measure_rule strict = rule;
    strict.r2_threshold = 0.9999;
    assert_int_equal(measure_refine_decide(&strict, &r, NULL), 1);
    assert_int_equal(r.want[10], MEASURE_MORE);
    rows_line(&r, 5, 0.045); /* the slope unknown: the wide interval gets a run */
    r.ci[10] = 0.08;
    assert_int_equal(measure_refine_decide(&rule, &r, NULL), 1);
    assert_int_equal(r.want[10], MEASURE_MORE);
    /* Too few points for an interval: not known. */
    double x[2] = {1.0, 2.0}, y[2] = {1.0, 2.0};
    fit_result two;
    assert_int_equal(fit_line(x, y, 2, &two, NULL, NULL), FSMOE_OK);
    assert_true(isinf(fit_slope_rel_halfwidth(&two, 0.9)));
    measure_refine_free(&r);
}

/* ---- the whole loop on synthetic timings ---- */

typedef struct {
    double noise, glitch_p, burst; /* relative noise, chance of a +50 % run, first-set bias */
    int burst_row;
} synth;

static double synth_truth(int i)
{
    return 2e-4 + 5e-10 * (i + 1) * 1048576.0;
}

static double synth_run(const synth *s, int i, int first)
{
    double t = synth_truth(i) * (1.0 + s->noise * rng_normal());
    if (rng_uniform() < s->glitch_p)
        t *= 1.5;
    if (first && i == s->burst_row)
        t *= 1.0 + s->burst;
    return t;
}

/* Runs the sweep as suite.c does; returns the total runs taken. */
static int synth_loop(const synth *s, const measure_rule *rule, double budget_s,
                      measure_refine *r)
{
    measure_cfg cfg = {.warmup = 1, .iters = rule->min_runs, .average = MEASURE_AVG,
                       .world = MPI_COMM_SELF, .group = MPI_COMM_SELF, .rounds = 1, .cpu = -1};
    assert_int_equal(measure_refine_init(r, 24, rule->max_runs, NULL), FSMOE_OK);
    int reps[24], total = 0;
    for (int i = 0; i < 24; i++) {
        reps[i] = 1;
        r->x[i] = (i + 1) * 1048576.0;
    }
    for (int p = 0; p < rule->min_runs; p++)
        for (int i = 0; i < 24; i++, total++)
            measure_refine_add(r, i, synth_run(s, i, 1));
    r->start_s = measure_now();
    r->first_s = 1.0; /* one wall second per ~0.1 s of operations: calib ~10 */
    r->budget_s = budget_s;
    for (int more = 1; more;) {
        assert_int_equal(measure_refine_next(&cfg, rule, r, reps, &more, NULL), FSMOE_OK);
        for (int i = 0; i < 24 && more; i++)
            if (r->want[i] != MEASURE_DONE) {
                measure_refine_add(r, i, synth_run(s, i, 0));
                total++;
            }
    }
    return total;
}

static void test_loop_quiet(void **state)
{
    (void)state;
    /* 0.2 % noise, no glitches: every median is known at once, nothing is re-measured. */
    synth s = {0.002, 0.0, 0.0, -1};
    measure_rule rule = {5, 15, 0.03, 0.05, 0.5, 0.0};
    measure_refine r;
    assert_int_equal(synth_loop(&s, &rule, 1e9, &r), 24 * 5);
    for (int i = 0; i < 24; i++) {
        assert_int_equal(r.runs[i], 5);
        assert_int_equal(r.remeasured[i], 0);
        assert_true(fabs(r.y[i] / synth_truth(i) - 1.0) < 0.01);
    }
    assert_int_equal(r.passes, 0);
    measure_refine_free(&r);
}

static void test_loop_noisy(void **state)
{
    (void)state;
    /* 1 % noise, one run in ten 50 % slow, and a burst of load that made row 12's first five
     * runs 25 % slow: row 12 is measured again (only it: the others are on the line), and
     * every final median lands within 3 % of the truth. Sizes with a glitch among their first
     * five runs get more (up to 15), so the total lies between 24 x 5 and 24 x 15. */
    synth s = {0.01, 0.1, 0.25, 12};
    measure_rule rule = {5, 15, 0.03, 0.05, 0.5, 0.0};
    measure_refine r;
    int total = synth_loop(&s, &rule, 1e9, &r);
    assert_true(total > 24 * 5 && total < 24 * 15);
    for (int i = 0; i < 24; i++) {
        assert_int_equal(r.remeasured[i], i == 12);
        assert_true(r.runs[i] >= 5 && r.runs[i] <= 15);
        assert_true(fabs(r.y[i] / synth_truth(i) - 1.0) < 0.03);
    }
    assert_true(r.first_rel[12] > 0.15);
    measure_refine_free(&r);
}

static void test_loop_no_budget(void **state)
{
    (void)state;
    /* No time for more: exactly the first five runs, and the burst stays in row 12 (reported,
     * not hidden). */
    synth s = {0.01, 0.1, 0.25, 12};
    measure_rule rule = {5, 15, 0.03, 0.05, 0.0, 0.0};
    measure_refine r;
    assert_int_equal(synth_loop(&s, &rule, 0.0, &r), 24 * 5);
    for (int i = 0; i < 24; i++)
        assert_int_equal(r.remeasured[i], 0);
    assert_true(r.y[12] / synth_truth(12) > 1.15);
    measure_refine_free(&r);
}

static void test_loop_gross_no_budget(void **state)
{
    (void)state;
    /* No time for more, but a stall made row 12's first five runs 10x slow: that gross outlier
     * is measured again all the same (once), its new median lands on the truth, and nothing
     * else gets a run. Priced at its stalled median (ten times its line) or held to the
     * budget, it stayed, as a 25 % burst does (test_loop_no_budget). */
    synth s = {0.01, 0.0, 9.0, 12};
    measure_rule rule = {5, 15, 0.03, 0.05, 0.0, 0.0};
    measure_refine r;
    assert_int_equal(synth_loop(&s, &rule, 0.0, &r), 24 * 5 + 5);
    for (int i = 0; i < 24; i++)
        assert_int_equal(r.remeasured[i], i == 12);
    assert_true(fabs(r.y[12] / synth_truth(12) - 1.0) < 0.03);
    assert_true(r.first_rel[12] > 0.5);
    assert_true(measure_gross(0.5) && measure_gross(-1.0) && !measure_gross(0.49) &&
                !measure_gross(-0.99));
    measure_refine_free(&r);
}

/* Budget pricing: a re-measure is costed at its line's time, not its stalled median. Row 12's
 * first set 60 % slow (not gross) with budget for about one fresh set at the line's time: it
 * is measured again; priced at its median (1.6x) it would not fit. */
static void test_loop_priced_at_line(void **state)
{
    (void)state;
    synth s = {0.0, 0.0, 0.6, 12};
    measure_rule rule = {5, 15, 0.03, 0.05, 0.0, 0.0};
    measure_refine r;
    /* calib ~ first_s / (5 runs x the rows' times) (synth_loop); one fresh set of row 12 at its
     * line costs calib x 5 x truth(12) */
    double ops = 0.0;
    for (int i = 0; i < 24; i++)
        ops += 5.0 * synth_truth(i) * (i == 12 ? 1.6 : 1.0);
    double calib = 1.0 / ops, one = calib * 5.0 * synth_truth(12);
    assert_int_equal(synth_loop(&s, &rule, 1.3 * one, &r), 24 * 5 + 5);
    assert_int_equal(r.remeasured[12], 1);
    assert_true(fabs(r.y[12] / synth_truth(12) - 1.0) < 1e-9);
    measure_refine_free(&r);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ci_rank),          cmocka_unit_test(test_ci_coverage),
        cmocka_unit_test(test_ci_rel),           cmocka_unit_test(test_robust_residuals),
        cmocka_unit_test(test_decide),           cmocka_unit_test(test_decide_slope_known),
        cmocka_unit_test(test_loop_quiet),       cmocka_unit_test(test_loop_noisy),
        cmocka_unit_test(test_loop_no_budget),  cmocka_unit_test(test_loop_gross_no_budget),
        cmocka_unit_test(test_loop_priced_at_line),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    MPI_Finalize();
    return rc;
}
