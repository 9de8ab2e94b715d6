/* Implements: semantic plan comparison (see diff.h). Field names in the output are the plan
 * file's YAML paths, so a CI log points straight at the line of the golden that changed. */
#include "diff.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "yaml_write.h"

#define DIFF_TIME_FLOOR_S 1e-9
#define DIFF_BYTES_FLOOR 1.0

typedef struct {
    const diff_options *opt;
    FILE *out;
    int count;
} diff_ctx;

int diff_close(double a, double b, double rtol, double abs_floor)
{
    if (a == b)
        return 1;
    if (isnan(a) || isnan(b))
        return 0;
    double d = fabs(a - b);
    return d <= abs_floor || d <= rtol * fmax(fabs(a), fabs(b));
}

static void diff_report(diff_ctx *c, int counts, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void diff_report(diff_ctx *c, int counts, const char *fmt, ...)
{
    if (counts)
        c->count++;
    if (!c->out)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(c->out, fmt, ap);
    va_end(ap);
    fputs(counts ? "\n" : " (not counted; --strict counts it)\n", c->out);
}

static void diff_long(diff_ctx *c, const char *field, long a, long b)
{
    if (a != b)
        diff_report(c, 1, "%s: %ld -> %ld", field, a, b);
}

static void diff_str(diff_ctx *c, const char *field, const char *a, const char *b, int decision)
{
    if (strcmp(a, b) != 0)
        diff_report(c, decision || c->opt->strict, "%s: %s -> %s", field, a[0] ? a : "\"\"",
                    b[0] ? b : "\"\"");
}

static void diff_double(diff_ctx *c, const char *field, double a, double b, double floor)
{
    if (diff_close(a, b, c->opt->rtol, floor))
        return;
    char sa[FSMOE_YW_DOUBLE_CHARS], sb[FSMOE_YW_DOUBLE_CHARS];
    fsmoe_yaml_format_double(a, sa);
    fsmoe_yaml_format_double(b, sb);
    double m = fmax(fabs(a), fabs(b));
    diff_report(c, 1, "%s: %s -> %s (relative %.2g)", field, sa, sb, m > 0 ? fabs(a - b) / m : 0);
}

/* Times (fields ending in _s) and byte counts differ in scale; each gets its own floor. */
static void diff_time(diff_ctx *c, const char *field, double a, double b)
{
    diff_double(c, field, a, b, DIFF_TIME_FLOOR_S);
}

static void diff_bytes(diff_ctx *c, const char *field, double a, double b)
{
    diff_double(c, field, a, b, DIFF_BYTES_FLOOR);
}

static void diff_q_text(unsigned q, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < 7; i++)
        if (q & (1u << i))
            used += (size_t)snprintf(buf + used, len - used, "%sQ%d", used > 1 ? ", " : "", i + 1);
    snprintf(buf + used, len - used, "]");
}

static void diff_phase(diff_ctx *c, const char *prefix, const fsmoe_phase_plan *a,
                       const fsmoe_phase_plan *b)
{
    char f[96];
    snprintf(f, sizeof f, "%s.r", prefix);
    diff_long(c, f, a->r, b->r);
    snprintf(f, sizeof f, "%s.case", prefix);
    diff_long(c, f, a->binding_case, b->binding_case);
    if (a->q != b->q) {
        char qa[48], qb[48];
        diff_q_text(a->q, qa, sizeof qa);
        diff_q_text(b->q, qb, sizeof qb);
        diff_report(c, 1, "%s.q: %s -> %s", prefix, qa, qb);
    }
    snprintf(f, sizeof f, "%s.t_gar_s", prefix);
    diff_time(c, f, a->t_gar_s, b->t_gar_s);
    snprintf(f, sizeof f, "%s.predicted_s", prefix);
    diff_time(c, f, a->predicted_s, b->predicted_s);
}

static void diff_layer(diff_ctx *c, int i, const fsmoe_layer_plan *a, const fsmoe_layer_plan *b)
{
    char p[32], f[96];
    snprintf(p, sizeof p, "layers[%d]", i);
#define FIELD(name) (snprintf(f, sizeof f, "%s." name, p), f)
    diff_long(c, FIELD("block"), a->block, b->block);
    diff_str(c, FIELD("schedule"), fsmoe_schedule_name(a->schedule),
             fsmoe_schedule_name(b->schedule), 1);
    static const char *const sched_keys[FSMOE_SCHED_COUNT] = {"esp_pipeline", "s1", "s2",
                                                              "monta"};
    for (int j = 0; j < FSMOE_SCHED_COUNT; j++) {
        snprintf(f, sizeof f, "%s.schedule_s.%s", p, sched_keys[j]);
        diff_time(c, f, a->schedule_s[j], b->schedule_s[j]);
    }
    diff_time(c, FIELD("t_d1_s"), a->t_d1_s, b->t_d1_s);
    diff_time(c, FIELD("t_d2_s"), a->t_d2_s, b->t_d2_s);
    diff_str(c, FIELD("a2a.strategy"), fsmoe_a2a_strategy_name(a->a2a),
             fsmoe_a2a_strategy_name(b->a2a), 1);
    diff_long(c, FIELD("a2a.chunks"), a->a2a_chunks, b->a2a_chunks);
    diff_str(c, FIELD("a2a.algorithm"), a->a2a_algorithm, b->a2a_algorithm, 1);
    static const char *const a2a_keys[4] = {"base_s", "o1_s", "o2_s", "o3_s"};
    for (int j = 0; j < 4; j++) {
        snprintf(f, sizeof f, "%s.a2a.%s", p, a2a_keys[j]);
        diff_time(c, f, a->a2a_s[j], b->a2a_s[j]);
    }
    char ph[48];
    snprintf(ph, sizeof ph, "%s.forward", p);
    diff_phase(c, ph, &a->fwd, &b->fwd);
    snprintf(ph, sizeof ph, "%s.backward", p);
    diff_phase(c, ph, &a->bwd, &b->bwd);
    diff_time(c, FIELD("dense.fwd_s"), a->dense_fwd_s, b->dense_fwd_s);
    diff_time(c, FIELD("dense.bwd_s"), a->dense_bwd_s, b->dense_bwd_s);
    diff_time(c, FIELD("overlap.dense_s"), a->olp_dense_s, b->olp_dense_s);
    diff_time(c, FIELD("overlap.moe_s"), a->olp_moe_s, b->olp_moe_s);
    diff_bytes(c, FIELD("gradients.bytes"), a->grad_bytes, b->grad_bytes);
    diff_bytes(c, FIELD("gradients.in_window_bytes"), a->window_bytes, b->window_bytes);
    diff_bytes(c, FIELD("gradients.step2_bytes"), a->step2_bytes, b->step2_bytes);
    diff_bytes(c, FIELD("gradients.carried_bytes"), a->carried_bytes, b->carried_bytes);
#undef FIELD
}

int diff_plans(const fsmoe_plan *a, const fsmoe_plan *b, const diff_options *opt, FILE *out)
{
    diff_ctx c = {.opt = opt, .out = out, .count = 0};

    /* provenance: where the plan came from, not what it decides */
    diff_str(&c, "provenance.model", a->model_path, b->model_path, 0);
    diff_str(&c, "provenance.model_sha256", a->model_sha256, b->model_sha256, 0);
    diff_str(&c, "provenance.cluster", a->cluster_path, b->cluster_path, 0);
    diff_str(&c, "provenance.cluster_sha256", a->cluster_sha256, b->cluster_sha256, 0);
    diff_str(&c, "provenance.planner_version", a->planner_version, b->planner_version, 0);
    diff_str(&c, "provenance.method", a->method, b->method, 1);
    diff_str(&c, "provenance.decided_by", a->decided_by, b->decided_by, 1);
    int n_ovr = a->n_overrides > b->n_overrides ? a->n_overrides : b->n_overrides;
    for (int i = 0; i < n_ovr; i++) {
        char fa[96] = "(none)", fb[96] = "(none)", field[48];
        if (i < a->n_overrides)
            snprintf(fa, sizeof fa, "--%s %s", a->overrides[i].flag, a->overrides[i].value);
        if (i < b->n_overrides)
            snprintf(fb, sizeof fb, "--%s %s", b->overrides[i].flag, b->overrides[i].value);
        snprintf(field, sizeof field, "provenance.overrides[%d]", i);
        diff_str(&c, field, fa, fb, 0);
    }

    /* what the plan is for */
    diff_str(&c, "model.name", a->model_name, b->model_name, 1);
    diff_long(&c, "model.M", a->M, b->M);
    diff_long(&c, "model.H", a->H, b->H);
    diff_long(&c, "model.E", a->E, b->E);
    diff_long(&c, "model.k", a->k, b->k);
    diff_str(&c, "model.expert", a->expert == FSMOE_EXPERT_SWIGLU ? "swiglu" : "gpt",
             b->expert == FSMOE_EXPERT_SWIGLU ? "swiglu" : "gpt", 1);
    if (a->f != b->f) { /* an input, so exact: 1.2 and 1.2000001 are different requests */
        char sa[FSMOE_YW_DOUBLE_CHARS] = "none", sb[FSMOE_YW_DOUBLE_CHARS] = "none";
        if (a->f != 0)
            fsmoe_yaml_format_double(a->f, sa);
        if (b->f != 0)
            fsmoe_yaml_format_double(b->f, sb);
        diff_report(&c, 1, "model.capacity_factor: %s -> %s", sa, sb);
    }
    diff_str(&c, "model.capacity", fsmoe_capacity_mode_name(a->capacity),
             fsmoe_capacity_mode_name(b->capacity), 1);
    diff_long(&c, "model.batch", a->B, b->B);
    diff_long(&c, "model.global_batch", a->B_global, b->B_global);
    diff_long(&c, "model.seq", a->L, b->L);
    diff_long(&c, "model.bytes_per_element", a->bytes_per_element, b->bytes_per_element);
    diff_str(&c, "cluster.name", a->cluster_name, b->cluster_name, 1);
    diff_long(&c, "parallel.world", a->parallel.world, b->parallel.world);
    diff_long(&c, "parallel.gpus_per_node", a->parallel.gpus_per_node, b->parallel.gpus_per_node);
    diff_long(&c, "parallel.dp", a->parallel.dp, b->parallel.dp);
    diff_long(&c, "parallel.mp", a->parallel.mp, b->parallel.mp);
    diff_long(&c, "parallel.ep", a->parallel.ep, b->parallel.ep);
    diff_long(&c, "parallel.esp", a->parallel.esp, b->parallel.esp);
    diff_long(&c, "parallel.pp", a->parallel.pp, b->parallel.pp);
    diff_long(&c, "parallel.edp", a->edp, b->edp);
    diff_str(&c, "parallel.ranks", fsmoe_rank_order_name(a->ranks),
             fsmoe_rank_order_name(b->ranks), 1);
    diff_str(&c, "alltoall.split", fsmoe_a2a_split_name(a->split), fsmoe_a2a_split_name(b->split),
             1);

    /* decisions */
    if (a->n_layers != b->n_layers)
        diff_report(&c, 1, "layers: %d -> %d entries", a->n_layers, b->n_layers);
    int n = a->n_layers < b->n_layers ? a->n_layers : b->n_layers;
    for (int i = 0; i < n; i++)
        diff_layer(&c, i, &a->layers[i], &b->layers[i]);
    diff_bytes(&c, "gradient_tail_bytes", a->gradient_tail_bytes, b->gradient_tail_bytes);
    diff_bytes(&c, "prefix_grad_bytes", a->prefix_grad_bytes, b->prefix_grad_bytes);
    diff_bytes(&c, "prefix_window_bytes", a->prefix_window_bytes, b->prefix_window_bytes);
    diff_str(&c, "gradient_schedule", fsmoe_grad_schedule_name(a->gradients),
             fsmoe_grad_schedule_name(b->gradients), 1);
    const fsmoe_predicted *pa = &a->predicted, *pb = &b->predicted;
    diff_time(&c, "predicted.iteration_s", pa->iteration_s, pb->iteration_s);
    diff_time(&c, "predicted.forward_s", pa->forward_s, pb->forward_s);
    diff_time(&c, "predicted.backward_s", pa->backward_s, pb->backward_s);
    diff_time(&c, "predicted.tail_s", pa->tail_s, pb->tail_s);
    diff_time(&c, "predicted.baselines.deepspeed", pa->deepspeed_s, pb->deepspeed_s);
    diff_time(&c, "predicted.baselines.tutel", pa->tutel_s, pb->tutel_s);
    diff_time(&c, "predicted.baselines.tutel_improved", pa->tutel_improved_s,
              pb->tutel_improved_s);
    diff_time(&c, "predicted.baselines.pipemoe_lina", pa->pipemoe_lina_s, pb->pipemoe_lina_s);
    /* the memory model's prediction, a plan without the section reading as zeros */
    if (a->memory.present != b->memory.present)
        diff_report(&c, 1, "memory: %s -> %s", a->memory.present ? "present" : "absent",
                    b->memory.present ? "present" : "absent");
    diff_long(&c, "memory.zero_stage", a->memory.zero_stage, b->memory.zero_stage);
    diff_str(&c, "memory.recompute", fsmoe_name_of(fsmoe_recompute_table, a->memory.recompute),
             fsmoe_name_of(fsmoe_recompute_table, b->memory.recompute), 1);
    for (int i = 0; i < FSMOE_MEM_CATS; i++) {
        char f[48];
        snprintf(f, sizeof f, "memory.%s", fsmoe_mem_names[i]);
        diff_bytes(&c, f, a->memory.bytes[i], b->memory.bytes[i]);
    }
    /* the pipeline (pp > 1) */
    if (a->pipeline.present != b->pipeline.present)
        diff_report(&c, 1, "pipeline: %s -> %s", a->pipeline.present ? "present" : "absent",
                    b->pipeline.present ? "present" : "absent");
    diff_str(&c, "pipeline.schedule", a->pipeline.one_f_one_b ? "1f1b" : "gpipe",
             b->pipeline.one_f_one_b ? "1f1b" : "gpipe", 1);
    diff_long(&c, "pipeline.micro_batches", a->pipeline.micro_batches,
              b->pipeline.micro_batches);
    diff_long(&c, "pipeline.stage_blocks", a->pipeline.stage_blocks, b->pipeline.stage_blocks);
    diff_time(&c, "pipeline.stage_forward_s", a->pipeline.fwd_s, b->pipeline.fwd_s);
    diff_time(&c, "pipeline.stage_backward_s", a->pipeline.bwd_s, b->pipeline.bwd_s);
    diff_time(&c, "pipeline.gradient_s", a->pipeline.grad_s, b->pipeline.grad_s);
    diff_bytes(&c, "pipeline.p2p_bytes", a->pipeline.p2p_bytes, b->pipeline.p2p_bytes);
    diff_time(&c, "pipeline.p2p_s", a->pipeline.p2p_s, b->pipeline.p2p_s);
    if (strcmp(a->notes, b->notes) != 0)
        diff_report(&c, opt->strict, "notes: differ");
    return c.count;
}
