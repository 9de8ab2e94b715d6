/* Implements: the one name table of libfsmoe: the spelled names of an enum ({name, value} rows
 * ended by {NULL, 0}), shared by the YAML schemas (model gate/order/expert/dispatch, tiers,
 * groups), the command lines (fsmoe_cli_enum_parse) and the writers, so that the name written
 * and the name read come from one row. fsmoe_cli_enum and fsmoe_yaml_enum are this type. */
#ifndef FSMOE_NAMES_H
#define FSMOE_NAMES_H

typedef struct {
    const char *name;
    int value;
} fsmoe_name;

/* The name of value in table, or "?" when no row has it. */
const char *fsmoe_name_of(const fsmoe_name *table, int value);
/* The value named s: 1 and *value set, or 0 when no row has that name. */
int fsmoe_name_lookup(const fsmoe_name *table, const char *s, int *value);

#endif
