/* Implements: the unit test of the 2DH AllToAll's plan (libfsmoe/a2a_2dh.h) against the flat
 * AllToAllv, without MPI: every member's plan is made, and the two phases are carried out by
 * copying between the members' buffers the way an AllToAllv would (phase 1 among the node's
 * members, phase 2 among the members with one local index). Each row carries (source,
 * destination, index), so a row at a wrong place, a lost row or a duplicated one is counted.
 * Cases: group shapes 2×2, 2×4, 4×2 and 3×3 with node-major and interleaved numbering,
 * random counts with zeros, a member that sends nothing, one that receives nothing; and
 * shapes that are not hierarchical. A layout's groups (fsmoe_a2a_2dh_group) against brute
 * force: every rank's group collected by comparing colours, its shape made member by member. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "a2a_2dh.h"

typedef struct {
    int s, d, i;
} row_t;

static unsigned long long rng_state = 88172645463325252ull;
static long rnd(long n)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (long)(rng_state % (unsigned long long)n);
}

/* One exchange phase among `peers` (group ranks) of every member; member x's peer list is
 * peers_of[x] (n entries); counts and displacements per member from its plan. */
static void phase(int P, const fsmoe_a2a_2dh_plan *pl, int which, row_t **send, row_t **recv)
{
    for (int x = 0; x < P; x++) {
        const fsmoe_a2a_2dh_plan *p = &pl[x];
        int n = which == 1 ? p->locals : p->nodes;
        const int *peer = which == 1 ? p->peer1 : p->peer2;
        const long *rc = which == 1 ? p->r1c : p->r2c, *rd = which == 1 ? p->r1d : p->r2d;
        for (int q = 0; q < n; q++) {
            const fsmoe_a2a_2dh_plan *o = &pl[peer[q]];
            /* my index among the sender's peers */
            int on = which == 1 ? o->locals : o->nodes, mine = -1;
            const int *opeer = which == 1 ? o->peer1 : o->peer2;
            for (int z = 0; z < on; z++)
                if (opeer[z] == x)
                    mine = z;
            assert_true(mine >= 0);
            long sc = which == 1 ? o->s1c[mine] : o->s2c[mine];
            long sd = which == 1 ? o->s1d[mine] : o->s2d[mine];
            assert_int_equal(sc, rc[q]); /* both sides agree on the count */
            memcpy(recv[x] + rd[q], send[peer[q]] + sd, (size_t)sc * sizeof(row_t));
        }
    }
}

static void move(const fsmoe_a2a_2dh_block *b, int n, const row_t *src, row_t *dst)
{
    fsmoe_a2a_2dh_move_host(b, n, src, dst, sizeof(row_t));
}

static void check_exchange(const int *node_of, int P, long max_rows, int sparse)
{
    fsmoe_a2a_2dh_shape sh;
    assert_int_equal(fsmoe_a2a_2dh_shape_make(node_of, P, &sh), 1);
    int *C = calloc((size_t)P * P, sizeof(int));
    for (int s = 0; s < P; s++)
        for (int d = 0; d < P; d++)
            C[s * P + d] = sparse && rnd(3) == 0 ? 0 : (int)rnd(max_rows + 1);
    if (sparse) { /* member 0 sends nothing, member P-1 receives nothing */
        for (int d = 0; d < P; d++)
            C[d] = 0;
        for (int s = 0; s < P; s++)
            C[s * P + P - 1] = 0;
    }
    fsmoe_a2a_2dh_plan *pl = calloc((size_t)P, sizeof *pl);
    row_t **snd = calloc((size_t)P, sizeof *snd), **A = calloc((size_t)P, sizeof *A);
    row_t **B = calloc((size_t)P, sizeof *B), **Cs = calloc((size_t)P, sizeof *Cs);
    row_t **got = calloc((size_t)P, sizeof *got);
    long *ns = calloc((size_t)P, sizeof(long)), *nr = calloc((size_t)P, sizeof(long));
    for (int x = 0; x < P; x++) {
        assert_int_equal(fsmoe_a2a_2dh_plan_make(&sh, x, C, &pl[x]), 0);
        for (int p = 0; p < P; p++)
            ns[x] += C[x * P + p], nr[x] += C[p * P + x];
        snd[x] = malloc((size_t)(ns[x] + 1) * sizeof(row_t));
        got[x] = malloc((size_t)(nr[x] + 1) * sizeof(row_t));
        A[x] = malloc((size_t)(pl[x].rows_a + 1) * sizeof(row_t));
        B[x] = malloc((size_t)(pl[x].rows_b + 1) * sizeof(row_t));
        Cs[x] = malloc((size_t)(pl[x].rows_b + 1) * sizeof(row_t));
        long at = 0;
        for (int d = 0; d < P; d++)
            for (long i = 0; i < C[x * P + d]; i++)
                snd[x][at++] = (row_t){x, d, (int)i};
        memset(got[x], 0xff, (size_t)(nr[x] + 1) * sizeof(row_t));
    }
    for (int x = 0; x < P; x++)
        move(pl[x].pack1, pl[x].n_pack1, snd[x], A[x]);
    phase(P, pl, 1, A, B);
    for (int x = 0; x < P; x++)
        move(pl[x].pack2, pl[x].n_pack2, B[x], Cs[x]);
    phase(P, pl, 2, Cs, A);
    for (int x = 0; x < P; x++)
        move(pl[x].unpack, pl[x].n_unpack, A[x], got[x]);
    long wrong = 0;
    for (int x = 0; x < P; x++) { /* the flat AllToAllv's receive order: by source, in order */
        long at = 0;
        for (int s = 0; s < P; s++)
            for (long i = 0; i < C[s * P + x]; i++, at++)
                wrong += got[x][at].s != s || got[x][at].d != x || got[x][at].i != (int)i;
        wrong += got[x][nr[x]].s != -1; /* nothing written past the end */
    }
    assert_int_equal(wrong, 0);
    for (int x = 0; x < P; x++) {
        fsmoe_a2a_2dh_plan_free(&pl[x]);
        free(snd[x]), free(A[x]), free(B[x]), free(Cs[x]), free(got[x]);
    }
    free(pl), free(snd), free(A), free(B), free(Cs), free(got), free(ns), free(nr), free(C);
}

static void test_node_major(void **state)
{
    (void)state;
    const int shapes[][2] = {{2, 2}, {2, 4}, {4, 2}, {3, 3}};
    for (int k = 0; k < 4; k++) {
        int n = shapes[k][0], g = shapes[k][1], node_of[16];
        for (int p = 0; p < n * g; p++)
            node_of[p] = p / g;
        for (int rep = 0; rep < 20; rep++)
            check_exchange(node_of, n * g, rep % 2 ? 5 : 1, rep % 3 == 0);
    }
}

/* Group ranks not node-major (e.g. a group strided across nodes): 0,1,0,1,… and a shuffle. */
static void test_interleaved(void **state)
{
    (void)state;
    const int a[] = {0, 1, 0, 1}, b[] = {5, 2, 2, 9, 5, 9}, c[] = {1, 0, 1, 0, 1, 0, 1, 0};
    for (int rep = 0; rep < 20; rep++) {
        check_exchange(a, 4, 4, rep % 2);
        check_exchange(b, 6, 3, rep % 2);
        check_exchange(c, 8, 6, rep % 2);
    }
}

static void test_shape(void **state)
{
    (void)state;
    fsmoe_a2a_2dh_shape sh;
    const int one_node[] = {3, 3, 3, 3}, one_each[] = {0, 1, 2, 3}, uneven[] = {0, 0, 0, 1, 1, 1, 1, 0, 2};
    assert_int_equal(fsmoe_a2a_2dh_shape_make(one_node, 4, &sh), 0);
    assert_int_equal(fsmoe_a2a_2dh_shape_make(one_each, 4, &sh), 0);
    assert_int_equal(fsmoe_a2a_2dh_shape_make(uneven, 9, &sh), 0);
    assert_int_equal(fsmoe_a2a_2dh_shape_make(one_node, 2, &sh), 0);
    const int two[] = {7, 4, 7, 4, 4, 7};
    assert_int_equal(fsmoe_a2a_2dh_shape_make(two, 6, &sh), 1);
    assert_int_equal(sh.nodes, 2);
    assert_int_equal(sh.locals, 3);
    const int want[] = {0, 2, 5, 1, 3, 4}; /* node 7 first (lowest member 0), then node 4 */
    for (int x = 0; x < 6; x++)
        assert_int_equal(sh.member[x], want[x]);
    /* a member outside the group has no plan */
    fsmoe_a2a_2dh_plan p;
    int counts[36] = {0};
    assert_int_equal(fsmoe_a2a_2dh_plan_make(&sh, 6, counts, &p), -1);
    fsmoe_a2a_2dh_plan_free(&p);
}

/* Brute force: every group of g, members collected rank by rank, each shape checked. */
static int group_2dh_brute(const fsmoe_parallel *p, fsmoe_group g, fsmoe_a2a_2dh_shape *first)
{
    int W = p->world, ok = 1;
    for (int r = 0; r < W && ok; r++) {
        int cr, key, node_of[64], n = 0;
        fsmoe_group_color(p, g, r, &cr, &key);
        for (int q = 0; q < W; q++) {
            int cq;
            fsmoe_group_color(p, g, q, &cq, &key);
            if (cq == cr)
                node_of[n++] = q / p->gpus_per_node;
        }
        fsmoe_a2a_2dh_shape sh;
        ok = fsmoe_a2a_2dh_shape_make(node_of, n, &sh);
        if (ok && r == 0)
            *first = sh;
    }
    return ok;
}

static void test_layout_groups(void **state)
{
    (void)state;
    const fsmoe_group groups[] = {FSMOE_GROUP_EP, FSMOE_GROUP_EP_ESP, FSMOE_GROUP_MP,
                                  FSMOE_GROUP_ESP, FSMOE_GROUP_DP, FSMOE_GROUP_EDP};
    int checked = 0, hierarchical = 0;
    for (int W = 4; W <= 24; W += 2)
        for (int G = 1; G <= W; G++)
            for (int mp = 1; mp <= W; mp++)
                for (int ep = 1; ep <= W; ep++)
                    for (int esp = 1; esp <= W; esp++) {
                        if (W % G || W % mp || W % (ep * esp))
                            continue;
                        fsmoe_parallel p = {.world = W, .gpus_per_node = G, .dp = W / mp,
                                            .mp = mp, .ep = ep, .esp = esp, .pp = 1};
                        for (size_t k = 0; k < sizeof groups / sizeof groups[0]; k++) {
                            fsmoe_a2a_2dh_shape a, b;
                            int got = fsmoe_a2a_2dh_group(&p, groups[k], &a);
                            int want = group_2dh_brute(&p, groups[k], &b);
                            assert_int_equal(got, want);
                            if (got) {
                                assert_int_equal(a.nodes, b.nodes);
                                assert_int_equal(a.locals, b.locals);
                                assert_memory_equal(a.member, b.member, (size_t)W * sizeof(int));
                            }
                            checked++, hierarchical += got;
                        }
                    }
    assert_true(hierarchical > 0 && hierarchical < checked); /* both answers occur */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_major),
        cmocka_unit_test(test_interleaved),
        cmocka_unit_test(test_shape),
        cmocka_unit_test(test_layout_groups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
