/* Implements: GEMM shapes, inputs and checks (op_gemm.h). */
#include "op_gemm.h"

#include "comm_dtype.h"

/* design.md §11: M, H of each reference model's expert. */
static const gemm_shape reference_shapes[] = {
    {1600, 6400},  /* gpt2-xl-moe */
    {4096, 14336}, /* mixtral-8x7b */
    {6144, 16384}, /* mixtral-8x22b */
    {768, 3072},   /* bert-base-moe */
    {8192, 28672}, /* llama-2x70b-moe */
    {64, 256},     /* tiny-moe */
};

int gemm_default_shapes(bench_backend_kind kind, int gpus_per_node, gemm_shape *out, int max)
{
    int n = 0;
    int G = gpus_per_node > 0 ? gpus_per_node : 1;
    for (size_t i = 0; i < sizeof reference_shapes / sizeof reference_shapes[0]; i++) {
        gemm_shape s = reference_shapes[i];
        /* A CPU does ~0.1 TFLOP/s: at FSMoE's sizes the large experts would take minutes per
         * point, so the CPU backend measures the shapes it can train (tiny-moe). */
        if (kind == BACKEND_MPI && s.M > 64)
            continue;
        s.H = s.H / G > 0 ? s.H / G : 1;
        if (n < max)
            out[n++] = s;
    }
    return n;
}

void gemm_fill(float *A, size_t a_elems, float *B, size_t b_elems, int seed)
{
    if (A)
        comm_pattern_fill(COMM_FLOAT, A, 1, 0, a_elems);
    comm_pattern_fill(COMM_FLOAT, B, seed, 0, b_elems);
}

size_t gemm_check(const float *A, const float *B, const float *C, int m, int n, int k)
{
    size_t total = (size_t)m * (size_t)n, samples = total <= 4096 ? total : 512, wrong = 0;
    for (size_t s = 0; s < samples; s++) {
        size_t idx = samples == total ? s : (s * 2654435761u + 12345u) % total;
        if (s == samples - 1 && samples != total)
            idx = total - 1; /* always the last entry */
        size_t i = idx / (size_t)n, j = idx % (size_t)n;
        double ref = 0.0;
        for (int l = 0; l < k; l++)
            ref += (double)A[i * (size_t)k + (size_t)l] * (double)B[(size_t)l * (size_t)n + j];
        wrong += (double)C[idx] != ref;
    }
    return wrong;
}
