#!/usr/bin/env bash
# Implements: the emulated-cluster test of fsmoe-bench: 2 nodes x 2 ranks in network
# namespaces (scripts/emucluster.sh), node placement detected by MPI (no --gpus-per-node), a
# 1 Gbit/s link between the nodes: the profile must show two tiers, the inter-node AllToAll's
# β several times the intra-node one, and the 2DH AllToAll (--ops ...,alltoall_2dh) on the
# world tier with its r². Skipped (77) with the reason where namespaces cannot be
# made (not root, no CAP_SYS_ADMIN).
# usage: bench_emu.sh FSMOE_BENCH CHECK_PROFILE
set -u
bench=$1 check=$2
src=${FSMOE_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
emu="$src/scripts/emucluster.sh"
reason=$("$emu" --check 2>&1)
rc=$?
if [ $rc -ne 0 ]; then
    echo "SKIP: cannot build an emulated cluster here: $reason"
    exit 77
fi
tmp=$(mktemp -d /tmp/fsmoe-bench-emu.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
"$emu" --nodes 2 --ranks-per-node 2 --rate 1gbit -- "$bench" -b 1M -e 4M -i 1M -n 3 -w 1 \
    --ops alltoall,allgather,saa,alltoall_2dh --all-tiers -o "$tmp/emu.yaml" > "$tmp/out.txt" 2>&1
rc=$?
cat "$tmp/out.txt"
[ $rc -eq 0 ] || { echo "FAIL: fsmoe-bench on the emulated cluster exited $rc"; exit 1; }
grep -q "2 nodes x 2 (from node placement)" "$tmp/out.txt" \
    || { echo "FAIL: MPI did not see 2 nodes of 2 ranks"; exit 1; }
grep -q "^# Out of bounds values : 0 OK" "$tmp/out.txt" || { echo "FAIL: wrong values"; exit 1; }
"$check" "$tmp/emu.yaml" 2 2 alltoall:intra alltoall:inter alltoall:world allgather:intra \
    allgather:inter saa:world alltoall_2dh:world ratio=alltoall:inter/intra:3 \
    ratio=allgather:inter/intra:3 > "$tmp/check.txt"
rc=$?
cat "$tmp/check.txt"
[ $rc -eq 0 ] || exit 1
grep -Eq "^alltoall_2dh +world +ranks 4 alpha .* r2 [01]\.[0-9]{6} points 10" "$tmp/check.txt" \
    || { echo "FAIL: no 2DH entry with its r2"; exit 1; }
# BLAS threads by default: the machine's cores over the ranks sharing them, and the emulated
# nodes share one machine: 2 x 1 gets nproc / 2 threads per rank (it once got nproc each: 4
# threads on 2 cores, GEMMs 4x slower than training ran them)
"$emu" --nodes 2 --ranks-per-node 1 --rate 1gbit -- "$bench" --ops copy -b 1M -e 2M -i 1M -n 2 \
    -w 1 --small-min 0 -o "$tmp/emu21.yaml" > "$tmp/out21.txt" 2>&1 ||
    { cat "$tmp/out21.txt"; echo "FAIL: fsmoe-bench on 2 x 1 failed"; exit 1; }
want=$(( $(nproc) / 2 > 1 ? $(nproc) / 2 : 1 ))
grep -Eq "OpenBLAS, $want threads?\)" "$tmp/out21.txt" ||
    { grep -m1 OpenBLAS "$tmp/out21.txt"; echo "FAIL: 2 x 1 on $(nproc) cores: expected $want BLAS thread(s) per rank"; exit 1; }
grep -q "^compute_threads: $want$" "$tmp/emu21.yaml" ||
    { echo "FAIL: the 2 x 1 profile does not say compute_threads: $want"; exit 1; }
echo "emulated cluster: two tiers seen; 2 x 1 ranks with $want BLAS thread(s) each"
