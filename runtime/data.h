/* Implements: the training data: a byte-level token file (every byte is one token, vocabulary
 * 256), split 90 % train / 10 % validation, and deterministic batches: batch `step` of a split
 * is B windows of L+1 bytes at offsets drawn from (seed, split, step), so a resumed run sees
 * exactly the batches of the uninterrupted one. */
#ifndef RT_DATA_H
#define RT_DATA_H

#include <stdint.h>

#include "status.h"

typedef struct {
    unsigned char *bytes;
    long n, train_end;
    char path[512];
} rt_data;

/* Loads path; every byte must be < vocab; each split must hold at least one window of L+1.
 * Anything but a regular file (a FIFO, a device, a directory) is refused before it is read, so
 * that the run never waits on it. */
fsmoe_status data_load(rt_data *d, const char *path, long vocab, long L, fsmoe_error *err);
/* The same, refusing a file of more than max_bytes (what the memory limit leaves for it) before
 * allocating. */
fsmoe_status data_load_limited(rt_data *d, const char *path, long vocab, long L, long max_bytes,
                               fsmoe_error *err);
/* The checks of data_load on d->bytes[0, d->n) (d->path names it); sets d->train_end. */
fsmoe_status data_check(rt_data *d, long vocab, long L, fsmoe_error *err);
void data_free(rt_data *d);
/* split 0 = train, 1 = validation; tok/tgt (B·L). */
void data_batch(const rt_data *d, int split, uint64_t seed, long step, long B, long L, int *tok,
                int *tgt);
/* Samples [b0, b0 + B) of the same batch: window b of a batch depends on (seed, split, step, b)
 * only, so the ranks' slices of a global batch are the samples one rank would draw for it. */
void data_batch_slice(const rt_data *d, int split, uint64_t seed, long step, long b0, long B,
                      long L, int *tok, int *tgt);
/* Unigram entropy of the training split in nats per byte (the loss of the best model that
 * ignores context). */
double data_unigram_entropy(const rt_data *d);

#endif
