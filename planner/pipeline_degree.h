/* Implements: the pipeline degree of one MoE layer and phase (FSMoE §4, design.md §4).
 *
 * Per-chunk times t_x(r) = alpha_x + (n_x / r)·beta_x for x in {a2a, ag, rs, exp}; a workload of
 * 0 means the operation does not run (its time is 0, alpha included). f1..f4 are the four case
 * chains; the layer takes F(r) = max(f1..f4) (our fix over the paper's Algorithm 1, which
 * minimises each f_i and ignores the case conditions). */
#ifndef FSMOE_PIPELINE_DEGREE_H
#define FSMOE_PIPELINE_DEGREE_H

#include "status.h"

typedef struct {
    double a2a_alpha, a2a_beta, n_a2a; /* s, s/byte, bytes */
    double ag_alpha, ag_beta, n_ag;
    double rs_alpha, rs_beta, n_rs;
    double exp_alpha, exp_beta, n_exp; /* s, s/MAC, MACs (alpha = per-GEMM alpha × GEMMs) */
    double t_gar;                      /* Gradient-AllReduce time inside the layer, s */
    int r_max;                         /* largest allowed r (≥ 1) */
} pipeline_problem;

typedef enum {
    PIPELINE_SLSQP = 0,  /* NLopt SLSQP on the epigraph of F, then integer neighbours */
    PIPELINE_PAPER,      /* FSMoE Algorithm 1: argmin over cases of min f_i, ignoring conditions */
    PIPELINE_EXHAUSTIVE, /* F at every r = 1..r_max (the test oracle) */
} pipeline_method;

typedef struct {
    int r;
    int binding_case; /* 1..4: the f_i that equals F(r) (the largest; lowest index on ties) */
    unsigned q;       /* bit i-1 = Qi at r */
    double time_s;    /* F(r) (for PIPELINE_PAPER also F at its r, so methods compare) */
    double f[4];      /* f1..f4 at r */
} pipeline_result;

/* f_i(r) for i = 1..4 at a real r ≥ 1, and F(r) = max. */
double pipeline_case_time(const pipeline_problem *p, int i, double r);
double pipeline_F(const pipeline_problem *p, double r);
/* The bit set of Q1..Q7 at r, and the case the paper's conditions select (1..4). */
unsigned pipeline_conditions(const pipeline_problem *p, double r);
int pipeline_case_of_conditions(unsigned q);
/* Inter-node idle time of the layer when t_gar = 0 (§5 t_olp,moe), at integer r. */
double pipeline_overlappable(const pipeline_problem *p, int r);

fsmoe_status pipeline_solve(const pipeline_problem *p, pipeline_method m, pipeline_result *out,
                            fsmoe_error *err);

/* PIPELINE_SLSQP keeps one NLopt object per thread (reused across solves for speed); a thread
 * that is done planning may free it with this. Safe to call when none exists. */
void pipeline_thread_release(void);

#endif
