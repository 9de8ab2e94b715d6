/* Implements: the executor's backend memory by category (backend.h rt_alloc, rt_free): every
 * block's size and category recorded, the bytes per category, their peak and the number of
 * allocations, for fsmoe-run's memory table and its steady-state line. */
#include <stdlib.h>

#include "backend.h"

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
    /* a bug of the caller; recorded like an asynchronous failure (rt_free runs on the thread
     * that owns the executor, so no other thread writes be->err here) */
    if (be->err.status == FSMOE_OK)
        fsmoe_fail(&be->err, FSMOE_ERR_INTERNAL, "rt_free: %p was not allocated by rt_alloc", p);
}

void rt_mem_release(rt_backend *be)
{
    mem_reg *r = be->mem_reg;
    if (r)
        free(r->b);
    free(r);
    be->mem_reg = NULL;
}

