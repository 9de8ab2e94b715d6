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

/* Which ranks hold equal values of a tensor, which orders the flat buffers (in this order) and
 * says how the gradient norm counts it:
 *   REPLICA         whole on every rank (norms, biases after a sum, the gate, wpe);
 *   MP              a slice over the MP group (Megatron: column- or row-parallel weights);
 *   EXPERT          an expert slice: rows over EP, H columns over ESP;
 *   EXPERT_REPLICA  expert rows over EP, whole over ESP (the output bias b2 of a sliced GPT
 *                   expert).
 * Dense tensors (the first two) are all-reduced over DP, expert ones over EDP. */
enum { RT_PART_REPLICA = 0, RT_PART_MP, RT_PART_EXPERT, RT_PART_EXPERT_REPLICA, RT_PART_COUNT };

/* The part of the whole tensor this rank holds: dims 0..ndim-2 start at off[d] of gshape[d];
 * the last dim is nseg pieces laid one after the other locally, piece s taken from global
 * columns [seg_off[s], seg_off[s] + seg_len[s]) of gshape[ndim-1] (one piece: a plain column
 * range; three: the q, k and v columns of a tensor-parallel QKV projection). */
typedef struct {
    long gshape[4], off[4];
    int nseg;
    long seg_off[3], seg_len[3];
} rt_slice;

typedef struct {
    char name[64];
    int ndim;
    long shape[4]; /* this rank's part */
    int shard;     /* RT_SHARD_* */
    int part;      /* RT_PART_* */
    rt_slice slice;
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
    long dense_total; /* dense tensors come first: [0, dense_total), then the expert ones */
    long part_end[RT_PART_COUNT]; /* where each part's tensors end in the flat buffers */
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
/* Marks tensor i as a slice: dim `dim` (not the last) starts at `off` of `gtotal`; or, with
 * params_slice_cols, its last dim is the n pieces (global offset, length) of `gtotal`
 * columns. part is the tensor's RT_PART_*. Initial values are those of the same elements of
 * the whole tensor. */
void params_slice_dim(rt_params *t, int i, int dim, long off, long gtotal, int part);
void params_slice_cols(rt_params *t, int i, int n, const long *seg_off, const long *seg_len,
                       long gtotal, int part);
/* Element j of tensor p's local part as a flat index of the whole tensor. */
long param_global_index(const rt_param *p, long j);
/* Elements of the whole tensor. */
long param_global_numel(const rt_param *p);
/* Allocates both buffers, binds every registered pointer, initialises weights from seed and
 * zeroes gradients. */
fsmoe_status params_alloc(rt_params *t, rt_backend *be, uint64_t seed, fsmoe_error *err);
void params_free(rt_params *t, rt_backend *be);
const rt_param *params_find(const rt_params *t, const char *name);

#endif
