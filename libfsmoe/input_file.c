/* Implements: input_file.h. */
#include "input_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind(mode_t m)
{
    return S_ISDIR(m)                  ? "directory"
           : S_ISFIFO(m)               ? "FIFO"
           : S_ISCHR(m) || S_ISBLK(m)  ? "device"
           : S_ISSOCK(m)               ? "socket"
                                       : "special file";
}

/* The failure's message, with errno left as the header says. */
static fsmoe_status failed(fsmoe_error *err, int e, const char *path, const char *not_regular)
{
    fsmoe_status st = not_regular
                          ? fsmoe_fail(err, FSMOE_ERR_VALUE, "%s: not a regular file (a %s)",
                                       path, not_regular)
                          : fsmoe_fail(err, FSMOE_ERR_IO, "%s: cannot open: %s", path,
                                       strerror(e));
    errno = e;
    return st;
}

fsmoe_status fsmoe_open_input(const char *path, FILE **out, long long *size, fsmoe_error *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return failed(err, errno, path, NULL);
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return failed(err, e, path, NULL);
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return failed(err, EINVAL, path, kind(sb.st_mode));
    }
    int fl = fcntl(fd, F_GETFL);
    FILE *f = NULL;
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 || !(f = fdopen(fd, "rb"))) {
        int e = errno;
        close(fd);
        return failed(err, e, path, NULL);
    }
    if (size)
        *size = (long long)sb.st_size;
    *out = f;
    return FSMOE_OK;
}
