/* libFuzzer harness: the cluster-profile reader (libfsmoe/cluster.c on libfsmoe/yaml_read.c).
 * Any input must give FSMOE_OK or one message, never a crash, a leak or a slow input.
 * fuzz-sources: libfsmoe/yaml_read.c libfsmoe/input_file.c libfsmoe/cluster.c libfsmoe/parallel.c libfsmoe/names.c libfsmoe/status.c
 * fuzz-libs: -lyaml -lm
 * fuzz-seeds: clusters tests/fuzz/cluster-seeds
 * fuzz-dict: tests/fuzz/cluster.dict
 */
#include <stddef.h>
#include <stdint.h>

#include "cluster.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fsmoe_cluster c;
    fsmoe_error err = {0};
    fsmoe_cluster_parse("fuzz.yaml", (const char *)data, size, &c, &err);
    fsmoe_cluster_free(&c);
    return 0;
}
