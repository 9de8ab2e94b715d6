#!/usr/bin/env bash
# Implements: fsmoe-bench's command line end to end, table-driven (one rank, no mpirun): every
# flag error exits 2 with a message naming the flag, --help exits 0, and an output that cannot
# be written (missing directory, a directory, the same file twice) exits 2 naming the flag and
# the path within seconds, before any measuring, leaving no temporary behind.
# usage: bench_cli.sh FSMOE_BENCH
set -u
bench=$1
tmp=$(mktemp -d /tmp/fsmoe-bench-cli.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Under ASan (the unit suite's sanitizer run) every MPI program "leaks" Open MPI's allocations,
# most from components unloaded at MPI_Finalize, whose stacks no suppression can match: leak
# checking is off here; memory errors are still caught. The parser's leaks are checked by
# test_bench_options and fuzz_bench_cli, which run without MPI.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
mkdir "$tmp/dir" "$tmp/ro"
# a special file (never /dev/null: a broken build would rename its output over it)
mkfifo "$tmp/fifo"
chmod 555 "$tmp/ro"
passed=0 failed=0

# Rows: EXPECTED_EXIT | MESSAGE FRAGMENT | ARGUMENTS (tab-separated). The default sizes are
# kept where a row must fail before measuring: measuring them takes minutes, past the bound.
rows=$(cat <<ROWS
0|usage: mpirun|--help
0|usage: mpirun|-h
2|unknown option --bogus|--bogus
2|unknown option -x|-x
2|-o needs a value|-o
2|unexpected argument 'stray'|stray
2|-b: 'abc'|-b	abc
2|larger than -e|-b	8M	-e	1M
2|-f: 1 must be greater than 1|-f	1
2|exclude each other|-f	2	-i	1M
2|-n: 0 is out of range|-n	0
2|-w: -1 is out of range|-w	-1
2|-d: 'half'|-d	half
2|--op: 'avg'|--op	avg
2|-a: 4 is out of range|-a	4
2|-c: 2 is out of range|-c	2
2|--interference: 2 is out of range|--interference	2
2|--ops: 'bogus'|--ops	alltoall,bogus
2|--ops: 'bogus' is not one of: alltoall, alltoall_2dh, allgather|--ops	+bogus
0|hierarchical (2DH) AllToAll|--help
2|--tiers: empty list|--tiers	,
2|--gpus-per-node: 0 is out|--gpus-per-node	0
2|--gemm-shapes|--gemm-shapes	4096
2|--r2-threshold|--r2-threshold	1.5
2|--backend: 'gloo'|--backend	gloo
2|--max-iters 3 is smaller than -n 5|--max-iters	3
2|--precision: 2 is out of range|--precision	2
2|--outlier: 'far'|--outlier	far
2|--extra-time: -1 is out of range|--extra-time	-1
2|--comm-timeout: -1 is out of range|--comm-timeout	-1
2|--comm-timeout: 'soon'|--comm-timeout	soon
2|--name: expected 1 to 63 characters|--name	
2|--name: expected 1 to 63 characters|--name	$(printf 'n%.0s' $(seq 64))
2|-e 17179869184: 4294967296 float elements exceed MPI's largest count|-b	16G	-e	16G
2|uint8 elements exceed MPI's largest count|-d	uint8	-e	3G
2|--gemm-shapes 1048576:1048576 with --gemm-max|--gemm-shapes	1048576:1048576
2|-o: expected a file name, got ''|-o	
2|--json: expected a file name, got ''|--json	
2|-o $tmp/dir/: expected a file name, got a directory|-o	$tmp/dir/
2|-o and --json name the same file|-o	$tmp/p.yaml	--json	$tmp/p.yaml
2|--json and --plot name the same file|--json	$tmp/p.json	--plot	$tmp/p.json
2|-o: cannot be written: $tmp/none/p.yaml|-o	$tmp/none/p.yaml
2|--json: cannot be written: $tmp/none/p.json|--json	$tmp/none/p.json
2|--plot: cannot be written: $tmp/none/p.svg|--plot	$tmp/none/p.svg
2|-o $tmp/dir: expected a file, found a directory|-o	$tmp/dir
2|--json $tmp/dir: expected a file, found a directory|-o	$tmp/p.yaml	--json	$tmp/dir
2|--plot $tmp/dir: expected a file, found a directory|--plot	$tmp/dir
2|--plot $tmp/fifo: expected a file, found a special file|--plot	$tmp/fifo
2|-o: cannot be written: $tmp/ro/p.yaml|-o	$tmp/ro/p.yaml
2|world must equal dp|--dp	3
ROWS
)

while IFS='|' read -r want frag argline; do
    IFS=$'\t' read -r -a args <<< "$argline"
    # a trailing empty field (a flag given '') is dropped by read: put it back
    [[ "$argline" == *$'\t' ]] && args+=("")
    # root writes into a 555 directory: that row needs an ordinary user
    if [[ "$frag" == *"/ro/"* ]] && [ "$(id -u)" -eq 0 ]; then
        echo "skip: $frag (root can write anywhere)"
        continue
    fi
    start=$(date +%s)
    timeout 60 "$bench" "${args[@]}" > "$tmp/out" 2> "$tmp/err"
    rc=$?
    took=$(( $(date +%s) - start ))
    if [ "$rc" -ne "$want" ]; then
        failed=$((failed + 1)); echo "FAIL: fsmoe-bench ${args[*]}: exit $rc, expected $want"
        head -3 "$tmp/err"
    elif ! grep -qF -- "$frag" "$tmp/out" "$tmp/err"; then
        failed=$((failed + 1)); echo "FAIL: fsmoe-bench ${args[*]}: no '$frag' in"
        head -3 "$tmp/err"
    elif [ "$want" -eq 2 ] && grep -qE '^ +[0-9]+ +[0-9]+ ' "$tmp/out"; then
        failed=$((failed + 1)); echo "FAIL: fsmoe-bench ${args[*]}: measured before refusing"
    elif [ "$took" -ge 20 ]; then
        failed=$((failed + 1)); echo "FAIL: fsmoe-bench ${args[*]}: took ${took}s (measured?)"
    else
        passed=$((passed + 1))
    fi
done <<< "$rows"

# nothing left behind by the checks: no temporaries, no outputs
left=$(find "$tmp" -name '*.tmp.*' -o -name 'p.*' | head -5)
if [ -n "$left" ]; then
    failed=$((failed + 1)); echo "FAIL: files left behind: $left"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
