/* Implements: the backend interface of fsmoe-run (design.md §10): memory, GEMM, the element-wise
 * kernels of kernels.h, streams and events, and collectives on groups. The executor (model.c,
 * moe_layer.c, ...) only talks to this table, so the same training code runs on `host`
 * (backend_host.c: fp32 OpenBLAS + loops over kernels.h) and `cuda` (backend_cuda.cu: cuBLAS +
 * kernels calling the same kernels.h functions, CUDA streams).
 *
 * Like dav1d's *_dsp_init, a backend is a table of function pointers. Every pointer argument
 * named like a tensor is backend memory (device memory for cuda); `int *` index arrays too.
 * Kernels return nothing: a failure inside an asynchronous op is recorded in `be->err`
 * (sticky, like CUDA's) and reported by the next rt_backend_check(). alloc returns NULL on
 * failure.
 *
 * Collectives: a group is a set of ranks (runtime/dist.h); a group of one rank is the P = 1
 * case of every collective (a copy or nothing). */
#ifndef RT_BACKEND_H
#define RT_BACKEND_H

#include <stddef.h>

#include "memory.h"
#include "real.h"
#include "status.h"

typedef struct rt_stream rt_stream;
typedef struct rt_event rt_event;

typedef struct {
    int size; /* P */
    int rank; /* this rank's index in the group */
    void *impl;
} rt_group;

enum { RT_H2D = 0, RT_D2H, RT_D2D };

/* Kernel categories of fsmoe-run --profile: what the backend's time went to, by kind of kernel
 * (not by the task that issued it: an attention GEMM is GEMM time). */
enum {
    RT_PROF_GEMM = 0,  /* gemm */
    RT_PROF_ELEMWISE,  /* activations, biases, layer norms, additions, embedding, loss, copies */
    RT_PROF_ATTENTION, /* the attention's softmax (its GEMMs are GEMM time) */
    RT_PROF_GATE,      /* the token order's row gathers, scatters and dot products */
    RT_PROF_COMM,      /* collectives (the AllToAll's own rows' copy included) */
    RT_PROF_OPTIMIZER, /* AdamW and the gradient norm */
    RT_PROF_CATS
};
extern const char *const rt_prof_names[RT_PROF_CATS];

/* The kernel profile's GEMMs by shape: C (m × n) = op(A) (m × k) · op(B) (k × n), ta / tb
 * whether A / B are read transposed, batch problems per call. Calls whose m, n and k have the
 * same binary order of magnitude ([2^i, 2^(i+1))), transposes and batch are one entry, with
 * each dimension's range [lo, hi] (the expert GEMMs' rows change with the routing from step
 * to step); calls, the seconds they ran, their multiply-accumulates. m[0] = 0 marks the entry
 * that sums the shapes beyond the backend's table. */
typedef struct {
    int ta, tb;
    long m[2], n[2], k[2];
    long batch;
    long calls;
    double s;
    double macs;
} rt_prof_gemm;
#define RT_PROF_GEMM_SHAPES 96 /* shapes a backend tells apart; the rest are summed */

/* Memory categories of the backend's allocations: the memory model's (libfsmoe/memory.h, names
 * in fsmoe_mem_names), so that fsmoe-run's table and the prediction line up. What a tensor is
 * for, not where it lives. */
enum {
    RT_MEM_WEIGHTS = FSMOE_MEM_WEIGHTS,         /* the parameters */
    RT_MEM_GRADS = FSMOE_MEM_GRADS,             /* their gradients */
    RT_MEM_OPTIMIZER = FSMOE_MEM_OPTIMIZER,     /* AdamW's two moments */
    RT_MEM_ACTIVATIONS = FSMOE_MEM_ACTIVATIONS, /* what the forward keeps for the backward */
    RT_MEM_WORKSPACE = FSMOE_MEM_WORKSPACE,     /* the backward's temporaries, the logits */
    RT_MEM_BUFFERS = FSMOE_MEM_BUFFERS, /* capacity-sized exchange buffers, staging, indices */
    RT_MEM_CATS = FSMOE_MEM_CATS
};

/* Bytes the backend holds per category now, the peak of their sum, and the number of
 * allocations ever made (a training step makes none: everything is allocated at start-up). */
typedef struct {
    size_t bytes[RT_MEM_CATS];
    size_t total, peak;
    long allocs;
} rt_mem_stats;

typedef struct rt_backend rt_backend;
struct rt_backend {
    const char *name;
    void *impl;
    fsmoe_error err; /* first asynchronous failure (status FSMOE_OK while none) */
    rt_mem_stats mem; /* what rt_alloc gave out (rt_alloc, rt_free) */
    void *mem_reg;    /* rt_alloc's record of its blocks (backend.c) */
    int on_caller;    /* stream_create runs an on_caller stream on the issuing thread */
    int threads;      /* threads its kernels compute on per rank (host: the pool's; 0: a GPU) */

    void (*destroy)(rt_backend *be);

    /* memory; alloc returns zeroed memory or NULL */
    void *(*alloc)(rt_backend *be, size_t bytes);
    void (*free)(rt_backend *be, void *p);
    void (*copy)(rt_backend *be, rt_stream *s, void *dst, const void *src, size_t bytes, int kind);
    void (*zero)(rt_backend *be, rt_stream *s, void *p, size_t bytes);

    /* streams and events. NULL is the default stream. on_caller: nothing needs this stream's
     * work to run while the issuing thread goes on (one rank: no collective to overlap with),
     * so the backend may run it on the issuing thread, in issue order, like the default
     * stream; it is still a stream of its own for events, marks and the trace. The host
     * backend does (no worker thread, no hand-off per kernel); cuda ignores it. */
    rt_stream *(*stream_create)(rt_backend *be, int on_caller);
    void (*stream_destroy)(rt_backend *be, rt_stream *s);
    rt_event *(*event_create)(rt_backend *be);
    void (*event_destroy)(rt_backend *be, rt_event *e);
    void (*event_record)(rt_backend *be, rt_event *e, rt_stream *s);
    void (*stream_wait)(rt_backend *be, rt_stream *s, rt_event *e);
    void (*stream_sync)(rt_backend *be, rt_stream *s);
    /* s waits until `other` is idle: nothing issued to it before this call, nor after, still
     * queued or running (Lina: an AllReduce micro-op starts only while no AllToAll runs or is
     * about to). other must never wait for work issued to s later. cuda: no stream primitive
     * does this; s waits for the work issued to other before the call (an event). */
    void (*stream_wait_idle)(rt_backend *be, rt_stream *s, rt_stream *other);

    /* Row-major strided-batched GEMM: for i < batch,
     * C_i = alpha · op(A_i) · op(B_i) + beta · C_i, op(A) is m×k, op(B) k×n, C m×n,
     * X_i = X + i·sX. ta/tb non-zero transpose. */
    void (*gemm)(rt_backend *be, rt_stream *s, int ta, int tb, long m, long n, long k, real alpha,
                 const real *A, long lda, long sA, const real *B, long ldb, long sB, real beta,
                 real *C, long ldc, long sC, long batch);

    /* element-wise and row kernels (math in kernels.h) */
    /* out[n,:] = wte[tok[n],:] + wpe[n % L,:]. For a vocabulary slice: tok[n] < 0 (a token of
     * another member's slice) reads a zero row, wpe NULL adds no position embedding. */
    void (*embed_fwd)(rt_backend *be, rt_stream *s, real *out, const real *wte, const real *wpe,
                      const int *tok, long B, long L, long M);
    /* dwte, dwpe accumulate; rows with tok < 0 add nothing, dwpe NULL skips the positions */
    void (*embed_bwd)(rt_backend *be, rt_stream *s, real *dwte, real *dwpe, const real *dout,
                      const int *tok, long B, long L, long M);
    void (*layernorm_fwd)(rt_backend *be, rt_stream *s, real *out, real *mean, real *rstd,
                          const real *x, const real *w, const real *b, long N, long M);
    /* dx accumulates; dw, db accumulate */
    void (*layernorm_bwd)(rt_backend *be, rt_stream *s, real *dx, real *dw, real *db,
                          const real *dout, const real *x, const real *mean, const real *rstd,
                          const real *w, long N, long M);
    void (*bias_add)(rt_backend *be, rt_stream *s, real *out, const real *bias, long N, long M);
    void (*bias_grad)(rt_backend *be, rt_stream *s, real *db, const real *dout, long N, long M);
    /* Expert activation over rows × H elements (kind 0 GELU, g unused; 1 SwiGLU): a += bias
     * (broadcast over rows; NULL: none) in place, then h = act(a). */
    void (*act_fwd)(rt_backend *be, rt_stream *s, int kind, real *h, real *a, const real *g,
                    const real *bias, long rows, long H);
    void (*act_bwd)(rt_backend *be, rt_stream *s, int kind, real *da, real *dg, const real *dh,
                    const real *a, const real *g, long n);
    void (*attn_softmax_fwd)(rt_backend *be, rt_stream *s, real *att, const real *scores,
                             long rows, long L, real scale);
    void (*attn_softmax_bwd)(rt_backend *be, rt_stream *s, real *dscores, const real *datt,
                             const real *att, long rows, long L, real scale);
    /* losses[n] = CE of row n; dlogits = (softmax - onehot)·scale when not NULL */
    void (*crossent)(rt_backend *be, rt_stream *s, real *losses, real *dlogits,
                     const real *logits, const int *targets, long N, long V, real scale);
    /* The same over a vocabulary slice (kernels.h): logits (N, Vl) are the columns of global
     * ids [v0, v0 + Vl), targets global ids. crossent_stats writes this member's (N, 3)
     * statistics; crossent_finish takes every member's, stats (P, N, 3) member-major (an
     * allgather of the 3N), and gives the losses and (dlogits not NULL) the local columns of
     * (softmax - onehot)·scale. */
    void (*crossent_stats)(rt_backend *be, rt_stream *s, real *stats, const real *logits,
                           const int *targets, long N, long Vl, long v0);
    void (*crossent_finish)(rt_backend *be, rt_stream *s, real *losses, real *dlogits,
                            const real *logits, const int *targets, const real *stats, int P,
                            long N, long Vl, long v0, real scale);
    /* AdamW on n elements with the gradient scaled by gs; clears g (kernels.h k_adamw) */
    void (*adamw)(rt_backend *be, rt_stream *s, real *p, real *g, real *m, real *v, long n,
                  real gs, real lr, real b1, real b2, real eps, real wd, real bc1, real bc2);
    void (*add)(rt_backend *be, rt_stream *s, real *out, const real *a, const real *b, long n);
    void (*axpy)(rt_backend *be, rt_stream *s, real *y, real a, const real *x, long n);
    void (*scale)(rt_backend *be, rt_stream *s, real *x, real a, long n);
    /* Σ x² in double; synchronises s */
    double (*sumsq)(rt_backend *be, rt_stream *s, const real *x, long n);
    /* dst[i,:] = src[idx[i],:] (zeros where idx[i] < 0), i < n */
    void (*gather_rows)(rt_backend *be, rt_stream *s, real *dst, const real *src, const int *idx,
                        long n, long M);
    /* dst[idx[i],:] += w[i] · src[i,:] for idx[i] >= 0 (w NULL means 1) */
    void (*scatter_add_rows)(rt_backend *be, rt_stream *s, real *dst, const real *src,
                             const int *idx, const real *w, long n, long M);
    /* out[i] = a[ia[i],:] · b[ib[i],:] (ia/ib NULL means i; 0 where an index is < 0) */
    void (*row_dot)(rt_backend *be, rt_stream *s, real *out, const real *a, const int *ia,
                    const real *b, const int *ib, long n, long M);

    /* Collectives on a group (runtime/dist.h makes the groups). `what` names the operation in
     * error messages and must outlive the call (a string literal). Arrays passed by pointer
     * must stay unchanged until the stream has run the collective. */
    void (*allreduce_sum)(rt_backend *be, rt_stream *s, const rt_group *g, real *buf, long n,
                          const char *what);
    /* AllToAllv of rows of M reals, packed by member: src holds send_rows[p] rows for member p,
     * one block after the other in member order; dst receives recv_rows[p] rows from member p
     * the same way. Both sides know the counts (exchanged before); any count may be 0. */
    void (*alltoallv_rows)(rt_backend *be, rt_stream *s, const rt_group *g, real *dst,
                           const real *src, const int *send_rows, const int *recv_rows, long M,
                           const char *what);
    /* The same exchange as the hierarchical AllToAll (2DH, libfsmoe/a2a_2dh.h) on a group with a
     * 2DH shape (dist.h dist_group_2dh): counts (P·P) holds every member's rows to every
     * member, counts[s·P + d] from s to d (this member's send_rows and recv_rows are its row
     * and its column). */
    void (*alltoallv_rows_2dh)(rt_backend *be, rt_stream *s, const rt_group *g, real *dst,
                               const real *src, const int *counts, long M, const char *what);
    /* AllGather: every member contributes n reals; dst (size·n) holds member p's at dst + p·n.
     * src must not overlap dst. */
    void (*allgather)(rt_backend *be, rt_stream *s, const rt_group *g, real *dst, const real *src,
                      long n, const char *what);
    /* ReduceScatter: src holds size·n reals; dst (n) receives the element-wise sum over the
     * members of their block `rank` (src + rank·n). src must not overlap dst. */
    void (*reducescatter_sum)(rt_backend *be, rt_stream *s, const rt_group *g, real *dst,
                              const real *src, long n, const char *what);

    /* Timing marks (fsmoe-run --trace). mark queues a time stamp on s, taken when s reaches it
     * (the default stream: now), and returns its id, or -1 when RT_MARKS_MAX are pending.
     * marks_read, once every stream is synchronised, gives the first n ids' times in seconds
     * (one clock per process) and empties the pool. */
    int (*mark)(rt_backend *be, rt_stream *s);
    fsmoe_status (*marks_read)(rt_backend *be, double *t, int n, fsmoe_error *err);

    /* Kernel profile (fsmoe-run --profile); NULL where the backend has none. profile_enable
     * starts (on) or stops counting the seconds every kernel runs, per category, summed over
     * the streams; profile_read, with every stream synchronised, gives the totals since the
     * last read (s[RT_PROF_CATS]) and the multiply-accumulates the GEMMs did, and starts again
     * from zero. */
    void (*profile_enable)(rt_backend *be, int on);
    void (*profile_read)(rt_backend *be, double *s, double *gemm_macs);
    /* The GEMMs since the last call by shape (at most RT_PROF_GEMM_SHAPES + 1 entries in out,
     * in the order first seen; out NULL discards them); returns how many, and starts again
     * from zero. With every stream synchronised. NULL where the backend has none. */
    int (*profile_gemm_shapes)(rt_backend *be, rt_prof_gemm *out);
};

#define RT_MARKS_MAX 65536

/* Backend memory of category `cat` (RT_MEM_*), zeroed, counted in be->mem; NULL on failure.
 * The executor allocates through these (never be->alloc), and only while it is built, not from
 * the stream threads. rt_free takes NULL and memory of rt_alloc only. */
void *rt_alloc(rt_backend *be, int cat, size_t bytes);
void rt_free(rt_backend *be, void *p);
/* Frees rt_alloc's record (not the blocks); rt_backend_destroy calls it. */
void rt_mem_release(rt_backend *be);

/* The backends. rt_backend_create fails with a message when `name` is unknown or not built,
 * or (cuda) when no device exists. threads <= 0 keeps the library default. */
fsmoe_status rt_backend_create(const char *name, int threads, rt_backend **out, fsmoe_error *err);
void rt_backend_destroy(rt_backend **be);
/* Returns be->err's status (FSMOE_OK when no asynchronous op failed) and copies the message. */
fsmoe_status rt_backend_check(rt_backend *be, fsmoe_error *err);
/* Whether an asynchronous op has failed (any thread). Collectives issued after a failure are
 * skipped: their peers may be gone, so each would only wait out the watchdog again, and the
 * first failure is the one the run reports. */
int rt_backend_failed(rt_backend *be);
/* Records the first asynchronous failure. */
void rt_backend_fail(rt_backend *be, fsmoe_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Whether the cuda backend was compiled in. */
int rt_backend_have_cuda(void);

/* The single-rank group (P = 1). */
rt_group rt_group_single(void);

#endif
