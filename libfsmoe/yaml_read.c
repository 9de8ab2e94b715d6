/* Implements: the validating YAML reader (see yaml_read.h) for the model, cluster-profile and plan
 * schemas (design.md §3, §9, §11; message format from style.md "Errors").
 *
 * Relies on libyaml's document API: the whole file is composed into a yaml_document_t whose
 * nodes keep their start marks, so every message can point at the offending line and column
 * (libyaml marks are 0-based; we add 1). Duplicate keys, which libyaml accepts silently, are
 * rejected once when the document is opened so that no loader can forget to check them. */
#include "yaml_read.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Deeper nesting than this is not a schema we write; the limit also stops alias cycles. */
#define YAML_MAX_DEPTH 64

static void node_init(fsmoe_ynode *n, const fsmoe_yaml *y, yaml_node_t *node, const char *field,
                      int line, int col)
{
    n->y = y;
    n->node = node;
    snprintf(n->field, sizeof n->field, "%s", field);
    if (node) {
        n->line = (int)node->start_mark.line + 1;
        n->col = (int)node->start_mark.column + 1;
    } else {
        n->line = line;
        n->col = col;
    }
}

static void child_field(char *buf, size_t len, const char *parent, const char *key)
{
    if (parent[0] == '\0')
        snprintf(buf, len, "%.160s", key);
    else
        snprintf(buf, len, "%.120s.%.64s", parent, key);
}

static fsmoe_status vfail_at(const fsmoe_yaml *y, int line, int col, const char *field,
                             fsmoe_error *err, fsmoe_status st, const char *fmt, va_list ap)
{
    char text[FSMOE_ERROR_MAX];
    vsnprintf(text, sizeof text, fmt, ap);
    if (field[0] == '\0')
        return fsmoe_fail(err, st, "%s:%d:%d: %s", y->path, line, col, text);
    return fsmoe_fail(err, st, "%s:%d:%d: %s: %s", y->path, line, col, field, text);
}

fsmoe_status fsmoe_yaml_fail(const fsmoe_ynode *n, fsmoe_error *err, fsmoe_status st,
                             const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail_at(n->y, n->line, n->col, n->field, err, st, fmt, ap);
    va_end(ap);
    return st;
}

void fsmoe_yaml_where(const fsmoe_ynode *n, char *buf, size_t buf_len)
{
    if (n->field[0] == '\0')
        snprintf(buf, buf_len, "%s:%d:%d", n->y->path, n->line, n->col);
    else
        snprintf(buf, buf_len, "%s:%d:%d: %s", n->y->path, n->line, n->col, n->field);
}

/* Optimal-string-alignment distance: Levenshtein plus adjacent transpositions, so that the
 * typical typo `fp23` is one edit from `fp32` (and not tied with `fp16`). */
int fsmoe_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 64; /* keys are short; a long one is no near miss */
    int d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            int del = d[i - 1][j] + 1;
            int ins = d[i][j - 1] + 1;
            int m = sub < del ? sub : del;
            m = m < ins ? m : ins;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < m)
                m = d[i - 2][j - 2] + 1;
            d[i][j] = m;
        }
    return d[la][lb];
}

/* ---- opening -------------------------------------------------------------------------- */

static fsmoe_status check_duplicates(const fsmoe_yaml *y, yaml_node_t *node, const char *field,
                                     int depth, fsmoe_error *err)
{
    if (depth > YAML_MAX_DEPTH)
        return fsmoe_fail(err, FSMOE_ERR_SCHEMA, "%s:%d:%d: %s: nesting deeper than %d levels",
                          y->path, (int)node->start_mark.line + 1,
                          (int)node->start_mark.column + 1, field[0] ? field : "(root)",
                          YAML_MAX_DEPTH);
    yaml_document_t *doc = (yaml_document_t *)&y->doc;
    char sub[FSMOE_YAML_FIELD_MAX];
    if (node->type == YAML_MAPPING_NODE) {
        for (yaml_node_pair_t *p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top;
             p++) {
            yaml_node_t *k = yaml_document_get_node(doc, p->key);
            yaml_node_t *v = yaml_document_get_node(doc, p->value);
            if (!k || !v)
                continue;
            const char *ks = k->type == YAML_SCALAR_NODE ? (const char *)k->data.scalar.value : "?";
            if (k->type == YAML_SCALAR_NODE) {
                for (yaml_node_pair_t *q = node->data.mapping.pairs.start; q < p; q++) {
                    yaml_node_t *k0 = yaml_document_get_node(doc, q->key);
                    if (k0 && k0->type == YAML_SCALAR_NODE &&
                        strcmp((const char *)k0->data.scalar.value, ks) == 0) {
                        child_field(sub, sizeof sub, field, ks);
                        return fsmoe_fail(err, FSMOE_ERR_SCHEMA,
                                          "%s:%d:%d: %s: duplicate key (first given at line %d; "
                                          "expected each key once)",
                                          y->path, (int)k->start_mark.line + 1,
                                          (int)k->start_mark.column + 1, sub,
                                          (int)k0->start_mark.line + 1);
                    }
                }
            }
            child_field(sub, sizeof sub, field, ks);
            fsmoe_status st = check_duplicates(y, v, sub, depth + 1, err);
            if (st)
                return st;
        }
    } else if (node->type == YAML_SEQUENCE_NODE) {
        int i = 0;
        for (yaml_node_item_t *it = node->data.sequence.items.start;
             it < node->data.sequence.items.top; it++, i++) {
            yaml_node_t *v = yaml_document_get_node(doc, *it);
            if (!v)
                continue;
            snprintf(sub, sizeof sub, "%s[%d]", field, i);
            fsmoe_status st = check_duplicates(y, v, sub, depth + 1, err);
            if (st)
                return st;
        }
    }
    return FSMOE_OK;
}

static fsmoe_status parse_error(const fsmoe_yaml *y, const yaml_parser_t *parser, fsmoe_error *err)
{
    const char *problem = parser->problem ? parser->problem : "unknown libyaml error";
    if (parser->error == YAML_MEMORY_ERROR)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "%s: out of memory while parsing YAML", y->path);
    if (parser->error == YAML_READER_ERROR)
        return fsmoe_fail(err, FSMOE_ERR_PARSE,
                          "%s: not valid YAML: %s (at byte %zu; expected UTF-8 text)", y->path,
                          problem, parser->problem_offset);
    int line = (int)parser->problem_mark.line + 1, col = (int)parser->problem_mark.column + 1;
    if (parser->context)
        return fsmoe_fail(err, FSMOE_ERR_PARSE, "%s:%d:%d: not valid YAML: %s %s (started at %d:%d)",
                          y->path, line, col, problem, parser->context,
                          (int)parser->context_mark.line + 1, (int)parser->context_mark.column + 1);
    return fsmoe_fail(err, FSMOE_ERR_PARSE, "%s:%d:%d: not valid YAML: %s", y->path, line, col,
                      problem);
}

fsmoe_status fsmoe_yaml_open_string(fsmoe_yaml *y, const char *name, const char *text, size_t len,
                                    fsmoe_error *err)
{
    memset(y, 0, sizeof *y);
    snprintf(y->path, sizeof y->path, "%s", name);
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "%s: cannot initialise the YAML parser", name);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    fsmoe_status st = FSMOE_OK;
    if (!yaml_parser_load(&parser, &y->doc)) {
        st = parse_error(y, &parser, err);
        yaml_parser_delete(&parser);
        return st;
    }
    y->loaded = 1;
    /* A second document would be silently ignored by a reader that takes the first; say so. */
    yaml_document_t extra;
    if (!yaml_parser_load(&parser, &extra)) {
        st = parse_error(y, &parser, err);
    } else {
        yaml_node_t *r = yaml_document_get_root_node(&extra);
        if (r)
            st = fsmoe_fail(err, FSMOE_ERR_SCHEMA,
                            "%s:%d:%d: a second YAML document (expected one document per file)",
                            y->path, (int)r->start_mark.line + 1, (int)r->start_mark.column + 1);
        yaml_document_delete(&extra);
    }
    yaml_parser_delete(&parser);
    if (st == FSMOE_OK) {
        yaml_node_t *root = yaml_document_get_root_node(&y->doc);
        if (root)
            st = check_duplicates(y, root, "", 0, err);
    }
    if (st)
        fsmoe_yaml_close(y);
    return st;
}

fsmoe_status fsmoe_yaml_open(fsmoe_yaml *y, const char *path, fsmoe_error *err)
{
    memset(y, 0, sizeof *y);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(fp);
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "%s: out of memory", path);
    }
    for (;;) {
        if (len == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                fclose(fp);
                return fsmoe_fail(err, FSMOE_ERR_NOMEM, "%s: out of memory", path);
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - len, fp);
        len += got;
        if (got == 0)
            break;
    }
    int read_failed = ferror(fp);
    int saved = errno;
    fclose(fp);
    if (read_failed) {
        free(buf);
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s: cannot read: %s", path, strerror(saved));
    }
    fsmoe_status st = fsmoe_yaml_open_string(y, path, buf, len, err);
    free(buf); /* the document owns copies of every scalar */
    return st;
}

void fsmoe_yaml_close(fsmoe_yaml *y)
{
    if (y && y->loaded) {
        yaml_document_delete(&y->doc);
        y->loaded = 0;
    }
}

/* ---- node kinds ----------------------------------------------------------------------- */

int fsmoe_yaml_is_mapping(const fsmoe_ynode *n)
{
    return n->node && n->node->type == YAML_MAPPING_NODE;
}

int fsmoe_yaml_is_sequence(const fsmoe_ynode *n)
{
    return n->node && n->node->type == YAML_SEQUENCE_NODE;
}

int fsmoe_yaml_is_scalar(const fsmoe_ynode *n)
{
    return n->node && n->node->type == YAML_SCALAR_NODE;
}

static int is_plain(const fsmoe_ynode *n)
{
    return fsmoe_yaml_is_scalar(n) && n->node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

static const char *scalar(const fsmoe_ynode *n)
{
    return (const char *)n->node->data.scalar.value;
}

int fsmoe_yaml_is_word(const fsmoe_ynode *n, const char *w)
{
    return is_plain(n) && strcmp(scalar(n), w) == 0;
}

int fsmoe_yaml_is_none(const fsmoe_ynode *n)
{
    static const char *const nones[] = {"none", "None", "NONE", "null", "Null", "NULL", "~", ""};
    if (!is_plain(n))
        return 0;
    for (size_t i = 0; i < sizeof nones / sizeof nones[0]; i++)
        if (strcmp(scalar(n), nones[i]) == 0)
            return 1;
    return 0;
}

/* What the user wrote, for "got ..." in messages. */
static void describe(const fsmoe_ynode *n, char *buf, size_t len)
{
    if (!n->node)
        snprintf(buf, len, "nothing");
    else if (n->node->type == YAML_MAPPING_NODE)
        snprintf(buf, len, "a mapping");
    else if (n->node->type == YAML_SEQUENCE_NODE)
        snprintf(buf, len, "a sequence");
    else if (is_plain(n) && scalar(n)[0] == '\0')
        snprintf(buf, len, "an empty value");
    else if (is_plain(n))
        snprintf(buf, len, "`%.48s`", scalar(n));
    else
        snprintf(buf, len, "the quoted string \"%.48s\"", scalar(n));
}

static fsmoe_status wrong_type(const fsmoe_ynode *n, const char *expected, fsmoe_error *err)
{
    char got[80];
    describe(n, got, sizeof got);
    return fsmoe_yaml_fail(n, err, FSMOE_ERR_SCHEMA, "expected %s, got %s", expected, got);
}

fsmoe_status fsmoe_yaml_node_expect_mapping(const fsmoe_ynode *n, fsmoe_error *err)
{
    return fsmoe_yaml_is_mapping(n) ? FSMOE_OK : wrong_type(n, "a mapping (key: value lines)", err);
}

fsmoe_status fsmoe_yaml_node_expect_sequence(const fsmoe_ynode *n, fsmoe_error *err)
{
    return fsmoe_yaml_is_sequence(n) ? FSMOE_OK : wrong_type(n, "a sequence (- items)", err);
}

/* ---- root, version, keys -------------------------------------------------------------- */

fsmoe_status fsmoe_yaml_root(const fsmoe_yaml *y, fsmoe_ynode *root, fsmoe_error *err)
{
    yaml_node_t *r = y->loaded ? yaml_document_get_root_node((yaml_document_t *)&y->doc) : NULL;
    node_init(root, y, r, "", 1, 1);
    if (!r)
        return fsmoe_fail(err, FSMOE_ERR_SCHEMA,
                          "%s:1:1: empty document (expected a mapping of key: value lines)",
                          y->path);
    if (r->type != YAML_MAPPING_NODE)
        return wrong_type(root, "a mapping of key: value lines at the top level", err);
    return FSMOE_OK;
}

static yaml_node_t *lookup(const fsmoe_ynode *map, const char *key)
{
    if (!fsmoe_yaml_is_mapping(map))
        return NULL;
    yaml_document_t *doc = (yaml_document_t *)&map->y->doc;
    for (yaml_node_pair_t *p = map->node->data.mapping.pairs.start;
         p < map->node->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        if (k && k->type == YAML_SCALAR_NODE && strcmp((const char *)k->data.scalar.value, key) == 0)
            return yaml_document_get_node(doc, p->value);
    }
    return NULL;
}

int fsmoe_yaml_has(const fsmoe_ynode *map, const char *key)
{
    return lookup(map, key) != NULL;
}

fsmoe_status fsmoe_yaml_check_version(const fsmoe_ynode *root, const char *key, int version,
                                      fsmoe_error *err)
{
    fsmoe_ynode v;
    char field[FSMOE_YAML_FIELD_MAX];
    child_field(field, sizeof field, root->field, key);
    yaml_node_t *vn = lookup(root, key);
    if (!vn) {
        /* A model given where a cluster profile is expected is the common mistake: name it. */
        int n = fsmoe_yaml_map_len(root);
        for (int i = 0; i < n; i++) {
            const char *other;
            fsmoe_ynode ov;
            if (fsmoe_yaml_map_pair(root, i, &other, &ov, NULL) == FSMOE_OK &&
                strncmp(other, "fsmoe_", 6) == 0)
                return fsmoe_fail(err, FSMOE_ERR_SCHEMA,
                                  "%s:%d:%d: %s: missing version key; this file says `%s`, so it "
                                  "is not a %s file (expected `%s: %d` at the top level)",
                                  root->y->path, root->line, root->col, field, other, key + 6,
                                  key, version);
        }
        return fsmoe_fail(err, FSMOE_ERR_SCHEMA,
                          "%s:%d:%d: %s: missing version key (expected `%s: %d` at the top level; "
                          "this build reads %s version %d)",
                          root->y->path, root->line, root->col, field, key, version, key, version);
    }
    node_init(&v, root->y, vn, field, 0, 0);
    long got;
    if (is_plain(&v)) {
        char *end;
        errno = 0;
        got = strtol(scalar(&v), &end, 10);
        if (errno == 0 && end != scalar(&v) && *end == '\0' && got == version)
            return FSMOE_OK;
    }
    char what[80];
    describe(&v, what, sizeof what);
    return fsmoe_yaml_fail(&v, err, FSMOE_ERR_SCHEMA,
                           "unsupported version %s (this build reads %s version %d; expected "
                           "`%s: %d`)",
                           what, key, version, key, version);
}

fsmoe_status fsmoe_yaml_check_keys(const fsmoe_ynode *map, const char *const *allowed,
                                   fsmoe_error *err)
{
    fsmoe_status st = fsmoe_yaml_node_expect_mapping(map, err);
    if (st)
        return st;
    yaml_document_t *doc = (yaml_document_t *)&map->y->doc;
    for (yaml_node_pair_t *p = map->node->data.mapping.pairs.start;
         p < map->node->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        fsmoe_ynode kn;
        node_init(&kn, map->y, k, map->field, map->line, map->col);
        if (!k || k->type != YAML_SCALAR_NODE)
            return fsmoe_yaml_fail(&kn, err, FSMOE_ERR_SCHEMA,
                                   "a key must be a plain name, got %s",
                                   k && k->type == YAML_MAPPING_NODE ? "a mapping" : "a sequence");
        const char *ks = (const char *)k->data.scalar.value;
        int known = 0, best = INT_MAX;
        const char *suggest = NULL;
        for (const char *const *a = allowed; *a; a++) {
            if (strcmp(*a, ks) == 0) {
                known = 1;
                break;
            }
            int d = fsmoe_edit_distance(ks, *a);
            if (d < best) {
                best = d;
                suggest = *a;
            }
        }
        if (known)
            continue;
        child_field(kn.field, sizeof kn.field, map->field, ks);
        if (suggest && best <= 2 && best < (int)strlen(ks))
            return fsmoe_yaml_fail(&kn, err, FSMOE_ERR_SCHEMA,
                                   "unknown key (did you mean `%s`?)", suggest);
        char list[600] = "";
        size_t used = 0;
        for (const char *const *a = allowed; *a && used + 1 < sizeof list; a++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s",
                                     a == allowed ? "" : ", ", *a);
        return fsmoe_yaml_fail(&kn, err, FSMOE_ERR_SCHEMA, "unknown key (expected one of: %s)",
                               list);
    }
    return FSMOE_OK;
}

/* ---- lookups -------------------------------------------------------------------------- */

fsmoe_status fsmoe_yaml_get(const fsmoe_ynode *map, const char *key, int required, fsmoe_ynode *out,
                            fsmoe_error *err)
{
    char field[FSMOE_YAML_FIELD_MAX];
    child_field(field, sizeof field, map->field, key);
    if (map->node && !fsmoe_yaml_is_mapping(map)) {
        fsmoe_status st = fsmoe_yaml_node_expect_mapping(map, err);
        node_init(out, map->y, NULL, field, map->line, map->col);
        return st;
    }
    yaml_node_t *v = lookup(map, key);
    node_init(out, map->y, v, field, map->line, map->col);
    if (!v && required) {
        if (map->field[0] == '\0')
            return fsmoe_fail(err, FSMOE_ERR_SCHEMA,
                              "%s:%d:%d: %s: missing required key (expected `%s:` at the top level)",
                              map->y->path, map->line, map->col, field, key);
        return fsmoe_fail(err, FSMOE_ERR_SCHEMA,
                          "%s:%d:%d: %s: missing required key (expected `%s:` in `%s`)",
                          map->y->path, map->line, map->col, field, key, map->field);
    }
    return FSMOE_OK;
}

fsmoe_status fsmoe_yaml_mapping(const fsmoe_ynode *map, const char *key, int required,
                                fsmoe_ynode *out, fsmoe_error *err)
{
    fsmoe_status st = fsmoe_yaml_get(map, key, required, out, err);
    if (st || !out->node)
        return st;
    return fsmoe_yaml_node_expect_mapping(out, err);
}

fsmoe_status fsmoe_yaml_sequence(const fsmoe_ynode *map, const char *key, int required,
                                 fsmoe_ynode *out, fsmoe_error *err)
{
    fsmoe_status st = fsmoe_yaml_get(map, key, required, out, err);
    if (st || !out->node)
        return st;
    return fsmoe_yaml_node_expect_sequence(out, err);
}

int fsmoe_yaml_seq_len(const fsmoe_ynode *seq)
{
    if (!fsmoe_yaml_is_sequence(seq))
        return 0;
    return (int)(seq->node->data.sequence.items.top - seq->node->data.sequence.items.start);
}

fsmoe_status fsmoe_yaml_seq_item(const fsmoe_ynode *seq, int i, fsmoe_ynode *out,
                                 fsmoe_error *err)
{
    char field[FSMOE_YAML_FIELD_MAX];
    snprintf(field, sizeof field, "%.176s[%d]", seq->field, i);
    if (i < 0 || i >= fsmoe_yaml_seq_len(seq)) {
        node_init(out, seq->y, NULL, field, seq->line, seq->col);
        return fsmoe_yaml_fail(seq, err, FSMOE_ERR_INTERNAL, "item %d of %d requested", i,
                               fsmoe_yaml_seq_len(seq));
    }
    yaml_node_t *v = yaml_document_get_node((yaml_document_t *)&seq->y->doc,
                                            seq->node->data.sequence.items.start[i]);
    node_init(out, seq->y, v, field, seq->line, seq->col);
    return FSMOE_OK;
}

int fsmoe_yaml_map_len(const fsmoe_ynode *map)
{
    if (!fsmoe_yaml_is_mapping(map))
        return 0;
    return (int)(map->node->data.mapping.pairs.top - map->node->data.mapping.pairs.start);
}

fsmoe_status fsmoe_yaml_map_pair(const fsmoe_ynode *map, int i, const char **key,
                                 fsmoe_ynode *value, fsmoe_error *err)
{
    if (i < 0 || i >= fsmoe_yaml_map_len(map))
        return fsmoe_yaml_fail(map, err, FSMOE_ERR_INTERNAL, "pair %d of %d requested", i,
                               fsmoe_yaml_map_len(map));
    yaml_document_t *doc = (yaml_document_t *)&map->y->doc;
    yaml_node_pair_t *p = map->node->data.mapping.pairs.start + i;
    yaml_node_t *k = yaml_document_get_node(doc, p->key);
    if (!k || k->type != YAML_SCALAR_NODE) {
        fsmoe_ynode kn;
        node_init(&kn, map->y, k, map->field, map->line, map->col);
        return fsmoe_yaml_fail(&kn, err, FSMOE_ERR_SCHEMA, "a key must be a plain name");
    }
    *key = (const char *)k->data.scalar.value;
    char field[FSMOE_YAML_FIELD_MAX];
    child_field(field, sizeof field, map->field, *key);
    node_init(value, map->y, yaml_document_get_node(doc, p->value), field, map->line, map->col);
    return FSMOE_OK;
}

/* ---- typed values on a node ----------------------------------------------------------- */

static void range_text_long(char *buf, size_t len, long lo, long hi)
{
    if (hi == LONG_MAX && lo == LONG_MIN)
        snprintf(buf, len, "an integer");
    else if (hi == LONG_MAX || hi == INT_MAX)
        snprintf(buf, len, "an integer >= %ld", lo);
    else
        snprintf(buf, len, "an integer in [%ld, %ld]", lo, hi);
}

static void range_text_double(char *buf, size_t len, double lo, double hi)
{
    if (isinf(hi) && isinf(lo))
        snprintf(buf, len, "a number");
    else if (isinf(hi) || hi >= 1e300)
        snprintf(buf, len, "a number >= %g", lo);
    else
        snprintf(buf, len, "a number in [%g, %g]", lo, hi);
}

fsmoe_status fsmoe_yaml_node_string(const fsmoe_ynode *n, char *buf, size_t buf_len,
                                    fsmoe_error *err)
{
    if (!fsmoe_yaml_is_scalar(n) || (is_plain(n) && scalar(n)[0] == '\0'))
        return wrong_type(n, "a string", err);
    size_t len = n->node->data.scalar.length;
    if (len + 1 > buf_len)
        return fsmoe_yaml_fail(n, err, FSMOE_ERR_VALUE,
                               "string of %zu characters is too long (expected at most %zu)", len,
                               buf_len - 1);
    memcpy(buf, scalar(n), len);
    buf[len] = '\0';
    return FSMOE_OK;
}

fsmoe_status fsmoe_yaml_node_long(const fsmoe_ynode *n, long lo, long hi, long *out,
                                  fsmoe_error *err)
{
    char expect[96];
    range_text_long(expect, sizeof expect, lo, hi);
    if (!is_plain(n))
        return wrong_type(n, expect, err);
    const char *s = scalar(n);
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (s[0] == '\0' || s[0] == ' ' || end == s || *end != '\0')
        return wrong_type(n, expect, err);
    if (errno == ERANGE || v < lo || v > hi)
        return fsmoe_yaml_fail(n, err, FSMOE_ERR_VALUE, "%s is out of range (expected %s)", s,
                               expect);
    *out = v;
    return FSMOE_OK;
}

fsmoe_status fsmoe_yaml_node_double(const fsmoe_ynode *n, double lo, double hi, double *out,
                                    fsmoe_error *err)
{
    char expect[96];
    range_text_double(expect, sizeof expect, lo, hi);
    if (!is_plain(n))
        return wrong_type(n, expect, err);
    const char *s = scalar(n);
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (s[0] == '\0' || s[0] == ' ' || end == s || *end != '\0' || !isfinite(v))
        return wrong_type(n, expect, err);
    if (v < lo || v > hi)
        return fsmoe_yaml_fail(n, err, FSMOE_ERR_VALUE, "%s is out of range (expected %s)", s,
                               expect);
    *out = v;
    return FSMOE_OK;
}

fsmoe_status fsmoe_yaml_node_bool(const fsmoe_ynode *n, int *out, fsmoe_error *err)
{
    static const char *const t[] = {"true", "True", "TRUE"}, *const f[] = {"false", "False", "FALSE"};
    if (is_plain(n)) {
        for (int i = 0; i < 3; i++) {
            if (strcmp(scalar(n), t[i]) == 0) {
                *out = 1;
                return FSMOE_OK;
            }
            if (strcmp(scalar(n), f[i]) == 0) {
                *out = 0;
                return FSMOE_OK;
            }
        }
    }
    return wrong_type(n, "true or false", err);
}

fsmoe_status fsmoe_yaml_node_enum(const fsmoe_ynode *n, const fsmoe_yaml_enum *table, int *out,
                                  fsmoe_error *err)
{
    char list[400] = "";
    size_t used = 0;
    for (const fsmoe_yaml_enum *e = table; e->name && used + 1 < sizeof list; e++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", e == table ? "" : ", ",
                                 e->name);
    char expect[440];
    snprintf(expect, sizeof expect, "one of: %s", list);
    if (!is_plain(n))
        return wrong_type(n, expect, err);
    const char *s = scalar(n);
    const char *suggest = NULL;
    int best = INT_MAX;
    for (const fsmoe_yaml_enum *e = table; e->name; e++) {
        if (strcmp(e->name, s) == 0) {
            *out = e->value;
            return FSMOE_OK;
        }
        int d = fsmoe_edit_distance(s, e->name);
        if (d < best) {
            best = d;
            suggest = e->name;
        }
    }
    if (suggest && best <= 2 && best < (int)strlen(s))
        return fsmoe_yaml_fail(n, err, FSMOE_ERR_SCHEMA,
                               "unknown name `%.48s` (did you mean `%s`? expected %s)", s, suggest,
                               expect);
    return fsmoe_yaml_fail(n, err, FSMOE_ERR_SCHEMA, "unknown name `%.48s` (expected %s)", s,
                           expect);
}

/* ---- typed values by key -------------------------------------------------------------- */

fsmoe_status fsmoe_yaml_string(const fsmoe_ynode *map, const char *key, int required, char *buf,
                               size_t buf_len, fsmoe_error *err)
{
    fsmoe_ynode v;
    fsmoe_status st = fsmoe_yaml_get(map, key, required, &v, err);
    if (st || !v.node)
        return st;
    return fsmoe_yaml_node_string(&v, buf, buf_len, err);
}

fsmoe_status fsmoe_yaml_long(const fsmoe_ynode *map, const char *key, int required, long lo,
                             long hi, long *out, fsmoe_error *err)
{
    fsmoe_ynode v;
    fsmoe_status st = fsmoe_yaml_get(map, key, required, &v, err);
    if (st || !v.node)
        return st;
    return fsmoe_yaml_node_long(&v, lo, hi, out, err);
}

fsmoe_status fsmoe_yaml_int(const fsmoe_ynode *map, const char *key, int required, int lo, int hi,
                            int *out, fsmoe_error *err)
{
    long v = 0;
    fsmoe_ynode n;
    fsmoe_status st = fsmoe_yaml_get(map, key, required, &n, err);
    if (st || !n.node)
        return st;
    st = fsmoe_yaml_node_long(&n, lo, hi, &v, err);
    if (st == FSMOE_OK)
        *out = (int)v;
    return st;
}

fsmoe_status fsmoe_yaml_double(const fsmoe_ynode *map, const char *key, int required, double lo,
                               double hi, double *out, fsmoe_error *err)
{
    fsmoe_ynode v;
    fsmoe_status st = fsmoe_yaml_get(map, key, required, &v, err);
    if (st || !v.node)
        return st;
    return fsmoe_yaml_node_double(&v, lo, hi, out, err);
}

fsmoe_status fsmoe_yaml_bool(const fsmoe_ynode *map, const char *key, int required, int *out,
                             fsmoe_error *err)
{
    fsmoe_ynode v;
    fsmoe_status st = fsmoe_yaml_get(map, key, required, &v, err);
    if (st || !v.node)
        return st;
    return fsmoe_yaml_node_bool(&v, out, err);
}

fsmoe_status fsmoe_yaml_enum_get(const fsmoe_ynode *map, const char *key, int required,
                                 const fsmoe_yaml_enum *table, int *out, fsmoe_error *err)
{
    fsmoe_ynode v;
    fsmoe_status st = fsmoe_yaml_get(map, key, required, &v, err);
    if (st || !v.node)
        return st;
    return fsmoe_yaml_node_enum(&v, table, out, err);
}
