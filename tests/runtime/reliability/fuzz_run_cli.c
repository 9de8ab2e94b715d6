/* libFuzzer harness: fsmoe-run's command line (runtime/options.c) and the checks that follow it
 * before any work: the input is split into arguments at NUL and newline bytes, parsed with
 * options_parse, applied to a default configuration (options_apply), checked (config_check) and
 * sized (options_memory_need, options_check_memory). No model file is read, nothing is
 * allocated by size, no MPI and no file I/O: any input must end in FSMOE_OK or a message.
 * fuzz-sources: runtime/options.c runtime/config.c libfsmoe/cli.c libfsmoe/names.c libfsmoe/status.c libfsmoe/yaml_read.c libfsmoe/input_file.c libfsmoe/parallel.c libfsmoe/memory.c
 * fuzz-libs: -lyaml -lm
 * fuzz-seeds: tests/runtime/reliability/seeds_cli/[a-z]*
 * fuzz-dict: tests/runtime/reliability/run_cli.dict
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../fuzz/fuzz_argv.h"
#include "options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_argv a;
    if (!fuzz_argv_split(&a, "fsmoe-run", data, size))
        return 0;
    int argc = a.argc;
    char **argv = a.argv;

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
                int ep = o.ep > 0 && c.E % o.ep == 0 ? o.ep : 1;
                rt_layout lay = layout_make_mp(ep, 0, 1, 1, ep, 1, c.E, c.B);
                rt_memory_need need = options_memory_need(&c, &lay, 0);
                (void)options_check_memory(&o, &c, need, limit, what, &err);
            }
        }
    }
    fuzz_argv_free(&a);
    return 0;
}
