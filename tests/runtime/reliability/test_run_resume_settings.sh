#!/bin/sh
# A checkpoint records the settings its run depends on and --resume refuses another value, naming
# the setting and the flag that restores it; --steps may be extended (the run trains on to the new
# total) but not cut below the checkpoint's step. Rows: {flags of the resumed run, fragment}.
# Usage: test_run_resume_settings.sh FSMOE_RUN SOURCE_ROOT
set -eu
run=$1 root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args="--model $root/models/tiny-moe.yaml --batch 2 --seq 32 --threads 1 --eval-every 0"
"$run" $args --steps 4 --stop-at 2 --save "$tmp/ck" > /dev/null || { echo "FAIL: save"; exit 1; }
fails=0 rows=0
refuse() { # fragment flags...
    frag=$1; shift
    rows=$((rows + 1))
    set +e
    timeout 60 "$run" $args --resume "$tmp/ck" "$@" > "$tmp/out" 2> "$tmp/err"
    rc=$?
    set -e
    if [ "$rc" != 2 ] || ! grep -qF -- "$frag" "$tmp/err" || grep -q '^step ' "$tmp/out"; then
        echo "FAIL: $* -> exit $rc: $(head -2 "$tmp/err")"; fails=$((fails + 1))
    else
        echo "ok: $* -> $(head -1 "$tmp/err")"
    fi
}
refuse "settings.steps: the checkpoint is at step 2, this run stops at --steps 1" --steps 1
refuse "settings.global_batch: the checkpoint was trained with 2, this run has 4" --steps 4 --batch 4
refuse "settings.lr: the checkpoint was trained with 0.003, this run has 0.01" --steps 4 --lr 0.01
refuse "settings.lr_min" --steps 4 --min-lr 0.001
refuse "settings.warmup" --steps 4 --warmup 3
refuse "settings.weight_decay" --steps 4 --weight-decay 0.1
refuse "settings.clip" --steps 4 --clip 0.5
refuse "settings.capacity_factor" --steps 4 --capacity-factor 2
refuse "settings.gate_noise" --steps 4 --gate-noise 0.1
refuse "settings.aux_loss" --steps 4 --aux-loss 0.1
refuse "checkpoint was trained with --seed 1234, this run has --seed 9" --steps 4 --seed 9
refuse "checkpoint is for another model: seq is 32 there, 64" --steps 4 --seq 64
refuse "checkpoint is for another model: expert is 0 there, 1" --steps 4 --expert swiglu
# the schedule it was saved with: steps 3 and 4
"$run" $args --resume "$tmp/ck" --steps 4 > "$tmp/out" || { echo "FAIL: resume"; exit 1; }
grep -q "resumed from $tmp/ck/manifest.yaml at step 2" "$tmp/out" || { echo "FAIL: no resume line"; exit 1; }
[ "$(grep -c '^step [34]/4 ' "$tmp/out")" = 2 ] || { echo "FAIL: expected steps 3/4, 4/4"; exit 1; }
# the token order is how the layer is computed, not the model: saved under Tutel's, resumed
# under GShard's dense einsums, the run goes on with the losses of the saved order's run
"$run" $args --resume "$tmp/ck" --steps 4 --order gshard > "$tmp/out_g" ||
    { echo "FAIL: resume under --order gshard"; exit 1; }
loss() { awk '/^step 4\/4 / {print $5}' "$1"; }
awk -v a="$(loss "$tmp/out")" -v b="$(loss "$tmp/out_g")" 'BEGIN {
    d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 1e-3 * (a < 0 ? -a : a)) }' ||
    { echo "FAIL: step 4 loss $(loss "$tmp/out") (tutel) vs $(loss "$tmp/out_g") (gshard)"; exit 1; }
# extended: steps 3 .. 8 of a longer schedule
"$run" $args --resume "$tmp/ck" --steps 8 > "$tmp/out" || { echo "FAIL: extended resume"; exit 1; }
[ "$(grep -c '^step [3-8]/8 ' "$tmp/out")" = 6 ] || { echo "FAIL: expected steps 3..8 of 8"; exit 1; }
grep -q '^step [12]/' "$tmp/out" && { echo "FAIL: steps before the checkpoint ran again"; exit 1; }
# extended where the default warm-up (a tenth of --steps) would move: saved at step 20 of 30
# (warm-up 3), resumed to 60 (a fresh run's default: 6) keeps the saved warm-up
"$run" $args --steps 30 --stop-at 20 --save "$tmp/ck30" > /dev/null || { echo "FAIL: save at 20"; exit 1; }
"$run" $args --resume "$tmp/ck30" --steps 60 > "$tmp/out" 2> "$tmp/err" ||
    { echo "FAIL: extending --steps 30 to 60 without --warmup: $(head -2 "$tmp/err")"; exit 1; }
grep -q 'warmup=3 ' "$tmp/out" || { echo "FAIL: the resumed run did not keep warm-up 3"; exit 1; }
echo "$rows refusals, $fails failed; same and extended schedules resumed"
[ "$fails" = 0 ]
