/* Implements: backend selection by name, the sticky asynchronous error, the single-rank group. */
#include "backend.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backend_host.h"
#if defined(FSMOE_HAVE_CUDA)
#include "backend_cuda.h"
#include "topology.h" /* comm/: the local rank picks the device */
#endif

const char *const rt_prof_names[RT_PROF_CATS] = {"GEMM", "element-wise", "attention",
                                                  "gate/order", "communication", "optimizer"};

int rt_backend_have_cuda(void)
{
#if defined(FSMOE_HAVE_CUDA)
    return 1;
#else
    return 0;
#endif
}

fsmoe_status rt_backend_create(const char *name, int threads, rt_backend **out, fsmoe_error *err)
{
    *out = NULL;
    if (strcmp(name, "host") == 0)
        return rt_backend_host_create(threads, out, err);
    if (strcmp(name, "cuda") == 0) {
#if defined(FSMOE_HAVE_CUDA) && !REAL_IS_DOUBLE
        /* one device per rank of a node: the local rank modulo the node's devices */
        return rt_backend_cuda_create(topology_local_rank(MPI_COMM_WORLD), out, err);
#else
        return fsmoe_fail(err, FSMOE_ERR_USAGE,
                          "--backend cuda: this build has no CUDA backend (configure with nvcc "
                          "present and -Dgpu=enabled)");
#endif
    }
    return fsmoe_fail(err, FSMOE_ERR_USAGE, "--backend: '%s' is not one of host, cuda", name);
}

void rt_backend_destroy(rt_backend **be)
{
    if (be && *be) {
        rt_mem_release(*be);
        (*be)->destroy(*be);
        *be = NULL;
    }
}

fsmoe_status rt_backend_check(rt_backend *be, fsmoe_error *err)
{
    if (be->err.status == FSMOE_OK)
        return FSMOE_OK;
    return fsmoe_fail(err, be->err.status, "%s", be->err.msg);
}

/* Stream threads fail too: the first failure wins under this lock. */
static pthread_mutex_t fail_mu = PTHREAD_MUTEX_INITIALIZER;

void rt_backend_fail(rt_backend *be, fsmoe_status st, const char *fmt, ...)
{
    pthread_mutex_lock(&fail_mu);
    if (be->err.status == FSMOE_OK) {
        va_list ap;
        va_start(ap, fmt);
        fsmoe_vfail(&be->err, st, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&fail_mu);
}

int rt_backend_failed(rt_backend *be)
{
    pthread_mutex_lock(&fail_mu);
    int failed = be->err.status != FSMOE_OK;
    pthread_mutex_unlock(&fail_mu);
    return failed;
}

rt_group rt_group_single(void)
{
    rt_group g = {1, 0, NULL};
    return g;
}
