/* Implements: `fsmoe-plan diff A B` — semantic comparison of two plans (design.md §9, issue
 * "CI regression of plans"). Decisions (schedule, strategy, chunks, r, case, Q conditions,
 * layout, model shape, method) must be equal; predicted times and byte counts are equal within a
 * relative tolerance with an absolute floor (1 ns for times, 1 byte for sizes) so that zeros
 * compare sanely. Provenance (paths, SHA-256, planner version, overrides, notes) is reported but
 * only counts as a difference with `strict`. */
#ifndef PLAN_DIFF_H
#define PLAN_DIFF_H

#include <stdio.h>

#include "plan.h"

typedef struct {
    double rtol;  /* relative tolerance for floats (default 1e-6) */
    int strict;   /* provenance differences count too */
} diff_options;

#define DIFF_DEFAULT_RTOL 1e-6

/* 1 when a and b agree within rtol relative to the larger magnitude, or within abs_floor. */
int diff_close(double a, double b, double rtol, double abs_floor);

/* Prints one line per difference to out (`layers[3].backward.r: 4 -> 6`; provenance lines that do
 * not count end in "(not counted; --strict counts it)") and returns the number of counted
 * differences. out may be NULL to only count. */
int diff_plans(const fsmoe_plan *a, const fsmoe_plan *b, const diff_options *opt, FILE *out);

#endif
