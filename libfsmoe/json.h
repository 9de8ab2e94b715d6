/* Implements: the one piece of JSON writing fsmoe needs everywhere (fsmoe-bench --json, Chrome
 * traces): a string literal with RFC 8259 escaping. Numbers and structure are plain fprintf. */
#ifndef FSMOE_JSON_H
#define FSMOE_JSON_H

#include <stdio.h>

/* Writes s as a quoted JSON string: `"` and `\` escaped, control characters as \u00XX. */
void fsmoe_json_string(FILE *f, const char *s);

#endif
