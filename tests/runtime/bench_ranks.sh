#!/usr/bin/env bash
# Implements: the multi-rank benchmark of fsmoe-run (meson benchmark, never a timed test):
# tiny-moe's step time and tokens/s on 1, 2 and 4 ranks of this machine and on the emulated
# 2 nodes x 2 ranks cluster (scripts/emucluster.sh, links of 8 and of 1 Gbit/s; skipped where
# network namespaces cannot be made), each with communication overlapped (two streams: experts compute
# while the next chunk's AllToAll runs) and forced serial (--no-overlap: one in-order stream).
# The two modes of a row run alternately, REPS times each, in one invocation; the table gives
# each mode's best mean step (least disturbed by other load) and the serial/overlap ratio.
# Batch per rank is the model's (weak scaling: the global batch grows with the ranks); r = 2.
# usage: bench_ranks.sh FSMOE_RUN SOURCE_ROOT [STEPS] [REPS]
set -u
run=$1 src=$2 steps=${3:-15} reps=${4:-2}
mpi=(timeout 600 mpirun --allow-run-as-root --oversubscribe --mca mpi_yield_when_idle 1)
common=(--model "$src/models/tiny-moe.yaml" --steps "$steps" --threads 1 --eval-every 0 --chunks 2)
emu_ok=0
if reason=$("$src/scripts/emucluster.sh" --check 2>&1); then emu_ok=1; fi

# prints "MS TOKS" (the run's mean step and tokens/s) or "- -" when it failed
one() { # where np ep mode
    local where=$1 np=$2 ep=$3 mode=$4 out rate=${1#emulated-}
    local flags=("${common[@]}" --ep "$ep")
    [ "$mode" = serial ] && flags+=(--no-overlap)
    if [ "$where" != local ]; then
        out=$("$src/scripts/emucluster.sh" --nodes 2 --ranks-per-node 2 --rate "$rate" -- \
            "$run" "${flags[@]}" 2>/dev/null)
    elif [ "$np" = 1 ]; then
        out=$("$run" "${flags[@]}" 2>/dev/null)
    else
        out=$("${mpi[@]}" -np "$np" "$run" "${flags[@]}" 2>/dev/null)
    fi
    echo "$out" | awk '/^# mean step/ {print $4, $6; found = 1} END {if (!found) print "- -"}'
}

printf "# fsmoe-run tiny-moe, %d steps (mean over steps 2..%d), best of %d, %d cores\n" \
    "$steps" "$steps" "$reps" "$(getconf _NPROCESSORS_ONLN)"
printf "%-14s %5s %3s | %12s %12s | %12s %12s | %8s\n" where ranks ep "overlap ms" "tok/s" \
    "serial ms" "tok/s" "ser/ovl"
row() { # where np ep
    local best_o="" best_s="" tok_o=- tok_s=- ms tok
    for _ in $(seq 1 "$reps"); do
        for mode in serial overlap; do
            read -r ms tok < <(one "$@" "$mode")
            [ "$ms" = - ] && continue
            if [ "$mode" = overlap ]; then
                if [ -z "$best_o" ] || awk -v a="$ms" -v b="$best_o" 'BEGIN {exit !(a < b)}'; then
                    best_o=$ms tok_o=$tok
                fi
            elif [ -z "$best_s" ] || awk -v a="$ms" -v b="$best_s" 'BEGIN {exit !(a < b)}'; then
                best_s=$ms tok_s=$tok
            fi
        done
    done
    local ratio=-
    if [ -n "$best_o" ] && [ -n "$best_s" ]; then
        ratio=$(awk -v s="$best_s" -v o="$best_o" 'BEGIN {printf "%.2f", s / o}')
    fi
    printf "%-14s %5s %3s | %12s %12s | %12s %12s | %8s\n" "$1" "$2" "$3" "${best_o:--}" "$tok_o" \
        "${best_s:--}" "$tok_s" "$ratio"
}
row local 1 1
row local 2 2
row local 4 2
if [ "$emu_ok" = 1 ]; then
    row emulated-8gbit 4 2
    row emulated-1gbit 4 2
else
    echo "# emulated 2 x 2: skipped ($reason)"
fi
