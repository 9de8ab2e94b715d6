/* Implements: AdamW, the learning-rate schedule and gradient clipping (adamw.h). */
#include "adamw.h"

#include <math.h>
#include <string.h>

fsmoe_status adamw_init(rt_adamw *o, const rt_params *p, rt_backend *be, fsmoe_error *err)
{
    memset(o, 0, sizeof(*o));
    size_t bytes = (size_t)p->total * sizeof(real);
    o->m = rt_alloc(be, RT_MEM_OPTIMIZER, bytes);
    o->v = rt_alloc(be, RT_MEM_OPTIMIZER, bytes);
    if (!o->m || !o->v)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "AdamW: cannot allocate %zu bytes of state",
                          2 * bytes);
    return FSMOE_OK;
}

void adamw_free(rt_adamw *o, rt_backend *be)
{
    if (be) {
        if (o->m)
            rt_free(be, o->m);
        if (o->v)
            rt_free(be, o->v);
    }
    memset(o, 0, sizeof(*o));
}

long config_warmup(const rt_config *c)
{
    if (c->warmup >= 0)
        return c->warmup;
    long w = c->steps / 10;
    return w > 100 ? 100 : w;
}

double lr_at(const rt_config *c, long s)
{
    long w = config_warmup(c);
    if (s < w)
        return c->lr * (double)(s + 1) / (double)w;
    long rest = c->steps - w;
    double prog = rest > 1 ? (double)(s - w) / (double)(rest - 1) : 1.0;
    if (prog > 1)
        prog = 1;
    return c->lr_min + 0.5 * (c->lr - c->lr_min) * (1.0 + cos(3.141592653589793 * prog));
}

void adamw_step(rt_adamw *o, rt_backend *be, rt_params *p, const rt_config *c, double lr,
                double gscale)
{
    o->t++;
    double bc1 = 1.0 - pow(c->beta1, (double)o->t), bc2 = 1.0 - pow(c->beta2, (double)o->t);
    for (int i = 0; i < p->n; i++) {
        const rt_param *t = &p->p[i];
        double wd = t->ndim >= 2 ? c->wd : 0.0;
        be->adamw(be, NULL, p->w + t->offset, p->g + t->offset, o->m + t->offset,
                  o->v + t->offset, t->numel, (real)gscale, (real)lr, (real)c->beta1,
                  (real)c->beta2,
                  (real)c->eps, (real)wd, (real)bc1, (real)bc2);
    }
}
