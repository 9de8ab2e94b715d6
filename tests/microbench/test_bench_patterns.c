/* Implements: tests of the predictable inputs and exact checks (microbench/dtype.c and the
 * op_*.c checks). Each collective is simulated on the host from the ranks' filled inputs,
 * independently of the closed forms the checks use; the checks must report 0 wrong on the
 * simulated output and catch a single corrupted element, a block from the wrong peer and a
 * block at the wrong place. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "comm_dtype.h"
#include "op_collective.h"
#include "op_gemm.h"
#include "op_saa.h"

/* Brute-force reduction of the filled inputs, in the type (so uint8 wraps like MPI does). */
static void host_reduce(comm_dtype t, comm_redop op, int P, size_t n, void *out)
{
    size_t es = comm_dtype_size(t);
    unsigned char *tmp = malloc(n * es);
    comm_pattern_fill(t, out, 0, 0, n);
    for (int p = 1; p < P; p++) {
        comm_pattern_fill(t, tmp, p, 0, n);
        for (size_t i = 0; i < n; i++) {
            double a = comm_dtype_get(t, out, i), b = comm_dtype_get(t, tmp, i), r = a;
            switch (op) {
            case COMM_SUM: r = a + b; break;
            case COMM_PROD: r = a * b; break;
            case COMM_MIN: r = b < a ? b : a; break;
            case COMM_MAX: r = b > a ? b : a; break;
            default: break;
            }
            /* store through a one-element fill-free path: write r as the type */
            switch (t) {
            case COMM_FLOAT: ((float *)out)[i] = (float)r; break;
            case COMM_DOUBLE: ((double *)out)[i] = r; break;
            case COMM_INT32: ((int32_t *)out)[i] = (int32_t)r; break;
            case COMM_UINT32: ((uint32_t *)out)[i] = (uint32_t)(int64_t)r; break;
            case COMM_INT64: ((int64_t *)out)[i] = (int64_t)r; break;
            case COMM_UINT64: ((uint64_t *)out)[i] = (uint64_t)(int64_t)r; break;
            case COMM_UINT8: ((uint8_t *)out)[i] = (uint8_t)(int64_t)r; break;
            default: break;
            }
        }
    }
    free(tmp);
}

static void test_reduce_closed_forms(void **state)
{
    (void)state;
    const int Ps[] = {1, 2, 3, 4, 7, 16, 64};
    for (int t = 0; t < COMM_DTYPE_COUNT; t++)
        for (int op = 0; op < COMM_REDOP_COUNT; op++)
            for (size_t pi = 0; pi < sizeof Ps / sizeof Ps[0]; pi++) {
                int P = Ps[pi];
                if (op == COMM_PROD && P > 4)
                    continue; /* products overflow float's exact range (dtype.h) */
                size_t n = 5000;
                unsigned char *ref = malloc(n * comm_dtype_size(t));
                host_reduce(t, op, P, n, ref);
                for (size_t i = 0; i < n; i++)
                    if (comm_dtype_get(t, ref, i) != comm_pattern_reduce(t, op, P, i))
                        fail_msg("%s %s P=%d i=%zu: brute force %g, closed form %g",
                                 comm_dtype_name(t), comm_redop_name(op), P, i, comm_dtype_get(t, ref, i),
                                 comm_pattern_reduce(t, op, P, i));
                free(ref);
            }
}

/* Simulates the collective for all P ranks, checks each rank's output, then corrupts. */
static void run_collective(const coll_op *op, comm_dtype t, comm_redop rop, int P,
                           size_t bytes)
{
    size_t es = comm_dtype_size(t);
    coll_shape s;
    op->shape(bytes, es, P, &s);
    assert_true(s.count > 0);
    unsigned char **send = calloc((size_t)P, sizeof *send);
    for (int p = 0; p < P; p++) {
        send[p] = malloc(s.send_elems * es);
        op->fill(t, p, P, &s, send[p]);
    }
    unsigned char *recv = malloc(s.recv_elems * es);
    for (int r = 0; r < P; r++) {
        size_t c = s.call_count;
        switch (op->op) {
        case FSMOE_OP_ALLTOALL:
        case FSMOE_OP_ALLTOALL_2DH: /* the same result, another algorithm */
            for (int p = 0; p < P; p++)
                memcpy(recv + (size_t)p * c * es, send[p] + (size_t)r * c * es, c * es);
            break;
        case FSMOE_OP_ALLGATHER:
            for (int p = 0; p < P; p++)
                memcpy(recv + (size_t)p * c * es, send[p], c * es);
            break;
        case FSMOE_OP_REDUCESCATTER: {
            unsigned char *full = malloc(s.send_elems * es);
            host_reduce(t, rop, P, s.send_elems, full);
            memcpy(recv, full + (size_t)r * c * es, c * es);
            free(full);
            break;
        }
        case FSMOE_OP_ALLREDUCE:
            host_reduce(t, rop, P, s.count, recv);
            break;
        default:
            fail();
        }
        assert_int_equal(op->check(t, rop, r, P, &s, recv), 0);
        /* One element off by one. */
        size_t j = s.recv_elems / 2;
        double keep = comm_dtype_get(t, recv, j);
        unsigned char save[8];
        memcpy(save, recv + j * es, es);
        comm_pattern_fill(t, recv + j * es, 0, 0, 1); /* some other valid-looking value */
        if (comm_dtype_get(t, recv, j) == keep)
            comm_pattern_fill(t, recv + j * es, 1, 0, 1);
        assert_int_equal(op->check(t, rop, r, P, &s, recv), 1);
        memcpy(recv + j * es, save, es);
        if (P > 1 && (op->op == FSMOE_OP_ALLTOALL || op->op == FSMOE_OP_ALLTOALL_2DH ||
                      op->op == FSMOE_OP_ALLGATHER)) {
            /* Blocks 0 and 1 swapped: data from the wrong peers. */
            unsigned char *tmp = malloc(s.call_count * es);
            memcpy(tmp, recv, s.call_count * es);
            memcpy(recv, recv + s.call_count * es, s.call_count * es);
            memcpy(recv + s.call_count * es, tmp, s.call_count * es);
            assert_true(op->check(t, rop, r, P, &s, recv) >= s.call_count);
            free(tmp);
        }
    }
    for (int p = 0; p < P; p++)
        free(send[p]);
    free(send);
    free(recv);
}

static void test_collective_checks(void **state)
{
    (void)state;
    const coll_op *ops[] = {&op_alltoall, &op_alltoall_2dh, &op_allgather, &op_reducescatter,
                            &op_allreduce};
    const int Ps[] = {1, 2, 4, 5};
    for (size_t o = 0; o < 5; o++)
        for (size_t pi = 0; pi < 4; pi++)
            for (int t = 0; t < COMM_DTYPE_COUNT; t++)
                run_collective(ops[o], (comm_dtype)t, COMM_SUM, Ps[pi], 40000);
    run_collective(&op_allreduce, COMM_FLOAT, COMM_MAX, 4, 4096);
    run_collective(&op_reducescatter, COMM_INT32, COMM_MIN, 4, 4096);
    run_collective(&op_allreduce, COMM_DOUBLE, COMM_PROD, 3, 4096);
}

static void test_shapes_round_down(void **state)
{
    (void)state;
    coll_shape s;
    op_alltoall.shape(1000, 4, 3, &s); /* 250 floats over 3 ranks: 83 each */
    assert_int_equal(s.call_count, 83);
    assert_int_equal(s.bytes, 83 * 3 * 4);
    op_allgather.shape(1 << 20, 4, 4, &s);
    assert_int_equal(s.call_count, 65536);
    assert_int_equal(s.recv_elems, 262144);
    assert_int_equal(s.bytes, 1 << 20);
    op_reducescatter.shape(1 << 20, 4, 4, &s);
    assert_int_equal(s.send_elems, 262144);
    assert_int_equal(s.recv_elems, 65536);
    op_allreduce.shape(1 << 20, 8, 4, &s);
    assert_int_equal(s.count, 131072);
}

/* SAA: simulate Parm's phased AllToAll over 4 ranks (phase k: every rank r receives the
 * block of member r−k) and the AllGather over pairs of each phase's block. */
static void test_saa_check(void **state)
{
    (void)state;
    const int P = 4, MP = 2;
    comm_dtype t = COMM_FLOAT;
    int rank_of[2];
    saa_groups g = {.P_a2a = P, .P_ag = MP, .a2a_rank_of = rank_of};
    saa_shape sh;
    saa_shape_of(&g, 16003, 4, &sh); /* 4000 floats (3 bytes dropped), 1000 per peer */
    assert_int_equal(sh.per_peer, 1000);
    assert_int_equal(sh.bytes, 16000);
    assert_int_equal(sh.ag_elems, 8000);
    float *send[4], *a2a[4];
    for (int p = 0; p < P; p++) {
        g.rank_a2a = p;
        send[p] = malloc(sh.send_elems * 4);
        a2a[p] = malloc(sh.a2a_elems * 4);
        saa_fill(&g, &sh, t, send[p]);
    }
    size_t c = sh.per_peer;
    for (int r = 0; r < P; r++) /* an AllToAll: r's block from p is p's block for r */
        for (int p = 0; p < P; p++)
            memcpy(a2a[r] + p * c, send[p] + r * c, c * 4);
    /* MP groups {0,1} and {2,3}: rank 2's view; block (k, q) = what q received in phase k. */
    rank_of[0] = 2;
    rank_of[1] = 3;
    float *out = malloc(sh.ag_elems * 4);
    for (int k = 0; k < P; k++)
        for (int q = 0; q < MP; q++)
            memcpy(out + (k * MP + q) * c, a2a[rank_of[q]] + ((rank_of[q] - k + P) % P) * c,
                   c * 4);
    assert_int_equal(saa_check(&g, &sh, t, out), 0);
    out[c + 7] += 1.0f;
    assert_int_equal(saa_check(&g, &sh, t, out), 1);
    out[c + 7] -= 1.0f;
    rank_of[1] = 1; /* the AllGather brought the wrong member's block */
    assert_true(saa_check(&g, &sh, t, out) > 0);
    rank_of[1] = 3;
    /* Phases 1 and 2 swapped (blocks in the wrong order). */
    float *tmp = malloc(MP * c * 4);
    memcpy(tmp, out + 1 * MP * c, MP * c * 4);
    memcpy(out + 1 * MP * c, out + 2 * MP * c, MP * c * 4);
    memcpy(out + 2 * MP * c, tmp, MP * c * 4);
    assert_true(saa_check(&g, &sh, t, out) > 0);
    free(tmp);
    for (int p = 0; p < P; p++) {
        free(send[p]);
        free(a2a[p]);
    }
    free(out);
}

static void test_gemm_check(void **state)
{
    (void)state;
    const int m = 37, n = 29, k = 64;
    float *A = malloc(sizeof(float) * m * k), *B = malloc(sizeof(float) * k * n),
          *C = malloc(sizeof(float) * m * n);
    gemm_fill(A, (size_t)m * k, B, (size_t)k * n, 2);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int l = 0; l < k; l++)
                acc += A[i * k + l] * B[l * n + j];
            C[i * n + j] = acc;
        }
    assert_int_equal(gemm_check(A, B, C, m, n, k), 0);
    C[5 * n + 3] += 1.0f;
    assert_int_equal(gemm_check(A, B, C, m, n, k), 1);
    gemm_shape shapes[BENCH_MAX_SHAPES];
    int ns = gemm_default_shapes(BACKEND_NCCL, 4, shapes, BENCH_MAX_SHAPES);
    assert_int_equal(ns, 6);
    assert_int_equal(shapes[1].M, 4096);
    assert_int_equal(shapes[1].H, 14336 / 4);
    assert_true(gemm_default_shapes(BACKEND_MPI, 2, shapes, BENCH_MAX_SHAPES) >= 1);
    free(A);
    free(B);
    free(C);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reduce_closed_forms), cmocka_unit_test(test_collective_checks),
        cmocka_unit_test(test_shapes_round_down),   cmocka_unit_test(test_saa_check),
        cmocka_unit_test(test_gemm_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
