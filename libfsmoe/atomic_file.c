/* Implements: temp + fsync + rename writing (atomic_file.h). */
#include "atomic_file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

fsmoe_status fsmoe_atomic_open(fsmoe_atomic_file *af, const char *path, fsmoe_error *err)
{
    memset(af, 0, sizeof *af);
    if (strlen(path) >= sizeof af->path)
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s: path too long", path);
    strcpy(af->path, path);
    snprintf(af->tmp, sizeof af->tmp, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(af->tmp);
    if (fd < 0)
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s: cannot create a temporary file next to it: %s",
                          path, strerror(errno));
    /* mkstemp makes 0600; a plan or profile is meant to be shared like any file we write. */
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0 || !(af->f = fdopen(fd, "w"))) {
        int e = errno;
        close(fd);
        unlink(af->tmp);
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s: %s", af->tmp, strerror(e));
    }
    return FSMOE_OK;
}

fsmoe_status fsmoe_atomic_commit(fsmoe_atomic_file *af, fsmoe_error *err)
{
    if (!af->f)
        return fsmoe_fail(err, FSMOE_ERR_INTERNAL, "%s: not open", af->path);
    int bad = fflush(af->f) != 0 || ferror(af->f);
    int e = errno;
    if (!bad && fsync(fileno(af->f)) != 0) {
        bad = 1;
        e = errno;
    }
    if (fclose(af->f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    af->f = NULL;
    if (bad) {
        unlink(af->tmp);
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s: write failed: %s", af->path, strerror(e));
    }
    if (rename(af->tmp, af->path) != 0) {
        e = errno;
        unlink(af->tmp);
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s: cannot rename %s over it: %s", af->path,
                          af->tmp, strerror(e));
    }
    return FSMOE_OK;
}

void fsmoe_atomic_abort(fsmoe_atomic_file *af)
{
    if (af->f) {
        fclose(af->f);
        af->f = NULL;
        unlink(af->tmp);
    }
}
