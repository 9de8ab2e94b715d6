/* Implements: training checkpoints: DIR/checkpoint.bin holds a magic, a version, the model's
 * fingerprint, the next step, parameters and both AdamW moments, and a checksum. Written to a
 * temporary name, fsynced and renamed (atomic); read back with every mismatch named. Because
 * batches and gate noise are pure functions of (seed, step), resuming continues bit-exactly. */
#ifndef RT_CHECKPOINT_H
#define RT_CHECKPOINT_H

#include "adamw.h"
#include "transformer.h"

#define RT_CKPT_MAGIC "FSMOECKP"
#define RT_CKPT_VERSION 1

fsmoe_status checkpoint_save(const char *dir, const rt_model *md, const rt_adamw *opt, long step,
                             fsmoe_error *err);
/* Loads into an initialised model and optimiser of the same configuration; *step is the next
 * step to run. */
fsmoe_status checkpoint_load(const char *dir, rt_model *md, rt_adamw *opt, long *step,
                             fsmoe_error *err);

#endif
