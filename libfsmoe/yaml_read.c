/* Implements: the validating YAML reader (see yaml_read.h) for the model, cluster-profile and plan
 * schemas (design.md §3, §9, §11; message format from style.md "Errors").
 *
 * Relies on libyaml's document API: the whole file is composed into a yaml_document_t whose
 * nodes keep their start marks, so every message can point at the offending line and column
 * (libyaml marks are 0-based; we add 1). Duplicate keys, which libyaml accepts silently, are
 * rejected once when the document is opened so that no loader can forget to check them.
 * Before composing, one pass over libyaml's events bounds nesting and node count (the limits of
 * yaml_read.h), and the duplicate-key walk bounds what aliases expand to: no input, however
 * small, makes a reader allocate or walk more than those limits allow. Reader errors (invalid
 * UTF-8, control characters), for which libyaml gives only a byte offset, get line:col too. */
#include "yaml_read.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "input_file.h"

/* Deeper nesting than this is not a schema we write; the limit also stops alias cycles. */
#define YAML_MAX_DEPTH FSMOE_LIMIT_YAML_DEPTH

static yaml_node_t *lookup(const fsmoe_ynode *map, const char *key);

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

static int tiles(long size, long G)
{
    return size <= G ? G % size == 0 : size % G == 0;
}

/* Mirrors the order of fsmoe_parallel_validate's rules to find the key to point at; the
 * message itself is fsmoe_parallel_validate's. */
fsmoe_status fsmoe_yaml_check_layout(const fsmoe_ynode *par, const fsmoe_parallel *p,
                                     long experts, fsmoe_error *err)
{
    const char *key = NULL;
    long epesp = (long)p->ep * p->esp, G = p->gpus_per_node;
    if (p->world < 1 || G < 1 || p->dp < 1 || p->mp < 1 || p->ep < 1 || p->esp < 1 || p->pp < 1)
        key = NULL; /* the readers' ranges keep every size >= 1 */
    else if ((long)p->dp * p->mp * p->pp != p->world)
        key = "world";
    else if (p->world % G != 0)
        key = "gpus_per_node";
    else if (epesp > p->world || p->world % epesp != 0)
        key = "ep";
    else if (!tiles(p->esp, G))
        key = "esp";
    else if (!tiles(p->mp, G))
        key = "mp";
    else if (!tiles(epesp, G))
        key = "ep";
    else if (!tiles((long)p->mp * p->dp, G))
        key = "dp";
    else if (experts > 0 && experts % p->ep != 0)
        key = "ep";
    fsmoe_ynode at = *par;
    if (key && lookup(par, key))
        fsmoe_yaml_get(par, key, FSMOE_REQUIRED, &at, NULL);
    char where[FSMOE_YAML_PATH_MAX + FSMOE_YAML_FIELD_MAX + 32];
    fsmoe_yaml_where(&at, where, sizeof where);
    return fsmoe_parallel_validate(p, experts, where, err);
}

void fsmoe_mark_set(fsmoe_mark *m, const fsmoe_ynode *n)
{
    fsmoe_yaml_where(n, m->where, sizeof m->where);
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

/* State of the walk over the composed document: aliases make it a graph, so the walk counts
 * every node it reaches (through aliases as often as they are named) against a budget. */
typedef struct {
    const fsmoe_yaml *y;
    long reached, budget, nodes;
} dup_walk;

typedef struct {
    const char *key;
    int index;
} key_ref;

static int key_ref_cmp(const void *a, const void *b)
{
    const key_ref *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* The first pair (in document order) whose key an earlier pair already has: *dup and *first
 * are pair indices, -1 when every key is unique. Sorting keeps this O(n log n): a mapping of a
 * million keys must not cost 10^12 comparisons. */
static int find_duplicate(yaml_document_t *doc, yaml_node_t *node, int *dup, int *first)
{
    yaml_node_pair_t *pairs = node->data.mapping.pairs.start;
    int n = (int)(node->data.mapping.pairs.top - pairs);
    *dup = *first = -1;
    if (n < 2)
        return 0;
    key_ref *refs = malloc((size_t)n * sizeof *refs);
    if (!refs)
        return -1;
    int m = 0;
    for (int i = 0; i < n; i++) {
        yaml_node_t *k = yaml_document_get_node(doc, pairs[i].key);
        if (k && k->type == YAML_SCALAR_NODE)
            refs[m++] = (key_ref){(const char *)k->data.scalar.value, i};
    }
    qsort(refs, (size_t)m, sizeof *refs, key_ref_cmp);
    for (int i = 0; i < m;) {
        int j = i + 1;
        while (j < m && strcmp(refs[j].key, refs[i].key) == 0)
            j++;
        if (j - i > 1 && (*dup < 0 || refs[i + 1].index < *dup)) {
            *dup = refs[i + 1].index;
            *first = refs[i].index;
        }
        i = j;
    }
    free(refs);
    return 0;
}

static fsmoe_status check_duplicates(dup_walk *w, yaml_node_t *node, const char *field, int depth,
                                     fsmoe_error *err)
{
    const fsmoe_yaml *y = w->y;
    int line = (int)node->start_mark.line + 1, col = (int)node->start_mark.column + 1;
    if (depth > YAML_MAX_DEPTH)
        return fsmoe_fail(err, FSMOE_ERR_SCHEMA,
                          "%s:%d:%d: %s: nesting deeper than %d levels (the limit for any input "
                          "file)",
                          y->path, line, col, field[0] ? field : "(root)", YAML_MAX_DEPTH);
    if (++w->reached > w->budget)
        return fsmoe_fail(err, FSMOE_ERR_SCHEMA,
                          "%s:%d:%d: %s: aliases expand the document past %ld nodes (it has %ld; "
                          "expected aliases to reach at most %d times the nodes written)",
                          y->path, line, col, field[0] ? field : "(root)", w->budget, w->nodes,
                          FSMOE_LIMIT_YAML_ALIAS_RATIO);
    yaml_document_t *doc = (yaml_document_t *)&y->doc;
    char sub[FSMOE_YAML_FIELD_MAX];
    if (node->type == YAML_MAPPING_NODE) {
        int dup, first;
        if (find_duplicate(doc, node, &dup, &first) != 0)
            return fsmoe_fail(err, FSMOE_ERR_NOMEM, "%s: out of memory", y->path);
        if (dup >= 0) {
            yaml_node_t *k = yaml_document_get_node(doc, node->data.mapping.pairs.start[dup].key);
            yaml_node_t *k0 =
                yaml_document_get_node(doc, node->data.mapping.pairs.start[first].key);
            child_field(sub, sizeof sub, field, (const char *)k->data.scalar.value);
            return fsmoe_fail(err, FSMOE_ERR_SCHEMA,
                              "%s:%d:%d: %s: duplicate key (first given at line %d; expected each "
                              "key once)",
                              y->path, (int)k->start_mark.line + 1, (int)k->start_mark.column + 1,
                              sub, (int)k0->start_mark.line + 1);
        }
        for (yaml_node_pair_t *p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top;
             p++) {
            yaml_node_t *k = yaml_document_get_node(doc, p->key);
            yaml_node_t *v = yaml_document_get_node(doc, p->value);
            if (!k || !v)
                continue;
            const char *ks = k->type == YAML_SCALAR_NODE ? (const char *)k->data.scalar.value : "?";
            child_field(sub, sizeof sub, field, ks);
            fsmoe_status st = check_duplicates(w, v, sub, depth + 1, err);
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
            snprintf(sub, sizeof sub, "%.170s[%d]", field, i);
            fsmoe_status st = check_duplicates(w, v, sub, depth + 1, err);
            if (st)
                return st;
        }
    }
    return FSMOE_OK;
}

/* 1-based line and column of byte `off` of the text, counted the way libyaml counts its marks
 * (a column is a character: UTF-8 continuation bytes do not count; CR LF is one break). For
 * reader errors (bad UTF-8, control characters), where libyaml gives only a byte offset. */
static void offset_to_line_col(const char *text, size_t len, size_t off, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off && i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '\n' || (c == '\r' && !(i + 1 < len && text[i + 1] == '\n'))) {
            (*line)++;
            *col = 1;
        } else if (c != '\r' && (c & 0xC0) != 0x80) {
            (*col)++;
        }
    }
}

static fsmoe_status parse_error(const fsmoe_yaml *y, const yaml_parser_t *parser, const char *text,
                                size_t len, fsmoe_error *err)
{
    const char *problem = parser->problem ? parser->problem : "unknown libyaml error";
    if (parser->error == YAML_MEMORY_ERROR)
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "%s: out of memory while parsing YAML", y->path);
    if (parser->error == YAML_READER_ERROR) {
        int line, col;
        offset_to_line_col(text, len, parser->problem_offset, &line, &col);
        char value[24] = "";
        if (parser->problem_value >= 0)
            snprintf(value, sizeof value, " 0x%02X", (unsigned)parser->problem_value & 0xFFFFu);
        return fsmoe_fail(err, FSMOE_ERR_PARSE,
                          "%s:%d:%d: not valid YAML: %s%s (byte offset %zu; expected UTF-8 text "
                          "without control characters)",
                          y->path, line, col, problem, value, parser->problem_offset);
    }
    int line = (int)parser->problem_mark.line + 1, col = (int)parser->problem_mark.column + 1;
    if (parser->context)
        return fsmoe_fail(err, FSMOE_ERR_PARSE, "%s:%d:%d: not valid YAML: %s %s (started at %d:%d)",
                          y->path, line, col, problem, parser->context,
                          (int)parser->context_mark.line + 1, (int)parser->context_mark.column + 1);
    return fsmoe_fail(err, FSMOE_ERR_PARSE, "%s:%d:%d: not valid YAML: %s", y->path, line, col,
                      problem);
}

/* A first pass over libyaml's events, before it composes the document: refuses nesting deeper
 * than FSMOE_LIMIT_YAML_DEPTH where it is reached and more than FSMOE_LIMIT_YAML_NODES nodes.
 * Composing first would not do: libyaml's scanner keeps a simple-key slot per flow level and
 * scans them all for every token, so 100,000 nested `[` cost it tens of seconds. Syntax errors
 * found here are reported like those of the second pass. */
static fsmoe_status prescan(const fsmoe_yaml *y, const char *text, size_t len, fsmoe_error *err)
{
    yaml_parser_t parser;
    yaml_event_t ev;
    if (!yaml_parser_initialize(&parser))
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "%s: cannot initialise the YAML parser", y->path);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    fsmoe_status st = FSMOE_OK;
    long depth = 0, nodes = 0;
    for (;;) {
        if (!yaml_parser_parse(&parser, &ev)) {
            st = parse_error(y, &parser, text, len, err);
            break;
        }
        yaml_event_type_t type = ev.type;
        int line = (int)ev.start_mark.line + 1, col = (int)ev.start_mark.column + 1;
        if (type == YAML_SEQUENCE_START_EVENT || type == YAML_MAPPING_START_EVENT) {
            depth++;
            nodes++;
        } else if (type == YAML_SEQUENCE_END_EVENT || type == YAML_MAPPING_END_EVENT) {
            depth--;
        } else if (type == YAML_SCALAR_EVENT || type == YAML_ALIAS_EVENT) {
            nodes++;
        } else if (type == YAML_DOCUMENT_START_EVENT) {
            depth = 0;
        }
        yaml_event_delete(&ev);
        if (depth > FSMOE_LIMIT_YAML_DEPTH) {
            st = fsmoe_fail(err, FSMOE_ERR_SCHEMA,
                            "%s:%d:%d: nesting deeper than %d levels (the limit for any input "
                            "file)",
                            y->path, line, col, FSMOE_LIMIT_YAML_DEPTH);
            break;
        }
        if (nodes > FSMOE_LIMIT_YAML_NODES) {
            st = fsmoe_fail(err, FSMOE_ERR_SCHEMA,
                            "%s:%d:%d: more than %ld YAML nodes (the limit for any input file)",
                            y->path, line, col, FSMOE_LIMIT_YAML_NODES);
            break;
        }
        if (type == YAML_STREAM_END_EVENT)
            break;
    }
    yaml_parser_delete(&parser);
    return st;
}

fsmoe_status fsmoe_yaml_open_string(fsmoe_yaml *y, const char *name, const char *text, size_t len,
                                    fsmoe_error *err)
{
    memset(y, 0, sizeof *y);
    snprintf(y->path, sizeof y->path, "%s", name);
    if (len > (size_t)FSMOE_LIMIT_YAML_BYTES)
        return fsmoe_fail(err, FSMOE_ERR_VALUE,
                          "%s:1:1: file of %zu bytes (expected at most %ld bytes: the limit for "
                          "any input file)",
                          name, len, FSMOE_LIMIT_YAML_BYTES);
    fsmoe_status st = prescan(y, text, len, err);
    if (st)
        return st;
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return fsmoe_fail(err, FSMOE_ERR_NOMEM, "%s: cannot initialise the YAML parser", name);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &y->doc)) {
        st = parse_error(y, &parser, text, len, err);
        yaml_parser_delete(&parser);
        return st;
    }
    y->loaded = 1;
    /* A second document would be silently ignored by a reader that takes the first; say so. */
    yaml_document_t extra;
    if (!yaml_parser_load(&parser, &extra)) {
        st = parse_error(y, &parser, text, len, err);
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
        long nodes = (long)(y->doc.nodes.top - y->doc.nodes.start);
        dup_walk w = {y, 0, FSMOE_LIMIT_YAML_ALIAS_RATIO * (nodes > 0 ? nodes : 1), nodes};
        if (root)
            st = check_duplicates(&w, root, "", 0, err);
    }
    if (st)
        fsmoe_yaml_close(y);
    return st;
}

fsmoe_status fsmoe_yaml_open(fsmoe_yaml *y, const char *path, fsmoe_error *err)
{
    memset(y, 0, sizeof *y);
    FILE *fp = NULL;
    fsmoe_status ost = fsmoe_open_input(path, &fp, NULL, err); /* never blocks on a FIFO */
    if (ost != FSMOE_OK)
        return ost;
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
        if (len > (size_t)FSMOE_LIMIT_YAML_BYTES)
            break; /* refused by fsmoe_yaml_open_string; a pipe may never end */
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
