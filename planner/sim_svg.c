/* Implements: the SVG Gantt chart of a simulated iteration (sim_out.h; the layout of FSMoE
 * Fig. 3/4: one row per resource, time to the right) and the atomic writer both outputs use.
 * Relies on: sim.h results (start/end per task). */
#include "atomic_file.h"
#include "sim_out.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const colours[FSMOE_TASK_COUNT] = {
    "#8da0cb", /* attention */
    "#a6d854", /* ffn */
    "#b3b3b3", /* gate */
    "#66c2a5", /* expert */
    "#fc8d62", /* alltoall */
    "#e78ac3", /* allgather */
    "#ffd92f", /* reducescatter */
    "#e5c494", /* esp-allreduce */
    "#bc80bd", /* mp-allreduce */
    "#80b1d3", /* saa */
    "#d9d9d9", /* copy */
    "#e41a1c", /* grad-allreduce */
    "#ccebc5", /* elementwise */
    "#fdb462", /* head */
    "#8dd3c7", /* optimizer */
};

const char *sim_out_colour(fsmoe_task_kind k)
{
    return (unsigned)k < FSMOE_TASK_COUNT ? colours[k] : "#000000";
}

int sim_out_shown(const sim *s, int r)
{
    return strcmp(s->res[r].name, "sync") != 0 && s->res[r].n_tasks > 0;
}

static const sim *sort_sim; /* qsort has no context argument */

static int by_start(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    double x = sort_sim->tasks[i].start_s, y = sort_sim->tasks[j].start_s;
    return x < y ? -1 : x > y ? 1 : (i > j) - (i < j);
}

int sim_out_lanes(const sim *s, int *lane, int *lanes)
{
    int n = s->n_tasks;
    int *order = malloc((size_t)(n > 0 ? n : 1) * sizeof *order);
    double *lane_end = malloc((size_t)(n > 0 ? n : 1) * sizeof *lane_end * (size_t)s->n_res);
    if (!order || !lane_end) {
        free(order);
        free(lane_end);
        return 0;
    }
    for (int i = 0; i < n; i++)
        order[i] = i;
    sort_sim = s;
    qsort(order, (size_t)n, sizeof *order, by_start);
    for (int r = 0; r < s->n_res; r++)
        lanes[r] = 0;
    for (int o = 0; o < n; o++) {
        int i = order[o];
        int r = s->tasks[i].resource;
        double *ends = lane_end + (size_t)r * (size_t)n;
        int l = 0;
        while (l < lanes[r] && ends[l] > s->tasks[i].start_s + 1e-15)
            l++;
        if (l == lanes[r])
            lanes[r]++;
        ends[l] = s->tasks[i].end_s;
        lane[i] = l;
    }
    free(order);
    free(lane_end);
    return 1;
}

static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* A "nice" tick step (1, 2 or 5 × 10^k) giving about 10 ticks over span. */
static double tick_step(double span)
{
    double raw = span / 10.0;
    double p = pow(10.0, floor(log10(raw)));
    double m = raw / p;
    return (m < 1.5 ? 1.0 : m < 3.5 ? 2.0 : m < 7.5 ? 5.0 : 10.0) * p;
}

fsmoe_status sim_write_svg(const sim *s, const char *title, double from_s, double to_s,
                           const char *path, fsmoe_error *err)
{
    int *lane = malloc((size_t)(s->n_tasks > 0 ? s->n_tasks : 1) * sizeof *lane);
    int *lanes = malloc((size_t)(s->n_res > 0 ? s->n_res : 1) * sizeof *lanes);
    if (!lane || !lanes || !sim_out_lanes(s, lane, lanes)) {
        free(lane);
        free(lanes);
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "%s: out of memory drawing the chart", path);
    }
    const double left = 150.0, width = 1100.0, lane_h = 18.0, top = 50.0, gap = 10.0;
    double row_y[64];
    double y = top;
    for (int r = 0; r < s->n_res && r < 64; r++) {
        row_y[r] = y;
        if (sim_out_shown(s, r))
            y += lanes[r] * lane_h + gap;
    }
    double axis_y = y + 5.0;
    double legend_y = axis_y + 40.0;
    double height = legend_y + 30.0;
    /* The drawn window [t0, t1]: the whole iteration unless the caller zooms in. */
    double t0 = from_s > 0.0 ? from_s : 0.0;
    double t1 = to_s > t0 ? to_s : s->makespan_s;
    if (t1 > s->makespan_s && s->makespan_s > t0)
        t1 = s->makespan_s;
    double span = t1 > t0 ? t1 - t0 : 1.0;
    double scale = width / span;
    fsmoe_atomic_file af;
    if (fsmoe_atomic_open(&af, path, err) != FSMOE_OK) {
        free(lane);
        free(lanes);
        return err ? err->status : FSMOE_ERR_IO;
    }
    FILE *f = af.f;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "font-family=\"sans-serif\" font-size=\"11\">\n",
            left + width + 30.0, height);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"10\" y=\"22\" font-size=\"14\">");
    xml_text(f, title);
    fprintf(f, " — iteration %.3f ms", s->makespan_s * 1e3);
    if (t0 > 0.0 || t1 < s->makespan_s)
        fprintf(f, " (shown: %.3f–%.3f ms)", t0 * 1e3, t1 * 1e3);
    fprintf(f, "</text>\n");
    for (int r = 0; r < s->n_res && r < 64; r++) {
        if (!sim_out_shown(s, r))
            continue;
        double h = lanes[r] * lane_h;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#f4f4f4\"/>\n",
                left, row_y[r], width, h);
        fprintf(f, "<text x=\"10\" y=\"%.1f\">", row_y[r] + h / 2.0 + 4.0);
        xml_text(f, s->res[r].name);
        double whole = s->makespan_s > 0.0 ? s->makespan_s : 1.0;
        fprintf(f, " (%.0f%%)</text>\n", 100.0 * s->res[r].busy_s / whole);
    }
    char lb[64];
    for (int i = 0; i < s->n_tasks; i++) {
        const sim_task *t = &s->tasks[i];
        int r = t->resource;
        if (r >= 64 || !sim_out_shown(s, r))
            continue;
        if (t->end_s < t0 || t->start_s > t1)
            continue;
        double a = t->start_s > t0 ? t->start_s : t0, b = t->end_s < t1 ? t->end_s : t1;
        double x = left + (a - t0) * scale, w = (b - a) * scale;
        /* Outlines only where a box is wide enough to show its colour inside them. */
        fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\"%s><title>",
                x, row_y[r] + lane[i] * lane_h + 1.0, w > 0.2 ? w : 0.2, lane_h - 2.0,
                sim_out_colour(t->kind), w > 4.0 ? " stroke=\"#333\" stroke-width=\"0.3\"" : "");
        xml_text(f, sim_task_label(s, i, lb, sizeof lb));
        fprintf(f, ": %.4f–%.4f ms</title></rect>\n", t->start_s * 1e3, t->end_s * 1e3);
    }
    /* time axis */
    double step = tick_step(span);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", left,
            axis_y, left + width, axis_y);
    for (double tt = ceil(t0 / step) * step; tt <= t1 * (1.0 + 1e-9); tt += step) {
        double x = left + (tt - t0) * scale;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n",
                x, axis_y, x, axis_y + 4.0);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", x,
                axis_y + 16.0, tt * 1e3);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">time (ms)</text>\n",
            left + width, axis_y + 30.0);
    /* legend: the kinds that occur */
    int used[FSMOE_TASK_COUNT] = {0};
    for (int i = 0; i < s->n_tasks; i++)
        if (sim_out_shown(s, s->tasks[i].resource) && s->tasks[i].end_s >= t0 &&
            s->tasks[i].start_s <= t1)
            used[s->tasks[i].kind] = 1;
    double lx = left;
    for (int k = 0; k < FSMOE_TASK_COUNT; k++) {
        if (!used[k])
            continue;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\" "
                   "stroke=\"#333\" stroke-width=\"0.3\"/>\n",
                lx, legend_y - 10.0, sim_out_colour((fsmoe_task_kind)k));
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", lx + 16.0, legend_y,
                fsmoe_task_name((fsmoe_task_kind)k));
        lx += 22.0 + 7.0 * (double)strlen(fsmoe_task_name((fsmoe_task_kind)k));
    }
    fprintf(f, "</svg>\n");
    free(lane);
    free(lanes);
    return fsmoe_atomic_commit(&af, err);
}
