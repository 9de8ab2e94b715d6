/* Implements: the interference section of fsmoe-bench (interference.h). */
#include "interference.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_coll.h"
#include "op_collective.h"
#include "op_gemm.h"

/* Each phase alone should take 20 to 40 ms: long enough that a barrier's skew (up to a nap of
 * 1 ms where ranks wait asleep) and a thread's wake-up are a few per cent of it, short enough
 * that R repetitions of three phases stay around a second. */
#define INTF_TARGET_S 0.030
#define INTF_LONGEST_S 0.040
/* At most this many AllToAlls or GEMMs per phase: the mpi backend's stream queue holds 256
 * jobs, and a fuller queue would make submitting the AllToAlls wait for them, delaying the
 * GEMMs' start. Where even this many stay short of the target, the phase is shorter. */
#define INTF_MAX_OPS 128
#define INTF_MIN_REPS 5
/* The sync phases: this many rounds of GEMMs and one small AllToAll, each round's GEMMs about
 * INTF_SYNC_COMPUTE_S. The ranks' skew at a collective grows with the computation before it
 * (on 4 ranks sharing 2 cores: 1.9 ms after 4 ms of GEMMs, 6.9 ms after 31 ms), so the rounds
 * hold a fixed amount, the order of what a training step computes between two collectives (an
 * attention block, a pipeline chunk's expert GEMMs), whatever the GEMM shape. */
#define INTF_SYNC_ROUNDS 8
#define INTF_SYNC_COMPUTE_S 0.005

static double intf_clamp(double f)
{
    if (!(f > 1.0)) /* below 1 is noise (or NaN from an empty time): no slowdown */
        return 1.0;
    return f < FSMOE_MAX_SLOWDOWN ? f : FSMOE_MAX_SLOWDOWN;
}

/* The factor of the operation that ended last. It ran beside the other until `first`,
 * progressing first/f of its own work, and alone at full speed after: last = first + T_alone −
 * first/f, so f = first / (first + T_alone − last). A denominator that is not positive, or so
 * small that f would pass FSMOE_MAX_SLOWDOWN, means it made no measurable progress beside the
 * other (or noise pushed the model past that): the largest factor the profile takes. Where the
 * denominator is positive, f is at least last / T_alone, the slowdown seen over its whole run
 * (first <= last makes it so). */
static double intf_later(double first, double T_alone, double last)
{
    double d = first + T_alone - last;
    if (d <= first / FSMOE_MAX_SLOWDOWN)
        return FSMOE_MAX_SLOWDOWN;
    return first / d;
}

void interference_factors(double T_a, double T_g, double t_a, double t_g, double *comm_slowdown,
                          double *compute_slowdown)
{
    /* The one that ended first ran beside the other all along: its time over its time alone. */
    if (t_g <= t_a) {
        *compute_slowdown = intf_clamp(t_g / T_g);
        *comm_slowdown = intf_clamp(intf_later(t_g, T_a, t_a));
    } else {
        *comm_slowdown = intf_clamp(t_a / T_a);
        *compute_slowdown = intf_clamp(intf_later(t_a, T_g, t_g));
    }
}

double interference_sync(double after_s, double alone_s)
{
    double d = after_s - alone_s;
    if (!(d > 0.0)) /* faster after compute is noise (NaN: nothing measured): no latency */
        return 0.0;
    return d < FSMOE_MAX_SYNC_S ? d : FSMOE_MAX_SYNC_S;
}

int interference_wanted(const bench_suite *s)
{
    const bench_options *o = s->opt;
    return o->interference && s->topo->size > 1 && o->ops[FSMOE_OP_ALLTOALL] &&
           o->ops[FSMOE_OP_GEMM] && s->n_shapes > 0;
}

static int intf_reps(const bench_options *o)
{
    int r = o->iters > INTF_MIN_REPS ? o->iters : INTF_MIN_REPS;
    return r < BENCH_INTF_MAX_REPS ? r : BENCH_INTF_MAX_REPS;
}

long interference_steps(const bench_suite *s)
{
    return interference_wanted(s) ? intf_reps(s->opt) + 1 : 0; /* + calibration and check */
}

typedef struct {
    comm_backend *b;
    comm_group *g;      /* the world */
    measure_cfg m;      /* every rank at once */
    int P, rank;
    comm_dtype t;
    coll_shape sh;      /* one AllToAll's */
    void *send, *recv, *hrecv;
    int K, J;           /* AllToAlls and GEMMs per phase */
    coll_shape small;   /* the sync phases' AllToAll: one element per peer */
    int L, G, Ts;       /* sync rounds, and GEMMs (of Ts rows) before each round's AllToAll */
    double sync_sum;    /* the last sync phase's timed AllToAlls on this rank, summed */
    int T, M, H;        /* the GEMM (T x M)(M x H) */
    float *A, *B, *C;   /* backend: (T_max, M), (M, H), (T_max, H) */
    float *hA, *hB;     /* host: A and B as filled, for the check */
    float *hC;          /* NULL where the backend's memory is the host's */
    double t_a, t_g;    /* the last concurrent run's ends, from its start */
} intf_ctx;

/* K AllToAlls submitted to the communication stream, as a run issues them (not synced). */
static fsmoe_status intf_alltoalls(intf_ctx *c, fsmoe_error *err)
{
    fsmoe_status st = FSMOE_OK;
    for (int i = 0; i < c->K && !st; i++)
        st = op_alltoall.run(c->b, c->g, c->send, c->recv, &c->sh, c->t, COMM_SUM,
                             COMM_STREAM_COMM, err);
    return st;
}

/* n GEMMs of `rows` rows on stream 0 (the caller's), then that stream synced. */
static fsmoe_status intf_gemms(intf_ctx *c, int rows, int n, fsmoe_error *err)
{
    fsmoe_status st = FSMOE_OK;
    for (int i = 0; i < n && !st; i++)
        st = c->b->gemm(c->b, rows, c->H, c->M, c->A, c->B, c->C, 0, err);
    return st ? st : c->b->sync(c->b, 0, err);
}

static fsmoe_status intf_comm_alone(void *arg, fsmoe_error *err)
{
    intf_ctx *c = arg;
    fsmoe_status st = intf_alltoalls(c, err);
    fsmoe_status st_sync = c->b->sync(c->b, COMM_STREAM_COMM, st ? NULL : err);
    return st ? st : st_sync;
}

static fsmoe_status intf_gemm_alone(void *arg, fsmoe_error *err)
{
    intf_ctx *c = arg;
    return intf_gemms(c, c->T, c->J, err);
}

/* The comm stream's end, seen from a second thread. The backend has no hook that runs a host
 * function on a stream and no timing events, and on the mpi backend the caller's thread is
 * inside the GEMMs (stream 0 runs on it) until they end, so only another thread can see the
 * AllToAlls end first. It blocks in the stream's sync (a condition variable on the mpi
 * backend; cudaStreamSynchronize of the stream's handle on nccl) and reads the clock when that
 * returns: when a sync on the caller would have returned, late by one wake-up. It calls
 * nothing else of the backend. */
typedef struct {
    comm_backend *b;
    double end_s;
    fsmoe_status st;
    fsmoe_error err;
} intf_waiter;

static void *intf_wait_comm(void *arg)
{
    intf_waiter *w = arg;
    w->st = w->b->sync(w->b, COMM_STREAM_COMM, &w->err);
    w->end_s = measure_now();
    return NULL;
}

/* Together: the AllToAlls submitted, then at once the GEMMs; t_g and t_a from the common start.
 * The waiter starts after the submissions (a sync before them would find the stream empty):
 * its creation, some tens of microseconds, delays the GEMMs' start by that much. */
static fsmoe_status intf_together(void *arg, fsmoe_error *err)
{
    intf_ctx *c = arg;
    intf_waiter w = {.b = c->b};
    pthread_t waiter;
    double t0 = measure_now();
    fsmoe_status st = intf_alltoalls(c, err);
    int rc = st ? 0 : pthread_create(&waiter, NULL, intf_wait_comm, &w);
    if (st || rc != 0) {
        c->b->sync(c->b, COMM_STREAM_COMM, NULL); /* nothing of it may outlive this run */
        return st ? st
                  : fsmoe_fail(err, FSMOE_ERR_INTERNAL,
                               "cannot start a thread to wait for the comm stream: %s",
                               strerror(rc));
    }
    st = intf_gemms(c, c->T, c->J, err);
    c->t_g = measure_now() - t0;
    pthread_join(waiter, NULL);
    c->t_a = w.end_s - t0;
    if (!st && w.st) {
        if (err)
            *err = w.err;
        st = w.st;
    }
    return st;
}

/* One small AllToAll on the comm stream, waited for as a blocking collective of a training
 * step is; its time on this rank, from the submission to the sync's return, goes to sync_sum. */
static fsmoe_status intf_small_alltoall(intf_ctx *c, fsmoe_error *err)
{
    double t0 = measure_now();
    fsmoe_status st = op_alltoall.run(c->b, c->g, c->send, c->recv, &c->small, c->t, COMM_SUM,
                                      COMM_STREAM_COMM, err);
    fsmoe_status st_sync = c->b->sync(c->b, COMM_STREAM_COMM, st ? NULL : err);
    c->sync_sum += measure_now() - t0;
    return st ? st : st_sync;
}

/* A sync phase: L rounds of G GEMMs (none where `gemms` is 0: back to back) and one small
 * AllToAll, the AllToAlls' times summed in sync_sum. A first, untimed AllToAll absorbs the
 * barrier's skew (up to a nap of 1 ms where ranks wait asleep): the skew left is the one the
 * GEMMs and the scheduling create. */
static fsmoe_status intf_sync_phase(intf_ctx *c, int gemms, fsmoe_error *err)
{
    fsmoe_status st = intf_small_alltoall(c, err);
    c->sync_sum = 0.0;
    for (int i = 0; i < c->L && !st; i++) {
        if (gemms)
            st = intf_gemms(c, c->Ts, c->G, err);
        if (!st)
            st = intf_small_alltoall(c, err);
    }
    return st;
}

static fsmoe_status intf_sync_after(void *arg, fsmoe_error *err)
{
    return intf_sync_phase(arg, 1, err);
}

static fsmoe_status intf_sync_alone(void *arg, fsmoe_error *err)
{
    return intf_sync_phase(arg, 0, err);
}

/* One timed run of fn, every rank at once after a barrier of all; the slowest rank's time, the
 * same on every rank. */
static fsmoe_status intf_time_slowest(intf_ctx *c, measure_fn fn, double *slowest,
                                      fsmoe_error *err)
{
    double mine = 0.0;
    fsmoe_status st = measure_sample(&c->m, fn, c, 1, &mine, err);
    if (st)
        return st;
    return fsmoe_mpi_allreduce(c->m.world, &mine, slowest, 1, MPI_DOUBLE, MPI_MAX,
                               "the slowest calibration run (MPI_Allreduce)", err);
}

static void intf_set_bytes(intf_ctx *c, long long bytes)
{
    op_alltoall.shape((size_t)bytes, comm_dtype_size(c->t), c->P, &c->sh);
}

static void intf_set_rows(intf_ctx *c, long long rows)
{
    c->T = (int)rows;
}

/* The operations that bring a phase of `seconds` per `count` operations to INTF_TARGET_S. */
static int intf_count(int count, double seconds)
{
    double n = seconds > 0.0 ? count * INTF_TARGET_S / seconds + 0.5 : INTF_MAX_OPS;
    return n < 1.0 ? 1 : n > INTF_MAX_OPS ? INTF_MAX_OPS : (int)n;
}

/* Sizes one phase (fn runs *count operations): after an untimed run (the link idled through
 * the GEMM section: TCP restarts slowly after idling, and the first AllToAll of -e bytes on
 * the emulated cluster took 5 times the next), a size whose operation takes longer than
 * INTF_LONGEST_S shrinks in proportion to the target (at least to `least`), at most twice,
 * each time timed again; then the count from one operation's time, and once more from the
 * whole phase's (operations back to back run faster than one alone: a lone AllToAll pays the
 * hand-over to the stream thread and the barrier's skew, so the count from it alone left the
 * phase at a third of the target). Every decision follows from the slowest rank's times: all
 * ranks agree on it. */
static fsmoe_status intf_calibrate(intf_ctx *c, measure_fn fn, void (*set)(intf_ctx *, long long),
                                   long long size, long long least, int *count,
                                   fsmoe_error *err)
{
    double untimed, one = 0.0, phase = 0.0;
    fsmoe_status st;
    *count = 1;
    set(c, size);
    if ((st = measure_sample(&c->m, fn, c, 1, &untimed, err)))
        return st;
    for (int tries = 0;; tries++) {
        set(c, size);
        if ((st = intf_time_slowest(c, fn, &one, err)))
            return st;
        if (one <= INTF_LONGEST_S || tries == 2)
            break;
        long long smaller = (long long)((double)size * (INTF_TARGET_S / one));
        if (smaller < least)
            smaller = least;
        if (smaller >= size)
            break;
        size = smaller;
    }
    *count = intf_count(1, one);
    if (!(st = intf_time_slowest(c, fn, &phase, err)))
        *count = intf_count(*count, phase);
    return st;
}

/* One concurrent run over poisoned outputs, then the wrong values of the AllToAll's output
 * (exact) and of the GEMM's (a sample, op_gemm.h) on this rank; untimed. */
static fsmoe_status intf_check(intf_ctx *c, int check, long long *wrong, fsmoe_error *err)
{
    size_t recv_bytes = c->sh.recv_elems * comm_dtype_size(c->t),
           c_bytes = (size_t)c->T * (size_t)c->H * sizeof(float);
    double untimed;
    fsmoe_status st;
    *wrong = 0;
    if (check && ((st = suite_poison_buf(c->b, c->recv, c->hrecv, recv_bytes, err)) ||
                  (st = suite_poison_buf(c->b, c->C, c->hC, c_bytes, err))))
        return st;
    if ((st = measure_sample(&c->m, intf_together, c, 1, &untimed, err)) || !check)
        return st;
    const void *out, *C;
    if ((st = suite_host_view(c->b, c->recv, c->hrecv, recv_bytes, &out, err)) ||
        (st = suite_host_view(c->b, c->C, c->hC, c_bytes, &C, err)))
        return st;
    *wrong = (long long)op_alltoall.check(c->t, COMM_SUM, c->rank, c->P, &c->sh, out) +
             (long long)gemm_check(c->hA, c->hB, C, c->T, c->H, c->M);
    return FSMOE_OK;
}

/* The sync phases of one repetition, after the others: this rank's time per small AllToAll
 * back to back and after the GEMMs (the whole phase's wall time is not what is measured). */
static fsmoe_status intf_sync_rep(intf_ctx *c, bench_intf_rep *x, fsmoe_error *err)
{
    double untimed;
    fsmoe_status st = measure_sample(&c->m, intf_sync_alone, c, 1, &untimed, err);
    if (st)
        return st;
    x->sync_alone_s = c->sync_sum / c->L;
    if ((st = measure_sample(&c->m, intf_sync_after, c, 1, &untimed, err)))
        return st;
    x->sync_after_s = c->sync_sum / c->L;
    return FSMOE_OK;
}

/* R repetitions of the three phases (AllToAlls alone, GEMMs alone, together), odd ones in the
 * reverse order, each followed by the two sync phases; this rank's times. */
static fsmoe_status intf_repeat(intf_ctx *c, bench_intf_rep *mine, int reps, progress *prog,
                                fsmoe_error *err)
{
    static const measure_fn phase[3] = {intf_comm_alone, intf_gemm_alone, intf_together};
    char label[64];
    for (int r = 0; r < reps; r++) {
        snprintf(label, sizeof label, "interference repetition %d/%d", r + 1, reps);
        progress_step(prog, label);
        bench_intf_rep *x = &mine[r];
        double both, *seconds[3] = {&x->T_a, &x->T_g, &both};
        x->together_first = r % 2;
        for (int k = 0; k < 3; k++) {
            int p = x->together_first ? 2 - k : k;
            fsmoe_status st = measure_sample(&c->m, phase[p], c, 1, seconds[p], err);
            if (st)
                return st;
        }
        x->t_a = c->t_a;
        x->t_g = c->t_g;
        fsmoe_status st = intf_sync_rep(c, x, err);
        if (st)
            return st;
    }
    return FSMOE_OK;
}

/* The factors of each repetition and the profile's, from the group's times: per repetition
 * MPI_MAX over the ranks of T_a, T_g, t_a and t_g (when the last rank's AllToAlls and GEMMs
 * ended), the factors of the fluid model from those, their medians over the repetitions.
 *
 * Why the group's times and not each rank's factors averaged (-a): the AllToAll is one
 * operation of all ranks and moves at the pace of its slowest member, so it runs slowed as long
 * as the GEMMs of any rank run. Inverted per rank, a rank whose GEMMs ended early saw the
 * AllToAll go on, still held back by the others, for longer than it takes alone (t_a - t_g >
 * T_a, the model's denominator negative) and got the largest factor whatever the truth: on 4
 * ranks sharing 2 cores the ranks' GEMMs ended 25 to 70 ms into one run, and the ranks'
 * comm factors of one repetition ranged from 14 to 100. The GEMMs' phase of a synchronous step
 * likewise ends with its slowest rank (the collective after it waits for that one), and the
 * simulator applies one pair of factors to every rank. So -a does not apply here. */
static fsmoe_status intf_combine(const intf_ctx *c, const bench_intf_rep *mine, int reps,
                                 bench_interference *res, fsmoe_error *err)
{
    enum { COLS = 4 };
    double v[COLS * BENCH_INTF_MAX_REPS], g[COLS * BENCH_INTF_MAX_REPS];
    double comm[BENCH_INTF_MAX_REPS], compute[BENCH_INTF_MAX_REPS];
    for (int r = 0; r < reps; r++) {
        const bench_intf_rep *x = &mine[r];
        double row[COLS] = {x->T_a, x->T_g, x->t_a, x->t_g};
        memcpy(&v[COLS * r], row, sizeof row);
    }
    fsmoe_status st = fsmoe_mpi_allreduce(c->m.world, v, g, COLS * reps, MPI_DOUBLE, MPI_MAX,
                                          "the group's times (MPI_Allreduce)", err);
    if (st)
        return st;
    for (int r = 0; r < reps; r++) {
        const double *t = &g[COLS * r];
        interference_factors(t[0], t[1], t[2], t[3], &comm[r], &compute[r]);
        res->rep[r] = (bench_intf_rep){.together_first = mine[r].together_first, .T_a = t[0],
                                       .T_g = t[1], .t_a = t[2], .t_g = t[3],
                                       .comm_slowdown = comm[r], .compute_slowdown = compute[r]};
    }
    res->reps = reps;
    res->comm_slowdown = measure_median(comm, reps); /* sorts: after the rows took theirs */
    res->compute_slowdown = measure_median(compute, reps);
    return FSMOE_OK;
}

/* The sync latency of each repetition and the profile's: per repetition the MEAN over the
 * ranks of the per-call times after the GEMMs and back to back, the latency their difference
 * (interference_sync), the profile's its median over the repetitions (intf_combine's rows must
 * be in place: this adds to them).
 *
 * Why the mean and not the last rank's times, as for the factors: a rank's collective after
 * computation lasts its wait for the last rank to arrive, plus the collective itself. With
 * arrivals c_i and the collective's own time a, rank i sees max(c) - c_i + a, and the mean of
 * that over the ranks is max(c) - mean(c) + a. The simulator gives every rank the same times:
 * the GEMMs' fitted time (the ranks' typical speed, about mean(c)), then the collective's. The
 * real step goes on at max(c) + a, so the time missing is max(c) - mean(c), which the mean of
 * the ranks' waits gives. The last rank's (the longest) wait would charge every rank the first
 * arrival's wait, max(c) - min(c): the slow ranks' extra time counted twice. */
static fsmoe_status intf_combine_sync(const intf_ctx *c, const bench_intf_rep *mine, int reps,
                                      bench_interference *res, fsmoe_error *err)
{
    double v[2 * BENCH_INTF_MAX_REPS], sum[2 * BENCH_INTF_MAX_REPS];
    double after[BENCH_INTF_MAX_REPS], alone[BENCH_INTF_MAX_REPS], sync[BENCH_INTF_MAX_REPS];
    double gemm_s[BENCH_INTF_MAX_REPS];
    for (int r = 0; r < reps; r++) {
        v[2 * r] = mine[r].sync_after_s;
        v[2 * r + 1] = mine[r].sync_alone_s;
    }
    fsmoe_status st = fsmoe_mpi_allreduce(c->m.world, v, sum, 2 * reps, MPI_DOUBLE, MPI_SUM,
                                          "the ranks' sync times (MPI_Allreduce)", err);
    if (st)
        return st;
    for (int r = 0; r < reps; r++) {
        bench_intf_rep *x = &res->rep[r];
        x->sync_after_s = after[r] = sum[2 * r] / c->P;
        x->sync_alone_s = alone[r] = sum[2 * r + 1] / c->P;
        x->sync_s = sync[r] = interference_sync(after[r], alone[r]);
        /* one round's GEMMs, at the last rank's pace */
        gemm_s[r] = x->T_g / c->J * c->G * ((double)c->Ts / c->T);
    }
    res->sync_s = measure_median(sync, reps); /* sorts: after the rows took theirs */
    res->sync_after_s = measure_median(after, reps);
    res->sync_alone_s = measure_median(alone, reps);
    res->sync_gemm_s = measure_median(gemm_s, reps);
    return FSMOE_OK;
}

/* The GEMM's operands at the sweep's largest T (T_max rows): on the backend, and on the host
 * for the fill and the check. One shape at a time, as the GEMM section held them (the memory
 * check of main.c counts that). */
static fsmoe_status intf_gemm_alloc(intf_ctx *c, size_t T_max, fsmoe_error *err)
{
    comm_backend *b = c->b;
    size_t a = T_max * (size_t)c->M, w = (size_t)c->M * (size_t)c->H, o = T_max * (size_t)c->H;
    size_t bytes[3] = {a * sizeof(float), w * sizeof(float), o * sizeof(float)};
    void *p[3] = {NULL, NULL, NULL};
    fsmoe_status st = FSMOE_OK;
    c->hA = malloc(bytes[0]);
    c->hB = malloc(bytes[1]);
    c->hC = b->host_memory ? NULL : malloc(bytes[2]);
    if (!c->hA || !c->hB || (!b->host_memory && !c->hC))
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "out of memory for the GEMM %zu x %d x %d",
                          T_max, c->M, c->H);
    gemm_fill(c->hA, a, c->hB, w, 2);
    for (int i = 0; i < 3 && !st; i++)
        st = b->alloc(b, bytes[i], &p[i], err);
    c->A = p[0];
    c->B = p[1];
    c->C = p[2];
    if (!st && !(st = b->upload(b, c->A, c->hA, bytes[0], err)))
        st = b->upload(b, c->B, c->hB, bytes[1], err);
    return st;
}

static void intf_free(intf_ctx *c)
{
    if (c->g)
        c->b->group_free(c->b, &c->g);
    if (c->A)
        c->b->release(c->b, c->A);
    if (c->B)
        c->b->release(c->b, c->B);
    if (c->C)
        c->b->release(c->b, c->C);
    free(c->hA);
    free(c->hB);
    free(c->hC);
}

/* The section's header and the profile's description of what was measured. */
static void intf_describe(const bench_suite *s, const intf_ctx *c, bench_interference *res)
{
    char detail[320], note[128] = "";
    if (c->m.sleep)
        snprintf(note, sizeof note, "; waits asleep (%d ranks on %d cores)", s->machine_ranks,
                 s->machine_cores);
    snprintf(detail, sizeof detail,
             "%d x alltoall of %zu B on the comm stream beside %d x gemm (%d x %d)(%d x %d) on "
             "stream 0, every rank at once; sync: %d x (%d x gemm of %d rows, alltoall of %zu "
             "B)%s",
             c->K, c->sh.bytes, c->J, c->T, c->M, c->M, c->H, c->L, c->G, c->Ts, c->small.bytes,
             note);
    report_section(s->rep, "interference", "world", c->P, 1, detail);
    snprintf(res->measured_how, sizeof res->measured_how,
             "fsmoe-bench: %d x world alltoall %zu B (%d ranks, comm stream) beside %d x gemm "
             "(%d x %d)(%d x %d) (stream 0), ranks at once, last rank's times; sync: alltoall "
             "%zu B after %d gemms minus back to back, ranks' mean; medians of %d reps",
             c->K, c->sh.bytes, c->P, c->J, c->T, c->M, c->M, c->H, c->small.bytes, c->G,
             intf_reps(s->opt));
    res->ranks = c->P;
    res->bytes = c->sh.bytes;
    res->K = c->K;
    res->J = c->J;
    res->sync_bytes = c->small.bytes;
    res->L = c->L;
    res->G = c->G;
    res->T = c->T;
    res->M = c->M;
    res->H = c->H;
}

/* The sync phases' sizes, from the calibrated J: G GEMMs of Ts rows (about
 * INTF_SYNC_COMPUTE_S together) before each of L = INTF_SYNC_ROUNDS small AllToAlls, so that a
 * phase's GEMMs take about as long as the J of the other phases (R repetitions of it stay
 * within a second or so). The AllToAll has one element per peer, the least there is: alone its
 * time is the collective's latency (its α) and nothing else, so what it gains after
 * computation is the wait for the last rank, which the cost model adds to α, not a bandwidth
 * term the GEMMs' contention could stretch as well (comm_slowdown measures that). */
static void intf_sync_setup(intf_ctx *c, long long least_bytes)
{
    op_alltoall.shape((size_t)least_bytes, comm_dtype_size(c->t), c->P, &c->small);
    c->L = INTF_SYNC_ROUNDS;
    /* one calibrated GEMM takes about INTF_TARGET_S / J: as many as make the round's time, or
     * one of fewer rows where a single one takes longer */
    double one = INTF_TARGET_S / c->J;
    c->Ts = c->T;
    c->G = (int)(INTF_SYNC_COMPUTE_S / one + 0.5);
    if (c->G < 1) {
        c->G = 1;
        c->Ts = (int)(c->T * (INTF_SYNC_COMPUTE_S / one));
        if (c->Ts < 1)
            c->Ts = 1;
    }
}

/* The world AllToAll's input (every size's is a prefix of the largest one's), the GEMM's
 * operands and the world group. */
static fsmoe_status intf_setup(bench_suite *s, intf_ctx *c, void *hsend, size_t T_max,
                               fsmoe_error *err)
{
    const bench_options *o = s->opt;
    coll_shape largest;
    op_alltoall.shape((size_t)o->max_bytes, comm_dtype_size(c->t), c->P, &largest);
    op_alltoall.fill(c->t, c->rank, c->P, &largest, hsend);
    fsmoe_status st =
        c->b->upload(c->b, c->send, hsend, largest.send_elems * comm_dtype_size(c->t), err);
    if (!st)
        st = intf_gemm_alloc(c, T_max, err);
    if (!st)
        st = c->b->group_init(c->b, s->mcfg.world, s->topo->node, &c->g, err);
    return st;
}

fsmoe_status interference_run(bench_suite *s, void *dsend, void *drecv, void *hsend, void *hrecv,
                              fsmoe_error *err)
{
    const bench_options *o = s->opt;
    bench_interference *res = &s->res->interference;
    bench_intf_rep mine[BENCH_INTF_MAX_REPS];
    int reps = intf_reps(o);
    intf_ctx c = {.b = s->b, .t = o->dtype, .send = dsend, .recv = drecv, .hrecv = hrecv,
                  .M = s->shapes[0].M, .H = s->shapes[0].H};
    /* Every rank at once, started by a barrier of all (asleep where ranks outnumber cores):
     * no rounds and no pinning, as in training. */
    c.m = s->mcfg;
    c.m.group = s->mcfg.world;
    c.m.round = 0;
    c.m.rounds = 1;
    c.m.cpu = -1;
    c.m.sleep = s->oversubscription > 1;
    MPI_Comm_size(s->mcfg.world, &c.P);
    MPI_Comm_rank(s->mcfg.world, &c.rank);
    long long T_max = o->gemm_max / c.M > 0 ? o->gemm_max / c.M : 1;
    long long least_bytes = (long long)(c.P * comm_dtype_size(c.t)); /* an element per peer */
    long long wrong = 0;
    fsmoe_status st;
    progress_step(s->prog, "interference calibration");
    if ((st = intf_setup(s, &c, hsend, (size_t)T_max, err)) ||
        (st = intf_calibrate(&c, intf_comm_alone, intf_set_bytes, o->max_bytes, least_bytes,
                             &c.K, err)) ||
        (st = intf_calibrate(&c, intf_gemm_alone, intf_set_rows, T_max, 1, &c.J, err)))
        goto fail;
    intf_sync_setup(&c, least_bytes);
    progress_clear(s->prog);
    intf_describe(s, &c, res);
    if ((st = intf_check(&c, o->check, &wrong, err)) ||
        (st = fsmoe_mpi_allreduce(s->mcfg.world, &wrong, &res->wrong, 1, MPI_LONG_LONG, MPI_SUM,
                                  "summing the wrong values (MPI_Allreduce)", err)) ||
        (st = intf_repeat(&c, mine, reps, s->prog, err)) ||
        (st = intf_combine(&c, mine, reps, res, err)) ||
        (st = intf_combine_sync(&c, mine, reps, res, err)))
        goto fail;
    res->measured = 1;
    progress_clear(s->prog);
    report_interference(s->rep, res);
fail:
    intf_free(&c);
    return st;
}
