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
 *       (st = fsmoe_yaml_long(&moe, "top_k", FSMOE_REQUIRED, 1, 1024, &k, err))) goto fail;
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
 *   - Duplicate keys anywhere in the document are rejected when the document is opened.
 *   - The literal `none` (also `null`, `~`) is recognised by fsmoe_yaml_is_none().
 *   - A fsmoe_ynode is a cheap value (a pointer into the document plus its field path); it is
 *     valid until fsmoe_yaml_close(). */
#ifndef FSMOE_YAML_READ_H
#define FSMOE_YAML_READ_H

#include <stddef.h>
#include <yaml.h>

#include "names.h"
#include "status.h"

#define FSMOE_YAML_PATH_MAX 512
#define FSMOE_YAML_FIELD_MAX 192

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

/* Edit distance with adjacent transpositions (for "did you mean"); exported for the CLI's
 * option suggestions. */
int fsmoe_edit_distance(const char *a, const char *b);

#endif
