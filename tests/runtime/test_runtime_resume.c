/* Checkpoints: resuming at step k continues bit-exactly (the loss at every later step equals
 * the uninterrupted run's); bad checkpoint and data files give clear errors. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "train.h"

static char dir[128], datafile[160];

static rt_config cfg(void)
{
    rt_config c;
    config_defaults(&c);
    c.V = 256, c.M = 16, c.H = 32, c.heads = 2, c.layers = 2, c.L = 16, c.B = 2, c.E = 4, c.k = 2;
    c.f = 1.0, c.gate_noise = 0.3, c.steps = 8, c.warmup = 2, c.seed = 9;
    return c;
}

static int setup(void **s)
{
    (void)s;
    snprintf(dir, sizeof dir, "/tmp/fsmoe_resume.%d", (int)getpid());
    snprintf(datafile, sizeof datafile, "%s.txt", dir);
    FILE *f = fopen(datafile, "w");
    for (int i = 0; i < 400; i++)
        fprintf(f, "line %d: the quick brown fox jumps over the lazy dog.\n", i);
    fclose(f);
    return 0;
}

static int teardown(void **s)
{
    (void)s;
    char p[300];
    snprintf(p, sizeof p, "%s/checkpoint.bin", dir);
    remove(p);
    rmdir(dir);
    remove(datafile);
    return 0;
}

static void test_resume_bit_exact(void **s)
{
    (void)s;
    rt_config c = cfg();
    fsmoe_error err = {0};
    rt_data d;
    assert_int_equal(data_load(&d, datafile, c.V, c.L, &err), FSMOE_OK);
    rt_backend *be = NULL;
    assert_int_equal(rt_backend_create("host", 1, &be, &err), FSMOE_OK);
    double full[8], resumed[8];
    rt_trainer tr;
    assert_int_equal(trainer_init(&tr, &c, be, &d, &err), FSMOE_OK);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(trainer_step(&tr, &full[i], NULL, NULL, &err), FSMOE_OK);
        if (i == 3)
            assert_int_equal(checkpoint_save(dir, &tr.model, &tr.opt, tr.step, &err), FSMOE_OK);
    }
    trainer_free(&tr);
    assert_int_equal(trainer_init(&tr, &c, be, &d, &err), FSMOE_OK);
    assert_int_equal(checkpoint_load(dir, &tr.model, &tr.opt, &tr.step, &err), FSMOE_OK);
    assert_int_equal(tr.step, 4);
    for (int i = 4; i < 8; i++) {
        assert_int_equal(trainer_step(&tr, &resumed[i], NULL, NULL, &err), FSMOE_OK);
        assert_memory_equal(&resumed[i], &full[i], sizeof(double));
    }
    trainer_free(&tr);
    /* another model: the field is named */
    rt_config c2 = c;
    c2.H = 48;
    assert_int_equal(trainer_init(&tr, &c2, be, &d, &err), FSMOE_OK);
    assert_int_equal(checkpoint_load(dir, &tr.model, &tr.opt, &tr.step, &err), FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "H is 32 there, 48"));
    trainer_free(&tr);
    /* another seed: not the continuation of the saved run */
    rt_config c3 = c;
    c3.seed = 10;
    assert_int_equal(trainer_init(&tr, &c3, be, &d, &err), FSMOE_OK);
    assert_int_equal(checkpoint_load(dir, &tr.model, &tr.opt, &tr.step, &err), FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "--seed 9, this run has --seed 10"));
    trainer_free(&tr);
    /* corrupted and truncated files */
    assert_int_equal(trainer_init(&tr, &c, be, &d, &err), FSMOE_OK);
    char p[300];
    snprintf(p, sizeof p, "%s/checkpoint.bin", dir);
    FILE *f = fopen(p, "r+b");
    fseek(f, 200, SEEK_SET);
    fputc(0x5a, f);
    fclose(f);
    assert_int_equal(checkpoint_load(dir, &tr.model, &tr.opt, &tr.step, &err), FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "checksum"));
    assert_int_equal(truncate(p, 100), 0);
    assert_int_equal(checkpoint_load(dir, &tr.model, &tr.opt, &tr.step, &err), FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "truncated"));
    f = fopen(p, "wb");
    fputs("hello world, not a checkpoint", f);
    fclose(f);
    assert_int_equal(checkpoint_load(dir, &tr.model, &tr.opt, &tr.step, &err), FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "bad magic"));
    trainer_free(&tr);
    rt_backend_destroy(&be);
    data_free(&d);
}

static void test_bad_data(void **s)
{
    (void)s;
    fsmoe_error err = {0};
    rt_data d;
    assert_int_equal(data_load(&d, "/nonexistent/x.txt", 256, 16, &err), FSMOE_ERR_IO);
    assert_non_null(strstr(err.msg, "cannot open"));
    char p[200];
    snprintf(p, sizeof p, "%s.small", dir);
    FILE *f = fopen(p, "w");
    fputs("tiny", f);
    fclose(f);
    assert_int_equal(data_load(&d, p, 256, 16, &err), FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "too small"));
    assert_int_equal(data_load(&d, datafile, 64, 16, &err), FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "outside the model's vocabulary"));
    remove(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_bit_exact),
        cmocka_unit_test(test_bad_data),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
