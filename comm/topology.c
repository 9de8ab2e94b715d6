/* Implements: node placement, the per-tier communicators and the groups' 2DH shapes
 * (topology.h). */
#include "topology.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "mpi_coll.h"

static fsmoe_status topology_detect(comm_topology *t, MPI_Comm world, fsmoe_error *err)
{
    MPI_Comm shared = MPI_COMM_NULL, leaders = MPI_COMM_NULL;
    int local = 0, G = 0, gmin = 0, gmax = 0, node = 0;
    MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, t->rank, MPI_INFO_NULL, &shared),
              err);
    MPI_Comm_rank(shared, &local);
    MPI_Comm_size(shared, &G);
    /* Number the nodes by their lowest world rank: the leaders (local 0) in world order. */
    MPI_CHECK(MPI_Comm_split(world, local == 0 ? 0 : MPI_UNDEFINED, t->rank, &leaders), err);
    if (leaders != MPI_COMM_NULL) {
        MPI_Comm_rank(leaders, &node);
        MPI_Comm_free(&leaders);
    }
    MPI_CHECK(MPI_Bcast(&node, 1, MPI_INT, 0, shared), err);
    MPI_Comm_free(&shared);
    MPI_CHECK(MPI_Allreduce(&G, &gmin, 1, MPI_INT, MPI_MIN, world), err);
    MPI_CHECK(MPI_Allreduce(&G, &gmax, 1, MPI_INT, MPI_MAX, world), err);
    if (gmin != gmax)
        return fsmoe_fail(err, FSMOE_ERR_USAGE,
                          "nodes hold different numbers of ranks (%d to %d): every node needs "
                          "the same number of ranks; launch with a balanced hostfile or give "
                          "--gpus-per-node", gmin, gmax);
    t->gpus_per_node = G;
    t->nodes = t->size / G;
    t->node = node;
    t->local = local;
    t->detected = 1;
    return FSMOE_OK;
}

fsmoe_status topology_init(comm_topology *t, MPI_Comm world, int gpus_per_node,
                           fsmoe_error *err)
{
    fsmoe_status st;
    memset(t, 0, sizeof *t);
    for (int i = 0; i < FSMOE_TIER_COUNT; i++)
        t->tier[i] = MPI_COMM_NULL;
    MPI_Comm_rank(world, &t->rank);
    MPI_Comm_size(world, &t->size);
    if (gethostname(t->host, sizeof t->host - 1) != 0)
        strcpy(t->host, "unknown");
    if (gpus_per_node > 0) {
        if (t->size % gpus_per_node != 0)
            return fsmoe_fail(err, FSMOE_ERR_USAGE,
                              "--gpus-per-node %d does not divide the world of %d ranks",
                              gpus_per_node, t->size);
        t->gpus_per_node = gpus_per_node;
        t->nodes = t->size / gpus_per_node;
        t->node = t->rank / gpus_per_node;
        t->local = t->rank % gpus_per_node;
    } else if ((st = topology_detect(t, world, err))) {
        return st;
    }
    int G = t->gpus_per_node, N = t->nodes;
    int mine = t->node == t->rank / G, all = 0;
    MPI_CHECK(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, world), err);
    t->node_major = all;
    MPI_Comm intra = MPI_COMM_NULL, inter = MPI_COMM_NULL;
    MPI_CHECK(MPI_Comm_split(world, t->node, t->local, &intra), err);
    MPI_CHECK(MPI_Comm_split(world, t->local, t->node, &inter), err);
    t->tier_size[FSMOE_TIER_INTRA] = G;
    t->tier_size[FSMOE_TIER_INTER] = N;
    t->tier_size[FSMOE_TIER_WORLD] = t->size;
    t->tier_size[FSMOE_TIER_LOCAL] = 1;
    if (G > 1)
        t->tier[FSMOE_TIER_INTRA] = intra;
    else
        MPI_Comm_free(&intra);
    if (N > 1)
        t->tier[FSMOE_TIER_INTER] = inter;
    else
        MPI_Comm_free(&inter);
    if (G > 1 && N > 1)
        MPI_CHECK(MPI_Comm_dup(world, &t->tier[FSMOE_TIER_WORLD]), err);
    return FSMOE_OK;
}

void topology_free(comm_topology *t)
{
    for (int i = 0; i < FSMOE_TIER_COUNT; i++)
        if (t->tier[i] != MPI_COMM_NULL)
            MPI_Comm_free(&t->tier[i]);
}

int topology_has_tier(const comm_topology *t, fsmoe_tier tier)
{
    if (tier == FSMOE_TIER_LOCAL)
        return 1;
    return t->tier[tier] != MPI_COMM_NULL;
}

fsmoe_status topology_group_comm(const comm_topology *t, MPI_Comm world, const fsmoe_parallel *p,
                                 fsmoe_group g, MPI_Comm *out, fsmoe_error *err)
{
    int color, key;
    if (fsmoe_group_color(p, g, t->rank, &color, &key))
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "group %d has no communicator", (int)g);
    MPI_CHECK(MPI_Comm_split(world, color, key, out), err);
    return FSMOE_OK;
}

int topology_local_rank(MPI_Comm world)
{
    int init = 0, fin = 0, local = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (!init || fin)
        return 0;
    MPI_Comm shared;
    if (MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared) !=
        MPI_SUCCESS)
        return 0;
    MPI_Comm_rank(shared, &local);
    MPI_Comm_free(&shared);
    return local;
}

/* ---- 2DH ---- */

/* Why node_of (P members) is not a 2DH shape, into why. */
static void shape_why(const int *node_of, int P, char *why, size_t len)
{
    int nodes = 0, lo = 0, hi = 0, unknown = 0;
    for (int p = 0; p < P; p++) {
        unknown |= node_of[p] < 0;
        int first = 1, count = 0;
        for (int q = 0; q < P; q++) {
            first &= !(q < p && node_of[q] == node_of[p]);
            count += node_of[q] == node_of[p];
        }
        if (!first)
            continue;
        lo = nodes == 0 || count < lo ? count : lo;
        hi = nodes == 0 || count > hi ? count : hi;
        nodes++;
    }
    if (unknown)
        snprintf(why, len, "the group's nodes are unknown (group_init was given node -1)");
    else if (P > FSMOE_A2A_2DH_MAX_MEMBERS)
        snprintf(why, len, "%d members, more than the %d the 2DH plan takes", P,
                 FSMOE_A2A_2DH_MAX_MEMBERS);
    else if (lo != hi)
        snprintf(why, len, "its %d members sit on %d nodes, %d to %d on each (expected the "
                 "same number on every node)", P, nodes, lo, hi);
    else
        snprintf(why, len, "its %d member%s sit%s on %d node%s, %d on each (expected at least "
                 "2 nodes with at least 2 members each)", P, P == 1 ? "" : "s",
                 P == 1 ? "s" : "", nodes, nodes == 1 ? "" : "s", lo);
}

fsmoe_status topology_2dh_init(MPI_Comm group, int node, topology_2dh *h, fsmoe_error *err)
{
    memset(h, 0, sizeof *h);
    int P = 1, me = 0;
    MPI_CHECK(MPI_Comm_size(group, &P), err);
    MPI_CHECK(MPI_Comm_rank(group, &me), err);
    h->P = P;
    int *node_of = malloc((size_t)P * sizeof *node_of), *ones = NULL;
    fsmoe_status st = FSMOE_OK;
    if (!node_of) {
        st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for a group of %d", P);
        goto done;
    }
    if ((st = fsmoe_mpi_allgather(group, &node, node_of, 1, MPI_INT,
                                  "the group's nodes (MPI_Allgather)", err)))
        goto done;
    int unknown = 0;
    for (int p = 0; p < P; p++)
        unknown |= node_of[p] < 0;
    fsmoe_a2a_2dh_shape shape;
    if (unknown || !fsmoe_a2a_2dh_shape_make(node_of, P, &shape)) {
        shape_why(node_of, P, h->why, sizeof h->why);
        goto done;
    }
    /* P <= FSMOE_A2A_2DH_MAX_MEMBERS here */
    ones = malloc((size_t)P * (size_t)P * sizeof *ones);
    for (long i = 0; ones && i < (long)P * P; i++)
        ones[i] = 1;
    if (!ones || fsmoe_a2a_2dh_plan_make(&shape, me, ones, &h->plan)) {
        st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for the 2DH plan of %d members", P);
        goto done;
    }
    h->hierarchical = 1;
    h->nodes = shape.nodes;
    h->shape = shape;
done:
    free(node_of);
    free(ones);
    return st;
}

fsmoe_status topology_2dh_split(MPI_Comm comm, const topology_2dh *h, MPI_Comm *intra,
                                MPI_Comm *inter, fsmoe_error *err)
{
    MPI_CHECK(MPI_Comm_split(comm, h->plan.node, h->plan.local, intra), err);
    MPI_CHECK(MPI_Comm_split(comm, h->plan.local, h->plan.node, inter), err);
    return FSMOE_OK;
}

void topology_2dh_free(topology_2dh *h)
{
    if (h)
        fsmoe_a2a_2dh_plan_free(&h->plan);
}

int topology_tier_2dh(const comm_topology *t, fsmoe_tier tier)
{
    return tier == FSMOE_TIER_WORLD && t->tier[FSMOE_TIER_WORLD] != MPI_COMM_NULL &&
           t->size <= FSMOE_A2A_2DH_MAX_MEMBERS;
}

int topology_group_2dh(const comm_topology *t, const fsmoe_parallel *p, fsmoe_group g)
{
    fsmoe_parallel q = *p; /* on the ranks as they sit */
    q.world = t->size, q.gpus_per_node = t->gpus_per_node;
    return t->node_major && fsmoe_a2a_2dh_group(&q, g, NULL);
}
