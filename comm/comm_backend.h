/* Implements: the communication layer's backend interface (design.md §10.1, style.md "Backends
 * are tables of function pointers"): memory, groups, collectives (AllToAll(v), AllGather,
 * ReduceScatter, AllReduce, send/recv, the hierarchical 2DH AllToAll), a GEMM and a copy to
 * overlap them with, streams and events. fsmoe-bench times these calls; they are the calls a
 * distributed run makes.
 *
 * Two implementations: `mpi` (comm_mpi.c: host memory, the polite watched MPI collectives of
 * mpi_coll.h, OpenBLAS; streams are worker threads because Open MPI has no progress thread,
 * toolchain.md) and `nccl` (comm_nccl.cu: device memory, NCCL bootstrapped over MPI, cuBLAS,
 * CUDA streams; built with the gpu feature only).
 *
 * Streams follow CUDA's model: operations submitted to one stream run in order; stream 0 is the
 * caller's (the mpi backend runs its work on the calling thread); events order work across
 * streams. Communication is issued from a stream thread (COMM_STREAM_COMM, the way the runtime
 * issues it). A failed operation on a stream is reported by the next sync of that stream
 * (sticky, like CUDA). Groups (comm_group) are made from an MPI communicator; all members call
 * group_init together. Buffers and count arrays passed to an operation belong to the caller and
 * must stay valid until the stream has been synchronised. */
#ifndef FSMOE_COMM_BACKEND_H
#define FSMOE_COMM_BACKEND_H

#include <mpi.h>
#include <stddef.h>

#include "comm_dtype.h"
#include "status.h"

#define COMM_STREAMS 3 /* 0 = caller, 1 and 2 for overlapped operations (SAA) */
#define COMM_STREAM_COMM 1 /* where a lone collective runs: a stream thread, as in a run */
#define COMM_EVENTS 64

typedef struct comm_group comm_group; /* a group, opaque to callers */

typedef struct comm_backend comm_backend;
struct comm_backend {
    const char *name; /* "mpi" | "nccl" */
    char device[64];  /* what a rank computes on, for the profile's device field */
    double device_memory_bytes; /* that device's memory (the host's: the machine's RAM, shared
                                 * by its ranks); 0 when unknown */
    int host_memory;  /* 1: alloc'd memory is host memory (upload/download are copies) */
    /* The 2DH AllToAll's stage (of groups made after it is set): a pool of at least this many
     * bytes per stream whose slots successive runs take in turn, so that no run finds the
     * stage in cache (fsmoe-bench sets its --rotate; buffers it passes rotate likewise). 0
     * (the default): one stage, reused. */
    size_t stage_pool_bytes;
    void *impl;

    fsmoe_status (*alloc)(comm_backend *b, size_t bytes, void **out, fsmoe_error *err);
    void (*release)(comm_backend *b, void *p);
    /* Host <-> backend memory (blocking). */
    fsmoe_status (*upload)(comm_backend *b, void *dst, const void *host, size_t bytes,
                           fsmoe_error *err);
    fsmoe_status (*download)(comm_backend *b, void *host, const void *src, size_t bytes,
                             fsmoe_error *err);

    /* A group of the members of `group` (collective over it). node: this rank's node
     * (comm_topology.node: equal on the ranks of one node, different across nodes), or -1
     * when unknown; the members' nodes are all-gathered so that the group knows its 2DH shape
     * (libfsmoe/a2a_2dh.h): hierarchical when it spans at least 2 nodes with the same number (at
     * least 2) of its members on each, at most FSMOE_A2A_2DH_MAX_MEMBERS members and every node
     * known. Only a hierarchical group runs alltoall_2dh. */
    fsmoe_status (*group_init)(comm_backend *b, MPI_Comm group, int node, comm_group **out,
                               fsmoe_error *err);
    void (*group_free)(comm_backend *b, comm_group **c);

    /* Collectives with nccl's counts: alltoall sends count_per_peer elements to each member;
     * allgather contributes send_count; reducescatter keeps recv_count; allreduce count. */
    fsmoe_status (*alltoall)(comm_backend *b, comm_group *c, const void *send, void *recv,
                             size_t count_per_peer, comm_dtype t, int stream, fsmoe_error *err);
    /* The same exchange as alltoall (same buffers, same result) run as the hierarchical 2DH
     * AllToAll (libfsmoe/a2a_2dh.h): a re-layout, an AllToAll among the members of each node, a
     * re-layout, an AllToAll among the members with the same local index (one per node), a
     * re-layout. Staging memory (3 x the send buffer) is the group's, allocated on first use
     * of a larger size and kept. FSMOE_ERR_USAGE, with a message, on a group that is not
     * hierarchical (group_init). */
    fsmoe_status (*alltoall_2dh)(comm_backend *b, comm_group *c, const void *send, void *recv,
                                 size_t count_per_peer, comm_dtype t, int stream,
                                 fsmoe_error *err);
    fsmoe_status (*allgather)(comm_backend *b, comm_group *c, const void *send, void *recv,
                              size_t send_count, comm_dtype t, int stream, fsmoe_error *err);
    fsmoe_status (*reducescatter)(comm_backend *b, comm_group *c, const void *send, void *recv,
                                  size_t recv_count, comm_dtype t, comm_redop op, int stream,
                                  fsmoe_error *err);
    fsmoe_status (*allreduce)(comm_backend *b, comm_group *c, const void *send, void *recv,
                              size_t count, comm_dtype t, comm_redop op, int stream,
                              fsmoe_error *err);
    /* AllToAllv: to member p send_counts[p] elements from send + send_displs[p], from member
     * p recv_counts[p] elements into recv + recv_displs[p] (elements of t; either may be 0).
     * The four arrays hold one entry per member. */
    fsmoe_status (*alltoallv)(comm_backend *b, comm_group *c, const void *send,
                              const size_t *send_counts, const size_t *send_displs, void *recv,
                              const size_t *recv_counts, const size_t *recv_displs, comm_dtype t,
                              int stream, fsmoe_error *err);
    /* One exchange inside the group (a phase of Parm's SAA): count elements to member dst
     * and count from member src, both ranks in c's group (either may be this rank). */
    fsmoe_status (*sendrecv)(comm_backend *b, comm_group *c, const void *send, int dst,
                             void *recv, int src, size_t count, comm_dtype t, int stream,
                             fsmoe_error *err);

    /* C (m×n) = A (m×k) · B (k×n), row-major fp32. */
    fsmoe_status (*gemm)(comm_backend *b, int m, int n, int k, const float *A, const float *B,
                         float *C, int stream, fsmoe_error *err);
    fsmoe_status (*copy)(comm_backend *b, void *dst, const void *src, size_t bytes, int stream,
                         fsmoe_error *err);

    fsmoe_status (*event_record)(comm_backend *b, int stream, int event, fsmoe_error *err);
    fsmoe_status (*stream_wait)(comm_backend *b, int stream, int event, fsmoe_error *err);
    fsmoe_status (*sync)(comm_backend *b, int stream, fsmoe_error *err);

    void (*fini)(comm_backend *b); /* frees impl; safe on a half-built backend */
};

/* The MPI + host backend (always built). blas_threads: OpenBLAS threads per rank (0 = leave);
 * huge_pages: buffers of 2 MiB and more asked for transparent huge pages. */
fsmoe_status comm_mpi_init(comm_backend *b, int blas_threads, int huge_pages,
                           fsmoe_error *err);

/* The NCCL + cuBLAS backend; FSMOE_ERR_USAGE with a message when this build has none or no
 * device can be used (the caller then exits 77 in tests). */
fsmoe_status comm_nccl_init(comm_backend *b, MPI_Comm world, fsmoe_error *err);
int comm_nccl_available(void); /* built with the gpu feature */

#endif
