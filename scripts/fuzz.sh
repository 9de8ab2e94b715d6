#!/usr/bin/env bash
# Coverage-guided fuzzing of every libFuzzer harness in the repository.
#
#   scripts/fuzz.sh [SECONDS] [BUILD_DIR]      (SECONDS per harness, default 60; BUILD_DIR
#                                               default build: where fuzz-seed-cmd programs live
#                                               and where findings are kept)
#
# A harness is any tests/**/fuzz_*.c whose first comment block has a `fuzz-sources:` line
# (the convention, also described in tests/fuzz/fuzz_driver.c):
#   fuzz-sources:  repo-relative .c files it needs besides itself
#   fuzz-libs:     link flags (-lyaml -lm ...)
#   fuzz-seeds:    repo-relative globs of seed files, or folders (their files)
#   fuzz-seed-cmd: PROGRAM ARGS that writes seeds; {build} = BUILD_DIR, {corpus} = the corpus dir
#   fuzz-dict:     a libFuzzer dictionary (optional)
# Each is built with clang -fsanitize=fuzzer,address,undefined over its sources (so they are
# instrumented), run for SECONDS with -timeout=1 -rss_limit_mb=2048 on a copy of its seeds, and
# reported as `NAME: N executions, F findings`. Inputs that crash, leak, time out or run out of
# memory are kept in BUILD_DIR/fuzz-findings/. Exit 0 when nothing was found, 1 on any finding or
# build failure, 77 when clang or its libFuzzer runtime is missing (Debian: clang libclang-rt-dev).
set -uo pipefail
secs=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${2:-$root/build}
case "$build" in /*) ;; *) build=$PWD/$build ;; esac
case "$secs" in '' | *[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, got '$secs'" >&2; exit 2 ;; esac

cc=${FUZZ_CC:-clang}
command -v "$cc" > /dev/null 2>&1 || { echo "fuzz.sh: $cc not found: skipped (install clang)"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/fsmoe-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' \
    > "$work/probe.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined -o "$work/probe" "$work/probe.c" \
    > "$work/probe.log" 2>&1; then
    echo "fuzz.sh: $cc cannot link -fsanitize=fuzzer (libFuzzer runtime missing: install" \
        "libclang-rt-dev): skipped"
    exit 77
fi

# Include directories: every source folder.
incs=()
for d in libfsmoe comm runtime planner microbench; do
    [ -d "$root/$d" ] && incs+=("-I$root/$d")
done

# The value of `fuzz-KEY:` in the first comment block of a harness.
field() {
    awk -v key="fuzz-$2:" '
        { for (i = 1; i <= NF; i++) if ($i == key) { $1 = ""; sub("^.*" key "[ \t]*", ""); print; exit } }
        /\*\// { exit }' "$1"
}

findings_dir=$build/fuzz-findings
harnesses=$(cd "$root" && find tests -name 'fuzz_*.c' -type f | sort)
total_exec=0 total_found=0 n=0 failed=0
for h in $harnesses; do
    src=$root/$h
    sources=$(field "$src" sources)
    [ -n "$sources" ] || continue
    # a harness defines LLVMFuzzerTestOneInput and no main (drivers such as fuzz_driver.c do)
    grep -Eq '^int LLVMFuzzerTestOneInput\(' "$src" && ! grep -Eq '^int main\(' "$src" || continue
    name=$(basename "$h" .c)
    n=$((n + 1))
    libs=$(field "$src" libs)
    seeds=$(field "$src" seeds)
    seed_cmd=$(field "$src" seed-cmd)
    dict=$(field "$src" dict)
    hw=$work/$name
    mkdir -p "$hw/corpus" "$hw/artifacts"
    srcs=()
    for s in $sources; do srcs+=("$root/$s"); done
    # shellcheck disable=SC2086
    if ! "$cc" -g -O1 -std=c11 -D_POSIX_C_SOURCE=200809L -fsanitize=fuzzer,address,undefined \
        -fno-sanitize-recover=undefined "${incs[@]}" "-I$(dirname "$src")" -o "$hw/bin" "$src" \
        "${srcs[@]}" $libs > "$hw/cc.log" 2>&1; then
        tail -20 "$hw/cc.log"
        echo "$name: BUILD FAILED ($cc -fsanitize=fuzzer)"
        failed=1
        continue
    fi
    (
        cd "$root" || exit 1
        for g in $seeds; do
            for f in $g; do
                if [ -d "$f" ]; then
                    find "$f" -maxdepth 1 -type f -exec cp {} "$hw/corpus/" \;
                elif [ -f "$f" ]; then
                    cp "$f" "$hw/corpus/"
                fi
            done
        done
    )
    if [ -n "$seed_cmd" ]; then
        cmd=${seed_cmd//\{build\}/$build}
        cmd=${cmd//\{corpus\}/$hw/corpus}
        # shellcheck disable=SC2086
        if ! (cd "$root" && $cmd) > "$hw/seed.log" 2>&1; then
            tail -5 "$hw/seed.log"
            echo "$name: seed command failed: $cmd (build BUILD_DIR first)"
            failed=1
            continue
        fi
    fi
    if [ -z "$(ls -A "$hw/corpus")" ]; then
        echo "$name: no seeds (fuzz-seeds: $seeds; fuzz-seed-cmd: $seed_cmd)"
        failed=1
        continue
    fi
    opts=(-max_total_time="$secs" -timeout=1 -rss_limit_mb=2048 -print_final_stats=1
          -artifact_prefix="$hw/artifacts/")
    [ -n "$dict" ] && opts+=(-dict="$root/$dict")
    (cd "$hw" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        ./bin "${opts[@]}" corpus > run.log 2>&1)
    rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$hw/run.log" | grep -o '[0-9]*$' | tail -1)
    execs=${execs:-0}
    found=$(find "$hw/artifacts" -type f | wc -l)
    if [ "$rc" -ne 0 ] && [ "$found" -eq 0 ]; then
        found=1 # a failure libFuzzer kept no input for (e.g. a leak at exit)
    fi
    total_exec=$((total_exec + execs))
    total_found=$((total_found + found))
    echo "$name: $execs executions, $found findings"
    if [ "$found" -gt 0 ]; then
        grep -E "ERROR|SUMMARY|runtime error|Test unit written" "$hw/run.log" | head -8 | sed 's/^/    /'
        mkdir -p "$findings_dir"
        for a in "$hw"/artifacts/*; do
            [ -e "$a" ] || continue
            cp "$a" "$findings_dir/$name-$(basename "$a")"
            echo "    input kept: $findings_dir/$name-$(basename "$a")"
        done
        cp "$hw/run.log" "$findings_dir/$name.log"
    fi
done
echo "total: $n harnesses, $total_exec executions, $total_found findings$([ "$failed" -ne 0 ] && echo ', some harnesses could not run')"
[ "$n" -gt 0 ] || { echo "fuzz.sh: no harness with a fuzz-sources: line under tests/"; exit 1; }
[ "$total_found" -eq 0 ] && [ "$failed" -eq 0 ]
