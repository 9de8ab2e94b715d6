/* Implements: tests of the model and cluster-profile schemas (design.md §2, §3, §11), the
 * parallel layout (§2) and the cost-model lookups (§3).
 *
 * The bad-input table follows libyaml's test-reader.c / libinput's test-utils.c: each row is a
 * small edit of a valid document, the loader it goes to, the exact status and a message
 * fragment that includes the line:col we counted by hand. Positive checks compare the shipped
 * files with the papers' numbers (FSMoE Fig. 5, MoNTA Table 8), the tier mapping with a
 * brute-force enumeration of every group of every valid layout up to 32 ranks, and the MoNTA
 * fit with a least-squares fit recomputed here. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_fs.h"
#include "cluster.h"
#include "cluster_write.h"
#include "cost.h"
#include "model.h"
#include "parallel.h"
#include "yaml_read.h"

enum { MODEL, CLUSTER };

/* A valid model; rows edit it. Line numbers are those of this text. */
static const char base_model[] = "fsmoe_model: 1\n"        /* 1 */
                                 "name: t\n"               /* 2 */
                                 "architecture:\n"         /* 3 */
                                 "  hidden: 64\n"          /* 4 */
                                 "  ffn_hidden: 256\n"     /* 5 */
                                 "  heads: 4\n"            /* 6 */
                                 "  layers: 4\n"           /* 7 */
                                 "  vocab: 256\n"          /* 8 */
                                 "moe:\n"                  /* 9 */
                                 "  experts: 4\n"          /* 10 */
                                 "  top_k: 2\n"            /* 11 */
                                 "  expert: gpt\n"         /* 12 */
                                 "  capacity_factor: 1.2\n" /* 13 */
                                 "training:\n"             /* 14 */
                                 "  batch: 8\n"            /* 15 */
                                 "  seq: 128\n"            /* 16 */
                                 "  dtype: fp32\n";        /* 17 */

static const char base_cluster[] = "fsmoe_cluster: 1\n"          /* 1 */
                                   "name: c\n"                   /* 2 */
                                   "source: \"test\"\n"          /* 3 */
                                   "nodes: 2\n"                  /* 4 */
                                   "gpus_per_node: 4\n"          /* 5 */
                                   "ops:\n"                      /* 6 */
                                   "  - op: alltoall\n"          /* 7 */
                                   "    tier: inter\n"           /* 8 */
                                   "    ranks: 2\n"              /* 9 */
                                   "    alpha_s: 1.0e-4\n"       /* 10 */
                                   "    beta_s_per_byte: 1.0e-10\n" /* 11 */
                                   "    r2: 0.999\n"             /* 12 */
                                   "  - op: gemm\n"              /* 13 */
                                   "    tier: local\n"           /* 14 */
                                   "    alpha_s: 1.0e-5\n"       /* 15 */
                                   "    beta_s_per_mac: 1.0e-14\n" /* 16 */
                                   "    r2: 0.99\n";             /* 17 */

#define PAR(s) "parallel: {" s "}\n" /* appended as line 18, the mapping starts at column 11 */

typedef struct {
    int kind;
    const char *find;    /* replaced (first occurrence) in the base text; NULL: `replace` is all */
    const char *replace;
    fsmoe_status status;
    const char *fragment; /* must appear right after the file path */
} bad_row;

static const bad_row bad_rows[] = {
    /* ---- model: keys, types, syntax ---- */
    {MODEL, "  top_k: 2\n", "  topk: 2\n", FSMOE_ERR_SCHEMA,
     ":11:3: moe.topk: unknown key (did you mean `top_k`?)"},
    {MODEL, "name: t\n", "nmae: t\n", FSMOE_ERR_SCHEMA,
     ":2:1: nmae: unknown key (did you mean `name`?)"},
    {MODEL, "  seq: 128\n", "  seq: 128\n  zzzzzz: 1\n", FSMOE_ERR_SCHEMA,
     ":17:3: training.zzzzzz: unknown key (expected one of: batch, seq, dtype, zero_stage, "
     "recompute)"},
    {MODEL, "  dtype: fp32\n", "  dtype: fp32\n  zero_stage: 4\n", FSMOE_ERR_VALUE,
     ":18:15: training.zero_stage: 4 is out of range (expected an integer in [0, 3])"},
    {MODEL, "  dtype: fp32\n", "  dtype: fp32\n  recompute: some\n", FSMOE_ERR_SCHEMA,
     ":18:14: training.recompute: unknown name `some` (did you mean `none`? expected one of: none, "
     "selective, full)"},
    {MODEL, "  vocab: 256\n", "", FSMOE_ERR_SCHEMA,
     ":4:3: architecture.vocab: missing required key (expected `vocab:` in `architecture`)"},
    {MODEL, "name: t\n", "", FSMOE_ERR_SCHEMA,
     ":1:1: name: missing required key (expected `name:` at the top level)"},
    {MODEL, "  batch: 8\n", "  batch: eight\n", FSMOE_ERR_SCHEMA,
     ":15:10: training.batch: expected an integer in [1, 65536], got `eight`"},
    {MODEL, "  batch: 8\n", "  batch: \"8\"\n", FSMOE_ERR_SCHEMA,
     ":15:10: training.batch: expected an integer in [1, 65536], got the quoted string \"8\""},
    {MODEL, "training:\n  batch: 8\n  seq: 128\n  dtype: fp32\n", "training: [8, 128]\n",
     FSMOE_ERR_SCHEMA, ":14:11: training: expected a mapping (key: value lines), got a sequence"},
    {MODEL, "  dtype: fp32\n", "  dtype: [fp32]\n", FSMOE_ERR_SCHEMA,
     ":17:10: training.dtype: expected one of: fp16, bf16, fp32, got a sequence"},
    {MODEL, "  dtype: fp32\n", "  dtype: fp23\n", FSMOE_ERR_SCHEMA,
     ":17:10: training.dtype: unknown name `fp23` (did you mean `fp32`? expected one of: fp16, "
     "bf16, fp32)"},
    {MODEL, "  expert: gpt\n", "  expert: gpt\n  dispatch: 2hd\n", FSMOE_ERR_SCHEMA,
     ":13:13: moe.dispatch: unknown name `2hd` (did you mean `2dh`? expected one of: nccl, 1dh, "
     "2dh, auto)"},
    {MODEL, "  expert: gpt\n", "  expert: moe\n", FSMOE_ERR_SCHEMA,
     ":12:11: moe.expert: unknown name `moe` (expected one of: gpt, swiglu)"},
    {MODEL, "  experts: 4\n", "  experts: all\n", FSMOE_ERR_SCHEMA,
     ":10:12: moe.experts: expected an integer >= 1 or the word `ep` (one expert per EP rank), "
     "got `all`"},
    {MODEL, "  capacity_factor: 1.2\n", "  capacity_factor: lots\n", FSMOE_ERR_SCHEMA,
     ":13:20: moe.capacity_factor: expected a number > 0 or `none` (no token dropping), got "
     "`lots`"},
    {MODEL, NULL, "name: [unclosed\n", FSMOE_ERR_PARSE,
     ":2:1: not valid YAML: did not find expected ',' or ']'"},
    {MODEL, NULL, "fsmoe_model: 1\n\tname: t\n", FSMOE_ERR_PARSE,
     ":2:1: not valid YAML: found a tab character"},
    {MODEL, NULL, "", FSMOE_ERR_SCHEMA, ":1:1: empty document"},
    {MODEL, NULL, "- a\n- b\n", FSMOE_ERR_SCHEMA,
     ":1:1: expected a mapping of key: value lines at the top level, got a sequence"},
    {MODEL, "  top_k: 2\n", "  top_k: 2\n  top_k: 3\n", FSMOE_ERR_SCHEMA,
     ":12:3: moe.top_k: duplicate key (first given at line 11"},
    {MODEL, "fsmoe_model: 1\n", "fsmoe_model: 2\n", FSMOE_ERR_SCHEMA,
     ":1:14: fsmoe_model: unsupported version `2` (this build reads fsmoe_model version 1"},
    {MODEL, "fsmoe_model: 1\n", "", FSMOE_ERR_SCHEMA,
     ":1:1: fsmoe_model: missing version key (expected `fsmoe_model: 1` at the top level"},
    {MODEL, "fsmoe_model: 1\n", "fsmoe_cluster: 1\n", FSMOE_ERR_SCHEMA,
     ":1:1: fsmoe_model: missing version key; this file says `fsmoe_cluster`, so it is not a "
     "model file"},
    {MODEL, "  dtype: fp32\n", "  dtype: fp32\n---\nname: x\n", FSMOE_ERR_SCHEMA,
     ":19:1: a second YAML document (expected one document per file)"},
    /* ---- model: impossible values ---- */
    {MODEL, "  layers: 4\n", "  layers: 0\n", FSMOE_ERR_VALUE,
     ":7:11: architecture.layers: 0 is out of range (expected an integer in [1, 4096])"},
    {MODEL, "  heads: 4\n", "  heads: 5\n", FSMOE_ERR_VALUE,
     ":6:10: architecture.heads: heads=5 does not divide hidden=64"},
    {MODEL, "  heads: 4\n", "  heads: 4\n  kv_heads: 3\n", FSMOE_ERR_VALUE,
     ":7:13: architecture.kv_heads: kv_heads=3 does not divide heads=4"},
    {MODEL, "  top_k: 2\n", "  top_k: 5\n", FSMOE_ERR_VALUE,
     ":11:10: moe.top_k: top_k=5 exceeds experts=4 (expected top_k <= experts)"},
    {MODEL, "  expert: gpt\n", "  expert: gpt\n  first: 4\n", FSMOE_ERR_VALUE,
     ":13:10: moe.first: first MoE block 4 is past the last block (expected first < layers=4)"},
    {MODEL, "  capacity_factor: 1.2\n", "  capacity_factor: 0.001\n", FSMOE_ERR_VALUE,
     ":13:20: moe.capacity_factor: capacity rounds to 0 tokens: k·f·B·L/E = 2·0.001·8·128/4 = "
     "0.512 < 1 token per expert (expected capacity_factor >= 0.00195312, or none)"},
    {MODEL, "  capacity_factor: 1.2\n", "  capacity_factor: -1\n", FSMOE_ERR_VALUE,
     ":13:20: moe.capacity_factor: -1 is not a capacity factor"},
    {MODEL, "  dtype: fp32\n", "  dtype: fp32\n" PAR("world: 8, gpus_per_node: 4, dp: 2, mp: 4, ep: 8, esp: 1"),
     FSMOE_ERR_VALUE,
     ":10:12: moe.experts: 4 is not divisible by ep=8 of the layout at "},
    {MODEL, "  dtype: fp32\n",
     "  dtype: fp32\n" PAR("world: 32, gpus_per_node: 4, dp: 8, mp: 2, ep: 4, esp: 1"),
     FSMOE_ERR_VALUE,
     ":18:19: parallel.world: world=32 but dp·mp·pp = 8·2·1 = 16 (world must equal dp·mp·pp)"},
    {MODEL, "  dtype: fp32\n",
     "  dtype: fp32\n" PAR("world: 6, gpus_per_node: 4, dp: 3, mp: 2, ep: 2, esp: 1"),
     FSMOE_ERR_VALUE, ":18:37: parallel.gpus_per_node: gpus_per_node=4 does not divide world=6"},
    {MODEL, "  dtype: fp32\n",
     "  dtype: fp32\n" PAR("world: 8, gpus_per_node: 4, dp: 2, mp: 4, ep: 4, esp: 4"),
     FSMOE_ERR_VALUE, ":18:58: parallel.ep: ep·esp = 4·4 = 16 does not divide world=8"},
    {MODEL, "  dtype: fp32\n",
     "  dtype: fp32\n" PAR("world: 24, gpus_per_node: 4, dp: 6, mp: 4, ep: 2, esp: 6"),
     FSMOE_ERR_VALUE, ":18:67: parallel.esp: esp=6 with gpus_per_node=4 (expected esp to divide"},
    {MODEL, "  dtype: fp32\n",
     "  dtype: fp32\n" PAR("world: 8, gpus_per_node: 4, dp: 2, mp: 4, ep: 2, esp: 0"),
     FSMOE_ERR_VALUE, ":18:66: parallel.esp: 0 is out of range (expected an integer in [1, 262144])"},
    {MODEL, "  dtype: fp32\n", "  dtype: fp32\n" PAR("world: 8, gpus_per_node: 4, dp: 2, mp: 4"),
     FSMOE_ERR_SCHEMA, ":18:11: parallel.ep: missing required key"},
    /* ---- cluster ---- */
    {CLUSTER, "    alpha_s: 1.0e-4\n", "    alpha_s: -1.0e-4\n", FSMOE_ERR_VALUE,
     ":10:14: ops[0].alpha_s: -1.0e-4 is out of range (expected a number in [0, 10])"},
    {CLUSTER, "    beta_s_per_byte: 1.0e-10\n", "    beta_s_per_byte: -1.0e-10\n",
     FSMOE_ERR_VALUE,
     ":11:22: ops[0].beta_s_per_byte: -1.0e-10 is out of range (expected a number in [0, 0.001])"},
    {CLUSTER, "    r2: 0.999\n", "", FSMOE_ERR_SCHEMA,
     ":7:5: ops[0].r2: missing required key (expected `r2:` in `ops[0]`)"},
    {CLUSTER, "    r2: 0.999\n", "    r2: 1.5\n", FSMOE_ERR_VALUE,
     ":12:9: ops[0].r2: 1.5 is out of range (expected a number in [0, 1])"},
    {CLUSTER, "    r2: 0.999\n", "    r2: high\n", FSMOE_ERR_SCHEMA,
     ":12:9: ops[0].r2: expected a number in [0, 1], got `high`"},
    {CLUSTER, "    r2: 0.999\n", "    r_2: 0.999\n", FSMOE_ERR_SCHEMA,
     ":12:5: ops[0].r_2: unknown key (did you mean `r2`?)"},
    {CLUSTER, "  - op: alltoall\n", "  - op: all2all\n", FSMOE_ERR_SCHEMA,
     ":7:9: ops[0].op: unknown name `all2all` (did you mean `alltoall`? expected one of: "
     "alltoall, alltoall_2dh, allgather, reducescatter, allreduce, saa, gemm, copy)"},
    {CLUSTER, "  - op: alltoall\n", "  - op: broadcast\n", FSMOE_ERR_SCHEMA,
     ":7:9: ops[0].op: unknown name `broadcast` (expected one of: alltoall, alltoall_2dh, "
     "allgather, reducescatter, allreduce, saa, gemm, copy)"},
    {CLUSTER, "    tier: inter\n", "    tier: internode\n", FSMOE_ERR_SCHEMA,
     ":8:11: ops[0].tier: unknown name `internode` (expected one of: intra, inter, world, local)"},
    {CLUSTER, "    beta_s_per_mac: 1.0e-14\n", "    beta_s_per_byte: 1.0e-14\n", FSMOE_ERR_SCHEMA,
     ":16:22: ops[1].beta_s_per_byte: not valid for gemm (expected beta_s_per_mac"},
    {CLUSTER, "    beta_s_per_byte: 1.0e-10\n", "    beta_s_per_mac: 1.0e-10\n", FSMOE_ERR_SCHEMA,
     ":11:21: ops[0].beta_s_per_mac: not valid for alltoall (expected beta_s_per_byte"},
    {CLUSTER, "    tier: local\n", "    tier: intra\n", FSMOE_ERR_VALUE,
     ":14:11: ops[1].tier: tier intra is not valid for gemm (expected local"},
    {CLUSTER, "    tier: inter\n", "    tier: local\n", FSMOE_ERR_VALUE,
     ":8:11: ops[0].tier: tier local is not valid for alltoall (expected intra, inter or world"},
    {CLUSTER, "    ranks: 2\n", "", FSMOE_ERR_SCHEMA, ":7:5: ops[0].ranks: missing required key"},
    {CLUSTER, "    ranks: 2\n", "    ranks: 3\n", FSMOE_ERR_VALUE,
     ":9:12: ops[0].ranks: 3 ranks on tier inter (expected at most 2: one rank per node)"},
    {CLUSTER, "    r2: 0.999\n",
     "    r2: 0.999\n    points: [[2.0e6, 1.0e-3], [1.0e6, 5.0e-4]]\n", FSMOE_ERR_VALUE,
     ":13:31: ops[0].points[1]: size 1e+06 after 2e+06: points are not sorted"},
    {CLUSTER, "    r2: 0.999\n", "    r2: 0.999\n    points: [[1.0e6, 5.0e-4]]\n", FSMOE_ERR_VALUE,
     ":13:13: ops[0].points: 1 point (expected at least 2"},
    {CLUSTER, "    r2: 0.999\n", "    r2: 0.999\n    points: [[1.0e6, 5.0e-4, 1], [2.0e6, 1.0e-3]]\n",
     FSMOE_ERR_SCHEMA, ":13:14: ops[0].points[0]: expected a pair [bytes, seconds]"},
    {CLUSTER, "    r2: 0.999\n", "    r2: 0.999\n    derived: \"\"\n", FSMOE_ERR_VALUE,
     ":13:14: ops[0].derived: empty (expected how the entry was obtained)"},
    {CLUSTER, "    r2: 0.99\n",
     "    r2: 0.99\n  - op: alltoall\n    tier: inter\n    ranks: 2\n    alpha_s: 0\n"
     "    beta_s_per_byte: 0\n    r2: 1\n",
     FSMOE_ERR_VALUE,
     ":18:5: ops[2]: second entry for alltoall on tier inter at 2 ranks (first at line 7; "
     "expected one entry per op, tier, ranks and shape)"},
    {CLUSTER, "  - op: gemm\n", "  - op: gemm\n    tier: local\n    alpha_s: 0\n"
     "    beta_s_per_mac: 0\n    r2: 1\n  - op: gemm\n", FSMOE_ERR_VALUE,
     ":18:5: ops[2]: second entry for gemm on tier local at 1 rank (first at line 13; expected "
     "one entry per op, tier, ranks and shape)"},
    /* GEMM shapes: only on gemm, a pair in range, one entry per shape */
    {CLUSTER, "    beta_s_per_byte: 1.0e-10\n", "    beta_s_per_byte: 1.0e-10\n    shape: [64, 256]\n",
     FSMOE_ERR_SCHEMA, ":12:12: ops[0].shape: not valid for alltoall (expected only on gemm entries"},
    {CLUSTER, "    beta_s_per_mac: 1.0e-14\n", "    beta_s_per_mac: 1.0e-14\n    shape: [64]\n",
     FSMOE_ERR_SCHEMA, ":17:12: ops[1].shape: expected a pair [M, H]"},
    {CLUSTER, "    beta_s_per_mac: 1.0e-14\n", "    beta_s_per_mac: 1.0e-14\n    shape: [0, 256]\n",
     FSMOE_ERR_VALUE, ":17:13: ops[1].shape[0]: 0 is out of range"},
    {CLUSTER, "  - op: gemm\n", "  - op: gemm\n    tier: local\n    shape: [64, 256]\n    alpha_s: 0\n"
     "    beta_s_per_mac: 0\n    r2: 1\n  - op: gemm\n    shape: [64, 256]\n", FSMOE_ERR_VALUE,
     ":19:5: ops[2]: second entry for gemm on tier local at 1 rank and shape 64:256 (first at "
     "line 13; expected one entry per op, tier, ranks and shape)"},
    {CLUSTER, "nodes: 2\n", "nodes: [2]\n", FSMOE_ERR_SCHEMA,
     ":4:8: nodes: expected an integer in [1, 262144], got a sequence"},
    {CLUSTER, "gpus_per_node: 4\n", "gpus_per_node: 0\n", FSMOE_ERR_VALUE,
     ":5:16: gpus_per_node: 0 is out of range (expected an integer in [1, 4096])"},
    {CLUSTER, "fsmoe_cluster: 1\n", "fsmoe_cluster: 3\n", FSMOE_ERR_SCHEMA,
     ":1:16: fsmoe_cluster: unsupported version `3` (this build reads fsmoe_cluster version 1"},
    {CLUSTER, "fsmoe_cluster: 1\n", "fsmoe_model: 1\n", FSMOE_ERR_SCHEMA,
     ":1:1: fsmoe_cluster: missing version key; this file says `fsmoe_model`, so it is not a "
     "cluster file"},
    {CLUSTER, "gpus_per_node: 4\n", "gpus_per_node: 4\nr2_threshold: 2\n", FSMOE_ERR_VALUE,
     ":6:15: r2_threshold: 2 is out of range (expected a number in [0, 1])"},
    {CLUSTER, "ops:\n", "opts:\n", FSMOE_ERR_SCHEMA,
     ":6:1: opts: unknown key (did you mean `ops`?)"},
    /* device_memory_bytes: optional, 1 MiB to 1 PiB */
    {CLUSTER, "gpus_per_node: 4\n", "gpus_per_node: 4\ndevice_memory_bytes: 1000\n",
     FSMOE_ERR_VALUE, ":6:22: device_memory_bytes: 1000 is out of range (expected a number in "
     "[1.04858e+06, 1.1259e+15])"},
    {CLUSTER, "gpus_per_node: 4\n", "gpus_per_node: 4\ndevice_memory_bytes: 80G\n",
     FSMOE_ERR_SCHEMA, ":6:22: device_memory_bytes: expected a number in [1.04858e+06, "
     "1.1259e+15], got `80G`"},
    /* compute_threads: optional, 1..1024 */
    {CLUSTER, "gpus_per_node: 4\n", "gpus_per_node: 4\ncompute_threads: 0\n", FSMOE_ERR_VALUE,
     ":6:18: compute_threads: 0 is out of range (expected an integer in [1, 1024])"},
    /* interference: a mapping of two factors in [1, 100] */
    {CLUSTER, "gpus_per_node: 4\n", "gpus_per_node: 4\ninterference: 2\n", FSMOE_ERR_SCHEMA,
     ":6:15: interference: expected a mapping"},
    {CLUSTER, "gpus_per_node: 4\n",
     "gpus_per_node: 4\ninterference:\n  comm_slowdown: 0.5\n  compute_slowdown: 1\n",
     FSMOE_ERR_VALUE, ":7:18: interference.comm_slowdown: 0.5 is out of range (expected a number "
     "in [1, 100])"},
    {CLUSTER, "gpus_per_node: 4\n", "gpus_per_node: 4\ninterference:\n  comm_slowdown: 2\n",
     FSMOE_ERR_SCHEMA, ":7:3: interference.compute_slowdown: missing required key"},
    {CLUSTER, "gpus_per_node: 4\n",
     "gpus_per_node: 4\ninterference:\n  comm_slowdown: 2\n  compute: 1\n", FSMOE_ERR_SCHEMA,
     ":8:3: interference.compute: unknown key (expected one of: comm_slowdown, compute_slowdown, "
     "sync_latency_s, sync_growth, sync_growth_from_s, measured)"},
    /* the sync latency: optional, seconds in [0, 1] */
    {CLUSTER, "gpus_per_node: 4\n",
     "gpus_per_node: 4\ninterference:\n  comm_slowdown: 2\n  compute_slowdown: 1\n"
     "  sync_latency_s: 2\n",
     FSMOE_ERR_VALUE, ":9:19: interference.sync_latency_s: 2 is out of range (expected a number "
     "in [0, 1])"},
    {CLUSTER, "gpus_per_node: 4\n",
     "gpus_per_node: 4\ninterference:\n  comm_slowdown: 2\n  compute_slowdown: 1\n"
     "  sync_latency_s: -0.001\n",
     FSMOE_ERR_VALUE, ":9:19: interference.sync_latency_s: -0.001 is out of range (expected a "
     "number in [0, 1])"},
    /* its growth: optional, seconds per second in [0, 10] */
    {CLUSTER, "gpus_per_node: 4\n",
     "gpus_per_node: 4\ninterference:\n  comm_slowdown: 2\n  compute_slowdown: 1\n"
     "  sync_growth: 11\n",
     FSMOE_ERR_VALUE, ":9:16: interference.sync_growth: 11 is out of range (expected a number "
     "in [0, 10])"},
    {CLUSTER, "gpus_per_node: 4\n",
     "gpus_per_node: 4\ninterference:\n  comm_slowdown: 2\n  compute_slowdown: 1\n"
     "  sync_growth: x\n",
     FSMOE_ERR_SCHEMA, ":9:16: interference.sync_growth: expected a number in [0, 10], got `x`"},
    /* the shortest segment it was fitted on: optional, seconds in [0, 1000] */
    {CLUSTER, "gpus_per_node: 4\n",
     "gpus_per_node: 4\ninterference:\n  comm_slowdown: 2\n  compute_slowdown: 1\n"
     "  sync_growth: 0.1\n  sync_growth_from_s: -1\n",
     FSMOE_ERR_VALUE, ":10:23: interference.sync_growth_from_s: -1 is out of range (expected a "
     "number in [0, 1000])"},
    /* host: ranks sharing a host's cores, at most the cluster's; ranks_at_once at most ranks */
    {CLUSTER, "gpus_per_node: 4\n", "gpus_per_node: 4\nhost: 2\n", FSMOE_ERR_SCHEMA,
     ":6:7: host: expected a mapping"},
    {CLUSTER, "gpus_per_node: 4\n", "gpus_per_node: 4\nhost:\n  ranks: 4\n  cores: 2\n",
     FSMOE_ERR_SCHEMA, ":7:3: host.ranks_at_once: missing required key"},
    {CLUSTER, "gpus_per_node: 4\n",
     "gpus_per_node: 4\nhost:\n  ranks: 4\n  cores: 2\n  ranks_at_once: 5\n", FSMOE_ERR_VALUE,
     ":9:18: host.ranks_at_once: 5 is out of range (expected an integer in [1, 4])"},
    {CLUSTER, "gpus_per_node: 4\n",
     "gpus_per_node: 4\nhost:\n  ranks: 16\n  cores: 2\n  ranks_at_once: 2\n", FSMOE_ERR_VALUE,
     ":7:10: host.ranks: host.ranks 16 is more than the cluster's 8 ranks (nodes·gpus_per_node)"},
    {CLUSTER, "gpus_per_node: 4\n",
     "gpus_per_node: 4\nhost:\n  ranks: 4\n  cores: 2\n  at_once: 2\n", FSMOE_ERR_SCHEMA,
     ":9:3: host.at_once: unknown key (expected one of: ranks, cores, ranks_at_once)"},
    {CLUSTER, NULL, "fsmoe_cluster: 1\nname: c\nsource: s\nnodes: 1\ngpus_per_node: 1\n",
     FSMOE_ERR_SCHEMA, ":1:1: ops: missing required key (expected `ops:` at the top level)"},
    {CLUSTER, NULL, "fsmoe_cluster: 1\nname: c\nsource: s\nnodes: 1\ngpus_per_node: 1\nops: []\n",
     FSMOE_ERR_VALUE, ":6:6: ops: no entries"},
    {CLUSTER, "  - op: gemm\n", "  - gemm\n  - op: gemm\n", FSMOE_ERR_SCHEMA,
     ":13:5: ops[1]: expected a mapping (key: value lines), got `gemm`"},
    {MODEL, "  dtype: fp32\n",
     "  dtype: fp32\n" PAR("world: 6, gpus_per_node: 3, dp: 6, mp: 1, ep: 2, esp: 1"),
     FSMOE_ERR_VALUE, ":18:58: parallel.ep: ep·esp = 2·1 = 2 with gpus_per_node=3 (expected ep·esp "
     "to divide gpus_per_node or be a multiple of it"},
    /* ---- resource limits (yaml_read.h): every size refused at the reader, with the limit ---- */
    {MODEL, "  hidden: 64\n", "  hidden: 1000000000\n", FSMOE_ERR_VALUE,
     ":4:11: architecture.hidden: 1000000000 is out of range (expected an integer in [1, 131072])"},
    {MODEL, "  ffn_hidden: 256\n", "  ffn_hidden: 1048576\n", FSMOE_ERR_VALUE,
     ":5:15: architecture.ffn_hidden: 1048576 is out of range (expected an integer in [1, "
     "524288])"},
    {MODEL, "  vocab: 256\n", "  vocab: 1000000000\n", FSMOE_ERR_VALUE,
     ":8:10: architecture.vocab: 1000000000 is out of range (expected an integer in [1, 4194304])"},
    {MODEL, "  layers: 4\n", "  layers: 100000\n", FSMOE_ERR_VALUE,
     ":7:11: architecture.layers: 100000 is out of range (expected an integer in [1, 4096])"},
    {MODEL, "  heads: 4\n", "  heads: 8192\n", FSMOE_ERR_VALUE,
     ":6:10: architecture.heads: 8192 is out of range (expected an integer in [1, 4096])"},
    {MODEL, "  experts: 4\n", "  experts: 16777216\n", FSMOE_ERR_VALUE,
     ":10:12: moe.experts: 16777216 is out of range (expected an integer in [1, 65536])"},
    {MODEL, "  top_k: 2\n", "  top_k: 1000\n", FSMOE_ERR_VALUE,
     ":11:10: moe.top_k: 1000 is out of range (expected an integer in [1, 256])"},
    {MODEL, "  top_k: 2\n", "  top_k: 200\n", FSMOE_ERR_VALUE,
     ":11:10: moe.top_k: top_k=200 exceeds experts=4 (expected top_k <= experts)"},
    {MODEL, "  seq: 128\n", "  seq: 16777216\n", FSMOE_ERR_VALUE,
     ":16:8: training.seq: 16777216 is out of range (expected an integer in [1, 2097152])"},
    {MODEL, "  batch: 8\n  seq: 128\n", "  batch: 65536\n  seq: 4096\n", FSMOE_ERR_VALUE,
     ":16:8: training.seq: batch·seq = 65536·4096 = 268435456 tokens per GPU and step (expected "
     "at most 16777216)"},
    {MODEL, "  dtype: fp32\n",
     "  dtype: fp32\n" PAR("world: 16777216, gpus_per_node: 4, dp: 2, mp: 4, ep: 2, esp: 1"),
     FSMOE_ERR_VALUE,
     ":18:19: parallel.world: 16777216 is out of range (expected an integer in [1, 262144])"},
    {MODEL, "  dtype: fp32\n",
     "  dtype: fp32\n" PAR("world: 8, gpus_per_node: 8192, dp: 2, mp: 4, ep: 2, esp: 1"),
     FSMOE_ERR_VALUE,
     ":18:37: parallel.gpus_per_node: 8192 is out of range (expected an integer in [1, 4096])"},
    /* ---- finiteness: nothing non-finite passes a reader ---- */
    {MODEL, "  capacity_factor: 1.2\n", "  capacity_factor: 1e30\n", FSMOE_ERR_VALUE,
     ":13:20: moe.capacity_factor: 1e+30 is out of range (expected a number in (0, 65536], or "
     "`none`"},
    {MODEL, "  capacity_factor: 1.2\n", "  capacity_factor: .nan\n", FSMOE_ERR_SCHEMA,
     ":13:20: moe.capacity_factor: expected a number > 0 or `none` (no token dropping), got "
     "`.nan`"},
    {MODEL, "  capacity_factor: 1.2\n", "  capacity_factor: NaN\n", FSMOE_ERR_SCHEMA,
     ":13:20: moe.capacity_factor: expected a number > 0 or `none` (no token dropping), got "
     "`NaN`"},
    {MODEL, "  capacity_factor: 1.2\n", "  capacity_factor: inf\n", FSMOE_ERR_SCHEMA,
     ":13:20: moe.capacity_factor: expected a number > 0 or `none` (no token dropping), got "
     "`inf`"},
    {MODEL, "  batch: 8\n", "  batch: -1\n", FSMOE_ERR_VALUE,
     ":15:10: training.batch: -1 is out of range (expected an integer in [1, 65536])"},
    {CLUSTER, "    alpha_s: 1.0e-4\n", "    alpha_s: 1e30\n", FSMOE_ERR_VALUE,
     ":10:14: ops[0].alpha_s: 1e30 is out of range (expected a number in [0, 10])"},
    {CLUSTER, "    alpha_s: 1.0e-4\n", "    alpha_s: .inf\n", FSMOE_ERR_SCHEMA,
     ":10:14: ops[0].alpha_s: expected a number in [0, 10], got `.inf`"},
    {CLUSTER, "    beta_s_per_byte: 1.0e-10\n", "    beta_s_per_byte: 1e30\n", FSMOE_ERR_VALUE,
     ":11:22: ops[0].beta_s_per_byte: 1e30 is out of range (expected a number in [0, 0.001])"},
    {CLUSTER, "    beta_s_per_byte: 1.0e-10\n", "    beta_s_per_byte: nan\n", FSMOE_ERR_SCHEMA,
     ":11:22: ops[0].beta_s_per_byte: expected a number in [0, 0.001], got `nan`"},
    {CLUSTER, "    r2: 0.999\n", "    r2: -.inf\n", FSMOE_ERR_SCHEMA,
     ":12:9: ops[0].r2: expected a number in [0, 1], got `-.inf`"},
    {CLUSTER, "    r2: 0.999\n", "    r2: 0.999\n    points: [[1.0e6, 1e30], [2.0e6, 1.0e-3]]\n",
     FSMOE_ERR_VALUE, ":13:22: ops[0].points[0][1]: 1e30 is out of range (expected a number in [0, "
     "10000])"},
    {CLUSTER, "nodes: 2\n", "nodes: 16777216\n", FSMOE_ERR_VALUE,
     ":4:8: nodes: 16777216 is out of range (expected an integer in [1, 262144])"},
    {CLUSTER, "nodes: 2\n", "nodes: 262144\n", FSMOE_ERR_VALUE,
     ":5:16: gpus_per_node: nodes·gpus_per_node = 262144·4 = 1048576 GPUs (expected at most "
     "262144)"},
    /* ---- not UTF-8: line:col of the byte, counted in characters ---- */
    {MODEL, "name: t\n", "name: t\xff\n", FSMOE_ERR_PARSE,
     ":2:8: not valid YAML: invalid leading UTF-8 octet 0xFF (byte offset 22;"},
    {MODEL, "name: t\n", "name: \xc3\xa9\xc3\n", FSMOE_ERR_PARSE,
     ":2:9: not valid YAML: invalid trailing UTF-8 octet 0x0A (byte offset 24;"},
    {CLUSTER, "    r2: 0.99\n", "    r2: 0.99\x01\n", FSMOE_ERR_PARSE,
     ":17:13: not valid YAML: control characters are not allowed"},
    /* ---- aliases: a 352-byte document naming 10^9 nodes ---- */
    {MODEL, NULL,
     "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
     "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
     "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
     "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
     "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
     "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
     "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
     "h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]\n"
     "i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]\n",
     FSMOE_ERR_SCHEMA, ":1:23: c[3][0][5]: aliases expand the document past 464 nodes (it has 29; "
     "expected aliases to reach at most 16 times the nodes written)"},
    {MODEL, NULL, "a: &a [*a]\n", FSMOE_ERR_SCHEMA, ":1:4: a[0][0][0][0]"},
};

static char tmp_dir[256];

static const char *write_tmp(const char *text)
{
    static char path[320];
    snprintf(path, sizeof path, "%s/in.yaml", tmp_dir);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    assert_int_equal(fwrite(text, 1, strlen(text), fp), strlen(text));
    assert_int_equal(fclose(fp), 0);
    return path;
}

static void build_text(const bad_row *r, char *out, size_t len)
{
    if (!r->find) {
        snprintf(out, len, "%s", r->replace);
        return;
    }
    const char *base = r->kind == MODEL ? base_model : base_cluster;
    const char *at = strstr(base, r->find);
    if (!at)
        fail_msg("row edit `%s` not found in the base text", r->find);
    snprintf(out, len, "%.*s%s%s", (int)(at - base), base, r->replace, at + strlen(r->find));
}

static void test_bad_inputs(void **state)
{
    (void)state;
    size_t n = sizeof bad_rows / sizeof bad_rows[0];
    assert_true(n >= 30);
    int failures = 0;
    for (size_t i = 0; i < n; i++) {
        const bad_row *r = &bad_rows[i];
        char text[4096], expect[1200];
        build_text(r, text, sizeof text);
        const char *path = write_tmp(text);
        fsmoe_error err = {0};
        fsmoe_status st;
        if (r->kind == MODEL) {
            fsmoe_model m;
            st = fsmoe_model_load(path, &m, &err);
        } else {
            fsmoe_cluster c;
            st = fsmoe_cluster_load(path, &c, &err);
            fsmoe_cluster_free(&c);
        }
        /* The message starts with the path and the fragment follows it directly. */
        snprintf(expect, sizeof expect, "%s%s", path, r->fragment);
        int ok = st == r->status && err.status == r->status && fsmoe_exit_code(st) == 2 &&
                 strncmp(err.msg, expect, strlen(expect)) == 0 && strchr(err.msg, '\n') == NULL;
        if (!ok) {
            failures++;
            print_error("row %zu: status %d (want %d)\n  got:  %s\n  want: %s...\n", i, (int)st,
                        (int)r->status, err.msg, expect);
        }
    }
    assert_int_equal(failures, 0);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Inputs too large to write out: made here, each refused with its message within 3 s (times
 * FSMOE_TEST_TIME_SCALE, set for the sanitizer build). Before the bounds 100,000 nested `[`
 * took 27 s, and the duplicate-key check compared every pair of keys (5·10^9 comparisons for
 * the mapping below): the bound is there to catch work that grows faster than the input. The
 * sequence is parsed up to the node limit before it is refused, a million nodes, which on
 * these 2-core machines takes 0.5–1 s alone and failed a 1 s bound at 1.02 s and 1.42 s beside
 * the other tests. An input over the bound is read once more and fails only when slow twice:
 * a reader that is slow on an input is slow on every read. */
static void test_reader_bounds(void **state)
{
    (void)state;
    const char *scale_env = getenv("FSMOE_TEST_TIME_SCALE");
    double limit_s = 3.0 * (scale_env && atof(scale_env) > 0 ? atof(scale_env) : 1.0);
    enum { DEEP, KEYS, NODES, BYTES, N_CASES };
    static const struct {
        const char *what;
        fsmoe_status status;
        const char *fragment;
    } rows[N_CASES] = {
        [DEEP] = {"100000 nested [", FSMOE_ERR_SCHEMA,
                  ":2:70: nesting deeper than 64 levels (the limit for any input file)"},
        [KEYS] = {"a mapping of 100000 keys, the last one twice", FSMOE_ERR_SCHEMA,
                  ":100002:1: k99999: duplicate key (first given at line 100001"},
        [NODES] = {"a sequence of 1100000 items", FSMOE_ERR_SCHEMA,
                   ":3:2097143: more than 1048576 YAML nodes (the limit for any input file)"},
        [BYTES] = {"17 MiB of comment", FSMOE_ERR_VALUE,
                   ":1:1: file of 17825793 bytes (expected at most 16777216 bytes"},
    };
    size_t cap = 18u << 20;
    char *text = malloc(cap);
    assert_non_null(text);
    for (int c = 0; c < N_CASES; c++) {
        size_t n = 0;
        n += (size_t)snprintf(text, cap, "fsmoe_model: 1\n");
        if (c == DEEP) {
            n += (size_t)snprintf(text + n, cap - n, "name: ");
            for (int i = 0; i < 100000; i++)
                text[n++] = '[';
            for (int i = 0; i < 100000; i++)
                text[n++] = ']';
        } else if (c == KEYS) {
            for (int i = 0; i < 100000; i++)
                n += (size_t)snprintf(text + n, cap - n, "k%d: 1\n", i);
            n += (size_t)snprintf(text + n, cap - n, "k99999: 2\n");
        } else if (c == NODES) {
            n += (size_t)snprintf(text + n, cap - n, "name: t\nx: [");
            for (int i = 0; i < 1100000; i++)
                n += (size_t)snprintf(text + n, cap - n, "1,");
            text[n++] = ']';
        } else {
            memset(text, '#', 17u << 20);
            n = 17u << 20;
        }
        text[n++] = '\n';
        text[n] = '\0';
        char path[320];
        snprintf(path, sizeof path, "%s/big.yaml", tmp_dir);
        FILE *fp = fopen(path, "wb");
        assert_non_null(fp);
        assert_int_equal(fwrite(text, 1, n, fp), n);
        assert_int_equal(fclose(fp), 0);
        fsmoe_error err = {0};
        fsmoe_model m;
        double t0 = now_s();
        fsmoe_status st = fsmoe_model_load(path, &m, &err);
        double dt = now_s() - t0;
        if (dt > limit_s) { /* timed again: a stall of the machine is not the reader's */
            fsmoe_error again = {0};
            t0 = now_s();
            (void)fsmoe_model_load(path, &m, &again);
            double dt2 = now_s() - t0;
            dt = dt2 < dt ? dt2 : dt;
        }
        char expect[600];
        snprintf(expect, sizeof expect, "%s%s", path, rows[c].fragment);
        unlink(path);
        if (st != rows[c].status || strncmp(err.msg, expect, strlen(expect)) != 0) {
            free(text);
            fail_msg("%s: status %d (want %d)\n  got:  %.300s\n  want: %s", rows[c].what, (int)st,
                     (int)rows[c].status, err.msg, expect);
        }
        if (dt > limit_s) {
            free(text);
            fail_msg("%s: refused after %.2f s (expected within %.1f s)", rows[c].what, dt,
                     limit_s);
        }
    }
    free(text);
}

static void test_missing_file(void **state)
{
    (void)state;
    fsmoe_error err = {0};
    fsmoe_model m;
    char path[320];
    snprintf(path, sizeof path, "%s/does-not-exist.yaml", tmp_dir);
    assert_int_equal(fsmoe_model_load(path, &m, &err), FSMOE_ERR_IO);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "cannot open"));
    assert_int_equal(fsmoe_exit_code(FSMOE_ERR_IO), 1);
    fsmoe_cluster c;
    assert_int_equal(fsmoe_cluster_load(path, &c, &err), FSMOE_ERR_IO);
    fsmoe_cluster_free(&c);
}

/* The model's `dispatch` (model.h): the values the schema accepts, stored as written, with the
 * field's position kept for the planner's messages (1dh is the schema's; fsmoe-plan refuses
 * it, tests/test_plan_model.c). */
static void test_dispatch_values(void **state)
{
    (void)state;
    static const struct {
        const char *line;  /* "" = no dispatch key */
        fsmoe_status status;
        const char *stored;
    } rows[] = {
        {"", FSMOE_OK, "nccl"},
        {"  dispatch: nccl\n", FSMOE_OK, "nccl"},
        {"  dispatch: 2dh\n", FSMOE_OK, "2dh"},
        {"  dispatch: auto\n", FSMOE_OK, "auto"},
        {"  dispatch: 1dh\n", FSMOE_OK, "1dh"},
        {"  dispatch: AUTO\n", FSMOE_ERR_SCHEMA, NULL},
        {"  dispatch: [auto]\n", FSMOE_ERR_SCHEMA, NULL},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char repl[64], text[2048];
        snprintf(repl, sizeof repl, "  expert: gpt\n%s", rows[i].line);
        bad_row r = {MODEL, "  expert: gpt\n", repl, FSMOE_OK, ""};
        build_text(&r, text, sizeof text);
        fsmoe_model m;
        fsmoe_error err = {0};
        fsmoe_status st = fsmoe_model_load(write_tmp(text), &m, &err);
        if (st != rows[i].status)
            fail_msg("row %zu: status %d (want %d): %s", i, (int)st, (int)rows[i].status,
                     err.msg);
        if (st != FSMOE_OK) {
            assert_non_null(strstr(err.msg, "in.yaml:13:13: moe.dispatch"));
            continue;
        }
        assert_string_equal(m.dispatch, rows[i].stored);
        if (rows[i].line[0])
            assert_non_null(strstr(m.at.dispatch.where, "in.yaml:13:13: moe.dispatch"));
        else
            assert_string_equal(m.at.dispatch.where, "");
    }
}

/* The base texts themselves are valid, so every failure above is caused by its edit. */
static void test_base_texts_valid(void **state)
{
    (void)state;
    fsmoe_error err = {0};
    fsmoe_model m;
    assert_int_equal(fsmoe_model_load(write_tmp(base_model), &m, &err), FSMOE_OK);
    assert_int_equal(m.E, 4);
    assert_int_equal(m.kv_heads, 4);
    assert_non_null(strstr(m.at.experts.where, "in.yaml:10:12: moe.experts"));
    assert_non_null(strstr(m.at.top_k.where, "in.yaml:11:10: moe.top_k"));
    assert_non_null(strstr(m.at.capacity_factor.where, "in.yaml:13:20: moe.capacity_factor"));
    assert_int_equal(m.moe_every, 1);
    assert_string_equal(m.gate, "gshard");
    assert_string_equal(m.order, "tutel");
    assert_string_equal(m.dispatch, "nccl");
    fsmoe_cluster c;
    assert_int_equal(fsmoe_cluster_load(write_tmp(base_cluster), &c, &err), FSMOE_OK);
    assert_true(c.ops[FSMOE_OP_GEMM][FSMOE_TIER_LOCAL].present);
    assert_int_equal(c.ops[FSMOE_OP_GEMM][FSMOE_TIER_LOCAL].ranks, 1);
    assert_int_equal(c.ops[FSMOE_OP_ALLTOALL][FSMOE_TIER_INTER].line, 7);
    /* marks for checks made after loading name the field's position */
    assert_non_null(strstr(c.at.nodes.where, "in.yaml:4:8: nodes"));
    assert_non_null(strstr(c.at.gpus_per_node.where, "in.yaml:5:16: gpus_per_node"));
    assert_false(c.ops[FSMOE_OP_ALLTOALL][FSMOE_TIER_INTER].low_r2);
    assert_false(c.ops[FSMOE_OP_GEMM][FSMOE_TIER_LOCAL].low_r2); /* 0.99 is not below 0.99 */
    fsmoe_cluster_free(&c);
    char text[2048];
    snprintf(text, sizeof text, "%s", base_cluster);
    char *r2 = strstr(text, "r2: 0.999");
    memcpy(r2, "r2: 0.950", 9);
    assert_int_equal(fsmoe_cluster_load(write_tmp(text), &c, &err), FSMOE_OK);
    assert_true(c.ops[FSMOE_OP_ALLTOALL][FSMOE_TIER_INTER].low_r2);
    fsmoe_cluster_free(&c);
    /* capacity none and experts: ep */
    snprintf(text, sizeof text, "%s", base_model);
    char *cf = strstr(text, "1.2\n");
    memcpy(cf, "~  \n", 4);
    assert_int_equal(fsmoe_model_load(write_tmp(text), &m, &err), FSMOE_OK);
    assert_true(m.f == 0.0);
}

static char *repo_path(char *buf, size_t len, const char *rel)
{
    const char *root = getenv("FSMOE_SOURCE_ROOT");
    snprintf(buf, len, "%s/%s", root ? root : ".", rel);
    return buf;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static void test_shipped_files_load(void **state)
{
    (void)state;
    const char *dirs[] = {"models", "clusters"};
    int loaded[2] = {0, 0};
    for (int d = 0; d < 2; d++) {
        char dir[512];
        repo_path(dir, sizeof dir, dirs[d]);
        DIR *dp = opendir(dir);
        assert_non_null(dp);
        struct dirent *de;
        while ((de = readdir(dp))) {
            if (!ends_with(de->d_name, ".yaml"))
                continue;
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            fsmoe_error err = {0};
            fsmoe_status st;
            if (d == 0) {
                fsmoe_model m;
                st = fsmoe_model_load(path, &m, &err);
            } else {
                fsmoe_cluster c;
                st = fsmoe_cluster_load(path, &c, &err);
                fsmoe_cluster_free(&c);
            }
            if (st)
                fail_msg("%s: %s", path, err.msg);
            loaded[d]++;
        }
        closedir(dp);
    }
    assert_true(loaded[0] >= 6);
    assert_true(loaded[1] >= 4);
}

static void load_model(const char *name, fsmoe_model *m)
{
    char rel[128], path[1024];
    fsmoe_error err = {0};
    snprintf(rel, sizeof rel, "models/%s.yaml", name);
    if (fsmoe_model_load(repo_path(path, sizeof path, rel), m, &err))
        fail_msg("%s", err.msg);
}

static void load_cluster(const char *name, fsmoe_cluster *c)
{
    char rel[128], path[1024];
    fsmoe_error err = {0};
    snprintf(rel, sizeof rel, "clusters/%s.yaml", name);
    if (fsmoe_cluster_load(repo_path(path, sizeof path, rel), c, &err))
        fail_msg("%s", err.msg);
}

static void assert_rel(double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol * fabs(want)))
        fail_msg("got %.10g, want %.10g (rel tol %g)", got, want, tol);
}

/* design.md §11 table. */
static void test_models_match_design(void **state)
{
    (void)state;
    fsmoe_model m;
    load_model("mixtral-8x7b", &m);
    assert_int_equal(m.M, 4096);
    assert_int_equal(m.H, 14336);
    assert_int_equal(m.heads, 32);
    assert_int_equal(m.kv_heads, 8);
    assert_int_equal(m.layers, 32);
    assert_int_equal(m.E, 8);
    assert_int_equal(m.k, 2);
    assert_int_equal(m.expert, FSMOE_EXPERT_SWIGLU);
    assert_int_equal(fsmoe_expert_gemms(m.expert), 3);
    assert_int_equal(m.bytes_per_element, 2);
    assert_int_equal(fsmoe_model_moe_count(&m), 32);
    load_model("mixtral-8x22b", &m);
    assert_int_equal(m.M, 6144);
    assert_int_equal(m.H, 16384);
    assert_int_equal(m.layers, 56);
    assert_int_equal(m.vocab, 32768);
    assert_int_equal(m.B, 2);
    load_model("gpt2-xl-moe", &m);
    assert_int_equal(m.M, 1600);
    assert_int_equal(m.H, 6400);
    assert_int_equal(m.heads, 25);
    assert_int_equal(m.layers, 48);
    assert_true(m.experts_is_ep);
    assert_int_equal(m.vocab, 50257);
    assert_true(m.f == 1.2);
    assert_int_equal(fsmoe_expert_gemms(m.expert), 2);
    /* every other block: 24 of 48, block 0 dense, block 1 MoE */
    assert_int_equal(fsmoe_model_moe_count(&m), 24);
    assert_false(fsmoe_model_is_moe_block(&m, 0));
    assert_true(fsmoe_model_is_moe_block(&m, 1));
    assert_true(fsmoe_model_is_moe_block(&m, 47));
    /* resolving on Testbed B's common layout gives E = ep = 8 */
    fsmoe_parallel p = fsmoe_parallel_common(8, 4);
    fsmoe_error err = {0};
    assert_int_equal(fsmoe_model_resolve(&m, &p, "test", &err), FSMOE_OK);
    assert_int_equal(m.E, 8);
    load_model("bert-base-moe", &m);
    assert_int_equal(m.M, 768);
    assert_int_equal(m.E, 8);
    assert_int_equal(m.bytes_per_element, 4);
    assert_int_equal(fsmoe_model_moe_count(&m), 6);
    load_model("llama-2x70b-moe", &m);
    assert_true(m.has_parallel);
    assert_int_equal(m.parallel.world, 16);
    assert_int_equal(m.parallel.mp, 8);
    assert_int_equal(m.parallel.ep, 2);
    assert_int_equal(m.L, 8192);
    assert_int_equal(m.E, 2);
    /* mixtral (E = 8) on Testbed A's common layout: ep = 6 does not divide 8 */
    load_model("mixtral-8x7b", &m);
    p = fsmoe_parallel_common(6, 8);
    assert_int_equal(fsmoe_model_resolve(&m, &p, "command line", &err), FSMOE_ERR_VALUE);
    /* A check that combines the model with a layout from elsewhere names the model's field at
     * file:line:col, and where the layout came from. */
    char want[1200], mpath[1024];
    repo_path(mpath, sizeof mpath, "models/mixtral-8x7b.yaml");
    snprintf(want, sizeof want,
             "%s:13:12: moe.experts: 8 is not divisible by ep=6 of the layout at command line "
             "(each EP rank needs E/ep experts)",
             mpath);
    assert_string_equal(err.msg, want);
    /* top_k against `experts: ep` with ep = 1 of a cluster's common layout */
    load_model("gpt2-xl-moe", &m);
    assert_true(m.experts_is_ep);
    p = fsmoe_parallel_common(1, 8);
    assert_int_equal(fsmoe_model_resolve(&m, &p, "clusters/x.yaml: common layout", &err),
                     FSMOE_ERR_VALUE);
    repo_path(mpath, sizeof mpath, "models/gpt2-xl-moe.yaml");
    snprintf(want, sizeof want, "%s:", mpath);
    assert_int_equal(strncmp(err.msg, want, strlen(want)), 0);
    assert_non_null(strstr(err.msg, ": moe.top_k: top_k=2 exceeds experts=1, one per EP rank of "
                                    "the layout at clusters/x.yaml: common layout"));
    load_model("tiny-moe", &m);
    assert_int_equal(m.M, 64);
    assert_int_equal(m.H, 256);
    assert_int_equal(m.E, 4);
    assert_int_equal(m.vocab, 256);
}

/* FSMoE Fig. 5 numbers (ms per float) converted as design.md §3 says. */
static void test_testbeds_match_paper(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int nodes, G;
        double v[5][2]; /* gemm, a2a, ag, rs, ar: alpha_ms, beta_ms */
    } tb[] = {
        {"testbed-a", 6, 8,
         {{4.26e-2, 2.29e-11}, {2.87e-1, 2.21e-7}, {3.37e-1, 2.32e-7}, {3.95e-1, 2.34e-7},
          {5.11e-1, 4.95e-6}}}, /* AllGather beta: Fig. 5 prints 2.32e-6, see below */
        {"testbed-b", 8, 4,
         {{9.24e-2, 4.42e-11}, {1.75e-1, 3.06e-7}, {3.20e-2, 1.68e-7}, {3.91e-2, 1.67e-7},
          {8.37e-2, 5.99e-7}}},
    };
    const fsmoe_op ops[5] = {FSMOE_OP_GEMM, FSMOE_OP_ALLTOALL, FSMOE_OP_ALLGATHER,
                             FSMOE_OP_REDUCESCATTER, FSMOE_OP_ALLREDUCE};
    const fsmoe_tier tiers[5] = {FSMOE_TIER_LOCAL, FSMOE_TIER_INTER, FSMOE_TIER_INTRA,
                                 FSMOE_TIER_INTRA, FSMOE_TIER_INTER};
    for (int t = 0; t < 2; t++) {
        fsmoe_cluster c;
        load_cluster(tb[t].name, &c);
        assert_int_equal(c.nodes, tb[t].nodes);
        assert_int_equal(c.gpus_per_node, tb[t].G);
        for (int i = 0; i < 5; i++) {
            const fsmoe_cost_entry *e = &c.ops[ops[i]][tiers[i]];
            assert_true(e->present);
            assert_rel(e->alpha_s, tb[t].v[i][0] / 1e3, 1e-6);
            assert_rel(e->beta_s, tb[t].v[i][1] / (ops[i] == FSMOE_OP_GEMM ? 1e3 : 4e3), 1e-6);
            assert_true(e->r2 >= 0.9987);
            assert_false(e->low_r2);
            assert_string_equal(e->derived, "");
        }
        /* FSMoE Table 2 measures AllGather and ReduceScatter of the same layer (same bytes) on
         * both testbeds: GPT2-XL and Mixtral-7B, forward. The profile must reproduce their
         * ratio: the bytes that give the measured ReduceScatter time must give the measured
         * AllGather time within 25 %. (With Fig. 5's printed 2.32e-6 for Testbed A's AllGather
         * the predicted AllGather is ~10x the measured one: a misprint.) */
        static const double table2_ms[2][2][2] = {{{4.6, 5.4}, {12.3, 13.7}},
                                                  {{15.5, 15.7}, {39.6, 40.8}}};
        const fsmoe_cost_entry *ag = &c.ops[FSMOE_OP_ALLGATHER][FSMOE_TIER_INTRA];
        const fsmoe_cost_entry *rs = &c.ops[FSMOE_OP_REDUCESCATTER][FSMOE_TIER_INTRA];
        for (int m = 0; m < 2; m++) {
            double bytes = (table2_ms[t][m][1] / 1e3 - rs->alpha_s) / rs->beta_s;
            double ag_ms = 1e3 * (ag->alpha_s + ag->beta_s * bytes);
            if (!(fabs(ag_ms / table2_ms[t][m][0] - 1) <= 0.25))
                fail_msg("%s: Table 2 model %d: AllGather predicted %.2f ms for the bytes of the "
                         "measured ReduceScatter, measured %.2f ms", tb[t].name, m, ag_ms,
                         table2_ms[t][m][0]);
        }
        assert_int_equal(c.ops[FSMOE_OP_ALLTOALL][FSMOE_TIER_INTER].ranks, tb[t].nodes);
        assert_int_equal(c.ops[FSMOE_OP_ALLGATHER][FSMOE_TIER_INTRA].ranks, tb[t].G);
        /* the copy line is a datasheet derivation and says so */
        assert_true(c.ops[FSMOE_OP_COPY][FSMOE_TIER_LOCAL].present);
        assert_true(c.ops[FSMOE_OP_COPY][FSMOE_TIER_LOCAL].derived[0] != '\0');
        fsmoe_cluster_free(&c);
    }
    fsmoe_cluster c;
    load_cluster("testbed-b", &c);
    assert_rel(c.ops[FSMOE_OP_ALLTOALL][FSMOE_TIER_INTER].alpha_s, 1.75e-4, 1e-12);
    assert_rel(c.ops[FSMOE_OP_ALLTOALL][FSMOE_TIER_INTER].beta_s, 3.06e-7 / 4e3, 1e-12);
    fsmoe_cluster_free(&c);
}

/* Parm §VI-B: α = 6.64e-4 s, β = 5.38e-10 s per fp32 element; everything else derived. */
static void test_parm_server(void **state)
{
    (void)state;
    fsmoe_cluster c;
    load_cluster("parm-server", &c);
    assert_int_equal(c.nodes, 1);
    assert_int_equal(c.gpus_per_node, 8);
    const fsmoe_cost_entry *ag = &c.ops[FSMOE_OP_ALLGATHER][FSMOE_TIER_INTRA];
    assert_rel(ag->alpha_s, 6.64e-4, 1e-12);
    assert_rel(ag->beta_s, 5.38e-10 / 4, 1e-12);
    assert_string_equal(ag->derived, "");
    int derived = 0;
    for (int o = 0; o < FSMOE_OP_COUNT; o++)
        for (int t = 0; t < FSMOE_TIER_COUNT; t++) {
            const fsmoe_cost_entry *e = &c.ops[o][t];
            if (e->present && e != ag) {
                assert_true(e->derived[0] != '\0');
                derived++;
            }
        }
    assert_true(derived >= 4);
    assert_rel(c.ops[FSMOE_OP_GEMM][FSMOE_TIER_LOCAL].beta_s, 2.0 / (0.5 * 165e12), 1e-6);
    fsmoe_cluster_free(&c);
}

/* MoNTA Table 8 through the stored points, and the stored line = least squares of the points. */
static void test_monta_points(void **state)
{
    (void)state;
    fsmoe_cluster c;
    load_cluster("monta-a800", &c);
    const double MB = 1e6;
    const fsmoe_cost_entry *a2a = &c.ops[FSMOE_OP_ALLTOALL][FSMOE_TIER_INTER];
    const fsmoe_cost_entry *ag = &c.ops[FSMOE_OP_ALLGATHER][FSMOE_TIER_INTRA];
    const fsmoe_cost_entry *cp = &c.ops[FSMOE_OP_COPY][FSMOE_TIER_LOCAL];
    /* Table 8 (ms, truncated by the paper): compare within 0.5 % */
    assert_rel(fsmoe_entry_time_interp(a2a, 8 * MB), 0.374e-3, 5e-3);
    assert_rel(fsmoe_entry_time_interp(a2a, 32 * MB), 1.012e-3, 5e-3);
    assert_rel(fsmoe_entry_time_interp(a2a, 256 * MB), 6.909e-3, 5e-3);
    assert_rel(fsmoe_entry_time_interp(ag, 64 * MB), 0.385e-3, 5e-3);
    assert_rel(fsmoe_entry_time_interp(ag, 256 * MB), 1.443e-3, 5e-3);
    assert_rel(fsmoe_entry_time_interp(cp, 64 * MB), 0.05e-3, 5e-3);
    /* efficiency form: t = n (e-1)/e / (B1 r1) with B1 = 25 GB/s, e = 2, r1(32 MB) = 0.632 */
    assert_rel(fsmoe_entry_time_interp(a2a, 32 * MB), 32 * MB * 0.5 / (25e9 * 0.632), 1e-8);
    const fsmoe_cost_entry *fits[] = {a2a, ag, cp};
    for (int f = 0; f < 3; f++) {
        const fsmoe_cost_entry *e = fits[f];
        double sx = 0, sy = 0, sxx = 0, sxy = 0, k = e->n_points;
        for (int i = 0; i < e->n_points; i++) {
            sx += e->points[i].n;
            sy += e->points[i].seconds;
            sxx += e->points[i].n * e->points[i].n;
            sxy += e->points[i].n * e->points[i].seconds;
        }
        double beta = (k * sxy - sx * sy) / (k * sxx - sx * sx);
        double alpha = (sy - beta * sx) / k;
        assert_rel(e->beta_s, beta, 1e-6);
        assert_true(fabs(e->alpha_s - alpha) <= 1e-6 * fabs(alpha) + 1e-12);
    }
    fsmoe_cluster_free(&c);
}

/* The writer against the reader: every shipped profile, loaded, written and loaded again, gives
 * the same entries (lines to the 6 digits written, r2 to 9, points exactly as sizes and to 6
 * digits as times). */
static void test_cluster_write_round_trip(void **state)
{
    (void)state;
    const char *names[] = {"testbed-a", "testbed-b", "parm-server", "monta-a800"};
    char path[] = "/tmp/fsmoe-test-cluster-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        fsmoe_cluster a, b;
        fsmoe_error err = {0};
        load_cluster(names[k], &a);
        if (k == 1) { /* one profile with the interference factors */
            a.interference.present = 1;
            a.interference.comm_slowdown = 2.25;
            a.interference.compute_slowdown = 1.125;
            a.interference.sync_s = 0.00275;
            a.interference.sync_growth = 0.0625, a.interference.sync_growth_from_s = 0.0041;
            snprintf(a.interference.measured, sizeof a.interference.measured, "by hand");
            a.device_memory_bytes = 85899345920.0;
            a.compute_threads = 3;
            a.host.present = 1; /* and host sharing */
            a.host.ranks = 4, a.host.cores = 2, a.host.ranks_at_once = 3;
        }
        fsmoe_cluster_write_extra x = {.notes = "round trip"};
        x.comment[FSMOE_OP_COPY][FSMOE_TIER_INTER] = "a comment in place of an absent entry";
        assert_int_equal(fsmoe_cluster_write(path, &a, &x, &err), FSMOE_OK);
        if (fsmoe_cluster_load(path, &b, &err) != FSMOE_OK)
            fail_msg("%s written, then: %s", names[k], err.msg);
        assert_string_equal(a.name, b.name);
        assert_string_equal(a.device, b.device);
        assert_int_equal(a.nodes, b.nodes);
        assert_int_equal(a.gpus_per_node, b.gpus_per_node);
        assert_rel(b.r2_threshold, a.r2_threshold, 1e-12);
        assert_true(b.device_memory_bytes == a.device_memory_bytes);
        assert_int_equal(b.compute_threads, a.compute_threads);
        assert_int_equal(b.interference.present, k == 1);
        if (k == 1) {
            assert_rel(b.interference.comm_slowdown, 2.25, 1e-12);
            assert_rel(b.interference.compute_slowdown, 1.125, 1e-12);
            assert_rel(b.interference.sync_s, 0.00275, 1e-12);
            assert_rel(b.interference.sync_growth, 0.0625, 1e-12);
            assert_rel(b.interference.sync_growth_from_s, 0.0041, 1e-12);
            assert_string_equal(b.interference.measured, "by hand");
        }
        assert_int_equal(b.host.present, k == 1);
        if (k == 1)
            assert_true(b.host.ranks == 4 && b.host.cores == 2 && b.host.ranks_at_once == 3);
        for (int op = 0; op < FSMOE_OP_COUNT; op++)
            for (int t = 0; t < FSMOE_TIER_COUNT; t++) {
                const fsmoe_cost_entry *ea = &a.ops[op][t], *eb = &b.ops[op][t];
                int written = ea->present && !ea->derived[0];
                assert_int_equal(written, eb->present);
                if (!written)
                    continue;
                assert_true(fabs(eb->alpha_s - ea->alpha_s) <= 1e-5 * fabs(ea->alpha_s));
                assert_true(fabs(eb->beta_s - ea->beta_s) <= 1e-5 * fabs(ea->beta_s));
                assert_true(fabs(eb->r2 - ea->r2) <= 1e-8);
                assert_int_equal(ea->low_r2, eb->low_r2);
                assert_int_equal(t == FSMOE_TIER_LOCAL ? 1 : ea->ranks, eb->ranks);
                assert_int_equal(ea->n_points < 2 ? 0 : ea->n_points, eb->n_points);
                for (int i = 0; i < eb->n_points; i++) {
                    assert_true(eb->points[i].n == ea->points[i].n);
                    assert_rel(eb->points[i].seconds, ea->points[i].seconds, 1e-5);
                }
            }
        fsmoe_cluster_free(&a);
        fsmoe_cluster_free(&b);
    }
    unlink(path);
}

/* Brute force: enumerate every rank's groups from the layout's definition (parallel.h) and
 * classify by how many members each node holds. */
static fsmoe_tier brute_tier(const fsmoe_parallel *p, fsmoe_group g, int *consistent)
{
    int P = p->world, G = p->gpus_per_node, nodes = P / G;
    int result = -1;
    *consistent = 1;
    for (int r0 = 0; r0 < P; r0++) {
        int per_node[64] = {0}, members = 0;
        for (int r = 0; r < P; r++) {
            int same;
            switch (g) {
            case FSMOE_GROUP_ESP: same = r / p->esp == r0 / p->esp; break;
            case FSMOE_GROUP_EP:
                same = r % p->esp == r0 % p->esp &&
                       r / (p->esp * p->ep) == r0 / (p->esp * p->ep);
                break;
            case FSMOE_GROUP_EP_ESP:
                same = r / (p->esp * p->ep) == r0 / (p->esp * p->ep);
                break;
            case FSMOE_GROUP_MP: same = r / p->mp == r0 / p->mp; break;
            case FSMOE_GROUP_EDP:
                same = r % (p->esp * p->ep) == r0 % (p->esp * p->ep) &&
                       r / (p->mp * p->dp) == r0 / (p->mp * p->dp);
                break;
            default:
                same = r % p->mp == r0 % p->mp && r / (p->mp * p->dp) == r0 / (p->mp * p->dp);
                break;
            }
            if (same) {
                per_node[r / G]++;
                members++;
            }
        }
        int touched = 0, most = 0;
        for (int nd = 0; nd < nodes; nd++) {
            touched += per_node[nd] > 0;
            most = per_node[nd] > most ? per_node[nd] : most;
        }
        int t = touched == 1 ? FSMOE_TIER_INTRA : most == 1 ? FSMOE_TIER_INTER : FSMOE_TIER_WORLD;
        if (members <= 1)
            t = FSMOE_TIER_INTRA;
        if (result >= 0 && t != result)
            *consistent = 0;
        result = t;
    }
    return (fsmoe_tier)result;
}

static void test_tiers_brute_force(void **state)
{
    (void)state;
    int checked = 0;
    for (int P = 1; P <= 32; P++)
        for (int G = 1; G <= P; G++) {
            if (P % G)
                continue;
            for (int mp = 1; mp <= P; mp++)
                for (int esp = 1; esp <= P; esp++)
                    for (int ep = 1; ep <= P; ep++) {
                        if (P % mp || P % (esp * ep))
                            continue;
                        fsmoe_parallel p = {P, G, P / mp, mp, ep, esp, 1};
                        if (fsmoe_parallel_validate(&p, 0, "t", NULL) != FSMOE_OK)
                            continue;
                        for (int g = 0; g < FSMOE_GROUP_COUNT; g++) {
                            if (fsmoe_group_size(&p, (fsmoe_group)g) <= 1)
                                continue;
                            int consistent;
                            fsmoe_tier want = brute_tier(&p, (fsmoe_group)g, &consistent);
                            if (!consistent) fail_msg("inconsistent P=%d G=%d mp=%d esp=%d ep=%d group %d", P, G, mp, esp, ep, g);
                            if (fsmoe_group_tier(&p, (fsmoe_group)g) != want)
                                fail_msg("P=%d G=%d mp=%d esp=%d ep=%d group %s: got %s want %s",
                                         P, G, mp, esp, ep, fsmoe_group_name((fsmoe_group)g),
                                         fsmoe_tier_name(fsmoe_group_tier(&p, (fsmoe_group)g)),
                                         fsmoe_tier_name(want));
                            checked++;
                        }
                    }
        }
    assert_true(checked > 1000);
}

static void test_tiers_common_layout(void **state)
{
    (void)state;
    fsmoe_parallel p = fsmoe_parallel_common(8, 4); /* Testbed B */
    assert_int_equal(p.world, 32);
    assert_int_equal(fsmoe_parallel_validate(&p, 8, "t", NULL), FSMOE_OK);
    assert_int_equal(fsmoe_group_tier(&p, FSMOE_GROUP_ESP), FSMOE_TIER_INTRA);
    assert_int_equal(fsmoe_group_tier(&p, FSMOE_GROUP_MP), FSMOE_TIER_INTRA);
    assert_int_equal(fsmoe_group_tier(&p, FSMOE_GROUP_EP), FSMOE_TIER_INTER);
    assert_int_equal(fsmoe_group_tier(&p, FSMOE_GROUP_EP_ESP), FSMOE_TIER_WORLD);
    assert_int_equal(fsmoe_group_tier(&p, FSMOE_GROUP_DP), FSMOE_TIER_INTER);
    assert_int_equal(fsmoe_group_size(&p, FSMOE_GROUP_EP_ESP), 32);
    p = fsmoe_parallel_common(1, 8); /* Parm's server */
    for (int g = 0; g < FSMOE_GROUP_COUNT; g++)
        assert_int_equal(fsmoe_group_tier(&p, (fsmoe_group)g), FSMOE_TIER_INTRA);
    assert_string_equal(fsmoe_tier_name(FSMOE_TIER_WORLD), "world");
    assert_int_equal(fsmoe_tier_from_name("local"), FSMOE_TIER_LOCAL);
    assert_int_equal(fsmoe_tier_from_name("nope"), -1);
    assert_string_equal(fsmoe_group_name(FSMOE_GROUP_EP_ESP), "ep_esp");
    assert_int_equal(fsmoe_op_from_name("saa"), FSMOE_OP_SAA);
    assert_int_equal(fsmoe_op_from_name("bcast"), -1);
}

static void set_entry(fsmoe_cluster *c, fsmoe_op op, fsmoe_tier t, double a, double b)
{
    fsmoe_cost_entry *e = &c->ops[op][t];
    memset(e, 0, sizeof *e);
    e->present = 1;
    e->alpha_s = a;
    e->beta_s = b;
    e->r2 = 1.0;
    e->ranks = 2;
}

static void test_cost_derivations(void **state)
{
    (void)state;
    fsmoe_cluster c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "mem");
    set_entry(&c, FSMOE_OP_ALLTOALL, FSMOE_TIER_INTER, 1e-4, 1e-10);
    set_entry(&c, FSMOE_OP_ALLGATHER, FSMOE_TIER_INTRA, 2e-5, 3e-11);
    set_entry(&c, FSMOE_OP_REDUCESCATTER, FSMOE_TIER_INTRA, 3e-5, 4e-11);
    set_entry(&c, FSMOE_OP_GEMM, FSMOE_TIER_LOCAL, 1e-5, 1e-14);
    fsmoe_line l;
    fsmoe_error err = {0};
    char note[1024] = "";
    /* measured entry: returned as is, no note */
    assert_int_equal(fsmoe_cost_line(&c, "mem.yaml", FSMOE_OP_ALLTOALL, FSMOE_TIER_INTER, &l, note,
                                     sizeof note, &err),
                     FSMOE_OK);
    assert_ptr_equal(l.entry, &c.ops[FSMOE_OP_ALLTOALL][FSMOE_TIER_INTER]);
    assert_string_equal(note, "");
    assert_rel(fsmoe_line_time(&l, 1e6), 1e-4 + 1e-10 * 1e6, 1e-12);
    assert_true(fsmoe_line_time(&l, 0) == 0.0);
    /* world -> inter */
    assert_int_equal(fsmoe_cost_line(&c, "mem.yaml", FSMOE_OP_ALLTOALL, FSMOE_TIER_WORLD, &l, note,
                                     sizeof note, &err),
                     FSMOE_OK);
    assert_true(l.alpha_s == 1e-4 && l.beta_s == 1e-10);
    assert_non_null(strstr(note, "inter tier"));
    /* allreduce intra -> rs + ag */
    note[0] = '\0';
    assert_int_equal(fsmoe_cost_line(&c, "mem.yaml", FSMOE_OP_ALLREDUCE, FSMOE_TIER_INTRA, &l,
                                     note, sizeof note, &err),
                     FSMOE_OK);
    assert_rel(l.alpha_s, 5e-5, 1e-12);
    assert_rel(l.beta_s, 7e-11, 1e-12);
    assert_null(l.entry);
    assert_non_null(strstr(note, "reducescatter + allgather"));
    /* saa world -> a2a(world -> inter) + ag(intra) */
    note[0] = '\0';
    assert_int_equal(fsmoe_cost_line(&c, "mem.yaml", FSMOE_OP_SAA, FSMOE_TIER_WORLD, &l, note,
                                     sizeof note, &err),
                     FSMOE_OK);
    assert_rel(l.alpha_s, 1e-4 + 2e-5, 1e-12);
    assert_rel(l.beta_s, 1e-10 + 3e-11, 1e-12);
    assert_non_null(strstr(note, "saa world"));
    assert_non_null(strstr(note, "inter tier"));
    /* the note lists each derivation once, one per line, however often it was used */
    {
        char again[1024];
        snprintf(again, sizeof again, "%s", note);
        assert_int_equal(fsmoe_cost_line(&c, "mem.yaml", FSMOE_OP_SAA, FSMOE_TIER_WORLD, &l,
                                         note, sizeof note, &err),
                         FSMOE_OK);
        assert_string_equal(note, again);
        assert_null(strstr(note, "; "));
        assert_non_null(strchr(note, '\n'));
    }
    /* a measured saa wins over the derivation */
    set_entry(&c, FSMOE_OP_SAA, FSMOE_TIER_WORLD, 9e-5, 9e-11);
    note[0] = '\0';
    assert_int_equal(fsmoe_cost_line(&c, "mem.yaml", FSMOE_OP_SAA, FSMOE_TIER_WORLD, &l, note,
                                     sizeof note, &err),
                     FSMOE_OK);
    assert_true(l.alpha_s == 9e-5);
    assert_string_equal(note, "");
    /* allreduce inter: no rs/ag inter either -> error naming profile, op and tier */
    assert_int_equal(fsmoe_cost_line(&c, "mem.yaml", FSMOE_OP_ALLREDUCE, FSMOE_TIER_INTER, &l,
                                     NULL, 0, &err),
                     FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "mem.yaml: no allreduce entry for tier inter"));
    /* gemm is local only */
    assert_int_equal(fsmoe_cost_line(&c, "mem.yaml", FSMOE_OP_COPY, FSMOE_TIER_LOCAL, &l, NULL, 0,
                                     &err),
                     FSMOE_ERR_VALUE);
    assert_non_null(strstr(err.msg, "no copy entry for tier local"));
    /* read from a file, the missing entry is named at the profile's `ops` list */
    {
        static const char prof[] = "fsmoe_cluster: 1\nname: one\nsource: test\nnodes: 1\n"
                                   "gpus_per_node: 1\nops:\n  - op: gemm\n    tier: local\n"
                                   "    ranks: 1\n    alpha_s: 1e-5\n    beta_s_per_mac: 1e-12\n"
                                   "    r2: 1\n";
        fsmoe_cluster one;
        fsmoe_status pst = fsmoe_cluster_parse("one.yaml", prof, sizeof prof - 1, &one, &err);
        if (pst != FSMOE_OK)
            fail_msg("%s", err.msg);
        assert_int_equal(fsmoe_cost_line(&one, "one.yaml", FSMOE_OP_COPY, FSMOE_TIER_LOCAL, &l,
                                         NULL, 0, &err),
                         FSMOE_ERR_VALUE);
        assert_non_null(strstr(err.msg, "one.yaml:7:3: ops: no copy entry for tier local"));
        fsmoe_cluster_free(&one);
    }
    fsmoe_line z = fsmoe_line_zero();
    assert_true(fsmoe_line_time(&z, 1e9) == 0.0);

    /* the shipped Testbed B: allreduce inter is measured, allreduce intra derived */
    fsmoe_cluster tb;
    load_cluster("testbed-b", &tb);
    assert_int_equal(fsmoe_cost_line(&tb, "testbed-b", FSMOE_OP_ALLREDUCE, FSMOE_TIER_INTER, &l,
                                     NULL, 0, &err),
                     FSMOE_OK);
    assert_rel(l.beta_s, 5.99e-7 / 4e3, 1e-9);
    assert_int_equal(fsmoe_cost_line(&tb, "testbed-b", FSMOE_OP_ALLREDUCE, FSMOE_TIER_INTRA, &l,
                                     NULL, 0, &err),
                     FSMOE_OK);
    assert_rel(l.alpha_s, (3.20e-2 + 3.91e-2) / 1e3, 1e-9);
    fsmoe_cluster_free(&tb);
}

static void test_interp(void **state)
{
    (void)state;
    fsmoe_point pts[3] = {{1e6, 1e-4}, {2e6, 3e-4}, {4e6, 4e-4}};
    fsmoe_cost_entry e;
    memset(&e, 0, sizeof e);
    e.present = 1;
    e.alpha_s = 5e-5;
    e.beta_s = 1e-10;
    e.points = pts;
    e.n_points = 3;
    for (int i = 0; i < 3; i++)
        assert_true(fsmoe_entry_time_interp(&e, pts[i].n) == pts[i].seconds);
    assert_rel(fsmoe_entry_time_interp(&e, 1.5e6), 2e-4, 1e-12);
    assert_rel(fsmoe_entry_time_interp(&e, 3e6), 3.5e-4, 1e-12);
    /* outside the measured range: the line */
    assert_rel(fsmoe_entry_time_interp(&e, 5e5), 5e-5 + 1e-10 * 5e5, 1e-12);
    assert_rel(fsmoe_entry_time_interp(&e, 8e6), 5e-5 + 1e-10 * 8e6, 1e-12);
    assert_true(fsmoe_entry_time_interp(&e, 0) == 0.0);
    e.n_points = 1; /* fewer than two points: the line */
    assert_rel(fsmoe_entry_time_interp(&e, 1e6), 5e-5 + 1e-4, 1e-12);
}

static void test_yaml_reader_api(void **state)
{
    (void)state;
    const char *t = "a: 3\nb: [x, 2.5]\nc: {d: true, e: none}\n";
    fsmoe_yaml y;
    fsmoe_error err = {0};
    fsmoe_ynode root, b, c, it;
    assert_int_equal(fsmoe_yaml_open_string(&y, "mem", t, strlen(t), &err), FSMOE_OK);
    assert_int_equal(fsmoe_yaml_root(&y, &root, &err), FSMOE_OK);
    long a = 0;
    assert_int_equal(fsmoe_yaml_long(&root, "a", FSMOE_REQUIRED, 1, 10, &a, &err), FSMOE_OK);
    assert_int_equal(a, 3);
    assert_int_equal(fsmoe_yaml_long(&root, "a", FSMOE_REQUIRED, 4, 10, &a, &err),
                     FSMOE_ERR_VALUE);
    assert_string_equal(err.msg, "mem:1:4: a: 3 is out of range (expected an integer in [4, 10])");
    long untouched = 42;
    assert_int_equal(fsmoe_yaml_long(&root, "zz", FSMOE_OPTIONAL, 0, 1, &untouched, &err),
                     FSMOE_OK);
    assert_int_equal(untouched, 42);
    assert_int_equal(fsmoe_yaml_sequence(&root, "b", FSMOE_REQUIRED, &b, &err), FSMOE_OK);
    assert_int_equal(fsmoe_yaml_seq_len(&b), 2);
    assert_int_equal(fsmoe_yaml_seq_item(&b, 1, &it, &err), FSMOE_OK);
    assert_string_equal(it.field, "b[1]");
    double d = 0;
    assert_int_equal(fsmoe_yaml_node_double(&it, 0, 10, &d, &err), FSMOE_OK);
    assert_true(d == 2.5);
    assert_int_equal(fsmoe_yaml_mapping(&root, "c", FSMOE_REQUIRED, &c, &err), FSMOE_OK);
    int flag = 0;
    assert_int_equal(fsmoe_yaml_bool(&c, "d", FSMOE_REQUIRED, &flag, &err), FSMOE_OK);
    assert_int_equal(flag, 1);
    fsmoe_ynode e;
    assert_int_equal(fsmoe_yaml_get(&c, "e", FSMOE_REQUIRED, &e, &err), FSMOE_OK);
    assert_true(fsmoe_yaml_is_none(&e));
    assert_string_equal(e.field, "c.e");
    assert_int_equal(fsmoe_yaml_map_len(&c), 2);
    const char *key;
    assert_int_equal(fsmoe_yaml_map_pair(&c, 1, &key, &e, &err), FSMOE_OK);
    assert_string_equal(key, "e");
    assert_int_equal(fsmoe_yaml_mapping(&root, "b", FSMOE_REQUIRED, &c, &err), FSMOE_ERR_SCHEMA);
    assert_string_equal(err.msg, "mem:2:4: b: expected a mapping (key: value lines), got a sequence");
    fsmoe_yaml_close(&y);
    fsmoe_yaml_close(&y); /* safe twice */
    assert_int_equal(fsmoe_edit_distance("top_k", "topk"), 1);
    assert_int_equal(fsmoe_edit_distance("", "abc"), 3);
    assert_int_equal(fsmoe_edit_distance("kitten", "sitting"), 3);
    assert_int_equal(fsmoe_edit_distance("fp23", "fp32"), 1);
    assert_int_equal(fsmoe_edit_distance("fp23", "fp16"), 2);
}

int main(void)
{
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/fsmoe-schema-XXXXXX");
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base_texts_valid),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_dispatch_values),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_reader_bounds),
        cmocka_unit_test(test_yaml_reader_api),
        cmocka_unit_test(test_shipped_files_load),
        cmocka_unit_test(test_models_match_design),
        cmocka_unit_test(test_testbeds_match_paper),
        cmocka_unit_test(test_parm_server),
        cmocka_unit_test(test_monta_points),
        cmocka_unit_test(test_cluster_write_round_trip),
        cmocka_unit_test(test_tiers_common_layout),
        cmocka_unit_test(test_tiers_brute_force),
        cmocka_unit_test(test_cost_derivations),
        cmocka_unit_test(test_interp),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    test_remove_tree(tmp_dir); /* in.yaml, big.yaml, ... */
    return rc;
}
