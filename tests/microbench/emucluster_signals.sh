#!/usr/bin/env bash
# Implements: scripts/emucluster.sh always cleans up. A run of a long job is interrupted with
# SIGINT (or SIGTERM) and then flooded with the same signal every 10 ms while it cleans up; it
# must exit 130 (143) within 30 s leaving none of its namespaces (and so none of their veths or
# the bridge), no temporary directory and none of the processes it started (mpirun, the remote
# daemons, the ranks). A run killed with SIGKILL leaves all of that; the next run must remove it.
# Needs root and `ip netns` (exit 77 otherwise). Cleans up after itself even when it fails.
# usage: emucluster_signals.sh [SOURCE_ROOT]
set -u
src=${1:-${FSMOE_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}}
emu=$src/scripts/emucluster.sh
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root"; exit 77; }
"$emu" --check >/dev/null 2>&1
case $? in 0) ;; 77) echo "SKIP: network namespaces cannot be made here"; exit 77 ;;
    *) echo "FAIL: emucluster.sh --check"; exit 1 ;; esac

tmp=$(mktemp -d /tmp/fsmoe-emu-sig.XXXXXX)
export TMPDIR=$tmp/t # emucluster's temporary directories land here
mkdir "$TMPDIR"
started=() # the emucluster.sh PIDs this test started
passed=0 failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }

# The namespaces of the run whose script has PID $1.
run_ns() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^fsmoe$1(sw|n[0-9]+)\$"; }
run_pids() { for ns in $(run_ns "$1"); do ip netns pids "$ns" 2>/dev/null; done; }

# Whatever happens to the test, nothing of the runs it started survives it.
cleanup() {
    trap '' INT TERM
    for p in "${started[@]}"; do kill -KILL "$p" 2>/dev/null; done
    for p in "${started[@]}"; do
        for q in $(run_pids "$p"); do kill -KILL "$q" 2>/dev/null; done
        sleep 0.2
        for ns in $(run_ns "$p"); do ip netns del "$ns" 2>/dev/null; done
    done
    for p in $(pgrep -f -- "$tmp/job.sh"); do kill -KILL "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The long job: each rank naps forever; its path names it for pgrep.
printf '#!/bin/sh\nwhile :; do sleep 1; done\n' > "$tmp/job.sh"
chmod +x "$tmp/job.sh"
veths_before=$(ip -o link show type veth 2>/dev/null | awk -F': ' '{print $2}' | sort)

# start a run of the long job on 2 x 2 ranks; sets $run (the script's PID) once the 4 ranks run
start_run() {
    # job control on: without it a background job ignores SIGINT (and cannot trap it)
    set -m
    "$emu" --nodes 2 --ranks-per-node 2 -- "$tmp/job.sh" > "$tmp/run.out" 2>&1 &
    run=$!
    set +m
    started+=("$run")
    for _ in $(seq 1 300); do
        [ "$(pgrep -f -c -- "^/bin/sh $tmp/job.sh")" -ge 4 ] && return 0
        kill -0 "$run" 2>/dev/null || break
        sleep 0.1
    done
    bad "the emulated cluster never ran the job"; cat "$tmp/run.out"
    return 1
}

# nothing of run $1 left: namespaces, temporary directory, the processes recorded in $2
check_clean() {
    local what=$1 pid=$2 procs=$3 alive="" p st veths
    # a process still alive (a zombie is dead: it only waits for init to collect its status)
    for p in $procs; do
        st=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)
        [ -n "$st" ] && [ "$st" != Z ] && alive="$alive $p"
    done
    [ -z "$(run_ns "$pid")" ] || bad "$what: namespaces left: $(run_ns "$pid" | tr '\n' ' ')"
    [ ! -e "$TMPDIR/emucluster.$pid" ] || bad "$what: temporary directory left"
    [ -z "$alive" ] || bad "$what: processes left:$(ps -o pid=,args= -p "$(echo $alive | tr ' ' ,)" | tr '\n' ';')"
    [ -z "$(pgrep -r RSDT -f -- "$tmp/job.sh")" ] || bad "$what: ranks left: $(pgrep -a -f -- "$tmp/job.sh" | tr '\n' ';')"
    veths=$(ip -o link show type veth 2>/dev/null | awk -F': ' '{print $2}' | sort)
    [ "$veths" = "$veths_before" ] || bad "$what: veths in the root namespace changed: $veths"
}

for sig in INT TERM; do
    start_run || continue
    procs=$(run_pids "$run")
    [ -n "$procs" ] && [ -n "$(run_ns "$run")" ] || bad "SIG$sig: no namespaces or processes seen"
    # to the script's process group, as a terminal's Ctrl-C does (the commands the script is
    # running get it too), then again and again while it cleans up (an impatient user)
    kill -"$sig" -- "-$run"
    for _ in $(seq 1 3000); do
        sleep 0.01
        kill -0 "$run" 2>/dev/null || break
        kill -"$sig" -- "-$run" 2>/dev/null
    done
    if kill -0 "$run" 2>/dev/null; then
        bad "SIG$sig: emucluster.sh still running 30 s after the first signal"
        kill -KILL "$run"
    fi
    wait "$run"
    rc=$?
    want=$(( 128 + $(kill -l "$sig") ))
    [ "$rc" -eq "$want" ] || bad "SIG$sig: exit $rc, expected $want"
    before=$failed
    check_clean "SIG$sig then SIG$sig during cleanup" "$run" "$procs"
    [ "$failed" -eq "$before" ] && ok "SIG$sig, repeated during cleanup: exit $rc, nothing left"
done

# SIGKILL: nothing runs the cleanup; the next run removes what is left
if start_run; then
    dead=$run
    procs=$(run_pids "$dead")
    kill -KILL "$dead"
    wait "$dead" 2>/dev/null
    sleep 0.5
    [ -n "$(run_ns "$dead")" ] || bad "SIGKILL: expected the killed run's namespaces to be left"
    [ -e "$TMPDIR/emucluster.$dead" ] || bad "SIGKILL: expected the killed run's directory to be left"
    "$emu" --nodes 2 --ranks-per-node 1 -- true > "$tmp/next.out" 2>&1 &
    next=$!
    started+=("$next")
    wait "$next"
    rc=$?
    [ "$rc" -eq 0 ] || { bad "the run after a SIGKILL exited $rc"; cat "$tmp/next.out"; }
    grep -q "removing what an earlier run (pid $dead) left behind" "$tmp/next.out" ||
        bad "the next run did not say it removed the killed run's leftovers"
    before=$failed
    check_clean "SIGKILL, then a new run" "$dead" "$procs"
    check_clean "the new run" "$next" ""
    [ "$failed" -eq "$before" ] && ok "SIGKILL: the next run removed the leftovers, then its own"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
