/* Implements: files written atomically (style.md "Files we write are written to a temporary name
 * and renamed"): a reader never sees half a file, and a failed write leaves the old file in place.
 * The temporary is `<path>.tmp.XXXXXX` in the same directory (rename() stays on one file system);
 * it gets the permissions a plain fopen() would have given (0666 less the umask). */
#ifndef FSMOE_ATOMIC_FILE_H
#define FSMOE_ATOMIC_FILE_H

#include <stdio.h>

#include "status.h"

typedef struct {
    FILE *f; /* write here between open and commit */
    char path[1024];
    char tmp[1040];
} fsmoe_atomic_file;

fsmoe_status fsmoe_atomic_open(fsmoe_atomic_file *af, const char *path, fsmoe_error *err);
/* Flushes, checks for write errors, fsyncs and renames over the path; removes the temporary on
 * failure. */
fsmoe_status fsmoe_atomic_commit(fsmoe_atomic_file *af, fsmoe_error *err);
/* Drops the temporary (after a failure before commit); safe after commit and on a zeroed struct. */
void fsmoe_atomic_abort(fsmoe_atomic_file *af);

#endif
