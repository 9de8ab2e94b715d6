/* Implements: constructor of the `cuda` backend (backend_cuda.cu; built when nvcc is found). */
#ifndef RT_BACKEND_CUDA_H
#define RT_BACKEND_CUDA_H

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fails with a message (and FSMOE_ERR_IO) when no CUDA device is usable. */
fsmoe_status rt_backend_cuda_create(int device, rt_backend **out, fsmoe_error *err);

#ifdef __cplusplus
}
#endif

#endif
