/* Implements: files written atomically (style.md "Files we write are written to a temporary name
 * and renamed"): a reader never sees half a file, and a failed write leaves the old file in place.
 * The temporary is `<path>.tmp.<pid>.XXXXXX` in the same directory (rename() stays on one file
 * system); it gets the permissions a plain fopen() would have given (0666 less the umask).
 * Temporaries left by a writer that was killed (its pid no longer runs) are removed when the
 * same path is next opened; readers never look at them.
 *
 * Programs that write outputs also:
 *   - check each output before the work that produces it (fsmoe_atomic_check: a writable
 *     directory, not a directory itself, not one of the inputs — fsmoe_same_file compares device
 *     and inode, so another spelling or a symbolic link is caught too);
 *   - call fsmoe_atomic_on_signals() once: SIGINT, SIGTERM and SIGHUP then remove every open
 *     temporary and exit with 128 + the signal number, so an interrupted run leaves no output
 *     that looks complete. */
#ifndef FSMOE_ATOMIC_FILE_H
#define FSMOE_ATOMIC_FILE_H

#include <stdio.h>

#include "status.h"

typedef struct {
    FILE *f; /* write here between open and commit */
    char path[1024];
    char tmp[1072];
    int slot; /* in the signal handler's table; -1 none */
} fsmoe_atomic_file;

fsmoe_status fsmoe_atomic_open(fsmoe_atomic_file *af, const char *path, fsmoe_error *err);
/* Flushes, checks for write errors, fsyncs and renames over the path; removes the temporary on
 * failure. */
fsmoe_status fsmoe_atomic_commit(fsmoe_atomic_file *af, fsmoe_error *err);
/* Drops the temporary (after a failure before commit); safe after commit and on a zeroed struct. */
void fsmoe_atomic_abort(fsmoe_atomic_file *af);

/* Whether path can be written by fsmoe_atomic_open later: not a directory, and its directory
 * takes a new file (a temporary is created there and removed). FSMOE_ERR_IO naming `flag` (e.g.
 * "-o") and the path, with the reason. */
fsmoe_status fsmoe_atomic_check(const char *flag, const char *path, fsmoe_error *err);
/* 1 when both paths name one existing file (same device and inode), else 0. */
int fsmoe_same_file(const char *a, const char *b);
/* Installs the SIGINT/SIGTERM/SIGHUP handler described above (idempotent). */
void fsmoe_atomic_on_signals(void);

#endif
