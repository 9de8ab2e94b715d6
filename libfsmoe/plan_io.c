/* Implements: the plan file (design.md §9) — its YAML schema, the deterministic atomic writer and
 * the validating reader. Relies on yaml_write.h (output) and yaml_read.h (input, messages with
 * file:line:col).
 *
 * Schema, version 3 (the implementation owns it; design.md §9 is the sketch):
 *   fsmoe_plan: 3
 *   provenance: {model, model_sha256, cluster, cluster_sha256, planner_version, method,
 *                decided_by, overrides: [{flag, value}, ...]}          (block mapping)
 *   model: {name, M, H, E, k, expert, capacity (factor | dropless),
 *           capacity_factor (number | none: none iff dropless), batch (per DP rank),
 *           global_batch (= dp·batch), seq, bytes_per_element}        (block mapping)
 *   cluster: {name}
 *   parallel: {world, gpus_per_node, ranks (node-major), dp, mp, ep, esp, edp (= mp·dp/(ep·esp)),
 *              pp}                                  (checked with fsmoe_parallel_validate)
 *   alltoall: {split (alltoallv | padded)}
 *   layers: - index, block, schedule (esp-pipeline | S1 | S2 | monta),
 *             schedule_s {esp_pipeline, s1, s2, monta}, t_d1_s, t_d2_s,
 *             (schedule_s.monta is written only when MoNTA's layer was a candidate, > 0, and
 *             reads as 0 when absent; a monta layer runs forward.r = backward.r = 1 and its
 *             AllToAll by a2a.strategy in a2a.chunks)
 *             a2a {strategy, chunks, algorithm, base_s, o1_s, o2_s, o3_s},
 *             forward/backward {r, case, q: [Q1, ...], t_gar_s, predicted_s},
 *             dense {fwd_s, bwd_s}, overlap {dense_s, moe_s},
 *             gradients {bytes, in_window_bytes, step2_bytes, carried_bytes}
 *   gradient_tail_bytes, prefix_grad_bytes, prefix_window_bytes
 *   gradient_schedule (partition | lina; optional, partition when absent, written only as lina)
 *   predicted: {iteration_s, forward_s, backward_s, tail_s,
 *               baselines {deepspeed, tutel, tutel_improved, pipemoe_lina}}
 *   memory: {zero_stage, recompute, weights, gradients, optimizer, activations, workspace,
 *            buffers, total}   (bytes per GPU, memory.h; optional, the total their sum)
 *   pipeline: {schedule (gpipe | 1f1b), micro_batches, stage_blocks, stage_forward_s,
 *              stage_backward_s, gradient_s, p2p_bytes, p2p_s}
 *              (exactly when parallel.pp > 1; planner/gpipe.h)
 *   notes: [line, ...]   (plan->notes split on newlines; empty lines dropped)
 * There is deliberately no timestamp: the same inputs must give a byte-identical file. */
#include "plan.h"

#include "atomic_file.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "yaml_read.h"
#include "yaml_write.h"

const char *fsmoe_schedule_name(fsmoe_schedule s)
{
    switch (s) {
    case FSMOE_SCHED_ESP_PIPELINE: return "esp-pipeline";
    case FSMOE_SCHED_S1: return "S1";
    case FSMOE_SCHED_S2: return "S2";
    case FSMOE_SCHED_MONTA: return "monta";
    }
    return "?";
}

const char *fsmoe_grad_schedule_name(fsmoe_grad_schedule g)
{
    return g == FSMOE_GRADS_LINA ? "lina" : "partition";
}

const char *fsmoe_rank_order_name(fsmoe_rank_order o)
{
    return o == FSMOE_RANKS_NODE_MAJOR ? "node-major" : "?";
}

const char *fsmoe_capacity_mode_name(fsmoe_capacity_mode c)
{
    switch (c) {
    case FSMOE_CAPACITY_FACTOR: return "factor";
    case FSMOE_CAPACITY_DROPLESS: return "dropless";
    }
    return "?";
}

const char *fsmoe_a2a_split_name(fsmoe_a2a_split s)
{
    switch (s) {
    case FSMOE_SPLIT_ALLTOALLV: return "alltoallv";
    case FSMOE_SPLIT_PADDED: return "padded";
    }
    return "?";
}

const char *fsmoe_a2a_strategy_name(fsmoe_a2a_strategy s)
{
    switch (s) {
    case FSMOE_A2A_BASE: return "base";
    case FSMOE_A2A_O1: return "O1";
    case FSMOE_A2A_O2: return "O2";
    case FSMOE_A2A_O3: return "O3";
    }
    return "?";
}

void fsmoe_plan_free(fsmoe_plan *p)
{
    if (!p)
        return;
    free(p->layers);
    p->layers = NULL;
    p->n_layers = 0;
}

/* ---- writing ---------------------------------------------------------------------------- */

/* Appends s to the comment line, single-quoted for a POSIX shell when it holds anything but
 * harmless characters, so the regenerate command can be pasted as is. */
static void plan_shell_word(char *buf, size_t len, const char *s)
{
    size_t used = strlen(buf);
    int plain = s[0] != '\0';
    for (const char *p = s; *p; p++)
        if (!(('a' <= *p && *p <= 'z') || ('A' <= *p && *p <= 'Z') || ('0' <= *p && *p <= '9') ||
              strchr("@%_+=:,./-", *p)))
            plain = 0;
    if (plain) {
        snprintf(buf + used, len - used, " %s", s);
        return;
    }
    snprintf(buf + used, len - used, " '");
    for (const char *p = s; *p; p++) {
        used = strlen(buf);
        if (*p == '\'')
            snprintf(buf + used, len - used, "'\\''");
        else
            snprintf(buf + used, len - used, "%c", *p);
    }
    used = strlen(buf);
    snprintf(buf + used, len - used, "'");
}

static void plan_emit_phase(fsmoe_yaml_writer *w, const char *key, const fsmoe_phase_plan *ph)
{
    static const char *const qnames[7] = {"Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7"};
    const char *held[7];
    int n = 0;
    for (int i = 0; i < 7; i++)
        if (ph->q & (1u << i))
            held[n++] = qnames[i];
    fsmoe_yw_flow_begin(w, 4, key);
    fsmoe_yw_long(w, 0, "r", ph->r);
    fsmoe_yw_long(w, 0, "case", ph->binding_case);
    fsmoe_yw_flow_strings(w, 0, "q", held, n);
    fsmoe_yw_double(w, 0, "t_gar_s", ph->t_gar_s);
    fsmoe_yw_double(w, 0, "predicted_s", ph->predicted_s);
    fsmoe_yw_flow_end(w);
}

static void plan_emit_layer(fsmoe_yaml_writer *w, const fsmoe_layer_plan *l)
{
    fsmoe_yw_item(w);
    fsmoe_yw_long(w, 2, "index", l->index);
    fsmoe_yw_long(w, 4, "block", l->block);
    fsmoe_yw_str(w, 4, "schedule", fsmoe_schedule_name(l->schedule));
    fsmoe_yw_flow_begin(w, 4, "schedule_s");
    fsmoe_yw_double(w, 0, "esp_pipeline", l->schedule_s[FSMOE_SCHED_ESP_PIPELINE]);
    fsmoe_yw_double(w, 0, "s1", l->schedule_s[FSMOE_SCHED_S1]);
    fsmoe_yw_double(w, 0, "s2", l->schedule_s[FSMOE_SCHED_S2]);
    if (l->schedule_s[FSMOE_SCHED_MONTA] > 0.0)
        fsmoe_yw_double(w, 0, "monta", l->schedule_s[FSMOE_SCHED_MONTA]);
    fsmoe_yw_flow_end(w);
    fsmoe_yw_double(w, 4, "t_d1_s", l->t_d1_s);
    fsmoe_yw_double(w, 4, "t_d2_s", l->t_d2_s);
    fsmoe_yw_flow_begin(w, 4, "a2a");
    fsmoe_yw_str(w, 0, "strategy", fsmoe_a2a_strategy_name(l->a2a));
    fsmoe_yw_long(w, 0, "chunks", l->a2a_chunks);
    fsmoe_yw_str(w, 0, "algorithm", l->a2a_algorithm);
    fsmoe_yw_double(w, 0, "base_s", l->a2a_s[0]);
    fsmoe_yw_double(w, 0, "o1_s", l->a2a_s[1]);
    fsmoe_yw_double(w, 0, "o2_s", l->a2a_s[2]);
    fsmoe_yw_double(w, 0, "o3_s", l->a2a_s[3]);
    fsmoe_yw_flow_end(w);
    plan_emit_phase(w, "forward", &l->fwd);
    plan_emit_phase(w, "backward", &l->bwd);
    fsmoe_yw_flow_begin(w, 4, "dense");
    fsmoe_yw_double(w, 0, "fwd_s", l->dense_fwd_s);
    fsmoe_yw_double(w, 0, "bwd_s", l->dense_bwd_s);
    fsmoe_yw_flow_end(w);
    fsmoe_yw_flow_begin(w, 4, "overlap");
    fsmoe_yw_double(w, 0, "dense_s", l->olp_dense_s);
    fsmoe_yw_double(w, 0, "moe_s", l->olp_moe_s);
    fsmoe_yw_flow_end(w);
    fsmoe_yw_flow_begin(w, 4, "gradients");
    fsmoe_yw_double(w, 0, "bytes", l->grad_bytes);
    fsmoe_yw_double(w, 0, "in_window_bytes", l->window_bytes);
    fsmoe_yw_double(w, 0, "step2_bytes", l->step2_bytes);
    fsmoe_yw_double(w, 0, "carried_bytes", l->carried_bytes);
    fsmoe_yw_flow_end(w);
}

void fsmoe_plan_command(const fsmoe_plan *p, const char *out, char *cmd, size_t len)
{
    snprintf(cmd, len, "fsmoe-plan --model");
    plan_shell_word(cmd, len, p->model_path);
    snprintf(cmd + strlen(cmd), len - strlen(cmd), " --cluster");
    plan_shell_word(cmd, len, p->cluster_path);
    if (p->method[0] && strcmp(p->method, "auto") != 0) {
        snprintf(cmd + strlen(cmd), len - strlen(cmd), " --method");
        plan_shell_word(cmd, len, p->method);
    }
    for (int i = 0; i < p->n_overrides; i++) {
        snprintf(cmd + strlen(cmd), len - strlen(cmd), " --%s", p->overrides[i].flag);
        plan_shell_word(cmd, len, p->overrides[i].value);
    }
    if (out) {
        snprintf(cmd + strlen(cmd), len - strlen(cmd), " -o");
        plan_shell_word(cmd, len, out);
    }
}

fsmoe_status fsmoe_plan_emit(const fsmoe_plan *p, void *FILE_stream, fsmoe_error *err)
{
    FILE *f = FILE_stream;
    fsmoe_yaml_writer w;
    fsmoe_yw_init(&w, f);

    char cmd[2048], regen[1800];
    fsmoe_plan_command(p, NULL, regen, sizeof regen);
    snprintf(cmd, sizeof cmd, "generated by fsmoe-plan %s; regenerate with: %s",
             p->planner_version, regen);
    fsmoe_yw_comment(&w, cmd);
    fsmoe_yw_long(&w, 0, "fsmoe_plan", FSMOE_PLAN_VERSION);

    fsmoe_yw_block(&w, 0, "provenance");
    fsmoe_yw_str(&w, 2, "model", p->model_path);
    fsmoe_yw_str(&w, 2, "model_sha256", p->model_sha256);
    fsmoe_yw_str(&w, 2, "cluster", p->cluster_path);
    fsmoe_yw_str(&w, 2, "cluster_sha256", p->cluster_sha256);
    fsmoe_yw_str(&w, 2, "planner_version", p->planner_version);
    fsmoe_yw_str(&w, 2, "method", p->method);
    fsmoe_yw_str(&w, 2, "decided_by", p->decided_by);
    if (p->n_overrides == 0) {
        fsmoe_yw_raw(&w, 2, "overrides", "[]");
    } else {
        fsmoe_yw_block(&w, 2, "overrides");
        for (int i = 0; i < p->n_overrides; i++) {
            fsmoe_yw_flow_begin(&w, 4, NULL);
            fsmoe_yw_str(&w, 0, "flag", p->overrides[i].flag);
            fsmoe_yw_str(&w, 0, "value", p->overrides[i].value);
            fsmoe_yw_flow_end(&w);
        }
    }

    fsmoe_yw_block(&w, 0, "model");
    fsmoe_yw_str(&w, 2, "name", p->model_name);
    fsmoe_yw_long(&w, 2, "M", p->M);
    fsmoe_yw_long(&w, 2, "H", p->H);
    fsmoe_yw_long(&w, 2, "E", p->E);
    fsmoe_yw_long(&w, 2, "k", p->k);
    fsmoe_yw_str(&w, 2, "expert", p->expert == FSMOE_EXPERT_SWIGLU ? "swiglu" : "gpt");
    fsmoe_yw_str(&w, 2, "capacity", fsmoe_capacity_mode_name(p->capacity));
    if (p->f == 0)
        fsmoe_yw_raw(&w, 2, "capacity_factor", "none");
    else
        fsmoe_yw_double(&w, 2, "capacity_factor", p->f);
    fsmoe_yw_long(&w, 2, "batch", p->B);
    fsmoe_yw_long(&w, 2, "global_batch", p->B_global);
    fsmoe_yw_long(&w, 2, "seq", p->L);
    fsmoe_yw_long(&w, 2, "bytes_per_element", p->bytes_per_element);

    fsmoe_yw_flow_begin(&w, 0, "cluster");
    fsmoe_yw_str(&w, 0, "name", p->cluster_name);
    fsmoe_yw_flow_end(&w);

    const fsmoe_parallel *par = &p->parallel;
    fsmoe_yw_flow_begin(&w, 0, "parallel");
    fsmoe_yw_long(&w, 0, "world", par->world);
    fsmoe_yw_long(&w, 0, "gpus_per_node", par->gpus_per_node);
    fsmoe_yw_str(&w, 0, "ranks", fsmoe_rank_order_name(p->ranks));
    fsmoe_yw_long(&w, 0, "dp", par->dp);
    fsmoe_yw_long(&w, 0, "mp", par->mp);
    fsmoe_yw_long(&w, 0, "ep", par->ep);
    fsmoe_yw_long(&w, 0, "esp", par->esp);
    fsmoe_yw_long(&w, 0, "edp", p->edp);
    fsmoe_yw_long(&w, 0, "pp", par->pp);
    fsmoe_yw_flow_end(&w);
    fsmoe_yw_flow_begin(&w, 0, "alltoall");
    fsmoe_yw_str(&w, 0, "split", fsmoe_a2a_split_name(p->split));
    fsmoe_yw_flow_end(&w);

    if (p->n_layers == 0) {
        fsmoe_yw_raw(&w, 0, "layers", "[]");
    } else {
        fsmoe_yw_block(&w, 0, "layers");
        for (int i = 0; i < p->n_layers; i++)
            plan_emit_layer(&w, &p->layers[i]);
    }
    fsmoe_yw_double(&w, 0, "gradient_tail_bytes", p->gradient_tail_bytes);
    fsmoe_yw_double(&w, 0, "prefix_grad_bytes", p->prefix_grad_bytes);
    fsmoe_yw_double(&w, 0, "prefix_window_bytes", p->prefix_window_bytes);
    if (p->gradients != FSMOE_GRADS_PARTITION)
        fsmoe_yw_str(&w, 0, "gradient_schedule", fsmoe_grad_schedule_name(p->gradients));

    const fsmoe_predicted *pr = &p->predicted;
    fsmoe_yw_block(&w, 0, "predicted");
    fsmoe_yw_double(&w, 2, "iteration_s", pr->iteration_s);
    fsmoe_yw_double(&w, 2, "forward_s", pr->forward_s);
    fsmoe_yw_double(&w, 2, "backward_s", pr->backward_s);
    fsmoe_yw_double(&w, 2, "tail_s", pr->tail_s);
    fsmoe_yw_flow_begin(&w, 2, "baselines");
    fsmoe_yw_double(&w, 0, "deepspeed", pr->deepspeed_s);
    fsmoe_yw_double(&w, 0, "tutel", pr->tutel_s);
    fsmoe_yw_double(&w, 0, "tutel_improved", pr->tutel_improved_s);
    fsmoe_yw_double(&w, 0, "pipemoe_lina", pr->pipemoe_lina_s);
    fsmoe_yw_flow_end(&w);
    if (p->memory.present) {
        fsmoe_yw_block(&w, 0, "memory");
        fsmoe_yw_long(&w, 2, "zero_stage", p->memory.zero_stage);
        fsmoe_yw_raw(&w, 2, "recompute", fsmoe_name_of(fsmoe_recompute_table, p->memory.recompute));
        for (int c = 0; c < FSMOE_MEM_CATS; c++)
            fsmoe_yw_double(&w, 2, fsmoe_mem_names[c], p->memory.bytes[c]);
        fsmoe_yw_double(&w, 2, "total", p->memory.total);
    }
    if (p->pipeline.present) {
        fsmoe_yw_block(&w, 0, "pipeline");
        fsmoe_yw_raw(&w, 2, "schedule", p->pipeline.one_f_one_b ? "1f1b" : "gpipe");
        fsmoe_yw_long(&w, 2, "micro_batches", p->pipeline.micro_batches);
        fsmoe_yw_long(&w, 2, "stage_blocks", p->pipeline.stage_blocks);
        fsmoe_yw_double(&w, 2, "stage_forward_s", p->pipeline.fwd_s);
        fsmoe_yw_double(&w, 2, "stage_backward_s", p->pipeline.bwd_s);
        fsmoe_yw_double(&w, 2, "gradient_s", p->pipeline.grad_s);
        fsmoe_yw_double(&w, 2, "p2p_bytes", p->pipeline.p2p_bytes);
        fsmoe_yw_double(&w, 2, "p2p_s", p->pipeline.p2p_s);
    }

    /* Notes, one per line of plan->notes. */
    char line[sizeof p->notes];
    int n_notes = 0;
    for (const char *s = p->notes; *s;) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        if (len > 0) {
            if (n_notes++ == 0)
                fsmoe_yw_block(&w, 0, "notes");
            memcpy(line, s, len);
            line[len] = '\0';
            fsmoe_yw_seq_str(&w, 2, line);
        }
        s += len + (nl ? 1 : 0);
    }
    if (n_notes == 0)
        fsmoe_yw_raw(&w, 0, "notes", "[]");

    if (!w.error && ferror(f))
        w.error = EIO;
    if (w.error)
        return fsmoe_fail(err, FSMOE_ERR_IO, "writing the plan failed: %s", strerror(w.error));
    return FSMOE_OK;
}

fsmoe_status fsmoe_plan_write(const fsmoe_plan *p, const char *path, fsmoe_error *err)
{
    fsmoe_atomic_file af;
    fsmoe_status st = fsmoe_atomic_open(&af, path, err);
    if (st != FSMOE_OK)
        return st;
    st = fsmoe_plan_emit(p, af.f, err);
    if (st != FSMOE_OK) {
        fsmoe_atomic_abort(&af);
        return st;
    }
    return fsmoe_atomic_commit(&af, err);
}

/* ---- reading ---------------------------------------------------------------------------- */

#define PLAN_BIG FSMOE_LIMIT_PLAN_VALUE /* times and bytes (yaml_read.h) */
#define PLAN_WORLD ((int)FSMOE_LIMIT_WORLD)

static const fsmoe_yaml_enum plan_sched_table[] = {
    {"esp-pipeline", FSMOE_SCHED_ESP_PIPELINE},
    {"S1", FSMOE_SCHED_S1},
    {"S2", FSMOE_SCHED_S2},
    {"monta", FSMOE_SCHED_MONTA},
    {NULL, 0}};
static const fsmoe_yaml_enum plan_a2a_table[] = {{"base", FSMOE_A2A_BASE},
                                                 {"O1", FSMOE_A2A_O1},
                                                 {"O2", FSMOE_A2A_O2},
                                                 {"O3", FSMOE_A2A_O3},
                                                 {NULL, 0}};
static const fsmoe_yaml_enum plan_expert_table[] = {
    {"gpt", FSMOE_EXPERT_GPT}, {"swiglu", FSMOE_EXPERT_SWIGLU}, {NULL, 0}};
static const fsmoe_yaml_enum plan_ranks_table[] = {{"node-major", FSMOE_RANKS_NODE_MAJOR},
                                                   {NULL, 0}};
static const fsmoe_yaml_enum plan_capacity_table[] = {
    {"factor", FSMOE_CAPACITY_FACTOR}, {"dropless", FSMOE_CAPACITY_DROPLESS}, {NULL, 0}};
static const fsmoe_yaml_enum plan_split_table[] = {
    {"alltoallv", FSMOE_SPLIT_ALLTOALLV}, {"padded", FSMOE_SPLIT_PADDED}, {NULL, 0}};
static const fsmoe_yaml_enum plan_grads_table[] = {
    {"partition", FSMOE_GRADS_PARTITION}, {"lina", FSMOE_GRADS_LINA}, {NULL, 0}};
static const fsmoe_yaml_enum plan_q_table[] = {{"Q1", 1}, {"Q2", 2}, {"Q3", 3}, {"Q4", 4},
                                               {"Q5", 5}, {"Q6", 6}, {"Q7", 7}, {NULL, 0}};

static fsmoe_status plan_read_provenance(const fsmoe_ynode *root, fsmoe_plan *p, fsmoe_error *err)
{
    static const char *const keys[] = {"model",  "model_sha256", "cluster",    "cluster_sha256",
                                       "planner_version", "method", "decided_by", "overrides",
                                       NULL};
    static const char *const okeys[] = {"flag", "value", NULL};
    fsmoe_ynode prov, ovr, item;
    fsmoe_status st;
    if ((st = fsmoe_yaml_mapping(root, "provenance", FSMOE_REQUIRED, &prov, err)) ||
        (st = fsmoe_yaml_check_keys(&prov, keys, err)) ||
        (st = fsmoe_yaml_string(&prov, "model", FSMOE_REQUIRED, p->model_path,
                                sizeof p->model_path, err)) ||
        (st = fsmoe_yaml_string(&prov, "model_sha256", FSMOE_REQUIRED, p->model_sha256,
                                sizeof p->model_sha256, err)) ||
        (st = fsmoe_yaml_string(&prov, "cluster", FSMOE_REQUIRED, p->cluster_path,
                                sizeof p->cluster_path, err)) ||
        (st = fsmoe_yaml_string(&prov, "cluster_sha256", FSMOE_REQUIRED, p->cluster_sha256,
                                sizeof p->cluster_sha256, err)) ||
        (st = fsmoe_yaml_string(&prov, "planner_version", FSMOE_REQUIRED, p->planner_version,
                                sizeof p->planner_version, err)) ||
        (st = fsmoe_yaml_string(&prov, "method", FSMOE_REQUIRED, p->method, sizeof p->method,
                                err)) ||
        (st = fsmoe_yaml_string(&prov, "decided_by", FSMOE_REQUIRED, p->decided_by,
                                sizeof p->decided_by, err)) ||
        (st = fsmoe_yaml_sequence(&prov, "overrides", FSMOE_REQUIRED, &ovr, err)))
        return st;
    int n = fsmoe_yaml_seq_len(&ovr);
    if (n > FSMOE_PLAN_MAX_OVERRIDES)
        return fsmoe_yaml_fail(&ovr, err, FSMOE_ERR_VALUE, "%d overrides (at most %d)", n,
                               FSMOE_PLAN_MAX_OVERRIDES);
    for (int i = 0; i < n; i++) {
        if ((st = fsmoe_yaml_seq_item(&ovr, i, &item, err)) ||
            (st = fsmoe_yaml_node_expect_mapping(&item, err)) ||
            (st = fsmoe_yaml_check_keys(&item, okeys, err)) ||
            (st = fsmoe_yaml_string(&item, "flag", FSMOE_REQUIRED, p->overrides[i].flag,
                                    sizeof p->overrides[i].flag, err)) ||
            (st = fsmoe_yaml_string(&item, "value", FSMOE_REQUIRED, p->overrides[i].value,
                                    sizeof p->overrides[i].value, err)))
            return st;
    }
    p->n_overrides = n;
    return FSMOE_OK;
}

static fsmoe_status plan_read_model(const fsmoe_ynode *root, fsmoe_plan *p, fsmoe_error *err)
{
    static const char *const keys[] = {"name",     "M",     "H",            "E",
                                       "k",        "expert", "capacity",    "capacity_factor",
                                       "batch",    "global_batch", "seq",   "bytes_per_element",
                                       NULL};
    fsmoe_ynode m, cf, v;
    fsmoe_status st;
    int expert = 0, capacity = 0;
    if ((st = fsmoe_yaml_mapping(root, "model", FSMOE_REQUIRED, &m, err)) ||
        (st = fsmoe_yaml_check_keys(&m, keys, err)) ||
        (st = fsmoe_yaml_string(&m, "name", FSMOE_REQUIRED, p->model_name, sizeof p->model_name,
                                err)) ||
        (st = fsmoe_yaml_long(&m, "M", FSMOE_REQUIRED, 1, FSMOE_LIMIT_HIDDEN, &p->M, err)) ||
        (st = fsmoe_yaml_long(&m, "H", FSMOE_REQUIRED, 1, FSMOE_LIMIT_FFN_HIDDEN, &p->H, err)) ||
        (st = fsmoe_yaml_long(&m, "E", FSMOE_REQUIRED, 1, FSMOE_LIMIT_EXPERTS, &p->E, err)) ||
        (st = fsmoe_yaml_int(&m, "k", FSMOE_REQUIRED, 1, (int)FSMOE_LIMIT_TOP_K, &p->k, err)) ||
        (st = fsmoe_yaml_enum_get(&m, "expert", FSMOE_REQUIRED, plan_expert_table, &expert,
                                  err)) ||
        (st = fsmoe_yaml_enum_get(&m, "capacity", FSMOE_REQUIRED, plan_capacity_table, &capacity,
                                  err)) ||
        (st = fsmoe_yaml_get(&m, "capacity_factor", FSMOE_REQUIRED, &cf, err)))
        return st;
    p->expert = (fsmoe_expert_kind)expert;
    p->capacity = (fsmoe_capacity_mode)capacity;
    if (p->k > p->E) {
        fsmoe_yaml_get(&m, "k", FSMOE_REQUIRED, &v, NULL);
        return fsmoe_yaml_fail(&v, err, FSMOE_ERR_VALUE,
                               "k=%d exceeds E=%ld (expected each token routed to at most E "
                               "experts)",
                               p->k, p->E);
    }
    if (fsmoe_yaml_is_none(&cf))
        p->f = 0;
    else if ((st = fsmoe_yaml_node_double(&cf, 1e-9, FSMOE_LIMIT_CAPACITY_FACTOR, &p->f, err)))
        return st;
    if ((p->f == 0) != (p->capacity == FSMOE_CAPACITY_DROPLESS))
        return fsmoe_yaml_fail(&cf, err, FSMOE_ERR_VALUE,
                               "%s with capacity: %s (a factor goes with `capacity: factor`, "
                               "none with `capacity: dropless`)",
                               p->f == 0 ? "none" : "a factor",
                               fsmoe_capacity_mode_name(p->capacity));
    if ((st = fsmoe_yaml_long(&m, "batch", FSMOE_REQUIRED, 1, FSMOE_LIMIT_BATCH, &p->B, err)) ||
        (st = fsmoe_yaml_long(&m, "global_batch", FSMOE_REQUIRED, 1,
                              FSMOE_LIMIT_BATCH * FSMOE_LIMIT_WORLD, &p->B_global, err)) ||
        (st = fsmoe_yaml_long(&m, "seq", FSMOE_REQUIRED, 1, FSMOE_LIMIT_SEQ, &p->L, err)) ||
        (st = fsmoe_yaml_int(&m, "bytes_per_element", FSMOE_REQUIRED, 1, 16,
                             &p->bytes_per_element, err)))
        return st;
    if (p->B * p->L > FSMOE_LIMIT_TOKENS) {
        fsmoe_yaml_get(&m, "seq", FSMOE_REQUIRED, &v, NULL);
        return fsmoe_yaml_fail(&v, err, FSMOE_ERR_VALUE,
                               "batch·seq = %ld·%ld = %ld tokens per DP rank and step (expected "
                               "at most %ld)",
                               p->B, p->L, p->B * p->L, FSMOE_LIMIT_TOKENS);
    }
    return FSMOE_OK;
}

static fsmoe_status plan_read_parallel(const fsmoe_ynode *root, fsmoe_plan *p, fsmoe_error *err)
{
    static const char *const keys[] = {"world", "gpus_per_node", "ranks", "dp",  "mp",
                                       "ep",    "esp",           "edp",   "pp",  NULL};
    static const char *const akeys[] = {"split", NULL};
    fsmoe_ynode n, c, a, v, m;
    fsmoe_status st;
    int ranks = 0, split = 0;
    fsmoe_parallel *par = &p->parallel;
    static const char *const ckeys[] = {"name", NULL};
    if ((st = fsmoe_yaml_mapping(root, "cluster", FSMOE_REQUIRED, &c, err)) ||
        (st = fsmoe_yaml_check_keys(&c, ckeys, err)) ||
        (st = fsmoe_yaml_string(&c, "name", FSMOE_REQUIRED, p->cluster_name,
                                sizeof p->cluster_name, err)) ||
        (st = fsmoe_yaml_mapping(root, "parallel", FSMOE_REQUIRED, &n, err)) ||
        (st = fsmoe_yaml_check_keys(&n, keys, err)) ||
        (st = fsmoe_yaml_int(&n, "world", FSMOE_REQUIRED, 1, PLAN_WORLD, &par->world, err)) ||
        (st = fsmoe_yaml_int(&n, "gpus_per_node", FSMOE_REQUIRED, 1,
                             (int)FSMOE_LIMIT_GPUS_PER_NODE, &par->gpus_per_node, err)) ||
        (st = fsmoe_yaml_enum_get(&n, "ranks", FSMOE_REQUIRED, plan_ranks_table, &ranks, err)) ||
        (st = fsmoe_yaml_int(&n, "dp", FSMOE_REQUIRED, 1, PLAN_WORLD, &par->dp, err)) ||
        (st = fsmoe_yaml_int(&n, "mp", FSMOE_REQUIRED, 1, PLAN_WORLD, &par->mp, err)) ||
        (st = fsmoe_yaml_int(&n, "ep", FSMOE_REQUIRED, 1, PLAN_WORLD, &par->ep, err)) ||
        (st = fsmoe_yaml_int(&n, "esp", FSMOE_REQUIRED, 1, PLAN_WORLD, &par->esp, err)) ||
        (st = fsmoe_yaml_int(&n, "edp", FSMOE_REQUIRED, 1, PLAN_WORLD, &p->edp, err)) ||
        (st = fsmoe_yaml_int(&n, "pp", FSMOE_REQUIRED, 1, PLAN_WORLD, &par->pp, err)))
        return st;
    p->ranks = (fsmoe_rank_order)ranks;
    /* The layout as a whole (world = dp·mp·pp, ep·esp divides world, E % ep, ...) at the key
     * that breaks it, then the facts derived from it, each at its own line. */
    if ((st = fsmoe_yaml_check_layout(&n, par, p->E, err)))
        return st;
    int edp = fsmoe_group_size(par, FSMOE_GROUP_EDP);
    if (p->edp != edp && fsmoe_yaml_get(&n, "edp", FSMOE_REQUIRED, &v, err) == FSMOE_OK)
        return fsmoe_yaml_fail(&v, err, FSMOE_ERR_VALUE,
                               "%d, but mp·dp/(ep·esp) = %d·%d/(%d·%d) = %d ranks hold each "
                               "expert shard",
                               p->edp, par->mp, par->dp, par->ep, par->esp, edp);
    if (p->B_global != (long)par->dp * p->B &&
        fsmoe_yaml_get(root, "model", FSMOE_REQUIRED, &m, err) == FSMOE_OK &&
        fsmoe_yaml_get(&m, "global_batch", FSMOE_REQUIRED, &v, err) == FSMOE_OK)
        return fsmoe_yaml_fail(&v, err, FSMOE_ERR_VALUE,
                               "%ld, but dp·batch = %d·%ld = %ld (each DP rank holds batch samples)",
                               p->B_global, par->dp, p->B, (long)par->dp * p->B);
    if ((st = fsmoe_yaml_mapping(root, "alltoall", FSMOE_REQUIRED, &a, err)) ||
        (st = fsmoe_yaml_check_keys(&a, akeys, err)) ||
        (st = fsmoe_yaml_enum_get(&a, "split", FSMOE_REQUIRED, plan_split_table, &split, err)))
        return st;
    p->split = (fsmoe_a2a_split)split;
    return FSMOE_OK;
}

static fsmoe_status plan_read_phase(const fsmoe_ynode *layer, const char *key, fsmoe_phase_plan *ph,
                                    fsmoe_error *err)
{
    static const char *const keys[] = {"r", "case", "q", "t_gar_s", "predicted_s", NULL};
    fsmoe_ynode n, q, item;
    fsmoe_status st;
    if ((st = fsmoe_yaml_mapping(layer, key, FSMOE_REQUIRED, &n, err)) ||
        (st = fsmoe_yaml_check_keys(&n, keys, err)) ||
        (st = fsmoe_yaml_int(&n, "r", FSMOE_REQUIRED, 1, (int)FSMOE_LIMIT_PIPELINE_DEGREE, &ph->r,
                             err)) ||
        (st = fsmoe_yaml_int(&n, "case", FSMOE_REQUIRED, 1, 4, &ph->binding_case, err)) ||
        (st = fsmoe_yaml_sequence(&n, "q", FSMOE_REQUIRED, &q, err)) ||
        (st = fsmoe_yaml_double(&n, "t_gar_s", FSMOE_REQUIRED, 0, PLAN_BIG, &ph->t_gar_s, err)) ||
        (st = fsmoe_yaml_double(&n, "predicted_s", FSMOE_REQUIRED, 0, PLAN_BIG, &ph->predicted_s,
                                err)))
        return st;
    ph->q = 0;
    for (int i = 0; i < fsmoe_yaml_seq_len(&q); i++) {
        int qi;
        if ((st = fsmoe_yaml_seq_item(&q, i, &item, err)) ||
            (st = fsmoe_yaml_node_enum(&item, plan_q_table, &qi, err)))
            return st;
        if (ph->q & (1u << (qi - 1)))
            return fsmoe_yaml_fail(&item, err, FSMOE_ERR_VALUE, "Q%d listed twice", qi);
        ph->q |= 1u << (qi - 1);
    }
    return FSMOE_OK;
}

static fsmoe_status plan_read_pair(const fsmoe_ynode *layer, const char *key, const char *k1,
                                   double *v1, const char *k2, double *v2, fsmoe_error *err)
{
    const char *const keys[] = {k1, k2, NULL};
    fsmoe_ynode n;
    fsmoe_status st;
    if ((st = fsmoe_yaml_mapping(layer, key, FSMOE_REQUIRED, &n, err)) ||
        (st = fsmoe_yaml_check_keys(&n, keys, err)) ||
        (st = fsmoe_yaml_double(&n, k1, FSMOE_REQUIRED, 0, PLAN_BIG, v1, err)) ||
        (st = fsmoe_yaml_double(&n, k2, FSMOE_REQUIRED, 0, PLAN_BIG, v2, err)))
        return st;
    return FSMOE_OK;
}

static fsmoe_status plan_read_layer(const fsmoe_ynode *item, fsmoe_layer_plan *l, fsmoe_error *err)
{
    static const char *const keys[] = {"index",    "block",   "schedule", "schedule_s",
                                       "t_d1_s",   "t_d2_s",  "a2a",      "forward",
                                       "backward", "dense",   "overlap",  "gradients",
                                       NULL};
    static const char *const s_keys[] = {"esp_pipeline", "s1", "s2", "monta", NULL};
    static const char *const a2a_keys[] = {"strategy", "chunks", "algorithm", "base_s", "o1_s",
                                           "o2_s", "o3_s", NULL};
    static const char *const g_keys[] = {"bytes", "in_window_bytes", "step2_bytes",
                                         "carried_bytes", NULL};
    fsmoe_ynode a, g, sc;
    fsmoe_status st;
    int sched = 0, strat = 0;
    if ((st = fsmoe_yaml_node_expect_mapping(item, err)) ||
        (st = fsmoe_yaml_check_keys(item, keys, err)) ||
        (st = fsmoe_yaml_int(item, "index", FSMOE_REQUIRED, 0, (int)FSMOE_LIMIT_LAYERS - 1,
                             &l->index, err)) ||
        (st = fsmoe_yaml_int(item, "block", FSMOE_REQUIRED, 0, (int)FSMOE_LIMIT_LAYERS - 1,
                             &l->block, err)) ||
        (st = fsmoe_yaml_enum_get(item, "schedule", FSMOE_REQUIRED, plan_sched_table, &sched,
                                  err)) ||
        (st = fsmoe_yaml_mapping(item, "schedule_s", FSMOE_REQUIRED, &sc, err)) ||
        (st = fsmoe_yaml_check_keys(&sc, s_keys, err)) ||
        (st = fsmoe_yaml_double(&sc, "esp_pipeline", FSMOE_REQUIRED, 0, PLAN_BIG,
                                &l->schedule_s[FSMOE_SCHED_ESP_PIPELINE], err)) ||
        (st = fsmoe_yaml_double(&sc, "s1", FSMOE_REQUIRED, 0, PLAN_BIG,
                                &l->schedule_s[FSMOE_SCHED_S1], err)) ||
        (st = fsmoe_yaml_double(&sc, "s2", FSMOE_REQUIRED, 0, PLAN_BIG,
                                &l->schedule_s[FSMOE_SCHED_S2], err)) ||
        (st = fsmoe_yaml_double(&sc, "monta", FSMOE_OPTIONAL, 0, PLAN_BIG,
                                &l->schedule_s[FSMOE_SCHED_MONTA], err)) ||
        (st = fsmoe_yaml_double(item, "t_d1_s", FSMOE_REQUIRED, 0, PLAN_BIG, &l->t_d1_s, err)) ||
        (st = fsmoe_yaml_double(item, "t_d2_s", FSMOE_REQUIRED, 0, PLAN_BIG, &l->t_d2_s, err)) ||
        (st = fsmoe_yaml_mapping(item, "a2a", FSMOE_REQUIRED, &a, err)) ||
        (st = fsmoe_yaml_check_keys(&a, a2a_keys, err)) ||
        (st = fsmoe_yaml_enum_get(&a, "strategy", FSMOE_REQUIRED, plan_a2a_table, &strat, err)) ||
        (st = fsmoe_yaml_int(&a, "chunks", FSMOE_REQUIRED, 1, (int)FSMOE_LIMIT_A2A_CHUNKS,
                             &l->a2a_chunks, err)) ||
        (st = fsmoe_yaml_string(&a, "algorithm", FSMOE_REQUIRED, l->a2a_algorithm,
                                sizeof l->a2a_algorithm, err)) ||
        (st = fsmoe_yaml_double(&a, "base_s", FSMOE_REQUIRED, 0, PLAN_BIG, &l->a2a_s[0], err)) ||
        (st = fsmoe_yaml_double(&a, "o1_s", FSMOE_REQUIRED, 0, PLAN_BIG, &l->a2a_s[1], err)) ||
        (st = fsmoe_yaml_double(&a, "o2_s", FSMOE_REQUIRED, 0, PLAN_BIG, &l->a2a_s[2], err)) ||
        (st = fsmoe_yaml_double(&a, "o3_s", FSMOE_REQUIRED, 0, PLAN_BIG, &l->a2a_s[3], err)) ||
        (st = plan_read_phase(item, "forward", &l->fwd, err)) ||
        (st = plan_read_phase(item, "backward", &l->bwd, err)) ||
        (st = plan_read_pair(item, "dense", "fwd_s", &l->dense_fwd_s, "bwd_s", &l->dense_bwd_s,
                             err)) ||
        (st = plan_read_pair(item, "overlap", "dense_s", &l->olp_dense_s, "moe_s", &l->olp_moe_s,
                             err)) ||
        (st = fsmoe_yaml_mapping(item, "gradients", FSMOE_REQUIRED, &g, err)) ||
        (st = fsmoe_yaml_check_keys(&g, g_keys, err)) ||
        (st = fsmoe_yaml_double(&g, "bytes", FSMOE_REQUIRED, 0, PLAN_BIG, &l->grad_bytes, err)) ||
        (st = fsmoe_yaml_double(&g, "in_window_bytes", FSMOE_REQUIRED, 0, PLAN_BIG,
                                &l->window_bytes, err)) ||
        (st = fsmoe_yaml_double(&g, "step2_bytes", FSMOE_REQUIRED, 0, PLAN_BIG, &l->step2_bytes,
                                err)) ||
        (st = fsmoe_yaml_double(&g, "carried_bytes", FSMOE_REQUIRED, 0, PLAN_BIG,
                                &l->carried_bytes, err)))
        return st;
    l->schedule = (fsmoe_schedule)sched;
    l->a2a = (fsmoe_a2a_strategy)strat;
    fsmoe_ynode v, fw;
    /* MoNTA §4: only O2 and O3 split the AllToAll into chunks */
    if (l->a2a_chunks != 1 && l->a2a != FSMOE_A2A_O2 && l->a2a != FSMOE_A2A_O3 &&
        fsmoe_yaml_get(&a, "chunks", FSMOE_REQUIRED, &v, err) == FSMOE_OK)
        return fsmoe_yaml_fail(&v, err, FSMOE_ERR_VALUE,
                               "%d chunks with strategy %s (expected 1: only O2 and O3 split the "
                               "AllToAll)",
                               l->a2a_chunks, fsmoe_a2a_strategy_name(l->a2a));
    /* MoNTA's layer is not pipelined: its only chunks are the AllToAll's (a2a.chunks) */
    for (int ph = 0; ph < 2 && l->schedule == FSMOE_SCHED_MONTA; ph++) {
        const fsmoe_phase_plan *pp = ph ? &l->bwd : &l->fwd;
        if (pp->r != 1 &&
            fsmoe_yaml_get(item, ph ? "backward" : "forward", FSMOE_REQUIRED, &fw, err) ==
                FSMOE_OK &&
            fsmoe_yaml_get(&fw, "r", FSMOE_REQUIRED, &v, err) == FSMOE_OK)
            return fsmoe_yaml_fail(&v, err, FSMOE_ERR_VALUE,
                                   "%d with schedule monta (expected 1: MoNTA's layer is not "
                                   "pipelined; its AllToAll chunks are a2a.chunks)",
                                   pp->r);
    }
    /* The Gradient-AllReduce runs during the backward only (FSMoE §5). */
    if (l->fwd.t_gar_s != 0.0 &&
        fsmoe_yaml_get(item, "forward", FSMOE_REQUIRED, &fw, err) == FSMOE_OK &&
        fsmoe_yaml_get(&fw, "t_gar_s", FSMOE_REQUIRED, &v, err) == FSMOE_OK)
        return fsmoe_yaml_fail(&v, err, FSMOE_ERR_VALUE,
                               "%g (expected 0: gradients are all-reduced during the backward "
                               "only)",
                               l->fwd.t_gar_s);
    return FSMOE_OK;
}

static fsmoe_status plan_read_predicted(const fsmoe_ynode *root, fsmoe_plan *p, fsmoe_error *err)
{
    static const char *const keys[] = {"iteration_s", "forward_s", "backward_s", "tail_s",
                                       "baselines", NULL};
    static const char *const bkeys[] = {"deepspeed", "tutel", "tutel_improved", "pipemoe_lina",
                                        NULL};
    fsmoe_ynode n, b;
    fsmoe_status st;
    fsmoe_predicted *pr = &p->predicted;
    if ((st = fsmoe_yaml_mapping(root, "predicted", FSMOE_REQUIRED, &n, err)) ||
        (st = fsmoe_yaml_check_keys(&n, keys, err)) ||
        (st = fsmoe_yaml_double(&n, "iteration_s", FSMOE_REQUIRED, 0, PLAN_BIG, &pr->iteration_s,
                                err)) ||
        (st = fsmoe_yaml_double(&n, "forward_s", FSMOE_REQUIRED, 0, PLAN_BIG, &pr->forward_s,
                                err)) ||
        (st = fsmoe_yaml_double(&n, "backward_s", FSMOE_REQUIRED, 0, PLAN_BIG, &pr->backward_s,
                                err)) ||
        (st = fsmoe_yaml_double(&n, "tail_s", FSMOE_REQUIRED, 0, PLAN_BIG, &pr->tail_s, err)) ||
        (st = fsmoe_yaml_mapping(&n, "baselines", FSMOE_REQUIRED, &b, err)) ||
        (st = fsmoe_yaml_check_keys(&b, bkeys, err)) ||
        (st = fsmoe_yaml_double(&b, "deepspeed", FSMOE_REQUIRED, 0, PLAN_BIG, &pr->deepspeed_s,
                                err)) ||
        (st = fsmoe_yaml_double(&b, "tutel", FSMOE_REQUIRED, 0, PLAN_BIG, &pr->tutel_s, err)) ||
        (st = fsmoe_yaml_double(&b, "tutel_improved", FSMOE_REQUIRED, 0, PLAN_BIG,
                                &pr->tutel_improved_s, err)) ||
        (st = fsmoe_yaml_double(&b, "pipemoe_lina", FSMOE_REQUIRED, 0, PLAN_BIG,
                                &pr->pipemoe_lina_s, err)))
        return st;
    return FSMOE_OK;
}

/* memory: optional; the categories must add up to the total */
static fsmoe_status plan_read_memory(const fsmoe_ynode *root, fsmoe_plan *p, fsmoe_error *err)
{
    static const char *const keys[] = {"zero_stage", "recompute", "weights",   "gradients",
                                       "optimizer",  "activations", "workspace", "buffers",
                                       "total",      NULL};
    fsmoe_ynode n;
    fsmoe_status st;
    if ((st = fsmoe_yaml_mapping(root, "memory", FSMOE_OPTIONAL, &n, err)) || !n.node)
        return st;
    if ((st = fsmoe_yaml_check_keys(&n, keys, err)) ||
        (st = fsmoe_yaml_int(&n, "zero_stage", FSMOE_REQUIRED, 0, 3, &p->memory.zero_stage,
                             err)) ||
        (st = fsmoe_yaml_enum_get(&n, "recompute", FSMOE_REQUIRED, fsmoe_recompute_table,
                                  &p->memory.recompute, err)))
        return st;
    double sum = 0;
    for (int c = 0; c < FSMOE_MEM_CATS; c++) {
        if ((st = fsmoe_yaml_double(&n, fsmoe_mem_names[c], FSMOE_REQUIRED, 0, PLAN_BIG,
                                    &p->memory.bytes[c], err)))
            return st;
        sum += p->memory.bytes[c];
    }
    if ((st = fsmoe_yaml_double(&n, "total", FSMOE_REQUIRED, 0, PLAN_BIG, &p->memory.total,
                                err)))
        return st;
    if (fabs(sum - p->memory.total) > 1e-12 * (sum > 1 ? sum : 1)) {
        fsmoe_ynode t;
        fsmoe_yaml_get(&n, "total", FSMOE_REQUIRED, &t, NULL);
        return fsmoe_yaml_fail(&t, err, FSMOE_ERR_VALUE,
                               "%.17g bytes, but the categories add up to %.17g (expected their "
                               "sum)", p->memory.total, sum);
    }
    p->memory.present = 1;
    return FSMOE_OK;
}

/* pipeline: present exactly when parallel.pp > 1 */
static fsmoe_status plan_read_pipeline(const fsmoe_ynode *root, fsmoe_plan *p, fsmoe_error *err)
{
    static const char *const keys[] = {"schedule",         "micro_batches", "stage_blocks",
                                       "stage_forward_s",  "stage_backward_s", "gradient_s",
                                       "p2p_bytes",        "p2p_s",         NULL};
    static const fsmoe_yaml_enum schedules[] = {{"gpipe", 0}, {"1f1b", 1}, {NULL, 0}};
    fsmoe_ynode n, par;
    fsmoe_status st;
    if ((st = fsmoe_yaml_mapping(root, "pipeline", FSMOE_OPTIONAL, &n, err)))
        return st;
    if (!n.node) {
        if (p->parallel.pp > 1 &&
            fsmoe_yaml_get(root, "parallel", FSMOE_REQUIRED, &par, err) == FSMOE_OK)
            return fsmoe_yaml_fail(&par, err, FSMOE_ERR_SCHEMA,
                                   "pp %d, but the plan has no pipeline section (expected "
                                   "`pipeline:` with its micro-batches and stage times)",
                                   p->parallel.pp);
        return FSMOE_OK;
    }
    if (p->parallel.pp == 1)
        return fsmoe_yaml_fail(&n, err, FSMOE_ERR_VALUE,
                               "a pipeline section, but parallel.pp is 1 (expected none)");
    int micro = 0, sched = 0;
    if ((st = fsmoe_yaml_check_keys(&n, keys, err)) ||
        (st = fsmoe_yaml_enum_get(&n, "schedule", FSMOE_REQUIRED, schedules, &sched, err)) ||
        (st = fsmoe_yaml_int(&n, "micro_batches", FSMOE_REQUIRED, 1, 1024, &micro, err)) ||
        (st = fsmoe_yaml_long(&n, "stage_blocks", FSMOE_REQUIRED, 1, FSMOE_LIMIT_LAYERS,
                              &p->pipeline.stage_blocks, err)) ||
        (st = fsmoe_yaml_double(&n, "stage_forward_s", FSMOE_REQUIRED, 0, PLAN_BIG,
                                &p->pipeline.fwd_s, err)) ||
        (st = fsmoe_yaml_double(&n, "stage_backward_s", FSMOE_REQUIRED, 0, PLAN_BIG,
                                &p->pipeline.bwd_s, err)) ||
        (st = fsmoe_yaml_double(&n, "gradient_s", FSMOE_REQUIRED, 0, PLAN_BIG,
                                &p->pipeline.grad_s, err)) ||
        (st = fsmoe_yaml_double(&n, "p2p_bytes", FSMOE_REQUIRED, 0, PLAN_BIG,
                                &p->pipeline.p2p_bytes, err)) ||
        (st = fsmoe_yaml_double(&n, "p2p_s", FSMOE_REQUIRED, 0, PLAN_BIG, &p->pipeline.p2p_s,
                                err)))
        return st;
    p->pipeline.micro_batches = micro;
    p->pipeline.one_f_one_b = sched;
    if (p->B % micro != 0) {
        fsmoe_ynode v;
        fsmoe_yaml_get(&n, "micro_batches", FSMOE_REQUIRED, &v, NULL);
        return fsmoe_yaml_fail(&v, err, FSMOE_ERR_VALUE,
                               "%d, but model.batch %ld does not split into that many "
                               "micro-batches",
                               micro, p->B);
    }
    p->pipeline.present = 1;
    return FSMOE_OK;
}

static fsmoe_status plan_read_notes(const fsmoe_ynode *root, fsmoe_plan *p, fsmoe_error *err)
{
    fsmoe_ynode seq, item;
    fsmoe_status st;
    if ((st = fsmoe_yaml_sequence(root, "notes", FSMOE_REQUIRED, &seq, err)))
        return st;
    size_t used = 0;
    p->notes[0] = '\0';
    for (int i = 0; i < fsmoe_yaml_seq_len(&seq); i++) {
        char line[sizeof p->notes];
        if ((st = fsmoe_yaml_seq_item(&seq, i, &item, err)) ||
            (st = fsmoe_yaml_node_string(&item, line, sizeof line, err)))
            return st;
        if (strchr(line, '\n') || line[0] == '\0')
            return fsmoe_yaml_fail(&item, err, FSMOE_ERR_VALUE,
                                   "a note must be one non-empty line");
        size_t len = strlen(line);
        if (used + len + 2 > sizeof p->notes)
            return fsmoe_yaml_fail(&item, err, FSMOE_ERR_VALUE,
                                   "notes exceed %zu characters in all", sizeof p->notes - 1);
        if (used > 0)
            p->notes[used++] = '\n';
        memcpy(p->notes + used, line, len + 1);
        used += len;
    }
    return FSMOE_OK;
}

/* The version key as an integer; 0 when absent or not an integer. */
static long plan_version_of(const fsmoe_ynode *root, fsmoe_ynode *v)
{
    long got = 0;
    fsmoe_error quiet = {0};
    if (fsmoe_yaml_get(root, "fsmoe_plan", FSMOE_REQUIRED, v, &quiet) != FSMOE_OK ||
        fsmoe_yaml_node_long(v, 1, 1L << 30, &got, &quiet) != FSMOE_OK)
        return 0;
    return got;
}

/* A plan of an older version whose provenance can still be read fails with the exact command
 * that makes it again; any other version mismatch with the reader's generic message. */
static fsmoe_status plan_check_version(const fsmoe_ynode *root, const char *path, fsmoe_error *err)
{
    fsmoe_ynode v;
    long got = plan_version_of(root, &v);
    if (got >= 2 && got < FSMOE_PLAN_VERSION) {
        fsmoe_plan old;
        fsmoe_error quiet = {0};
        memset(&old, 0, sizeof old);
        if (plan_read_provenance(root, &old, &quiet) == FSMOE_OK) {
            char cmd[1800];
            fsmoe_plan_command(&old, path, cmd, sizeof cmd);
            return fsmoe_yaml_fail(&v, err, FSMOE_ERR_SCHEMA,
                                   "version %ld is older than this build's %d (version 3 adds "
                                   "the rank layout, global batch, capacity mode and AllToAll "
                                   "split that fsmoe-run checks, and counts every gradient); "
                                   "regenerate it with: %s",
                                   got, FSMOE_PLAN_VERSION, cmd);
        }
    }
    return fsmoe_yaml_check_version(root, "fsmoe_plan", FSMOE_PLAN_VERSION, err);
}

fsmoe_status fsmoe_plan_load_provenance(const char *path, fsmoe_plan *out, fsmoe_error *err)
{
    fsmoe_yaml y;
    fsmoe_ynode root, v;
    fsmoe_status st;
    memset(out, 0, sizeof *out);
    memset(&y, 0, sizeof y);
    if ((st = fsmoe_yaml_open(&y, path, err)) || (st = fsmoe_yaml_root(&y, &root, err)))
        goto out;
    long got = plan_version_of(&root, &v);
    if (got < 2 || got > FSMOE_PLAN_VERSION)
        st = fsmoe_yaml_check_version(&root, "fsmoe_plan", FSMOE_PLAN_VERSION, err);
    else
        st = plan_read_provenance(&root, out, err);
out:
    fsmoe_yaml_close(&y);
    return st;
}

/* The whole plan from an opened document (`path` names it in messages and in the regenerate
 * command of an old version); closes y. */
static fsmoe_status plan_load_doc(fsmoe_yaml *y, const char *path, fsmoe_plan *out,
                                  fsmoe_error *err);

fsmoe_status fsmoe_plan_load(const char *path, fsmoe_plan *out, fsmoe_error *err)
{
    fsmoe_yaml y;
    memset(out, 0, sizeof *out);
    fsmoe_status st = fsmoe_yaml_open(&y, path, err);
    if (st)
        return st;
    return plan_load_doc(&y, path, out, err);
}

fsmoe_status fsmoe_plan_parse(const char *name, const char *text, size_t len, fsmoe_plan *out,
                              fsmoe_error *err)
{
    fsmoe_yaml y;
    memset(out, 0, sizeof *out);
    fsmoe_status st = fsmoe_yaml_open_string(&y, name, text, len, err);
    if (st)
        return st;
    return plan_load_doc(&y, name, out, err);
}

/* gradient_schedule: optional (partition); lina holds no window (plan.h) */
static fsmoe_status plan_read_grads(const fsmoe_ynode *root, fsmoe_plan *p, fsmoe_error *err)
{
    int g = FSMOE_GRADS_PARTITION;
    p->gradients = FSMOE_GRADS_PARTITION;
    if (!fsmoe_yaml_has(root, "gradient_schedule"))
        return FSMOE_OK;
    fsmoe_status st = fsmoe_yaml_enum_get(root, "gradient_schedule", FSMOE_REQUIRED,
                                          plan_grads_table, &g, err);
    if (st)
        return st;
    p->gradients = (fsmoe_grad_schedule)g;
    if (p->gradients != FSMOE_GRADS_LINA)
        return FSMOE_OK;
    int windowed = p->prefix_window_bytes > 0.0;
    for (int i = 0; i < p->n_layers; i++)
        windowed |= p->layers[i].window_bytes + p->layers[i].step2_bytes > 0.0;
    if (windowed) {
        fsmoe_ynode n;
        fsmoe_yaml_get(root, "gradient_schedule", FSMOE_REQUIRED, &n, NULL);
        return fsmoe_yaml_fail(&n, err, FSMOE_ERR_VALUE,
                               "lina with gradient windows in the partition's fields (expected "
                               "in_window_bytes, step2_bytes and prefix_window_bytes 0: Lina's "
                               "micro-ops replace the windows)");
    }
    return FSMOE_OK;
}

static fsmoe_status plan_load_doc(fsmoe_yaml *y, const char *path, fsmoe_plan *out,
                                  fsmoe_error *err)
{
    static const char *const top_keys[] = {"fsmoe_plan", "provenance", "model", "cluster",
                                           "parallel", "alltoall", "layers", "gradient_tail_bytes",
                                           "prefix_grad_bytes", "prefix_window_bytes",
                                           "gradient_schedule", "predicted", "memory",
                                           "pipeline", "notes", NULL};
    fsmoe_ynode root, layers, item;
    fsmoe_status st;
    if ((st = fsmoe_yaml_root(y, &root, err)) ||
        (st = plan_check_version(&root, path, err)) ||
        (st = fsmoe_yaml_check_keys(&root, top_keys, err)) ||
        (st = plan_read_provenance(&root, out, err)) || (st = plan_read_model(&root, out, err)) ||
        (st = plan_read_parallel(&root, out, err)) ||
        (st = fsmoe_yaml_sequence(&root, "layers", FSMOE_REQUIRED, &layers, err)))
        goto fail;
    int n = fsmoe_yaml_seq_len(&layers);
    if (n > FSMOE_LIMIT_LAYERS) {
        st = fsmoe_yaml_fail(&layers, err, FSMOE_ERR_VALUE, "%d MoE layers (expected at most %ld)",
                             n, FSMOE_LIMIT_LAYERS);
        goto fail;
    }
    if (n > 0) {
        out->layers = calloc((size_t)n, sizeof *out->layers);
        if (!out->layers) {
            st = fsmoe_yaml_fail(&layers, err, FSMOE_ERR_NOMEM, "no memory for %d layers", n);
            goto fail;
        }
    }
    out->n_layers = n;
    for (int i = 0; i < n; i++) {
        if ((st = fsmoe_yaml_seq_item(&layers, i, &item, err)) ||
            (st = plan_read_layer(&item, &out->layers[i], err)))
            goto fail;
        if (out->layers[i].index != i) {
            st = fsmoe_yaml_fail(&item, err, FSMOE_ERR_VALUE,
                                 "index %d out of order (expected %d: layers are listed in "
                                 "forward order)",
                                 out->layers[i].index, i);
            goto fail;
        }
        if (i > 0 && out->layers[i].block <= out->layers[i - 1].block) {
            fsmoe_ynode b;
            fsmoe_yaml_get(&item, "block", FSMOE_REQUIRED, &b, NULL);
            st = fsmoe_yaml_fail(&b, err, FSMOE_ERR_VALUE,
                                 "block %d after block %d (expected increasing blocks: one MoE "
                                 "layer per block, in forward order)",
                                 out->layers[i].block, out->layers[i - 1].block);
            goto fail;
        }
    }
    if ((st = fsmoe_yaml_double(&root, "gradient_tail_bytes", FSMOE_REQUIRED, 0, PLAN_BIG,
                                &out->gradient_tail_bytes, err)) ||
        (st = fsmoe_yaml_double(&root, "prefix_grad_bytes", FSMOE_REQUIRED, 0, PLAN_BIG,
                                &out->prefix_grad_bytes, err)) ||
        (st = fsmoe_yaml_double(&root, "prefix_window_bytes", FSMOE_REQUIRED, 0, PLAN_BIG,
                                &out->prefix_window_bytes, err)) ||
        (st = plan_read_grads(&root, out, err)) || (st = plan_read_predicted(&root, out, err)) || (st = plan_read_memory(&root, out, err)) ||
        (st = plan_read_pipeline(&root, out, err)) || (st = plan_read_notes(&root, out, err)))
        goto fail;
    fsmoe_yaml_close(y);
    return FSMOE_OK;
fail:
    fsmoe_yaml_close(y);
    fsmoe_plan_free(out);
    return st;
}
