#!/usr/bin/env bash
# Implements: the mpi-suite resume tests of fsmoe-run. The oracle is the same run without a
# break: 20 steps straight on 4 ranks (dp 4, ep 2) against 10 steps (--stop-at 10, the schedule
# of --steps 20) then a resume to step 20
#  - on the same 4 ranks: bit-exact (the step-20 shards and manifest equal byte for byte, the
#    step lines' losses equal);
#  - on 2 ranks (ep 2) and on 1 rank, with the same global batch: the losses of steps 11-20
#    within 2e-4 of the straight run's (printed with 4 decimals: 1e-4 of rounding, plus the
#    fp32 summation-order differences the equivalence test bounds far below that).
# And with slices (mp 2 · ep 2 · esp 2 on 4 ranks, whose checkpoints hold every tensor in its
# canonical form): 10 + resume 10 equal to 20 straight, byte for byte; that checkpoint resumed on
# 1 rank, and a 1-rank checkpoint resumed on mp 2 · ep 2 · esp 2, within 2e-4.
# usage: test_runtime_resume_mpi.sh FSMOE_RUN SOURCE_ROOT
set -u
run=$1 src=$2
tmp=$(mktemp -d /tmp/fsmoe-resume.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mpi=(timeout 300 mpirun --allow-run-as-root --oversubscribe --mca mpi_yield_when_idle 1)
passed=0 failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }
args=(--model "$src/models/tiny-moe.yaml" --seq 32 --threads 1 --eval-every 0 --steps 20)
# losses of steps 11..20 as "step loss" lines
losses() { awk '/^step/ {split($2, s, "/"); if (s[1] > 10) print s[1], $5}' "$1"; }

"${mpi[@]}" -np 4 "$run" "${args[@]}" --batch 2 --ep 2 --save "$tmp/straight" \
    > "$tmp/straight.out" 2> "$tmp/straight.err" || { cat "$tmp/straight.err"; bad "straight run"; }
"${mpi[@]}" -np 4 "$run" "${args[@]}" --batch 2 --ep 2 --stop-at 10 --save "$tmp/half" \
    > "$tmp/half.out" 2> "$tmp/half.err" || { cat "$tmp/half.err"; bad "first half"; }
for w in 2 1; do cp -r "$tmp/half" "$tmp/half$w"; done

# same world size: bit-exact
"${mpi[@]}" -np 4 "$run" "${args[@]}" --batch 2 --ep 2 --resume "$tmp/half" --save "$tmp/half" \
    > "$tmp/resumed4.out" 2> "$tmp/resumed4.err" || { cat "$tmp/resumed4.err"; bad "resume on 4 ranks"; }
if grep -q "resumed from .* at step 10" "$tmp/resumed4.out" &&
   [ "$(losses "$tmp/resumed4.out" | wc -l)" -eq 10 ] &&
   [ "$(losses "$tmp/resumed4.out")" = "$(losses "$tmp/straight.out")" ]; then
    ok "4 ranks: 10 + resume 10 prints the losses of 20 straight"
else
    bad "4 ranks: losses after resume differ"; diff <(losses "$tmp/straight.out") <(losses "$tmp/resumed4.out")
fi
same=1
for f in "$tmp/straight/manifest.yaml" "$tmp"/straight/step-00000020/*; do
    g=${f/straight/half}
    cmp -s "$f" "$g" || { same=0; echo "differs: ${f#$tmp/}"; }
done
n=$(ls "$tmp"/straight/step-00000020 | wc -l)
if [ "$same" = 1 ] && [ "$n" -eq 4 ]; then
    ok "4 ranks: the step-20 manifest and its $n shards equal the straight run's byte for byte"
else
    bad "4 ranks: step-20 checkpoint differs from the straight run's ($n shards)"
fi

# within 2e-4 of a reference: within A B NAME
within() {
    local worst
    worst=$(paste -d' ' <(losses "$1") <(losses "$2") |
        awk 'BEGIN {w = 0; n = 0} $1 == $3 {n++; d = $2 - $4; if (d < 0) d = -d; if (d > w) w = d}
             END {if (n != 10) print "missing"; else printf "%.4g\n", w}')
    if [ "$worst" != missing ] && awk -v w="$worst" 'BEGIN {exit !(w <= 2e-4)}'; then
        ok "$3: losses of steps 11-20 within $worst"
    else
        bad "$3: loss difference $worst (limit 2e-4)"; paste <(losses "$1") <(losses "$2")
    fi
}
# another world size: the same global batch (8 samples), within tolerance
for w in 2 1; do
    b=$((8 / w))
    if [ "$w" = 1 ]; then
        "$run" "${args[@]}" --batch $b --resume "$tmp/half$w" > "$tmp/resumed$w.out" 2> "$tmp/resumed$w.err"
    else
        "${mpi[@]}" -np $w "$run" "${args[@]}" --batch $b --ep 2 --resume "$tmp/half$w" \
            > "$tmp/resumed$w.out" 2> "$tmp/resumed$w.err"
    fi || { cat "$tmp/resumed$w.err"; bad "resume on $w rank(s)"; continue; }
    within "$tmp/straight.out" "$tmp/resumed$w.out" "4 ranks resumed on $w"
done

# slices: tensor parallelism and expert slices (dp 2, global batch 8)
sl=(--mp 2 --ep 2 --esp 2 --batch 4 --capacity-factor none)
one=(--batch 8 --capacity-factor none)
"${mpi[@]}" -np 4 "$run" "${args[@]}" "${sl[@]}" --save "$tmp/s-straight" > "$tmp/s-straight.out" \
    2> "$tmp/s.err" || { cat "$tmp/s.err"; bad "slices: straight run"; }
"${mpi[@]}" -np 4 "$run" "${args[@]}" "${sl[@]}" --stop-at 10 --save "$tmp/s-half" \
    > /dev/null 2> "$tmp/s.err" || { cat "$tmp/s.err"; bad "slices: first half"; }
cp -r "$tmp/s-half" "$tmp/s-half1"
"${mpi[@]}" -np 4 "$run" "${args[@]}" "${sl[@]}" --resume "$tmp/s-half" --save "$tmp/s-half" \
    > "$tmp/s-resumed.out" 2> "$tmp/s.err" || { cat "$tmp/s.err"; bad "slices: resume"; }
same=1
for f in "$tmp/s-straight/manifest.yaml" "$tmp"/s-straight/step-00000020/*; do
    cmp -s "$f" "${f/s-straight/s-half}" || { same=0; echo "differs: ${f#$tmp/}"; }
done
if [ "$(losses "$tmp/s-resumed.out" | wc -l)" -eq 10 ] &&
   [ "$(losses "$tmp/s-resumed.out")" = "$(losses "$tmp/s-straight.out")" ] && [ "$same" = 1 ]; then
    ok "mp 2 · ep 2 · esp 2: 10 + resume 10 equals 20 straight (losses, manifest and shards)"
else
    bad "mp 2 · ep 2 · esp 2: resume differs from the straight run"
fi
"$run" "${args[@]}" "${one[@]}" --resume "$tmp/s-half1" > "$tmp/s-resumed1.out" 2> "$tmp/s.err" ||
    { cat "$tmp/s.err"; bad "slices: resume on 1 rank"; }
within "$tmp/s-straight.out" "$tmp/s-resumed1.out" "mp 2 · ep 2 · esp 2 resumed on 1 rank"
"$run" "${args[@]}" "${one[@]}" > "$tmp/o-straight.out" 2> "$tmp/s.err" || bad "1 rank: straight"
"$run" "${args[@]}" "${one[@]}" --stop-at 10 --save "$tmp/o-half" > /dev/null 2> "$tmp/s.err" ||
    bad "1 rank: first half"
"${mpi[@]}" -np 4 "$run" "${args[@]}" "${sl[@]}" --resume "$tmp/o-half" > "$tmp/o-resumed4.out" \
    2> "$tmp/s.err" || { cat "$tmp/s.err"; bad "1-rank checkpoint resumed with slices"; }
within "$tmp/o-straight.out" "$tmp/o-resumed4.out" "1 rank resumed on mp 2 · ep 2 · esp 2"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
