/* libFuzzer harness: the model reader (libfsmoe/model.c on libfsmoe/yaml_read.c), then
 * fsmoe_model_resolve on two layouts, as fsmoe-plan does with a cluster's common layout. Any
 * input must give FSMOE_OK or one message, never a crash, a leak or a slow input.
 * fuzz-sources: libfsmoe/yaml_read.c libfsmoe/input_file.c libfsmoe/model.c libfsmoe/parallel.c libfsmoe/names.c libfsmoe/status.c libfsmoe/memory.c
 * fuzz-libs: -lyaml -lm
 * fuzz-seeds: models
 * fuzz-dict: tests/fuzz/model.dict
 */
#include <stddef.h>
#include <stdint.h>

#include "model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fsmoe_model m;
    fsmoe_error err = {0};
    if (fsmoe_model_parse("fuzz.yaml", (const char *)data, size, &m, &err) != FSMOE_OK)
        return 0;
    fsmoe_model copy = m;
    fsmoe_parallel p = fsmoe_parallel_common(2, 4);
    fsmoe_model_resolve(&copy, &p, "fuzz layout", &err);
    p = fsmoe_parallel_common(3, 8);
    fsmoe_model_resolve(&m, &p, "fuzz layout", &err);
    return 0;
}
