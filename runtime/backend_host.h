/* Implements: constructor of the `host` backend (backend_host.c). */
#ifndef RT_BACKEND_HOST_H
#define RT_BACKEND_HOST_H

#include "backend.h"

fsmoe_status rt_backend_host_create(int threads, rt_backend **out, fsmoe_error *err);

#endif
