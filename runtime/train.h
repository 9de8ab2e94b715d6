/* Implements: one training step and evaluation over a model, its optimiser and its data. */
#ifndef RT_TRAIN_H
#define RT_TRAIN_H

#include "adamw.h"
#include "data.h"
#include "transformer.h"

typedef struct {
    rt_model model;
    rt_adamw opt;
    const rt_data *data;
    long step; /* next step to run, 0-based */
    long sample0; /* this rank's first sample of each global batch */
    int *tok, *tgt;
    int grads_clear; /* the gradients are zero (AdamW cleared them): no clearing pass */
} rt_trainer;

fsmoe_status trainer_init(rt_trainer *tr, const rt_config *cfg, rt_backend *be,
                          const rt_data *data, fsmoe_error *err);
/* One rank of a multi-rank run (dist NULL: one rank): it reads its slice of each global batch
 * (runtime/layout.h); losses, norms and evaluation are global. */
fsmoe_status trainer_init_dist(rt_trainer *tr, const rt_config *cfg, rt_backend *be,
                               const rt_data *data, const struct rt_dist *dist, fsmoe_error *err);
void trainer_free(rt_trainer *tr);
/* Runs step tr->step: forward, backward, clip, AdamW. Reports loss (CE + aux) and grad norm. */
fsmoe_status trainer_step(rt_trainer *tr, double *loss, double *ce, double *gnorm,
                          fsmoe_error *err);
/* Mean cross-entropy over cfg.eval_batches validation batches (no noise, no update). */
fsmoe_status trainer_eval(rt_trainer *tr, double *val_ce, fsmoe_error *err);

#endif
