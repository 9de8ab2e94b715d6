/* libFuzzer harness: fsmoe-run's data loader (runtime/data.c) on arbitrary bytes. The first two
 * bytes choose the vocabulary (2..257 tokens) and the window length L (1..64); the rest is
 * written to a temporary file that data_load reads like a --data file. When it loads, batches
 * of both splits are drawn (every window must lie inside its split: ASan checks the reads) and
 * the unigram entropy is computed. Any input must load or give a message, never crash or hang.
 * fuzz-sources: runtime/data.c libfsmoe/input_file.c libfsmoe/status.c
 * fuzz-libs: -lm
 * fuzz-seeds: tests/runtime/reliability/seeds_data/[a-z]*
 * fuzz-dict: tests/runtime/reliability/data.dict
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_BYTES = 1 << 20, B = 3 };

static char path[64];

static void remove_file(void)
{
    if (path[0])
        unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || size > MAX_BYTES)
        return 0;
    if (!path[0]) { /* one temporary per process, rewritten for every input */
        snprintf(path, sizeof path, "/tmp/fuzz_data.%ld.XXXXXX", (long)getpid());
        int fd = mkstemp(path);
        if (fd < 0) {
            path[0] = '\0';
            return 0;
        }
        close(fd);
        atexit(remove_file);
    }
    long vocab = 2 + data[0], L = 1 + data[1] % 64;
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    size_t n = size - 2;
    if (fwrite(data + 2, 1, n, f) != n) {
        fclose(f);
        return 0;
    }
    fclose(f);
    rt_data d;
    fsmoe_error err = {0};
    if (data_load(&d, path, vocab, L, &err) == FSMOE_OK) {
        int tok[B * 64], tgt[B * 64];
        for (int split = 0; split < 2; split++)
            for (long step = 0; step < 4; step++) {
                data_batch(&d, split, 1234, step, B, L, tok, tgt);
                for (long i = 0; i < B * L; i++)
                    if (tok[i] < 0 || tok[i] >= vocab || tgt[i] < 0 || tgt[i] >= vocab)
                        abort(); /* a token outside the vocabulary got through */
            }
        double h = data_unigram_entropy(&d);
        if (!(h >= 0) || h > log(256.0) + 1e-9)
            abort();
        data_free(&d);
    } else if (!err.msg[0]) {
        abort(); /* a refusal must say why */
    }
    return 0;
}
