#!/bin/sh
# CI regression of plans (test `cli_golden_plans`): for every golden in scripts/goldens.list,
# plan again into a temporary directory and compare with `fsmoe-plan diff` (any changed decision
# or predicted time beyond the tolerance fails, with the diff printed); check that planning twice
# gives byte-identical files and that `--regenerate` of the golden reproduces the plan; run
# `explain` on it. Then a few end-to-end CLI checks (exit codes and messages).
#   usage: scripts/check-goldens.sh FSMOE_PLAN_EXE      (FSMOE_SOURCE_ROOT: repository root)
set -eu

if [ $# -ne 1 ]; then
    echo "usage: $0 FSMOE_PLAN_EXE" >&2
    exit 2
fi
exe=$1
case $exe in
/*) ;;
*) exe=$(pwd)/$exe ;;
esac
root=${FSMOE_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fsmoe-goldens.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP

failures=0
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

# --- goldens -------------------------------------------------------------------------------
count=0
first=
second=
while read -r golden model cluster extra; do
    case $golden in '' | '#'*) continue ;; esac
    count=$((count + 1))
    name=$(basename "$golden" .yaml)
    if [ -z "$first" ]; then first=$golden; elif [ -z "$second" ]; then second=$golden; fi
    if [ ! -f "$golden" ]; then
        fail "$golden is missing (generate it with scripts/regen-goldens.sh and commit it)"
        continue
    fi
    new=$tmp/$name.yaml
    # shellcheck disable=SC2086
    if ! "$exe" --model "$model" --cluster "$cluster" $extra -o "$new" --quiet \
        2> "$tmp/$name.err"; then
        fail "$golden: planning failed:"
        cat "$tmp/$name.err"
        continue
    fi
    rc=0
    "$exe" diff "$golden" "$new" > "$tmp/$name.diff" 2>&1 || rc=$?
    if [ $rc -ne 0 ]; then
        fail "$golden differs from a fresh plan (exit $rc); if the change is intended, run" \
            "scripts/regen-goldens.sh and commit plans/:"
        cat "$tmp/$name.diff"
    fi
    # shellcheck disable=SC2086
    "$exe" --model "$model" --cluster "$cluster" $extra -o "$tmp/$name.again.yaml" --quiet
    cmp -s "$new" "$tmp/$name.again.yaml" || fail "$golden: planning twice gave different files"
    rc=0
    "$exe" --regenerate "$golden" -o "$tmp/$name.regen.yaml" --quiet 2> "$tmp/$name.err" || rc=$?
    if [ $rc -ne 0 ]; then
        fail "$golden: --regenerate failed (exit $rc):"
        cat "$tmp/$name.err"
    elif ! cmp -s "$new" "$tmp/$name.regen.yaml"; then
        fail "$golden: --regenerate does not reproduce the plan made from goldens.list:"
        diff "$new" "$tmp/$name.regen.yaml" | head -20 || true
    fi
    if ! "$exe" explain "$golden" > "$tmp/$name.explain" 2>&1; then
        fail "$golden: explain failed:"
        cat "$tmp/$name.explain"
    elif ! grep -q "predicted iteration" "$tmp/$name.explain"; then
        fail "$golden: explain printed no totals"
    fi
    echo "ok: $golden"
done < scripts/goldens.list
[ "$count" -ge 8 ] || fail "only $count goldens listed (at least 8 expected)"

# --- command-line behaviour ------------------------------------------------------------------
# expect_exit CODE FRAGMENT CMD...: CMD exits CODE and its stderr+stdout contain FRAGMENT.
expect_exit() {
    want=$1
    fragment=$2
    shift 2
    rc=0
    "$@" > "$tmp/out" 2>&1 || rc=$?
    if [ $rc -ne "$want" ]; then
        fail "'$*' exited $rc, expected $want:"
        cat "$tmp/out"
    elif [ -n "$fragment" ] && ! grep -qF -- "$fragment" "$tmp/out"; then
        fail "'$*' output lacks '$fragment':"
        cat "$tmp/out"
    fi
}

m=models/tiny-moe.yaml
c=clusters/testbed-b.yaml
expect_exit 0 "usage:" "$exe" --help
expect_exit 0 "fsmoe-plan " "$exe" --version
expect_exit 2 "unknown option '--bogus'" "$exe" --model $m --cluster $c --bogus
expect_exit 2 "did you mean --batch" "$exe" --model $m --cluster $c --bach 4
expect_exit 2 "--batch: 'abc' is not an integer" "$exe" --model $m --cluster $c --batch abc
expect_exit 2 "auto, fsmoe, fsmoe-paper, parm, monta" "$exe" --model $m --cluster $c --method x
expect_exit 2 "--cluster is required" "$exe" --model $m
expect_exit 2 "models/no-such-model.yaml" "$exe" --model models/no-such-model.yaml --cluster $c
expect_exit 2 "clusters/no-such.yaml" "$exe" --model $m --cluster clusters/no-such.yaml
expect_exit 2 "$tmp/absent.yaml" "$exe" explain "$tmp/absent.yaml"
expect_exit 2 "exactly two plan files" "$exe" diff "$tmp/absent.yaml"
# E = 4 experts cannot be spread over ep = 8 ranks: an input error naming the problem.
expect_exit 2 "ep" "$exe" --model $m --cluster $c --world 32 --quiet
# Writing to a directory that does not exist is refused before any work (exit 2, naming -o).
expect_exit 2 "-o $tmp/no/dir/plan.yaml" "$exe" --model $m --cluster $c --world 16 \
    -o "$tmp/no/dir/plan.yaml" --quiet
if [ -n "$first" ] && [ -n "$second" ] && [ -f "$first" ] && [ -f "$second" ]; then
    expect_exit 1 "difference" "$exe" diff "$first" "$second"
    expect_exit 0 "" "$exe" diff "$first" "$first"
    # A changed decision in a copy of a golden is caught and named.
    sed 's/^\(    forward: {r: \)\([0-9]*\)/\1999/' "$first" > "$tmp/edited.yaml"
    expect_exit 1 "forward.r:" "$exe" diff "$first" "$tmp/edited.yaml"
fi
# stdout output equals the file output.
"$exe" --model $m --cluster $c --world 16 --quiet > "$tmp/stdout.yaml"
"$exe" --model $m --cluster $c --world 16 --quiet -o "$tmp/file.yaml"
cmp -s "$tmp/stdout.yaml" "$tmp/file.yaml" || fail "plan on stdout differs from plan in a file"
ls "$tmp"/*.tmp.* > /dev/null 2>&1 && fail "a temporary plan file was left behind"

if [ $failures -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "all golden plans and CLI checks passed ($count goldens)"
