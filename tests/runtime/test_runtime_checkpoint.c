/* Checkpoints v2 (runtime/checkpoint.h) in one process: the ranks of a layout are parameter
 * tables built side by side on the host backend (replicated tensors whole, expert tensors split
 * along dim 0 with params_shard_since, as model_init does under EP), holding values that are a
 * known function of (tensor, global element, array, step). Checked:
 *   - resharding: saved on world 4 / ep 4 (and world 4 / ep 2, world 2 / ep 2), loaded on world
 *     1, 2 (ep 2) and 4 (ep 4, ep 2): every tensor and both AdamW moments bit-exact, step and t;
 *   - refusals, each naming the file and what is wrong: truncated shard, flipped byte in a shard
 *     header, in a shard body, a shard replaced by another save's, a missing shard, a manifest
 *     pointing at a missing step directory, another manifest version, another model, settings;
 *     nothing is changed by a refused load;
 *   - kill -9: a child saving steps 1, 2, 3, ... in a loop is killed 20 times at random moments;
 *     every time the checkpoint loads and holds exactly the values of its step; a final clean
 *     save leaves no temporaries and no stale step directory. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "../test_fs.h"

#define E_ALL 4
#define B_GLOBAL 8
#define MAX_WORLD 4

static char root[128];

typedef struct {
    rt_config cfg;
    rt_layout lay;
    rt_params params;
    rt_adamw opt;
    rt_ckpt_rank rk;
    rt_backend *be;
} fake_rank;

static rt_config config(void)
{
    rt_config c;
    config_defaults(&c);
    snprintf(c.name, sizeof c.name, "fake");
    c.V = 6, c.M = 4, c.H = 3, c.E = E_ALL, c.layers = 1, c.steps = 1000000, c.warmup = 10;
    c.seed = 5;
    return c;
}

/* Element g of the whole tensor i, array a (0 w, 1 m, 2 v), at `step`. */
static real value(int i, long g, int a, long step)
{
    return (real)(1000.0 * i + (double)g + 0.25 * a + 0.001 * (double)step);
}

static void fill(fake_rank *r, long step)
{
    rt_params *t = &r->params;
    real *h = calloc(3 * (size_t)t->total + 1, sizeof(real));
    assert_non_null(h);
    for (int i = 0; i < t->n; i++) {
        const rt_param *p = &t->p[i];
        long g0 = p->dim0_start * (p->numel / p->shape[0]);
        for (int a = 0; a < 3; a++)
            for (long j = 0; j < p->numel; j++)
                h[a * t->total + p->offset + j] = value(i, g0 + j, a, step);
    }
    size_t b = (size_t)t->total * sizeof(real);
    r->be->copy(r->be, NULL, t->w, h, b, RT_H2D);
    r->be->copy(r->be, NULL, r->opt.m, h + t->total, b, RT_H2D);
    r->be->copy(r->be, NULL, r->opt.v, h + 2 * t->total, b, RT_H2D);
    r->be->stream_sync(r->be, NULL);
    r->opt.t = 3 * step;
    free(h);
}

/* Elements that differ from the values of `step`, over all tensors and arrays. */
static long wrong(const fake_rank *r, long step)
{
    const rt_params *t = &r->params;
    real *h = calloc(3 * (size_t)t->total + 1, sizeof(real));
    size_t b = (size_t)t->total * sizeof(real);
    r->be->copy(r->be, NULL, h, t->w, b, RT_D2H);
    r->be->copy(r->be, NULL, h + t->total, r->opt.m, b, RT_D2H);
    r->be->copy(r->be, NULL, h + 2 * t->total, r->opt.v, b, RT_D2H);
    r->be->stream_sync(r->be, NULL);
    long bad = r->opt.t != 3 * step;
    for (int i = 0; i < t->n; i++) {
        const rt_param *p = &t->p[i];
        long g0 = p->dim0_start * (p->numel / p->shape[0]);
        for (int a = 0; a < 3; a++)
            for (long j = 0; j < p->numel; j++) {
                real want = value(i, g0 + j, a, step);
                bad += memcmp(&h[a * t->total + p->offset + j], &want, sizeof want) != 0;
            }
    }
    free(h);
    return bad;
}

/* Rank `rank` of world/ep: the tensors of a one-block MoE model, expert tensors split. Returns
 * non-zero on failure (usable in a forked child). */
static int build(fake_rank *r, rt_backend *be, const rt_config *c, int world, int rank, int ep,
                 long step)
{
    memset(r, 0, sizeof *r);
    r->cfg = *c;
    r->be = be;
    r->lay = layout_make(world, rank, 1, ep, E_ALL, B_GLOBAL / world);
    rt_params *t = &r->params;
    real *w[8], *g[8];
    long el = E_ALL / ep, x0 = r->lay.expert0;
    params_add(t, &w[0], &g[0], RT_INIT_NORMAL, 0.02, (const long[]){6, 4}, 2, "wte");
    params_add(t, &w[1], &g[1], RT_INIT_ONE, 0, (const long[]){4}, 1, "blocks.0.ln1.w");
    params_add(t, &w[2], &g[2], RT_INIT_NORMAL, 0.02, (const long[]){el, 4, 3}, 3,
               "blocks.0.moe.experts.w1");
    params_shard_since(t, t->n - 1, x0, E_ALL);
    params_add(t, &w[3], &g[3], RT_INIT_ZERO, 0, (const long[]){el, 3}, 2,
               "blocks.0.moe.experts.b1");
    params_shard_since(t, t->n - 1, x0, E_ALL);
    params_add(t, &w[4], &g[4], RT_INIT_NORMAL, 0.02, (const long[]){el, 3, 4}, 3,
               "blocks.0.moe.experts.w2");
    params_shard_since(t, t->n - 1, x0, E_ALL);
    params_add(t, &w[5], &g[5], RT_INIT_NORMAL, 0.02, (const long[]){4, 6}, 2, "head");
    fsmoe_error err = {0};
    if (params_alloc(t, be, 1, &err) != FSMOE_OK || adamw_init(&r->opt, t, be, &err) != FSMOE_OK)
        return 1;
    r->rk = (rt_ckpt_rank){&r->cfg, &r->lay, be, &r->params, &r->opt, NULL};
    fill(r, step);
    return 0;
}

static void drop(fake_rank *r)
{
    adamw_free(&r->opt, r->be);
    params_free(&r->params, r->be);
}

static fsmoe_status save_world(const char *dir, fake_rank *rs, int world, long step,
                               fsmoe_error *err)
{
    rt_ckpt_shard_info info[MAX_WORLD];
    for (int i = 0; i < world; i++) {
        fsmoe_status st = checkpoint_save_shard(dir, step, &rs[i].rk, &info[i], err);
        if (st != FSMOE_OK)
            return st;
    }
    /* (the barrier / gather of a real run) */
    return checkpoint_write_manifest(dir, step, &rs[0].rk, info, world, err);
}

static rt_backend *host(void)
{
    rt_backend *be = NULL;
    fsmoe_error err = {0};
    assert_int_equal(rt_backend_create("host", 1, &be, &err), FSMOE_OK);
    return be;
}

/* Saves world/ep at `step` into dir (values of `values_step`). */
static void save_layout(const char *dir, int world, int ep, long step, long values_step)
{
    rt_backend *be = host();
    rt_config c = config();
    fake_rank rs[MAX_WORLD];
    fsmoe_error err = {0};
    for (int i = 0; i < world; i++)
        assert_int_equal(build(&rs[i], be, &c, world, i, ep, values_step), 0);
    fsmoe_status st = save_world(dir, rs, world, step, &err);
    if (st != FSMOE_OK)
        print_error("%s\n", err.msg);
    assert_int_equal(st, FSMOE_OK);
    for (int i = 0; i < world; i++)
        drop(&rs[i]);
    rt_backend_destroy(&be);
}

/* Loads dir into every rank of world/ep (c: the run's config) and checks the values of `step`
 * (step < 0: of whatever step it holds). Returns the first failing status (err holds its
 * message). */
static long loaded_step;

static fsmoe_status load_layout(const char *dir, const rt_config *c, int world, int ep, long step,
                                fsmoe_error *err)
{
    rt_backend *be = host();
    fake_rank rs[MAX_WORLD];
    fsmoe_status st = FSMOE_OK;
    for (int i = 0; i < world; i++)
        assert_int_equal(build(&rs[i], be, c, world, i, ep, -1), 0);
    for (int i = 0; i < world && st == FSMOE_OK; i++) {
        long s = -7;
        st = checkpoint_load(dir, &rs[i].rk, &s, err);
        if (st == FSMOE_OK) {
            if (step >= 0)
                assert_int_equal(s, step);
            loaded_step = s;
            assert_int_equal(wrong(&rs[i], s), 0);
        } else {
            assert_int_equal(wrong(&rs[i], -1), 0); /* a refused load changes nothing */
        }
    }
    for (int i = 0; i < world; i++)
        drop(&rs[i]);
    rt_backend_destroy(&be);
    return st;
}

static void subdir(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", root, name);
    test_remove_tree(buf);
}

static void shard_path(char *buf, size_t n, const char *dir, long step, int rank, int world)
{
    snprintf(buf, n, "%s/step-%08ld/shard-%05d-of-%05d.bin", dir, step, rank, world);
}

static void flip(const char *path, long off)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, off, SEEK_SET), 0);
    int ch = fgetc(f);
    assert_int_equal(fseek(f, off, SEEK_SET), 0);
    fputc(ch ^ 0x40, f);
    fclose(f);
}

static long file_size(const char *path)
{
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    return (long)sb.st_size;
}

static int setup(void **s)
{
    (void)s;
    snprintf(root, sizeof root, "/tmp/fsmoe_ckpt.%d", (int)getpid());
    mkdir(root, 0777);
    return 0;
}

static int teardown(void **s)
{
    (void)s;
    test_remove_tree(root);
    return 0;
}

static void test_reshard(void **s)
{
    (void)s;
    rt_config c = config();
    fsmoe_error err = {0};
    char dir[256];
    static const struct { int world, ep; } saves[] = {{4, 4}, {4, 2}, {2, 2}, {1, 1}};
    static const struct { int world, ep; } loads[] = {{1, 1}, {2, 2}, {4, 4}, {4, 2}, {2, 1}};
    for (size_t i = 0; i < sizeof saves / sizeof saves[0]; i++) {
        subdir(dir, sizeof dir, "reshard");
        save_layout(dir, saves[i].world, saves[i].ep, 200, 200);
        for (size_t j = 0; j < sizeof loads / sizeof loads[0]; j++) {
            fsmoe_status st = load_layout(dir, &c, loads[j].world, loads[j].ep, 200, &err);
            if (st != FSMOE_OK)
                print_error("saved world %d ep %d, loaded world %d ep %d: %s\n", saves[i].world,
                            saves[i].ep, loads[j].world, loads[j].ep, err.msg);
            assert_int_equal(st, FSMOE_OK);
        }
    }
    /* the layout that saved is in the manifest; older steps are removed by a newer save */
    subdir(dir, sizeof dir, "reshard");
    save_layout(dir, 4, 4, 100, 100);
    save_layout(dir, 4, 4, 200, 200);
    char p[400];
    struct stat sb;
    snprintf(p, sizeof p, "%s/step-00000100", dir);
    assert_int_not_equal(stat(p, &sb), 0);
    snprintf(p, sizeof p, "%s/manifest.yaml", dir);
    FILE *f = fopen(p, "r");
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    assert_non_null(strstr(text, "layout: {world: 4, ep: 4, edp: 1, gpus_per_node: 1}"));
    assert_non_null(strstr(text, "rng: {seed: 5, step: 200}"));
    assert_non_null(strstr(text, "step_dir: step-00000200"));
    assert_non_null(strstr(text, "- {file: shard-00003-of-00004.bin, rank: 3, bytes: "));
    /* saving again at the step the manifest holds (a new run into an old directory) goes to
     * another directory, so the live checkpoint is never overwritten in place */
    save_layout(dir, 2, 2, 200, 200);
    snprintf(p, sizeof p, "%s/step-00000200-b", dir);
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(load_layout(dir, &c, 4, 4, 200, &err), FSMOE_OK);
}

typedef struct {
    const char *what;
    void (*corrupt)(const char *dir);
    const char *msg1, *msg2; /* fragments the message must hold */
} corruption;

static void truncate_shard(const char *dir)
{
    char p[400];
    shard_path(p, sizeof p, dir, 7, 1, 4);
    assert_int_equal(truncate(p, file_size(p) - 100), 0);
}

static void flip_header(const char *dir)
{
    char p[400];
    shard_path(p, sizeof p, dir, 7, 0, 4);
    flip(p, 48 + 120 + 3); /* in the name of the second tensor of the index */
}

static void flip_body(const char *dir)
{
    char p[400];
    shard_path(p, sizeof p, dir, 7, 2, 4);
    flip(p, file_size(p) - 40); /* the last real of the last tensor's v */
}

static void flip_magic(const char *dir)
{
    char p[400];
    shard_path(p, sizeof p, dir, 7, 3, 4);
    flip(p, 2);
}

static void remove_shard(const char *dir)
{
    char p[400];
    shard_path(p, sizeof p, dir, 7, 3, 4);
    assert_int_equal(unlink(p), 0);
}

static void move_step_dir(const char *dir)
{
    char a[400], b[400];
    snprintf(a, sizeof a, "%s/step-00000007", dir);
    snprintf(b, sizeof b, "%s/elsewhere", dir);
    assert_int_equal(rename(a, b), 0);
}

/* Shard 1 replaced by shard 1 of another save of the same step and size (valid on its own). */
static void replace_shard(const char *dir)
{
    char other[300], a[400], b[400];
    snprintf(other, sizeof other, "%s.other", dir);
    test_remove_tree(other);
    save_layout(other, 4, 4, 7, 8);
    shard_path(a, sizeof a, other, 7, 1, 4);
    shard_path(b, sizeof b, dir, 7, 1, 4);
    assert_int_equal(rename(a, b), 0);
    test_remove_tree(other);
}

/* Replaces `from` by `to` in the manifest; reseal: recompute its checksum line, so that the
 * check behind the manifest's own checksum is what refuses it. */
static void edit_manifest_as(const char *dir, const char *from, const char *to, int reseal)
{
    char p[400], text[8192], out[8300];
    snprintf(p, sizeof p, "%s/manifest.yaml", dir);
    FILE *f = fopen(p, "r");
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    char *at = strstr(text, from);
    assert_non_null(at);
    snprintf(out, sizeof out, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    if (reseal) {
        char *last = strstr(out, "manifest_sha256: ");
        assert_non_null(last);
        char hex[FSMOE_SHA256_HEX];
        fsmoe_sha256_hex(out, (size_t)(last - out), hex);
        snprintf(last, sizeof out - (size_t)(last - out), "manifest_sha256: %s\n", hex);
    }
    f = fopen(p, "w");
    fputs(out, f);
    fclose(f);
}

static void edit_manifest(const char *dir, const char *from, const char *to)
{
    edit_manifest_as(dir, from, to, 1);
}

static void manifest_edit_unsealed(const char *dir)
{
    edit_manifest_as(dir, "adamw_t: ", "adamw_t: 1", 0);
}

static void manifest_version(const char *dir)
{
    edit_manifest(dir, "fsmoe_checkpoint: 2", "fsmoe_checkpoint: 3");
}

static void manifest_sha(const char *dir)
{
    edit_manifest(dir, "rank: 2, bytes: ", "rank: 2, bytes: 1");
}

static void test_refusals(void **s)
{
    (void)s;
    static const corruption rows[] = {
        {"truncated shard", truncate_shard, "shard-00001-of-00004.bin: ",
         "the manifest records"},
        {"flipped header byte", flip_header, "shard-00000-of-00004.bin: ",
         "header checksum mismatch (corrupted shard header)"},
        {"flipped body byte", flip_body, "shard-00002-of-00004.bin: ",
         "checksum mismatch: the bytes give sha256"},
        {"bad magic", flip_magic, "shard-00003-of-00004.bin: ", "bad magic"},
        {"replaced shard", replace_shard, "shard-00001-of-00004.bin: ",
         "the manifest records"},
        {"missing shard", remove_shard, "shard-00003-of-00004.bin: cannot open shard 3 of 4",
         "No such file"},
        {"missing step dir", move_step_dir, "manifest.yaml: the step directory it names",
         "step-00000007, is missing"},
        {"manifest version", manifest_version, "manifest.yaml", "fsmoe_checkpoint"},
        {"manifest size", manifest_sha, "shard-00002-of-00004.bin: ", "the manifest records 1"},
        {"manifest adamw_t", manifest_edit_unsealed, "manifest.yaml: checksum mismatch",
         "an edited or corrupted manifest"},
    };
    rt_config c = config();
    fsmoe_error err = {0};
    char dir[256];
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        subdir(dir, sizeof dir, "bad");
        save_layout(dir, 4, 4, 7, 7);
        rows[i].corrupt(dir);
        memset(&err, 0, sizeof err);
        fsmoe_status st = load_layout(dir, &c, 1, 1, 7, &err);
        print_message("%-20s -> %s\n", rows[i].what, err.msg);
        assert_int_not_equal(st, FSMOE_OK);
        assert_non_null(strstr(err.msg, rows[i].msg1));
        assert_non_null(strstr(err.msg, rows[i].msg2));
    }
    /* another model, another setting, too few steps */
    subdir(dir, sizeof dir, "bad");
    save_layout(dir, 4, 4, 7, 7);
    rt_config c2 = c;
    c2.E = 8;
    assert_int_equal(load_layout(dir, &c2, 1, 1, 7, &err), FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "manifest.yaml: checkpoint is for another model: experts is "
                                    "4 there, 8 in the model being trained"));
    c2 = c;
    c2.clip = 0.5;
    assert_int_equal(load_layout(dir, &c2, 2, 2, 7, &err), FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "settings.clip: the checkpoint was trained with 1, this run "
                                    "has 0.5"));
    c2 = c;
    c2.warmup = -1; /* resolved from steps: 100 instead of 10 */
    assert_int_equal(load_layout(dir, &c2, 2, 2, 7, &err), FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "settings.warmup: the checkpoint was trained with 10, this "
                                    "run has 100\nHINT: resume with --warmup 10"));
    c2 = c;
    c2.steps = 6;
    assert_int_equal(load_layout(dir, &c2, 1, 1, 7, &err), FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "settings.steps: the checkpoint is at step 7"));
    /* the batch per rank follows the world size; the global batch is what counts */
    assert_int_equal(load_layout(dir, &c, 2, 1, 7, &err), FSMOE_OK);
}

/* ---- kill -9 --------------------------------------------------------------------------- */

/* The child: saves steps first, first+1, ... (world 4, ep 4) until killed, writing each step
 * to fd once its manifest is in place. */
static void saver(const char *dir, long first, int fd)
{
    rt_backend *be = NULL;
    fsmoe_error err = {0};
    if (rt_backend_create("host", 1, &be, &err) != FSMOE_OK)
        _exit(3);
    rt_config c = config();
    fake_rank rs[4];
    for (int i = 0; i < 4; i++)
        if (build(&rs[i], be, &c, 4, i, 4, first))
            _exit(3);
    for (long step = first; step < first + 100000; step++) {
        for (int i = 0; i < 4; i++)
            fill(&rs[i], step);
        if (save_world(dir, rs, 4, step, &err) != FSMOE_OK) {
            fprintf(stderr, "child: %s\n", err.msg);
            _exit(4);
        }
        if (write(fd, &step, sizeof step) != (ssize_t)sizeof step)
            _exit(5);
    }
    _exit(0);
}

/* Entries of dir that are not manifest.yaml and the live step directory's shards. */
static int stray(const char *dir, const char *live, int *tmps)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    int n = 0;
    *tmps = 0;
    char p[700];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
            !strcmp(e->d_name, "manifest.yaml"))
            continue;
        *tmps += strstr(e->d_name, ".tmp.") != NULL;
        if (strcmp(e->d_name, live) != 0) {
            n++;
            continue;
        }
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        DIR *sd = opendir(p);
        assert_non_null(sd);
        struct dirent *f;
        int shards = 0;
        while ((f = readdir(sd))) {
            if (!strcmp(f->d_name, ".") || !strcmp(f->d_name, ".."))
                continue;
            *tmps += strstr(f->d_name, ".tmp.") != NULL;
            int r = 0, w = 0, len = 0;
            if (sscanf(f->d_name, "shard-%05d-of-%05d.bin%n", &r, &w, &len) == 2 &&
                f->d_name[len] == 0 && w == 4)
                shards++;
            else
                n++;
        }
        closedir(sd);
        n += shards != 4;
    }
    closedir(d);
    return n;
}

static void test_kill9(void **s)
{
    (void)s;
    char dir[256];
    subdir(dir, sizeof dir, "kill");
    rt_config c = config();
    fsmoe_error err = {0};
    unsigned seed = 20240611;
    long saved = 0;     /* highest step a child reported as saved */
    long next = 1;      /* the next child starts here */
    int mid_save = 0;   /* kills that left temporaries or a second step directory */
    for (int k = 0; k < 20; k++) {
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            saver(dir, next, fds[1]);
        }
        close(fds[1]);
        long us = (long)(rand_r(&seed) % 20001) + (k == 0 ? 500000 : 0); /* the first kill after a save surely finished, even under ASan */
        struct timespec ts = {0, us * 1000};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        long step;
        while (read(fds[0], &step, sizeof step) == (ssize_t)sizeof step)
            saved = step > saved ? step : saved;
        close(fds[0]);
        if (saved == 0) /* nothing was ever saved: nothing to load yet */
            continue;
        /* the checkpoint is the last reported save or the one whose report the kill cut */
        fsmoe_status st = load_layout(dir, &c, 1, 1, -1, &err);
        if (st != FSMOE_OK)
            print_error("kill %d: %s\n", k, err.msg);
        assert_int_equal(st, FSMOE_OK);
        long got = loaded_step;
        assert_true(got == saved || got == saved + 1);
        char live[32];
        snprintf(live, sizeof live, "step-%08ld", got);
        int tmps = 0;
        mid_save += stray(dir, live, &tmps) > 0 || tmps > 0;
        next = got + 1;
        saved = got;
    }
    print_message("20 kills; last step %ld; %d kills left a save half done\n", saved, mid_save);
    assert_true(saved > 0);
    /* a clean save removes every leftover */
    save_layout(dir, 4, 4, next, next);
    char live[32];
    snprintf(live, sizeof live, "step-%08ld", next);
    int tmps = 0;
    assert_int_equal(stray(dir, live, &tmps), 0);
    assert_int_equal(tmps, 0);
    assert_int_equal(load_layout(dir, &c, 2, 2, next, &err), FSMOE_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reshard),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_kill9),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
