/* Implements: the runtime side of the plan (design.md §9, §10.1): a plan is followed only when it
 * was made for this run — this model file, element size, rank layout, batch slice, capacity
 * mode and AllToAll split — and fsmoe-run refuses any other plan, naming the field as it is
 * written in the plan file (`plans/x.yaml: parallel.world: the plan has 4, fsmoe-run runs on 2
 * ranks`). What the run takes from an accepted plan: the per-MoE-layer pipeline degree r of
 * each phase and the predicted iteration time.
 *
 * fsmoe-run runs data parallelism over all ranks and expert parallelism over EP groups
 * (mp = esp = pp = 1, runtime/layout.h); a plan with model, expert-sharding or pipeline
 * parallelism is refused as not supported yet. Relies on libfsmoe/plan.h, layout.h, config.h. */
#ifndef RT_PLAN_CHECK_H
#define RT_PLAN_CHECK_H

#include "config.h"
#include "layout.h"
#include "plan.h" /* libfsmoe */

/* What a run keeps of an accepted plan; arrays are indexed by MoE layer (forward order). */
typedef struct {
    int n_moe;          /* MoE layers, = the plan's layers */
    int *block;         /* (n_moe) the transformer block each sits in (owned) */
    int *r_fwd, *r_bwd; /* (n_moe) pipeline degrees, 1..RT_MOE_MAX_CHUNKS (owned) */
    double iteration_s; /* the plan's predicted iteration time on its cluster profile */
    char cluster[64];   /* the profile's name */
} plan_check_result;

/* Checks `plan` (read from plan_path, which names it in messages) against a run of the model
 * `c` on layout `lay`. model_sha256 is the SHA-256 (hex) of the model file the run loaded, or
 * NULL to skip that check; lay->gpus_per_node <= 0 means unknown (not checked). The element
 * size is this build's (sizeof(real)), the AllToAll split the runtime's (alltoallv). On a
 * mismatch returns FSMOE_ERR_VALUE with one message; out is then empty. */
fsmoe_status plan_check(const char *plan_path, const fsmoe_plan *plan, const char *model_sha256,
                        const rt_config *c, const rt_layout *lay, plan_check_result *out,
                        fsmoe_error *err);

/* What fsmoe-run does with --plan: loads plan_path once, hashes model_path (NULL: no checksum
 * check) and checks it as above for rank `rank` of `world` with `gpus_per_node` ranks on each
 * node (0: unknown, not compared) and the group sizes *mp, *ep, *esp — 0 takes the plan's, and
 * each is set to it. A plan's own layout is valid (its reader checks that ep divides world and the
 * experts), so a plan for another world size is reported as parallel.world. A plan file that
 * does not read fails with fsmoe_plan_load's status and message. */
fsmoe_status plan_check_file(const char *plan_path, const char *model_path, const rt_config *c,
                             int world, int rank, int gpus_per_node, int *mp, int *ep,
                             int *esp, plan_check_result *out, fsmoe_error *err);

void plan_check_result_free(plan_check_result *r); /* safe on a zeroed or freed result */

#endif
