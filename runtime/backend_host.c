/* Implements: the `host` backend (design.md §10): fp32 (or fp64 in the test build) on the CPU,
 * GEMMs by OpenBLAS, every other kernel a loop over the kernels.h functions (parallel over the
 * thread pool where each iteration writes its own output, so results do not depend on the
 * thread count).
 *
 * Threads: one pool only (host_pool.h), shared by every stream. The pool owns the T threads;
 * OpenBLAS runs single-threaded inside them (a batched GEMM is split over its batch, a single
 * GEMM over row or column blocks of C). Two pools (one for the element-wise loops, OpenBLAS's
 * own pthreads for the GEMMs) each kept their idle workers spinning after a loop, and on a
 * 2-core machine they took each other's cores: a 2-thread step ran 5x slower than a 1-thread
 * one; an OpenMP team per stream thread had the opposite trouble (host_pool.h). Small loops run
 * on the calling thread only: waking a worker costs more than they do.
 *
 * Streams (design.md §10.1): the default stream (NULL) is the caller's thread; every created
 * stream is a worker thread of the communication layer (comm/stream_thread.h) running its jobs
 * in issue order, and events are the layer's counters with condition variables, so work on two
 * streams really runs at once and an event wait really orders it. Open MPI has no progress
 * thread (toolchain.md), so a collective only overlaps computation when a thread of its own
 * drives it: the MoE layer's communication stream does. The kernels the executor issues on
 * created streams (GEMM, activations, biases, copies, row gathers, element-wise updates,
 * collectives) are queued as jobs; the rest run on the caller after draining the stream, which
 * keeps the stream's order (an event wait only ever refers to work issued before it).
 *
 * Collectives: MPI through comm/mpi_coll.h on the group's communicator for the stream's slot
 * (runtime/dist.h), nonblocking and waited for politely under the watchdog; a group of one rank
 * is a copy or nothing. */
#include "backend_host.h"

#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist.h"
#include "kernels.h"
#include "mpi_coll.h"
#include "stream_thread.h"
#include <pthread.h>
#include <stdatomic.h>

#include "host_pool.h"

struct rt_stream {
    stream_thread *t;
    int slot; /* which of a group's communicators this stream uses (dist.h) */
};
struct rt_event {
    int id;
};

#define HOST_EVENTS 8192

typedef struct {
    stream_events *ev;
    pthread_mutex_t mu;
    int free_ids[HOST_EVENTS], n_free;
    int streams_made;
    host_pool *pool; /* the one pool every stream's loops share (host_pool.h) */
    double *marks; /* RT_MARKS_MAX time stamps (allocated by the first mark) */
    int n_marks;
    atomic_int prof;                         /* --profile: kernels are timed */
    atomic_llong prof_ns[RT_PROF_CATS];      /* their nanoseconds, summed over the streams */
    atomic_llong prof_macs;                  /* the GEMMs' multiply-accumulates */
    pthread_mutex_t prof_mu;                 /* guards the shapes (GEMMs run on any stream) */
    rt_prof_gemm prof_shapes[RT_PROF_GEMM_SHAPES + 1]; /* the last sums those beyond */
    int prof_mag[RT_PROF_GEMM_SHAPES][3]; /* each entry's binary magnitude of m, n, k */
    int n_prof_shapes;
} host_impl;

static host_impl *H(rt_backend *be) { return be->impl; }

static int worker(const rt_stream *s) { return s && s->t; }

/* ---- the kernel profile (backend.h profile_enable): each kernel's run time, on the thread
 * that runs it, added to its category ---- */
static long long prof_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* A kernel run on the caller: its start (0 while not profiling), then prof_stop. */
static long long prof_start(rt_backend *be)
{
    return atomic_load_explicit(&H(be)->prof, memory_order_relaxed) ? prof_clock_ns() : 0;
}

static void prof_stop(rt_backend *be, int cat, long long t0)
{
    if (t0)
        atomic_fetch_add_explicit(&H(be)->prof_ns[cat], prof_clock_ns() - t0,
                                  memory_order_relaxed);
}

/* A queued kernel while profiling: the job and its arguments behind a header that times it. */
typedef struct {
    stream_job_fn fn;
    rt_backend *be;
    int cat;
    _Alignas(max_align_t) unsigned char arg[];
} prof_job_args;

static fsmoe_status prof_job(void *arg, fsmoe_error *err)
{
    prof_job_args *p = arg;
    long long t0 = prof_clock_ns();
    fsmoe_status st = p->fn(p->arg, err);
    prof_stop(p->be, p->cat, t0);
    return st;
}

/* Runs a job on s's thread, or now on the caller for the default stream; cat is its profile
 * category (-1: not a kernel). */
static void h_async(rt_backend *be, rt_stream *s, int cat, stream_job_fn fn, const void *arg,
                    size_t size)
{
    fsmoe_error e = {0};
    fsmoe_status st;
    _Alignas(max_align_t) unsigned char wrapped[STREAM_JOB_ARG_MAX];
    if (cat >= 0 && atomic_load_explicit(&H(be)->prof, memory_order_relaxed) &&
        offsetof(prof_job_args, arg) + size <= sizeof wrapped) {
        prof_job_args *p = (prof_job_args *)wrapped;
        p->fn = fn, p->be = be, p->cat = cat;
        memcpy(p->arg, arg, size);
        st = stream_submit(worker(s) ? s->t : NULL, prof_job, p,
                           offsetof(prof_job_args, arg) + size, &e);
    } else {
        st = stream_submit(worker(s) ? s->t : NULL, fn, arg, size, &e);
    }
    if (st != FSMOE_OK)
        rt_backend_fail(be, st, "%s", e.msg);
}

static int ilog2l(long v)
{
    int b = 0;
    while (v > 1)
        v >>= 1, b++;
    return b;
}

static void widen(long *range, long v)
{
    range[0] = v < range[0] ? v : range[0];
    range[1] = v > range[1] ? v : range[1];
}

/* One GEMM call of `seconds` into the shape table (the profile is on; backend.h rt_prof_gemm
 * says which calls share an entry). */
static void prof_gemm_shape(host_impl *h, int ta, int tb, long m, long n, long k, long batch,
                            double seconds)
{
    int mag[3] = {ilog2l(m), ilog2l(n), ilog2l(k)};
    pthread_mutex_lock(&h->prof_mu);
    rt_prof_gemm *e = NULL;
    for (int i = 0; i < h->n_prof_shapes && !e; i++) {
        rt_prof_gemm *c = &h->prof_shapes[i];
        if (c->ta == ta && c->tb == tb && c->batch == batch &&
            memcmp(h->prof_mag[i], mag, sizeof mag) == 0)
            e = c;
    }
    if (!e && h->n_prof_shapes < RT_PROF_GEMM_SHAPES) {
        memcpy(h->prof_mag[h->n_prof_shapes], mag, sizeof mag);
        e = &h->prof_shapes[h->n_prof_shapes++];
        *e = (rt_prof_gemm){ta, tb, {m, m}, {n, n}, {k, k}, batch, 0, 0.0, 0.0};
    }
    if (!e)
        e = &h->prof_shapes[RT_PROF_GEMM_SHAPES]; /* m[0] = 0: the others */
    else
        widen(e->m, m), widen(e->n, n), widen(e->k, k);
    e->calls++;
    e->s += seconds;
    e->macs += (double)m * (double)n * (double)k * (double)batch;
    pthread_mutex_unlock(&h->prof_mu);
}

static int h_profile_gemm_shapes(rt_backend *be, rt_prof_gemm *out)
{
    host_impl *h = H(be);
    pthread_mutex_lock(&h->prof_mu);
    int n = 0;
    rt_prof_gemm *other = &h->prof_shapes[RT_PROF_GEMM_SHAPES];
    if (out) {
        n = h->n_prof_shapes;
        memcpy(out, h->prof_shapes, (size_t)n * sizeof *out);
        if (other->calls > 0)
            out[n++] = *other;
    }
    h->n_prof_shapes = 0;
    memset(other, 0, sizeof *other);
    pthread_mutex_unlock(&h->prof_mu);
    return n;
}

static void h_profile_enable(rt_backend *be, int on) { atomic_store(&H(be)->prof, on != 0); }

static void h_profile_read(rt_backend *be, double *sec, double *gemm_macs)
{
    for (int c = 0; c < RT_PROF_CATS; c++)
        sec[c] = 1e-9 * (double)atomic_exchange(&H(be)->prof_ns[c], 0);
    *gemm_macs = (double)atomic_exchange(&H(be)->prof_macs, 0);
}

/* For kernels that run on the caller: first let s finish what was issued before. */
static void h_drain(rt_backend *be, rt_stream *s)
{
    if (!worker(s))
        return;
    fsmoe_error e = {0};
    if (stream_sync(s->t, &e) != FSMOE_OK)
        rt_backend_fail(be, e.status, "%s", e.msg);
}

/* A kernel that runs on the caller: s drained first, then its time counted from here
 * (prof_stop) under its profile category. */
static long long h_begin(rt_backend *be, rt_stream *s)
{
    h_drain(be, s);
    return prof_start(be);
}

#if REAL_IS_DOUBLE
#define CBLAS_GEMM cblas_dgemm
#else
#define CBLAS_GEMM cblas_sgemm
#endif

/* A parallel loop: the body is a range function over [lo, hi) with its arguments in a struct
 * (host_pool.h); `work` about the loop's element operations (small loops run on the caller). */
#define PAR_FOR(pool, n, work, fn, ctx) host_pool_for((pool), (n), (double)(work), (fn), (ctx))

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

typedef struct {
    void *dst;
    const void *src; /* NULL: zero dst */
    size_t bytes;
} copy_args;

static fsmoe_status copy_job(void *arg, fsmoe_error *err)
{
    (void)err;
    copy_args *a = arg;
    if (a->bytes && a->src)
        memmove(a->dst, a->src, a->bytes);
    else if (a->bytes)
        memset(a->dst, 0, a->bytes);
    return FSMOE_OK;
}

static void h_copy(rt_backend *be, rt_stream *s, void *dst, const void *src, size_t bytes, int kind)
{
    (void)kind;
    copy_args a = {dst, src, bytes};
    h_async(be, s, RT_PROF_ELEMWISE, copy_job, &a, sizeof a);
}

static void h_zero(rt_backend *be, rt_stream *s, void *p, size_t bytes)
{
    copy_args a = {p, NULL, bytes};
    h_async(be, s, RT_PROF_ELEMWISE, copy_job, &a, sizeof a);
}

static rt_stream *h_stream_create(rt_backend *be, int on_caller)
{
    rt_stream *s = calloc(1, sizeof(rt_stream));
    if (!s)
        return NULL;
    fsmoe_error e = {0};
    if (!on_caller && stream_thread_init(&s->t, &e) != FSMOE_OK) {
        free(s);
        return NULL;
    }
    host_impl *h = H(be);
    pthread_mutex_lock(&h->mu);
    s->slot = 1 + h->streams_made++ % (RT_STREAM_SLOTS - 1);
    pthread_mutex_unlock(&h->mu);
    return s;
}
static void h_stream_destroy(rt_backend *be, rt_stream *s)
{
    (void)be;
    if (!s)
        return;
    stream_thread_free(&s->t);
    free(s);
}
static rt_event *h_event_create(rt_backend *be)
{
    host_impl *h = H(be);
    rt_event *e = calloc(1, sizeof(rt_event));
    if (!e)
        return NULL;
    pthread_mutex_lock(&h->mu);
    e->id = h->n_free > 0 ? h->free_ids[--h->n_free] : -1;
    pthread_mutex_unlock(&h->mu);
    if (e->id < 0) {
        free(e);
        return NULL;
    }
    return e;
}
static void h_event_destroy(rt_backend *be, rt_event *e)
{
    host_impl *h = H(be);
    if (!e)
        return;
    pthread_mutex_lock(&h->mu);
    h->free_ids[h->n_free++] = e->id;
    pthread_mutex_unlock(&h->mu);
    free(e);
}
static void h_event_record(rt_backend *be, rt_event *e, rt_stream *s)
{
    fsmoe_error err = {0};
    if (stream_record(worker(s) ? s->t : NULL, H(be)->ev, e->id, &err) != FSMOE_OK)
        rt_backend_fail(be, err.status, "%s", err.msg);
}
static void h_stream_wait(rt_backend *be, rt_stream *s, rt_event *e)
{
    fsmoe_error err = {0};
    if (stream_wait(worker(s) ? s->t : NULL, H(be)->ev, e->id, &err) != FSMOE_OK)
        rt_backend_fail(be, err.status, "%s", err.msg);
}
static void h_stream_sync(rt_backend *be, rt_stream *s) { h_drain(be, s); }
static void h_stream_wait_idle(rt_backend *be, rt_stream *s, rt_stream *other)
{
    fsmoe_error err = {0};
    if (worker(other) &&
        stream_wait_idle(worker(s) ? s->t : NULL, other->t, &err) != FSMOE_OK)
        rt_backend_fail(be, err.status, "%s", err.msg);
}

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

/* One GEMM problem's C cut into blocks of rows (or columns when C is wide) for the pool. */
typedef struct {
    int ta, tb, by_rows;
    long m, n, k, lda, sA, ldb, sB, ldc, sC, len, blk, nblk;
    real alpha, beta;
    const real *A, *B;
    real *C;
} gemm_split;

static void gemm_range(const void *c, long lo, long hi)
{
    const gemm_split *g = c;
    for (long t = lo; t < hi; t++) {
        long i = t / g->nblk, b0 = (t % g->nblk) * g->blk;
        long b1 = b0 + g->blk < g->len ? b0 + g->blk : g->len;
        const real *Ai = g->A + i * g->sA, *Bi = g->B + i * g->sB;
        real *Ci = g->C + i * g->sC;
        if (g->nblk == 1)
            gemm1(g->ta, g->tb, g->m, g->n, g->k, g->alpha, Ai, g->lda, Bi, g->ldb, g->beta, Ci,
                  g->ldc);
        else if (g->by_rows)
            gemm1(g->ta, g->tb, b1 - b0, g->n, g->k, g->alpha,
                  g->ta ? Ai + b0 : Ai + b0 * g->lda, g->lda, Bi, g->ldb, g->beta,
                  Ci + b0 * g->ldc, g->ldc);
        else
            gemm1(g->ta, g->tb, g->m, b1 - b0, g->k, g->alpha, Ai, g->lda,
                  g->tb ? Bi + b0 * g->ldb : Bi + b0, g->ldb, g->beta, Ci + b0, g->ldc);
    }
}

static void gemm_now(host_pool *pool, int ta, int tb, long m, long n, long k, real alpha,
                     const real *A, long lda, long sA, const real *B, long ldb, long sB, real beta,
                     real *C, long ldc, long sC, long batch)
{
    if (m <= 0 || n <= 0 || batch <= 0)
        return;
    int T = host_pool_threads(pool);
    double work = (double)m * (double)n * (double)(k > 0 ? k : 1);
    gemm_split g = {ta, tb, m >= n, m, n, k, lda, sA, ldb, sB, ldc, sC, 0, 0, 1,
                    alpha, beta, A, B, C};
    if (T <= 1 || work * (double)batch < 2e5 || batch >= T) {
        /* one problem per iteration: the whole batch on the caller, or spread over the pool */
        PAR_FOR(pool, batch, T <= 1 || work * (double)batch < 2e5 ? 0 : work * (double)batch,
                gemm_range, &g);
        return;
    }
    /* fewer problems than threads: split each C into T blocks of rows (or of columns when C is
     * wide), in multiples of 16 so that OpenBLAS's kernels see whole panels */
    g.len = g.by_rows ? m : n;
    g.blk = ((g.len + T - 1) / T + 15) / 16 * 16;
    g.nblk = (g.len + g.blk - 1) / g.blk;
    PAR_FOR(pool, batch * g.nblk, work * (double)batch, gemm_range, &g);
}

typedef struct {
    host_impl *h;
    host_pool *pool;
    int ta;
    int tb;
    long m;
    long n;
    long k;
    real alpha;
    const real *A;
    long lda;
    long sA;
    const real *B;
    long ldb;
    long sB;
    real beta;
    real *C;
    long ldc;
    long sC;
    long batch;
} gemm_args;

static fsmoe_status gemm_job(void *arg, fsmoe_error *err)
{
    (void)err;
    gemm_args *q_ = arg;
    int prof = atomic_load_explicit(&q_->h->prof, memory_order_relaxed);
    long long t0 = prof ? prof_clock_ns() : 0;
    gemm_now(q_->pool, q_->ta, q_->tb, q_->m, q_->n, q_->k, q_->alpha, q_->A, q_->lda, q_->sA, q_->B, q_->ldb, q_->sB, q_->beta, q_->C, q_->ldc, q_->sC, q_->batch);
    if (prof) { /* the GEMM category's time and the shape's, from the same two clock reads */
        long long dt = prof_clock_ns() - t0;
        atomic_fetch_add_explicit(&q_->h->prof_ns[RT_PROF_GEMM], dt, memory_order_relaxed);
        atomic_fetch_add_explicit(&q_->h->prof_macs, (long long)(q_->m * q_->n * q_->k * q_->batch),
                                  memory_order_relaxed);
        prof_gemm_shape(q_->h, q_->ta, q_->tb, q_->m, q_->n, q_->k, q_->batch, 1e-9 * (double)dt);
    }
    return FSMOE_OK;
}

static void h_gemm(rt_backend *be, rt_stream *s, int ta, int tb, long m, long n, long k,
                   real alpha, const real *A, long lda, long sA, const real *B, long ldb, long sB,
                   real beta, real *C, long ldc, long sC, long batch)
{
    gemm_args q_ = {H(be), H(be)->pool, ta, tb, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C,
                    ldc, sC, batch};
    h_async(be, s, -1, gemm_job, &q_, sizeof q_); /* gemm_job profiles itself */
}

typedef struct {
    real *out, *dwpe;
    const real *wte, *wpe, *dout;
    const int *tok;
    long B, L, M;
} embed_ctx;

static void embed_fwd_range(const void *c, long lo, long hi)
{
    const embed_ctx *e = c;
    for (long n = lo; n < hi; n++)
        k_embed_fwd(n, e->out, e->wte, e->wpe, e->tok, e->L, e->M);
}

static void wpe_grad_range(const void *c, long lo, long hi)
{
    const embed_ctx *e = c;
    for (long l = lo; l < hi; l++)
        k_wpe_grad_col(l, e->dwpe, e->dout, e->B, e->L, e->M);
}

static void h_embed_fwd(rt_backend *be, rt_stream *s, real *out, const real *wte, const real *wpe,
                        const int *tok, long B, long L, long M)
{
    long long t0 = h_begin(be, s);
    embed_ctx e = {.out = out, .wte = wte, .wpe = wpe, .tok = tok, .B = B, .L = L, .M = M};
    PAR_FOR(H(be)->pool, B * L, B * L * M, embed_fwd_range, &e);
    prof_stop(be, RT_PROF_ELEMWISE, t0);
}

static void h_embed_bwd(rt_backend *be, rt_stream *s, real *dwte, real *dwpe, const real *dout,
                        const int *tok, long B, long L, long M)
{
    long long t0 = h_begin(be, s);
    /* token rows collide: sequential in token order (deterministic); tok < 0 lies in another
     * member's vocabulary slice (kernels.h) */
    for (long n = 0; n < B * L; n++) {
        if (tok[n] < 0)
            continue;
        for (long m = 0; m < M; m++)
            dwte[(long)tok[n] * M + m] += dout[n * M + m];
    }
    if (!dwpe) {
        prof_stop(be, RT_PROF_ELEMWISE, t0);
        return;
    }
    embed_ctx e = {.dwpe = dwpe, .dout = dout, .B = B, .L = L, .M = M};
    PAR_FOR(H(be)->pool, L, B * L * M, wpe_grad_range, &e);
    prof_stop(be, RT_PROF_ELEMWISE, t0);
}

typedef struct {
    real *out, *mean, *rstd, *dx, *dw, *db;
    const real *x, *w, *b, *dout, *cmean, *crstd;
    long N, M;
} ln_ctx;

static void ln_fwd_range(const void *c, long lo, long hi)
{
    const ln_ctx *q = c;
    for (long n = lo; n < hi; n++)
        k_layernorm_row_fwd(n, q->out, q->mean, q->rstd, q->x, q->w, q->b, q->M);
}

static void ln_bwd_rows_range(const void *c, long lo, long hi)
{
    const ln_ctx *q = c;
    for (long n = lo; n < hi; n++)
        k_layernorm_row_bwd(n, q->dx, q->dout, q->x, q->cmean, q->crstd, q->w, q->M);
}

#define LN_BLK 64
/* blocks of LN_BLK columns */
static void ln_bwd_cols_range(const void *c, long lo, long hi)
{
    const ln_ctx *q = c;
    real accw[LN_BLK], accb[LN_BLK], partw[LN_BLK], partb[LN_BLK];
    for (long b = lo; b < hi; b++) {
        long m0 = b * LN_BLK, m1 = m0 + LN_BLK < q->M ? m0 + LN_BLK : q->M;
        k_layernorm_col_grads(m0, m1, q->dw, q->db, accw, accb, partw, partb, q->dout, q->x,
                              q->cmean, q->crstd, q->N, q->M);
    }
}

static void h_layernorm_fwd(rt_backend *be, rt_stream *s, real *out, real *mean, real *rstd,
                            const real *x, const real *w, const real *b, long N, long M)
{
    long long t0 = h_begin(be, s);
    ln_ctx q = {.out = out, .mean = mean, .rstd = rstd, .x = x, .w = w, .b = b, .N = N, .M = M};
    PAR_FOR(H(be)->pool, N, N * M * 4, ln_fwd_range, &q);
    prof_stop(be, RT_PROF_ELEMWISE, t0);
}

static void h_layernorm_bwd(rt_backend *be, rt_stream *s, real *dx, real *dw, real *db,
                            const real *dout, const real *x, const real *mean, const real *rstd,
                            const real *w, long N, long M)
{
    long long t0 = h_begin(be, s);
    ln_ctx q = {.dx = dx, .dw = dw, .db = db, .x = x, .w = w, .dout = dout, .cmean = mean,
                .crstd = rstd, .N = N, .M = M};
    PAR_FOR(H(be)->pool, N, N * M * 4, ln_bwd_rows_range, &q);
    PAR_FOR(H(be)->pool, (M + LN_BLK - 1) / LN_BLK, N * M * 2, ln_bwd_cols_range, &q);
    prof_stop(be, RT_PROF_ELEMWISE, t0);
}

typedef struct {
    host_pool *pool;
    real *out;
    const real *bias;
    long N;
    long M;
} bias_add_args;

static void bias_add_range(const void *c, long lo, long hi)
{
    const bias_add_args *q = c;
    for (long n = lo; n < hi; n++)
        k_bias_add_row(n, q->out, q->bias, q->M);
}

static fsmoe_status bias_add_job(void *arg, fsmoe_error *err)
{
    (void)err;
    bias_add_args *q_ = arg;
    PAR_FOR(q_->pool, q_->N, q_->N * q_->M, bias_add_range, q_);
    return FSMOE_OK;
}

static void h_bias_add(rt_backend *be, rt_stream *s, real *out, const real *bias, long N, long M)
{
    bias_add_args q_ = {H(be)->pool, out, bias, N, M};
    h_async(be, s, RT_PROF_ELEMWISE, bias_add_job, &q_, sizeof q_);
}

#define BIAS_BLK 64
typedef struct {
    host_pool *pool;
    real *db;
    const real *dout;
    long N;
    long M;
} bias_grad_args;

static void bias_grad_range(const void *c, long lo, long hi)
{
    const bias_grad_args *q = c;
    for (long b = lo; b < hi; b++) {
        real acc[BIAS_BLK], part[BIAS_BLK];
        long m0 = b * BIAS_BLK, m1 = m0 + BIAS_BLK < q->M ? m0 + BIAS_BLK : q->M;
        k_bias_grad_cols(m0, m1, q->db, acc, part, q->dout, q->N, q->M);
    }
}

static fsmoe_status bias_grad_job(void *arg, fsmoe_error *err)
{
    (void)err;
    bias_grad_args *q_ = arg;
    PAR_FOR(q_->pool, (q_->M + BIAS_BLK - 1) / BIAS_BLK, q_->N * q_->M, bias_grad_range, q_);
    return FSMOE_OK;
}

static void h_bias_grad(rt_backend *be, rt_stream *s, real *db, const real *dout, long N, long M)
{
    bias_grad_args q_ = {H(be)->pool, db, dout, N, M};
    h_async(be, s, RT_PROF_ELEMWISE, bias_grad_job, &q_, sizeof q_);
}

typedef struct {
    host_pool *pool;
    int kind;
    real *h;
    real *a;
    const real *g;
    const real *bias;
    long rows;
    long H;
} act_fwd_args;

/* The kind branch is outside the loops so that each loop is one straight-line kernel that gcc
 * vectorises (k_tanh has no call or branch). */
static void act_fwd_range(const void *c, long lo, long hi)
{
    const act_fwd_args *q = c;
    real *h = q->h, *a = q->a;
    const real *g = q->g, *bias = q->bias;
    long H = q->H;
    if (q->kind == 0 && bias) {
        for (long r = lo; r < hi; r++)
            for (long m = 0; m < H; m++)
                k_act_fwd(0, r * H + m, h, a, g, bias[m]);
    } else if (q->kind == 0) {
        for (long r = lo; r < hi; r++)
            for (long m = 0; m < H; m++)
                k_act_fwd(0, r * H + m, h, a, g, 0);
    } else {
        for (long r = lo; r < hi; r++)
            for (long m = 0; m < H; m++)
                k_act_fwd(1, r * H + m, h, a, g, bias ? bias[m] : (real)0);
    }
}

static fsmoe_status act_fwd_job(void *arg, fsmoe_error *err)
{
    (void)err;
    act_fwd_args *q_ = arg;
    PAR_FOR(q_->pool, q_->rows, q_->rows * q_->H * 8, act_fwd_range, q_);
    return FSMOE_OK;
}

static void h_act_fwd(rt_backend *be, rt_stream *s, int kind, real *h, real *a, const real *g,
                      const real *bias, long rows, long H)
{
    act_fwd_args q_ = {((host_impl *)be->impl)->pool, kind, h, a, g, bias, rows, H};
    h_async(be, s, RT_PROF_ELEMWISE, act_fwd_job, &q_, sizeof q_);
}

typedef struct {
    host_pool *pool;
    int kind;
    real *da;
    real *dg;
    const real *dh;
    const real *a;
    const real *g;
    long n;
} act_bwd_args;

static void act_bwd_range(const void *c, long lo, long hi)
{
    const act_bwd_args *q = c;
    real *da = q->da, *dg = q->dg;
    const real *dh = q->dh, *a = q->a, *g = q->g;
    if (q->kind == 0) {
        for (long i = lo; i < hi; i++)
            k_act_bwd(0, i, da, dg, dh, a, g);
    } else {
        for (long i = lo; i < hi; i++)
            k_act_bwd(1, i, da, dg, dh, a, g);
    }
}

static fsmoe_status act_bwd_job(void *arg, fsmoe_error *err)
{
    (void)err;
    act_bwd_args *q_ = arg;
    PAR_FOR(q_->pool, q_->n, q_->n * 8, act_bwd_range, q_);
    return FSMOE_OK;
}

static void h_act_bwd(rt_backend *be, rt_stream *s, int kind, real *da, real *dg, const real *dh,
                      const real *a, const real *g, long n)
{
    act_bwd_args q_ = {H(be)->pool, kind, da, dg, dh, a, g, n};
    h_async(be, s, RT_PROF_ELEMWISE, act_bwd_job, &q_, sizeof q_);
}

typedef struct {
    real *out;
    const real *in, *att;
    long L;
    real scale;
} softmax_ctx;

static void softmax_fwd_range(const void *c, long lo, long hi)
{
    const softmax_ctx *q = c;
    for (long r = lo; r < hi; r++)
        k_attn_softmax_row_fwd(r, q->out, q->in, q->L, q->scale);
}

static void softmax_bwd_range(const void *c, long lo, long hi)
{
    const softmax_ctx *q = c;
    for (long r = lo; r < hi; r++)
        k_attn_softmax_row_bwd(r, q->out, q->in, q->att, q->L, q->scale);
}

static void h_attn_softmax_fwd(rt_backend *be, rt_stream *s, real *att, const real *scores,
                               long rows, long L, real scale)
{
    long long t0 = h_begin(be, s);
    softmax_ctx q = {att, scores, NULL, L, scale};
    PAR_FOR(H(be)->pool, rows, rows * L * 2, softmax_fwd_range, &q);
    prof_stop(be, RT_PROF_ATTENTION, t0);
}

static void h_attn_softmax_bwd(rt_backend *be, rt_stream *s, real *dscores, const real *datt,
                               const real *att, long rows, long L, real scale)
{
    long long t0 = h_begin(be, s);
    softmax_ctx q = {dscores, datt, att, L, scale};
    PAR_FOR(H(be)->pool, rows, rows * L, softmax_bwd_range, &q);
    prof_stop(be, RT_PROF_ATTENTION, t0);
}

typedef struct {
    real *losses, *dlogits, *stats_out;
    const real *logits, *stats;
    const int *targets;
    int P;
    long N, V, v0;
    real scale;
} crossent_ctx;

static void crossent_range(const void *c, long lo, long hi)
{
    const crossent_ctx *q = c;
    for (long n = lo; n < hi; n++)
        q->losses[n] = k_crossent_row(n, q->dlogits, q->logits, q->targets, q->V, q->scale);
}

static void crossent_stats_range(const void *c, long lo, long hi)
{
    const crossent_ctx *q = c;
    for (long n = lo; n < hi; n++)
        k_crossent_stats_row(n, q->stats_out, q->logits, q->targets, q->V, q->v0);
}

static void crossent_finish_range(const void *c, long lo, long hi)
{
    const crossent_ctx *q = c;
    for (long n = lo; n < hi; n++)
        q->losses[n] = k_crossent_finish_row(n, q->dlogits, q->logits, q->targets, q->stats,
                                             q->P, q->N, q->V, q->v0, q->scale);
}

static void h_crossent(rt_backend *be, rt_stream *s, real *losses, real *dlogits,
                       const real *logits, const int *targets, long N, long V, real scale)
{
    long long t0 = h_begin(be, s);
    crossent_ctx q = {.losses = losses, .dlogits = dlogits, .logits = logits,
                      .targets = targets, .N = N, .V = V, .scale = scale};
    PAR_FOR(H(be)->pool, N, N * V * 4, crossent_range, &q);
    prof_stop(be, RT_PROF_ELEMWISE, t0);
}

static void h_crossent_stats(rt_backend *be, rt_stream *s, real *stats, const real *logits,
                             const int *targets, long N, long Vl, long v0)
{
    long long t0 = h_begin(be, s);
    crossent_ctx q = {.stats_out = stats, .logits = logits, .targets = targets, .N = N,
                      .V = Vl, .v0 = v0};
    PAR_FOR(H(be)->pool, N, N * Vl * 2, crossent_stats_range, &q);
    prof_stop(be, RT_PROF_ELEMWISE, t0);
}

static void h_crossent_finish(rt_backend *be, rt_stream *s, real *losses, real *dlogits,
                              const real *logits, const int *targets, const real *stats, int P,
                              long N, long Vl, long v0, real scale)
{
    long long t0 = h_begin(be, s);
    crossent_ctx q = {.losses = losses, .dlogits = dlogits, .logits = logits, .stats = stats,
                      .targets = targets, .P = P, .N = N, .V = Vl, .v0 = v0, .scale = scale};
    PAR_FOR(H(be)->pool, N, N * Vl * 2, crossent_finish_range, &q);
    prof_stop(be, RT_PROF_ELEMWISE, t0);
}

typedef struct {
    real *p, *g, *m, *v;
    k_adamw_coef c;
} adamw_ctx;

static void adamw_range(const void *c, long lo, long hi)
{
    const adamw_ctx *q = c;
    for (long i = lo; i < hi; i++)
        k_adamw(i, q->p, q->g, q->m, q->v, q->c);
}

static void h_adamw(rt_backend *be, rt_stream *s, real *p, real *g, real *m, real *v, long n,
                    real gs, real lr, real b1, real b2, real eps, real wd, real bc1, real bc2)
{
    long long t0 = h_begin(be, s);
    adamw_ctx q = {p, g, m, v, k_adamw_coefs(gs, lr, b1, b2, eps, wd, bc1, bc2)};
    PAR_FOR(H(be)->pool, n, n * 4, adamw_range, &q);
    prof_stop(be, RT_PROF_OPTIMIZER, t0);
}

typedef struct {
    host_pool *pool;
    real *out;
    const real *a;
    const real *b;
    long n;
} add_args;

static void add_range(const void *c, long lo, long hi)
{
    const add_args *q = c;
    for (long i = lo; i < hi; i++)
        q->out[i] = q->a[i] + q->b[i];
}

static fsmoe_status add_job(void *arg, fsmoe_error *err)
{
    (void)err;
    add_args *q_ = arg;
    PAR_FOR(q_->pool, q_->n, q_->n, add_range, q_);
    return FSMOE_OK;
}

static void h_add(rt_backend *be, rt_stream *s, real *out, const real *a, const real *b, long n)
{
    add_args q_ = {H(be)->pool, out, a, b, n};
    h_async(be, s, RT_PROF_ELEMWISE, add_job, &q_, sizeof q_);
}

typedef struct {
    host_pool *pool;
    real *y;
    real a;
    const real *x;
    long n;
} axpy_args;

static void axpy_range(const void *c, long lo, long hi)
{
    const axpy_args *q = c;
    for (long i = lo; i < hi; i++)
        q->y[i] += q->a * q->x[i];
}

static fsmoe_status axpy_job(void *arg, fsmoe_error *err)
{
    (void)err;
    axpy_args *q_ = arg;
    PAR_FOR(q_->pool, q_->n, q_->n, axpy_range, q_);
    return FSMOE_OK;
}

static void h_axpy(rt_backend *be, rt_stream *s, real *y, real a, const real *x, long n)
{
    axpy_args q_ = {H(be)->pool, y, a, x, n};
    h_async(be, s, RT_PROF_ELEMWISE, axpy_job, &q_, sizeof q_);
}

typedef struct {
    host_pool *pool;
    real *x;
    real a;
    long n;
} scale_args;

static void scale_range(const void *c, long lo, long hi)
{
    const scale_args *q = c;
    for (long i = lo; i < hi; i++)
        q->x[i] *= q->a;
}

static fsmoe_status scale_job(void *arg, fsmoe_error *err)
{
    (void)err;
    scale_args *q_ = arg;
    PAR_FOR(q_->pool, q_->n, q_->n, scale_range, q_);
    return FSMOE_OK;
}

static void h_scale(rt_backend *be, rt_stream *s, real *x, real a, long n)
{
    scale_args q_ = {H(be)->pool, x, a, n};
    h_async(be, s, RT_PROF_ELEMWISE, scale_job, &q_, sizeof q_);
}

/* Σ x² in blocks of SUMSQ_BLK elements, each summed in double over 8 interleaved lanes (which
 * vectorise) and the blocks added in order: the same bits whatever the thread count. */
#define SUMSQ_BLK 32768L
typedef struct {
    const real *x;
    long n;
    double *part; /* per block */
} sumsq_ctx;

static void sumsq_range(const void *c, long lo, long hi)
{
    const sumsq_ctx *q = c;
    for (long b = lo; b < hi; b++) {
        long i0 = b * SUMSQ_BLK, i1 = i0 + SUMSQ_BLK < q->n ? i0 + SUMSQ_BLK : q->n;
        double lane[8] = {0};
        long i = i0;
        for (; i + 8 <= i1; i += 8)
            for (int j = 0; j < 8; j++)
                lane[j] += (double)q->x[i + j] * (double)q->x[i + j];
        for (int j = 0; i < i1; i++, j++)
            lane[j] += (double)q->x[i] * (double)q->x[i];
        q->part[b] = ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
                     ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    }
}

static double h_sumsq(rt_backend *be, rt_stream *s, const real *x, long n)
{
    long long t0 = h_begin(be, s);
    long nb = n > 0 ? (n + SUMSQ_BLK - 1) / SUMSQ_BLK : 0;
    /* the blocks' partial sums: on the stack up to 32 M elements (no allocation in a step) */
    double one, on_stack[1024];
    double *part = nb <= 1 ? &one : nb <= 1024 ? on_stack : malloc((size_t)nb * sizeof *part);
    double acc = 0;
    if (!part) { /* without memory: one block after the other, the same sum */
        for (long b = 0; b < nb; b++) {
            sumsq_ctx q = {x + b * SUMSQ_BLK, n - b * SUMSQ_BLK, &one};
            sumsq_range(&q, 0, 1);
            acc += one;
        }
    } else {
        sumsq_ctx q = {x, n, part};
        PAR_FOR(H(be)->pool, nb, n, sumsq_range, &q);
        for (long b = 0; b < nb; b++)
            acc += part[b];
        if (part != &one && part != on_stack)
            free(part);
    }
    prof_stop(be, RT_PROF_OPTIMIZER, t0);
    return acc;
}

typedef struct {
    host_pool *pool;
    real *dst;
    const real *src;
    const int *idx;
    long n;
    long M;
} gather_rows_args;

static void gather_rows_range(const void *c, long lo, long hi)
{
    const gather_rows_args *q = c;
    for (long i = lo; i < hi; i++)
        k_gather_row(i, q->dst, q->src, q->idx, q->M);
}

static fsmoe_status gather_rows_job(void *arg, fsmoe_error *err)
{
    (void)err;
    gather_rows_args *q_ = arg;
    PAR_FOR(q_->pool, q_->n, q_->n * q_->M, gather_rows_range, q_);
    return FSMOE_OK;
}

static void h_gather_rows(rt_backend *be, rt_stream *s, real *dst, const real *src,
                          const int *idx, long n, long M)
{
    gather_rows_args q_ = {H(be)->pool, dst, src, idx, n, M};
    h_async(be, s, RT_PROF_GATE, gather_rows_job, &q_, sizeof q_);
}

static void scatter_add_rows_now(real *dst, const real *src,
                               const int *idx, const real *w, long n, long M)
{
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

typedef struct {
    real *dst;
    const real *src;
    const int *idx;
    const real *w;
    long n;
    long M;
} scatter_add_rows_args;

static fsmoe_status scatter_add_rows_job(void *arg, fsmoe_error *err)
{
    (void)err;
    scatter_add_rows_args *q_ = arg;
    scatter_add_rows_now(q_->dst, q_->src, q_->idx, q_->w, q_->n, q_->M);
    return FSMOE_OK;
}

static void h_scatter_add_rows(rt_backend *be, rt_stream *s, real *dst, const real *src,
                               const int *idx, const real *w, long n, long M)
{
    scatter_add_rows_args q_ = {dst, src, idx, w, n, M};
    h_async(be, s, RT_PROF_GATE, scatter_add_rows_job, &q_, sizeof q_);
}

typedef struct {
    real *out;
    const real *a;
    const int *ia;
    const real *b;
    const int *ib;
    long M;
} row_dot_ctx;

static void row_dot_range(const void *c, long lo, long hi)
{
    const row_dot_ctx *q = c;
    for (long i = lo; i < hi; i++) {
        long ra = q->ia ? q->ia[i] : i, rb = q->ib ? q->ib[i] : i;
        q->out[i] = (ra < 0 || rb < 0) ? (real)0
                                        : k_dot(q->a + ra * q->M, q->b + rb * q->M, q->M);
    }
}

static void h_row_dot(rt_backend *be, rt_stream *s, real *out, const real *a, const int *ia,
                      const real *b, const int *ib, long n, long M)
{
    long long t0 = h_begin(be, s);
    row_dot_ctx q = {out, a, ia, b, ib, M};
    PAR_FOR(H(be)->pool, n, n * M, row_dot_range, &q);
    prof_stop(be, RT_PROF_GATE, t0);
}

/* Which of a group's communicators (and 2DH sub-communicators) stream s uses (dist.h). */
static int slot_of(const rt_stream *s) { return worker(s) ? s->slot : 0; }

static MPI_Comm group_comm(const rt_group *g, const rt_stream *s)
{
    const rt_comm_group *cg = g->impl;
    return cg->comm[slot_of(s)];
}

typedef struct {
    rt_backend *be;
    MPI_Comm comm;
    real *buf;
    long n;
    const char *what;
} allreduce_args;

static fsmoe_status allreduce_job(void *arg, fsmoe_error *err)
{
    allreduce_args *a = arg;
    if (rt_backend_failed(a->be)) /* backend.h: skipped after a failure */
        return FSMOE_ERR_MPI;
    /* MPI counts are ints: large buffers go in pieces */
    const long piece = 1L << 28;
    for (long off = 0; off < a->n; off += piece) {
        int cnt = (int)(a->n - off < piece ? a->n - off : piece);
        fsmoe_status st = fsmoe_mpi_allreduce(a->comm, a->buf + off, a->buf + off, cnt,
                                              MPI_REAL_T, MPI_SUM, a->what, err);
        if (st != FSMOE_OK) {
            rt_backend_fail(a->be, st, "%s", err->msg);
            return st;
        }
    }
    return FSMOE_OK;
}

static void h_allreduce_sum(rt_backend *be, rt_stream *s, const rt_group *g, real *buf, long n,
                            const char *what)
{
    if (g->size == 1 || n <= 0)
        return;
    allreduce_args a = {be, group_comm(g, s), buf, n, what};
    h_async(be, s, RT_PROF_COMM, allreduce_job, &a, sizeof a);
}

typedef struct {
    rt_backend *be;
    MPI_Comm comm;
    int P;
    real *dst;
    const real *src;
    const int *send_rows, *recv_rows;
    long M;
    const char *what;
} a2av_args;

static fsmoe_status a2av_job(void *arg, fsmoe_error *err)
{
    a2av_args *a = arg;
    if (rt_backend_failed(a->be)) /* backend.h: skipped after a failure */
        return FSMOE_ERR_MPI;
    int P = a->P;
    int *c = malloc((size_t)(4 * P) * sizeof(int));
    if (!c) {
        rt_backend_fail(a->be, FSMOE_ERR_NOMEM, "%s: out of memory", a->what);
        return FSMOE_ERR_NOMEM;
    }
    int *sc = c, *sd = c + P, *rc = c + 2 * P, *rd = c + 3 * P;
    long so = 0, ro = 0;
    for (int p = 0; p < P; p++) {
        sc[p] = (int)(a->send_rows[p] * a->M), sd[p] = (int)so;
        rc[p] = (int)(a->recv_rows[p] * a->M), rd[p] = (int)ro;
        so += sc[p], ro += rc[p];
    }
    fsmoe_status st = FSMOE_OK;
    if (so > INT_MAX || ro > INT_MAX)
        st = fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: %ld elements exceed MPI's int displacements",
                        a->what, so > ro ? so : ro);
    else
        st = fsmoe_mpi_alltoallv(a->comm, a->src, sc, sd, a->dst, rc, rd, MPI_REAL_T, a->what,
                                 err);
    free(c);
    if (st != FSMOE_OK)
        rt_backend_fail(a->be, st, "%s", err->msg);
    return st;
}

static void h_alltoallv_rows(rt_backend *be, rt_stream *s, const rt_group *g, real *dst,
                             const real *src, const int *send_rows, const int *recv_rows, long M,
                             const char *what)
{
    if (g->size == 1) {
        copy_args a = {dst, src, (size_t)send_rows[0] * (size_t)M * sizeof(real)};
        if (send_rows[0] != recv_rows[0]) {
            rt_backend_fail(be, FSMOE_ERR_INTERNAL, "%s: sends %d rows to itself, receives %d",
                            what, send_rows[0], recv_rows[0]);
            return;
        }
        if (a.bytes)
            h_async(be, s, RT_PROF_COMM, copy_job, &a, sizeof a);
        return;
    }
    a2av_args a = {be, group_comm(g, s), g->size, dst, src, send_rows, recv_rows, M, what};
    h_async(be, s, RT_PROF_COMM, a2av_job, &a, sizeof a);
}

typedef struct {
    rt_backend *be;
    rt_comm_group *cg;
    int slot;
    real *dst;
    const real *src;
    const int *counts;
    long M;
    const char *what;
} a2a_2dh_args;

static fsmoe_status a2a_2dh_job(void *arg, fsmoe_error *err)
{
    a2a_2dh_args *a = arg;
    if (rt_backend_failed(a->be)) /* backend.h: skipped after a failure */
        return FSMOE_ERR_MPI;
    rt_comm_group *cg = a->cg;
    int s = a->slot;
    fsmoe_a2a_2dh_plan p = {0};
    fsmoe_status st = FSMOE_OK;
    if (a->M > INT_MAX) {
        st = fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: rows of %ld elements exceed MPI's int counts",
                        a->what, a->M);
        goto out;
    }
    if (fsmoe_a2a_2dh_plan_make(cg->h2, cg->rank, a->counts, &p) != 0) {
        st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "%s: out of memory", a->what);
        goto out;
    }
    size_t bytes = (size_t)(p.rows_a + 2 * p.rows_b) * (size_t)a->M * sizeof(real);
    if (bytes > cg->h_stage_bytes[s]) { /* only this slot's thread uses its stage */
        free(cg->h_stage[s]);
        cg->h_stage_bytes[s] = 0;
        if (!(cg->h_stage[s] = malloc(bytes))) {
            st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "%s: out of memory for %zu staging bytes",
                            a->what, bytes);
            goto out;
        }
        cg->h_stage_bytes[s] = bytes;
    }
    st = fsmoe_mpi_alltoallv_2dh(cg->h_intra[s], cg->h_inter[s], &p, a->src, a->dst,
                                 cg->h_stage[s], (int)a->M, MPI_REAL_T, a->what, err);
out:
    fsmoe_a2a_2dh_plan_free(&p);
    if (st != FSMOE_OK)
        rt_backend_fail(a->be, st, "%s", err->msg);
    return st;
}

static void h_alltoallv_rows_2dh(rt_backend *be, rt_stream *s, const rt_group *g, real *dst,
                                 const real *src, const int *counts, long M, const char *what)
{
    if (!dist_group_2dh(g)) {
        rt_backend_fail(be, FSMOE_ERR_INTERNAL, "%s: the group's AllToAll cannot be hierarchical",
                        what);
        return;
    }
    a2a_2dh_args a = {be, g->impl, slot_of(s), dst, src, counts, M, what};
    h_async(be, s, RT_PROF_COMM, a2a_2dh_job, &a, sizeof a);
}

/* AllGather and ReduceScatter: one job type, one MPI call each (the calls fsmoe-bench times). */
typedef struct {
    rt_backend *be;
    MPI_Comm comm;
    int P;
    int reduce; /* 0: allgather, 1: reducescatter_sum */
    real *dst;
    const real *src;
    long n;
    const char *what;
} gather_args;

static fsmoe_status gather_job(void *arg, fsmoe_error *err)
{
    gather_args *a = arg;
    if (rt_backend_failed(a->be)) /* backend.h: skipped after a failure */
        return FSMOE_ERR_MPI;
    fsmoe_status st;
    /* counts are ints, and MPI implementations keep the whole buffer's count (P·n) in an int
     * too (MPICH's reduce-scatter does): refused above that (a derived datatype could lift the
     * limit; no tensor of the runtime comes near it) */
    if (a->n > INT_MAX / a->P)
        st = fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: %d members x %ld elements exceed MPI's int "
                        "counts", a->what, a->P, a->n);
    else if (a->reduce)
        st = fsmoe_mpi_reducescatter(a->comm, a->src, a->dst, (int)a->n, MPI_REAL_T, MPI_SUM,
                                     a->what, err);
    else
        st = fsmoe_mpi_allgather(a->comm, a->src, a->dst, (int)a->n, MPI_REAL_T, a->what, err);
    if (st != FSMOE_OK)
        rt_backend_fail(a->be, st, "%s", err->msg);
    return st;
}

static void h_gather(rt_backend *be, rt_stream *s, const rt_group *g, int reduce, real *dst,
                     const real *src, long n, const char *what)
{
    if (n <= 0)
        return;
    if (g->size == 1) {
        copy_args a = {dst, src, (size_t)n * sizeof(real)};
        h_async(be, s, RT_PROF_COMM, copy_job, &a, sizeof a);
        return;
    }
    gather_args a = {be, group_comm(g, s), g->size, reduce, dst, src, n, what};
    h_async(be, s, RT_PROF_COMM, gather_job, &a, sizeof a);
}

static void h_allgather(rt_backend *be, rt_stream *s, const rt_group *g, real *dst,
                        const real *src, long n, const char *what)
{
    h_gather(be, s, g, 0, dst, src, n, what);
}

static void h_reducescatter_sum(rt_backend *be, rt_stream *s, const rt_group *g, real *dst,
                                const real *src, long n, const char *what)
{
    h_gather(be, s, g, 1, dst, src, n, what);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    double *slot;
} mark_args;

static fsmoe_status mark_job(void *arg, fsmoe_error *err)
{
    (void)err;
    *((const mark_args *)arg)->slot = now_s();
    return FSMOE_OK;
}

/* Ids are handed out on the caller's thread; a stream's job writes its own slot, read only after
 * stream_sync (whose mutex orders the write before the read). */
static int h_mark(rt_backend *be, rt_stream *s)
{
    host_impl *h = H(be);
    if (!h->marks && !(h->marks = malloc(RT_MARKS_MAX * sizeof *h->marks)))
        return -1;
    if (h->n_marks >= RT_MARKS_MAX)
        return -1;
    int id = h->n_marks++;
    mark_args a = {&h->marks[id]};
    h_async(be, s, -1, mark_job, &a, sizeof a);
    return id;
}

static fsmoe_status h_marks_read(rt_backend *be, double *t, int n, fsmoe_error *err)
{
    host_impl *h = H(be);
    if (n < 0 || n > h->n_marks)
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "trace: %d marks read, %d taken", n,
                          h->n_marks);
    if (n > 0)
        memcpy(t, h->marks, (size_t)n * sizeof *t);
    h->n_marks = 0;
    return FSMOE_OK;
}

/* How long the pool's idle workers spin before they sleep: FSMOE_HOST_SPIN_US, else
 * HOST_SPIN_US. Long enough to bridge the gaps between a step's kernels (a few to a hundred
 * microseconds), short enough not to hold a core through a collective's wait. */
#define HOST_SPIN_US 200
static fsmoe_status host_spin_us(int *us, fsmoe_error *err)
{
    const char *e = getenv("FSMOE_HOST_SPIN_US");
    *us = HOST_SPIN_US;
    if (!e || !*e)
        return FSMOE_OK;
    char *end;
    long v = strtol(e, &end, 10);
    if (*end || v < 0 || v > 1000000)
        return fsmoe_fail(err, FSMOE_ERR_USAGE,
                          "FSMOE_HOST_SPIN_US=%s: expected microseconds in 0..1000000", e);
    *us = (int)v;
    return FSMOE_OK;
}

static void h_destroy(rt_backend *be)
{
    host_impl *h = be ? be->impl : NULL;
    if (h) {
        host_pool_free(h->pool);
        free(h->marks);
        stream_events_free(&h->ev);
        pthread_mutex_destroy(&h->mu);
        pthread_mutex_destroy(&h->prof_mu);
        free(h);
    }
    free(be);
}

/* This file is compiled once per instruction set (runtime/meson.build: RT_HOST_ISA names the
 * copy, its compiler flags make the element-wise loops use that set's vectors and FMA);
 * backend_host_isa.c picks the copy the CPU runs. */
#ifndef RT_HOST_ISA
#define RT_HOST_ISA baseline
#endif
#define HOST_CAT_(a, b) a##b
#define HOST_CAT(a, b) HOST_CAT_(a, b)

fsmoe_status HOST_CAT(rt_backend_host_create_, RT_HOST_ISA)(int threads, rt_backend **out,
                                                            fsmoe_error *err);
fsmoe_status HOST_CAT(rt_backend_host_create_, RT_HOST_ISA)(int threads, rt_backend **out,
                                                            fsmoe_error *err)
{
    rt_backend *be = calloc(1, sizeof(*be));
    if (!be)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "host backend: out of memory");
    /* the pool owns the threads; OpenBLAS runs inside them, single-threaded (see the top) */
    openblas_set_num_threads(1);
    host_impl *h = calloc(1, sizeof *h);
    if (!h) {
        free(be);
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "host backend: out of memory");
    }
    be->impl = h;
    be->destroy = h_destroy;
    pthread_mutex_init(&h->mu, NULL);
    pthread_mutex_init(&h->prof_mu, NULL);
    int spin_us = 0;
    fsmoe_status st = host_spin_us(&spin_us, err);
    if (st == FSMOE_OK)
        st = host_pool_create(threads > 0 ? threads : host_pool_default_threads(), spin_us,
                              &h->pool, err);
    if (st != FSMOE_OK) {
        h_destroy(be);
        return st;
    }
    be->threads = host_pool_threads(h->pool);
    for (int i = 0; i < HOST_EVENTS; i++)
        h->free_ids[i] = HOST_EVENTS - 1 - i;
    h->n_free = HOST_EVENTS;
    st = stream_events_init(&h->ev, HOST_EVENTS, err);
    if (st != FSMOE_OK) {
        h_destroy(be);
        return st;
    }
    be->name = "host";
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
    be->stream_wait_idle = h_stream_wait_idle;
    be->mark = h_mark;
    be->marks_read = h_marks_read;
    be->profile_enable = h_profile_enable;
    be->profile_read = h_profile_read;
    be->profile_gemm_shapes = h_profile_gemm_shapes;
    be->on_caller = 1;
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
    be->crossent_stats = h_crossent_stats;
    be->crossent_finish = h_crossent_finish;
    be->adamw = h_adamw;
    be->add = h_add;
    be->axpy = h_axpy;
    be->scale = h_scale;
    be->sumsq = h_sumsq;
    be->gather_rows = h_gather_rows;
    be->scatter_add_rows = h_scatter_add_rows;
    be->row_dot = h_row_dot;
    be->allreduce_sum = h_allreduce_sum;
    be->alltoallv_rows = h_alltoallv_rows;
    be->alltoallv_rows_2dh = h_alltoallv_rows_2dh;
    be->allgather = h_allgather;
    be->reducescatter_sum = h_reducescatter_sum;
    *out = be;
    return FSMOE_OK;
}
