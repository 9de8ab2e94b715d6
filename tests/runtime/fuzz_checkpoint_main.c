/* A driver for the checkpoint fuzz harnesses without libFuzzer (gcc build, unit suite): makes a
 * real checkpoint (2 ranks, ep 2: replicated and expert tensors), feeds its shards or its
 * manifest to LLVMFuzzerTestOneInput, then deterministic mutations of them (bytes flipped or
 * set, truncations, splices). With a directory argument it also writes the seeds there, as the
 * starting corpus of scripts/fuzz.sh (fuzz-seed-cmd).
 *   fuzz_checkpoint_main shard|manifest [CORPUS_DIR] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../test_fs.h"
#include "checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return rs;
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)sz + 1);
    *n = fread(b, 1, (size_t)sz, f);
    fclose(f);
    return b;
}

/* Saves a 2-rank checkpoint into dir. */
static int make_checkpoint(const char *dir)
{
    rt_backend *be = NULL;
    fsmoe_error err = {0};
    if (rt_backend_create("host", 1, &be, &err) != FSMOE_OK)
        return 1;
    rt_config c;
    config_defaults(&c);
    c.E = 4;
    rt_ckpt_shard_info info[2];
    rt_layout lay[2];
    rt_params t[2];
    rt_adamw opt[2];
    real *w[3], *g[3];
    int bad = 0;
    for (int r = 0; r < 2; r++) {
        lay[r] = layout_make(2, r, 1, 2, 4, 2);
        memset(&t[r], 0, sizeof t[r]);
        params_add(&t[r], &w[0], &g[0], RT_INIT_NORMAL, 0.02, (const long[]){5, 3}, 2, "wte");
        params_add(&t[r], &w[1], &g[1], RT_INIT_NORMAL, 0.02, (const long[]){2, 3, 2}, 3,
                   "blocks.0.moe.experts.w1");
        params_shard_since(&t[r], t[r].n - 1, lay[r].expert0, 4);
        params_add(&t[r], &w[2], &g[2], RT_INIT_ONE, 0, (const long[]){3}, 1, "lnf.w");
        bad |= params_alloc(&t[r], be, 1, &err) != FSMOE_OK;
        bad |= adamw_init(&opt[r], &t[r], be, &err) != FSMOE_OK;
        if (bad)
            break;
        rt_ckpt_rank rk = {&c, &lay[r], be, &t[r], &opt[r], NULL};
        bad |= checkpoint_save_shard(dir, 3, &rk, &info[r], &err) != FSMOE_OK;
        if (r == 1 && !bad) {
            rt_ckpt_rank rk0 = {&c, &lay[0], be, &t[0], &opt[0], NULL};
            bad |= checkpoint_write_manifest(dir, 3, &rk0, info, 2, &err) != FSMOE_OK;
        }
    }
    if (bad)
        fprintf(stderr, "fuzz_checkpoint_main: %s\n", err.msg);
    for (int r = 0; r < 2; r++) {
        adamw_free(&opt[r], be);
        params_free(&t[r], be);
    }
    rt_backend_destroy(&be);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "shard") && strcmp(argv[1], "manifest"))) {
        fprintf(stderr, "usage: fuzz_checkpoint_main shard|manifest [CORPUS_DIR]\n");
        return 2;
    }
    int shard = strcmp(argv[1], "shard") == 0;
    char dir[128], p[300];
    snprintf(dir, sizeof dir, "/tmp/fsmoe_fuzz_seed.%d", (int)getpid());
    if (make_checkpoint(dir))
        return 1;
    const char *files[2] = {"step-00000003/shard-00000-of-00002.bin",
                            "step-00000003/shard-00001-of-00002.bin"};
    int n_seeds = shard ? 2 : 1;
    unsigned char *seed[2];
    size_t len[2];
    for (int i = 0; i < n_seeds; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, shard ? files[i] : RT_CKPT_MANIFEST);
        if (!(seed[i] = slurp(p, &len[i]))) {
            perror(p);
            return 1;
        }
        unlink(p);
        if (argc > 2) {
            mkdir(argv[2], 0777);
            snprintf(p, sizeof p, "%s/seed-%d", argv[2], i);
            FILE *f = fopen(p, "wb");
            if (f) {
                fwrite(seed[i], 1, len[i], f);
                fclose(f);
            }
        }
    }
    test_remove_tree(dir); /* the manifest and the step directory with its shards */

    long runs = 0;
    for (int i = 0; i < n_seeds; i++) {
        LLVMFuzzerTestOneInput(seed[i], len[i]);
        unsigned char *b = malloc(len[i] * 2 + 1);
        for (int k = 0; k < 4000; k++, runs++) {
            size_t n = len[i];
            memcpy(b, seed[i], n);
            int kind = (int)(rnd() % 4), edits = 1 + (int)(rnd() % 4);
            for (int e = 0; e < edits; e++) {
                size_t at = (size_t)(rnd() % n);
                if (kind == 0)
                    b[at] ^= (unsigned char)(1u << (rnd() % 8));
                else if (kind == 1)
                    b[at] = (unsigned char)rnd();
                else if (kind == 2)
                    n = at + 1;
                else { /* splice: repeat a piece */
                    size_t from = (size_t)(rnd() % n), m = (size_t)(rnd() % 64);
                    if (from + m > n)
                        m = n - from;
                    if (n + m <= len[i] * 2) {
                        unsigned char piece[64];
                        memcpy(piece, b + from, m);
                        memmove(b + at + m, b + at, n - at);
                        memcpy(b + at, piece, m);
                        n += m;
                    }
                }
            }
            LLVMFuzzerTestOneInput(b, n);
        }
        free(b);
        free(seed[i]);
    }
    printf("fuzz_checkpoint_main %s: %ld mutated inputs, no crash\n", argv[1], runs);
    return 0;
}
