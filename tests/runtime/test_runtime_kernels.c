/* The fast fp32 pieces of the host backend against independent references:
 *  - k_exp and the exp-based GELU / GELU gradient of kernels.h against libm in double, on a
 *    dense grid (the CUDA backend runs the same functions);
 *  - the host GEMM's thread splitting (over the batch, over row or column blocks of C, with
 *    transposes and strided operands) against a naive double-precision product, at 1 and 2
 *    threads;
 *  - the experts' skipping of empty capacity slots against the same experts run on every slot:
 *    equal outputs and parameter gradients on the filled slots, zeros in the empty ones.
 * and, in both builds (test_runtime_kernels64: the fp64 one), the AdamW pass against the
 * textbook update in double, and the vocabulary-parallel pieces against the whole-vocabulary
 * ops:
 *  - cross-entropy over P = 1, 2, 3, 4 column slices (crossent_stats, the stats concatenated as
 *    an allgather gives them, crossent_finish) against crossent: P = 1 bit for bit, else within
 *    rounding, targets in every slice and at its edges;
 *  - the embedding over vocabulary slices (ids < 0 outside the slice, wpe on the first slice
 *    only): the slices' outputs sum to the whole table's exactly, their dwte rows are the whole
 *    table's rows, nothing is written for ids < 0;
 *  - allgather and reducescatter_sum on the one-rank group: a copy, on the caller and on a
 *    stream. */
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
#include "backend_host.h"
#include "expert_ffn.h"
#include "kernels.h"

#if !REAL_IS_DOUBLE /* the fp32 kernels and GEMM; the fp64 build runs the tests below only */
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

/* The host backend's instruction sets: an unknown or unrunnable FSMOE_HOST_ISA is a usage error
 * naming it; each set this CPU runs computes the element-wise kernels like the baseline copy
 * (the reference: the compiler's default target, no FMA) to fp32 rounding. */
static void run_isa_kernels(const char *isa, float *out, long n)
{
    setenv("FSMOE_HOST_ISA", isa, 1);
    rt_backend *be = NULL;
    fsmoe_error err = {0};
    assert_int_equal(rt_backend_create("host", 1, &be, &err), FSMOE_OK);
    assert_non_null(strstr(be->name, "host"));
    assert_int_equal(strcmp(isa, "baseline") == 0, strcmp(be->name, "host") == 0);
    float *a = be->alloc(be, (size_t)n * 4), *h = be->alloc(be, (size_t)n * 4);
    float *d = be->alloc(be, (size_t)n * 4), *p = be->alloc(be, (size_t)n * 4);
    float *sc = be->alloc(be, (size_t)n * 4), *at = be->alloc(be, (size_t)n * 4);
    for (long i = 0; i < n; i++) {
        a[i] = -8.0f + 16.0f * (float)i / (float)n; /* GELU's whole working range */
        sc[i] = 3.0f * sinf(0.37f * (float)i);
        p[i] = cosf((float)i);
    }
    be->act_fwd(be, NULL, 0, h, a, NULL, NULL, n / 64, 64);
    be->act_bwd(be, NULL, 0, d, NULL, p, a, NULL, n);
    be->attn_softmax_fwd(be, NULL, at, sc, n / 64, 64, 0.5f);
    memcpy(out, h, (size_t)n * 4);
    memcpy(out + n, d, (size_t)n * 4);
    memcpy(out + 2 * n, at, (size_t)n * 4);
    be->free(be, a), be->free(be, h), be->free(be, d), be->free(be, p), be->free(be, sc);
    be->free(be, at);
    rt_backend_destroy(&be);
    unsetenv("FSMOE_HOST_ISA");
}

static void test_host_isa(void **s)
{
    (void)s;
    rt_backend *be = NULL;
    fsmoe_error err = {0};
    setenv("FSMOE_HOST_ISA", "avx9000", 1);
    assert_int_equal(rt_backend_create("host", 1, &be, &err), FSMOE_ERR_USAGE);
    assert_null(be);
    assert_non_null(strstr(err.msg, "FSMOE_HOST_ISA=avx9000"));
    assert_non_null(strstr(err.msg, "baseline"));
    unsetenv("FSMOE_HOST_ISA");
    assert_true(rt_backend_host_isa_runs("baseline"));
    assert_false(rt_backend_host_isa_runs("avx9000"));
    const long n = 64 * 64;
    float *ref = calloc(3 * n, 4), *got = calloc(3 * n, 4);
    run_isa_kernels("baseline", ref, n);
    int others = 0;
    const char *isa;
    for (int k = 0; (isa = rt_backend_host_isa_name(k)) != NULL; k++) {
        if (strcmp(isa, "baseline") == 0 || !rt_backend_host_isa_runs(isa))
            continue;
        others++;
        run_isa_kernels(isa, got, n);
        for (int part = 0; part < 3; part++) {
            double worst = 0.0;
            long at = 0;
            for (long i = part * n; i < (part + 1) * n; i++) {
                /* the gradient dh·gelu'(x) sums terms of size |dh| (it crosses zero near
                 * x = -0.75, where a relative difference means nothing) */
                double scale = fabs((double)ref[i]) + (part == 1 ? fabs(cos((double)(i - n))) : 1e-3);
                double e = fabs((double)got[i] - ref[i]) / scale;
                if (e > worst)
                    worst = e, at = i;
            }
            printf("# %s: %s worst difference %.2e of its scale at %ld (%g against %g)\n",
                   isa, part == 0 ? "gelu" : part == 1 ? "gelu grad" : "softmax", worst, at,
                   got[at], ref[at]);
            assert_true(worst <= 2e-6);
        }
    }
    printf("# host instruction sets compared with the baseline copy: %d\n", others);
    free(ref);
    free(got);
}

/* Σ x² (the gradient norm): within 1e-12 of a long double sum, and the same bits on 1, 2 and 3
 * threads (blocks of a fixed size summed in order), for lengths around the block size. */
static void test_sumsq_threads(void **s)
{
    (void)s;
    const long lens[] = {0, 1, 7, 32768, 32769, 100000, 300001};
    rt_backend *be[3] = {NULL, NULL, NULL};
    fsmoe_error err = {0};
    for (int t = 0; t < 3; t++)
        assert_int_equal(rt_backend_create("host", t + 1, &be[t], &err), FSMOE_OK);
    real *x = malloc(300001 * sizeof *x);
    unsigned seed = 5;
    for (long i = 0; i < 300001; i++)
        x[i] = (real)frand(&seed) * (real)(1 + i % 13);
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        long n = lens[k];
        long double ref = 0;
        for (long i = 0; i < n; i++)
            ref += (long double)x[i] * (long double)x[i];
        double got[3];
        for (int t = 0; t < 3; t++)
            got[t] = be[t]->sumsq(be[t], NULL, x, n);
        assert_true(fabsl((long double)got[0] - ref) <= 1e-12L * (ref + 1e-300L));
        assert_memory_equal(&got[0], &got[1], sizeof(double));
        assert_memory_equal(&got[0], &got[2], sizeof(double));
    }
    free(x);
    for (int t = 0; t < 3; t++)
        rt_backend_destroy(&be[t]);
}

/* The layer norm's weight and bias gradients and a bias gradient, walked by blocks of columns
 * and chunks of rows, against the kernels that sum one column at a time (the same order: the
 * CUDA backend's threads per column and chunk follow it), on 1 and 2 threads: to the bit on
 * the baseline copy of the backend (no FMA, like this file), within fp32 rounding of the
 * terms' magnitudes on the copy the CPU would pick (its multiply-adds are fused). The
 * one-column kernels themselves against sums in double. N: one chunk, several, the most, none
 * a multiple of its chunks. */
static void col_grads_at(long N)
{
    const long M = 150; /* three column blocks, the last one partial */
    real *x = malloc(sizeof(real) * N * M), *dy = malloc(sizeof(real) * N * M);
    real *mean = malloc(sizeof(real) * N), *rstd = malloc(sizeof(real) * N);
    real *out = malloc(sizeof(real) * N * M), *w = malloc(sizeof(real) * M);
    real *bias = calloc(M, sizeof(real));
    unsigned seed = 11;
    /* dy / 3: every bit of the mantissa used, so that sums in another order round otherwise
     * (frand's multiples of 2^-15 add up exactly in any order) */
    for (long i = 0; i < N * M; i++)
        x[i] = (real)frand(&seed), dy[i] = (real)((double)frand(&seed) / 3.0);
    for (long m = 0; m < M; m++)
        w[m] = (real)1 + (real)0.1 * (real)frand(&seed);
    real *rw = calloc(M, sizeof(real)), *rb = calloc(M, sizeof(real));
    real *rbias = calloc(M, sizeof(real));
    for (int run = 0; run < 4; run++) {
        int T = 1 + run % 2, baseline = run < 2;
        if (baseline)
            setenv("FSMOE_HOST_ISA", "baseline", 1);
        rt_backend *be = NULL;
        fsmoe_error err = {0};
        assert_int_equal(rt_backend_create("host", T, &be, &err), FSMOE_OK);
        unsetenv("FSMOE_HOST_ISA");
        real *dx = be->alloc(be, sizeof(real) * N * M), *dw = be->alloc(be, sizeof(real) * M);
        real *db = be->alloc(be, sizeof(real) * M), *dbias = be->alloc(be, sizeof(real) * M);
        be->layernorm_fwd(be, NULL, out, mean, rstd, x, w, bias, N, M);
        if (run == 0) {
            for (long m = 0; m < M; m++) {
                k_layernorm_col_grad(m, rw, rb, dy, x, mean, rstd, N, M);
                k_bias_grad_col(m, rbias, dy, N, M);
                double sw = 0, sb = 0;
                for (long n = 0; n < N; n++) {
                    sw += (double)dy[n * M + m] * ((double)x[n * M + m] - mean[n]) * rstd[n];
                    sb += dy[n * M + m];
                }
                assert_true(fabs(rw[m] - sw) <= 1e-5 * (double)N * 8 &&
                            fabs(rb[m] - sb) <= 1e-5 * (double)N && rbias[m] == rb[m]);
            }
        }
        be->layernorm_bwd(be, NULL, dx, dw, db, dy, x, mean, rstd, w, N, M);
        be->bias_grad(be, NULL, dbias, dy, N, M);
        be->stream_sync(be, NULL);
        if (baseline) {
            assert_memory_equal(dw, rw, sizeof(real) * M);
            assert_memory_equal(db, rb, sizeof(real) * M);
            assert_memory_equal(dbias, rbias, sizeof(real) * M);
        } else {
            for (long m = 0; m < M; m++) /* |terms| ≤ 1 · 4 · 1/σ; N of them */
                assert_true(fabsf(dw[m] - rw[m]) <= 1e-5f * (float)N * 8 &&
                            fabsf(db[m] - rb[m]) <= 1e-5f * (float)N && dbias[m] == rbias[m]);
        }
        be->free(be, dx), be->free(be, dw), be->free(be, db), be->free(be, dbias);
        rt_backend_destroy(&be);
    }
    free(x), free(dy), free(mean), free(rstd), free(out), free(w), free(rw), free(rb);
    free(rbias), free(bias);
}

static void test_layernorm_col_grads(void **s)
{
    (void)s;
    col_grads_at(101);  /* one chunk */
    col_grads_at(1000); /* 15 chunks of 66-67 rows */
    col_grads_at(2210); /* 32 chunks (the most) of 69-70 rows */
}

/* --profile's accounting: each kernel's time lands in its own category, on the default stream
 * and on a worker stream alike; the GEMMs' multiply-accumulates are exactly Σ m·n·k·batch, and
 * so are those of each shape entry (calls of one binary order of magnitude per dimension
 * together, the table's overflow summed); nothing is counted while the profile is off, and a
 * read starts again from zero. */
static void test_profile_categories(void **s)
{
    (void)s;
    rt_backend *be = NULL;
    fsmoe_error err = {0};
    assert_int_equal(rt_backend_create("host", 1, &be, &err), FSMOE_OK);
    assert_non_null(be->profile_enable);
    const long n = 256 * 256;
    float *a = be->alloc(be, (size_t)n * 4), *b = be->alloc(be, (size_t)n * 4);
    float *c = be->alloc(be, (size_t)n * 4);
    for (long i = 0; i < n; i++)
        a[i] = 0.001f * (float)(i % 97), b[i] = 0.002f * (float)(i % 89);
    double sec[RT_PROF_CATS], macs = -1;
    be->gemm(be, NULL, 0, 0, 256, 256, 256, 1, a, 256, 0, b, 256, 0, 0, c, 256, 0, 1);
    be->profile_read(be, sec, &macs);
    for (int k = 0; k < RT_PROF_CATS; k++)
        assert_true(sec[k] == 0.0); /* off: nothing counted */
    assert_true(macs == 0.0);
    be->profile_enable(be, 1);
    rt_stream *st = be->stream_create(be, 0);
    assert_non_null(st);
    for (int rep = 0; rep < 2; rep++) {
        rt_stream *on = rep ? st : NULL;
        be->gemm(be, on, 0, 1, 256, 128, 64, 1, a, 64, 0, b, 64, 0, 0, c, 128, 0, 1);
        be->gemm(be, on, 0, 0, 32, 16, 8, 1, a, 8, 256, b, 16, 128, 0, c, 16, 512, 3);
        be->stream_sync(be, st);
        be->profile_read(be, sec, &macs);
        assert_true(macs == 256.0 * 128 * 64 + 3.0 * 32 * 16 * 8);
        assert_true(sec[RT_PROF_GEMM] > 0.0);
        rt_prof_gemm sh[RT_PROF_GEMM_SHAPES + 1];
        assert_int_equal(be->profile_gemm_shapes(be, sh), 2); /* in the order first seen */
        assert_true(sh[0].ta == 0 && sh[0].tb == 1 && sh[0].m[0] == 256 && sh[0].m[1] == 256 &&
                    sh[0].n[0] == 128 && sh[0].k[1] == 64 && sh[0].batch == 1 &&
                    sh[0].calls == 1 && sh[0].macs == 256.0 * 128 * 64 && sh[0].s > 0.0);
        assert_true(sh[1].tb == 0 && sh[1].m[0] == 32 && sh[1].batch == 3 && sh[1].calls == 1 &&
                    sh[1].macs == 3.0 * 32 * 16 * 8);
        assert_int_equal(be->profile_gemm_shapes(be, sh), 0); /* read: from zero again */
        for (int k = 0; k < RT_PROF_CATS; k++)
            if (k != RT_PROF_GEMM)
                assert_true(sec[k] == 0.0);
        be->attn_softmax_fwd(be, on, c, a, 256, 256, 0.5f);
        be->stream_sync(be, st);
        be->profile_read(be, sec, &macs);
        assert_true(macs == 0.0 && sec[RT_PROF_GEMM] == 0.0 && sec[RT_PROF_ATTENTION] > 0.0);
        be->act_fwd(be, on, 0, c, b, NULL, NULL, 256, 256);
        be->gather_rows(be, on, c, a, (const int[]){3, -1, 7}, 3, 256);
        be->adamw(be, on, c, a, b, c, n, 1, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 1);
        be->stream_sync(be, st);
        be->profile_read(be, sec, &macs);
        assert_true(sec[RT_PROF_ELEMWISE] > 0.0 && sec[RT_PROF_GATE] > 0.0 &&
                    sec[RT_PROF_OPTIMIZER] > 0.0 && sec[RT_PROF_ATTENTION] == 0.0 &&
                    sec[RT_PROF_COMM] == 0.0);
    }
    /* one entry per binary order of magnitude of m, n and k, with each one's range; the
     * table's overflow sums the rest in an entry with m[0] = 0 */
    rt_prof_gemm sh[RT_PROF_GEMM_SHAPES + 1];
    const long ms[] = {40, 33, 63, 32, 64, 17};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        be->gemm(be, st, 1, 0, ms[i], 16, 20, 1, a, ms[i], 0, b, 16, 0, 0, c, 16, 0, 1);
    be->stream_sync(be, st);
    assert_int_equal(be->profile_gemm_shapes(be, sh), 3);
    assert_true(sh[0].ta == 1 && sh[0].m[0] == 32 && sh[0].m[1] == 63 && sh[0].calls == 4 &&
                sh[0].macs == (40.0 + 33 + 63 + 32) * 16 * 20);
    assert_true(sh[1].m[0] == 64 && sh[1].m[1] == 64 && sh[1].calls == 1);
    assert_true(sh[2].m[0] == 17 && sh[2].m[1] == 17 && sh[2].calls == 1);
    double over = 0.0;
    for (long bt = 1; bt <= RT_PROF_GEMM_SHAPES + 5; bt++) { /* each batch its own entry */
        be->gemm(be, NULL, 0, 0, 2, 2, 2, 1, a, 2, 0, b, 2, 0, 0, c, 2, 0, bt);
        over += bt > RT_PROF_GEMM_SHAPES ? 8.0 * (double)bt : 0.0;
    }
    assert_int_equal(be->profile_gemm_shapes(be, sh), RT_PROF_GEMM_SHAPES + 1);
    assert_true(sh[RT_PROF_GEMM_SHAPES - 1].batch == RT_PROF_GEMM_SHAPES);
    assert_true(sh[RT_PROF_GEMM_SHAPES].m[0] == 0 && sh[RT_PROF_GEMM_SHAPES].calls == 5 &&
                sh[RT_PROF_GEMM_SHAPES].macs == over);
    be->profile_gemm_shapes(be, NULL); /* discards */
    be->gemm(be, NULL, 0, 0, 2, 2, 2, 1, a, 2, 0, b, 2, 0, 0, c, 2, 0, 1);
    assert_int_equal(be->profile_gemm_shapes(be, sh), 1);
    be->profile_enable(be, 0);
    be->gemm(be, NULL, 0, 0, 2, 2, 2, 1, a, 2, 0, b, 2, 0, 0, c, 2, 0, 1);
    assert_int_equal(be->profile_gemm_shapes(be, sh), 0); /* off: nothing counted */
    be->profile_read(be, sec, &macs);
    be->stream_destroy(be, st);
    be->free(be, a), be->free(be, b), be->free(be, c);
    rt_backend_destroy(&be);
}

/* A stream made on_caller runs its work where it is issued: the product is in C when the call
 * returns, before any synchronisation; it still records events that a worker stream waits
 * for, and a worker stream's results reach it through an event. */
static void test_stream_on_caller(void **s)
{
    (void)s;
    rt_backend *be = NULL;
    fsmoe_error err = {0};
    assert_int_equal(rt_backend_create("host", 1, &be, &err), FSMOE_OK);
    assert_true(be->on_caller);
    const long n = 24;
    real *a = be->alloc(be, sizeof(real) * n * n), *b = be->alloc(be, sizeof(real) * n * n);
    real *c = be->alloc(be, sizeof(real) * n * n), *d = be->alloc(be, sizeof(real) * n * n);
    double *want = malloc(sizeof(double) * n * n), *want2 = malloc(sizeof(double) * n * n);
    float *wantf = malloc(sizeof(float) * n * n);
    for (long i = 0; i < n * n; i++)
        a[i] = (real)(i % 7) - 3, b[i] = (real)(i % 5) - 2;
    /* small integers: every order of summation gives these products exactly */
    gemm_ref(0, 0, n, n, n, 1, a, n, b, n, 0, want, n);
    for (long i = 0; i < n * n; i++)
        wantf[i] = (float)want[i];
    gemm_ref(0, 0, n, n, n, 1, wantf, n, b, n, 0, want2, n);
    rt_stream *caller = be->stream_create(be, 1), *worker = be->stream_create(be, 0);
    rt_event *ev = be->event_create(be);
    assert_non_null(caller);
    assert_non_null(worker);
    assert_non_null(ev);
    be->gemm(be, caller, 0, 0, n, n, n, 1, a, n, 0, b, n, 0, 0, c, n, 0, 1);
    for (long i = 0; i < n * n; i++) /* no sync */
        assert_true(c[i] == wantf[i]);
    be->event_record(be, ev, caller);
    be->stream_wait(be, worker, ev);
    be->gemm(be, worker, 0, 0, n, n, n, 1, c, n, 0, b, n, 0, 0, d, n, 0, 1); /* d = (a·b)·b */
    be->event_record(be, ev, worker);
    be->stream_wait(be, caller, ev); /* waits for the worker's product */
    be->copy(be, caller, a, d, sizeof(real) * n * n, RT_D2D);
    for (long i = 0; i < n * n; i++)
        assert_true(a[i] == (float)want2[i]);
    assert_int_equal(rt_backend_check(be, &err), FSMOE_OK);
    be->event_destroy(be, ev);
    be->stream_destroy(be, worker);
    be->stream_destroy(be, caller);
    be->free(be, a), be->free(be, b), be->free(be, c), be->free(be, d);
    free(want), free(want2), free(wantf);
    rt_backend_destroy(&be);
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
#endif

static real rrand(unsigned *x)
{
    *x = *x * 1103515245u + 12345u;
    return (real)((*x >> 8) & 0xffff) / (real)32768 - (real)1;
}

/* Rounding tolerance of the vocabulary-parallel results against the whole-vocabulary ones. */
#if REAL_IS_DOUBLE
#define SPLIT_TOL 1e-12
#else
#define SPLIT_TOL 1e-5
#endif

/* First vocabulary id of slice p of P (uneven widths when P does not divide V). */
static long slice_v0(long V, int P, int p) { return V * p / P; }

static void check_crossent_split(rt_backend *be, int P)
{
    const long N = 29, V = 103;
    const real scale = (real)1 / (real)N;
    real *logits = malloc(sizeof(real) * (size_t)(N * V));
    real *dref = malloc(sizeof(real) * (size_t)(N * V)), *lref = malloc(sizeof(real) * (size_t)N);
    real *dsplit = malloc(sizeof(real) * (size_t)(N * V)), *slice = NULL;
    real *stats = malloc(sizeof(real) * (size_t)(3 * P * N));
    real *loss = malloc(sizeof(real) * (size_t)(N * P));
    int *targets = malloc(sizeof(int) * (size_t)N);
    unsigned x = 4242u + (unsigned)P;
    for (long i = 0; i < N * V; i++)
        logits[i] = 4 * rrand(&x);
    for (long j = 0; j < V; j++) /* a row whose maximum is far out, in one slice only */
        logits[3 * V + j] += j == 70 ? 60 : 0;
    for (long n = 0; n < N; n++) {
        x = x * 1103515245u + 12345u;
        targets[n] = (int)((x >> 8) % (unsigned)V);
    }
    for (int p = 0; p < P; p++) { /* every slice's first and last id are targets */
        targets[2 * p] = (int)slice_v0(V, P, p);
        targets[2 * p + 1] = (int)slice_v0(V, P, p + 1) - 1;
    }
    be->crossent(be, NULL, lref, dref, logits, targets, N, V, scale);

    /* each member's columns, as a (N, Vl) matrix of its own */
    slice = malloc(sizeof(real) * (size_t)(N * V));
    for (int p = 0; p < P; p++) {
        long v0 = slice_v0(V, P, p), Vl = slice_v0(V, P, p + 1) - v0;
        for (long n = 0; n < N; n++)
            memcpy(slice + n * Vl, logits + n * V + v0, sizeof(real) * (size_t)Vl);
        be->crossent_stats(be, NULL, stats + 3 * p * N, slice, targets, N, Vl, v0);
    }
    long wrong = 0;
    for (int p = 0; p < P; p++) {
        long v0 = slice_v0(V, P, p), Vl = slice_v0(V, P, p + 1) - v0;
        real *dl = malloc(sizeof(real) * (size_t)(N * Vl));
        for (long n = 0; n < N; n++)
            memcpy(slice + n * Vl, logits + n * V + v0, sizeof(real) * (size_t)Vl);
        be->crossent_finish(be, NULL, loss + p * N, dl, slice, targets, stats, P, N, Vl, v0,
                            scale);
        for (long n = 0; n < N; n++)
            memcpy(dsplit + n * V + v0, dl + n * Vl, sizeof(real) * (size_t)Vl);
        free(dl);
        /* no dlogits: the losses alone */
        real *l2 = malloc(sizeof(real) * (size_t)N);
        be->crossent_finish(be, NULL, l2, NULL, slice, targets, stats, P, N, Vl, v0, scale);
        for (long n = 0; n < N; n++)
            wrong += l2[n] != loss[p * N + n];
        free(l2);
    }
    double e_loss = 0, e_d = 0;
    for (int p = 0; p < P; p++)
        for (long n = 0; n < N; n++) {
            double e = fabs((double)loss[p * N + n] - (double)lref[n]) / (1 + fabs((double)lref[n]));
            e_loss = e > e_loss ? e : e_loss;
            if (P == 1)
                wrong += loss[n] != lref[n];
        }
    for (long i = 0; i < N * V; i++) {
        double e = fabs((double)dsplit[i] - (double)dref[i]) / (fabs((double)dref[i]) + (double)scale);
        e_d = e > e_d ? e : e_d;
        if (P == 1)
            wrong += dsplit[i] != dref[i];
    }
    wrong += (e_loss > SPLIT_TOL) + (e_d > SPLIT_TOL);
    printf("# crossent over %d slices: max rel err loss %.3g, dlogits %.3g, #wrong %ld\n", P,
           e_loss, e_d, wrong);
    assert_int_equal(wrong, 0);
    free(logits), free(dref), free(lref), free(dsplit), free(slice), free(stats), free(loss);
    free(targets);
}

/* The row reductions of kernels.h (fixed lanes) against sums in long double, for lengths below,
 * at and across the lane count, with values of mixed sign and magnitude: within a few rounding
 * errors of the row's absolute sum; the maximum exact (it is a selection); a NaN reaches the
 * sums; and the lanes' order is the same on every call (the same bits twice). */
static void test_row_reductions(void **s)
{
    (void)s;
    const long lens[] = {1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000};
    real x[1000], y[1000];
    for (int i = 0; i < 1000; i++) {
        x[i] = (real)(sin(0.37 * i + 0.1) * (1 + (i % 13)));
        y[i] = (real)(cos(0.71 * i) * 0.5);
    }
    const double eps = REAL_IS_DOUBLE ? 1e-15 : 1e-6;
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        long n = lens[k];
        long double sum = 0, abs_sum = 0, dot = 0, abs_dot = 0, dev = 0, ex = 0, mx = x[0] * 0.5L;
        double c = 0.25;
        for (long j = 0; j < n; j++) {
            sum += x[j], abs_sum += fabsl((long double)x[j]);
            dot += (long double)x[j] * y[j], abs_dot += fabsl((long double)x[j] * y[j]);
            dev += ((long double)x[j] - c) * ((long double)x[j] - c);
            ex += expl((long double)x[j] - c);
            mx = x[j] * 0.5L > mx ? x[j] * 0.5L : mx;
        }
        assert_true(fabsl(k_sum(x, n) - sum) <= 4 * eps * abs_sum);
        assert_true(fabsl(k_dot(x, y, n) - dot) <= 4 * eps * abs_dot);
        assert_true(fabsl(k_sum_sq_dev(x, (real)c, n) - dev) <= 4 * eps * dev);
        assert_true(fabsl(k_sum_exp_dev(x, (real)c, n) - ex) <= 8 * eps * ex);
        assert_true(k_max_scaled(x, (real)0.5, n) == (real)mx);
        assert_true(k_sum(x, n) == k_sum(x, n));
    }
    x[11] = NAN;
    assert_true(isnan(k_sum(x, 64)));
    assert_true(isnan(k_sum_exp_dev(x, k_max_scaled(x, 1, 64), 64)));
}

/* The CUDA backend's reductions (a row's K_LANES lanes on as many threads, each summing its
 * lane with k_lane_*, combined by shuffles in which lane l takes lane l + w, w = K_LANES/2, ...,
 * 1: k_lanes_combine's order, backend_cuda.cu) give the host's k_sum, k_sum_sq_dev,
 * k_sum_exp_dev, k_dot and k_max_scaled to the bit: the same elements per lane, added in the
 * same order, combined alike. Also LayerNorm's backward partials against its row function. */
static real lanes_combine_as_shuffles(real *acc, int is_max)
{
    if (!is_max)
        return k_lanes_combine(acc);
    for (int w = K_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++)
            acc[l] = acc[l + w] > acc[l] ? acc[l + w] : acc[l];
    return acc[0];
}

static void test_row_lanes(void **s)
{
    (void)s;
    const long lens[] = {1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 65, 768, 1000};
    real x[1000], y[1000];
    for (int i = 0; i < 1000; i++) {
        x[i] = (real)(sin(0.37 * i + 0.1) * (1 + (i % 13)));
        y[i] = (real)(cos(0.71 * i) * 0.5);
    }
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        long n = lens[k];
        real a[5][K_LANES];
        for (int l = 0; l < K_LANES; l++) {
            a[0][l] = k_lane_sum(x, n, l);
            a[1][l] = k_lane_dot(x, y, n, l);
            a[2][l] = k_lane_sum_sq_dev(x, (real)0.25, n, l);
            a[3][l] = k_lane_sum_exp_dev(x, (real)0.25, n, l);
            a[4][l] = k_lane_max_scaled(x, (real)0.5, n, l);
        }
        assert_true(lanes_combine_as_shuffles(a[0], 0) == k_sum(x, n));
        assert_true(lanes_combine_as_shuffles(a[1], 0) == k_dot(x, y, n));
        assert_true(lanes_combine_as_shuffles(a[2], 0) == k_sum_sq_dev(x, (real)0.25, n));
        assert_true(lanes_combine_as_shuffles(a[3], 0) == k_sum_exp_dev(x, (real)0.25, n));
        assert_true(lanes_combine_as_shuffles(a[4], 1) == k_max_scaled(x, (real)0.5, n));
    }
    /* LayerNorm backward of one row: the lane partials and k_layernorm_dx, as the CUDA kernel
     * composes them, against k_layernorm_row_bwd */
    const long M = 37;
    real w[37], mean[1] = {(real)0.3}, rstd[1] = {(real)1.7}, dx1[37] = {0}, dx2[37] = {0};
    for (long m = 0; m < M; m++)
        w[m] = (real)(1 + 0.1 * m);
    k_layernorm_row_bwd(0, dx1, y, x, mean, rstd, w, M);
    real p1[K_LANES], p2[K_LANES];
    for (int l = 0; l < K_LANES; l++)
        k_layernorm_bwd_lane(&p1[l], &p2[l], y, x, w, mean[0], rstd[0], M, l);
    real s1 = lanes_combine_as_shuffles(p1, 0) / (real)M;
    real s2 = lanes_combine_as_shuffles(p2, 0) / (real)M;
    for (int l = 0; l < K_LANES; l++)
        k_layernorm_dx(dx2, y, x, w, mean[0], rstd[0], s1, s2, M, l, K_LANES);
    assert_memory_equal(dx1, dx2, sizeof dx1);
}

static void test_crossent_vocab_split(void **s)
{
    (void)s;
    rt_backend *be = NULL;
    fsmoe_error err = {0};
    assert_int_equal(rt_backend_create("host", 2, &be, &err), FSMOE_OK);
    for (int P = 1; P <= 4; P++)
        check_crossent_split(be, P);
    assert_int_equal(rt_backend_check(be, &err), FSMOE_OK);
    rt_backend_destroy(&be);
}

/* Rows of a slice's dwte buffer before its first row: an id < 0 used as a row lands there. */
#define GUARD_ROWS 3

static void test_embed_vocab_split(void **s)
{
    (void)s;
    rt_backend *be = NULL;
    fsmoe_error err = {0};
    assert_int_equal(rt_backend_create("host", 2, &be, &err), FSMOE_OK);
    enum { P = 3 };
    const long B = 3, L = 7, M = 9, V = 17, N = B * L;
    real *wte = malloc(sizeof(real) * (size_t)(V * M)), *wpe = malloc(sizeof(real) * (size_t)(L * M));
    real *dout = malloc(sizeof(real) * (size_t)(N * M));
    real *out = malloc(sizeof(real) * (size_t)(N * M)), *sum = calloc((size_t)(N * M), sizeof(real));
    real *part = malloc(sizeof(real) * (size_t)(N * M));
    real *dwte = calloc((size_t)(V * M), sizeof(real)), *dwpe = calloc((size_t)(L * M), sizeof(real));
    real *dwpe0 = calloc((size_t)(L * M), sizeof(real));
    real *dwte_p = calloc((size_t)((V + GUARD_ROWS) * M), sizeof(real));
    int *tok = malloc(sizeof(int) * (size_t)N), *tok_p = malloc(sizeof(int) * (size_t)N);
    unsigned x = 77u;
    for (long i = 0; i < V * M; i++)
        wte[i] = rrand(&x);
    for (long i = 0; i < L * M; i++)
        wpe[i] = rrand(&x);
    for (long i = 0; i < N * M; i++)
        dout[i] = rrand(&x);
    for (long n = 0; n < N; n++) { /* ids repeat (rows of dwte collect several tokens) */
        x = x * 1103515245u + 12345u;
        tok[n] = (int)((x >> 8) % (unsigned)(V - 5));
    }
    tok[4] = V - 1;

    long wrong = 0;
    /* the whole table: what the kernel always did */
    be->embed_fwd(be, NULL, out, wte, wpe, tok, B, L, M);
    for (long n = 0; n < N; n++)
        for (long m = 0; m < M; m++)
            wrong += out[n * M + m] != wte[(long)tok[n] * M + m] + wpe[(n % L) * M + m];
    be->embed_bwd(be, NULL, dwte, dwpe, dout, tok, B, L, M);

    for (int p = 0; p < P; p++) {
        long v0 = slice_v0(V, P, p), Vl = slice_v0(V, P, p + 1) - v0;
        for (long n = 0; n < N; n++) /* ids outside the slice: -1, -2, -3 */
            tok_p[n] = tok[n] >= v0 && tok[n] < v0 + Vl ? tok[n] - (int)v0 : -1 - (int)(n % 3);
        be->embed_fwd(be, NULL, part, wte + v0 * M, p == 0 ? wpe : NULL, tok_p, B, L, M);
        for (long i = 0; i < N * M; i++)
            sum[i] += part[i];
        memset(dwte_p, 0, sizeof(real) * (size_t)((V + GUARD_ROWS) * M));
        real *d = dwte_p + GUARD_ROWS * M;
        be->embed_bwd(be, NULL, d, p == 0 ? dwpe0 : NULL, dout, tok_p, B, L, M);
        for (long i = 0; i < GUARD_ROWS * M; i++)
            wrong += dwte_p[i] != 0;
        for (long i = 0; i < Vl * M; i++) /* the same sums in the same order: exact */
            wrong += d[i] != dwte[v0 * M + i];
        for (long i = Vl * M; i < V * M; i++)
            wrong += d[i] != 0;
    }
    /* one slice adds the row, the first adds the position, the others zeros: exact */
    for (long i = 0; i < N * M; i++)
        wrong += sum[i] != out[i];
    for (long i = 0; i < L * M; i++)
        wrong += dwpe0[i] != dwpe[i];
    printf("# embedding over %d vocabulary slices: #wrong %ld\n", P, wrong);
    assert_int_equal(wrong, 0);
    assert_int_equal(rt_backend_check(be, &err), FSMOE_OK);
    free(wte), free(wpe), free(dout), free(out), free(sum), free(part), free(dwte), free(dwpe);
    free(dwpe0), free(dwte_p), free(tok), free(tok_p);
    rt_backend_destroy(&be);
}

static void test_gather_single(void **s)
{
    (void)s;
    rt_backend *be = NULL;
    fsmoe_error err = {0};
    assert_int_equal(rt_backend_create("host", 1, &be, &err), FSMOE_OK);
    rt_stream *st = be->stream_create(be, 0);
    assert_non_null(st);
    rt_group g = rt_group_single();
    const long n = 1000;
    real *src = malloc(sizeof(real) * (size_t)n), *dst = malloc(sizeof(real) * (size_t)(n + 1));
    for (long i = 0; i < n; i++)
        src[i] = (real)(i + 1);
    long wrong = 0;
    for (int op = 0; op < 2; op++)
        for (int on_stream = 0; on_stream < 2; on_stream++) {
            rt_stream *q = on_stream ? st : NULL;
            for (long i = 0; i <= n; i++)
                dst[i] = -7;
            if (op == 0)
                be->allgather(be, q, &g, dst, src, n, "allgather test");
            else
                be->reducescatter_sum(be, q, &g, dst, src, n, "reducescatter test");
            be->stream_sync(be, q);
            for (long i = 0; i < n; i++)
                wrong += dst[i] != src[i];
            wrong += dst[n] != -7; /* one past the end: untouched */
            /* nothing to move: nothing written */
            if (op == 0)
                be->allgather(be, q, &g, dst, src, 0, "allgather test");
            else
                be->reducescatter_sum(be, q, &g, dst, src, 0, "reducescatter test");
            be->stream_sync(be, q);
            wrong += dst[0] != src[0];
        }
    printf("# allgather, reducescatter_sum on one rank: #wrong %ld\n", wrong);
    assert_int_equal(wrong, 0);
    assert_int_equal(rt_backend_check(be, &err), FSMOE_OK);
    free(src), free(dst);
    be->stream_destroy(be, st);
    rt_backend_destroy(&be);
}

/* The AdamW pass (the host backend, both threads' split) against Loshchilov & Hutter's update
 * written out in double, over 5 steps with a clipping scale, weight decay and gradients of
 * every sign and size (down to ones whose √v̂ is near ε): m, v and p after each step within
 * rounding, and the gradient cleared. The pass folds the bias corrections into its constants
 * (kernels.h k_adamw_coefs); this reference does not. */
static void test_adamw_textbook(void **s)
{
    (void)s;
    rt_backend *be = NULL;
    fsmoe_error err = {0};
    assert_int_equal(rt_backend_create("host", 2, &be, &err), FSMOE_OK);
    const long n = 4099;
    const double lr = 3e-3, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, gs = 0.7;
    real *p = malloc(sizeof(real) * (size_t)n), *g = malloc(sizeof(real) * (size_t)n);
    real *g0 = malloc(sizeof(real) * (size_t)n), *m = calloc((size_t)n, sizeof(real)), *v = calloc((size_t)n, sizeof(real));
    double *rp = malloc(sizeof(double) * (size_t)n), *rm = calloc((size_t)n, sizeof(double));
    double *rv = calloc((size_t)n, sizeof(double));
    for (long i = 0; i < n; i++)
        rp[i] = p[i] = (real)(sin(0.3 * i) * 0.05);
    double worst = 0.0;
    long cleared = 0;
    for (int t = 1; t <= 5; t++) {
        for (long i = 0; i < n; i++)
            g0[i] = g[i] = (real)(cos(0.17 * i * t) * pow(10.0, -(double)(i % 9)));
        double bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t);
        be->adamw(be, NULL, p, g, m, v, n, (real)gs, (real)lr, (real)b1, (real)b2, (real)eps,
                  (real)wd, (real)bc1, (real)bc2);
        for (long i = 0; i < n; i++) {
            double gi = (double)g0[i] * gs; /* the pass cleared g */
            /* one step's rounding bounds each error: m and v relative to the magnitudes they
             * are summed from (their terms may cancel), p relative to lr (a step's largest
             * move) */
            double sm = b1 * fabs(rm[i]) + (1 - b1) * fabs(gi), sv = b2 * rv[i] + (1 - b2) * gi * gi;
            rm[i] = b1 * rm[i] + (1 - b1) * gi;
            rv[i] = b2 * rv[i] + (1 - b2) * gi * gi;
            double mh = rm[i] / bc1, vh = rv[i] / bc2;
            rp[i] -= lr * (mh / (sqrt(vh) + eps) + wd * rp[i]);
            double em = fabs(m[i] - rm[i]) / (sm + 1e-300);
            double ev = fabs(v[i] - rv[i]) / (sv + 1e-300);
            double ep = fabs(p[i] - rp[i]) / lr;
            worst = fmax(worst, fmax(em, fmax(ev, ep)));
            cleared += g[i] == 0;
        }
        /* each step starts from the reference's state, so that the bound is one step's */
        for (long i = 0; i < n; i++)
            m[i] = (real)rm[i], v[i] = (real)rv[i], p[i] = (real)rp[i];
    }
    const double tol = REAL_IS_DOUBLE ? 1e-13 : 1e-5;
    printf("# AdamW against the textbook update in double: worst relative error %.3g (bound "
           "%.3g), %ld of %ld gradients cleared\n",
           worst, tol, cleared, 5 * n);
    assert_true(worst <= tol);
    assert_int_equal(cleared, 5 * n);
    assert_int_equal(rt_backend_check(be, &err), FSMOE_OK);
    free(p), free(g), free(g0), free(m), free(v), free(rp), free(rm), free(rv);
    rt_backend_destroy(&be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#if !REAL_IS_DOUBLE
        cmocka_unit_test(test_exp_gelu_accuracy),
        cmocka_unit_test(test_gemm_threads),
        cmocka_unit_test(test_host_isa),
        cmocka_unit_test(test_profile_categories),
        cmocka_unit_test(test_stream_on_caller),
        cmocka_unit_test(test_sumsq_threads),
        cmocka_unit_test(test_layernorm_col_grads),
        cmocka_unit_test(test_skip_empty_slots_gpt),
        cmocka_unit_test(test_skip_empty_slots_swiglu),
#endif
        cmocka_unit_test(test_row_reductions),
        cmocka_unit_test(test_row_lanes),
        cmocka_unit_test(test_crossent_vocab_split),
        cmocka_unit_test(test_embed_vocab_split),
        cmocka_unit_test(test_gather_single),
        cmocka_unit_test(test_adamw_textbook),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
