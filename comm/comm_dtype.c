/* Implements: element types, reduction operators and the predictable input pattern (comm_dtype.h). */
#include "comm_dtype.h"

#include <stdint.h>

const fsmoe_cli_enum comm_dtype_names[] = {
    {"float", COMM_FLOAT},   {"double", COMM_DOUBLE}, {"int32", COMM_INT32},
    {"uint32", COMM_UINT32}, {"int64", COMM_INT64},   {"uint64", COMM_UINT64},
    {"uint8", COMM_UINT8},   {NULL, 0},
};

const fsmoe_cli_enum comm_redop_names[] = {
    {"sum", COMM_SUM}, {"prod", COMM_PROD}, {"min", COMM_MIN}, {"max", COMM_MAX}, {NULL, 0},
};

static const size_t dtype_sizes[COMM_DTYPE_COUNT] = {
    [COMM_FLOAT] = 4, [COMM_DOUBLE] = 8, [COMM_INT32] = 4, [COMM_UINT32] = 4,
    [COMM_INT64] = 8, [COMM_UINT64] = 8, [COMM_UINT8] = 1,
};

const char *comm_dtype_name(comm_dtype t)
{
    return comm_dtype_names[t].name;
}

size_t comm_dtype_size(comm_dtype t)
{
    return dtype_sizes[t];
}

const char *comm_redop_name(comm_redop op)
{
    return comm_redop_names[op].name;
}

static int dtype_is_unsigned(comm_dtype t)
{
    return t == COMM_UINT32 || t == COMM_UINT64 || t == COMM_UINT8;
}

/* h(i): a hash of i, tabulated over a prime period so that filling and checking cost a table
 * look-up per element (the suite checks hundreds of MB per operation). A block misplaced by
 * a multiple of 4093 elements would go unseen; block offsets here are multiples of the
 * per-peer count, which would have to be such a multiple too. */
#define PATTERN_PERIOD 4093u
static signed char pattern_table[PATTERN_PERIOD];
static int pattern_ready;

static void pattern_init(void)
{
    if (pattern_ready)
        return;
    for (uint64_t i = 0; i < PATTERN_PERIOD; i++) {
        uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull;
        x ^= x >> 31;
        x *= 0x94D049BB133111EBull;
        x ^= x >> 29;
        pattern_table[i] = (signed char)((int)(x % 9u) - 4);
    }
    pattern_ready = 1;
}

static double pattern_h(comm_dtype t, size_t i)
{
    double h = pattern_table[i % PATTERN_PERIOD];
    return dtype_is_unsigned(t) ? h + 4.0 : h;
}

static void dtype_set(comm_dtype t, void *buf, size_t j, double v)
{
    switch (t) {
    case COMM_FLOAT: ((float *)buf)[j] = (float)v; break;
    case COMM_DOUBLE: ((double *)buf)[j] = v; break;
    case COMM_INT32: ((int32_t *)buf)[j] = (int32_t)v; break;
    case COMM_UINT32: ((uint32_t *)buf)[j] = (uint32_t)(int64_t)v; break;
    case COMM_INT64: ((int64_t *)buf)[j] = (int64_t)v; break;
    case COMM_UINT64: ((uint64_t *)buf)[j] = (uint64_t)(int64_t)v; break;
    case COMM_UINT8: ((uint8_t *)buf)[j] = (uint8_t)(int64_t)v; break;
    default: break;
    }
}

double comm_dtype_get(comm_dtype t, const void *buf, size_t j)
{
    switch (t) {
    case COMM_FLOAT: return ((const float *)buf)[j];
    case COMM_DOUBLE: return ((const double *)buf)[j];
    case COMM_INT32: return ((const int32_t *)buf)[j];
    case COMM_UINT32: return ((const uint32_t *)buf)[j];
    case COMM_INT64: return (double)((const int64_t *)buf)[j];
    case COMM_UINT64: return (double)((const uint64_t *)buf)[j];
    case COMM_UINT8: return ((const uint8_t *)buf)[j];
    default: return 0.0;
    }
}

#define PATTERN_FILL(T)                                                                    \
    do {                                                                                   \
        T *p = buf;                                                                        \
        size_t k = (first) % PATTERN_PERIOD;                                               \
        for (size_t j = 0; j < count; j++) {                                               \
            p[j] = (T)(pattern_table[k] + off);                                            \
            if (++k == PATTERN_PERIOD)                                                     \
                k = 0;                                                                     \
        }                                                                                  \
    } while (0)

void comm_pattern_fill(comm_dtype t, void *buf, int rank, size_t first, size_t count)
{
    pattern_init();
    long long off = rank + (dtype_is_unsigned(t) ? 4 : 0);
    switch (t) {
    case COMM_FLOAT: PATTERN_FILL(float); break;
    case COMM_DOUBLE: PATTERN_FILL(double); break;
    case COMM_INT32: PATTERN_FILL(int32_t); break;
    case COMM_UINT32: PATTERN_FILL(uint32_t); break;
    case COMM_INT64: PATTERN_FILL(int64_t); break;
    case COMM_UINT64: PATTERN_FILL(uint64_t); break;
    case COMM_UINT8: PATTERN_FILL(uint8_t); break;
    default: break;
    }
}

/* Value as stored in t: wraps modulo 2^8 for uint8 like the hardware does. */
static double dtype_store(comm_dtype t, double v)
{
    unsigned char tmp[8];
    dtype_set(t, tmp, 0, v);
    return comm_dtype_get(t, tmp, 0);
}

/* The reduction over p = 0..P−1 of v = h + p, as stored in t, for one value h of the hash
 * (the element's index only enters through h). */
static double reduce_of_h(comm_dtype t, comm_redop op, int P, double h)
{
    /* Closed forms over v(p, i) = h + p, p = 0..P−1, whenever no partial result wraps. */
    int wraps = t == COMM_UINT8 && h + P - 1 > 255;
    if (op == COMM_SUM && t != COMM_UINT8)
        return h * P + 0.5 * (double)P * (P - 1);
    if (op == COMM_MIN && !wraps)
        return h;
    if (op == COMM_MAX && !wraps)
        return h + P - 1;
    double acc = dtype_store(t, h);
    for (int p = 1; p < P; p++) {
        double v = dtype_store(t, h + p);
        switch (op) {
        case COMM_SUM: acc += v; break;
        case COMM_PROD: acc *= v; break;
        case COMM_MIN: acc = v < acc ? v : acc; break;
        case COMM_MAX: acc = v > acc ? v : acc; break;
        default: break;
        }
        /* Each partial result is what the type holds (uint8 wraps at every step). */
        acc = dtype_store(t, acc);
    }
    return acc;
}

double comm_pattern_reduce(comm_dtype t, comm_redop op, int P, size_t i)
{
    pattern_init();
    return reduce_of_h(t, op, P, pattern_h(t, i));
}

/* Counts j < count with buf[j] != want(first + j), where want(i) = table[h(i) + 4] and the
 * table holds the 9 expected values (one per value of the hash h); a typed loop without a
 * call per element (checking dominated the untimed time of the emulated-cluster suite). */
#define COUNT_WRONG(T)                                                                     \
    do {                                                                                   \
        const T *p = buf;                                                                  \
        T want[9];                                                                         \
        for (int v = 0; v < 9; v++)                                                        \
            want[v] = (T)table[v];                                                         \
        size_t k = first % PATTERN_PERIOD;                                                 \
        for (size_t j = 0; j < count; j++) {                                               \
            wrong += p[j] != want[pattern_table[k] + 4];                                   \
            if (++k == PATTERN_PERIOD)                                                     \
                k = 0;                                                                     \
        }                                                                                  \
    } while (0)

static size_t dtype_count_by_h(comm_dtype t, const void *buf, size_t first, size_t count,
                               const double table[9])
{
    size_t wrong = 0;
    switch (t) {
    case COMM_FLOAT: COUNT_WRONG(float); break;
    case COMM_DOUBLE: COUNT_WRONG(double); break;
    case COMM_INT32: COUNT_WRONG(int32_t); break;
    case COMM_UINT32: COUNT_WRONG(uint32_t); break;
    case COMM_INT64: COUNT_WRONG(int64_t); break;
    case COMM_UINT64: COUNT_WRONG(uint64_t); break;
    case COMM_UINT8: COUNT_WRONG(uint8_t); break;
    default: break;
    }
    return wrong;
}

/* h as pattern_h gives it for the table value v − 4 (v = 0..8). Element i of rank r holds
 * v(r, i) = h(i) + r: h catches misplaced elements, the rank term data from the wrong peer. */
static double h_of_value(comm_dtype t, int v)
{
    return (double)(v - 4) + (dtype_is_unsigned(t) ? 4.0 : 0.0);
}

size_t comm_pattern_wrong(comm_dtype t, const void *buf, int rank, size_t first, size_t count)
{
    pattern_init();
    double table[9];
    for (int v = 0; v < 9; v++)
        table[v] = dtype_store(t, h_of_value(t, v) + rank);
    return dtype_count_by_h(t, buf, first, count, table);
}

size_t comm_pattern_wrong_reduced(comm_dtype t, comm_redop op, int P, const void *buf,
                                 size_t first, size_t count)
{
    pattern_init();
    double table[9];
    for (int v = 0; v < 9; v++)
        table[v] = reduce_of_h(t, op, P, h_of_value(t, v));
    return dtype_count_by_h(t, buf, first, count, table);
}
