/* libFuzzer harness: fsmoe-run's command line (runtime/options.c) and the checks that follow it
 * before any work: the input is split into arguments at NUL and newline bytes, parsed with
 * options_parse, applied to a default configuration (options_apply), checked (config_check) and
 * sized (options_memory_need, options_check_memory). No model file is read, nothing is
 * allocated by size, no MPI and no file I/O: any input must end in FSMOE_OK or a message.
 * fuzz-sources: runtime/options.c runtime/config.c libfsmoe/cli.c libfsmoe/names.c libfsmoe/status.c libfsmoe/yaml_read.c libfsmoe/input_file.c libfsmoe/parallel.c
 * fuzz-libs: -lyaml -lm
 * fuzz-seeds: tests/runtime/reliability/seeds_cli/[a-z]*
 * fuzz-dict: tests/runtime/reliability/run_cli.dict
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_ARGS = 64, MAX_BYTES = 4096 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_BYTES)
        return 0;
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = "fsmoe-run";
    char *p = buf, *end = buf + size;
    while (p <= end && argc < MAX_ARGS + 1) {
        char *q = p;
        while (q < end && *q != '\0' && *q != '\n')
            q++;
        *q = '\0';
        argv[argc++] = p;
        p = q + 1;
    }
    argv[argc] = NULL;

    fsmoe_error err = {0};
    rt_options o;
    if (options_parse(&o, argc, argv, &err) == FSMOE_OK && !o.help) {
        rt_config c;
        rt_config_origin origin;
        config_defaults(&c);
        if (options_apply(&o, &c, &origin, &err) == FSMOE_OK) {
            origin.model_path = NULL; /* no file I/O: messages name the field */
            if (config_check(&c, &origin, &err) == FSMOE_OK) {
                const char *what = "";
                double limit = options_memory_limit(&o, 1 + (o.threads & 3), &what);
                int ep = o.ep > 0 ? o.ep : 1;
                rt_memory_need need =
                    options_memory_need(&c, c.B, c.E % ep == 0 ? c.E / ep : c.E, 0);
                (void)options_check_memory(&o, &c, need, limit, what, &err);
            }
        }
    }
    free(buf);
    return 0;
}
