/* Implements: fsmoe_status messages and the error record (see status.h). */
#include "status.h"

#include <stdio.h>
#include <string.h>

static const char *const status_names[FSMOE_STATUS_COUNT] = {
    [FSMOE_OK] = "success",
    [FSMOE_ERR_USAGE] = "invalid usage",
    [FSMOE_ERR_IO] = "input/output error",
    [FSMOE_ERR_PARSE] = "not valid YAML",
    [FSMOE_ERR_SCHEMA] = "schema violation",
    [FSMOE_ERR_VALUE] = "impossible value",
    [FSMOE_ERR_NOMEM] = "out of memory",
    [FSMOE_ERR_SOLVER] = "numerical solver failed",
    [FSMOE_ERR_INTERNAL] = "internal error",
    [FSMOE_ERR_MPI] = "MPI call failed",
    [FSMOE_ERR_CUDA] = "CUDA call failed",
    [FSMOE_ERR_CUBLAS] = "cuBLAS call failed",
    [FSMOE_ERR_NCCL] = "NCCL call failed",
    [FSMOE_ERR_TIMEOUT] = "a peer rank stopped answering",
};

const char *fsmoe_strerror(fsmoe_status st)
{
    if ((unsigned)st >= FSMOE_STATUS_COUNT)
        return "unknown status";
    return status_names[st];
}

int fsmoe_exit_code(fsmoe_status st)
{
    switch (st) {
    case FSMOE_OK:
        return 0;
    case FSMOE_ERR_USAGE:
    case FSMOE_ERR_PARSE:
    case FSMOE_ERR_SCHEMA:
    case FSMOE_ERR_VALUE:
        return 2;
    default:
        return 1;
    }
}

fsmoe_status fsmoe_vfail(fsmoe_error *err, fsmoe_status st, const char *fmt, va_list ap)
{
    if (err) {
        err->status = st;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    }
    return st;
}

fsmoe_status fsmoe_fail(fsmoe_error *err, fsmoe_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fsmoe_vfail(err, st, fmt, ap);
    va_end(ap);
    return st;
}

void fsmoe_error_print(const char *prog, const fsmoe_error *err)
{
    if (!err || err->msg[0] == '\0')
        fprintf(stderr, "%s: %s\n", prog, fsmoe_strerror(err ? err->status : FSMOE_ERR_INTERNAL));
    else
        fprintf(stderr, "%s: %s\n", prog, err->msg);
}

const char *fsmoe_mark_where(const fsmoe_mark *m, const char *fallback)
{
    return m && m->where[0] ? m->where : fallback;
}
