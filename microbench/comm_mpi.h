/* Implements: the `mpi` backend of fsmoe-bench (backend.h): host memory, MPI collectives on
 * duplicated communicators, OpenBLAS sgemm, memcpy; streams 1.. are worker threads
 * (stream_thread.h). Declared in backend.h as comm_mpi_init; this header adds the MPI
 * datatype and operator mapping other MPI code shares. */
#ifndef BENCH_COMM_MPI_H
#define BENCH_COMM_MPI_H

#include <mpi.h>

#include "dtype.h"

MPI_Datatype comm_mpi_type(bench_dtype t);
MPI_Op comm_mpi_op(bench_redop op);

#endif
