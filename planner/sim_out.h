/* Implements: the simulator's outputs: a Gantt chart in SVG (one row per resource,
 * concurrent transfers on a link stacked in lanes, colours per operation kind, legend, time
 * axis — the look of FSMoE Fig. 3/4) and Chrome trace-event JSON that Perfetto opens
 * ({"traceEvents":[...]} with "X" events in µs and thread_name metadata per resource lane).
 * Both are written atomically (libfsmoe/atomic_file.h). Resources named "sync" (zero-cost
 * joins) and resources that ran nothing are left out. */
#ifndef FSMOE_SIM_OUT_H
#define FSMOE_SIM_OUT_H

#include <stdio.h>

#include "sim.h"
#include "status.h"

/* Lane of every task inside its resource row (greedy interval colouring in start order):
 * lane[i] for i < s->n_tasks; returns the lane count per resource in lanes[r]. 0 on NOMEM. */
int sim_out_lanes(const sim *s, int *lane, int *lanes);

/* Colour (#rrggbb) of an operation kind. */
const char *sim_out_colour(fsmoe_task_kind k);

/* Whether resource r appears in outputs. */
int sim_out_shown(const sim *s, int r);

/* Draws [from_s, to_s] of the timeline (to_s <= from_s: up to the makespan; from_s <= 0: from
 * the start); tasks crossing the window's edges are clipped. */
fsmoe_status sim_write_svg(const sim *s, const char *title, double from_s, double to_s,
                           const char *path, fsmoe_error *err);
fsmoe_status sim_write_trace(const sim *s, const char *title, const char *path, fsmoe_error *err);

#endif
