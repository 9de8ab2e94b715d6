/* Implements: the resolved configuration of a training run: the model file's architecture and
 * training shape (libfsmoe/model.h), plus the runtime's own hyper-parameters (CLI flags with
 * the defaults below), validated together and printed once as a table. */
#ifndef RT_CONFIG_H
#define RT_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "gate.h"
#include "model.h" /* libfsmoe: the model file */
#include "names.h"
#include "order.h"

typedef struct {
    /* architecture */
    char name[64];
    long V, M, H, heads, layers, L, B, E;
    long kv_heads; /* key/value heads (grouped-query attention); 0 = heads */
    int k;
    int expert; /* 0 GPT, 1 SwiGLU */
    double f;   /* 0 = no dropping */
    rt_gate_kind gate;
    rt_order_kind order;
    int moe_every, moe_first;
    /* MoE hyper-parameters */
    double gate_noise, aux_coef, xmoe_tau;
    long softmoe_slots;
    int r; /* chunks per MoE layer (the plan's r; 1 = unpipelined) */
    /* 1: no streams — compute and communication run one after the other on the caller, in
     * issue order (what overlap buys is the difference; the results are identical) */
    int serial;
    /* optimisation */
    long steps, warmup;
    double lr, lr_min, wd, beta1, beta2, eps, clip, init_std;
    uint64_t seed;
    /* evaluation and checkpoints */
    long eval_every, eval_batches, save_every;
} rt_config;

/* {name, value} tables of the gates, orders and experts (libfsmoe/names.h), as spelled in
 * model files and flags. */
extern const fsmoe_name config_gate_names[], config_order_names[], config_expert_names[];

/* Defaults for everything the model file does not set. */
void config_defaults(rt_config *c);
/* Takes architecture and training shape from a loaded model file. `path` names it in errors. */
fsmoe_status config_from_model(rt_config *c, const fsmoe_model *m, const char *path,
                               fsmoe_error *err);
/* Where the values of a configuration came from, for messages: the model file, and for each
 * field a command-line flag overrides, that flag ("--batch"); NULL where the flag was not
 * given (the value is the model file's, or a default). */
typedef struct {
    const char *model_path;
    const char *B, *L, *E, *k, *f, *gate, *order, *expert, *r, *steps;
} rt_config_origin;

/* Checks combinations (divisibility, supported gate/order pairs, ...). A failure names where
 * the offending value came from: the flag, or the model file's field at file:line:col (found
 * again in the file), or the model file alone for a default. */
fsmoe_status config_check(const rt_config *c, const rt_config_origin *o, fsmoe_error *err);
/* config_check without an origin (the message names the field only). */
fsmoe_status config_validate(const rt_config *c, fsmoe_error *err);
int config_is_moe_block(const rt_config *c, long b);
void config_print(const rt_config *c, FILE *f, const char *backend, const char *data,
                  long param_count);

#endif
