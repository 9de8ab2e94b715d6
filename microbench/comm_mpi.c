/* Implements: the `mpi` backend (backend.h, comm_mpi.h) — the CPU path of fsmoe-bench.
 *
 * Every group gets its own MPI_Comm_dup per stream, so that two streams (threads) never share
 * a communicator: MPI matches collectives per communicator in call order, and two threads
 * calling collectives on one communicator would race (MPI_THREAD_MULTIPLE does not order
 * them). Relies on MPI_Init_thread(MPI_THREAD_MULTIPLE) having been granted (main checks). */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#include "comm_mpi.h"

#include <cblas.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend.h"
#include "mpi_check.h"
#include "stream_thread.h"

struct bench_comm {
    MPI_Comm comm[BENCH_STREAMS]; /* one duplicate per stream */
};

typedef struct {
    stream_thread *streams[BENCH_STREAMS]; /* [0] = NULL: the caller */
    stream_events *events;
    int huge_pages;
} mpi_impl;

MPI_Datatype comm_mpi_type(bench_dtype t)
{
    switch (t) {
    case BENCH_FLOAT: return MPI_FLOAT;
    case BENCH_DOUBLE: return MPI_DOUBLE;
    case BENCH_INT32: return MPI_INT32_T;
    case BENCH_UINT32: return MPI_UINT32_T;
    case BENCH_INT64: return MPI_INT64_T;
    case BENCH_UINT64: return MPI_UINT64_T;
    case BENCH_UINT8: return MPI_UINT8_T;
    default: return MPI_DATATYPE_NULL;
    }
}

MPI_Op comm_mpi_op(bench_redop op)
{
    switch (op) {
    case BENCH_SUM: return MPI_SUM;
    case BENCH_PROD: return MPI_PROD;
    case BENCH_MIN: return MPI_MIN;
    case BENCH_MAX: return MPI_MAX;
    default: return MPI_OP_NULL;
    }
}

static stream_thread *mpi_stream(bench_backend *b, int stream)
{
    return ((mpi_impl *)b->impl)->streams[stream];
}

static fsmoe_status mpi_check_stream(int stream, fsmoe_error *err)
{
    if (stream < 0 || stream >= BENCH_STREAMS)
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "stream %d out of range", stream);
    return FSMOE_OK;
}

static fsmoe_status mpi_count(size_t count, int *out, fsmoe_error *err)
{
    if (count > INT_MAX)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "%zu elements exceed MPI's int count", count);
    *out = (int)count;
    return FSMOE_OK;
}

/* Buffers of 2 MiB and more are 2 MiB aligned and asked for transparent huge pages (the
 * kernel here gives them only on madvise): with 4 KiB pages a 24 MB send + receive pair spans
 * 12k pages, past the second-level TLB's reach (2048 entries = 8 MiB), and the time per byte
 * grows above ~8-16 MB — a knee that comes from the benchmark's allocator, not from the
 * operation (GPU memory and PyTorch's CPU allocator use large pages). Every buffer is written
 * once here so that no timed run pays for first-touch page faults. */
static fsmoe_status mpi_alloc(bench_backend *b, size_t bytes, void **out, fsmoe_error *err)
{
    const size_t huge = (size_t)2 << 20;
    int want_huge = ((mpi_impl *)b->impl)->huge_pages && bytes >= huge;
    size_t align = want_huge ? huge : 64, len = bytes ? bytes : 64;
    void *p = NULL;
    if (want_huge)
        len = (len + huge - 1) / huge * huge;
    if (posix_memalign(&p, align, len) != 0)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "cannot allocate %zu bytes", bytes);
#ifdef MADV_HUGEPAGE
    if (want_huge)
        (void)madvise(p, len, MADV_HUGEPAGE); /* advice only: fine where THP is off */
#endif
    memset(p, 0, len);
    *out = p;
    return FSMOE_OK;
}

static void mpi_release(bench_backend *b, void *p)
{
    (void)b;
    free(p);
}

static fsmoe_status mpi_memcpy_blocking(bench_backend *b, void *dst, const void *src,
                                        size_t bytes, fsmoe_error *err)
{
    (void)b;
    (void)err;
    memcpy(dst, src, bytes);
    return FSMOE_OK;
}

static fsmoe_status mpi_comm_init(bench_backend *b, MPI_Comm group, bench_comm **out,
                                  fsmoe_error *err)
{
    (void)b;
    bench_comm *c = calloc(1, sizeof *c);
    if (!c)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for a group");
    for (int s = 0; s < BENCH_STREAMS; s++)
        c->comm[s] = MPI_COMM_NULL;
    for (int s = 0; s < BENCH_STREAMS; s++) {
        int rc = MPI_Comm_dup(group, &c->comm[s]);
        if (rc != MPI_SUCCESS) {
            char msg[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(rc, msg, &len);
            for (int t = 0; t < s; t++)
                MPI_Comm_free(&c->comm[t]);
            free(c);
            return fsmoe_fail(err, FSMOE_ERR_IO, "MPI_Comm_dup failed: %s", msg);
        }
    }
    *out = c;
    return FSMOE_OK;
}

static void mpi_comm_free(bench_backend *b, bench_comm **pc)
{
    (void)b;
    bench_comm *c = pc ? *pc : NULL;
    if (!c)
        return;
    for (int s = 0; s < BENCH_STREAMS; s++)
        if (c->comm[s] != MPI_COMM_NULL)
            MPI_Comm_free(&c->comm[s]);
    free(c);
    *pc = NULL;
}

/* One job layout for all collectives; `kind` selects the call. */
typedef enum { JOB_A2A, JOB_AG, JOB_RS, JOB_AR, JOB_SR } coll_kind;

typedef struct {
    coll_kind kind;
    MPI_Comm comm;
    const void *send;
    void *recv;
    int count;
    MPI_Datatype type;
    MPI_Op op;
    int dst, src; /* JOB_SR */
    int polite;   /* stream thread: nonblocking call, waited for without spinning */
} coll_job;

/* How a stream thread waits for its operation: 32 tests back to back, then naps of 20 us
 * (stream_thread.c sets the thread's timer slack to 1 us, else the kernel stretches each nap to
 * ~70 us). A thread blocked in an MPI call spins in the progress loop; with two streams per
 * rank and ranks sharing cores those spinning threads took the CPU from the ones moving data,
 * and under MPI_THREAD_MULTIPLE the second waiter of a process sleeps on a condition variable
 * until the spinner wakes it. TCP keeps receiving into the socket buffer during a nap;
 * shared-memory transfers of this size are single copies made when the receive is matched.
 * Measured on Parm's SAA (emulated 2 x 2 cluster, 4 ranks and 8 stream threads on 2 cores,
 * 8gbit, default sizes): blocking calls r2 0.978-0.995 with alpha ~7 ms of scheduling delays;
 * nonblocking with these waits 0.993-0.997, alpha ~0. */
enum { STREAM_WAIT_SPINS = 32, STREAM_WAIT_NAP_NS = 20000 };

/* The stream-thread form of coll_run: the nonblocking twin of each call (the AllGather,
 * AllToAll, ReduceScatter and AllReduce come from Open MPI's nonblocking collectives, which
 * choose their own algorithms; SAA, the one operation measured on streams, uses sendrecv and
 * AllGather). */
static fsmoe_status coll_run_polite(coll_job *j, fsmoe_error *err)
{
    MPI_Request r[2];
    int n = 1;
    switch (j->kind) {
    case JOB_A2A:
        MPI_CHECK(MPI_Ialltoall(j->send, j->count, j->type, j->recv, j->count, j->type, j->comm, r),
                  err);
        break;
    case JOB_AG:
        MPI_CHECK(MPI_Iallgather(j->send, j->count, j->type, j->recv, j->count, j->type, j->comm, r),
                  err);
        break;
    case JOB_RS:
        MPI_CHECK(MPI_Ireduce_scatter_block(j->send, j->recv, j->count, j->type, j->op, j->comm, r),
                  err);
        break;
    case JOB_AR:
        MPI_CHECK(MPI_Iallreduce(j->send, j->recv, j->count, j->type, j->op, j->comm, r), err);
        break;
    case JOB_SR:
        MPI_CHECK(MPI_Irecv(j->recv, j->count, j->type, j->src, 0, j->comm, &r[0]), err);
        MPI_CHECK(MPI_Isend(j->send, j->count, j->type, j->dst, 0, j->comm, &r[1]), err);
        n = 2;
        break;
    }
    MPI_CHECK(mpi_wait_napping(r, n, STREAM_WAIT_SPINS, STREAM_WAIT_NAP_NS, STREAM_WAIT_NAP_NS),
              err);
    return FSMOE_OK;
}

static fsmoe_status coll_run(void *arg, fsmoe_error *err)
{
    coll_job *j = arg;
    if (j->polite)
        return coll_run_polite(j, err);
    switch (j->kind) {
    case JOB_A2A:
        MPI_CHECK(MPI_Alltoall(j->send, j->count, j->type, j->recv, j->count, j->type, j->comm),
                  err);
        break;
    case JOB_AG:
        MPI_CHECK(MPI_Allgather(j->send, j->count, j->type, j->recv, j->count, j->type, j->comm),
                  err);
        break;
    case JOB_RS:
        MPI_CHECK(MPI_Reduce_scatter_block(j->send, j->recv, j->count, j->type, j->op, j->comm),
                  err);
        break;
    case JOB_AR:
        MPI_CHECK(MPI_Allreduce(j->send, j->recv, j->count, j->type, j->op, j->comm), err);
        break;
    case JOB_SR:
        MPI_CHECK(MPI_Sendrecv(j->send, j->count, j->type, j->dst, 0, j->recv, j->count, j->type,
                               j->src, 0, j->comm, MPI_STATUS_IGNORE),
                  err);
        break;
    }
    return FSMOE_OK;
}

/* Queues j (kind, buffers, type, op, peers filled in) with its count on the stream. */
static fsmoe_status coll_submit(bench_backend *b, bench_comm *c, coll_job j, size_t count,
                                int stream, fsmoe_error *err)
{
    fsmoe_status st;
    if ((st = mpi_check_stream(stream, err)) || (st = mpi_count(count, &j.count, err)))
        return st;
    j.comm = c->comm[stream];
    j.polite = stream != 0; /* the caller's own thread (stream 0) blocks in MPI */
    return stream_submit(mpi_stream(b, stream), coll_run, &j, sizeof j, err);
}

static fsmoe_status mpi_alltoall(bench_backend *b, bench_comm *c, const void *send, void *recv,
                                 size_t count_per_peer, bench_dtype t, int stream,
                                 fsmoe_error *err)
{
    coll_job j = {.kind = JOB_A2A, .send = send, .recv = recv, .type = comm_mpi_type(t)};
    return coll_submit(b, c, j, count_per_peer, stream, err);
}

static fsmoe_status mpi_allgather(bench_backend *b, bench_comm *c, const void *send, void *recv,
                                  size_t send_count, bench_dtype t, int stream, fsmoe_error *err)
{
    coll_job j = {.kind = JOB_AG, .send = send, .recv = recv, .type = comm_mpi_type(t)};
    return coll_submit(b, c, j, send_count, stream, err);
}

static fsmoe_status mpi_reducescatter(bench_backend *b, bench_comm *c, const void *send,
                                      void *recv, size_t recv_count, bench_dtype t,
                                      bench_redop op, int stream, fsmoe_error *err)
{
    coll_job j = {.kind = JOB_RS, .send = send, .recv = recv, .type = comm_mpi_type(t),
                  .op = comm_mpi_op(op)};
    return coll_submit(b, c, j, recv_count, stream, err);
}

static fsmoe_status mpi_allreduce(bench_backend *b, bench_comm *c, const void *send, void *recv,
                                  size_t count, bench_dtype t, bench_redop op, int stream,
                                  fsmoe_error *err)
{
    coll_job j = {.kind = JOB_AR, .send = send, .recv = recv, .type = comm_mpi_type(t),
                  .op = comm_mpi_op(op)};
    return coll_submit(b, c, j, count, stream, err);
}

static fsmoe_status mpi_sendrecv(bench_backend *b, bench_comm *c, const void *send, int dst,
                                 void *recv, int src, size_t count, bench_dtype t, int stream,
                                 fsmoe_error *err)
{
    coll_job j = {.kind = JOB_SR, .send = send, .recv = recv, .type = comm_mpi_type(t),
                  .dst = dst, .src = src};
    return coll_submit(b, c, j, count, stream, err);
}

typedef struct {
    int m, n, k;
    const float *A, *B;
    float *C;
} gemm_job;

static fsmoe_status gemm_run(void *arg, fsmoe_error *err)
{
    (void)err;
    gemm_job *g = arg;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->m, g->n, g->k, 1.0f, g->A, g->k,
                g->B, g->n, 0.0f, g->C, g->n);
    return FSMOE_OK;
}

static fsmoe_status mpi_gemm(bench_backend *b, int m, int n, int k, const float *A,
                             const float *B, float *C, int stream, fsmoe_error *err)
{
    fsmoe_status st = mpi_check_stream(stream, err);
    if (st)
        return st;
    gemm_job g = {m, n, k, A, B, C};
    return stream_submit(mpi_stream(b, stream), gemm_run, &g, sizeof g, err);
}

typedef struct {
    void *dst;
    const void *src;
    size_t bytes;
} copy_job;

static fsmoe_status copy_run(void *arg, fsmoe_error *err)
{
    (void)err;
    copy_job *c = arg;
    memcpy(c->dst, c->src, c->bytes);
    return FSMOE_OK;
}

static fsmoe_status mpi_copy(bench_backend *b, void *dst, const void *src, size_t bytes,
                             int stream, fsmoe_error *err)
{
    fsmoe_status st = mpi_check_stream(stream, err);
    if (st)
        return st;
    copy_job c = {dst, src, bytes};
    return stream_submit(mpi_stream(b, stream), copy_run, &c, sizeof c, err);
}

static fsmoe_status mpi_event_record(bench_backend *b, int stream, int event, fsmoe_error *err)
{
    fsmoe_status st = mpi_check_stream(stream, err);
    if (st)
        return st;
    return stream_record(mpi_stream(b, stream), ((mpi_impl *)b->impl)->events, event, err);
}

static fsmoe_status mpi_stream_wait(bench_backend *b, int stream, int event, fsmoe_error *err)
{
    fsmoe_status st = mpi_check_stream(stream, err);
    if (st)
        return st;
    return stream_wait(mpi_stream(b, stream), ((mpi_impl *)b->impl)->events, event, err);
}

static fsmoe_status mpi_sync(bench_backend *b, int stream, fsmoe_error *err)
{
    fsmoe_status st = mpi_check_stream(stream, err);
    if (st)
        return st;
    return stream_sync(mpi_stream(b, stream), err);
}

static void mpi_fini(bench_backend *b)
{
    mpi_impl *impl = b->impl;
    if (!impl)
        return;
    for (int s = 0; s < BENCH_STREAMS; s++)
        stream_thread_free(&impl->streams[s]);
    stream_events_free(&impl->events);
    free(impl);
    b->impl = NULL;
}

fsmoe_status comm_mpi_init(bench_backend *b, int blas_threads, int huge_pages,
                           fsmoe_error *err)
{
    fsmoe_status st;
    memset(b, 0, sizeof *b);
    b->name = "mpi";
    b->host_memory = 1;
    b->fini = mpi_fini;
    mpi_impl *impl = calloc(1, sizeof *impl);
    if (!impl)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for the mpi backend");
    b->impl = impl;
    impl->huge_pages = huge_pages;
    if ((st = stream_events_init(&impl->events, BENCH_EVENTS, err)))
        goto fail;
    for (int s = 1; s < BENCH_STREAMS; s++)
        if ((st = stream_thread_init(&impl->streams[s], err)))
            goto fail;
    if (blas_threads > 0)
        openblas_set_num_threads(blas_threads);
    snprintf(b->device, sizeof b->device, "cpu (OpenBLAS, %d thread%s)",
             openblas_get_num_threads(), openblas_get_num_threads() == 1 ? "" : "s");
    b->alloc = mpi_alloc;
    b->release = mpi_release;
    b->upload = mpi_memcpy_blocking;
    b->download = mpi_memcpy_blocking;
    b->comm_init = mpi_comm_init;
    b->comm_free = mpi_comm_free;
    b->alltoall = mpi_alltoall;
    b->sendrecv = mpi_sendrecv;
    b->allgather = mpi_allgather;
    b->reducescatter = mpi_reducescatter;
    b->allreduce = mpi_allreduce;
    b->gemm = mpi_gemm;
    b->copy = mpi_copy;
    b->event_record = mpi_event_record;
    b->stream_wait = mpi_stream_wait;
    b->sync = mpi_sync;
    return FSMOE_OK;
fail:
    mpi_fini(b);
    return st;
}
