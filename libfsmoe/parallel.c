/* Implements: the parallel layout of design.md §2 (FSMoE §4, Parm Fig. 2) and the mapping of
 * its logical groups onto physical tiers (intra-node link, inter-node link, both, one device).
 *
 * Ranks are node-major (rank = node·G + local). ESP groups are consecutive ranks, EP groups
 * stride esp, so an EP&ESP group is a consecutive block of ep·esp ranks; MP groups are
 * consecutive and DP strides mp. Under the checks of fsmoe_parallel_validate every group of a
 * kind has the same shape, so the group containing rank 0 stands for all of them. */
#include "parallel.h"

#include "names.h"

#include <string.h>

static const fsmoe_name tier_names[] = {{"intra", FSMOE_TIER_INTRA}, {"inter", FSMOE_TIER_INTER},
                                        {"world", FSMOE_TIER_WORLD}, {"local", FSMOE_TIER_LOCAL},
                                        {NULL, 0}};
static const fsmoe_name group_names[] = {
    {"mp", FSMOE_GROUP_MP}, {"esp", FSMOE_GROUP_ESP}, {"ep", FSMOE_GROUP_EP},
    {"ep_esp", FSMOE_GROUP_EP_ESP}, {"dp", FSMOE_GROUP_DP}, {"edp", FSMOE_GROUP_EDP}, {NULL, 0}};

const char *fsmoe_tier_name(fsmoe_tier t)
{
    return fsmoe_name_of(tier_names, (int)t);
}

int fsmoe_tier_from_name(const char *s)
{
    int t = -1;
    return fsmoe_name_lookup(tier_names, s, &t) ? t : -1;
}

const char *fsmoe_group_name(fsmoe_group g)
{
    return fsmoe_name_of(group_names, (int)g);
}

int fsmoe_group_size(const fsmoe_parallel *p, fsmoe_group g)
{
    switch (g) {
    case FSMOE_GROUP_MP: return p->mp;
    case FSMOE_GROUP_ESP: return p->esp;
    case FSMOE_GROUP_EP: return p->ep;
    case FSMOE_GROUP_EP_ESP: return p->ep * p->esp;
    case FSMOE_GROUP_DP: return p->dp;
    /* within one pipeline stage (mp·dp ranks) every (ep, esp) position repeats this often */
    case FSMOE_GROUP_EDP: return p->mp * p->dp / (p->ep * p->esp);
    default: return 1;
    }
}

/* Members of rank 0's group are 0, stride, 2·stride, ... */
static int group_stride(const fsmoe_parallel *p, fsmoe_group g)
{
    switch (g) {
    case FSMOE_GROUP_EP: return p->esp;
    case FSMOE_GROUP_DP: return p->mp;
    case FSMOE_GROUP_EDP: return p->ep * p->esp;
    default: return 1; /* MP, ESP, EP&ESP are consecutive blocks */
    }
}

fsmoe_tier fsmoe_group_tier(const fsmoe_parallel *p, fsmoe_group g)
{
    int G = p->gpus_per_node > 0 ? p->gpus_per_node : 1;
    if (p->world <= G)
        return FSMOE_TIER_INTRA; /* a single node has no inter-node link */
    int n = fsmoe_group_size(p, g), stride = group_stride(p, g);
    if (n <= 1)
        return FSMOE_TIER_INTRA;
    long first_node = 0, last_node = ((long)stride * (n - 1)) / G;
    if (last_node == first_node)
        return FSMOE_TIER_INTRA;
    /* One member per node: consecutive members sit on different nodes. */
    if (stride >= G)
        return FSMOE_TIER_INTER;
    return FSMOE_TIER_WORLD;
}

fsmoe_parallel fsmoe_parallel_common(int nodes, int gpus_per_node)
{
    fsmoe_parallel p = {
        .world = nodes * gpus_per_node,
        .gpus_per_node = gpus_per_node,
        .dp = nodes,
        .mp = gpus_per_node,
        .ep = nodes,
        .esp = gpus_per_node,
        .pp = 1,
    };
    return p;
}

/* A group that is consecutive ranks must tile nodes evenly: it either fits a whole number of
 * times into a node or covers a whole number of nodes. */
static int tiles_nodes(int size, int G)
{
    return size <= G ? G % size == 0 : size % G == 0;
}

fsmoe_status fsmoe_parallel_validate(const fsmoe_parallel *p, long experts, const char *where,
                                     fsmoe_error *err)
{
    const struct {
        const char *name;
        int v;
    } sizes[] = {{"world", p->world}, {"gpus_per_node", p->gpus_per_node}, {"dp", p->dp},
                 {"mp", p->mp},       {"ep", p->ep},                       {"esp", p->esp},
                 {"pp", p->pp}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i].v < 1)
            return fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: %s=%d (expected a group size >= 1)",
                              where, sizes[i].name, sizes[i].v);
    long prod = (long)p->dp * p->mp * p->pp;
    if (prod != p->world)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: world=%d but dp·mp·pp = %d·%d·%d = %ld (world must equal dp·mp·pp)",
                          where, p->world, p->dp, p->mp, p->pp, prod);
    if (p->world % p->gpus_per_node != 0)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: gpus_per_node=%d does not divide world=%d (expected whole nodes)",
                          where, p->gpus_per_node, p->world);
    long epesp = (long)p->ep * p->esp, stage = (long)p->dp * p->mp; /* ranks of one stage */
    if (epesp > stage || stage % epesp != 0) {
        if (p->pp > 1)
            return fsmoe_fail(err, FSMOE_ERR_VALUE,
                              "%s: ep·esp = %d·%d = %ld does not divide the %ld ranks of a "
                              "pipeline stage (dp·mp = %d·%d; expected the EP&ESP groups to tile "
                              "each stage)",
                              where, p->ep, p->esp, epesp, stage, p->dp, p->mp);
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: ep·esp = %d·%d = %ld does not divide world=%d (expected the "
                          "EP&ESP groups to tile the ranks)",
                          where, p->ep, p->esp, epesp, p->world);
    }
    if (!tiles_nodes(p->esp, p->gpus_per_node))
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: esp=%d with gpus_per_node=%d (expected esp to divide gpus_per_node "
                          "or be a multiple of it, so ESP groups do not straddle nodes unevenly)",
                          where, p->esp, p->gpus_per_node);
    if (!tiles_nodes(p->mp, p->gpus_per_node))
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: mp=%d with gpus_per_node=%d (expected mp to divide gpus_per_node "
                          "or be a multiple of it, so MP groups do not straddle nodes unevenly)",
                          where, p->mp, p->gpus_per_node);
    if (!tiles_nodes((int)epesp, p->gpus_per_node))
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: ep·esp = %d·%d = %ld with gpus_per_node=%d (expected ep·esp to "
                          "divide gpus_per_node or be a multiple of it, so EP&ESP groups do not "
                          "straddle nodes unevenly)",
                          where, p->ep, p->esp, epesp, p->gpus_per_node);
    if (!tiles_nodes(p->mp * p->dp, p->gpus_per_node))
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: mp·dp = %d·%d with gpus_per_node=%d (expected mp·dp to divide "
                          "gpus_per_node or be a multiple of it, so pipeline stages hold whole "
                          "nodes)",
                          where, p->mp, p->dp, p->gpus_per_node);
    if (experts > 0 && experts % p->ep != 0)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: experts: %ld is not divisible by ep=%d (each EP rank needs E/ep "
                          "experts)",
                          where, experts, p->ep);
    return FSMOE_OK;
}

int fsmoe_group_color(const fsmoe_parallel *p, fsmoe_group g, int r, int *color, int *key)
{
    int block = p->ep * p->esp;
    *color = 0;
    *key = r;
    switch (g) {
    case FSMOE_GROUP_ESP: *color = r / p->esp; break;
    case FSMOE_GROUP_EP:
        *color = (r / block) * p->esp + r % p->esp;
        *key = (r % block) / p->esp;
        break;
    case FSMOE_GROUP_EP_ESP: *color = r / block; break;
    case FSMOE_GROUP_MP: *color = r / p->mp; break;
    case FSMOE_GROUP_DP:
        *color = (r / (p->mp * p->dp)) * p->mp + r % p->mp;
        *key = r / p->mp;
        break;
    case FSMOE_GROUP_EDP: /* same place in every EP&ESP block of the stage */
        *color = (r / (p->mp * p->dp)) * block + r % block;
        *key = r / block;
        break;
    default:
        return -1;
    }
    return 0;
}
