/* Implements: the model schema (models/<name>.yaml, design.md §11) and its loader.
 * The loader validates everything it reads (see yaml_read.h for the message format). */
#ifndef FSMOE_MODEL_H
#define FSMOE_MODEL_H

#include <stddef.h>

#include "memory.h"
#include "parallel.h"
#include "status.h"

#define FSMOE_MODEL_VERSION 1

typedef enum { FSMOE_EXPERT_GPT = 0, FSMOE_EXPERT_SWIGLU } fsmoe_expert_kind;

typedef struct {
    char name[64];
    char source[256];
    /* architecture */
    long M;        /* hidden size */
    long H;        /* expert (and dense FFN) hidden size */
    long heads;
    long kv_heads; /* = heads unless grouped-query attention */
    long layers;   /* transformer blocks */
    long vocab;
    /* MoE */
    long E;              /* experts per MoE layer; resolved to ep when experts_is_ep */
    int experts_is_ep;   /* the file said `experts: ep` */
    int k;               /* experts per token */
    fsmoe_expert_kind expert;
    int moe_every;       /* block b is MoE iff b >= moe_first && (b - moe_first) % moe_every == 0 */
    int moe_first;
    double f;            /* capacity factor; 0 = none (no dropping) */
    /* dispatch: how the Dispatch/Combine AllToAll runs (design.md §10): `nccl` the flat
     * AllToAll over the group, `2dh` the hierarchical one (libfsmoe/a2a_2dh.h) where the group is
     * hierarchical, `auto` the planner's choice per layer (plan.h a2a_algorithm: nccl or 2dh),
     * `1dh` Hetu's — a name the schema keeps (design.md lists it) but nothing implements:
     * fsmoe-plan refuses it at this field. */
    char gate[24], order[16], dispatch[16];
    /* training shape the plan is made for */
    long B;              /* samples per GPU */
    long L;              /* tokens per sample */
    int bytes_per_element;
    /* memory savings the memory model weighs (libfsmoe/memory.h; fsmoe-run has neither):
     * training.zero_stage 0..3 (default 0), training.recompute none|selective|full */
    int zero_stage;
    int recompute; /* fsmoe_recompute */
    /* optional default layout; has_parallel = 0 when the file has none */
    int has_parallel;
    fsmoe_parallel parallel;
    /* where the fields that later checks combine were read (fsmoe_model_resolve names them) */
    struct {
        fsmoe_mark experts, top_k, capacity_factor, dispatch;
    } at;
} fsmoe_model;

/* The memory model's view of m on layout par (memory.h): its shape, batch, dtype, ZeRO stage
 * and recomputation. */
void fsmoe_model_mem_shape(const fsmoe_model *m, const fsmoe_parallel *par,
                           fsmoe_mem_shape *out);

/* Loads and validates path. On failure err->msg names file:line:col, the field and what was
 * expected; the status is FSMOE_ERR_IO, _PARSE, _SCHEMA or _VALUE. */
fsmoe_status fsmoe_model_load(const char *path, fsmoe_model *out, fsmoe_error *err);
/* The same on a document in memory; `name` stands for the path in messages. */
fsmoe_status fsmoe_model_parse(const char *name, const char *text, size_t len, fsmoe_model *out,
                               fsmoe_error *err);

/* Applies a resolved layout p (the model's own, the cluster's common one or command-line
 * overrides): checks p with fsmoe_parallel_validate, sets E = ep when experts_is_ep, and checks
 * E divisible by ep, top_k <= E and capacity k·f·B·L/E >= 1 token. `where` says where the layout
 * comes from (e.g. "command line"): it prefixes the layout's own messages; a failure that
 * involves a model field is placed at that field's file:line:col and names `where` as the
 * layout's origin. Call it after any override of B, L, f. */
fsmoe_status fsmoe_model_resolve(fsmoe_model *m, const fsmoe_parallel *p, const char *where,
                                 fsmoe_error *err);

/* Number of MoE blocks and whether block b is one. */
int fsmoe_model_is_moe_block(const fsmoe_model *m, long b);
long fsmoe_model_moe_count(const fsmoe_model *m);

const char *fsmoe_expert_name(fsmoe_expert_kind k); /* "gpt", "swiglu" */
int fsmoe_expert_gemms(fsmoe_expert_kind k);        /* 2 or 3 */

#endif
