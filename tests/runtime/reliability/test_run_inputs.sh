#!/bin/sh
# fsmoe-run refuses inputs it cannot use before doing any work: every row is
#   {expected exit status, message fragment, arguments}
# and the run must end within the time bound (a FIFO given as --data once blocked for ever), print
# no step line (outputs are checked before the first step; the memory need before anything is
# allocated) and name the file (file:line:col for YAML) or the flag.
# Usage: test_run_inputs.sh FSMOE_RUN SOURCE_ROOT
set -eu
run=$1 root=$2
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
model="$root/models/tiny-moe.yaml"
ok="--model $model --batch 2 --seq 32 --steps 2 --threads 1 --eval-every 0"
fails=0 rows=0

# inputs of every kind
mkfifo "$tmp/fifo"
mkdir "$tmp/adir" "$tmp/ro"
echo "not a directory" > "$tmp/afile"
printf 'fsmoe_model: 1\nname: [unclosed\n' > "$tmp/broken.yaml"
sed 's/experts: 4/experts: 128/; s/top_k: 2/top_k: 1/' "$model" > "$tmp/e128.yaml"
sed 's/order: tutel/order: gshard/; s/gate: gshard/gate: softmoe/' "$model" > "$tmp/softmoe.yaml"
sed 's/vocab: 256/vocab: 64/' "$model" > "$tmp/v64.yaml"
head -c 20 "$root/data/jargon.txt" > "$tmp/small.txt"
printf '\377\377\377\377' > "$tmp/ff.bin"; cat "$root/data/jargon.txt" >> "$tmp/ff.bin"
cp "$root/data/jargon.txt" "$tmp/unreadable.txt"; chmod 000 "$tmp/unreadable.txt"
# an empty checkpoint directory; a manifest that is a FIFO
mkdir "$tmp/ck_empty" "$tmp/ck_fifo"; mkfifo "$tmp/ck_fifo/manifest.yaml"
chmod 555 "$tmp/ro"

row() { # expected-exit fragment args...
    want=$1 frag=$2; shift 2
    rows=$((rows + 1))
    set +e
    timeout 60 "$run" "$@" > "$tmp/out" 2> "$tmp/err"
    rc=$?
    set -e
    if [ "$rc" != "$want" ]; then
        echo "FAIL: exit $rc (want $want): $*"; sed 's/^/    /' "$tmp/err" | head -5
        fails=$((fails + 1)); return
    fi
    if ! grep -qF -- "$frag" "$tmp/err"; then
        echo "FAIL: message lacks '$frag': $*"; sed 's/^/    /' "$tmp/err" | head -5
        fails=$((fails + 1)); return
    fi
    if grep -q '^step ' "$tmp/out"; then
        echo "FAIL: trained before refusing: $*"; fails=$((fails + 1)); return
    fi
    echo "ok ($rc): $(head -1 "$tmp/err")"
}

# command line
row 2 "--model is required" --steps 2
row 2 "unknown option '--bogus'" $ok --bogus
row 2 "unexpected argument 'extra'" $ok extra
row 2 "--steps: needs a value" --model "$model" --steps
row 2 "--batch: 'x' is not an integer" $ok --batch x
row 2 "--seq: 70000 is out of range" $ok --seq 70000
row 2 "--model: empty path" --model ""
row 2 "--plan and --chunks both set r" $ok --plan x.yaml --chunks 2
row 2 "--save-every needs --save DIR" $ok --save-every 2
row 2 "--stop-at 5: must not exceed --steps" $ok --stop-at 5
row 2 "--ep 3: the expert-parallel group size must divide" $ok --ep 3
row 2 "--backend: 'tpu' is not one of host, cuda" $ok --backend tpu
row 2 "--gate: 'top1' is not one of" $ok --gate top1
row 2 "--mem-limit" $ok --mem-limit 12
# sizes: refused before anything is allocated, naming the flag, the need and the limit
row 2 "--batch: batch 20000 x seq 128 needs at least" --model "$model" --batch 20000 --steps 1
row 2 "more than the limit of" --model "$model" --batch 20000 --steps 1
row 2 "--batch and --seq: batch 64 x seq 512 needs at least" $ok --batch 64 --seq 512 --mem-limit 64M
row 2 "bytes, physical memory)" --model "$model" --batch 1000 --seq 8192
row 2 "--batch 1000000 x --seq 32 = 32000000 tokens per step" $ok --batch 1000000
row 2 "$root/models/mixtral-8x7b.yaml: the model's parameters (mixtral-8x7b)" \
    --model "$root/models/mixtral-8x7b.yaml" --mem-limit 1G
# the model file
row 2 "$tmp/missing.yaml: cannot open" --model "$tmp/missing.yaml"
row 2 "$tmp/adir" --model "$tmp/adir"
row 2 "$tmp/broken.yaml:" --model "$tmp/broken.yaml"
row 2 "--model $tmp/fifo: not a regular file (a FIFO)" --model "$tmp/fifo"
row 2 "--model /dev/zero: not a regular file (a device)" --model /dev/zero
# configuration errors name the flag, or the model file's field at file:line:col
row 2 "--gate: gate softmoe needs order gshard ($model:20:10: moe.order is tutel" $ok --gate softmoe
row 2 "$tmp/softmoe.yaml:19:9: moe.gate: gate softmoe needs order gshard (--order is tutel" \
    --model "$tmp/softmoe.yaml" --order tutel --batch 2 --seq 32
row 2 "--gate: gate xmoe takes at most 64 experts (E = 128)" --model "$tmp/e128.yaml" --gate xmoe \
    --batch 2 --seq 32
# the data
row 2 "$tmp/missing.txt: cannot open: No such file" $ok --data "$tmp/missing.txt"
row 2 "$tmp/fifo: not a regular file (a FIFO)" $ok --data "$tmp/fifo"
row 2 "$tmp/adir: not a regular file (a directory)" $ok --data "$tmp/adir"
row 2 "/dev/zero: not a regular file (a device)" $ok --data /dev/zero
row 2 "$tmp/small.txt: 20 bytes is too small" $ok --data "$tmp/small.txt"
row 2 "$tmp/ff.bin: byte 0 has value 255, outside the model's vocabulary of 64" \
    --model "$tmp/v64.yaml" --batch 2 --seq 32 --data "$tmp/ff.bin"
if [ "$(id -u)" != 0 ]; then
    row 2 "$tmp/unreadable.txt: cannot open: Permission denied" $ok --data "$tmp/unreadable.txt"
fi
# the plan
row 2 "$tmp/missing-plan.yaml" $ok --plan "$tmp/missing-plan.yaml"
row 2 "$tmp/broken.yaml" $ok --plan "$tmp/broken.yaml"
row 2 "--plan $tmp/fifo: not a regular file (a FIFO)" $ok --plan "$tmp/fifo"
# the checkpoint to resume
row 2 "$tmp/nothing/manifest.yaml: cannot read checkpoint manifest" $ok --resume "$tmp/nothing"
row 2 "$tmp/ck_empty/manifest.yaml: cannot read checkpoint manifest" $ok --resume "$tmp/ck_empty"
row 2 "$tmp/ck_fifo/manifest.yaml: cannot read checkpoint manifest: not a regular file" \
    $ok --resume "$tmp/ck_fifo"
row 2 "$tmp/afile/manifest.yaml: cannot read checkpoint manifest" $ok --resume "$tmp/afile"
# outputs: checked on every rank before the first step
row 2 "--save $tmp/afile: not a directory" $ok --save "$tmp/afile"
row 2 "--save $tmp/no/such/dir: cannot create the checkpoint directory" $ok --save "$tmp/no/such/dir"
row 2 "--save /proc/fsmoe-ck: cannot create the checkpoint directory" $ok --save /proc/fsmoe-ck
if [ "$(id -u)" != 0 ]; then
    row 2 "--save $tmp/ro: cannot write in the checkpoint directory" $ok --save "$tmp/ro"
fi
# the good run still runs (and creates its --save directory)
"$run" $ok --save "$tmp/newdir" > "$tmp/out" 2> "$tmp/err" || { cat "$tmp/err"; exit 1; }
[ -f "$tmp/newdir/manifest.yaml" ] || { echo "FAIL: no checkpoint written"; exit 1; }
ls -a "$tmp/newdir" | grep -q fsmoe-probe && { echo "FAIL: probe file left"; exit 1; }
echo "$rows rows, $fails failed"
[ "$fails" = 0 ]
