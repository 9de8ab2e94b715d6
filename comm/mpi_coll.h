/* Implements: the collectives of the communication layer as the calling thread runs them
 * (design.md §10.1): nonblocking MPI calls waited for politely (MPI_Testall, then short naps;
 * no spinning on a machine whose ranks share cores) under a watchdog. The stream threads of
 * fsmoe-bench's mpi backend and of fsmoe-run's host backend both issue their communication
 * through these functions, so the profile times exactly what the runtime runs.
 *
 * Watchdog: a wait that sees no completion within the timeout (fsmoe_comm_set_timeout, default
 * 30 s, 0 = never) fails with FSMOE_ERR_TIMEOUT and a message naming this rank, the operation
 * (`what`) and the members of its group, so that when a peer dies or stalls every other rank
 * stops with a message instead of hanging. MPI errors come back as FSMOE_ERR_MPI (the
 * communicators must use MPI_ERRORS_RETURN). */
#ifndef FSMOE_MPI_COLL_H
#define FSMOE_MPI_COLL_H

#include <mpi.h>

#include "status.h"

#define FSMOE_COMM_TIMEOUT_DEFAULT_S 30.0

void fsmoe_comm_set_timeout(double seconds);
double fsmoe_comm_timeout(void);

/* Waits for n requests (politely, under the watchdog). `what` names the operation. */
fsmoe_status fsmoe_mpi_wait(MPI_Request *r, int n, MPI_Comm comm, const char *what,
                            fsmoe_error *err);
/* The same wait for a thread with nothing else to do for a while (a rank sitting out another
 * rank's measurement): no back-to-back tests, naps doubling from 20 us to 1 ms. */
fsmoe_status fsmoe_mpi_wait_sleeping(MPI_Request *r, int n, MPI_Comm comm, const char *what,
                                     fsmoe_error *err);

/* The collectives (counts in elements of t). */
fsmoe_status fsmoe_mpi_alltoall(MPI_Comm comm, const void *send, void *recv, int count,
                                MPI_Datatype t, const char *what, fsmoe_error *err);
/* AllToAllv: counts and displacements in elements, one per member. A member may send or
 * receive nothing. */
fsmoe_status fsmoe_mpi_alltoallv(MPI_Comm comm, const void *send, const int *scounts,
                                 const int *sdispls, void *recv, const int *rcounts,
                                 const int *rdispls, MPI_Datatype t, const char *what,
                                 fsmoe_error *err);
#define FSMOE_TAG_2DH 2042 /* the point-to-point messages of the 2DH AllToAllv */
/* The 2DH AllToAllv of plan p (libfsmoe/a2a_2dh.h) in rows of row_elems elements of t: intra is
 * the node's members of the group ranked by local index, inter the members with this local
 * index ranked by node; stage holds rows_a + 2·rows_b rows. send and recv are the flat
 * AllToAllv's buffers. Each phase is point-to-point (nonempty blocks only, tag FSMOE_TAG_2DH),
 * waited for like the collectives; one thread at a time may use intra and inter. */
struct fsmoe_a2a_2dh_plan;
fsmoe_status fsmoe_mpi_alltoallv_2dh(MPI_Comm intra, MPI_Comm inter,
                                     const struct fsmoe_a2a_2dh_plan *p, const void *send, void *recv,
                                     void *stage, int row_elems, MPI_Datatype t,
                                     const char *what, fsmoe_error *err);
fsmoe_status fsmoe_mpi_allgather(MPI_Comm comm, const void *send, void *recv, int count,
                                 MPI_Datatype t, const char *what, fsmoe_error *err);
fsmoe_status fsmoe_mpi_reducescatter(MPI_Comm comm, const void *send, void *recv, int count,
                                     MPI_Datatype t, MPI_Op op, const char *what,
                                     fsmoe_error *err);
/* send == recv (or MPI_IN_PLACE) reduces in place. */
fsmoe_status fsmoe_mpi_allreduce(MPI_Comm comm, const void *send, void *recv, int count,
                                 MPI_Datatype t, MPI_Op op, const char *what, fsmoe_error *err);
/* Exclusive prefix over the members in rank order (rank 0 receives zeros). */
fsmoe_status fsmoe_mpi_exscan_sum(MPI_Comm comm, const void *send, void *recv, int count,
                                  MPI_Datatype t, const char *what, fsmoe_error *err);
/* One exchange: count elements to member dst, count from member src (Parm's SAA phase). */
fsmoe_status fsmoe_mpi_sendrecv(MPI_Comm comm, const void *send, int dst, void *recv, int src,
                                int count, MPI_Datatype t, const char *what, fsmoe_error *err);
fsmoe_status fsmoe_mpi_barrier(MPI_Comm comm, const char *what, fsmoe_error *err);
/* A barrier waited for with fsmoe_mpi_wait_sleeping. */
fsmoe_status fsmoe_mpi_barrier_sleeping(MPI_Comm comm, const char *what, fsmoe_error *err);

#endif
