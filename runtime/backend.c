/* Implements: backend selection by name, the sticky asynchronous error, the single-rank group. */
#include "backend.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_host.h"
#if defined(FSMOE_HAVE_CUDA)
#include "backend_cuda.h"
#include "topology.h" /* comm/: the local rank picks the device */
#endif

const char *const rt_prof_names[RT_PROF_CATS] = {"GEMM", "element-wise", "attention",
                                                  "gate/order", "communication", "optimizer"};

const char *const rt_mem_names[RT_MEM_CATS] = {"weights",     "gradients", "optimizer",
                                                "activations", "workspace", "buffers"};

/* rt_alloc's record: one entry per live block, so that rt_free knows its size and category
 * (device memory has no header to keep them in). Blocks are few (hundreds) and allocated once,
 * so a linear search on free is enough. */
typedef struct {
    void *p;
    size_t bytes;
    int cat;
} mem_block;
typedef struct {
    mem_block *b;
    long n, cap;
} mem_reg;

void *rt_alloc(rt_backend *be, int cat, size_t bytes)
{
    mem_reg *r = be->mem_reg;
    if (cat < 0 || cat >= RT_MEM_CATS)
        return NULL;
    if (!r && !(r = be->mem_reg = calloc(1, sizeof *r)))
        return NULL;
    if (r->n == r->cap) {
        long cap = r->cap ? 2 * r->cap : 64;
        mem_block *nb = realloc(r->b, (size_t)cap * sizeof *nb);
        if (!nb)
            return NULL;
        r->b = nb, r->cap = cap;
    }
    void *p = be->alloc(be, bytes);
    if (!p)
        return NULL;
    r->b[r->n++] = (mem_block){p, bytes, cat};
    be->mem.bytes[cat] += bytes;
    be->mem.total += bytes;
    if (be->mem.total > be->mem.peak)
        be->mem.peak = be->mem.total;
    be->mem.allocs++;
    return p;
}

void rt_free(rt_backend *be, void *p)
{
    mem_reg *r = be->mem_reg;
    if (!p)
        return;
    for (long i = r ? r->n - 1 : -1; i >= 0; i--)
        if (r->b[i].p == p) {
            be->mem.bytes[r->b[i].cat] -= r->b[i].bytes;
            be->mem.total -= r->b[i].bytes;
            r->b[i] = r->b[--r->n];
            be->free(be, p);
            return;
        }
    rt_backend_fail(be, FSMOE_ERR_INTERNAL, "rt_free: %p was not allocated by rt_alloc", p);
}

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
        mem_reg *r = (*be)->mem_reg;
        if (r)
            free(r->b);
        free(r);
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
