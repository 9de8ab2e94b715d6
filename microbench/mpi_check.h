/* Implements: MPI_CHECK, the one check macro for MPI calls (style.md "Errors"): a failing call
 * returns from the enclosing function with FSMOE_ERR_IO and MPI's own message. Communicators
 * must use MPI_ERRORS_RETURN (main sets it on MPI_COMM_WORLD; derived ones inherit it). */
#ifndef BENCH_MPI_CHECK_H
#define BENCH_MPI_CHECK_H

#include <mpi.h>

#include "status.h"

#define MPI_CHECK(call, err)                                                                 \
    do {                                                                                     \
        int mpi_rc_ = (call);                                                                \
        if (mpi_rc_ != MPI_SUCCESS) {                                                        \
            char mpi_msg_[MPI_MAX_ERROR_STRING];                                             \
            int mpi_len_ = 0;                                                                \
            MPI_Error_string(mpi_rc_, mpi_msg_, &mpi_len_);                                  \
            return fsmoe_fail((err), FSMOE_ERR_IO, "%s failed: %s", #call, mpi_msg_);        \
        }                                                                                    \
    } while (0)

#endif
