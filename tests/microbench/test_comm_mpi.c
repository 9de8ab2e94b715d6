/* Implements: the `mpi` suite test of the communication layer's mpi backend (comm/comm_mpi.c,
 * comm/mpi_coll.c), run under mpirun with 3 or more ranks:
 *  - AllToAllv with exactly predictable data (comm_pattern_fill) and uneven counts, among them
 *    a member that sends nothing (rank 0) and one that receives nothing (the last rank), on
 *    the caller's stream and on a stream thread, in two element types; every rank counts the
 *    wrong elements (nccl-tests' #wrong) and the test fails when any rank saw one;
 *  - the watchdog: a wait for a receive that is never sent ends, with a short
 *    fsmoe_comm_set_timeout, in FSMOE_ERR_TIMEOUT and a message naming the rank and the
 *    operation.
 * Exit 0 when every rank passed, 1 otherwise (rank 0 reports). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_backend.h"
#include "mpi_coll.h"

/* Elements member r sends to member p: none from rank 0, none to the last rank, else uneven. */
static size_t a2av_count(int r, int p, int P)
{
    return r == 0 || p == P - 1 ? 0 : (size_t)(r + 2 * p + 1);
}

/* Where block (r -> p) starts inside the sender's buffer and the receiver's: well apart, so a
 * block at the wrong place reads the wrong part of the pattern. */
#define BLOCK_FIRST(p) ((size_t)(p) * 1000)

static int test_alltoallv(comm_backend *b, comm_group *g, int me, int P, comm_dtype t,
                          int stream)
{
    size_t *sc = calloc((size_t)P, sizeof *sc), *sd = calloc((size_t)P, sizeof *sd);
    size_t *rc = calloc((size_t)P, sizeof *rc), *rd = calloc((size_t)P, sizeof *rd);
    size_t ns = 0, nr = 0, es = comm_dtype_size(t);
    for (int p = 0; p < P; p++) {
        sc[p] = a2av_count(me, p, P);
        sd[p] = ns;
        ns += sc[p];
        rc[p] = a2av_count(p, me, P);
        rd[p] = nr;
        nr += rc[p];
    }
    /* One spare element past the end on both sides: a count too large shows as a write there. */
    char *send = calloc(ns + 1, es), *recv = calloc(nr + 1, es);
    for (int p = 0; p < P; p++) /* block for p: v(me, BLOCK_FIRST(p) + j) */
        comm_pattern_fill(t, send + sd[p] * es, me, BLOCK_FIRST(p), sc[p]);
    comm_pattern_fill(t, recv + nr * es, 7, 0, 1); /* a sentinel the exchange must not touch */
    fsmoe_error err = {0};
    fsmoe_status st = b->alltoallv(b, g, send, sc, sd, recv, rc, rd, t, stream, &err);
    fsmoe_status st2 = b->sync(b, stream, st ? NULL : &err);
    size_t wrong = 0;
    if (st || st2) {
        fprintf(stderr, "rank %d: alltoallv (%s, stream %d): %s\n", me, comm_dtype_name(t),
                stream, err.msg);
        wrong = 1;
    } else {
        for (int q = 0; q < P; q++) /* from q: v(q, BLOCK_FIRST(me) + j) */
            wrong += comm_pattern_wrong(t, recv + rd[q] * es, q, BLOCK_FIRST(me), rc[q]);
        wrong += comm_pattern_wrong(t, recv + nr * es, 7, 0, 1);
        if (wrong)
            fprintf(stderr, "rank %d: alltoallv (%s, stream %d): %zu wrong of %zu elements\n",
                    me, comm_dtype_name(t), stream, wrong, nr);
    }
    free(send);
    free(recv);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    return wrong != 0;
}

/* Rank 0 waits for a message rank 1 never sends; the watchdog must end the wait. */
static int test_watchdog(int me)
{
    if (me != 0)
        return 0;
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_SELF, &comm);
    double saved = fsmoe_comm_timeout();
    fsmoe_comm_set_timeout(0.2);
    int x = 0, failed = 0;
    MPI_Request r;
    MPI_Irecv(&x, 1, MPI_INT, 0, 99, comm, &r); /* from itself: never sent */
    fsmoe_error err = {0};
    double t0 = MPI_Wtime();
    fsmoe_status st = fsmoe_mpi_wait(&r, 1, comm, "the test's lonely receive", &err);
    double took = MPI_Wtime() - t0;
    if (st != FSMOE_ERR_TIMEOUT) {
        fprintf(stderr, "watchdog: status %d (%s), wanted FSMOE_ERR_TIMEOUT\n", (int)st,
                fsmoe_strerror(st));
        failed = 1;
    } else if (!strstr(err.msg, "rank 0") || !strstr(err.msg, "the test's lonely receive")) {
        fprintf(stderr, "watchdog: the message names neither the rank nor the operation: %s\n",
                err.msg);
        failed = 1;
    } else if (took < 0.2 || took > 5.0) {
        fprintf(stderr, "watchdog: gave up after %.3f s with a 0.2 s limit\n", took);
        failed = 1;
    } else {
        printf("watchdog after %.3f s: %s\n", took, err.msg);
    }
    MPI_Cancel(&r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Comm_free(&comm);
    fsmoe_comm_set_timeout(saved);
    return failed;
}

int main(int argc, char **argv)
{
    int provided = 0, me = 0, P = 1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    int failed = 0;
    if (provided < MPI_THREAD_MULTIPLE || P < 3) {
        if (me == 0)
            fprintf(stderr, "test_comm_mpi: needs MPI_THREAD_MULTIPLE and 3 or more ranks\n");
        MPI_Finalize();
        return 1;
    }
    comm_backend b;
    comm_group *g = NULL;
    fsmoe_error err = {0};
    if (comm_mpi_init(&b, 1, 0, &err) || b.group_init(&b, MPI_COMM_WORLD, &g, &err)) {
        fprintf(stderr, "rank %d: %s\n", me, err.msg);
        failed = 1;
    } else {
        const comm_dtype types[] = {COMM_INT32, COMM_DOUBLE};
        for (int i = 0; i < 2; i++)
            for (int stream = 0; stream < 2; stream++)
                failed |= test_alltoallv(&b, g, me, P, types[i], stream);
        failed |= test_watchdog(me);
        b.group_free(&b, &g);
    }
    if (b.fini)
        b.fini(&b);
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (me == 0)
        printf("test_comm_mpi: %d ranks: %s\n", P, any ? "FAILED" : "OK");
    MPI_Finalize();
    return any ? 1 : 0;
}
