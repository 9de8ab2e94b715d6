/* Tests: planner/parm_schedule.c (Parm Algorithm 1, design.md §6): hand-computed t_D1/t_D2, the
 * sanity limits (N_ESP = 1: S2 for T -> 0, S1 for T -> inf) and the exact flip where
 * t_D1 = t_D2, both with lines written here and with clusters/parm-server.yaml. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parm_schedule.h"

static void close_rel(double got, double want, double tol, const char *what)
{
    if (!(fabs(got - want) <= tol * fabs(want)))
        fail_msg("%s: got %.12g, want %.12g", what, got, want);
}

static fsmoe_line line(double a, double b)
{
    fsmoe_line l = {a, b, NULL, {NULL, NULL}};
    return l;
}

/* Parm's 8-GPU server MP AllGather (design.md §3: 6.64e-4 s, 5.38e-10 s per float); the
 * EP&ESP AllToAll and SAA are illustrative: SAA launches cheaper than A2A + AG (one fused
 * launch) but moves more per byte than the A2A alone. */
static workload_lines hand_lines(void)
{
    workload_lines w;
    memset(&w, 0, sizeof w);
    w.a2a_ep_esp = line(5e-5, 1e-10);
    w.ag_mp = line(6.64e-4, 5.38e-10 / 4);
    w.saa = line(3e-4, 4e-10);
    w.a2a_ep = line(1e-4, 2e-10);
    return w;
}

/* 8 GPUs, MP 4, ESP 1 (N_ESP = 1), EP 8, E = 8, k = 2, f = 1.2, M = 1024, fp32. */
static workload_shape shape(long B, long L)
{
    workload_shape s = {.B = B, .L = L, .M = 1024, .H = 4096, .heads = 16, .kv_heads = 16,
                        .E = 8, .vocab = 0, .k = 2, .f = 1.2, .expert = FSMOE_EXPERT_GPT,
                        .bytes_per_element = 4};
    return s;
}

static const fsmoe_parallel par_esp1 = {.world = 8, .gpus_per_node = 8, .dp = 2, .mp = 4,
                                        .ep = 8, .esp = 1, .pp = 1};

static void test_hand_values(void **state)
{
    (void)state;
    workload_lines w = hand_lines();
    workload_shape s = shape(2, 512);
    parm_choice c;
    parm_choose(&s, &par_esp1, &w, &c);
    /* x = 2·512·1024·4 = 4194304 B; T = 2·1.2·2·512/8 = 307.2; y = 8·T·1024·1·4 = 10066329.6;
     * y/N_MP = 2516582.4.
     * t_D1 = 2·(5e-5 + 1e-10·2516582.4) + 6.64e-4 + 1.345e-10·4194304 = 1.831450368e-3
     * t_D2 = (5e-5 + 2.5165824e-4) + (3e-4 + 4e-10·2516582.4)          = 1.6082912e-3 */
    close_rel(c.t_d1_s, 1.831450368e-3, 1e-12, "t_D1");
    close_rel(c.t_d2_s, 1.6082912e-3, 1e-12, "t_D2");
    assert_int_equal(c.schedule, FSMOE_SCHED_S2);
}

static void test_limits(void **state)
{
    (void)state;
    workload_lines w = hand_lines();
    parm_choice c;
    workload_shape s = shape(1, 1); /* T = 0.3 tokens per expert */
    parm_choose(&s, &par_esp1, &w, &c);
    assert_int_equal(c.schedule, FSMOE_SCHED_S2);
    s = shape(64, 8192); /* T = 157286 tokens per expert */
    parm_choose(&s, &par_esp1, &w, &c);
    assert_int_equal(c.schedule, FSMOE_SCHED_S1);
    /* no MP: nothing to pause */
    fsmoe_parallel p1 = par_esp1;
    p1.mp = 1;
    p1.dp = 8;
    parm_choose(&s, &p1, &w, &c);
    assert_int_equal(c.schedule, FSMOE_SCHED_ESP_PIPELINE);
}

/* With B·L fixed, x is constant and y/N_MP = k·f·x·N_ESP/N_MP grows with the capacity factor f
 * (T = k·f·B·L/E), so
 *   t_D1 − t_D2 = (α_a2a + α_ag − α_saa + β_ag·x) + f·k·x·(N_ESP/N_MP)·(β_a2a − β_saa)
 * is affine in f and the choice flips at f* = −c0/c1 (for y > 0). Checks the choice just below
 * and just above f* (continuous, so "exactly" means to 1e-9 relative) and the difference itself
 * against this formula. */
static void check_flip(const workload_lines *w, const fsmoe_parallel *par, const char *what)
{
    workload_shape s = shape(2, 512);
    const double x = (double)s.B * s.L * s.M * s.bytes_per_element;
    const double u_per_f = s.k * x * par->esp / par->mp;
    double c0 = w->a2a_ep_esp.alpha_s + w->ag_mp.alpha_s - w->saa.alpha_s + w->ag_mp.beta_s * x;
    double c1 = u_per_f * (w->a2a_ep_esp.beta_s - w->saa.beta_s);
    if (!(c0 > 0.0 && c1 < 0.0))
        fail_msg("%s: t_D1 - t_D2 = %g + f*%g: S2 does not win for small T or S1 for large T",
                 what, c0, c1);
    double f_star = -c0 / c1;
    parm_choice lo, hi, at;
    s.f = f_star * (1 - 1e-9);
    parm_choose(&s, par, w, &lo);
    s.f = f_star * (1 + 1e-9);
    parm_choose(&s, par, w, &hi);
    s.f = f_star;
    parm_choose(&s, par, w, &at);
    print_message("%s: t_D1 = t_D2 at f = %.6f (T = %.2f tokens): %s below, %s above\n", what,
                  f_star, s.k * f_star * s.B * s.L / s.E, fsmoe_schedule_name(lo.schedule),
                  fsmoe_schedule_name(hi.schedule));
    assert_int_equal(lo.schedule, FSMOE_SCHED_S2);
    assert_int_equal(hi.schedule, FSMOE_SCHED_S1);
    close_rel(at.t_d1_s, at.t_d2_s, 1e-9, "t_D1 = t_D2 at the crossing");
    s.f = 0.5 * f_star;
    parm_choose(&s, par, w, &lo);
    close_rel(lo.t_d1_s - lo.t_d2_s, c0 + c1 * s.f, 1e-9, "t_D1 - t_D2 below");
    s.f = 3.0 * f_star;
    parm_choose(&s, par, w, &hi);
    close_rel(hi.t_d1_s - hi.t_d2_s, c0 + c1 * s.f, 1e-9, "t_D1 - t_D2 above");
    /* the limits: T -> 0 and T -> inf through the capacity */
    s.f = 1e-6;
    parm_choose(&s, par, w, &lo);
    assert_int_equal(lo.schedule, FSMOE_SCHED_S2);
    s.f = 1e6;
    parm_choose(&s, par, w, &hi);
    assert_int_equal(hi.schedule, FSMOE_SCHED_S1);
}

static void test_flip_hand(void **state)
{
    (void)state;
    workload_lines w = hand_lines();
    check_flip(&w, &par_esp1, "hand lines");
    /* And an exact integer crossing: choose α_saa so that t_D1 = t_D2 at B = 4. */
    workload_shape s = shape(4, 512);
    double x = 4.0 * 512 * 1024 * 4, u = x * 2 * 1.2 / 4;
    w.saa.alpha_s = w.a2a_ep_esp.alpha_s + w.ag_mp.alpha_s + w.ag_mp.beta_s * x
                    + (w.a2a_ep_esp.beta_s - w.saa.beta_s) * u;
    parm_choice c;
    parm_choose(&s, &par_esp1, &w, &c);
    close_rel(c.t_d1_s, c.t_d2_s, 1e-12, "t_D1 = t_D2 at B = 4");
    s = shape(3, 512);
    parm_choose(&s, &par_esp1, &w, &c);
    assert_int_equal(c.schedule, FSMOE_SCHED_S2);
    s = shape(5, 512);
    parm_choose(&s, &par_esp1, &w, &c);
    assert_int_equal(c.schedule, FSMOE_SCHED_S1);
}

static void test_profile(void **state)
{
    (void)state;
    const char *root = getenv("FSMOE_SOURCE_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/clusters/parm-server.yaml", root ? root : ".");
    fsmoe_cluster c;
    memset(&c, 0, sizeof c);
    fsmoe_error err = {0};
    if (fsmoe_cluster_load(path, &c, &err) != FSMOE_OK)
        fail_msg("%s", err.msg);
    /* the whole 8-GPU server: MP 4 and ESP 1 as in the sanity statement */
    fsmoe_parallel par = {.world = c.nodes * c.gpus_per_node, .gpus_per_node = c.gpus_per_node,
                          .mp = 4, .esp = 1, .pp = 1};
    par.dp = par.world / par.mp;
    par.ep = par.world;
    workload_lines w;
    if (workload_lines_init(&c, path, &par, NULL, &w, &err) != FSMOE_OK)
        fail_msg("%s", err.msg);
    /* design.md §3: Parm's measured MP AllGather over the 8 GPUs, 6.64e-4 s and 5.38e-10 s
     * per float; MP = 4 here, so β is scaled by bus bandwidth (libfsmoe/cost.h):
     * s(4)/s(8) = (3/4)/(7/8), α as measured */
    close_rel(w.ag_mp.alpha_s, 6.64e-4, 1e-6, "profile AG_MP alpha");
    close_rel(w.ag_mp.beta_s, 5.38e-10 / 4 * (3.0 / 4.0) / (7.0 / 8.0), 1e-6,
              "profile AG_MP beta per byte");
    check_flip(&w, &par, "parm-server profile");
    fsmoe_cluster_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_values),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_flip_hand),
        cmocka_unit_test(test_profile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
