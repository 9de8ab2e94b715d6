/* Implements: locate.h — a field's position found again in its YAML file. */
#include "locate.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "yaml_read.h"

/* Walks one segment "name" or "name[i]" (or "[i]") from *cur; 0 when it is not there. */
static int step(fsmoe_ynode *cur, const char *seg, size_t n)
{
    char name[FSMOE_YAML_FIELD_MAX];
    const char *br = memchr(seg, '[', n);
    size_t name_len = br ? (size_t)(br - seg) : n;
    if (name_len >= sizeof name)
        return 0;
    memcpy(name, seg, name_len);
    name[name_len] = '\0';
    fsmoe_ynode next;
    if (name_len > 0) {
        if (!fsmoe_yaml_is_mapping(cur) || !fsmoe_yaml_has(cur, name) ||
            fsmoe_yaml_get(cur, name, FSMOE_REQUIRED, &next, NULL) != FSMOE_OK || !next.node)
            return 0;
        *cur = next;
    }
    while (br && (size_t)(br - seg) < n) {
        char *end;
        long i = strtol(br + 1, &end, 10);
        if (end == br + 1 || *end != ']' || i < 0 || !fsmoe_yaml_is_sequence(cur) ||
            i >= fsmoe_yaml_seq_len(cur) ||
            fsmoe_yaml_seq_item(cur, (int)i, &next, NULL) != FSMOE_OK)
            return 0;
        *cur = next;
        br = (size_t)(end + 1 - seg) < n && end[1] == '[' ? end + 1 : NULL;
    }
    return 1;
}

void locate_field(const char *path, const char *field, char *buf, size_t len)
{
    fsmoe_yaml y;
    fsmoe_ynode cur;
    memset(&y, 0, sizeof y);
    int found = fsmoe_yaml_open(&y, path, NULL) == FSMOE_OK &&
                fsmoe_yaml_root(&y, &cur, NULL) == FSMOE_OK;
    for (const char *s = field; found && *s;) {
        size_t n = strcspn(s, ".");
        found = step(&cur, s, n);
        s += n + (s[n] == '.');
    }
    if (found) {
        snprintf(buf, len, "%s:%d:%d: %s", path, cur.line, cur.col, field);
    } else {
        snprintf(buf, len, "%s: %s", path, field);
    }
    fsmoe_yaml_close(&y);
}

fsmoe_status locate_fail(const char *path, const char *field, fsmoe_error *err, fsmoe_status st,
                         const char *fmt, ...)
{
    char where[FSMOE_ERROR_MAX / 2], text[FSMOE_ERROR_MAX];
    locate_field(path, field, where, sizeof where);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return fsmoe_fail(err, st, "%s: %s", where, text);
}

fsmoe_status locate_named_by(const char *path, const char *field, fsmoe_error *err)
{
    if (err->status != FSMOE_ERR_IO)
        return err->status;
    char msg[FSMOE_ERROR_MAX];
    snprintf(msg, sizeof msg, "%s", err->msg);
    return locate_fail(path, field, err, FSMOE_ERR_IO, "names a file that cannot be read: %.700s",
                       msg);
}

void locate_input(const char *plan_path, const char *p, char *out, size_t len)
{
    FILE *f = NULL; /* set before every use; gcc -fsanitize cannot see it */
    snprintf(out, len, "%s", p);
    if (p[0] == '/' || (f = fopen(out, "r")) != NULL) {
        if (p[0] != '/')
            fclose(f);
        return;
    }
    const char *root = getenv("FSMOE_SOURCE_ROOT");
    if (root) {
        snprintf(out, len, "%s/%s", root, p);
        if ((f = fopen(out, "r")) != NULL) {
            fclose(f);
            return;
        }
    }
    const char *slash = strrchr(plan_path, '/');
    if (slash) {
        snprintf(out, len, "%.*s/../%s", (int)(slash - plan_path), plan_path, p);
        if ((f = fopen(out, "r")) != NULL) {
            fclose(f);
            return;
        }
    }
    snprintf(out, len, "%s", p);
}
