/* Implements: the SVG figure of measured points and fitted lines (plot_svg.h). A tier measured
 * at several group sizes shows each: the widest with open circles and a solid line, the
 * narrower ones with filled dots and dashed lines, in the tier's colour. The 2DH AllToAll's
 * panel also draws the flat AllToAll's line of the same tier (grey, dotted) to compare. */
#include "plot_svg.h"

#include <math.h>
#include <stdio.h>

#include "atomic_file.h"

enum { PANEL_W = 460, PANEL_H = 350, MARGIN_L = 64, MARGIN_R = 16, MARGIN_T = 34, MARGIN_B = 126,
       COLS = 2 };

static const char *const tier_colour[FSMOE_TIER_COUNT] = {"#1f77b4", "#d62728", "#2ca02c",
                                                          "#333333"};

/* A "nice" step (1, 2, 5 × 10^k) giving about n intervals up to max. */
static double plot_step(double max, int n)
{
    double raw = max / n, mag = pow(10.0, floor(log10(raw))), f = raw / mag;
    return (f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0) * mag;
}

/* In the 2DH AllToAll's panel: the flat AllToAll's fit on tier t at the same group size, or
 * NULL. */
static const bench_fit *plot_flat_reference(const bench_results *res, int op, int t)
{
    const bench_fit *h = &res->fits[op][t], *flat = &res->fits[FSMOE_OP_ALLTOALL][t];
    if (op != FSMOE_OP_ALLTOALL_2DH || !h->present || !flat->present || flat->status ||
        flat->ranks != h->ranks)
        return NULL;
    return flat;
}

static void plot_panel(FILE *f, const bench_results *res, int op, int px, int py)
{
    /* Units: x in MB (GMAC for gemm), y in ms. */
    double xs = op == FSMOE_OP_GEMM ? 1e-9 : 1e-6, ys = 1e3;
    double xmax = 0.0, ymax = 0.0;
    for (int i = 0; i < res->n_rows; i++) {
        const bench_row *r = &res->rows[i];
        if ((int)r->op != op)
            continue;
        xmax = fmax(xmax, r->n * xs);
        ymax = fmax(ymax, r->seconds * ys);
    }
    for (int t = 0; t < FSMOE_TIER_COUNT; t++)
        for (int k = 0; k <= res->n_narrower[op][t]; k++) {
            const bench_fit *b = k < res->n_narrower[op][t] ? &res->narrower[op][t][k]
                                                             : &res->fits[op][t];
            if (b->present && !b->status)
                ymax = fmax(ymax, (b->fit.alpha + b->fit.beta * xmax / xs) * ys);
        }
    for (int t = 0; t < FSMOE_TIER_COUNT; t++) {
        const bench_fit *flat = plot_flat_reference(res, op, t);
        if (flat)
            ymax = fmax(ymax, (flat->fit.alpha + flat->fit.beta * xmax / xs) * ys);
    }
    if (xmax <= 0.0)
        xmax = 1.0;
    if (ymax <= 0.0)
        ymax = 1.0;
    double xstep = plot_step(xmax, 5), ystep = plot_step(ymax, 5);
    xmax = ceil(xmax / xstep) * xstep;
    ymax = ceil(ymax / ystep) * ystep;
    int x0 = px + MARGIN_L, y0 = py + PANEL_H - MARGIN_B;
    int w = PANEL_W - MARGIN_L - MARGIN_R, h = PANEL_H - MARGIN_T - MARGIN_B;
#define X(v) (x0 + (v) / xmax * w)
#define Y(v) (y0 - (v) / ymax * h)
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"15\" font-weight=\"bold\">%s</text>\n",
            px + MARGIN_L, py + 20, fsmoe_op_name(op));
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
               "stroke=\"#888\"/>\n", x0, y0 - h, w, h);
    for (double v = 0.0; v <= xmax + 1e-9 * xmax; v += xstep) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#eee\"/>\n",
                X(v), y0, X(v), y0 - h);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\">%g</text>\n",
                X(v), y0 + 13, v);
    }
    for (double v = 0.0; v <= ymax + 1e-9 * ymax; v += ystep) {
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eee\"/>\n", x0,
                Y(v), x0 + w, Y(v));
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%g</text>\n",
                x0 - 4, Y(v) + 3, v);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n",
            x0 + w / 2, y0 + 28, op == FSMOE_OP_GEMM ? "GMAC (m·n·k)" : "size (MB)");
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\" "
               "transform=\"rotate(-90 %d %d)\">time (ms)</text>\n",
            px + 16, y0 - h / 2, px + 16, y0 - h / 2);
    int legend = 0;
    for (int t = 0; t < FSMOE_TIER_COUNT; t++)
    for (int k = 0; k <= res->n_narrower[op][t]; k++) { /* each group size, narrowest first */
        int narrow = k < res->n_narrower[op][t];
        const bench_fit *b = narrow ? &res->narrower[op][t][k] : &res->fits[op][t];
        if (!b->present)
            continue;
        for (int i = 0; i < res->n_rows; i++) {
            const bench_row *r = &res->rows[i];
            if (results_row_in(r, op, t, b))
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%s\" fill=\"%s\" "
                           "stroke=\"%s\"/>\n", X(r->n * xs), Y(r->seconds * ys),
                        narrow ? "2.2" : "2.8", narrow ? tier_colour[t] : "none",
                        tier_colour[t]);
        }
        char label[160];
        if (b->status) {
            snprintf(label, sizeof label, "%s: no fit (%.120s)", fsmoe_tier_name(t), b->msg);
        } else {
            double ya = b->fit.alpha * ys, yb = (b->fit.alpha + b->fit.beta * xmax / xs) * ys;
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                       "stroke-width=\"1.5\"%s/>\n", X(0.0), Y(ya), X(xmax), Y(yb), tier_colour[t],
                    narrow ? " stroke-dasharray=\"6 4\"" : "");
            char shape[40] = "";
            if (b->shape_m)
                snprintf(shape, sizeof shape, " (shape %d:%d)", b->shape_m, b->shape_h);
            if (t == FSMOE_TIER_LOCAL)
                snprintf(label, sizeof label, op == FSMOE_OP_GEMM
                         ? "%s%s: &#945; = %.1f us, 1/&#946; = %.2f GMAC/s, r&#178; = %.5f%s"
                         : "%s%s: &#945; = %.1f us, 1/&#946; = %.3f GB/s, r&#178; = %.5f%s",
                         fsmoe_tier_name(t), shape, b->fit.alpha * 1e6,
                         b->fit.beta > 0 ? 1e-9 / b->fit.beta : INFINITY, b->fit.r2,
                         b->low_r2 ? " LOW" : "");
            else
                snprintf(label, sizeof label,
                         "%s (%d ranks): &#945; = %.1f us, 1/&#946; = %.3f GB/s, r&#178; = %.5f%s",
                         fsmoe_tier_name(t), b->ranks, b->fit.alpha * 1e6,
                         b->fit.beta > 0 ? 1e-9 / b->fit.beta : INFINITY, b->fit.r2,
                         b->low_r2 ? " LOW" : "");
        }
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"%s\">%s</text>\n", x0,
                y0 + 46 + 14 * legend, tier_colour[t], label);
        legend++;
    }
    for (int t = 0; t < FSMOE_TIER_COUNT; t++) {
        const bench_fit *b = plot_flat_reference(res, op, t);
        if (!b)
            continue;
        double ya = b->fit.alpha * ys, yb = (b->fit.alpha + b->fit.beta * xmax / xs) * ys;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999999\" "
                   "stroke-width=\"1.5\" stroke-dasharray=\"2 3\"/>\n", X(0.0), Y(ya), X(xmax),
                Y(yb));
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"#777777\">flat alltoall, "
                   "%s (%d ranks): &#945; = %.1f us, 1/&#946; = %.3f GB/s, r&#178; = %.5f</text>\n",
                x0, y0 + 46 + 14 * legend, fsmoe_tier_name(t), b->ranks, b->fit.alpha * 1e6,
                b->fit.beta > 0 ? 1e-9 / b->fit.beta : INFINITY, b->fit.r2);
        legend++;
    }
#undef X
#undef Y
}

fsmoe_status plot_svg_write(const char *path, const char *title, const bench_results *res,
                            fsmoe_error *err)
{
    int ops[FSMOE_OP_COUNT], n = 0;
    for (int op = 0; op < FSMOE_OP_COUNT; op++) {
        int any = 0;
        for (int t = 0; t < FSMOE_TIER_COUNT; t++)
            any |= res->fits[op][t].present;
        if (any)
            ops[n++] = op;
    }
    fsmoe_atomic_file af;
    fsmoe_status st = fsmoe_atomic_open(&af, path, err);
    if (st)
        return st;
    int rows = (n + COLS - 1) / COLS, W = COLS * PANEL_W, H = rows * PANEL_H + 40;
    FILE *f = af.f;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
               "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H, W, H);
    fprintf(f, "<text x=\"%d\" y=\"24\" font-size=\"17\" text-anchor=\"middle\">"
               "fsmoe-bench: measured points and fitted t = &#945; + &#946;&#183;n — ",
            W / 2);
    for (const char *p = title; *p; p++) {
        if (*p == '<')
            fputs("&lt;", f);
        else if (*p == '&')
            fputs("&amp;", f);
        else
            fputc(*p, f);
    }
    fputs("</text>\n", f);
    for (int i = 0; i < n; i++)
        plot_panel(f, res, ops[i], (i % COLS) * PANEL_W, 40 + (i / COLS) * PANEL_H);
    fputs("</svg>\n", f);
    return fsmoe_atomic_commit(&af, err);
}
