/* The command line of a CLI fuzz harness (fuzz_plan_cli.c, fuzz_bench_cli.c, fuzz_run_cli.c):
 * the input, cut at FUZZ_ARGV_BYTES, split into arguments at newlines and NUL bytes (the last
 * one ends at the end of the input), at most FUZZ_ARGV_MAX of them after the program name. The
 * arguments point into a private copy, so a parser that keeps pointers into argv (getopt's
 * optarg) reads memory of exactly the input's size. Header-only: a harness includes it by its
 * relative path, which both meson's gcc build and scripts/fuzz.sh resolve. */
#ifndef FSMOE_FUZZ_ARGV_H
#define FSMOE_FUZZ_ARGV_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { FUZZ_ARGV_MAX = 64, FUZZ_ARGV_BYTES = 4096 };

typedef struct {
    char *buf;
    char *argv[FUZZ_ARGV_MAX + 2];
    int argc;
} fuzz_argv;

/* 0 when the copy cannot be made (the harness then returns). */
static inline int fuzz_argv_split(fuzz_argv *a, const char *prog, const uint8_t *data,
                                  size_t size)
{
    if (size > FUZZ_ARGV_BYTES)
        size = FUZZ_ARGV_BYTES;
    a->argc = 0;
    if (!(a->buf = malloc(size + 1)))
        return 0;
    memcpy(a->buf, data, size);
    a->buf[size] = '\0';
    for (size_t i = 0; i < size; i++)
        if (a->buf[i] == '\n')
            a->buf[i] = '\0';
    a->argv[a->argc++] = (char *)prog;
    for (size_t i = 0; i <= size && a->argc < FUZZ_ARGV_MAX + 1;) {
        a->argv[a->argc++] = a->buf + i;
        i += strlen(a->buf + i) + 1;
    }
    a->argv[a->argc] = NULL;
    return 1;
}

static inline void fuzz_argv_free(fuzz_argv *a)
{
    free(a->buf);
    a->buf = NULL;
}

#endif
