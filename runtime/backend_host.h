/* Implements: constructor of the `host` backend (backend_host.c). */
#ifndef RT_BACKEND_HOST_H
#define RT_BACKEND_HOST_H

#include "backend.h"

/* The best instruction set this build has and the CPU runs (backend_host_isa.c), or the one the
 * environment variable FSMOE_HOST_ISA names (`baseline`, and on x86-64 `x86-64-v3`): an unknown
 * name or one the CPU cannot run is FSMOE_ERR_USAGE. The backend's name says which ran. */
fsmoe_status rt_backend_host_create(int threads, rt_backend **out, fsmoe_error *err);

/* Whether this build has the instruction set `name` (FSMOE_HOST_ISA's spelling) and this CPU
 * runs it. */
int rt_backend_host_isa_runs(const char *name);

#endif
