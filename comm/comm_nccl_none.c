/* Implements: the NCCL backend's entry points in a build without the gpu feature (no nvcc,
 * cuBLAS or NCCL): --backend nccl then says what to rebuild with. */
#include "comm_backend.h"

int comm_nccl_available(void)
{
    return 0;
}

fsmoe_status comm_nccl_init(comm_backend *b, MPI_Comm world, fsmoe_error *err)
{
    (void)b;
    (void)world;
    return fsmoe_fail(err, FSMOE_ERR_USAGE,
                      "--backend nccl: this build has no NCCL backend (configure with "
                      "-Dgpu=enabled where nvcc, cuBLAS and NCCL are installed)");
}
