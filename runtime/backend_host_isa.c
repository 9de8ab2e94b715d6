/* Implements: the host backend's choice of instruction set. backend_host.c is compiled once per
 * set (runtime/meson.build): `baseline` (the compiler's default target) and, on x86-64,
 * `x86_64_v3` (AVX2 and FMA: 8-wide vectors for the element-wise loops, a fused multiply-add
 * for their polynomials) and `x86_64_v4` (AVX-512F/BW/CD/DQ/VL: 32 vector registers, masked
 * loop tails). The first one the CPU runs is taken, unless FSMOE_HOST_ISA names one
 * (tests run both; a user can rule out a set). The choice is part of the backend's name, which
 * fsmoe-run prints at start-up. */
#include "backend_host.h"

#include <stdlib.h>
#include <string.h>

fsmoe_status rt_backend_host_create_baseline(int threads, rt_backend **out, fsmoe_error *err);
#if defined(RT_HOST_HAVE_X86_64_V3)
fsmoe_status rt_backend_host_create_x86_64_v3(int threads, rt_backend **out, fsmoe_error *err);
#endif
#if defined(RT_HOST_HAVE_X86_64_V4)
fsmoe_status rt_backend_host_create_x86_64_v4(int threads, rt_backend **out, fsmoe_error *err);
#endif

typedef fsmoe_status (*host_create_fn)(int threads, rt_backend **out, fsmoe_error *err);

typedef struct {
    const char *name;    /* FSMOE_HOST_ISA's spelling */
    const char *backend; /* the backend's name with it */
    host_create_fn create;
    int (*runs)(void); /* whether this CPU runs it */
} host_isa;

static int runs_always(void) { return 1; }

#if defined(RT_HOST_HAVE_X86_64_V3)
static int runs_x86_64_v3(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("bmi2");
}
#endif

#if defined(RT_HOST_HAVE_X86_64_V4)
/* x86-64-v4 is v3 plus these (gcc's cpu check includes the OS saving the AVX-512 state) */
static int runs_x86_64_v4(void)
{
    __builtin_cpu_init();
    return runs_x86_64_v3() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512cd") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}
#endif

/* best first */
static const host_isa host_isas[] = {
#if defined(RT_HOST_HAVE_X86_64_V4)
    {"x86-64-v4", "host x86-64-v4", rt_backend_host_create_x86_64_v4, runs_x86_64_v4},
#endif
#if defined(RT_HOST_HAVE_X86_64_V3)
    {"x86-64-v3", "host x86-64-v3", rt_backend_host_create_x86_64_v3, runs_x86_64_v3},
#endif
    {"baseline", "host", rt_backend_host_create_baseline, runs_always},
};
#define N_HOST_ISAS ((int)(sizeof host_isas / sizeof host_isas[0]))

int rt_backend_host_isa_runs(const char *name)
{
    for (int i = 0; i < N_HOST_ISAS; i++)
        if (strcmp(name, host_isas[i].name) == 0)
            return host_isas[i].runs();
    return 0;
}

const char *rt_backend_host_isa_name(int i)
{
    return i >= 0 && i < N_HOST_ISAS ? host_isas[i].name : NULL;
}

void rt_backend_host_isa_names(char *buf, size_t size, const char *sep)
{
    if (size == 0)
        return;
    buf[0] = '\0';
    for (int i = 0; i < N_HOST_ISAS; i++) {
        strncat(buf, i ? sep : "", size - strlen(buf) - 1);
        strncat(buf, host_isas[i].name, size - strlen(buf) - 1);
    }
}

fsmoe_status rt_backend_host_create(int threads, rt_backend **out, fsmoe_error *err)
{
    *out = NULL;
    const char *want = getenv("FSMOE_HOST_ISA");
    if (want && !*want)
        want = NULL;
    for (int i = 0; i < N_HOST_ISAS; i++) {
        const host_isa *a = &host_isas[i];
        if (want ? strcmp(want, a->name) != 0 : !a->runs())
            continue;
        if (!a->runs())
            return fsmoe_fail(err, FSMOE_ERR_USAGE,
                              "FSMOE_HOST_ISA=%s: this CPU does not run that instruction set",
                              want);
        fsmoe_status st = a->create(threads, out, err);
        if (st == FSMOE_OK)
            (*out)->name = a->backend;
        return st;
    }
    char list[128];
    rt_backend_host_isa_names(list, sizeof list, ", ");
    return fsmoe_fail(err, FSMOE_ERR_USAGE,
                      "FSMOE_HOST_ISA=%s: not an instruction set of this build (%s)", want, list);
}
