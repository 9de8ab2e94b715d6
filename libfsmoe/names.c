/* Implements: name tables (names.h). */
#include "names.h"

#include <string.h>

const char *fsmoe_name_of(const fsmoe_name *table, int value)
{
    for (const fsmoe_name *r = table; r->name; r++)
        if (r->value == value)
            return r->name;
    return "?";
}

int fsmoe_name_lookup(const fsmoe_name *table, const char *s, int *value)
{
    for (const fsmoe_name *r = table; r->name; r++)
        if (s && strcmp(r->name, s) == 0) {
            *value = r->value;
            return 1;
        }
    return 0;
}
