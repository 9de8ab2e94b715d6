/* Implements: fsmoe-run --report (report.h). */
#include "report.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "real.h"
#include "sim_schedules.h"

typedef struct {
    int phase, layer, chunk, kind;
    double pred, pred_bytes;
    double pred_sync; /* the part of pred that is the ranks' arrival skew (where they meet) */
    int pred_n;
    /* the graph's tasks of this id in which the ranks meet (planner/sim.h sim_task_meets: the
     * collectives, and the forward gate), and which occurrences they are (occ_meets[k], k <
     * pred_n in the graph's order; NULL where none meets) */
    int meets_n;
    unsigned char *occ_meets;
    double *meas, *meas_bytes; /* per compared step */
    /* where the ranks meet: per compared step and occurrence k < pred_n (in start order), its
     * time and the segment before it (collective_segment); -1 where none, or where occurrence
     * k is not a meeting (step-major) */
    double *occ_d, *occ_seg;
    int *meas_n;
} id_row;

typedef struct {
    id_row *r;
    int n, cap, steps;
} id_table;

/* An unpipelined MoE operation is chunk -1 in the graph's sequential layers and chunk 0 of 1 in
 * the executor: one id. */
static int chunk_id(int kind, int chunk)
{
    return chunk < 0 && kind != FSMOE_TASK_GRAD_AR && kind != FSMOE_TASK_ATTN &&
                   kind != FSMOE_TASK_FFN && kind != FSMOE_TASK_GATE &&
                   kind != FSMOE_TASK_ELEMWISE && kind != FSMOE_TASK_HEAD &&
                   kind != FSMOE_TASK_OPTIM
               ? 0
               : chunk;
}

static id_row *find(id_table *t, int phase, int layer, int chunk, int kind)
{
    chunk = chunk_id(kind, chunk);
    for (int i = 0; i < t->n; i++)
        if (t->r[i].phase == phase && t->r[i].layer == layer && t->r[i].chunk == chunk &&
            t->r[i].kind == kind)
            return &t->r[i];
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 64;
        id_row *r = realloc(t->r, (size_t)cap * sizeof *r);
        if (!r)
            return NULL;
        t->r = r, t->cap = cap;
    }
    id_row *w = &t->r[t->n];
    memset(w, 0, sizeof *w);
    w->phase = phase, w->layer = layer, w->chunk = chunk, w->kind = kind;
    size_t S = (size_t)(t->steps > 0 ? t->steps : 1);
    w->meas = calloc(S, sizeof(double));
    w->meas_bytes = calloc(S, sizeof(double));
    w->meas_n = calloc(S, sizeof(int));
    if (!w->meas || !w->meas_bytes || !w->meas_n) {
        free(w->meas), free(w->meas_bytes), free(w->meas_n);
        return NULL;
    }
    t->n++;
    return w;
}

static void table_free(id_table *t)
{
    for (int i = 0; i < t->n; i++)
        free(t->r[i].meas), free(t->r[i].meas_bytes), free(t->r[i].meas_n),
            free(t->r[i].occ_d), free(t->r[i].occ_seg), free(t->r[i].occ_meets);
    free(t->r);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* q-quantile of v[0..n) (sorted in place; nearest rank); NAN when n = 0. */
static double quantile(double *v, int n, double q)
{
    if (n <= 0)
        return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int i = (int)ceil(q * n) - 1;
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

/* The kinds that are one collective of a group per task (the collectives' table). */
static int collective_kind(int k)
{
    return fsmoe_task_collective((fsmoe_task_kind)k);
}

/* The kinds whose executed count the conformance line checks: the collectives and the
 * experts. */
static int conformance_kind(int k)
{
    return collective_kind(k) || k == FSMOE_TASK_EXPERT;
}

/* A graph row of the collectives' table and the skew fit: an id the graph times in which the
 * ranks meet (its collectives, its forward gate). */
static int collective_row(const id_row *r)
{
    return r->meets_n > 0;
}

/* One table line over the rows selected by sel(row, arg). */
static void line(FILE *f, const id_table *t, const char *name,
                 int (*sel)(const id_row *, int), int arg, double *ratios)
{
    double meas = 0, pred = 0;
    int n = 0, tasks = 0;
    for (int i = 0; i < t->n; i++) {
        const id_row *r = &t->r[i];
        if (!sel(r, arg))
            continue;
        pred += r->pred;
        tasks += r->pred_n;
        for (int s = 0; s < t->steps; s++) {
            meas += r->meas[s] / t->steps;
            if (r->pred > 0 && r->meas_n[s] > 0)
                ratios[n++] = r->meas[s] / r->pred;
        }
    }
    if (meas == 0 && pred == 0)
        return;
    double med = quantile(ratios, n, 0.5), p90 = quantile(ratios, n, 0.9);
    fprintf(f, "  %-16s %12.3f %12.3f", name, 1e3 * meas, 1e3 * pred);
    if (pred > 0)
        fprintf(f, " %8.2f %8.2f %8.2f %7d\n", meas / pred, med, p90, tasks);
    else
        fprintf(f, " %8s %8s %8s %7s  (not in the cost model)\n", "-", "-", "-", "-");
}

static int sel_kind(const id_row *r, int k) { return r->kind == k; }

typedef struct {
    long step;
    double t0, t1;
} span;

static int cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

/* The median over the compared steps (from s0 on, `steps` of them) of the time covered by at
 * least one traced task on any stream: the union of the step's task intervals. NAN when out of
 * memory or nothing was traced. */
static double covered_median(const rt_trace *tr, long s0, int steps)
{
    span *v = malloc((size_t)(tr->step_first > 0 ? tr->step_first : 1) * sizeof *v);
    double *u = calloc((size_t)steps, sizeof *u);
    double med = NAN;
    if (!v || !u)
        goto out;
    long n = 0;
    for (long i = 0; i < tr->step_first; i++)
        if (tr->ev[i].step >= s0 && tr->ev[i].step < s0 + steps)
            v[n++] = (span){tr->ev[i].step, tr->ev[i].t0_s, tr->ev[i].t1_s};
    qsort(v, (size_t)n, sizeof *v, cmp_span);
    for (long i = 0; i < n;) {
        long st = v[i].step;
        double a = v[i].t0, b = v[i].t1, sum = 0.0;
        for (; i < n && v[i].step == st; i++) {
            if (v[i].t0 > b) {
                sum += b - a;
                a = v[i].t0, b = v[i].t1;
            } else if (v[i].t1 > b) {
                b = v[i].t1;
            }
        }
        u[st - s0] = sum + (b - a);
    }
    med = quantile(u, steps, 0.5);
out:
    free(v);
    free(u);
    return med;
}
static int sel_layer(const id_row *r, int l) { return r->layer == l; }

/* The events of the steps from event i's step less `back` to its own: [*lo, *hi) (a trace
 * keeps each step's events together, in step order). */
static void step_range(const rt_trace *tr, long i, long back, long *lo, long *hi)
{
    long s = tr->ev[i].step, a = i, b = i + 1;
    while (a > 0 && tr->ev[a - 1].step >= s - back)
        a--;
    while (b < tr->step_first && tr->ev[b].step == s)
        b++;
    *lo = a, *hi = b;
}

/* The segment before event i of this rank's trace, one where the ranks meet: its start minus
 * the latest end of the rank's events where they meet (meets[j]) that ended by then, in its
 * step or the one before (the wall time it spent outside them before arriving;
 * scripts/trace-skew.py's definition, and the simulator's, planner/sim.h); -1 where none ended
 * before it. */
static double collective_segment(const rt_trace *tr, long i, const unsigned char *meets)
{
    double t0 = tr->ev[i].t0_s, last = -1.0;
    long lo, hi;
    step_range(tr, i, 1, &lo, &hi);
    for (long j = lo; j < hi; j++) {
        const rt_trace_event *e = &tr->ev[j];
        if (j != i && meets[j] && e->t1_s <= t0 && e->t1_s > last)
            last = e->t1_s;
    }
    return last < 0.0 ? -1.0 : t0 - last;
}

/* Event i's occurrence among this rank's events of the same task (phase, layer, chunk, kind)
 * in its step: how many of them started before it (ties: recorded before it). */
static int occurrence(const rt_trace *tr, long i)
{
    const rt_trace_event *e = &tr->ev[i];
    int k = 0;
    long lo, hi;
    step_range(tr, i, 0, &lo, &hi);
    for (long j = lo; j < hi; j++) {
        const rt_trace_event *o = &tr->ev[j];
        if (j != i && o->kind == e->kind && o->phase == e->phase &&
            o->layer == e->layer && chunk_id(o->kind, o->chunk) == chunk_id(e->kind, e->chunk) &&
            (o->t0_s < e->t0_s || (o->t0_s == e->t0_s && j < i)))
            k++;
    }
    return k;
}

void rt_report_skew_fit(const double *seg, const double *skew, int n, double *a, double *rho,
                        double *r2)
{
    double mx = 0.0, my = 0.0, sxx = 0.0, sxy = 0.0, syy = 0.0;
    for (int i = 0; i < n; i++)
        mx += seg[i] / n, my += skew[i] / n;
    for (int i = 0; i < n; i++) {
        sxx += (seg[i] - mx) * (seg[i] - mx);
        sxy += (seg[i] - mx) * (skew[i] - my);
        syy += (skew[i] - my) * (skew[i] - my);
    }
    *rho = sxx > 0.0 ? sxy / sxx : 0.0;
    *a = my - *rho * mx;
    double res = 0.0;
    for (int i = 0; i < n; i++) {
        double e = skew[i] - *a - *rho * seg[i];
        res += e * e;
    }
    *r2 = sxx > 0.0 ? (syy > 0.0 ? 1.0 - res / syy : 1.0) : 0.0;
}

void rt_report_split(const double *t, int W, double *alone, double *waiting)
{
    double lo = W > 0 ? t[0] : 0.0, sum = 0.0;
    for (int w = 0; w < W; w++) {
        lo = t[w] < lo ? t[w] : lo;
        sum += t[w];
    }
    *alone = lo;
    *waiting = W > 0 ? sum / W - lo : 0.0;
}

/* Whether every rank is to gather n values (the same graph, as many compared steps): every rank
 * calls it; *odd = the first rank whose n differs (-1: none) and its n in *odd_n, rank 0's in
 * *n0. */
static fsmoe_status ranks_agree(const rt_report_ranks *rk, long n, int *odd, long *odd_n,
                                long *n0, fsmoe_error *err)
{
    long *cnt = calloc((size_t)rk->world, sizeof(long));
    *odd = -1, *odd_n = *n0 = 0;
    if (!cnt)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "--report: out of memory");
    fsmoe_status st = rk->allgather(rk->ctx, &n, cnt, 1, err);
    for (int w = 0; w < rk->world && st == FSMOE_OK && *odd < 0; w++)
        if (cnt[w] != n)
            *odd = w, *odd_n = cnt[w];
    *n0 = cnt[0];
    free(cnt);
    return st;
}

/* The collectives on all ranks (report.h): rows [0, n_graph) of t are the graph's ids, in its
 * order on every rank; each rank's time in each collective id and step, in ns (-1: not run),
 * gathered on every rank, and split by rt_report_split; per kind the means over the ranks
 * summed over the ids, per step. */
static fsmoe_status collectives_table(FILE *f, const id_table *t, int n_graph, double sync_s,
                                      const rt_report_ranks *rk, fsmoe_error *err)
{
    const int W = rk->world, S = t->steps;
    int n_ids = 0;
    for (int i = 0; i < n_graph; i++)
        n_ids += collective_row(&t->r[i]);
    long n = (long)n_ids * S, odd_n, n0;
    long *mine = malloc((size_t)(n + 1) * sizeof(long)), *all = NULL;
    fsmoe_status st = FSMOE_OK;
    int odd;
    if (!mine)
        goto nomem;
    if ((st = ranks_agree(rk, n, &odd, &odd_n, &n0, err)) != FSMOE_OK)
        goto out;
    if (odd >= 0) {
        fprintf(f, "# collectives on all ranks: not compared (rank %d traced %ld collective "
                   "tasks, rank 0 %ld: the ranks kept different steps)\n",
                odd, odd_n, n0);
        goto out;
    }
    if (W > RT_REPORT_MAX_RANKS) {
        fprintf(f, "# collectives on all ranks: not compared on %d ranks (at most %d)\n", W,
                RT_REPORT_MAX_RANKS);
        goto out;
    }
    if (n == 0 || n > INT_MAX / W)
        goto out;
    if (!(all = malloc((size_t)(W * n) * sizeof(long))))
        goto nomem;
    long c = 0;
    for (int i = 0; i < n_graph; i++) {
        const id_row *r = &t->r[i];
        if (!collective_row(r))
            continue;
        for (int s = 0; s < S; s++, c++)
            mine[c] = r->meas_n[s] > 0 ? llround(r->meas[s] * 1e9) : -1;
    }
    if ((st = rk->allgather(rk->ctx, mine, all, (int)n, err)) != FSMOE_OK)
        goto out;
    double by_alone[FSMOE_TASK_COUNT] = {0}, by_wait[FSMOE_TASK_COUNT] = {0},
           pred[FSMOE_TASK_COUNT] = {0}, sync[FSMOE_TASK_COUNT] = {0};
    int tasks[FSMOE_TASK_COUNT] = {0}, incomplete = 0;
    c = 0;
    for (int i = 0; i < n_graph; i++) {
        const id_row *r = &t->r[i];
        if (!collective_row(r))
            continue;
        pred[r->kind] += r->pred, sync[r->kind] += r->pred_sync, tasks[r->kind] += r->meets_n;
        for (int s = 0; s < S; s++, c++) {
            double v[RT_REPORT_MAX_RANKS], alone, waiting;
            int ok = 1;
            for (int w = 0; w < W && ok; w++)
                ok = (v[w] = 1e-9 * (double)all[(long)w * n + c]) >= 0.0;
            if (!ok) {
                incomplete++;
                continue;
            }
            rt_report_split(v, W, &alone, &waiting);
            by_alone[r->kind] += alone / S;
            by_wait[r->kind] += waiting / S;
        }
    }
    fprintf(f, "# collectives on all %d ranks (and the forward gate, where the ranks meet in its "
               "small collectives), ms per step: measured (the mean over the ranks) = alone (the "
               "least time any rank spent in the task: the last to arrive waits for no one) + "
               "waiting (the ranks' mean beyond it: for the last to arrive); "
               "predicted, and the part of it that is the ranks' arrival skew (the profile's "
               "sync latency, %.3f ms on every collective, plus its growth with the time since "
               "the previous one where the profile has one)\n",
            W, 1e3 * sync_s);
    fprintf(f, "  %-16s %12s %12s %12s %12s %12s %7s\n", "collectives", "measured ms",
            "alone ms", "waiting ms", "predicted ms", "of it sync", "tasks");
    for (int k = 0; k < FSMOE_TASK_COUNT; k++)
        if (tasks[k] > 0)
            fprintf(f, "  %-16s %12.3f %12.3f %12.3f %12.3f %12.3f %7d\n",
                    fsmoe_task_name((fsmoe_task_kind)k), 1e3 * (by_alone[k] + by_wait[k]),
                    1e3 * by_alone[k], 1e3 * by_wait[k], 1e3 * pred[k], 1e3 * sync[k], tasks[k]);
    if (incomplete)
        fprintf(f, "#   %d (task, step) pairs left out: some rank did not run them\n",
                incomplete);
    goto out;
nomem:
    st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "--report: out of memory");
out:
    free(mine), free(all);
    return st;
}

const char *rt_report_calibration_suspect(const rt_report_result *res)
{
    if (!(res->step_median_s > 0.0))
        return NULL;
    if (res->step_predicted_s > 0.0 && res->step_median_s > 1.5 * res->step_predicted_s)
        return "its median step is more than 1.5x its prediction: the machine ran slower than "
               "the profile says, and a skew fitted on such a stretch describes it";
    if (res->step_p90_s > 1.5 * res->step_median_s)
        return "its p90 step is more than 1.5x its median: the machine's speed moved during "
               "the run";
    return NULL;
}

void rt_report_skew_hold(double a, double rho, double xmin, double ymean, double *c, double *r,
                         double *from)
{
    /* a profile's skew is neither negative, shrinking, nor extrapolated below the segments
     * measured: flat at the mean where the line does not grow, else the line from its shortest
     * segment on (or from where it crosses zero, if later), held at that value below it */
    *c = ymean > 0.0 ? ymean : 0.0, *r = 0.0, *from = 0.0;
    if (rho > 0.0) {
        double zero = -a / rho;
        *from = zero > xmin ? zero : xmin;
        *from = *from > 0.0 ? *from : 0.0;
        *r = rho, *c = a + rho * *from;
        *c = *c > 0.0 ? *c : 0.0; /* rounding at the zero */
    }
}

/* The ranks' arrival skew against the segment (report.h rt_report_result): every collective
 * task of the graph (id and its k-th occurrence in the step: an S1 layer's dispatch and combine
 * share an id) in every compared step, on every rank, its time and the segment before it (ns;
 * -1: not run, or no collective ended before it), gathered on every rank; per task and step the
 * ranks' waiting (rt_report_split) and their mean segment, per task the medians over the steps,
 * and the line through those points. */
static fsmoe_status skew_fit(FILE *f, const id_table *t, int n_graph, double sync_s,
                             const rt_report_ranks *rk, rt_report_result *res, fsmoe_error *err)
{
    const int W = rk->world, S = t->steps;
    long n = 0;
    int n_tasks = 0;
    for (int i = 0; i < n_graph; i++)
        if (collective_row(&t->r[i]))
            n += (long)t->r[i].pred_n * S, n_tasks += t->r[i].pred_n;
    long *mine = malloc((size_t)(2 * n + 1) * sizeof(long)), *all = NULL;
    double *sk = malloc((size_t)(S + 1) * sizeof *sk), *sg = malloc((size_t)(S + 1) * sizeof *sg);
    double *px = malloc((size_t)(n_tasks + 1) * sizeof *px);
    double *py = malloc((size_t)(n_tasks + 1) * sizeof *py);
    fsmoe_status st = FSMOE_OK;
    if (!mine || !sk || !sg || !px || !py)
        goto nomem;
    int odd;
    long odd_n, n0;
    if ((st = ranks_agree(rk, n, &odd, &odd_n, &n0, err)) != FSMOE_OK || odd >= 0 || n == 0 ||
        W > RT_REPORT_MAX_RANKS || 2 * n > INT_MAX / W) /* every rank gathers as many, or none */
        goto out;
    if (!(all = malloc((size_t)(2 * W * n) * sizeof(long))))
        goto nomem;
    long c = 0;
    for (int i = 0; i < n_graph; i++) {
        const id_row *r = &t->r[i];
        if (!collective_row(r))
            continue;
        for (long j = 0; j < (long)r->pred_n * S; j++, c++) {
            mine[2 * c] = r->occ_d[j] >= 0.0 ? llround(r->occ_d[j] * 1e9) : -1;
            mine[2 * c + 1] = r->occ_seg[j] >= 0.0 ? llround(r->occ_seg[j] * 1e9) : -1;
        }
    }
    if ((st = rk->allgather(rk->ctx, mine, all, (int)(2 * n), err)) != FSMOE_OK)
        goto out;
    int n_fit = 0;
    c = 0;
    for (int i = 0; i < n_graph; i++) {
        const id_row *r = &t->r[i];
        if (!collective_row(r))
            continue;
        for (int k = 0; k < r->pred_n; k++) {
            int m = 0;
            for (int s = 0; s < S; s++) {
                long at = c + (long)s * r->pred_n + k;
                double v[RT_REPORT_MAX_RANKS], alone, waiting, seg = 0.0;
                int ok = 1;
                for (int w = 0; w < W && ok; w++) {
                    long d = all[2 * ((long)w * n + at)], g = all[2 * ((long)w * n + at) + 1];
                    ok = d >= 0 && g >= 0;
                    v[w] = 1e-9 * (double)d;
                    seg += 1e-9 * (double)g / W;
                }
                if (!ok)
                    continue;
                rt_report_split(v, W, &alone, &waiting);
                sk[m] = waiting, sg[m++] = seg;
            }
            if (m > 0) {
                py[n_fit] = quantile(sk, m, 0.5);
                px[n_fit++] = quantile(sg, m, 0.5);
            }
        }
        c += (long)r->pred_n * S;
    }
    if (n_fit >= 2) {
        rt_report_skew_fit(px, py, n_fit, &res->skew_a_s, &res->skew_rho, &res->skew_r2);
        res->skew_tasks = n_fit;
        double mean = 0.0, gmin = px[0];
        for (int i = 0; i < n_fit; i++) {
            mean += py[i] / n_fit;
            gmin = px[i] < gmin ? px[i] : gmin;
        }
        rt_report_skew_hold(res->skew_a_s, res->skew_rho, gmin, mean, &res->cal_a_s,
                            &res->cal_rho, &res->cal_from_s);
        fprintf(f, "# arrival skew per collective task (its waiting, medians over the steps) "
                   "against the segment (the time since each rank's previous collective ended): "
                   "skew = %.3f ms + %.4f x segment (r2 %.3f over %d tasks); one constant for "
                   "all: %.3f ms; the profile's: %.3f ms; held at or above zero and from the "
                   "shortest segment on (what --calibrate writes): %.3f ms + %.4f x max(0, "
                   "segment - %.3f ms)\n",
                1e3 * res->skew_a_s, res->skew_rho, res->skew_r2, n_fit, 1e3 * mean,
                1e3 * sync_s, 1e3 * res->cal_a_s, res->cal_rho, 1e3 * res->cal_from_s);
    }
    goto out;
nomem:
    st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "--report: out of memory");
out:
    free(mine), free(all), free(sk), free(sg), free(px), free(py);
    return st;
}

fsmoe_status rt_report_write(FILE *f, const rt_trace *tr, const rt_schedule *rs, long skip,
                             const double *step_s, int n_steps, const rt_report_ranks *ranks,
                             rt_report_result *res, fsmoe_error *err)
{
    memset(res, 0, sizeof *res);
    id_table t = {0};
    /* the compared steps: the kept ones after the first `skip` */
    long first = -1, last = -1, n_kept = 0;
    for (long i = 0; i < tr->step_first; i++) {
        long s = tr->ev[i].step;
        if (first < 0 || s < first)
            first = s;
        if (s > last)
            last = s;
    }
    if (first >= 0)
        n_kept = last - first + 1;
    long s0 = first + (skip < n_kept ? skip : 0);
    t.steps = first < 0 ? 0 : (int)(last - s0 + 1);
    if (t.steps < 1)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "--report: no step was traced");
    double *ratios = NULL;
    unsigned char *ev_meets = NULL;
    fsmoe_status st = FSMOE_OK;
    /* the prediction at the routing the run met where fsmoe-run priced it (the plan prices every
     * capacity slot filled) */
    const sim *g = rs->at_routing ? &rs->routing : &rs->graph;
    const double predicted_s = rs->at_routing ? rs->routing_iteration_s : rs->iteration_s;
    for (int i = 0; i < g->n_tasks; i++) {
        const sim_task *k = &g->tasks[i];
        double d = k->end_s - k->start_s;
        if (k->resource == SIM_R_SYNC || !(d > 0.0))
            continue;
        id_row *r = find(&t, k->phase, k->layer, k->chunk, k->kind);
        if (!r)
            goto nomem;
        r->pred += d, r->pred_bytes += k->bytes, r->pred_n++;
        int meets = sim_task_meets(g, i);
        r->meets_n += meets;
        /* the sync latency is in the α of every collective line of a group of more than one
         * rank (a group of one's line is zero), and once in the gate's cost where the ranks
         * meet there (planner/workload.h workload_gate_meets) */
        if (rs->sync_s > 0.0 && ((collective_kind(k->kind) && k->alpha_s >= rs->sync_s) ||
                                 (meets && !collective_kind(k->kind))))
            r->pred_sync += rs->sync_s;
        r->pred_sync += k->skew_s; /* its growth with the segment (planner/sim.h) */
    }
    const int n_graph = t.n;
    /* which occurrences of each id are meetings, in the graph's order */
    int *seen = calloc((size_t)n_graph + 1, sizeof *seen);
    if (!seen)
        goto nomem;
    for (int i = 0; i < n_graph; i++)
        if (t.r[i].meets_n > 0 && !(t.r[i].occ_meets = calloc((size_t)t.r[i].pred_n, 1))) {
            free(seen);
            goto nomem;
        }
    for (int i = 0; i < g->n_tasks; i++) {
        const sim_task *k = &g->tasks[i];
        if (k->resource == SIM_R_SYNC || !(k->end_s - k->start_s > 0.0))
            continue;
        id_row *r = find(&t, k->phase, k->layer, k->chunk, k->kind); /* there: added above */
        int j = (int)(r - t.r);
        if (r->occ_meets && seen[j] < r->pred_n)
            r->occ_meets[seen[j]] = (unsigned char)sim_task_meets(g, i);
        seen[j]++;
    }
    free(seen);
    for (int i = 0; i < n_graph; i++) {
        id_row *r = &t.r[i];
        if (!collective_row(r))
            continue;
        size_t m = (size_t)r->pred_n * (size_t)t.steps;
        r->occ_d = malloc(m * sizeof *r->occ_d);
        r->occ_seg = malloc(m * sizeof *r->occ_seg);
        if (!r->occ_d || !r->occ_seg)
            goto nomem;
        for (size_t j = 0; j < m; j++)
            r->occ_d[j] = r->occ_seg[j] = -1.0;
    }
    /* the events where the ranks met: every collective, and the tasks the executor marked
     * (trace.h rt_trace_meets: the forward gate) */
    if (!(ev_meets = calloc((size_t)tr->step_first + 1, 1)))
        goto nomem;
    for (long i = 0; i < tr->step_first; i++)
        ev_meets[i] = collective_kind(tr->ev[i].kind) || tr->ev[i].meets;
    double scale = (double)rs->elem_bytes / (double)sizeof(real);
    for (long i = 0; i < tr->step_first; i++) {
        const rt_trace_event *e = &tr->ev[i];
        if (e->step < s0)
            continue;
        id_row *r = find(&t, e->phase, e->layer, e->chunk, e->kind);
        if (!r)
            goto nomem;
        int s = (int)(e->step - s0);
        if (r->occ_d) { /* the ranks meet in this id: its occurrence in the step */
            int k = occurrence(tr, i);
            if (k < r->pred_n && r->occ_meets[k] && ev_meets[i]) {
                r->occ_d[(long)s * r->pred_n + k] = e->t1_s - e->t0_s;
                r->occ_seg[(long)s * r->pred_n + k] = collective_segment(tr, i, ev_meets);
            }
        }
        r->meas[s] += e->t1_s - e->t0_s;
        r->meas_bytes[s] += e->bytes * scale;
        r->meas_n[s]++;
    }
    res->steps = t.steps;
    for (int i = 0; i < t.n; i++) {
        const id_row *r = &t.r[i];
        if (!conformance_kind(r->kind))
            continue;
        res->ids_planned += r->pred_n > 0;
        int bad = 0;
        for (int s = 0; s < t.steps; s++)
            bad |= r->meas_n[s] != r->pred_n;
        res->ids_mismatched += bad;
        if (r->kind == FSMOE_TASK_GRAD_AR) {
            res->gar_planned_bytes += r->pred_bytes;
            res->gar_executed_bytes += r->meas_bytes[0];
            double dd = fabs(r->meas_bytes[0] - r->pred_bytes);
            if (dd > res->gar_max_diff_bytes)
                res->gar_max_diff_bytes = dd;
        }
    }
    for (int i = 0; i < t.n; i++) {
        const id_row *r = &t.r[i];
        if (r->pred_n < 1)
            continue;
        res->ids_predicted++;
        int missing = 0;
        for (int s = 0; s < t.steps; s++)
            missing |= r->meas_n[s] == 0;
        res->ids_unmeasured += missing;
    }
    size_t nr = (size_t)t.n * (size_t)t.steps + 1;
    if (!(ratios = malloc(nr * sizeof *ratios)))
        goto nomem;
    fprintf(f, "# report: schedule %s, %d measured steps against its graph (%d tasks, digest "
               "%016llx) on cluster profile %s\n",
            rs->name, t.steps, g->n_tasks, rt_schedule_digest(rs), rs->cluster_path);
    if (rs->at_routing)
        fprintf(f, "# predicted at the routing the run met (the routing lines: each MoE layer's "
                   "busiest exchange member's expert rows, and the dense matrices' width); as "
                   "planned, every capacity slot filled, the step is %.3f ms\n",
                1e3 * rs->iteration_s);
    if (g->host_ranks) /* the prediction's host sharing (planner/sim.h) */
        fprintf(f, "# host sharing (the profile's): %d ranks on %d cores computing in lockstep, "
                   "lines measured with %d computing at once: compute predicted at %.3fx its "
                   "lines\n",
                g->host_ranks, g->host_cores, g->host_at_once, g->host_speed);
    fprintf(f, "# conformance: %d task ids of alltoall/allgather/reducescatter/saa/expert/"
               "mp-allreduce/esp-allreduce/grad-allreduce planned, %d "
               "mismatched; Gradient-AllReduce %.3f MB planned, %.3f MB executed per step "
               "(largest difference of one task %.0f B)\n",
            res->ids_planned, res->ids_mismatched, res->gar_planned_bytes / 1e6,
            res->gar_executed_bytes / 1e6, res->gar_max_diff_bytes);
    for (int i = 0; i < t.n && res->ids_mismatched; i++) {
        const id_row *r = &t.r[i];
        char lb[64];
        for (int s = 0; s < t.steps && conformance_kind(r->kind); s++)
            if (r->meas_n[s] != r->pred_n) {
                fprintf(f, "#   %s: planned %d, executed %d in step %d\n",
                        fsmoe_task_label(r->phase, r->layer, r->chunk, (fsmoe_task_kind)r->kind,
                                         lb, sizeof lb),
                        r->pred_n, r->meas_n[s], s);
                break;
            }
    }
    fprintf(f, "# join: %d task ids predicted, %d not measured in every step\n",
            res->ids_predicted, res->ids_unmeasured);
    for (int i = 0, shown = 0; i < t.n && shown < 5; i++) {
        const id_row *r = &t.r[i];
        char lb[64];
        for (int s = 0; s < t.steps && r->pred_n > 0; s++)
            if (r->meas_n[s] == 0) {
                fprintf(f, "#   %s: predicted %.3f ms, not measured in step %d\n",
                        fsmoe_task_label(r->phase, r->layer, r->chunk, (fsmoe_task_kind)r->kind,
                                         lb, sizeof lb),
                        1e3 * r->pred, s);
                shown++;
                break;
            }
    }
    fprintf(f, "  %-16s %12s %12s %8s %8s %8s %7s\n", "per kind", "measured ms", "predicted ms",
            "ratio", "median", "p90", "tasks");
    for (int k = 0; k < FSMOE_TASK_COUNT; k++)
        line(f, &t, fsmoe_task_name((fsmoe_task_kind)k), sel_kind, k, ratios);
    fprintf(f, "  %-16s %12s %12s %8s %8s %8s %7s\n", "per layer", "measured ms", "predicted ms",
            "ratio", "median", "p90", "tasks");
    for (int l = -1; l < rs->n_layers; l++) {
        char name[32];
        snprintf(name, sizeof name, l < 0 ? "outside MoE" : "L%d", l);
        line(f, &t, name, sel_layer, l, ratios);
    }
    if (step_s && n_steps > 0) {
        double *v = malloc((size_t)n_steps * sizeof *v);
        if (!v)
            goto nomem;
        memcpy(v, step_s, (size_t)n_steps * sizeof *v);
        double med = quantile(v, n_steps, 0.5), p90 = quantile(v, n_steps, 0.9);
        free(v);
        res->step_median_s = med, res->step_p90_s = p90, res->step_predicted_s = predicted_s;
        fprintf(f, "  %-16s %12.3f %12.3f %8.2f  (median of %d steps; p90 %.3f ms)\n", "step",
                1e3 * med, 1e3 * predicted_s, med / predicted_s, n_steps, 1e3 * p90);
        /* what no task covers: work between the graph's tasks that neither is timed nor
         * modelled (data loading, the step's bookkeeping) */
        double cov = covered_median(tr, s0, t.steps);
        if (isfinite(cov))
            fprintf(f, "  %-16s %12.3f %12s %8s  (the median step minus the median time "
                       "covered by its tasks)\n",
                    "in no task", 1e3 * (med - cov), "-", "-");
    }
    if (ranks && ranks->world > 1)
        st = collectives_table(f, &t, n_graph, rs->sync_s, ranks, err);
    if (st == FSMOE_OK && ranks && ranks->world > 1)
        st = skew_fit(f, &t, n_graph, rs->sync_s, ranks, res, err);
    goto out;
nomem:
    st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "--report: out of memory");
out:
    free(ratios), free(ev_meets);
    table_free(&t);
    return st;
}
