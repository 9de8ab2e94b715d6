/* Implements: planning a whole model on a cluster (design.md §4–§9): per MoE layer the S1/S2
 * schedule, the AllToAll strategy, the forward and backward pipeline degrees and the gradient
 * partition, plus the predicted iteration time of the plan and of the baselines.
 * Provenance (paths, SHA-256, version, overrides) is filled by the caller. */
#ifndef FSMOE_PLAN_MODEL_H
#define FSMOE_PLAN_MODEL_H

#include "cluster.h"
#include "model.h"
#include "parallel.h"
#include "plan.h"
#include "status.h"

typedef enum {
    PLAN_METHOD_AUTO = 0, /* = fsmoe today: our solver (SLSQP on F = max f_i + integer check) */
    PLAN_METHOD_FSMOE,
    PLAN_METHOD_FSMOE_PAPER, /* FSMoE Algorithm 1 as printed */
    PLAN_METHOD_PARM,        /* r = 1, Parm's S1/S2 */
    PLAN_METHOD_MONTA,       /* r = 1, MoNTA's O1/O2/O3 */
    PLAN_METHOD_COUNT
} plan_method;

const char *plan_method_name(plan_method m); /* "auto", "fsmoe", "fsmoe-paper", "parm", "monta" */
int plan_method_from_name(const char *s);    /* -1 when unknown */

typedef struct {
    plan_method method;
} plan_options;

/* Plans `m` (whose E is already resolved against par->ep) under the layout `par` (already
 * validated). Fills everything in *out except the provenance fields. */
fsmoe_status plan_model(const fsmoe_model *m, const fsmoe_cluster *c, const char *cluster_path,
                        const fsmoe_parallel *par, const plan_options *opt, fsmoe_plan *out,
                        fsmoe_error *err);

#endif
