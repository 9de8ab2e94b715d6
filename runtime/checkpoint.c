/* Implements: checkpoint save and load (checkpoint.h). */
#include "checkpoint.h"

#include "atomic_file.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define N_FP 15

static void fingerprint(const rt_model *md, int64_t fp[N_FP])
{
    const rt_config *c = &md->cfg;
    int64_t v[N_FP] = {c->V, c->M, c->H, c->heads, c->layers, c->L, c->E, c->k, c->expert,
                       c->gate, c->order, c->moe_every, c->moe_first, md->params.n,
                       md->params.total};
    memcpy(fp, v, sizeof v);
}

static const char *const fp_names[N_FP] = {"vocab", "M", "H", "heads", "layers", "L", "E", "k",
                                           "expert", "gate", "order", "moe_every", "moe_first",
                                           "tensor count", "parameter count"};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

fsmoe_status checkpoint_save(const char *dir, const rt_model *md, const rt_adamw *opt, long step,
                             fsmoe_error *err)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s: cannot create checkpoint directory: %s", dir,
                          strerror(errno));
    char path[1024];
    snprintf(path, sizeof path, "%s/checkpoint.bin", dir);
    rt_backend *be = md->be;
    long n = md->params.total;
    size_t bytes = (size_t)n * sizeof(real);
    real *host = malloc(3 * bytes + 1);
    if (!host)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "checkpoint: out of memory");
    be->copy(be, NULL, host, md->params.w, bytes, RT_D2H);
    be->copy(be, NULL, host + n, opt->m, bytes, RT_D2H);
    be->copy(be, NULL, host + 2 * n, opt->v, bytes, RT_D2H);
    be->stream_sync(be, NULL);
    fsmoe_atomic_file af;
    fsmoe_status st = fsmoe_atomic_open(&af, path, err);
    if (st != FSMOE_OK)
        goto out;
    uint32_t ver = RT_CKPT_VERSION, rsz = sizeof(real);
    int64_t fp[N_FP], hdr[3] = {step, opt->t, (int64_t)md->cfg.seed};
    fingerprint(md, fp);
    uint64_t h = fnv(0xcbf29ce484222325ull, host, 3 * bytes);
    FILE *f = af.f;
    int ok = fwrite(RT_CKPT_MAGIC, 1, 8, f) == 8 && fwrite(&ver, 4, 1, f) == 1 &&
             fwrite(&rsz, 4, 1, f) == 1 && fwrite(fp, sizeof fp, 1, f) == 1 &&
             fwrite(hdr, sizeof hdr, 1, f) == 1 && fwrite(host, 1, 3 * bytes, f) == 3 * bytes &&
             fwrite(&h, 8, 1, f) == 1;
    if (!ok) {
        st = fsmoe_fail(err, FSMOE_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        fsmoe_atomic_abort(&af);
        goto out;
    }
    st = fsmoe_atomic_commit(&af, err); /* fsync + rename */
out:
    free(host);
    return st;
}

fsmoe_status checkpoint_load(const char *dir, rt_model *md, rt_adamw *opt, long *step,
                             fsmoe_error *err)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/checkpoint.bin", dir);
    FILE *f = fopen(path, "rb");
    if (!f)
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s: cannot open checkpoint: %s", path,
                          strerror(errno));
    rt_backend *be = md->be;
    long n = md->params.total;
    size_t bytes = (size_t)n * sizeof(real);
    real *host = NULL;
    fsmoe_status st = FSMOE_OK;
    char magic[8];
    uint32_t ver = 0, rsz = 0;
    int64_t fp[N_FP], want[N_FP], hdr[3];
    uint64_t h = 0;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, RT_CKPT_MAGIC, 8) != 0) {
        st = fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: not an fsmoe-run checkpoint (bad magic)", path);
        goto out;
    }
    if (fread(&ver, 4, 1, f) != 1 || ver != RT_CKPT_VERSION) {
        st = fsmoe_fail(err, FSMOE_ERR_VALUE,
                        "%s: checkpoint version %u, this fsmoe-run reads version %d\n"
                        "HINT: it was written by another fsmoe-run; train again with --save",
                        path, ver, RT_CKPT_VERSION);
        goto out;
    }
    if (fread(&rsz, 4, 1, f) != 1 || rsz != sizeof(real)) {
        st = fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: checkpoint holds %u-byte reals, expected %zu",
                        path, rsz, sizeof(real));
        goto out;
    }
    if (fread(fp, sizeof fp, 1, f) != 1 || fread(hdr, sizeof hdr, 1, f) != 1) {
        st = fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: truncated checkpoint header", path);
        goto out;
    }
    fingerprint(md, want);
    for (int i = 0; i < N_FP; i++)
        if (fp[i] != want[i]) {
            st = fsmoe_fail(err, FSMOE_ERR_VALUE,
                            "%s: checkpoint is for another model: %s is %lld there, %lld in the "
                            "model being trained", path, fp_names[i], (long long)fp[i],
                            (long long)want[i]);
            goto out;
        }
    /* The data order and the noise of the gates follow the seed: resuming under another seed
     * would silently give a run that is not the continuation of the saved one. */
    if (hdr[2] != (int64_t)md->cfg.seed) {
        st = fsmoe_fail(err, FSMOE_ERR_VALUE,
                        "%s: checkpoint was trained with --seed %lld, this run has --seed %lld\n"
                        "HINT: resume with --seed %lld to continue the same run",
                        path, (long long)hdr[2], (long long)md->cfg.seed, (long long)hdr[2]);
        goto out;
    }
    host = malloc(3 * bytes + 1);
    if (!host) {
        st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "checkpoint: out of memory");
        goto out;
    }
    if (fread(host, 1, 3 * bytes, f) != 3 * bytes || fread(&h, 8, 1, f) != 1) {
        st = fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: truncated checkpoint (expected %zu bytes of "
                        "tensors)", path, 3 * bytes);
        goto out;
    }
    if (h != fnv(0xcbf29ce484222325ull, host, 3 * bytes)) {
        st = fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: checksum mismatch (corrupted checkpoint)",
                        path);
        goto out;
    }
    if (fgetc(f) != EOF) {
        st = fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: trailing bytes after the checkpoint", path);
        goto out;
    }
    be->copy(be, NULL, md->params.w, host, bytes, RT_H2D);
    be->copy(be, NULL, opt->m, host + n, bytes, RT_H2D);
    be->copy(be, NULL, opt->v, host + 2 * n, bytes, RT_H2D);
    be->stream_sync(be, NULL);
    *step = (long)hdr[0];
    opt->t = (long)hdr[1];
out:
    fclose(f);
    free(host);
    return st;
}
