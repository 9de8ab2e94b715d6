/* Implements: the inversion of the fluid model (microbench/interference.c,
 * interference_factors) against an independent forward simulation: the K AllToAlls and the J
 * GEMMs integrated in small time steps, each progressing at 1/factor of its own speed while
 * the other still runs (planner/sim.h's interference), give t_a and t_g; the inversion must
 * give the factors back, whichever ends first. Then the guards: factors below 1 (noise) are
 * 1, a collective that made no progress beside the GEMMs (or noise past that) gets the
 * profile's largest factor 100, and no input gives a factor outside [1, 100]. The sync latency
 * (interference_sync) against the arrivals it stands for: ranks that reach a collective of α
 * seconds at different times each wait for the last, and the mean over the ranks of their
 * times less α is the last arrival's lead over the mean one; its guards keep it in [0, 1] s. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>

#include "interference.h"

/* Forward: t_a and t_g of two jobs of T_a and T_g seconds alone, started together. */
static void simulate(double T_a, double T_g, double comm, double compute, double *t_a,
                     double *t_g)
{
    double left_a = T_a, left_g = T_g, t = 0.0, dt = 1e-7;
    *t_a = *t_g = -1.0;
    while (*t_a < 0.0 || *t_g < 0.0) {
        int a = left_a > 0.0, g = left_g > 0.0;
        t += dt;
        if (a)
            left_a -= dt / (g ? comm : 1.0);
        if (g)
            left_g -= dt / (a ? compute : 1.0);
        if (a && left_a <= 0.0)
            *t_a = t;
        if (g && left_g <= 0.0)
            *t_g = t;
    }
}

typedef struct {
    double T_a, T_g, comm, compute;
} forward_case;

static void test_inverts_the_forward_model(void **state)
{
    (void)state;
    static const forward_case cases[] = {
        {0.030, 0.030, 2.0, 1.5},   /* the GEMMs end first */
        {0.030, 0.030, 1.2, 3.0},   /* the AllToAlls end first */
        {0.010, 0.040, 3.0, 1.2},   /* short AllToAlls, slowed a lot */
        {0.040, 0.010, 1.1, 4.0},   /* short GEMMs, slowed a lot */
        {0.025, 0.035, 1.0, 1.0},   /* no interference: the papers' premise */
        {0.030, 0.020, 1.0, 2.5},   /* one-sided */
        {0.020, 0.030, 60.0, 1.0},  /* the AllToAlls almost stop beside the GEMMs */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const forward_case *k = &cases[i];
        double t_a, t_g, comm, compute;
        simulate(k->T_a, k->T_g, k->comm, k->compute, &t_a, &t_g);
        interference_factors(k->T_a, k->T_g, t_a, t_g, &comm, &compute);
        /* the step (0.1 us) against 10-40 ms phases: 1e-3 relative is generous for the
         * factor that is read directly; the other's denominator is a difference of times, so
         * its error grows with the factor itself */
        double tol_comm = 2e-3 * k->comm * k->comm, tol_compute = 2e-3 * k->compute * k->compute;
        if (fabs(comm - k->comm) > tol_comm || fabs(compute - k->compute) > tol_compute)
            fail_msg("case %zu: T_a %g T_g %g t_a %g t_g %g: comm %g (want %g), compute %g "
                     "(want %g)",
                     i, k->T_a, k->T_g, t_a, t_g, comm, k->comm, compute, k->compute);
    }
}

typedef struct {
    double T_a, T_g, t_a, t_g;
    double comm, compute; /* expected */
} guard_case;

static void test_guards(void **state)
{
    (void)state;
    static const guard_case cases[] = {
        /* together faster than alone (noise): no slowdown, never below 1 */
        {0.030, 0.030, 0.029, 0.028, 1.0, 1.0},
        /* the GEMMs end first and the AllToAlls need longer after them than alone: no
         * progress beside the GEMMs, the largest factor */
        {0.010, 0.030, 0.045, 0.031, 100.0, 0.031 / 0.030},
        /* exactly no progress (denominator 0) */
        {0.010, 0.030, 0.040, 0.030, 100.0, 1.0},
        /* symmetric: the AllToAlls end first, the GEMMs stalled beside them */
        {0.030, 0.010, 0.033, 0.050, 1.1, 100.0},
        /* a slowdown past 100 seen directly is clamped (and the GEMMs, as long together as
         * alone, were not slowed) */
        {0.001, 0.300, 0.200, 0.300, 100.0, 1.0},
        /* equal ends: each ran beside the other all along */
        {0.020, 0.025, 0.040, 0.040, 2.0, 1.6},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const guard_case *k = &cases[i];
        double comm, compute;
        interference_factors(k->T_a, k->T_g, k->t_a, k->t_g, &comm, &compute);
        if (fabs(comm - k->comm) > 1e-9 * k->comm ||
            fabs(compute - k->compute) > 1e-9 * k->compute)
            fail_msg("case %zu: comm %.12g (want %.12g), compute %.12g (want %.12g)", i, comm,
                     k->comm, compute, k->compute);
    }
}

/* Whatever the times (empty, equal, wildly apart), both factors stay in [1, 100]. */
static void test_always_in_range(void **state)
{
    (void)state;
    static const double v[] = {0.0, 1e-9, 1e-3, 0.02, 0.03, 0.1, 10.0, NAN, INFINITY};
    size_t n = sizeof v / sizeof v[0];
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            for (size_t c = 0; c < n; c++)
                for (size_t d = 0; d < n; d++) {
                    double comm, compute;
                    interference_factors(v[a], v[b], v[c], v[d], &comm, &compute);
                    if (!(comm >= 1.0 && comm <= 100.0 && compute >= 1.0 && compute <= 100.0))
                        fail_msg("T_a %g T_g %g t_a %g t_g %g: comm %g compute %g", v[a], v[b],
                                 v[c], v[d], comm, compute);
                }
}

/* Ranks arriving at arrive[i] (from a common start) at a collective of alpha seconds: rank i's
 * time is the wait for the last plus alpha; the mean over the ranks. */
static double mean_after(const double *arrive, int P, double alpha)
{
    double last = arrive[0], sum = 0.0;
    for (int i = 1; i < P; i++)
        last = arrive[i] > last ? arrive[i] : last;
    for (int i = 0; i < P; i++)
        sum += last - arrive[i] + alpha;
    return sum / P;
}

static void test_sync_latency(void **state)
{
    (void)state;
    /* 4 ranks whose GEMMs end 0, 1, 3 and 4 ms apart: the last is 2 ms behind the mean. */
    static const double arrive[4] = {0.004, 0.005, 0.007, 0.008};
    double alpha = 2.5e-4, sync = interference_sync(mean_after(arrive, 4, alpha), alpha);
    if (fabs(sync - 0.002) > 1e-12)
        fail_msg("4 arrivals: sync %.12g, want 0.002", sync);
    /* together: no wait */
    static const double together[4] = {0.004, 0.004, 0.004, 0.004};
    assert_true(interference_sync(mean_after(together, 4, alpha), alpha) == 0.0);
    /* the guards: faster after the GEMMs (noise) and nothing measured give 0; past the
     * profile's 1 s the largest it takes */
    static const double guard[][3] = {
        {2e-4, 3e-4, 0.0}, {NAN, 3e-4, 0.0}, {3e-4, NAN, 0.0}, {5.0, 3e-4, 1.0},
        {INFINITY, 3e-4, 1.0}, {3e-4, 3e-4, 0.0}, {3.102e-3, 0.261e-3, 2.841e-3},
    };
    for (size_t i = 0; i < sizeof guard / sizeof guard[0]; i++) {
        double got = interference_sync(guard[i][0], guard[i][1]);
        if (fabs(got - guard[i][2]) > 1e-12)
            fail_msg("after %g, alone %g: sync %.12g, want %g", guard[i][0], guard[i][1], got,
                     guard[i][2]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inverts_the_forward_model),
        cmocka_unit_test(test_guards),
        cmocka_unit_test(test_always_in_range),
        cmocka_unit_test(test_sync_latency),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
