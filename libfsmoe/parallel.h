/* Implements: the parallel layout (design.md §2) and which physical tier each logical group uses.
 *
 * Ranks are numbered node-major (rank = node·G + local). The layout nests, innermost first:
 * ESP (consecutive ranks), then EP (stride esp); MP is consecutive like ESP and DP strides mp.
 * A group whose members all sit on one node communicates over the intra-node tier; a group
 * with one member per node over the inter-node tier; a group that has both several members
 * per node and several nodes (EP&ESP in Parm) over the "world" tier. */
#ifndef FSMOE_PARALLEL_H
#define FSMOE_PARALLEL_H

#include "status.h"

typedef struct {
    int world;         /* P */
    int gpus_per_node; /* G */
    int dp, mp, ep, esp, pp;
} fsmoe_parallel;

/* Physical tiers a cost entry is measured on. LOCAL is a single device (GEMM, copy). */
typedef enum {
    FSMOE_TIER_INTRA = 0,
    FSMOE_TIER_INTER,
    FSMOE_TIER_WORLD,
    FSMOE_TIER_LOCAL,
    FSMOE_TIER_COUNT
} fsmoe_tier;

/* Logical groups of the MoE layer. */
typedef enum {
    FSMOE_GROUP_MP = 0,
    FSMOE_GROUP_ESP,
    FSMOE_GROUP_EP,
    FSMOE_GROUP_EP_ESP,
    FSMOE_GROUP_DP,
    FSMOE_GROUP_EDP, /* expert-data-parallel: the ranks holding the same expert shard */
    FSMOE_GROUP_COUNT
} fsmoe_group;

const char *fsmoe_tier_name(fsmoe_tier t);   /* "intra", "inter", "world", "local" */
int fsmoe_tier_from_name(const char *s);     /* -1 when unknown */
const char *fsmoe_group_name(fsmoe_group g); /* "mp", "esp", "ep", "ep_esp", "dp", "edp" */

/* Size of a logical group (1 means: no collective at all). */
int fsmoe_group_size(const fsmoe_parallel *p, fsmoe_group g);

/* The color and key of world rank r's logical group g (the members of one group share the
 * color; the key orders them by group rank, ascending with the world rank): what
 * MPI_Comm_split takes. -1 for a group without one (FSMOE_GROUP_NONE and the like). */
int fsmoe_group_color(const fsmoe_parallel *p, fsmoe_group g, int r, int *color, int *key);

/* The tier a group's collectives run on under this layout. Only meaningful when size > 1. */
fsmoe_tier fsmoe_group_tier(const fsmoe_parallel *p, fsmoe_group g);

/* The common layout of design.md §2 for a cluster of `nodes` × G: mp = esp = G, ep = dp = nodes. */
fsmoe_parallel fsmoe_parallel_common(int nodes, int gpus_per_node);

/* Checks world = dp·mp·pp, world divisible by ep·esp, G divides world, every size ≥ 1, ...
 * `where` prefixes the message (e.g. "models/x.yaml:30:3: parallel" or "command line").
 * experts > 0 also checks experts % ep == 0. Returns FSMOE_ERR_VALUE with one message. */
fsmoe_status fsmoe_parallel_validate(const fsmoe_parallel *p, long experts, const char *where,
                                     fsmoe_error *err);

#endif
