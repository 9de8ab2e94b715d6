/* Implements: the deterministic YAML writer (see yaml_write.h). Output follows YAML 1.1/1.2
 * block and flow syntax as read by libyaml; every scalar either is a plain scalar that cannot
 * be mistaken for another type or is double-quoted with escapes. */
#include "yaml_write.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void fsmoe_yw_init(fsmoe_yaml_writer *w, FILE *f)
{
    memset(w, 0, sizeof *w);
    w->f = f;
}

static void yw_puts(fsmoe_yaml_writer *w, const char *s)
{
    if (w->error)
        return;
    if (fputs(s, w->f) == EOF)
        w->error = errno ? errno : EIO;
}

static void yw_printf(fsmoe_yaml_writer *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void yw_printf(fsmoe_yaml_writer *w, const char *fmt, ...)
{
    if (w->error)
        return;
    va_list ap;
    va_start(ap, fmt);
    if (vfprintf(w->f, fmt, ap) < 0)
        w->error = errno ? errno : EIO;
    va_end(ap);
}

char *fsmoe_yaml_format_double(double v, char buf[FSMOE_YW_DOUBLE_CHARS])
{
    if (isnan(v)) {
        strcpy(buf, ".nan");
        return buf;
    }
    if (isinf(v)) {
        strcpy(buf, v > 0 ? ".inf" : "-.inf");
        return buf;
    }
    /* 17 significant digits always round-trip an IEEE double; the loop finds the shortest. */
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, FSMOE_YW_DOUBLE_CHARS, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

/* Words YAML 1.1 resolvers turn into booleans or null. */
static int yaml_is_reserved_word(const char *s)
{
    static const char *const words[] = {"true", "false", "yes", "no", "on", "off", "y", "n",
                                        "null", "none", NULL};
    if (strcmp(s, "~") == 0)
        return 1;
    for (int i = 0; words[i]; i++)
        if (strcasecmp(s, words[i]) == 0)
            return 1;
    return 0;
}

int fsmoe_yaml_plain_ok(const char *s)
{
    if (s == NULL || s[0] == '\0')
        return 0;
    /* A leading letter, digit, '/' or '_' cannot start an indicator; the rest is restricted to
     * characters that are inert in both block and flow context (no ':', ',', '#', brackets,
     * quotes, spaces). */
    if (!(isalnum((unsigned char)s[0]) || s[0] == '/' || s[0] == '_'))
        return 0;
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (!(isalnum(c) || c == '_' || c == '.' || c == '/' || c == '-' || c == '+' || c == '@'))
            return 0;
    }
    if (yaml_is_reserved_word(s))
        return 0;
    /* Anything a number parser would take whole must stay a string ("1.2", "8", "1e5", "0x1f"). */
    char *end;
    (void)strtod(s, &end);
    if (*end == '\0')
        return 0;
    (void)strtol(s, &end, 0);
    if (*end == '\0')
        return 0;
    return 1;
}

static void yw_string(fsmoe_yaml_writer *w, const char *s)
{
    if (fsmoe_yaml_plain_ok(s)) {
        yw_puts(w, s);
        return;
    }
    yw_puts(w, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': yw_puts(w, "\\\""); break;
        case '\\': yw_puts(w, "\\\\"); break;
        case '\n': yw_puts(w, "\\n"); break;
        case '\t': yw_puts(w, "\\t"); break;
        case '\r': yw_puts(w, "\\r"); break;
        default:
            if (*p < 0x20 || *p == 0x7f) {
                yw_printf(w, "\\x%02x", *p);
            } else {
                char c[2] = {(char)*p, '\0'};
                yw_puts(w, c);
            }
        }
    }
    yw_puts(w, "\"");
}

/* Writes what precedes a value: in flow context the separator and "key: ", in block context the
 * indentation (with a pending "- ") and "key: ". */
static void yw_key(fsmoe_yaml_writer *w, int indent, const char *key)
{
    if (w->depth > 0) {
        if (w->count[w->depth - 1]++ > 0)
            yw_puts(w, ", ");
    } else if (w->pending_dash) {
        yw_printf(w, "%*s- ", indent, "");
        w->pending_dash = 0;
    } else {
        yw_printf(w, "%*s", indent, "");
    }
    yw_string(w, key);
    yw_puts(w, ":");
}

static void yw_value_end(fsmoe_yaml_writer *w)
{
    if (w->depth == 0)
        yw_puts(w, "\n");
}

void fsmoe_yw_comment(fsmoe_yaml_writer *w, const char *text)
{
    yw_puts(w, "# ");
    /* A newline inside would end the comment and start YAML content. */
    for (const char *p = text; *p; p++) {
        char c[2] = {*p == '\n' ? ' ' : *p, '\0'};
        yw_puts(w, c);
    }
    yw_puts(w, "\n");
}

void fsmoe_yw_block(fsmoe_yaml_writer *w, int indent, const char *key)
{
    yw_key(w, indent, key);
    yw_puts(w, "\n");
}

void fsmoe_yw_item(fsmoe_yaml_writer *w)
{
    w->pending_dash = 1;
}

void fsmoe_yw_str(fsmoe_yaml_writer *w, int indent, const char *key, const char *s)
{
    yw_key(w, indent, key);
    yw_puts(w, " ");
    yw_string(w, s);
    yw_value_end(w);
}

void fsmoe_yw_long(fsmoe_yaml_writer *w, int indent, const char *key, long v)
{
    yw_key(w, indent, key);
    yw_printf(w, " %ld", v);
    yw_value_end(w);
}

void fsmoe_yw_double(fsmoe_yaml_writer *w, int indent, const char *key, double v)
{
    char buf[FSMOE_YW_DOUBLE_CHARS];
    yw_key(w, indent, key);
    yw_puts(w, " ");
    yw_puts(w, fsmoe_yaml_format_double(v, buf));
    yw_value_end(w);
}

void fsmoe_yw_raw(fsmoe_yaml_writer *w, int indent, const char *key, const char *text)
{
    yw_key(w, indent, key);
    yw_puts(w, " ");
    yw_puts(w, text);
    yw_value_end(w);
}

void fsmoe_yw_flow_begin(fsmoe_yaml_writer *w, int indent, const char *key)
{
    if (key) {
        yw_key(w, indent, key);
        yw_puts(w, " {");
    } else if (w->depth > 0) {
        if (w->count[w->depth - 1]++ > 0)
            yw_puts(w, ", ");
        yw_puts(w, "{");
    } else {
        yw_printf(w, "%*s- {", indent, "");
        w->pending_dash = 0;
    }
    if (w->depth >= FSMOE_YW_MAX_DEPTH) {
        w->error = w->error ? w->error : EINVAL; /* a bug in the caller, surfaced as a failure */
        return;
    }
    w->count[w->depth++] = 0;
}

void fsmoe_yw_flow_end(fsmoe_yaml_writer *w)
{
    if (w->depth == 0) {
        w->error = w->error ? w->error : EINVAL;
        return;
    }
    w->depth--;
    yw_puts(w, "}");
    yw_value_end(w);
}

void fsmoe_yw_flow_strings(fsmoe_yaml_writer *w, int indent, const char *key,
                           const char *const *items, int n)
{
    yw_key(w, indent, key);
    yw_puts(w, " [");
    for (int i = 0; i < n; i++) {
        if (i > 0)
            yw_puts(w, ", ");
        yw_string(w, items[i]);
    }
    yw_puts(w, "]");
    yw_value_end(w);
}

void fsmoe_yw_seq_str(fsmoe_yaml_writer *w, int indent, const char *s)
{
    yw_printf(w, "%*s- ", indent, "");
    yw_string(w, s);
    yw_puts(w, "\n");
}
