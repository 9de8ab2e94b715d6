/* Implements: tests of the plan file (libfsmoe/plan_io.c, design.md §9): write → read → write is
 * byte-identical, the struct read back equals the one written field by field (doubles exactly),
 * bad plan files fail with the right status and file:line:col, and the atomic writer leaves no
 * temporary file behind and never clobbers the target on failure. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diff.h"
#include "explain.h"
#include "plan.h"
#include "yaml_write.h"

static char tmpdir[256];

static int setup_dir(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/fsmoe_plan_io_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_dir(void **state)
{
    (void)state;
    DIR *d = opendir(tmpdir);
    if (d) {
        struct dirent *e;
        char p[600];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
                unlink(p);
            }
        closedir(d);
    }
    return rmdir(tmpdir);
}

/* A plan with awkward values: doubles that need 17 digits, tiny and huge magnitudes, zeros,
 * strings that must be quoted, several layers with different decisions. */
static void make_plan(fsmoe_plan *p, double f, int n_layers)
{
    memset(p, 0, sizeof *p);
    snprintf(p->model_path, sizeof p->model_path, "models/mixtral-8x7b.yaml");
    snprintf(p->model_sha256, sizeof p->model_sha256, "%064d", 7);
    snprintf(p->cluster_path, sizeof p->cluster_path, "clusters/my testbed: b.yaml");
    snprintf(p->cluster_sha256, sizeof p->cluster_sha256,
             "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    snprintf(p->planner_version, sizeof p->planner_version, "0.1.0");
    snprintf(p->method, sizeof p->method, "fsmoe-paper");
    snprintf(p->decided_by, sizeof p->decided_by, "slsqp+integer");
    p->n_overrides = 3;
    snprintf(p->overrides[0].flag, sizeof p->overrides[0].flag, "batch");
    snprintf(p->overrides[0].value, sizeof p->overrides[0].value, "8");
    snprintf(p->overrides[1].flag, sizeof p->overrides[1].flag, "capacity-factor");
    snprintf(p->overrides[1].value, sizeof p->overrides[1].value, f == 0 ? "none" : "1.2");
    snprintf(p->overrides[2].flag, sizeof p->overrides[2].flag, "world");
    snprintf(p->overrides[2].value, sizeof p->overrides[2].value, "32");
    snprintf(p->model_name, sizeof p->model_name, "mixtral-8x7b");
    snprintf(p->cluster_name, sizeof p->cluster_name, "testbed-b");
    p->parallel = (fsmoe_parallel){.world = 32, .gpus_per_node = 4, .dp = 8, .mp = 4, .ep = 8,
                                   .esp = 4, .pp = 1};
    p->ranks = FSMOE_RANKS_NODE_MAJOR;
    p->edp = 1;
    p->B = 8;
    p->B_global = 64;
    p->L = 1024;
    p->M = 4096;
    p->H = 14336;
    p->E = 8;
    p->k = 2;
    p->f = f;
    p->capacity = f == 0 ? FSMOE_CAPACITY_DROPLESS : FSMOE_CAPACITY_FACTOR;
    p->split = FSMOE_SPLIT_ALLTOALLV;
    p->expert = FSMOE_EXPERT_SWIGLU;
    p->bytes_per_element = 2;
    p->n_layers = n_layers;
    p->layers = calloc((size_t)n_layers, sizeof *p->layers);
    assert_non_null(p->layers);
    for (int i = 0; i < n_layers; i++) {
        fsmoe_layer_plan *l = &p->layers[i];
        l->index = i;
        l->block = 2 * i + 1;
        l->schedule = (fsmoe_schedule)(i % 3);
        l->t_d1_s = 0.1 / (i + 3);          /* not exactly representable */
        l->t_d2_s = 1e-300 * (i + 1);       /* tiny */
        l->a2a = (fsmoe_a2a_strategy)(i % 4);
        l->a2a_chunks = l->a2a >= FSMOE_A2A_O2 ? 1 + i : 1; /* only O2 and O3 chunk */
        snprintf(l->a2a_algorithm, sizeof l->a2a_algorithm, i % 2 ? "2dh" : "nccl");
        for (int j = 0; j < 4; j++)
            l->a2a_s[j] = (j + 1) * 1.234567890123456789e-3 / (i + 1);
        l->fwd = (fsmoe_phase_plan){.r = 4 + i, .binding_case = 1 + i % 4, .q = 0x05u,
                                    .t_gar_s = 0, .predicted_s = 3.14159265358979323846e-3};
        l->bwd = (fsmoe_phase_plan){.r = 6, .binding_case = 1 + (i + 1) % 4,
                                    .q = (unsigned)(i * 37) & 0x7fu, .t_gar_s = 2.0 / 3.0 * 1e-3,
                                    .predicted_s = 0.0301 + i};
        l->dense_fwd_s = 1.5e-3;
        l->dense_bwd_s = 3e-3;
        l->olp_dense_s = nextafter(3e-3, 1);
        l->olp_moe_s = 0;
        l->grad_bytes = 12582912.0 * (i + 1);
        l->window_bytes = 1e20;
        l->step2_bytes = 123456789.5;
        l->carried_bytes = 0;
    }
    p->gradient_tail_bytes = 4096;
    p->prefix_grad_bytes = 262144000;
    p->predicted = (fsmoe_predicted){.iteration_s = 0.91, .forward_s = 0.3, .backward_s = 0.6,
                                     .tail_s = 0.01, .deepspeed_s = 2.1, .tutel_s = 1.1,
                                     .tutel_improved_s = 1.0, .pipemoe_lina_s = 1.03};
    /* the optional memory section: written with a capacity factor, absent without */
    if (f > 0) {
        p->memory.present = 1;
        p->memory.zero_stage = 2, p->memory.recompute = FSMOE_RECOMPUTE_SELECTIVE;
        for (int c = 0; c < FSMOE_MEM_CATS; c++) {
            p->memory.bytes[c] = (c + 1) * 1.0e9 / 3.0;
            p->memory.total += p->memory.bytes[c];
        }
    }
    snprintf(p->notes, sizeof p->notes,
             "t_a2a: alltoall on inter (alpha=1.75e-4 s)\n"
             "capacity: T = k*f*B*L/E = 2048 tokens, \"quoted\" # not a comment\n"
             "- looks like a list item");
}

static void path_in_dir(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", tmpdir, name);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

static void assert_phase_equal(const fsmoe_phase_plan *a, const fsmoe_phase_plan *b)
{
    assert_int_equal(a->r, b->r);
    assert_int_equal(a->binding_case, b->binding_case);
    assert_int_equal(a->q, b->q);
    assert_true(a->t_gar_s == b->t_gar_s);
    assert_true(a->predicted_s == b->predicted_s);
}

static void assert_plans_equal(const fsmoe_plan *a, const fsmoe_plan *b)
{
    assert_string_equal(a->model_path, b->model_path);
    assert_string_equal(a->model_sha256, b->model_sha256);
    assert_string_equal(a->cluster_path, b->cluster_path);
    assert_string_equal(a->cluster_sha256, b->cluster_sha256);
    assert_string_equal(a->planner_version, b->planner_version);
    assert_string_equal(a->method, b->method);
    assert_string_equal(a->decided_by, b->decided_by);
    assert_int_equal(a->n_overrides, b->n_overrides);
    for (int i = 0; i < a->n_overrides; i++) {
        assert_string_equal(a->overrides[i].flag, b->overrides[i].flag);
        assert_string_equal(a->overrides[i].value, b->overrides[i].value);
    }
    assert_string_equal(a->model_name, b->model_name);
    assert_string_equal(a->cluster_name, b->cluster_name);
    assert_memory_equal(&a->parallel, &b->parallel, sizeof a->parallel);
    assert_int_equal(a->ranks, b->ranks);
    assert_int_equal(a->edp, b->edp);
    assert_int_equal(a->B, b->B);
    assert_int_equal(a->B_global, b->B_global);
    assert_int_equal(a->capacity, b->capacity);
    assert_int_equal(a->split, b->split);
    assert_int_equal(a->L, b->L);
    assert_int_equal(a->M, b->M);
    assert_int_equal(a->H, b->H);
    assert_int_equal(a->E, b->E);
    assert_int_equal(a->k, b->k);
    assert_true(a->f == b->f);
    assert_int_equal(a->expert, b->expert);
    assert_int_equal(a->bytes_per_element, b->bytes_per_element);
    assert_int_equal(a->n_layers, b->n_layers);
    for (int i = 0; i < a->n_layers; i++) {
        const fsmoe_layer_plan *x = &a->layers[i], *y = &b->layers[i];
        assert_int_equal(x->index, y->index);
        assert_int_equal(x->block, y->block);
        assert_int_equal(x->schedule, y->schedule);
        for (int j = 0; j < FSMOE_SCHED_COUNT; j++)
            assert_true(x->schedule_s[j] == y->schedule_s[j]);
        assert_true(x->t_d1_s == y->t_d1_s);
        assert_true(x->t_d2_s == y->t_d2_s);
        assert_int_equal(x->a2a, y->a2a);
        assert_int_equal(x->a2a_chunks, y->a2a_chunks);
        for (int j = 0; j < 4; j++)
            assert_true(x->a2a_s[j] == y->a2a_s[j]);
        assert_string_equal(x->a2a_algorithm, y->a2a_algorithm);
        assert_phase_equal(&x->fwd, &y->fwd);
        assert_phase_equal(&x->bwd, &y->bwd);
        assert_true(x->dense_fwd_s == y->dense_fwd_s);
        assert_true(x->dense_bwd_s == y->dense_bwd_s);
        assert_true(x->olp_dense_s == y->olp_dense_s);
        assert_true(x->olp_moe_s == y->olp_moe_s);
        assert_true(x->grad_bytes == y->grad_bytes);
        assert_true(x->window_bytes == y->window_bytes);
        assert_true(x->step2_bytes == y->step2_bytes);
        assert_true(x->carried_bytes == y->carried_bytes);
    }
    assert_true(a->gradient_tail_bytes == b->gradient_tail_bytes);
    assert_true(a->prefix_grad_bytes == b->prefix_grad_bytes);
    assert_true(a->prefix_window_bytes == b->prefix_window_bytes);
    assert_int_equal(a->gradients, b->gradients);
    assert_memory_equal(&a->predicted, &b->predicted, sizeof a->predicted);
    assert_int_equal(a->memory.present, b->memory.present);
    if (a->memory.present) {
        assert_int_equal(a->memory.zero_stage, b->memory.zero_stage);
        assert_int_equal(a->memory.recompute, b->memory.recompute);
        for (int c = 0; c < FSMOE_MEM_CATS; c++)
            assert_true(a->memory.bytes[c] == b->memory.bytes[c]);
        assert_true(a->memory.total == b->memory.total);
    }
    assert_string_equal(a->notes, b->notes);
}

static void round_trip(double f, int n_layers)
{
    fsmoe_plan p, q;
    fsmoe_error err = {0};
    char a[600], b[600];
    path_in_dir(a, sizeof a, "a.yaml");
    path_in_dir(b, sizeof b, "b.yaml");
    make_plan(&p, f, n_layers);
    assert_int_equal(fsmoe_plan_write(&p, a, &err), FSMOE_OK);
    fsmoe_status st = fsmoe_plan_load(a, &q, &err);
    if (st != FSMOE_OK)
        fail_msg("load: %s", err.msg);
    assert_plans_equal(&p, &q);
    assert_int_equal(fsmoe_plan_write(&q, b, &err), FSMOE_OK);
    char *ta = slurp(a), *tb = slurp(b);
    assert_string_equal(ta, tb);
    /* Spot checks of the format that a reader of the file relies on. */
    assert_non_null(strstr(ta, "# generated by fsmoe-plan 0.1.0; regenerate with: fsmoe-plan "
                               "--model models/mixtral-8x7b.yaml --cluster 'clusters/my testbed: "
                               "b.yaml' --method fsmoe-paper --batch 8 --capacity-factor "));
    assert_non_null(strstr(ta, "\nfsmoe_plan: 3\n"));
    assert_non_null(strstr(ta, f == 0 ? "  capacity: dropless\n  capacity_factor: none\n"
                                      : "  capacity: factor\n  capacity_factor: 1.2\n"));
    assert_non_null(strstr(ta, "  batch: 8\n  global_batch: 64\n"));
    assert_non_null(strstr(ta, "\nalltoall: {split: alltoallv}\n"));
    if (f > 0)
        assert_non_null(strstr(ta, "\nmemory:\n  zero_stage: 2\n  recompute: selective\n"));
    else
        assert_null(strstr(ta, "\nmemory:"));
    assert_non_null(strstr(ta, "    - {flag: batch, value: \"8\"}\n"));
    assert_non_null(strstr(ta, "    forward: {r: 4, case: 1, q: [Q1, Q3], t_gar_s: 0, "
                               "predicted_s: 0.0031415926535897933}\n"));
    assert_non_null(strstr(ta, "parallel: {world: 32, gpus_per_node: 4, ranks: node-major, dp: 8, "
                               "mp: 4, ep: 8, esp: 4, edp: 1, pp: 1}\n"));
    assert_null(strstr(ta, "created"));
    /* no layer had MoNTA's layer as a candidate: schedule_s is the three-key form of before */
    assert_null(strstr(ta, "monta"));
    assert_non_null(strstr(ta, "    schedule_s: {esp_pipeline: 0, s1: 0, s2: 0}\n"));
    free(ta);
    free(tb);
    fsmoe_plan_free(&p);
    fsmoe_plan_free(&q);
    assert_null(q.layers);
}

static void test_round_trip_f(void **state)
{
    (void)state;
    round_trip(1.2, 5);
}

static void test_round_trip_none(void **state)
{
    (void)state;
    round_trip(0, 3);
}

/* gradient_schedule: written only as lina (a partition plan's file is as before), read back;
 * lina with a window in the partition's fields, or another name, is refused at its line. */
static void test_gradient_schedule(void **state)
{
    (void)state;
    fsmoe_plan p, q;
    fsmoe_error err = {0};
    char a[600];
    path_in_dir(a, sizeof a, "grads.yaml");
    make_plan(&p, 1.2, 3);
    assert_int_equal(fsmoe_plan_write(&p, a, &err), FSMOE_OK);
    char *text = slurp(a);
    assert_null(strstr(text, "gradient_schedule"));
    free(text);
    for (int i = 0; i < p.n_layers; i++)
        p.layers[i].window_bytes = p.layers[i].step2_bytes = 0.0;
    p.prefix_window_bytes = 0.0;
    p.gradients = FSMOE_GRADS_LINA;
    assert_int_equal(fsmoe_plan_write(&p, a, &err), FSMOE_OK);
    text = slurp(a);
    assert_non_null(strstr(text, "\ngradient_schedule: lina\n"));
    if (fsmoe_plan_load(a, &q, &err) != FSMOE_OK)
        fail_msg("load: %s", err.msg);
    assert_plans_equal(&p, &q);
    fsmoe_plan_free(&q);
    /* a window beside Lina's micro-ops */
    char *bad = malloc(strlen(text) + 64);
    assert_non_null(bad);
    const char *w = strstr(text, "in_window_bytes: 0");
    assert_non_null(w);
    size_t head = (size_t)(w - text) + strlen("in_window_bytes: ");
    snprintf(bad, strlen(text) + 64, "%.*s5%s", (int)head, text, w + strlen("in_window_bytes: 0"));
    assert_int_equal(fsmoe_plan_parse("bad.yaml", bad, strlen(bad), &q, &err),
                     FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "bad.yaml:"));
    assert_non_null(strstr(err.msg, "gradient_schedule: lina with gradient windows"));
    /* another name */
    const char *g = strstr(text, "gradient_schedule: lina");
    head = (size_t)(g - text) + strlen("gradient_schedule: ");
    snprintf(bad, strlen(text) + 64, "%.*sfast%s", (int)head, text, g + strlen("gradient_schedule: lina"));
    assert_int_equal(fsmoe_plan_parse("bad.yaml", bad, strlen(bad), &q, &err),
                     FSMOE_ERR_SCHEMA);
    assert_non_null(strstr(err.msg, "partition"));
    free(bad);
    free(text);
    fsmoe_plan_free(&p);
}

static void test_emit_stdout_equals_file(void **state)
{
    (void)state;
    fsmoe_plan p;
    fsmoe_error err = {0};
    char a[600], b[600];
    make_plan(&p, 2.4, 2);
    path_in_dir(a, sizeof a, "s.yaml");
    path_in_dir(b, sizeof b, "w.yaml");
    FILE *f = fopen(a, "w");
    assert_non_null(f);
    assert_int_equal(fsmoe_plan_emit(&p, f, &err), FSMOE_OK);
    fclose(f);
    assert_int_equal(fsmoe_plan_write(&p, b, &err), FSMOE_OK);
    char *ta = slurp(a), *tb = slurp(b);
    assert_string_equal(ta, tb);
    free(ta);
    free(tb);
    fsmoe_plan_free(&p);
}

/* The shortest round-tripping form, checked against hand-picked values. */
static void test_double_format(void **state)
{
    (void)state;
    static const struct {
        double v;
        const char *text;
    } rows[] = {
        {0.0, "0"},         {1.0, "1"},        {0.1, "0.1"},     {1.2, "1.2"},
        {12582912, "12582912"}, {1e20, "1e+20"}, {1e-300, "1e-300"},
        {2.0 / 3.0, "0.6666666666666666"},    {-0.5, "-0.5"},    {0.30000000000000004, "0.30000000000000004"},
    };
    char buf[FSMOE_YW_DOUBLE_CHARS];
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        fsmoe_yaml_format_double(rows[i].v, buf);
        assert_string_equal(buf, rows[i].text);
        assert_true(strtod(buf, NULL) == rows[i].v);
    }
    /* Random doubles always round-trip. */
    srand(12345);
    for (int i = 0; i < 10000; i++) {
        double v = ldexp((double)rand() / RAND_MAX, (rand() % 200) - 100);
        fsmoe_yaml_format_double(v, buf);
        assert_true(strtod(buf, NULL) == v);
    }
}

static void test_plain_scalars(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int plain;
    } rows[] = {
        {"models/x.yaml", 1}, {"mixtral-8x7b", 1}, {"2dh", 1},  {"S1", 1},
        {"8", 0},             {"1.2", 0},          {"1e5", 0},  {"0x1f", 0},
        {"true", 0},          {"No", 0},           {"null", 0}, {"none", 0},
        {"", 0},              {"a b", 0},          {"a: b", 0}, {"-x", 0},
        {"#x", 0},            {"[x]", 0},          {"x,y", 0},  {"'q'", 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (fsmoe_yaml_plain_ok(rows[i].s) != rows[i].plain)
            fail_msg("'%s': plain_ok should be %d", rows[i].s, rows[i].plain);
}

/* Writes a good plan, then applies one textual edit and expects the loader to fail. */
static void test_bad_plans(void **state)
{
    (void)state;
    static const struct {
        const char *from, *to;
        fsmoe_status st;
        const char *fragment;
    } rows[] = {
        {"fsmoe_plan: 3", "fsmoe_plan: 1", FSMOE_ERR_SCHEMA, "fsmoe_plan"},
        {"fsmoe_plan: 3", "fsmoe_plan: 4", FSMOE_ERR_SCHEMA, "this build reads fsmoe_plan version 3"},
        /* an older plan: the command that makes it again, its own path as -o */
        {"fsmoe_plan: 3", "fsmoe_plan: 2", FSMOE_ERR_SCHEMA,
         "fsmoe_plan: version 2 is older than this build's 3"},
        {"fsmoe_plan: 3", "fsmoe_plan: 2", FSMOE_ERR_SCHEMA,
         "regenerate it with: fsmoe-plan --model models/mixtral-8x7b.yaml --cluster "
         "'clusters/my testbed: b.yaml' --method fsmoe-paper --batch 8 --capacity-factor 1.2 "
         "--world 32 -o /tmp/fsmoe_plan_io_"},
        /* version 3's layout facts */
        {"ranks: node-major", "ranks: row-major", FSMOE_ERR_SCHEMA, "parallel.ranks"},
        {"ranks: node-major", "ranks: 3", FSMOE_ERR_SCHEMA, "node-major"},
        {"edp: 1", "edp: 2", FSMOE_ERR_VALUE, "parallel.edp: 2, but mp·dp/(ep·esp) = 4·8/(8·4) = 1"},
        {"edp: 1", "edp: -1", FSMOE_ERR_VALUE, "parallel.edp"},
        {"edp: 1, ", "", FSMOE_ERR_SCHEMA, "edp"},
        {"dp: 8", "dp: 4", FSMOE_ERR_VALUE, "parallel"},
        {"  global_batch: 64\n", "  global_batch: 63\n", FSMOE_ERR_VALUE,
         "model.global_batch: 63, but dp·batch = 8·8 = 64"},
        {"  global_batch: 64\n", "  global_batch: many\n", FSMOE_ERR_SCHEMA, "model.global_batch"},
        {"  global_batch: 64\n", "", FSMOE_ERR_SCHEMA, "global_batch"},
        {"  capacity: factor\n", "  capacity: dropless\n", FSMOE_ERR_VALUE,
         "model.capacity_factor: a factor with capacity: dropless"},
        {"  capacity: factor\n", "  capacity: padded\n", FSMOE_ERR_SCHEMA, "model.capacity"},
        {"  capacity: factor\n", "", FSMOE_ERR_SCHEMA, "capacity"},
        {"  capacity_factor: 1.2\n", "  capacity_factor: none\n", FSMOE_ERR_VALUE,
         "none with capacity: factor"},
        {"{split: alltoallv}", "{split: alltoall}", FSMOE_ERR_SCHEMA, "alltoall.split"},
        {"{split: alltoallv}", "{split: alltoallv, pad: 1}", FSMOE_ERR_SCHEMA, "unknown key"},
        {"alltoall: {split: alltoallv}\n", "", FSMOE_ERR_SCHEMA, "alltoall"},
        {"    block: 1\n", "    blok: 1\n", FSMOE_ERR_SCHEMA, "did you mean"},
        {"{r: 4,", "{r: four,", FSMOE_ERR_SCHEMA, "layers[0].forward.r"},
        {"{r: 4,", "{r: 0,", FSMOE_ERR_VALUE, "layers[0].forward.r"},
        {"schedule: S1", "schedule: S3", FSMOE_ERR_SCHEMA, "monta"},
        /* MoNTA's layer is not pipelined (layer 1 of the test plan has r = 5 forward) */
        {"schedule: S1", "schedule: monta", FSMOE_ERR_VALUE,
         "layers[1].forward.r: 5 with schedule monta (expected 1"},
        {"s2: 0}", "s2: 0, monta: -1}", FSMOE_ERR_VALUE, "layers[0].schedule_s.monta"},
        {"s2: 0}", "s2: 0, montaa: 1}", FSMOE_ERR_SCHEMA, "unknown key"},
        {"q: [Q1, Q3]", "q: [Q1, Q9]", FSMOE_ERR_SCHEMA, "Q9"},
        {"q: [Q1, Q3]", "q: [Q1, Q1]", FSMOE_ERR_VALUE, "twice"},
        {"  M: 4096\n", "", FSMOE_ERR_SCHEMA, "M"},
        {"  capacity_factor: 1.2", "  capacity_factor: lots", FSMOE_ERR_SCHEMA,
         "capacity_factor"},
        {"  - index: 1\n", "  - index: 7\n", FSMOE_ERR_VALUE, "out of order"},
        {"  iteration_s: 0.91", "  iteration_s: [0.91]", FSMOE_ERR_SCHEMA, "iteration_s"},
        {"fsmoe_plan: 3\n", "fsmoe_plan: [3\n", FSMOE_ERR_PARSE, ""},
        {"  - index: 1\n", "  - index: 1\n    color: red\n", FSMOE_ERR_SCHEMA, "unknown key"},
        /* hand-edited plans, every value in range but the plan inconsistent: the field named */
        {"world: 32", "world: 64", FSMOE_ERR_VALUE,
         ":29:19: parallel.world: world=64 but dp·mp·pp = 8·4·1 = 32"},
        {"  k: 2\n", "  k: 200\n", FSMOE_ERR_VALUE,
         ":20:6: model.k: k=200 exceeds E=8 (expected each token routed to at most E experts)"},
        {"  E: 8\n", "  E: 12\n", FSMOE_ERR_VALUE,
         "parallel.ep: experts: 12 is not divisible by ep=8"},
        {"    block: 3\n", "    block: 1\n", FSMOE_ERR_VALUE,
         "layers[1].block: block 1 after block 1 (expected increasing blocks"},
        {"strategy: O1, chunks: 1,", "strategy: O1, chunks: 3,", FSMOE_ERR_VALUE,
         "layers[1].a2a.chunks: 3 chunks with strategy O1 (expected 1: only O2 and O3 split"},
        {"t_gar_s: 0,", "t_gar_s: 0.5,", FSMOE_ERR_VALUE,
         "layers[0].forward.t_gar_s: 0.5 (expected 0: gradients are all-reduced during the "
         "backward only)"},
        /* sizes past the limits of yaml_read.h */
        {"world: 32", "world: 16777216", FSMOE_ERR_VALUE,
         ":29:19: parallel.world: 16777216 is out of range (expected an integer in [1, 262144])"},
        {"  k: 2\n", "  k: 1000\n", FSMOE_ERR_VALUE,
         ":20:6: model.k: 1000 is out of range (expected an integer in [1, 256])"},
        {"  M: 4096\n", "  M: 1000000000\n", FSMOE_ERR_VALUE,
         "model.M: 1000000000 is out of range (expected an integer in [1, 131072])"},
        {"{r: 4,", "{r: 16777216,", FSMOE_ERR_VALUE,
         "layers[0].forward.r: 16777216 is out of range (expected an integer in [1, 1024])"},
        {"  batch: 8\n", "  batch: 65536\n", FSMOE_ERR_VALUE,
         "model.seq: batch·seq = 65536·1024 = 67108864 tokens per DP rank and step (expected at "
         "most 16777216)"},
        /* nothing non-finite, negative or absurd */
        {"  capacity_factor: 1.2\n", "  capacity_factor: 1e30\n", FSMOE_ERR_VALUE,
         "model.capacity_factor: 1e30 is out of range (expected a number in [1e-09, 65536])"},
        {"  capacity_factor: 1.2\n", "  capacity_factor: .nan\n", FSMOE_ERR_SCHEMA,
         "model.capacity_factor: expected a number in [1e-09, 65536], got `.nan`"},
        {"  iteration_s: 0.91", "  iteration_s: .inf", FSMOE_ERR_SCHEMA,
         "predicted.iteration_s: expected a number in [0, 1e+30], got `.inf`"},
        {"  iteration_s: 0.91", "  iteration_s: 1e31", FSMOE_ERR_VALUE,
         "predicted.iteration_s: 1e31 is out of range"},
        {"{r: 4,", "{r: -1,", FSMOE_ERR_VALUE, "layers[0].forward.r: -1 is out of range"},
        /* the memory section: known words, its total the categories' sum */
        {"  recompute: selective", "  recompute: partial", FSMOE_ERR_SCHEMA,
         "memory.recompute: unknown name `partial`"},
        {"  zero_stage: 2", "  zero_stage: 5", FSMOE_ERR_VALUE, "memory.zero_stage: 5 is out of range"},
        {"  total: 7e+09", "  total: 7000000001", FSMOE_ERR_VALUE,
         "memory.total: 7000000001 bytes, but the categories add up to 7000000000"},
        /* a pipeline section belongs to pp > 1 only */
        {"  total: 7e+09\n", "  total: 7e+09\npipeline:\n  schedule: 1f1b\n", FSMOE_ERR_VALUE,
         "a pipeline section, but parallel.pp is 1"},
        {"name: mixtral-8x7b", "name: mixtral\xff", FSMOE_ERR_PARSE,
         "not valid YAML: invalid leading UTF-8 octet 0xFF"},
    };
    fsmoe_plan p;
    make_plan(&p, 1.2, 3);
    char good[600], bad[600];
    path_in_dir(good, sizeof good, "good.yaml");
    path_in_dir(bad, sizeof bad, "bad.yaml");
    fsmoe_error err = {0};
    assert_int_equal(fsmoe_plan_write(&p, good, &err), FSMOE_OK);
    fsmoe_plan_free(&p);
    char *text = slurp(good);
    int failures = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char *at = strstr(text, rows[i].from);
        if (!at)
            fail_msg("row %zu: '%s' not in the plan", i, rows[i].from);
        FILE *f = fopen(bad, "w");
        assert_non_null(f);
        fwrite(text, 1, (size_t)(at - text), f);
        fputs(rows[i].to, f);
        fputs(at + strlen(rows[i].from), f);
        fclose(f);
        fsmoe_plan q;
        memset(&err, 0, sizeof err);
        fsmoe_status st = fsmoe_plan_load(bad, &q, &err);
        if (st != rows[i].st)
            fail_msg("row %zu ('%s'): status %s, expected %s: %s", i, rows[i].to,
                     fsmoe_strerror(st), fsmoe_strerror(rows[i].st), err.msg);
        /* file:line:col prefix */
        char prefix[700];
        snprintf(prefix, sizeof prefix, "%s:", bad);
        if (strncmp(err.msg, prefix, strlen(prefix)) != 0)
            fail_msg("row %zu: message lacks the file: %s", i, err.msg);
        int line = 0, col = 0;
        if (sscanf(err.msg + strlen(prefix), "%d:%d:", &line, &col) != 2 || line < 1 || col < 1)
            fail_msg("row %zu: message lacks line:col: %s", i, err.msg);
        if (getenv("FSMOE_TEST_VERBOSE"))
            printf("row %zu: %s\n", i, err.msg);
        if (!strstr(err.msg, rows[i].fragment)) {
            print_error("row %zu: message lacks '%s': %s\n", i, rows[i].fragment, err.msg);
            failures++;
        }
        if (fsmoe_exit_code(st) != 2)
            fail_msg("row %zu: exit code %d (expected 2 for an input error)", i,
                     fsmoe_exit_code(st));
        assert_null(q.layers);
    }
    assert_int_equal(failures, 0);
    free(text);
    fsmoe_plan q;
    assert_int_equal(fsmoe_plan_load("/nonexistent/plan.yaml", &q, &err), FSMOE_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent/plan.yaml"));
}

/* --regenerate reads only the provenance, so it replays a version-2 plan; version 1 and
 * versions from the future are refused as before. */
static void test_load_provenance_old(void **state)
{
    (void)state;
    fsmoe_plan p, q;
    fsmoe_error err = {0};
    make_plan(&p, 1.2, 2);
    char path[600];
    path_in_dir(path, sizeof path, "old.yaml");
    assert_int_equal(fsmoe_plan_write(&p, path, &err), FSMOE_OK);
    char *text = slurp(path);
    static const struct {
        const char *version;
        fsmoe_status st;
    } rows[] = {{"fsmoe_plan: 2", FSMOE_OK}, {"fsmoe_plan: 3", FSMOE_OK},
                {"fsmoe_plan: 1", FSMOE_ERR_SCHEMA}, {"fsmoe_plan: 4", FSMOE_ERR_SCHEMA}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char *at = strstr(text, "fsmoe_plan: 3");
        assert_non_null(at);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fwrite(text, 1, (size_t)(at - text), f);
        fputs(rows[i].version, f);
        fputs(at + strlen("fsmoe_plan: 3"), f);
        fclose(f);
        memset(&err, 0, sizeof err);
        fsmoe_status st = fsmoe_plan_load_provenance(path, &q, &err);
        if (st != rows[i].st)
            fail_msg("%s: status %s: %s", rows[i].version, fsmoe_strerror(st), err.msg);
        if (st == FSMOE_OK) {
            assert_string_equal(q.model_path, p.model_path);
            assert_string_equal(q.cluster_path, p.cluster_path);
            assert_string_equal(q.method, p.method);
            assert_int_equal(q.n_overrides, p.n_overrides);
            assert_string_equal(q.overrides[2].value, "32");
        }
    }
    char cmd[1024];
    fsmoe_plan_command(&p, "plans/x y.yaml", cmd, sizeof cmd);
    assert_string_equal(cmd, "fsmoe-plan --model models/mixtral-8x7b.yaml --cluster "
                             "'clusters/my testbed: b.yaml' --method fsmoe-paper --batch 8 "
                             "--capacity-factor 1.2 --world 32 -o 'plans/x y.yaml'");
    free(text);
    fsmoe_plan_free(&p);
}

static int count_tmp_files(void)
{
    int n = 0;
    DIR *d = opendir(tmpdir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp."))
            n++;
    closedir(d);
    return n;
}

static void test_atomic_write(void **state)
{
    (void)state;
    fsmoe_plan p;
    fsmoe_error err = {0};
    make_plan(&p, 1.2, 2);
    char target[600];
    path_in_dir(target, sizeof target, "target.yaml");
    /* An existing target is replaced in one step and no temporary file stays behind. */
    FILE *f = fopen(target, "w");
    assert_non_null(f);
    fputs("old contents\n", f);
    fclose(f);
    assert_int_equal(fsmoe_plan_write(&p, target, &err), FSMOE_OK);
    assert_int_equal(count_tmp_files(), 0);
    char *t = slurp(target);
    assert_non_null(strstr(t, "fsmoe_plan: 3"));
    free(t);

    /* A path whose directory does not exist: IO error naming it, nothing created. */
    char bad[700];
    snprintf(bad, sizeof bad, "%s/no/such/dir/plan.yaml", tmpdir);
    memset(&err, 0, sizeof err);
    assert_int_equal(fsmoe_plan_write(&p, bad, &err), FSMOE_ERR_IO);
    assert_non_null(strstr(err.msg, bad));
    assert_int_equal(count_tmp_files(), 0);

    /* A target that is a directory: rename fails; the temp file is removed and the directory
     * survives. */
    char dir[600];
    path_in_dir(dir, sizeof dir, "adir");
    assert_int_equal(mkdir(dir, 0700), 0);
    char inner[700];
    snprintf(inner, sizeof inner, "%s/keep", dir);
    f = fopen(inner, "w");
    assert_non_null(f);
    fclose(f);
    memset(&err, 0, sizeof err);
    assert_int_equal(fsmoe_plan_write(&p, dir, &err), FSMOE_ERR_IO);
    assert_int_equal(count_tmp_files(), 0);
    struct stat sb;
    assert_int_equal(stat(inner, &sb), 0);
    unlink(inner);
    rmdir(dir);
    fsmoe_plan_free(&p);
}

/* diff: counted differences for decisions and floats beyond the tolerance, provenance only with
 * --strict, and the YAML-path naming of each difference. */
static void test_diff(void **state)
{
    (void)state;
    fsmoe_plan a, b;
    make_plan(&a, 1.2, 3);
    make_plan(&b, 1.2, 3);
    diff_options opt = {.rtol = DIFF_DEFAULT_RTOL, .strict = 0};
    assert_int_equal(diff_plans(&a, &b, &opt, NULL), 0);

    b.layers[1].bwd.r = a.layers[1].bwd.r + 1;
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    assert_non_null(mem);
    assert_int_equal(diff_plans(&a, &b, &opt, mem), 1);
    fclose(mem);
    assert_string_equal(text, "layers[1].backward.r: 6 -> 7\n");
    free(text);
    b.layers[1].bwd.r = a.layers[1].bwd.r;

    /* within rtol (relative 1e-7) and beyond it (1e-5) */
    b.predicted.iteration_s = a.predicted.iteration_s * (1 + 1e-7);
    assert_int_equal(diff_plans(&a, &b, &opt, NULL), 0);
    b.predicted.iteration_s = a.predicted.iteration_s * (1 + 1e-5);
    assert_int_equal(diff_plans(&a, &b, &opt, NULL), 1);
    opt.rtol = 1e-4;
    assert_int_equal(diff_plans(&a, &b, &opt, NULL), 0);
    opt.rtol = DIFF_DEFAULT_RTOL;
    b.predicted.iteration_s = a.predicted.iteration_s;

    /* zero against a sub-nanosecond time or a fraction of a byte: the absolute floor */
    b.layers[0].olp_moe_s = 1e-12;
    b.layers[0].carried_bytes = 0.25;
    assert_int_equal(diff_plans(&a, &b, &opt, NULL), 0);
    b.layers[0].olp_moe_s = 1e-6;
    assert_int_equal(diff_plans(&a, &b, &opt, NULL), 1);
    b.layers[0].olp_moe_s = 0;

    /* the memory section: one category beyond rtol, the recomputation, the section's absence */
    b.memory.present = a.memory.present = 1;
    b.memory.bytes[FSMOE_MEM_BUFFERS] = a.memory.bytes[FSMOE_MEM_BUFFERS] = 1e9;
    assert_int_equal(diff_plans(&a, &b, &opt, NULL), 0);
    b.memory.bytes[FSMOE_MEM_BUFFERS] = 1.001e9;
    b.memory.recompute = FSMOE_RECOMPUTE_FULL;
    mem = open_memstream(&text, &len);
    assert_non_null(mem);
    assert_int_equal(diff_plans(&a, &b, &opt, mem), 2);
    fclose(mem);
    assert_string_equal(text, "memory.recompute: selective -> full\n"
                              "memory.buffers: 1e+09 -> 1.001e+09 (relative 0.001)\n");
    free(text);
    b.memory = a.memory;
    b.memory.present = 0;
    assert_int_equal(diff_plans(&a, &b, &opt, NULL), 1);
    b.memory = a.memory;

    /* provenance: reported, counted only when strict */
    b.model_sha256[0] = b.model_sha256[0] == 'f' ? 'e' : 'f';
    snprintf(b.cluster_path, sizeof b.cluster_path, "elsewhere/testbed-b.yaml");
    assert_int_equal(diff_plans(&a, &b, &opt, NULL), 0);
    opt.strict = 1;
    assert_int_equal(diff_plans(&a, &b, &opt, NULL), 2);
    opt.strict = 0;

    /* decisions elsewhere */
    b.layers[2].schedule = b.layers[2].schedule == FSMOE_SCHED_S1 ? FSMOE_SCHED_S2 : FSMOE_SCHED_S1;
    b.layers[2].fwd.q ^= 0x40u;
    b.parallel.ep = 4;
    b.f = 0;
    snprintf(b.method, sizeof b.method, "parm");
    assert_int_equal(diff_plans(&a, &b, &opt, NULL), 5);
    fsmoe_plan_free(&b);
    make_plan(&b, 1.2, 2);
    assert_true(diff_plans(&a, &b, &opt, NULL) >= 1); /* layer count */
    fsmoe_plan_free(&a);
    fsmoe_plan_free(&b);
}

/* A plan whose layer runs MoNTA's layer: written as schedule monta with schedule_s.monta, read
 * back field for field, the second write byte-identical; explain and diff name it. */
/* What `fsmoe-plan explain` prints for p (malloc'd). */
static char *explained(const fsmoe_plan *p)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    assert_non_null(mem);
    explain_plan(p, "x.yaml", mem);
    fclose(mem);
    return text;
}

static void test_monta_layer(void **state)
{
    (void)state;
    fsmoe_plan p, q;
    make_plan(&p, 1.2, 3);
    for (int i = 0; i < 3; i++) {
        fsmoe_layer_plan *l = &p.layers[i];
        l->schedule_s[FSMOE_SCHED_ESP_PIPELINE] = 0.03 + i;
        l->schedule_s[FSMOE_SCHED_S1] = 0.02 + i;
        l->schedule_s[FSMOE_SCHED_S2] = 0.025 + i;
        l->schedule_s[FSMOE_SCHED_MONTA] = 0.1 / 7 + i; /* not exactly representable */
    }
    fsmoe_layer_plan *m = &p.layers[1];
    m->schedule = FSMOE_SCHED_MONTA;
    m->a2a = FSMOE_A2A_O3;
    m->a2a_chunks = 6;
    m->fwd.r = m->bwd.r = 1;
    char a[600], b[600];
    path_in_dir(a, sizeof a, "monta-a.yaml");
    path_in_dir(b, sizeof b, "monta-b.yaml");
    fsmoe_error err = {0};
    assert_int_equal(fsmoe_plan_write(&p, a, &err), FSMOE_OK);
    if (fsmoe_plan_load(a, &q, &err) != FSMOE_OK)
        fail_msg("load: %s", err.msg);
    assert_plans_equal(&p, &q);
    assert_int_equal(q.layers[1].schedule, FSMOE_SCHED_MONTA);
    assert_int_equal(fsmoe_plan_write(&q, b, &err), FSMOE_OK);
    char *ta = slurp(a), *tb = slurp(b);
    assert_string_equal(ta, tb);
    assert_non_null(strstr(ta, "    schedule: monta\n    schedule_s: {esp_pipeline: 1.03, s1: 1.02, "
                               "s2: 1.025, monta: 1.0142857142857142}\n"));
    assert_non_null(strstr(ta, "a2a: {strategy: O3, chunks: 6,"));
    free(ta);
    free(tb);

    char *text = explained(&q);
    size_t len = 0;
    FILE *mem;
    assert_non_null(strstr(text, "schedule monta: "));
    assert_non_null(strstr(text, "MoNTA's layer, every op after the previous one (not pipelined): "
                                 "dispatch and combine AllToAll by O3 in 6 chunks"));
    free(text);

    diff_options opt = {.rtol = DIFF_DEFAULT_RTOL, .strict = 0};
    q.layers[1].schedule_s[FSMOE_SCHED_MONTA] *= 2.0;
    text = NULL;
    mem = open_memstream(&text, &len);
    assert_non_null(mem);
    assert_int_equal(diff_plans(&p, &q, &opt, mem), 1);
    fclose(mem);
    assert_non_null(strstr(text, "layers[1].schedule_s.monta"));
    free(text);
    fsmoe_plan_free(&p);
    fsmoe_plan_free(&q);
}

/* explain: identical consecutive layers collapse, cases are spelt out, speed-ups computed. */
static void test_explain(void **state)
{
    (void)state;
    fsmoe_plan p;
    make_plan(&p, 0, 6);
    for (int i = 2; i < 6; i++) {
        int idx = p.layers[i].index, blk = p.layers[i].block;
        p.layers[i] = p.layers[1];
        p.layers[i].index = idx;
        p.layers[i].block = blk;
    }
    char *text = explained(&p);
    assert_non_null(strstr(text, "layers 2–5: same as 1\n"));
    assert_non_null(strstr(text, "case 1, inter-node bound (AllToAll + Gradient-AllReduce)"));
    assert_non_null(strstr(text, "Q1 Q3 held -> case"));
    assert_non_null(strstr(text, "capacity factor none"));
    /* 2.1 s / 0.91 s = 2.307... */
    assert_non_null(strstr(text, "2.31x"));
    assert_non_null(strstr(text, "- - looks like a list item"));
    free(text);
    fsmoe_plan_free(&p);

    char buf[32];
    explain_time(12.34e-6, buf, sizeof buf);
    assert_string_equal(buf, "12.3 µs");
    explain_time(0.0123, buf, sizeof buf);
    assert_string_equal(buf, "12.30 ms");
    explain_bytes(12582912, buf, sizeof buf);
    assert_string_equal(buf, "12.0 MiB");
    explain_bytes(1536, buf, sizeof buf);
    assert_string_equal(buf, "1.5 KiB");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_double_format),
        cmocka_unit_test(test_plain_scalars),
        cmocka_unit_test(test_round_trip_f),
        cmocka_unit_test(test_round_trip_none),
        cmocka_unit_test(test_gradient_schedule),
        cmocka_unit_test(test_emit_stdout_equals_file),
        cmocka_unit_test(test_bad_plans),
        cmocka_unit_test(test_load_provenance_old),
        cmocka_unit_test(test_atomic_write),
        cmocka_unit_test(test_diff),
        cmocka_unit_test(test_monta_layer),
        cmocka_unit_test(test_explain),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
