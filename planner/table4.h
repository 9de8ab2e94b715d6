/* Implements: the configured-layer grid of FSMoE Table 4 (design.md §11) and the whole
 * per-configuration plan the paper times (§6 "planning took 193 ms per configuration"):
 * forward and backward pipeline degree, Parm's S1/S2 choice and MoNTA's O1/O2/O3 choice.
 *
 * Grid: B ∈ {1,2,4}, heads ∈ {8,16,32}, L ∈ {512,1024,2048} (Testbed B: {256,512,1024}),
 * M ∈ {1024,2048,4096}, H/M ∈ {2,3,4}, f ∈ {1.2, 2.4, none}, expert ∈ {GPT FFN, SwiGLU}:
 * 3^6·2 = 1458 configurations, enumerated in that order (B slowest, expert fastest).
 * Each is one MoE layer with E = N_EP experts, k = 2, kv_heads = heads, fp32 (the paper measured
 * floats), under the testbed's common layout (mp = esp = G, ep = dp = nodes). */
#ifndef FSMOE_TABLE4_H
#define FSMOE_TABLE4_H

#include "cluster.h"
#include "monta_a2a.h"
#include "parallel.h"
#include "parm_schedule.h"
#include "pipeline_degree.h"
#include "status.h"
#include "workload.h"

#define TABLE4_COUNT 1458

/* The common layout of a testbed profile (nodes × gpus_per_node from the profile). */
fsmoe_parallel table4_layout(const fsmoe_cluster *c);

/* Configuration i (0..TABLE4_COUNT-1) of testbed 'a' or 'b' (they differ in L) under layout par
 * (E = par->ep). FSMOE_ERR_VALUE for a bad testbed or index. */
fsmoe_status table4_shape(char testbed, int i, const fsmoe_parallel *par, workload_shape *out,
                          fsmoe_error *err);

typedef struct {
    workload_layer layer;
    pipeline_result fwd, bwd; /* bwd solved with t_gar = t_gar_s */
    double t_gar_s;           /* 0: nothing to all-reduce inside the MoE backward (above) */
    parm_choice parm;
    monta_result monta;
} table4_plan;

/* Everything the paper's planner decides for one configured layer. A configured layer is one
 * transformer block of FSMoE Fig. 2: attention, then the MoE layer. Its backward visits the MoE
 * layer first, when no DP gradient exists yet (the experts are sharded over EP × ESP with EDP = 1
 * in the common layout; the gate's and the attention's gradients come later), so the backward
 * problem has t_gar = 0: the Gradient-AllReduce (gate, then the attention's tensors as they
 * become ready) overlaps the attention's backward (grad_partition.h prefix window; sweep.c
 * builds the iteration). MoNTA's AllToAll is set up by monta_problem_init (I = k·f·B·L·M·b,
 * t = mp, e = ep). */
fsmoe_status table4_plan_config(const workload_shape *s, const fsmoe_parallel *par,
                                const workload_lines *w,
                                pipeline_method m, table4_plan *out, fsmoe_error *err);

#endif
