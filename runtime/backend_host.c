/* Implements: the `host` backend (design.md §10): fp32 (or fp64 in the test build) on the CPU,
 * GEMMs by OpenBLAS, every other kernel a loop over the kernels.h functions (OpenMP-parallel
 * where each iteration writes its own output, so results do not depend on the thread count).
 *
 * Threads: one pool only. OpenMP owns the T threads; OpenBLAS runs single-threaded inside them
 * (a batched GEMM is split over its batch, a single GEMM over row or column blocks of C). Two
 * pools (OpenMP for the element-wise loops, OpenBLAS's own pthreads for the GEMMs) each keep
 * their idle workers spinning after a region, and on a 2-core machine the two spinning pools
 * took each other's cores: a 2-thread step ran 5x slower than a 1-thread one. Small loops run
 * on the calling thread only (`if` clauses): waking a worker costs more than they do.
 *
 * Streams: a host stream runs each task when it is enqueued, in issue order, which is a valid
 * (fully serialised) stream; events are therefore complete as soon as they are recorded. The
 * distributed issue replaces this with one worker thread per stream so that communication
 * overlaps computation (toolchain.md: Open MPI has no progress thread).
 * Collectives: only the single-rank group exists here (P = 1: copies). */
#include "backend_host.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

#if defined(_OPENMP)
#include <omp.h>
#endif

struct rt_stream {
    int unused;
};
struct rt_event {
    int unused;
};

#if REAL_IS_DOUBLE
#define CBLAS_GEMM cblas_dgemm
#else
#define CBLAS_GEMM cblas_sgemm
#endif

/* Loops over at least PAR_MIN elements' worth of work go parallel. */
#define PAR_MIN 16384
#define PAR _Pragma("omp parallel for schedule(static)")
#define PRAGMA_(x) _Pragma(#x)
#define PAR_IF(work) PRAGMA_(omp parallel for schedule(static) if((work) >= PAR_MIN))

static int h_threads(void)
{
#if defined(_OPENMP)
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static void *h_alloc(rt_backend *be, size_t bytes)
{
    (void)be;
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0)
        return NULL;
    memset(p, 0, bytes);
    return p;
}

static void h_free(rt_backend *be, void *p)
{
    (void)be;
    free(p);
}

static void h_copy(rt_backend *be, rt_stream *s, void *dst, const void *src, size_t bytes, int kind)
{
    (void)be, (void)s, (void)kind;
    if (bytes)
        memmove(dst, src, bytes);
}

static void h_zero(rt_backend *be, rt_stream *s, void *p, size_t bytes)
{
    (void)be, (void)s;
    memset(p, 0, bytes);
}

static rt_stream *h_stream_create(rt_backend *be)
{
    (void)be;
    return calloc(1, sizeof(rt_stream));
}
static void h_stream_destroy(rt_backend *be, rt_stream *s)
{
    (void)be;
    free(s);
}
static rt_event *h_event_create(rt_backend *be)
{
    (void)be;
    return calloc(1, sizeof(rt_event));
}
static void h_event_destroy(rt_backend *be, rt_event *e)
{
    (void)be;
    free(e);
}
static void h_event_record(rt_backend *be, rt_event *e, rt_stream *s) { (void)be, (void)e, (void)s; }
static void h_stream_wait(rt_backend *be, rt_stream *s, rt_event *e) { (void)be, (void)e, (void)s; }
static void h_stream_sync(rt_backend *be, rt_stream *s) { (void)be, (void)s; }

static void gemm1(int ta, int tb, long m, long n, long k, real alpha, const real *A, long lda,
                  const real *B, long ldb, real beta, real *C, long ldc)
{
    if (m <= 0 || n <= 0)
        return;
    if (k <= 0) {
        for (long r = 0; r < m; r++)
            for (long c = 0; c < n; c++)
                C[r * ldc + c] = beta == 0 ? (real)0 : C[r * ldc + c] * beta;
        return;
    }
    CBLAS_GEMM(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
               (int)m, (int)n, (int)k, alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}

static void h_gemm(rt_backend *be, rt_stream *s, int ta, int tb, long m, long n, long k,
                   real alpha, const real *A, long lda, long sA, const real *B, long ldb, long sB,
                   real beta, real *C, long ldc, long sC, long batch)
{
    (void)be, (void)s;
    if (m <= 0 || n <= 0 || batch <= 0)
        return;
    int T = h_threads();
    double work = (double)m * (double)n * (double)(k > 0 ? k : 1);
    if (T <= 1 || work * (double)batch < 2e5) {
        for (long i = 0; i < batch; i++)
            gemm1(ta, tb, m, n, k, alpha, A + i * sA, lda, B + i * sB, ldb, beta, C + i * sC, ldc);
        return;
    }
    if (batch >= T) {
        PAR for (long i = 0; i < batch; i++)
            gemm1(ta, tb, m, n, k, alpha, A + i * sA, lda, B + i * sB, ldb, beta, C + i * sC, ldc);
        return;
    }
    /* fewer problems than threads: split each C into T blocks of rows (or of columns when C is
     * wide), in multiples of 16 so that OpenBLAS's kernels see whole panels */
    int by_rows = m >= n;
    long len = by_rows ? m : n;
    long blk = ((len + T - 1) / T + 15) / 16 * 16;
    long nblk = (len + blk - 1) / blk;
    PAR for (long t = 0; t < batch * nblk; t++) {
        long i = t / nblk, b0 = (t % nblk) * blk, b1 = b0 + blk < len ? b0 + blk : len;
        const real *Ai = A + i * sA, *Bi = B + i * sB;
        real *Ci = C + i * sC;
        if (by_rows)
            gemm1(ta, tb, b1 - b0, n, k, alpha, ta ? Ai + b0 : Ai + b0 * lda, lda, Bi, ldb, beta,
                  Ci + b0 * ldc, ldc);
        else
            gemm1(ta, tb, m, b1 - b0, k, alpha, Ai, lda, tb ? Bi + b0 * ldb : Bi + b0, ldb, beta,
                  Ci + b0, ldc);
    }
}

static void h_embed_fwd(rt_backend *be, rt_stream *s, real *out, const real *wte, const real *wpe,
                        const int *tok, long B, long L, long M)
{
    (void)be, (void)s;
    PAR_IF(B * L * M) for (long n = 0; n < B * L; n++)
        k_embed_fwd(n, out, wte, wpe, tok, L, M);
}

static void h_embed_bwd(rt_backend *be, rt_stream *s, real *dwte, real *dwpe, const real *dout,
                        const int *tok, long B, long L, long M)
{
    (void)be, (void)s;
    /* token rows collide: sequential in token order (deterministic) */
    for (long n = 0; n < B * L; n++)
        for (long m = 0; m < M; m++)
            dwte[(long)tok[n] * M + m] += dout[n * M + m];
    PAR_IF(B * L * M) for (long l = 0; l < L; l++)
        k_wpe_grad_col(l, dwpe, dout, B, L, M);
}

static void h_layernorm_fwd(rt_backend *be, rt_stream *s, real *out, real *mean, real *rstd,
                            const real *x, const real *w, const real *b, long N, long M)
{
    (void)be, (void)s;
    PAR_IF(N * M * 4) for (long n = 0; n < N; n++)
        k_layernorm_row_fwd(n, out, mean, rstd, x, w, b, M);
}

static void h_layernorm_bwd(rt_backend *be, rt_stream *s, real *dx, real *dw, real *db,
                            const real *dout, const real *x, const real *mean, const real *rstd,
                            const real *w, long N, long M)
{
    (void)be, (void)s;
    PAR_IF(N * M * 4) for (long n = 0; n < N; n++)
        k_layernorm_row_bwd(n, dx, dout, x, mean, rstd, w, M);
    PAR_IF(N * M * 2) for (long m = 0; m < M; m++)
        k_layernorm_col_grad(m, dw, db, dout, x, mean, rstd, N, M);
}

static void h_bias_add(rt_backend *be, rt_stream *s, real *out, const real *bias, long N, long M)
{
    (void)be, (void)s;
    PAR_IF(N * M) for (long n = 0; n < N; n++)
        k_bias_add_row(n, out, bias, M);
}

#define BIAS_BLK 64
static void h_bias_grad(rt_backend *be, rt_stream *s, real *db, const real *dout, long N, long M)
{
    (void)be, (void)s;
    long nb = (M + BIAS_BLK - 1) / BIAS_BLK;
    PAR_IF(N * M) for (long b = 0; b < nb; b++) {
        real acc[BIAS_BLK];
        long m0 = b * BIAS_BLK, m1 = m0 + BIAS_BLK < M ? m0 + BIAS_BLK : M;
        k_bias_grad_cols(m0, m1, db, acc, dout, N, M);
    }
}

/* The kind branch is outside the loops so that each loop is one straight-line kernel that gcc
 * vectorises (k_tanh has no call or branch). */
static void h_act_fwd(rt_backend *be, rt_stream *s, int kind, real *h, real *a, const real *g,
                      const real *bias, long rows, long H)
{
    (void)be, (void)s;
    if (kind == 0 && bias) {
        PAR_IF(rows * H * 8) for (long r = 0; r < rows; r++)
            for (long m = 0; m < H; m++)
                k_act_fwd(0, r * H + m, h, a, g, bias[m]);
    } else if (kind == 0) {
        PAR_IF(rows * H * 8) for (long r = 0; r < rows; r++)
            for (long m = 0; m < H; m++)
                k_act_fwd(0, r * H + m, h, a, g, 0);
    } else {
        PAR_IF(rows * H * 8) for (long r = 0; r < rows; r++)
            for (long m = 0; m < H; m++)
                k_act_fwd(1, r * H + m, h, a, g, bias ? bias[m] : (real)0);
    }
}

static void h_act_bwd(rt_backend *be, rt_stream *s, int kind, real *da, real *dg, const real *dh,
                      const real *a, const real *g, long n)
{
    (void)be, (void)s;
    if (kind == 0) {
        PAR_IF(n * 8) for (long i = 0; i < n; i++)
            k_act_bwd(0, i, da, dg, dh, a, g);
    } else {
        PAR_IF(n * 8) for (long i = 0; i < n; i++)
            k_act_bwd(1, i, da, dg, dh, a, g);
    }
}

static void h_attn_softmax_fwd(rt_backend *be, rt_stream *s, real *att, const real *scores,
                               long rows, long L, real scale)
{
    (void)be, (void)s;
    PAR_IF(rows * L * 2) for (long r = 0; r < rows; r++)
        k_attn_softmax_row_fwd(r, att, scores, L, scale);
}

static void h_attn_softmax_bwd(rt_backend *be, rt_stream *s, real *dscores, const real *datt,
                               const real *att, long rows, long L, real scale)
{
    (void)be, (void)s;
    PAR_IF(rows * L) for (long r = 0; r < rows; r++)
        k_attn_softmax_row_bwd(r, dscores, datt, att, L, scale);
}

static void h_crossent(rt_backend *be, rt_stream *s, real *losses, real *dlogits,
                       const real *logits, const int *targets, long N, long V, real scale)
{
    (void)be, (void)s;
    PAR_IF(N * V * 4) for (long n = 0; n < N; n++)
        losses[n] = k_crossent_row(n, dlogits, logits, targets, V, scale);
}

static void h_adamw(rt_backend *be, rt_stream *s, real *p, const real *g, real *m, real *v,
                    long n, real lr, real b1, real b2, real eps, real wd, real bc1, real bc2)
{
    (void)be, (void)s;
    PAR_IF(n * 4) for (long i = 0; i < n; i++)
        k_adamw(i, p, g, m, v, lr, b1, b2, eps, wd, bc1, bc2);
}

static void h_add(rt_backend *be, rt_stream *s, real *out, const real *a, const real *b, long n)
{
    (void)be, (void)s;
    PAR_IF(n) for (long i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

static void h_axpy(rt_backend *be, rt_stream *s, real *y, real a, const real *x, long n)
{
    (void)be, (void)s;
    PAR_IF(n) for (long i = 0; i < n; i++)
        y[i] += a * x[i];
}

static void h_scale(rt_backend *be, rt_stream *s, real *x, real a, long n)
{
    (void)be, (void)s;
    PAR_IF(n) for (long i = 0; i < n; i++)
        x[i] *= a;
}

static double h_sumsq(rt_backend *be, rt_stream *s, const real *x, long n)
{
    (void)be, (void)s;
    double acc = 0;
    for (long i = 0; i < n; i++)
        acc += (double)x[i] * (double)x[i];
    return acc;
}

static void h_gather_rows(rt_backend *be, rt_stream *s, real *dst, const real *src,
                          const int *idx, long n, long M)
{
    (void)be, (void)s;
    PAR_IF(n * M) for (long i = 0; i < n; i++)
        k_gather_row(i, dst, src, idx, M);
}

static void h_scatter_add_rows(rt_backend *be, rt_stream *s, real *dst, const real *src,
                               const int *idx, const real *w, long n, long M)
{
    (void)be, (void)s;
    /* destinations collide: sequential in i (deterministic) */
    for (long i = 0; i < n; i++) {
        if (idx[i] < 0)
            continue;
        real wi = w ? w[i] : (real)1;
        real *d = dst + (long)idx[i] * M;
        const real *x = src + i * M;
        for (long m = 0; m < M; m++)
            d[m] += wi * x[m];
    }
}

static void h_row_dot(rt_backend *be, rt_stream *s, real *out, const real *a, const int *ia,
                      const real *b, const int *ib, long n, long M)
{
    (void)be, (void)s;
    PAR_IF(n * M) for (long i = 0; i < n; i++) {
        long ra = ia ? ia[i] : i, rb = ib ? ib[i] : i;
        out[i] = (ra < 0 || rb < 0) ? (real)0 : k_row_dot(a + ra * M, b + rb * M, M);
    }
}

static void h_allreduce_sum(rt_backend *be, rt_stream *s, const rt_group *g, real *buf, long n)
{
    (void)s, (void)buf, (void)n;
    if (g->size != 1)
        rt_backend_fail(be, FSMOE_ERR_INTERNAL,
                        "host backend: allreduce on a group of %d ranks needs the MPI "
                        "communicator (not built in this issue)", g->size);
}

static void h_alltoall_rows(rt_backend *be, rt_stream *s, const rt_group *g, real *dst,
                            const real *src, long E, long C, long c0, long c1, long M, int inverse)
{
    (void)s, (void)inverse;
    if (g->size != 1) {
        rt_backend_fail(be, FSMOE_ERR_INTERNAL,
                        "host backend: AllToAll on a group of %d ranks needs the MPI "
                        "communicator (not built in this issue)", g->size);
        return;
    }
    /* P = 1: dst[0][e] = src[e] for the slots [c0, c1), in both directions */
    for (long e = 0; e < E; e++)
        memmove(dst + (e * C + c0) * M, src + (e * C + c0) * M,
                (size_t)((c1 - c0) * M) * sizeof(real));
}

static void h_destroy(rt_backend *be) { free(be); }

fsmoe_status rt_backend_host_create(int threads, rt_backend **out, fsmoe_error *err)
{
    rt_backend *be = calloc(1, sizeof(*be));
    if (!be)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "host backend: out of memory");
    /* OpenMP owns the threads; OpenBLAS runs inside them, single-threaded (see the top). */
#if defined(_OPENMP)
    openblas_set_num_threads(1);
    if (threads > 0)
        omp_set_num_threads(threads);
#else
    if (threads > 0)
        openblas_set_num_threads(threads);
#endif
    be->name = "host";
    be->destroy = h_destroy;
    be->alloc = h_alloc;
    be->free = h_free;
    be->copy = h_copy;
    be->zero = h_zero;
    be->stream_create = h_stream_create;
    be->stream_destroy = h_stream_destroy;
    be->event_create = h_event_create;
    be->event_destroy = h_event_destroy;
    be->event_record = h_event_record;
    be->stream_wait = h_stream_wait;
    be->stream_sync = h_stream_sync;
    be->gemm = h_gemm;
    be->embed_fwd = h_embed_fwd;
    be->embed_bwd = h_embed_bwd;
    be->layernorm_fwd = h_layernorm_fwd;
    be->layernorm_bwd = h_layernorm_bwd;
    be->bias_add = h_bias_add;
    be->bias_grad = h_bias_grad;
    be->act_fwd = h_act_fwd;
    be->act_bwd = h_act_bwd;
    be->attn_softmax_fwd = h_attn_softmax_fwd;
    be->attn_softmax_bwd = h_attn_softmax_bwd;
    be->crossent = h_crossent;
    be->adamw = h_adamw;
    be->add = h_add;
    be->axpy = h_axpy;
    be->scale = h_scale;
    be->sumsq = h_sumsq;
    be->gather_rows = h_gather_rows;
    be->scatter_add_rows = h_scatter_add_rows;
    be->row_dot = h_row_dot;
    be->allreduce_sum = h_allreduce_sum;
    be->alltoall_rows = h_alltoall_rows;
    *out = be;
    return FSMOE_OK;
}
