/* Implements: files written atomically (style.md "Files we write are written to a temporary
 * name and renamed"): a reader never sees half a profile, and a failed run leaves the old
 * file in place. */
#ifndef BENCH_ATOMIC_FILE_H
#define BENCH_ATOMIC_FILE_H

#include <stdio.h>

#include "status.h"

typedef struct {
    FILE *f;
    char path[1024];
    char tmp[1040];
} atomic_file;

fsmoe_status atomic_file_open(atomic_file *af, const char *path, fsmoe_error *err);
/* Flushes, checks for write errors, fsyncs and renames over path; removes the temporary file
 * on failure. */
fsmoe_status atomic_file_commit(atomic_file *af, fsmoe_error *err);
/* Drops the temporary file (after a failure before commit); safe after commit. */
void atomic_file_abort(atomic_file *af);

#endif
