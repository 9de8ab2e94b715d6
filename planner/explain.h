/* Implements: `fsmoe-plan explain PLAN` — a readable account of a plan (design.md §4–§9): per MoE
 * layer the schedule (§6), AllToAll strategy (§7), forward/backward pipeline degree with the
 * binding case and the Q1–Q7 conditions (§4), the gradient partition (§5), then the predicted
 * iteration against each baseline. Runs of identical layers are collapsed. */
#ifndef PLAN_EXPLAIN_H
#define PLAN_EXPLAIN_H

#include <stdio.h>

#include "plan.h"

/* What FSMoE §4's binding case means, in words ("compute bound", ...); "?" outside 1..4. */
const char *explain_case_words(int binding_case);

/* Human units: "12.3 µs", "4.56 ms", "1.234 s" / "512 B", "12.0 KiB", "3.5 MiB", "1.25 GiB". */
void explain_time(double seconds, char *buf, size_t len);
void explain_bytes(double bytes, char *buf, size_t len);

/* Prints the explanation of p to out. `source` names the plan file in the heading (may be NULL). */
void explain_plan(const fsmoe_plan *p, const char *source, FILE *out);

#endif
