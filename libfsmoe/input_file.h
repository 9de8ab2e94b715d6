/* Implements: opening an input file for reading without ever blocking on it. Opening a FIFO for
 * reading waits for a writer, and a device or a directory would feed a reader without end or not
 * at all; so inputs are opened non-blocking, their type is checked on the open descriptor (no
 * window between a stat and the open) and only a regular file is read. One place for every
 * reader of the three programs (YAML documents, the training data, checkpoint files). */
#ifndef FSMOE_INPUT_FILE_H
#define FSMOE_INPUT_FILE_H

#include <stdio.h>

#include "status.h"

/* Opens path for reading (blocking mode restored) when it is a regular file; *size gets its
 * size in bytes (NULL: not wanted). Fails with FSMOE_ERR_IO "PATH: cannot open: <reason>" or
 * FSMOE_ERR_VALUE "PATH: not a regular file (a FIFO)" (directory, device, socket, ...); errno
 * is then open(2)'s, or EINVAL for a file that is not regular. */
fsmoe_status fsmoe_open_input(const char *path, FILE **out, long long *size, fsmoe_error *err);

#endif
