/* Implements: the cluster profile schema (clusters/<name>.yaml, design.md §3) and its loader.
 *
 * A profile holds, per (operation, tier), the fitted line t = alpha_s + beta·n, its r², the
 * group size it was measured with, and optionally the measured points (n, t) so that a planner
 * may interpolate instead of using the line (MoNTA's efficiency curves). n follows nccl-tests:
 * AllToAll = one rank's buffer bytes, AllGather = gathered output bytes, ReduceScatter = input
 * bytes, AllReduce = buffer bytes, SAA = one rank's AllToAll buffer bytes, copy = bytes,
 * GEMM = multiply-accumulates m·n·k (beta then is seconds per MAC). */
#ifndef FSMOE_CLUSTER_H
#define FSMOE_CLUSTER_H

#include <stddef.h>

#include "parallel.h"
#include "status.h"

#define FSMOE_CLUSTER_VERSION 1

typedef enum {
    FSMOE_OP_ALLTOALL = 0,
    FSMOE_OP_ALLGATHER,
    FSMOE_OP_REDUCESCATTER,
    FSMOE_OP_ALLREDUCE,
    FSMOE_OP_SAA,   /* Parm's simultaneous AllToAll (EP&ESP) + AllGather (MP), measured as one */
    FSMOE_OP_GEMM,
    FSMOE_OP_COPY,  /* device-to-device memory copy */
    FSMOE_OP_COUNT
} fsmoe_op;

typedef struct {
    double n;       /* bytes (MACs for gemm) */
    double seconds;
} fsmoe_point;

typedef struct {
    int present;
    double alpha_s;
    double beta_s;     /* seconds per byte (per MAC for gemm) */
    double r2;
    int ranks;         /* group size it was measured with (1 for local ops) */
    int low_r2;        /* r2 < the profile's r2_threshold */
    char derived[256]; /* non-empty: not measured; how it was obtained */
    int n_points;
    fsmoe_point *points; /* sorted by n, owned */
    int line;          /* 1-based source line of the entry, for messages */
} fsmoe_cost_entry;

typedef struct {
    char name[64];
    char source[512];
    char device[64];
    int nodes;
    int gpus_per_node;
    double r2_threshold;
    fsmoe_cost_entry ops[FSMOE_OP_COUNT][FSMOE_TIER_COUNT];
    /* where the sizes a layout is derived from were read (for messages made after loading,
     * e.g. the common layout's ep = nodes not dividing a model's experts) */
    struct {
        fsmoe_mark nodes, gpus_per_node, ops;
    } at;
} fsmoe_cluster;

const char *fsmoe_op_name(fsmoe_op op); /* "alltoall", "allgather", ..., "saa", "gemm", "copy" */
int fsmoe_op_from_name(const char *s);  /* -1 when unknown */

fsmoe_status fsmoe_cluster_load(const char *path, fsmoe_cluster *out, fsmoe_error *err);
/* The same on a document in memory; `name` stands for the path in messages. */
fsmoe_status fsmoe_cluster_parse(const char *name, const char *text, size_t len,
                                 fsmoe_cluster *out, fsmoe_error *err);
void fsmoe_cluster_free(fsmoe_cluster *c); /* frees points; safe on a zeroed struct */

#endif
