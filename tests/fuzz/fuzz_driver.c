/* A driver for the libFuzzer harnesses without libFuzzer (gcc build, unit suite and the ASan
 * build of scripts/test.sh): feeds every seed to LLVMFuzzerTestOneInput, then deterministic
 * mutations of each (bits flipped, bytes set, truncations, repeated pieces, pieces of another
 * seed spliced in, dictionary tokens inserted). A crash or a sanitizer report fails the test;
 * an input slower than the per-input bound fails it too (a hang in the reader), when it is as
 * slow again on a second run (one slow run alone is the machine stalling the process: on a
 * shared 2-core host an input of 5 ms once took 3.35 s).
 *
 *   fuzz_NAME [-n MUTATIONS] [-d DICT] [-t SECONDS] SEED...
 *
 * A SEED is a file or a directory (its regular files, not recursive). DICT is a libFuzzer
 * dictionary (lines `"token"`, `#` comments); its tokens are inserted by one mutation kind.
 * The coverage-guided run of the same harnesses is scripts/fuzz.sh, which finds every
 * fuzz_*.c under tests/ whose first comment block holds these lines:
 *   fuzz-sources: libfsmoe/yaml_read.c ...   (repo-relative .c files it needs, besides itself)
 *   fuzz-libs: -lyaml -lm
 *   fuzz-seeds: models                        (repo-relative folders or globs; and/or:)
 *   fuzz-seed-cmd: {build}/PROGRAM ARGS {corpus}   (a built program that writes seeds)
 *   fuzz-dict: tests/fuzz/model.dict          (optional libFuzzer dictionary)
 * In meson each harness is built with this driver and registered in the unit suite:
 *   test('fuzz_NAME', exe, args: ['-n', '2000', '-d', DICT, SEEDS...], suite: 'unit'). */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_SEEDS = 512, MAX_TOKENS = 1024, MAX_SEED_BYTES = 1 << 20 };

typedef struct {
    unsigned char *b;
    size_t n;
} buf;

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return rs;
}

static int slurp(const char *path, buf *out)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    out->b = malloc(MAX_SEED_BYTES);
    out->n = out->b ? fread(out->b, 1, MAX_SEED_BYTES, f) : 0;
    fclose(f);
    return out->b ? 0 : -1;
}

static int add_path(const char *path, buf *seeds, int *n)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "fuzz driver: %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (S_ISREG(st.st_mode)) {
        if (*n >= MAX_SEEDS)
            return 0;
        if (slurp(path, &seeds[*n]) != 0) {
            fprintf(stderr, "fuzz driver: %s: cannot read\n", path);
            return -1;
        }
        (*n)++;
        return 0;
    }
    if (!S_ISDIR(st.st_mode))
        return 0;
    DIR *d = opendir(path);
    if (!d)
        return -1;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && add_path(p, seeds, n) != 0) {
            closedir(d);
            return -1;
        }
    }
    closedir(d);
    return 0;
}

/* Reads `"token"` lines of a libFuzzer dictionary (\" and \\ and \xNN escapes). */
static int read_dict(const char *path, buf *tok, int *n)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "fuzz driver: %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[512];
    while (fgets(line, sizeof line, f) && *n < MAX_TOKENS) {
        char *q = strchr(line, '"');
        if (!q || line[0] == '#')
            continue;
        unsigned char t[256];
        size_t m = 0;
        for (q++; *q && *q != '"' && m < sizeof t; q++) {
            if (*q == '\\' && q[1] == 'x' && q[2] && q[3]) {
                char hex[3] = {q[2], q[3], 0};
                t[m++] = (unsigned char)strtol(hex, NULL, 16);
                q += 3;
            } else if (*q == '\\' && q[1]) {
                t[m++] = (unsigned char)*++q;
            } else {
                t[m++] = (unsigned char)*q;
            }
        }
        tok[*n].b = malloc(m + 1);
        memcpy(tok[*n].b, t, m);
        tok[(*n)++].n = m;
    }
    fclose(f);
    return 0;
}

/* Inserts len bytes of piece at `at` when there is room. */
static void insert(unsigned char *b, size_t *n, size_t cap, size_t at, const unsigned char *piece,
                   size_t len)
{
    if (*n + len > cap || at > *n)
        return;
    memmove(b + at + len, b + at, *n - at);
    memcpy(b + at, piece, len);
    *n += len;
}

static void mutate(unsigned char *b, size_t *n, size_t cap, const buf *seeds, int n_seeds,
                   const buf *tok, int n_tok)
{
    int edits = 1 + (int)(rnd() % 4);
    for (int e = 0; e < edits && *n > 0; e++) {
        size_t at = (size_t)(rnd() % *n);
        switch (rnd() % (n_tok ? 6 : 5)) {
        case 0: b[at] ^= (unsigned char)(1u << (rnd() % 8)); break;
        case 1: b[at] = (unsigned char)rnd(); break;
        case 2: *n = at + 1; break;
        case 3: { /* repeat a piece of itself */
            size_t from = (size_t)(rnd() % *n), m = (size_t)(rnd() % 64);
            unsigned char piece[64];
            if (from + m > *n)
                m = *n - from;
            memcpy(piece, b + from, m);
            insert(b, n, cap, at, piece, m);
            break;
        }
        case 4: { /* a piece of another seed */
            const buf *o = &seeds[rnd() % (uint64_t)n_seeds];
            if (o->n == 0)
                break;
            size_t from = (size_t)(rnd() % o->n), m = 1 + (size_t)(rnd() % 128);
            if (from + m > o->n)
                m = o->n - from;
            insert(b, n, cap, at, o->b + from, m);
            break;
        }
        default: { /* a dictionary token */
            const buf *t = &tok[rnd() % (uint64_t)n_tok];
            insert(b, n, cap, at, t->b, t->n);
            break;
        }
        }
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs one input; returns its seconds. */
static double run_one(const unsigned char *b, size_t n)
{
    /* A private copy of exactly n bytes, so that a read past the end is caught by ASan. */
    unsigned char *copy = malloc(n ? n : 1);
    memcpy(copy, b, n);
    double t0 = now_s();
    LLVMFuzzerTestOneInput(copy, n);
    double dt = now_s() - t0;
    free(copy);
    return dt;
}

int main(int argc, char **argv)
{
    long mutations = 2000;
    double limit_s = 1.0;
    static buf seeds[MAX_SEEDS], tok[MAX_TOKENS];
    int n_seeds = 0, n_tok = 0, opt;
    while ((opt = getopt(argc, argv, "n:d:t:")) != -1) {
        if (opt == 'n')
            mutations = strtol(optarg, NULL, 10);
        else if (opt == 'd') {
            if (read_dict(optarg, tok, &n_tok) != 0)
                return 2;
        } else if (opt == 't')
            limit_s = strtod(optarg, NULL);
        else {
            fprintf(stderr, "usage: %s [-n MUTATIONS] [-d DICT] [-t SECONDS] SEED...\n", argv[0]);
            return 2;
        }
    }
    for (int i = optind; i < argc; i++)
        if (add_path(argv[i], seeds, &n_seeds) != 0)
            return 2;
    if (n_seeds == 0) {
        fprintf(stderr, "%s: no seeds (give files or directories)\n", argv[0]);
        return 2;
    }
    /* Sanitizer-instrumented builds are slower: the bound scales with FSMOE_FUZZ_TIME_SCALE. */
    const char *scale = getenv("FSMOE_FUZZ_TIME_SCALE");
    if (scale)
        limit_s *= strtod(scale, NULL) > 0 ? strtod(scale, NULL) : 1;
    long runs = 0, stalls = 0;
    double worst = 0;
    int failed = 0;
    for (int i = 0; i < n_seeds && !failed; i++) {
        size_t cap = seeds[i].n * 2 + 4096;
        unsigned char *b = malloc(cap);
        double dt = run_one(seeds[i].b, seeds[i].n);
        worst = dt > worst ? dt : worst;
        for (long k = 0; k < mutations && !failed; k++, runs++) {
            size_t n = seeds[i].n;
            memcpy(b, seeds[i].b, n);
            mutate(b, &n, cap, seeds, n_seeds, tok, n_tok);
            dt = run_one(b, n);
            if (dt > limit_s) {
                /* once more: a reader slow on this input is slow every time, while a machine
                 * that stalled the process (a busy shared host) is not */
                double again = run_one(b, n);
                if (again <= limit_s) {
                    fprintf(stderr, "%s: an input took %.2f s once, %.3f s again: the machine "
                                    "stalled, not the reader\n",
                            argv[0], dt, again);
                    stalls++;
                    dt = again;
                }
            }
            worst = dt > worst ? dt : worst;
            if (dt > limit_s) {
                char path[64];
                snprintf(path, sizeof path, "slow-input-%d-%ld", i, k);
                FILE *f = fopen(path, "wb");
                if (f) {
                    fwrite(b, 1, n, f);
                    fclose(f);
                }
                fprintf(stderr, "%s: input took %.2f s (> %.2f s), kept as %s\n", argv[0], dt,
                        limit_s, path);
                failed = 1;
            }
        }
        free(b);
    }
    printf("%s: %d seeds, %ld mutated inputs, slowest %.3f s (stalled runs timed again: %ld)%s\n",
           argv[0], n_seeds, runs, worst, stalls, failed ? ", FAILED" : ", no crash");
    return failed;
}
