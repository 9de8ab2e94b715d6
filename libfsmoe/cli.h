/* Implements: command-line value parsing shared by the three programs (style.md "Command
 * lines"): integers and doubles via strto* with end-pointer and range checks (never atoi),
 * sizes with K/M/G suffixes (powers of 1024), and enums from a {name, value} table.
 *
 * Every parser fills one message naming the option, the text and what was expected, e.g.
 *   --batch: 'abc' is not an integer (expected 1..1000000)
 * and returns FSMOE_ERR_USAGE; main() prints it and exits 2. */
#ifndef FSMOE_CLI_H
#define FSMOE_CLI_H

#include "names.h"
#include "status.h"

typedef fsmoe_name fsmoe_cli_enum; /* names.h */

/* Decimal integer in [lo, hi]. `opt` names the option in the message ("--batch"). */
fsmoe_status fsmoe_cli_long(const char *opt, const char *text, long lo, long hi, long *out,
                            fsmoe_error *err);
fsmoe_status fsmoe_cli_int(const char *opt, const char *text, int lo, int hi, int *out,
                           fsmoe_error *err);
/* Finite double in [lo, hi]. */
fsmoe_status fsmoe_cli_double(const char *opt, const char *text, double lo, double hi,
                              double *out, fsmoe_error *err);
/* Byte size: a non-negative integer with an optional K, M or G suffix (×1024, ×1024², ×1024³;
 * "KiB"/"MiB"/"GiB" and lower case accepted), result in [lo, hi]. */
fsmoe_status fsmoe_cli_size(const char *opt, const char *text, long long lo, long long hi,
                            long long *out, fsmoe_error *err);
/* Looks text up in a table terminated by {NULL, 0}; the error lists the allowed names. */
fsmoe_status fsmoe_cli_enum_parse(const char *opt, const char *text, const fsmoe_cli_enum *table,
                                  int *out, fsmoe_error *err);

#endif
