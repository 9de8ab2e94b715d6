/* Implements: the table of named parameters. Every module registers its tensors (name, shape,
 * initialisation) with the address of its weight and gradient pointers; the table then places
 * all of them in one contiguous parameter buffer and one gradient buffer, so that AdamW,
 * gradient clipping, the gradient AllReduce and checkpoints work on two flat arrays. */
#ifndef RT_PARAMS_H
#define RT_PARAMS_H

#include <stdint.h>

#include "backend.h"

enum { RT_INIT_NORMAL = 0, RT_INIT_ZERO, RT_INIT_ONE };

/* How a tensor is laid out over the ranks (design.md §10.1). Replicated tensors are whole on
 * every rank and their gradients are all-reduced over DP; expert tensors are split along dim 0
 * (experts) over EP: this rank holds global rows [dim0_start, dim0_start + shape[0]) of
 * dim0_total, and their gradients are all-reduced over EDP. A checkpoint reshards by name and
 * these two numbers. */
enum { RT_SHARD_NONE = 0, RT_SHARD_EP };

typedef struct {
    char name[64];
    int ndim;
    long shape[4]; /* this rank's part */
    int shard;     /* RT_SHARD_* */
    long dim0_start, dim0_total;
    long numel, offset;
    int init;
    double std;
    real **w, **g;
} rt_param;

typedef struct {
    rt_param *p;
    int n, cap;
    long total;
    long dense_total; /* replicated tensors come first: [0, dense_total), then the EP shards */
    real *w, *g; /* backend memory, owned */
    int failed;  /* registration ran out of memory */
} rt_params;

/* The elements a tensor occupies in the flat buffers: numel rounded up to 16 (64-byte aligned
 * starts); the padding holds zeros. */
static inline long param_span(const rt_param *p) { return (p->numel + 15) / 16 * 16; }

/* Registers a tensor of shape[0..ndim) named by a printf format. */
void params_add(rt_params *t, real **w, real **g, int init, double std, const long *shape,
                int ndim, const char *fmt_name, ...) __attribute__((format(printf, 8, 9)));
/* Marks the tensors registered since index `first` as split over EP: this rank holds global
 * dim-0 indices [start, start + shape[0]) of `total` of each. Initial values are those of the
 * same elements of the whole tensor, so a sharded run starts from the single-rank run's
 * weights. */
void params_shard_since(rt_params *t, int first, long start, long total);
/* Allocates both buffers, binds every registered pointer, initialises weights from seed and
 * zeroes gradients. */
fsmoe_status params_alloc(rt_params *t, rt_backend *be, uint64_t seed, fsmoe_error *err);
void params_free(rt_params *t, rt_backend *be);
const rt_param *params_find(const rt_params *t, const char *name);

#endif
