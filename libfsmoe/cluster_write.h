/* Implements: the writer of the cluster profile schema (cluster.h, version
 * FSMOE_CLUSTER_VERSION), beside its reader, so that what fsmoe-bench writes is by
 * construction what fsmoe_cluster_load (and so fsmoe-plan) reads. Written atomically (temp +
 * rename, atomic_file.h).
 *
 * Per present (op, tier): op, tier, ranks (1 on the local tier), alpha_s, beta_s_per_byte
 * (gemm: beta_s_per_mac), r2 and, with two or more, points [[n, seconds], ...] as given (the
 * loader wants n strictly ascending). Lines carry 6 significant digits, r2 9 (to stay on the
 * same side of the threshold); sizes are written as integers where they are. Entries whose
 * r2 is below the profile's r2_threshold get a "LOW R2" comment (the loader derives low_r2
 * from r2 itself); derived entries (cluster.h `derived`) are not measurements and are not
 * written. */
#ifndef FSMOE_CLUSTER_WRITE_H
#define FSMOE_CLUSTER_WRITE_H

#include "cluster.h"
#include "status.h"

typedef struct {
    const char *notes; /* the profile's notes, or NULL */
    /* One comment line written before the entry (op, tier), or in its place when the entry
     * is not present (e.g. why it could not be measured); NULL: none. */
    const char *comment[FSMOE_OP_COUNT][FSMOE_TIER_COUNT];
} fsmoe_cluster_write_extra;

/* extra may be NULL. Fails with FSMOE_ERR_VALUE (writing nothing) when no entry is present. */
fsmoe_status fsmoe_cluster_write(const char *path, const fsmoe_cluster *c,
                                 const fsmoe_cluster_write_extra *extra, fsmoe_error *err);

#endif
