/* libFuzzer harness: the checkpoint manifest reader (runtime/checkpoint.c,
 * checkpoint_manifest_parse on libfsmoe's YAML reader). Any input must give FSMOE_OK or a
 * message, never a crash. Built by fuzz_checkpoint.sh (clang -fsanitize=fuzzer) and, as a smoke
 * test, by fuzz_checkpoint_main.c. */
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
