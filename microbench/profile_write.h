/* Implements: the fitted lines and measured points of a run as a cluster profile, written by
 * libfsmoe's fsmoe_cluster_write (cluster_write.h) so that fsmoe_cluster_load and therefore
 * fsmoe-plan read it without editing. Written atomically (temp + rename).
 *
 * Per (op, tier): op, tier, ranks, alpha_s, beta_s_per_byte (gemm: beta_s_per_mac), r2 and
 * points [[n, seconds], ...] (strictly ascending n: rows of equal n, e.g. the two GEMMs of
 * one expert, are averaged into one point). Fits below r2_threshold are flagged twice: the
 * loader derives low_r2 from r2 < r2_threshold, and a "# LOW R2" comment sits on the entry.
 * Residuals go into a comment per entry (the schema has no key for them). */
#ifndef BENCH_PROFILE_WRITE_H
#define BENCH_PROFILE_WRITE_H

#include "results.h"
#include "status.h"

typedef struct {
    const char *name;
    const char *source;  /* how it was measured (command, host, date) */
    const char *device;
    int nodes, gpus_per_node;
    double r2_threshold;
    const char *notes;   /* may be NULL */
    double device_memory_bytes; /* per rank; 0: unknown (no key written) */
    int compute_threads;        /* BLAS threads per rank on a CPU; 0: a GPU (no key written) */
    /* ranks on one host, its cores, how many computed at once in the local sections: the
     * profile's host mapping (cluster.h), written where ranks outnumber cores and a local
     * section ran (host_at_once > 0) */
    int host_ranks, host_cores, host_at_once;
} profile_meta;

fsmoe_status profile_write(const char *path, const profile_meta *m, const bench_results *res,
                           fsmoe_error *err);

#endif
