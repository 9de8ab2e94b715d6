/* Implements: checkpoints v2 (checkpoint.h): shard files, the manifest, resharding load.
 *
 * Shard file layout (native byte order; integers little- or big-endian as the machine, checked
 * by the byte-order mark):
 *   0   char magic[8] "FSMOESHD"
 *   8   u32 version (2), u32 sizeof(real), u32 byte-order mark 0x01020304, u32 n (tensors)
 *   24  i64 step, i32 rank, i32 world, i32 ep, i32 0                       -> 48 bytes
 *   48  n records of 120 bytes: char name[64] (NUL-padded), i32 shard, i32 ndim,
 *       i64 dim0_start, i64 dim0_total, i64 shape[4] (unused dims 0)
 *       u8 sha256[32] of bytes [0, here)                                   -> header_bytes
 *   then for each tensor: w[numel], m[numel], v[numel] as reals           -> data_bytes
 *   then u8 sha256[32] of every byte before it (the manifest lists it as the shard's sha256).
 * The header has its own digest so that a corrupted index is reported as such before the index
 * is used to decide which shards a rank needs; the whole-file digest is checked for every shard
 * a rank reads data from. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "input_file.h"
#include "yaml_read.h"
#include "yaml_write.h"

#define FIXED_BYTES 48
#define RECORD_BYTES 120
#define NAME_BYTES 64
#define MAX_TENSORS (1L << 20)
#define MAX_DIM (1L << 40)
#define BYTE_ORDER_MARK 0x01020304u
#define MANIFEST_MAX_BYTES (64L << 20)
/* The manifest's last line: the SHA-256 of every byte before it (an edited step, AdamW t or
 * setting is refused like a corrupted shard). */
#define MANIFEST_SHA_KEY "manifest_sha256: "
#define HINT_RESAVE "HINT: resume from another copy of the checkpoint, or train again with --save"

/* ---- what a resumed run must share with the saved one ---------------------------------- */

/* The architecture: another value is another model. Keys as in the manifest's `model:`. The
 * token order (GShard's dense einsums or Tutel's sparse indices, order.h) is not one: both
 * compute the same function, and a run saved under one resumes under the other (the schedules
 * benchmark resumes DeepSpeed-MoE's GShard order from a warm-up run in Tutel's). */
#define N_ARCH 14
static const char *const arch_keys[N_ARCH] = {
    "vocab", "M", "H", "heads", "kv_heads", "layers", "seq", "experts", "top_k", "expert",
    "gate", "moe_every", "moe_first", "softmoe_slots"};

static void arch_values(const rt_config *c, long v[N_ARCH])
{
    long a[N_ARCH] = {c->V, c->M, c->H, c->heads, c->kv_heads, c->layers, c->L, c->E, c->k,
                      c->expert, (long)c->gate, c->moe_every, c->moe_first, c->softmoe_slots};
    memcpy(v, a, sizeof a);
}

/* Training settings (keys as in the manifest's `settings:`). steps may grow, batch_per_rank
 * follows the world size; from global_batch on every value must be equal (flag: how to set it
 * when resuming; NULL where fsmoe-run has no flag). */
enum { S_STEPS = 0, S_BATCH_PER_RANK, S_FIRST_CHECKED, N_SETTINGS = 14 };
static const struct {
    const char *key, *flag;
    int is_int;
} setting_defs[N_SETTINGS] = {
    {"steps", "--steps", 1},
    {"batch_per_rank", "--batch", 1},
    {"global_batch", "--batch", 1},
    {"lr", "--lr", 0},
    {"lr_min", "--min-lr", 0},
    {"warmup", "--warmup", 1},
    {"weight_decay", "--weight-decay", 0},
    {"beta1", NULL, 0},
    {"beta2", NULL, 0},
    {"eps", NULL, 0},
    {"clip", "--clip", 0},
    {"capacity_factor", "--capacity-factor", 0},
    {"gate_noise", "--gate-noise", 0},
    {"aux_loss", "--aux-loss", 0},
};

static void setting_values(const rt_config *c, const rt_layout *l, double v[N_SETTINGS])
{
    double a[N_SETTINGS] = {(double)c->steps, (double)l->B, (double)l->B_global, c->lr,
                            c->lr_min, (double)config_warmup(c), c->wd, c->beta1, c->beta2,
                            c->eps, c->clip, c->f, c->gate_noise, c->aux_coef};
    memcpy(v, a, sizeof a);
}

/* Whether this rank writes tensor p (every tensor is written once; checkpoint.h). */
static int writes(const rt_layout *l, const rt_param *p)
{
    return p->shard == RT_SHARD_EP ? l->edp_rank == 0 && l->esp_rank == 0 : l->rank == 0;
}

int checkpoint_sliced(const rt_params *t)
{
    for (int i = 0; i < t->n; i++) {
        const rt_param *p = &t->p[i];
        if (p->slice.nseg > 0)
            return 1;
        for (int d = p->shard == RT_SHARD_EP ? 1 : 0; d < p->ndim; d++)
            if (p->shape[d] != p->slice.gshape[d])
                return 1;
    }
    return 0;
}

/* The canonical table of t (checkpoint.h), tensors ordered by part; range gets the MP slices'
 * [begin, end) and the expert slices' [begin, end). Returns 0, or -1 out of memory. */
static int canon_table(const rt_params *t, rt_params *c, long range[4])
{
    memset(c, 0, sizeof *c);
    if (!(c->p = calloc((size_t)t->n + 1, sizeof *c->p)))
        return -1;
    c->cap = t->n + 1;
    for (int part = 0; part < RT_PART_COUNT; part++) {
        if (part == RT_PART_MP)
            range[0] = c->total;
        if (part == RT_PART_EXPERT)
            range[2] = c->total;
        for (int i = 0; i < t->n; i++) {
            const rt_param *p = &t->p[i];
            if (p->part != part)
                continue;
            rt_param *q = &c->p[c->n++];
            *q = *p;
            q->numel = 1;
            for (int d = 0; d < p->ndim; d++) {
                if (d > 0 || p->shard != RT_SHARD_EP)
                    q->shape[d] = p->slice.gshape[d];
                q->numel *= q->shape[d];
                q->slice.off[d] = d == 0 && p->shard == RT_SHARD_EP ? p->dim0_start : 0;
            }
            q->slice.nseg = 0;
            q->dim0_start = p->shard == RT_SHARD_EP ? p->dim0_start : 0;
            q->dim0_total = p->shard == RT_SHARD_EP ? p->dim0_total : q->shape[0];
            q->offset = c->total;
            c->total += param_span(q);
        }
        if (part == RT_PART_MP)
            range[1] = c->total;
        if (part == RT_PART_EXPERT)
            range[3] = c->total;
    }
    return 0;
}

/* Where element j of p (a rank's tensor) sits in its canonical tensor q. */
static long canon_index(const rt_param *p, long j)
{
    long g = param_global_index(p, j);
    if (p->shard == RT_SHARD_EP) {
        long inner = 1;
        for (int d = 1; d < p->ndim; d++)
            inner *= p->slice.gshape[d];
        g -= p->dim0_start * inner;
    }
    return g;
}

fsmoe_status checkpoint_canon_local(const rt_ckpt_rank *rk, rt_ckpt_canon *c, fsmoe_error *err)
{
    memset(c, 0, sizeof *c);
    const rt_params *t = rk->params;
    long range[4] = {0};
    real *local = NULL;
    if (canon_table(t, &c->table, range) != 0 ||
        !(c->host = calloc(3 * (size_t)c->table.total + 1, sizeof(real))) ||
        !(local = malloc(3 * (size_t)t->total * sizeof(real) + 1))) {
        free(local);
        checkpoint_canon_free(c);
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "checkpoint: out of memory");
    }
    c->mp_begin = range[0], c->mp_end = range[1], c->esp_begin = range[2], c->esp_end = range[3];
    rt_backend *be = rk->be;
    size_t bytes = (size_t)t->total * sizeof(real);
    be->copy(be, NULL, local, t->w, bytes, RT_D2H);
    be->copy(be, NULL, local + t->total, rk->opt->m, bytes, RT_D2H);
    be->copy(be, NULL, local + 2 * t->total, rk->opt->v, bytes, RT_D2H);
    be->stream_sync(be, NULL);
    for (int i = 0; i < t->n; i++) {
        const rt_param *p = &t->p[i], *q = params_find(&c->table, p->name);
        for (int a = 0; a < 3; a++)
            for (long j = 0; j < p->numel; j++)
                c->host[a * c->table.total + q->offset + canon_index(p, j)] =
                    local[a * t->total + p->offset + j];
    }
    free(local);
    return FSMOE_OK;
}

void checkpoint_canon_free(rt_ckpt_canon *c)
{
    if (!c)
        return;
    free(c->table.p);
    free(c->host);
    memset(c, 0, sizeof *c);
}

static int cmp_param_name(const void *a, const void *b)
{
    return strcmp((*(const rt_param *const *)a)->name, (*(const rt_param *const *)b)->name);
}

/* SHA-256 of the architecture and of the catalog of whole tensors (name and global shape,
 * sorted by name): the same on every rank of every layout of the same model. */
static fsmoe_status fingerprint(const rt_config *c, const rt_params *t,
                                char hex[FSMOE_SHA256_HEX], fsmoe_error *err)
{
    const rt_param **ps = malloc(((size_t)t->n + 1) * sizeof *ps);
    if (!ps)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "checkpoint: out of memory");
    for (int i = 0; i < t->n; i++)
        ps[i] = &t->p[i];
    qsort(ps, (size_t)t->n, sizeof *ps, cmp_param_name);
    fsmoe_sha256_ctx h;
    fsmoe_sha256_init(&h);
    char line[256];
    long v[N_ARCH];
    arch_values(c, v);
    for (int i = 0; i < N_ARCH; i++) {
        int n = snprintf(line, sizeof line, "%s=%ld\n", arch_keys[i], v[i]);
        fsmoe_sha256_update(&h, line, (size_t)n);
    }
    for (int i = 0; i < t->n; i++) {
        const rt_param *p = ps[i];
        int n = snprintf(line, sizeof line, "%s:%ld", p->name, p->dim0_total);
        for (int d = 1; d < p->ndim; d++)
            n += snprintf(line + n, sizeof line - (size_t)n, ",%ld", p->shape[d]);
        line[n++] = '\n';
        fsmoe_sha256_update(&h, line, (size_t)n);
    }
    free(ps);
    unsigned char d[FSMOE_SHA256_BYTES];
    fsmoe_sha256_final(&h, d);
    for (int i = 0; i < FSMOE_SHA256_BYTES; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    return FSMOE_OK;
}

static void to_hex(const unsigned char d[FSMOE_SHA256_BYTES], char hex[FSMOE_SHA256_HEX])
{
    for (int i = 0; i < FSMOE_SHA256_BYTES; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

/* Makes the renames inside a directory durable (the data itself was fsynced before). */
static void sync_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* Opens a file of the checkpoint for reading, refusing anything but a regular file before it
 * can block (a FIFO in place of a shard or the manifest would wait for a writer forever):
 * NULL with errno set, EINVAL for another kind of file. */
static FILE *open_regular(const char *path)
{
    FILE *f = NULL;
    fsmoe_error e = {0};
    return fsmoe_open_input(path, &f, NULL, &e) == FSMOE_OK ? f : NULL; /* errno set */
}

static const char *open_error(int e)
{
    return e == EINVAL ? "not a regular file" : strerror(e);
}

static int read_file(const char *path, long max, char **text, size_t *len)
{
    FILE *f = open_regular(path);
    if (!f)
        return -1;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            if ((long)cap >= max) {
                errno = EFBIG;
                break;
            }
            char *nb = realloc(buf, 2 * cap);
            if (!nb)
                break;
            buf = nb, cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) {
            if (ferror(f))
                break;
            fclose(f);
            *text = buf;
            *len = n;
            return 0;
        }
    }
    int e = errno ? errno : ENOMEM;
    free(buf);
    fclose(f);
    errno = e;
    return -1;
}

/* ---- names --------------------------------------------------------------------------- */

static void shard_name(char *buf, size_t n, int rank, int world)
{
    snprintf(buf, n, "shard-%05d-of-%05d.bin", rank, world);
}

/* The step directory for a save at `step`: step-%08ld, or step-%08ld-b when the checkpoint the
 * manifest points at now is already step-%08ld (a run saving again at the step it holds, e.g. a
 * fresh run into an old run's directory), so that the live checkpoint is never overwritten in
 * place. Every rank reads the same manifest here: rank 0 only replaces it after all shards of a
 * save are written, and saves of one run have increasing steps. */
static void step_dir_for(const char *dir, long step, char out[32])
{
    char plain[26], path[1100];
    snprintf(plain, sizeof plain, "step-%08ld", step);
    snprintf(out, 32, "%s", plain);
    snprintf(path, sizeof path, "%s/%s", dir, RT_CKPT_MANIFEST);
    char *text = NULL;
    size_t len = 0;
    if (read_file(path, MANIFEST_MAX_BYTES, &text, &len) != 0)
        return;
    rt_ckpt_manifest m;
    if (checkpoint_manifest_parse(path, text, len, &m, NULL) == FSMOE_OK) {
        if (strcmp(m.step_dir, plain) == 0)
            snprintf(out, 32, "%s-b", plain);
        checkpoint_manifest_free(&m);
    }
    free(text);
}

/* ---- save ---------------------------------------------------------------------------- */

typedef struct {
    FILE *f;
    fsmoe_sha256_ctx h;
    int bad;
} hwriter;

static void hw(hwriter *w, const void *p, size_t n)
{
    if (!w->bad && n > 0 && fwrite(p, 1, n, w->f) != n)
        w->bad = errno ? errno : EIO;
    fsmoe_sha256_update(&w->h, p, n);
}

static void put32(unsigned char *b, int32_t v) { memcpy(b, &v, 4); }
static void put64(unsigned char *b, int64_t v) { memcpy(b, &v, 8); }

fsmoe_status checkpoint_save_shard(const char *dir, long step, const rt_ckpt_rank *rk,
                                   rt_ckpt_shard_info *out, fsmoe_error *err)
{
    const rt_layout *l = rk->lay;
    const rt_params *t = rk->params;
    memset(out, 0, sizeof *out);
    if (l->world < 1 || l->rank < 0 || l->rank >= l->world || l->ep < 1)
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "checkpoint: rank %d of world %d, ep %d",
                          l->rank, l->world, l->ep);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s: cannot create checkpoint directory: %s", dir,
                          strerror(errno));
    out->rank = l->rank, out->world = l->world, out->step = step;
    step_dir_for(dir, step, out->step_dir);
    shard_name(out->file, sizeof out->file, l->rank, l->world);
    char sdir[1100], path[1200];
    snprintf(sdir, sizeof sdir, "%s/%s", dir, out->step_dir);
    snprintf(path, sizeof path, "%s/%s", sdir, out->file);
    if (mkdir(sdir, 0777) != 0 && errno != EEXIST)
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s: cannot create step directory: %s", sdir,
                          strerror(errno));

    rt_backend *be = rk->be;
    if (rk->canon) /* a run with slices: the canonical tensors, summed over their groups */
        t = &rk->canon->table;
    else if (checkpoint_sliced(t))
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "checkpoint: a run with slices saves its "
                          "canonical tensors (checkpoint_canon_local)");
    long n = t->total;
    size_t bytes = (size_t)n * sizeof(real);
    real *copied = NULL; /* the tensors from the backend (the canonical ones are host arrays) */
    const real *host = rk->canon ? rk->canon->host : (copied = malloc(3 * bytes + 1));
    if (!host)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "checkpoint: out of memory");
    if (copied) {
        be->copy(be, NULL, copied, t->w, bytes, RT_D2H);
        be->copy(be, NULL, copied + n, rk->opt->m, bytes, RT_D2H);
        be->copy(be, NULL, copied + 2 * n, rk->opt->v, bytes, RT_D2H);
        be->stream_sync(be, NULL);
    }

    int32_t count = 0;
    for (int i = 0; i < t->n; i++)
        count += writes(l, &t->p[i]);
    fsmoe_atomic_file af;
    fsmoe_status st = fsmoe_atomic_open(&af, path, err);
    if (st != FSMOE_OK)
        goto out;
    hwriter w;
    memset(&w, 0, sizeof w);
    w.f = af.f;
    fsmoe_sha256_init(&w.h);
    unsigned char fx[FIXED_BYTES] = {0};
    memcpy(fx, RT_CKPT_MAGIC, 8);
    put32(fx + 8, RT_CKPT_VERSION);
    put32(fx + 12, (int32_t)sizeof(real));
    put32(fx + 16, (int32_t)BYTE_ORDER_MARK);
    put32(fx + 20, count);
    put64(fx + 24, step);
    put32(fx + 32, l->rank);
    put32(fx + 36, l->world);
    put32(fx + 40, l->ep);
    hw(&w, fx, sizeof fx);
    for (int i = 0; i < t->n; i++) {
        const rt_param *p = &t->p[i];
        if (!writes(l, p))
            continue;
        unsigned char rec[RECORD_BYTES] = {0};
        snprintf((char *)rec, NAME_BYTES, "%s", p->name);
        put32(rec + 64, p->shard);
        put32(rec + 68, p->ndim);
        put64(rec + 72, p->dim0_start);
        put64(rec + 80, p->dim0_total);
        for (int d = 0; d < 4; d++)
            put64(rec + 88 + 8 * d, d < p->ndim ? p->shape[d] : 0);
        hw(&w, rec, sizeof rec);
    }
    unsigned char dig[FSMOE_SHA256_BYTES];
    fsmoe_sha256_ctx hh = w.h;
    fsmoe_sha256_final(&hh, dig);
    hw(&w, dig, sizeof dig);
    long total_bytes = FIXED_BYTES + (long)count * RECORD_BYTES + FSMOE_SHA256_BYTES;
    for (int i = 0; i < t->n; i++) {
        const rt_param *p = &t->p[i];
        if (!writes(l, p))
            continue;
        for (int a = 0; a < 3; a++)
            hw(&w, host + (long)a * n + p->offset, (size_t)p->numel * sizeof(real));
        total_bytes += 3 * p->numel * (long)sizeof(real);
    }
    fsmoe_sha256_final(&w.h, dig);
    if (!w.bad && fwrite(dig, 1, sizeof dig, af.f) != sizeof dig)
        w.bad = errno ? errno : EIO;
    total_bytes += FSMOE_SHA256_BYTES;
    if (w.bad) {
        st = fsmoe_fail(err, FSMOE_ERR_IO, "%s: write failed: %s", path, strerror(w.bad));
        fsmoe_atomic_abort(&af);
        goto out;
    }
    if ((st = fsmoe_atomic_commit(&af, err)) != FSMOE_OK) /* fsync + rename */
        goto out;
    sync_dir(sdir);
    sync_dir(dir);
    out->bytes = total_bytes;
    to_hex(dig, out->sha256);
out:
    free(copied);
    return st;
}

/* Removes what no manifest references any more: other step directories (their shards and
 * temporaries), files of the live step directory that are not its shards (temporaries of an
 * interrupted save, shards of another world size), temporaries of the manifest. Only names this
 * file creates are touched. Best effort: a file that cannot be removed is left for the next
 * save. */
static void clean(const char *dir, const char *live, const rt_ckpt_shard_info *shards, int n)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[1200];
    while ((e = readdir(d))) {
        const char *name = e->d_name;
        snprintf(path, sizeof path, "%s/%s", dir, name);
        if (strncmp(name, RT_CKPT_MANIFEST ".tmp.", sizeof RT_CKPT_MANIFEST + 4) == 0) {
            unlink(path);
            continue;
        }
        if (strncmp(name, "step-", 5) != 0)
            continue;
        int is_live = strcmp(name, live) == 0;
        DIR *sd = opendir(path);
        if (!sd)
            continue;
        struct dirent *f;
        char fpath[1600];
        while ((f = readdir(sd))) {
            if (strncmp(f->d_name, "shard-", 6) != 0)
                continue;
            int keep = 0;
            for (int i = 0; is_live && i < n; i++)
                keep |= strcmp(f->d_name, shards[i].file) == 0;
            if (!keep) {
                snprintf(fpath, sizeof fpath, "%s/%s", path, f->d_name);
                unlink(fpath);
            }
        }
        closedir(sd);
        if (!is_live)
            rmdir(path);
    }
    closedir(d);
}

/* Removes temporaries (names with ".tmp.") left in dir and in its step directories by a writer
 * that was killed; used when no manifest can be read (nothing else is known to be stale). */
static void clean_temporaries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[1200], fpath[1600];
    while ((e = readdir(d))) {
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (strncmp(e->d_name, RT_CKPT_MANIFEST ".tmp.", sizeof RT_CKPT_MANIFEST + 4) == 0) {
            unlink(path);
            continue;
        }
        if (strncmp(e->d_name, "step-", 5) != 0)
            continue;
        DIR *sd = opendir(path);
        if (!sd)
            continue;
        struct dirent *f;
        while ((f = readdir(sd)))
            if (strncmp(f->d_name, "shard-", 6) == 0 && strstr(f->d_name, ".tmp.")) {
                snprintf(fpath, sizeof fpath, "%s/%s", path, f->d_name);
                unlink(fpath);
            }
        closedir(sd);
        rmdir(path); /* only when it is empty now */
    }
    closedir(d);
}

fsmoe_status checkpoint_prepare_dir(const char *flag, const char *dir, int rank,
                                    fsmoe_error *err)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s %s: cannot create the checkpoint directory: %s",
                          flag, dir, strerror(errno));
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s %s: not a directory (checkpoints are a "
                          "directory of a manifest and shards)", flag, dir);
    /* a file is created in it and removed: the same test as the saves will meet */
    char probe[1100];
    snprintf(probe, sizeof probe, "%s/.fsmoe-probe.%ld.%d", dir, (long)getpid(), rank);
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0)
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s %s: cannot write in the checkpoint directory "
                          "(%s)", flag, dir, strerror(errno));
    int bad = write(fd, "x", 1) != 1 ? (errno ? errno : EIO) : 0;
    if (close(fd) != 0 && !bad)
        bad = errno;
    unlink(probe);
    if (bad)
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s %s: cannot write in the checkpoint directory "
                          "(%s)", flag, dir, strerror(bad));
    if (rank != 0)
        return FSMOE_OK;
    /* what an earlier run left when it was killed in the middle of a save */
    char mpath[1100], *text = NULL;
    size_t len = 0;
    snprintf(mpath, sizeof mpath, "%s/%s", dir, RT_CKPT_MANIFEST);
    rt_ckpt_manifest m;
    if (read_file(mpath, MANIFEST_MAX_BYTES, &text, &len) == 0 &&
        checkpoint_manifest_parse(mpath, text, len, &m, NULL) == FSMOE_OK) {
        clean(dir, m.step_dir, m.shards, m.n);
        checkpoint_manifest_free(&m);
    } else {
        clean_temporaries(dir);
    }
    free(text);
    return FSMOE_OK;
}

fsmoe_status checkpoint_write_manifest(const char *dir, long step, const rt_ckpt_rank *rk,
                                       const rt_ckpt_shard_info *shards, int n,
                                       fsmoe_error *err)
{
    const rt_layout *l = rk->lay;
    const rt_config *c = rk->cfg;
    if (n != l->world)
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL,
                          "%s: manifest: %d shard descriptions for a world of %d", dir, n,
                          l->world);
    for (int i = 0; i < n; i++) {
        char want[48];
        shard_name(want, sizeof want, i, n);
        if (shards[i].rank != i || shards[i].world != n || shards[i].step != step ||
            strcmp(shards[i].file, want) != 0 ||
            strcmp(shards[i].step_dir, shards[0].step_dir) != 0 || shards[i].bytes <= 0)
            return fsmoe_fail(err, FSMOE_ERR_INTERNAL,
                              "%s: manifest: shard %d describes rank %d of %d, step %ld, %s/%s "
                              "(expected rank %d of %d, step %ld, %s/%s)", dir, i,
                              shards[i].rank, shards[i].world, shards[i].step,
                              shards[i].step_dir, shards[i].file, i, n, step,
                              shards[0].step_dir, want);
    }
    char fp[FSMOE_SHA256_HEX], path[1100];
    fsmoe_status st = fingerprint(c, rk->canon ? &rk->canon->table : rk->params, fp, err);
    if (st != FSMOE_OK)
        return st;
    snprintf(path, sizeof path, "%s/%s", dir, RT_CKPT_MANIFEST);
    fsmoe_atomic_file af;
    if ((st = fsmoe_atomic_open(&af, path, err)) != FSMOE_OK)
        return st;
    /* the text is composed in memory: its last line is the SHA-256 of every byte before it */
    char *text = NULL;
    size_t text_len = 0;
    FILE *mf = open_memstream(&text, &text_len);
    if (!mf) {
        fsmoe_atomic_abort(&af);
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "checkpoint: out of memory");
    }
    fsmoe_yaml_writer w;
    fsmoe_yw_init(&w, mf);
    fsmoe_yw_comment(&w, "fsmoe-run checkpoint (runtime/checkpoint.h). Written last and atomically:");
    fsmoe_yw_comment(&w, "the checkpoint is step_dir's shards; anything else here is stale.");
    fsmoe_yw_long(&w, 0, "fsmoe_checkpoint", RT_CKPT_VERSION);
    fsmoe_yw_long(&w, 0, "step", step);
    fsmoe_yw_long(&w, 0, "adamw_t", rk->opt->t);
    fsmoe_yw_comment(&w, "RNG state: every draw is a pure function of (seed, stream, counter) and");
    fsmoe_yw_comment(&w, "the counters are the step, so seed and step are the whole state.");
    fsmoe_yw_flow_begin(&w, 0, "rng");
    fsmoe_yw_long(&w, 0, "seed", (long)c->seed);
    fsmoe_yw_long(&w, 0, "step", step);
    fsmoe_yw_flow_end(&w);
    fsmoe_yw_flow_begin(&w, 0, "layout");
    fsmoe_yw_long(&w, 0, "world", l->world);
    fsmoe_yw_long(&w, 0, "ep", l->ep);
    fsmoe_yw_long(&w, 0, "edp", l->world / l->ep);
    fsmoe_yw_long(&w, 0, "gpus_per_node", l->gpus_per_node);
    fsmoe_yw_flow_end(&w);
    fsmoe_yw_block(&w, 0, "model");
    fsmoe_yw_str(&w, 2, "name", c->name);
    fsmoe_yw_str(&w, 2, "fingerprint", fp);
    fsmoe_yw_long(&w, 2, "tensors", rk->params->n);
    long av[N_ARCH];
    arch_values(c, av);
    for (int i = 0; i < N_ARCH; i++)
        fsmoe_yw_long(&w, 2, arch_keys[i], av[i]);
    fsmoe_yw_block(&w, 0, "settings");
    double sv[N_SETTINGS];
    setting_values(c, l, sv);
    for (int i = 0; i < N_SETTINGS; i++) {
        if (setting_defs[i].is_int)
            fsmoe_yw_long(&w, 2, setting_defs[i].key, (long)sv[i]);
        else
            fsmoe_yw_double(&w, 2, setting_defs[i].key, sv[i]);
    }
    fsmoe_yw_str(&w, 0, "step_dir", shards[0].step_dir);
    fsmoe_yw_block(&w, 0, "shards");
    for (int i = 0; i < n; i++) {
        fsmoe_yw_flow_begin(&w, 2, NULL);
        fsmoe_yw_str(&w, 0, "file", shards[i].file);
        fsmoe_yw_long(&w, 0, "rank", shards[i].rank);
        fsmoe_yw_long(&w, 0, "bytes", shards[i].bytes);
        fsmoe_yw_str(&w, 0, "sha256", shards[i].sha256);
        fsmoe_yw_flow_end(&w);
    }
    int bad = w.error;
    if (fclose(mf) != 0 && !bad)
        bad = errno ? errno : ENOMEM;
    if (!bad) {
        char hex[FSMOE_SHA256_HEX];
        fsmoe_sha256_hex(text, text_len, hex);
        if (fwrite(text, 1, text_len, af.f) != text_len ||
            fprintf(af.f, "%s%s\n", MANIFEST_SHA_KEY, hex) < 0)
            bad = errno ? errno : EIO;
    }
    free(text);
    if (bad) {
        st = fsmoe_fail(err, FSMOE_ERR_IO, "%s: write failed: %s", path, strerror(bad));
        fsmoe_atomic_abort(&af);
        return st;
    }
    if ((st = fsmoe_atomic_commit(&af, err)) != FSMOE_OK)
        return st;
    sync_dir(dir);
    clean(dir, shards[0].step_dir, shards, n);
    return FSMOE_OK;
}

fsmoe_status checkpoint_save(const char *dir, long step, const rt_ckpt_rank *rk,
                             fsmoe_error *err)
{
    if (rk->lay->world != 1)
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL,
                          "checkpoint_save is for world 1; with %d ranks call "
                          "checkpoint_save_shard on each, then checkpoint_write_manifest",
                          rk->lay->world);
    rt_ckpt_shard_info info;
    fsmoe_status st = checkpoint_save_shard(dir, step, rk, &info, err);
    if (st != FSMOE_OK)
        return st;
    return checkpoint_write_manifest(dir, step, rk, &info, 1, err);
}

/* ---- shard reader -------------------------------------------------------------------- */

static int32_t get32(const unsigned char *b)
{
    int32_t v;
    memcpy(&v, b, 4);
    return v;
}

static int64_t get64(const unsigned char *b)
{
    int64_t v;
    memcpy(&v, b, 8);
    return v;
}

void checkpoint_index_free(rt_ckpt_index *ix)
{
    free(ix->e);
    memset(ix, 0, sizeof *ix);
}

fsmoe_status checkpoint_index_read(FILE *f, long size, const char *path, rt_ckpt_index *ix,
                                   fsmoe_error *err)
{
    memset(ix, 0, sizeof *ix);
    unsigned char fx[FIXED_BYTES], *recs = NULL;
    fsmoe_status st = FSMOE_OK;
    size_t got = fread(fx, 1, sizeof fx, f);
    if (got < 8 || memcmp(fx, RT_CKPT_MAGIC, 8) != 0)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: not an fsmoe-run checkpoint shard (bad magic)",
                          path);
    if (got < 12 || get32(fx + 8) != RT_CKPT_VERSION)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: shard version %d, this fsmoe-run reads version %d\n"
                          "HINT: it was written by another fsmoe-run; train again with --save",
                          path, got < 12 ? -1 : (int)get32(fx + 8), RT_CKPT_VERSION);
    if (got < sizeof fx)
        return fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: truncated shard header (%ld bytes)", path,
                          size);
    if (get32(fx + 16) != (int32_t)BYTE_ORDER_MARK)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: shard written on a machine of another byte order", path);
    if (get32(fx + 12) != (int32_t)sizeof(real))
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: shard holds %d-byte reals, this fsmoe-run uses %zu", path,
                          (int)get32(fx + 12), sizeof(real));
    long n = get32(fx + 20);
    if (n < 0 || n > MAX_TENSORS ||
        size < FIXED_BYTES + n * RECORD_BYTES + 2 * FSMOE_SHA256_BYTES)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: truncated or corrupted shard: %ld bytes cannot hold the header of "
                          "%ld tensors", path, size, n);
    size_t rb = (size_t)n * RECORD_BYTES;
    recs = malloc(rb + 1);
    if (!recs)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "checkpoint: out of memory");
    unsigned char dig[FSMOE_SHA256_BYTES], want[FSMOE_SHA256_BYTES];
    if (fread(recs, 1, rb, f) != rb || fread(want, 1, sizeof want, f) != sizeof want) {
        st = fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: truncated shard header", path);
        goto fail;
    }
    fsmoe_sha256_ctx h;
    fsmoe_sha256_init(&h);
    fsmoe_sha256_update(&h, fx, sizeof fx);
    fsmoe_sha256_update(&h, recs, rb);
    fsmoe_sha256_final(&h, dig);
    if (memcmp(dig, want, sizeof dig) != 0) {
        st = fsmoe_fail(err, FSMOE_ERR_VALUE,
                        "%s: header checksum mismatch (corrupted shard header)\n" HINT_RESAVE,
                        path);
        goto fail;
    }
    ix->step = get64(fx + 24);
    ix->rank = get32(fx + 32);
    ix->world = get32(fx + 36);
    ix->n = (int)n;
    ix->header_bytes = FIXED_BYTES + n * RECORD_BYTES + FSMOE_SHA256_BYTES;
    if (ix->world < 1 || ix->rank < 0 || ix->rank >= ix->world || ix->step < 0) {
        st = fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: shard header says rank %d of %d, step %ld",
                        path, ix->rank, ix->world, ix->step);
        goto fail;
    }
    ix->e = calloc((size_t)n + 1, sizeof *ix->e);
    if (!ix->e) {
        st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "checkpoint: out of memory");
        goto fail;
    }
    long data = 0, max_data = size - ix->header_bytes - FSMOE_SHA256_BYTES;
    for (long i = 0; i < n; i++) {
        const unsigned char *r = recs + i * RECORD_BYTES;
        rt_ckpt_entry *e = &ix->e[i];
        if (memchr(r, 0, NAME_BYTES) == NULL || r[0] == 0) {
            st = fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: tensor %ld: bad name", path, i);
            goto fail;
        }
        memcpy(e->name, r, NAME_BYTES);
        e->shard = get32(r + 64);
        e->ndim = get32(r + 68);
        e->dim0_start = get64(r + 72);
        e->dim0_total = get64(r + 80);
        int ok = (e->shard == RT_SHARD_NONE || e->shard == RT_SHARD_EP) && e->ndim >= 1 &&
                 e->ndim <= 4 && e->dim0_total >= 1 && e->dim0_total <= MAX_DIM;
        e->numel = 1;
        for (int d = 0; ok && d < 4; d++) {
            e->shape[d] = get64(r + 88 + 8 * d);
            if (d >= e->ndim)
                ok = e->shape[d] == 0;
            else if (e->shape[d] < 1 || e->shape[d] > MAX_DIM || e->numel > MAX_DIM / e->shape[d])
                ok = 0;
            else
                e->numel *= e->shape[d];
        }
        ok = ok && e->dim0_start >= 0 && e->dim0_start <= e->dim0_total - e->shape[0];
        ok = ok && (e->shard == RT_SHARD_EP ||
                    (e->dim0_start == 0 && e->shape[0] == e->dim0_total));
        if (!ok) {
            st = fsmoe_fail(err, FSMOE_ERR_VALUE,
                            "%s: tensor '%s': impossible shape or dim-0 range in the index", path,
                            e->name);
            goto fail;
        }
        for (long j = 0; j < i; j++)
            if (strcmp(ix->e[j].name, e->name) == 0) {
                st = fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: tensor '%s' listed twice", path,
                                e->name);
                goto fail;
            }
        long b = 3 * e->numel * (long)sizeof(real);
        if (b > max_data - data) {
            st = fsmoe_fail(err, FSMOE_ERR_VALUE,
                            "%s: truncated shard: %ld bytes, the index describes more", path, size);
            goto fail;
        }
        data += b;
    }
    ix->data_bytes = data;
    if (data != max_data) {
        st = fsmoe_fail(err, FSMOE_ERR_VALUE,
                        "%s: %ld bytes, the index describes %ld (trailing bytes)", path, size,
                        ix->header_bytes + data + FSMOE_SHA256_BYTES);
        goto fail;
    }
    free(recs);
    return FSMOE_OK;
fail:
    free(recs);
    checkpoint_index_free(ix);
    return st;
}

fsmoe_status checkpoint_shard_verify(FILE *f, const char *path, const rt_ckpt_index *ix,
                                     const char *want_sha, rt_ckpt_take_fn take, void *user,
                                     fsmoe_error *err)
{
    long max_numel = 0;
    for (int i = 0; i < ix->n; i++)
        max_numel = ix->e[i].numel > max_numel ? ix->e[i].numel : max_numel;
    size_t hb = (size_t)ix->header_bytes;
    size_t cap = (size_t)max_numel * sizeof(real) > hb ? (size_t)max_numel * sizeof(real) : hb;
    unsigned char *buf = malloc(cap + 1);
    if (!buf)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "checkpoint: out of memory");
    fsmoe_status st = FSMOE_OK;
    fsmoe_sha256_ctx h;
    fsmoe_sha256_init(&h);
    if (fseek(f, 0, SEEK_SET) != 0 || fread(buf, 1, hb, f) != hb)
        goto truncated;
    fsmoe_sha256_update(&h, buf, hb);
    for (int i = 0; i < ix->n; i++)
        for (int a = 0; a < 3; a++) {
            size_t b = (size_t)ix->e[i].numel * sizeof(real);
            if (fread(buf, 1, b, f) != b)
                goto truncated;
            fsmoe_sha256_update(&h, buf, b);
            if (take)
                take(user, i, a, (const real *)(void *)buf);
        }
    unsigned char dig[FSMOE_SHA256_BYTES], trailer[FSMOE_SHA256_BYTES];
    if (fread(trailer, 1, sizeof trailer, f) != sizeof trailer)
        goto truncated;
    fsmoe_sha256_final(&h, dig);
    char hex[FSMOE_SHA256_HEX];
    to_hex(dig, hex);
    if (memcmp(dig, trailer, sizeof dig) != 0) {
        st = fsmoe_fail(err, FSMOE_ERR_VALUE,
                        "%s: checksum mismatch: the bytes give sha256 %.16s..., the file's "
                        "trailer says otherwise (corrupted shard)\n" HINT_RESAVE, path, hex);
        goto out;
    }
    if (want_sha && strcmp(hex, want_sha) != 0) {
        st = fsmoe_fail(err, FSMOE_ERR_VALUE,
                        "%s: checksum mismatch: sha256 %.16s..., the manifest records %.16s... "
                        "(a shard of another save)\n" HINT_RESAVE, path, hex, want_sha);
        goto out;
    }
    if (fgetc(f) != EOF) {
        st = fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: trailing bytes after the shard", path);
        goto out;
    }
    goto out;
truncated:
    st = fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: truncated shard (read failed: %s)", path,
                    ferror(f) ? strerror(errno) : "end of file");
out:
    free(buf);
    return st;
}

/* ---- manifest reader ----------------------------------------------------------------- */

void checkpoint_manifest_free(rt_ckpt_manifest *m)
{
    free(m->shards);
    memset(m, 0, sizeof *m);
}

static int is_hex64(const char *s)
{
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return s[64] == 0;
}

fsmoe_status checkpoint_manifest_parse(const char *path, const char *text, size_t len,
                                       rt_ckpt_manifest *m, fsmoe_error *err)
{
    static const char *const top[] = {"fsmoe_checkpoint", "step", "adamw_t", "rng", "layout",
                                      "model", "settings", "step_dir", "shards",
                                      "manifest_sha256", NULL};
    static const char *const rng_keys[] = {"seed", "step", NULL};
    static const char *const layout_keys[] = {"world", "ep", "edp", "gpus_per_node", NULL};
    static const char *const shard_keys[] = {"file", "rank", "bytes", "sha256", NULL};
    const char *model_keys[N_ARCH + 4], *settings_keys[N_SETTINGS + 1];
    model_keys[0] = "name", model_keys[1] = "fingerprint", model_keys[2] = "tensors";
    for (int i = 0; i < N_ARCH; i++)
        model_keys[3 + i] = arch_keys[i];
    model_keys[N_ARCH + 3] = NULL;
    for (int i = 0; i < N_SETTINGS; i++)
        settings_keys[i] = setting_defs[i].key;
    settings_keys[N_SETTINGS] = NULL;

    memset(m, 0, sizeof *m);
    fsmoe_yaml y;
    fsmoe_ynode root, rng, lay, model, set, shards, item;
    long rng_step = 0, seed = 0, edp = 0, tensors = 0;
    fsmoe_status st = fsmoe_yaml_open_string(&y, path, text, len, err);
    if (st != FSMOE_OK)
        goto fail;
    if ((st = fsmoe_yaml_root(&y, &root, err)) ||
        (st = fsmoe_yaml_check_version(&root, "fsmoe_checkpoint", RT_CKPT_VERSION, err)) ||
        (st = fsmoe_yaml_check_keys(&root, top, err)) ||
        (st = fsmoe_yaml_long(&root, "step", FSMOE_REQUIRED, 0, 1L << 50, &m->step, err)) ||
        (st = fsmoe_yaml_long(&root, "adamw_t", FSMOE_REQUIRED, 0, 1L << 50, &m->adamw_t, err)) ||
        (st = fsmoe_yaml_mapping(&root, "rng", FSMOE_REQUIRED, &rng, err)) ||
        (st = fsmoe_yaml_check_keys(&rng, rng_keys, err)) ||
        (st = fsmoe_yaml_long(&rng, "seed", FSMOE_REQUIRED, 0, INT64_MAX, &seed, err)) ||
        (st = fsmoe_yaml_long(&rng, "step", FSMOE_REQUIRED, 0, 1L << 50, &rng_step, err)) ||
        (st = fsmoe_yaml_mapping(&root, "layout", FSMOE_REQUIRED, &lay, err)) ||
        (st = fsmoe_yaml_check_keys(&lay, layout_keys, err)) ||
        (st = fsmoe_yaml_int(&lay, "world", FSMOE_REQUIRED, 1, 1 << 20, &m->world, err)) ||
        (st = fsmoe_yaml_int(&lay, "ep", FSMOE_REQUIRED, 1, 1 << 20, &m->ep, err)) ||
        (st = fsmoe_yaml_long(&lay, "edp", FSMOE_REQUIRED, 1, 1 << 20, &edp, err)) ||
        (st = fsmoe_yaml_int(&lay, "gpus_per_node", FSMOE_REQUIRED, 0, 1 << 20, /* 0: not known */
                             &m->gpus_per_node, err)) ||
        (st = fsmoe_yaml_mapping(&root, "model", FSMOE_REQUIRED, &model, err)) ||
        (st = fsmoe_yaml_check_keys(&model, model_keys, err)) ||
        (st = fsmoe_yaml_string(&model, "name", FSMOE_REQUIRED, m->model_name,
                                sizeof m->model_name, err)) ||
        (st = fsmoe_yaml_string(&model, "fingerprint", FSMOE_REQUIRED, m->fingerprint,
                                sizeof m->fingerprint, err)) ||
        (st = fsmoe_yaml_long(&model, "tensors", FSMOE_REQUIRED, 0, MAX_TENSORS, &tensors, err)))
        goto fail;
    m->seed = (uint64_t)seed;
    if (rng_step != m->step || m->world % m->ep != 0 || edp != m->world / m->ep) {
        st = fsmoe_yaml_fail(&root, err, FSMOE_ERR_VALUE,
                             "inconsistent manifest: step %ld, rng.step %ld, world %d, ep %d, "
                             "edp %ld", m->step, rng_step, m->world, m->ep, edp);
        goto fail;
    }
    if (!is_hex64(m->fingerprint)) {
        st = fsmoe_yaml_fail(&model, err, FSMOE_ERR_VALUE,
                             "fingerprint: expected 64 lowercase hex digits");
        goto fail;
    }
    for (int i = 0; i < N_ARCH; i++)
        if ((st = fsmoe_yaml_long(&model, arch_keys[i], FSMOE_REQUIRED, 0, MAX_DIM, &m->arch[i],
                                  err)))
            goto fail;
    if ((st = fsmoe_yaml_mapping(&root, "settings", FSMOE_REQUIRED, &set, err)) ||
        (st = fsmoe_yaml_check_keys(&set, settings_keys, err)))
        goto fail;
    for (int i = 0; i < N_SETTINGS; i++) {
        if (setting_defs[i].is_int) {
            long v = 0;
            if ((st = fsmoe_yaml_long(&set, setting_defs[i].key, FSMOE_REQUIRED, 0, 1L << 50, &v,
                                      err)))
                goto fail;
            m->settings[i] = (double)v;
        } else if ((st = fsmoe_yaml_double(&set, setting_defs[i].key, FSMOE_REQUIRED, 0, 1e30,
                                           &m->settings[i], err)))
            goto fail;
    }
    if ((st = fsmoe_yaml_string(&root, "step_dir", FSMOE_REQUIRED, m->step_dir,
                                sizeof m->step_dir, err)))
        goto fail;
    char plain[32], alt[40];
    snprintf(plain, sizeof plain, "step-%08ld", m->step);
    snprintf(alt, sizeof alt, "%s-b", plain);
    if (strcmp(m->step_dir, plain) != 0 && strcmp(m->step_dir, alt) != 0) {
        st = fsmoe_yaml_fail(&root, err, FSMOE_ERR_VALUE, "step_dir: '%s' is not %s or %s",
                             m->step_dir, plain, alt);
        goto fail;
    }
    if ((st = fsmoe_yaml_sequence(&root, "shards", FSMOE_REQUIRED, &shards, err)))
        goto fail;
    m->n = fsmoe_yaml_seq_len(&shards);
    if (m->n != m->world) {
        st = fsmoe_yaml_fail(&shards, err, FSMOE_ERR_VALUE,
                             "%d shards listed for a world of %d (one per rank)", m->n, m->world);
        goto fail;
    }
    m->shards = calloc((size_t)m->n + 1, sizeof *m->shards);
    if (!m->shards) {
        st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "checkpoint: out of memory");
        goto fail;
    }
    for (int i = 0; i < m->n; i++) {
        rt_ckpt_shard_info *s = &m->shards[i];
        char want[48];
        int rank = 0;
        shard_name(want, sizeof want, i, m->world);
        if ((st = fsmoe_yaml_seq_item(&shards, i, &item, err)) ||
            (st = fsmoe_yaml_node_expect_mapping(&item, err)) ||
            (st = fsmoe_yaml_check_keys(&item, shard_keys, err)) ||
            (st = fsmoe_yaml_string(&item, "file", FSMOE_REQUIRED, s->file, sizeof s->file,
                                    err)) ||
            (st = fsmoe_yaml_int(&item, "rank", FSMOE_REQUIRED, 0, m->world - 1, &rank, err)) ||
            (st = fsmoe_yaml_long(&item, "bytes", FSMOE_REQUIRED, 1, INT64_MAX, &s->bytes,
                                  err)) ||
            (st = fsmoe_yaml_string(&item, "sha256", FSMOE_REQUIRED, s->sha256,
                                    sizeof s->sha256, err)))
            goto fail;
        if (rank != i || strcmp(s->file, want) != 0 || !is_hex64(s->sha256)) {
            st = fsmoe_yaml_fail(&item, err, FSMOE_ERR_VALUE,
                                 "expected {file: %s, rank: %d, ..., sha256: 64 hex digits}",
                                 want, i);
            goto fail;
        }
        s->rank = i, s->world = m->world, s->step = m->step;
        snprintf(s->step_dir, sizeof s->step_dir, "%s", m->step_dir);
    }
    fsmoe_yaml_close(&y);
    return FSMOE_OK;
fail:
    fsmoe_yaml_close(&y);
    checkpoint_manifest_free(m);
    return st;
}

/* ---- load ---------------------------------------------------------------------------- */

/* A run of rows of one tensor of this rank, taken from one index entry of one shard. */
typedef struct {
    int shard, entry, param;
    long src_row, dst_row, rows; /* rows of the entry's / the parameter's own part */
} piece;

typedef struct {
    const rt_params *t;
    const piece *pc;
    int n_pc, shard;
    real *host[3];
} take_ctx;

static void take_rows(void *user, int e, int a, const real *data)
{
    take_ctx *c = user;
    for (int i = 0; i < c->n_pc; i++) {
        const piece *p = &c->pc[i];
        if (p->shard != c->shard || p->entry != e)
            continue;
        const rt_param *q = &c->t->p[p->param];
        long row = q->numel / q->shape[0];
        memcpy(c->host[a] + q->offset + p->dst_row * row, data + p->src_row * row,
               (size_t)(p->rows * row) * sizeof(real));
    }
}

static int same_inner(const rt_ckpt_entry *e, const rt_param *p)
{
    if (e->ndim != p->ndim || e->dim0_total != p->dim0_total)
        return 0;
    for (int d = 1; d < p->ndim; d++)
        if (e->shape[d] != p->shape[d])
            return 0;
    return 1;
}

static void shape_str(char *buf, size_t n, long d0, const long *shape, int ndim)
{
    int o = snprintf(buf, n, "(%ld", d0);
    for (int d = 1; d < ndim && o < (int)n; d++)
        o += snprintf(buf + o, n - (size_t)o, ", %ld", shape[d]);
    if (o < (int)n)
        snprintf(buf + o, n - (size_t)o, ")");
}

static fsmoe_status check_settings(const char *mpath, const rt_ckpt_manifest *m,
                                   const rt_ckpt_rank *rk, fsmoe_error *err)
{
    const rt_config *c = rk->cfg;
    long av[N_ARCH];
    arch_values(c, av);
    for (int i = 0; i < N_ARCH; i++)
        if (m->arch[i] != av[i])
            return fsmoe_fail(err, FSMOE_ERR_VALUE,
                              "%s: checkpoint is for another model: %s is %ld there, %ld in the "
                              "model being trained", mpath, arch_keys[i], m->arch[i], av[i]);
    /* The data order and the noise of the gates follow the seed: resuming under another seed
     * would silently give a run that is not the continuation of the saved one. */
    if (m->seed != c->seed)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: checkpoint was trained with --seed %llu, this run has --seed %llu\n"
                          "HINT: resume with --seed %llu to continue the same run", mpath,
                          (unsigned long long)m->seed, (unsigned long long)c->seed,
                          (unsigned long long)m->seed);
    double sv[N_SETTINGS];
    setting_values(c, rk->lay, sv);
    if (sv[S_STEPS] < (double)m->step)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: settings.steps: the checkpoint is at step %ld, this run stops at "
                          "--steps %ld\nHINT: resume with --steps %ld or more (steps may be "
                          "extended, not cut below the checkpoint)", mpath, m->step, c->steps,
                          m->step);
    for (int i = S_FIRST_CHECKED; i < N_SETTINGS; i++) {
        if (sv[i] == m->settings[i])
            continue;
        char a[FSMOE_YW_DOUBLE_CHARS], b[FSMOE_YW_DOUBLE_CHARS];
        if (setting_defs[i].is_int) {
            snprintf(a, sizeof a, "%ld", (long)m->settings[i]);
            snprintf(b, sizeof b, "%ld", (long)sv[i]);
        } else {
            fsmoe_yaml_format_double(m->settings[i], a);
            fsmoe_yaml_format_double(sv[i], b);
        }
        char hint[160] = "";
        if (i == S_FIRST_CHECKED) /* global_batch */
            snprintf(hint, sizeof hint, "\nHINT: resume with --batch %s/dp (dp %d: --batch %g)",
                     a, rk->lay->dp, m->settings[i] / rk->lay->dp);
        else if (setting_defs[i].flag)
            snprintf(hint, sizeof hint, "\nHINT: resume with %s %s to continue the same run",
                     setting_defs[i].flag, a);
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: settings.%s: the checkpoint was trained with %s, this run has %s%s",
                          mpath, setting_defs[i].key, a, b, hint);
    }
    return FSMOE_OK;
}

/* The manifest's own checksum: its last line, MANIFEST_SHA_KEY and the SHA-256 of the bytes
 * before that line. */
static fsmoe_status manifest_verify(const char *mpath, const char *text, size_t len,
                                    fsmoe_error *err)
{
    const size_t kl = sizeof MANIFEST_SHA_KEY - 1, line = kl + 64 + 1;
    size_t at = len >= line ? len - line : 0;
    if (len < line || (at > 0 && text[at - 1] != '\n') ||
        memcmp(text + at, MANIFEST_SHA_KEY, kl) != 0 || text[len - 1] != '\n')
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: no '%s<64 hex digits>' last line (a truncated or edited manifest, "
                          "or one written by another fsmoe-run)\n" HINT_RESAVE, mpath,
                          MANIFEST_SHA_KEY);
    char want[FSMOE_SHA256_HEX], got[FSMOE_SHA256_HEX];
    memcpy(want, text + at + kl, 64);
    want[64] = '\0';
    fsmoe_sha256_hex(text, at, got);
    if (strcmp(want, got) != 0)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: checksum mismatch: its text gives sha256 %.16s..., its last line "
                          "says %.16s... (an edited or corrupted manifest)\n" HINT_RESAVE, mpath,
                          got, want);
    return FSMOE_OK;
}

fsmoe_status checkpoint_load(const char *dir, const rt_ckpt_rank *rk, long *step,
                             fsmoe_error *err)
{
    /* a run with slices reads the canonical tensors and keeps its own elements */
    const rt_params *t = rk->params, *local_t = rk->params;
    rt_params canon = {0};
    long range[4];
    char mpath[1100], sdir[1100], path[1200];
    snprintf(mpath, sizeof mpath, "%s/%s", dir, RT_CKPT_MANIFEST);
    char *text = NULL;
    size_t len = 0;
    if (read_file(mpath, MANIFEST_MAX_BYTES, &text, &len) != 0) {
        int e = errno;
        struct stat sb;
        snprintf(path, sizeof path, "%s/checkpoint.bin", dir);
        if (e == ENOENT && stat(path, &sb) == 0)
            return fsmoe_fail(err, FSMOE_ERR_VALUE,
                              "%s: a version-1 checkpoint (no %s); this fsmoe-run reads version "
                              "%d (a manifest and one shard per rank)\nHINT: train again with "
                              "--save %s", path, RT_CKPT_MANIFEST, RT_CKPT_VERSION, dir);
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s: cannot read checkpoint manifest: %s", mpath,
                          open_error(e));
    }
    rt_ckpt_manifest m;
    fsmoe_status st = manifest_verify(mpath, text, len, err);
    if (st == FSMOE_OK)
        st = checkpoint_manifest_parse(mpath, text, len, &m, err);
    free(text);
    if (st != FSMOE_OK)
        return st;
    if (checkpoint_sliced(local_t)) {
        if (canon_table(local_t, &canon, range) != 0) {
            checkpoint_manifest_free(&m);
            return fsmoe_fail(err, FSMOE_ERR_NOMEM, "checkpoint: out of memory");
        }
        t = &canon;
    }
    rt_ckpt_index *ix = calloc((size_t)m.n + 1, sizeof *ix);
    piece *pc = NULL;
    char *covered = NULL;
    real *host = NULL;
    int n_pc = 0, cap_pc = 0;
    FILE *f = NULL;
    if (!ix) {
        st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "checkpoint: out of memory");
        goto out;
    }
    if ((st = check_settings(mpath, &m, rk, err)) != FSMOE_OK)
        goto out;
    snprintf(sdir, sizeof sdir, "%s/%s", dir, m.step_dir);
    struct stat sb;
    int rc = stat(sdir, &sb), serr = errno;
    if (rc != 0 || !S_ISDIR(sb.st_mode)) {
        st = fsmoe_fail(err, FSMOE_ERR_IO,
                        "%s: the step directory it names, %s, is missing (%s)\n" HINT_RESAVE,
                        mpath, sdir, rc != 0 ? strerror(serr) : "not a directory");
        goto out;
    }
    /* Pass 1: every shard's index (sizes and header checksums checked). */
    for (int s = 0; s < m.n; s++) {
        snprintf(path, sizeof path, "%s/%s", sdir, m.shards[s].file);
        if (!(f = open_regular(path))) {
            st = fsmoe_fail(err, FSMOE_ERR_IO, "%s: cannot open shard %d of %d listed in %s: %s",
                            path, s, m.n, mpath, open_error(errno));
            goto out;
        }
        if (fstat(fileno(f), &sb) != 0 || (long)sb.st_size != m.shards[s].bytes) {
            st = fsmoe_fail(err, FSMOE_ERR_VALUE,
                            "%s: %ld bytes, the manifest records %ld (truncated or replaced "
                            "shard)\n" HINT_RESAVE, path, (long)sb.st_size, m.shards[s].bytes);
            goto out;
        }
        if ((st = checkpoint_index_read(f, (long)sb.st_size, path, &ix[s], err)) != FSMOE_OK)
            goto out;
        fclose(f);
        f = NULL;
        if (ix[s].rank != s || ix[s].world != m.world || ix[s].step != m.step) {
            st = fsmoe_fail(err, FSMOE_ERR_VALUE,
                            "%s: shard of rank %d of %d at step %ld, the manifest expects rank "
                            "%d of %d at step %ld", path, ix[s].rank, ix[s].world, ix[s].step, s,
                            m.world, m.step);
            goto out;
        }
    }
    /* Which rows of which tensor come from where; every tensor of the checkpoint must be one of
     * the model's, with the same whole shape. */
    long max_rows = 1;
    for (int i = 0; i < t->n; i++)
        max_rows = t->p[i].shape[0] > max_rows ? t->p[i].shape[0] : max_rows;
    covered = malloc((size_t)max_rows);
    if (!covered) {
        st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "checkpoint: out of memory");
        goto out;
    }
    for (int s = 0; s < m.n; s++)
        for (int j = 0; j < ix[s].n; j++) {
            const rt_ckpt_entry *e = &ix[s].e[j];
            const rt_param *p = params_find(t, e->name);
            snprintf(path, sizeof path, "%s/%s", sdir, m.shards[s].file);
            if (!p) {
                st = fsmoe_fail(err, FSMOE_ERR_VALUE,
                                "%s: tensor '%s' is not in the model being trained (checkpoint "
                                "of another model)", path, e->name);
                goto out;
            }
            if (!same_inner(e, p)) {
                char a[128], b[128];
                shape_str(a, sizeof a, e->dim0_total, e->shape, e->ndim);
                shape_str(b, sizeof b, p->dim0_total, p->shape, p->ndim);
                st = fsmoe_fail(err, FSMOE_ERR_VALUE,
                                "%s: tensor '%s' is %s there, %s in the model being trained",
                                path, e->name, a, b);
                goto out;
            }
        }
    for (int i = 0; i < t->n; i++) {
        const rt_param *p = &t->p[i];
        long lo = p->dim0_start, hi = p->dim0_start + p->shape[0];
        memset(covered, 0, (size_t)p->shape[0]);
        for (int s = 0; s < m.n; s++)
            for (int j = 0; j < ix[s].n; j++) {
                const rt_ckpt_entry *e = &ix[s].e[j];
                if (strcmp(e->name, p->name) != 0)
                    continue;
                long a = e->dim0_start > lo ? e->dim0_start : lo;
                long b = e->dim0_start + e->shape[0] < hi ? e->dim0_start + e->shape[0] : hi;
                for (long r = a; r < b;) {
                    if (covered[r - lo]) {
                        r++;
                        continue;
                    }
                    long r1 = r;
                    while (r1 < b && !covered[r1 - lo])
                        covered[r1++ - lo] = 1;
                    if (n_pc == cap_pc) {
                        cap_pc = cap_pc ? 2 * cap_pc : 64;
                        piece *np = realloc(pc, (size_t)cap_pc * sizeof *np);
                        if (!np) {
                            st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "checkpoint: out of memory");
                            goto out;
                        }
                        pc = np;
                    }
                    pc[n_pc++] = (piece){s, j, i, r - e->dim0_start, r - lo, r1 - r};
                    r = r1;
                }
            }
        for (long r = 0; r < p->shape[0]; r++)
            if (!covered[r]) {
                long r1 = r;
                while (r1 < p->shape[0] && !covered[r1])
                    r1++;
                st = fsmoe_fail(err, FSMOE_ERR_VALUE,
                                "%s: tensor '%s': global rows [%ld, %ld) of %ld are in no shard "
                                "(saved with world %d, ep %d)", mpath, p->name, lo + r, lo + r1,
                                p->dim0_total, m.world, m.ep);
                goto out;
            }
    }
    char fp[FSMOE_SHA256_HEX];
    if ((st = fingerprint(rk->cfg, t, fp, err)) != FSMOE_OK)
        goto out;
    if (strcmp(fp, m.fingerprint) != 0) {
        st = fsmoe_fail(err, FSMOE_ERR_VALUE,
                        "%s: model fingerprint %.16s..., the model being trained has %.16s... "
                        "(another tensor catalog)", mpath, m.fingerprint, fp);
        goto out;
    }
    /* Pass 2: the shards this rank takes rows from, each checked whole. */
    size_t bytes = (size_t)t->total * sizeof(real);
    host = calloc(3 * (size_t)t->total + 1, sizeof(real));
    if (!host) {
        st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "checkpoint: out of memory");
        goto out;
    }
    take_ctx tc = {t, pc, n_pc, 0, {host, host + t->total, host + 2 * t->total}};
    for (int s = 0; s < m.n; s++) {
        int needed = 0;
        for (int i = 0; i < n_pc && !needed; i++)
            needed = pc[i].shard == s;
        if (!needed)
            continue;
        snprintf(path, sizeof path, "%s/%s", sdir, m.shards[s].file);
        if (!(f = open_regular(path))) {
            st = fsmoe_fail(err, FSMOE_ERR_IO, "%s: cannot open shard: %s", path,
                            open_error(errno));
            goto out;
        }
        tc.shard = s;
        if ((st = checkpoint_shard_verify(f, path, &ix[s], m.shards[s].sha256, take_rows, &tc,
                                          err)) != FSMOE_OK)
            goto out;
        fclose(f);
        f = NULL;
    }
    if (t == &canon) { /* this rank's elements of the canonical tensors */
        real *mine = malloc(3 * (size_t)local_t->total * sizeof(real) + 1);
        if (!mine) {
            st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "checkpoint: out of memory");
            goto out;
        }
        for (int i = 0; i < local_t->n; i++) {
            const rt_param *p = &local_t->p[i], *q = params_find(t, p->name);
            for (int a = 0; a < 3; a++)
                for (long j = 0; j < p->numel; j++)
                    mine[a * local_t->total + p->offset + j] =
                        host[a * t->total + q->offset + canon_index(p, j)];
        }
        free(host);
        host = mine;
        bytes = (size_t)local_t->total * sizeof(real);
    }
    rt_backend *be = rk->be;
    be->copy(be, NULL, local_t->w, host, bytes, RT_H2D);
    be->copy(be, NULL, rk->opt->m, host + local_t->total, bytes, RT_H2D);
    be->copy(be, NULL, rk->opt->v, host + 2 * local_t->total, bytes, RT_H2D);
    be->stream_sync(be, NULL);
    rk->opt->t = m.adamw_t;
    *step = m.step;
out:
    if (f)
        fclose(f);
    for (int s = 0; ix && s < m.n; s++)
        checkpoint_index_free(&ix[s]);
    free(ix);
    free(pc);
    free(covered);
    free(host);
    free(canon.p);
    checkpoint_manifest_free(&m);
    return st;
}

long checkpoint_saved_warmup(const char *dir)
{
    char mpath[1100];
    snprintf(mpath, sizeof mpath, "%s/%s", dir, RT_CKPT_MANIFEST);
    char *text = NULL;
    size_t len = 0;
    if (read_file(mpath, MANIFEST_MAX_BYTES, &text, &len) != 0)
        return -1;
    rt_ckpt_manifest m;
    long w = -1;
    if (manifest_verify(mpath, text, len, NULL) == FSMOE_OK &&
        checkpoint_manifest_parse(mpath, text, len, &m, NULL) == FSMOE_OK) {
        for (int i = 0; i < N_SETTINGS; i++)
            if (strcmp(setting_defs[i].key, "warmup") == 0)
                w = (long)m.settings[i];
        checkpoint_manifest_free(&m);
    }
    free(text);
    return w;
}
