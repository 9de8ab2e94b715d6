/* Implements: the scalar type of the runtime and the FSMOE_HD qualifier (style.md "CPU and GPU
 * share the math").
 *
 * The runtime is fp32 (the specification). The same sources are also compiled once with
 * -DFSMOE_REAL_DOUBLE into a double-precision copy used only by the finite-difference gradient
 * tests (design.md §10: double precision where needed). CUDA builds are fp32 only. */
#ifndef RT_REAL_H
#define RT_REAL_H

#if defined(FSMOE_REAL_DOUBLE)
typedef double real;
#define REAL_IS_DOUBLE 1
#else
typedef float real;
#define REAL_IS_DOUBLE 0
#endif

#if defined(__CUDACC__)
#define FSMOE_HD __host__ __device__ __forceinline__
#else
#define FSMOE_HD static inline
#endif

/* Before a loop that sums a column down the rows on one GPU thread: unrolled, the thread issues
 * the next rows' loads before the previous additions finish (the additions keep their order);
 * rolled, each of thousands of rows costs a memory latency. Nothing on the host. */
#if defined(__CUDA_ARCH__)
#define FSMOE_UNROLL_ROWS _Pragma("unroll 8")
#else
#define FSMOE_UNROLL_ROWS
#endif

#endif
