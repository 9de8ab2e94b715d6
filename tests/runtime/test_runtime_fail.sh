#!/usr/bin/env bash
# Implements: the mpi-suite failure tests of fsmoe-run on 3 ranks: a rank killed (SIGKILL) or
# stalled (SIGSTOP) mid-training makes the run end non-zero within the watchdog's bound with a
# message naming the rank(s) and the operation, instead of hanging; a rank with no tokens for
# an expert (tiny capacity) trains normally.
# usage: test_runtime_fail.sh FSMOE_RUN SOURCE_ROOT
set -u
run=$1 src=$2
tmp=$(mktemp -d /tmp/fsmoe-fail.XXXXXX)
mpi=(mpirun --allow-run-as-root --oversubscribe --mca mpi_yield_when_idle 1)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT INT TERM
passed=0 failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }
args=(--model "$src/models/tiny-moe.yaml" --batch 2 --seq 32 --threads 1 --eval-every 0)

# the PID of world rank R of a running fsmoe-run (from its environment)
rank_pid() {
    for p in $(pgrep -f "$run"); do
        if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
            echo "$p"
            return
        fi
    done
}

# wait until rank 0 has printed a step line
wait_steps() {
    for _ in $(seq 1 300); do
        grep -q '^step 3/' "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}

for sig in KILL STOP; do
    out=$tmp/$sig.out err=$tmp/$sig.err
    start=$(date +%s)
    "${mpi[@]}" -np 3 "$run" "${args[@]}" --ep 1 --steps 100000 --comm-timeout 5 >"$out" 2>"$err" &
    job=$!
    pids+=("$job")
    if ! wait_steps "$out"; then
        bad "SIG$sig: training never started"; cat "$err"; kill -9 "$job"; continue
    fi
    victim=$(rank_pid 1)
    [ -n "$victim" ] || { bad "SIG$sig: rank 1 not found"; kill -9 "$job"; continue; }
    pids+=("$victim")
    kill -"$sig" "$victim"
    # bounded wait: 5 s watchdog + launcher teardown
    for _ in $(seq 1 600); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$job" 2>/dev/null; then
        bad "SIG$sig: still running 60 s after rank 1 got SIG$sig (hang)"
        kill -9 "$job" "$victim" 2>/dev/null
        continue
    fi
    wait "$job"
    rc=$?
    took=$(( $(date +%s) - start ))
    [ "$rc" -ne 0 ] || bad "SIG$sig: exit 0 after losing rank 1"
    if [ "$sig" = STOP ]; then
        # our watchdog: a surviving rank names itself, the operation and the group's ranks
        if grep -q 'fsmoe-run\[rank [02]\]: rank [02]: .* on ranks 0-2 made no progress for 5 s' "$err"; then
            ok "SIGSTOP: exit $rc, watchdog message after ${took}s"
        else
            bad "SIGSTOP: no watchdog message"; cat "$err"
        fi
    else
        # the launcher notices the dead process and names it
        if grep -qiE 'rank 1|signal 9|killed' "$err"; then
            ok "SIGKILL: exit $rc after ${took}s, rank 1 named"
        else
            bad "SIGKILL: rank 1 not named"; cat "$err"
        fi
    fi
    kill -9 "$victim" 2>/dev/null
done

# zero tokens: capacity 0.05 keeps 2 tokens per expert of the global batch (the first in global
# order), so ranks 1 and 2 send nothing to any expert and some experts receive nothing
if "${mpi[@]}" -np 3 "$run" "${args[@]}" --ep 1 --steps 3 --capacity-factor 0.05 >"$tmp/z.out" 2>"$tmp/z.err" &&
    grep -q '^step 3/3' "$tmp/z.out"; then
    ok "zero tokens on ranks 1-2 (capacity 0.05)"
else
    bad "zero tokens"; cat "$tmp/z.err"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
