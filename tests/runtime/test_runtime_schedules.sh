#!/usr/bin/env bash
# Every schedule fsmoe-run executes on 4-rank layouts (dp 4 · ep 2; mp 2 · ep 2 · esp 2;
# mp 2 · ep 2; mp 2 · esp 2 without EP; esp 2 without MP; 2 x 2 nodes with the hierarchical
# AllToAll) follows its graph and trains like one rank (design.md §10.1):
#  1. a cluster profile of these 4 local ranks (fsmoe-bench, small sizes) and a plan for tiny-moe;
#  2. one rank on the whole global batch: the reference losses;
#  3. per schedule (plan, deepspeed, tutel, tutel-improved, pipemoe-lina, fsmoe, fsmoe-no-iio):
#     4 ranks with --schedule S --report; the report's conformance line must say that every
#     planned AllToAll, expert and Gradient-AllReduce task ran as often as the graph has it and
#     that the executed Gradient-AllReduce bytes equal the planned ones, and that every task the
#     graph times (gate, element-wise, head and optimizer too) ran in every step; the losses equal the
#     reference's (fp32, printed to 4 decimals: within 2e-3). The plan, FSMoE and Lina must
#     all-reduce in several tasks (the partition is executed, not a tail). The routing lines
#     (token copies kept, the capacity's rows run, per MoE layer) equal the reference's: the
#     same global batch is routed the same whatever the layout, and the lines sum every rank's
#     counts (MP members duplicate the tokens, PauseMP splits them);
#  4. --schedule with an unknown name and --schedule without --plan exit 2 naming the flag.
# Usage: test_runtime_schedules.sh FSMOE_BENCH FSMOE_PLAN FSMOE_RUN SOURCE_ROOT
set -u
bench=$1 plan=$2 run=$3 root=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpi=(timeout 300 mpirun --allow-run-as-root --oversubscribe --mca mpi_yield_when_idle 1)
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
model="$root/models/tiny-moe.yaml"
seq=64 rank_batch=4 # every rank's sequences in check() below, and their length
common=(--model "$model" --seq "$seq" --steps 6 --threads 1 --eval-every 0)

"${mpi[@]}" -np 4 "$bench" -b 64K -e 1M -f 2 -n 3 --extra-time 0 --gemm-min 64K \
    --gemm-max 512K --gemm-step 128K -o "$tmp/local4.yaml" > "$tmp/bench.log" 2>&1 ||
    { tail -5 "$tmp/bench.log"; echo "FAIL: fsmoe-bench on 4 ranks"; exit 1; }
# without_interference PROFILE: the profile's interference section (the factors, and the
# ranks' arrival skew at a collective: about 2 ms for 4 ranks on 2 cores) rightly makes the
# planner keep the gradients in one AllReduce after the backward, and prefer the candidate with
# the fewest pieces within 2 % of the fastest; these runs are to execute a partition, so they
# plan without it (test_plan_model checks what the planner does with it)
without_interference() {
    grep -q '^  sync_latency_s: ' "$1" || { echo "FAIL: $1 has no sync latency"; exit 1; }
    awk '/^interference:/ {skip = 1; next} skip && /^  / {next} {skip = 0; print}' "$1" > "$1.tmp" &&
        mv "$1.tmp" "$1"
    ! grep -q 'slowdown' "$1" || { echo "FAIL: $1 keeps its interference factors"; exit 1; }
}
without_interference "$tmp/local4.yaml"
"$plan" --model "$model" --cluster "$tmp/local4.yaml" --world 4 --gpus-per-node 4 --dp 4 \
    --mp 1 --esp 1 --ep 2 --batch 4 --seq 64 -o "$tmp/plan.yaml" --quiet ||
    { echo "FAIL: fsmoe-plan for 4 ranks"; exit 1; }
"$run" "${common[@]}" --batch 16 > "$tmp/one.out" 2>&1 || { cat "$tmp/one.out"; exit 1; }
losses() { awk '/^step /{print $5}' "$1"; }
# per MoE layer: the kept and filled percentages of the routing lines
routing() { sed -n 's/^  routing \(L[0-9]*\) *\([0-9.]*\) % of the token copies kept.*experts ran *\([0-9.]*\) %.*/\1 \2 \3/p' "$1"; }
# reference ONE_RANK_OUT REF: the one-rank run's losses (REF) and routing (REF.routing)
reference() { losses "$1" > "$2"; routing "$1" > "$2.routing"; }
reference "$tmp/one.out" "$tmp/ref"
[ "$(wc -l < "$tmp/ref.routing")" -ge 1 ] || { echo "FAIL: the one-rank run has no routing lines"; exit 1; }
# exactly known: a capacity of every token (f = E/k = 2 caps at N) keeps every copy, and the
# experts then run k·N of the E·N slots: 50 % (tiny-moe: E 4, k 2)
"$run" "${common[@]}" --batch 2 --steps 2 --capacity-factor 2 > "$tmp/cap.out" 2>&1 ||
    { cat "$tmp/cap.out"; exit 1; }
routing "$tmp/cap.out" | awk '$2 != "100.0" || $3 != "50.0" {bad++} END {exit !(NR >= 1 && !bad)}' ||
    { grep routing "$tmp/cap.out"; fail "routing lines at capacity N: expected 100.0 % kept and 50.0 % run"; }
[ "$(wc -l < "$tmp/ref")" = 6 ] || { echo "FAIL: the one-rank run has no 6 losses"; exit 1; }

# check PLAN REF SCHEDULE...: each schedule on 4 ranks conforms to its graph and trains like
# the reference
check() {
    local pl=$1 ref=$2 tag=$3
    shift 3
    for s in "$@"; do
    out="$tmp/$tag-$s.out"
    if ! "${mpi[@]}" -np 4 "$run" "${common[@]}" "${extra[@]}" --batch "$rank_batch" --plan "$pl" \
        --schedule "$s" --report > "$out" 2>&1; then
        tail -5 "$out"; fail "$tag $s: the run failed"; continue
    fi
    conf=$(grep '^# conformance:' "$out")
    echo "$tag $s: $conf"
    echo "$conf" | grep -Eq ': [1-9][0-9]* task ids .* planned, 0 mismatched' ||
        fail "$tag $s: executed tasks differ from the graph's"
    grep -Eq '^# conformance on all 4 ranks: 0 task ids mismatched .*; 0 predicted task ids not measured$' "$out" ||
        fail "$tag $s: $(grep '^# conformance on all' "$out" || echo 'no all-ranks conformance')"
    # every task the graph times (gate, element-wise, head and optimizer included) ran under
    # its label in every step, and those kinds are priced (the profile has a copy line)
    grep -Eq '^# join: [1-9][0-9]* task ids predicted, 0 not measured in every step$' "$out" ||
        fail "$tag $s: $(grep -A3 '^# join:' "$out" || echo 'no join line')"
    for k in gate elementwise head optimizer; do
        grep -Eq "^  $k +[0-9.]+ +[0-9.]*[1-9][0-9.]* +[0-9.]+ " "$out" ||
            fail "$tag $s: no predicted time for $k: $(grep "^  $k " "$out")"
    done
    planned=$(echo "$conf" | sed -n 's/.*Gradient-AllReduce \([0-9.]*\) MB planned.*/\1/p')
    executed=$(echo "$conf" | sed -n 's/.* MB planned, \([0-9.]*\) MB executed.*/\1/p')
    { [ -n "$planned" ] && [ "$planned" = "$executed" ]; } ||
        fail "$tag $s: Gradient-AllReduce planned '$planned' MB, executed '$executed' MB"
    ntasks=$(sed -n 's/^| plan .*; \([0-9]*\) Gradient-AllReduce tasks.*/\1/p' "$out")
    case "$s" in
        # (Tutel-Improved's dense windows hold what the profile predicts fits beside each
        # layer's dense backward: with a quick profile nothing may, and one tail task is right)
        plan|pipemoe-lina|fsmoe|fsmoe-no-iio)
            [ "${ntasks:-0}" -gt 1 ] || fail "$tag $s: ${ntasks:-no} Gradient-AllReduce tasks" ;;
    esac
    losses "$out" > "$tmp/got"
    paste "$ref" "$tmp/got" | awk -v s="$s" '
        NF != 2 { bad++; next }
        { d = $1 - $2; if (d < 0) d = -d; if (d > 2e-3) { bad++; print s ": step " NR ": " $1 " vs " $2 } }
        END { exit (bad > 0 || NR != 6) }' || fail "$tag $s: losses differ from one rank's"
    # (a top-k tie broken otherwise by fp32 summation order moves a copy: 0.2 points of slack)
    routing "$out" | paste -d' ' "$ref.routing" - | awk -v s="$s" '
        NF != 6 || $1 != $4 { bad++; next }
        { for (i = 2; i <= 3; i++) { d = $i - $(i + 3); if (d < 0) d = -d; if (d > 0.2) { bad++; print s ": " $0 } } }
        END { exit (bad > 0 || NR == 0) }' || fail "$tag $s: routing lines differ from one rank's"
    # GShard's dense routing matrices (DeepSpeed's order; the rest use Tutel's): E columns per
    # slot of a rank's busiest expert, over the k·f·N copies priced. The busiest expert holds
    # at least the mean of the rank's kept copies (so the ratio is at least kept / f) and at
    # most the global capacity ceil(k·f·N_global/E) ($width_max; empty without a capacity:
    # then no width either)
    if [ "$s" = deepspeed ] && [ -n "$width_max" ]; then
        sed -n 's/^  routing L[0-9]* *\([0-9.]*\) % of the token copies kept.*matrices \([0-9.]*\)x the width priced.*/\1 \2/p' "$out" |
            awk -v hi="$width_max" -v f="$cap_f" '{ lo = $1 / 100 / f - 0.01
                if ($2 < lo || $2 > hi + 0.01) { bad++; print "kept " $1 " %, width " $2 "x: outside [" lo ", " hi "]" } }
                END { exit (bad > 0 || NR == 0) }' ||
            fail "$tag $s: the dense routing width is missing or outside its bounds"
    elif grep -q 'dense dispatch' "$out"; then
        fail "$tag $s: a dense routing width under Tutel's order or without a capacity"
    fi
    done
}
extra=()
# the widest the dense routing can be: E·ceil(k·f·N_global/E) columns over k·f·N_local, with
# the model's E, k and f (dp 4: the 4 ranks' tokens share one capacity)
model_key() { awk -v k="$1:" '$1 == k {print $2; exit}' "$model"; }
cap_E=$(model_key experts) cap_k=$(model_key top_k) cap_f=$(model_key capacity_factor)
width_max=$(awk -v E="$cap_E" -v k="$cap_k" -v f="$cap_f" -v n=$((rank_batch * seq)) \
    -v ng=$((4 * rank_batch * seq)) 'BEGIN {
    c = k * f * ng / E; C = int(c); if (C < c - 1e-9) C++; print E * C / (k * f * n) }')
check "$tmp/plan.yaml" "$tmp/ref" dp4ep2 plan deepspeed tutel tutel-improved pipemoe-lina \
    fsmoe fsmoe-no-iio
# the same plan with Lina's gradient micro-ops instead of its windows (gradient_schedule: lina,
# libfsmoe/plan.h): its own schedule runs them, in several tasks, and trains like one rank
sed -e 's/in_window_bytes: [0-9.e+-]*/in_window_bytes: 0/; s/step2_bytes: [0-9.e+-]*/step2_bytes: 0/' \
    -e 's/^prefix_window_bytes: .*/prefix_window_bytes: 0\ngradient_schedule: lina/' \
    "$tmp/plan.yaml" > "$tmp/plan-lina.yaml"
check "$tmp/plan-lina.yaml" "$tmp/ref" dp4ep2-lina plan

# tensor parallelism and expert slices: mp 2 · ep 2 · esp 2 (dp 2); the ESP pipeline's
# schedules run (AllGather/ReduceScatter per chunk on their own stream, the MP AllReduce of every
# attention) and so does Parm's S1 (the plan's usual choice here: tokens split over MP, one AllToAll
# over EP&ESP, an MP AllGather of the output), S2 (slots split over MP, SAA), MoNTA's O1-O3
# and DeepSpeed's expert tensor parallelism (its ESP AllReduce of the expert output)
"$plan" --model "$model" --cluster "$tmp/local4.yaml" --world 4 --gpus-per-node 4 --dp 2 \
    --mp 2 --esp 2 --ep 2 --batch 4 --seq 64 --capacity-factor none -o "$tmp/plan-mp.yaml" \
    --quiet || { echo "FAIL: fsmoe-plan mp2 esp2 ep2"; exit 1; }
"$run" "${common[@]}" --batch 8 --capacity-factor none > "$tmp/one-mp.out" 2>&1 ||
    { cat "$tmp/one-mp.out"; exit 1; }
reference "$tmp/one-mp.out" "$tmp/ref-mp"
common+=(--capacity-factor none)
width_max=
# (the plan's per-layer choice follows the fresh profile: S1 mostly, sometimes another)
echo "mp2·esp2 plan layers: $(sed -n 's/^    schedule: //p' "$tmp/plan-mp.yaml" | sort | uniq -c | tr -s ' \n' ' ')"
check "$tmp/plan-mp.yaml" "$tmp/ref-mp" mp2esp2 plan parm-s1 parm-s2 monta-o1 monta-o2 \
    monta-o3 deepspeed fsmoe tutel tutel-improved pipemoe-lina fsmoe-no-iio
grep -Eq '^  (allgather|reducescatter|mp-allreduce) +[0-9.]+ +[0-9.]+ ' "$tmp/mp2esp2-fsmoe.out" ||
    fail "mp2esp2: the report has no measured AllGather/ReduceScatter/MP AllReduce line"
# the collectives on all 4 ranks (report.h): the ESP pipeline's AllToAll, AllGather,
# ReduceScatter, the attention's MP AllReduce and the Gradient-AllReduce, one row each for
# every collective kind of the per-kind table, with its predicted time and task count (the
# table joins every collective id of the graph), and the sync part = tasks x the header's
# sync latency (to the printed rounding); and the gate, where the ranks meet in its forward
# (dp 2): some of the per-kind table's gate tasks (the forward's first per layer), at most
# their predicted time, the same sync part
awk '/^  per kind / { p = 1; next }
     p && /^  [a-z-]+ +[0-9.]+ +[0-9.]+ / { pred[$1] = $3; n[$1] = $NF; next }
     p { p = 0 }
     /^# collectives on all 4 ranks/ {
         f = 1; sync = $0; sub(/.*sync latency, /, "", sync); sub(/ ms .*/, "", sync); next }
     f && $1 == "collectives" { next }
     f && /^  [a-z-]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9]+$/ {
         k[$1] = 1
         g = $1 == "gate"
         if (!($1 in pred) || (!g && ($5 - pred[$1] > 0.0015 || pred[$1] - $5 > 0.0015 || $7 != n[$1])) ||
             (g && ($5 - pred[$1] > 0.0015 || $7 >= n[$1] || $7 < 1)) ||
             $6 - $7 * sync > 0.0015 + 0.0005 * $7 || $7 * sync - $6 > 0.0015 + 0.0005 * $7)
             bad = bad " " $1
         next }
     f { f = 0 }
     END {
         split("alltoall allgather reducescatter mp-allreduce grad-allreduce gate", want, " ")
         for (i in want) if (!(want[i] in k)) bad = bad " " want[i] "(missing)"
         if (bad != "") print "collectives table:" bad
         exit bad != "" }' "$tmp/mp2esp2-fsmoe.out" ||
    fail "mp2esp2 fsmoe: the report's collectives on all 4 ranks miss a kind or disagree with its per-kind rows"
# the graph digest (schedule.h rt_schedule_digest): schedules that run other work differ, and
# the same schedule of the same plan gives the same digest in another run
digest() { sed -n 's/^# report: .*, digest \([0-9a-f]\{16\}\)) on .*/\1/p' "$1"; }
for s in parm-s1 parm-s2 monta-o1 deepspeed tutel fsmoe; do
    d=$(digest "$tmp/mp2esp2-$s.out")
    [ -n "$d" ] || fail "mp2esp2 $s: the report names no graph digest"
    echo "$d"
done | sort | uniq -d | grep -q . && fail "mp2esp2: two schedules that run other work share a digest"
"${mpi[@]}" -np 4 "$run" "${common[@]}" --steps 2 --batch 4 --plan "$tmp/plan-mp.yaml" \
    --schedule parm-s2 --report > "$tmp/again.out" 2>&1 || fail "mp2esp2 parm-s2 again: the run failed"
[ "$(digest "$tmp/again.out")" = "$(digest "$tmp/mp2esp2-parm-s2.out")" ] ||
    fail "mp2esp2 parm-s2: another run gave another digest"
# --trace on 4 ranks: one file, one process per rank, each with its tasks
if "${mpi[@]}" -np 4 "$run" "${common[@]}" --steps 2 --batch 4 --plan "$tmp/plan-mp.yaml" \
    --schedule fsmoe --trace "$tmp/trace.json" > "$tmp/trace.out" 2>&1; then
    pids=$(grep -o '"ph":"X","ts":[0-9.]*,"dur":[0-9.]*,"pid":[0-9]*' "$tmp/trace.json" |
        sed 's/.*"pid"://' | sort -u | tr '\n' ' ')
    [ "$pids" = "1 2 3 4 " ] || fail "--trace on 4 ranks: tasks of processes '$pids'"
    tail -c 4 "$tmp/trace.json" | grep -q ']}' || fail "--trace: the file does not end the JSON"
    [ ! -e "$tmp/trace.rank1.json" ] || fail "--trace wrote per-rank files"
else
    tail -5 "$tmp/trace.out"; fail "--trace on 4 ranks failed"
fi

# The ranks' arrival skew (report.h): on 4 ranks the report fits skew = a + rho x segment over
# the collectives; --calibrate writes the run's profile with that line held at or above zero
# and from its shortest segment g on (sync_latency_s = a + rho x g, sync_growth = rho,
# sync_growth_from_s = g; g later where the line crosses zero later; a flat line at the mean
# where rho <= 0), and a run predicted from it charges every collective the latency plus its
# growth (the collectives table's sync part at least tasks x the latency, more where rho > 0);
# scripts/trace-skew.py, another implementation, fits the same line from the same run's trace
# (to its rounding: 5 compared steps, the same medians) and lists the segments g is the least
# of. --calibrate on one rank, and without --plan, is refused.
skew_line() { sed -n 's/^# arrival skew per .*: skew = \([-0-9.]*\) ms + \([-0-9.]*\) x segment (r2 \([-0-9.]*\) over \([0-9]*\) tasks).*/\1 \2 \3 \4/p' "$1"; }
if "${mpi[@]}" -np 4 "$run" "${common[@]}" --steps 6 --batch 4 --plan "$tmp/plan-mp.yaml" \
    --schedule fsmoe --trace "$tmp/cal.json" --calibrate "$tmp/cal.yaml" > "$tmp/cal.out" 2>&1; then
    read -r ka krho kr2 kn <<< "$(skew_line "$tmp/cal.out")"
    read -r ha hrho hg <<< "$(sed -n 's/^# arrival skew per .*(what --calibrate writes): \([0-9.]*\) ms + \([0-9.]*\) x max(0, segment - \([0-9.]*\) ms)$/\1 \2 \3/p' "$tmp/cal.out")"
    echo "calibrated: skew = $ka ms + $krho x segment (r2 $kr2, $kn tasks); held: $ha ms + $hrho x max(0, segment - $hg ms)"
    [ -n "$kn" ] && [ "$kn" -ge 2 ] || fail "--calibrate: the report has no skew line"
    [ -n "$hg" ] || fail "--calibrate: the report has no held line"
    # held: where the line grows, its own slope from g = the later of its zero and (below, from
    # trace-skew) its shortest segment, at its value there; else flat (g 0)
    awk -v a="$ka" -v r="$krho" -v b="$ha" -v q="$hrho" -v g="$hg" 'function abs(x) { return x < 0 ? -x : x }
        BEGIN { exit !(b >= 0 && q >= 0 && g >= 0 &&
                       (r > 0 ? (q == r && g >= -a / r - 0.002 && abs(b - (a + r * g)) <= 0.002 + 1e-3 * b) : (q == 0 && g == 0))) }' ||
        fail "--calibrate: the held line ($ha ms + $hrho x max(0, segment - $hg ms)) does not follow from $ka ms + $krho"
    sync=$(sed -n 's/^  sync_latency_s: //p' "$tmp/cal.yaml")
    growth=$(sed -n 's/^  sync_growth: //p' "$tmp/cal.yaml")
    from=$(sed -n 's/^  sync_growth_from_s: //p' "$tmp/cal.yaml")
    awk -v a="$ha" -v r="$hrho" -v hg="$hg" -v s="${sync:-0}" -v g="${growth:-0}" -v m="${from:-0}" 'BEGIN {
        wa = a / 1e3; wg = hg / 1e3
        exit !(s - wa < 1e-6 && wa - s < 1e-6 && g - r < 1e-4 && r - g < 1e-4 &&
               m - wg < 1e-6 && wg - m < 1e-6) }' ||
        fail "--calibrate: the profile has sync_latency_s '$sync', sync_growth '$growth', sync_growth_from_s '$from', the report $ha ms + $hrho x max(0, segment - $hg ms)"
    if command -v python3 > /dev/null; then
        tl=$(python3 "$root/scripts/trace-skew.py" "$tmp/cal.json" |
            sed -n 's/^# skew = \([-0-9.]*\) ms + \([-0-9.]*\) x segment.*/\1 \2/p')
        read -r ta trho <<< "$tl"
        echo "trace-skew on the same run: skew = $ta ms + $trho x segment"
        awk -v a="$ka" -v r="$krho" -v b="$ta" -v q="$trho" 'function abs(x) { return x < 0 ? -x : x }
            BEGIN { exit !(b != "" && abs(a - b) <= 0.002 + 0.001 * abs(b) &&
                           abs(r - q) <= 0.0002 + 0.001 * abs(q)) }' ||
            fail "--calibrate: the report's line ($ka ms + $krho) is not trace-skew's ($ta ms + $trho)"
        # where the line grows: g is the later of trace-skew's least segment and the line's zero
        tg=$(python3 "$root/scripts/trace-skew.py" "$tmp/cal.json" |
            awk -F'|' 'NF >= 5 && $5 ~ /^ *[0-9.]+ *$/ { v = $5 + 0; if (m == "" || v < m) m = v } END { print m }')
        awk -v a="$ka" -v r="$krho" -v g="$hg" -v t="$tg" 'function abs(x) { return x < 0 ? -x : x }
            BEGIN { if (r <= 0) exit !(g == 0); z = -a / r; e = t > z ? t : z
                    exit !(t != "" && abs(g - e) <= 0.003 + 0.002 * e) }' ||
            fail "--calibrate: the growth starts at $hg ms, not at the later of trace-skew's least segment '$tg' ms and the line's zero"
    fi
    if "${mpi[@]}" -np 4 "$run" "${common[@]}" --steps 3 --batch 4 --plan "$tmp/plan-mp.yaml" \
        --schedule fsmoe --cluster "$tmp/cal.yaml" --report > "$tmp/cal2.out" 2>&1; then
        awk -v g="${growth:-0}" '/^# collectives on all 4 ranks/ {
                f = 1; s = $0; sub(/.*sync latency, /, "", s); sub(/ ms .*/, "", s); next }
            f && $1 == "collectives" { next }
            f && /^  [a-z-]+ +[0-9.]+/ { n += $7; part += $6; next }
            f { f = 0 }
            END { exit !(n > 0 && part >= n * s - 0.0015 * n && (g == 0 || part > n * s)) }' \
            "$tmp/cal2.out" || fail "a run on the calibrated profile does not charge its skew"
    else
        tail -5 "$tmp/cal2.out"; fail "a run on the calibrated profile failed"
    fi
    # a growing skew on a layout without MP (the dp 4 · ep 2 plan, at the model's capacity
    # factor it was planned with): its tensor-parallel AllReduce is a group of one
    # (a zero line), which waits for no one, so the graph predicts no such task the executor
    # could miss (it once charged them the growth and counted them planned)
    awk '/^interference:/ {print; print "  sync_growth: 0.5"; next} /^  sync_growth:/ {next} {print}' \
        "$tmp/cal.yaml" > "$tmp/grow.yaml"
    cf=$(awk '$1 == "capacity_factor:" {print $2; exit}' "$model")
    if "${mpi[@]}" -np 4 "$run" "${common[@]}" --capacity-factor "$cf" --steps 3 --batch 4 \
        --plan "$tmp/plan.yaml" --cluster "$tmp/grow.yaml" --report > "$tmp/grow.out" 2>&1; then
        grep -Eq '^# conformance on all 4 ranks: 0 task ids mismatched .*; 0 predicted task ids not measured$' "$tmp/grow.out" ||
            fail "dp4ep2 with a growing skew: $(grep '^# conformance on all' "$tmp/grow.out" || echo 'no all-ranks conformance')"
    else
        tail -5 "$tmp/grow.out"; fail "dp4ep2 on a profile with a growing skew failed"
    fi
else
    tail -5 "$tmp/cal.out"; fail "--calibrate on 4 ranks failed"
fi
if "$run" "${common[@]}" --batch 4 --plan "$tmp/plan-mp.yaml" --calibrate "$tmp/x.yaml" \
    > /dev/null 2> "$tmp/err"; then
    fail "--calibrate on one rank ran"
else
    [ $? = 2 ] && grep -q -- "--calibrate: .*two or more ranks" "$tmp/err" ||
        fail "--calibrate on one rank: $(head -2 "$tmp/err")"
fi
if "$run" "${common[@]}" --calibrate "$tmp/x.yaml" > /dev/null 2> "$tmp/err"; then
    fail "--calibrate without --plan accepted"
else
    grep -q -- "--calibrate needs --plan" "$tmp/err" || fail "--calibrate, no --plan: $(cat "$tmp/err")"
fi

# Lina's priority: no micro-op of pipemoe-lina's own-stream Gradient-AllReduce (thread 4) starts
# while an AllToAll of its rank runs (1 us slack for the two streams' time stamps)
if "${mpi[@]}" -np 4 "$run" "${common[@]}" --steps 3 --batch 4 --plan "$tmp/plan-mp.yaml" \
    --schedule pipemoe-lina --trace "$tmp/lina.json" > "$tmp/lina.out" 2>&1; then
    awk 'function field(k,   v) { if (!match($0, "\"" k "\":[^,}]*")) return ""
             v = substr($0, RSTART + length(k) + 3, RLENGTH - length(k) - 3); gsub(/"/, "", v); return v }
         /"ph":"X"/ { c = field("cat"); p = field("pid"); t = field("tid"); s = field("ts") + 0; d = field("dur") + 0
             if (c == "alltoall") { na[p]++; as[p, na[p]] = s; ae[p, na[p]] = s + d }
             if (c == "grad-allreduce" && t == 4) { ng++; gp[ng] = p; gs[ng] = s } }
         END { for (i = 1; i <= ng; i++) for (j = 1; j <= na[gp[i]]; j++)
                   if (as[gp[i], j] < gs[i] && gs[i] < ae[gp[i], j] - 1) bad++
               printf "pipemoe-lina: %d own-stream micro-ops, %d started during an AllToAll\n", ng, bad
               exit (ng == 0 || bad > 0) }' "$tmp/lina.json" ||
        fail "pipemoe-lina: a micro-op started while an AllToAll ran (or none ran)"
else
    tail -5 "$tmp/lina.out"; fail "pipemoe-lina with --trace failed"
fi

# DeepSpeed's drop_tokens/gather_tokens (mp 2, esp 1): each MP member exchanges its share of
# the slots, one AllGather over MP after the Combine (the graph's allgather task)
"$plan" --model "$model" --cluster "$tmp/local4.yaml" --world 4 --gpus-per-node 4 --dp 2 \
    --mp 2 --esp 1 --ep 2 --batch 4 --seq 64 --capacity-factor none -o "$tmp/plan-mp1.yaml" \
    --quiet || { echo "FAIL: fsmoe-plan mp2 ep2"; exit 1; }
check "$tmp/plan-mp1.yaml" "$tmp/ref-mp" mp2ep2 deepspeed
grep -Eq '^  allgather +[0-9.]+ +[0-9.]+ ' "$tmp/mp2ep2-deepspeed.out" ||
    fail "mp2ep2 deepspeed: the report has no measured AllGather line"

# MoNTA's layer without expert parallelism (mp 2 = esp 2, ep 1: no AllToAll, every member holds
# all tokens): expert tensor parallelism with the slices' sum as the graph's ESP ReduceScatter
# and AllGather (refused before as "MoNTA's layer on other layouts")
"$plan" --model "$model" --cluster "$tmp/local4.yaml" --world 4 --gpus-per-node 4 --dp 2 \
    --mp 2 --esp 2 --ep 1 --batch 4 --seq 64 --capacity-factor none -o "$tmp/plan-ep1.yaml" \
    --quiet || { echo "FAIL: fsmoe-plan mp2 esp2 ep1"; exit 1; }
check "$tmp/plan-ep1.yaml" "$tmp/ref-mp" mp2esp2ep1 monta-o2
grep -Eq '^  reducescatter +[0-9.]+ +[0-9.]+ ' "$tmp/mp2esp2ep1-monta-o2.out" &&
    grep -Eq '^  allgather +[0-9.]+ +[0-9.]+ ' "$tmp/mp2esp2ep1-monta-o2.out" ||
    fail "mp2esp2ep1 monta-o2: the report has no measured ReduceScatter and AllGather lines"

# Expert slices without tensor parallelism (dp 4 · ep 2 · esp 2): Parm's S1 without MP (one
# AllToAll to every slice, a candidate of the plan there) and the plan itself; S1's MP
# AllGather of a one-member group is a local copy, not a task of the graph
"$plan" --model "$model" --cluster "$tmp/local4.yaml" --world 4 --gpus-per-node 4 --dp 4 \
    --mp 1 --esp 2 --ep 2 --batch 4 --seq 64 --capacity-factor none -o "$tmp/plan-esp.yaml" \
    --quiet || { echo "FAIL: fsmoe-plan esp2 ep2"; exit 1; }
"$run" "${common[@]}" --batch 16 > "$tmp/one-dp4.out" 2>&1 || { cat "$tmp/one-dp4.out"; exit 1; }
reference "$tmp/one-dp4.out" "$tmp/ref-dp4"
check "$tmp/plan-esp.yaml" "$tmp/ref-dp4" esp2ep2 plan parm-s1

# The hierarchical AllToAll (2DH, libfsmoe/a2a_2dh.h): the 4 ranks as 2 nodes x 2 (--gpus-per-node
# 2 on the profile, the plan and the run), the plans' a2a.algorithm set to 2dh in every layer,
# pipelined (forward r 3, backward r 2: chunks where a member sends or receives nothing):
# dp 4 · ep 4 (the EP group spans both nodes) and mp 2 · ep 2 · esp 2 under Parm's S1 (its
# EP&ESP AllToAll spans both nodes); each conforms, says it ran 2DH, and trains like one rank
"${mpi[@]}" -np 4 "$bench" -b 64K -e 512K -f 2 -n 3 --extra-time 0 --gpus-per-node 2 \
    --ops alltoall,allgather,reducescatter,allreduce,gemm,copy --gemm-min 64K --gemm-max 512K \
    --gemm-step 128K -o "$tmp/nodes2.yaml" > "$tmp/bench2.log" 2>&1 ||
    { tail -5 "$tmp/bench2.log"; fail "fsmoe-bench on 2 x 2"; }
without_interference "$tmp/nodes2.yaml"
extra=(--gpus-per-node 2)
for lay in "4 1 4 1 16" "2 2 2 2 8"; do
    read -r dp mp ep esp b <<< "$lay"
    tag=2dh-dp$dp-mp$mp-ep$ep-esp$esp
    if ! "$plan" --model "$model" --cluster "$tmp/nodes2.yaml" --world 4 --gpus-per-node 2 \
        --dp "$dp" --mp "$mp" --esp "$esp" --ep "$ep" --batch 4 --seq 64 \
        --capacity-factor none -o "$tmp/$tag.yaml" --quiet; then
        fail "fsmoe-plan $tag"; continue
    fi
    sed -i 's/algorithm: [a-z0-9]*/algorithm: 2dh/; s/forward: {r: [0-9]*/forward: {r: 3/
            s/backward: {r: [0-9]*/backward: {r: 2/' "$tmp/$tag.yaml"
    [ "$mp" = 2 ] && sed -i 's/^    schedule: .*/    schedule: S1/' "$tmp/$tag.yaml"
    "$run" "${common[@]}" --batch "$b" > "$tmp/one-$tag.out" 2>&1 || { fail "one rank $tag"; continue; }
    reference "$tmp/one-$tag.out" "$tmp/ref-$tag"
    check "$tmp/$tag.yaml" "$tmp/ref-$tag" "$tag" plan
    grep -q '2DH AllToAll in [1-9][0-9]* of ' "$tmp/$tag-plan.out" ||
        fail "$tag: the run does not say it ran the 2DH AllToAll"
done
extra=()
# a plan that says 2dh where the exchange group sits on one node is refused, naming the layer
# and the group
sed 's/algorithm: [a-z0-9]*/algorithm: 2dh/' "$tmp/plan.yaml" > "$tmp/plan-2dh-1node.yaml"
if "${mpi[@]}" -np 4 "$run" "${common[@]}" --capacity-factor 1.2 --batch 4 \
    --plan "$tmp/plan-2dh-1node.yaml" \
    > /dev/null 2> "$tmp/err"; then
    fail "a 2dh plan on one node ran"
else
    grep -q "a2a.algorithm 2dh, but .* the ep group of 2, which is not hierarchical" "$tmp/err" ||
        fail "2dh on one node: $(head -3 "$tmp/err")"
fi

if "$run" "${common[@]}" --plan "$tmp/plan.yaml" --schedule nosuch > /dev/null 2> "$tmp/err"; then
    fail "--schedule nosuch accepted"
else
    [ $? = 2 ] && grep -q -- "--schedule: unknown schedule 'nosuch'" "$tmp/err" ||
        fail "--schedule nosuch: $(cat "$tmp/err")"
fi
if "$run" "${common[@]}" --schedule tutel > /dev/null 2> "$tmp/err"; then
    fail "--schedule without --plan accepted"
else
    grep -q -- "--schedule needs --plan" "$tmp/err" || fail "no --plan: $(cat "$tmp/err")"
fi
[ "$failed" = 0 ] && echo "OK" || { echo "$failed failed"; exit 1; }
