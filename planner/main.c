/* Implements: the fsmoe-plan command line (design.md §1, §9; style.md "Command lines"):
 *   fsmoe-plan --model M --cluster C [-o plan.yaml] [--method ...] [overrides] [--quiet]
 *   fsmoe-plan --regenerate PLAN [-o OUT]
 *   fsmoe-plan explain PLAN
 *   fsmoe-plan diff A B [--rtol X] [--strict]
 *   fsmoe-plan simulate PLAN ... / fsmoe-plan sweep ...   (planner/sim_cli.c)
 * Exit codes: 0 success (diff: plans agree), 1 diff found differences or an internal/IO failure
 * while writing, 2 usage or input error (bad flag, missing or invalid input file).
 *
 * The layout is resolved in a fixed order (design.md §2): the cluster's common layout
 * (mp = esp = G, ep = dp = nodes), replaced by the model file's `parallel` section when present,
 * then by command-line overrides. Every override given is recorded in the plan, normalised and in
 * a fixed order, so `--regenerate` can replay it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomic_file.h"
#include "cli.h"
#include "cli_parse.h"
#include "cluster.h"
#include "diff.h"
#include "explain.h"
#include "fidelity.h"
#include "locate.h"
#include "search.h"
#include "sim_cli.h"
#include "model.h"
#include "parallel.h"
#include "plan.h"
#include "plan_model.h"
#include "sha256.h"
#include "yaml_read.h"
#include "yaml_write.h"

#ifndef FSMOE_VERSION
#error "FSMOE_VERSION must be defined by the build (meson.build: add_project_arguments)"
#endif

static const char *prog = "fsmoe-plan";

static int usage(const char *text, const char *reason)
{
    if (reason)
        fprintf(stderr, "%s: %s\n", prog, reason);
    fputs(text, stderr);
    return 2;
}

/* Input errors (a missing file included) exit 2; what fails later, e.g. writing, keeps the
 * status's own code. */
static int input_error(const fsmoe_error *err)
{
    fsmoe_error_print(prog, err);
    return err->status == FSMOE_ERR_IO ? 2 : fsmoe_exit_code(err->status);
}

/* ---- planning ------------------------------------------------------------------------------ */

/* One warning when the plan rests on profile fits below the profile's r2 threshold (the
 * cost model's LOW R2 notes, which the plan file lists). */
static void warn_low_r2(const fsmoe_plan *p, const char *cluster_path)
{
    int n = 0;
    for (const char *l = p->notes; (l = strstr(l, FSMOE_LOW_R2_NOTE)) != NULL; l++)
        n++;
    if (n > 0)
        fprintf(stderr,
                "%s: warning: %s: %d of the fits this plan uses %s below the profile's r2 "
                "threshold (LOW R2 in the plan's notes): its predicted times are as uncertain "
                "as those fits\nHINT: measure the profile again (fsmoe-bench) on a quieter "
                "machine or with more runs per size\n",
                prog, cluster_path, n, n == 1 ? "is" : "are");
}

static void print_summary(const fsmoe_plan *p, const char *dest)
{
    const fsmoe_parallel *par = &p->parallel;
    char t[4][32];
    fprintf(stderr,
            "%s: %s on %s: %d GPUs (dp %d, mp %d, ep %d, esp %d, pp %d), %d MoE layers, method "
            "%s\n",
            prog, p->model_name, p->cluster_name, par->world, par->dp, par->mp, par->ep, par->esp,
            par->pp, p->n_layers, p->method);
    explain_time(p->predicted.iteration_s, t[0], sizeof t[0]);
    explain_time(p->predicted.forward_s, t[1], sizeof t[1]);
    explain_time(p->predicted.backward_s, t[2], sizeof t[2]);
    explain_time(p->predicted.tail_s, t[3], sizeof t[3]);
    if (p->pipeline.present)
        fprintf(stderr,
                "  predicted iteration %s (%s: %d stages of %ld blocks, %d micro-batches; "
                "one stage's micro-batch: forward %s, backward %s, gradient tail %s; the MoE "
                "layers counted and listed are one stage's)\n",
                t[0], p->pipeline.one_f_one_b ? "1F1B" : "GPipe", par->pp,
                p->pipeline.stage_blocks, p->pipeline.micro_batches, t[1], t[2], t[3]);
    else
        fprintf(stderr, "  predicted iteration %s (forward %s, backward %s, gradient tail %s)\n",
                t[0], t[1], t[2], t[3]);
    const fsmoe_predicted *pr = &p->predicted;
    if (pr->iteration_s > 0)
        fprintf(stderr,
                "  speed-up: %.2fx over deepspeed, %.2fx over tutel, %.2fx over tutel-improved, "
                "%.2fx over pipemoe+lina\n",
                pr->deepspeed_s / pr->iteration_s, pr->tutel_s / pr->iteration_s,
                pr->tutel_improved_s / pr->iteration_s, pr->pipemoe_lina_s / pr->iteration_s);
    if (p->memory.present) {
        char mem[32];
        explain_bytes(p->memory.total, mem, sizeof mem);
        fprintf(stderr, "  memory per GPU %s (the memory model; fsmoe-plan explain itemises it)\n",
                mem);
    }
    /* r distribution: count of layers per distinct r, in increasing r */
    for (int phase = 0; phase < 2; phase++) {
        fprintf(stderr, "  %s r:", phase == 0 ? "forward " : "backward");
        int last = 0;
        for (;;) {
            int next = 0, count = 0;
            for (int i = 0; i < p->n_layers; i++) {
                int r = phase == 0 ? p->layers[i].fwd.r : p->layers[i].bwd.r;
                if (r > last && (next == 0 || r < next))
                    next = r;
            }
            if (next == 0)
                break;
            for (int i = 0; i < p->n_layers; i++)
                count += (phase == 0 ? p->layers[i].fwd.r : p->layers[i].bwd.r) == next;
            fprintf(stderr, " %d (x%d)", next, count);
            last = next;
        }
        fprintf(stderr, "\n");
    }
    /* the AllToAll algorithm, when any layer runs other than the flat one */
    int n_2dh = 0;
    for (int i = 0; i < p->n_layers; i++)
        n_2dh += strcmp(p->layers[i].a2a_algorithm, "2dh") == 0;
    if (n_2dh > 0)
        fprintf(stderr, "  alltoall: 2dh (hierarchical) in %d of %d layers, nccl in %d\n", n_2dh,
                p->n_layers, p->n_layers - n_2dh);
    if (dest)
        fprintf(stderr, "  wrote %s\n", dest);
}

/* ---- outputs ------------------------------------------------------------------------------ */

/* -o before any work: writable, and not one of the inputs (device and inode, so another spelling
 * or a symbolic link of the model is caught). */
static int check_output(const plan_cli *a)
{
    fsmoe_error err = {0};
    if (!a->out_path)
        return 0;
    const char *ins[] = {a->model_path, a->cluster_path, a->regenerate};
    for (size_t i = 0; i < sizeof ins / sizeof ins[0]; i++)
        if (ins[i] && fsmoe_same_file(a->out_path, ins[i])) {
            fprintf(stderr, "%s: -o %s: is the input %s (an output never replaces an input)\n",
                    prog, a->out_path, ins[i]);
            return 2;
        }
    if (fsmoe_atomic_check("-o", a->out_path, &err) != FSMOE_OK) {
        fsmoe_error_print(prog, &err);
        return 2;
    }
    return 0;
}

/* The cost entry of the cluster profile that most plausibly made a time out of range: the
 * largest alpha_s (against 1 s) or beta (against 1 µs per byte or MAC), as "ops[i].key". */
static int cluster_culprit(const char *cluster_path, char *field, size_t len)
{
    fsmoe_yaml y;
    fsmoe_ynode root, ops, item;
    memset(&y, 0, sizeof y);
    double worst = 1.0;
    int found = 0;
    if (fsmoe_yaml_open(&y, cluster_path, NULL) == FSMOE_OK &&
        fsmoe_yaml_root(&y, &root, NULL) == FSMOE_OK &&
        fsmoe_yaml_sequence(&root, "ops", FSMOE_REQUIRED, &ops, NULL) == FSMOE_OK) {
        for (int i = 0; i < fsmoe_yaml_seq_len(&ops); i++) {
            if (fsmoe_yaml_seq_item(&ops, i, &item, NULL) != FSMOE_OK)
                continue;
            static const struct {
                const char *key;
                double unit;
            } keys[] = {{"alpha_s", 1.0}, {"beta_s_per_byte", 1e-6}, {"beta_s_per_mac", 1e-6}};
            for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
                double v = 0.0;
                if (fsmoe_yaml_double(&item, keys[k].key, FSMOE_OPTIONAL, -1e308, 1e308, &v,
                                      NULL) == FSMOE_OK &&
                    v / keys[k].unit > worst) {
                    worst = v / keys[k].unit;
                    snprintf(field, len, "ops[%d].%s", i, keys[k].key);
                    found = 1;
                }
            }
        }
    }
    fsmoe_yaml_close(&y);
    return found;
}

/* A plan its own reader refuses names the input that caused it: the plan field in the reader's
 * message (after "TMP:line:col: ") is mapped back to the model or cluster field, or to the
 * override (on the command line, or recorded in the plan being regenerated). */
static void blame_input(const plan_cli *a, const int ov_src[OV_COUNT], const char *tmp,
                        const fsmoe_error *reader, fsmoe_error *err)
{
    const char *msg = reader->msg;
    size_t tl = strlen(tmp);
    if (strncmp(msg, tmp, tl) == 0) {
        msg += tl;
        int skip = 0;
        if (sscanf(msg, ":%*d:%*d: %n", &skip) >= 0 && skip > 0)
            msg += skip;
    }
    char field[128];
    snprintf(field, sizeof field, "%.*s", (int)strcspn(msg, ":"), msg);
    static const struct {
        const char *plan, *model;
        int ov;
    } map[] = {
        {"model.capacity_factor", "moe.capacity_factor", OV_CAPACITY},
        {"model.M", "architecture.hidden", -1},
        {"model.H", "architecture.ffn_hidden", -1},
        {"model.E", "moe.experts", -1},
        {"model.k", "moe.top_k", -1},
        {"model.batch", "training.batch", OV_BATCH},
        {"model.global_batch", "training.batch", OV_BATCH},
        {"model.seq", "training.seq", OV_SEQ},
        {"model.name", "name", -1},
    };
    char where[FSMOE_ERROR_MAX / 2];
    where[0] = '\0';
    for (size_t i = 0; i < sizeof map / sizeof map[0] && !where[0]; i++) {
        if (strcmp(field, map[i].plan) != 0)
            continue;
        int o = map[i].ov;
        if (o >= 0 && a->ov[o] && a->regenerate && ov_src[o] >= 0) {
            char f[64];
            snprintf(f, sizeof f, "provenance.overrides[%d].value", ov_src[o]);
            locate_field(a->regenerate, f, where, sizeof where);
        } else if (o >= 0 && a->ov[o]) {
            snprintf(where, sizeof where, "--%s %s", plan_cli_ov_flags[o], a->ov[o]);
        } else {
            locate_field(a->model_path, map[i].model, where, sizeof where);
        }
    }
    if (!where[0] && strncmp(field, "parallel.", 9) == 0) {
        int any = 0;
        for (int i = OV_WORLD; i <= OV_ESP; i++)
            any |= a->ov[i] != NULL;
        if (any)
            snprintf(where, sizeof where, "the layout overrides (--world .. --esp)");
        else
            locate_field(a->model_path, field, where, sizeof where);
    }
    if (!where[0] && strcmp(field, "cluster.name") == 0)
        locate_field(a->cluster_path, "name", where, sizeof where);
    if (!where[0]) {
        /* times and bytes: the cost lines, or the model's sizes when no line is out of scale */
        char f[64];
        if (cluster_culprit(a->cluster_path, f, sizeof f))
            locate_field(a->cluster_path, f, where, sizeof where);
        else
            snprintf(where, sizeof where, "%s and %s: the model's sizes on this profile",
                     a->model_path, a->cluster_path);
    }
    fsmoe_fail(err, FSMOE_ERR_VALUE,
               "%s: gives a plan that fsmoe-plan's plan reader refuses (%.400s); nothing written",
               where, msg);
}

/* Writes the plan to -o (or stdout) only after the plan reader accepted it: the plan goes to a
 * temporary (next to -o, or in $TMPDIR for stdout), is read back with fsmoe_plan_load, then
 * renamed (or copied to stdout). A refusal names the input that caused it and exits 2. */
static int write_checked(const plan_cli *a, const int ov_src[OV_COUNT], const fsmoe_plan *p)
{
    fsmoe_error err = {0};
    fsmoe_atomic_file af;
    char stdout_path[1024];
    const char *path = a->out_path;
    if (!path) {
        const char *dir = getenv("TMPDIR");
        snprintf(stdout_path, sizeof stdout_path, "%s/fsmoe-plan-stdout.yaml",
                 dir && dir[0] ? dir : "/tmp");
        path = stdout_path;
    }
    if (fsmoe_atomic_open(&af, path, &err) != FSMOE_OK) {
        fsmoe_error_print(prog, &err);
        return a->out_path ? 2 : 1;
    }
    if (fsmoe_plan_emit(p, af.f, &err) != FSMOE_OK || fflush(af.f) != 0) {
        if (err.status == FSMOE_OK)
            fsmoe_fail(&err, FSMOE_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        fsmoe_atomic_abort(&af);
        fsmoe_error_print(prog, &err);
        return 1;
    }
    fsmoe_plan back;
    memset(&back, 0, sizeof back);
    fsmoe_error rerr = {0};
    if (fsmoe_plan_load(af.tmp, &back, &rerr) != FSMOE_OK) {
        blame_input(a, ov_src, af.tmp, &rerr, &err);
        fsmoe_atomic_abort(&af);
        fsmoe_error_print(prog, &err);
        return 2;
    }
    fsmoe_plan_free(&back);
    if (a->out_path) {
        if (fsmoe_atomic_commit(&af, &err) != FSMOE_OK) {
            fsmoe_error_print(prog, &err);
            return 1;
        }
        return 0;
    }
    /* stdout: copy the checked text, then drop the temporary */
    int rc = 0;
    rewind(af.f);
    FILE *in = fopen(af.tmp, "r");
    char buf[8192];
    size_t n;
    if (!in)
        rc = 1;
    while (in && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, stdout) != n)
            rc = 1;
    if (in)
        fclose(in);
    fsmoe_atomic_abort(&af);
    if (rc != 0 || fflush(stdout) != 0) {
        fprintf(stderr, "%s: writing the plan to stdout failed\n", prog);
        return 1;
    }
    return 0;
}

/* ---- planning ------------------------------------------------------------------------------ */

/* --search (search.h): ranks every layout of par's world and size of node, prints the table
 * (and the plot), and makes the fastest one that fits the plan's layout, recorded as the
 * overrides --dp, --mp, --ep, --esp (with --world, --gpus-per-node and --batch) so that
 * --regenerate replays it without searching. m has the training-shape overrides applied; the
 * global batch is --global-batch, else m->B times par's dp. Returns 0, or the exit code. */
static int search_choose(plan_cli *a, fsmoe_model *m, const fsmoe_cluster *c,
                         fsmoe_parallel *par, search_result *sr, char *note, size_t note_len)
{
    fsmoe_error err = {0};
    long global_batch = a->global_batch > 0 ? a->global_batch : m->B * par->dp;
    double limit = a->mem_limit > 0   ? (double)a->mem_limit
                   : a->mem_limit < 0 ? 0.0 /* --mem-limit none */
                                      : c->device_memory_bytes;
    plan_options opt = {.method = (plan_method)a->method};
    if (search_layouts(m, c, a->cluster_path, par->world, par->gpus_per_node, global_batch,
                       limit, &opt, sr, &err) != FSMOE_OK)
        return input_error(&err);
    if (!a->quiet)
        search_print(sr, m->name, c->name, a->top, stderr);
    if (a->svg) {
        char title[200];
        snprintf(title, sizeof title, "%s on %s: %d GPUs, global batch %ld", m->name, c->name,
                 par->world, global_batch);
        if (search_svg(sr, title, a->svg, &err) != FSMOE_OK) {
            fsmoe_error_print(prog, &err);
            return 1;
        }
    }
    if (sr->n_ranked == 0) {
        char lim[32] = "no limit";
        if (limit > 0)
            explain_bytes(limit, lim, sizeof lim);
        fprintf(stderr,
                "%s: --search: no layout of %d GPUs fits %s per GPU and plans (%s on %s)\n"
                "HINT: more GPUs (--world), a smaller --batch or --seq, or training.zero_stage "
                "and training.recompute in the model file\n",
                prog, par->world, lim, m->name, c->name);
        return 2;
    }
    const search_candidate *best = &sr->c[sr->rank[0]];
    static char text[8][24];
    int idx[8] = {OV_WORLD, OV_GPN, OV_DP, OV_MP, OV_EP, OV_ESP, OV_BATCH, OV_PP};
    long val[8] = {par->world, par->gpus_per_node, best->par.dp, best->par.mp, best->par.ep,
                   best->par.esp, best->B, best->par.pp};
    for (int i = 0; i < (best->par.pp > 1 ? 8 : 7); i++) {
        snprintf(text[i], sizeof text[i], "%ld", val[i]);
        a->ov[idx[i]] = text[i];
    }
    a->v.world = par->world, a->v.gpn = par->gpus_per_node;
    a->v.dp = best->par.dp, a->v.mp = best->par.mp, a->v.ep = best->par.ep;
    a->v.esp = best->par.esp, a->v.batch = best->B, a->v.pp = best->par.pp;
    if (best->one_f_one_b) {
        static char psched[] = "1f1b";
        a->ov[OV_PSCHED] = psched;
        a->v.one_f_one_b = 1;
    }
    *par = best->par;
    m->B = best->B;
    char lim[32] = "no limit";
    if (limit > 0)
        explain_bytes(limit, lim, sizeof lim);
    snprintf(note, note_len,
             "search: this layout is the fastest of %d that fit %s per GPU (%d layouts of %d "
             "GPUs tried at a global batch of %ld; fsmoe-plan --search prints the table)",
             sr->n_ranked, lim, sr->n + sr->n_invalid, par->world, global_batch);
    return 0;
}

/* ov_src[i]: the index of override i among the regenerated plan's recorded overrides (-1 when
 * it came from the command line). */
static int run_plan(plan_cli *a, const int ov_src[OV_COUNT])
{
    fsmoe_error err = {0};
    fsmoe_model m;
    fsmoe_cluster c;
    fsmoe_plan p;
    int rc = 0;
    search_result sr;
    memset(&sr, 0, sizeof sr);
    char search_note[400] = "";
    memset(&m, 0, sizeof m);
    memset(&c, 0, sizeof c);
    memset(&p, 0, sizeof p);

    if ((rc = check_output(a)) != 0)
        return rc;
    if (a->svg) {
        const char *ins[] = {a->model_path, a->cluster_path, a->out_path};
        for (size_t i = 0; i < sizeof ins / sizeof ins[0]; i++)
            if (ins[i] && fsmoe_same_file(a->svg, ins[i])) {
                fprintf(stderr, "%s: --svg %s: is the %s %s (an output never replaces another "
                                "file of the run)\n",
                        prog, a->svg, i < 2 ? "input" : "-o output", ins[i]);
                return 2;
            }
        if (fsmoe_atomic_check("--svg", a->svg, &err) != FSMOE_OK) {
            fsmoe_error_print(prog, &err);
            return 2;
        }
    }
    if (fsmoe_model_load(a->model_path, &m, &err)) {
        if (a->regenerate)
            locate_named_by(a->regenerate, "provenance.model", &err);
        return input_error(&err);
    }
    if (fsmoe_cluster_load(a->cluster_path, &c, &err)) {
        if (a->regenerate)
            locate_named_by(a->regenerate, "provenance.cluster", &err);
        rc = input_error(&err);
        goto done;
    }

    fsmoe_parallel par = fsmoe_parallel_common(c.nodes, c.gpus_per_node);
    char where[600];
    snprintf(where, sizeof where, "%s: common layout of %d nodes x %d GPUs", a->cluster_path,
             c.nodes, c.gpus_per_node);
    if (m.has_parallel) {
        par = m.parallel;
        snprintf(where, sizeof where, "%s: parallel", a->model_path);
    }
    const plan_cli_ov_values v = a->v;
    if (a->ov[OV_WORLD] || a->ov[OV_GPN]) {
        /* A new cluster size: start again from the common layout of that size. */
        int gpn = a->ov[OV_GPN] ? v.gpn : par.gpus_per_node;
        int world = a->ov[OV_WORLD] ? v.world : par.world;
        if (gpn <= 0 || world % gpn != 0) {
            char msg[200];
            snprintf(msg, sizeof msg, "--world %d is not a multiple of %d GPUs per node", world,
                     gpn);
            rc = usage(plan_cli_usage, msg);
            goto done;
        }
        par = fsmoe_parallel_common(world / gpn, gpn);
    }
    if (a->ov[OV_DP])
        par.dp = v.dp;
    if (a->ov[OV_MP])
        par.mp = v.mp;
    if (a->ov[OV_EP])
        par.ep = v.ep;
    if (a->ov[OV_ESP])
        par.esp = v.esp;
    if (a->ov[OV_PP]) {
        /* pipeline stages: unless --dp says otherwise, each stage keeps the data parallelism
         * the ranks leave it (dp = world / (mp·pp)) */
        par.pp = v.pp;
        if (!a->ov[OV_DP] && par.world % ((long)par.mp * par.pp) == 0)
            par.dp = par.world / (par.mp * par.pp);
    }
    if ((a->ov[OV_MICRO] || a->ov[OV_PSCHED]) && par.pp <= 1) {
        rc = usage(plan_cli_usage, a->ov[OV_MICRO] ? "--micro-batches: a pipeline's "
                                                     "micro-batches need --pp 2 or more"
                                                   : "--pipeline-schedule: a pipeline needs "
                                                     "--pp 2 or more");
        goto done;
    }
    for (int i = OV_WORLD; i <= OV_PP; i++)
        if (a->ov[i] && i != OV_CAPACITY) {
            snprintf(where, sizeof where, "command line (layout after overrides)");
            break;
        }
    if (a->ov[OV_BATCH])
        m.B = v.batch;
    if (a->ov[OV_SEQ])
        m.L = v.seq;
    if (a->ov[OV_CAPACITY])
        m.f = v.f;
    if (a->search && (rc = search_choose(a, &m, &c, &par, &sr, search_note,
                                         sizeof search_note)) != 0)
        goto done;
    if (a->search)
        snprintf(where, sizeof where, "fsmoe-plan --search (the chosen layout)");
    /* After every override: the layout, E = ep for `experts: ep`, E divisible by ep (named at
     * the model's `experts` field), top_k <= E, capacity >= 1. */
    if (fsmoe_model_resolve(&m, &par, where, &err)) {
        rc = input_error(&err);
        goto done;
    }

    plan_options opt = {.method = (plan_method)a->method,
                        .micro_batches = a->ov[OV_MICRO] ? a->v.micro : 0,
                        .one_f_one_b = a->ov[OV_PSCHED] ? a->v.one_f_one_b : 0};
    if (plan_model(&m, &c, a->cluster_path, &par, &opt, &p, &err)) {
        rc = input_error(&err);
        goto done;
    }
    if (search_note[0])
        fsmoe_note_add(p.notes, sizeof p.notes, search_note);

    /* the memory model's prediction against --mem-limit, before anything is written */
    if (a->mem_limit > 0 && p.memory.total > (double)a->mem_limit) {
        char need[32], lim[32], parts[FSMOE_MEM_CATS][32];
        explain_bytes(p.memory.total, need, sizeof need);
        explain_bytes((double)a->mem_limit, lim, sizeof lim);
        for (int i = 0; i < FSMOE_MEM_CATS; i++)
            explain_bytes(p.memory.bytes[i], parts[i], sizeof parts[i]);
        fprintf(stderr,
                "%s: --mem-limit %s: %s on this layout (dp %d, mp %d, ep %d, esp %d) needs %s "
                "per GPU (weights %s, gradients %s, optimizer %s, activations %s, workspace %s, "
                "buffers %s; ZeRO stage %d, recomputation %s)\nHINT: another layout (--dp, "
                "--mp, --ep, --esp), a smaller --batch or --seq, or training.zero_stage and "
                "training.recompute in the model file\n",
                prog, lim, m.name, par.dp, par.mp, par.ep, par.esp, need, parts[0], parts[1],
                parts[2], parts[3], parts[4], parts[5], p.memory.zero_stage,
                fsmoe_name_of(fsmoe_recompute_table, p.memory.recompute));
        rc = 2;
        goto done;
    }

    /* provenance */
    snprintf(p.model_path, sizeof p.model_path, "%s", a->model_path);
    snprintf(p.cluster_path, sizeof p.cluster_path, "%s", a->cluster_path);
    if (fsmoe_sha256_file(a->model_path, p.model_sha256, &err) ||
        fsmoe_sha256_file(a->cluster_path, p.cluster_sha256, &err)) {
        rc = input_error(&err);
        goto done;
    }
    snprintf(p.planner_version, sizeof p.planner_version, "%s", FSMOE_VERSION);
    snprintf(p.method, sizeof p.method, "%s", plan_cli_method_name(a->method));
    if (p.model_name[0] == '\0')
        snprintf(p.model_name, sizeof p.model_name, "%s", m.name);
    if (p.cluster_name[0] == '\0')
        snprintf(p.cluster_name, sizeof p.cluster_name, "%s", c.name);
    p.n_overrides = 0;
    for (int i = 0; i < OV_COUNT; i++) {
        if (!a->ov[i])
            continue;
        fsmoe_override *o = &p.overrides[p.n_overrides++];
        snprintf(o->flag, sizeof o->flag, "%s", plan_cli_ov_flags[i]);
        plan_cli_ov_canonical(i, &a->v, o->value, sizeof o->value);
    }

    if ((rc = write_checked(a, ov_src, &p)) != 0)
        goto done;
    if (!a->quiet) {
        print_summary(&p, a->out_path);
        warn_low_r2(&p, a->cluster_path);
    }
done:
    search_free(&sr);
    fsmoe_plan_free(&p);
    fsmoe_cluster_free(&c);
    return rc;
}

/* Replays a plan's recorded inputs: its model, cluster, method and overrides. Only the
 * provenance is read, so a plan of an older schema version can be regenerated too. A recorded
 * value that this fsmoe-plan refuses is an error in the plan file, named at its line. */
static int run_regenerate(plan_cli *a)
{
    fsmoe_error err = {0};
    fsmoe_plan old; /* a holds pointers into it until run_plan returns */
    int ov_src[OV_COUNT];
    for (int j = 0; j < OV_COUNT; j++)
        ov_src[j] = -1;
    if (fsmoe_plan_load_provenance(a->regenerate, &old, &err))
        return input_error(&err);
    a->model_path = old.model_path;
    a->cluster_path = old.cluster_path;
    int method = -1;
    for (int k = 0; k < PLAN_METHOD_COUNT; k++)
        if (strcmp(old.method, plan_cli_method_name(k)) == 0)
            method = k;
    if (method < 0) {
        locate_fail(a->regenerate, "provenance.method", &err, FSMOE_ERR_VALUE,
                    "'%s' is not a method of this fsmoe-plan (expected auto, fsmoe, fsmoe-paper, "
                    "parm or monta)",
                    old.method);
        fsmoe_plan_free(&old);
        return input_error(&err);
    }
    a->method = method;
    for (int i = 0; i < old.n_overrides; i++) {
        int found = 0;
        for (int j = 0; j < OV_COUNT; j++)
            if (strcmp(old.overrides[i].flag, plan_cli_ov_flags[j]) == 0) {
                a->ov[j] = old.overrides[i].value;
                ov_src[j] = i;
                found = 1;
            }
        if (!found) {
            char f[64];
            snprintf(f, sizeof f, "provenance.overrides[%d].flag", i);
            locate_fail(a->regenerate, f, &err, FSMOE_ERR_VALUE,
                        "unknown flag '%s' (this fsmoe-plan records only batch, seq, world, "
                        "gpus-per-node, dp, mp, ep, esp, capacity-factor, pp, micro-batches, "
                        "pipeline-schedule)",
                        old.overrides[i].flag);
            fsmoe_plan_free(&old);
            return input_error(&err);
        }
    }
    int bad = -1;
    if (plan_cli_overrides(a->ov, &a->v, &bad, &err) != FSMOE_OK) {
        char f[64], text[FSMOE_ERROR_MAX];
        snprintf(text, sizeof text, "%s", err.msg);
        snprintf(f, sizeof f, "provenance.overrides[%d].value", bad >= 0 ? ov_src[bad] : 0);
        locate_fail(a->regenerate, f, &err, FSMOE_ERR_VALUE, "recorded override %.800s", text);
        fsmoe_plan_free(&old);
        return input_error(&err);
    }
    int rc = run_plan(a, ov_src);
    fsmoe_plan_free(&old);
    return rc;
}

static int cmd_explain(const plan_cli *a)
{
    fsmoe_error err = {0};
    fsmoe_plan p;
    if (fsmoe_plan_load(a->inputs[0], &p, &err))
        return input_error(&err);
    explain_plan(&p, a->inputs[0], stdout);
    fsmoe_plan_free(&p);
    return fflush(stdout) == 0 ? 0 : 1;
}

static int cmd_diff(const plan_cli *a)
{
    fsmoe_error err = {0};
    diff_options opt = {.rtol = a->rtol, .strict = a->strict};
    fsmoe_plan x, y;
    if (fsmoe_plan_load(a->inputs[0], &x, &err))
        return input_error(&err);
    if (fsmoe_plan_load(a->inputs[1], &y, &err)) {
        fsmoe_plan_free(&x);
        return input_error(&err);
    }
    int n = diff_plans(&x, &y, &opt, stdout);
    if (n > 0)
        printf("%d difference%s between %s and %s\n", n, n == 1 ? "" : "s", a->inputs[0],
               a->inputs[1]);
    fsmoe_plan_free(&x);
    fsmoe_plan_free(&y);
    fflush(stdout);
    return n > 0 ? 1 : 0;
}

static int cmd_fidelity(const plan_cli *a)
{
    fsmoe_error err = {0};
    int off = 0;
    if (fidelity_report(a->root, stdout, &off, &err) != FSMOE_OK) {
        fflush(stdout);
        return input_error(&err);
    }
    return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    plan_cli cli;
    fsmoe_error err = {0};
    if (plan_cli_parse(argc, argv, &cli, &err) != FSMOE_OK)
        return usage(cli.usage, err.msg);
    fsmoe_atomic_on_signals();
    int no_ov[OV_COUNT];
    for (int i = 0; i < OV_COUNT; i++)
        no_ov[i] = -1;
    switch (cli.cmd) {
    case PLAN_CMD_HELP: fputs(cli.usage, stdout); return 0;
    case PLAN_CMD_VERSION: printf("fsmoe-plan %s\n", FSMOE_VERSION); return 0;
    case PLAN_CMD_EXPLAIN: return cmd_explain(&cli);
    case PLAN_CMD_DIFF: return cmd_diff(&cli);
    case PLAN_CMD_SIMULATE: return sim_cli_simulate(&cli);
    case PLAN_CMD_SWEEP: return sim_cli_sweep(&cli);
    case PLAN_CMD_FIDELITY: return cmd_fidelity(&cli);
    case PLAN_CMD_REGENERATE: return run_regenerate(&cli);
    case PLAN_CMD_PLAN: return run_plan(&cli, no_ov);
    }
    return usage(plan_cli_usage, "internal: unknown subcommand");
}
