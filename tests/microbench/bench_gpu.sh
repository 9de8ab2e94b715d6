#!/usr/bin/env bash
# Implements: the `gpu` suite test of fsmoe-bench's NCCL backend: the backend unit check on one
# rank (exit 77 = skipped without a device or without the backend), then fsmoe-bench
# --backend nccl on every local GPU (up to 8 ranks) writing a profile, every result checked, on
# sizes 256 KiB to 64 MiB in factors of 2 (the sizes at which an upload racing the streams
# once showed on an H100).
# usage: bench_gpu.sh FSMOE_BENCH TEST_BENCH_GPU
set -u
bench=$1 unit=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$unit"
rc=$?
[ $rc -eq 0 ] || exit $rc
n=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "$n" -ge 1 ] || n=1
[ "$n" -le 8 ] || n=8
tmp=$(mktemp -d /tmp/fsmoe-bench-gpu.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
mpirun --oversubscribe -np "$n" "$bench" --backend nccl -b 256K -e 64M -f 2 -n 5 -w 2 \
    -o "$tmp/gpu.yaml" --json "$tmp/gpu.json" || exit 1
grep -q "fsmoe_cluster: 1" "$tmp/gpu.yaml" || exit 1
echo "nccl backend: profile written on $n GPU(s)"
