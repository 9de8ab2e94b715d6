#!/usr/bin/env bash
# Implements: the mpi-suite failure tests of fsmoe-bench: a rank killed (SIGKILL, SIGTERM) or
# stalled (SIGSTOP) while measuring makes the run end non-zero within 30 s with a message naming
# the rank (the launcher's, or the watchdog's with --comm-timeout); an interrupted run (SIGINT on
# mpirun, SIGINT or SIGTERM on a lone fsmoe-bench: exit 128+N) ends non-zero. In every case no
# output, no temporary and no fsmoe-bench process is left behind.
# usage: bench_fail.sh FSMOE_BENCH
set -u
bench=$1
tmp=$(mktemp -d /tmp/fsmoe-bench-fail.XXXXXX)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun --oversubscribe --mca mpi_yield_when_idle 1)
# Every process of this test has $tmp on its command line: the cleanup ends only those.
ours() { pgrep -f -- "$tmp" 2>/dev/null | grep -vx "$$"; }
cleanup() {
    for p in $(ours); do kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
passed=0 failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }

# default sizes, many runs: minutes of measuring, so every signal lands mid-measurement
args=(-n 40 --comm-timeout 5 -o "$tmp/o/p.yaml" --json "$tmp/o/p.json" --plot "$tmp/o/p.svg")

# the PID of world rank R of our running fsmoe-bench (from its environment)
rank_pid() {
    for p in $(pgrep -f -- "$bench.*$tmp"); do
        if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
            echo "$p"
            return
        fi
    done
}

# wait until rank 0 has started measuring (a section header), and a little longer
wait_rows() {
    for _ in $(seq 1 600); do
        if grep -qE '^# [a-z]+ on tier ' "$1" 2>/dev/null; then
            sleep 2
            return 0
        fi
        sleep 0.1
    done
    return 1
}

# wait (at most 30 s) for PID to end; its exit status in $rc, 255 + a FAIL when it did not
bounded_wait() {
    local pid=$1 what=$2
    for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
        bad "$what: still running 30 s later (hang)"
        kill -KILL "$pid" 2>/dev/null
        rc=255
        return 1
    fi
    wait "$pid"
    rc=$?
    return 0
}

# nothing that looks like an output, no temporaries, no processes of ours
left_behind() {
    local what=$1 files procs
    sleep 1
    files=$(ls -A "$tmp/o" 2>/dev/null)
    procs=$(ours)
    [ -z "$files" ] || bad "$what: left $files in the output directory"
    [ -z "$procs" ] || { bad "$what: left processes: $(ps -o pid=,args= -p "$(echo $procs | tr ' ' ,)")"; }
    rm -rf "$tmp/o"; mkdir "$tmp/o"
    for p in $procs; do kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
}
mkdir "$tmp/o"

for sig in KILL TERM STOP; do
    out=$tmp/$sig.out err=$tmp/$sig.err
    "${mpi[@]}" -np 2 "$bench" "${args[@]}" > "$out" 2> "$err" &
    job=$!
    if ! wait_rows "$out"; then
        bad "SIG$sig on rank 1: measuring never started"; cat "$err"; kill -KILL "$job"
        left_behind "SIG$sig"; continue
    fi
    victim=$(rank_pid 1)
    [ -n "$victim" ] || { bad "SIG$sig: rank 1 not found"; kill -KILL "$job"; left_behind "SIG$sig"; continue; }
    start=$(date +%s)
    kill -"$sig" "$victim"
    bounded_wait "$job" "SIG$sig on rank 1" || { left_behind "SIG$sig"; continue; }
    took=$(( $(date +%s) - start ))
    [ "$sig" = STOP ] && kill -KILL "$victim" 2>/dev/null
    if [ "$rc" -eq 0 ]; then
        bad "SIG$sig on rank 1: exit 0"
    elif [ "$sig" = STOP ]; then
        # the watchdog of the surviving rank: names itself, the operation and the group
        if grep -qE 'fsmoe-bench: [^:]*:0: rank 0: .* made no progress for 5 s' "$err"; then
            ok "SIGSTOP on rank 1: exit $rc after ${took}s, watchdog message"
        else
            bad "SIGSTOP on rank 1: no watchdog message (exit $rc)"; cat "$err"
        fi
    elif grep -qE 'process rank 1 .*signal' "$err"; then
        ok "SIG$sig on rank 1: exit $rc after ${took}s, rank 1 named"
    else
        bad "SIG$sig on rank 1: rank 1 not named (exit $rc)"; cat "$err"
    fi
    left_behind "SIG$sig on rank 1"
done

# Ctrl-C on the launcher
"${mpi[@]}" -np 2 "$bench" "${args[@]}" > "$tmp/int.out" 2> "$tmp/int.err" &
job=$!
if wait_rows "$tmp/int.out"; then
    kill -INT "$job"
    if bounded_wait "$job" "SIGINT on mpirun"; then
        [ "$rc" -ne 0 ] && ok "SIGINT on mpirun: exit $rc" || bad "SIGINT on mpirun: exit 0"
    fi
else
    bad "SIGINT on mpirun: measuring never started"; cat "$tmp/int.err"; kill -KILL "$job"
fi
left_behind "SIGINT on mpirun"

# a lone fsmoe-bench (singleton MPI) receives the signal itself: 128 + N
for sig in INT TERM; do
    "$bench" "${args[@]}" > "$tmp/one$sig.out" 2> "$tmp/one$sig.err" &
    job=$!
    if wait_rows "$tmp/one$sig.out"; then
        kill -"$sig" "$job"
        if bounded_wait "$job" "SIG$sig on a lone fsmoe-bench"; then
            want=$(( 128 + $(kill -l "$sig") ))
            [ "$rc" -eq "$want" ] && ok "SIG$sig on a lone fsmoe-bench: exit $rc" ||
                { bad "SIG$sig on a lone fsmoe-bench: exit $rc, expected $want"; cat "$tmp/one$sig.err"; }
        fi
    else
        bad "SIG$sig on a lone fsmoe-bench: measuring never started"; cat "$tmp/one$sig.err"
        kill -KILL "$job"
    fi
    left_behind "SIG$sig on a lone fsmoe-bench"
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
