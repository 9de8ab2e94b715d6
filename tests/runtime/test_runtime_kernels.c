/* The fast fp32 pieces of the host backend against independent references:
 *  - k_exp and the exp-based GELU / GELU gradient of kernels.h against libm in double, on a
 *    dense grid (the CUDA backend runs the same functions);
 *  - the host GEMM's thread splitting (over the batch, over row or column blocks of C, with
 *    transposes and strided operands) against a naive double-precision product, at 1 and 2
 *    threads;
 *  - the experts' skipping of empty capacity slots against the same experts run on every slot:
 *    equal outputs and parameter gradients on the filled slots, zeros in the empty ones. */
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
#include "expert_ffn.h"
#include "kernels.h"

static double gelu_ref(double x)
{
    return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

static double gelu_grad_ref(double x)
{
    double c = 0.7978845608028654, u = c * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x);
}

static void test_exp_gelu_accuracy(void **s)
{
    (void)s;
    double e_exp = 0, e_gelu = 0, e_grad = 0;
    long bad = 0;
    for (double xd = -79; xd <= 79; xd += 3.1e-4) {
        float x = (float)xd;
        double r = exp((double)x);
        double e = fabs((double)k_exp(x) - r) / r;
        e_exp = e > e_exp ? e : e_exp;
    }
    for (double xd = -30; xd <= 30; xd += 1.7e-5) {
        float x = (float)xd;
        double g = gelu_ref(x), gg = gelu_grad_ref(x);
        /* relative, with absolute floors near the zeros (1e-6 for GELU, 0.1 for its slope) */
        double e1 = fabs((double)k_gelu(x) - g) / (1e-6 + fabs(g));
        double e2 = fabs((double)k_gelu_grad(x) - gg) / (0.1 + fabs(gg));
        e_gelu = e1 > e_gelu ? e1 : e_gelu;
        e_grad = e2 > e_grad ? e2 : e_grad;
        bad += !isfinite(k_gelu(x)) || !isfinite(k_gelu_grad(x));
    }
    printf("# max rel err: exp %.3g, gelu %.3g, gelu' %.3g (scaled)\n", e_exp, e_gelu, e_grad);
    assert_true(e_exp < 2e-7);
    /* fp32 rounding of u = √(2/π)(x + 0.044715x³) alone moves e^(−2u) by ~1e-6 relative in the
     * tails (libm's tanhf-based GELU has the same floor); coefficient or formula mistakes show
     * up as 1e-4 and more */
    assert_true(e_gelu < 4e-6);
    assert_true(e_grad < 4e-6);
    assert_int_equal(bad, 0);
    /* saturation: far tails are 0 and x, never NaN or inf */
    assert_true(fabs((double)k_gelu(-1e4f)) < 1e-30);
    assert_true(fabs((double)k_gelu(1e4f) - 1e4) < 1e-3);
    assert_true(isnan(k_gelu(NAN)));
    assert_true(k_exp(-1e30f) > 0 && k_exp(-1e30f) < 1e-34f);
}

/* naive C = alpha·op(A)·op(B) + beta·C in double, one batch entry */
static void gemm_ref(int ta, int tb, long m, long n, long k, double alpha, const float *A, long lda,
                     const float *B, long ldb, double beta, double *C, long ldc)
{
    for (long i = 0; i < m; i++)
        for (long j = 0; j < n; j++) {
            double acc = 0;
            for (long p = 0; p < k; p++) {
                double a = ta ? A[p * lda + i] : A[i * lda + p];
                double b = tb ? B[j * ldb + p] : B[p * ldb + j];
                acc += a * b;
            }
            C[i * ldc + j] = alpha * acc + beta * C[i * ldc + j];
        }
}

static float frand(unsigned *x)
{
    *x = *x * 1103515245u + 12345u;
    return (float)((*x >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static void check_gemm(int threads, int ta, int tb, long m, long n, long k, long batch, float beta)
{
    rt_backend *be = NULL;
    fsmoe_error err = {0};
    assert_int_equal(rt_backend_create("host", threads, &be, &err), FSMOE_OK);
    /* padded leading dimensions and batch strides, like the attention's in-place heads */
    long ra = ta ? k : m, ca = ta ? m : k, rb = tb ? n : k, cb = tb ? k : n;
    long lda = ca + 3, ldb = cb + 5, ldc = n + 7;
    long sA = ra * lda + 11, sB = rb * ldb + 13, sC = m * ldc + 17;
    float *A = malloc(sizeof(float) * (size_t)(sA * batch)), *B = malloc(sizeof(float) * (size_t)(sB * batch));
    float *C = malloc(sizeof(float) * (size_t)(sC * batch));
    double *R = malloc(sizeof(double) * (size_t)(sC * batch));
    unsigned x = 7u + (unsigned)(m * 31 + n * 17 + k);
    for (long i = 0; i < sA * batch; i++)
        A[i] = frand(&x);
    for (long i = 0; i < sB * batch; i++)
        B[i] = frand(&x);
    for (long i = 0; i < sC * batch; i++)
        R[i] = C[i] = frand(&x);
    be->gemm(be, NULL, ta, tb, m, n, k, 0.5f, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch);
    for (long i = 0; i < batch; i++)
        gemm_ref(ta, tb, m, n, k, 0.5, A + i * sA, lda, B + i * sB, ldb, beta, R + i * sC, ldc);
    long wrong = 0;
    for (long i = 0; i < sC * batch; i++) /* padding must be untouched too */
        wrong += fabs((double)C[i] - R[i]) > 1e-5 * (1 + sqrt((double)k));
    if (wrong)
        printf("gemm T=%d ta=%d tb=%d m=%ld n=%ld k=%ld batch=%ld: #wrong %ld\n", threads, ta, tb,
               m, n, k, batch, wrong);
    assert_int_equal(wrong, 0);
    free(A), free(B), free(C), free(R);
    rt_backend_destroy(&be);
}

static void test_gemm_threads(void **s)
{
    (void)s;
    for (int T = 1; T <= 2; T++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                check_gemm(T, ta, tb, 300, 70, 90, 1, 0);   /* rows split */
                check_gemm(T, ta, tb, 40, 333, 64, 1, 1);   /* columns split */
                check_gemm(T, ta, tb, 129, 65, 40, 3, 0.5f); /* over the batch */
                check_gemm(T, ta, tb, 5, 3, 2, 4, 0);       /* too small to split */
                check_gemm(T, ta, tb, 64, 48, 0, 2, 0.5f);  /* k = 0: C = beta·C */
            }
}

/* Experts on C slots of which fill[e] are used, against the same call with every slot used. */
static void check_skip(int kind)
{
    rt_backend *be = NULL;
    fsmoe_error err = {0};
    assert_int_equal(rt_backend_create("host", 2, &be, &err), FSMOE_OK);
    const long E = 4, M = 24, H = 40, C = 37;
    const long fill[4] = {37, 5, 0, 36};
    rt_params t;
    memset(&t, 0, sizeof t);
    rt_experts ex;
    experts_register(&ex, &t, "x", kind, E, M, H, 0.3, 0.3);
    assert_int_equal(params_alloc(&t, be, 5, &err), FSMOE_OK);
    unsigned x = 99;
    if (kind == 0)
        for (long i = 0; i < E * H; i++)
            ex.b1[i] = 0.1f * frand(&x), ex.b2[i % (E * M)] = 0.1f * frand(&x);
    rt_expert_acts a1, a2;
    assert_int_equal(expert_acts_alloc(&a1, &ex, be, C), FSMOE_OK);
    assert_int_equal(expert_acts_alloc(&a2, &ex, be, C), FSMOE_OK);
    size_t nm = (size_t)(E * C * M), nh = (size_t)(E * C * H);
    float *X = calloc(nm, 4), *dY = calloc(nm, 4), *Y1 = calloc(nm, 4), *Y2 = calloc(nm, 4);
    float *dX1 = calloc(nm, 4), *dX2 = calloc(nm, 4);
    float *dh = calloc(nh, 4), *da = calloc(nh, 4), *dg = calloc(nh, 4);
    float *g1 = calloc((size_t)t.total, 4);
    for (long e = 0; e < E; e++)
        for (long c = 0; c < fill[e]; c++) /* tokens only in filled slots, as the order does */
            for (long m = 0; m < M; m++) {
                X[(e * C + c) * M + m] = frand(&x);
                dY[(e * C + c) * M + m] = frand(&x);
            }
    for (size_t i = 0; i < nm; i++) /* garbage where the skipping run must write zeros */
        Y2[i] = dX2[i] = 7;
    /* reference: all slots, in two chunks; skipping: the same chunks */
    for (int r = 0; r < 2; r++) {
        long c0 = r * C / 2, c1 = (r + 1) * C / 2;
        experts_forward(&ex, be, NULL, X, Y1, &a1, C, c0, c1, NULL);
    }
    be->zero(be, NULL, t.g, (size_t)t.total * sizeof(real));
    for (int r = 0; r < 2; r++) {
        long c0 = r * C / 2, c1 = (r + 1) * C / 2;
        experts_backward(&ex, be, NULL, dY, X, dX1, &a1, dh, da, kind ? dg : NULL, C, c0, c1, NULL);
    }
    memcpy(g1, t.g, (size_t)t.total * sizeof(real));
    for (int r = 0; r < 2; r++) {
        long c0 = r * C / 2, c1 = (r + 1) * C / 2;
        experts_forward(&ex, be, NULL, X, Y2, &a2, C, c0, c1, fill);
    }
    be->zero(be, NULL, t.g, (size_t)t.total * sizeof(real));
    for (int r = 0; r < 2; r++) {
        long c0 = r * C / 2, c1 = (r + 1) * C / 2;
        experts_backward(&ex, be, NULL, dY, X, dX2, &a2, dh, da, kind ? dg : NULL, C, c0, c1, fill);
    }
    long wrong = 0;
    for (long e = 0; e < E; e++)
        for (long c = 0; c < C; c++)
            for (long m = 0; m < M; m++) {
                long i = (e * C + c) * M + m;
                if (c < fill[e])
                    wrong += fabsf(Y1[i] - Y2[i]) > 1e-5f || fabsf(dX1[i] - dX2[i]) > 1e-5f;
                else
                    wrong += Y2[i] != 0 || dX2[i] != 0;
            }
    for (long i = 0; i < t.total; i++)
        wrong += fabsf(g1[i] - t.g[i]) > 1e-5f * (1 + fabsf(g1[i]));
    printf("# expert kind %d, fill {37, 5, 0, 36} of 37: #wrong %ld\n", kind, wrong);
    assert_int_equal(wrong, 0);
    free(X), free(dY), free(Y1), free(Y2), free(dX1), free(dX2), free(dh), free(da), free(dg);
    free(g1);
    expert_acts_free(&a1, be);
    expert_acts_free(&a2, be);
    params_free(&t, be);
    rt_backend_destroy(&be);
}

static void test_skip_empty_slots_gpt(void **s) { (void)s; check_skip(0); }
static void test_skip_empty_slots_swiglu(void **s) { (void)s; check_skip(1); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exp_gelu_accuracy),
        cmocka_unit_test(test_gemm_threads),
        cmocka_unit_test(test_skip_empty_slots_gpt),
        cmocka_unit_test(test_skip_empty_slots_swiglu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
