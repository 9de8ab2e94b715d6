/* Implements: NCCL communicators bootstrapped over MPI, for the CUDA parts of fsmoe-bench
 * (comm_nccl.cu) and fsmoe-run (runtime/backend_cuda.cu): rank 0 of an MPI communicator makes
 * the unique id, a watched MPI broadcast shares it (comm/mpi_coll.h: a dead peer ends the
 * bootstrap with a message, not a hang), every member joins. CUDA C++ only (includes nccl.h). */
#ifndef FSMOE_COMM_NCCL_BOOT_H
#define FSMOE_COMM_NCCL_BOOT_H

#include <mpi.h>
#include <nccl.h>

extern "C" {
#include "status.h"
}

/* A communicator of group's members with their ranks in it; `what` names it in messages. */
fsmoe_status fsmoe_nccl_comm_init(MPI_Comm group, ncclComm_t *out, const char *what,
                                  fsmoe_error *err);

#endif
