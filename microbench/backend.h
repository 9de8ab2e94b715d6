/* Implements: the interface every fsmoe-bench backend fills (style.md "Backends are tables of
 * function pointers"): memory, collectives on a group, GEMM, copy, streams and events.
 *
 * Two implementations: `mpi` (comm_mpi.c: host memory, MPI collectives, OpenBLAS; streams are
 * worker threads because Open MPI has no progress thread, toolchain.md) and `nccl`
 * (comm_nccl.cu: device memory, NCCL bootstrapped over MPI, cuBLAS, CUDA streams).
 *
 * Streams follow CUDA's model: operations submitted to one stream run in order; stream 0 is the
 * caller's (blocking in the mpi backend); events order work across streams. A failed operation
 * on a stream is reported by the next bench_sync of that stream (sticky, like CUDA). Groups
 * (bench_comm) are made from an MPI communicator; all members call comm_init together. */
#ifndef BENCH_BACKEND_H
#define BENCH_BACKEND_H

#include <mpi.h>
#include <stddef.h>

#include "dtype.h"
#include "status.h"

#define BENCH_STREAMS 3 /* 0 = caller, 1 and 2 for overlapped operations (SAA) */
#define BENCH_EVENTS 64

typedef struct bench_comm bench_comm; /* a group, opaque to callers */

typedef struct bench_backend bench_backend;
struct bench_backend {
    const char *name; /* "mpi" | "nccl" */
    char device[64];  /* what a rank computes on, for the profile's device field */
    int host_memory;  /* 1: alloc'd memory is host memory (upload/download are copies) */
    void *impl;

    fsmoe_status (*alloc)(bench_backend *b, size_t bytes, void **out, fsmoe_error *err);
    void (*release)(bench_backend *b, void *p);
    /* Host <-> backend memory (blocking). */
    fsmoe_status (*upload)(bench_backend *b, void *dst, const void *host, size_t bytes,
                           fsmoe_error *err);
    fsmoe_status (*download)(bench_backend *b, void *host, const void *src, size_t bytes,
                             fsmoe_error *err);

    fsmoe_status (*comm_init)(bench_backend *b, MPI_Comm group, bench_comm **out,
                              fsmoe_error *err);
    void (*comm_free)(bench_backend *b, bench_comm **c);

    /* Collectives with nccl's counts: alltoall sends count_per_peer elements to each member;
     * allgather contributes send_count; reducescatter keeps recv_count; allreduce count. */
    fsmoe_status (*alltoall)(bench_backend *b, bench_comm *c, const void *send, void *recv,
                             size_t count_per_peer, bench_dtype t, int stream, fsmoe_error *err);
    fsmoe_status (*allgather)(bench_backend *b, bench_comm *c, const void *send, void *recv,
                              size_t send_count, bench_dtype t, int stream, fsmoe_error *err);
    fsmoe_status (*reducescatter)(bench_backend *b, bench_comm *c, const void *send, void *recv,
                                  size_t recv_count, bench_dtype t, bench_redop op, int stream,
                                  fsmoe_error *err);
    fsmoe_status (*allreduce)(bench_backend *b, bench_comm *c, const void *send, void *recv,
                              size_t count, bench_dtype t, bench_redop op, int stream,
                              fsmoe_error *err);
    /* One exchange inside the group (a phase of Parm's SAA): count elements to member dst
     * and count from member src, both ranks in c's group (either may be this rank). */
    fsmoe_status (*sendrecv)(bench_backend *b, bench_comm *c, const void *send, int dst,
                             void *recv, int src, size_t count, bench_dtype t, int stream,
                             fsmoe_error *err);

    /* C (m×n) = A (m×k) · B (k×n), row-major fp32. */
    fsmoe_status (*gemm)(bench_backend *b, int m, int n, int k, const float *A, const float *B,
                         float *C, int stream, fsmoe_error *err);
    fsmoe_status (*copy)(bench_backend *b, void *dst, const void *src, size_t bytes, int stream,
                         fsmoe_error *err);

    fsmoe_status (*event_record)(bench_backend *b, int stream, int event, fsmoe_error *err);
    fsmoe_status (*stream_wait)(bench_backend *b, int stream, int event, fsmoe_error *err);
    fsmoe_status (*sync)(bench_backend *b, int stream, fsmoe_error *err);

    void (*fini)(bench_backend *b); /* frees impl; safe on a half-built backend */
};

/* The MPI + host backend (always built). threads: OpenBLAS threads per rank (0 = leave). */
fsmoe_status comm_mpi_init(bench_backend *b, int blas_threads, int huge_pages,
                           fsmoe_error *err);

/* The NCCL + cuBLAS backend; FSMOE_ERR_USAGE with a message when this build has none or no
 * device can be used (the caller then exits 77 in tests). */
fsmoe_status comm_nccl_init(bench_backend *b, MPI_Comm world, fsmoe_error *err);
int comm_nccl_available(void); /* built with the gpu feature */

#endif
