#!/bin/sh
# kill -9 at random moments while fsmoe-run saves a checkpoint after every step, at least 50
# times: after each kill the checkpoint (the manifest and the shards it names) must resume, and
# the next run with --save must remove whatever the killed save left (temporaries, a step
# directory no manifest names) before its first step.
# Usage: test_run_kill9.sh FSMOE_RUN SOURCE_ROOT [KILLS]
set -eu
run=$1 root=$2 kills=${3:-60}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/err" 2>/dev/null; exit 1; }
args="--model $root/models/tiny-moe.yaml --batch 2 --seq 32 --threads 1 --eval-every 0 --steps 100000"
ck="$tmp/ck"
"$run" $args --stop-at 1 --save "$ck" > /dev/null || fail "first save"
seed=${FSMOE_TEST_SEED:-$$}
left=0 k=0 prev=1
while [ $k -lt "$kills" ]; do
    k=$((k + 1))
    "$run" $args --resume "$ck" --save "$ck" --save-every 1 > "$tmp/out" 2> "$tmp/err" &
    pid=$!
    # 50 .. 800 ms: past start-up and the resume, into the saves (one per step of ~10 ms)
    seed=$(( (seed * 1103515245 + 12345) % 2147483648 ))
    ms=$((50 + seed % 751))
    sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
    kill -KILL $pid 2>/dev/null || true
    set +e
    { wait $pid; } 2> /dev/null
    rc=$?
    set -e
    [ "$rc" = 137 ] || fail "kill $k: exit $rc, not killed (did the run end or fail?)"
    if find "$ck" -name '*.tmp.*' | grep -q . ||
       [ "$(ls -d "$ck"/step-* | wc -l)" != 1 ]; then
        left=$((left + 1))
    fi
    # the checkpoint resumes (nothing to train: --stop-at its own step; no --save: read only)
    s=$(sed -n 's/^step: //p' "$ck/manifest.yaml")
    [ -n "$s" ] && [ "$s" -ge "$prev" ] || fail "kill $k: manifest step '$s' (previous $prev)"
    prev=$s
    "$run" $args --stop-at "$s" --resume "$ck" > "$tmp/out" 2> "$tmp/err" ||
        fail "kill $k: the checkpoint at step $s does not resume"
    grep -q "resumed from $ck/manifest.yaml at step $s" "$tmp/out" || fail "kill $k: no resume line"
done
# the next start with --save cleans what the kills left before its first step (here it has no
# step to run, so no save of its own cleans anything)
"$run" $args --resume "$ck" --save "$ck" --stop-at "$prev" > "$tmp/out" 2> "$tmp/err" ||
    fail "the run after the kills"
grep -q "nothing to do" "$tmp/out" || fail "the run after the kills trained"
find "$ck" -name '*.tmp.*' | grep -q . && fail "temporaries left after the next start"
[ "$(ls -d "$ck"/step-* | wc -l)" = 1 ] || fail "stale step directories after the next start"
ls -a "$ck" | grep -q fsmoe-probe && fail "probe file left"
echo "$kills kills (seed ${FSMOE_TEST_SEED:-pid}); $left left a save half done; checkpoint at step $prev always resumed; the next start cleaned up"
