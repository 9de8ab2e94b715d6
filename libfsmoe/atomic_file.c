/* Implements: temp + fsync + rename writing (atomic_file.h). */
#include "atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Open temporaries, for the signal handler (unlink and _exit are async-signal-safe). A slot is
 * filled before its flag is set and the flag cleared before it is reused. */
enum { MAX_OPEN = 16 };
static char open_tmp[MAX_OPEN][1072];
static volatile sig_atomic_t open_used[MAX_OPEN];

static int slot_take(const char *tmp)
{
    for (int i = 0; i < MAX_OPEN; i++)
        if (!open_used[i]) {
            snprintf(open_tmp[i], sizeof open_tmp[i], "%s", tmp);
            open_used[i] = 1;
            return i;
        }
    return -1; /* more open files than slots: those are not removed on a signal */
}

static void slot_drop(fsmoe_atomic_file *af)
{
    if (af->slot >= 0 && af->slot < MAX_OPEN)
        open_used[af->slot] = 0;
    af->slot = -1;
}

static void on_signal(int sig)
{
    for (int i = 0; i < MAX_OPEN; i++)
        if (open_used[i])
            unlink(open_tmp[i]);
    _exit(128 + sig);
}

void fsmoe_atomic_on_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* Splits path into its directory ("." when none) and base name. */
static void split(const char *path, char *dir, size_t dlen, const char **base)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(dir, dlen, ".");
        *base = path;
    } else if (slash == path) {
        snprintf(dir, dlen, "/");
        *base = slash + 1;
    } else {
        snprintf(dir, dlen, "%.*s", (int)(slash - path), path);
        *base = slash + 1;
    }
}

/* Removes `<base>.tmp.<pid>.XXXXXX` next to path whose writer no longer runs. */
static void clean_stale(const char *path)
{
    char dir[1024];
    const char *base;
    split(path, dir, sizeof dir, &base);
    size_t blen = strlen(base);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        if (strncmp(n, base, blen) != 0 || strncmp(n + blen, ".tmp.", 5) != 0)
            continue;
        char *end;
        long pid = strtol(n + blen + 5, &end, 10);
        if (end == n + blen + 5 || *end != '.' || strlen(end + 1) != 6 || pid <= 0 ||
            pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* still running (or not ours to judge) */
        char full[2048];
        snprintf(full, sizeof full, "%s/%s", dir, n);
        unlink(full);
    }
    closedir(d);
}

fsmoe_status fsmoe_atomic_open(fsmoe_atomic_file *af, const char *path, fsmoe_error *err)
{
    memset(af, 0, sizeof *af);
    af->slot = -1;
    if (strlen(path) >= sizeof af->path)
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s: path too long", path);
    strcpy(af->path, path);
    /* renaming over a device or a FIFO (as root: /dev/null), or over a link to one, would
     * replace it with a file */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s: not a regular file (outputs are written to a "
                          "temporary name and renamed over it, which would replace it)", path);
    clean_stale(path);
    snprintf(af->tmp, sizeof af->tmp, "%s.tmp.%ld.XXXXXX", path, (long)getpid());
    int fd = mkstemp(af->tmp);
    if (fd < 0)
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s: cannot create a temporary file next to it: %s",
                          path, strerror(errno));
    af->slot = slot_take(af->tmp);
    /* mkstemp makes 0600; a plan or profile is meant to be shared like any file we write. */
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0 || !(af->f = fdopen(fd, "w"))) {
        int e = errno;
        close(fd);
        unlink(af->tmp);
        slot_drop(af);
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
        slot_drop(af);
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s: write failed: %s", af->path, strerror(e));
    }
    if (rename(af->tmp, af->path) != 0) {
        e = errno;
        unlink(af->tmp);
        slot_drop(af);
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s: cannot rename %s over it: %s", af->path,
                          af->tmp, strerror(e));
    }
    slot_drop(af);
    return FSMOE_OK;
}

void fsmoe_atomic_abort(fsmoe_atomic_file *af)
{
    if (af->f) {
        fclose(af->f);
        af->f = NULL;
        unlink(af->tmp);
        slot_drop(af);
    }
}

fsmoe_status fsmoe_atomic_check(const char *flag, const char *path, fsmoe_error *err)
{
    struct stat st;
    if (path[0] == '\0')
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s: an empty path", flag);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s %s: is a directory (expected a file name)",
                          flag, path);
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s %s: not a regular file (a device or a FIFO; an "
                          "output is written to a temporary name and renamed over its path, "
                          "which would replace it)", flag, path);
    fsmoe_atomic_file af;
    fsmoe_error e = {0};
    if (fsmoe_atomic_open(&af, path, &e) != FSMOE_OK) {
        char dir[1024];
        const char *base, *why = strrchr(e.msg, ':');
        split(path, dir, sizeof dir, &base);
        return fsmoe_fail(err, FSMOE_ERR_IO, "%s %s: cannot write a file in %s:%s", flag, path,
                          dir, why ? why + 1 : " unknown error");
    }
    fclose(af.f);
    unlink(af.tmp);
    slot_drop(&af);
    return FSMOE_OK;
}

int fsmoe_same_file(const char *a, const char *b)
{
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}
