/* Implements: the validating YAML reader shared by the model, cluster-profile and plan loaders
 * (design.md §3, §9, §11; style.md "Errors").
 *
 * Built on libyaml's document API (yaml_document_t keeps a start mark per node; libyaml marks
 * are 0-based, every message here adds 1). A loader opens a file, takes the root mapping,
 * checks the version key and the allowed keys, then reads typed values:
 *
 *   fsmoe_yaml y;  fsmoe_ynode root, moe;
 *   if ((st = fsmoe_yaml_open(&y, path, err))) return st;
 *   if ((st = fsmoe_yaml_root(&y, &root, err)) ||
 *       (st = fsmoe_yaml_check_version(&root, "fsmoe_model", 1, err)) ||
 *       (st = fsmoe_yaml_check_keys(&root, top_keys, err)) ||
 *       (st = fsmoe_yaml_mapping(&root, "moe", FSMOE_REQUIRED, &moe, err)) ||
 *       (st = fsmoe_yaml_long(&moe, "top_k", FSMOE_REQUIRED, 1, FSMOE_LIMIT_TOP_K, &k, err)))
 *       goto fail;
 *   ...
 *   fail: fsmoe_yaml_close(&y);
 *
 * Every failure leaves exactly one message in err, of the form
 *   path:line:col: field.path: what is wrong (expected ...)
 * with status FSMOE_ERR_IO (cannot read the file), FSMOE_ERR_PARSE (not YAML),
 * FSMOE_ERR_SCHEMA (unknown / missing / duplicate key, wrong type, wrong version key) or
 * FSMOE_ERR_VALUE (well-typed but out of range). All map to exit code 2 except IO.
 *
 * Conventions:
 *   - Optional keys (FSMOE_OPTIONAL) that are absent leave *out untouched and return FSMOE_OK,
 *     so callers set defaults first. fsmoe_yaml_has() tells whether a key is present.
 *   - Numbers, bools and enum names must be plain (unquoted) scalars: "4" in quotes is a string.
 *   - Duplicate keys anywhere in the document are rejected when the document is opened, and so
 *     are documents past the FSMOE_LIMIT_YAML_* limits below (size, nodes, nesting, aliases).
 *   - The literal `none` (also `null`, `~`) is recognised by fsmoe_yaml_is_none().
 *   - A fsmoe_ynode is a cheap value (a pointer into the document plus its field path); it is
 *     valid until fsmoe_yaml_close(). */
#ifndef FSMOE_YAML_READ_H
#define FSMOE_YAML_READ_H

#include <stddef.h>
#include <yaml.h>

#include "names.h"
#include "parallel.h"
#include "status.h"

#define FSMOE_YAML_PATH_MAX 512
#define FSMOE_YAML_FIELD_MAX 192

/* ---- Resource limits: what every reader (model, cluster profile, plan) refuses beyond ----------
 *
 * One table for all readers. A value past its limit is refused where it is read, naming
 * file:line:col, the field and the limit, before anything is sized from it. The limits are
 * validation, not tuning: each is far above what real MoE training uses, and low enough that no
 * accepted file can make the planner or the runtime allocate more than a machine has or compute
 * for minutes. Reference points (largest published values we know of):
 *   Mixtral-8x22B  M 6144, H 16384, 48 heads, 56 layers, E 8, k 2, vocab 32768
 *   DeepSeek-V3    M 7168, H 18432 (dense) / 2048 (expert), 128 heads, 61 layers, E 256, k 8,
 *                  vocab 129280, 2048 GPUs
 *   Switch-C       E 2048 (the most experts per layer among trained models we know of)
 *   PaLM-540B      M 18432, H 73728, 118 layers;  Gemma vocab 256000;  Llama 3: 16384 GPUs,
 *                  128k context;  NVL72/NVL576 scale-up domains of 72/576 GPUs.
 * Headroom is 7x-30x over those (more where the cost of a large value is only arithmetic). */
/* YAML documents (libyaml composes the whole document in memory; its scanner is quadratic in
 * flow nesting, and aliases let a few hundred bytes name a billion nodes). */
#define FSMOE_LIMIT_YAML_BYTES (16L << 20) /* file size; our largest file is ~40 KB */
#define FSMOE_LIMIT_YAML_NODES (1L << 20)  /* nodes per document (~100 MB of libyaml nodes) */
#define FSMOE_LIMIT_YAML_DEPTH 64          /* nesting; our schemas nest 4 deep */
#define FSMOE_LIMIT_YAML_ALIAS_RATIO 16    /* nodes reached through aliases / nodes written */
/* model architecture and MoE layer */
#define FSMOE_LIMIT_HIDDEN (1L << 17)      /* M: 131072 (PaLM 18432) */
#define FSMOE_LIMIT_FFN_HIDDEN (1L << 19)  /* H: 524288 (PaLM 73728) */
#define FSMOE_LIMIT_HEADS 4096L            /* DeepSeek-V3 128 */
#define FSMOE_LIMIT_LAYERS 4096L           /* blocks, and MoE layers in a plan (PaLM 118) */
#define FSMOE_LIMIT_VOCAB (1L << 22)       /* 4194304 (Gemma 256000) */
#define FSMOE_LIMIT_EXPERTS (1L << 16)     /* E: 65536 (Switch-C 2048) */
#define FSMOE_LIMIT_TOP_K 256L             /* k (DeepSeek-V3 8); also k <= E */
#define FSMOE_LIMIT_CAPACITY_FACTOR 65536.0 /* f: at f >= E/k no token is ever dropped, and E is
                                             * at most FSMOE_LIMIT_EXPERTS */
/* training shape (per GPU) */
#define FSMOE_LIMIT_BATCH (1L << 16)       /* B samples per GPU (or per DP rank in a plan) */
#define FSMOE_LIMIT_SEQ (1L << 21)         /* L: 2M tokens (Llama 3 128k context) */
#define FSMOE_LIMIT_TOKENS (1L << 24)      /* B·L per GPU and step (DeepSeek-V3: ~30k) */
/* cluster and layout */
#define FSMOE_LIMIT_WORLD (1L << 18)       /* 262144 GPUs (Llama 3: 16384); also nodes and every
                                            * group degree dp, mp, ep, esp, pp, edp */
#define FSMOE_LIMIT_GPUS_PER_NODE 4096L    /* NVL576: 576 */
/* plan decisions */
#define FSMOE_LIMIT_PIPELINE_DEGREE 1024L  /* r (the planner searches r <= 64) */
#define FSMOE_LIMIT_A2A_CHUNKS 1024L       /* MoNTA chunks */
/* cluster profile lines: t = alpha_s + beta·n */
#define FSMOE_LIMIT_ALPHA_S 10.0           /* startup cost of one call (measured: <= 1.4e-3 s) */
#define FSMOE_LIMIT_BETA_S 1e-3            /* s per byte (1 kB/s) or per multiply-accumulate */
#define FSMOE_LIMIT_POINTS 4096L           /* measured points per entry (we write ~30) */
#define FSMOE_LIMIT_POINT_N 1e18           /* bytes or MACs of one measured point */
#define FSMOE_LIMIT_POINT_S 1e4            /* seconds of one measured point */
/* Times (s) and byte counts in a plan are the planner's output: bounded by what the limits above
 * can produce (< 1e22 s for the largest model on the slowest profile), kept finite when summed
 * over every layer. */
#define FSMOE_LIMIT_PLAN_VALUE 1e30

enum { FSMOE_OPTIONAL = 0, FSMOE_REQUIRED = 1 };

typedef struct {
    char path[FSMOE_YAML_PATH_MAX]; /* as given to open (used in every message) */
    yaml_document_t doc;
    int loaded;
} fsmoe_yaml;

typedef struct {
    const fsmoe_yaml *y;
    yaml_node_t *node;                /* NULL only for an absent optional value */
    char field[FSMOE_YAML_FIELD_MAX]; /* dotted path, e.g. "ops[2].alpha_s"; "" for the root */
    int line, col;                    /* 1-based position of the node */
} fsmoe_ynode;

/* {name, value} table for enums; terminated by an entry whose name is NULL. */
typedef fsmoe_name fsmoe_yaml_enum; /* names.h */

/* Reads and parses a file (IO error names the path; parse error names path:line:col and
 * libyaml's problem). y is always safe to pass to fsmoe_yaml_close afterwards. */
fsmoe_status fsmoe_yaml_open(fsmoe_yaml *y, const char *path, fsmoe_error *err);
/* Same from memory; `name` stands in for the path in messages. */
fsmoe_status fsmoe_yaml_open_string(fsmoe_yaml *y, const char *name, const char *text, size_t len,
                                    fsmoe_error *err);
void fsmoe_yaml_close(fsmoe_yaml *y); /* safe on a zeroed or already-closed y */

/* The root node, which must be a mapping. */
fsmoe_status fsmoe_yaml_root(const fsmoe_yaml *y, fsmoe_ynode *root, fsmoe_error *err);

/* Top-level `key: version` (e.g. "fsmoe_model", 1). A missing key, a non-integer or another
 * version gives one message saying which version this build reads (and, when the file carries
 * a different fsmoe_* key, what kind of file it seems to be). */
fsmoe_status fsmoe_yaml_check_version(const fsmoe_ynode *root, const char *key, int version,
                                      fsmoe_error *err);

/* Every key of the mapping must be one of `allowed` (NULL-terminated). An unknown key gives
 * "unknown key (did you mean `x`?)" when a close allowed key exists, else lists the allowed keys.
 * Also fails when map is not a mapping. */
fsmoe_status fsmoe_yaml_check_keys(const fsmoe_ynode *map, const char *const *allowed,
                                   fsmoe_error *err);

int fsmoe_yaml_has(const fsmoe_ynode *map, const char *key);

/* The value node of key (any kind). Absent + required: "missing required key". Absent +
 * optional: out->node = NULL, FSMOE_OK. */
fsmoe_status fsmoe_yaml_get(const fsmoe_ynode *map, const char *key, int required, fsmoe_ynode *out,
                            fsmoe_error *err);

/* Typed getters by key. Ranges are inclusive. */
fsmoe_status fsmoe_yaml_mapping(const fsmoe_ynode *map, const char *key, int required,
                                fsmoe_ynode *out, fsmoe_error *err);
fsmoe_status fsmoe_yaml_sequence(const fsmoe_ynode *map, const char *key, int required,
                                 fsmoe_ynode *out, fsmoe_error *err);
fsmoe_status fsmoe_yaml_string(const fsmoe_ynode *map, const char *key, int required, char *buf,
                               size_t buf_len, fsmoe_error *err);
fsmoe_status fsmoe_yaml_long(const fsmoe_ynode *map, const char *key, int required, long lo,
                             long hi, long *out, fsmoe_error *err);
fsmoe_status fsmoe_yaml_int(const fsmoe_ynode *map, const char *key, int required, int lo, int hi,
                            int *out, fsmoe_error *err);
fsmoe_status fsmoe_yaml_double(const fsmoe_ynode *map, const char *key, int required, double lo,
                               double hi, double *out, fsmoe_error *err);
fsmoe_status fsmoe_yaml_bool(const fsmoe_ynode *map, const char *key, int required, int *out,
                             fsmoe_error *err);
fsmoe_status fsmoe_yaml_enum_get(const fsmoe_ynode *map, const char *key, int required,
                                 const fsmoe_yaml_enum *table, int *out, fsmoe_error *err);

/* The same on a node already in hand (sequence items, values checked for a word first). */
fsmoe_status fsmoe_yaml_node_string(const fsmoe_ynode *n, char *buf, size_t buf_len,
                                    fsmoe_error *err);
fsmoe_status fsmoe_yaml_node_long(const fsmoe_ynode *n, long lo, long hi, long *out,
                                  fsmoe_error *err);
fsmoe_status fsmoe_yaml_node_double(const fsmoe_ynode *n, double lo, double hi, double *out,
                                    fsmoe_error *err);
fsmoe_status fsmoe_yaml_node_bool(const fsmoe_ynode *n, int *out, fsmoe_error *err);
fsmoe_status fsmoe_yaml_node_enum(const fsmoe_ynode *n, const fsmoe_yaml_enum *table, int *out,
                                  fsmoe_error *err);
/* Fails with "expected a mapping/sequence" unless n is one. */
fsmoe_status fsmoe_yaml_node_expect_mapping(const fsmoe_ynode *n, fsmoe_error *err);
fsmoe_status fsmoe_yaml_node_expect_sequence(const fsmoe_ynode *n, fsmoe_error *err);

/* Node kinds and literals. */
int fsmoe_yaml_is_mapping(const fsmoe_ynode *n);
int fsmoe_yaml_is_sequence(const fsmoe_ynode *n);
int fsmoe_yaml_is_scalar(const fsmoe_ynode *n);
int fsmoe_yaml_is_none(const fsmoe_ynode *n);               /* plain none / null / ~ */
int fsmoe_yaml_is_word(const fsmoe_ynode *n, const char *w); /* plain scalar equal to w */

/* Sequences: length and item i (field "parent[i]"). */
int fsmoe_yaml_seq_len(const fsmoe_ynode *seq);
fsmoe_status fsmoe_yaml_seq_item(const fsmoe_ynode *seq, int i, fsmoe_ynode *out,
                                 fsmoe_error *err);

/* Mappings in document order: number of pairs, and pair i (key text, value node). */
int fsmoe_yaml_map_len(const fsmoe_ynode *map);
fsmoe_status fsmoe_yaml_map_pair(const fsmoe_ynode *map, int i, const char **key,
                                 fsmoe_ynode *value, fsmoe_error *err);

/* Records a failure at node n: "path:line:col: field: <formatted text>" (the "field: " part is
 * left out for the root). For semantic checks the loaders do themselves. */
fsmoe_status fsmoe_yaml_fail(const fsmoe_ynode *n, fsmoe_error *err, fsmoe_status st,
                             const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* "path:line:col: field" for n, e.g. as the `where` of fsmoe_parallel_validate. */
void fsmoe_yaml_where(const fsmoe_ynode *n, char *buf, size_t buf_len);

/* fsmoe_parallel_validate on a layout read from the mapping `par` (keys world, gpus_per_node,
 * dp, mp, ep, esp, pp), with the message placed at the key that breaks the first failing rule
 * (world for world != dp·mp·pp, ep for ep·esp or experts % ep, ...). experts > 0 also checks
 * experts % ep. */
fsmoe_status fsmoe_yaml_check_layout(const fsmoe_ynode *par, const fsmoe_parallel *p,
                                     long experts, fsmoe_error *err);

/* Records where n was read (status.h fsmoe_mark) for checks made after parsing. */
void fsmoe_mark_set(fsmoe_mark *m, const fsmoe_ynode *n);

/* Edit distance with adjacent transpositions (for "did you mean"); exported for the CLI's
 * option suggestions. */
int fsmoe_edit_distance(const char *a, const char *b);

#endif
