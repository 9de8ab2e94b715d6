/* Implements: the `mpi` backend of the communication layer (comm_backend.h): host memory,
 * MPI collectives on duplicated communicators (mpi_coll.h), OpenBLAS sgemm, memcpy; streams
 * 1.. are worker threads (stream_thread.h). Declared in comm_backend.h as comm_mpi_init; this
 * header adds the MPI datatype and operator mapping other MPI code shares. */
#ifndef FSMOE_COMM_MPI_H
#define FSMOE_COMM_MPI_H

#include <mpi.h>

#include "comm_dtype.h"

MPI_Datatype comm_mpi_type(comm_dtype t);
MPI_Op comm_mpi_op(comm_redop op);

#endif
