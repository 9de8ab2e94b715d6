/* libFuzzer harness: the checkpoint manifest reader (runtime/checkpoint.c,
 * checkpoint_manifest_parse on libfsmoe's YAML reader). Any input must give FSMOE_OK or a
 * message, never a crash. Run by
 * scripts/fuzz.sh (clang -fsanitize=fuzzer; seeds from a real checkpoint written by the gcc
 * build of this harness with fuzz_checkpoint_main.c, which is also its smoke test in the unit
 * suite).
 * fuzz-sources: runtime/checkpoint.c runtime/params.c runtime/adamw.c runtime/backend_mem.c libfsmoe/yaml_read.c libfsmoe/input_file.c libfsmoe/yaml_write.c libfsmoe/sha256.c libfsmoe/status.c libfsmoe/atomic_file.c libfsmoe/parallel.c libfsmoe/names.c
 * fuzz-libs: -lyaml -lm
 * fuzz-seed-cmd: {build}/tests/runtime/fuzz_checkpoint_manifest manifest {corpus}
 */
#include <stddef.h>
#include <stdint.h>

#include "checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rt_ckpt_manifest m;
    fsmoe_error err = {0};
    if (checkpoint_manifest_parse("fuzz.yaml", (const char *)data, size, &m, &err) == FSMOE_OK)
        checkpoint_manifest_free(&m);
    return 0;
}
