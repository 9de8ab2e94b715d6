/* Implements: the parameter table (params.h). */
#include "params.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

void params_add(rt_params *t, real **w, real **g, int init, double std, const long *shape,
                int ndim, const char *name, ...)
{
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 64;
        rt_param *np = realloc(t->p, (size_t)cap * sizeof(*np));
        if (!np) {
            t->failed = 1;
            return;
        }
        t->p = np;
        t->cap = cap;
    }
    rt_param *p = &t->p[t->n++];
    memset(p, 0, sizeof(*p));
    va_list ap;
    va_start(ap, name);
    vsnprintf(p->name, sizeof p->name, name, ap);
    va_end(ap);
    p->numel = 1;
    for (int i = 0; i < ndim; i++) {
        p->shape[i] = shape[i];
        p->numel *= p->shape[i];
    }
    p->ndim = ndim;
    p->shard = RT_SHARD_NONE;
    p->dim0_start = 0;
    p->dim0_total = ndim > 0 ? shape[0] : 1;
    p->part = RT_PART_REPLICA;
    for (int i = 0; i < ndim; i++)
        p->slice.gshape[i] = shape[i];
    p->init = init;
    p->std = std;
    p->w = w;
    p->g = g;
    p->offset = t->total;
    t->total += (p->numel + 15) / 16 * 16; /* 64-byte aligned tensors */
}

void params_shard_since(rt_params *t, int first, long start, long total)
{
    for (int i = first; i < t->n; i++) {
        rt_param *p = &t->p[i];
        p->shard = RT_SHARD_EP;
        p->dim0_start = start;
        p->dim0_total = total;
        p->slice.off[0] = start;
        p->slice.gshape[0] = total;
        if (p->part < RT_PART_EXPERT)
            p->part = RT_PART_EXPERT;
    }
}

void params_slice_dim(rt_params *t, int i, int dim, long off, long gtotal, int part)
{
    rt_param *p = &t->p[i];
    p->slice.off[dim] = off;
    p->slice.gshape[dim] = gtotal;
    p->part = part;
    if (dim == 0) {
        p->dim0_start = off;
        p->dim0_total = gtotal;
    }
}

void params_slice_cols(rt_params *t, int i, int n, const long *seg_off, const long *seg_len,
                       long gtotal, int part)
{
    rt_param *p = &t->p[i];
    p->slice.nseg = n;
    for (int s = 0; s < n; s++)
        p->slice.seg_off[s] = seg_off[s], p->slice.seg_len[s] = seg_len[s];
    p->slice.gshape[p->ndim - 1] = gtotal;
    p->part = part;
}

long param_global_numel(const rt_param *p)
{
    long n = 1;
    for (int d = 0; d < p->ndim; d++)
        n *= p->slice.gshape[d];
    return n;
}

long param_global_index(const rt_param *p, long j)
{
    const rt_slice *s = &p->slice;
    long g = 0, stride = 1;
    for (int d = p->ndim - 1; d >= 0; d--) {
        long i = j % p->shape[d];
        j /= p->shape[d];
        long gi = i + s->off[d];
        if (d == p->ndim - 1 && s->nseg > 0) {
            int k = 0;
            while (k + 1 < s->nseg && i >= s->seg_len[k])
                i -= s->seg_len[k++];
            gi = s->seg_off[k] + i;
        }
        g += gi * stride;
        stride *= s->gshape[d];
    }
    return g;
}

fsmoe_status params_alloc(rt_params *t, rt_backend *be, uint64_t seed, fsmoe_error *err)
{
    if (t->failed)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "parameter table: out of memory");
    /* part by part (replicated, MP slices, expert slices, expert replicas), so that each
     * gradient AllReduce (DP, EDP) is one contiguous range and each part's norm one sum; each
     * tensor stays 64-byte aligned */
    t->total = 0;
    for (int part = 0; part < RT_PART_COUNT; part++) {
        for (int i = 0; i < t->n; i++) {
            rt_param *p = &t->p[i];
            if (p->part != part)
                continue;
            p->offset = t->total;
            t->total += param_span(p);
        }
        t->part_end[part] = t->total;
    }
    t->dense_total = t->part_end[RT_PART_MP];
    size_t bytes = (size_t)t->total * sizeof(real);
    t->w = rt_alloc(be, RT_MEM_WEIGHTS, bytes);
    t->g = rt_alloc(be, RT_MEM_GRADS, bytes);
    real *host = calloc((size_t)t->total + 1, sizeof(real));
    if (!t->w || !t->g || !host) {
        free(host);
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "cannot allocate %zu bytes of parameters", bytes);
    }
    for (int i = 0; i < t->n; i++) {
        rt_param *p = &t->p[i];
        *p->w = t->w + p->offset;
        *p->g = t->g + p->offset;
        real *h = host + p->offset;
        /* element j of this rank's part is element param_global_index(p, j) of the whole */
        for (long j = 0; j < p->numel; j++) {
            if (p->init == RT_INIT_NORMAL)
                h[j] = (real)(p->std * rng_normal(seed, 0x1417, (uint64_t)i,
                                                  (uint64_t)param_global_index(p, j)));
            else
                h[j] = p->init == RT_INIT_ONE ? (real)1 : (real)0;
        }
    }
    be->copy(be, NULL, t->w, host, bytes, RT_H2D);
    be->stream_sync(be, NULL);
    free(host);
    return FSMOE_OK;
}

void params_free(rt_params *t, rt_backend *be)
{
    if (be) {
        if (t->w)
            rt_free(be, t->w);
        if (t->g)
            rt_free(be, t->g);
    }
    free(t->p);
    memset(t, 0, sizeof(*t));
}

const rt_param *params_find(const rt_params *t, const char *name)
{
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->p[i].name, name) == 0)
            return &t->p[i];
    return NULL;
}
