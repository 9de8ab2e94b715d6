/* Implements: SHA-256 (FIPS 180-4 §6.2) of a buffer and of a file, with lowercase hex output.
 * Used for the provenance of plans (design.md §9): a plan records the digest of the model and
 * cluster files it was made from, so a stale plan can be recognised. */
#ifndef FSMOE_SHA256_H
#define FSMOE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define FSMOE_SHA256_BYTES 32
#define FSMOE_SHA256_HEX 65 /* 64 hex digits + NUL */

typedef struct {
    uint32_t h[8];
    uint64_t total_bytes;
    unsigned char block[64];
    size_t fill; /* bytes waiting in block */
} fsmoe_sha256_ctx;

void fsmoe_sha256_init(fsmoe_sha256_ctx *c);
void fsmoe_sha256_update(fsmoe_sha256_ctx *c, const void *data, size_t n);
void fsmoe_sha256_final(fsmoe_sha256_ctx *c, unsigned char digest[FSMOE_SHA256_BYTES]);

/* Digest of n bytes at data, as 64 lowercase hex digits. */
void fsmoe_sha256_hex(const void *data, size_t n, char hex[FSMOE_SHA256_HEX]);
/* Digest of a whole file; FSMOE_ERR_IO naming the path when it cannot be read. */
fsmoe_status fsmoe_sha256_file(const char *path, char hex[FSMOE_SHA256_HEX], fsmoe_error *err);

#endif
