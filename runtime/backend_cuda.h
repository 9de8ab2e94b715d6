/* Implements: constructor of the `cuda` backend (backend_cuda.cu; built when nvcc is found). */
#ifndef RT_BACKEND_CUDA_H
#define RT_BACKEND_CUDA_H

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Uses device local_rank modulo the devices present (one per rank of a node). Fails with a
 * message (FSMOE_ERR_CUDA) when no CUDA device is usable. */
fsmoe_status rt_backend_cuda_create(int local_rank, rt_backend **out, fsmoe_error *err);

#ifdef __cplusplus
}
#endif

#endif
