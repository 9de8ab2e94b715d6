/* Implements: byte-level data (data.h). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "data.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "input_file.h"
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
    FILE *f = NULL;
    long long size = 0;
    fsmoe_status st = fsmoe_open_input(path, &f, &size, err); /* never blocks on a FIFO */
    if (st == FSMOE_ERR_VALUE) { /* not a regular file: say what is expected */
        char msg[FSMOE_ERROR_MAX];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return fsmoe_fail(err, st, "%.900s; the data must be a byte-level token file", msg);
    }
    if (st != FSMOE_OK)
        return st;
    if (size > max_bytes) {
        fclose(f);
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s: %lld bytes, more than the %ld bytes of memory the run leaves for "
                          "its data (the file is held in memory)", path, size, max_bytes);
    }
    d->n = (long)size;
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
