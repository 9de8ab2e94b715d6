/* Implements: the MPI part of check.h for files that use MPI only: <mpi.h>, then check.h, so
 * MPI_CHECK and MPI_STATUS_OF are defined (FSMOE_ERR_MPI with MPI_Error_string's message).
 * The macros themselves live in check.h, once. */
#ifndef FSMOE_COMM_MPI_CHECK_H
#define FSMOE_COMM_MPI_CHECK_H

#include <mpi.h>

#include "check.h"

#endif
