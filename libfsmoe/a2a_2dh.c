/* Implements: the 2DH AllToAll's plan (a2a_2dh.h). */
#include "a2a_2dh.h"

#include <stdlib.h>
#include <string.h>

int fsmoe_a2a_2dh_shape_make(const int *node_of, int P, fsmoe_a2a_2dh_shape *out)
{
    if (P < 4 || P > FSMOE_A2A_2DH_MAX_MEMBERS)
        return 0;
    memset(out, 0, sizeof *out);
    int node_id[FSMOE_A2A_2DH_MAX_MEMBERS], count[FSMOE_A2A_2DH_MAX_MEMBERS], n = 0;
    int idx[FSMOE_A2A_2DH_MAX_MEMBERS]; /* member p's node index (order of lowest member) */
    for (int p = 0; p < P; p++) {
        int b = 0;
        while (b < n && node_id[b] != node_of[p])
            b++;
        if (b == n)
            node_id[n] = node_of[p], count[n++] = 0;
        idx[p] = b;
        count[b]++;
    }
    int g = count[0];
    if (n < 2 || g < 2)
        return 0;
    for (int b = 1; b < n; b++)
        if (count[b] != g)
            return 0;
    out->P = P, out->nodes = n, out->locals = g;
    int fill[FSMOE_A2A_2DH_MAX_MEMBERS] = {0};
    for (int p = 0; p < P; p++)
        out->member[idx[p] * g + fill[idx[p]]++] = p;
    return 1;
}

int fsmoe_a2a_2dh_group(const fsmoe_parallel *p, fsmoe_group g, fsmoe_a2a_2dh_shape *out)
{
    int W = p->world, G = p->gpus_per_node;
    if (W < 4 || G < 1)
        return 0;
    /* every group's members' nodes, group by group (colors are below W; members in world
     * order, which is their group order) */
    int *color = malloc(3 * (size_t)W * sizeof(int) + sizeof(int));
    if (!color)
        return 0;
    int *start = color + W, *node_of = start + W, ok = 1, key;
    memset(start, 0, (size_t)W * sizeof(int));
    for (int r = 0; r < W && ok; r++) {
        ok = fsmoe_group_color(p, g, r, &color[r], &key) == 0 && color[r] >= 0 && color[r] < W;
        if (ok)
            start[color[r]]++;
    }
    for (int c = 0, at = 0; c < W && ok; c++) { /* counts -> where each group's list starts */
        int n = start[c];
        start[c] = at, at += n;
    }
    for (int r = 0; r < W && ok; r++)
        node_of[start[color[r]]++] = r / G; /* start[c] ends at the next group's start */
    fsmoe_a2a_2dh_shape shape, first = {0};
    for (int c = 0, at = 0; c < W && ok; c++) {
        if (start[c] == at)
            continue; /* no group of this color */
        ok = fsmoe_a2a_2dh_shape_make(node_of + at, start[c] - at, &shape);
        if (c == color[0])
            first = shape;
        at = start[c];
    }
    if (ok && out)
        *out = first;
    free(color);
    return ok;
}

/* Exclusive prefix sums of c (n entries) into d; the total. */
static long prefix(const long *c, long *d, int n)
{
    long t = 0;
    for (int i = 0; i < n; i++)
        d[i] = t, t += c[i];
    return t;
}

static void add_block(fsmoe_a2a_2dh_block *b, int *n, long src, long dst, long rows)
{
    if (rows > 0)
        b[(*n)++] = (fsmoe_a2a_2dh_block){src, dst, rows};
}

int fsmoe_a2a_2dh_plan_make(const fsmoe_a2a_2dh_shape *sh, int me, const int *counts, fsmoe_a2a_2dh_plan *out)
{
    memset(out, 0, sizeof *out);
    int P = sh->P, n = sh->nodes, g = sh->locals;
    int a = -1, i = -1;
    for (int x = 0; x < P; x++)
        if (sh->member[x] == me)
            a = x / g, i = x % g;
    if (a < 0)
        return -1;
    out->nodes = n, out->locals = g, out->node = a, out->local = i;
#define MEM(b, j) (sh->member[(b) * g + (j)])
#define C(s, d) ((long)counts[(long)(s) * P + (d)])
    /* where each destination's rows start in the flat send buffer, each source's in the
     * flat receive buffer (group-rank order) */
    long *off = malloc(2 * (size_t)P * sizeof(long));
    out->pack1 = malloc(3 * (size_t)P * sizeof(fsmoe_a2a_2dh_block));
    if (!off || !out->pack1) {
        free(off);
        fsmoe_a2a_2dh_plan_free(out);
        return -1;
    }
    out->pack2 = out->pack1 + P, out->unpack = out->pack1 + 2 * P;
    long *soff = off, *roff = off + P;
    for (int p = 0, s = 0, r = 0; p < P; p++) {
        soff[p] = s, roff[p] = r;
        s += C(me, p), r += C(p, me);
    }
    for (int j = 0; j < g; j++) {
        out->peer1[j] = MEM(a, j);
        out->s1c[j] = out->r1c[j] = 0;
        for (int b = 0; b < n; b++) {
            out->s1c[j] += C(me, MEM(b, j));
            out->r1c[j] += C(MEM(a, j), MEM(b, i));
        }
    }
    long rows_send = prefix(out->s1c, out->s1d, g);
    out->rows_b = prefix(out->r1c, out->r1d, g);
    /* pack1: for each local j, the rows for (b, j), b ascending */
    long at = 0;
    for (int j = 0; j < g; j++)
        for (int b = 0; b < n; b++) {
            int d = MEM(b, j);
            add_block(out->pack1, &out->n_pack1, soff[d], at, C(me, d));
            at += C(me, d);
        }
    /* phase 2: to (b, i) the rows of (a, k) for (b, i), k ascending; from (c, i) the rows of
     * (c, k) for me */
    for (int b = 0; b < n; b++) {
        out->peer2[b] = MEM(b, i);
        out->s2c[b] = out->r2c[b] = 0;
        for (int k = 0; k < g; k++) {
            out->s2c[b] += C(MEM(a, k), MEM(b, i));
            out->r2c[b] += C(MEM(b, k), me);
        }
    }
    prefix(out->s2c, out->s2d, n);
    long rows_recv = prefix(out->r2c, out->r2d, n);
    out->rows_a = rows_send > rows_recv ? rows_send : rows_recv;
    /* pack2: stage B holds, per source local k (r1d[k]), the blocks for (b, i), b ascending;
     * stage C wants, per node b, the blocks of (a, k), k ascending */
    at = 0;
    for (int b = 0; b < n; b++)
        for (int k = 0; k < g; k++) {
            long src = out->r1d[k];
            for (int bb = 0; bb < b; bb++)
                src += C(MEM(a, k), MEM(bb, i));
            add_block(out->pack2, &out->n_pack2, src, at, C(MEM(a, k), MEM(b, i)));
            at += C(MEM(a, k), MEM(b, i));
        }
    /* unpack: from node c's block, source (c, k)'s rows to the flat receive order */
    at = 0;
    for (int c = 0; c < n; c++)
        for (int k = 0; k < g; k++) {
            int s = MEM(c, k);
            add_block(out->unpack, &out->n_unpack, at, roff[s], C(s, me));
            at += C(s, me);
        }
#undef MEM
#undef C
    free(off);
    return 0;
}

void fsmoe_a2a_2dh_plan_free(fsmoe_a2a_2dh_plan *p)
{
    if (!p)
        return;
    free(p->pack1);
    p->pack1 = p->pack2 = p->unpack = NULL;
    p->n_pack1 = p->n_pack2 = p->n_unpack = 0;
}

void fsmoe_a2a_2dh_move_host(const fsmoe_a2a_2dh_block *b, int n, const void *src, void *dst,
                       size_t row_bytes)
{
    for (int i = 0; i < n; i++)
        memcpy((char *)dst + (size_t)b[i].dst * row_bytes,
               (const char *)src + (size_t)b[i].src * row_bytes, (size_t)b[i].rows * row_bytes);
}
