/* Implements: the `mpi` suite test of the communication layer's mpi backend (comm/comm_mpi.c,
 * comm/mpi_coll.c), run under mpirun with 3 or more ranks (4 for the 2DH tests):
 *  - AllToAllv with exactly predictable data (comm_pattern_fill) and uneven counts, among them
 *    a member that sends nothing (rank 0) and one that receives nothing (the last rank), on
 *    the caller's stream and on a stream thread, in two element types; every rank counts the
 *    wrong elements (nccl-tests' #wrong) and the test fails when any rank saw one;
 *  - the watchdog: a wait for a receive that is never sent ends, with a short
 *    fsmoe_comm_set_timeout, in FSMOE_ERR_TIMEOUT and a message naming the rank and the
 *    operation;
 *  - the 2DH AllToAll (libfsmoe/a2a_2dh.h), with an even number ≥ 4 of ranks treated as nodes of 2
 *    (node-major, rank / 2, and interleaved, rank % 2): the backend's uniform alltoall_2dh with
 *    exactly predictable data per (source, destination), on both streams, in two types and
 *    three sizes (the stage grows, then is reused); fsmoe_mpi_alltoallv_2dh with an uneven
 *    row-count matrix (zero rows, a member that sends nothing, one that receives nothing)
 *    against the flat fsmoe_mpi_alltoallv of the same data, element by element; and the op on
 *    a group that is not hierarchical fails with FSMOE_ERR_USAGE saying why.
 * Exit 0 when every rank passed, 1 otherwise (rank 0 reports). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "a2a_2dh.h"
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

/* The backend's uniform 2DH AllToAll: block p of rank me's input is v(me, BLOCK_FIRST(p) + j)
 * (count elements), so block q of its output must be v(q, BLOCK_FIRST(me) + j). */
static int test_alltoall_2dh(comm_backend *b, comm_group *g, int me, int P, comm_dtype t,
                             int stream, size_t count, const char *layout)
{
    size_t es = comm_dtype_size(t), n = count * (size_t)P;
    char *send = calloc(n + 1, es), *recv = calloc(n + 1, es);
    for (int p = 0; p < P; p++)
        comm_pattern_fill(t, send + (size_t)p * count * es, me, BLOCK_FIRST(p), count);
    comm_pattern_fill(t, recv + n * es, 7, 0, 1); /* a sentinel the exchange must not touch */
    fsmoe_error err = {0};
    fsmoe_status st = b->alltoall_2dh(b, g, send, recv, count, t, stream, &err);
    fsmoe_status st2 = b->sync(b, stream, st ? NULL : &err);
    size_t wrong = 0;
    if (st || st2) {
        fprintf(stderr, "rank %d: alltoall_2dh (%s, %s, stream %d, %zu per peer): %s\n", me,
                layout, comm_dtype_name(t), stream, count, err.msg);
        wrong = 1;
    } else {
        for (int q = 0; q < P; q++)
            wrong += comm_pattern_wrong(t, recv + (size_t)q * count * es, q, BLOCK_FIRST(me),
                                        count);
        wrong += comm_pattern_wrong(t, recv + n * es, 7, 0, 1);
        if (wrong)
            fprintf(stderr, "rank %d: alltoall_2dh (%s, %s, stream %d): %zu wrong of %zu\n",
                    me, layout, comm_dtype_name(t), stream, wrong, n);
    }
    free(send);
    free(recv);
    return wrong != 0;
}

/* Rows member s sends to member d in the uneven exchange: none from rank 1, none to the last
 * rank, some zero pairs elsewhere. */
static int uneven_rows(int s, int d, int P)
{
    return s == 1 || d == P - 1 ? 0 : (3 * s + 5 * d + 1) % 4;
}

/* fsmoe_mpi_alltoallv_2dh with an uneven count matrix against the flat fsmoe_mpi_alltoallv of
 * the same data: every element of the 2DH output must equal the flat one's, and the flat one
 * must hold the pattern (rows of R int32 elements; node_of[p] = p / 2 or p % 2). */
static int test_alltoallv_2dh_direct(int me, int P, int interleaved)
{
    const int R = 3;
    const char *layout = interleaved ? "interleaved" : "node-major";
    int *node_of = malloc((size_t)P * sizeof *node_of);
    int *counts = malloc((size_t)P * P * sizeof *counts);
    int *v = malloc(4 * (size_t)P * sizeof *v); /* flat: send counts, displs, recv counts, displs */
    for (int p = 0; p < P; p++)
        node_of[p] = interleaved ? p % 2 : p / 2;
    for (int s = 0; s < P; s++)
        for (int d = 0; d < P; d++)
            counts[s * P + d] = uneven_rows(s, d, P);
    int ns = 0, nr = 0;
    for (int p = 0; p < P; p++) {
        v[p] = counts[me * P + p] * R;
        v[P + p] = ns;
        ns += v[p];
        v[2 * P + p] = counts[p * P + me] * R;
        v[3 * P + p] = nr;
        nr += v[2 * P + p];
    }
    comm_dtype t = COMM_INT32;
    size_t es = 4;
    char *send = calloc((size_t)ns + 1, es), *flat = calloc((size_t)nr + 1, es),
         *hier = calloc((size_t)nr + 1, es);
    for (int p = 0; p < P; p++)
        comm_pattern_fill(t, send + (size_t)v[P + p] * es, me, BLOCK_FIRST(p), (size_t)v[p]);
    comm_pattern_fill(t, hier + (size_t)nr * es, 7, 0, 1);
    fsmoe_a2a_2dh_shape shape;
    fsmoe_a2a_2dh_plan plan;
    memset(&plan, 0, sizeof plan);
    MPI_Comm intra = MPI_COMM_NULL, inter = MPI_COMM_NULL;
    char *stage = NULL;
    size_t wrong = 0;
    fsmoe_error err = {0};
    fsmoe_status st = FSMOE_OK;
    if (!fsmoe_a2a_2dh_shape_make(node_of, P, &shape) || fsmoe_a2a_2dh_plan_make(&shape, me, counts, &plan)) {
        fprintf(stderr, "rank %d: 2DH direct (%s): no shape or plan\n", me, layout);
        wrong = 1;
        goto done;
    }
    stage = calloc((size_t)(plan.rows_a + 2 * plan.rows_b) * (size_t)R + 1, es);
    MPI_Comm_split(MPI_COMM_WORLD, plan.node, plan.local, &intra);
    MPI_Comm_split(MPI_COMM_WORLD, plan.local, plan.node, &inter);
    if ((st = fsmoe_mpi_alltoallv_2dh(intra, inter, &plan, send, hier, stage, R, MPI_INT32_T,
                                      "2DH direct", &err)) ||
        (st = fsmoe_mpi_alltoallv(MPI_COMM_WORLD, send, v, v + P, flat, v + 2 * P, v + 3 * P,
                                  MPI_INT32_T, "flat", &err))) {
        fprintf(stderr, "rank %d: 2DH direct (%s): %s\n", me, layout, err.msg);
        wrong = 1;
        goto done;
    }
    for (int i = 0; i < nr; i++)
        wrong += memcmp(hier + (size_t)i * es, flat + (size_t)i * es, es) != 0;
    size_t flat_wrong = 0;
    for (int q = 0; q < P; q++)
        flat_wrong += comm_pattern_wrong(t, flat + (size_t)v[3 * P + q] * es, q, BLOCK_FIRST(me),
                                         (size_t)v[2 * P + q]);
    wrong += flat_wrong + comm_pattern_wrong(t, hier + (size_t)nr * es, 7, 0, 1);
    if (wrong)
        fprintf(stderr, "rank %d: 2DH direct (%s): %zu wrong of %d elements (%zu in the flat "
                "reference)\n", me, layout, wrong, nr, flat_wrong);
done:
    if (intra != MPI_COMM_NULL)
        MPI_Comm_free(&intra);
    if (inter != MPI_COMM_NULL)
        MPI_Comm_free(&inter);
    fsmoe_a2a_2dh_plan_free(&plan);
    free(stage);
    free(send);
    free(flat);
    free(hier);
    free(node_of);
    free(counts);
    free(v);
    return wrong != 0;
}

/* A group that is not hierarchical refuses alltoall_2dh with FSMOE_ERR_USAGE and says why. */
static int test_2dh_refused(comm_backend *b, comm_group *g, int me, const char *what)
{
    int x[64] = {0}, y[64];
    fsmoe_error err = {0};
    fsmoe_status st = b->alltoall_2dh(b, g, x, y, 1, COMM_INT32, 1, &err);
    if (st != FSMOE_ERR_USAGE || !strstr(err.msg, "not hierarchical")) {
        fprintf(stderr, "rank %d: alltoall_2dh on %s: status %d (%s), expected a usage error\n",
                me, what, (int)st, err.msg);
        return 1;
    }
    if (me == 0)
        printf("alltoall_2dh on %s refused: %s\n", what, err.msg);
    return 0;
}

/* The 2DH tests on an even world of 4 or more ranks, nodes of 2. */
static int test_2dh(comm_backend *b, int me, int P)
{
    int failed = 0;
    for (int interleaved = 0; interleaved < 2; interleaved++) {
        const char *layout = interleaved ? "interleaved" : "node-major";
        comm_group *g = NULL;
        fsmoe_error err = {0};
        if (b->group_init(b, MPI_COMM_WORLD, interleaved ? me % 2 : me / 2, &g, &err)) {
            fprintf(stderr, "rank %d: group_init (%s): %s\n", me, layout, err.msg);
            return 1;
        }
        const comm_dtype types[] = {COMM_INT32, COMM_DOUBLE};
        const size_t counts[] = {37, 1000, 5};
        for (int i = 0; i < 2; i++)
            for (int stream = 0; stream < 2; stream++)
                for (int k = 0; k < 3; k++)
                    failed |= test_alltoall_2dh(b, g, me, P, types[i], stream, counts[k], layout);
        b->group_free(b, &g);
        failed |= test_alltoallv_2dh_direct(me, P, interleaved);
    }
    /* every rank its own node: not hierarchical */
    comm_group *g = NULL;
    fsmoe_error err = {0};
    if (b->group_init(b, MPI_COMM_WORLD, me, &g, &err)) {
        fprintf(stderr, "rank %d: group_init: %s\n", me, err.msg);
        return 1;
    }
    failed |= test_2dh_refused(b, g, me, "one rank per node");
    b->group_free(b, &g);
    return failed;
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
    if (comm_mpi_init(&b, 1, 0, &err) || b.group_init(&b, MPI_COMM_WORLD, -1, &g, &err)) {
        fprintf(stderr, "rank %d: %s\n", me, err.msg);
        failed = 1;
    } else {
        const comm_dtype types[] = {COMM_INT32, COMM_DOUBLE};
        for (int i = 0; i < 2; i++)
            for (int stream = 0; stream < 2; stream++)
                failed |= test_alltoallv(&b, g, me, P, types[i], stream);
        failed |= test_watchdog(me);
        failed |= test_2dh_refused(&b, g, me, "a group of unknown nodes");
        b.group_free(&b, &g);
        if (P % 2 == 0)
            failed |= test_2dh(&b, me, P);
        else if (me == 0)
            printf("2DH tests skipped: they need an even number of ranks (nodes of 2)\n");
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
