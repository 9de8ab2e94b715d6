#!/usr/bin/env bash
# The main job (README, first command): the workflow of design.md §1 on this one machine, no GPU.
#   1. install and build;
#   2. profile an emulated cluster of 2 nodes x 2 ranks (network namespaces, shaped links) with
#      fsmoe-bench, plan models/tiny-moe.yaml on that profile and simulate the plan;
#   3. profile this host as a one-rank cluster, plan tiny-moe for it, and train it with fsmoe-run
#      following the plan: loss going down, measured against predicted step time;
#   4. plan the reference models on the papers' testbeds (FSMoE, Parm, MoNTA profiles), and
#      search the layouts of one of them (fsmoe-plan --search: table and plot).
# Everything it writes lands in out/ (profiles, plots, plans, Gantt chart, trace, training log).
# On the emulated cluster fsmoe-run trains tiny-moe on its 4 ranks following a plan made from
# that cluster's fresh profile measured under the training's load (fsmoe-bench --group-rounds 1,
# with the interference factors; data parallelism over the 4 ranks, experts over EP groups of 2)
# and reports the run against the schedule graph it executed (--report); then
# scripts/bench-schedules.sh trains models/comm-moe.yaml there under the plan and each baseline
# schedule and draws measured vs predicted step time (out/bench/), on three layouts: dp 4 · ep 4;
# FSMoE's mp 2 · ep 2 · esp 2 (tensor-parallel attention, experts sliced over ESP); and
# dp 2 · mp 2 · ep 2 with whole experts (DeepSpeed-MoE's drop_tokens).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh build

B=build
out=out
mkdir -p "$out/clusters" "$out/plans" "$out/sim" "$out/traces"
plan=$B/planner/fsmoe-plan
mpirun_local=(mpirun --allow-run-as-root --oversubscribe)
section() { printf '\n=== %s\n' "$*"; }

section "1/3 emulated cluster: 2 nodes x 2 ranks, 8 Gbit/s links between nodes: profile, plan, train"
emu_profile=$out/clusters/emulated-2x2.yaml
if reason=$(scripts/emucluster.sh --check 2>&1); then
    # GEMM lines at the shapes trained below: tiny-moe's 64:256, comm-moe's 256:1024 and its
    # halves under expert slicing or tensor parallelism (256:512)
    scripts/emucluster.sh --nodes 2 --ranks-per-node 2 --rate 8gbit -- \
        "$B/microbench/fsmoe-bench" -o "$emu_profile" --plot "${emu_profile%.yaml}.svg" \
        --ops +alltoall_2dh --gemm-shapes 64:256,256:1024,256:512 \
        > "$out/clusters/emulated-2x2.log" 2>&1 || {
        tail -20 "$out/clusters/emulated-2x2.log"
        echo "main job: fsmoe-bench on the emulated cluster failed" >&2
        exit 1
    }
    # The fitted table (nccl-tests style output is in the log).
    sed -n '/^# Fitted/,/^# Measured/p' "$out/clusters/emulated-2x2.log"
    # The profile that predicts training here: every group measured at once, as training loads
    # the machine (4 ranks on $(nproc) cores compute at a fraction of a core each; the default
    # above measures each rank's GEMMs on a core of its own), with the interference factors.
    # The trainings below plan and predict with it.
    load_profile=$out/clusters/emulated-2x2-loaded.yaml
    scripts/emucluster.sh --nodes 2 --ranks-per-node 2 --rate 8gbit -- \
        "$B/microbench/fsmoe-bench" -o "$load_profile" --group-rounds 1 \
        --ops +alltoall_2dh --gemm-shapes 64:256,256:1024,256:512 \
        > "$out/clusters/emulated-2x2-loaded.log" 2>&1 || {
        tail -20 "$out/clusters/emulated-2x2-loaded.log"
        echo "main job: fsmoe-bench --group-rounds 1 on the emulated cluster failed" >&2
        exit 1
    }
    echo "measured under the training's load (--group-rounds 1):"
    sed -n '/^# Fitted/,/^# Measured/p;/^# comm_slowdown/p;/^# sync_latency/p' "$out/clusters/emulated-2x2-loaded.log"
    "$plan" --model models/tiny-moe.yaml --cluster "$emu_profile" \
        -o "$out/plans/tiny-moe@emulated-2x2.yaml" 2>&1
    "$plan" simulate "$out/plans/tiny-moe@emulated-2x2.yaml" --svg "$out/sim/tiny-moe@emulated-2x2.svg" \
        --trace "$out/sim/tiny-moe@emulated-2x2.json" | sed -n '3,10p'
    # the layout fsmoe-run executes today: dp 4, ep 2, mp = esp = 1
    emu_plan=$out/plans/tiny-moe@emulated-2x2-dp4-ep2.yaml
    "$plan" --model models/tiny-moe.yaml --cluster "$load_profile" --world 4 --gpus-per-node 2 \
        --dp 4 --mp 1 --esp 1 --ep 2 -o "$emu_plan" 2>&1
    echo "training tiny-moe on the emulated 2 x 2 cluster (4 ranks) following $emu_plan"
    scripts/emucluster.sh --nodes 2 --ranks-per-node 2 --rate 8gbit -- \
        "$B/runtime/fsmoe-run" --model models/tiny-moe.yaml --plan "$emu_plan" --steps 300 \
        --eval-every 100 --threads 1 --trace "$out/traces/tiny-moe-emulated-2x2.json" --report \
        > "$out/train-tiny-moe-emulated-2x2.log" 2>&1 || {
        tail -20 "$out/train-tiny-moe-emulated-2x2.log"
        echo "main job: fsmoe-run on the emulated cluster failed" >&2
        exit 1
    }
    awk '/^# [0-9]+ ranks/ || /^# corpus/ || (/^step/ && ($2 ~ /^(1|100|200|300)\//)) || /^eval/ || /^# mean/' \
        "$out/train-tiny-moe-emulated-2x2.log"
    # the run against the schedule graph it executed (rank 0): conformance, measured vs predicted
    sed -n '/^# report:/,$p' "$out/train-tiny-moe-emulated-2x2.log" | grep -v '^# trace:' 
    measured=$(awk '/^# mean step/ {print $4}' "$out/train-tiny-moe-emulated-2x2.log")
    predicted=$(awk -F'pred ' '/^step/ {split($2, a, " "); p = a[1]} END {print p}' \
        "$out/train-tiny-moe-emulated-2x2.log")
    echo "emulated 2 x 2: measured ${measured} ms per step vs predicted ${predicted} ms"
    echo "measured trace (every rank, ui.perfetto.dev): $out/traces/tiny-moe-emulated-2x2.json"
    # what the ranks waited for each other at its collectives, against the profile's constant
    echo "arrival skew at the run's collectives (scripts/trace-skew.py; the profile charges each" \
        "$(awk '/^ *sync_latency_s:/ {printf "%.3f ms", $2 * 1e3}' "$load_profile")):"
    python3 scripts/trace-skew.py "$out/traces/tiny-moe-emulated-2x2.json" | tail -1
    echo
    echo "schedules side by side: the communication-heavy model on the same emulated cluster, its"
    echo "plan and each baseline schedule executed by fsmoe-run (measured vs predicted), after a"
    echo "warm-up that lets the gate balance the experts, on the profile measured under load"
    scripts/bench-schedules.sh --profile "$load_profile" --steps 15 --repeat 3 --out "$out/bench" "$B"
    echo
    echo "the same on FSMoE's and Parm's common layout (mp = esp = ranks per node, ep = dp = nodes):"
    echo "tensor-parallel attention, experts sliced over ESP"
    scripts/bench-schedules.sh --profile "$load_profile" --steps 15 --repeat 3 --layout 2,2,2,2 \
        --out "$out/bench" "$B"
    echo
    echo "and with tensor parallelism but whole experts (mp 2 · ep 2 · dp 2), where DeepSpeed-MoE"
    echo "runs its drop_tokens/gather_tokens; the EP group is a node's pair, whose SAA the profile"
    echo "above does not measure: the script measures this layout's own groups first"
    scripts/bench-schedules.sh --steps 15 --repeat 3 --layout 2,2,2,1 --out "$out/bench" "$B"
else
    echo "skipped: network namespaces cannot be made here ($reason)"
fi

section "2/3 this host as a one-rank cluster: profile, plan, train tiny-moe following the plan"
local_profile=$out/clusters/local.yaml
# one BLAS thread, as the training below (--threads 1)
"${mpirun_local[@]}" -np 1 "$B/microbench/fsmoe-bench" -o "$local_profile" --blas-threads 1 \
    > "$out/clusters/local.log" 2>&1 || { tail -20 "$out/clusters/local.log"; exit 1; }
sed -n '/^# Fitted/,/^# Measured/p' "$out/clusters/local.log"
"$plan" --model models/tiny-moe.yaml --cluster "$local_profile" --world 1 --gpus-per-node 1 \
    -o "$out/plans/tiny-moe@local.yaml" 2>&1
"$B/runtime/fsmoe-run" --model models/tiny-moe.yaml --plan "$out/plans/tiny-moe@local.yaml" \
    --steps 300 --eval-every 50 --threads 1 --save "$out/checkpoints" --save-every 100 \
    --trace "$out/traces/tiny-moe@local.json" --profile | tee "$out/train-tiny-moe.log" | awk '/^step/ && ($2 ~ /^(1|50|100|150|200|250|300)\//) || !/^step/'
measured=$(awk '/^# mean step/ {print $4}' "$out/train-tiny-moe.log")
predicted=$(awk -F'pred ' '/^step/ {split($2, a, " "); p = a[1]} END {print p}' "$out/train-tiny-moe.log")
echo "measured ${measured} ms per step vs predicted ${predicted} ms (the plan's cost model on this"
echo "host's profile; the kernel profile above shows where the measured step went)"

section "3/3 reference models on the papers' testbeds"
while read -r golden model cluster extra; do
    case "$golden" in ''|'#'*) continue ;; esac
    name=$(basename "$golden")
    # shellcheck disable=SC2086
    "$plan" --model "$model" --cluster "$cluster" $extra -o "$out/plans/$name" 2>&1 | sed -n '1,3p'
done < scripts/goldens.list

echo
echo "which layout fits and trains fastest: every (dp, mp, ep, esp, pp) of 32 GPUs of Testbed A for"
echo "mixtral-8x7b, sized by the memory model and simulated; no memory limit first (the paper's"
echo "48 GiB GPUs hold none of them with fsmoe-run's buffers), then one that lets a few through"
mkdir -p "$out/search"
"$plan" --model models/mixtral-8x7b.yaml --cluster clusters/testbed-a.yaml --world 32 --search \
    --mem-limit none --top 8 --svg "$out/search/mixtral-8x7b@testbed-a.svg" \
    -o "$out/plans/mixtral-8x7b@testbed-a-searched.yaml" 2>&1 | sed '/^  /d'
"$plan" --model models/mixtral-8x7b.yaml --cluster clusters/testbed-a.yaml --world 32 --search \
    --mem-limit 100G --top 3 -o "$out/plans/mixtral-8x7b@testbed-a-searched-100G.yaml" 2>&1 \
    | sed -n '1,7p;/^# over the limit/p'
echo
echo "pipeline stages: the same model in 2 GPipe stages (one stage planned, every schedule's stage"
echo "in a simulated pipeline of stages x micro-batches)"
"$plan" --model models/mixtral-8x7b.yaml --cluster clusters/testbed-a.yaml --world 32 --pp 2 \
    --ep 2 -o "$out/plans/mixtral-8x7b@testbed-a-pp2.yaml" 2>&1 | sed -n '1,3p'
"$plan" simulate "$out/plans/mixtral-8x7b@testbed-a-pp2.yaml" | grep -A1 '^pipeline'

echo
echo "main job done; everything is in $out/:"
echo "  profiles and fit plots   $out/clusters/*.yaml, *.svg"
echo "  plans                    $out/plans/  ($plan explain PLAN for the per-layer tables)"
echo "  Gantt chart and trace    $out/sim/  (open the .json in ui.perfetto.dev)"
echo "  training log             $out/train-tiny-moe.log, checkpoints in $out/checkpoints/"
echo "  schedules benchmark      $out/bench/ (tables in the log above, bar charts comm-moe-dp*-schedules.svg)"
echo "  layout search            $out/search/ (simulated time against memory per GPU, one point per layout)"
