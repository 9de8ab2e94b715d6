/* Implements: the pipeline degree r of one MoE layer and phase (FSMoE §4 "performance model" and
 * Algorithm 1; design.md §4), and the inter-node idle time t_olp,moe the gradient partition of
 * FSMoE §5 feeds on.
 *
 * Every case chain has the form f_i(r) = a_i·r + b_i/r + c_i with a_i, b_i ≥ 0 (an α paid per
 * chunk, a β·n paid once and split over chunks), so each f_i is convex on r > 0 and so is
 * F = max f_i. Three solvers:
 *   PIPELINE_SLSQP      NLopt SLSQP on the epigraph (min z s.t. z ≥ f_i(r)), then integers;
 *   PIPELINE_PAPER      the paper's Algorithm 1 (each f_i alone, smallest minimum wins);
 *   PIPELINE_EXHAUSTIVE every integer r (the oracle of the tests).
 * Relies on: NLopt (SLSQP). */
#include "pipeline_degree.h"

#include <math.h>
#include <nlopt.h>
#include <stddef.h>

/* f_i = a·r + b/r + c, i = 0..3 for f1..f4. */
typedef struct {
    double a[4], b[4], c[4];
    double scale; /* divides the f_i inside SLSQP so that z is O(1) */
} case_coeffs;

/* Per-op pieces of t_x(r) = A + Bn/r; an op that does not run (n = 0) costs nothing at all,
 * not even its launch latency α. */
static void op_parts(double alpha, double beta, double n, double *A, double *Bn)
{
    if (n > 0.0) {
        *A = alpha;
        *Bn = beta * n;
    } else {
        *A = 0.0;
        *Bn = 0.0;
    }
}

static double op_time(double alpha, double beta, double n, double r)
{
    return n > 0.0 ? alpha + (n / r) * beta : 0.0;
}

static void coeffs_of(const pipeline_problem *p, case_coeffs *k)
{
    double Aa, Ba, Ag, Bg, Ar, Br, Ae, Be;
    op_parts(p->a2a_alpha, p->a2a_beta, p->n_a2a, &Aa, &Ba);
    op_parts(p->ag_alpha, p->ag_beta, p->n_ag, &Ag, &Bg);
    op_parts(p->rs_alpha, p->rs_beta, p->n_rs, &Ar, &Br);
    op_parts(p->exp_alpha, p->exp_beta, p->n_exp, &Ae, &Be);
    /* f1 = 2r·t_a2a + t_gar */
    k->a[0] = 2.0 * Aa, k->b[0] = 0.0, k->c[0] = 2.0 * Ba + p->t_gar;
    /* f2 = 2·t_a2a + t_ag + t_rs + r·t_exp */
    k->a[1] = Ae, k->b[1] = 2.0 * Ba + Bg + Br, k->c[1] = 2.0 * Aa + Ag + Ar + Be;
    /* f3 = 2r·t_a2a + t_ag + t_rs */
    k->a[2] = 2.0 * Aa, k->b[2] = Bg + Br, k->c[2] = 2.0 * Ba + Ag + Ar;
    /* f4 = 2·t_a2a + r·t_ag + r·t_rs */
    k->a[3] = Ag + Ar, k->b[3] = 2.0 * Ba, k->c[3] = 2.0 * Aa + Bg + Br;
    k->scale = 1.0;
}

double pipeline_case_time(const pipeline_problem *p, int i, double r)
{
    double t_a2a = op_time(p->a2a_alpha, p->a2a_beta, p->n_a2a, r);
    double t_ag = op_time(p->ag_alpha, p->ag_beta, p->n_ag, r);
    double t_rs = op_time(p->rs_alpha, p->rs_beta, p->n_rs, r);
    double t_exp = op_time(p->exp_alpha, p->exp_beta, p->n_exp, r);
    switch (i) {
    case 1: return 2.0 * r * t_a2a + p->t_gar;
    case 2: return 2.0 * t_a2a + t_ag + t_rs + r * t_exp;
    case 3: return 2.0 * r * t_a2a + t_ag + t_rs;
    case 4: return 2.0 * t_a2a + r * t_ag + r * t_rs;
    default: return NAN;
    }
}

double pipeline_F(const pipeline_problem *p, double r)
{
    double F = pipeline_case_time(p, 1, r);
    for (int i = 2; i <= 4; i++) {
        double fi = pipeline_case_time(p, i, r);
        if (fi > F)
            F = fi;
    }
    return F;
}

unsigned pipeline_conditions(const pipeline_problem *p, double r)
{
    double t_a2a = op_time(p->a2a_alpha, p->a2a_beta, p->n_a2a, r);
    double t_ag = op_time(p->ag_alpha, p->ag_beta, p->n_ag, r);
    double t_rs = op_time(p->rs_alpha, p->rs_beta, p->n_rs, r);
    double t_exp = op_time(p->exp_alpha, p->exp_beta, p->n_exp, r);
    double inter_rest = 2.0 * (r - 1.0) * t_a2a; /* A2As other than the first and last */
    double t_gar = p->t_gar;
    unsigned q = 0;
    if (t_a2a > t_ag) q |= 1u << 0;
    if (r * t_exp > inter_rest) q |= 1u << 1;
    if (r * t_exp > (r - 1.0) * t_ag + t_rs) q |= 1u << 2;
    if (t_gar > t_ag + t_rs) q |= 1u << 3;
    if (t_gar > r * t_exp - inter_rest + t_ag + t_rs) q |= 1u << 4;
    if (t_gar > r * t_ag + r * t_rs - inter_rest) q |= 1u << 5;
    if (t_gar > t_ag + t_rs + r * t_exp - inter_rest) q |= 1u << 6;
    return q;
}

int pipeline_case_of_conditions(unsigned q)
{
    int Q1 = (q >> 0) & 1, Q2 = (q >> 1) & 1, Q3 = (q >> 2) & 1, Q4 = (q >> 3) & 1;
    int Q5 = (q >> 4) & 1, Q6 = (q >> 5) & 1, Q7 = (q >> 6) & 1;
    /* The four branches (Q1, Q2 when Q1, Q3 when not) partition the space; within each, one of
     * Q4..Q7 says whether the Gradient-AllReduce makes the inter-node link the bottleneck. */
    if ((Q1 && !Q2 && Q4) || (Q1 && Q2 && Q5) || (!Q1 && !Q3 && Q6) || (!Q1 && Q3 && Q7))
        return 1;
    if ((Q1 && Q2 && !Q5) || (!Q1 && Q3 && !Q7))
        return 2;
    if (Q1 && !Q2 && !Q4)
        return 3;
    return 4; /* !Q1 && !Q3 && !Q6 */
}

/* With t_gar = 0, f3 − f1 = t_ag + t_rs ≥ 0, so F − f1 = max(f2, f3, f4) − 2r·t_a2a: the time the
 * layer runs minus the time its inter-node link carries AllToAll. For whichever of cases 2..4
 * binds F this is exactly the §5 formula of that case (case 2: r·t_exp + t_ag + t_rs −
 * 2(r−1)·t_a2a; case 3: t_ag + t_rs; case 4: r·t_ag + r·t_rs − 2(r−1)·t_a2a). We take the case
 * that binds F rather than the one the paper's conditions select: where they disagree, the
 * paper's formula describes a schedule the layer does not run and may exceed the real idle time
 * (e.g. Q1 holds by t_a2a > t_ag while t_rs is large). Negative values (cannot happen for the
 * binding case, which is the max) are clamped to 0 for safety. */
double pipeline_overlappable(const pipeline_problem *p, int r)
{
    pipeline_problem q = *p;
    q.t_gar = 0.0;
    double rr = r < 1 ? 1.0 : (double)r;
    double idle = pipeline_F(&q, rr) - pipeline_case_time(&q, 1, rr);
    return idle > 0.0 ? idle : 0.0;
}

static int clamp_r_max(const pipeline_problem *p)
{
    return p->r_max < 1 ? 1 : p->r_max;
}

static void fill_result(const pipeline_problem *p, int r, pipeline_result *out)
{
    out->r = r;
    out->binding_case = 1;
    out->f[0] = pipeline_case_time(p, 1, r);
    double F = out->f[0];
    for (int i = 2; i <= 4; i++) {
        out->f[i - 1] = pipeline_case_time(p, i, r);
        if (out->f[i - 1] > F) {
            F = out->f[i - 1];
            out->binding_case = i;
        }
    }
    out->time_s = F;
    out->q = pipeline_conditions(p, r);
}

static int solve_exhaustive(const pipeline_problem *p)
{
    int r_max = clamp_r_max(p), best = 1;
    double best_F = pipeline_F(p, 1.0);
    for (int r = 2; r <= r_max; r++) {
        double F = pipeline_F(p, r);
        if (F < best_F) {
            best_F = F;
            best = r;
        }
    }
    return best;
}

/* Continuous minimiser of a·r + b/r over [1, r_max]. */
static double case_argmin(double a, double b, int r_max)
{
    double r;
    if (b <= 0.0)
        r = 1.0;
    else if (a <= 0.0)
        r = r_max;
    else
        r = sqrt(b / a);
    if (r < 1.0) r = 1.0;
    if (r > r_max) r = r_max;
    return r;
}

/* The better of floor(x) and ceil(x) for f (ties: the smaller). */
static int round_better(const pipeline_problem *p, int i, double x, int r_max)
{
    int lo = (int)floor(x), hi = (int)ceil(x);
    if (lo < 1) lo = 1;
    if (hi > r_max) hi = r_max;
    if (hi < lo) hi = lo;
    double flo = i ? pipeline_case_time(p, i, lo) : pipeline_F(p, lo);
    double fhi = i ? pipeline_case_time(p, i, hi) : pipeline_F(p, hi);
    return fhi < flo ? hi : lo;
}

/* FSMoE Algorithm 1 as printed: minimise each f_i on its own and take the case with the smallest
 * minimum. The paper runs SciPy SLSQP per case; f_i = a·r + b/r + c has the closed-form
 * minimiser sqrt(b/a), which is what SLSQP converges to, so we use it directly. This ignores
 * the case conditions: every f_i is a lower bound on the layer time, and the smallest lower
 * bound is not the time the layer takes (design.md §4 "Fix over the paper"). */
static int solve_paper(const pipeline_problem *p)
{
    case_coeffs k;
    coeffs_of(p, &k);
    int r_max = clamp_r_max(p), best_r = 1;
    double best = INFINITY;
    for (int i = 1; i <= 4; i++) {
        int r = round_better(p, i, case_argmin(k.a[i - 1], k.b[i - 1], r_max), r_max);
        double fi = pipeline_case_time(p, i, r);
        if (fi < best) {
            best = fi;
            best_r = r;
        }
    }
    return best_r;
}

/* ---- SLSQP on the epigraph: x = (r, z), min z s.t. f_i(r)/scale − z ≤ 0 ---- */

static double epi_objective(unsigned n, const double *x, double *grad, void *data)
{
    (void)n;
    (void)data;
    if (grad) {
        grad[0] = 0.0;
        grad[1] = 1.0;
    }
    return x[1];
}

static void epi_constraints(unsigned m, double *result, unsigned n, const double *x,
                            double *grad, void *data)
{
    (void)n;
    const case_coeffs *k = data;
    double r = x[0], z = x[1], inv = 1.0 / k->scale;
    for (unsigned i = 0; i < m; i++) {
        result[i] = (k->a[i] * r + k->b[i] / r + k->c[i]) * inv - z;
        if (grad) {
            grad[2 * i] = (k->a[i] - k->b[i] / (r * r)) * inv;
            grad[2 * i + 1] = -1.0;
        }
    }
}

/* One SLSQP object per thread, reused: creating an nlopt_opt and registering the constraints
 * costs more than the optimisation itself on these 2-variable problems. The constraint data
 * pointer is the thread's own coefficient block, refilled before every solve. */
static _Thread_local nlopt_opt tl_opt;
static _Thread_local case_coeffs tl_coeffs;

void pipeline_thread_release(void)
{
    if (tl_opt) {
        nlopt_destroy(tl_opt);
        tl_opt = NULL;
    }
}

static fsmoe_status slsqp_object(nlopt_opt *out, fsmoe_error *err)
{
    if (tl_opt) {
        *out = tl_opt;
        return FSMOE_OK;
    }
    nlopt_opt o = nlopt_create(NLOPT_LD_SLSQP, 2);
    if (!o)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "pipeline degree: nlopt_create(SLSQP) failed");
    static const double tol[4] = {0, 0, 0, 0};
    nlopt_result res = nlopt_set_min_objective(o, epi_objective, NULL);
    if (res >= 0)
        res = nlopt_add_inequality_mconstraint(o, 4, epi_constraints, &tl_coeffs, tol);
    /* r is rounded to an integer and then checked by a discrete descent, so a loose tolerance
     * on r is enough; z is O(1) after scaling. */
    if (res >= 0) {
        const double xtol[2] = {1e-3, 1e-9};
        res = nlopt_set_xtol_abs(o, xtol);
    }
    if (res >= 0)
        res = nlopt_set_ftol_rel(o, 1e-10);
    if (res >= 0)
        res = nlopt_set_maxeval(o, 200);
    if (res < 0) {
        fsmoe_status st = fsmoe_fail(err, FSMOE_ERR_SOLVER, "pipeline degree: NLopt setup: %s",
                                     nlopt_get_errmsg(o) ? nlopt_get_errmsg(o) : "failed");
        nlopt_destroy(o);
        return st;
    }
    tl_opt = o;
    *out = o;
    return FSMOE_OK;
}

/* Why integer neighbours suffice: F is a max of convex functions, hence convex on [1, r_max];
 * its restriction to the integers is then discretely convex (F(n+1) − F(n) never decreases), so
 * an integer that neither neighbour beats is a global integer minimum, and the best of
 * floor/ceil of the exact continuous minimiser is one. SLSQP only gives that minimiser to a
 * tolerance, so after rounding we walk to neighbours while they are not worse (left, for the
 * smallest r among ties) or strictly better (right); the walk is 0–1 steps in practice and makes
 * the result exact whatever SLSQP's accuracy. */
static int integer_refine(const pipeline_problem *p, double r_cont, int r_max)
{
    int n = round_better(p, 0, r_cont, r_max);
    double Fn = pipeline_F(p, n);
    while (n > 1) {
        double Fl = pipeline_F(p, n - 1);
        if (Fl > Fn)
            break;
        n--;
        Fn = Fl;
    }
    while (n < r_max) {
        double Fr = pipeline_F(p, n + 1);
        if (!(Fr < Fn))
            break;
        n++;
        Fn = Fr;
    }
    return n;
}

static fsmoe_status solve_slsqp(const pipeline_problem *p, int *r_out, fsmoe_error *err)
{
    int r_max = clamp_r_max(p);
    if (r_max == 1) {
        *r_out = 1;
        return FSMOE_OK;
    }
    nlopt_opt o = NULL;
    fsmoe_status st = slsqp_object(&o, err);
    if (st != FSMOE_OK)
        return st;
    case_coeffs *k = &tl_coeffs;
    coeffs_of(p, k);

    /* Start at the best stationary point of the single chains: F's minimiser is either one of
     * them or a crossing of two chains near them, so SLSQP needs few iterations. */
    double r0 = 1.0, F0 = pipeline_F(p, 1.0);
    for (int i = 0; i < 4; i++) {
        double ri = case_argmin(k->a[i], k->b[i], r_max);
        double Fi = pipeline_F(p, ri);
        if (Fi < F0) {
            F0 = Fi;
            r0 = ri;
        }
    }
    if (!(F0 > 0.0)) { /* nothing runs: every r is as good, take the smallest */
        *r_out = 1;
        return FSMOE_OK;
    }
    k->scale = F0;
    double lb[2] = {1.0, -HUGE_VAL}, ub[2] = {(double)r_max, HUGE_VAL};
    nlopt_result res = nlopt_set_lower_bounds(o, lb);
    if (res >= 0)
        res = nlopt_set_upper_bounds(o, ub);
    double x[2] = {r0, 1.0}, zmin = 0.0;
    if (res >= 0)
        res = nlopt_optimize(o, x, &zmin);
    /* NLOPT_ROUNDOFF_LIMITED still leaves the best point found in x (NLopt's documentation), and
     * the integer walk below makes the answer exact regardless; every other negative code is a
     * real failure. */
    if (res < 0 && res != NLOPT_ROUNDOFF_LIMITED) {
        const char *msg = nlopt_get_errmsg(o);
        return fsmoe_fail(err, FSMOE_ERR_SOLVER,
                          "pipeline degree: NLopt SLSQP failed (%d): %s", (int)res,
                          msg ? msg : "no message");
    }
    double rc = x[0];
    if (!(rc >= 1.0) || !isfinite(rc))
        rc = r0;
    if (rc > r_max)
        rc = r_max;
    *r_out = integer_refine(p, rc, r_max);
    return FSMOE_OK;
}

fsmoe_status pipeline_solve(const pipeline_problem *p, pipeline_method m, pipeline_result *out,
                            fsmoe_error *err)
{
    int r = 1;
    switch (m) {
    case PIPELINE_SLSQP: {
        fsmoe_status st = solve_slsqp(p, &r, err);
        if (st != FSMOE_OK)
            return st;
        break;
    }
    case PIPELINE_PAPER: r = solve_paper(p); break;
    case PIPELINE_EXHAUSTIVE: r = solve_exhaustive(p); break;
    default:
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "pipeline degree: unknown method %d", (int)m);
    }
    fill_result(p, r, out);
    return FSMOE_OK;
}
