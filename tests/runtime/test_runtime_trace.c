/* fsmoe-run --trace: the executed tasks of a step are the ones its pipeline degrees prescribe
 * (per MoE layer and phase r Dispatch AllToAlls, r experts and r Combine AllToAlls, chunks 0..r-1,
 * with each layer's own r_fwd and r_bwd), timed where they run: every task ends after it starts,
 * chunk j's expert starts after its Dispatch ends and its Combine after the expert, and the
 * communication stream runs its tasks one at a time in issue order. The JSON written has one
 * complete event per kept task. Independent side: the degrees set on the layers. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report.h"
#include "trace.h"
#include "train.h"
#include "../test_fs.h"

static char datafile[160], jsonfile[160];

static int setup(void **s)
{
    (void)s;
    snprintf(datafile, sizeof datafile, "/tmp/fsmoe_trace.%d.txt", (int)getpid());
    snprintf(jsonfile, sizeof jsonfile, "/tmp/fsmoe_trace.%d.json", (int)getpid());
    test_write_corpus(datafile);
    return 0;
}

static int teardown(void **s)
{
    (void)s;
    remove(datafile);
    remove(jsonfile);
    return 0;
}

/* Index of the n-th (0-based) kept task of step/phase/layer/chunk/kind, or -1. */
static long find(const rt_trace *tr, long from, long to, int phase, int layer, int chunk,
                 fsmoe_task_kind k, int n)
{
    for (long i = from; i < to; i++) {
        const rt_trace_event *e = &tr->ev[i];
        if (e->phase == phase && e->layer == layer && e->chunk == chunk && e->kind == k && n-- == 0)
            return i;
    }
    return -1;
}

static long count(const rt_trace *tr, long from, long to, int phase, int layer,
                  fsmoe_task_kind k)
{
    long n = 0;
    for (long i = from; i < to; i++)
        n += tr->ev[i].phase == phase && tr->ev[i].layer == layer && tr->ev[i].kind == k;
    return n;
}

static void test_trace_follows_degrees(void **state)
{
    (void)state;
    rt_config c;
    config_defaults(&c);
    c.V = 256, c.M = 16, c.H = 32, c.heads = 2, c.layers = 3, c.L = 16, c.B = 4, c.E = 4, c.k = 2;
    c.f = 1.0, c.steps = 4, c.seed = 5;
    fsmoe_error err = {0};
    rt_data d;
    rt_backend *be = NULL;
    rt_trainer tr;
    assert_int_equal(data_load(&d, datafile, c.V, c.L, &err), FSMOE_OK);
    assert_int_equal(rt_backend_create("host", 1, &be, &err), FSMOE_OK);
    assert_int_equal(trainer_init(&tr, &c, be, &d, &err), FSMOE_OK);
    int n_moe = 0, rf[8], rb[8];
    for (long b = 0; b < c.layers; b++) {
        rt_moe *m = &tr.model.blocks[b].moe;
        if (!tr.model.blocks[b].is_moe)
            continue;
        m->r_fwd = rf[m->index] = m->index + 2;
        m->r_bwd = rb[m->index] = 3 - m->index % 2;
        n_moe++;
    }
    assert_true(n_moe >= 2);
    rt_trace t;
    rt_trace_init(&t, be);
    long first[3];
    for (int s = 0; s < 2; s++) {
        first[s] = t.n_ev;
        model_set_trace(&tr.model, &t);
        assert_int_equal(trainer_step(&tr, NULL, NULL, NULL, &err), FSMOE_OK);
        be->stream_sync(be, tr.model.comp);
        be->stream_sync(be, tr.model.comm);
        assert_int_equal(rt_trace_step(&t, s, &err), FSMOE_OK);
        model_set_trace(&tr.model, NULL);
    }
    first[2] = t.n_ev;
    assert_int_equal(t.step_first, t.n_ev);
    for (int s = 0; s < 2; s++) {
        long a = first[s], z = first[s + 1];
        double comm_end = -1.0;
        for (long i = a; i < z; i++) {
            const rt_trace_event *e = &t.ev[i];
            assert_int_equal(e->step, s);
            assert_true(e->t1_s >= e->t0_s);
            if (e->stream == RT_TRACE_COMM) { /* in issue order, one at a time */
                assert_true(e->t0_s >= comm_end);
                comm_end = e->t1_s;
            }
        }
        /* one rank: each chunk's Dispatch and Combine are the local copies of a one-member
         * exchange (traced as copy, no AllToAll: the graph plans none on one rank) */
        for (int l = 0; l < n_moe; l++)
            for (int ph = 0; ph < 2; ph++) {
                int r = ph ? rb[l] : rf[l];
                assert_int_equal(count(&t, a, z, ph, l, FSMOE_TASK_A2A), 0);
                assert_int_equal(count(&t, a, z, ph, l, FSMOE_TASK_COPY), 2 * r);
                assert_int_equal(count(&t, a, z, ph, l, FSMOE_TASK_EXPERT), r);
                assert_int_equal(count(&t, a, z, ph, l, FSMOE_TASK_GATE), 2);
                for (int j = 0; j < r; j++) {
                    long dsp = find(&t, a, z, ph, l, j, FSMOE_TASK_COPY, 0);
                    long ex = find(&t, a, z, ph, l, j, FSMOE_TASK_EXPERT, 0);
                    long cmb = find(&t, a, z, ph, l, j, FSMOE_TASK_COPY, 1);
                    assert_true(dsp >= 0 && ex >= 0 && cmb >= 0);
                    assert_int_equal(t.ev[ex].stream, RT_TRACE_COMPUTE);
                    assert_true(t.ev[ex].t0_s >= t.ev[dsp].t1_s);
                    assert_true(t.ev[cmb].t0_s >= t.ev[ex].t1_s);
                }
            }
        /* one attention block per transformer block and phase */
        long attn = 0;
        for (long i = a; i < z; i++)
            attn += t.ev[i].kind == FSMOE_TASK_ATTN;
        assert_int_equal(attn, 2 * c.layers);
    }
    /* the JSON: one complete ("X") event per kept task */
    assert_int_equal(rt_trace_write(&t, 0, "trace test", jsonfile, &err), FSMOE_OK);
    FILE *f = fopen(jsonfile, "r");
    assert_non_null(f);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    long x = 0;
    for (const char *p = buf; (p = strstr(p, "\"ph\":\"X\"")); p++)
        x++;
    assert_int_equal(x, t.n_ev);
    assert_non_null(strstr(buf, "\"name\":\"fwd L1 c2 copy\""));
    rt_trace_free(&t);
    trainer_free(&tr);
    rt_backend_destroy(&be);
    data_free(&d);
}

static void test_null_recorder(void **state)
{
    (void)state;
    assert_int_equal(rt_trace_begin(NULL, NULL, 0, FSMOE_TASK_ATTN, 0, 0, 0), -1);
    rt_trace_end(NULL, NULL, 0);
    fsmoe_error err = {0};
    assert_int_equal(rt_trace_step(NULL, 0, &err), FSMOE_OK);
}

/* --report's collectives on all ranks (report.h rt_report_split), from the other side: ranks
 * reach a collective at known times a[w] and it takes x once the last is there, so rank w
 * spends (max a − a[w]) + x in it; the split must give back x alone and the ranks' mean wait.
 * Random arrivals, several group sizes; one rank (nothing to wait for) and all at once. */
static void test_report_split(void **state)
{
    (void)state;
    unsigned long long seed = 12345;
    for (int trial = 0; trial < 200; trial++) {
        int W = 1 + trial % 9;
        double a[9], t[9], last = 0.0, wait = 0.0, x = 1e-4 * (1 + trial % 7);
        for (int w = 0; w < W; w++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            a[w] = trial % 5 == 0 ? 0.25 : (double)(seed >> 11) / 9007199254740992.0 * 0.01;
            last = a[w] > last ? a[w] : last;
        }
        for (int w = 0; w < W; w++) {
            t[w] = last - a[w] + x;
            wait += (last - a[w]) / W;
        }
        double alone = -1, waiting = -1;
        rt_report_split(t, W, &alone, &waiting);
        assert_true(fabs(alone - x) <= 1e-15);
        assert_true(fabs(waiting - wait) <= 1e-15);
        if (W == 1 || trial % 5 == 0)
            assert_true(fabs(waiting) <= 1e-15);
    }
}

/* --report's skew line (rt_report_skew_fit): points on a known line a + rho·x come back
 * exactly (r2 1); symmetric noise around it leaves a and rho and lowers r2 below 1; a constant x
 * gives rho 0, a the mean and r2 0 (nothing to fit a slope to). */
static void test_report_skew_fit(void **state)
{
    (void)state;
    double x[8], y[8], a, rho, r2;
    for (int i = 0; i < 8; i++)
        x[i] = 1e-3 * (1 + 3 * i), y[i] = 1.2e-3 + 0.07 * x[i];
    rt_report_skew_fit(x, y, 8, &a, &rho, &r2);
    assert_true(fabs(a - 1.2e-3) < 1e-15 && fabs(rho - 0.07) < 1e-12 && fabs(r2 - 1.0) < 1e-12);
    for (int i = 0; i < 8; i++) /* +e, -e in pairs at the same x: the line stays */
        x[i] = 1e-3 * (1 + 3 * (i / 2)), y[i] = 1.2e-3 + 0.07 * x[i] + (i % 2 ? -1e-4 : 1e-4);
    rt_report_skew_fit(x, y, 8, &a, &rho, &r2);
    assert_true(fabs(a - 1.2e-3) < 1e-15 && fabs(rho - 0.07) < 1e-12 && r2 > 0.5 && r2 < 1.0);
    for (int i = 0; i < 4; i++)
        x[i] = 2e-3, y[i] = 1e-3 * i;
    rt_report_skew_fit(x, y, 4, &a, &rho, &r2);
    assert_true(rho == 0.0 && fabs(a - 1.5e-3) < 1e-15 && r2 == 0.0);
}

/* What --calibrate writes of a skew line (rt_report_skew_hold), by hand: a line above zero at
 * its shortest segment 4 ms (1 ms + 0.1 x segment) starts there, at 1.4 ms; one that crosses
 * zero at 5 ms (-1 ms + 0.2 x segment), after its shortest segment 2 ms, starts at 5 ms at 0;
 * one that crosses zero before its shortest segment 10 ms starts there (at 1 ms); a shrinking
 * or flat line is the points' mean from segment 0. */
static void test_report_skew_hold(void **state)
{
    (void)state;
    double c, r, from;
    rt_report_skew_hold(1e-3, 0.1, 4e-3, 2e-3, &c, &r, &from);
    assert_true(fabs(c - 1.4e-3) < 1e-15 && r == 0.1 && fabs(from - 4e-3) < 1e-15);
    rt_report_skew_hold(-1e-3, 0.2, 2e-3, 3e-3, &c, &r, &from);
    assert_true(c < 1e-15 && r == 0.2 && fabs(from - 5e-3) < 1e-15);
    rt_report_skew_hold(-1e-3, 0.2, 10e-3, 3e-3, &c, &r, &from);
    assert_true(fabs(c - 1e-3) < 1e-15 && r == 0.2 && fabs(from - 10e-3) < 1e-15);
    rt_report_skew_hold(5e-3, -0.1, 2e-3, 3e-3, &c, &r, &from);
    assert_true(c == 3e-3 && r == 0.0 && from == 0.0);
    rt_report_skew_hold(3e-3, 0.0, 2e-3, 3e-3, &c, &r, &from);
    assert_true(c == 3e-3 && r == 0.0 && from == 0.0);
}

/* When a calibration's run is suspect (rt_report_calibration_suspect): the median step above
 * 1.5x its prediction, or the p90 above 1.5x the median; not at 1.5x exactly, not where the run
 * was faster than predicted, not without step times. */
static void test_calibration_suspect(void **state)
{
    (void)state;
    rt_report_result r;
    memset(&r, 0, sizeof r);
    assert_null(rt_report_calibration_suspect(&r));
    r.step_median_s = 0.5, r.step_p90_s = 0.55, r.step_predicted_s = 0.56;
    assert_null(rt_report_calibration_suspect(&r));
    r.step_median_s = 0.3, r.step_p90_s = 0.4; /* faster than predicted */
    assert_null(rt_report_calibration_suspect(&r));
    r.step_median_s = 0.75, r.step_p90_s = 0.8, r.step_predicted_s = 0.5; /* exactly 1.5x */
    assert_null(rt_report_calibration_suspect(&r));
    r.step_predicted_s = 0.56;
    r.step_median_s = 2.554, r.step_p90_s = 4.453; /* a slow stretch's calibration */
    assert_non_null(strstr(rt_report_calibration_suspect(&r), "median step"));
    r.step_median_s = 0.5, r.step_p90_s = 0.76; /* the speed moved */
    assert_non_null(strstr(rt_report_calibration_suspect(&r), "p90"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_follows_degrees),
        cmocka_unit_test(test_report_split),
        cmocka_unit_test(test_report_skew_fit),
        cmocka_unit_test(test_report_skew_hold),
        cmocka_unit_test(test_calibration_suspect),
        cmocka_unit_test(test_null_recorder),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
