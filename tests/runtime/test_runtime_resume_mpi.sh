#!/usr/bin/env bash
# Implements: the mpi-suite resume tests of fsmoe-run. The oracle is the same run without a
# break: 20 steps straight on 4 ranks (dp 4, ep 2) against 10 steps (--stop-at 10, the schedule
# of --steps 20) then a resume to step 20
#  - on the same 4 ranks: bit-exact (the step-20 shards and manifest equal byte for byte, the
#    step lines' losses equal);
#  - on 2 ranks (ep 2) and on 1 rank, with the same global batch: the losses of steps 11-20
#    within 2e-4 of the straight run's (printed with 4 decimals: 1e-4 of rounding, plus the
#    fp32 summation-order differences the equivalence test bounds far below that).
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

# another world size: the same global batch (8 samples), within tolerance
for w in 2 1; do
    b=$((8 / w))
    if [ "$w" = 1 ]; then
        "$run" "${args[@]}" --batch $b --resume "$tmp/half$w" > "$tmp/resumed$w.out" 2> "$tmp/resumed$w.err"
    else
        "${mpi[@]}" -np $w "$run" "${args[@]}" --batch $b --ep 2 --resume "$tmp/half$w" \
            > "$tmp/resumed$w.out" 2> "$tmp/resumed$w.err"
    fi || { cat "$tmp/resumed$w.err"; bad "resume on $w rank(s)"; continue; }
    worst=$(paste -d' ' <(losses "$tmp/straight.out") <(losses "$tmp/resumed$w.out") |
        awk 'BEGIN {w = 0; n = 0} $1 == $3 {n++; d = $2 - $4; if (d < 0) d = -d; if (d > w) w = d}
             END {if (n != 10) print "missing"; else printf "%.4g\n", w}')
    if [ "$worst" != missing ] && awk -v w="$worst" 'BEGIN {exit !(w <= 2e-4)}'; then
        ok "4 ranks resumed on $w: losses of steps 11-20 within $worst of the straight run"
    else
        bad "4 ranks resumed on $w: loss difference $worst (limit 2e-4)"
        paste <(losses "$tmp/straight.out") <(losses "$tmp/resumed$w.out")
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
