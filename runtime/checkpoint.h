/* Implements: training checkpoints v2 (design.md §10.1): one shard file per rank plus a manifest,
 * written so that a kill -9 at any moment leaves the previous checkpoint resumable, and read back
 * on any world size / ep by tensor name and global dim-0 range (resharding).
 *
 * On disk, under DIR:
 *   DIR/manifest.yaml                             written last, atomically, by rank 0
 *   DIR/step-00000200/shard-00001-of-00004.bin    one per rank of the saving run
 * The manifest names the step directory and lists its shards with their sizes and SHA-256s, the
 * layout that saved them, the model (architecture + fingerprint), step, AdamW t, seed and every
 * setting a resumed run depends on; its last line, `manifest_sha256: HEX`, is the SHA-256 of every
 * byte before it, so an edited or damaged manifest is refused too. Anything else under DIR (older step directories, temporaries
 * of an interrupted save) is ignored by checkpoint_load and removed by the next
 * checkpoint_write_manifest.
 *
 * Shard file (native byte order, checked by a byte-order mark; see checkpoint.c for the layout):
 * magic "FSMOESHD", version, real size, the step, the saving rank, an index of tensors (name,
 * shard kind, global dim-0 range and total, shape) closed by the SHA-256 of the header, then for
 * every tensor its parameters and both AdamW moments, then the SHA-256 of every byte before it.
 *
 * Who writes what: every tensor is written ONCE. Replicated tensors (RT_SHARD_NONE) by rank 0,
 * expert shards (RT_SHARD_EP) by the ranks with edp_rank 0 and esp_rank 0 (one per EP shard).
 *
 * Slices (tensor parallelism, expert slices): a checkpoint holds every tensor in its canonical
 * form — what a run without slices holds: dense tensors whole, expert tensors as their EP rows
 * with every column — so it resumes on any layout (and a run without slices resumes it). Saving
 * a run with slices: every rank scatters its elements into the canonical arrays (zeros
 * elsewhere, checkpoint_canon_local), the caller sums the MP slices' range over the MP group
 * and the expert slices' range over the ESP group (the members' elements are disjoint, so the
 * sums are exact), and checkpoint_save_shard writes from those arrays (rk->canon). Loading needs
 * no communication: a rank reads the canonical rows it needs and keeps its own elements. Replicas are
 * bit-identical by construction (their gradients are all-reduced), so more copies would only
 * multiply the bytes written by the world size; a rank with nothing to write still writes a
 * shard with an empty index, so that every rank does the same calls and the manifest always lists
 * `world` shards.
 *
 * RNG state: every random draw of fsmoe-run (initialisation, batches, gate noise) is a pure
 * function of (seed, stream, counter) whose counters are the step (rng.h), so seed + step is the
 * whole RNG state; the manifest records both.
 *
 * Settings: resuming with another seed, global batch (batch per rank × world), sequence
 * length, learning-rate schedule (lr, lr_min, warm-up), weight decay, betas, eps, clip, capacity
 * factor, gate noise or aux-loss coefficient is refused naming the setting: the run would not
 * be the continuation of the saved one. The batch per rank may change with the world size (the
 * global batch may not). `steps` may be extended (train longer; the cosine schedule is then
 * recomputed over the new total, so later learning rates differ from the saved run's plan) but
 * not set below the checkpoint's step.
 *
 * Who drives MPI: this file does none. Multi-rank save (every rank, then rank 0):
 *   every rank:  checkpoint_save_shard(dir, step, &rk, &info, err);
 *   all:         agree that every rank succeeded (e.g. MPI_Allreduce of the status), then
 *                MPI_Gather(&info, sizeof info, MPI_BYTE, infos, sizeof info, MPI_BYTE, 0, ...)
 *                -- the gather is also the barrier: rank 0 must not write the manifest before
 *                every shard is renamed into place;
 *   rank 0:      checkpoint_write_manifest(dir, step, &rk, infos, world, err);
 *   all:         a barrier (or a broadcast of rank 0's status) before anyone reads the manifest.
 * Load: every rank calls checkpoint_load(dir, &rk, &step, err) (reads only files). */
#ifndef RT_CHECKPOINT_H
#define RT_CHECKPOINT_H

#include <stdio.h>

#include "adamw.h"
#include "layout.h"
#include "sha256.h"
#include "transformer.h"

#define RT_CKPT_MAGIC "FSMOESHD"
#define RT_CKPT_VERSION 2
#define RT_CKPT_MANIFEST "manifest.yaml"

/* What one rank saves and loads. Only params->p, params->w, opt->m, opt->v and opt->t are
 * touched; cfg gives the architecture and the settings, lay this rank's place. */
/* The canonical form of a rank's tensors (see the top): the table (canonical shapes and
 * offsets, no buffers; tensors ordered by part) and host arrays w, m, v one after the other
 * (3 · table.total). [mp_begin, mp_end) holds the MP slices' tensors, [esp_begin, esp_end) the
 * expert slices' (offsets within each of the three arrays). */
typedef struct {
    rt_params table;
    real *host;
    long mp_begin, mp_end, esp_begin, esp_end;
} rt_ckpt_canon;

typedef struct {
    const rt_config *cfg;
    const rt_layout *lay;
    rt_backend *be;
    rt_params *params; /* this rank's tensors */
    rt_adamw *opt;     /* m, v mirror params; t = updates done */
    const rt_ckpt_canon *canon; /* saving a run with slices: what to write (NULL otherwise) */
} rt_ckpt_rank;

static inline rt_ckpt_rank checkpoint_rank(rt_model *md, rt_adamw *opt, const rt_layout *lay)
{
    rt_ckpt_rank r = {&md->cfg, lay, md->be, &md->params, opt, NULL};
    return r;
}

/* Whether any tensor of t is a slice (its canonical form differs from what the rank holds). */
int checkpoint_sliced(const rt_params *t);
/* This rank's elements of every tensor (weights and both moments, from the backend) at their
 * canonical places, zeros elsewhere. Free with checkpoint_canon_free. */
fsmoe_status checkpoint_canon_local(const rt_ckpt_rank *rk, rt_ckpt_canon *c, fsmoe_error *err);
void checkpoint_canon_free(rt_ckpt_canon *c); /* safe on a zeroed one */

/* One rank's shard as the manifest lists it. Plain bytes (no pointers): gather it with
 * MPI_BYTE. */
typedef struct {
    int rank, world;
    long step;
    long bytes;                    /* size of the file */
    char step_dir[32];             /* "step-00000200" */
    char file[48];                 /* "shard-00001-of-00004.bin", inside step_dir */
    char sha256[FSMOE_SHA256_HEX]; /* of every byte before the trailer (= the trailer) */
} rt_ckpt_shard_info;

/* Writes this rank's shard of the checkpoint at `step` (the next step to run) into its step
 * directory under dir (created as needed), atomically and fsynced, and describes it in *out. */
fsmoe_status checkpoint_save_shard(const char *dir, long step, const rt_ckpt_rank *rk,
                                   rt_ckpt_shard_info *out, fsmoe_error *err);
/* Rank 0, after every rank's checkpoint_save_shard succeeded: writes dir/manifest.yaml
 * atomically (shards[i] must be rank i's, n = world), then removes older step directories and
 * stray temporaries. rk is rank 0's (its step, AdamW t, settings and model). */
fsmoe_status checkpoint_write_manifest(const char *dir, long step, const rt_ckpt_rank *rk,
                                       const rt_ckpt_shard_info *shards, int n,
                                       fsmoe_error *err);
/* Single rank (world 1): save_shard then write_manifest. */
fsmoe_status checkpoint_save(const char *dir, long step, const rt_ckpt_rank *rk,
                             fsmoe_error *err);
/* Before the first step, on every rank: creates dir if it is missing (its parent must exist),
 * checks that a file can be created in it (FSMOE_ERR_IO naming `flag`, e.g. "--save", and
 * dir), and on rank 0 removes what a save that was killed left there (temporaries; step
 * directories the manifest does not name). The live checkpoint is never touched. */
fsmoe_status checkpoint_prepare_dir(const char *flag, const char *dir, int rank,
                                    fsmoe_error *err);
/* Reads dir/manifest.yaml, refuses another model or settings that matter (naming them), checks
 * the shards this rank needs against their SHA-256s and fills this rank's tensors and moments
 * from whichever shards hold their global rows; sets opt->t and *step (the next step to run).
 * Nothing is changed unless everything checked out. */
fsmoe_status checkpoint_load(const char *dir, const rt_ckpt_rank *rk, long *step,
                             fsmoe_error *err);

/* The readers, exposed for the fuzz harnesses and for tools. */
typedef struct {
    char name[64];
    int shard, ndim;
    long dim0_start, dim0_total;
    long shape[4];
    long numel;
} rt_ckpt_entry;

typedef struct {
    long step;
    int rank, world;
    int n;
    rt_ckpt_entry *e; /* owned */
    long header_bytes, data_bytes; /* the file is header + data + 32 bytes */
} rt_ckpt_index;

/* Reads and checks a shard's header (magic, version, index, header checksum) from f positioned
 * at 0; `size` is the file's size, `path` names it in messages. */
fsmoe_status checkpoint_index_read(FILE *f, long size, const char *path, rt_ckpt_index *ix,
                                   fsmoe_error *err);
void checkpoint_index_free(rt_ckpt_index *ix);
/* Reads the whole shard (f at 0) and checks its trailer and, when `want_sha` is not NULL, that
 * its digest is want_sha. For each tensor e and array a (0 w, 1 m, 2 v), calls take(user, e, a,
 * data) when not NULL. */
typedef void (*rt_ckpt_take_fn)(void *user, int e, int a, const real *data);
fsmoe_status checkpoint_shard_verify(FILE *f, const char *path, const rt_ckpt_index *ix,
                                     const char *want_sha, rt_ckpt_take_fn take, void *user,
                                     fsmoe_error *err);

typedef struct {
    long step, adamw_t;
    uint64_t seed;
    int world, ep, gpus_per_node;
    char model_name[64];
    char fingerprint[FSMOE_SHA256_HEX];
    long arch[16];        /* in the order of checkpoint.c's arch table */
    double settings[16];  /* in the order of checkpoint.c's settings table */
    char step_dir[32];
    int n;
    rt_ckpt_shard_info *shards; /* owned */
} rt_ckpt_manifest;

/* The learning-rate warm-up the checkpoint in dir was trained with, -1 when its manifest cannot
 * be read (checkpoint_load then says why). A resumed run without --warmup takes it: the
 * default warm-up is a share of --steps, and extending --steps must not change the schedule
 * the saved steps followed. */
long checkpoint_saved_warmup(const char *dir);

/* Parses a manifest held in memory; `path` names it in messages. */
fsmoe_status checkpoint_manifest_parse(const char *path, const char *text, size_t len,
                                       rt_ckpt_manifest *m, fsmoe_error *err);
void checkpoint_manifest_free(rt_ckpt_manifest *m);

#endif
