/* Implements: `fsmoe-plan explain` (see explain.h). The table mirrors the plan's fields so a
 * reader can check a decision by hand against design.md: FSMoE §4 for r and the case, §5 for the
 * gradient columns, Parm §6 for S1/S2 (t_D1 vs t_D2), MoNTA §7 for the AllToAll strategy. The
 * schedule line says why the layer runs its schedule: its predicted forward + backward against
 * every other candidate's. */
#include "explain.h"

#include <math.h>
#include <string.h>

const char *explain_case_words(int binding_case)
{
    switch (binding_case) {
    case 1: return "inter-node bound (AllToAll + Gradient-AllReduce)";
    case 2: return "compute bound";
    case 3: return "AllToAll bound";
    case 4: return "intra-node bound";
    default: return "?";
    }
}

void explain_time(double s, char *buf, size_t len)
{
    double a = fabs(s);
    if (a == 0)
        snprintf(buf, len, "0");
    else if (a < 1e-3)
        snprintf(buf, len, "%.1f µs", s * 1e6);
    else if (a < 1)
        snprintf(buf, len, "%.2f ms", s * 1e3);
    else
        snprintf(buf, len, "%.3f s", s);
}

void explain_bytes(double b, char *buf, size_t len)
{
    double a = fabs(b);
    if (a < 1024)
        snprintf(buf, len, "%.0f B", b);
    else if (a < 1024.0 * 1024)
        snprintf(buf, len, "%.1f KiB", b / 1024);
    else if (a < 1024.0 * 1024 * 1024)
        snprintf(buf, len, "%.1f MiB", b / (1024.0 * 1024));
    else
        snprintf(buf, len, "%.2f GiB", b / (1024.0 * 1024 * 1024));
}

static void explain_q(unsigned q, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < 7 && used < len; i++)
        if (q & (1u << i))
            used += (size_t)snprintf(buf + used, len - used, "%sQ%d", used ? " " : "", i + 1);
    if (used == 0)
        snprintf(buf, len, "none");
}

/* Everything but the position (index, block) equal: the layer would be printed identically. */
static int explain_same_layer(const fsmoe_layer_plan *a, const fsmoe_layer_plan *b)
{
    fsmoe_layer_plan x = *a, y = *b;
    x.index = y.index = 0;
    x.block = y.block = 0;
    /* Compare field by field rather than memcmp: padding bytes are not guaranteed equal. */
    return x.schedule == y.schedule &&
           memcmp(x.schedule_s, y.schedule_s, sizeof x.schedule_s) == 0 &&
           x.t_d1_s == y.t_d1_s && x.t_d2_s == y.t_d2_s &&
           x.a2a == y.a2a && x.a2a_chunks == y.a2a_chunks &&
           memcmp(x.a2a_s, y.a2a_s, sizeof x.a2a_s) == 0 &&
           strcmp(x.a2a_algorithm, y.a2a_algorithm) == 0 && x.fwd.r == y.fwd.r &&
           x.fwd.binding_case == y.fwd.binding_case && x.fwd.q == y.fwd.q &&
           x.fwd.t_gar_s == y.fwd.t_gar_s && x.fwd.predicted_s == y.fwd.predicted_s &&
           x.bwd.r == y.bwd.r && x.bwd.binding_case == y.bwd.binding_case && x.bwd.q == y.bwd.q &&
           x.bwd.t_gar_s == y.bwd.t_gar_s && x.bwd.predicted_s == y.bwd.predicted_s &&
           x.dense_fwd_s == y.dense_fwd_s && x.dense_bwd_s == y.dense_bwd_s &&
           x.olp_dense_s == y.olp_dense_s && x.olp_moe_s == y.olp_moe_s &&
           x.grad_bytes == y.grad_bytes && x.window_bytes == y.window_bytes &&
           x.step2_bytes == y.step2_bytes && x.carried_bytes == y.carried_bytes;
}

/* Right-aligns text in `width` columns after one space. Widths count characters, not bytes:
 * "µs" is two bytes of UTF-8 but one column, which printf's %10s would misalign. */
static void explain_col(FILE *out, const char *text, int width)
{
    int cols = 0;
    for (const unsigned char *c = (const unsigned char *)text; *c; c++)
        if ((*c & 0xc0) != 0x80)
            cols++;
    fprintf(out, " %*s%s", width > cols ? width - cols : 0, "", text);
}

/* "schedule S1: 63.34 ms forward + backward, vs esp-pipeline 108.03 ms (1.71x), S2 ..." */
static void explain_schedule(const fsmoe_layer_plan *l, FILE *out)
{
    char t[24];
    double own = l->schedule_s[l->schedule];
    if (!(own > 0.0))
        return;
    explain_time(own, t, sizeof t);
    fprintf(out, "             schedule %s: %s forward + backward (predicted)", fsmoe_schedule_name(l->schedule), t);
    int others = 0;
    for (int k = 0; k < FSMOE_SCHED_COUNT; k++) {
        if (k == (int)l->schedule || !(l->schedule_s[k] > 0.0))
            continue;
        explain_time(l->schedule_s[k], t, sizeof t);
        fprintf(out, "%s %s %s (%.2fx)", others++ ? "," : ", vs", fsmoe_schedule_name((fsmoe_schedule)k),
                t, l->schedule_s[k] / own);
    }
    fprintf(out, others ? "\n" : ", the only candidate of this method\n");
}

static void explain_layer(const fsmoe_layer_plan *l, FILE *out)
{
    char d1[24], d2[24], fwd[24], bwd[24], gar[24], a2a[24], win[24], s2[24], car[24];
    char qf[40], qb[40];
    explain_time(l->t_d1_s, d1, sizeof d1);
    explain_time(l->t_d2_s, d2, sizeof d2);
    explain_time(l->fwd.predicted_s, fwd, sizeof fwd);
    explain_time(l->bwd.predicted_s, bwd, sizeof bwd);
    explain_time(l->bwd.t_gar_s, gar, sizeof gar);
    explain_time(l->a2a_s[l->a2a], a2a, sizeof a2a);
    explain_bytes(l->window_bytes, win, sizeof win);
    explain_bytes(l->step2_bytes, s2, sizeof s2);
    explain_bytes(l->carried_bytes, car, sizeof car);
    explain_q(l->fwd.q, qf, sizeof qf);
    explain_q(l->bwd.q, qb, sizeof qb);
    fprintf(out, "%5d %5d  %-12s ", l->index, l->block, fsmoe_schedule_name(l->schedule));
    explain_col(out, d1, 10);
    explain_col(out, d2, 10);
    fprintf(out, "  %-4s x%-3d ", fsmoe_a2a_strategy_name(l->a2a), l->a2a_chunks);
    explain_col(out, a2a, 10);
    fprintf(out, "  %3d %4d ", l->fwd.r, l->fwd.binding_case);
    explain_col(out, fwd, 10);
    fprintf(out, "  %3d %4d ", l->bwd.r, l->bwd.binding_case);
    explain_col(out, gar, 10);
    explain_col(out, bwd, 10);
    fputs(" ", out);
    explain_col(out, win, 10);
    explain_col(out, s2, 10);
    explain_col(out, car, 10);
    fputs("\n", out);
    explain_schedule(l, out);
    if (l->schedule == FSMOE_SCHED_MONTA) { /* sequential: no chains, no pipeline cases */
        fprintf(out, "             MoNTA's layer, every op after the previous one (not pipelined): "
                     "dispatch and combine AllToAll by %s in %d chunk%s (%s each), expert on the "
                     "H/N_ESP slice of every gathered token, ESP ReduceScatter before the "
                     "combine\n",
                fsmoe_a2a_strategy_name(l->a2a), l->a2a_chunks, l->a2a_chunks == 1 ? "" : "s",
                a2a);
        return;
    }
    if (l->schedule != FSMOE_SCHED_ESP_PIPELINE) { /* PauseMP: chains c1..c4 (parm_schedule.h) */
        static const char *const chain[4] = {
            "inter-node link bound (AllToAlls + Gradient-AllReduce)", "compute bound",
            "combine bound (combines after the first expert)",
            "dispatch bound (the last chunk after every dispatch)"};
        int cf = l->fwd.binding_case, cb = l->bwd.binding_case;
        fprintf(out, "             forward: chain c%d binds, %s\n", cf,
                cf >= 1 && cf <= 4 ? chain[cf - 1] : "?");
        fprintf(out, "             backward: chain c%d binds, %s\n", cb,
                cb >= 1 && cb <= 4 ? chain[cb - 1] : "?");
        return;
    }
    fprintf(out, "             forward: %s held -> case %d, %s\n", qf, l->fwd.binding_case,
            explain_case_words(l->fwd.binding_case));
    fprintf(out, "             backward: %s held -> case %d, %s\n", qb, l->bwd.binding_case,
            explain_case_words(l->bwd.binding_case));
}

/* "alltoall 2dh (hierarchical) in layers 0-3, nccl (flat) in layers 4-7": each layer's
 * a2a.algorithm by runs of layers; with `dispatch: auto` the notes say by how much each run won
 * (plan_model.h). */
static void explain_algorithms(const fsmoe_plan *p, FILE *out)
{
    fprintf(out, "alltoall");
    for (int i = 0; i < p->n_layers;) {
        const char *a = p->layers[i].a2a_algorithm;
        int j = i;
        while (j + 1 < p->n_layers && strcmp(p->layers[j + 1].a2a_algorithm, a) == 0)
            j++;
        const char *words = strcmp(a, "2dh") == 0 ? " (hierarchical)"
                            : strcmp(a, "nccl") == 0 || !a[0] ? " (flat)"
                                                               : "";
        if (i == 0 && j == p->n_layers - 1)
            fprintf(out, " %s%s in every layer", a[0] ? a : "nccl", words);
        else if (i == j)
            fprintf(out, "%s %s%s in layer %d", i ? "," : "", a[0] ? a : "nccl", words,
                    p->layers[i].index);
        else
            fprintf(out, "%s %s%s in layers %d-%d", i ? "," : "", a[0] ? a : "nccl", words,
                    p->layers[i].index, p->layers[j].index);
        i = j + 1;
    }
    fprintf(out, "%s\n", p->n_layers > 0 ? "" : " -");
}

static void explain_baseline(const char *name, double base_s, double plan_s, FILE *out)
{
    char t[24];
    explain_time(base_s, t, sizeof t);
    if (plan_s > 0 && base_s > 0)
        fprintf(out, "  %-16s %12s   %.2fx\n", name, t, base_s / plan_s);
    else
        fprintf(out, "  %-16s %12s   -\n", name, t);
}

void explain_plan(const fsmoe_plan *p, const char *source, FILE *out)
{
    char buf[4][24];
    if (source)
        fprintf(out, "plan %s\n", source);
    fprintf(out, "model    %s: M %ld, H %ld, E %ld, k %d, %s experts, capacity factor ",
            p->model_name, p->M, p->H, p->E, p->k,
            p->expert == FSMOE_EXPERT_SWIGLU ? "SwiGLU" : "GPT-FFN");
    if (p->f == 0)
        fprintf(out, "none");
    else
        fprintf(out, "%g", p->f);
    fprintf(out, ", batch %ld per rank (%ld in all) x seq %ld, %d bytes/element\n", p->B,
            p->B_global, p->L, p->bytes_per_element);
    const fsmoe_parallel *par = &p->parallel;
    fprintf(out,
            "cluster  %s: %d GPUs (%d per node, %d nodes, ranks %s); dp %d, mp %d, ep %d, "
            "esp %d, edp %d, pp %d; AllToAll split %s\n",
            p->cluster_name, par->world, par->gpus_per_node,
            par->gpus_per_node > 0 ? par->world / par->gpus_per_node : 0,
            fsmoe_rank_order_name(p->ranks), par->dp, par->mp, par->ep, par->esp, p->edp, par->pp,
            fsmoe_a2a_split_name(p->split));
    fprintf(out, "method   %s (decided by %s), planner %s\n", p->method, p->decided_by,
            p->planner_version);
    explain_algorithms(p, out);
    fprintf(out, "inputs   %s (sha256 %.12s…), %s (sha256 %.12s…)\n", p->model_path,
            p->model_sha256, p->cluster_path, p->cluster_sha256);
    if (p->n_overrides > 0) {
        fprintf(out, "overrides");
        for (int i = 0; i < p->n_overrides; i++)
            fprintf(out, " --%s %s", p->overrides[i].flag, p->overrides[i].value);
        fprintf(out, "\n");
    }
    /* Header laid out with the same calls as the rows so the columns line up. */
    fprintf(out, "\n%5s %5s  %-12s ", "layer", "block", "schedule");
    explain_col(out, "t_D1", 10);
    explain_col(out, "t_D2", 10);
    fprintf(out, "  %-9s ", "a2a");
    explain_col(out, "a2a time", 10);
    fprintf(out, "  %3s %4s ", "r_f", "case");
    explain_col(out, "forward", 10);
    fprintf(out, "  %3s %4s ", "r_b", "case");
    explain_col(out, "t_gar", 10);
    explain_col(out, "backward", 10);
    fputs(" ", out);
    explain_col(out, "in window", 10);
    explain_col(out, "step 2", 10);
    explain_col(out, "carried", 10);
    fputs("\n", out);
    int shown = -1; /* last layer printed in full */
    for (int i = 0; i < p->n_layers;) {
        if (shown >= 0 && explain_same_layer(&p->layers[i], &p->layers[shown])) {
            int j = i;
            while (j + 1 < p->n_layers && explain_same_layer(&p->layers[j + 1], &p->layers[shown]))
                j++;
            if (j == i)
                fprintf(out, "layer %d (block %d): same as %d\n", p->layers[i].index,
                        p->layers[i].block, p->layers[shown].index);
            else
                fprintf(out, "layers %d–%d: same as %d\n", p->layers[i].index, p->layers[j].index,
                        p->layers[shown].index);
            i = j + 1;
            continue;
        }
        explain_layer(&p->layers[i], out);
        shown = i;
        i++;
    }

    const fsmoe_predicted *pr = &p->predicted;
    explain_time(pr->iteration_s, buf[0], sizeof buf[0]);
    explain_time(pr->forward_s, buf[1], sizeof buf[1]);
    explain_time(pr->backward_s, buf[2], sizeof buf[2]);
    explain_time(pr->tail_s, buf[3], sizeof buf[3]);
    fprintf(out, "\npredicted iteration %s (forward %s, backward %s, exposed gradient tail %s)\n",
            buf[0], buf[1], buf[2], buf[3]);
    explain_bytes(p->gradient_tail_bytes, buf[0], sizeof buf[0]);
    explain_bytes(p->prefix_grad_bytes, buf[1], sizeof buf[1]);
    explain_bytes(p->prefix_window_bytes, buf[2], sizeof buf[2]);
    if (p->gradients == FSMOE_GRADS_LINA)
        fprintf(out,
                "gradients: Lina's micro-ops of %.3g MB, each started while no AllToAll runs or "
                "is queued (no window); gradients of the blocks before the first MoE layer %s\n",
                FSMOE_LINA_MICRO_OP_BYTES / 1e6, buf[1]);
    else
        fprintf(out,
                "gradient tail (all-reduced after the backward pass) %s; gradients of the blocks "
                "before the first MoE layer %s; all-reduced during their backward %s\n",
                buf[0], buf[1], buf[2]);
    fprintf(out, "\n  %-16s %12s   %s\n", "baseline", "iteration", "speed-up of this plan");
    explain_baseline("deepspeed", pr->deepspeed_s, pr->iteration_s, out);
    explain_baseline("tutel", pr->tutel_s, pr->iteration_s, out);
    explain_baseline("tutel-improved", pr->tutel_improved_s, pr->iteration_s, out);
    explain_baseline("pipemoe+lina", pr->pipemoe_lina_s, pr->iteration_s, out);

    if (p->memory.present) {
        fprintf(out, "\nmemory per GPU (the memory model: ZeRO stage %d, recomputation %s)\n",
                p->memory.zero_stage, fsmoe_name_of(fsmoe_recompute_table, p->memory.recompute));
        for (int c = 0; c <= FSMOE_MEM_CATS; c++) {
            double b = c < FSMOE_MEM_CATS ? p->memory.bytes[c] : p->memory.total;
            explain_bytes(b, buf[0], sizeof buf[0]);
            fprintf(out, "  %-12s %12s  %5.1f%%\n", c < FSMOE_MEM_CATS ? fsmoe_mem_names[c] : "total",
                    buf[0], p->memory.total > 0 ? 100.0 * b / p->memory.total : 0.0);
        }
    }

    if (p->pipeline.present) {
        const double F = p->pipeline.fwd_s, B0 = p->pipeline.bwd_s;
        const int pp = p->parallel.pp, m = p->pipeline.micro_batches;
        fprintf(out, "\npipeline (%s): %d stages of %ld blocks, %d micro-batches of %ld "
                     "samples; the layers above are one stage's, for one micro-batch\n",
                p->pipeline.one_f_one_b ? "1F1B" : "GPipe", pp, p->pipeline.stage_blocks, m,
                p->B / m);
        const struct {
            const char *what;
            double s;
        } rows[] = {{"stage forward", F},
                    {"stage backward", B0},
                    {"gradients+optimizer", p->pipeline.grad_s},
                    {"send", p->pipeline.p2p_s},
                    {"bubble", (pp - 1) * (F + B0)}};
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            explain_time(rows[i].s, buf[0], sizeof buf[0]);
            fprintf(out, "  %-20s %12s\n", rows[i].what, buf[0]);
        }
        explain_bytes(p->pipeline.p2p_bytes, buf[0], sizeof buf[0]);
        fprintf(out, "  %-20s %12s per rank and micro-batch\n", "send bytes", buf[0]);
    }

    if (p->notes[0]) {
        fprintf(out, "\nnotes\n");
        for (const char *s = p->notes; *s;) {
            const char *nl = strchr(s, '\n');
            int len = nl ? (int)(nl - s) : (int)strlen(s);
            if (len > 0)
                fprintf(out, "  - %.*s\n", len, s);
            s += len + (nl ? 1 : 0);
        }
    }
}
