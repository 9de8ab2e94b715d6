/* Implements: the gpu-suite test of the NCCL + cuBLAS backend (microbench/comm_nccl.cu) on one
 * rank: upload/download, an AllReduce and an AllToAll over a one-rank group (where the 2DH
 * AllToAll must refuse: one node), a GEMM against
 * the host's exact check and a device copy. Exits 77 (skipped) when this build has no NCCL
 * backend or no CUDA device can be used, and says which. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_backend.h"
#include "op_collective.h"
#include "op_gemm.h"

#define CHECK(x)                                                                    \
    do {                                                                            \
        fsmoe_status st_ = (x);                                                     \
        if (st_) {                                                                  \
            fprintf(stderr, "test_bench_gpu: %s: %s\n", #x, err.msg);               \
            rc = 1;                                                                 \
            goto done;                                                              \
        }                                                                           \
    } while (0)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rc = 0;
    fsmoe_error err = {0};
    comm_backend b;
    memset(&b, 0, sizeof b);
    comm_group *comm = NULL;
    void *d1 = NULL, *d2 = NULL, *d3 = NULL;
    float *h1 = NULL, *h2 = NULL, *h3 = NULL;
    if (!comm_nccl_available()) {
        printf("SKIP: this build has no NCCL backend (gpu feature off or nvcc/NCCL missing)\n");
        MPI_Finalize();
        return 77;
    }
    if (comm_nccl_init(&b, MPI_COMM_WORLD, &err)) {
        printf("SKIP: %s\n", err.msg);
        MPI_Finalize();
        return 77;
    }
    printf("device: %s\n", b.device);
    const int m = 256, n = 192, k = 320;
    size_t big = (size_t)m * k > (size_t)k * n ? (size_t)m * k : (size_t)k * n;
    h1 = malloc(big * 4);
    h2 = malloc(big * 4);
    h3 = malloc(big * 4);
    CHECK(b.alloc(&b, big * 4, &d1, &err));
    CHECK(b.alloc(&b, big * 4, &d2, &err));
    CHECK(b.alloc(&b, big * 4, &d3, &err));
    CHECK(b.group_init(&b, MPI_COMM_WORLD, 0, &comm, &err));

    /* Collectives on the world group (1 rank: the output is the input). */
    const coll_op *ops[] = {&op_alltoall, &op_allreduce, &op_allgather, &op_reducescatter};
    for (int o = 0; o < 4; o++) {
        coll_shape s;
        int P = 1;
        MPI_Comm_size(MPI_COMM_WORLD, &P);
        ops[o]->shape(big * 4, 4, P, &s);
        ops[o]->fill(COMM_FLOAT, 0, P, &s, h1);
        CHECK(b.upload(&b, d1, h1, s.send_elems * 4, &err));
        CHECK(ops[o]->run(&b, comm, d1, d2, &s, COMM_FLOAT, COMM_SUM, 1, &err));
        CHECK(b.sync(&b, 1, &err));
        CHECK(b.download(&b, h2, d2, s.recv_elems * 4, &err));
        size_t wrong = ops[o]->check(COMM_FLOAT, COMM_SUM, 0, P, &s, h2);
        printf("%s: %zu wrong\n", ops[o]->name, wrong);
        rc |= wrong != 0;
    }
    /* The 2DH AllToAll refuses a group on one node, saying why. */
    {
        fsmoe_error e2 = {0};
        fsmoe_status st2 = b.alltoall_2dh(&b, comm, d1, d2, 16, COMM_FLOAT, 1, &e2);
        int ok = st2 == FSMOE_ERR_USAGE && strstr(e2.msg, "not hierarchical");
        printf("alltoall_2dh on one node: %s (%s)\n", ok ? "refused" : "WRONG", e2.msg);
        rc |= !ok;
    }
    /* GEMM, checked exactly on the host. */
    gemm_fill(h1, (size_t)m * k, h2, (size_t)k * n, 2);
    CHECK(b.upload(&b, d1, h1, (size_t)m * k * 4, &err));
    CHECK(b.upload(&b, d2, h2, (size_t)k * n * 4, &err));
    CHECK(b.gemm(&b, m, n, k, d1, d2, d3, 0, &err));
    CHECK(b.sync(&b, 0, &err));
    CHECK(b.download(&b, h3, d3, (size_t)m * n * 4, &err));
    size_t gw = gemm_check(h1, h2, h3, m, n, k);
    printf("gemm: %zu wrong\n", gw);
    rc |= gw != 0;
    /* Copy on stream 2 after an event from stream 1. */
    CHECK(b.copy(&b, d3, d1, big * 4, 1, &err));
    CHECK(b.event_record(&b, 1, 0, &err));
    CHECK(b.stream_wait(&b, 2, 0, &err));
    CHECK(b.copy(&b, d2, d3, big * 4, 2, &err));
    CHECK(b.sync(&b, 2, &err));
    CHECK(b.download(&b, h2, d2, (size_t)m * k * 4, &err));
    rc |= memcmp(h1, h2, (size_t)m * k * 4) != 0;
    printf("copy: %s\n", memcmp(h1, h2, (size_t)m * k * 4) ? "WRONG" : "ok");
done:
    if (comm)
        b.group_free(&b, &comm);
    if (d1)
        b.release(&b, d1);
    if (d2)
        b.release(&b, d2);
    if (d3)
        b.release(&b, d3);
    if (b.fini)
        b.fini(&b);
    free(h1);
    free(h2);
    free(h3);
    MPI_Finalize();
    return rc;
}
