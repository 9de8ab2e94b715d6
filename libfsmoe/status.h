/* Implements: status codes, their messages, and the one error record every library call fills.
 *
 * Library code never prints and never exits: it returns an fsmoe_status and, on failure, leaves a
 * single message in an fsmoe_error the caller owns (nccl's model). The message is written once,
 * where the failure happens, with the context a user can act on, e.g.
 *   models/x.yaml:14:9: experts: 6 is not divisible by ep=4 (each EP rank needs E/ep experts)
 * Only main() turns a status into an exit code (fsmoe_exit_code). */
#ifndef FSMOE_STATUS_H
#define FSMOE_STATUS_H

#include <stdarg.h>

typedef enum {
    FSMOE_OK = 0,
    FSMOE_ERR_USAGE,    /* bad command line */
    FSMOE_ERR_IO,       /* cannot open, read, write or rename a file */
    FSMOE_ERR_PARSE,    /* not YAML */
    FSMOE_ERR_SCHEMA,   /* YAML, but a key is unknown, missing or of the wrong type */
    FSMOE_ERR_VALUE,    /* well-typed but impossible value */
    FSMOE_ERR_NOMEM,
    FSMOE_ERR_SOLVER,   /* NLopt/GSL failed */
    FSMOE_ERR_INTERNAL, /* a bug: an invariant did not hold */
    FSMOE_ERR_MPI,      /* an MPI call failed (MPI's own message) */
    FSMOE_ERR_CUDA,     /* a CUDA runtime call failed */
    FSMOE_ERR_CUBLAS,   /* a cuBLAS call failed */
    FSMOE_ERR_NCCL,     /* an NCCL call failed */
    FSMOE_ERR_TIMEOUT,  /* a peer rank died or stalled: a wait saw no progress in time */
    FSMOE_STATUS_COUNT
} fsmoe_status;

#define FSMOE_ERROR_MAX 1024

/* The detail of the last failure. Zero-initialise it; a NULL fsmoe_error* is allowed
 * everywhere (the message is then dropped). */
typedef struct {
    fsmoe_status status;
    char msg[FSMOE_ERROR_MAX];
} fsmoe_error;

const char *fsmoe_strerror(fsmoe_status st);

/* Exit code for main(): 0 ok, 2 for usage and input errors (usage, parse, schema, value),
 * 1 for everything else. */
int fsmoe_exit_code(fsmoe_status st);

/* Records st and the printf-formatted message in err (if not NULL) and returns st, so that
 * failures read `return fsmoe_fail(err, FSMOE_ERR_VALUE, "%s:%d:%d: ...", ...);`. */
fsmoe_status fsmoe_fail(fsmoe_error *err, fsmoe_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
fsmoe_status fsmoe_vfail(fsmoe_error *err, fsmoe_status st, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* Where a field of an input file was read ("path:line:col: field"), kept in parsed structs so
 * that a check made after parsing (a combination of fields, a model with a cluster) still names
 * file:line:col. Empty when the field was absent; fsmoe_mark_where then gives `fallback`. */
typedef struct {
    char where[600];
} fsmoe_mark;
const char *fsmoe_mark_where(const fsmoe_mark *m, const char *fallback);

/* Prints "prog: message" (or "prog: <strerror>" when the message is empty) to stderr. */
void fsmoe_error_print(const char *prog, const fsmoe_error *err);

#endif
