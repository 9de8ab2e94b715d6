/* Implements: the runtime's groups and host-side collectives (dist.h). */
#include "dist.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mpi_coll.h"
#include "topology.h"

static const char *const group_names[RT_NGROUPS] = {"dp", "ep", "edp", "mp", "esp", "ep_esp", "world"};

static void group_single(rt_comm_group *g, const char *name)
{
    g->name = name;
    g->size = 1;
    g->rank = 0;
    for (int s = 0; s < RT_STREAM_SLOTS; s++)
        g->comm[s] = g->h_intra[s] = g->h_inter[s] = MPI_COMM_NULL;
}

void dist_single(rt_dist *d, const rt_layout *layout)
{
    memset(d, 0, sizeof *d);
    d->layout = *layout;
    for (int k = 0; k < RT_NGROUPS; k++)
        group_single(&d->g[k], group_names[k]);
}

static fsmoe_status group_make(rt_comm_group *g, const char *name, int color, int key,
                               fsmoe_error *err)
{
    MPI_Comm base;
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, key, &base), err);
    MPI_Comm_size(base, &g->size);
    MPI_Comm_rank(base, &g->rank);
    g->name = name;
    g->comm[0] = base;
    for (int s = 1; s < RT_STREAM_SLOTS; s++)
        MPI_CHECK(MPI_Comm_dup(base, &g->comm[s]), err);
    return FSMOE_OK;
}

/* The 2DH sub-communicators of an exchange group (dist.h), where its members' nodes (rank /
 * gpus_per_node, the numbering layout.h assumes) make it hierarchical. Collective over g. */
static fsmoe_status group_2dh(rt_comm_group *g, const rt_layout *l, fsmoe_error *err)
{
    if (l->gpus_per_node <= 0 || g->size < 4 || g->size > FSMOE_A2A_2DH_MAX_MEMBERS)
        return FSMOE_OK;
    topology_2dh h;
    fsmoe_status st = topology_2dh_init(g->comm[0], l->rank / l->gpus_per_node, &h, err);
    if (!st && h.hierarchical && !(g->h2 = malloc(sizeof *g->h2)))
        st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "group %s: out of memory", g->name);
    if (!st && h.hierarchical) {
        *g->h2 = h.shape;
        for (int s = 0; s < RT_STREAM_SLOTS && !st; s++)
            st = topology_2dh_split(g->comm[s], &h, &g->h_intra[s], &g->h_inter[s], err);
    }
    topology_2dh_free(&h);
    return st;
}

fsmoe_status dist_init(rt_dist *d, const rt_layout *l, fsmoe_error *err)
{
    dist_single(d, l);
    if (l->world == 1)
        return FSMOE_OK;
    d->mpi = 1;
    fsmoe_status st;
    /* numbering as libfsmoe/parallel.h (layout.h): MP and ESP blocks of consecutive ranks, DP
     * strides mp, EP strides esp inside blocks of ep·esp, EDP strides ep·esp */
    int r = l->rank, epesp = l->ep * l->esp;
    if ((st = group_make(&d->g[RT_DP], "dp", r % l->mp, l->dp_rank, err)) ||
        (st = group_make(&d->g[RT_EP], "ep", r / epesp * l->esp + r % l->esp, l->ep_rank, err)) ||
        (st = group_make(&d->g[RT_EDP], "edp", r % epesp, l->edp_rank, err)) ||
        (st = group_make(&d->g[RT_MP], "mp", r / l->mp, l->mp_rank, err)) ||
        (st = group_make(&d->g[RT_ESP], "esp", r / l->esp, l->esp_rank, err)) ||
        (st = group_make(&d->g[RT_EP_ESP], "ep_esp", r / epesp, r % epesp, err)) ||
        (st = group_make(&d->g[RT_WORLD], "world", 0, r, err)))
        return st;
    int want[RT_NGROUPS] = {l->dp, l->ep, l->edp, l->mp, l->esp, epesp, l->world};
    for (int k = 0; k < RT_NGROUPS; k++)
        if (d->g[k].size != want[k])
            return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "group %s has %d ranks, the layout says %d",
                              group_names[k], d->g[k].size, want[k]);
    if ((st = group_2dh(&d->g[RT_EP], l, err)) || (st = group_2dh(&d->g[RT_EP_ESP], l, err)))
        return st;
    return FSMOE_OK;
}

void dist_free(rt_dist *d)
{
    for (int k = 0; k < RT_NGROUPS; k++) {
        rt_comm_group *g = &d->g[k];
        for (int s = 0; s < RT_STREAM_SLOTS; s++) {
            MPI_Comm *c[3] = {&g->comm[s], &g->h_intra[s], &g->h_inter[s]};
            for (int x = 0; x < 3; x++)
                if (*c[x] != MPI_COMM_NULL)
                    MPI_Comm_free(c[x]);
            free(g->h_stage[s]);
            g->h_stage[s] = NULL;
            g->h_stage_bytes[s] = 0;
        }
        free(g->h2);
        g->h2 = NULL;
    }
    d->mpi = 0;
}

const fsmoe_a2a_2dh_shape *dist_group_2dh(const rt_group *g)
{
    return g && g->size > 1 && g->impl ? ((const rt_comm_group *)g->impl)->h2 : NULL;
}

rt_group dist_group(const rt_dist *d, rt_group_kind k)
{
    rt_group g = {d->g[k].size, d->g[k].rank, (void *)&d->g[k]};
    if (g.size == 1)
        g.impl = NULL;
    return g;
}

/* Sum over group k, in place, on the caller's thread. */
static fsmoe_status sum_in_place(const rt_dist *d, rt_group_kind k, void *x, int n,
                                 MPI_Datatype t, const char *what, fsmoe_error *err)
{
    if (d->g[k].size == 1)
        return FSMOE_OK;
    return fsmoe_mpi_allreduce(d->g[k].comm[0], x, x, n, t, MPI_SUM, what, err);
}

fsmoe_status dist_sum_doubles(const rt_dist *d, rt_group_kind k, double *x, int n,
                              const char *what, fsmoe_error *err)
{
    return sum_in_place(d, k, x, n, MPI_DOUBLE, what, err);
}

fsmoe_status dist_sum_reals(const rt_dist *d, rt_group_kind k, real *x, long n, const char *what,
                            fsmoe_error *err)
{
    const long piece = 1L << 28;
    for (long o = 0; o < n; o += piece) {
        fsmoe_status st = sum_in_place(d, k, x + o, (int)(n - o < piece ? n - o : piece),
                                       MPI_REAL_T, what, err);
        if (st != FSMOE_OK)
            return st;
    }
    return FSMOE_OK;
}

fsmoe_status dist_sum_longs(const rt_dist *d, rt_group_kind k, long *x, int n, const char *what,
                            fsmoe_error *err)
{
    return sum_in_place(d, k, x, n, MPI_LONG, what, err);
}

fsmoe_status dist_exscan_longs(const rt_dist *d, rt_group_kind k, const long *x, long *out, int n,
                               const char *what, fsmoe_error *err)
{
    if (d->g[k].size == 1) {
        memset(out, 0, (size_t)n * sizeof(long));
        return FSMOE_OK;
    }
    return fsmoe_mpi_exscan_sum(d->g[k].comm[0], x, out, n, MPI_LONG, what, err);
}

fsmoe_status dist_allgather_longs(const rt_dist *d, rt_group_kind k, const long *send, long *recv,
                                  int n, const char *what, fsmoe_error *err)
{
    if (d->g[k].size == 1) {
        memcpy(recv, send, (size_t)n * sizeof(long));
        return FSMOE_OK;
    }
    return fsmoe_mpi_allgather(d->g[k].comm[0], send, recv, n, MPI_LONG, what, err);
}


fsmoe_status dist_gather_bytes(const rt_dist *d, rt_group_kind k, const char *send, long n,
                               char **out, long *out_len, const char *what, fsmoe_error *err)
{
    const rt_comm_group *g = &d->g[k];
    *out = NULL, *out_len = 0;
    if (g->size == 1) {
        if (!(*out = malloc((size_t)n + 1)))
            return fsmoe_fail(err, FSMOE_ERR_NOMEM, "%s: out of memory", what);
        memcpy(*out, send, (size_t)n);
        *out_len = n;
        return FSMOE_OK;
    }
    long *lens = calloc((size_t)g->size, sizeof(long));
    int *cnt = calloc((size_t)g->size, sizeof(int)), *disp = calloc((size_t)g->size, sizeof(int));
    if (!lens || !cnt || !disp) {
        free(lens), free(cnt), free(disp);
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "%s: out of memory", what);
    }
    fsmoe_status st = dist_allgather_longs(d, k, &n, lens, 1, what, err);
    long total = 0;
    for (int i = 0; i < g->size && st == FSMOE_OK; i++) {
        if (lens[i] > INT_MAX || total > INT_MAX - lens[i])
            st = fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: %ld bytes from member %d, more than one "
                            "gather moves", what, lens[i], i);
        disp[i] = (int)total, cnt[i] = (int)lens[i];
        total += lens[i];
    }
    char *buf = NULL;
    if (st == FSMOE_OK && g->rank == 0 && !(buf = malloc((size_t)total + 1)))
        st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "%s: out of memory for %ld bytes", what, total);
    if (st == FSMOE_OK) {
        MPI_Request r;
        int rc = MPI_Igatherv(send, (int)n, MPI_CHAR, buf, cnt, disp, MPI_CHAR, 0, g->comm[0], &r);
        st = fsmoe_mpi_status(rc, "MPI_Igatherv", err);
        if (st == FSMOE_OK)
            st = fsmoe_mpi_wait(&r, 1, g->comm[0], what, err);
    }
    free(lens), free(cnt), free(disp);
    if (st != FSMOE_OK) {
        free(buf);
        return st;
    }
    *out = buf, *out_len = g->rank == 0 ? total : 0;
    return FSMOE_OK;
}
