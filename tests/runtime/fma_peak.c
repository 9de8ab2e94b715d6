/* Implements: the fp32 multiply-accumulate peak of this host's cores, the bound under every GEMM
 * line: T threads at once, each running 12 independent chains of vector FMAs (enough to cover
 * the FMA latency on both FMA pipes of current x86 cores), the widest vectors the CPU has
 * (AVX-512 or AVX2+FMA), best of 5 rounds. bench_vs_torch.py prints the training step's
 * multiply-accumulates at this rate beside its GEMM-bound limit: what no BLAS can beat.
 * usage: fma_peak [THREADS]   prints "fma_peak: T thread(s) X GMAC/s (ISA)"; exit 77 where the
 * CPU has neither AVX-512 nor AVX2+FMA (or it is not x86-64), 2 on a bad argument. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "../bench_clock.h"

#if defined(__x86_64__)
#include <immintrin.h>

enum { CHAINS = 12, ROUNDS = 5 };
static const long ITERS = 20000000; /* per thread and round, even: 12 chains x 20 M vector FMAs */

/* The 12 chains are named variables, not an array: an array indexed in a loop may stay in
 * memory, and its loads and stores would then be what is measured. Two rounds per loop
 * iteration, written out (24 FMAs a branch). */
#define FMA_ROUND(FMADD)                                                                       \
    a0 = FMADD(a0, b, c), a1 = FMADD(a1, b, c), a2 = FMADD(a2, b, c), a3 = FMADD(a3, b, c);     \
    a4 = FMADD(a4, b, c), a5 = FMADD(a5, b, c), a6 = FMADD(a6, b, c), a7 = FMADD(a7, b, c);     \
    a8 = FMADD(a8, b, c), a9 = FMADD(a9, b, c), a10 = FMADD(a10, b, c), a11 = FMADD(a11, b, c)
#define FMA_CHAINS(T, SET1, FMADD)                                                             \
    T a0 = SET1(0.0f), a1 = SET1(1.0f), a2 = SET1(2.0f), a3 = SET1(3.0f), a4 = SET1(4.0f),      \
      a5 = SET1(5.0f), a6 = SET1(6.0f), a7 = SET1(7.0f), a8 = SET1(8.0f), a9 = SET1(9.0f),      \
      a10 = SET1(10.0f), a11 = SET1(11.0f), b = SET1(0.9999999f), c = SET1(1e-7f);            \
    for (long i = 0; i < iters; i += 2) {                                                      \
        FMA_ROUND(FMADD);                                                                      \
        FMA_ROUND(FMADD);                                                                      \
    }                                                                                          \
    T sum = a0;                                                                                \
    T rest[] = {a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11};                                 \
    for (int j = 0; j < CHAINS - 1; j++)                                                       \
        sum = FMADD(rest[j], b, sum)

/* Each kernel returns a sum of its chains so that the compiler keeps them. */
__attribute__((target("avx512f"))) static float fma_512(long iters)
{
    FMA_CHAINS(__m512, _mm512_set1_ps, _mm512_fmadd_ps);
    return _mm512_reduce_add_ps(sum);
}

__attribute__((target("avx2,fma"))) static float fma_256(long iters)
{
    FMA_CHAINS(__m256, _mm256_set1_ps, _mm256_fmadd_ps);
    float lane[8], s = 0;
    _mm256_storeu_ps(lane, sum);
    for (int l = 0; l < 8; l++)
        s += lane[l];
    return s;
}

typedef struct {
    int wide;              /* 16 lanes (AVX-512) or 8 (AVX2) */
    pthread_barrier_t *go; /* all threads start a round together */
    volatile float sink;
} peak_job;

static void *peak_thread(void *arg)
{
    peak_job *j = arg;
    pthread_barrier_wait(j->go);
    j->sink = j->wide == 16 ? fma_512(ITERS) : fma_256(ITERS);
    return NULL;
}

int main(int argc, char **argv)
{
    long threads = 1;
    if (argc > 1) {
        char *end;
        errno = 0;
        threads = strtol(argv[1], &end, 10);
        if (errno || *end || end == argv[1] || threads < 1 || threads > 256) {
            fprintf(stderr, "fma_peak: THREADS must be 1-256, got '%s'\n", argv[1]);
            return 2;
        }
    }
    __builtin_cpu_init();
    int wide = __builtin_cpu_supports("avx512f")                                     ? 16
               : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 8
                                                                                   : 0;
    if (!wide) {
        printf("fma_peak: SKIP: the CPU has neither AVX-512 nor AVX2+FMA\n");
        return 77;
    }
    peak_job *jobs = calloc((size_t)threads, sizeof *jobs);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    pthread_barrier_t go;
    if (!jobs || !tid || pthread_barrier_init(&go, NULL, (unsigned)threads + 1) != 0) {
        fprintf(stderr, "fma_peak: cannot set up %ld threads\n", threads);
        return 1;
    }
    double best = 0;
    for (int r = 0; r < ROUNDS; r++) {
        for (long t = 0; t < threads; t++) {
            jobs[t].wide = wide, jobs[t].go = &go;
            if (pthread_create(&tid[t], NULL, peak_thread, &jobs[t]) != 0) {
                fprintf(stderr, "fma_peak: cannot start thread %ld\n", t + 1);
                return 1;
            }
        }
        pthread_barrier_wait(&go);
        double t0 = bench_now_s();
        for (long t = 0; t < threads; t++)
            pthread_join(tid[t], NULL);
        double s = bench_now_s() - t0;
        double macs = (double)threads * (double)ITERS * CHAINS * wide;
        if (macs / s > best)
            best = macs / s;
    }
    pthread_barrier_destroy(&go);
    free(jobs);
    free(tid);
    printf("fma_peak: %ld thread(s) %.2f GMAC/s (fp32 FMA, %s)\n", threads, 1e-9 * best,
           wide == 16 ? "AVX-512" : "AVX2");
    return 0;
}
#else
int main(void)
{
    printf("fma_peak: SKIP: not an x86-64 host\n");
    return 77;
}
#endif
