/* Implements: tests of the memory model (libfsmoe/memory.h) against MoNTA's Table 3 and the
 * recomputation rules of its Table 4 (Megatron's selective and full recomputation). What the
 * model predicts for fsmoe-run's own tensors is checked against what fsmoe-run allocates by
 * runtime_memory (tests/runtime/test_runtime_memory.sh). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>

#include "memory.h"

/* mixtral-8x7b's shape (models/mixtral-8x7b.yaml) in bf16 on dp 4 · mp 2 · ep 2 (world 8, so
 * the experts' data-parallel group is 8 / 2 = 4 ranks, the dense parameters' DP group 4). */
static fsmoe_mem_shape mixtral(void)
{
    fsmoe_mem_shape s = {.V = 32000, .M = 4096, .H = 14336, .heads = 32, .kv_heads = 8,
                         .layers = 32, .E = 8, .k = 2, .expert = 1, .moe_every = 1,
                         .moe_first = 0, .f = 1.2, .gate_dim = 16, .B = 4, .L = 1024,
                         .bytes_per_element = 2, .dp = 4, .mp = 2, .ep = 2, .esp = 1};
    return s;
}

static double states(const fsmoe_memory *m)
{
    return m->bytes[FSMOE_MEM_WEIGHTS] + m->bytes[FSMOE_MEM_GRADS] +
           m->bytes[FSMOE_MEM_OPTIMIZER];
}

static void near(double got, double want)
{
    if (fabs(got - want) > 1e-9 * fabs(want))
        fail_msg("got %.17g, expected %.17g", got, want);
}

/* MoNTA Table 3: the non-MoE parameters P1 (per rank, after TP) take 16·P1, (4 + 12/d)·P1,
 * (2 + 14/d)·P1 and 16·P1/d bytes without ZeRO and with stages 1, 2, 3; the MoE parameters P2
 * (after EP) the same with their own data-parallel degree. */
static void test_zero_stages_table3(void **state)
{
    (void)state;
    fsmoe_mem_shape s = mixtral();
    double d1 = 4, d2 = 4; /* dp; world / (ep·esp) */
    const double want[4][2] = {{16, 16}, {4 + 12 / d1, 4 + 12 / d2}, {2 + 14 / d1, 2 + 14 / d2},
                               {16 / d1, 16 / d2}};
    for (int z = 0; z < 4; z++) {
        s.zero_stage = z;
        fsmoe_memory m;
        fsmoe_memory_estimate(&s, &m);
        double P2 = m.expert_params, P1 = m.params - P2;
        assert_true(P1 > 0 && P2 > 0);
        near(states(&m), want[z][0] * P1 + want[z][1] * P2);
    }
    /* the experts' degree is their own: ep 4 leaves 2 replicas of each expert shard */
    s.ep = 4, s.zero_stage = 1;
    fsmoe_memory m;
    fsmoe_memory_estimate(&s, &m);
    double P2 = m.expert_params, P1 = m.params - P2;
    near(states(&m), (4 + 12 / 4.0) * P1 + (4 + 12 / 2.0) * P2);
}

/* fp32 weights need no master copy: 4 + 4 + 8 bytes a parameter */
static void test_fp32_states(void **state)
{
    (void)state;
    fsmoe_mem_shape s = mixtral();
    s.bytes_per_element = 4;
    fsmoe_memory m;
    fsmoe_memory_estimate(&s, &m);
    near(m.bytes[FSMOE_MEM_WEIGHTS], 4 * m.params);
    near(m.bytes[FSMOE_MEM_GRADS], 4 * m.params);
    near(m.bytes[FSMOE_MEM_OPTIMIZER], 8 * m.params);
}

/* Table 4 / Megatron: selective recomputation keeps no attention probabilities
 * (b·heads/t·s² per layer) and recomputes them into one buffer; full recomputation keeps each
 * block's input (b·s·h per layer, MoNTA's 2bshl/t bytes in fp16 without sequence parallelism)
 * plus the final norm's. Parameters do not change. */
static void test_recomputation_table4(void **state)
{
    (void)state;
    fsmoe_mem_shape s = mixtral();
    fsmoe_memory none, sel, full;
    fsmoe_memory_estimate(&s, &none);
    s.recompute = FSMOE_RECOMPUTE_SELECTIVE;
    fsmoe_memory_estimate(&s, &sel);
    s.recompute = FSMOE_RECOMPUTE_FULL;
    fsmoe_memory_estimate(&s, &full);
    double e = 2, probs = (double)s.B * (32.0 / 2) * 1024.0 * 1024.0;
    near(none.bytes[FSMOE_MEM_ACTIVATIONS] - sel.bytes[FSMOE_MEM_ACTIVATIONS], 32 * probs * e);
    near(sel.bytes[FSMOE_MEM_WORKSPACE] - none.bytes[FSMOE_MEM_WORKSPACE], probs * e);
    double bsh = (double)s.B * 1024.0 * 4096.0;
    near(full.bytes[FSMOE_MEM_ACTIVATIONS], (32 * bsh + 2 * bsh + 2.0 * s.B * 1024) * e);
    assert_true(full.bytes[FSMOE_MEM_WORKSPACE] > none.bytes[FSMOE_MEM_WORKSPACE]);
    assert_true(full.total < sel.total && sel.total < none.total);
    near(full.params, none.params);
    near(states(&full), states(&none));
}

/* The capacity: ceil(k·f·N_global/E) rows per expert and rank, at most the rank's tokens; no
 * capacity factor: every token. The activations follow it exactly: per row of an expert, its
 * three H-wide tensors (pre-activation, activation and SwiGLU's gate) and the two M-wide rows
 * the forward keeps for the backward (the expert's input and its combined output). */
static void test_capacity_rows(void **state)
{
    (void)state;
    fsmoe_mem_shape s = mixtral();
    s.dp = 1, s.mp = 1, s.ep = 1, s.B = 8, s.L = 512, s.f = 1.0; /* N = 4096, C = 1024 */
    fsmoe_memory a, b;
    fsmoe_memory_estimate(&s, &a);
    s.f = 2.0; /* C = 2048 */
    fsmoe_memory_estimate(&s, &b);
    double per_row = 8.0 * (3 * 14336 + 2 * 4096) * 2; /* E experts' rows, bf16 */
    near(b.bytes[FSMOE_MEM_ACTIVATIONS] - a.bytes[FSMOE_MEM_ACTIVATIONS],
         32 * (2048 - 1024) * per_row);
    s.f = 0; /* dropless: every token */
    fsmoe_memory c;
    fsmoe_memory_estimate(&s, &c);
    near(c.bytes[FSMOE_MEM_ACTIVATIONS] - a.bytes[FSMOE_MEM_ACTIVATIONS],
         32 * (4096 - 1024) * per_row);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zero_stages_table3),
        cmocka_unit_test(test_fp32_states),
        cmocka_unit_test(test_recomputation_table4),
        cmocka_unit_test(test_capacity_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
