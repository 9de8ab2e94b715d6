/* Implements: a diagnostic of what a collective costs beside computation on a host whose ranks
 * outnumber its cores (the emulated cluster): every rank pairs with the rank P/2 away (on the
 * emulated 2 x 2 cluster, its peer on the other node) and times K AllReduces of each size
 * with it, first alone, then while a second thread of every rank runs GEMMs without pause
 * on one core each (the (300 x 256)(256 x 1024) shape of an expert's chunk). Prints, per size, the ranks' mean
 * time per call both ways and their ratio. The cost model's interference factor is measured
 * on one long AllToAll beside one long GEMM (fsmoe-bench's interference section); this shows
 * what short collectives pay (README: where the collectives' time goes).
 * usage: mpirun -np P beside_compute [BYTES...]   (P even; default sizes: 16 B and the
 * comm-moe gradient windows' 141312, 539136, 924160 B); exit 2 on a bad argument. */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <errno.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "../bench_clock.h"

enum { CALLS = 40, GM = 300, GK = 256, GN = 1024, MAX_SIZES = 16 };
static const long MAX_BYTES = 1L << 28;

typedef struct {
    atomic_int stop;
    float *a, *b, *c;
} gemm_job;

static void *gemm_loop(void *arg)
{
    gemm_job *j = arg;
    while (!atomic_load(&j->stop))
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, GM, GN, GK, 1.0f, j->a, GK, j->b,
                    GN, 0.0f, j->c, GN);
    return NULL;
}

/* The ranks' mean seconds per AllReduce of n floats with the pair, beside GEMMs or not. */
static int time_pair(MPI_Comm pair, float *x, float *y, int n, gemm_job *job, int beside,
                     double *mean)
{
    pthread_t th;
    atomic_store(&job->stop, 0);
    MPI_Barrier(MPI_COMM_WORLD);
    if (beside && pthread_create(&th, NULL, gemm_loop, job) != 0)
        return -1;
    MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, pair); /* warm-up */
    double t0 = bench_now_s();
    for (int k = 0; k < CALLS; k++)
        MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, pair);
    double t = (bench_now_s() - t0) / CALLS;
    atomic_store(&job->stop, 1);
    if (beside)
        pthread_join(th, NULL);
    int P = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Allreduce(&t, mean, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    *mean /= P;
    return 0;
}

int main(int argc, char **argv)
{
    long sizes[MAX_SIZES] = {16, 141312, 539136, 924160};
    int n_sizes = 4;
    if (argc > 1) {
        if (argc - 1 > MAX_SIZES) {
            fprintf(stderr, "beside_compute: at most %d sizes\n", MAX_SIZES);
            return 2;
        }
        n_sizes = argc - 1;
        for (int i = 0; i < n_sizes; i++) {
            char *end = NULL;
            errno = 0;
            sizes[i] = strtol(argv[i + 1], &end, 10);
            if (errno || !end || *end || sizes[i] < 4 || sizes[i] > MAX_BYTES || sizes[i] % 4) {
                fprintf(stderr,
                        "beside_compute: size '%s': expected a multiple of 4 bytes in [4, %ld]\n",
                        argv[i + 1], MAX_BYTES);
                return 2;
            }
        }
    }
    int provided = 0, rank = 0, P = 1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    if (P < 2 || P % 2) {
        if (rank == 0)
            fprintf(stderr, "beside_compute: needs an even number of ranks, got %d\n", P);
        MPI_Finalize();
        return 2;
    }
    openblas_set_num_threads(1); /* one GEMM thread per rank, as fsmoe-run --threads 1 */
    MPI_Comm pair;
    MPI_Comm_split(MPI_COMM_WORLD, rank % (P / 2), rank, &pair);
    long most = 0;
    for (int i = 0; i < n_sizes; i++)
        most = sizes[i] > most ? sizes[i] : most;
    float *x = malloc((size_t)most), *y = malloc((size_t)most);
    gemm_job job = {.a = malloc(sizeof(float) * GM * GK), .b = malloc(sizeof(float) * GK * GN),
                    .c = malloc(sizeof(float) * GM * GN)};
    int rc = 0;
    if (!x || !y || !job.a || !job.b || !job.c) {
        fprintf(stderr, "beside_compute: rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (long i = 0; i < most / 4; i++)
        x[i] = 1.0f;
    for (long i = 0; i < (long)GM * GK; i++)
        job.a[i] = 0.001f * (float)(i % 7);
    for (long i = 0; i < (long)GK * GN; i++)
        job.b[i] = 0.001f * (float)(i % 5);
    if (rank == 0)
        printf("# AllReduce between rank pairs (r, r + %d), %d calls per size, ranks' mean per "
               "call; beside: a second thread of every rank runs (%d x %d)(%d x %d) GEMMs\n"
               "%12s %12s %12s %8s\n",
               P / 2, CALLS, GM, GK, GK, GN, "bytes", "alone ms", "beside ms", "ratio");
    for (int i = 0; i < n_sizes; i++) { /* every size on every rank: the calls are collective */
        double alone = 0, beside = 0;
        int n = (int)(sizes[i] / 4);
        if (time_pair(pair, x, y, n, &job, 0, &alone) || time_pair(pair, x, y, n, &job, 1, &beside)) {
            fprintf(stderr, "beside_compute: rank %d: cannot start the GEMM thread\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (rank == 0)
            printf("%12ld %12.3f %12.3f %8.1f\n", sizes[i], 1e3 * alone, 1e3 * beside,
                   beside / alone);
        if (y[0] != 2.0f) {
            fprintf(stderr, "beside_compute: rank %d: the AllReduce gave %g, expected 2\n", rank,
                    (double)y[0]);
            rc = 1;
        }
    }
    free(x), free(y), free(job.a), free(job.b), free(job.c);
    MPI_Comm_free(&pair);
    MPI_Finalize();
    return rc;
}
