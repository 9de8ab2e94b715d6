/* Implements: byte-level data (data.h). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "data.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rng.h"

fsmoe_status data_load(rt_data *d, const char *path, long vocab, long L, fsmoe_error *err)
{
    return data_load_limited(d, path, vocab, L, LONG_MAX, err);
}

fsmoe_status data_load_limited(rt_data *d, const char *path, long vocab, long L, long max_bytes,
                               fsmoe_error *err)
{
    memset(d, 0, sizeof(*d));
    snprintf(d->path, sizeof d->path, "%s", path);
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; the type is
     * checked on the open descriptor (no window between a stat and the open). */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s: cannot open data file: %s", path,
                          strerror(errno));
    struct stat sb;
    FILE *f = NULL;
    fsmoe_status st = FSMOE_OK;
    if (fstat(fd, &sb) != 0) {
        st = fsmoe_fail(err, FSMOE_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        close(fd);
        return st;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: not a regular file (a %s); the data must be a byte-level token "
                          "file", path, S_ISDIR(sb.st_mode) ? "directory"
                                        : S_ISFIFO(sb.st_mode) ? "FIFO"
                                        : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "device"
                                        : S_ISSOCK(sb.st_mode) ? "socket" : "special file");
    }
    if (sb.st_size > max_bytes) {
        close(fd);
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: %lld bytes, more than the %ld bytes of memory the run leaves for "
                          "its data (the file is held in memory)", path, (long long)sb.st_size,
                          max_bytes);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 || !(f = fdopen(fd, "rb"))) {
        st = fsmoe_fail(err, FSMOE_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        close(fd);
        return st;
    }
    d->n = (long)sb.st_size;
    d->bytes = malloc((size_t)d->n + 1);
    if (!d->bytes) {
        st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "%s: %ld bytes do not fit in memory", path, d->n);
        goto fail;
    }
    if (fread(d->bytes, 1, (size_t)d->n, f) != (size_t)d->n) {
        st = fsmoe_fail(err, FSMOE_ERR_IO, "%s: short read (%s)", path,
                        ferror(f) ? strerror(errno) : "the file shrank while being read");
        goto fail;
    }
    fclose(f);
    f = NULL;
    if ((st = data_check(d, vocab, L, err)) != FSMOE_OK)
        goto fail;
    return FSMOE_OK;
fail:
    if (f)
        fclose(f);
    free(d->bytes);
    d->bytes = NULL;
    d->n = d->train_end = 0;
    return st;
}

fsmoe_status data_check(rt_data *d, long vocab, long L, fsmoe_error *err)
{
    const char *path = d->path;
    d->train_end = d->n - d->n / 10;
    if (L < 1 || d->n / 10 < L + 1 || d->train_end < L + 1)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: %ld bytes is too small: each of the train (90 %%) and validation "
                          "(10 %%) splits needs at least L+1 = %ld bytes", path, d->n, L + 1);
    for (long i = 0; i < d->n; i++)
        if (d->bytes[i] >= vocab)
            return fsmoe_fail(err, FSMOE_ERR_VALUE,
                              "%s: byte %ld has value %d, outside the model's vocabulary of %ld "
                              "tokens (the data is a byte-level token file)", path, i,
                              d->bytes[i], vocab);
    return FSMOE_OK;
}

void data_free(rt_data *d)
{
    free(d->bytes);
    memset(d, 0, sizeof(*d));
}

void data_batch(const rt_data *d, int split, uint64_t seed, long step, long B, long L, int *tok,
                int *tgt)
{
    data_batch_slice(d, split, seed, step, 0, B, L, tok, tgt);
}

void data_batch_slice(const rt_data *d, int split, uint64_t seed, long step, long b0, long B,
                      long L, int *tok, int *tgt)
{
    long lo = split ? d->train_end : 0, hi = split ? d->n : d->train_end;
    long span = hi - lo - L; /* window start in [lo, hi - L - 1] */
    for (long b = 0; b < B; b++) {
        uint64_t h = rng_hash(seed, 0xda7a0000u + (uint64_t)split, (uint64_t)step,
                              (uint64_t)(b0 + b));
        long off = lo + (long)(h % (uint64_t)span);
        for (long l = 0; l < L; l++) {
            tok[b * L + l] = d->bytes[off + l];
            tgt[b * L + l] = d->bytes[off + l + 1];
        }
    }
}

double data_unigram_entropy(const rt_data *d)
{
    long cnt[256] = {0};
    for (long i = 0; i < d->train_end; i++)
        cnt[d->bytes[i]]++;
    double h = 0;
    for (int i = 0; i < 256; i++)
        if (cnt[i]) {
            double p = (double)cnt[i] / (double)d->train_end;
            h -= p * log(p);
        }
    return h;
}
