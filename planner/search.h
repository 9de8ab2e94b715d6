/* Implements: the layout search (fsmoe-plan --search): which parallel layout
 * (dp, mp, ep, esp, pp) of a world fits in each device's memory and trains fastest. Every layout
 * of the world is enumerated in a fixed order (pp, then mp, ep, esp ascending; dp =
 * world / (mp·pp)); those that break a rule are counted with the first rule they break; each
 * valid one gets the memory model's prediction per GPU (memory.h, one pipeline stage's blocks)
 * and the planner's full plan (plan_model.h) on the cluster profile; the layouts that fit are
 * ranked by the plan's simulated iteration (the discrete-event simulator of `fsmoe-plan
 * simulate`, which plays the overlaps the plan's closed forms approximate: they differ by up to
 * about 1 % on the shipped models; with pp > 1 the simulated pipeline of gpipe.h with its
 * default micro-batches; ties: less memory, then the enumeration order), so the result is
 * deterministic.
 *
 * Every candidate trains the same global batch (samples per iteration, a hyperparameter the
 * layout must not change): each DP rank's batch is global_batch / dp, and a dp that does not
 * divide it is no candidate. The model file's ZeRO stage and recomputation hold for every
 * candidate; the table says how many layouts over the limit full recomputation (and ZeRO 3)
 * would let through.
 *
 * Rules, in the order they are checked: heads and kv_heads divisible by mp (whole attention
 * heads per tensor-parallel rank), the vocabulary divisible by mp (the embedding and LM head
 * are sliced over MP), dp dividing the global batch, then the layout rules of
 * fsmoe_model_resolve (parallel.h: group sizes tiling the nodes and each stage, experts divisible
 * by ep, a capacity of at least one token), then pipeline stages of equal blocks and MoE
 * placement (gpipe_stage). A valid layout the profile cannot cost (an operation on a
 * tier it holds no line for) or the planner refuses is listed with the planner's message. */
#ifndef FSMOE_PLANNER_SEARCH_H
#define FSMOE_PLANNER_SEARCH_H

#include <stdio.h>

#include "cluster.h"
#include "memory.h"
#include "model.h"
#include "parallel.h"
#include "plan.h"
#include "plan_model.h"

typedef enum {
    SEARCH_RANKED = 0, /* fits; planned */
    SEARCH_NO_FIT,     /* planned, but needs more memory per GPU than the limit */
    SEARCH_UNPLANNED   /* valid, but the planner could not plan it (why) */
} search_state;

typedef struct {
    fsmoe_parallel par;
    int one_f_one_b; /* pp > 1: the 1F1B schedule (every pipeline layout is listed twice, as
                      * GPipe and as 1F1B: the same stage, other memory and time) */
    long B;      /* samples per DP rank */
    search_state state;
    double mem[FSMOE_MEM_CATS], mem_total; /* bytes per GPU */
    double mem_saving[2]; /* the total with full recomputation; with ZeRO stage 3 as well */
    double iteration_s; /* the plan's simulated iteration (fsmoe-plan simulate's) */
    double forward_s, backward_s, tail_s; /* the plan's phases (a pipeline's: one stage's) */
    char why[320];
} search_candidate;

typedef struct {
    search_candidate *c; /* the valid layouts, in enumeration order */
    int n, cap;
    int n_invalid;       /* layouts that broke a rule */
    int invalid_by_rule[5]; /* heads, vocabulary, global batch, layout, pipeline stages */
    int *rank;           /* indices into c of the ranked candidates, fastest first */
    int n_ranked;
    long global_batch;
    int world, gpus_per_node;
    double mem_limit;    /* bytes per GPU; 0: none */
    int recompute, zero_stage; /* the model's */
} search_result;

/* Searches the layouts of `world` ranks on nodes of `gpus_per_node` for model m (as loaded,
 * before fsmoe_model_resolve) on profile c. global_batch: samples per iteration; mem_limit:
 * bytes per GPU (0: every layout fits). Candidates that cannot be planned are kept with the
 * planner's message; only FSMOE_ERR_NOMEM (and an empty world) fail the search. */
fsmoe_status search_layouts(const fsmoe_model *m, const fsmoe_cluster *c,
                            const char *cluster_path, int world, int gpus_per_node,
                            long global_batch, double mem_limit, const plan_options *opt,
                            search_result *out, fsmoe_error *err);
void search_free(search_result *r);

/* The ranked table (the top `top` rows, each runner-up with the phase it loses most time in
 * against the best), the fastest layouts that did not fit, the unplanned ones and the rule
 * counts. */
void search_print(const search_result *r, const char *model, const char *cluster, int top,
                  FILE *f);

/* Predicted iteration time against memory per GPU, one point per planned layout (the ranked
 * ones filled, those over the limit hollow, the limit a vertical line), written atomically. */
fsmoe_status search_svg(const search_result *r, const char *title, const char *path,
                        fsmoe_error *err);

#endif
