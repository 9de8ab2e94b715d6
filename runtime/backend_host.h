/* Implements: constructor of the `host` backend (backend_host.c). */
#ifndef RT_BACKEND_HOST_H
#define RT_BACKEND_HOST_H

#include "backend.h"

/* The best instruction set this build has and the CPU runs (backend_host_isa.c), or the one the
 * environment variable FSMOE_HOST_ISA names (rt_backend_host_isa_name): an unknown name or one
 * the CPU cannot run is FSMOE_ERR_USAGE. The backend's name says which ran. */
fsmoe_status rt_backend_host_create(int threads, rt_backend **out, fsmoe_error *err);

/* Whether this build has the instruction set `name` (FSMOE_HOST_ISA's spelling) and this CPU
 * runs it. */
int rt_backend_host_isa_runs(const char *name);

/* The instruction sets of this build, best first (FSMOE_HOST_ISA's spellings: `x86-64-v4`,
 * `x86-64-v3` on x86-64, `baseline` last): the i-th, NULL past the last. */
const char *rt_backend_host_isa_name(int i);

/* Their names joined by sep into buf (truncated to size). */
void rt_backend_host_isa_names(char *buf, size_t size, const char *sep);

#endif
