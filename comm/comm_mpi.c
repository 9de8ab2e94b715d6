/* Implements: the `mpi` backend (comm_backend.h, comm_mpi.h) — the host path of the
 * communication layer: every collective goes through mpi_coll.h (nonblocking, polite wait,
 * watchdog), on the calling thread for stream 0 and on a worker thread for streams 1 and 2.
 *
 * Every group gets its own MPI_Comm_dup per stream, so that two streams (threads) never share
 * a communicator: MPI matches collectives per communicator in call order, and two threads
 * calling collectives on one communicator would race (MPI_THREAD_MULTIPLE does not order
 * them). Relies on MPI_Init_thread(MPI_THREAD_MULTIPLE) having been granted (main checks).
 *
 * The 2DH AllToAll (libfsmoe/a2a_2dh.h) runs fsmoe_mpi_alltoallv_2dh on two sub-communicators per
 * stream (split from that stream's duplicate: the node's members by local index, the members
 * with this local index by node) with the group's one plan of the uniform exchange and a stage
 * pool per stream (comm_backend.h stage_pool_bytes), allocated on the stream's thread when a
 * larger size first needs it. */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#include "comm_mpi.h"

#include <cblas.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "comm_backend.h"
#include "mpi_coll.h"
#include "stream_thread.h"
#include "topology.h"

/* What one stream's 2DH AllToAll uses (touched only by that stream's thread after init). */
typedef struct {
    MPI_Comm intra, inter; /* split from comm[stream]: ranked by local index, by node */
    void *stage;           /* a pool of stage_bytes: slots of rows_a + 2·rows_b rows */
    size_t stage_bytes;
    size_t k;              /* the slot of the last run */
} mpi_2dh_stream;

struct comm_group {
    MPI_Comm comm[COMM_STREAMS]; /* one duplicate per stream */
    topology_2dh h2;             /* the group's 2DH shape and uniform plan */
    mpi_2dh_stream s2[COMM_STREAMS];
    int huge_pages;
    size_t stage_pool; /* comm_backend.stage_pool_bytes at group_init */
};

typedef struct {
    stream_thread *streams[COMM_STREAMS]; /* [0] = NULL: the caller */
    stream_events *events;
    int huge_pages;
} mpi_impl;

MPI_Datatype comm_mpi_type(comm_dtype t)
{
    switch (t) {
    case COMM_FLOAT: return MPI_FLOAT;
    case COMM_DOUBLE: return MPI_DOUBLE;
    case COMM_INT32: return MPI_INT32_T;
    case COMM_UINT32: return MPI_UINT32_T;
    case COMM_INT64: return MPI_INT64_T;
    case COMM_UINT64: return MPI_UINT64_T;
    case COMM_UINT8: return MPI_UINT8_T;
    default: return MPI_DATATYPE_NULL;
    }
}

MPI_Op comm_mpi_op(comm_redop op)
{
    switch (op) {
    case COMM_SUM: return MPI_SUM;
    case COMM_PROD: return MPI_PROD;
    case COMM_MIN: return MPI_MIN;
    case COMM_MAX: return MPI_MAX;
    default: return MPI_OP_NULL;
    }
}

static stream_thread *mpi_stream(comm_backend *b, int stream)
{
    return ((mpi_impl *)b->impl)->streams[stream];
}

static fsmoe_status mpi_check_stream(int stream, fsmoe_error *err)
{
    if (stream < 0 || stream >= COMM_STREAMS)
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
static fsmoe_status host_alloc(int huge_pages, size_t bytes, void **out, fsmoe_error *err)
{
    const size_t huge = (size_t)2 << 20;
    int want_huge = huge_pages && bytes >= huge;
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

static fsmoe_status mpi_alloc(comm_backend *b, size_t bytes, void **out, fsmoe_error *err)
{
    return host_alloc(((mpi_impl *)b->impl)->huge_pages, bytes, out, err);
}

static void mpi_release(comm_backend *b, void *p)
{
    (void)b;
    free(p);
}

static fsmoe_status mpi_memcpy_blocking(comm_backend *b, void *dst, const void *src,
                                        size_t bytes, fsmoe_error *err)
{
    (void)b;
    (void)err;
    memcpy(dst, src, bytes);
    return FSMOE_OK;
}

static void mpi_group_free(comm_backend *b, comm_group **pc)
{
    (void)b;
    comm_group *c = pc ? *pc : NULL;
    if (!c)
        return;
    for (int s = 0; s < COMM_STREAMS; s++) {
        if (c->comm[s] != MPI_COMM_NULL)
            MPI_Comm_free(&c->comm[s]);
        if (c->s2[s].intra != MPI_COMM_NULL)
            MPI_Comm_free(&c->s2[s].intra);
        if (c->s2[s].inter != MPI_COMM_NULL)
            MPI_Comm_free(&c->s2[s].inter);
        free(c->s2[s].stage);
    }
    topology_2dh_free(&c->h2);
    free(c);
    *pc = NULL;
}

static fsmoe_status mpi_group_init(comm_backend *b, MPI_Comm group, int node, comm_group **out,
                                  fsmoe_error *err)
{
    fsmoe_status st = FSMOE_OK;
    comm_group *c = calloc(1, sizeof *c);
    if (!c)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for a group");
    c->huge_pages = ((mpi_impl *)b->impl)->huge_pages;
    c->stage_pool = b->stage_pool_bytes;
    for (int s = 0; s < COMM_STREAMS; s++)
        c->comm[s] = c->s2[s].intra = c->s2[s].inter = MPI_COMM_NULL;
    for (int s = 0; s < COMM_STREAMS && !st; s++)
        st = MPI_STATUS_OF(MPI_Comm_dup(group, &c->comm[s]), err);
    if (!st)
        st = topology_2dh_init(c->comm[0], node, &c->h2, err);
    for (int s = 0; s < COMM_STREAMS && !st && c->h2.hierarchical; s++)
        st = topology_2dh_split(c->comm[s], &c->h2, &c->s2[s].intra, &c->s2[s].inter, err);
    if (st) {
        mpi_group_free(b, &c);
        return st;
    }
    *out = c;
    return FSMOE_OK;
}

/* One job layout for all collectives; `kind` selects the call. Every collective, on whichever
 * stream, runs through mpi_coll.h: nonblocking, waited for politely under the watchdog (a
 * blocking MPI call spins in the progress loop and takes the cores the other ranks need). */
typedef enum { JOB_A2A, JOB_A2AV, JOB_AG, JOB_RS, JOB_AR, JOB_SR, JOB_A2A_2DH } coll_kind;

typedef struct {
    coll_kind kind;
    MPI_Comm comm;
    const void *send;
    void *recv;
    int count;
    MPI_Datatype type;
    MPI_Op op;
    int dst, src; /* JOB_SR */
    const size_t *counts[2], *displs[2]; /* JOB_A2AV: send, receive (the caller's arrays) */
    comm_group *group;                   /* JOB_A2A_2DH: its plan and this stream's stage */
    int stream;
} coll_job;

/* AllToAllv with MPI's int counts: each size_t entry checked against INT_MAX. */
static fsmoe_status a2av_run(const coll_job *j, fsmoe_error *err)
{
    int P = 0;
    MPI_CHECK(MPI_Comm_size(j->comm, &P), err);
    int *v = malloc(4 * (size_t)P * sizeof *v);
    if (!v)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for AllToAllv counts");
    fsmoe_status st = FSMOE_OK;
    for (int a = 0; a < 2 && !st; a++)
        for (int p = 0; p < P && !st; p++) {
            size_t c = j->counts[a][p], d = j->displs[a][p];
            if (c > INT_MAX || d > INT_MAX)
                st = fsmoe_fail(err, FSMOE_ERR_VALUE,
                                "alltoallv: %s %zu elements at %zu for member %d exceed MPI's "
                                "int counts", a ? "receiving" : "sending", c, d, p);
            v[(2 * a) * P + p] = (int)c;
            v[(2 * a + 1) * P + p] = (int)d;
        }
    if (!st)
        st = fsmoe_mpi_alltoallv(j->comm, j->send, v, v + P, j->recv, v + 2 * P, v + 3 * P,
                                 j->type, "alltoallv", err);
    free(v);
    return st;
}

/* The 2DH AllToAll on the stream's thread: the uniform plan's rows are count elements each.
 * The stream's stage pool (at least one stage, at least stage_pool bytes) is allocated and
 * touched here when a larger size first needs it (in fsmoe-bench's untimed warm-up run), then
 * kept; successive runs take successive slots of it (comm_backend.h stage_pool_bytes). */
static fsmoe_status a2a_2dh_run(const coll_job *j, fsmoe_error *err)
{
    comm_group *c = j->group;
    mpi_2dh_stream *h = &c->s2[j->stream];
    const fsmoe_a2a_2dh_plan *p = &c->h2.plan;
    int tsize = 0;
    if (j->count == 0)
        return FSMOE_OK; /* nothing to move (and rows of 0 elements) */
    MPI_CHECK(MPI_Type_size(j->type, &tsize), err);
    size_t need = (size_t)(p->rows_a + 2 * p->rows_b) * (size_t)j->count * (size_t)tsize;
    size_t slot = (need + 4095) / 4096 * 4096;
    if (need > h->stage_bytes) {
        size_t bytes = slot > c->stage_pool ? slot : c->stage_pool;
        free(h->stage);
        h->stage = NULL;
        h->stage_bytes = 0;
        fsmoe_status st = host_alloc(c->huge_pages, bytes, &h->stage, err);
        if (st)
            return st;
        h->stage_bytes = bytes;
    }
    size_t slots = h->stage_bytes / slot;
    h->k = slots > 1 ? (h->k + 1) % slots : 0;
    return fsmoe_mpi_alltoallv_2dh(h->intra, h->inter, p, j->send, j->recv,
                                   (char *)h->stage + h->k * slot, j->count, j->type,
                                   "alltoall_2dh", err);
}

static fsmoe_status coll_run(void *arg, fsmoe_error *err)
{
    coll_job *j = arg;
    switch (j->kind) {
    case JOB_A2A:
        return fsmoe_mpi_alltoall(j->comm, j->send, j->recv, j->count, j->type, "alltoall", err);
    case JOB_A2AV:
        return a2av_run(j, err);
    case JOB_AG:
        return fsmoe_mpi_allgather(j->comm, j->send, j->recv, j->count, j->type, "allgather",
                                   err);
    case JOB_RS:
        return fsmoe_mpi_reducescatter(j->comm, j->send, j->recv, j->count, j->type, j->op,
                                       "reducescatter", err);
    case JOB_AR:
        return fsmoe_mpi_allreduce(j->comm, j->send, j->recv, j->count, j->type, j->op,
                                   "allreduce", err);
    case JOB_SR:
        return fsmoe_mpi_sendrecv(j->comm, j->send, j->dst, j->recv, j->src, j->count, j->type,
                                  "sendrecv", err);
    case JOB_A2A_2DH:
        return a2a_2dh_run(j, err);
    }
    return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "unknown collective %d", (int)j->kind);
}

/* Queues j (kind, buffers, type, op, peers filled in) with its count on the stream. */
static fsmoe_status coll_submit(comm_backend *b, comm_group *c, coll_job j, size_t count,
                                int stream, fsmoe_error *err)
{
    fsmoe_status st;
    if ((st = mpi_check_stream(stream, err)) || (st = mpi_count(count, &j.count, err)))
        return st;
    j.comm = c->comm[stream];
    return stream_submit(mpi_stream(b, stream), coll_run, &j, sizeof j, err);
}

static fsmoe_status mpi_alltoall(comm_backend *b, comm_group *c, const void *send, void *recv,
                                 size_t count_per_peer, comm_dtype t, int stream,
                                 fsmoe_error *err)
{
    coll_job j = {.kind = JOB_A2A, .send = send, .recv = recv, .type = comm_mpi_type(t)};
    return coll_submit(b, c, j, count_per_peer, stream, err);
}

static fsmoe_status mpi_alltoall_2dh(comm_backend *b, comm_group *c, const void *send,
                                     void *recv, size_t count_per_peer, comm_dtype t,
                                     int stream, fsmoe_error *err)
{
    if (!c->h2.hierarchical)
        return fsmoe_fail(err, FSMOE_ERR_USAGE,
                          "alltoall_2dh: the group is not hierarchical: %s (use alltoall)",
                          c->h2.why);
    coll_job j = {.kind = JOB_A2A_2DH, .send = send, .recv = recv, .type = comm_mpi_type(t),
                  .group = c, .stream = stream};
    return coll_submit(b, c, j, count_per_peer, stream, err);
}

static fsmoe_status mpi_alltoallv(comm_backend *b, comm_group *c, const void *send,
                                  const size_t *send_counts, const size_t *send_displs,
                                  void *recv, const size_t *recv_counts,
                                  const size_t *recv_displs, comm_dtype t, int stream,
                                  fsmoe_error *err)
{
    coll_job j = {.kind = JOB_A2AV, .send = send, .recv = recv, .type = comm_mpi_type(t),
                  .counts = {send_counts, recv_counts}, .displs = {send_displs, recv_displs}};
    return coll_submit(b, c, j, 0, stream, err);
}

static fsmoe_status mpi_allgather(comm_backend *b, comm_group *c, const void *send, void *recv,
                                  size_t send_count, comm_dtype t, int stream, fsmoe_error *err)
{
    coll_job j = {.kind = JOB_AG, .send = send, .recv = recv, .type = comm_mpi_type(t)};
    return coll_submit(b, c, j, send_count, stream, err);
}

static fsmoe_status mpi_reducescatter(comm_backend *b, comm_group *c, const void *send,
                                      void *recv, size_t recv_count, comm_dtype t,
                                      comm_redop op, int stream, fsmoe_error *err)
{
    coll_job j = {.kind = JOB_RS, .send = send, .recv = recv, .type = comm_mpi_type(t),
                  .op = comm_mpi_op(op)};
    return coll_submit(b, c, j, recv_count, stream, err);
}

static fsmoe_status mpi_allreduce(comm_backend *b, comm_group *c, const void *send, void *recv,
                                  size_t count, comm_dtype t, comm_redop op, int stream,
                                  fsmoe_error *err)
{
    coll_job j = {.kind = JOB_AR, .send = send, .recv = recv, .type = comm_mpi_type(t),
                  .op = comm_mpi_op(op)};
    return coll_submit(b, c, j, count, stream, err);
}

static fsmoe_status mpi_sendrecv(comm_backend *b, comm_group *c, const void *send, int dst,
                                 void *recv, int src, size_t count, comm_dtype t, int stream,
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

static fsmoe_status mpi_gemm(comm_backend *b, int m, int n, int k, const float *A,
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

static fsmoe_status mpi_copy(comm_backend *b, void *dst, const void *src, size_t bytes,
                             int stream, fsmoe_error *err)
{
    fsmoe_status st = mpi_check_stream(stream, err);
    if (st)
        return st;
    copy_job c = {dst, src, bytes};
    return stream_submit(mpi_stream(b, stream), copy_run, &c, sizeof c, err);
}

static fsmoe_status mpi_event_record(comm_backend *b, int stream, int event, fsmoe_error *err)
{
    fsmoe_status st = mpi_check_stream(stream, err);
    if (st)
        return st;
    return stream_record(mpi_stream(b, stream), ((mpi_impl *)b->impl)->events, event, err);
}

static fsmoe_status mpi_stream_wait(comm_backend *b, int stream, int event, fsmoe_error *err)
{
    fsmoe_status st = mpi_check_stream(stream, err);
    if (st)
        return st;
    return stream_wait(mpi_stream(b, stream), ((mpi_impl *)b->impl)->events, event, err);
}

static fsmoe_status mpi_sync(comm_backend *b, int stream, fsmoe_error *err)
{
    fsmoe_status st = mpi_check_stream(stream, err);
    if (st)
        return st;
    return stream_sync(mpi_stream(b, stream), err);
}

static void mpi_fini(comm_backend *b)
{
    mpi_impl *impl = b->impl;
    if (!impl)
        return;
    for (int s = 0; s < COMM_STREAMS; s++)
        stream_thread_free(&impl->streams[s]);
    stream_events_free(&impl->events);
    free(impl);
    b->impl = NULL;
}

fsmoe_status comm_mpi_init(comm_backend *b, int blas_threads, int huge_pages,
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
    if ((st = stream_events_init(&impl->events, COMM_EVENTS, err)))
        goto fail;
    for (int s = 1; s < COMM_STREAMS; s++)
        if ((st = stream_thread_init(&impl->streams[s], err)))
            goto fail;
    if (blas_threads > 0)
        openblas_set_num_threads(blas_threads);
    snprintf(b->device, sizeof b->device, "cpu (OpenBLAS, %d thread%s)",
             openblas_get_num_threads(), openblas_get_num_threads() == 1 ? "" : "s");
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    b->device_memory_bytes = pages > 0 && page > 0 ? (double)pages * (double)page : 0.0;
    b->alloc = mpi_alloc;
    b->release = mpi_release;
    b->upload = mpi_memcpy_blocking;
    b->download = mpi_memcpy_blocking;
    b->group_init = mpi_group_init;
    b->group_free = mpi_group_free;
    b->alltoall = mpi_alltoall;
    b->alltoall_2dh = mpi_alltoall_2dh;
    b->alltoallv = mpi_alltoallv;
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
