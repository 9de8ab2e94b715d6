/* Implements: GEMM as a measured operation (design.md §3: t = α_gemm + β_gemm·m·n·k; FSMoE
 * §6.2 sweeps 2^19 … 12·2^19 float elements). The shapes are the experts' GEMMs of the
 * reference models (design.md §11) with the hidden size sharded over ESP = G:
 * (T×M)·(M×H/G) and (T×H/G)·(H/G×M), with T·M activation elements swept.
 *
 * Inputs are small integers from the dtype pattern, so every entry of C is an exact integer in
 * fp32 whatever the summation order; a sample of entries (all of them for small C) is compared
 * with a double-precision dot product. */
#ifndef BENCH_OP_GEMM_H
#define BENCH_OP_GEMM_H

#include <stddef.h>

#include "comm_backend.h"
#include "options.h"

/* The default expert shapes for a backend ("mpi": small enough for a CPU, see op_gemm.c). */
int gemm_default_shapes(bench_backend_kind kind, int gpus_per_node, gemm_shape *out, int max);

/* Fills a_elems of A (may be NULL) and b_elems of B with small integers; `seed` tells weight
 * matrices apart (the up and down projections get different ones). */
void gemm_fill(float *A, size_t a_elems, float *B, size_t b_elems, int seed);
/* Wrong entries of C (m×n) = A·B among the checked sample. */
size_t gemm_check(const float *A, const float *B, const float *C, int m, int n, int k);

#endif
