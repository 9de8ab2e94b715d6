/* Implements: run configuration (config.h). */
#include "config.h"

#include <string.h>

#include "yaml_read.h"

void config_defaults(rt_config *c)
{
    memset(c, 0, sizeof(*c));
    snprintf(c->name, sizeof c->name, "model");
    c->V = 256, c->M = 64, c->H = 256, c->heads = 4, c->layers = 4, c->L = 64, c->B = 8;
    c->E = 4, c->k = 2, c->expert = 0, c->f = 1.25;
    c->gate = RT_GATE_GSHARD, c->order = RT_ORDER_TUTEL;
    c->moe_every = 1, c->moe_first = 0;
    c->gate_noise = 0.0, c->aux_coef = 0.01, c->xmoe_tau = 0.07, c->softmoe_slots = 0;
    c->r = 1;
    c->steps = 200, c->warmup = -1;
    c->lr = 3e-3, c->lr_min = 3e-4, c->wd = 0.0, c->beta1 = 0.9, c->beta2 = 0.95, c->eps = 1e-8;
    c->clip = 1.0, c->init_std = 0.02;
    c->seed = 1234;
    c->eval_every = 50, c->eval_batches = 4, c->save_every = 0;
}

/* The spelled names of the configuration's enums, in the model file and on the command line
 * (the gate and order modules use the same spellings). */
const fsmoe_name config_gate_names[] = {{"gshard", RT_GATE_GSHARD}, {"sigmoid", RT_GATE_SIGMOID},
                                        {"xmoe", RT_GATE_XMOE},
                                        {"expert_choice", RT_GATE_EXPERT_CHOICE},
                                        {"softmoe", RT_GATE_SOFTMOE}, {NULL, 0}};
const fsmoe_name config_order_names[] = {{"gshard", RT_ORDER_GSHARD}, {"tutel", RT_ORDER_TUTEL},
                                         {NULL, 0}};
const fsmoe_name config_expert_names[] = {{"gpt", 0}, {"swiglu", 1}, {NULL, 0}};

/* "path:line:col: field" of a field of the model file (found again in the file), or
 * "path: field" when it is not there (a default) or the file cannot be read again. */
static void locate(const char *path, const char *field, char *buf, size_t len)
{
    fsmoe_yaml y;
    fsmoe_ynode cur, next;
    memset(&y, 0, sizeof y);
    int found = fsmoe_yaml_open(&y, path, NULL) == FSMOE_OK &&
                fsmoe_yaml_root(&y, &cur, NULL) == FSMOE_OK;
    char seg[64];
    for (const char *s = field; found && *s;) {
        size_t n = strcspn(s, ".");
        if (n >= sizeof seg) {
            found = 0;
            break;
        }
        memcpy(seg, s, n);
        seg[n] = '\0';
        found = fsmoe_yaml_is_mapping(&cur) && fsmoe_yaml_has(&cur, seg) &&
                fsmoe_yaml_get(&cur, seg, FSMOE_REQUIRED, &next, NULL) == FSMOE_OK && next.node;
        if (found)
            cur = next;
        s += n + (s[n] == '.');
    }
    if (found)
        snprintf(buf, len, "%s:%d:%d: %s", path, cur.line, cur.col, field);
    else
        snprintf(buf, len, "%s: %s", path, field);
    fsmoe_yaml_close(&y);
}

/* Where a value came from: the flag that set it, else the model file's field, else the bare
 * field name (no origin known). */
static const char *origin_of(const rt_config_origin *o, const char *flag, const char *field,
                             char *buf, size_t len)
{
    if (flag)
        snprintf(buf, len, "%s", flag);
    else if (o && o->model_path)
        locate(o->model_path, field, buf, len);
    else
        snprintf(buf, len, "%s", field);
    return buf;
}

#define FLAG(o, f) ((o) ? (o)->f : NULL)

fsmoe_status config_from_model(rt_config *c, const fsmoe_model *m, const char *path,
                               fsmoe_error *err)
{
    char w[700];
    rt_config_origin o = {.model_path = path};
    snprintf(c->name, sizeof c->name, "%s", m->name);
    c->V = m->vocab, c->M = m->M, c->H = m->H, c->heads = m->heads, c->layers = m->layers;
    c->L = m->L, c->B = m->B, c->E = m->E, c->k = m->k;
    c->expert = m->expert == FSMOE_EXPERT_SWIGLU;
    c->f = m->f;
    c->moe_every = m->moe_every, c->moe_first = m->moe_first;
    int g = -1, ord = -1;
    if (!fsmoe_name_lookup(config_gate_names, m->gate, &g))
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: '%s' is not one of gshard, sigmoid, xmoe, expert_choice, softmoe",
                          origin_of(&o, NULL, "moe.gate", w, sizeof w), m->gate);
    if (!fsmoe_name_lookup(config_order_names, m->order, &ord))
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: '%s' is not one of gshard, tutel",
                          origin_of(&o, NULL, "moe.order", w, sizeof w), m->order);
    c->gate = (rt_gate_kind)g;
    c->order = (rt_order_kind)ord;
    c->kv_heads = m->kv_heads;
    if (c->kv_heads < 1 || c->kv_heads > c->heads || c->heads % c->kv_heads)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: %ld does not divide heads = %ld (grouped-query attention gives "
                          "each key/value head heads/kv_heads query heads)",
                          origin_of(&o, NULL, "architecture.kv_heads", w, sizeof w), m->kv_heads,
                          m->heads);
    return FSMOE_OK;
}

fsmoe_status config_validate(const rt_config *c, fsmoe_error *err)
{
    return config_check(c, NULL, err);
}

fsmoe_status config_check(const rt_config *c, const rt_config_origin *o, fsmoe_error *err)
{
    char w[700];
#define AT(flag, field) origin_of(o, FLAG(o, flag), field, w, sizeof w)
#define AT_FILE(field) origin_of(o, NULL, field, w, sizeof w) /* no flag sets it */
    if (c->V < 2 || c->V > 65536)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: %ld outside 2..65536",
                          AT_FILE("architecture.vocab"), c->V);
    if (c->M < 1)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: must be >= 1",
                          AT_FILE("architecture.hidden"));
    if (c->H < 1)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: must be >= 1",
                          AT_FILE("architecture.ffn_hidden"));
    if (c->heads < 1)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: must be >= 1",
                          AT_FILE("architecture.heads"));
    if (c->layers < 1)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: must be >= 1",
                          AT_FILE("architecture.layers"));
    if (c->L < 1)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: must be >= 1", AT(L, "training.seq"));
    if (c->B < 1)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: must be >= 1", AT(B, "training.batch"));
    if (c->M % c->heads)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: %ld is not divisible by heads = %ld",
                          AT_FILE("architecture.hidden"), c->M, c->heads);
    if (c->kv_heads < 0 || (c->kv_heads > 0 && (c->kv_heads > c->heads || c->heads % c->kv_heads)))
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: %ld does not divide heads = %ld",
                          AT_FILE("architecture.kv_heads"), c->kv_heads, c->heads);
    if (c->E < 1)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: %ld experts, need at least 1",
                          AT(E, "moe.experts"), c->E);
    if (c->k < 1 || c->k > c->E)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: need 1 <= top_k (%d) <= experts (%ld)",
                          AT(k, "moe.top_k"), c->k, c->E);
    if (c->gate == RT_GATE_SOFTMOE && c->order != RT_ORDER_GSHARD) {
        char w2[700];
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: gate softmoe needs order gshard (%s is tutel; its dispatch is a "
                          "dense mixture of tokens, which the sparse Tutel order cannot express)",
                          AT(gate, "moe.gate"), origin_of(o, FLAG(o, order), "moe.order", w2,
                                                          sizeof w2));
    }
    if (c->gate == RT_GATE_XMOE && c->E > 64)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: gate xmoe takes at most 64 experts (E = %ld)",
                          AT(gate, "moe.gate"), c->E);
    if (c->r < 1 || c->r > 64)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: r = %d outside 1..64",
                          FLAG(o, r) ? FLAG(o, r) : "r", c->r);
    if (c->steps < 1)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "--steps must be >= 1");
    if (c->moe_every < 1)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: must be >= 1",
                          AT_FILE("moe.every"));
    if (c->moe_first < 0)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: must be >= 0",
                          AT_FILE("moe.first"));
#undef AT
#undef AT_FILE
    return FSMOE_OK;
}

int config_is_moe_block(const rt_config *c, long b)
{
    return b >= c->moe_first && (b - c->moe_first) % c->moe_every == 0;
}

void config_print(const rt_config *c, FILE *f, const char *backend, const char *data,
                  long param_count)
{
    long moe = 0;
    for (long b = 0; b < c->layers; b++)
        moe += config_is_moe_block(c, b);
    fprintf(f, "# fsmoe-run configuration\n");
    fprintf(f, "| %-14s | %-40s |\n", "key", "value");
    fprintf(f, "| %-14s | %-40s |\n", "model", c->name);
    fprintf(f, "| %-14s | V=%ld M=%ld H=%ld heads=%ld (kv %ld) layers=%ld (%ld MoE) |\n",
            "architecture", c->V, c->M, c->H, c->heads, c->kv_heads > 0 ? c->kv_heads : c->heads,
            c->layers, moe);
    fprintf(f, "| %-14s | E=%ld k=%d expert=%s f=%s%.3g |\n", "moe", c->E, c->k,
            c->expert ? "swiglu" : "gpt", c->f > 0 ? "" : "none/", c->f);
    fprintf(f, "| %-14s | gate=%s order=%s r=%d noise=%.3g aux=%.3g |\n", "routing",
            fsmoe_name_of(config_gate_names, (int)c->gate),
            fsmoe_name_of(config_order_names, (int)c->order), c->r, c->gate_noise, c->aux_coef);
    fprintf(f, "| %-14s | B=%ld L=%ld (%ld tokens/step) |\n", "batch", c->B, c->L, c->B * c->L);
    fprintf(f, "| %-14s | %ld |\n", "parameters", param_count);
    fprintf(f, "| %-14s | AdamW lr=%.3g->%.3g warmup=%ld cosine, wd=%.3g b=(%.3g,%.3g) clip=%.3g |\n",
            "optimiser", c->lr, c->lr_min, c->warmup, c->wd, c->beta1, c->beta2, c->clip);
    fprintf(f, "| %-14s | steps=%ld seed=%llu eval-every=%ld save-every=%ld |\n", "schedule",
            c->steps, (unsigned long long)c->seed, c->eval_every, c->save_every);
    fprintf(f, "| %-14s | %s%s |\n", "backend", backend,
            c->serial ? " (no overlap: one in-order queue)" : "");
    fprintf(f, "| %-14s | %s |\n", "data", data);
}
