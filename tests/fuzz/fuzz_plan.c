/* libFuzzer harness: the plan reader (libfsmoe/plan_io.c on libfsmoe/yaml_read.c), as used by
 * fsmoe-plan explain/diff/simulate and fsmoe-run --plan; an accepted plan is also written back
 * to memory (the writer must take whatever the reader accepts). Any input must give FSMOE_OK or
 * one message, never a crash, a leak or a slow input.
 * fuzz-sources: libfsmoe/yaml_read.c libfsmoe/input_file.c libfsmoe/yaml_write.c libfsmoe/plan_io.c libfsmoe/model.c libfsmoe/parallel.c libfsmoe/names.c libfsmoe/status.c libfsmoe/atomic_file.c libfsmoe/memory.c
 * fuzz-libs: -lyaml -lm
 * fuzz-seeds: plans tests/fuzz/plan-seeds
 * fuzz-dict: tests/fuzz/plan.dict
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fsmoe_plan p;
    fsmoe_error err = {0};
    if (fsmoe_plan_parse("fuzz.yaml", (const char *)data, size, &p, &err) == FSMOE_OK) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (f) {
            fsmoe_plan_emit(&p, f, &err);
            fclose(f);
        }
        free(buf);
    }
    fsmoe_plan_free(&p);
    return 0;
}
