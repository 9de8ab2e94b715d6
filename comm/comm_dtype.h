/* Implements: the element types and reduction operators of the communication layer's
 * collectives (comm_backend.h; fsmoe-bench's -d and --op, as in nccl-tests), and the exactly
 * predictable inputs every collective's result is verified against, in fsmoe-bench and in the
 * tests (nccl-tests' #wrong column, style.md "Tests").
 *
 * Every element is a small integer, v(rank, i) = h(i) + rank with h(i) = hash(i) mod 9 − 4
 * (+4 for the unsigned types), so sums, minima and maxima over a group are exact in every type
 * (floats included, up to about 4000 ranks), have closed forms (the check costs O(1) per
 * element), and the expected output of each collective is known without running it. A block
 * from the wrong peer differs by the rank term, a misplaced block by h. Products are exact
 * only while (4 + P)^P stays below 2^24 in float (P ≤ 6); uint8 wraps modulo 256 like the
 * hardware, and the expected values wrap the same way. */
#ifndef FSMOE_COMM_DTYPE_H
#define FSMOE_COMM_DTYPE_H

#include <stddef.h>

#include "cli.h"

typedef enum {
    COMM_FLOAT = 0,
    COMM_DOUBLE,
    COMM_INT32,
    COMM_UINT32,
    COMM_INT64,
    COMM_UINT64,
    COMM_UINT8,
    COMM_DTYPE_COUNT
} comm_dtype;

typedef enum { COMM_SUM = 0, COMM_PROD, COMM_MIN, COMM_MAX, COMM_REDOP_COUNT } comm_redop;

extern const fsmoe_cli_enum comm_dtype_names[]; /* {"float", COMM_FLOAT}, ..., {NULL, 0} */
extern const fsmoe_cli_enum comm_redop_names[];

const char *comm_dtype_name(comm_dtype t);
size_t comm_dtype_size(comm_dtype t);
const char *comm_redop_name(comm_redop op);

/* Writes v(rank, first + j) for j < count into buf (count elements of type t). */
void comm_pattern_fill(comm_dtype t, void *buf, int rank, size_t first, size_t count);

/* The reduction over ranks 0..P−1 of v(p, i), as a double (exact), then as stored in type t. */
double comm_pattern_reduce(comm_dtype t, comm_redop op, int P, size_t i);

/* How many of the count elements of buf (type t) differ from v(rank, first + j), and from
 * the reduction over ranks 0..P−1 of v(p, first + j): the checks of every operation. */
size_t comm_pattern_wrong(comm_dtype t, const void *buf, int rank, size_t first, size_t count);
size_t comm_pattern_wrong_reduced(comm_dtype t, comm_redop op, int P, const void *buf,
                                 size_t first, size_t count);

/* Element j of buf (type t) as a double. */
double comm_dtype_get(comm_dtype t, const void *buf, size_t j);

#endif
