/* Implements: tests of whole-model planning (planner/plan_model.c, design.md §4–§9) on every
 * shipped model and a matching cluster profile.
 *
 * Checked against independent derivations: the MoE block count from the model's `every/first`
 * rule, the forward degree against an exhaustive search of F, the prefix (ops before the first
 * MoE layer) summed here from the workload's per-block times, byte conservation of the gradient
 * partition, and the orderings the cost model guarantees (FSMoE ≤ Tutel-Improved ≤ Tutel, and
 * FSMoE ≤ DeepSpeed-MoE). */
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
#include "model.h"
#include "parallel.h"
#include "plan.h"
#include "plan_model.h"
#include "workload.h"

static const char *root(void)
{
    const char *r = getenv("FSMOE_SOURCE_ROOT");
    return r ? r : ".";
}

typedef struct {
    const char *model, *cluster;
} combo;

static const combo combos[] = {
    {"llama-2x70b-moe", "monta-a800"}, {"bert-base-moe", "parm-server"},
    {"gpt2-xl-moe", "testbed-a"},      {"gpt2-xl-moe", "testbed-b"},
    {"mixtral-8x7b", "testbed-a"},     {"mixtral-8x7b", "testbed-b"},
    {"mixtral-8x22b", "testbed-a"},    {"mixtral-8x22b", "testbed-b"},
    {"tiny-moe", "testbed-a"},         {"tiny-moe", "testbed-b"},
};

/* The layout main uses: the model's own, else the common one (design.md §2); when E does not
 * divide over all nodes of the cluster, the largest node count that works (what `--world`
 * would give). */
static int resolve_layout(fsmoe_model *m, const fsmoe_cluster *c, fsmoe_parallel *par)
{
    for (int nodes = c->nodes; nodes >= 1; nodes--) {
        *par = m->has_parallel ? m->parallel : fsmoe_parallel_common(nodes, c->gpus_per_node);
        fsmoe_model copy = *m;
        if (copy.experts_is_ep)
            copy.E = par->ep;
        fsmoe_error err = {0};
        if (fsmoe_parallel_validate(par, copy.E, "test", &err) == FSMOE_OK) {
            *m = copy;
            return 1;
        }
        if (m->has_parallel)
            return 0;
    }
    return 0;
}

static void load(const combo *cb, fsmoe_model *m, fsmoe_cluster *c, fsmoe_parallel *par,
                 char *cpath, size_t cpath_len)
{
    char mpath[1024];
    snprintf(mpath, sizeof mpath, "%s/models/%s.yaml", root(), cb->model);
    snprintf(cpath, cpath_len, "%s/clusters/%s.yaml", root(), cb->cluster);
    fsmoe_error err = {0};
    memset(m, 0, sizeof *m);
    memset(c, 0, sizeof *c);
    if (fsmoe_model_load(mpath, m, &err) != FSMOE_OK)
        fail_msg("%s", err.msg);
    if (fsmoe_cluster_load(cpath, c, &err) != FSMOE_OK)
        fail_msg("%s", err.msg);
    if (!resolve_layout(m, c, par))
        fail_msg("%s on %s: no valid layout", cb->model, cb->cluster);
}

static int same_plan(const fsmoe_plan *a, const fsmoe_plan *b)
{
    if (a->n_layers != b->n_layers || memcmp(&a->predicted, &b->predicted, sizeof a->predicted))
        return 0;
    if (a->gradient_tail_bytes != b->gradient_tail_bytes || strcmp(a->notes, b->notes))
        return 0;
    for (int i = 0; i < a->n_layers; i++) {
        const fsmoe_layer_plan *x = &a->layers[i], *y = &b->layers[i];
        if (x->fwd.r != y->fwd.r || x->bwd.r != y->bwd.r || x->bwd.t_gar_s != y->bwd.t_gar_s ||
            x->window_bytes != y->window_bytes || x->step2_bytes != y->step2_bytes ||
            x->carried_bytes != y->carried_bytes || x->a2a != y->a2a ||
            x->schedule != y->schedule || x->bwd.predicted_s != y->bwd.predicted_s)
            return 0;
    }
    return 1;
}

static void check_combo(const combo *cb)
{
    fsmoe_model m;
    fsmoe_cluster c;
    fsmoe_parallel par;
    char cpath[1024];
    load(cb, &m, &c, &par, cpath, sizeof cpath);
    fsmoe_error err = {0};
    plan_options opt = {.method = PLAN_METHOD_AUTO};
    fsmoe_plan p, q;
    memset(&p, 0, sizeof p);
    memset(&q, 0, sizeof q);
    if (plan_model(&m, &c, cpath, &par, &opt, &p, &err) != FSMOE_OK)
        fail_msg("%s on %s: %s", cb->model, cb->cluster, err.msg);

    /* one plan layer per MoE block, counted here from the every/first rule */
    long moe = 0;
    for (long b = 0; b < m.layers; b++)
        moe += b >= m.moe_first && (b - m.moe_first) % m.moe_every == 0;
    assert_int_equal(p.n_layers, moe);

    workload_lines w;
    assert_int_equal(workload_lines_init(&c, cpath, &par, &w, &err), FSMOE_OK);
    workload_shape s;
    workload_shape_from_model(&m, &s);
    workload_layer wl;
    workload_layer_init(&s, &par, &w, &wl);
    pipeline_result ex;
    assert_int_equal(pipeline_solve(&wl.fwd, PIPELINE_EXHAUSTIVE, &ex, NULL), FSMOE_OK);

    /* prefix: attention + FFN of every block before the first MoE one, and its attention */
    long b0 = p.n_layers > 0 ? p.layers[0].block : m.layers;
    double forward = b0 * (wl.attn_fwd_s + wl.ffn_fwd_s) + (b0 < m.layers ? wl.attn_fwd_s : 0);
    double grads = p.prefix_grad_bytes, sent = 0.0, dense_f = 0.0;
    for (int i = 0; i < p.n_layers; i++) {
        const fsmoe_layer_plan *L = &p.layers[i];
        assert_true(L->fwd.r >= 1 && L->fwd.r <= wl.r_max);
        assert_true(L->bwd.r >= 1 && L->bwd.r <= wl.r_max);
        assert_true(fabs(L->fwd.predicted_s - ex.time_s) <= 1e-12 * ex.time_s);
        /* backward: F at its t_gar is the exhaustive optimum */
        pipeline_problem b = wl.bwd;
        b.t_gar = L->bwd.t_gar_s;
        pipeline_result eb;
        assert_int_equal(pipeline_solve(&b, PIPELINE_EXHAUSTIVE, &eb, NULL), FSMOE_OK);
        assert_true(fabs(L->bwd.predicted_s - eb.time_s) <= 1e-12 * eb.time_s);
        assert_true(L->bwd.t_gar_s >= 0.0);
        forward += L->dense_fwd_s + L->fwd.predicted_s;
        dense_f += L->dense_fwd_s;
        grads += L->grad_bytes;
        sent += L->window_bytes + L->step2_bytes;
        assert_true(L->carried_bytes >= -1e-6);
    }
    assert_true(fabs(forward - p.predicted.forward_s) <= 1e-9 * forward);
    /* dense forward accounts for every block: blocks × attention + dense FFN blocks */
    double all_dense = m.layers * wl.attn_fwd_s + (m.layers - moe) * wl.ffn_fwd_s;
    double prefix = b0 * (wl.attn_fwd_s + wl.ffn_fwd_s) + (b0 < m.layers ? wl.attn_fwd_s : 0);
    assert_true(fabs(dense_f + prefix - all_dense) <= 1e-9 * all_dense);
    assert_true(fabs(sent + p.gradient_tail_bytes - grads) <= 1e-6 * grads);
    const fsmoe_predicted *pr = &p.predicted;
    assert_true(fabs(pr->iteration_s - (pr->forward_s + pr->backward_s + pr->tail_s)) <=
                1e-12 * pr->iteration_s);
    assert_true(pr->iteration_s <= pr->tutel_improved_s * (1 + 1e-9));
    assert_true(pr->tutel_improved_s <= pr->tutel_s * (1 + 1e-12));
    assert_true(pr->iteration_s <= pr->tutel_s * (1 + 1e-9));
    assert_true(pr->iteration_s <= pr->deepspeed_s * (1 + 1e-9));
    assert_true(pr->pipemoe_lina_s > 0.0);
    assert_string_equal(p.decided_by, "slsqp+integer");
    assert_string_equal(p.model_name, m.name);
    assert_true(p.E == m.E);
    printf("%-16s %-12s layers %2d r_f %2d r_b %2d  iter %.4f s  tutel %.4f  tutel-imp %.4f  "
           "lina %.4f  ds %.4f  tail %.3g B\n",
           cb->model, cb->cluster, p.n_layers, p.n_layers ? p.layers[0].fwd.r : 0,
           p.n_layers ? p.layers[0].bwd.r : 0, pr->iteration_s, pr->tutel_s,
           pr->tutel_improved_s, pr->pipemoe_lina_s, pr->deepspeed_s, p.gradient_tail_bytes);

    /* deterministic */
    assert_int_equal(plan_model(&m, &c, cpath, &par, &opt, &q, &err), FSMOE_OK);
    assert_true(same_plan(&p, &q));

    /* the other methods: parm and monta never pipeline, the paper's Algorithm 1 runs */
    for (int meth = PLAN_METHOD_FSMOE_PAPER; meth <= PLAN_METHOD_MONTA; meth++) {
        opt.method = (plan_method)meth;
        if (plan_model(&m, &c, cpath, &par, &opt, &q, &err) != FSMOE_OK)
            fail_msg("%s: %s", plan_method_name(opt.method), err.msg);
        assert_string_equal(q.method, plan_method_name(opt.method));
        for (int i = 0; i < q.n_layers; i++) {
            if (meth != PLAN_METHOD_FSMOE_PAPER) {
                assert_int_equal(q.layers[i].fwd.r, 1);
                assert_int_equal(q.layers[i].bwd.r, 1);
            }
            /* the recorded choices do not depend on the method */
            assert_int_equal(q.layers[i].schedule, p.layers[i].schedule);
            assert_int_equal(q.layers[i].a2a, p.layers[i].a2a);
        }
        /* the baselines do not depend on the method */
        assert_true(q.predicted.tutel_s == p.predicted.tutel_s);
        assert_true(q.predicted.deepspeed_s == p.predicted.deepspeed_s);
        assert_true(q.predicted.pipemoe_lina_s == p.predicted.pipemoe_lina_s);
        /* ours optimises over a superset of r: never slower than any other method's plan */
        assert_true(p.predicted.iteration_s <= q.predicted.iteration_s * (1 + 1e-9));
    }
    fsmoe_plan_free(&p);
    fsmoe_plan_free(&q);
    fsmoe_cluster_free(&c);
}

static void test_all_models(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof combos / sizeof combos[0]; i++)
        check_combo(&combos[i]);
}

static void test_method_names(void **state)
{
    (void)state;
    for (int i = 0; i < PLAN_METHOD_COUNT; i++)
        assert_int_equal(plan_method_from_name(plan_method_name((plan_method)i)), i);
    assert_int_equal(plan_method_from_name("fsmoe-paper"), PLAN_METHOD_FSMOE_PAPER);
    assert_int_equal(plan_method_from_name("tutel"), -1);
    assert_int_equal(plan_method_from_name(NULL), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_method_names),
        cmocka_unit_test(test_all_models),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
