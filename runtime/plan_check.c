/* Implements: checking a plan against the run (plan_check.h; design.md §9: "the runtime refuses a
 * plan whose model, world size or group layout does not match what it was started with, and
 * says which field differs"). Fields are named as written in the plan file (plan_io.c's schema,
 * version 3); the root causes come first (the model, then the parallel layout, then the shapes
 * that follow from them), so a plan for another layout is refused for its layout, not for the
 * batch the layout implies. */
#include "plan_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moe_layer.h" /* RT_MOE_MAX_CHUNKS */
#include "real.h"
#include "sha256.h"

/* moe_layer.c sends each peer exactly the rows routed to it, row counts exchanged first. */
#define RT_A2A_SPLIT FSMOE_SPLIT_ALLTOALLV

void plan_check_result_free(plan_check_result *r)
{
    if (!r)
        return;
    free(r->block); /* one allocation holds block, r_fwd and r_bwd */
    r->block = r->r_fwd = r->r_bwd = NULL;
    r->n_moe = 0;
}

/* "the plan has <have>, fsmoe-run <run>" for a numeric field. */
static fsmoe_status differs(fsmoe_error *err, const char *path, const char *field, long have,
                            const char *run_fmt, long want)
{
    char run[320];
    snprintf(run, sizeof run, run_fmt, want);
    return fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: %s: the plan has %ld, fsmoe-run %s", path, field,
                      have, run);
}

/* A parallelism the runtime does not implement yet: named, with what it runs instead. */
static fsmoe_status unsupported(fsmoe_error *err, const char *path, const char *field, long have,
                                const char *what)
{
    return fsmoe_fail(err, FSMOE_ERR_VALUE,
                      "%s: %s: the plan has %ld; %s is not supported by fsmoe-run yet (it runs "
                      "%s = 1)", path, field, have, what, strchr(field, '.') + 1);
}

static fsmoe_status check_layout(const char *path, const fsmoe_plan *p, const rt_layout *lay,
                                 fsmoe_error *err)
{
    const fsmoe_parallel *par = &p->parallel;
    if (par->world != lay->world)
        return differs(err, path, "parallel.world", par->world,
                       lay->world == 1 ? "runs on %ld rank" : "runs on %ld ranks", lay->world);
    if (lay->gpus_per_node > 0 && par->gpus_per_node != lay->gpus_per_node)
        return differs(err, path, "parallel.gpus_per_node", par->gpus_per_node,
                       "runs %ld ranks per node (as the MPI library placed them: make the plan "
                       "with that --gpus-per-node, or place the ranks as the plan assumes, e.g. "
                       "mpirun --map-by ppr:N:node)", lay->gpus_per_node);
    if (par->pp != 1)
        return unsupported(err, path, "parallel.pp", par->pp, "pipeline parallelism");
    if (par->mp != lay->mp)
        return differs(err, path, "parallel.mp", par->mp, "was started with mp = %ld", lay->mp);
    if (par->dp != lay->dp)
        return differs(err, path, "parallel.dp", par->dp, "runs data parallelism over %ld ranks",
                       lay->dp);
    if (par->ep != lay->ep)
        return differs(err, path, "parallel.ep", par->ep, "was started with ep = %ld", lay->ep);
    if (par->esp != lay->esp)
        return differs(err, path, "parallel.esp", par->esp, "was started with esp = %ld",
                       lay->esp);
    if (p->edp != lay->edp)
        return differs(err, path, "parallel.edp", p->edp,
                       "has %ld ranks holding the same experts", lay->edp);
    if (p->ranks != FSMOE_RANKS_NODE_MAJOR)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: parallel.ranks: the plan numbers ranks %s, fsmoe-run node-major "
                          "(layout.h)", path, fsmoe_rank_order_name(p->ranks));
    return FSMOE_OK;
}

static fsmoe_status check_shape(const char *path, const fsmoe_plan *p, const rt_config *c,
                                const rt_layout *lay, fsmoe_error *err)
{
    const char *started = "was started with %ld";
    if (p->B != lay->B)
        return differs(err, path, "model.batch", p->B, "was started with %ld samples per rank",
                       lay->B);
    if (p->B_global != lay->B_global)
        return differs(err, path, "model.global_batch", p->B_global,
                       "was started with %ld samples in all", lay->B_global);
    if (p->L != c->L)
        return differs(err, path, "model.seq", p->L, started, c->L);
    if (p->M != c->M)
        return differs(err, path, "model.M", p->M, started, c->M);
    if (p->H != c->H)
        return differs(err, path, "model.H", p->H, started, c->H);
    if (p->E != c->E)
        return differs(err, path, "model.E", p->E, started, c->E);
    if (p->k != c->k)
        return differs(err, path, "model.k", p->k, started, c->k);
    if ((p->expert == FSMOE_EXPERT_SWIGLU) != (c->expert == 1))
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: model.expert: the plan is for %s experts, fsmoe-run was started "
                          "with %s", path, p->expert == FSMOE_EXPERT_SWIGLU ? "swiglu" : "gpt",
                          c->expert == 1 ? "swiglu" : "gpt");
    /* The mode and the factor together: one field as the user sets it (--capacity-factor). */
    int run_dropless = !(c->f > 0);
    if ((p->capacity == FSMOE_CAPACITY_DROPLESS) != run_dropless ||
        (!run_dropless && fabs(p->f - c->f) > 1e-9 * (1 + fabs(c->f)))) {
        char have[48], want[48];
        if (p->capacity == FSMOE_CAPACITY_DROPLESS)
            snprintf(have, sizeof have, "none (dropless)");
        else
            snprintf(have, sizeof have, "%g", p->f);
        if (run_dropless)
            snprintf(want, sizeof want, "none (dropless)");
        else
            snprintf(want, sizeof want, "%g", c->f);
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: model.capacity_factor: the plan has %s, fsmoe-run was started with "
                          "%s", path, have, want);
    }
    return FSMOE_OK;
}

fsmoe_status plan_check(const char *plan_path, const fsmoe_plan *p, const char *model_sha256,
                        const rt_config *c, const rt_layout *lay, plan_check_result *out,
                        fsmoe_error *err)
{
    fsmoe_status st;
    memset(out, 0, sizeof *out);
    if (strcmp(p->model_name, c->name) != 0)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: model.name: the plan is for '%s', not '%s'",
                          plan_path, p->model_name, c->name);
    if (model_sha256 && strcmp(p->model_sha256, model_sha256) != 0)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: provenance.model_sha256: the plan was made from %s with sha256 "
                          "%.12s…, the model file of this run has %.12s… (regenerate the plan: "
                          "fsmoe-plan --regenerate %s -o %s)",
                          plan_path, p->model_path, p->model_sha256, model_sha256, plan_path,
                          plan_path);
    if (p->bytes_per_element != (int)sizeof(real))
        return differs(err, plan_path, "model.bytes_per_element", p->bytes_per_element,
                       "computes in %ld-byte elements", (long)sizeof(real));
    if ((st = check_layout(plan_path, p, lay, err)) ||
        (st = check_shape(plan_path, p, c, lay, err)))
        return st;
    if (p->split != RT_A2A_SPLIT)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: alltoall.split: the plan has %s, fsmoe-run sends %s", plan_path,
                          fsmoe_a2a_split_name(p->split), fsmoe_a2a_split_name(RT_A2A_SPLIT));

    /* One plan layer per MoE block, in forward order. */
    long moe = 0;
    for (long b = 0; b < c->layers; b++)
        moe += config_is_moe_block(c, b);
    if (p->n_layers != moe)
        return differs(err, plan_path, "layers", p->n_layers, "has %ld MoE layers", moe);
    int *mem = moe > 0 ? calloc((size_t)(3 * moe), sizeof *mem) : NULL;
    if (moe > 0 && !mem)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "%s: no memory for %ld layers", plan_path, moe);
    out->block = mem, out->r_fwd = mem ? mem + moe : NULL, out->r_bwd = mem ? mem + 2 * moe : NULL;
    int i = 0;
    for (long b = 0; b < c->layers; b++) {
        if (!config_is_moe_block(c, b))
            continue;
        const fsmoe_layer_plan *lp = &p->layers[i];
        if (lp->block != b) {
            st = fsmoe_fail(err, FSMOE_ERR_VALUE,
                            "%s: layers[%d].block: the plan has %d, fsmoe-run has MoE layer %d in "
                            "block %ld", plan_path, i, lp->block, i, b);
            goto fail;
        }
        const fsmoe_phase_plan *ph[2] = {&lp->fwd, &lp->bwd};
        for (int d = 0; d < 2; d++)
            if (ph[d]->r < 1 || ph[d]->r > RT_MOE_MAX_CHUNKS) {
                st = fsmoe_fail(err, FSMOE_ERR_VALUE,
                                "%s: layers[%d].%s.r: the plan has %d, fsmoe-run pipelines a MoE "
                                "layer in 1..%d chunks",
                                plan_path, i, d ? "backward" : "forward", ph[d]->r,
                                RT_MOE_MAX_CHUNKS);
                goto fail;
            }
        out->block[i] = (int)b;
        out->r_fwd[i] = lp->fwd.r;
        out->r_bwd[i] = lp->bwd.r;
        i++;
    }
    out->n_moe = (int)moe;
    out->iteration_s = p->predicted.iteration_s;
    snprintf(out->cluster, sizeof out->cluster, "%s", p->cluster_name);
    return FSMOE_OK;
fail:
    plan_check_result_free(out);
    return st;
}

fsmoe_status plan_check_file(const char *plan_path, const char *model_path, const rt_config *c,
                             int world, int rank, int gpus_per_node, int *mp, int *ep,
                             int *esp, plan_check_result *out, fsmoe_error *err)
{
    fsmoe_plan plan;
    char sha[FSMOE_SHA256_HEX];
    memset(out, 0, sizeof *out);
    if (model_path) {
        fsmoe_status st = fsmoe_sha256_file(model_path, sha, err);
        if (st != FSMOE_OK)
            return st;
    }
    fsmoe_status st = fsmoe_plan_load(plan_path, &plan, err);
    if (st != FSMOE_OK)
        return st;
    if (*ep == 0)
        *ep = plan.parallel.ep;
    if (*mp == 0)
        *mp = plan.parallel.mp;
    if (*esp == 0)
        *esp = plan.parallel.esp;
    /* a layout that does not fit this world is refused by plan_check, naming the field */
    rt_layout lay = layout_make_mp(world, rank, gpus_per_node, *mp, *ep, *esp, c->E, c->B);
    st = plan_check(plan_path, &plan, model_path ? sha : NULL, c, &lay, out, err);
    fsmoe_plan_free(&plan);
    return st;
}
