#!/usr/bin/env bash
# Profile stability: fsmoe-bench's default suite on the emulated 2 x 2 cluster, RUNS times in a
# row (default 5), one line per run (wall seconds, fits below r² 0.99, the lowest r², and for each
# fit below what its residuals show: scatter, or a pattern no line fits) and whether every run
# met the target (< 60 s, every fit ≥ 0.99). A measurement, not a test: it exits 0
# whatever the figures (non-zero only when a run fails outright), so CI logs carry the figures
# of each fresh machine. Needs a built tree (BUILD, default build).
# usage: scripts/profile-stability.sh [RUNS] [BUILD]
set -u
cd "$(dirname "$0")/.."
runs=${1:-5} build=${2:-build}
case $runs in '' | *[!0-9]*) echo "profile-stability: RUNS must be a count, got '$runs'" >&2; exit 2 ;; esac
bench=$build/microbench/fsmoe-bench check=$build/tests/microbench/check_profile
for f in "$bench" "$check"; do
    [ -x "$f" ] || { echo "profile-stability: $f is not built (scripts/build.sh $build)" >&2; exit 2; }
done
tmp=$(mktemp -d /tmp/fsmoe-stability.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
met=0 systematic=0 scatter=0
echo "| run | wall s | fits < 0.99 | lowest r² | target | fits below (op tier r² (residuals)) |"
echo "|---|---|---|---|---|---|"
for i in $(seq 1 "$runs"); do
    tests/microbench/bench_default.sh "$bench" "$check" "$tmp/run$i.yaml" > "$tmp/run$i.txt" 2>&1
    rc=$?
    if [ $rc -eq 77 ]; then
        echo "profile-stability: skipped ($(grep -m1 SKIP "$tmp/run$i.txt"))"
        exit 0
    fi
    if [ $rc -ne 0 ]; then
        cat "$tmp/run$i.txt"
        echo "profile-stability: run $i failed (exit $rc)" >&2
        exit 1
    fi
    line=$(grep -m1 "^default suite on the emulated" "$tmp/run$i.txt")
    secs=$(sed -E 's/.*: ([0-9.]+) s wall.*/\1/' <<<"$line")
    low=$(sed -E 's/.* ([0-9]+) fit\(s\) below.*/\1/' <<<"$line")
    # r² of every fit, from the profile (fit.r2 of each entry)
    r2=$(grep -E "^ *r2: " "$tmp/run$i.yaml" | awk '{ v = $2 + 0; if (m == "" || v < m) m = v } END { print m }')
    ok=no
    if awk -v s="$secs" -v l="$low" 'BEGIN { exit !(s < 60 && l == 0) }'; then ok=yes; met=$((met + 1)); fi
    # which fits, and what their residuals show (fsmoe-bench's fitted table: "LOW-R2 (PATTERN)",
    # scatter = noise, convex/concave/runs = a cost no line fits over the sizes)
    which=$(sed -nE 's/^# ([a-z0-9_]+( [0-9]+:[0-9]+)?) +([a-z]+) +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.e+-]+ +[0-9.]+ [A-Za-z/]+ +([0-9.]+) LOW-R2 \(([a-z-]+)\).*/\1 \3 \4 (\5)/p' \
        "$tmp/run$i.txt" | paste -sd, - | sed 's/,/, /g')
    echo "| $i | $secs | $low | ${r2:-?} | $ok | ${which:--} |"
    systematic=$((systematic + $(grep -oE '\((convex|concave|runs)\)' <<<"$which" | wc -l)))
    scatter=$((scatter + $(grep -oE '\(scatter\)' <<<"$which" | wc -l)))
done
echo "profile-stability: $met of $runs runs met < 60 s with every fit r² >= 0.99 on $(hostname)"
echo "profile-stability: of the fits below 0.99, $systematic had systematic residuals (convex, concave, runs: no line fits those sizes) and $scatter scattered (noise)"
