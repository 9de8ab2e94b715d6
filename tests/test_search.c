/* Tests: the layout search (planner/search.h) against brute force on small worlds. The brute force
 * tries every 5-tuple (dp, mp, ep, esp, pp) of integers 1..world with dp·mp·pp = world (not only
 * divisors), applies the search's rules as search.h states them, plans each survivor, and times
 * the plan with the discrete-event simulator (each pipeline as GPipe and as 1F1B) in a simulator
 * of its own; its fastest layout that fits must be the search's first, every layout it planned
 * must be in the search's list with the same state and memory, and the counts must agree. Also: a
 * memory limit between the candidates' needs moves the choice to the fastest that fits,
 * determinism, and the refusals. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "test_load.h"
#include "gpipe.h"
#include "model.h"
#include "plan_model.h"
#include "search.h"
#include "sim.h"
#include "sim_schedules.h"


typedef struct {
    fsmoe_parallel par;
    int one_f_one_b;
    int planned, fits;
    double sim_s, mem;
} brute_row;

/* Every layout of `world` by brute force: returns how many passed the rules; rows[] holds them. */
static int brute_force(const fsmoe_model *m0, const fsmoe_cluster *c, const char *cpath, int world,
                       int gpn, long global_batch, double limit, brute_row *rows, int max)
{
    int n = 0;
    sim s;
    sim_init(&s);
    for (int dp = 1; dp <= world; dp++)
        for (int mp = 1; mp <= world; mp++)
            for (int pp = 1; pp <= world; pp++) {
            if (dp * mp * pp != world)
                continue;
            for (int ep = 1; ep <= world; ep++)
                for (int esp = 1; esp <= world; esp++) {
                    fsmoe_parallel par = {world, gpn, dp, mp, ep, esp, pp};
                    long kv = m0->kv_heads > 0 ? m0->kv_heads : m0->heads;
                    if (m0->heads % mp || kv % mp || m0->vocab % mp || global_batch % dp)
                        continue;
                    fsmoe_model m = *m0;
                    m.B = global_batch / dp;
                    fsmoe_error err = {0};
                    if (fsmoe_model_resolve(&m, &par, "brute", &err) != FSMOE_OK)
                        continue;
                    /* pipeline stages: equal blocks, the same MoE placement, B into GPipe's
                     * default micro-batches (the largest divisor of B up to 4·pp) */
                    int micro = 1;
                    for (int d = 1; d <= m.B && d <= 4 * pp; d++)
                        if (m.B % d == 0)
                            micro = d;
                    if (pp > 1 && (m.layers % pp || m.moe_first >= m.moe_every ||
                                   (m.layers / pp) % m.moe_every))
                        continue;
                    fsmoe_plan p;
                    memset(&p, 0, sizeof p);
                    plan_options opt = {.method = PLAN_METHOD_AUTO};
                    int planned = plan_model(&m, c, cpath, &par, &opt, &p, &err) == FSMOE_OK;
                    /* a planned pipeline is listed twice: GPipe, then 1F1B */
                    for (int f1b = 0; f1b < (planned && pp > 1 ? 2 : 1); f1b++) {
                        assert_true(n < max);
                        brute_row *r = &rows[n++];
                        memset(r, 0, sizeof *r);
                        r->par = par, r->one_f_one_b = f1b;
                        /* the memory model on one stage's blocks and the micro-batches it
                         * holds: all of them (GPipe) or at most pp (1F1B) */
                        fsmoe_model mm = m;
                        fsmoe_parallel mpar = par;
                        mm.layers = m.layers / pp;
                        mm.B = m.B / micro * (f1b && pp < micro ? pp : micro);
                        mpar.pp = 1, mpar.world = world / pp;
                        fsmoe_mem_shape ms;
                        fsmoe_memory mem;
                        fsmoe_model_mem_shape(&mm, &mpar, &ms);
                        fsmoe_memory_estimate(&ms, &mem);
                        r->mem = mem.total;
                        r->fits = limit <= 0 || mem.total <= limit;
                        if (!planned)
                            continue;
                        sim_model sm;
                        assert_int_equal(sim_model_of_plan(&p, &m, c, cpath, &sm, &err), FSMOE_OK);
                        if (pp > 1) {
                            assert_int_equal(p.pipeline.micro_batches, micro);
                            p.pipeline.one_f_one_b = f1b;
                            assert_int_equal(gpipe_schedule_time(&s, &sm, &p, SIM_SCHED_PLAN,
                                                                 &r->sim_s, NULL, &err),
                                             FSMOE_OK);
                            p.pipeline.one_f_one_b = 0;
                        } else {
                            assert_int_equal(sim_schedule_time(&s, &sm, SIM_SCHED_PLAN, NULL,
                                                               &r->sim_s, &err),
                                             FSMOE_OK);
                        }
                        sim_model_free(&sm);
                        r->planned = 1;
                        /* the plan's closed forms are within a few per cent of the simulator
                         * (the search ranks by the latter) */
                        if (!f1b)
                            assert_true(fabs(p.predicted.iteration_s - r->sim_s) <=
                                        0.05 * r->sim_s);
                    }
                    fsmoe_plan_free(&p);
                }
            }
    sim_free(&s);
    return n;
}

static void check_world(const char *model, const char *cluster, int world, double limit,
                        int *ranked_out)
{
    char cpath[1024];
    fsmoe_model m;
    fsmoe_cluster c;
    fsmoe_error err = {0};
    test_load_inputs(model, cluster, &m, &c, cpath, sizeof cpath);
    int gpn = c.gpus_per_node;
    long gb = m.B * (world / gpn); /* the common layout's dp = nodes */
    brute_row rows[1024];
    int n = brute_force(&m, &c, cpath, world, gpn, gb, limit, rows, 1024);
    search_result r;
    plan_options opt = {.method = PLAN_METHOD_AUTO};
    assert_int_equal(search_layouts(&m, &c, cpath, world, gpn, gb, limit, &opt, &r, &err),
                     FSMOE_OK);
    assert_int_equal(r.n, n);
    int best = -1, n_fit = 0;
    for (int i = 0; i < n; i++) {
        const brute_row *b = &rows[i];
        int found = 0;
        for (int j = 0; j < r.n; j++) {
            const search_candidate *x = &r.c[j];
            if (memcmp(&x->par, &b->par, sizeof b->par) != 0 || x->one_f_one_b != b->one_f_one_b)
                continue;
            found++;
            assert_true(fabs(x->mem_total - b->mem) <= 1e-9 * b->mem);
            /* the savings the table suggests: ZeRO 3 on top of full recomputation shards the
             * states (full recomputation alone may keep more where a stage holds one block: its
             * input beside the block's recomputed activations) */
            assert_true(x->par.dp > 1 ? x->mem_saving[1] < x->mem_saving[0]
                                      : x->mem_saving[1] <= x->mem_saving[0]);
            if (!b->planned)
                assert_int_equal(x->state, SEARCH_UNPLANNED);
            else
                assert_int_equal(x->state, b->fits ? SEARCH_RANKED : SEARCH_NO_FIT);
        }
        assert_int_equal(found, 1);
        if (b->planned && b->fits) {
            n_fit++;
            if (best < 0 || b->sim_s < rows[best].sim_s ||
                (b->sim_s == rows[best].sim_s && b->mem < rows[best].mem))
                best = i;
        }
    }
    assert_int_equal(r.n_ranked, n_fit);
    if (best >= 0) {
        const search_candidate *top = &r.c[r.rank[0]];
        assert_memory_equal(&top->par, &rows[best].par, sizeof top->par);
        assert_int_equal(top->one_f_one_b, rows[best].one_f_one_b);
        for (int i = 1; i < r.n_ranked; i++) /* ranked by time */
            assert_true(r.c[r.rank[i - 1]].iteration_s <= r.c[r.rank[i]].iteration_s);
    }
    /* deterministic: the same search twice, the same order */
    search_result again;
    assert_int_equal(search_layouts(&m, &c, cpath, world, gpn, gb, limit, &opt, &again, &err),
                     FSMOE_OK);
    assert_int_equal(again.n_ranked, r.n_ranked);
    assert_memory_equal(again.rank, r.rank, (size_t)r.n_ranked * sizeof *r.rank);
    search_free(&again);
    *ranked_out = r.n_ranked;
    search_free(&r);
    fsmoe_cluster_free(&c);
}

static void test_brute_force_small_worlds(void **state)
{
    (void)state;
    int ranked = 0;
    check_world("tiny-moe", "testbed-b", 8, 0, &ranked);
    assert_true(ranked >= 3); /* something to choose between */
    check_world("tiny-moe", "testbed-b", 16, 0, &ranked);
    assert_true(ranked >= 3);
    check_world("mixtral-8x7b", "testbed-a", 16, 0, &ranked);
    assert_true(ranked >= 3);
    check_world("gpt2-xl-moe", "testbed-b", 8, 0, &ranked);
    assert_true(ranked >= 2);
    check_world("comm-moe", "testbed-b", 8, 0, &ranked);
    assert_true(ranked >= 2);
}

/* comm-moe on 8 GPUs (its fastest layout, no expert parallelism, is not its smallest). A limit
 * just below the unconstrained best's need: the best moves to another layout, the old
 * one is listed over the limit; a limit below every need: nothing ranked. */
static void test_memory_limit_moves_choice(void **state)
{
    (void)state;
    char cpath[1024];
    fsmoe_model m;
    fsmoe_cluster c;
    fsmoe_error err = {0};
    test_load_inputs("comm-moe", "testbed-b", &m, &c, cpath, sizeof cpath);
    plan_options opt = {.method = PLAN_METHOD_AUTO};
    search_result r, s;
    long gb = m.B * 2;
    assert_int_equal(search_layouts(&m, &c, cpath, 8, 4, gb, 0, &opt, &r, &err), FSMOE_OK);
    assert_true(r.n_ranked >= 2);
    const search_candidate *best = &r.c[r.rank[0]];
    double least = best->mem_total;
    for (int i = 0; i < r.n_ranked; i++)
        least = fmin(least, r.c[r.rank[i]].mem_total);
    if (least < best->mem_total) { /* some layout needs less than the best */
        double limit = best->mem_total * (1 - 1e-6);
        assert_int_equal(search_layouts(&m, &c, cpath, 8, 4, gb, limit, &opt, &s, &err),
                         FSMOE_OK);
        assert_true(s.n_ranked >= 1 && s.n_ranked < r.n_ranked);
        const search_candidate *nb = &s.c[s.rank[0]];
        assert_true(nb->mem_total <= limit);
        assert_true(nb->iteration_s >= best->iteration_s);
        assert_int_equal(s.c[r.rank[0]].state, SEARCH_NO_FIT);
        /* the fastest of those under the limit */
        for (int i = 0; i < r.n_ranked; i++) {
            const search_candidate *x = &r.c[r.rank[i]];
            if (x->mem_total <= limit) {
                assert_memory_equal(&x->par, &nb->par, sizeof x->par);
                break;
            }
        }
        search_free(&s);
    } else {
        fail_msg("comm-moe on 8 GPUs: the fastest layout also needs the least memory; pick a "
                 "case with a trade-off");
    }
    assert_int_equal(search_layouts(&m, &c, cpath, 8, 4, gb, least * 0.5, &opt, &s, &err),
                     FSMOE_OK);
    assert_int_equal(s.n_ranked, 0);
    search_free(&s);
    /* a world that is not whole nodes, and no samples: refused */
    assert_int_equal(search_layouts(&m, &c, cpath, 18, 4, gb, 0, &opt, &s, &err),
                     FSMOE_ERR_VALUE);
    assert_int_equal(search_layouts(&m, &c, cpath, 8, 4, 0, 0, &opt, &s, &err),
                     FSMOE_ERR_VALUE);
    search_free(&r);
    fsmoe_cluster_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_brute_force_small_worlds),
        cmocka_unit_test(test_memory_limit_moves_choice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
