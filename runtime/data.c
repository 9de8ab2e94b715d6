/* Implements: byte-level data (data.h). */
#include "data.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

fsmoe_status data_load(rt_data *d, const char *path, long vocab, long L, fsmoe_error *err)
{
    memset(d, 0, sizeof(*d));
    snprintf(d->path, sizeof d->path, "%s", path);
    FILE *f = fopen(path, "rb");
    if (!f)
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s: cannot open data file: %s", path,
                          strerror(errno));
    fsmoe_status st = FSMOE_OK;
    if (fseek(f, 0, SEEK_END) != 0 || (d->n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        st = fsmoe_fail(err, FSMOE_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        goto fail;
    }
    d->bytes = malloc((size_t)d->n + 1);
    if (!d->bytes) {
        st = fsmoe_fail(err, FSMOE_ERR_NOMEM, "%s: %ld bytes do not fit in memory", path, d->n);
        goto fail;
    }
    if (fread(d->bytes, 1, (size_t)d->n, f) != (size_t)d->n) {
        st = fsmoe_fail(err, FSMOE_ERR_IO, "%s: short read", path);
        goto fail;
    }
    d->train_end = d->n - d->n / 10;
    if (d->n / 10 < L + 1 || d->train_end < L + 1) {
        st = fsmoe_fail(err, FSMOE_ERR_VALUE,
                        "%s: %ld bytes is too small: each of the train (90 %%) and validation "
                        "(10 %%) splits needs at least L+1 = %ld bytes", path, d->n, L + 1);
        goto fail;
    }
    for (long i = 0; i < d->n; i++)
        if (d->bytes[i] >= vocab) {
            st = fsmoe_fail(err, FSMOE_ERR_VALUE,
                            "%s: byte %ld has value %d, outside the model's vocabulary of %ld "
                            "tokens (the data is a byte-level token file)", path, i,
                            d->bytes[i], vocab);
            goto fail;
        }
    fclose(f);
    return FSMOE_OK;
fail:
    fclose(f);
    free(d->bytes);
    d->bytes = NULL;
    return st;
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
