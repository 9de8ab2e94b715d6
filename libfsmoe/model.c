/* Implements: the model schema (models/<name>.yaml, design.md §2 and §11) and its validating
 * loader; capacity T = k·f·B·L/E from FSMoE §4 / design.md §2.
 *
 * Relies on yaml_read.h for every message (path:line:col: field: what is wrong (expected ...)).
 * Layout-dependent checks (E divisible by ep, capacity with E = ep) run here when the file has
 * a parallel section and again in fsmoe_model_resolve once the planner knows the layout. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "yaml_read.h"


static const char *const top_keys[] = {"fsmoe_model", "name",     "source",   "architecture",
                                       "moe",         "training", "parallel", NULL};
static const char *const arch_keys[] = {"hidden", "ffn_hidden", "heads", "kv_heads",
                                        "layers", "vocab",      NULL};
static const char *const moe_keys[] = {"experts", "top_k", "expert",   "every",    "first",
                                       "capacity_factor",  "gate",     "order",    "dispatch",
                                       NULL};
static const char *const training_keys[] = {"batch", "seq", "dtype", "zero_stage", "recompute",
                                            NULL};
static const char *const parallel_keys[] = {"world", "gpus_per_node", "dp", "mp",
                                            "ep",    "esp",           "pp", NULL};

static const fsmoe_yaml_enum expert_table[] = {
    {"gpt", FSMOE_EXPERT_GPT}, {"swiglu", FSMOE_EXPERT_SWIGLU}, {NULL, 0}};
static const fsmoe_yaml_enum gate_table[] = {{"gshard", 0},        {"sigmoid", 1}, {"xmoe", 2},
                                             {"expert_choice", 3}, {"softmoe", 4}, {NULL, 0}};
static const fsmoe_yaml_enum order_table[] = {{"gshard", 0}, {"tutel", 1}, {NULL, 0}};
static const fsmoe_yaml_enum dispatch_table[] = {
    {"nccl", 0}, {"1dh", 1}, {"2dh", 2}, {"auto", 3}, {NULL, 0}};
/* value = bytes per element */
static const fsmoe_yaml_enum dtype_table[] = {{"fp16", 2}, {"bf16", 2}, {"fp32", 4}, {NULL, 0}};

void fsmoe_model_mem_shape(const fsmoe_model *m, const fsmoe_parallel *par, fsmoe_mem_shape *out)
{
    fsmoe_mem_shape s = {
        .V = m->vocab, .M = m->M, .H = m->H, .heads = m->heads, .kv_heads = m->kv_heads,
        .layers = m->layers, .E = m->E, .k = m->k, .expert = m->expert,
        .moe_every = m->moe_every, .moe_first = m->moe_first,
        .gshard_order = strcmp(m->order, "gshard") == 0,
        .gate_xmoe = strcmp(m->gate, "xmoe") == 0, .f = m->f, .gate_dim = fsmoe_gate_dim(m->M),
        .B = m->B, .L = m->L, .bytes_per_element = m->bytes_per_element,
        .dp = par->dp, .mp = par->mp, .ep = par->ep, .esp = par->esp,
        .zero_stage = m->zero_stage, .recompute = m->recompute};
    *out = s;
}

const char *fsmoe_expert_name(fsmoe_expert_kind k)
{
    return fsmoe_name_of(expert_table, (int)k);
}

int fsmoe_expert_gemms(fsmoe_expert_kind k)
{
    return k == FSMOE_EXPERT_SWIGLU ? 3 : 2; /* w1,w2 (GELU) or w1,w3,w2 (SwiGLU) */
}

int fsmoe_model_is_moe_block(const fsmoe_model *m, long b)
{
    return b >= m->moe_first && b < m->layers && m->moe_every > 0 &&
           (b - m->moe_first) % m->moe_every == 0;
}

long fsmoe_model_moe_count(const fsmoe_model *m)
{
    if (m->moe_every <= 0 || m->moe_first >= m->layers)
        return 0;
    return (m->layers - 1 - m->moe_first) / m->moe_every + 1;
}

/* Capacity below one token per expert drops every token: T = k·f·B·L/E must be >= 1. */
static fsmoe_status check_capacity(const fsmoe_model *m, long E, const char *where,
                                   const char *layout, fsmoe_error *err)
{
    if (m->f <= 0.0 || E <= 0)
        return FSMOE_OK;
    double T = (double)m->k * m->f * (double)m->B * (double)m->L / (double)E;
    if (T < 1.0)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: capacity rounds to 0 tokens: k·f·B·L/E = %d·%g·%ld·%ld/%ld = %g "
                          "< 1 token per expert (expected capacity_factor >= %g, or none%s%s)",
                          where, m->k, m->f, m->B, m->L, E, T,
                          (double)E / ((double)m->k * (double)m->B * (double)m->L),
                          layout ? "; E = ep of the layout at " : "", layout ? layout : "");
    return FSMOE_OK;
}

fsmoe_status fsmoe_model_resolve(fsmoe_model *m, const fsmoe_parallel *p, const char *where,
                                 fsmoe_error *err)
{
    long E = m->experts_is_ep ? p->ep : m->E;
    fsmoe_status st = fsmoe_parallel_validate(p, 0, where, err);
    if (st)
        return st;
    if (!m->experts_is_ep && E % p->ep != 0)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: %ld is not divisible by ep=%d of the layout at %s (each EP rank "
                          "needs E/ep experts)",
                          fsmoe_mark_where(&m->at.experts, where), E, p->ep, where);
    if (m->k > E)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: top_k=%d exceeds experts=%ld%s%s (expected top_k <= experts)",
                          fsmoe_mark_where(&m->at.top_k, where), m->k, E,
                          m->experts_is_ep ? ", one per EP rank of the layout at " : "",
                          m->experts_is_ep ? where : "");
    st = check_capacity(m, E, fsmoe_mark_where(&m->at.capacity_factor, where),
                        m->experts_is_ep ? where : NULL, err);
    if (st)
        return st;
    m->E = E;
    return FSMOE_OK;
}

/* What the user wrote, for messages of values that accept a number or a word. */
static void got_text(const fsmoe_ynode *n, char *buf, size_t len)
{
    char text[64];
    if (fsmoe_yaml_is_mapping(n))
        snprintf(buf, len, "a mapping");
    else if (fsmoe_yaml_is_sequence(n))
        snprintf(buf, len, "a sequence");
    else if (fsmoe_yaml_node_string(n, text, sizeof text, NULL) == FSMOE_OK)
        snprintf(buf, len, "`%s`", text);
    else
        snprintf(buf, len, "an empty or overlong value");
}

static fsmoe_status load_parallel(const fsmoe_ynode *pn, fsmoe_parallel *p, fsmoe_error *err)
{
    fsmoe_status st;
    const int W = (int)FSMOE_LIMIT_WORLD;
    p->pp = 1;
    if ((st = fsmoe_yaml_check_keys(pn, parallel_keys, err)) ||
        (st = fsmoe_yaml_int(pn, "world", FSMOE_REQUIRED, 1, W, &p->world, err)) ||
        (st = fsmoe_yaml_int(pn, "gpus_per_node", FSMOE_REQUIRED, 1,
                             (int)FSMOE_LIMIT_GPUS_PER_NODE, &p->gpus_per_node, err)) ||
        (st = fsmoe_yaml_int(pn, "dp", FSMOE_REQUIRED, 1, W, &p->dp, err)) ||
        (st = fsmoe_yaml_int(pn, "mp", FSMOE_REQUIRED, 1, W, &p->mp, err)) ||
        (st = fsmoe_yaml_int(pn, "ep", FSMOE_REQUIRED, 1, W, &p->ep, err)) ||
        (st = fsmoe_yaml_int(pn, "esp", FSMOE_REQUIRED, 1, W, &p->esp, err)) ||
        (st = fsmoe_yaml_int(pn, "pp", FSMOE_OPTIONAL, 1, W, &p->pp, err)))
        return st;
    return FSMOE_OK;
}

static fsmoe_status load_doc(fsmoe_yaml *y, fsmoe_model *m, fsmoe_error *err)
{
    fsmoe_ynode root, arch, moe, tr, par, n;
    fsmoe_status st;
    int v;

    if ((st = fsmoe_yaml_root(y, &root, err)) ||
        (st = fsmoe_yaml_check_version(&root, "fsmoe_model", FSMOE_MODEL_VERSION, err)) ||
        (st = fsmoe_yaml_check_keys(&root, top_keys, err)) ||
        (st = fsmoe_yaml_string(&root, "name", FSMOE_REQUIRED, m->name, sizeof m->name, err)) ||
        (st = fsmoe_yaml_string(&root, "source", FSMOE_OPTIONAL, m->source, sizeof m->source,
                                err)))
        return st;

    /* architecture */
    if ((st = fsmoe_yaml_mapping(&root, "architecture", FSMOE_REQUIRED, &arch, err)) ||
        (st = fsmoe_yaml_check_keys(&arch, arch_keys, err)) ||
        (st = fsmoe_yaml_long(&arch, "hidden", FSMOE_REQUIRED, 1, FSMOE_LIMIT_HIDDEN, &m->M, err)) ||
        (st = fsmoe_yaml_long(&arch, "ffn_hidden", FSMOE_REQUIRED, 1, FSMOE_LIMIT_FFN_HIDDEN,
                              &m->H, err)) ||
        (st = fsmoe_yaml_long(&arch, "heads", FSMOE_REQUIRED, 1, FSMOE_LIMIT_HEADS, &m->heads,
                              err)))
        return st;
    m->kv_heads = m->heads;
    if ((st = fsmoe_yaml_long(&arch, "kv_heads", FSMOE_OPTIONAL, 1, FSMOE_LIMIT_HEADS,
                              &m->kv_heads, err)) ||
        (st = fsmoe_yaml_long(&arch, "layers", FSMOE_REQUIRED, 1, FSMOE_LIMIT_LAYERS, &m->layers,
                              err)) ||
        (st = fsmoe_yaml_long(&arch, "vocab", FSMOE_REQUIRED, 1, FSMOE_LIMIT_VOCAB, &m->vocab,
                              err)))
        return st;
    if (m->M % m->heads != 0) {
        fsmoe_yaml_get(&arch, "heads", FSMOE_REQUIRED, &n, NULL);
        return fsmoe_yaml_fail(&n, err, FSMOE_ERR_VALUE,
                               "heads=%ld does not divide hidden=%ld (expected hidden %% heads == "
                               "0: each head has hidden/heads dimensions)",
                               m->heads, m->M);
    }
    if (m->heads % m->kv_heads != 0) {
        fsmoe_yaml_get(&arch, "kv_heads", FSMOE_REQUIRED, &n, NULL);
        return fsmoe_yaml_fail(&n, err, FSMOE_ERR_VALUE,
                               "kv_heads=%ld does not divide heads=%ld (expected each KV head to "
                               "serve heads/kv_heads query heads)",
                               m->kv_heads, m->heads);
    }

    /* moe */
    if ((st = fsmoe_yaml_mapping(&root, "moe", FSMOE_REQUIRED, &moe, err)) ||
        (st = fsmoe_yaml_check_keys(&moe, moe_keys, err)) ||
        (st = fsmoe_yaml_get(&moe, "experts", FSMOE_REQUIRED, &n, err)))
        return st;
    fsmoe_mark_set(&m->at.experts, &n);
    if (fsmoe_yaml_is_word(&n, "ep")) {
        m->experts_is_ep = 1;
        m->E = 0; /* resolved from the layout (fsmoe_model_resolve) */
    } else if ((st = fsmoe_yaml_node_long(&n, 1, FSMOE_LIMIT_EXPERTS, &m->E, err))) {
        if (st == FSMOE_ERR_SCHEMA) {
            char got[96];
            got_text(&n, got, sizeof got);
            return fsmoe_yaml_fail(&n, err, st,
                                   "expected an integer >= 1 or the word `ep` (one expert per EP "
                                   "rank), got %s",
                                   got);
        }
        return st;
    }
    if ((st = fsmoe_yaml_get(&moe, "top_k", FSMOE_REQUIRED, &n, err)))
        return st;
    fsmoe_mark_set(&m->at.top_k, &n);
    if ((st = fsmoe_yaml_int(&moe, "top_k", FSMOE_REQUIRED, 1, (int)FSMOE_LIMIT_TOP_K, &m->k,
                             err)) ||
        (st = fsmoe_yaml_enum_get(&moe, "expert", FSMOE_REQUIRED, expert_table, &v, err)))
        return st;
    m->expert = (fsmoe_expert_kind)v;
    m->moe_every = 1;
    m->moe_first = 0;
    if ((st = fsmoe_yaml_int(&moe, "every", FSMOE_OPTIONAL, 1, (int)FSMOE_LIMIT_LAYERS,
                             &m->moe_every, err)) ||
        (st = fsmoe_yaml_int(&moe, "first", FSMOE_OPTIONAL, 0, (int)FSMOE_LIMIT_LAYERS,
                             &m->moe_first, err)))
        return st;
    if (m->moe_first >= m->layers) {
        fsmoe_yaml_get(&moe, "first", FSMOE_REQUIRED, &n, NULL);
        return fsmoe_yaml_fail(&n, err, FSMOE_ERR_VALUE,
                               "first MoE block %d is past the last block (expected first < "
                               "layers=%ld)",
                               m->moe_first, m->layers);
    }
    if (!m->experts_is_ep && m->k > m->E) {
        fsmoe_yaml_get(&moe, "top_k", FSMOE_REQUIRED, &n, NULL);
        return fsmoe_yaml_fail(&n, err, FSMOE_ERR_VALUE,
                               "top_k=%d exceeds experts=%ld (expected top_k <= experts)", m->k,
                               m->E);
    }
    fsmoe_ynode cf;
    if ((st = fsmoe_yaml_get(&moe, "capacity_factor", FSMOE_REQUIRED, &cf, err)))
        return st;
    fsmoe_mark_set(&m->at.capacity_factor, &cf);
    if (fsmoe_yaml_is_none(&cf)) {
        m->f = 0.0;
    } else {
        if (fsmoe_yaml_node_double(&cf, -HUGE_VAL, HUGE_VAL, &m->f, NULL) != FSMOE_OK) {
            char got[96];
            got_text(&cf, got, sizeof got);
            return fsmoe_yaml_fail(&cf, err, FSMOE_ERR_SCHEMA,
                                   "expected a number > 0 or `none` (no token dropping), got %s",
                                   got);
        }
        if (!(m->f > 0.0))
            return fsmoe_yaml_fail(&cf, err, FSMOE_ERR_VALUE,
                                   "%g is not a capacity factor (expected a number > 0, or `none` "
                                   "for no token dropping)",
                                   m->f);
        if (m->f > FSMOE_LIMIT_CAPACITY_FACTOR)
            return fsmoe_yaml_fail(&cf, err, FSMOE_ERR_VALUE,
                                   "%g is out of range (expected a number in (0, %g], or `none`: "
                                   "from f = E/k on no token is dropped)",
                                   m->f, FSMOE_LIMIT_CAPACITY_FACTOR);
    }
    int gate = 0, order = 1, dispatch = 0;
    if ((st = fsmoe_yaml_enum_get(&moe, "gate", FSMOE_OPTIONAL, gate_table, &gate, err)) ||
        (st = fsmoe_yaml_enum_get(&moe, "order", FSMOE_OPTIONAL, order_table, &order, err)) ||
        (st = fsmoe_yaml_enum_get(&moe, "dispatch", FSMOE_OPTIONAL, dispatch_table, &dispatch,
                                  err)))
        return st;
    snprintf(m->gate, sizeof m->gate, "%s", fsmoe_name_of(gate_table, gate));
    snprintf(m->order, sizeof m->order, "%s", fsmoe_name_of(order_table, order));
    snprintf(m->dispatch, sizeof m->dispatch, "%s", fsmoe_name_of(dispatch_table, dispatch));
    if (fsmoe_yaml_get(&moe, "dispatch", FSMOE_OPTIONAL, &n, NULL) == FSMOE_OK && n.node)
        fsmoe_mark_set(&m->at.dispatch, &n);

    /* training */
    if ((st = fsmoe_yaml_mapping(&root, "training", FSMOE_REQUIRED, &tr, err)) ||
        (st = fsmoe_yaml_check_keys(&tr, training_keys, err)) ||
        (st = fsmoe_yaml_long(&tr, "batch", FSMOE_REQUIRED, 1, FSMOE_LIMIT_BATCH, &m->B, err)) ||
        (st = fsmoe_yaml_long(&tr, "seq", FSMOE_REQUIRED, 1, FSMOE_LIMIT_SEQ, &m->L, err)) ||
        (st = fsmoe_yaml_enum_get(&tr, "dtype", FSMOE_REQUIRED, dtype_table,
                                  &m->bytes_per_element, err)) ||
        (st = fsmoe_yaml_int(&tr, "zero_stage", FSMOE_OPTIONAL, 0, 3, &m->zero_stage, err)) ||
        (st = fsmoe_yaml_enum_get(&tr, "recompute", FSMOE_OPTIONAL, fsmoe_recompute_table,
                                  &m->recompute, err)))
        return st;
    if (m->B * m->L > FSMOE_LIMIT_TOKENS) {
        fsmoe_yaml_get(&tr, "seq", FSMOE_REQUIRED, &n, NULL);
        return fsmoe_yaml_fail(&n, err, FSMOE_ERR_VALUE,
                               "batch·seq = %ld·%ld = %ld tokens per GPU and step (expected at "
                               "most %ld)",
                               m->B, m->L, m->B * m->L, FSMOE_LIMIT_TOKENS);
    }
    if (!m->experts_is_ep && (st = check_capacity(m, m->E, m->at.capacity_factor.where, NULL,
                                                  err)))
        return st;

    /* parallel (optional default layout) */
    if ((st = fsmoe_yaml_mapping(&root, "parallel", FSMOE_OPTIONAL, &par, err)))
        return st;
    if (par.node) {
        if ((st = load_parallel(&par, &m->parallel, err)))
            return st;
        m->has_parallel = 1;
        /* the layout at the key that breaks it, then what it means for the MoE fields */
        if ((st = fsmoe_yaml_check_layout(&par, &m->parallel, 0, err)))
            return st;
        char where[FSMOE_ERROR_MAX];
        fsmoe_yaml_where(&par, where, sizeof where);
        if ((st = fsmoe_model_resolve(m, &m->parallel, where, err)))
            return st;
    }
    return FSMOE_OK;
}

/* One document, from the file `path` (text NULL) or from memory (`path` names it). */
static fsmoe_status read_doc(const char *path, const char *text, size_t len, fsmoe_model *out,
                             fsmoe_error *err)
{
    fsmoe_yaml y;
    memset(out, 0, sizeof *out);
    fsmoe_status st = text ? fsmoe_yaml_open_string(&y, path, text, len, err)
                           : fsmoe_yaml_open(&y, path, err);
    if (st)
        return st;
    st = load_doc(&y, out, err);
    fsmoe_yaml_close(&y);
    return st;
}

fsmoe_status fsmoe_model_load(const char *path, fsmoe_model *out, fsmoe_error *err)
{
    return read_doc(path, NULL, 0, out, err);
}

fsmoe_status fsmoe_model_parse(const char *name, const char *text, size_t len, fsmoe_model *out,
                               fsmoe_error *err)
{
    return read_doc(name, text ? text : "", len, out, err);
}
