/* Implements: where a field of an input file is (for messages that name file:line:col; style.md
 * "Errors"). The readers return plain structs without marks, so a check the planner does after
 * reading finds the field again in the file: a dotted path with sequence indices, e.g.
 * "layers[3].forward.r" or "provenance.overrides[0].value", is looked up in the YAML document.
 * Relies on: libfsmoe/yaml_read.h. */
#ifndef FSMOE_PLANNER_LOCATE_H
#define FSMOE_PLANNER_LOCATE_H

#include <stddef.h>

#include "status.h"

/* "path:line:col: field" of the field's value; "path: field" when the file cannot be read or
 * the field is not in it (a default, or a value from elsewhere). Never fails. */
void locate_field(const char *path, const char *field, char *buf, size_t len);

/* Records a failure about a field of an input file: "path:line:col: field: <text>". */
fsmoe_status locate_fail(const char *path, const char *field, fsmoe_error *err, fsmoe_status st,
                         const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* A file named by a field of another (a plan's provenance.model) could not be read: when err is
 * FSMOE_ERR_IO, it becomes "path:line:col: field: <err's message>" (the file that named it, and
 * where); other failures already name their own file and are kept. Returns err->status. */
fsmoe_status locate_named_by(const char *path, const char *field, fsmoe_error *err);

/* A path a plan names (provenance.model, provenance.cluster) as it can be opened: as written
 * (absolute, or relative to the working directory), else under $FSMOE_SOURCE_ROOT, else
 * relative to the directory above the plan's (plans/ sits beside models/ and clusters/); as
 * written when none opens (the reader then names it). */
void locate_input(const char *plan_path, const char *p, char *out, size_t len);

#endif
