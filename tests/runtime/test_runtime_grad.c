/* Finite-difference gradient checks of the whole MoE transformer in double precision (the
 * runtime compiled with -DFSMOE_REAL_DOUBLE), for every gate, both orders and both expert
 * kinds, dense and MoE blocks, with routing held fixed. Also: GShard order == Tutel order,
 * the result does not depend on the number of chunks r, hooks fire in order, and each gate's
 * routing obeys its definition. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "transformer.h"

static rt_config tiny(rt_gate_kind gate, rt_order_kind order, int expert, double f)
{
    rt_config c;
    config_defaults(&c);
    c.V = 11, c.M = 8, c.H = 12, c.heads = 2, c.layers = 2, c.L = 5, c.B = 2;
    c.E = 3, c.k = 2, c.expert = expert, c.f = f, c.gate = gate, c.order = order;
    c.moe_every = 1, c.moe_first = 1; /* block 0 dense, block 1 MoE */
    c.aux_coef = 0.1, c.init_std = 0.3, c.seed = 7, c.softmoe_slots = 2;
    if (gate == RT_GATE_EXPERT_CHOICE)
        c.k = 1;
    return c;
}

static void batch(const rt_config *c, int *tok, int *tgt)
{
    for (long i = 0; i < c->B * c->L; i++) {
        tok[i] = (int)((i * 7 + 3) % c->V);
        tgt[i] = (int)((i * 5 + 1) % c->V);
    }
}

static double loss_at(rt_model *md, const int *tok, const int *tgt)
{
    fsmoe_error err = {0};
    assert_int_equal(model_forward(md, tok, tgt, 0, 0, &err), FSMOE_OK);
    return md->loss;
}

/* Checks every tensor at up to `per` entries; returns the worst relative error. */
static double fd_check(const rt_config *c, int verbose)
{
    rt_backend *be = NULL;
    fsmoe_error err = {0};
    assert_int_equal(rt_backend_create("host", 1, &be, &err), FSMOE_OK);
    rt_model md;
    assert_int_equal(model_init(&md, c, be, &err), FSMOE_OK);
    int tok[256], tgt[256];
    assert_true(c->B * c->L <= 256);
    batch(c, tok, tgt);
    loss_at(&md, tok, tgt); /* routing decided here ... */
    model_freeze_routing(&md, 1); /* ... and held fixed from now on */
    model_zero_grad(&md);
    loss_at(&md, tok, tgt);
    assert_int_equal(model_backward(&md, &err), FSMOE_OK);
    double worst = 0;
    const double h = 1e-6;
    for (int i = 0; i < md.params.n; i++) {
        const rt_param *p = &md.params.p[i];
        long step = p->numel > 6 ? p->numel / 6 : 1;
        for (long j = 0; j < p->numel; j += step) {
            double *w = *p->w + j, g = (*p->g)[j], w0 = *w;
            *w = w0 + h;
            double lp = loss_at(&md, tok, tgt);
            *w = w0 - h;
            double lm = loss_at(&md, tok, tgt);
            *w = w0;
            double num = (lp - lm) / (2 * h);
            double rel = fabs(num - g) / (fabs(num) + fabs(g) + 1e-4); /* floor: exact zeros vs rounding */
            if (rel > worst)
                worst = rel;
            if (verbose && rel > 1e-4)
                printf("  %s[%ld]: analytic %.9g numeric %.9g (rel %.2g)\n", p->name, j, g, num,
                       rel);
        }
    }
    model_free(&md);
    rt_backend_destroy(&be);
    return worst;
}

static void check_cfg(rt_gate_kind gate, rt_order_kind order, int expert, double f)
{
    rt_config c = tiny(gate, order, expert, f);
    double worst = fd_check(&c, 1);
    printf("# fd %-13s %-6s %-6s f=%-4g worst rel err %.3g\n", gate_kind_name(gate),
           order_kind_name(order), expert ? "swiglu" : "gpt", f, worst);
    assert_true(worst < 1e-5);
}

static void test_fd_gshard_tutel_gpt(void **s) { (void)s; check_cfg(RT_GATE_GSHARD, RT_ORDER_TUTEL, 0, 1.0); }
static void test_fd_gshard_gshard_swiglu(void **s) { (void)s; check_cfg(RT_GATE_GSHARD, RT_ORDER_GSHARD, 1, 0); }
static void test_fd_sigmoid(void **s) { (void)s; check_cfg(RT_GATE_SIGMOID, RT_ORDER_TUTEL, 1, 1.5); }
static void test_fd_xmoe(void **s) { (void)s; check_cfg(RT_GATE_XMOE, RT_ORDER_TUTEL, 0, 0); }
static void test_fd_expert_choice(void **s) { (void)s; check_cfg(RT_GATE_EXPERT_CHOICE, RT_ORDER_GSHARD, 0, 1.0); }
/* grouped-query attention: 4 query heads over 2 key/value heads (g = 2, two groups) */
static void test_fd_gqa(void **s)
{
    (void)s;
    rt_config c = tiny(RT_GATE_GSHARD, RT_ORDER_TUTEL, 0, 1.0);
    c.heads = 4, c.kv_heads = 2;
    double worst = fd_check(&c, 1);
    printf("# fd gqa heads=4 kv_heads=2 worst rel err %.3g\n", worst);
    assert_true(worst < 1e-5);
    /* the projection has nkv, not nh, key and value heads */
    rt_backend *be = NULL;
    fsmoe_error err = {0};
    assert_int_equal(rt_backend_create("host", 1, &be, &err), FSMOE_OK);
    rt_model md;
    assert_int_equal(model_init(&md, &c, be, &err), FSMOE_OK);
    int found = 0;
    for (int i = 0; i < md.params.n; i++)
        if (strcmp(md.params.p[i].name, "h0.attn.wqkv") == 0) {
            assert_int_equal(md.params.p[i].shape[1], (4 + 2 * 2) * 2); /* (M, (nh + 2nkv)·d) */
            found = 1;
        }
    assert_true(found);
    model_free(&md);
    rt_backend_destroy(&be);
}

/* a sequence long enough for causal attention by query blocks (attention.c: 100 queries in
 * blocks of 34, 34 and 32), with one key/value head per query head and with two query heads
 * per key/value head */
static void test_fd_query_blocks(void **s)
{
    (void)s;
    for (int gqa = 0; gqa < 2; gqa++) {
        rt_config c = tiny(RT_GATE_GSHARD, RT_ORDER_TUTEL, 0, 1.0);
        c.L = 100, c.B = 1;
        if (gqa)
            c.heads = 4, c.kv_heads = 2;
        double worst = fd_check(&c, 1);
        printf("# fd L=100 heads=%ld kv_heads=%ld worst rel err %.3g\n", c.heads,
               gqa ? c.kv_heads : c.heads, worst);
        assert_true(worst < 1e-5);
    }
}

static void test_fd_softmoe(void **s) { (void)s; check_cfg(RT_GATE_SOFTMOE, RT_ORDER_GSHARD, 1, 1.0); }

/* The same model and batch through both orders and several chunk counts: identical loss and
 * gradients (to rounding). */
static void run_grads(rt_config c, int r, double *loss, double **grads, long *n)
{
    rt_backend *be = NULL;
    fsmoe_error err = {0};
    assert_int_equal(rt_backend_create("host", 1, &be, &err), FSMOE_OK);
    rt_model md;
    c.r = r;
    assert_int_equal(model_init(&md, &c, be, &err), FSMOE_OK);
    int tok[64], tgt[64];
    batch(&c, tok, tgt);
    model_zero_grad(&md);
    assert_int_equal(model_forward(&md, tok, tgt, 1, 3, &err), FSMOE_OK);
    assert_int_equal(model_backward(&md, &err), FSMOE_OK);
    *loss = md.loss;
    *n = md.params.total;
    *grads = malloc((size_t)*n * sizeof(double));
    memcpy(*grads, md.params.g, (size_t)*n * sizeof(double));
    model_free(&md);
    rt_backend_destroy(&be);
}

static void test_orders_and_chunks_agree(void **s)
{
    (void)s;
    rt_gate_kind gates[] = {RT_GATE_GSHARD, RT_GATE_SIGMOID, RT_GATE_XMOE, RT_GATE_EXPERT_CHOICE};
    for (int gi = 0; gi < 4; gi++) {
        rt_config c = tiny(gates[gi], RT_ORDER_TUTEL, 0, 1.0);
        c.gate_noise = 0.5;
        double l0, l1, l2, *g0, *g1, *g2;
        long n;
        run_grads(c, 1, &l0, &g0, &n);
        c.order = RT_ORDER_GSHARD;
        run_grads(c, 1, &l1, &g1, &n);
        c.order = RT_ORDER_TUTEL;
        run_grads(c, 3, &l2, &g2, &n);
        assert_true(fabs(l0 - l1) < 1e-12);
        assert_true(fabs(l0 - l2) < 1e-12);
        long wrong = 0;
        for (long i = 0; i < n; i++)
            wrong += fabs(g0[i] - g1[i]) > 1e-12 || fabs(g0[i] - g2[i]) > 1e-12;
        assert_int_equal(wrong, 0);
        free(g0), free(g1), free(g2);
    }
}

/* Hooks: per MoE layer and direction, BeforeMoeStart, r × (BeforeDispatch, AfterDispatch,
 * BeforeCombine, AfterCombine), BeforeMoeEnd. */
typedef struct {
    int n;
    int seq[256];
} hook_log;

static void log_hook(void *user, rt_hook h, int layer, int chunk, int backward)
{
    hook_log *l = user;
    (void)layer;
    if (l->n < 256)
        l->seq[l->n++] = (int)h * 1000 + (chunk + 1) * 10 + backward;
}

static void test_hooks(void **s)
{
    (void)s;
    rt_config c = tiny(RT_GATE_GSHARD, RT_ORDER_TUTEL, 0, 2.0);
    c.r = 2;
    rt_backend *be = NULL;
    fsmoe_error err = {0};
    assert_int_equal(rt_backend_create("host", 1, &be, &err), FSMOE_OK);
    rt_model md;
    assert_int_equal(model_init(&md, &c, be, &err), FSMOE_OK);
    hook_log log = {0};
    model_set_hook(&md, log_hook, &log);
    int tok[64], tgt[64];
    batch(&c, tok, tgt);
    assert_int_equal(model_forward(&md, tok, tgt, 0, 0, &err), FSMOE_OK);
    assert_int_equal(model_backward(&md, &err), FSMOE_OK);
    int want[64], n = 0;
    for (int bwd = 0; bwd < 2; bwd++) {
        want[n++] = RT_HOOK_BEFORE_MOE_START * 1000 + 0 + bwd;
        /* issue order D0 D1 C0 C1 for r = 2 (moe_layer.h: the next Dispatch before this
         * chunk's Combine) */
        for (int j = 0; j < 2; j++)
            for (int h = RT_HOOK_BEFORE_DISPATCH; h <= RT_HOOK_AFTER_DISPATCH; h++)
                want[n++] = h * 1000 + (j + 1) * 10 + bwd;
        for (int j = 0; j < 2; j++)
            for (int h = RT_HOOK_BEFORE_COMBINE; h <= RT_HOOK_AFTER_COMBINE; h++)
                want[n++] = h * 1000 + (j + 1) * 10 + bwd;
        want[n++] = RT_HOOK_BEFORE_MOE_END * 1000 + 0 + bwd;
    }
    assert_int_equal(log.n, n);
    for (int i = 0; i < n; i++)
        assert_int_equal(log.seq[i], want[i]);
    model_free(&md);
    rt_backend_destroy(&be);
}

/* Gate definitions on a larger random batch. */
static void test_gate_definitions(void **s)
{
    (void)s;
    for (int gk = 0; gk < RT_GATE_SOFTMOE; gk++) {
        rt_config c = tiny((rt_gate_kind)gk, RT_ORDER_TUTEL, 0, 1.0);
        c.B = 4, c.L = 8, c.E = 4;
        rt_backend *be = NULL;
        fsmoe_error err = {0};
        assert_int_equal(rt_backend_create("host", 1, &be, &err), FSMOE_OK);
        rt_model md;
        assert_int_equal(model_init(&md, &c, be, &err), FSMOE_OK);
        int tok[64], tgt[64];
        batch(&c, tok, tgt);
        assert_int_equal(model_forward(&md, tok, tgt, 0, 0, &err), FSMOE_OK);
        rt_moe *m = &md.blocks[1].moe;
        rt_routing *r = &m->route;
        rt_gate *g = &m->gate;
        long N = c.B * c.L, E = c.E, C = r->C, k = c.k;
        long cap = gate_capacity(g, N);
        if (gk == RT_GATE_EXPERT_CHOICE) {
            /* every expert exactly full with its C highest-scoring tokens */
            for (long e = 0; e < E; e++) {
                assert_int_equal(r->load[e], C);
                double lowest_taken = 1e9, highest_left = -1;
                for (long n = 0; n < N; n++) {
                    int taken = 0;
                    for (long cc = 0; cc < C; cc++)
                        taken |= r->slot_tok[e * C + cc] == n;
                    double p = g->h_probs[n * E + e];
                    if (taken)
                        lowest_taken = fmin(lowest_taken, p);
                    else
                        highest_left = fmax(highest_left, p);
                }
                assert_true(lowest_taken >= highest_left);
            }
        } else {
            assert_int_equal(C, cap);
            long total = 0;
            for (long e = 0; e < E; e++) {
                assert_true(r->load[e] <= C);
                total += r->load[e];
            }
            assert_int_equal(total + r->dropped, N * k);
            /* top-k: a chosen expert scores at least as high as any unchosen one */
            for (long n = 0; n < N; n++)
                for (long j = 0; j < k; j++)
                    for (long e = 0; e < E; e++) {
                        int chosen = 0;
                        for (long i = 0; i < k; i++)
                            chosen |= r->topk[n * k + i] == e;
                        if (!chosen)
                            assert_true(g->h_probs[n * E + r->topk[n * k + j]] >=
                                        g->h_probs[n * E + e]);
                    }
            /* renormalised softmax weights sum to 1 for tokens that kept both experts */
            if (gk == RT_GATE_GSHARD || gk == RT_GATE_XMOE)
                for (long n = 0; n < N; n++) {
                    double sum = 0;
                    int kept = 0;
                    for (long a = 0; a < r->A; a++)
                        if (r->tok[a] == n)
                            sum += r->w[a], kept++;
                    if (kept == k)
                        assert_true(fabs(sum - 1) < 1e-12);
                }
        }
        model_free(&md);
        rt_backend_destroy(&be);
    }
}

/* No-drop mode: nothing is dropped and the capacity is the largest load. */
static void test_no_drop(void **s)
{
    (void)s;
    rt_config c = tiny(RT_GATE_GSHARD, RT_ORDER_TUTEL, 0, 0);
    c.E = 4, c.B = 4, c.L = 8;
    rt_backend *be = NULL;
    fsmoe_error err = {0};
    assert_int_equal(rt_backend_create("host", 1, &be, &err), FSMOE_OK);
    rt_model md;
    assert_int_equal(model_init(&md, &c, be, &err), FSMOE_OK);
    int tok[64], tgt[64];
    batch(&c, tok, tgt);
    assert_int_equal(model_forward(&md, tok, tgt, 0, 0, &err), FSMOE_OK);
    rt_routing *r = &md.blocks[1].moe.route;
    long mx = 0;
    for (long e = 0; e < c.E; e++)
        mx = r->load[e] > mx ? r->load[e] : mx;
    assert_int_equal(r->dropped, 0);
    assert_int_equal(r->C, mx);
    model_free(&md);
    rt_backend_destroy(&be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fd_gshard_tutel_gpt),
        cmocka_unit_test(test_fd_gshard_gshard_swiglu),
        cmocka_unit_test(test_fd_sigmoid),
        cmocka_unit_test(test_fd_xmoe),
        cmocka_unit_test(test_fd_expert_choice),
        cmocka_unit_test(test_fd_softmoe),
        cmocka_unit_test(test_fd_gqa),
        cmocka_unit_test(test_fd_query_blocks),
        cmocka_unit_test(test_orders_and_chunks_agree),
        cmocka_unit_test(test_hooks),
        cmocka_unit_test(test_gate_definitions),
        cmocka_unit_test(test_no_drop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
