/* Implements: the element types and reduction operators fsmoe-bench measures with (nccl-tests
 * flags -d and --op), and the exactly predictable inputs every result is verified against
 * (nccl-tests' #wrong column, style.md "Tests").
 *
 * Every element is a small integer, v(rank, i) = h(i) + rank with h(i) = hash(i) mod 9 − 4
 * (+4 for the unsigned types), so sums, minima and maxima over a group are exact in every type
 * (floats included, up to about 4000 ranks), have closed forms (the check costs O(1) per
 * element), and the expected output of each collective is known without running it. A block
 * from the wrong peer differs by the rank term, a misplaced block by h. Products are exact
 * only while (4 + P)^P stays below 2^24 in float (P ≤ 6); uint8 wraps modulo 256 like the
 * hardware, and the expected values wrap the same way. */
#ifndef BENCH_DTYPE_H
#define BENCH_DTYPE_H

#include <stddef.h>

#include "cli.h"

typedef enum {
    BENCH_FLOAT = 0,
    BENCH_DOUBLE,
    BENCH_INT32,
    BENCH_UINT32,
    BENCH_INT64,
    BENCH_UINT64,
    BENCH_UINT8,
    BENCH_DTYPE_COUNT
} bench_dtype;

typedef enum { BENCH_SUM = 0, BENCH_PROD, BENCH_MIN, BENCH_MAX, BENCH_REDOP_COUNT } bench_redop;

extern const fsmoe_cli_enum bench_dtype_names[]; /* {"float", BENCH_FLOAT}, ..., {NULL, 0} */
extern const fsmoe_cli_enum bench_redop_names[];

const char *dtype_name(bench_dtype t);
size_t dtype_size(bench_dtype t);
const char *redop_name(bench_redop op);

/* Writes v(rank, first + j) for j < count into buf (count elements of type t). */
void dtype_fill(bench_dtype t, void *buf, int rank, size_t first, size_t count);

/* The reduction over ranks 0..P−1 of v(p, i), as a double (exact), then as stored in type t. */
double dtype_reduce_pattern(bench_dtype t, bench_redop op, int P, size_t i);

/* How many of the count elements of buf (type t) differ from v(rank, first + j), and from
 * the reduction over ranks 0..P−1 of v(p, first + j): the checks of every operation. */
size_t dtype_count_wrong(bench_dtype t, const void *buf, int rank, size_t first, size_t count);
size_t dtype_count_wrong_reduced(bench_dtype t, bench_redop op, int P, const void *buf,
                                 size_t first, size_t count);

/* Element j of buf (type t) as a double. */
double dtype_get(bench_dtype t, const void *buf, size_t j);

#endif
