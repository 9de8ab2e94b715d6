/* Implements: the one check macro per foreign library (style.md "Errors"), shared by fsmoe-bench,
 * fsmoe-run and their tests, C and CUDA alike. Each failing call is described once, with the
 * library's own message, and gives the library's own status code:
 *
 *   MPI_CHECK(call, err)     FSMOE_ERR_MPI     MPI_Error_string
 *   CUDA_CHECK(call, err)    FSMOE_ERR_CUDA    cudaGetErrorString (cudaGetErrorName)
 *   CUBLAS_CHECK(call, err)  FSMOE_ERR_CUBLAS  cublasGetStatusString (cublasGetStatusName)
 *   NCCL_CHECK(call, comm, err)  FSMOE_ERR_NCCL  ncclGetErrorString + ncclGetLastError(comm)
 *                                                (comm may be NULL before a communicator exists)
 *
 * The *_CHECK macros return the status from the enclosing function (which returns
 * fsmoe_status). Code that must not return (a sticky error recorded on an object, as in the
 * runtime's CUDA backend) uses the expression forms instead, which record the message in err
 * and evaluate to the status (FSMOE_OK on success):
 *
 *   MPI_STATUS_OF(call, err)  CUDA_STATUS_OF(call, err)  CUBLAS_STATUS_OF(call, err)
 *   NCCL_STATUS_OF(call, comm, err)
 *
 * Each group exists when its library's header was included before this one (<mpi.h>,
 * <cuda_runtime.h>, <cublas_v2.h>, <nccl.h>), so a file that uses only CUDA and cuBLAS needs
 * neither MPI nor NCCL on its include path. MPI communicators must use MPI_ERRORS_RETURN
 * (main sets it on MPI_COMM_WORLD; derived ones inherit it), else MPI aborts before the macro
 * sees the code. */
#ifndef FSMOE_COMM_CHECK_H
#define FSMOE_COMM_CHECK_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "status.h"
#ifdef __cplusplus
}
#endif

#ifdef MPI_VERSION
static inline fsmoe_status fsmoe_mpi_status(int rc, const char *call, fsmoe_error *err)
{
    if (rc == MPI_SUCCESS)
        return FSMOE_OK;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error %d", rc);
    return fsmoe_fail(err, FSMOE_ERR_MPI, "%s failed: %s", call, msg);
}
#define MPI_STATUS_OF(call, err) fsmoe_mpi_status((call), #call, (err))
#define MPI_CHECK(call, err)                                                                 \
    do {                                                                                     \
        fsmoe_status mpi_st_ = MPI_STATUS_OF(call, err);                                     \
        if (mpi_st_ != FSMOE_OK)                                                             \
            return mpi_st_;                                                                  \
    } while (0)
#endif

#ifdef CUDART_VERSION
static inline fsmoe_status fsmoe_cuda_status(cudaError_t rc, const char *call, fsmoe_error *err)
{
    if (rc == cudaSuccess)
        return FSMOE_OK;
    return fsmoe_fail(err, FSMOE_ERR_CUDA, "%s failed: %s (%s)", call, cudaGetErrorString(rc),
                      cudaGetErrorName(rc));
}
#define CUDA_STATUS_OF(call, err) fsmoe_cuda_status((call), #call, (err))
#define CUDA_CHECK(call, err)                                                                \
    do {                                                                                     \
        fsmoe_status cuda_st_ = CUDA_STATUS_OF(call, err);                                   \
        if (cuda_st_ != FSMOE_OK)                                                            \
            return cuda_st_;                                                                 \
    } while (0)
#endif

#ifdef CUBLAS_VER_MAJOR
static inline fsmoe_status fsmoe_cublas_status(cublasStatus_t rc, const char *call,
                                               fsmoe_error *err)
{
    if (rc == CUBLAS_STATUS_SUCCESS)
        return FSMOE_OK;
    return fsmoe_fail(err, FSMOE_ERR_CUBLAS, "%s failed: %s (%s)", call,
                      cublasGetStatusString(rc), cublasGetStatusName(rc));
}
#define CUBLAS_STATUS_OF(call, err) fsmoe_cublas_status((call), #call, (err))
#define CUBLAS_CHECK(call, err)                                                              \
    do {                                                                                     \
        fsmoe_status cublas_st_ = CUBLAS_STATUS_OF(call, err);                               \
        if (cublas_st_ != FSMOE_OK)                                                          \
            return cublas_st_;                                                               \
    } while (0)
#endif

#ifdef NCCL_MAJOR
/* ncclGetLastError gives the detail (which peer, which transport) behind the generic code. */
static inline fsmoe_status fsmoe_nccl_status(ncclResult_t rc, ncclComm_t comm, const char *call,
                                             fsmoe_error *err)
{
    if (rc == ncclSuccess)
        return FSMOE_OK;
    const char *last = ncclGetLastError(comm);
    return fsmoe_fail(err, FSMOE_ERR_NCCL, "%s failed: %s%s%s", call, ncclGetErrorString(rc),
                      last && *last ? ": " : "", last ? last : "");
}
#define NCCL_STATUS_OF(call, comm, err) fsmoe_nccl_status((call), (comm), #call, (err))
#define NCCL_CHECK(call, comm, err)                                                          \
    do {                                                                                     \
        fsmoe_status nccl_st_ = NCCL_STATUS_OF(call, comm, err);                             \
        if (nccl_st_ != FSMOE_OK)                                                            \
            return nccl_st_;                                                                 \
    } while (0)
#endif

#endif
