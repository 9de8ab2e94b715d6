/* Implements: MoNTA's AllToAll strategies O1/O2/O3 with chunk search (MoNTA §4, design.md §7).
 *
 * I bytes per AllToAll, t-way tensor parallelism, e expert-parallel nodes. Times come from the
 * profile: inter-node AllToAll over e ranks, intra-node AllGather over t ranks, device copy;
 * each evaluated by interpolating the measured points (MoNTA's efficiency curves r(n)) when the
 * entry has them, else by the fitted line. */
#ifndef FSMOE_MONTA_A2A_H
#define FSMOE_MONTA_A2A_H

#include "cost.h"
#include "plan.h"
#include "workload.h"

typedef struct {
    double I;          /* bytes per AllToAll (per GPU, before dropping the t duplicates) */
    int t, e;
    double I_minimal;  /* smallest chunk message, bytes */
    const fsmoe_cost_entry *a2a;  /* inter-node AllToAll over e ranks */
    const fsmoe_cost_entry *ag;   /* intra-node AllGather over t ranks */
    const fsmoe_cost_entry *copy; /* D2D copy; NULL = free */
    /* Costs MoNTA's formulas leave out (0 = the paper's model, what monta_problem_init sets):
     * chunk_sync_s is paid by every chunk collective of O2/O3 and by O3's copy (a collective
     * issued behind an event from another stream starts when its slowest rank gets there);
     * o3_stall_s: in O3 the copy of chunk j holds the AllGather of chunk j+1 back for
     * min(copy, o3_stall_s) (both are load/store kernels on the same SMs and HBM). */
    double chunk_sync_s, o3_stall_s;
} monta_problem;

typedef struct {
    double t_base, t_o1, t_o2, t_o3;
    int n_o2, n_o3;                /* chosen chunk counts */
    fsmoe_a2a_strategy best;       /* smallest of O1..O3 (base only when t = 1) */
    int chunks;                    /* of the best */
} monta_result;

/* Component times (exposed for tests against MoNTA Table 8). */
double monta_time_a2a(const monta_problem *p, double bytes); /* AllToAll of a bytes buffer */
double monta_time_ag(const monta_problem *p, double bytes);  /* AllGather of bytes output */
double monta_time_copy(const monta_problem *p, double bytes);

/* Default smallest chunk message of the chunk search: below about 1 MB MoNTA's measured link
 * efficiencies fall steeply and the fitted lines are least trustworthy. */
#define MONTA_DEFAULT_I_MINIMAL 1e6

void monta_solve(const monta_problem *p, monta_result *out);

/* Whether MoNTA's layer describes an execution on the layout: it gathers the MP group's tokens
 * back after its split AllToAll so that each member computes its slice of the same experts,
 * which needs the MP group to slice the experts (mp = esp, MoNTA's and Megatron's expert tensor
 * parallelism). With mp != esp the MP members hold other experts or whole ones (parallel.h's
 * numbering). */
int monta_layout_ok(const fsmoe_parallel *par);

/* Storage for entries made from derived lines (a monta_problem points at entries). */
typedef struct {
    fsmoe_cost_entry a2a, ag, copy;
} monta_entries;

/* MoNTA's problem for one MoE layer of shape s under par, the one definition every caller uses:
 * I = k·f·B·L·M·b (the dispatch AllToAll before the t tensor-parallel duplicates are dropped;
 * 0 when N_EP = 1: there is no AllToAll),
 * t = N_MP, e = N_EP, AllToAll on EP's tier, AllGather on MP's tier, the device copy if the
 * profile has one, I_minimal = MONTA_DEFAULT_I_MINIMAL. Measured entries are used with their
 * points; a derived line becomes a line-only entry kept in *store. */
void monta_problem_init(monta_problem *mp, const workload_shape *s, const fsmoe_parallel *par,
                        const workload_lines *w, monta_entries *store);

/* The two costs above for MoNTA's 2 × 8 A800, calibrated on the paper's own measurements (MoNTA
 * §6, Fig. 14, every size in 4 chunks, I = 256 MB per 8K tokens) — no profile field holds them
 * yet. On clusters/monta-a800.yaml: O1 ahead of O2 at 8K needs sync ≥ 75 µs, O2 ahead of O1 at
 * 32K needs sync ≤ 330 µs; O2 ahead of O3 up to 128K needs stall > 0.63 ms, O3 ahead of O2 at
 * 256K stall < 1.5 ms. The paper names both causes (AllGather and D2D copy contending for
 * memory and stalling each other's kernels; fixed per-operation latency and ranks that reach a
 * chunk at different times); tests/test_monta.c checks the four choices and each edge. */
#define MONTA_A800_CHUNK_SYNC_S 100e-6
#define MONTA_A800_O3_STALL_S 1.0e-3

/* One training iteration of a model whose every MoE layer's AllToAll is one strategy, as
 * MoNTA's end-to-end run plays it (DeepSpeed's sequential layer, MoNTA §6): per MoE block
 * forward attention, dispatch, expert, the tensor-parallel AllReduce of the expert output,
 * combine; backward the same with the backward times; the DP Gradient-AllReduce after the
 * backward. Only the two AllToAlls of each phase differ between strategies. */
typedef struct {
    double iteration_s[4];   /* by fsmoe_a2a_strategy: base, O1, O2, O3 */
    double a2a_s[4];         /* one AllToAll of I bytes by that strategy */
    int chunks[4];           /* 1 for base and O1 */
    double gain[4];          /* 1 − iteration / base iteration */
    double a2a_share[4];     /* share of that iteration spent in the AllToAlls */
    double other_s;          /* the iteration without its AllToAlls (the same for all four) */
    double I;                /* bytes per AllToAll */
    long moe_layers;
    fsmoe_a2a_strategy best; /* the fastest iteration */
} monta_e2e;

/* m resolved to par (fsmoe_model_resolve), c the profile read from cluster_path; chunk_sync_s
 * and o3_stall_s as in monta_problem. */
fsmoe_status monta_end_to_end(const fsmoe_model *m, const fsmoe_parallel *par,
                              const fsmoe_cluster *c, const char *cluster_path,
                              double chunk_sync_s, double o3_stall_s, monta_e2e *out,
                              fsmoe_error *err);

/* MoNTA's end-to-end configuration (MoNTA §6, Table 7): models/llama-2x70b-moe.yaml (2×70B,
 * 8K tokens, t = 8, e = 2, dp = 2) with capacity factor 1 — E = k = 2, every token visits both
 * experts, so nothing is padded and I = k·B·L·M·b = 268 MB, the paper's "256 M" (Table 8) —
 * on clusters/monta-a800.yaml with the A800 costs above (0 for the paper's own formulas when
 * paper_formulas is set). root: the source tree (NULL = "."). */
fsmoe_status monta_end_to_end_paper(const char *root, int paper_formulas, monta_e2e *out,
                                    fsmoe_error *err);

#endif
