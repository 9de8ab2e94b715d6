#!/bin/sh
# Coverage-guided fuzzing of the checkpoint readers (runtime/checkpoint.c) with libFuzzer:
# builds fuzz_checkpoint_shard.c and fuzz_checkpoint_manifest.c with clang
# -fsanitize=fuzzer,address,undefined over the reader's own sources (so that they are
# instrumented), seeds each from a real checkpoint (made by the gcc-built drivers) and runs each
# for SECONDS. A crash leaves its input in the work directory and fails the test.
# Usage: fuzz_checkpoint.sh SOURCE_ROOT BUILD_ROOT [SECONDS]   (exit 77 = skipped: no clang)
set -eu
src=$1 build=$2 secs=${3:-20}
command -v clang > /dev/null 2>&1 || { echo "clang not found: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cflags="-g -O1 -std=c11 -D_POSIX_C_SOURCE=200809L -fsanitize=fuzzer,address,undefined
  -fno-sanitize-recover=undefined -I$src/runtime -I$src/libfsmoe"
lib="$src/runtime/checkpoint.c $src/runtime/params.c $src/runtime/adamw.c
  $src/libfsmoe/yaml_read.c $src/libfsmoe/yaml_write.c $src/libfsmoe/sha256.c
  $src/libfsmoe/status.c $src/libfsmoe/atomic_file.c"
for t in shard manifest; do
    # shellcheck disable=SC2086
    if ! clang $cflags -o "$work/fuzz_$t" "$src/tests/runtime/fuzz_checkpoint_$t.c" $lib \
        -lyaml -lm 2> "$work/cc_$t.log"; then
        cat "$work/cc_$t.log"
        echo "FAIL: cannot build the $t harness with clang -fsanitize=fuzzer"
        exit 1
    fi
    "$build/tests/runtime/fuzz_checkpoint_$t" "$t" "$work/corpus_$t" > /dev/null
    (cd "$work" && "./fuzz_$t" -max_total_time="$secs" -max_len=65536 -print_final_stats=1 \
        "corpus_$t" > "fuzz_$t.log" 2>&1) || {
        tail -40 "$work/fuzz_$t.log"
        for c in "$work"/crash-* "$work"/leak-* "$work"/timeout-*; do
            [ -e "$c" ] && cp "$c" "$build/" && echo "input kept: $build/$(basename "$c")"
        done
        echo "FAIL: libFuzzer found a failing input for the $t reader"
        exit 1
    }
    grep -E "stat::number_of_executed_units|cov:" "$work/fuzz_$t.log" | tail -2
done
echo "OK"
