/* Implements: the optimiser: AdamW (Loshchilov & Hutter; decoupled weight decay on matrices
 * only, not on norms and biases), linear warm-up then cosine decay of the learning rate, and
 * gradient clipping by global L2 norm. */
#ifndef RT_ADAMW_H
#define RT_ADAMW_H

#include "backend.h"
#include "config.h"
#include "params.h"

typedef struct {
    real *m, *v; /* backend, params.total each */
    long t;      /* updates done */
} rt_adamw;

fsmoe_status adamw_init(rt_adamw *o, const rt_params *p, rt_backend *be, fsmoe_error *err);
void adamw_free(rt_adamw *o, rt_backend *be);
/* Warm-up steps: cfg->warmup, or min(100, steps/10) when it is negative. */
long config_warmup(const rt_config *c);
/* Learning rate of 0-based step s. */
double lr_at(const rt_config *c, long s);
/* One update with learning rate lr and the gradients scaled by gscale (clipping's factor from
 * model_grad_norm, whose norm is global over the ranks; 1 without clipping). The gradients are
 * consumed: zero afterwards, ready for the next step's accumulation. */
void adamw_step(rt_adamw *o, rt_backend *be, rt_params *p, const rt_config *c, double lr,
                double gscale);

#endif
