/* Implements: node placement and the per-tier communicators (topology.h). */
#include "topology.h"

#include <string.h>
#include <unistd.h>

#include "check.h"

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
    int r = t->rank, color = 0, key = r;
    int block = p->ep * p->esp;
    switch (g) {
    case FSMOE_GROUP_ESP: color = r / p->esp; break;
    case FSMOE_GROUP_EP:
        color = (r / block) * p->esp + r % p->esp;
        key = (r % block) / p->esp;
        break;
    case FSMOE_GROUP_EP_ESP: color = r / block; break;
    case FSMOE_GROUP_MP: color = r / p->mp; break;
    case FSMOE_GROUP_DP:
        color = (r / (p->mp * p->dp)) * p->mp + r % p->mp;
        key = r / p->mp;
        break;
    case FSMOE_GROUP_EDP: /* same place in every EP&ESP block of the stage */
        color = (r / (p->mp * p->dp)) * block + r % block;
        key = r / block;
        break;
    default:
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "group %d has no communicator", (int)g);
    }
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
