/* The fp32 runtime against an independent PyTorch reference (torch_ref.py, float64 autograd):
 * the same tiny MoE transformer (one dense block, one MoE block with the GShard top-2 gate and
 * capacity dropping) from the same initial weights: logits, loss and every named gradient of
 * one batch, then the losses of 10 AdamW steps. Exits 77 (skipped) without python3-torch. */
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

#include "adamw.h"
#include "backend.h"
#include "transformer.h"

#define STEPS 10

static void put(FILE *f, const void *p, size_t n) { assert_int_equal(fwrite(p, 1, n, f), n); }

static int expert_kind;
static long kv_heads; /* 0: = heads */

static void test_against_torch(void **state)
{
    (void)state;
    rt_config c;
    config_defaults(&c);
    c.V = 32, c.M = 16, c.H = 24, c.heads = 2, c.layers = 2, c.L = 8, c.B = 2;
    c.E = 4, c.k = 2, c.f = 1.0, c.expert = expert_kind, c.kv_heads = kv_heads;
    c.gate = RT_GATE_GSHARD, c.order = RT_ORDER_TUTEL, c.moe_first = 1, c.moe_every = 1;
    c.aux_coef = 0.01, c.gate_noise = 0, c.init_std = 0.1, c.seed = 42;
    c.steps = STEPS, c.warmup = 3, c.lr = 3e-3, c.lr_min = 3e-4, c.wd = 0.1, c.clip = 0.5;
    long N = c.B * c.L, V = c.V;
    rt_backend *be = NULL;
    fsmoe_error err = {0};
    assert_int_equal(rt_backend_create("host", 1, &be, &err), FSMOE_OK);
    rt_model md;
    assert_int_equal(model_init(&md, &c, be, &err), FSMOE_OK);
    int tok[STEPS][64], tgt[STEPS][64];
    unsigned x = 12345;
    for (int s = 0; s < STEPS; s++)
        for (long i = 0; i < N; i++) {
            x = x * 1103515245u + 12345u;
            tok[s][i] = (int)((x >> 16) % (unsigned)V);
            x = x * 1103515245u + 12345u;
            tgt[s][i] = (int)((x >> 16) % (unsigned)V);
        }
    char in[64], out[64], cmd[1024];
    snprintf(in, sizeof in, "/tmp/fsmoe_torch_in.%d", (int)getpid());
    snprintf(out, sizeof out, "/tmp/fsmoe_torch_out.%d", (int)getpid());
    FILE *f = fopen(in, "wb");
    assert_non_null(f);
    put(f, "FSMTREF2", 8);
    int64_t iv[15] = {c.V, c.M, c.H, c.heads, c.layers, c.L, c.B, c.E, c.k, c.moe_first,
                      c.moe_every, c.steps, config_warmup(&c), c.expert,
                      c.kv_heads > 0 ? c.kv_heads : c.heads};
    double dv[9] = {c.f, c.aux_coef, c.lr, c.lr_min, c.wd, c.beta1, c.beta2, c.eps, c.clip};
    put(f, iv, sizeof iv);
    put(f, dv, sizeof dv);
    int64_t np = md.params.n;
    put(f, &np, 8);
    for (int i = 0; i < md.params.n; i++) {
        const rt_param *p = &md.params.p[i];
        int64_t ln = (int64_t)strlen(p->name), nd = p->ndim;
        put(f, &ln, 8);
        put(f, p->name, (size_t)ln);
        put(f, &nd, 8);
        for (int d = 0; d < p->ndim; d++) {
            int64_t sd = p->shape[d];
            put(f, &sd, 8);
        }
        put(f, *p->w, (size_t)p->numel * sizeof(float));
    }
    for (int s = 0; s < STEPS; s++)
        put(f, tok[s], (size_t)N * sizeof(int));
    for (int s = 0; s < STEPS; s++)
        put(f, tgt[s], (size_t)N * sizeof(int));
    fclose(f);
    const char *root = getenv("FSMOE_SOURCE_ROOT");
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/runtime/torch_ref.py %s %s",
             root ? root : ".", in, out);
    int rc = system(cmd);
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) {
        remove(in);
        skip();
    }
    assert_int_equal(rc, 0);
    FILE *g = fopen(out, "rb");
    assert_non_null(g);
    /* batch 0: logits, loss, gradients */
    model_zero_grad(&md);
    assert_int_equal(model_forward(&md, tok[0], tgt[0], 1, 0, &err), FSMOE_OK);
    assert_int_equal(model_backward(&md, &err), FSMOE_OK);
    double *ref = malloc((size_t)(N * V) * sizeof(double));
    assert_int_equal(fread(ref, sizeof(double), (size_t)(N * V), g), (size_t)(N * V));
    long wrong = 0;
    double worst = 0;
    for (long i = 0; i < N * V; i++) {
        double d = fabs((double)md.logits[i] - ref[i]);
        worst = fmax(worst, d);
        wrong += d > 1e-4 + 1e-4 * fabs(ref[i]);
    }
    printf("# logits: max |diff| %.3g, #wrong %ld\n", worst, wrong);
    assert_int_equal(wrong, 0);
    double rl[2];
    assert_int_equal(fread(rl, sizeof(double), 2, g), 2);
    printf("# loss: C %.7f torch %.7f (ce %.7f / %.7f)\n", md.loss, rl[0], md.ce, rl[1]);
    assert_true(fabs(md.loss - rl[0]) < 1e-5);
    assert_true(fabs(md.ce - rl[1]) < 1e-5);
    for (int i = 0; i < md.params.n; i++) {
        const rt_param *p = &md.params.p[i];
        double *rg = malloc((size_t)p->numel * sizeof(double));
        assert_int_equal(fread(rg, sizeof(double), (size_t)p->numel, g), (size_t)p->numel);
        double scale = 0, maxd = 0;
        for (long j = 0; j < p->numel; j++)
            scale = fmax(scale, fabs(rg[j]));
        long bad = 0;
        for (long j = 0; j < p->numel; j++) {
            double d = fabs((double)(*p->g)[j] - rg[j]);
            maxd = fmax(maxd, d);
            bad += d > 1e-6 + 1e-3 * scale;
        }
        if (bad)
            printf("# grad %-20s max|ref| %.3g max|diff| %.3g #wrong %ld\n", p->name, scale, maxd,
                   bad);
        wrong += bad;
        free(rg);
    }
    printf("# gradients of %d tensors compared, #wrong %ld\n", md.params.n, wrong);
    assert_int_equal(wrong, 0);
    /* 10 training steps from the same initial weights */
    model_free(&md);
    assert_int_equal(model_init(&md, &c, be, &err), FSMOE_OK);
    rt_adamw opt;
    assert_int_equal(adamw_init(&opt, &md.params, be, &err), FSMOE_OK);
    double rloss[STEPS];
    assert_int_equal(fread(rloss, sizeof(double), STEPS, g), STEPS);
    fclose(g);
    for (int s = 0; s < STEPS; s++) {
        model_zero_grad(&md);
        assert_int_equal(model_forward(&md, tok[s], tgt[s], 1, s, &err), FSMOE_OK);
        assert_int_equal(model_backward(&md, &err), FSMOE_OK);
        double norm = 0, gscale = 1;
        assert_int_equal(model_grad_norm(&md, c.clip, &norm, &gscale, &err), FSMOE_OK);
        adamw_step(&opt, be, &md.params, &c, lr_at(&c, s), gscale);
        printf("# step %d: loss C %.6f torch %.6f\n", s + 1, md.loss, rloss[s]);
        assert_true(fabs(md.loss - rloss[s]) < 2e-4 * fmax(1.0, fabs(rloss[s])));
    }
    adamw_free(&opt, be);
    model_free(&md);
    rt_backend_destroy(&be);
    free(ref);
    remove(in);
    remove(out);
}

static void test_gpt(void **s)
{
    expert_kind = 0;
    test_against_torch(s);
}

static void test_swiglu(void **s)
{
    expert_kind = 1;
    test_against_torch(s);
}

/* grouped-query attention: 2 query heads share 1 key/value head */
static void test_gqa(void **s)
{
    expert_kind = 0;
    kv_heads = 1;
    test_against_torch(s);
    kv_heads = 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt),
        cmocka_unit_test(test_swiglu),
        cmocka_unit_test(test_gqa),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
