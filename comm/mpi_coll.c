/* Implements: polite, watched MPI collectives (mpi_coll.h). */
#include "mpi_coll.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h> /* PR_SET_TIMERSLACK */
#include <time.h>

#include "a2a_2dh.h"
#include "check.h"

/* How a thread waits: 32 tests back to back, then naps of 20 us (every waiting thread sets its
 * timer slack to 1 us on its first wait, else the kernel stretches each nap to ~70 us: a
 * collective of many rounds or fragments, each needing a test to progress, then took 3-4x
 * longer on the main thread than on a stream thread). A thread blocked in an MPI
 * call spins in the progress loop; with two streams per rank and ranks sharing cores those
 * spinning threads took the CPU from the ones moving data. Measured on Parm's SAA (emulated
 * 2 x 2 cluster, 4 ranks and 8 stream threads on 2 cores, 8gbit): blocking calls r2
 * 0.978-0.995 with alpha ~7 ms of scheduling delays; nonblocking with these waits
 * 0.993-0.997, alpha ~0. */
enum { WAIT_SPINS = 32, WAIT_NAP_NS = 20000 };

/* A sleeping wait (fsmoe_mpi_wait_sleeping) starts at 20 us too and doubles its naps up to
 * 1 ms: a short wait still ends quickly, a long one (fsmoe-bench's ranks waiting while another
 * round measures) wakes the sleeper ~1000 times a second; at 50 us the wake-ups preempted the
 * measured ranks 20 000 times a second per sleeper. */
enum { SLEEP_NAP_MAX_NS = 1000000 };

static _Atomic double timeout_s = FSMOE_COMM_TIMEOUT_DEFAULT_S;

void fsmoe_comm_set_timeout(double seconds) { timeout_s = seconds > 0 ? seconds : 0; }
double fsmoe_comm_timeout(void) { return timeout_s; }

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* "ranks 0-3" or "ranks 0,2" (world ranks of comm's members). */
static void describe_members(MPI_Comm comm, char *out, size_t cap)
{
    int n = 0;
    out[0] = '\0';
    if (comm == MPI_COMM_NULL || MPI_Comm_size(comm, &n) != MPI_SUCCESS || n <= 0)
        return;
    MPI_Group g, w;
    MPI_Comm_group(comm, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &w);
    int ranks[64], wr[64], m = n < 64 ? n : 64;
    for (int i = 0; i < m; i++)
        ranks[i] = i;
    MPI_Group_translate_ranks(g, m, ranks, w, wr);
    MPI_Group_free(&g);
    MPI_Group_free(&w);
    int consecutive = 1;
    for (int i = 1; i < m; i++)
        consecutive &= wr[i] == wr[i - 1] + 1;
    if (consecutive && m == n && n > 2) {
        snprintf(out, cap, "ranks %d-%d", wr[0], wr[n - 1]);
        return;
    }
    size_t used = (size_t)snprintf(out, cap, "rank%s ", n > 1 ? "s" : "");
    for (int i = 0; i < m && used < cap; i++)
        used += (size_t)snprintf(out + used, cap - used, "%s%d", i ? "," : "", wr[i]);
    if (m < n && used < cap)
        snprintf(out + used, cap - used, ",...");
}

/* The one polite wait: `spins` tests back to back, then naps from WAIT_NAP_NS doubling up to
 * nap_max_ns between tests, with the watchdog looking at the clock every 256 tests. */
static fsmoe_status wait_loop(MPI_Request *r, int n, MPI_Comm comm, const char *what, int spins,
                              long nap_max_ns, fsmoe_error *err)
{
    static _Thread_local int slack_set;
    if (!slack_set) {
#ifdef PR_SET_TIMERSLACK
        (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
#endif
        slack_set = 1;
    }
    double limit = timeout_s, start = limit > 0 ? now_s() : 0;
    long nap_ns = WAIT_NAP_NS < nap_max_ns ? WAIT_NAP_NS : nap_max_ns;
    for (int i = 0;; i++) {
        int done = 0;
        MPI_CHECK(MPI_Testall(n, r, &done, MPI_STATUSES_IGNORE), err);
        if (done)
            return FSMOE_OK;
        if (i < spins)
            continue;
        struct timespec nap = {0, nap_ns};
        nanosleep(&nap, NULL);
        if (nap_ns < nap_max_ns)
            nap_ns = 2 * nap_ns < nap_max_ns ? 2 * nap_ns : nap_max_ns;
        if (limit > 0 && (i & 255) == 0 && now_s() - start > limit) {
            int me = 0;
            char members[256];
            MPI_Comm_rank(MPI_COMM_WORLD, &me);
            describe_members(comm, members, sizeof members);
            return fsmoe_fail(err, FSMOE_ERR_TIMEOUT,
                              "rank %d: %s on %s made no progress for %.3g s: a peer rank died, "
                              "stalled or cannot be reached (--comm-timeout sets the limit)",
                              me, what, members, limit);
        }
    }
}

fsmoe_status fsmoe_mpi_wait(MPI_Request *r, int n, MPI_Comm comm, const char *what,
                            fsmoe_error *err)
{
    return wait_loop(r, n, comm, what, WAIT_SPINS, WAIT_NAP_NS, err);
}

fsmoe_status fsmoe_mpi_wait_sleeping(MPI_Request *r, int n, MPI_Comm comm, const char *what,
                                     fsmoe_error *err)
{
    return wait_loop(r, n, comm, what, 0, SLEEP_NAP_MAX_NS, err);
}

fsmoe_status fsmoe_mpi_alltoall(MPI_Comm comm, const void *send, void *recv, int count,
                                MPI_Datatype t, const char *what, fsmoe_error *err)
{
    MPI_Request r;
    MPI_CHECK(MPI_Ialltoall(send, count, t, recv, count, t, comm, &r), err);
    return fsmoe_mpi_wait(&r, 1, comm, what, err);
}

fsmoe_status fsmoe_mpi_alltoallv(MPI_Comm comm, const void *send, const int *scounts,
                                 const int *sdispls, void *recv, const int *rcounts,
                                 const int *rdispls, MPI_Datatype t, const char *what,
                                 fsmoe_error *err)
{
    MPI_Request r;
    MPI_CHECK(MPI_Ialltoallv(send, scounts, sdispls, t, recv, rcounts, rdispls, t, comm, &r),
              err);
    return fsmoe_mpi_wait(&r, 1, comm, what, err);
}

/* One phase of the 2DH AllToAllv as point-to-point messages on comm (its n members are the
 * phase's peers; counts and displacements in rows): every nonempty receive posted, then every
 * nonempty send, the block to itself copied. Point-to-point rather than MPI_Ialltoallv: a
 * phase is a sparse exchange (rows of one chunk, often none to most peers), and Open MPI's
 * nonblocking AllToAllv was seen to leave a receive-only member waiting forever under
 * MPI_THREAD_MULTIPLE with other threads' collectives in flight. Messages of one comm match
 * in issue order (MPI's non-overtaking rule), and only one thread issues on a comm. */
static fsmoe_status phase_p2p(MPI_Comm comm, int n, const long *sc, const long *sd,
                              const char *send, const long *rc, const long *rd, char *recv,
                              int row_elems, size_t row_bytes, MPI_Datatype t, const char *what,
                              fsmoe_error *err)
{
    MPI_Request r[2 * FSMOE_A2A_2DH_MAX_MEMBERS];
    int me = 0, k = 0;
    MPI_Comm_rank(comm, &me);
    if (row_elems <= 0)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: rows of %d elements", what, row_elems);
    for (int q = 0; q < n; q++)
        if (sc[q] > INT_MAX / row_elems || rc[q] > INT_MAX / row_elems)
            return fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: %ld rows of %d elements exceed MPI's "
                              "int counts", what, sc[q] > rc[q] ? sc[q] : rc[q], row_elems);
    for (int q = 0; q < n; q++)
        if (q != me && rc[q] > 0)
            MPI_CHECK(MPI_Irecv(recv + (size_t)rd[q] * row_bytes, (int)(rc[q] * row_elems), t, q,
                                FSMOE_TAG_2DH, comm, &r[k++]), err);
    for (int q = 0; q < n; q++)
        if (q != me && sc[q] > 0)
            MPI_CHECK(MPI_Isend(send + (size_t)sd[q] * row_bytes, (int)(sc[q] * row_elems), t, q,
                                FSMOE_TAG_2DH, comm, &r[k++]), err);
    if (sc[me] != rc[me])
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "%s: sends %ld rows to itself, receives %ld",
                          what, sc[me], rc[me]);
    memcpy(recv + (size_t)rd[me] * row_bytes, send + (size_t)sd[me] * row_bytes,
           (size_t)sc[me] * row_bytes);
    return k ? fsmoe_mpi_wait(r, k, comm, what, err) : FSMOE_OK;
}

fsmoe_status fsmoe_mpi_alltoallv_2dh(MPI_Comm intra, MPI_Comm inter, const fsmoe_a2a_2dh_plan *p,
                                     const void *send, void *recv, void *stage, int row_elems,
                                     MPI_Datatype t, const char *what, fsmoe_error *err)
{
    int tsize = 0;
    MPI_CHECK(MPI_Type_size(t, &tsize), err);
    size_t row = (size_t)row_elems * (size_t)tsize;
    char *A = stage, *B = A + (size_t)p->rows_a * row, *C = B + (size_t)p->rows_b * row;
    fsmoe_status st;
    fsmoe_a2a_2dh_move_host(p->pack1, p->n_pack1, send, A, row);
    if ((st = phase_p2p(intra, p->locals, p->s1c, p->s1d, A, p->r1c, p->r1d, B, row_elems, row,
                        t, what, err)))
        return st;
    fsmoe_a2a_2dh_move_host(p->pack2, p->n_pack2, B, C, row);
    if ((st = phase_p2p(inter, p->nodes, p->s2c, p->s2d, C, p->r2c, p->r2d, A, row_elems, row,
                        t, what, err)))
        return st;
    fsmoe_a2a_2dh_move_host(p->unpack, p->n_unpack, A, recv, row);
    return FSMOE_OK;
}

fsmoe_status fsmoe_mpi_allgather(MPI_Comm comm, const void *send, void *recv, int count,
                                 MPI_Datatype t, const char *what, fsmoe_error *err)
{
    MPI_Request r;
    MPI_CHECK(MPI_Iallgather(send, count, t, recv, count, t, comm, &r), err);
    return fsmoe_mpi_wait(&r, 1, comm, what, err);
}

fsmoe_status fsmoe_mpi_reducescatter(MPI_Comm comm, const void *send, void *recv, int count,
                                     MPI_Datatype t, MPI_Op op, const char *what,
                                     fsmoe_error *err)
{
    MPI_Request r;
    MPI_CHECK(MPI_Ireduce_scatter_block(send, recv, count, t, op, comm, &r), err);
    return fsmoe_mpi_wait(&r, 1, comm, what, err);
}

fsmoe_status fsmoe_mpi_allreduce(MPI_Comm comm, const void *send, void *recv, int count,
                                 MPI_Datatype t, MPI_Op op, const char *what, fsmoe_error *err)
{
    MPI_Request r;
    if (send == recv)
        send = MPI_IN_PLACE;
    MPI_CHECK(MPI_Iallreduce(send, recv, count, t, op, comm, &r), err);
    return fsmoe_mpi_wait(&r, 1, comm, what, err);
}

fsmoe_status fsmoe_mpi_exscan_sum(MPI_Comm comm, const void *send, void *recv, int count,
                                  MPI_Datatype t, const char *what, fsmoe_error *err)
{
    MPI_Request r;
    int me = 0, size = 0;
    MPI_CHECK(MPI_Iexscan(send, recv, count, t, MPI_SUM, comm, &r), err);
    fsmoe_status st = fsmoe_mpi_wait(&r, 1, comm, what, err);
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &size);
    if (st == FSMOE_OK && me == 0) { /* MPI leaves rank 0's result undefined */
        int tsize = 0;
        MPI_Type_size(t, &tsize);
        memset(recv, 0, (size_t)count * (size_t)tsize);
    }
    return st;
}

fsmoe_status fsmoe_mpi_sendrecv(MPI_Comm comm, const void *send, int dst, void *recv, int src,
                                int count, MPI_Datatype t, const char *what, fsmoe_error *err)
{
    MPI_Request r[2];
    MPI_CHECK(MPI_Irecv(recv, count, t, src, 0, comm, &r[0]), err);
    MPI_CHECK(MPI_Isend(send, count, t, dst, 0, comm, &r[1]), err);
    return fsmoe_mpi_wait(r, 2, comm, what, err);
}

fsmoe_status fsmoe_mpi_barrier(MPI_Comm comm, const char *what, fsmoe_error *err)
{
    MPI_Request r;
    MPI_CHECK(MPI_Ibarrier(comm, &r), err);
    return fsmoe_mpi_wait(&r, 1, comm, what, err);
}

fsmoe_status fsmoe_mpi_barrier_sleeping(MPI_Comm comm, const char *what, fsmoe_error *err)
{
    MPI_Request r;
    MPI_CHECK(MPI_Ibarrier(comm, &r), err);
    return fsmoe_mpi_wait_sleeping(&r, 1, comm, what, err);
}
