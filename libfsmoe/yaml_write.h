/* Implements: a small deterministic YAML writer for the files fsmoe produces (plans, cluster
 * profiles): block mappings and sequences, flow mappings for short records
 * (`forward: {r: 4, case: 2, ...}`) so that files stay readable and diffable, and scalars that
 * read back exactly: strings are quoted whenever a plain scalar could be misread (numbers,
 * booleans, null, indicators, spaces), doubles use the shortest %.Ng that round-trips.
 *
 * Why not libyaml's emitter: its flow-style output wraps and spaces differently across versions,
 * and plans must be byte-identical for the same inputs. The writer remembers the first write
 * error (errno) so callers check once at the end. Not thread-safe per writer; no globals. */
#ifndef FSMOE_YAML_WRITE_H
#define FSMOE_YAML_WRITE_H

#include <stdio.h>

#define FSMOE_YW_MAX_DEPTH 8
#define FSMOE_YW_DOUBLE_CHARS 32

typedef struct {
    FILE *f;
    int error;                       /* errno of the first failed write; 0 while all is well */
    int depth;                       /* open flow collections */
    int count[FSMOE_YW_MAX_DEPTH];   /* items already written in each open flow collection */
    int pending_dash;                /* the next block key opens a sequence item ("- key: ") */
} fsmoe_yaml_writer;

void fsmoe_yw_init(fsmoe_yaml_writer *w, FILE *f);

/* Shortest "%.Ng" (N = 1..17) that strtod reads back to exactly v; ".nan", ".inf", "-.inf" for
 * the non-finite values. Returns buf. */
char *fsmoe_yaml_format_double(double v, char buf[FSMOE_YW_DOUBLE_CHARS]);
/* 1 when s can be written as a plain scalar and reads back as the same string. */
int fsmoe_yaml_plain_ok(const char *s);

/* "# text" on its own line (block context only). */
void fsmoe_yw_comment(fsmoe_yaml_writer *w, const char *text);

/* Block context: `indent` spaces, then "key:" + newline; the caller writes the nested block at
 * a deeper indent. */
void fsmoe_yw_block(fsmoe_yaml_writer *w, int indent, const char *key);
/* Marks the start of a block-sequence item: the next key written at `indent` is preceded by
 * "- " (and the following keys of that item use indent + 2). */
void fsmoe_yw_item(fsmoe_yaml_writer *w);

/* key: value. In block context a whole line at `indent`; inside a flow collection `indent` is
 * ignored and the pair is appended with ", " separators. */
void fsmoe_yw_str(fsmoe_yaml_writer *w, int indent, const char *key, const char *s);
void fsmoe_yw_long(fsmoe_yaml_writer *w, int indent, const char *key, long v);
void fsmoe_yw_double(fsmoe_yaml_writer *w, int indent, const char *key, double v);
/* key: <text written verbatim> — for values the caller has already formatted (e.g. `none`). */
void fsmoe_yw_raw(fsmoe_yaml_writer *w, int indent, const char *key, const char *text);

/* key: {  ...  } — a flow mapping, possibly nested inside another one. key = NULL opens an
 * anonymous flow mapping as a block-sequence item ("- {" at indent). */
void fsmoe_yw_flow_begin(fsmoe_yaml_writer *w, int indent, const char *key);
void fsmoe_yw_flow_end(fsmoe_yaml_writer *w);
/* key: [a, b, c] (strings, quoted where needed); n = 0 gives []. */
void fsmoe_yw_flow_strings(fsmoe_yaml_writer *w, int indent, const char *key,
                           const char *const *items, int n);
/* "- string" as an item of a block sequence of scalars. */
void fsmoe_yw_seq_str(fsmoe_yaml_writer *w, int indent, const char *s);

#endif
