/* Implements: the `mpi` suite test of the host backend's AllGather and ReduceScatter
 * (backend_host.c), run under mpirun with 2 or more ranks, on a group of every rank:
 *  - allgather: member p sends p·1000 + i, every member receives every block in member order;
 *  - reducescatter_sum: member p's block q is p·1000 + q·100 + i, member q receives
 *    1000·P(P−1)/2 + P·(q·100 + i) (integers, exact in fp32);
 *    both on the caller's thread and on a stream thread (another communicator slot), with a
 *    sentinel past the end of every output that must stay untouched (nccl-tests' #wrong);
 *  - a count whose P·n passes MPI's int fails with a message, without touching memory, and the
 *    collectives issued after a failure are skipped (backend.h);
 *  - with an even number (≥ 4) of ranks: the hierarchical AllToAll (alltoallv_rows_2dh) with the
 *    ranks on two alternating "nodes" (0, 1, 0, 1, …: not node-major), uneven counts with
 *    zeros (member 0 sends nothing), against the flat alltoallv_rows of the same rows and the exact rows expected (row
 *    i from s holds s·10000 + d·100 + i, every element of it).
 * Exit 0 when every rank passed, 1 otherwise (rank 0 reports). */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "dist.h"

enum { N_ELEMS = 1000 };

/* Rows from s to d in the 2DH check: uneven, some zero, member 0 sends nothing. */
static int rows_2dh(int s, int d) { return s == 0 ? 0 : (s * 3 + d * 5 + 1) % 4 * 50; }

/* The 2DH AllToAll against the flat one and the exact rows (see the header), on stream q. */
static long check_2dh(rt_backend *be, rt_stream *q, const rt_group *g)
{
    const int P = g->size, me = g->rank;
    const long M = 16;
    int *counts = malloc(sizeof(int) * (size_t)(P * P));
    int *snd = malloc(sizeof(int) * (size_t)P), *rcv = malloc(sizeof(int) * (size_t)P);
    long ns = 0, nr = 0, wrong = 0;
    for (int s = 0; s < P; s++)
        for (int d = 0; d < P; d++)
            counts[s * P + d] = rows_2dh(s, d);
    for (int p = 0; p < P; p++) {
        snd[p] = rows_2dh(me, p), rcv[p] = rows_2dh(p, me);
        ns += snd[p], nr += rcv[p];
    }
    real *send = malloc(sizeof(real) * (size_t)(ns * M + 1));
    real *flat = malloc(sizeof(real) * (size_t)(nr * M + 1));
    real *hier = malloc(sizeof(real) * (size_t)(nr * M + 1));
    long at = 0;
    for (int d = 0; d < P; d++)
        for (int i = 0; i < snd[d]; i++, at++)
            for (long c = 0; c < M; c++)
                send[at * M + c] = (real)(me * 10000 + d * 100 + i);
    for (long i = 0; i <= nr * M; i++)
        flat[i] = hier[i] = -7;
    be->alltoallv_rows(be, q, g, flat, send, snd, rcv, M, "alltoallv_rows (test)");
    be->alltoallv_rows_2dh(be, q, g, hier, send, counts, M, "alltoallv_rows_2dh (test)");
    be->stream_sync(be, q);
    at = 0;
    for (int s = 0; s < P; s++)
        for (int i = 0; i < rcv[s]; i++, at++)
            for (long c = 0; c < M; c++) {
                real want = (real)(s * 10000 + me * 100 + i);
                wrong += hier[at * M + c] != want;
                wrong += flat[at * M + c] != want;
            }
    wrong += hier[nr * M] != -7;
    free(send), free(flat), free(hier), free(counts), free(snd), free(rcv);
    return wrong;
}

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
    rt_comm_group cg = {.name = "world", .size = P, .rank = me};
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
        rt_stream *st = be->stream_create(be, 0);
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
        if (P % 2 == 0 && P >= 4) { /* two alternating "nodes" of P / 2 ranks */
            int node_of[FSMOE_A2A_2DH_MAX_MEMBERS];
            for (int x = 0; x < P; x++)
                node_of[x] = x % 2;
            fsmoe_a2a_2dh_shape sh;
            long w3 = !fsmoe_a2a_2dh_shape_make(node_of, P, &sh);
            cg.h2 = &sh;
            for (int k = 0; k < RT_STREAM_SLOTS && !w3; k++) { /* as dist.c makes them */
                int x = 0;
                while (sh.member[x] != me)
                    x++;
                MPI_Comm_split(cg.comm[k], x / sh.locals, x % sh.locals, &cg.h_intra[k]);
                MPI_Comm_split(cg.comm[k], x % sh.locals, x / sh.locals, &cg.h_inter[k]);
            }
            if (!w3) {
                w3 += check_2dh(be, NULL, &g);
                if (st)
                    w3 += check_2dh(be, st, &g);
            }
            if (rt_backend_check(be, &err) != FSMOE_OK) {
                fprintf(stderr, "rank %d: %s\n", me, err.msg);
                w3++;
            }
            if (w3)
                fprintf(stderr, "rank %d: alltoallv_rows_2dh: #wrong %ld\n", me, w3);
            wrong += w3;
            for (int k = 0; k < RT_STREAM_SLOTS && !w3; k++) {
                MPI_Comm_free(&cg.h_intra[k]);
                MPI_Comm_free(&cg.h_inter[k]);
                free(cg.h_stage[k]);
            }
            cg.h2 = NULL;
        }
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
