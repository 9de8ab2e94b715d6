#!/bin/sh
# fsmoe-run --plan with a real plan from fsmoe-plan (design.md §9, §10):
#  1. fsmoe-plan makes a single-rank plan for tiny-moe (world 1, one GPU per node, on the
#     testbed-b profile: a GPU cluster, so its predicted time is not this host's);
#  2. fsmoe-run follows it: the same losses as the unpipelined run, the plan row in the resolved
#     configuration and `pred X ms` in every step line;
#  3. the same plan with its per-layer r raised (forward 3, backward 5 chunks; the planner picks
#     r = 1 on one rank, where there is no AllToAll to overlap) gives the same losses within
#     fp tolerance;
#     and its --report finds every planned task executed (conformance on one rank);
#  4. plans that do not match the run are refused, naming the field.
# Usage: test_runtime_plan.sh FSMOE_PLAN FSMOE_RUN SOURCE_ROOT
set -eu
plan=$1 run=$2 root=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
model="$root/models/tiny-moe.yaml"
cluster="$root/clusters/testbed-b.yaml"
shape="--batch 2 --seq 32"
common="--model $model $shape --steps 6 --threads 1 --eval-every 0"

"$plan" --model "$model" --cluster "$cluster" --world 1 --gpus-per-node 1 $shape \
    -o "$tmp/single.yaml" --quiet || fail "fsmoe-plan refused a single-rank plan"
grep -q "world: 1" "$tmp/single.yaml" || fail "plan is not for world 1"

"$run" $common > "$tmp/base.out" || fail "unpipelined run failed"
"$run" $common --plan "$tmp/single.yaml" > "$tmp/plan.out" || fail "run with the plan failed"
grep -q '^| plan .*predicts [0-9.]* ms/iteration on cluster testbed-b' "$tmp/plan.out" ||
    fail "no plan row in the resolved configuration"
n=$(grep -c '^step [0-9]*/6 | loss [0-9.]* | [0-9.]* ms | pred [0-9.]* ms | ' "$tmp/plan.out" || true)
[ "$n" = 6 ] || fail "expected 6 step lines with 'pred X ms', got $n"
grep -q '| pred ' "$tmp/base.out" && fail "'pred' printed without a plan"
# a profile's compute lines hold for the threads they were measured with (compute_threads):
# a run on another number says so, one on the same number does not (testbed-b, a GPU's
# profile, says none)
grep -q '^# warning: .* thread' "$tmp/plan.out" && fail "a thread warning without compute_threads"
for t in 2 1; do
    sed "s/^nodes:/compute_threads: $t\nnodes:/" "$cluster" > "$tmp/threads$t.yaml"
    "$plan" --model "$model" --cluster "$tmp/threads$t.yaml" --world 1 --gpus-per-node 1 $shape \
        -o "$tmp/threads$t-plan.yaml" --quiet || fail "fsmoe-plan on a profile with compute_threads $t"
    "$run" --model "$model" $shape --steps 1 --threads 1 --eval-every 0 \
        --plan "$tmp/threads$t-plan.yaml" > "$tmp/threads$t.out" || fail "run on compute_threads $t"
done
grep -q "^# warning: the profile .*threads2.yaml measured its GEMM and copy lines with 2 thread(s) per rank, this run computes on 1" \
    "$tmp/threads2.out" || fail "no warning where the profile's compute_threads (2) is not the run's (1)"
grep -q '^# warning: .* thread' "$tmp/threads1.out" && fail "a thread warning where they agree"

# losses: the step lines' loss field; equal within 1e-3 (printed to 4 decimals)
losses() { awk '/^step /{print $5}' "$1"; }
compare() {
    losses "$1" > "$tmp/a"; losses "$2" > "$tmp/b"
    [ "$(wc -l < "$tmp/a")" = 6 ] || fail "$1: expected 6 losses"
    paste "$tmp/a" "$tmp/b" | awk -v what="$3" '
        { d = $1 - $2; if (d < 0) d = -d; if (d > 1e-3) { bad++; print what ": step " NR ": " $1 " vs " $2 } }
        END { exit bad > 0 }' || fail "$3: losses differ"
}
compare "$tmp/base.out" "$tmp/plan.out" "planned r=1"

# --profile: the same losses, and a table whose categories and the rest add up to the step
# (each of the 8 numbers is printed to 0.01 ms: their rounding adds up to at most 0.04)
"$run" $common --profile > "$tmp/prof.out" || fail "--profile run failed"
compare "$tmp/base.out" "$tmp/prof.out" "--profile"
awk -F'|' '/^# kernel profile/ { t = 1; next }
    t && /^\| (GEMM|element-wise|attention|gate\/order|communication|optimizer|outside kernels)/ {
        sum += $3; rows++ }
    t && /^\| step / { step = $3; t = 0 }
    END { d = sum - step; if (d < 0) d = -d
          if (rows != 7 || step <= 0 || d > 0.0401) { print "rows " rows " sum " sum " step " step; exit 1 } }' \
    "$tmp/prof.out" || fail "--profile: the table does not add up to the step"
grep -Eq '^# GEMM: [0-9.e+-]+ GMAC per step at [0-9.]+ GMAC/s' "$tmp/prof.out" ||
    fail "--profile: no GEMM rate line"
# the GEMM shapes' times add up to the GEMM category's (the same clock reads), to the rows'
# rounding; the shares to 100 %, each printed to 0.1 % (so off by up to 0.05 % a row)
awk -F'|' '/^# kernel profile/ { t = 1 }
    t && /^\| GEMM / { gemm = $3 }
    /^# GEMM shapes by time/ { s = 1; next }
    s && /^\| (nn|nt|tn|tt) / { sum += $8; share += $9; rows++; next }
    s && /^\| the other shapes/ { sum += $4; share += $5; rows++; next }
    s && !/^\| *op / { s = 0 }
    END { d = sum - gemm; if (d < 0) d = -d
          if (rows < 2 || d > 0.0005 * rows + 0.005 ||
              share < 100 - 0.05 * rows - 0.001 || share > 100 + 0.05 * rows + 0.001) {
              print "rows " rows " shapes " sum " ms, GEMM " gemm " ms, shares " share "%"; exit 1 } }' \
    "$tmp/prof.out" || fail "--profile: the GEMM shapes do not add up to the GEMM time"

# evaluation and checkpoints between the steps stay out of the profile: the same training
# steps' multiply-accumulates as without them (the same routing), and a table that adds up
"$run" $common --profile --eval-every 2 --save "$tmp/ck" --save-every 3 > "$tmp/prof_eval.out" ||
    fail "--profile run with evaluation and saves failed"
macs() { sed -n 's/^# GEMM: \([0-9.e+-]*\) GMAC per step.*/\1/p' "$1"; }
[ -n "$(macs "$tmp/prof.out")" ] && [ "$(macs "$tmp/prof.out")" = "$(macs "$tmp/prof_eval.out")" ] ||
    fail "--profile counted evaluation or saves: $(macs "$tmp/prof.out") against $(macs "$tmp/prof_eval.out") GMAC per step"
grep -q '^| kernels overlapped' "$tmp/prof_eval.out" &&
    fail "--profile with evaluation and saves: the kernels add up to more than the steps"

sed 's/forward: {r: 1,/forward: {r: 3,/; s/backward: {r: 1,/backward: {r: 5,/' \
    "$tmp/single.yaml" > "$tmp/chunked.yaml"
grep -q 'forward: {r: 3,' "$tmp/chunked.yaml" || fail "could not raise r in the plan"
"$run" $common --plan "$tmp/chunked.yaml" --report > "$tmp/chunked.out" ||
    fail "chunked plan run failed"
# one rank follows its graph too: every planned task id executed as planned (the exchanges of a
# one-member group are local copies, not AllToAll tasks; no Gradient-AllReduce runs)
grep -Eq '^# conformance: [1-9][0-9]* task ids .* planned, 0 mismatched' "$tmp/chunked.out" ||
    fail "one rank: $(grep '^# conformance:' "$tmp/chunked.out" || echo 'no conformance line')"
grep -q '^| plan *| schedule plan: fwd r 3,3,3,3 / bwd r 5,5,5,5' "$tmp/chunked.out" ||
    fail "the run did not take r from the plan"
compare "$tmp/base.out" "$tmp/chunked.out" "plan r=3/5"

# mismatches: each refused with exit status 2 naming the field
refuse() { # plan-args run-args field
    "$plan" --model "$4" --cluster "$cluster" --gpus-per-node 1 $1 -o "$tmp/bad.yaml" --quiet ||
        fail "fsmoe-plan $1 failed"
    if "$run" --model "$model" --steps 1 --threads 1 --eval-every 0 $2 --plan "$tmp/bad.yaml" \
        > /dev/null 2> "$tmp/err"; then
        fail "plan ($1) accepted for run ($2)"
    fi
    grep -q "$3" "$tmp/err" || { cat "$tmp/err"; fail "refusal does not name $3"; }
    echo "refused as expected: $(cat "$tmp/err")"
}
refuse "--world 1 --batch 4 --seq 32" "$shape" "model.batch: the plan has 4" "$model"
refuse "--world 1 --batch 2 --seq 64" "$shape" "model.seq: the plan has 64" "$model"
refuse "--world 2 $shape" "$shape" "parallel.world: the plan has 2" "$model"
refuse "--world 1 $shape --capacity-factor none" "$shape" "model.capacity_factor" "$model"
refuse "--world 1 $shape" "$shape --expert swiglu" "model.expert" "$model"
refuse "--world 1 --batch 8 --seq 128" "" "model.name: the plan is for 'bert-base-moe'" \
    "$root/models/bert-base-moe.yaml"
echo "OK"
