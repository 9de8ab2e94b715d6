/* Implements: the `nccl` backend of the communication layer (comm_backend.h): device memory, NCCL collectives
 * bootstrapped over MPI (rank 0 of each group makes the unique id, MPI_Bcast shares it,
 * toolchain.md), cuBLAS sgemm, cudaMemcpyAsync, CUDA streams and events. AllToAll is built
 * from ncclSend/ncclRecv in one group call (nccl-tests' alltoall). Each rank uses device
 * (local rank mod device count, topology_local_rank). AllToAllv likewise, with each peer's own
 * counts. The 2DH AllToAll (libfsmoe/a2a_2dh.h) runs the group's plan on the stream: its three
 * re-layouts as cudaMemcpyAsync blocks, its two phases as ncclSend/ncclRecv group calls on the
 * group's communicator (the plan's peers are group ranks), staged in device memory kept per
 * stream (a pool whose slots successive runs take in turn, comm_backend.h stage_pool_bytes). Only this file is CUDA C++; the rest of the layer is C11.
 *
 * Without a usable device, comm_nccl_init fails with FSMOE_ERR_USAGE and says why (the gpu
 * tests then exit 77). The backend must compile and link wherever nvcc, cuBLAS and NCCL
 * exist; its run path needs a GPU. */
#define OMPI_SKIP_MPICXX 1
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "comm_backend.h"
#include "mpi_coll.h"
#include "topology.h"
}
#include "nccl_boot.h"
#include "check.h" /* after the CUDA, cuBLAS, NCCL and MPI headers: their check macros */

struct comm_group {
    ncclComm_t comm;
    int size;
    topology_2dh h2;                  /* the group's 2DH shape and uniform plan */
    void *stage[COMM_STREAMS];        /* per stream: a pool of slots of rows_a + 2·rows_b rows */
    size_t stage_bytes[COMM_STREAMS];
    size_t stage_k[COMM_STREAMS];     /* the slot of the stream's last run */
    size_t stage_pool;                /* comm_backend.stage_pool_bytes at group_init */
};

typedef struct {
    int device;
    cudaStream_t streams[COMM_STREAMS];
    cudaEvent_t events[COMM_EVENTS];
    cublasHandle_t blas;
} nccl_impl;

static nccl_impl *impl_of(comm_backend *b)
{
    return (nccl_impl *)b->impl;
}

static ncclDataType_t nccl_type(comm_dtype t)
{
    switch (t) {
    case COMM_FLOAT: return ncclFloat32;
    case COMM_DOUBLE: return ncclFloat64;
    case COMM_INT32: return ncclInt32;
    case COMM_UINT32: return ncclUint32;
    case COMM_INT64: return ncclInt64;
    case COMM_UINT64: return ncclUint64;
    case COMM_UINT8: return ncclUint8;
    default: return ncclFloat32;
    }
}

static ncclRedOp_t nccl_op(comm_redop op)
{
    switch (op) {
    case COMM_SUM: return ncclSum;
    case COMM_PROD: return ncclProd;
    case COMM_MIN: return ncclMin;
    case COMM_MAX: return ncclMax;
    default: return ncclSum;
    }
}

static fsmoe_status check_stream(int stream, fsmoe_error *err)
{
    if (stream < 0 || stream >= COMM_STREAMS)
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "stream %d out of range", stream);
    return FSMOE_OK;
}

static fsmoe_status nccl_alloc(comm_backend *b, size_t bytes, void **out, fsmoe_error *err)
{
    (void)b;
    CUDA_CHECK(cudaMalloc(out, bytes ? bytes : 64), err);
    return FSMOE_OK;
}

static void nccl_release(comm_backend *b, void *p)
{
    (void)b;
    cudaFree(p);
}

static fsmoe_status nccl_upload(comm_backend *b, void *dst, const void *host, size_t bytes,
                                fsmoe_error *err)
{
    (void)b;
    /* cudaMemcpy from pageable memory may return before its DMA has landed, and it runs on the
     * legacy default stream, which this backend's non-blocking streams do not wait for: on an
     * H100 a copy queued right after an upload of poison was overwritten by the poison
     * (fsmoe-bench's check counted 78112 wrong values). Finish it before any stream runs. */
    CUDA_CHECK(cudaMemcpy(dst, host, bytes, cudaMemcpyHostToDevice), err);
    CUDA_CHECK(cudaDeviceSynchronize(), err);
    return FSMOE_OK;
}

static fsmoe_status nccl_download(comm_backend *b, void *host, const void *src, size_t bytes,
                                  fsmoe_error *err)
{
    (void)b;
    /* The legacy default stream does not wait for the non-blocking streams: wait for them. */
    CUDA_CHECK(cudaDeviceSynchronize(), err);
    CUDA_CHECK(cudaMemcpy(host, src, bytes, cudaMemcpyDeviceToHost), err);
    return FSMOE_OK;
}

fsmoe_status fsmoe_nccl_comm_init(MPI_Comm group, ncclComm_t *out, const char *what,
                                  fsmoe_error *err)
{
    int rank = 0, size = 1;
    MPI_Comm_rank(group, &rank);
    MPI_Comm_size(group, &size);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (rank == 0)
        NCCL_CHECK(ncclGetUniqueId(&id), (ncclComm_t)NULL, err);
    MPI_Request req;
    MPI_CHECK(MPI_Ibcast(&id, (int)sizeof id, MPI_BYTE, 0, group, &req), err);
    fsmoe_status st = fsmoe_mpi_wait(&req, 1, group, what, err);
    if (st != FSMOE_OK)
        return st;
    return NCCL_STATUS_OF(ncclCommInitRank(out, size, id, rank), NULL, err);
}

static void nccl_group_free(comm_backend *b, comm_group **pc)
{
    comm_group *c = pc ? *pc : NULL;
    if (!c)
        return;
    for (int s = 0; s < COMM_STREAMS; s++)
        if (c->stage[s]) {
            cudaStreamSynchronize(impl_of(b)->streams[s]);
            cudaFree(c->stage[s]);
        }
    if (c->comm)
        ncclCommDestroy(c->comm);
    topology_2dh_free(&c->h2);
    free(c);
    *pc = NULL;
}

static fsmoe_status nccl_group_init(comm_backend *b, MPI_Comm group, int node, comm_group **out,
                                   fsmoe_error *err)
{
    int size = 1;
    MPI_Comm_size(group, &size);
    comm_group *c = (comm_group *)calloc(1, sizeof *c);
    if (!c)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for a group");
    c->size = size;
    c->stage_pool = b->stage_pool_bytes;
    fsmoe_status st = topology_2dh_init(group, node, &c->h2, err);
    if (!st)
        st = fsmoe_nccl_comm_init(group, &c->comm, "NCCL bootstrap (unique id broadcast)", err);
    if (st) {
        nccl_group_free(b, &c);
        return st;
    }
    *out = c;
    return FSMOE_OK;
}

static fsmoe_status nccl_alltoall(comm_backend *b, comm_group *c, const void *send, void *recv,
                                  size_t count_per_peer, comm_dtype t, int stream,
                                  fsmoe_error *err)
{
    fsmoe_status st = check_stream(stream, err);
    if (st)
        return st;
    cudaStream_t s = impl_of(b)->streams[stream];
    size_t bytes = count_per_peer * comm_dtype_size(t);
    NCCL_CHECK(ncclGroupStart(), c->comm, err);
    ncclResult_t rc = ncclSuccess;
    for (int p = 0; p < c->size && rc == ncclSuccess; p++) {
        rc = ncclSend((const char *)send + (size_t)p * bytes, count_per_peer, nccl_type(t), p,
                      c->comm, s);
        if (rc == ncclSuccess)
            rc = ncclRecv((char *)recv + (size_t)p * bytes, count_per_peer, nccl_type(t), p,
                          c->comm, s);
    }
    ncclResult_t end = ncclGroupEnd(); /* closes the group even after a failed call */
    NCCL_CHECK(rc != ncclSuccess ? rc : end, c->comm, err);
    return FSMOE_OK;
}

/* One re-layout of the 2DH plan: its blocks as device-to-device copies on stream s. */
static fsmoe_status move_blocks(const fsmoe_a2a_2dh_block *blk, int n, const void *src, void *dst,
                                size_t row_bytes, cudaStream_t s, fsmoe_error *err)
{
    for (int i = 0; i < n; i++)
        CUDA_CHECK(cudaMemcpyAsync((char *)dst + (size_t)blk[i].dst * row_bytes,
                                   (const char *)src + (size_t)blk[i].src * row_bytes,
                                   (size_t)blk[i].rows * row_bytes, cudaMemcpyDeviceToDevice, s),
                   err);
    return FSMOE_OK;
}

/* One phase of the 2DH plan: to peer[q] sc[q] rows from send + sd[q], from peer[q] rc[q] rows
 * into recv + rd[q] (rows of row_elems elements), in one NCCL group call. */
static fsmoe_status phase(comm_group *c, int n, const int *peer, const long *sc, const long *sd,
                          const void *send, const long *rc, const long *rd, void *recv,
                          size_t row_elems, comm_dtype t, cudaStream_t s, fsmoe_error *err)
{
    size_t row_bytes = row_elems * comm_dtype_size(t);
    NCCL_CHECK(ncclGroupStart(), c->comm, err);
    ncclResult_t rc_ = ncclSuccess;
    for (int q = 0; q < n && rc_ == ncclSuccess; q++) {
        if (sc[q])
            rc_ = ncclSend((const char *)send + (size_t)sd[q] * row_bytes,
                           (size_t)sc[q] * row_elems, nccl_type(t), peer[q], c->comm, s);
        if (rc_ == ncclSuccess && rc[q])
            rc_ = ncclRecv((char *)recv + (size_t)rd[q] * row_bytes, (size_t)rc[q] * row_elems,
                           nccl_type(t), peer[q], c->comm, s);
    }
    ncclResult_t end = ncclGroupEnd(); /* closes the group even after a failed call */
    NCCL_CHECK(rc_ != ncclSuccess ? rc_ : end, c->comm, err);
    return FSMOE_OK;
}

static fsmoe_status nccl_alltoall_2dh(comm_backend *b, comm_group *c, const void *send,
                                      void *recv, size_t count_per_peer, comm_dtype t,
                                      int stream, fsmoe_error *err)
{
    fsmoe_status st = check_stream(stream, err);
    if (st)
        return st;
    if (!c->h2.hierarchical)
        return fsmoe_fail(err, FSMOE_ERR_USAGE,
                          "alltoall_2dh: the group is not hierarchical: %s (use alltoall)",
                          c->h2.why);
    if (count_per_peer == 0)
        return FSMOE_OK;
    const fsmoe_a2a_2dh_plan *p = &c->h2.plan;
    cudaStream_t s = impl_of(b)->streams[stream];
    size_t row = count_per_peer * comm_dtype_size(t);
    size_t need = (size_t)(p->rows_a + 2 * p->rows_b) * row;
    size_t slot = (need + 4095) / 4096 * 4096;
    if (need > c->stage_bytes[stream]) {
        /* a pool of at least stage_pool bytes (comm_backend.h); the stream may still be
         * running on the old one */
        size_t bytes = slot > c->stage_pool ? slot : c->stage_pool;
        CUDA_CHECK(cudaStreamSynchronize(s), err);
        CUDA_CHECK(cudaFree(c->stage[stream]), err);
        c->stage[stream] = NULL;
        c->stage_bytes[stream] = 0;
        CUDA_CHECK(cudaMalloc(&c->stage[stream], bytes), err);
        c->stage_bytes[stream] = bytes;
    }
    size_t slots = c->stage_bytes[stream] / slot;
    c->stage_k[stream] = slots > 1 ? (c->stage_k[stream] + 1) % slots : 0;
    char *A = (char *)c->stage[stream] + c->stage_k[stream] * slot;
    char *B = A + (size_t)p->rows_a * row, *C = B + (size_t)p->rows_b * row;
    if ((st = move_blocks(p->pack1, p->n_pack1, send, A, row, s, err)) ||
        (st = phase(c, p->locals, p->peer1, p->s1c, p->s1d, A, p->r1c, p->r1d, B,
                    count_per_peer, t, s, err)) ||
        (st = move_blocks(p->pack2, p->n_pack2, B, C, row, s, err)) ||
        (st = phase(c, p->nodes, p->peer2, p->s2c, p->s2d, C, p->r2c, p->r2d, A,
                    count_per_peer, t, s, err)) ||
        (st = move_blocks(p->unpack, p->n_unpack, A, recv, row, s, err)))
        return st;
    return FSMOE_OK;
}

static fsmoe_status nccl_alltoallv(comm_backend *b, comm_group *c, const void *send,
                                   const size_t *send_counts, const size_t *send_displs,
                                   void *recv, const size_t *recv_counts,
                                   const size_t *recv_displs, comm_dtype t, int stream,
                                   fsmoe_error *err)
{
    fsmoe_status st = check_stream(stream, err);
    if (st)
        return st;
    cudaStream_t s = impl_of(b)->streams[stream];
    size_t es = comm_dtype_size(t);
    NCCL_CHECK(ncclGroupStart(), c->comm, err);
    ncclResult_t rc = ncclSuccess;
    for (int p = 0; p < c->size && rc == ncclSuccess; p++) {
        if (send_counts[p])
            rc = ncclSend((const char *)send + send_displs[p] * es, send_counts[p], nccl_type(t),
                          p, c->comm, s);
        if (rc == ncclSuccess && recv_counts[p])
            rc = ncclRecv((char *)recv + recv_displs[p] * es, recv_counts[p], nccl_type(t), p,
                          c->comm, s);
    }
    ncclResult_t end = ncclGroupEnd(); /* closes the group even after a failed call */
    NCCL_CHECK(rc != ncclSuccess ? rc : end, c->comm, err);
    return FSMOE_OK;
}

static fsmoe_status nccl_sendrecv(comm_backend *b, comm_group *c, const void *send, int dst,
                                  void *recv, int src, size_t count, comm_dtype t, int stream,
                                  fsmoe_error *err)
{
    fsmoe_status st = check_stream(stream, err);
    if (st)
        return st;
    cudaStream_t s = impl_of(b)->streams[stream];
    NCCL_CHECK(ncclGroupStart(), c->comm, err);
    ncclResult_t rc = ncclSend(send, count, nccl_type(t), dst, c->comm, s);
    if (rc == ncclSuccess)
        rc = ncclRecv(recv, count, nccl_type(t), src, c->comm, s);
    ncclResult_t end = ncclGroupEnd(); /* closes the group even after a failed call */
    NCCL_CHECK(rc != ncclSuccess ? rc : end, c->comm, err);
    return FSMOE_OK;
}

static fsmoe_status nccl_allgather(comm_backend *b, comm_group *c, const void *send, void *recv,
                                   size_t send_count, comm_dtype t, int stream,
                                   fsmoe_error *err)
{
    fsmoe_status st = check_stream(stream, err);
    if (st)
        return st;
    NCCL_CHECK(ncclAllGather(send, recv, send_count, nccl_type(t), c->comm,
                             impl_of(b)->streams[stream]), c->comm, err);
    return FSMOE_OK;
}

static fsmoe_status nccl_reducescatter(comm_backend *b, comm_group *c, const void *send,
                                       void *recv, size_t recv_count, comm_dtype t,
                                       comm_redop op, int stream, fsmoe_error *err)
{
    fsmoe_status st = check_stream(stream, err);
    if (st)
        return st;
    NCCL_CHECK(ncclReduceScatter(send, recv, recv_count, nccl_type(t), nccl_op(op), c->comm,
                                 impl_of(b)->streams[stream]), c->comm, err);
    return FSMOE_OK;
}

static fsmoe_status nccl_allreduce(comm_backend *b, comm_group *c, const void *send, void *recv,
                                   size_t count, comm_dtype t, comm_redop op, int stream,
                                   fsmoe_error *err)
{
    fsmoe_status st = check_stream(stream, err);
    if (st)
        return st;
    NCCL_CHECK(ncclAllReduce(send, recv, count, nccl_type(t), nccl_op(op), c->comm,
                             impl_of(b)->streams[stream]), c->comm, err);
    return FSMOE_OK;
}

static fsmoe_status nccl_gemm(comm_backend *b, int m, int n, int k, const float *A,
                              const float *B, float *C, int stream, fsmoe_error *err)
{
    fsmoe_status st = check_stream(stream, err);
    if (st)
        return st;
    nccl_impl *im = impl_of(b);
    const float one = 1.0f, zero = 0.0f;
    /* Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ. */
    CUBLAS_CHECK(cublasSetStream(im->blas, im->streams[stream]), err);
    CUBLAS_CHECK(cublasSgemm(im->blas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, B, n, A, k,
                             &zero, C, n), err);
    return FSMOE_OK;
}

static fsmoe_status nccl_copy(comm_backend *b, void *dst, const void *src, size_t bytes,
                              int stream, fsmoe_error *err)
{
    fsmoe_status st = check_stream(stream, err);
    if (st)
        return st;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                               impl_of(b)->streams[stream]), err);
    return FSMOE_OK;
}

static fsmoe_status nccl_event_record(comm_backend *b, int stream, int event, fsmoe_error *err)
{
    fsmoe_status st = check_stream(stream, err);
    if (st)
        return st;
    if (event < 0 || event >= COMM_EVENTS)
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "event %d out of range", event);
    CUDA_CHECK(cudaEventRecord(impl_of(b)->events[event], impl_of(b)->streams[stream]), err);
    return FSMOE_OK;
}

static fsmoe_status nccl_stream_wait(comm_backend *b, int stream, int event, fsmoe_error *err)
{
    fsmoe_status st = check_stream(stream, err);
    if (st)
        return st;
    if (event < 0 || event >= COMM_EVENTS)
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "event %d out of range", event);
    CUDA_CHECK(cudaStreamWaitEvent(impl_of(b)->streams[stream], impl_of(b)->events[event], 0),
               err);
    return FSMOE_OK;
}

static fsmoe_status nccl_sync(comm_backend *b, int stream, fsmoe_error *err)
{
    fsmoe_status st = check_stream(stream, err);
    if (st)
        return st;
    CUDA_CHECK(cudaStreamSynchronize(impl_of(b)->streams[stream]), err);
    return FSMOE_OK;
}

static void nccl_fini(comm_backend *b)
{
    nccl_impl *im = impl_of(b);
    if (!im)
        return;
    if (im->blas)
        cublasDestroy(im->blas);
    for (int e = 0; e < COMM_EVENTS; e++)
        if (im->events[e])
            cudaEventDestroy(im->events[e]);
    for (int s = 0; s < COMM_STREAMS; s++)
        if (im->streams[s])
            cudaStreamDestroy(im->streams[s]);
    free(im);
    b->impl = NULL;
}

extern "C" int comm_nccl_available(void)
{
    return 1;
}

static fsmoe_status nccl_setup(comm_backend *b, MPI_Comm world, fsmoe_error *err)
{
    nccl_impl *im = impl_of(b);
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess || count == 0)
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "--backend nccl: no usable CUDA device (%s)",
                          rc != cudaSuccess ? cudaGetErrorString(rc) : "0 devices");
    im->device = topology_local_rank(world) % count;
    CUDA_CHECK(cudaSetDevice(im->device), err);
    for (int s = 0; s < COMM_STREAMS; s++)
        CUDA_CHECK(cudaStreamCreateWithFlags(&im->streams[s], cudaStreamNonBlocking), err);
    for (int e = 0; e < COMM_EVENTS; e++)
        CUDA_CHECK(cudaEventCreateWithFlags(&im->events[e], cudaEventDisableTiming), err);
    CUBLAS_CHECK(cublasCreate(&im->blas), err);
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, im->device), err);
    snprintf(b->device, sizeof b->device, "%.63s", prop.name);
    b->device_memory_bytes = (double)prop.totalGlobalMem;
    return FSMOE_OK;
}

extern "C" fsmoe_status comm_nccl_init(comm_backend *b, MPI_Comm world, fsmoe_error *err)
{
    memset(b, 0, sizeof *b);
    b->name = "nccl";
    b->host_memory = 0;
    b->fini = nccl_fini;
    nccl_impl *im = (nccl_impl *)calloc(1, sizeof *im);
    if (!im)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for the nccl backend");
    b->impl = im;
    fsmoe_status st = nccl_setup(b, world, err);
    if (st) {
        nccl_fini(b);
        return st;
    }
    b->alloc = nccl_alloc;
    b->release = nccl_release;
    b->upload = nccl_upload;
    b->download = nccl_download;
    b->group_init = nccl_group_init;
    b->group_free = nccl_group_free;
    b->alltoall = nccl_alltoall;
    b->alltoall_2dh = nccl_alltoall_2dh;
    b->alltoallv = nccl_alltoallv;
    b->sendrecv = nccl_sendrecv;
    b->allgather = nccl_allgather;
    b->reducescatter = nccl_reducescatter;
    b->allreduce = nccl_allreduce;
    b->gemm = nccl_gemm;
    b->copy = nccl_copy;
    b->event_record = nccl_event_record;
    b->stream_wait = nccl_stream_wait;
    b->sync = nccl_sync;
    return FSMOE_OK;
}
