/* Implements: the multi-rank correctness oracle (design.md §10.1): the same global batch trained
 * on world 1 and on P ranks (any dp/mp/ep/esp, any pipeline degrees, dropless or with capacity)
 * gives the same losses, gradients and weights.
 *
 * Run under mpirun with P ranks. Rank 0 also builds the one-rank model on the global batch
 * (P·B samples) in the same process; both train side by side. After the first backward every
 * rank compares its gradients — replicated tensors whole, slices (expert rows, MP and ESP
 * columns) against the same elements of the one-rank tensor — and after every step its
 * weights, with the one-rank values broadcast from rank 0; the losses are compared on rank 0.
 *
 *   test_runtime_equiv LAYOUT R_FWD R_BWD CAPACITY STEPS EXPERT GATE [MODE]
 *     LAYOUT: ep, or MPxEPxESP (e.g. 2x2x2: tensor parallelism 2, expert parallelism 2, expert
 *     slices 2); CAPACITY: a capacity factor, or 0 for dropless; EXPERT gpt|swiglu; GATE
 *     gshard|sigmoid|xmoe; MODE serial (one in-order stream), partitioned (gradient AllReduce
 *     tasks at every anchor), dense (every other block a dense FFN) or pause (the MoE layers as
 *     Parm's S1: tokens split over MP, one AllToAll over EP&ESP) or etp (DeepSpeed's expert
 *     tensor parallelism, mp = esp: the slices' partial outputs all-reduced over ESP) or s2
 *     (Parm's S2: slots split over MP, AllToAll over EP&ESP, an MP AllGather per chunk), o1 or
 *     o2 (MoNTA's layer, mp = esp: R_FWD/R_BWD its AllToAll chunks)
 *
 * Tolerances. fp64 build (the FSMOE_REAL_DOUBLE runtime): the P-rank run differs from the
 * one-rank run only in summation order (the AllReduce adds P partial sums of gradients and
 * statistics), so values agree to ~1e-15 relative; we allow 1e-10 (losses, relative) and
 * 1e-9·(1 + |w|) (gradients and weights). fp32 build: the same reorderings at 6e-8 relative
 * per sum; AdamW divides by sqrt(v), so a gradient entry near zero can turn a 1e-7 difference
 * into a visible step difference, and these grow over steps. Measured over 50 steps on dp2,
 * dp4, dp2·ep2, ep4 and mp2·ep2·esp2 (the ESP pipeline and S1; dropless): loss differences at
 * most 3.9e-8 relative, gradients 1.5e-7, weights 1.7e-5 absolute (weights ~0.02-1); we allow
 * 1e-5 relative on the loss and
 * 2e-4·(1 + |w|) on gradients and weights, about ten times what was measured. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "data.h"
#include "dist.h"
#include "train.h"

#if REAL_IS_DOUBLE
#define TOL_LOSS 1e-10
#define TOL_W 1e-9
#define MPI_REAL_T MPI_DOUBLE
#else
#define TOL_LOSS 1e-5
#define TOL_W 2e-4
#define MPI_REAL_T MPI_FLOAT
#endif

static int rank_, failures;

#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            if (failures++ < 10) {                                                             \
                fprintf(stderr, "rank %d: FAIL: ", rank_);                                    \
                fprintf(stderr, __VA_ARGS__);                                                  \
                fprintf(stderr, "\n");                                                         \
            }                                                                                  \
        }                                                                                      \
    } while (0)

static void die_st(fsmoe_status st, const fsmoe_error *err)
{
    if (st != FSMOE_OK) {
        fprintf(stderr, "rank %d: %s\n", rank_, err->msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* Compares this rank's tensors (buffer `mine` of md's layout) with the one-rank buffer `ref` of
 * the one-rank table `rt` (broadcast to every rank). Returns the largest difference. */
static double compare(const rt_params *mp, const real *mine, const rt_params *rt, const real *ref,
                      double tol, const char *what)
{
    double worst = 0;
    for (int i = 0; i < mp->n; i++) {
        const rt_param *p = &mp->p[i];
        const rt_param *q = params_find(rt, p->name);
        CHECK(q != NULL, "%s: tensor %s missing in the one-rank model", what, p->name);
        if (!q)
            continue;
        CHECK(param_global_numel(p) == q->numel, "%s: %s: the whole of the slice has %ld "
              "elements, the one-rank tensor %ld", what, p->name, param_global_numel(p), q->numel);
        const real *a = mine + p->offset, *b = ref + q->offset;
        for (long j = 0; j < p->numel; j++) {
            long g = param_global_index(p, j);
            double d = fabs((double)a[j] - (double)b[g]);
            worst = d > worst ? d : worst;
            if (d > tol * (1 + fabs((double)b[g]))) {
                CHECK(0, "%s: %s[%ld] (whole [%ld]): %.17g vs one rank %.17g", what, p->name, j,
                      g, (double)a[j], (double)b[g]);
                break;
            }
        }
    }
    return worst;
}

int main(int argc, char **argv)
{
    int provided = 0, P = 1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    const char *mode = argc == 9 ? argv[8] : "";
    int mp = 1, ep = 1, esp = 1;
    if (argc != 8 && !(argc == 9 && (strcmp(mode, "serial") == 0 ||
                                     strcmp(mode, "partitioned") == 0 ||
                                     strcmp(mode, "dense") == 0 ||
                                     strcmp(mode, "pause") == 0 ||
                                     strcmp(mode, "etp") == 0 ||
                                     strcmp(mode, "s2") == 0 || strcmp(mode, "o1") == 0 ||
                                     strcmp(mode, "o2") == 0))) {
        fprintf(stderr, "usage: test_runtime_equiv EP|MPxEPxESP R_FWD R_BWD CAPACITY STEPS "
                        "EXPERT GATE [serial|partitioned|dense|pause|etp|s2|o1|o2]\n");
        MPI_Finalize();
        return 2;
    }
    if (sscanf(argv[1], "%dx%dx%d", &mp, &ep, &esp) != 3)
        mp = 1, ep = atoi(argv[1]), esp = 1;
    int r_fwd = atoi(argv[2]), r_bwd = atoi(argv[3]);
    double f = atof(argv[4]);
    long steps = atol(argv[5]);
    const char *src = getenv("FSMOE_SOURCE_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/data/jargon.txt", src ? src : ".");

    rt_config c;
    config_defaults(&c);
    c.M = 32, c.H = 64, c.heads = 2, c.layers = 2, c.L = 16, c.B = 2, c.E = 4, c.k = 2;
    c.f = f, c.expert = strcmp(argv[6], "swiglu") == 0;
    c.gate = (rt_gate_kind)gate_kind_from_name(argv[7]);
    c.moe_every = strcmp(mode, "dense") == 0 ? 2 : 1, c.steps = steps, c.warmup = 2, c.gate_noise = 0.5;
    fsmoe_error err = {0};
    die_st(config_validate(&c, &err), &err);
    rt_config c1 = c; /* the one-rank reference always overlaps */
    c.serial = strcmp(mode, "serial") == 0; /* the P-rank run: one in-order stream
                                              * (fsmoe-run --no-overlap) */
    rt_data data;
    die_st(data_load(&data, path, c.V, c.L, &err), &err);
    rt_backend *be = NULL, *be1 = NULL;
    die_st(rt_backend_create("host", 1, &be, &err), &err);

    rt_layout lay = layout_make_mp(P, rank_, P, mp, ep, esp, c.E, c.B);
    rt_dist dist;
    die_st(dist_init(&dist, &lay, &err), &err);
    rt_trainer tr, one;
    die_st(trainer_init_dist(&tr, &c, be, &data, &dist, &err), &err);
    c1.B = c.B * lay.dp;
    /* every rank builds the one-rank model's table (to find tensors by name); rank 0 runs it */
    die_st(rt_backend_create("host", 1, &be1, &err), &err);
    die_st(trainer_init(&one, &c1, be1, &data, &err), &err);
    for (long b = 0; b < c.layers; b++) {
        tr.model.blocks[b].moe.r_fwd = one.model.blocks[b].moe.r_fwd = r_fwd;
        tr.model.blocks[b].moe.r_bwd = one.model.blocks[b].moe.r_bwd = r_bwd;
        tr.model.blocks[b].moe.pause_mp = strcmp(mode, "pause") == 0;
        tr.model.blocks[b].moe.etp = strcmp(mode, "etp") == 0;
        tr.model.blocks[b].moe.s2 = strcmp(mode, "s2") == 0;
        tr.model.blocks[b].moe.monta = mode[0] == 'o' ? mode[1] - '0' : 0;
    }
    /* partitioned: the P-rank run all-reduces its gradients in tasks at every anchor of the
     * backward (grad_sync.h), on both streams, of sizes that cut tensors in the middle and ask
     * for more than is ready; the tail takes the rest */
    rt_gar_task parts[4 * 2 + 4];
    int n_parts = 0;
    if (strcmp(mode, "partitioned") == 0) {
        for (int i = 0; i < 2; i++) {
            parts[n_parts++] = (rt_gar_task){FSMOE_AT_WINDOW, i, 37, RT_GS_OWN};
            parts[n_parts++] = (rt_gar_task){FSMOE_AT_DENSE_READY, i, 1001, RT_GS_COMM};
            parts[n_parts++] = (rt_gar_task){FSMOE_AT_DISPATCHED, i, 5003, RT_GS_COMM};
            parts[n_parts++] = (rt_gar_task){FSMOE_AT_MOE_READY, i, 3001, RT_GS_OWN};
        }
        parts[n_parts++] = (rt_gar_task){FSMOE_AT_WINDOW, -1, 101, RT_GS_OWN};
        parts[n_parts++] = (rt_gar_task){FSMOE_AT_EARLY_READY, -1, 777, RT_GS_OWN};
        parts[n_parts++] = (rt_gar_task){FSMOE_AT_DENSE_READY, -1, 2003, RT_GS_COMM};
        parts[n_parts++] = (rt_gar_task){FSMOE_AT_TAIL, -1, -1, RT_GS_COMM};
        die_st(model_set_grad_tasks(&tr.model, parts, n_parts, &err), &err);
    }
    long n1 = one.model.params.total;
    real *ref = malloc((size_t)n1 * sizeof(real));
    double worst_g = 0, worst_w = 0, worst_l = 0;

    /* 1. gradients of the first step (before clipping and the update) */
    int *tok = malloc((size_t)(c1.B * c.L) * sizeof(int)),
        *tgt = malloc((size_t)(c1.B * c.L) * sizeof(int));
    data_batch_slice(&data, 0, c.seed, 0, lay.sample0, c.B, c.L, tok, tgt);
    model_zero_grad(&tr.model);
    die_st(model_forward(&tr.model, tok, tgt, 1, 0, &err), &err);
    die_st(model_backward(&tr.model, &err), &err);
    if (rank_ == 0) {
        data_batch(&data, 0, c.seed, 0, c1.B, c.L, tok, tgt);
        model_zero_grad(&one.model);
        die_st(model_forward(&one.model, tok, tgt, 1, 0, &err), &err);
        die_st(model_backward(&one.model, &err), &err);
        memcpy(ref, one.model.params.g, (size_t)n1 * sizeof(real));
        double d = fabs(tr.model.loss - one.model.loss);
        worst_l = d / fabs(one.model.loss);
        CHECK(d <= TOL_LOSS * fabs(one.model.loss), "first loss %.17g vs one rank %.17g",
              tr.model.loss, one.model.loss);
    }
    MPI_Bcast(ref, (int)n1, MPI_REAL_T, 0, MPI_COMM_WORLD);
    worst_g = compare(&tr.model.params, tr.model.params.g, &one.model.params, ref, TOL_W, "gradient");

    /* 2. training steps: losses (rank 0) and weights (every rank) after each */
    for (long s = 0; s < steps; s++) {
        double loss = 0, loss1 = 0;
        die_st(trainer_step(&tr, &loss, NULL, NULL, &err), &err);
        if (rank_ == 0) {
            die_st(trainer_step(&one, &loss1, NULL, NULL, &err), &err);
            double d = fabs(loss - loss1) / fabs(loss1);
            worst_l = d > worst_l ? d : worst_l;
            CHECK(d <= TOL_LOSS, "step %ld: loss %.17g vs one rank %.17g", s, loss, loss1);
            memcpy(ref, one.model.params.w, (size_t)n1 * sizeof(real));
        }
        MPI_Bcast(ref, (int)n1, MPI_REAL_T, 0, MPI_COMM_WORLD);
        double w = compare(&tr.model.params, tr.model.params.w, &one.model.params, ref, TOL_W,
                           "weights");
        worst_w = w > worst_w ? w : worst_w;
    }
    double worst[3] = {worst_l, worst_g, worst_w};
    MPI_Allreduce(MPI_IN_PLACE, worst, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    int bad = failures;
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank_ == 0)
        printf("%s P=%d mp=%d ep=%d esp=%d r=%d/%d%s%s capacity=%s %s %s steps=%ld: max loss rel "
               "diff %.3g, grad diff %.3g, weight diff %.3g: %s\n",
               REAL_IS_DOUBLE ? "fp64" : "fp32", P, mp, ep, esp, r_fwd, r_bwd,
               mode[0] ? " " : "", mode,
               f > 0 ? argv[4] : "none",
               argv[6], argv[7], steps, worst[0], worst[1], worst[2], bad ? "FAIL" : "ok");
    free(ref), free(tok), free(tgt);
    trainer_free(&tr);
    trainer_free(&one);
    rt_backend_destroy(&be);
    rt_backend_destroy(&be1);
    data_free(&data);
    dist_free(&dist);
    MPI_Finalize();
    return bad ? 1 : 0;
}
