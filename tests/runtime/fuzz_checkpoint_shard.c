/* libFuzzer harness: the checkpoint shard reader (runtime/checkpoint.c: the header and index,
 * then the whole-file pass with its checksums). Any input must give FSMOE_OK or a message,
 * never a crash, a hang or an allocation beyond the input's size. Run by
 * scripts/fuzz.sh (clang -fsanitize=fuzzer; seeds from a real checkpoint written by the gcc
 * build of this harness with fuzz_checkpoint_main.c, which is also its smoke test in the unit
 * suite).
 * fuzz-sources: runtime/checkpoint.c runtime/params.c runtime/adamw.c runtime/backend_mem.c libfsmoe/yaml_read.c libfsmoe/input_file.c libfsmoe/yaml_write.c libfsmoe/sha256.c libfsmoe/status.c libfsmoe/atomic_file.c libfsmoe/parallel.c libfsmoe/names.c
 * fuzz-libs: -lyaml -lm
 * fuzz-seed-cmd: {build}/tests/runtime/fuzz_checkpoint_shard shard {corpus}
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void take(void *user, int e, int a, const real *x)
{
    (void)e, (void)a;
    volatile real *sink = user;
    *sink = x[0]; /* reads the array: every entry has at least one element */
}

static void run(const uint8_t *data, size_t size)
{
    FILE *f = fmemopen((void *)data, size, "rb");
    if (!f)
        return;
    rt_ckpt_index ix;
    fsmoe_error err = {0};
    volatile real sink = 0;
    if (checkpoint_index_read(f, (long)size, "fuzz.bin", &ix, &err) == FSMOE_OK) {
        checkpoint_shard_verify(f, "fuzz.bin", &ix, NULL, take, (void *)&sink, &err);
        checkpoint_index_free(&ix);
    }
    fclose(f);
}

/* SHA-256 of b[0, n) into out. */
static void digest(const uint8_t *b, size_t n, uint8_t *out)
{
    fsmoe_sha256_ctx h;
    fsmoe_sha256_init(&h);
    fsmoe_sha256_update(&h, b, n);
    fsmoe_sha256_final(&h, out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    run(data, size);
    /* The same bytes with both checksums made right, so that mutations reach the checks of
     * the index and of the sizes instead of stopping at the header digest. */
    if (size < 48 + 64)
        return 0;
    uint8_t *b = malloc(size);
    if (!b)
        return 0;
    memcpy(b, data, size);
    int32_t n;
    memcpy(&n, b + 20, 4);
    if (n >= 0 && (size_t)n <= (size - 48 - 64) / 120) {
        size_t hb = 48 + (size_t)n * 120;
        digest(b, hb, b + hb);
        digest(b, size - 32, b + size - 32);
        run(b, size);
    }
    free(b);
    return 0;
}
