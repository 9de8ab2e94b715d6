/* Checkpoints: resuming at step k continues bit-exactly (the loss at every later step equals
 * the uninterrupted run's); another model, seed or setting is refused naming it; bad data files
 * give clear errors. Shard-level corruption, resharding and kill -9 safety are in
 * test_runtime_checkpoint.c. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "train.h"
#include "../test_fs.h"

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
    test_write_corpus(datafile);
    return 0;
}

static int teardown(void **s)
{
    (void)s;
    test_remove_tree(dir);
    remove(datafile);
    return 0;
}

static fsmoe_status save(rt_trainer *tr, const rt_config *c)
{
    fsmoe_error err = {0};
    rt_layout lay = layout_make(1, 0, 1, 1, c->E, c->B);
    rt_ckpt_rank ck = checkpoint_rank(&tr->model, &tr->opt, &lay);
    fsmoe_status st = checkpoint_save(dir, tr->step, &ck, &err);
    if (st != FSMOE_OK)
        print_error("%s\n", err.msg);
    return st;
}

static fsmoe_status load(rt_trainer *tr, const rt_config *c, fsmoe_error *err)
{
    rt_layout lay = layout_make(1, 0, 1, 1, c->E, c->B);
    rt_ckpt_rank ck = checkpoint_rank(&tr->model, &tr->opt, &lay);
    return checkpoint_load(dir, &ck, &tr->step, err);
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
            assert_int_equal(save(&tr, &c), FSMOE_OK);
    }
    trainer_free(&tr);
    assert_int_equal(trainer_init(&tr, &c, be, &d, &err), FSMOE_OK);
    assert_int_equal(load(&tr, &c, &err), FSMOE_OK);
    assert_int_equal(tr.step, 4);
    assert_int_equal(tr.opt.t, 4);
    for (int i = 4; i < 8; i++) {
        assert_int_equal(trainer_step(&tr, &resumed[i], NULL, NULL, &err), FSMOE_OK);
        assert_memory_equal(&resumed[i], &full[i], sizeof(double));
    }
    trainer_free(&tr);
    /* another model: the field is named */
    rt_config c2 = c;
    c2.H = 48;
    assert_int_equal(trainer_init(&tr, &c2, be, &d, &err), FSMOE_OK);
    assert_int_equal(load(&tr, &c2, &err), FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "H is 32 there, 48"));
    trainer_free(&tr);
    /* another seed: not the continuation of the saved run */
    rt_config c3 = c;
    c3.seed = 10;
    assert_int_equal(trainer_init(&tr, &c3, be, &d, &err), FSMOE_OK);
    assert_int_equal(load(&tr, &c3, &err), FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "--seed 9, this run has --seed 10"));
    trainer_free(&tr);
    /* settings a continuation depends on: refused naming the setting and the flag */
    rt_config c4 = c;
    c4.lr = c.lr * 2;
    assert_int_equal(trainer_init(&tr, &c4, be, &d, &err), FSMOE_OK);
    assert_int_equal(load(&tr, &c4, &err), FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "settings.lr: the checkpoint was trained with"));
    assert_non_null(strstr(err.msg, "--lr"));
    trainer_free(&tr);
    c4 = c;
    c4.B = 4; /* world 1: the global batch changes */
    assert_int_equal(trainer_init(&tr, &c4, be, &d, &err), FSMOE_OK);
    assert_int_equal(load(&tr, &c4, &err), FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "settings.global_batch: the checkpoint was trained with 2"));
    trainer_free(&tr);
    /* steps: may be extended (with the warm-up given explicitly, as here), not cut below the
     * checkpoint's step */
    c4 = c;
    c4.steps = 3;
    assert_int_equal(trainer_init(&tr, &c4, be, &d, &err), FSMOE_OK);
    assert_int_equal(load(&tr, &c4, &err), FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "settings.steps: the checkpoint is at step 4"));
    trainer_free(&tr);
    c4 = c;
    c4.steps = 20;
    assert_int_equal(trainer_init(&tr, &c4, be, &d, &err), FSMOE_OK);
    assert_int_equal(load(&tr, &c4, &err), FSMOE_OK);
    assert_int_equal(tr.step, 4);
    trainer_free(&tr);
    /* a version-1 checkpoint is named as such */
    char p[300];
    snprintf(p, sizeof p, "%s.v1", dir);
    mkdir(p, 0777);
    char q[340];
    snprintf(q, sizeof q, "%s/checkpoint.bin", p);
    FILE *f = fopen(q, "wb");
    fputs("FSMOECKP", f);
    fclose(f);
    assert_int_equal(trainer_init(&tr, &c, be, &d, &err), FSMOE_OK);
    rt_layout lay = layout_make(1, 0, 1, 1, c.E, c.B);
    rt_ckpt_rank ck = checkpoint_rank(&tr.model, &tr.opt, &lay);
    assert_int_equal(checkpoint_load(p, &ck, &tr.step, &err), FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "version-1 checkpoint"));
    trainer_free(&tr);
    test_remove_tree(p);
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
    /* not regular files: refused before anything is read (a FIFO would block the open) */
    static const struct {
        const char *path, *kind;
    } special[] = {{NULL, "(a FIFO)"}, {"/tmp", "(a directory)"}, {"/dev/zero", "(a device)"}};
    snprintf(p, sizeof p, "%s.fifo", dir);
    assert_int_equal(mkfifo(p, 0600), 0);
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) {
        memset(&err, 0, sizeof err);
        assert_int_equal(data_load(&d, special[i].path ? special[i].path : p, 256, 16, &err),
                         FSMOE_ERR_VALUE);
        assert_non_null(strstr(err.msg, "not a regular file"));
        assert_non_null(strstr(err.msg, special[i].kind));
    }
    remove(p);
    /* more bytes than the memory limit leaves: refused before the allocation */
    assert_int_equal(data_load_limited(&d, datafile, 256, 16, 100, &err), FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "more than the 100 bytes of memory"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_bit_exact),
        cmocka_unit_test(test_bad_data),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
