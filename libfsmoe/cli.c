/* Implements: command-line value parsers (see cli.h; style.md "Command lines and output").
 * Ranges are part of every message so that the user sees what would have been accepted. */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* strtol skips leading blanks; a value of "  5" is almost always a quoting mistake, and an empty
 * string would parse as nothing. Both are rejected before strto* sees them. */
static int cli_starts_badly(const char *text)
{
    return text == NULL || text[0] == '\0' || isspace((unsigned char)text[0]);
}

fsmoe_status fsmoe_cli_long(const char *opt, const char *text, long lo, long hi, long *out,
                            fsmoe_error *err)
{
    if (cli_starts_badly(text))
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "%s: '%s' is not an integer (expected %ld..%ld)",
                          opt, text ? text : "", lo, hi);
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end != '\0')
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "%s: '%s' is not an integer (expected %ld..%ld)",
                          opt, text, lo, hi);
    if (errno == ERANGE || v < lo || v > hi)
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "%s: %s is out of range (expected %ld..%ld)", opt,
                          text, lo, hi);
    *out = v;
    return FSMOE_OK;
}

fsmoe_status fsmoe_cli_int(const char *opt, const char *text, int lo, int hi, int *out,
                           fsmoe_error *err)
{
    long v;
    fsmoe_status st = fsmoe_cli_long(opt, text, lo, hi, &v, err);
    if (st == FSMOE_OK)
        *out = (int)v;
    return st;
}

fsmoe_status fsmoe_cli_double(const char *opt, const char *text, double lo, double hi,
                              double *out, fsmoe_error *err)
{
    if (cli_starts_badly(text))
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "%s: '%s' is not a number (expected %g..%g)", opt,
                          text ? text : "", lo, hi);
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0')
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "%s: '%s' is not a number (expected %g..%g)", opt,
                          text, lo, hi);
    /* strtod accepts "nan" and "inf"; neither is a usable setting. ERANGE on underflow gives a
     * tiny but representable value, which the range check handles. */
    if (!isfinite(v) || (errno == ERANGE && fabs(v) > 1.0) || v < lo || v > hi)
        return fsmoe_fail(err, FSMOE_ERR_USAGE, "%s: %s is out of range (expected %g..%g)", opt,
                          text, lo, hi);
    *out = v;
    return FSMOE_OK;
}

fsmoe_status fsmoe_cli_size(const char *opt, const char *text, long long lo, long long hi,
                            long long *out, fsmoe_error *err)
{
    if (cli_starts_badly(text) || text[0] == '-' || text[0] == '+')
        goto not_size;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text)
        goto not_size;
    int shift = 0;
    if (*end != '\0') {
        switch (toupper((unsigned char)*end)) {
        case 'K': shift = 10; break;
        case 'M': shift = 20; break;
        case 'G': shift = 30; break;
        default: goto not_size;
        }
        end++;
        /* "K", "KB"? No: KB is ambiguous (1000 or 1024); accept only K and KiB. */
        if (*end == 'i' || *end == 'I') {
            if (toupper((unsigned char)end[1]) != 'B')
                goto not_size;
            end += 2;
        }
        if (*end != '\0')
            goto not_size;
    }
    if (errno == ERANGE || v > (LLONG_MAX >> shift))
        goto out_of_range;
    v <<= shift;
    if (v < lo || v > hi)
        goto out_of_range;
    *out = v;
    return FSMOE_OK;
not_size:
    return fsmoe_fail(err, FSMOE_ERR_USAGE,
                      "%s: '%s' is not a size (expected an integer with optional K, M or G "
                      "suffix, %lld..%lld bytes)",
                      opt, text ? text : "", lo, hi);
out_of_range:
    return fsmoe_fail(err, FSMOE_ERR_USAGE, "%s: %s is out of range (expected %lld..%lld bytes)",
                      opt, text, lo, hi);
}

fsmoe_status fsmoe_cli_enum_parse(const char *opt, const char *text, const fsmoe_cli_enum *table,
                                  int *out, fsmoe_error *err)
{
    for (const fsmoe_cli_enum *e = table; e->name; e++) {
        if (text && strcmp(text, e->name) == 0) {
            *out = e->value;
            return FSMOE_OK;
        }
    }
    char allowed[512];
    size_t used = 0;
    allowed[0] = '\0';
    for (const fsmoe_cli_enum *e = table; e->name && used < sizeof allowed; e++) {
        int n = snprintf(allowed + used, sizeof allowed - used, "%s%s",
                         e == table ? "" : ", ", e->name);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return fsmoe_fail(err, FSMOE_ERR_USAGE, "%s: '%s' is not one of: %s", opt, text ? text : "",
                      allowed);
}
