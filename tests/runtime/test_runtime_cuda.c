/* gpu suite: the cuda backend against the host backend on the same tiny MoE model and batch:
 * loss and every gradient agree to fp32 tolerance, and 5 training steps give the same losses.
 * Exits 77 (skipped) when no CUDA device is usable. */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "adamw.h"
#include "backend.h"
#include "transformer.h"

static int run(const char *backend, const rt_config *c, const int *tok, const int *tgt,
               double *losses, float **grads, long *n)
{
    rt_backend *be = NULL;
    fsmoe_error err = {0};
    if (rt_backend_create(backend, 1, &be, &err) != FSMOE_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 77;
    }
    rt_model md;
    rt_adamw opt;
    if (model_init(&md, c, be, &err) != FSMOE_OK || adamw_init(&opt, &md.params, be, &err))
        return fprintf(stderr, "%s\n", err.msg), 1;
    *n = md.params.total;
    *grads = malloc((size_t)*n * sizeof(float));
    for (int s = 0; s < 5; s++) {
        model_zero_grad(&md);
        if (model_forward(&md, tok, tgt, 1, s, &err) || model_backward(&md, &err))
            return fprintf(stderr, "%s\n", err.msg), 1;
        if (s == 0) {
            be->copy(be, NULL, *grads, md.params.g, (size_t)*n * sizeof(float), RT_D2H);
            be->stream_sync(be, NULL);
        }
        double norm = 0, gscale = 1;
        if (model_grad_norm(&md, c->clip, &norm, &gscale, &err) != FSMOE_OK)
            return fprintf(stderr, "%s\n", err.msg), 1;
        adamw_step(&opt, be, &md.params, c, lr_at(c, s), gscale);
        losses[s] = md.loss;
    }
    adamw_free(&opt, be);
    model_free(&md);
    rt_backend_destroy(&be);
    return 0;
}

int main(void)
{
    if (!rt_backend_have_cuda()) {
        fprintf(stderr, "built without the cuda backend\n");
        return 77;
    }
    int rc = 0;
    for (int variant = 0; variant < 2; variant++) {
        rt_config c;
        config_defaults(&c);
        c.V = 64, c.M = 32, c.H = 64, c.heads = 4, c.layers = 2, c.L = 16, c.B = 4, c.E = 4;
        c.k = 2, c.f = 1.0, c.moe_first = 1, c.steps = 5, c.warmup = 1, c.init_std = 0.1;
        c.expert = variant, c.order = variant ? RT_ORDER_GSHARD : RT_ORDER_TUTEL, c.r = 2;
        int tok[64], tgt[64];
        for (int i = 0; i < 64; i++)
            tok[i] = (i * 7 + 3) % 64, tgt[i] = (i * 11 + 5) % 64;
        double lh[5], lc[5];
        float *gh, *gc;
        long n;
        int r = run("cuda", &c, tok, tgt, lc, &gc, &n);
        if (r)
            return r;
        if (run("host", &c, tok, tgt, lh, &gh, &n))
            return 1;
        double scale = 0;
        long wrong = 0;
        for (long i = 0; i < n; i++)
            scale = fmax(scale, fabs(gh[i]));
        for (long i = 0; i < n; i++)
            wrong += fabs(gh[i] - gc[i]) > 1e-6 + 1e-3 * scale;
        printf("variant %d: gradients #wrong %ld of %ld\n", variant, wrong, n);
        for (int s = 0; s < 5; s++) {
            printf("  step %d loss host %.6f cuda %.6f\n", s + 1, lh[s], lc[s]);
            if (fabs(lh[s] - lc[s]) > 1e-4 * fmax(1, fabs(lh[s])))
                wrong++;
        }
        rc |= wrong != 0;
        free(gh), free(gc);
    }
    printf(rc ? "FAILED\n" : "OK\n");
    return rc;
}
