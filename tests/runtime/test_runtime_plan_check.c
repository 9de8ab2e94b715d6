/* Tests of runtime/plan_check.c (design.md §9, §10.1): an in-memory plan made for a 4-rank run
 * (2 nodes × 2, ep 2, tiny-moe) is accepted with its per-layer r and predicted time; one row per
 * field changes that field in the plan or in the run and expects FSMOE_ERR_VALUE with the field
 * as written in the plan file right after the file name. plan_check_file is checked on a plan
 * written to disk against the real model file's SHA-256. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan_check.h"
#include "real.h"
#include "sha256.h"

#define PLAN "plans/x.yaml"
static const char sha_a[] = "aaaa567890123456789012345678901234567890123456789012345678901234";
static const char sha_b[] = "bbbb567890123456789012345678901234567890123456789012345678901234";

static rt_config make_config(void)
{
    rt_config c;
    config_defaults(&c);
    snprintf(c.name, sizeof c.name, "tiny-moe");
    c.V = 256, c.M = 64, c.H = 256, c.heads = 4, c.layers = 4, c.L = 128, c.B = 8, c.E = 4;
    c.k = 2, c.f = 1.2, c.expert = 0, c.moe_every = 1, c.moe_first = 0;
    return c;
}

/* The plan fsmoe-plan would write for make_config() on 2 nodes × 2 GPUs with ep 2. */
static void make_plan(fsmoe_plan *p, fsmoe_layer_plan *layers)
{
    memset(p, 0, sizeof *p);
    snprintf(p->model_name, sizeof p->model_name, "tiny-moe");
    snprintf(p->model_path, sizeof p->model_path, "models/tiny-moe.yaml");
    snprintf(p->model_sha256, sizeof p->model_sha256, "%s", sha_a);
    snprintf(p->cluster_name, sizeof p->cluster_name, "testbed-b");
    p->bytes_per_element = (int)sizeof(real);
    p->parallel = (fsmoe_parallel){.world = 4, .gpus_per_node = 2, .dp = 4, .mp = 1, .ep = 2,
                                   .esp = 1, .pp = 1};
    p->ranks = FSMOE_RANKS_NODE_MAJOR;
    p->edp = 2;
    p->B = 8, p->B_global = 32, p->L = 128, p->M = 64, p->H = 256, p->E = 4, p->k = 2;
    p->expert = FSMOE_EXPERT_GPT;
    p->capacity = FSMOE_CAPACITY_FACTOR, p->f = 1.2;
    p->split = FSMOE_SPLIT_ALLTOALLV;
    p->n_layers = 4;
    p->layers = layers;
    for (int i = 0; i < 4; i++) {
        memset(&layers[i], 0, sizeof layers[i]);
        layers[i].index = i, layers[i].block = i;
        layers[i].fwd.r = i + 1, layers[i].bwd.r = 2 * i + 1;
    }
    p->predicted.iteration_s = 0.0125;
}

static void test_accepts_matching_plan(void **state)
{
    (void)state;
    fsmoe_layer_plan layers[4];
    fsmoe_plan p;
    make_plan(&p, layers);
    rt_config c = make_config();
    rt_layout lay = layout_make(4, 1, 2, 2, c.E, c.B);
    plan_check_result r;
    fsmoe_error err = {0};
    if (plan_check(PLAN, &p, sha_a, &c, &lay, &r, &err) != FSMOE_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(r.n_moe, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(r.block[i], i);
        assert_int_equal(r.r_fwd[i], i + 1);
        assert_int_equal(r.r_bwd[i], 2 * i + 1);
    }
    assert_true(r.iteration_s == 0.0125);
    assert_string_equal(r.cluster, "testbed-b");
    plan_check_result_free(&r);
    plan_check_result_free(&r); /* twice is safe */
    assert_null(r.block);

    /* MoE every 2 from block 1: layers sit in blocks 1 and 3 */
    c.moe_every = 2, c.moe_first = 1;
    p.n_layers = 2;
    layers[0].block = 1, layers[1].block = 3;
    assert_int_equal(plan_check(PLAN, &p, NULL, &c, &lay, &r, &err), FSMOE_OK);
    assert_int_equal(r.n_moe, 2);
    assert_int_equal(r.block[1], 3);
    assert_int_equal(r.r_bwd[1], 3);
    plan_check_result_free(&r);

    /* a single-rank plan for a single-rank run */
    make_plan(&p, layers);
    p.parallel = (fsmoe_parallel){.world = 1, .gpus_per_node = 1, .dp = 1, .mp = 1, .ep = 1,
                                  .esp = 1, .pp = 1};
    p.edp = 1, p.B_global = 8;
    c = make_config();
    lay = layout_make(1, 0, 1, 1, c.E, c.B);
    assert_int_equal(plan_check(PLAN, &p, sha_a, &c, &lay, &r, &err), FSMOE_OK);
    plan_check_result_free(&r);
}

enum edit {
    E_NONE, E_NAME, E_SHA, E_ELEMENT, E_WORLD, E_GPN, E_GPN_UNKNOWN, E_MP, E_ESP, E_PP, E_DP,
    E_EP, E_EDP, E_BATCH, E_GLOBAL_BATCH, E_SEQ, E_M, E_H, E_E, E_K, E_EXPERT, E_FACTOR,
    E_PLAN_DROPLESS, E_RUN_DROPLESS, E_SPLIT, E_N_LAYERS, E_RUN_EVERY2, E_BLOCK, E_R_FWD, E_R_BWD
};

static void apply_edit(enum edit e, fsmoe_plan *p, rt_config *c, rt_layout *lay,
                       const char **sha)
{
    fsmoe_parallel *par = &p->parallel;
    switch (e) {
    case E_NONE: break;
    case E_NAME: snprintf(p->model_name, sizeof p->model_name, "mixtral-8x7b"); break;
    case E_SHA: *sha = sha_b; break;
    case E_ELEMENT: p->bytes_per_element = 2; break;
    case E_WORLD: *lay = layout_make(2, 1, 2, 2, c->E, c->B); break;
    case E_GPN: lay->gpus_per_node = 1; break;
    case E_GPN_UNKNOWN: lay->gpus_per_node = 0, par->gpus_per_node = 4; break;
    case E_MP: par->mp = 2, par->dp = 2; break;
    case E_ESP: par->esp = 2, p->edp = 1; break;
    case E_PP: par->pp = 2, par->dp = 2; break;
    case E_DP: par->dp = 2; break;
    case E_EP: par->ep = 4, p->edp = 1; break;
    case E_EDP: p->edp = 1; break;
    case E_BATCH: p->B = 4, p->B_global = 16; break;
    case E_GLOBAL_BATCH: p->B_global = 64; break;
    case E_SEQ: c->L = 64; break;
    case E_M: p->M = 128; break;
    case E_H: c->H = 512; break;
    case E_E: p->E = 8; break;
    case E_K: c->k = 1; break;
    case E_EXPERT: c->expert = 1; break;
    case E_FACTOR: p->f = 1.0; break;
    case E_PLAN_DROPLESS: p->capacity = FSMOE_CAPACITY_DROPLESS, p->f = 0; break;
    case E_RUN_DROPLESS: c->f = 0; break;
    case E_SPLIT: p->split = FSMOE_SPLIT_PADDED; break;
    case E_N_LAYERS: p->n_layers = 3; break;
    case E_RUN_EVERY2: c->moe_every = 2; break;
    case E_BLOCK: p->layers[2].block = 3; break;
    case E_R_FWD: p->layers[1].fwd.r = 65; break;
    case E_R_BWD: p->layers[3].bwd.r = 0; break;
    }
}

static void test_refuses_each_field(void **state)
{
    (void)state;
    static const struct {
        enum edit edit;
        fsmoe_status st;
        const char *message; /* what follows "plans/x.yaml: " */
    } rows[] = {
        {E_NONE, FSMOE_OK, NULL},
        {E_NAME, FSMOE_ERR_VALUE, "model.name: the plan is for 'mixtral-8x7b', not 'tiny-moe'"},
        {E_SHA, FSMOE_ERR_VALUE, "provenance.model_sha256: the plan was made from "
                                 "models/tiny-moe.yaml with sha256 aaaa56789012…"},
        {E_ELEMENT, FSMOE_ERR_VALUE, "model.bytes_per_element: the plan has 2, fsmoe-run "
                                     "computes in"},
        {E_WORLD, FSMOE_ERR_VALUE, "parallel.world: the plan has 4, fsmoe-run runs on 2 ranks"},
        {E_GPN, FSMOE_ERR_VALUE, "parallel.gpus_per_node: the plan has 2, fsmoe-run runs 1 ranks "
                                 "per node"},
        {E_GPN_UNKNOWN, FSMOE_OK, NULL},
        {E_MP, FSMOE_ERR_VALUE, "parallel.mp: the plan has 2, fsmoe-run was started with mp = 1"},
        {E_ESP, FSMOE_ERR_VALUE, "parallel.esp: the plan has 2, fsmoe-run was started with esp = "
                                 "1"},
        {E_PP, FSMOE_ERR_VALUE, "parallel.pp: the plan has 2; pipeline parallelism is not "
                                "supported"},
        {E_DP, FSMOE_ERR_VALUE, "parallel.dp: the plan has 2, fsmoe-run runs data parallelism "
                                "over 4 ranks"},
        {E_EP, FSMOE_ERR_VALUE, "parallel.ep: the plan has 4, fsmoe-run was started with ep = 2"},
        {E_EDP, FSMOE_ERR_VALUE, "parallel.edp: the plan has 1, fsmoe-run has 2 ranks holding"},
        {E_BATCH, FSMOE_ERR_VALUE, "model.batch: the plan has 4, fsmoe-run was started with 8 "
                                   "samples per rank"},
        {E_GLOBAL_BATCH, FSMOE_ERR_VALUE, "model.global_batch: the plan has 64, fsmoe-run was "
                                          "started with 32 samples in all"},
        {E_SEQ, FSMOE_ERR_VALUE, "model.seq: the plan has 128, fsmoe-run was started with 64"},
        {E_M, FSMOE_ERR_VALUE, "model.M: the plan has 128"},
        {E_H, FSMOE_ERR_VALUE, "model.H: the plan has 256, fsmoe-run was started with 512"},
        {E_E, FSMOE_ERR_VALUE, "model.E: the plan has 8"},
        {E_K, FSMOE_ERR_VALUE, "model.k: the plan has 2, fsmoe-run was started with 1"},
        {E_EXPERT, FSMOE_ERR_VALUE, "model.expert: the plan is for gpt experts, fsmoe-run was "
                                    "started with swiglu"},
        {E_FACTOR, FSMOE_ERR_VALUE, "model.capacity_factor: the plan has 1, fsmoe-run was "
                                    "started with 1.2"},
        {E_PLAN_DROPLESS, FSMOE_ERR_VALUE, "model.capacity_factor: the plan has none (dropless), "
                                           "fsmoe-run was started with 1.2"},
        {E_RUN_DROPLESS, FSMOE_ERR_VALUE, "model.capacity_factor: the plan has 1.2, fsmoe-run was "
                                          "started with none (dropless)"},
        {E_SPLIT, FSMOE_ERR_VALUE, "alltoall.split: the plan has padded, fsmoe-run sends "
                                   "alltoallv"},
        {E_N_LAYERS, FSMOE_ERR_VALUE, "layers: the plan has 3, fsmoe-run has 4 MoE layers"},
        {E_RUN_EVERY2, FSMOE_ERR_VALUE, "layers: the plan has 4, fsmoe-run has 2 MoE layers"},
        {E_BLOCK, FSMOE_ERR_VALUE, "layers[2].block: the plan has 3, fsmoe-run has MoE layer 2 "
                                   "in block 2"},
        {E_R_FWD, FSMOE_ERR_VALUE, "layers[1].forward.r: the plan has 65, fsmoe-run pipelines"},
        {E_R_BWD, FSMOE_ERR_VALUE, "layers[3].backward.r: the plan has 0"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        fsmoe_layer_plan layers[4];
        fsmoe_plan p;
        make_plan(&p, layers);
        rt_config c = make_config();
        rt_layout lay = layout_make(4, 1, 2, 2, c.E, c.B);
        const char *sha = sha_a;
        apply_edit(rows[i].edit, &p, &c, &lay, &sha);
        plan_check_result r;
        fsmoe_error err = {0};
        fsmoe_status st = plan_check(PLAN, &p, sha, &c, &lay, &r, &err);
        if (st != rows[i].st)
            fail_msg("row %zu: status %s, expected %s: %s", i, fsmoe_strerror(st),
                     fsmoe_strerror(rows[i].st), err.msg);
        if (st == FSMOE_OK) {
            plan_check_result_free(&r);
            continue;
        }
        assert_null(r.block);
        assert_int_equal(r.n_moe, 0);
        char want[512];
        snprintf(want, sizeof want, PLAN ": %s", rows[i].message);
        if (strncmp(err.msg, want, strlen(want)) != 0)
            fail_msg("row %zu:\n  got  %s\n  want %s...", i, err.msg, want);
    }
}

/* plan_check_file: a plan on disk against the model file's real SHA-256; an unreadable plan
 * keeps the reader's status and message. */
static void test_check_file(void **state)
{
    (void)state;
    const char *root = getenv("FSMOE_SOURCE_ROOT");
    char model[400], path[128];
    snprintf(model, sizeof model, "%s/models/tiny-moe.yaml", root ? root : ".");
    snprintf(path, sizeof path, "/tmp/fsmoe_plan_check.%d.yaml", (int)getpid());
    fsmoe_error err = {0};
    fsmoe_layer_plan layers[4];
    fsmoe_plan p;
    make_plan(&p, layers);
    snprintf(p.model_path, sizeof p.model_path, "%s", model);
    assert_int_equal(fsmoe_sha256_file(model, p.model_sha256, &err), FSMOE_OK);
    snprintf(p.cluster_path, sizeof p.cluster_path, "clusters/testbed-b.yaml");
    snprintf(p.cluster_sha256, sizeof p.cluster_sha256, "%s", sha_b);
    snprintf(p.planner_version, sizeof p.planner_version, "test");
    snprintf(p.method, sizeof p.method, "auto");
    snprintf(p.decided_by, sizeof p.decided_by, "test");
    for (int i = 0; i < 4; i++) {
        layers[i].a2a_chunks = 1;
        layers[i].fwd.binding_case = layers[i].bwd.binding_case = 1;
        snprintf(layers[i].a2a_algorithm, sizeof layers[i].a2a_algorithm, "nccl");
    }
    assert_int_equal(fsmoe_plan_write(&p, path, &err), FSMOE_OK);

    rt_config c = make_config();
    plan_check_result r;
    int mp = 0, ep = 0, esp = 0; /* the plan's */
    if (plan_check_file(path, model, &c, 4, 3, 0, &mp, &ep, &esp, &r, &err) != FSMOE_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(ep, 2);
    assert_int_equal(mp, 1);
    assert_int_equal(esp, 1);
    assert_int_equal(r.n_moe, 4);
    assert_int_equal(r.r_fwd[3], 4);
    plan_check_result_free(&r);
    /* the run's detected ranks per node reach the check (the plan has 2) */
    ep = 0;
    assert_int_equal(plan_check_file(path, model, &c, 4, 3, 4, &mp, &ep, &esp, &r, &err), FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "parallel.gpus_per_node: the plan has 2, fsmoe-run runs 4"));
    ep = 0;
    assert_int_equal(plan_check_file(path, model, &c, 4, 3, 2, &mp, &ep, &esp, &r, &err), FSMOE_OK);
    plan_check_result_free(&r);

    /* another model file (the plan names the one it was made from) */
    char other[400];
    snprintf(other, sizeof other, "%s/models/bert-base-moe.yaml", root ? root : ".");
    assert_int_equal(plan_check_file(path, other, &c, 4, 3, 0, &mp, &ep, &esp, &r, &err), FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, ": provenance.model_sha256: the plan was made from "));
    assert_non_null(strstr(err.msg, "fsmoe-plan --regenerate"));

    unlink(path);
    assert_int_not_equal(plan_check_file(path, model, &c, 4, 3, 0, &mp, &ep, &esp, &r, &err), FSMOE_OK);
    assert_non_null(strstr(err.msg, path));
    assert_null(r.block);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepts_matching_plan),
        cmocka_unit_test(test_refuses_each_field),
        cmocka_unit_test(test_check_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
