#!/bin/sh
# An interrupted fsmoe-run (SIGINT, SIGTERM) finishes the step in progress, writes nothing more and
# exits 128 + the signal; the last checkpoint it wrote stays complete and resumable and no
# temporary is left. With `mpi`, the signal goes to mpirun (which forwards it to the ranks): every
# rank stops at the same step and exits non-zero, mpirun too, within the communication timeout.
# Usage: test_run_signals.sh FSMOE_RUN SOURCE_ROOT [mpi]
set -eu
run=$1 root=$2 mode=${3:-single}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/err" 2>/dev/null; exit 1; }
args="--model $root/models/tiny-moe.yaml --batch 2 --seq 32 --threads 1 --eval-every 0"
timeout_s=10
launch=""
if [ "$mode" = mpi ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    launch="mpirun --oversubscribe -np 2"
fi

# sig expected-rank-exit save?
case_run() {
    sig=$1 want=$2 save=$3
    rm -rf "$tmp/ck" "$tmp/out" "$tmp/err"
    extra=""
    [ "$save" = save ] && extra="--save $tmp/ck --save-every 3"
    $launch "$run" $args --steps 100000 --comm-timeout $timeout_s $extra > "$tmp/out" 2> "$tmp/err" &
    pid=$!
    i=0
    until grep -q '^step 7/' "$tmp/out" 2>/dev/null; do
        i=$((i + 1)); [ $i -lt 600 ] || { kill -KILL $pid; fail "no step 7 within 60 s"; }
        sleep 0.1
    done
    t0=$(date +%s)
    kill -"$sig" $pid
    set +e
    wait $pid
    rc=$?
    set -e
    dt=$(($(date +%s) - t0))
    [ $dt -le $((timeout_s + 5)) ] || fail "SIG$sig: took $dt s to stop (comm timeout $timeout_s s)"
    if [ "$mode" = mpi ]; then
        [ "$rc" != 0 ] || fail "SIG$sig: mpirun exited 0"
        n=$(grep -c "interrupted by signal" "$tmp/err" || true)
        [ "$n" = 2 ] || fail "SIG$sig: $n of 2 ranks reported the interruption"
        [ "$(grep -o 'after step [0-9]*' "$tmp/err" | sort -u | wc -l)" = 1 ] ||
            fail "SIG$sig: ranks stopped at different steps"
        sleep 1
        ps -eo args | grep -v grep | grep -q -- "$tmp" && fail "SIG$sig: a rank is still running"
    else
        [ "$rc" = "$want" ] || fail "SIG$sig: exit $rc, want $want"
        grep -q "interrupted by signal .* after step [0-9]* of 100000" "$tmp/err" ||
            fail "SIG$sig: no interruption message"
    fi
    last=$(grep -o '^step [0-9]*' "$tmp/out" | tail -1 | cut -d' ' -f2)
    grep -q "after step $last of" "$tmp/err" || fail "SIG$sig: the message does not name step $last"
    echo "ok: SIG$sig ($mode) -> exit $rc after step $last: $(head -1 "$tmp/err")"
    [ "$save" = save ] || return 0
    # the checkpoint: complete, at the last multiple of 3, resumable; no temporaries
    find "$tmp/ck" -name '*.tmp.*' | grep -q . && fail "SIG$sig: temporaries left"
    s=$(sed -n 's/^step: //p' "$tmp/ck/manifest.yaml")
    [ $((s % 3)) = 0 ] && [ "$s" -le "$last" ] && [ "$s" -gt $((last - 3)) ] ||
        fail "SIG$sig: checkpoint at step $s, last step $last"
    # (one rank resumes the 2-rank run's global batch of 4)
    rb=""; [ "$mode" = mpi ] && rb="--batch 4"
    "$run" $args $rb --steps 100000 --stop-at "$s" --resume "$tmp/ck" > "$tmp/out" 2> "$tmp/err" ||
        fail "SIG$sig: the checkpoint does not resume"
    grep -q "resumed from $tmp/ck/manifest.yaml at step $s" "$tmp/out" || fail "no resume line"
}
if [ "$mode" = mpi ]; then
    case_run INT x save
    case_run TERM x save
else
    case_run INT 130 save
    case_run TERM 143 save
    case_run INT 130 nosave
    grep -q "no checkpoint was written by this run" "$tmp/err" || fail "message without --save"
fi
echo OK
