/* Implements: MPI_CHECK, the one check macro for MPI calls (style.md "Errors"): a failing call
 * returns from the enclosing function with FSMOE_ERR_MPI and MPI's own message. Communicators
 * must use MPI_ERRORS_RETURN (main sets it on MPI_COMM_WORLD; derived ones inherit it).
 * And mpi_wait_napping, the one way fsmoe-bench waits for MPI requests without spinning. */
#ifndef BENCH_MPI_CHECK_H
#define BENCH_MPI_CHECK_H

#include <mpi.h>
#include <time.h>

#include "status.h"

#define MPI_CHECK(call, err)                                                                 \
    do {                                                                                     \
        int mpi_rc_ = (call);                                                                \
        if (mpi_rc_ != MPI_SUCCESS) {                                                        \
            char mpi_msg_[MPI_MAX_ERROR_STRING];                                             \
            int mpi_len_ = 0;                                                                \
            MPI_Error_string(mpi_rc_, mpi_msg_, &mpi_len_);                                  \
            return fsmoe_fail((err), FSMOE_ERR_MPI, "%s failed: %s", #call, mpi_msg_);        \
        }                                                                                    \
    } while (0)

/* Waits for n requests: MPI_Testall (which drives the progress engine) `spins` times back to
 * back, then between tests naps of nap_ns doubling up to nap_max_ns. Returns MPI's code. */
static inline int mpi_wait_napping(MPI_Request *r, int n, int spins, long nap_ns, long nap_max_ns)
{
    int done = 0;
    for (int i = 0;; i++) {
        int rc = MPI_Testall(n, r, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS || done)
            return rc;
        if (i < spins)
            continue;
        struct timespec nap = {0, nap_ns};
        nanosleep(&nap, NULL);
        if (nap_ns < nap_max_ns)
            nap_ns = 2 * nap_ns < nap_max_ns ? 2 * nap_ns : nap_max_ns;
    }
}

#endif
