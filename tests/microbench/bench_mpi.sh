#!/usr/bin/env bash
# Implements: the `mpi` suite test of fsmoe-bench: 4 ranks (2 "nodes" by --gpus-per-node) on
# small sizes write a profile that the planner's reader and fsmoe-plan accept, with every
# operation on every tier, the interference of a world AllToAll and a GEMM (both factors in
# [1, 100] and the sync latency of a small AllToAll after GEMMs in [0, 1) s, read back by
# libfsmoe's reader), no wrong values, JSON and SVG; the 2DH AllToAll
# beside the flat one (asked for with --ops, on the world tier and on a layout's EP group;
# refused with a note on one node); then the node placement detected by MPI (one node here),
# another datatype and reduction, --interference 0 (no interference written), and impossible
# configurations and bad flags (exit 2).
# usage: bench_mpi.sh FSMOE_BENCH CHECK_PROFILE [FSMOE_PLAN]
set -u
bench=$1 check=$2 plan=${3:-}
src=${FSMOE_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d /tmp/fsmoe-bench-mpi.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
mpi=(mpirun --allow-run-as-root --oversubscribe --mca mpi_yield_when_idle 1)
failed=0
fail() { echo "FAIL: $*"; failed=1; }

small=(-b 256K -e 1M -i 256K --gemm-min 64K --gemm-max 256K --gemm-step 64K -n 3 -w 1)

echo "== 4 ranks, --gpus-per-node 2: every op on every tier"
"${mpi[@]}" -np 4 "$bench" --gpus-per-node 2 --all-tiers "${small[@]}" -o "$tmp/p.yaml" --json "$tmp/p.json" \
    --plot "$tmp/p.svg" > "$tmp/out.txt" 2> "$tmp/err.txt"
rc=$?
cat "$tmp/out.txt"
[ $rc -eq 0 ] || { cat "$tmp/err.txt"; fail "fsmoe-bench exited $rc"; }
grep -q "^# Out of bounds values : 0 OK" "$tmp/out.txt" || fail "no OK footer"
grep -q "^#       size         count      type   redop    root     time   algbw   busbw  #wrong" "$tmp/out.txt" \
    || fail "no nccl-tests header"
[ -s "$tmp/err.txt" ] && grep -q '\[' "$tmp/err.txt" && fail "progress bar on a non-terminal stderr"
"$check" "$tmp/p.yaml" 2 2 \
    alltoall:intra alltoall:inter alltoall:world allgather:intra allgather:inter allgather:world \
    reducescatter:intra reducescatter:inter reducescatter:world allreduce:intra allreduce:inter \
    allreduce:world saa:world gemm:local copy:local interference=yes || fail "profile check"
/usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['wrong']==0 and len(d['rows'])>0 and len(d['fits'])==15, d['fits']" "$tmp/p.json" \
    || fail "JSON report"
grep -q "^# interference on tier world: 1 group of 4 ranks, [0-9]* x alltoall of [0-9]* B on the comm stream beside [0-9]* x gemm" "$tmp/out.txt" \
    || fail "no interference section"
grep -Eq "^# comm_slowdown [0-9.]+, compute_slowdown [0-9.]+ \(medians of 5 repetitions\); #wrong 0 OK" "$tmp/out.txt" \
    || fail "interference: no factors, or wrong values"
[ "$(grep -Ec '^ +[1-5]  (a,g,ag|ag,g,a) ' "$tmp/out.txt")" = 5 ] || fail "interference: expected 5 repetitions in alternating order"
grep -Eq "^# sync_latency [0-9.]+ ms per collective \(median of 5 repetitions: small world alltoall after ~[0-9.]+ ms of GEMMs [0-9.]+ ms, back to back [0-9.]+ ms\)" "$tmp/out.txt" \
    || fail "interference: no sync_latency line"
"$check" "$tmp/p.yaml" 2 2 interference=yes > "$tmp/checkintf.txt" \
    || { cat "$tmp/checkintf.txt"; fail "interference: profile check"; }
grep -Eq '^interference comm_slowdown [0-9.e+-]+ compute_slowdown [0-9.e+-]+ sync_latency_s [0-9.e+-]+ measured ".*sync: ' "$tmp/checkintf.txt" \
    || { cat "$tmp/checkintf.txt"; fail "interference: no sync latency read back from the profile"; }
/usr/bin/python3 -c "
import json, sys
x = json.load(open(sys.argv[1]))['interference']
assert x['ok'] and x['wrong'] == 0 and x['ranks'] == 4 and len(x['repetitions']) == 5, x
assert 1 <= x['comm_slowdown'] <= 100 and 1 <= x['compute_slowdown'] <= 100, x
assert [r['order'] for r in x['repetitions']] == ['a,g,ag', 'ag,g,a'] * 2 + ['a,g,ag'], x
assert 0 <= x['sync_latency_s'] < 1 and x['sync_after_s'] > 0 and x['sync_alone_s'] > 0, x
for r in x['repetitions']:
    assert 0 <= r['sync_latency_s'] < 1, r
    assert abs(r['sync_latency_s'] - max(0, r['sync_after_s'] - r['sync_alone_s'])) < 1e-8, r
" "$tmp/p.json" || fail "interference in the JSON report"
grep -q "</svg>" "$tmp/p.svg" && grep -q "alltoall" "$tmp/p.svg" || fail "SVG plot"
if [ -n "$plan" ] && [ -x "$plan" ]; then
    "$plan" --model "$src/models/tiny-moe.yaml" --cluster "$tmp/p.yaml" > "$tmp/plan.yaml" \
        || fail "fsmoe-plan rejected the fresh profile"
fi

echo "== 4 ranks, 2 per node: the 2DH AllToAll beside the flat one (--ops alltoall,alltoall_2dh)"
"${mpi[@]}" -np 4 "$bench" --gpus-per-node 2 "${small[@]}" --ops alltoall,alltoall_2dh \
    -o "$tmp/2dh.yaml" --plot "$tmp/2dh.svg" > "$tmp/out2dh.txt" 2>&1 \
    || { cat "$tmp/out2dh.txt"; fail "2DH run"; }
grep -q "^# Out of bounds values : 0 OK" "$tmp/out2dh.txt" || fail "2DH: wrong values"
grep -q "^# alltoall_2dh on tier world: 1 group of 4 ranks, all ranks, hierarchical (2DH)" \
    "$tmp/out2dh.txt" || fail "2DH: no world section"
grep -q "^# alltoall_2dh on tier \(intra\|inter\)" "$tmp/out2dh.txt" \
    && fail "2DH measured on a tier where it is not hierarchical"
"$check" "$tmp/2dh.yaml" 2 2 alltoall:world alltoall_2dh:world > "$tmp/check2dh.txt" \
    || { cat "$tmp/check2dh.txt"; fail "2DH profile"; }
grep -Eq "^alltoall_2dh +world +ranks 4 alpha .* r2 [01]\.[0-9]{6} points 8" "$tmp/check2dh.txt" \
    || { cat "$tmp/check2dh.txt"; fail "2DH entry without r2 or points"; }
grep -Eq "^# alltoall_2dh +world +4 +8 .* [01]\.[0-9]{6}" "$tmp/out2dh.txt" \
    || fail "2DH fit not in the fit table"
grep -q "# hierarchical AllToAll (2DH" "$tmp/2dh.yaml" || fail "2DH: the profile does not say what 2DH is"
grep -q "flat alltoall, world (4 ranks)" "$tmp/2dh.svg" || fail "2DH plot without the flat line"

echo "== 1 rank, two GEMM shapes (--gemm-shapes): one fitted line per shape"
"${mpi[@]}" -np 1 "$bench" "${small[@]}" --ops gemm --gemm-shapes 16:64,32:128 -o "$tmp/gs.yaml" \
    --json "$tmp/gs.json" --plot "$tmp/gs.svg" > "$tmp/outgs.txt" 2>&1 \
    || { cat "$tmp/outgs.txt"; fail "GEMM shapes run"; }
for sh in 16:64 32:128; do
    grep -Eq "^# gemm $sh +local +1 +[0-9]+ " "$tmp/outgs.txt" || fail "GEMM $sh: no fitted line"
    grep -q "(shape $sh)" "$tmp/gs.svg" || fail "GEMM $sh: not in the plot's legend"
done
"$check" "$tmp/gs.yaml" 1 1 gemm:local > "$tmp/checkgs.txt" || { cat "$tmp/checkgs.txt"; fail "GEMM shapes profile"; }
[ "$(grep -Ec '^gemm +local +ranks 1 shape (16:64|32:128) alpha .* points [2-9]' "$tmp/checkgs.txt")" = 2 ] \
    || { cat "$tmp/checkgs.txt"; fail "GEMM shapes: expected one entry with points per shape"; }
/usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); s=sorted(tuple(f['shape']) for f in d['fits']); assert s==[(16,64),(32,128)], s" "$tmp/gs.json" \
    || fail "GEMM shapes: JSON fits"

echo "== 4 ranks, node placement from MPI (one node): only the intra tier; --interference 0"
"${mpi[@]}" -np 4 "$bench" "${small[@]}" --ops alltoall,allreduce,saa,alltoall_2dh,gemm -d int32 --op max \
    --interference 0 -o "$tmp/one.yaml" > "$tmp/out1.txt" 2>&1 || { cat "$tmp/out1.txt"; fail "single-node run"; }
grep -q "^# Out of bounds values : 0 OK" "$tmp/out1.txt" || fail "int32/max: wrong values"
"$check" "$tmp/one.yaml" 1 4 alltoall:intra allreduce:intra saa:intra gemm:local interference=no \
    || fail "single-node profile"
grep -q "^# interference" "$tmp/out1.txt" && fail "--interference 0 measured the interference"
grep -q "tier: inter" "$tmp/one.yaml" && fail "one node has no inter tier"
grep -q "^# alltoall_2dh not measured: no world tier" "$tmp/out1.txt" \
    || fail "one node: no note that the 2DH AllToAll was not measured"
grep -q "op: alltoall_2dh" "$tmp/one.yaml" && fail "one node has no 2DH entry"

echo "== layout flags: EP over all 4 ranks (esp 1) puts the AllToAll (and 2DH) on the world tier"
"${mpi[@]}" -np 4 "$bench" --gpus-per-node 2 --esp 1 --ep 4 "${small[@]}" \
    --ops alltoall,allgather,saa,alltoall_2dh \
    -o "$tmp/lay.yaml" > "$tmp/out2.txt" 2>&1 || { cat "$tmp/out2.txt"; fail "layout run"; }
grep -q "alltoall on tier world: 1 group of 4 ranks, the ep group of the layout" "$tmp/out2.txt" \
    || fail "EP group of --esp 1 --ep 4 not measured on the world tier"
grep -q "alltoall_2dh on tier world: 1 group of 4 ranks, the ep group of the layout, hierarchical" \
    "$tmp/out2.txt" || fail "2DH on the EP group of --esp 1 --ep 4 not measured"
"$check" "$tmp/lay.yaml" 2 2 alltoall:world allgather:intra saa:world alltoall_2dh:world \
    || fail "layout profile"

echo "== impossible configurations and bad flags exit 2 with a message"
"${mpi[@]}" -np 4 "$bench" --gpus-per-node 2 --dp 3 "${small[@]}" > "$tmp/bad5.txt" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "--dp 3 with 4 ranks exited $rc, expected 2"
grep -q "world must equal dp" "$tmp/bad5.txt" || { cat "$tmp/bad5.txt"; fail "--dp 3 message"; }
"${mpi[@]}" -np 4 "$bench" --gpus-per-node 3 "${small[@]}" > "$tmp/bad.txt" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "--gpus-per-node 3 with 4 ranks exited $rc, expected 2"
grep -q "does not divide the world of 4 ranks" "$tmp/bad.txt" || { cat "$tmp/bad.txt"; fail "--gpus-per-node 3 message"; }
"${mpi[@]}" -np 2 "$bench" --bogus > "$tmp/bad2.txt" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "--bogus exited $rc, expected 2"
grep -q "unknown option --bogus" "$tmp/bad2.txt" || fail "--bogus message"
"${mpi[@]}" -np 4 "$bench" --interference 2 > "$tmp/bad6.txt" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "--interference 2 exited $rc, expected 2"
grep -q "^fsmoe-bench: --interference: 2 is out of range" "$tmp/bad6.txt" \
    || { cat "$tmp/bad6.txt"; fail "--interference 2 message"; }
"${mpi[@]}" -np 2 "$bench" --backend nccl -b 1K -e 2K > "$tmp/bad3.txt" 2>&1
rc=$?
[ $rc -ne 0 ] || fail "--backend nccl without a device succeeded"

start=$(date +%s)
"${mpi[@]}" -np 2 "$bench" -o /nonexistent-dir/x.yaml > "$tmp/bad4.txt" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "an unwritable -o exited $rc, expected 2"
grep -q "fsmoe-bench: .*:0: -o: cannot be written: /nonexistent-dir/x.yaml: cannot create" "$tmp/bad4.txt" \
    || { cat "$tmp/bad4.txt"; fail "unwritable -o: no host:rank-prefixed message"; }
[ $(( $(date +%s) - start )) -lt 30 ] || fail "an unwritable -o was found only after measuring"

[ $failed -eq 0 ] && echo "all fsmoe-bench mpi checks passed"
exit $failed
