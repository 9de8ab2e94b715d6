#!/bin/sh
# fsmoe-run --resume refuses every damaged checkpoint: a real v2 checkpoint (manifest + shard) is
# copied and damaged one way per row
#   {damage, message fragment}
# (every header field of the shard, its index record, each region flipped, truncations, edits of
# the manifest's step / AdamW t / settings / seed / shard list, a missing, an extra, a foreign
# shard, special files in their place), and the run must exit 2 within the time bound, naming the
# damaged file, before training a step.
# Usage: test_run_ckpt_corrupt.sh FSMOE_RUN SOURCE_ROOT
set -eu
run=$1 root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model="$root/models/tiny-moe.yaml"
args="--model $model --batch 2 --seq 32 --threads 1 --eval-every 0"
"$run" $args --steps 2 --save "$tmp/good" > /dev/null || { echo "FAIL: save"; exit 1; }
"$run" $args --steps 2 --seed 7 --save "$tmp/other" > /dev/null || { echo "FAIL: save"; exit 1; }
"$run" $args --steps 4 --resume "$tmp/good" > "$tmp/out" || { echo "FAIL: good resume"; exit 1; }
grep -q "resumed from $tmp/good/manifest.yaml at step 2" "$tmp/out" || { echo "FAIL: no resume"; exit 1; }
SH=step-00000002/shard-00000-of-00001.bin
size=$(wc -c < "$tmp/good/$SH")
n=$(od -An -tu4 -j20 -N4 "$tmp/good/$SH" | tr -d ' ')
hdr=$((48 + n * 120 + 32)) # header bytes: fixed part, n records, the header's sha256
fails=0 rows=0

flip() { # file offset: the byte at offset, inverted
    b=$(od -An -tu1 -j"$2" -N1 "$1" | tr -d ' ')
    printf "\\$(printf %03o $((255 - b)))" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}
medit() { # sed-expression: edit the manifest, keeping its (now wrong) checksum line
    sed -i "$1" "$d/manifest.yaml"
}
reseal() { # recompute the manifest's checksum line after an edit (a deliberate forgery)
    head -n -1 "$d/manifest.yaml" > "$d/m"
    echo "manifest_sha256: $(sha256sum "$d/m" | cut -c1-64)" >> "$d/m"
    mv "$d/m" "$d/manifest.yaml"
}

row() { # what fragment command...
    what=$1 frag=$2; shift 2
    rows=$((rows + 1))
    d="$tmp/case"
    rm -rf "$d"; cp -r "$tmp/good" "$d"
    "$@"
    set +e
    timeout 60 "$run" $args --steps 4 --resume "$d" > "$tmp/out" 2> "$tmp/err"
    rc=$?
    set -e
    msg=$(head -1 "$tmp/err")
    if [ "$rc" != 2 ]; then
        echo "FAIL: $what: exit $rc (want 2): $msg"; fails=$((fails + 1)); return
    fi
    if ! grep -qF -- "$frag" "$tmp/err"; then
        echo "FAIL: $what: message lacks '$frag': $msg"; fails=$((fails + 1)); return
    fi
    if grep -q '^step ' "$tmp/out"; then
        echo "FAIL: $what: trained from a damaged checkpoint"; fails=$((fails + 1)); return
    fi
    echo "ok: $what: $msg"
}
S="\$d/$SH"
shard() { eval "$1 $S ${2-}"; }

# every field of the shard's fixed header (offsets in runtime/checkpoint.c)
row "magic"            "$SH: not an fsmoe-run checkpoint shard (bad magic)" shard flip 0
row "version"          "$SH: shard version"                                 shard flip 8
row "real size"        "$SH: shard holds 251-byte reals"                    shard flip 12
row "byte-order mark"  "$SH: shard written on a machine of another byte order" shard flip 16
row "tensor count"     "$SH: header checksum mismatch"                      shard flip 20
row "step"             "$SH: header checksum mismatch"                      shard flip 24
row "rank"             "$SH: header checksum mismatch"                      shard flip 32
row "world"            "$SH: header checksum mismatch"                      shard flip 36
row "ep"               "$SH: header checksum mismatch"                      shard flip 40
row "padding"          "$SH: header checksum mismatch"                      shard flip 44
# the first index record: name, shard kind, ndim, dim-0 start and total, shape
for off in 48 112 116 120 128 136 144; do
    row "index record byte $off" "$SH: header checksum mismatch" shard flip $off
done
row "header checksum"  "$SH: header checksum mismatch"                      shard flip $((hdr - 1))
# each region of the data, and the trailer
row "first data byte"  "$SH: checksum mismatch: the bytes give"             shard flip $hdr
row "middle data byte" "$SH: checksum mismatch: the bytes give"             shard flip $((size / 2))
row "last data byte"   "$SH: checksum mismatch: the bytes give"             shard flip $((size - 33))
row "trailer"          "$SH: checksum mismatch: the bytes give"             shard flip $((size - 1))
# truncations and growth (the manifest records the size)
for len in 0 47 100 $hdr $((size / 2)) $((size - 1)); do
    row "truncated to $len" "$SH: $len bytes, the manifest records $size" shard "truncate -s $len"
done
row "one byte appended" "the manifest records $size" eval "printf x >> $S"
# the manifest: edits (its own checksum), damage, forgeries with a recomputed checksum
row "manifest step"    "manifest.yaml: checksum mismatch" medit 's/^step: 2/step: 1/'
row "manifest adamw_t" "manifest.yaml: checksum mismatch" medit 's/^adamw_t: 2/adamw_t: 9/'
row "manifest lr"      "manifest.yaml: checksum mismatch" medit 's/^  lr: .*/  lr: 0.5/'
row "manifest steps"   "manifest.yaml: checksum mismatch" medit 's/^  steps: 2/  steps: 9/'
row "manifest seed"    "manifest.yaml: checksum mismatch" medit 's/seed: 1234/seed: 1/'
row "manifest sha256"  "manifest.yaml: checksum mismatch" medit '/file:/s/sha256: \([0-9a-f]\)/sha256: 0\1/'
row "manifest bytes"   "manifest.yaml: checksum mismatch" medit 's/bytes: /bytes: 1/'
row "no checksum line" "manifest.yaml: no 'manifest_sha256: " medit '$d'
row "manifest cut"     "manifest.yaml: no 'manifest_sha256: " eval 'truncate -s 300 $d/manifest.yaml'
row "manifest empty"   "manifest.yaml: no 'manifest_sha256: " eval ': > $d/manifest.yaml'
row "forged step"      "manifest.yaml" eval "medit 's/^step: 2/step: 3/; s/step: 2}/step: 3}/'; reseal"
row "forged lr"        "manifest.yaml: settings.lr: the checkpoint was trained with 0.7" \
    eval "medit 's/^  lr: .*/  lr: 0.7/'; reseal"
row "forged batch"     "manifest.yaml: settings.global_batch" \
    eval "medit 's/^  global_batch: 2/  global_batch: 4/'; reseal"
row "forged extra shard" "manifest.yaml" \
    eval "medit 's/^\\(  - {file: shard-00000-of-00001.bin.*\\)/\\1\\n\\1/'; reseal"
row "forged world"     "manifest.yaml" eval "medit 's/world: 1,/world: 2,/'; reseal"
# shards missing, extra, foreign, or not files
row "missing shard"    "$SH: cannot open shard 0 of 1" eval "rm $S"
row "missing step dir" "manifest.yaml: the step directory it names" eval 'rm -r $d/step-00000002'
row "foreign shard"    "$SH: checksum mismatch" eval "cp $tmp/other/$SH $S"
row "shard is a FIFO"  "$SH: cannot open shard 0 of 1 listed in" eval "rm $S; mkfifo $S"
row "shard is a dir"   "$SH: cannot open shard 0 of 1 listed in" eval "rm $S; mkdir $S"
row "manifest is a FIFO" "manifest.yaml: cannot read checkpoint manifest: not a regular file" \
    eval 'rm $d/manifest.yaml; mkfifo $d/manifest.yaml'
row "manifest of another run" "manifest.yaml: checkpoint was trained with --seed 7" eval "cp $tmp/other/manifest.yaml $d/"
echo "$rows rows, $fails failed"
[ "$fails" = 0 ]
