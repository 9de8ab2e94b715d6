/* Implements: unit tests of the discrete-event simulator (planner/sim.c): closed forms
 * of single-resource chains, fair-share bandwidth arithmetic done by hand, priorities, streams,
 * Lina's deferred launch, critical paths, and invariants on random task graphs. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define EPS 1e-12

static void assert_close(double got, double want)
{
    if (fabs(got - want) > EPS * (1.0 + fabs(want))) {
        print_error("got %.17g, want %.17g\n", got, want);
        fail();
    }
}

static void run_ok(sim *s)
{
    fsmoe_error err = {0};
    fsmoe_status st = sim_run(s, &err);
    if (st != FSMOE_OK)
        print_error("%s\n", err.msg);
    assert_int_equal(st, FSMOE_OK);
}

/* A chain on one compute unit takes Σ (α + w); every task starts where the previous ended. */
static void test_chain_closed_form(void **state)
{
    (void)state;
    sim s;
    sim_init(&s);
    int cu = sim_add_resource(&s, "compute", SIM_RES_EXCLUSIVE);
    double want = 0.0;
    int prev = -1;
    for (int i = 0; i < 10; i++) {
        double a = 1e-4 * (i + 1), w = 3e-3 / (i + 1);
        int t = sim_add_task(&s, cu, -1, FSMOE_TASK_EXPERT, a, w);
        sim_add_dep(&s, t, prev);
        prev = t;
        want += a + w;
    }
    run_ok(&s);
    assert_close(s.makespan_s, want);
    assert_close(s.res[cu].busy_s, want);
    assert_int_equal(s.n_critical, 10);
    assert_close(s.critical_s, want);
    double t = 0.0;
    for (int i = 0; i < 10; i++) {
        assert_close(s.tasks[i].start_s, t);
        t += s.tasks[i].alpha_s + s.tasks[i].work_s;
        assert_close(s.tasks[i].end_s, t);
        assert_int_equal(s.tasks[i].trigger, i - 1);
    }
    sim_free(&s);
}

/* Independent tasks on an exclusive unit: smaller priority first, then creation order. */
static void test_exclusive_priority(void **state)
{
    (void)state;
    sim s;
    sim_init(&s);
    int cu = sim_add_resource(&s, "compute", SIM_RES_EXCLUSIVE);
    int a = sim_add_task(&s, cu, -1, FSMOE_TASK_FFN, 0.0, 1.0);
    int b = sim_add_task(&s, cu, -1, FSMOE_TASK_FFN, 0.0, 2.0);
    int c = sim_add_task(&s, cu, -1, FSMOE_TASK_FFN, 0.0, 4.0);
    s.tasks[a].priority = 3;
    s.tasks[b].priority = 3;
    s.tasks[c].priority = 1;
    run_ok(&s);
    assert_close(s.tasks[c].start_s, 0.0);
    assert_close(s.tasks[a].start_s, 4.0);
    assert_close(s.tasks[b].start_s, 5.0);
    assert_close(s.makespan_s, 7.0);
    assert_int_equal(s.tasks[b].trigger, a); /* it waited for the unit a freed */
    sim_free(&s);
}

/* Two equal transfers started together on one link both finish at α + 2·w; one alone at α + w. */
static void test_two_equal_transfers(void **state)
{
    (void)state;
    sim s;
    sim_init(&s);
    int link = sim_add_resource(&s, "inter", SIM_RES_SHARED);
    int a = sim_add_task(&s, link, -1, FSMOE_TASK_A2A, 0.25, 3.0);
    int b = sim_add_task(&s, link, -1, FSMOE_TASK_GRAD_AR, 0.25, 3.0);
    run_ok(&s);
    assert_close(s.tasks[a].end_s, 6.25);
    assert_close(s.tasks[b].end_s, 6.25);
    assert_close(s.res[link].bw_busy_s, 6.0);
    assert_close(s.res[link].work_s, 6.0);
    sim_clear(&s);
    link = sim_add_resource(&s, "inter", SIM_RES_SHARED);
    a = sim_add_task(&s, link, -1, FSMOE_TASK_A2A, 0.25, 3.0);
    run_ok(&s);
    assert_close(s.makespan_s, 3.25);
    sim_free(&s);
}

/* Staggered transfers, by hand: T1 (w 4) from 0; T2 (w 2) from 1.
 * 0..1 T1 alone (rem 3); from 1 both at 1/2: T2 ends at 5, T1 has 1 left, ends at 6. */
static void test_staggered_share(void **state)
{
    (void)state;
    sim s;
    sim_init(&s);
    int cu = sim_add_resource(&s, "compute", SIM_RES_EXCLUSIVE);
    int link = sim_add_resource(&s, "inter", SIM_RES_SHARED);
    int t1 = sim_add_task(&s, link, -1, FSMOE_TASK_A2A, 0.0, 4.0);
    int c = sim_add_task(&s, cu, -1, FSMOE_TASK_EXPERT, 0.0, 1.0);
    int t2 = sim_add_task(&s, link, -1, FSMOE_TASK_A2A, 0.0, 2.0);
    sim_add_dep(&s, t2, c);
    run_ok(&s);
    assert_close(s.tasks[t2].start_s, 1.0);
    assert_close(s.tasks[t2].end_s, 5.0);
    assert_close(s.tasks[t1].end_s, 6.0);
    assert_close(s.res[link].bw_busy_s, 6.0); /* = Σ work: bytes are conserved */
    assert_close(s.makespan_s, 6.0);
    /* critical path: t1 alone (started at 0) */
    assert_int_equal(s.n_critical, 1);
    assert_int_equal(s.critical[0], t1);
    sim_free(&s);
}

/* α is latency, not bandwidth: T1 (α 1, w 1) at 0, T2 (α 1, w 1) at 0.5.
 * T1 transfers alone 1..1.5 (0.5 left), shared 1.5..2.5 -> ends 2.5;
 * T2 transfers from 1.5 at 1/2 until 2.5 (0.5 left), alone -> ends 3. */
static void test_latency_not_shared(void **state)
{
    (void)state;
    sim s;
    sim_init(&s);
    int cu = sim_add_resource(&s, "compute", SIM_RES_EXCLUSIVE);
    int link = sim_add_resource(&s, "inter", SIM_RES_SHARED);
    int t1 = sim_add_task(&s, link, -1, FSMOE_TASK_A2A, 1.0, 1.0);
    int c = sim_add_task(&s, cu, -1, FSMOE_TASK_EXPERT, 0.0, 0.5);
    int t2 = sim_add_task(&s, link, -1, FSMOE_TASK_A2A, 1.0, 1.0);
    sim_add_dep(&s, t2, c);
    run_ok(&s);
    assert_close(s.tasks[t1].end_s, 2.5);
    assert_close(s.tasks[t2].end_s, 3.0);
    assert_close(s.res[link].busy_s, 3.0);
    assert_close(s.res[link].bw_busy_s, 2.0);
    sim_free(&s);
}

/* A stream serialises its tasks (priority first among the ready ones), the link is not shared. */
static void test_stream_order(void **state)
{
    (void)state;
    sim s;
    sim_init(&s);
    int link = sim_add_resource(&s, "inter", SIM_RES_SHARED);
    int st = sim_add_stream(&s, "inter-stream", link);
    int a = sim_add_task(&s, link, st, FSMOE_TASK_A2A, 0.5, 1.0);
    int b = sim_add_task(&s, link, st, FSMOE_TASK_A2A, 0.5, 2.0);
    s.tasks[b].priority = 0;
    s.tasks[a].priority = 2;
    run_ok(&s);
    assert_close(s.tasks[b].start_s, 0.0);
    assert_close(s.tasks[b].end_s, 2.5);
    assert_close(s.tasks[a].start_s, 2.5);
    assert_close(s.tasks[a].end_s, 4.0);
    assert_int_equal(s.tasks[a].trigger, b);
    sim_free(&s);
}

/* Lina: a deferred allreduce (prio 1) waits while an A2A (prio 0) is ready or running, then
 * launches; an A2A that arrives later shares the link with it (no preemption).
 * A1 (w 2) at 0, AR (w 3, deferred) ready at 0, A2 (w 1) ready at 3 (after a compute task).
 * 0..2 A1; AR from 2; at 3 AR has 2 left; shared: A2 needs 2 s -> ends 5, AR 1 left -> ends 6. */
static void test_deferred_launch(void **state)
{
    (void)state;
    sim s;
    sim_init(&s);
    int cu = sim_add_resource(&s, "compute", SIM_RES_EXCLUSIVE);
    int link = sim_add_resource(&s, "inter", SIM_RES_SHARED);
    int a2a_st = sim_add_stream(&s, "a2a", link);
    int ar_st = sim_add_stream(&s, "ar", link);
    int a1 = sim_add_task(&s, link, a2a_st, FSMOE_TASK_A2A, 0.0, 2.0);
    int ar = sim_add_task(&s, link, ar_st, FSMOE_TASK_GRAD_AR, 0.0, 3.0);
    s.tasks[ar].priority = 1;
    s.tasks[ar].flags = SIM_TASK_DEFER;
    int c = sim_add_task(&s, cu, -1, FSMOE_TASK_EXPERT, 0.0, 3.0);
    int a2 = sim_add_task(&s, link, a2a_st, FSMOE_TASK_A2A, 0.0, 1.0);
    sim_add_dep(&s, a2, c);
    run_ok(&s);
    assert_close(s.tasks[a1].end_s, 2.0);
    assert_close(s.tasks[ar].start_s, 2.0);
    assert_int_equal(s.tasks[ar].trigger, a1);
    assert_close(s.tasks[a2].start_s, 3.0);
    assert_close(s.tasks[a2].end_s, 5.0);
    assert_close(s.tasks[ar].end_s, 6.0);
    assert_close(s.res[link].bw_busy_s, 6.0);
    sim_free(&s);
}

/* Golden timeline of one pipelined MoE forward, r = 2 (FSMoE Fig. 4's chain), by hand.
 * Inter stream: D1 D2 C1 C2 (1 s each); intra stream: AG1 AG2 RS1 RS2 (0.5 s each, AG before
 * RS by priority); compute: E1 E2 (2 s each).
 * D1 0-1, D2 1-2; AG1 1-1.5, E1 1.5-3.5; AG2 2-2.5, E2 3.5-5.5; RS1 3.5-4, C1 4-5;
 * RS2 5.5-6, C2 6-7. Makespan 7 = f2 = 2·t_a2a + t_ag + t_rs + r·t_exp. */
/* Interference, fluid: a GEMM (work 10) beside two transfers sharing a link (work 2 and 10),
 * comm_slowdown 2, compute_slowdown 1.5. While all run, each transfer progresses at
 * 1/(2·2) and the GEMM at 1/1.5: the short transfer ends at 8 (2 = 8/4); then the long one
 * at 1/2 (done 2 + rest 8 at 1/2 would end at 24) while the GEMM ends at 15 (10 = 15/1.5);
 * from 15 the long transfer, 2 + 7/2 = 5.5 done, runs at full rate: ends at 15 + 4.5 = 19.5.
 * Without the factors (the default, and after sim_clear) the same tasks end at 4, 10, 12. The
 * copy engine (neither compute nor link) is never slowed. */
static void test_interference(void **state)
{
    (void)state;
    sim s;
    sim_init(&s);
    for (int pass = 0; pass < 3; pass++) {
        sim_clear(&s);
        int cu = sim_add_resource(&s, "compute", SIM_RES_EXCLUSIVE);
        int link = sim_add_resource(&s, "inter", SIM_RES_SHARED);
        int ce = sim_add_resource(&s, "copy engine", SIM_RES_EXCLUSIVE);
        sim_mark_compute(&s, cu);
        if (pass == 1)
            sim_set_interference(&s, 2.0, 1.5);
        if (pass == 2)
            sim_set_interference(&s, 0.5, 0.0); /* below 1: none */
        int g = sim_add_task(&s, cu, -1, FSMOE_TASK_EXPERT, 0.0, 10.0);
        int a = sim_add_task(&s, link, -1, FSMOE_TASK_A2A, 0.0, 2.0);
        int b = sim_add_task(&s, link, -1, FSMOE_TASK_GRAD_AR, 0.0, 10.0);
        int c = sim_add_task(&s, ce, -1, FSMOE_TASK_COPY, 0.0, 3.0);
        run_ok(&s);
        if (pass == 1) {
            assert_close(s.tasks[a].end_s, 8.0);
            assert_close(s.tasks[g].end_s, 15.0);
            assert_close(s.tasks[b].end_s, 19.5);
        } else {
            assert_close(s.tasks[a].end_s, 4.0);
            assert_close(s.tasks[g].end_s, 10.0);
            assert_close(s.tasks[b].end_s, 12.0);
        }
        assert_close(s.tasks[c].end_s, 3.0);
    }
    sim_free(&s);
}

/* The growing arrival skew: compute 4 s, a collective (latency 1 s), compute 10 s, a collective,
 * with rho 0.1 the first waits 0.4 s more (4 s since the iteration began), the second 1 s (10 s
 * since the first ended); a copy (not a collective) waits nothing, nor does a collective of a
 * group of one rank (a zero line), which does not end a segment either. rho 0 (and a negative
 * one, and sim_clear) leaves the plain chain. */
static void test_sync_growth(void **state)
{
    (void)state;
    const double rhos[] = {0.1, 0.0, -1.0};
    sim s;
    sim_init(&s);
    for (size_t j = 0; j < sizeof rhos / sizeof *rhos; j++) {
        sim_clear(&s);
        int cu = sim_add_resource(&s, "compute", SIM_RES_EXCLUSIVE);
        int link = sim_add_resource(&s, "inter", SIM_RES_SHARED);
        int cp = sim_add_resource(&s, "copy", SIM_RES_EXCLUSIVE);
        if (j < 2)
            sim_set_sync_growth(&s, rhos[j], 0.0);
        else
            sim_set_sync_growth(&s, rhos[j], -1.0), assert_close(s.sync_growth, 0.0),
                assert_close(s.sync_growth_from, 0.0);
        int c1 = sim_add_task(&s, cu, -1, FSMOE_TASK_EXPERT, 0.0, 4.0);
        int x1 = sim_add_task(&s, link, -1, FSMOE_TASK_A2A, 1.0, 0.0);
        int c2 = sim_add_task(&s, cu, -1, FSMOE_TASK_ATTN, 0.0, 10.0);
        int x2 = sim_add_task(&s, link, -1, FSMOE_TASK_GRAD_AR, 1.0, 0.0);
        int d = sim_add_task(&s, cp, -1, FSMOE_TASK_COPY, 1.0, 0.0);
        /* a group of one rank's collective (a zero line): nothing to wait for, and no end */
        int z = sim_add_task(&s, link, -1, FSMOE_TASK_AR_MP, 0.0, 0.0);
        sim_add_dep(&s, x1, c1), sim_add_dep(&s, c2, x1), sim_add_dep(&s, x2, c2);
        sim_add_dep(&s, z, c2), sim_add_dep(&s, d, x2);
        run_ok(&s);
        assert_close(s.tasks[z].skew_s, 0.0);
        assert_close(s.tasks[z].end_s - s.tasks[z].start_s, 0.0);
        double rho = rhos[j] > 0.0 ? rhos[j] : 0.0;
        assert_close(s.tasks[x1].skew_s, 0.4 * (rho / 0.1));
        assert_close(s.tasks[x2].skew_s, 1.0 * (rho / 0.1));
        assert_close(s.tasks[d].skew_s, 0.0);
        assert_close(s.tasks[x1].end_s, 5.0 + 4.0 * rho);
        assert_close(s.makespan_s, 17.0 + 14.0 * rho);
    }
    sim_set_sync_growth(&s, 0.5, 2.0);
    sim_clear(&s);
    assert_close(s.sync_growth, 0.0);
    assert_close(s.sync_growth_from, 0.0);
    sim_free(&s);
}

/* The growth starting at segment g (a calibrated profile's shortest fitted segment, the
 * line's value there in the collectives' α): rho 0.1, g 6 s. Compute 4 s, a collective
 * (latency 1 s; segment 4 s, below g: nothing more); compute 10 s, a collective (segment 10 s:
 * 0.1 x 4 s more); a second collective right after it (segment 0, as a chunk's next
 * collective: nothing more). */
static void test_sync_growth_from(void **state)
{
    (void)state;
    sim s;
    sim_init(&s);
    int cu = sim_add_resource(&s, "compute", SIM_RES_EXCLUSIVE);
    int link = sim_add_resource(&s, "inter", SIM_RES_SHARED);
    sim_set_sync_growth(&s, 0.1, 6.0);
    int c1 = sim_add_task(&s, cu, -1, FSMOE_TASK_EXPERT, 0.0, 4.0);
    int x1 = sim_add_task(&s, link, -1, FSMOE_TASK_A2A, 1.0, 0.0);
    int c2 = sim_add_task(&s, cu, -1, FSMOE_TASK_ATTN, 0.0, 10.0);
    int x2 = sim_add_task(&s, link, -1, FSMOE_TASK_A2A, 1.0, 0.0);
    int x3 = sim_add_task(&s, link, -1, FSMOE_TASK_A2A, 1.0, 0.0);
    sim_add_dep(&s, x1, c1), sim_add_dep(&s, c2, x1), sim_add_dep(&s, x2, c2);
    sim_add_dep(&s, x3, x2);
    run_ok(&s);
    assert_close(s.tasks[x1].skew_s, 0.0);
    assert_close(s.tasks[x2].skew_s, 0.4);
    assert_close(s.tasks[x3].skew_s, 0.0);
    assert_close(s.makespan_s, 4.0 + 1.0 + 10.0 + 1.4 + 1.0);
    sim_free(&s);
}

/* Host sharing in lockstep: compute work W, then a wait D on a link (not compute). 4 ranks on
 * 2 cores compute at half a core each whenever one does: lines measured with all 4 at once
 * keep their speed (x = 1), lines measured with 2 at once (a core each) run at half of it
 * (x = 0.5); whatever the wait D, which a binomial share would turn into speed. Off where ranks
 * do not outnumber cores, and for an at_once outside 1..R. */
static void test_host_sharing_lockstep(void **state)
{
    (void)state;
    const double W = 6.0;
    const struct {
        int ranks, cores, at_once;
        double speed;
    } cases[] = {{4, 2, 4, 1.0}, {4, 2, 2, 0.5}, {4, 2, 1, 0.5}, {8, 2, 4, 0.5},
                 {6, 4, 6, 1.0}, {2, 2, 2, 1.0}, {4, 2, 5, 1.0}, {4, 2, 0, 1.0}};
    const double waits[] = {0.0, 4.0, 40.0};
    sim s;
    sim_init(&s);
    for (size_t j = 0; j < sizeof cases / sizeof *cases; j++) {
        double x = cases[j].speed;
        assert_close(sim_host_speed(cases[j].ranks, cases[j].cores, cases[j].at_once), x);
        for (size_t w = 0; w < sizeof waits / sizeof *waits; w++) {
            double D = waits[w];
            sim_clear(&s);
            int cu = sim_add_resource(&s, "compute", SIM_RES_EXCLUSIVE);
            int link = sim_add_resource(&s, "inter", SIM_RES_SHARED);
            sim_mark_compute(&s, cu);
            sim_set_host_sharing(&s, cases[j].ranks, cases[j].cores, cases[j].at_once);
            int g = sim_add_task(&s, cu, -1, FSMOE_TASK_EXPERT, 0.0, W);
            int a = sim_add_task(&s, link, -1, FSMOE_TASK_A2A, 0.0, D);
            sim_add_dep(&s, a, g);
            run_ok(&s);
            assert_close(s.host_speed, x);
            assert_close(s.tasks[g].end_s, W / x);
            assert_close(s.makespan_s, W / x + D);
            /* the link's task is not compute: its duration stays D */
            assert_close(s.tasks[a].end_s - s.tasks[a].start_s, D);
        }
    }
    sim_free(&s);
}

static void test_golden_pipeline(void **state)
{
    (void)state;
    sim s;
    sim_init(&s);
    int cu = sim_add_resource(&s, "compute", SIM_RES_EXCLUSIVE);
    int intra = sim_add_resource(&s, "intra", SIM_RES_SHARED);
    int inter = sim_add_resource(&s, "inter", SIM_RES_SHARED);
    int s_intra = sim_add_stream(&s, "intra", intra);
    int s_inter = sim_add_stream(&s, "inter", inter);
    int D[2], AG[2], E[2], RS[2], C[2];
    for (int j = 0; j < 2; j++) {
        D[j] = sim_add_task(&s, inter, s_inter, FSMOE_TASK_A2A, 0.0, 1.0);
        s.tasks[D[j]].priority = 1;
        AG[j] = sim_add_task(&s, intra, s_intra, FSMOE_TASK_AG, 0.0, 0.5);
        s.tasks[AG[j]].priority = 1;
        E[j] = sim_add_task(&s, cu, -1, FSMOE_TASK_EXPERT, 0.0, 2.0);
        RS[j] = sim_add_task(&s, intra, s_intra, FSMOE_TASK_RS, 0.0, 0.5);
        s.tasks[RS[j]].priority = 2;
        C[j] = sim_add_task(&s, inter, s_inter, FSMOE_TASK_A2A, 0.0, 1.0);
        s.tasks[C[j]].priority = 2;
        sim_add_dep(&s, AG[j], D[j]);
        sim_add_dep(&s, E[j], AG[j]);
        sim_add_dep(&s, RS[j], E[j]);
        sim_add_dep(&s, C[j], RS[j]);
        if (j > 0) {
            sim_add_dep(&s, D[j], D[j - 1]);
            sim_add_dep(&s, E[j], E[j - 1]);
        }
    }
    run_ok(&s);
    const double want[5][2][2] = {
        {{0, 1}, {1, 2}}, {{1, 1.5}, {2, 2.5}}, {{1.5, 3.5}, {3.5, 5.5}},
        {{3.5, 4}, {5.5, 6}}, {{4, 5}, {6, 7}},
    };
    const int *ids[5] = {D, AG, E, RS, C};
    for (int o = 0; o < 5; o++)
        for (int j = 0; j < 2; j++) {
            assert_close(s.tasks[ids[o][j]].start_s, want[o][j][0]);
            assert_close(s.tasks[ids[o][j]].end_s, want[o][j][1]);
        }
    assert_close(s.makespan_s, 7.0);
    assert_close(s.res[cu].busy_s, 4.0);
    assert_close(s.res[inter].busy_s, 4.0);
    assert_close(s.res[intra].busy_s, 2.0);
    /* critical path D1 AG1 E1 E2 RS2 C2 */
    int want_cp[] = {D[0], AG[0], E[0], E[1], RS[1], C[1]};
    assert_int_equal(s.n_critical, 6);
    for (int i = 0; i < 6; i++)
        assert_int_equal(s.critical[i], want_cp[i]);
    assert_close(s.critical_s, 7.0);
    sim_free(&s);
}

static void test_errors(void **state)
{
    (void)state;
    sim s;
    sim_init(&s);
    fsmoe_error err = {0};
    int cu = sim_add_resource(&s, "compute", SIM_RES_EXCLUSIVE);
    int a = sim_add_task(&s, cu, -1, FSMOE_TASK_FFN, 0.0, 1.0);
    int b = sim_add_task(&s, cu, -1, FSMOE_TASK_FFN, 0.0, 1.0);
    sim_add_dep(&s, a, b);
    sim_add_dep(&s, b, a);
    assert_int_equal(sim_run(&s, &err), FSMOE_ERR_INTERNAL);
    assert_non_null(strstr(err.msg, "cycle"));
    sim_clear(&s);
    cu = sim_add_resource(&s, "compute", SIM_RES_EXCLUSIVE);
    a = sim_add_task(&s, cu, -1, FSMOE_TASK_FFN, 0.0, -1.0);
    assert_int_equal(sim_run(&s, &err), FSMOE_ERR_VALUE);
    sim_clear(&s);
    cu = sim_add_resource(&s, "compute", SIM_RES_EXCLUSIVE);
    a = sim_add_task(&s, cu, -1, FSMOE_TASK_FFN, 0.0, 1.0);
    s.tasks[a].priority = SIM_PRIO_LEVELS;
    assert_int_equal(sim_run(&s, &err), FSMOE_ERR_VALUE);
    sim_clear(&s);
    /* an empty simulation is fine */
    assert_int_equal(sim_run(&s, &err), FSMOE_OK);
    assert_close(s.makespan_s, 0.0);
    sim_free(&s);
}

/* Random DAGs on 2 compute units, 2 links with 3 streams: start ≥ every dependency's end,
 * exclusive units and streams never overlap, each link's bandwidth-busy time equals the work it
 * carried, makespan ≥ every busy time and = the critical path's length, and each task lasts at
 * least α + w. */
static void test_random_invariants(void **state)
{
    (void)state;
    sim s;
    sim_init(&s);
    unsigned seed = 12345u;
    for (int trial = 0; trial < 200; trial++) {
        sim_clear(&s);
        int res[4];
        res[0] = sim_add_resource(&s, "c0", SIM_RES_EXCLUSIVE);
        res[1] = sim_add_resource(&s, "c1", SIM_RES_EXCLUSIVE);
        res[2] = sim_add_resource(&s, "l0", SIM_RES_SHARED);
        res[3] = sim_add_resource(&s, "l1", SIM_RES_SHARED);
        int st[3] = {sim_add_stream(&s, "a", res[2]), sim_add_stream(&s, "b", res[2]),
                     sim_add_stream(&s, "c", res[3])};
        int n = 5 + (int)(rand_r(&seed) % 40);
        for (int i = 0; i < n; i++) {
            int r = (int)(rand_r(&seed) % 4);
            int stream = -1;
            if (r == 2 && rand_r(&seed) % 2)
                stream = st[rand_r(&seed) % 2];
            if (r == 3 && rand_r(&seed) % 2)
                stream = st[2];
            double a = (rand_r(&seed) % 3) * 0.1, w = (rand_r(&seed) % 10) * 0.3;
            int t = sim_add_task(&s, res[r], stream, FSMOE_TASK_A2A, a, w);
            s.tasks[t].priority = (int)(rand_r(&seed) % 3);
            if (r >= 2 && rand_r(&seed) % 4 == 0)
                s.tasks[t].flags = SIM_TASK_DEFER;
            for (int d = 0; d < 3 && i > 0; d++)
                if (rand_r(&seed) % 2)
                    sim_add_dep(&s, t, (int)(rand_r(&seed) % (unsigned)i));
        }
        run_ok(&s);
        double work[4] = {0};
        for (int i = 0; i < n; i++) {
            const sim_task *k = &s.tasks[i];
            work[k->resource] += k->work_s;
            assert_true(k->end_s - k->start_s >= k->alpha_s + k->work_s - 1e-9);
            for (int d = 0; d < k->n_deps; d++)
                assert_true(k->start_s >= s.tasks[s.dep_ids[k->dep_first + d]].end_s - 1e-12);
            for (int j = 0; j < i; j++) {
                const sim_task *o = &s.tasks[j];
                int share = (o->stream >= 0 && o->stream == k->stream) ||
                            (o->resource == k->resource &&
                             s.res[k->resource].mode == SIM_RES_EXCLUSIVE);
                if (share && o->end_s - o->start_s > 1e-12 && k->end_s - k->start_s > 1e-12)
                    assert_true(o->end_s <= k->start_s + 1e-9 || k->end_s <= o->start_s + 1e-9);
            }
        }
        for (int r = 0; r < 4; r++) {
            assert_true(s.makespan_s >= s.res[r].busy_s - 1e-9);
            if (s.res[r].mode == SIM_RES_SHARED)
                assert_true(fabs(s.res[r].bw_busy_s - work[r]) < 1e-9);
        }
        assert_true(s.makespan_s >= s.critical_s - 1e-9);
        assert_true(fabs(s.makespan_s - s.critical_s) < 1e-9);
    }
    sim_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_closed_form), cmocka_unit_test(test_exclusive_priority),
        cmocka_unit_test(test_two_equal_transfers), cmocka_unit_test(test_staggered_share),
        cmocka_unit_test(test_latency_not_shared), cmocka_unit_test(test_stream_order),
        cmocka_unit_test(test_deferred_launch), cmocka_unit_test(test_golden_pipeline),
        cmocka_unit_test(test_interference),
        cmocka_unit_test(test_host_sharing_lockstep), cmocka_unit_test(test_sync_growth),
        cmocka_unit_test(test_sync_growth_from),
        cmocka_unit_test(test_errors), cmocka_unit_test(test_random_invariants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
