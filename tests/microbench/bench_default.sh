#!/usr/bin/env bash
# Implements: the default-suite benchmark: the default suite (FSMoE §6.2 sizes, every op on
# every tier, SAA, GEMM, copy) on the emulated 2 x 2 cluster, timed end to end; reports the
# fitted table and whether every fit reaches r² ≥ 0.99 and the whole run stays under 60 s.
# Exit 77 where namespaces cannot be made. FSMOE_EMU_RATE overrides the link rate.
# usage: bench_default.sh FSMOE_BENCH CHECK_PROFILE [OUTPUT.yaml]
set -u
bench=$1 check=$2
src=${FSMOE_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
out=${3:-}
emu="$src/scripts/emucluster.sh"
reason=$("$emu" --check 2>&1) || { echo "SKIP: $reason"; exit 77; }
tmp=$(mktemp -d /tmp/fsmoe-bench-default.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
[ -n "$out" ] || out="$tmp/emulated-2x2.yaml"
rate=${FSMOE_EMU_RATE:-8gbit}
start=$(date +%s.%N)
"$emu" --nodes 2 --ranks-per-node 2 --rate "$rate" -- "$bench" -o "$out" --plot "${out%.yaml}.svg" \
    > "$tmp/out.txt" 2>&1
rc=$?
end=$(date +%s.%N)
grep -E "^# (fsmoe-bench|Fitted|op |alltoall|allgather|reducescatter|allreduce|saa|gemm|copy|residuals|Out of|Measured)" "$tmp/out.txt"
[ $rc -eq 0 ] || { tail -20 "$tmp/out.txt"; echo "FAIL: exit $rc"; exit 1; }
secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
low=$(grep -c "LOW-R2" "$tmp/out.txt")
echo "default suite on the emulated 2x2 cluster (links $rate): ${secs} s wall, $low fit(s) below r2 0.99"
"$check" "$out" 2 2 ratio=alltoall:inter/intra:3 > /dev/null || echo "WARN: inter-node beta not 3x intra-node"
echo "profile: $out"
