/* Implements: the `mpi` suite test of the host backend's AllGather and ReduceScatter
 * (backend_host.c), run under mpirun with 2 or more ranks, on a group of every rank:
 *  - allgather: member p sends p·1000 + i, every member receives every block in member order;
 *  - reducescatter_sum: member p's block q is p·1000 + q·100 + i, member q receives
 *    1000·P(P−1)/2 + P·(q·100 + i) (integers, exact in fp32);
 *    both on the caller's thread and on a stream thread (another communicator slot), with a
 *    sentinel past the end of every output that must stay untouched (nccl-tests' #wrong);
 *  - a count whose P·n passes MPI's int fails with a message, without touching memory, and the
 *    collectives issued after a failure are skipped (backend.h).
 * Exit 0 when every rank passed, 1 otherwise (rank 0 reports). */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "dist.h"

enum { N_ELEMS = 1000 };

static long check_gathers(rt_backend *be, rt_stream *q, const rt_group *g)
{
    const int P = g->size, me = g->rank;
    const long n = N_ELEMS;
    real *send = malloc(sizeof(real) * (size_t)(P * n));
    real *recv = malloc(sizeof(real) * (size_t)(P * n + 1));
    long wrong = 0;

    for (long i = 0; i < n; i++)
        send[i] = (real)(me * 1000 + i);
    for (long i = 0; i <= P * n; i++)
        recv[i] = -7;
    be->allgather(be, q, g, recv, send, n, "allgather (test)");
    be->stream_sync(be, q);
    for (int p = 0; p < P; p++)
        for (long i = 0; i < n; i++)
            wrong += recv[p * n + i] != (real)(p * 1000 + i);
    wrong += recv[P * n] != -7;

    for (int p = 0; p < P; p++)
        for (long i = 0; i < n; i++)
            send[p * n + i] = (real)(me * 1000 + p * 100 + i);
    for (long i = 0; i <= n; i++)
        recv[i] = -7;
    be->reducescatter_sum(be, q, g, recv, send, n, "reducescatter (test)");
    be->stream_sync(be, q);
    for (long i = 0; i < n; i++)
        wrong += recv[i] != (real)(1000L * P * (P - 1) / 2 + (long)P * (me * 100 + i));
    wrong += recv[n] != -7;
    free(send);
    free(recv);
    return wrong;
}

/* A total count no int holds fails before any memory is read; the next collective is
 * skipped. */
static long check_refusal(rt_backend *be, const rt_group *g)
{
    long wrong = 0;
    real dummy = 0, dst[2] = {-7, -7}, src[2] = {1, 2};
    fsmoe_error err = {0};
    be->allgather(be, NULL, g, &dummy, &dummy, (long)INT_MAX / g->size + 1,
                  "allgather (too large)");
    wrong += rt_backend_check(be, &err) != FSMOE_ERR_VALUE;
    wrong += strstr(err.msg, "allgather (too large)") == NULL;
    be->reducescatter_sum(be, NULL, g, dst, src, 1, "reducescatter (after a failure)");
    wrong += dst[0] != -7 || dst[1] != -7;
    return wrong;
}

int main(int argc, char **argv)
{
    int provided = 0, me = 0, P = 1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    if (provided < MPI_THREAD_MULTIPLE || P < 2) {
        if (me == 0)
            fprintf(stderr, "test_runtime_collectives: needs MPI_THREAD_MULTIPLE and 2 or more "
                            "ranks\n");
        MPI_Finalize();
        return 1;
    }
    /* the world as one group, one communicator per stream slot (what dist_init makes) */
    rt_comm_group cg = {"world", P, me, {0}};
    for (int k = 0; k < RT_STREAM_SLOTS; k++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &cg.comm[k]);
        MPI_Comm_set_errhandler(cg.comm[k], MPI_ERRORS_RETURN);
    }
    rt_group g = {P, me, &cg};
    rt_backend *be = NULL;
    fsmoe_error err = {0};
    long wrong = 0;
    if (rt_backend_create("host", 1, &be, &err) != FSMOE_OK) {
        fprintf(stderr, "rank %d: %s\n", me, err.msg);
        wrong = 1;
    } else {
        rt_stream *st = be->stream_create(be);
        wrong += st == NULL;
        wrong += check_gathers(be, NULL, &g);
        if (st)
            wrong += check_gathers(be, st, &g);
        if (rt_backend_check(be, &err) != FSMOE_OK) {
            fprintf(stderr, "rank %d: %s\n", me, err.msg);
            wrong++;
        }
        if (wrong)
            fprintf(stderr, "rank %d: allgather/reducescatter_sum: #wrong %ld\n", me, wrong);
        long w2 = check_refusal(be, &g);
        if (w2)
            fprintf(stderr, "rank %d: refusal of a count past MPI's int: #wrong %ld\n", me, w2);
        wrong += w2;
        be->stream_destroy(be, st);
        rt_backend_destroy(&be);
    }
    for (int k = 0; k < RT_STREAM_SLOTS; k++)
        MPI_Comm_free(&cg.comm[k]);
    long any = 0;
    MPI_Allreduce(&wrong, &any, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (me == 0)
        printf("test_runtime_collectives: %d ranks: %s\n", P, any ? "FAILED" : "OK");
    MPI_Finalize();
    return any ? 1 : 0;
}
