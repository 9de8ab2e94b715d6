/* Implements: the `cuda` backend (design.md §10): cuBLAS GEMMs, CUDA streams and events, and one
 * kernel per backend op that calls the same kernels.h function the host backend loops over
 * (one thread per element, row or column). fp32 only.
 *
 * Differences from the host backend, on purpose: embedding and scatter-add gradients use
 * atomicAdd (order of accumulation not fixed, so not bit-reproducible run to run); sumsq
 * accumulates in double with atomics. Errors are recorded in be->err (sticky) with the
 * CUDA/cuBLAS/NCCL message.
 *
 * Many ranks: each rank uses the device (local rank mod devices); collectives are NCCL on the
 * group's members, one NCCL communicator per (group, stream slot) like the host backend's MPI
 * communicators (runtime/dist.h): two streams never share a communicator, so their collectives
 * cannot be matched across each other. A communicator is made on its first collective (every
 * member reaches it in the same program order), bootstrapped over the group's MPI communicator
 * of that slot (comm/nccl_boot.h). AllToAllv is ncclSend/ncclRecv per member in one group call;
 * AllGather and ReduceScatter are NCCL's own.
 * Without NCCL in the build, groups of more than one rank fail with a message. */
#define OMPI_SKIP_MPICXX 1
extern "C" {
#include "backend.h"
#include "backend_cuda.h"
#include "dist.h"
}
#include "kernels.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdlib.h>
#include <time.h>

#if defined(FSMOE_HAVE_NCCL)
#include <nccl.h>

#include "nccl_boot.h"
#endif
#include "check.h" /* comm/: after the CUDA, cuBLAS and NCCL headers */

struct rt_stream {
    cudaStream_t s;
    int slot; /* which of a group's communicators this stream uses (dist.h) */
};
struct rt_event {
    cudaEvent_t e;
};

#if defined(FSMOE_HAVE_NCCL)
enum { NCCL_COMMS = RT_NGROUPS * RT_STREAM_SLOTS * 2 };
typedef struct {
    const rt_comm_group *group;
    int slot;
    ncclComm_t comm;
} nccl_entry;
#endif

typedef struct {
    cublasHandle_t blas;
    double *d_acc;
    int streams_made;
    cudaEvent_t *marks; /* RT_MARKS_MAX timing events (created as the marks need them) */
    int n_marks, made_marks;
    double origin_s;    /* host clock when the batch's base event was recorded */
#if defined(FSMOE_HAVE_NCCL)
    nccl_entry nccl[NCCL_COMMS];
    int n_nccl;
#endif
} cuda_impl;

/* Sticky checks: the message and status (FSMOE_ERR_CUDA / FSMOE_ERR_CUBLAS) come from
 * comm/check.h, the one place the foreign libraries' errors are turned into fsmoe's. */
#define STICKY(be, status_of)                                                                  \
    do {                                                                                       \
        fsmoe_error e_ = {FSMOE_OK, {0}};                                                      \
        if ((status_of) != FSMOE_OK)                                                           \
            rt_backend_fail(be, e_.status, "%s:%d: %s", __FILE__, __LINE__, e_.msg);           \
    } while (0)
#define CUDA_OK(be, call) STICKY(be, CUDA_STATUS_OF(call, &e_))
#define CUBLAS_OK(be, call) STICKY(be, CUBLAS_STATUS_OF(call, &e_))

static cudaStream_t cs(rt_stream *s) { return s ? s->s : (cudaStream_t)0; }
static cuda_impl *impl(rt_backend *be) { return (cuda_impl *)be->impl; }

#define THREADS 256
static unsigned blocks(long n) { return (unsigned)((n + THREADS - 1) / THREADS); }
#define LAUNCH(be, s, n, kernel, ...)                                                          \
    do {                                                                                       \
        if ((n) > 0) {                                                                         \
            kernel<<<blocks(n), THREADS, 0, cs(s)>>>(__VA_ARGS__);                             \
            CUDA_OK(be, cudaGetLastError());                                                   \
        }                                                                                      \
    } while (0)
#define IDX long i = (long)blockIdx.x * blockDim.x + threadIdx.x

/* ---- kernels: each calls the kernels.h function ---- */
__global__ void g_embed_fwd(long n, real *out, const real *wte, const real *wpe, const int *tok,
                            long L, long M)
{
    IDX;
    if (i < n)
        out[i] = k_embed_elem(i / M, i % M, wte, wpe, tok, L, M);
}
__global__ void g_embed_bwd_tok(long n, real *dwte, const real *dout, const int *tok, long M)
{
    IDX;
    if (i < n && tok[i / M] >= 0) /* tok < 0: another member's vocabulary slice */
        atomicAdd(&dwte[(long)tok[i / M] * M + i % M], dout[i]);
}
__global__ void g_wpe_grad(long n, real *dwpe, const real *dout, long B, long L, long M)
{
    IDX;
    if (i < n)
        k_wpe_grad_elem(i / M, i % M, dwpe, dout, B, L, M);
}
/* ---- rows: K_LANES threads per row, one per lane of kernels.h's reductions ----
 * A row's lanes sit on adjacent threads of one warp (THREADS is a multiple of K_LANES); each
 * computes its lane's partial (k_lane_*), the shuffles combine the partials in
 * k_lanes_combine's order, and each thread then writes the row's elements of its lane. Before,
 * one thread ran a whole row: 4096 rows of 768 floats used 16 blocks and read each row apart
 * from its neighbours' (on an H100 the element-wise tasks ran 24x the copy bandwidth's time).
 * Every thread of a warp reaches the shuffles; those past the last row compute nothing they
 * write. */
#define ROW_LANE                                                                               \
    long n = ((long)blockIdx.x * blockDim.x + threadIdx.x) / K_LANES;                          \
    int l = (int)(threadIdx.x % K_LANES), ok = n < N
#define LAUNCH_ROWS(be, s, N, kernel, ...) LAUNCH(be, s, (N) * K_LANES, kernel, __VA_ARGS__)
static_assert(THREADS % 32 == 0 && 32 % K_LANES == 0, "a row's lanes in one warp");

__device__ real lanes_sum(real v)
{
    for (int w = K_LANES / 2; w > 0; w /= 2)
        v += __shfl_down_sync(0xffffffffu, v, w, K_LANES);
    return __shfl_sync(0xffffffffu, v, 0, K_LANES);
}
__device__ real lanes_max(real v)
{
    for (int w = K_LANES / 2; w > 0; w /= 2) {
        real o = __shfl_down_sync(0xffffffffu, v, w, K_LANES);
        v = o > v ? o : v;
    }
    return __shfl_sync(0xffffffffu, v, 0, K_LANES);
}

__global__ void g_ln_fwd(long N, real *out, real *mean, real *rstd, const real *x, const real *w,
                         const real *b, long M)
{
    ROW_LANE;
    const real *xr = x + (ok ? n : 0) * M;
    real mu = lanes_sum(ok ? k_lane_sum(xr, M, l) : (real)0) / (real)M;
    real var = lanes_sum(ok ? k_lane_sum_sq_dev(xr, mu, M, l) : (real)0) / (real)M;
    real rs = (real)1 / RT_SQRT(var + RT_LN_EPS);
    if (!ok)
        return;
    k_layernorm_out(out + n * M, xr, w, b, mu, rs, M, l, K_LANES);
    if (l == 0)
        mean[n] = mu, rstd[n] = rs;
}
__global__ void g_ln_bwd_rows(long N, real *dx, const real *dout, const real *x, const real *mean,
                              const real *rstd, const real *w, long M)
{
    ROW_LANE;
    long r = ok ? n : 0;
    real mu = mean[r], rs = rstd[r], a1 = 0, a2 = 0;
    if (ok)
        k_layernorm_bwd_lane(&a1, &a2, dout + r * M, x + r * M, w, mu, rs, M, l);
    real s1 = lanes_sum(a1) / (real)M, s2 = lanes_sum(a2) / (real)M;
    if (ok)
        k_layernorm_dx(dx + r * M, dout + r * M, x + r * M, w, mu, rs, s1, s2, M, l, K_LANES);
}
/* ---- columns: a block of COL_TILE columns by K_COL_CHUNKS chunks of rows ----
 * Thread (x, y) sums column x's chunk y (adjacent threads read adjacent columns of a row; y
 * past the last chunk sums nothing); the chunks' sums meet in shared memory, and the chunk-0
 * thread adds them in chunk order (kernels.h's column order). */
#define COL_TILE 32
static_assert(COL_TILE * K_COL_CHUNKS <= 1024, "a column tile fits one block");
#define COL_CHUNK                                                                              \
    long m = (long)blockIdx.x * COL_TILE + threadIdx.x, nch = k_col_chunks(N);                 \
    int c = (int)threadIdx.y, ok = m < M;                                                      \
    long n0 = c < nch ? k_chunk_row(c, N) : 0, n1 = c < nch ? k_chunk_row(c + 1, N) : 0
#define LAUNCH_COLS(be, s, M, kernel, ...)                                                     \
    do {                                                                                       \
        if ((M) > 0) {                                                                         \
            kernel<<<(unsigned)(((M) + COL_TILE - 1) / COL_TILE), dim3(COL_TILE, K_COL_CHUNKS), \
                     0, cs(s)>>>(__VA_ARGS__);                                                 \
            CUDA_OK(be, cudaGetLastError());                                                   \
        }                                                                                      \
    } while (0)
__device__ real chunks_sum(real (*part)[COL_TILE], long nch)
{
    real s = 0;
    for (int c = 0; c < nch; c++)
        s += part[c][threadIdx.x];
    return s;
}
__global__ void g_ln_bwd_cols(long M, real *dw, real *db, const real *dout, const real *x,
                              const real *mean, const real *rstd, long N)
{
    __shared__ real pw[K_COL_CHUNKS][COL_TILE], pb[K_COL_CHUNKS][COL_TILE];
    COL_CHUNK;
    real sw = 0, sb = 0;
    if (ok)
        k_layernorm_col_part(m, n0, n1, &sw, &sb, dout, x, mean, rstd, M);
    pw[c][threadIdx.x] = sw, pb[c][threadIdx.x] = sb;
    __syncthreads();
    if (ok && c == 0)
        dw[m] += chunks_sum(pw, nch), db[m] += chunks_sum(pb, nch);
}
__global__ void g_bias_add(long n, real *out, const real *bias, long M)
{
    IDX;
    if (i < n)
        k_bias_add(i, out, bias, M);
}
__global__ void g_bias_grad(long M, real *db, const real *dout, long N)
{
    __shared__ real part[K_COL_CHUNKS][COL_TILE];
    COL_CHUNK;
    part[c][threadIdx.x] = ok ? k_bias_col_part(m, n0, n1, dout, M) : (real)0;
    __syncthreads();
    if (ok && c == 0)
        db[m] += chunks_sum(part, nch);
}
__global__ void g_act_fwd(long n, int kind, real *h, real *a, const real *g, const real *bias,
                          long H)
{
    IDX;
    if (i < n)
        k_act_fwd(kind, i, h, a, g, bias ? bias[i % H] : (real)0);
}
__global__ void g_act_bwd(long n, int kind, real *da, real *dg, const real *dh, const real *a,
                          const real *g)
{
    IDX;
    if (i < n)
        k_act_bwd(kind, i, da, dg, dh, a, g);
}
/* causal softmax rows: row r holds query t = r % L */
__global__ void g_softmax_fwd(long N, real *att, const real *scores, long L, real scale)
{
    ROW_LANE;
    long r = ok ? n : 0, t = r % L;
    const real *sc = scores + r * L;
    real *a = att + r * L;
    real mx = lanes_max(ok ? k_lane_max_scaled(sc, scale, t + 1, l) : (real)0);
    if (ok)
        k_softmax_exp(a, sc, scale, mx, t, l, K_LANES);
    real z = lanes_sum(ok ? k_lane_sum(a, t + 1, l) : (real)0); /* this lane's own writes */
    if (ok)
        k_softmax_div(a, z, t, L, l, K_LANES);
}
__global__ void g_softmax_bwd(long N, real *ds, const real *da, const real *att, long L,
                              real scale)
{
    ROW_LANE;
    long r = ok ? n : 0, t = r % L;
    real dot = lanes_sum(ok ? k_lane_dot(att + r * L, da + r * L, t + 1, l) : (real)0);
    if (ok)
        k_softmax_grad(ds + r * L, att + r * L, da + r * L, dot, scale, t, L, l, K_LANES);
}
/* Row r's maximum and Σ exp(z − max) over its V logits, on every lane. */
__device__ void crossent_lanes(const real *z, long V, int l, int ok, real *mx, real *se)
{
    *mx = lanes_max(ok ? k_lane_max_scaled(z, (real)1, V, l) : (real)0);
    *se = lanes_sum(ok ? k_lane_sum_exp_dev(z, *mx, V, l) : (real)0);
}
__global__ void g_crossent(long N, real *losses, real *dlogits, const real *logits,
                           const int *targets, long V, real scale)
{
    ROW_LANE;
    long r = ok ? n : 0;
    const real *z = logits + r * V;
    real mx, se;
    crossent_lanes(z, V, l, ok, &mx, &se);
    if (!ok)
        return;
    real lse = mx + RT_LOG(se);
    int y = targets[r];
    if (dlogits)
        k_crossent_grad(dlogits + r * V, z, lse, y, scale, V, l, K_LANES);
    if (l == 0)
        losses[r] = lse - z[y];
}
__global__ void g_crossent_stats(long N, real *stats, const real *logits, const int *targets,
                                 long Vl, long v0)
{
    ROW_LANE;
    long r = ok ? n : 0;
    const real *z = logits + r * Vl;
    real mx, se;
    crossent_lanes(z, Vl, l, ok, &mx, &se);
    if (ok && l == 0)
        k_crossent_stats_put(r, stats, z, mx, se, targets, Vl, v0);
}
__global__ void g_crossent_finish(long N, real *losses, real *dlogits, const real *logits,
                                  const int *targets, const real *stats, int P, long Vl, long v0,
                                  real scale)
{
    ROW_LANE;
    if (!ok)
        return; /* no shuffles below */
    real zt, lse = k_crossent_merge(n, stats, P, N, &zt);
    if (dlogits)
        k_crossent_grad(dlogits + n * Vl, logits + n * Vl, lse, (long)targets[n] - v0, scale, Vl,
                        l, K_LANES);
    if (l == 0)
        losses[n] = lse - zt;
}
__global__ void g_adamw(long n, real *p, real *g, real *m, real *v, k_adamw_coef c)
{
    IDX;
    if (i < n)
        k_adamw(i, p, g, m, v, c);
}
__global__ void g_add(long n, real *out, const real *a, const real *b)
{
    IDX;
    if (i < n)
        out[i] = a[i] + b[i];
}
__global__ void g_axpy(long n, real *y, real a, const real *x)
{
    IDX;
    if (i < n)
        y[i] += a * x[i];
}
__global__ void g_scale(long n, real *x, real a)
{
    IDX;
    if (i < n)
        x[i] *= a;
}
__global__ void g_sumsq(long n, const real *x, double *acc)
{
    double s = 0;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long)gridDim.x * blockDim.x)
        s += (double)x[i] * (double)x[i];
    atomicAdd(acc, s);
}
/* one thread per element (k_gather_row's copy, element by element) */
__global__ void g_gather(long n, real *dst, const real *src, const int *idx, long M)
{
    IDX;
    if (i < n) {
        int r = idx[i / M];
        dst[i] = r >= 0 ? src[(long)r * M + i % M] : (real)0;
    }
}
__global__ void g_scatter_add(long n, real *dst, const real *src, const int *idx, const real *w,
                              long M)
{
    IDX;
    if (i < n) {
        long r = i / M, m = i % M;
        if (idx[r] >= 0)
            atomicAdd(&dst[(long)idx[r] * M + m], (w ? w[r] : (real)1) * src[i]);
    }
}
__global__ void g_row_dot(long N, real *out, const real *a, const int *ia, const real *b,
                          const int *ib, long M)
{
    ROW_LANE;
    long ra = ok ? (ia ? ia[n] : n) : -1, rb = ok ? (ib ? ib[n] : n) : -1;
    int live = ra >= 0 && rb >= 0;
    real d = lanes_sum(live ? k_lane_dot(a + ra * M, b + rb * M, M, l) : (real)0);
    if (ok && l == 0)
        out[n] = live ? d : (real)0;
}

/* ---- the table ---- */
static void *c_alloc(rt_backend *be, size_t bytes)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 64) != cudaSuccess)
        return NULL;
    /* cudaMemset runs on the legacy default stream, which the non-blocking streams of this
     * backend do not wait for: finish it before any stream may touch the buffer. */
    CUDA_OK(be, cudaMemset(p, 0, bytes));
    CUDA_OK(be, cudaDeviceSynchronize());
    return p;
}
static void c_free(rt_backend *be, void *p) { CUDA_OK(be, cudaFree(p)); }
static void c_copy(rt_backend *be, rt_stream *s, void *dst, const void *src, size_t bytes, int kind)
{
    cudaMemcpyKind k = kind == RT_H2D ? cudaMemcpyHostToDevice
                       : kind == RT_D2H ? cudaMemcpyDeviceToHost
                                        : cudaMemcpyDeviceToDevice;
    if (bytes)
        CUDA_OK(be, cudaMemcpyAsync(dst, src, bytes, k, cs(s)));
}
static void c_zero(rt_backend *be, rt_stream *s, void *p, size_t bytes)
{
    if (bytes)
        CUDA_OK(be, cudaMemsetAsync(p, 0, bytes, cs(s)));
}
static rt_stream *c_stream_create(rt_backend *be, int on_caller)
{
    (void)on_caller; /* a GPU stream never holds up the issuing thread */
    rt_stream *s = (rt_stream *)calloc(1, sizeof(rt_stream));
    if (s) {
        CUDA_OK(be, cudaStreamCreateWithFlags(&s->s, cudaStreamNonBlocking));
        s->slot = 1 + impl(be)->streams_made++ % (RT_STREAM_SLOTS - 1); /* 0: default stream */
    }
    return s;
}
static void c_stream_destroy(rt_backend *be, rt_stream *s)
{
    CUDA_OK(be, cudaStreamDestroy(s->s));
    free(s);
}
static rt_event *c_event_create(rt_backend *be)
{
    rt_event *e = (rt_event *)calloc(1, sizeof(rt_event));
    if (e)
        CUDA_OK(be, cudaEventCreateWithFlags(&e->e, cudaEventDisableTiming));
    return e;
}
static void c_event_destroy(rt_backend *be, rt_event *e)
{
    CUDA_OK(be, cudaEventDestroy(e->e));
    free(e);
}
static void c_event_record(rt_backend *be, rt_event *e, rt_stream *s)
{
    CUDA_OK(be, cudaEventRecord(e->e, cs(s)));
}
static void c_stream_wait(rt_backend *be, rt_stream *s, rt_event *e)
{
    CUDA_OK(be, cudaStreamWaitEvent(cs(s), e->e, 0));
}
static void c_stream_sync(rt_backend *be, rt_stream *s)
{
    CUDA_OK(be, cudaStreamSynchronize(cs(s)));
}
/* No CUDA primitive makes a stream wait until another goes idle: s waits for the work issued
 * to other before the call (backend.h). */
static void c_stream_wait_idle(rt_backend *be, rt_stream *s, rt_stream *other)
{
    cudaEvent_t e;
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
        CUDA_OK(be, cudaGetLastError());
        return;
    }
    CUDA_OK(be, cudaEventRecord(e, cs(other)));
    CUDA_OK(be, cudaStreamWaitEvent(cs(s), e, 0));
    CUDA_OK(be, cudaEventDestroy(e)); /* released once it completes */
}

/* Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: swap the operands. */
static void c_gemm(rt_backend *be, rt_stream *s, int ta, int tb, long m, long n, long k,
                   real alpha, const real *A, long lda, long sA, const real *B, long ldb, long sB,
                   real beta, real *C, long ldc, long sC, long batch)
{
    if (m <= 0 || n <= 0 || batch <= 0)
        return;
    cublasHandle_t h = impl(be)->blas;
    CUBLAS_OK(be, cublasSetStream(h, cs(s)));
    CUBLAS_OK(be, cublasSgemmStridedBatched(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                            ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m,
                                            (int)k, &alpha, B, (int)ldb, sB, A, (int)lda, sA,
                                            &beta, C, (int)ldc, sC, (int)batch));
}

static void c_embed_fwd(rt_backend *be, rt_stream *s, real *out, const real *wte, const real *wpe,
                        const int *tok, long B, long L, long M)
{
    LAUNCH(be, s, B * L * M, g_embed_fwd, B * L * M, out, wte, wpe, tok, L, M);
}
static void c_embed_bwd(rt_backend *be, rt_stream *s, real *dwte, real *dwpe, const real *dout,
                        const int *tok, long B, long L, long M)
{
    LAUNCH(be, s, B * L * M, g_embed_bwd_tok, B * L * M, dwte, dout, tok, M);
    if (dwpe)
        LAUNCH(be, s, L * M, g_wpe_grad, L * M, dwpe, dout, B, L, M);
}
static void c_layernorm_fwd(rt_backend *be, rt_stream *s, real *out, real *mean, real *rstd,
                            const real *x, const real *w, const real *b, long N, long M)
{
    LAUNCH_ROWS(be, s, N, g_ln_fwd, N, out, mean, rstd, x, w, b, M);
}
static void c_layernorm_bwd(rt_backend *be, rt_stream *s, real *dx, real *dw, real *db,
                            const real *dout, const real *x, const real *mean, const real *rstd,
                            const real *w, long N, long M)
{
    LAUNCH_ROWS(be, s, N, g_ln_bwd_rows, N, dx, dout, x, mean, rstd, w, M);
    LAUNCH_COLS(be, s, M, g_ln_bwd_cols, M, dw, db, dout, x, mean, rstd, N);
}
static void c_bias_add(rt_backend *be, rt_stream *s, real *out, const real *bias, long N, long M)
{
    LAUNCH(be, s, N * M, g_bias_add, N * M, out, bias, M);
}
static void c_bias_grad(rt_backend *be, rt_stream *s, real *db, const real *dout, long N, long M)
{
    LAUNCH_COLS(be, s, M, g_bias_grad, M, db, dout, N);
}
static void c_act_fwd(rt_backend *be, rt_stream *s, int kind, real *h, real *a, const real *g,
                      const real *bias, long rows, long H)
{
    LAUNCH(be, s, rows * H, g_act_fwd, rows * H, kind, h, a, g, bias, H);
}
static void c_act_bwd(rt_backend *be, rt_stream *s, int kind, real *da, real *dg, const real *dh,
                      const real *a, const real *g, long n)
{
    LAUNCH(be, s, n, g_act_bwd, n, kind, da, dg, dh, a, g);
}
static void c_attn_softmax_fwd(rt_backend *be, rt_stream *s, real *att, const real *scores,
                               long rows, long L, real scale)
{
    LAUNCH_ROWS(be, s, rows, g_softmax_fwd, rows, att, scores, L, scale);
}
static void c_attn_softmax_bwd(rt_backend *be, rt_stream *s, real *ds, const real *da,
                               const real *att, long rows, long L, real scale)
{
    LAUNCH_ROWS(be, s, rows, g_softmax_bwd, rows, ds, da, att, L, scale);
}
static void c_crossent(rt_backend *be, rt_stream *s, real *losses, real *dlogits,
                       const real *logits, const int *targets, long N, long V, real scale)
{
    LAUNCH_ROWS(be, s, N, g_crossent, N, losses, dlogits, logits, targets, V, scale);
}
static void c_crossent_stats(rt_backend *be, rt_stream *s, real *stats, const real *logits,
                             const int *targets, long N, long Vl, long v0)
{
    LAUNCH_ROWS(be, s, N, g_crossent_stats, N, stats, logits, targets, Vl, v0);
}
static void c_crossent_finish(rt_backend *be, rt_stream *s, real *losses, real *dlogits,
                              const real *logits, const int *targets, const real *stats, int P,
                              long N, long Vl, long v0, real scale)
{
    LAUNCH_ROWS(be, s, N, g_crossent_finish, N, losses, dlogits, logits, targets, stats, P, Vl,
                v0, scale);
}
static void c_adamw(rt_backend *be, rt_stream *s, real *p, real *g, real *m, real *v, long n,
                    real gs, real lr, real b1, real b2, real eps, real wd, real bc1, real bc2)
{
    LAUNCH(be, s, n, g_adamw, n, p, g, m, v, k_adamw_coefs(gs, lr, b1, b2, eps, wd, bc1, bc2));
}
static void c_add(rt_backend *be, rt_stream *s, real *out, const real *a, const real *b, long n)
{
    LAUNCH(be, s, n, g_add, n, out, a, b);
}
static void c_axpy(rt_backend *be, rt_stream *s, real *y, real a, const real *x, long n)
{
    LAUNCH(be, s, n, g_axpy, n, y, a, x);
}
static void c_scale(rt_backend *be, rt_stream *s, real *x, real a, long n)
{
    LAUNCH(be, s, n, g_scale, n, x, a);
}
static double c_sumsq(rt_backend *be, rt_stream *s, const real *x, long n)
{
    double *acc = impl(be)->d_acc, h = 0;
    CUDA_OK(be, cudaMemsetAsync(acc, 0, sizeof(double), cs(s)));
    if (n > 0) {
        g_sumsq<<<256, THREADS, 0, cs(s)>>>(n, x, acc);
        CUDA_OK(be, cudaGetLastError());
    }
    CUDA_OK(be, cudaMemcpyAsync(&h, acc, sizeof(double), cudaMemcpyDeviceToHost, cs(s)));
    CUDA_OK(be, cudaStreamSynchronize(cs(s)));
    return h;
}
static void c_gather_rows(rt_backend *be, rt_stream *s, real *dst, const real *src,
                          const int *idx, long n, long M)
{
    LAUNCH(be, s, n * M, g_gather, n * M, dst, src, idx, M);
}
static void c_scatter_add_rows(rt_backend *be, rt_stream *s, real *dst, const real *src,
                               const int *idx, const real *w, long n, long M)
{
    LAUNCH(be, s, n * M, g_scatter_add, n * M, dst, src, idx, w, M);
}
static void c_row_dot(rt_backend *be, rt_stream *s, real *out, const real *a, const int *ia,
                      const real *b, const int *ib, long n, long M)
{
    LAUNCH_ROWS(be, s, n, g_row_dot, n, out, a, ia, b, ib, M);
}
#if defined(FSMOE_HAVE_NCCL)
/* The NCCL communicator of group g for stream s, made on first use (see the top). */
static ncclComm_t nccl_comm(rt_backend *be, const rt_group *g, rt_stream *s, const char *what)
{
    cuda_impl *im = impl(be);
    const rt_comm_group *cg = (const rt_comm_group *)g->impl;
    int slot = s ? s->slot : 0;
    for (int i = 0; i < im->n_nccl; i++)
        if (im->nccl[i].group == cg && im->nccl[i].slot == slot)
            return im->nccl[i].comm;
    if (im->n_nccl == NCCL_COMMS) {
        rt_backend_fail(be, FSMOE_ERR_INTERNAL, "cuda backend: %s: more than %d NCCL "
                        "communicators", what, NCCL_COMMS);
        return NULL;
    }
    fsmoe_error e = {FSMOE_OK, {0}};
    ncclComm_t c = NULL;
    if (fsmoe_nccl_comm_init(cg->comm[slot], &c, what, &e) != FSMOE_OK) {
        rt_backend_fail(be, e.status, "cuda backend: NCCL communicator for %s: %s", what, e.msg);
        return NULL;
    }
    im->nccl[im->n_nccl].group = cg;
    im->nccl[im->n_nccl].slot = slot;
    im->nccl[im->n_nccl++].comm = c;
    return c;
}
#define NCCL_OK(be, call, comm) STICKY(be, NCCL_STATUS_OF(call, comm, &e_))
#else
/* Without NCCL in the build a group of more than one rank cannot communicate. */
static void *nccl_comm(rt_backend *be, const rt_group *g, rt_stream *s, const char *what)
{
    (void)s;
    rt_backend_fail(be, FSMOE_ERR_USAGE,
                    "cuda backend: %s on %d ranks needs NCCL, which this build lacks (configure "
                    "with NCCL under -Dgpu_root, or use --backend host)", what, g->size);
    return NULL;
}
#endif

static void c_allreduce_sum(rt_backend *be, rt_stream *s, const rt_group *g, real *buf, long n,
                            const char *what)
{
    if (g->size == 1 || n == 0)
        return;
#if defined(FSMOE_HAVE_NCCL)
    ncclComm_t c = nccl_comm(be, g, s, what);
    if (c)
        NCCL_OK(be, ncclAllReduce(buf, buf, (size_t)n, ncclFloat, ncclSum, c, cs(s)), c);
#else
    (void)buf;
    nccl_comm(be, g, s, what);
#endif
}

static void c_alltoallv_rows(rt_backend *be, rt_stream *s, const rt_group *g, real *dst,
                             const real *src, const int *send_rows, const int *recv_rows, long M,
                             const char *what)
{
    if (g->size == 1) {
        if (send_rows[0] != recv_rows[0]) {
            rt_backend_fail(be, FSMOE_ERR_INTERNAL, "%s: sends %d rows to itself, receives %d",
                            what, send_rows[0], recv_rows[0]);
            return;
        }
        if (send_rows[0] > 0)
            CUDA_OK(be, cudaMemcpyAsync(dst, src, (size_t)send_rows[0] * (size_t)M * sizeof(real),
                                        cudaMemcpyDeviceToDevice, cs(s)));
        return;
    }
#if defined(FSMOE_HAVE_NCCL)
    ncclComm_t c = nccl_comm(be, g, s, what);
    if (!c)
        return;
    /* the counts are host arrays read now, at issue time; the data moves on s */
    NCCL_OK(be, ncclGroupStart(), c);
    size_t so = 0, ro = 0;
    for (int p = 0; p < g->size; p++) {
        size_t ns = (size_t)send_rows[p] * (size_t)M, nr = (size_t)recv_rows[p] * (size_t)M;
        if (ns)
            NCCL_OK(be, ncclSend(src + so, ns, ncclFloat, p, c, cs(s)), c);
        if (nr)
            NCCL_OK(be, ncclRecv(dst + ro, nr, ncclFloat, p, c, cs(s)), c);
        so += ns, ro += nr;
    }
    NCCL_OK(be, ncclGroupEnd(), c);
#else
    (void)dst, (void)src, (void)M;
    nccl_comm(be, g, s, what);
#endif
}

#if defined(FSMOE_HAVE_NCCL)
/* A re-layout of the 2DH AllToAll (libfsmoe/a2a_2dh.h): device-to-device copies on s. */
static void move_blocks(rt_backend *be, rt_stream *s, const fsmoe_a2a_2dh_block *b, int n,
                        const real *src, real *dst, long M)
{
    size_t row = (size_t)M * sizeof(real);
    for (int i = 0; i < n; i++)
        CUDA_OK(be, cudaMemcpyAsync(dst + b[i].dst * M, src + b[i].src * M, (size_t)b[i].rows * row,
                                    cudaMemcpyDeviceToDevice, cs(s)));
}

/* One phase: to and from peers[q] (group ranks) sc/rc rows at sd/rd, one NCCL group call. */
static void phase_2dh(rt_backend *be, rt_stream *s, ncclComm_t c, int n, const int *peers,
                      const long *sc, const long *sd, const real *send, const long *rc,
                      const long *rd, real *recv, long M)
{
    NCCL_OK(be, ncclGroupStart(), c);
    for (int q = 0; q < n; q++) {
        if (sc[q])
            NCCL_OK(be, ncclSend(send + sd[q] * M, (size_t)(sc[q] * M), ncclFloat, peers[q], c,
                                 cs(s)), c);
        if (rc[q])
            NCCL_OK(be, ncclRecv(recv + rd[q] * M, (size_t)(rc[q] * M), ncclFloat, peers[q], c,
                                 cs(s)), c);
    }
    NCCL_OK(be, ncclGroupEnd(), c);
}
#endif

/* The 2DH AllToAll on the group's NCCL communicator: both phases address their peers by group
 * rank (the plan's peer1/peer2), the re-layouts are copies on s, and the stage is stream-ordered
 * memory (cudaMallocAsync) freed on s after the last copy. The counts are read now. */
static void c_alltoallv_rows_2dh(rt_backend *be, rt_stream *s, const rt_group *g, real *dst,
                                 const real *src, const int *counts, long M, const char *what)
{
    const fsmoe_a2a_2dh_shape *sh = dist_group_2dh(g);
    if (!sh) {
        rt_backend_fail(be, FSMOE_ERR_INTERNAL, "%s: the group's AllToAll cannot be hierarchical",
                        what);
        return;
    }
#if defined(FSMOE_HAVE_NCCL)
    ncclComm_t c = nccl_comm(be, g, s, what);
    if (!c)
        return;
    fsmoe_a2a_2dh_plan p;
    if (fsmoe_a2a_2dh_plan_make(sh, g->rank, counts, &p) != 0) {
        rt_backend_fail(be, FSMOE_ERR_NOMEM, "%s: out of memory", what);
        return;
    }
    real *A = NULL;
    size_t bytes = (size_t)(p.rows_a + 2 * p.rows_b) * (size_t)M * sizeof(real);
    CUDA_OK(be, cudaMallocAsync((void **)&A, bytes ? bytes : 1, cs(s)));
    if (A) {
        real *B = A + p.rows_a * M, *C = B + p.rows_b * M;
        move_blocks(be, s, p.pack1, p.n_pack1, src, A, M);
        phase_2dh(be, s, c, p.locals, p.peer1, p.s1c, p.s1d, A, p.r1c, p.r1d, B, M);
        move_blocks(be, s, p.pack2, p.n_pack2, B, C, M);
        phase_2dh(be, s, c, p.nodes, p.peer2, p.s2c, p.s2d, C, p.r2c, p.r2d, A, M);
        move_blocks(be, s, p.unpack, p.n_unpack, A, dst, M);
        CUDA_OK(be, cudaFreeAsync(A, cs(s)));
    }
    fsmoe_a2a_2dh_plan_free(&p);
#else
    (void)dst, (void)src, (void)counts, (void)M;
    nccl_comm(be, g, s, what);
#endif
}

/* AllGather / ReduceScatter (sum): NCCL's counts are per member, like backend.h's n; a group
 * of one member copies. */
static void c_ag_rs(rt_backend *be, rt_stream *s, const rt_group *g, real *dst, const real *src,
                    long n, const char *what, int reduce)
{
    if (n <= 0)
        return;
    if (g->size == 1) {
        CUDA_OK(be, cudaMemcpyAsync(dst, src, (size_t)n * sizeof(real), cudaMemcpyDeviceToDevice,
                                    cs(s)));
        return;
    }
#if defined(FSMOE_HAVE_NCCL)
    ncclComm_t c = nccl_comm(be, g, s, what);
    if (c && reduce)
        NCCL_OK(be, ncclReduceScatter(src, dst, (size_t)n, ncclFloat, ncclSum, c, cs(s)), c);
    else if (c)
        NCCL_OK(be, ncclAllGather(src, dst, (size_t)n, ncclFloat, c, cs(s)), c);
#else
    (void)reduce;
    nccl_comm(be, g, s, what);
#endif
}

static void c_allgather(rt_backend *be, rt_stream *s, const rt_group *g, real *dst,
                        const real *src, long n, const char *what)
{
    c_ag_rs(be, s, g, dst, src, n, what, 0);
}

static void c_reducescatter_sum(rt_backend *be, rt_stream *s, const rt_group *g, real *dst,
                                const real *src, long n, const char *what)
{
    c_ag_rs(be, s, g, dst, src, n, what, 1);
}

static double host_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Mark 0 of a batch is an event on the default stream beside a host time stamp; every mark's
 * time is that stamp plus its elapsed time after mark 0 (cudaEventElapsedTime). */
static int c_mark(rt_backend *be, rt_stream *s)
{
    cuda_impl *im = impl(be);
    if (!im->marks && !(im->marks = (cudaEvent_t *)calloc(RT_MARKS_MAX, sizeof *im->marks)))
        return -1;
    if (im->n_marks + 1 >= RT_MARKS_MAX)
        return -1;
    if (im->n_marks == 0) {
        if (im->made_marks == 0) {
            if (cudaEventCreate(&im->marks[0]) != cudaSuccess)
                return -1;
            im->made_marks = 1;
        }
        CUDA_OK(be, cudaEventRecord(im->marks[0], 0));
        im->origin_s = host_now_s();
        im->n_marks = 1;
    }
    int id = im->n_marks;
    if (id >= im->made_marks) {
        if (cudaEventCreate(&im->marks[id]) != cudaSuccess)
            return -1;
        im->made_marks = id + 1;
    }
    CUDA_OK(be, cudaEventRecord(im->marks[id], cs(s)));
    im->n_marks++;
    return id - 1; /* ids seen by the caller start at 0 */
}

static fsmoe_status c_marks_read(rt_backend *be, double *t, int n, fsmoe_error *err)
{
    cuda_impl *im = impl(be);
    int taken = im->n_marks > 0 ? im->n_marks - 1 : 0;
    if (n < 0 || n > taken)
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "trace: %d marks read, %d taken", n, taken);
    for (int i = 0; i < n; i++) {
        float ms = 0.0f;
        if (cudaEventElapsedTime(&ms, im->marks[0], im->marks[i + 1]) != cudaSuccess)
            return fsmoe_fail(err, FSMOE_ERR_CUDA, "trace: reading timing event %d failed", i);
        t[i] = im->origin_s + 1e-3 * (double)ms;
    }
    im->n_marks = 0;
    return FSMOE_OK;
}

static void c_destroy(rt_backend *be)
{
    cuda_impl *im = impl(be);
    if (im) {
        for (int i = 0; i < im->made_marks; i++)
            cudaEventDestroy(im->marks[i]);
        free(im->marks);
#if defined(FSMOE_HAVE_NCCL)
        for (int i = 0; i < im->n_nccl; i++)
            ncclCommDestroy(im->nccl[i].comm);
#endif
        if (im->blas)
            cublasDestroy(im->blas);
        if (im->d_acc)
            cudaFree(im->d_acc);
        free(im);
    }
    free(be);
}

extern "C" fsmoe_status rt_backend_cuda_create(int local_rank, rt_backend **out,
                                               fsmoe_error *err)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0)
        return fsmoe_fail(err, FSMOE_ERR_CUDA, "cuda backend: no usable CUDA device (%s)",
                          e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    int device = (local_rank > 0 ? local_rank : 0) % count;
    fsmoe_status st = CUDA_STATUS_OF(cudaSetDevice(device), err);
    if (st != FSMOE_OK)
        return st;
    rt_backend *be = (rt_backend *)calloc(1, sizeof(rt_backend));
    cuda_impl *im = (cuda_impl *)calloc(1, sizeof(cuda_impl));
    if (!be || !im) {
        free(be);
        free(im);
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "cuda backend: out of memory");
    }
    be->impl = im;
    if ((st = CUBLAS_STATUS_OF(cublasCreate(&im->blas), err)) != FSMOE_OK) {
        c_destroy(be);
        return st;
    }
    if (cudaMalloc((void **)&im->d_acc, sizeof(double)) != cudaSuccess) {
        c_destroy(be);
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "cuda backend: cannot allocate");
    }
    be->name = "cuda";
    be->destroy = c_destroy;
    be->alloc = c_alloc;
    be->free = c_free;
    be->copy = c_copy;
    be->zero = c_zero;
    be->stream_create = c_stream_create;
    be->stream_destroy = c_stream_destroy;
    be->event_create = c_event_create;
    be->event_destroy = c_event_destroy;
    be->event_record = c_event_record;
    be->stream_wait = c_stream_wait;
    be->stream_sync = c_stream_sync;
    be->stream_wait_idle = c_stream_wait_idle;
    be->mark = c_mark;
    be->marks_read = c_marks_read;
    be->gemm = c_gemm;
    be->embed_fwd = c_embed_fwd;
    be->embed_bwd = c_embed_bwd;
    be->layernorm_fwd = c_layernorm_fwd;
    be->layernorm_bwd = c_layernorm_bwd;
    be->bias_add = c_bias_add;
    be->bias_grad = c_bias_grad;
    be->act_fwd = c_act_fwd;
    be->act_bwd = c_act_bwd;
    be->attn_softmax_fwd = c_attn_softmax_fwd;
    be->attn_softmax_bwd = c_attn_softmax_bwd;
    be->crossent = c_crossent;
    be->crossent_stats = c_crossent_stats;
    be->crossent_finish = c_crossent_finish;
    be->adamw = c_adamw;
    be->add = c_add;
    be->axpy = c_axpy;
    be->scale = c_scale;
    be->sumsq = c_sumsq;
    be->gather_rows = c_gather_rows;
    be->scatter_add_rows = c_scatter_add_rows;
    be->row_dot = c_row_dot;
    be->allreduce_sum = c_allreduce_sum;
    be->alltoallv_rows = c_alltoallv_rows;
    be->alltoallv_rows_2dh = c_alltoallv_rows_2dh;
    be->allgather = c_allgather;
    be->reducescatter_sum = c_reducescatter_sum;
    *out = be;
    return FSMOE_OK;
}
