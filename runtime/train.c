/* Implements: the training step (train.h). */
#include "train.h"

#include "dist.h"
#include "trace.h"

#include <stdlib.h>
#include <string.h>

fsmoe_status trainer_init(rt_trainer *tr, const rt_config *cfg, rt_backend *be,
                          const rt_data *data, fsmoe_error *err)
{
    return trainer_init_dist(tr, cfg, be, data, NULL, err);
}

fsmoe_status trainer_init_dist(rt_trainer *tr, const rt_config *cfg, rt_backend *be,
                               const rt_data *data, const rt_dist *dist, fsmoe_error *err)
{
    memset(tr, 0, sizeof(*tr));
    tr->data = data;
    tr->sample0 = dist ? dist->layout.sample0 : 0;
    fsmoe_status st = model_init_dist(&tr->model, cfg, be, dist, err);
    if (st != FSMOE_OK)
        return st;
    st = adamw_init(&tr->opt, &tr->model.params, be, err);
    if (st != FSMOE_OK)
        return st;
    tr->tok = calloc((size_t)tr->model.N, sizeof(int));
    tr->tgt = calloc((size_t)tr->model.N, sizeof(int));
    if (!tr->tok || !tr->tgt)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "trainer: out of memory");
    return FSMOE_OK;
}

void trainer_free(rt_trainer *tr)
{
    rt_backend *be = tr->model.be;
    adamw_free(&tr->opt, be);
    model_free(&tr->model);
    free(tr->tok);
    free(tr->tgt);
    memset(tr, 0, sizeof(*tr));
}

fsmoe_status trainer_step(rt_trainer *tr, double *loss, double *ce, double *gnorm,
                          fsmoe_error *err)
{
    rt_model *md = &tr->model;
    const rt_config *c = &md->cfg;
    data_batch_slice(tr->data, 0, c->seed, tr->step, tr->sample0, c->B, c->L, tr->tok, tr->tgt);
    /* the schedule graph's `optimizer` task (task.h): clearing the gradients, their norm and
     * AdamW */
    long h = rt_trace_begin(md->trace, NULL, RT_TRACE_HOST, FSMOE_TASK_OPTIM, FSMOE_PHASE_TAIL,
                            -1, -1);
    if (!tr->grads_clear)
        model_zero_grad(md);
    tr->grads_clear = 0;
    rt_trace_end(md->trace, NULL, h);
    fsmoe_status st = model_forward(md, tr->tok, tr->tgt, 1, tr->step, err);
    if (st != FSMOE_OK)
        return st;
    st = model_backward(md, err);
    if (st != FSMOE_OK)
        return st;
    double norm = 0, gscale = 1;
    h = rt_trace_begin(md->trace, NULL, RT_TRACE_HOST, FSMOE_TASK_OPTIM, FSMOE_PHASE_TAIL, -1, -1);
    if ((st = model_grad_norm(md, c->clip, &norm, &gscale, err)) != FSMOE_OK)
        return st;
    adamw_step(&tr->opt, md->be, &md->params, c, lr_at(c, tr->step), gscale);
    tr->grads_clear = 1;
    md->be->stream_sync(md->be, NULL);
    rt_trace_end(md->trace, NULL, h);
    tr->step++;
    if (loss)
        *loss = md->loss;
    if (ce)
        *ce = md->ce;
    if (gnorm)
        *gnorm = norm;
    return rt_backend_check(md->be, err);
}

fsmoe_status trainer_eval(rt_trainer *tr, double *val_ce, fsmoe_error *err)
{
    rt_model *md = &tr->model;
    const rt_config *c = &md->cfg;
    double s = 0;
    for (long i = 0; i < c->eval_batches; i++) {
        data_batch_slice(tr->data, 1, c->seed, i, tr->sample0, c->B, c->L, tr->tok, tr->tgt);
        fsmoe_status st = model_forward(md, tr->tok, tr->tgt, 0, 0, err);
        if (st != FSMOE_OK)
            return st;
        s += md->ce;
    }
    *val_ce = s / (double)(c->eval_batches > 0 ? c->eval_batches : 1);
    return FSMOE_OK;
}
