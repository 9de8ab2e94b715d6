#!/usr/bin/env bash
# The schedules side by side on the emulated cluster (design.md §10.1: speed-ups measured, not
# only predicted): profile 2 nodes x 2 ranks with fsmoe-bench, plan MODEL for that profile
# on a layout (--layout DP,MP,EP,ESP; default 4,1,4,1: no tensor parallelism, where the plan
# chooses the ESP pipeline's degree and the gradient partition; 2,2,2,2 is FSMoE's and Parm's
# common layout, mp = esp = ranks per node, ep = dp = nodes, where the plan picks Parm's S1 or
# S2 against the ESP pipeline's duplicated tokens), then train it with fsmoe-run once per
# schedule that runs on the layout, one after the other in the same conditions, each with
# --report. Prints a table (measured median step, predicted step, measured speed-up of the
# plan over each schedule, the report's conformance, whether the schedule runs the plan's own
# graph: the report's digest) and draws measured vs predicted per schedule as an SVG bar
# chart. A schedule that runs the plan's graph (the same work under another name) is not one
# the plan is compared with: its runs and the plan's together give the plan's graph's step (the
# median of all of them), which the last line compares with the fastest other schedule.
# A measurement: it exits non-zero only when a run fails (or 77 without namespaces).
# --profile FILE uses a profile of the same emulated cluster (the main job's) instead of
# measuring one; a profile that is to predict these runs is measured with every group at once
# (fsmoe-bench --group-rounds 1), as training loads the machine: four ranks on two cores
# compute at half a core each, where fsmoe-bench's default measures each rank's GEMMs on a
# core of its own.
# Steady state, not a fresh model's first steps: the plan first trains --warmup steps (60) on
# the layout and saves a checkpoint; every schedule resumes from it and measures --steps more.
# A fresh gate routes unevenly while its auxiliary loss has not yet balanced the experts
# (comm-moe: 30-50 % of the capacity's rows filled in steps 3-15, 70-80 % after 60), and the
# cost model prices the experts and AllToAlls at the capacity; the report's `routing` line
# shows the fill each run had, and each report predicts at that routing.
# The ranks' arrival skew as these runs meet it: after the warm-up the plan's schedule runs
# --steps more with --calibrate, which writes the profile with the skew fitted on that run
# (sync_latency_s + sync_growth x the time since the previous collective); every schedule is
# then predicted from that profile (--cluster). The plan's own prediction uses a fit of its own
# collectives; the other schedules' are held out of the fit. The plan made again on that
# profile runs too, as plan@calibrated, where its decisions differ from the plan's.
# --ranks-per-node 1 emulates 2 nodes of one rank each (a core per rank on a 2-core machine,
# where 2 x 2 runs four ranks on two cores; then --layout must fit a world of 2: 2,1,2,1).
# usage: scripts/bench-schedules.sh [--model M] [--rate RATE] [--steps N] [--out DIR]
#                                   [--profile FILE] [--layout DP,MP,EP,ESP] [--repeat N]
#                                   [--warmup N] [--ranks-per-node N] [BUILD]
set -euo pipefail
cd "$(dirname "$0")/.."
model=models/comm-moe.yaml rate=8gbit steps=30 out=out/bench build=build profile= layout=4,1,4,1
repeat=1 warmup=60 rpn=2
while [ $# -gt 0 ]; do
    case $1 in
        --model) model=$2; shift 2 ;;
        --rate) rate=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --profile) profile=$2; shift 2 ;;
        --layout) layout=$2; shift 2 ;;
        --repeat) repeat=$2; shift 2 ;;
        --warmup) warmup=$2; shift 2 ;;
        --ranks-per-node) rpn=$2; shift 2 ;;
        -*) echo "bench-schedules: unknown option $1" >&2; exit 2 ;;
        *) build=$1; shift ;;
    esac
done
case $steps in '' | *[!0-9]* | 0 | 1) echo "bench-schedules: --steps must be ≥ 2" >&2; exit 2 ;; esac
case $repeat in '' | *[!0-9]* | 0) echo "bench-schedules: --repeat must be ≥ 1" >&2; exit 2 ;; esac
case $warmup in '' | *[!0-9]*) echo "bench-schedules: --warmup must be ≥ 0" >&2; exit 2 ;; esac
case $rpn in '' | *[!0-9]* | 0) echo "bench-schedules: --ranks-per-node must be ≥ 1" >&2; exit 2 ;; esac
world=$((2 * rpn))
IFS=, read -r dp mp ep esp <<< "$layout"
for v in "$dp" "$mp" "$ep" "$esp"; do
    case $v in '' | *[!0-9]* | 0) echo "bench-schedules: --layout $layout: expected DP,MP,EP,ESP" >&2; exit 2 ;; esac
done
[ -f "$model" ] || { echo "bench-schedules: --model $model: no such file" >&2; exit 2; }
for p in microbench/fsmoe-bench planner/fsmoe-plan runtime/fsmoe-run; do
    [ -x "$build/$p" ] || { echo "bench-schedules: $build/$p is not built" >&2; exit 2; }
done
if ! reason=$(scripts/emucluster.sh --check 2>&1); then
    echo "bench-schedules: skipped ($reason)"
    exit 77
fi
name=$(basename "$model" .yaml)-dp$dp-mp$mp-ep$ep-esp$esp
mkdir -p "$out"
emu=(scripts/emucluster.sh --nodes 2 --ranks-per-node "$rpn" --rate "$rate" --)
plan=$out/$name@emulated-2x$rpn-$rate.yaml
model_name=$(basename "$model" .yaml)
if [ -z "$profile" ]; then
    # the layout's own groups (fsmoe-bench --dp --mp --ep --esp): every (operation, tier) its
    # schedules run is measured, none derived (SAA on one node's pair, for dp 2 · mp 2 · ep 2,
    # derived from its AllToAll and AllGather back to back, ran 2.9-3.2x that in training)
    profile=$out/emulated-2x$rpn-$rate-dp$dp-mp$mp-ep$ep-esp$esp.yaml
    # the GEMMs at the shapes this model runs (experts M:H/esp, dense slices M:H/mp): a CPU's
    # GEMM rate depends on the shape, and the profile keeps one line per shape; and the
    # hierarchical AllToAll measured (the plan@2dh row, and auto's choice, use its line)
    M=$(awk '$1 == "hidden:" {print $2; exit}' "$model")
    H=$(awk '$1 == "ffn_hidden:" {print $2; exit}' "$model")
    shapes=$(printf '%s\n' "$M:$H" "$M:$((H / esp))" "$M:$((H / mp))" | sort -u | paste -sd,)
    # one BLAS thread per rank, as every fsmoe-run below (--threads 1): fsmoe-bench's default
    # (a node's cores over its ranks) gives each of 2 x 1's ranks both of this machine's
    # cores, 4 threads on 2 cores, and measured its GEMMs 4x slower than training ran them
    "${emu[@]}" "$build/microbench/fsmoe-bench" -o "$profile" --gemm-shapes "$shapes" \
        --ops +alltoall_2dh --group-rounds 1 --blas-threads 1 \
        --dp "$dp" --mp "$mp" --ep "$ep" --esp "$esp" \
        > "${profile%.yaml}.log" 2>&1 ||
        { tail -20 "${profile%.yaml}.log"; echo "bench-schedules: fsmoe-bench failed" >&2; exit 1; }
fi
"$build/planner/fsmoe-plan" --model "$model" --cluster "$profile" --world "$world" --gpus-per-node "$rpn" \
    --dp "$dp" --mp "$mp" --esp "$esp" --ep "$ep" -o "$plan" --quiet
# the schedules fsmoe-run executes on the layout (DeepSpeed-MoE's expert tensor parallelism
# needs mp = esp, its drop_tokens esp = 1; MoNTA's layer needs mp = esp)
if [ "$mp" = 1 ] && [ "$esp" = 1 ]; then
    schedules=(plan deepspeed tutel tutel-improved pipemoe-lina fsmoe-no-iio)
    # where the EP group spans both nodes with two ranks on each (ep 4), the plan also runs
    # with the other AllToAll algorithm in every layer (flat nccl <-> hierarchical 2dh): the
    # row plan@2dh (or plan@nccl) measures what the planner's choice between them is worth
    if [ "$ep" = 4 ]; then
        alg=$(sed -n 's/.*algorithm: \([a-z0-9]*\).*/\1/p' "$plan" | sort -u)
        other=$([ "$alg" = 2dh ] && echo nccl || echo 2dh)
        sed "s/algorithm: [a-z0-9]*/algorithm: $other/" "$plan" > "${plan%.yaml}@$other.yaml"
        schedules+=("plan@$other")
    fi
else
    schedules=(plan parm-s1 parm-s2 fsmoe tutel tutel-improved pipemoe-lina fsmoe-no-iio)
    { [ "$mp" = "$esp" ] || [ "$esp" = 1 ]; } && schedules+=(deepspeed)
    [ "$mp" = "$esp" ] && [ "$ep" -gt 1 ] && schedules+=(monta-o1 monta-o2 monta-o3)
fi
# the warm-up: the plan's schedule on the layout, saved at step $warmup of a run of
# $warmup + $steps steps (the learning-rate schedule every resumed run continues)
total=$((warmup + steps)) resume=()
if [ "$warmup" -gt 0 ]; then
    ck=$out/$name-warmup
    rm -rf "$ck"
    "${emu[@]}" "$build/runtime/fsmoe-run" --model "$model" --plan "$plan" --steps "$total" \
        --stop-at "$warmup" --save "$ck" --eval-every 0 --threads 1 > "$out/$name-warmup.log" 2>&1 ||
        { tail -20 "$out/$name-warmup.log"; echo "bench-schedules: the warm-up run failed" >&2; exit 1; }
    resume=(--resume "$ck")
fi
calibrated=$out/$(basename "$profile" .yaml)-calibrated.yaml
"${emu[@]}" "$build/runtime/fsmoe-run" --model "$model" --plan "$plan" "${resume[@]}" \
    --steps "$total" --eval-every 0 --threads 1 --calibrate "$calibrated" \
    > "$out/$name-calibrate.log" 2>&1 ||
    { tail -20 "$out/$name-calibrate.log"; echo "bench-schedules: the calibration run failed" >&2; exit 1; }
echo "calibration (the plan's schedule, $steps steps): $(sed -n 's/^# arrival skew .*: \(skew = .*\)/\1/p' "$out/$name-calibrate.log")"
sed -n 's/^# warning: --calibrate: /calibration warning: /p' "$out/$name-calibrate.log"
# The plan made again on the calibrated profile: where its decisions (per layer the schedule,
# the AllToAll strategy, chunks and algorithm, the pipeline degrees, the gradient partition)
# differ from the plan's, the row plan@calibrated runs them, so the table shows what planning
# on the skew the runs meet is worth.
decisions() {
    sed -n -e 's/^    schedule: \(.*\)/\1/p' \
        -e 's/^    a2a: {strategy: \([^,]*\), chunks: \([^,]*\), algorithm: \([^,]*\),.*/\1 \2 \3/p' \
        -e 's/^    \(forward\|backward\): {r: \([0-9]*\), case: [0-9]*, q: \(\[[^]]*\]\).*/\1 \2 \3/p' \
        -e 's/^    gradients: \(.*\)/\1/p' "$1"
}
replan=${plan%.yaml}@calibrated.yaml
"$build/planner/fsmoe-plan" --model "$model" --cluster "$calibrated" --world "$world" --gpus-per-node "$rpn" \
    --dp "$dp" --mp "$mp" --esp "$esp" --ep "$ep" -o "$replan" --quiet
planned=$(decisions "$plan")
[ -n "$planned" ] || { echo "bench-schedules: no layer decisions read from $plan" >&2; exit 1; }
if [ "$planned" != "$(decisions "$replan")" ]; then
    schedules+=(plan@calibrated)
    echo "planned again on the calibrated profile: other decisions ($replan; the row plan@calibrated runs them)"
else
    echo "planned again on the calibrated profile: the same decisions"
fi
rows=$out/$name-schedules.tsv
runs=$out/$name-runs.tsv
: > "$runs"
# --repeat rounds, each running every schedule once (round-robin, so a slow spell of the
# machine hits all schedules alike); a schedule's figure is the median over rounds of its
# run's median step, the spread the smallest and largest of them
for ((round = 1; round <= repeat; round++)); do
    for s in "${schedules[@]}"; do
        log=$out/$name-$s.log
        pl=$plan sched=$s
        case $s in plan@*) pl=${plan%.yaml}@${s#plan@}.yaml sched=plan ;; esac
        # Open MPI 4's launcher now and then reports a rank that finished normally as "exiting
        # improperly" (a race in its shutdown, open-mpi/ompi#7833; seen once here, after a
        # complete report): that run is made again, once, and said; any other failure stops
        for attempt in 1 2; do
            if "${emu[@]}" "$build/runtime/fsmoe-run" --model "$model" --plan "$pl" \
                --schedule "$sched" "${resume[@]}" --steps "$total" --eval-every 0 --threads 1 \
                --cluster "$calibrated" --report > "$log" 2>&1; then
                break
            fi
            if [ "$attempt" = 1 ] && grep -q 'exiting improperly' "$log" &&
                ! grep -q '^fsmoe-run: ' "$log"; then
                echo "bench-schedules: --schedule $s: mpirun reported a rank exiting improperly" \
                    "after the run (Open MPI's shutdown race); running it again" >&2
                continue
            fi
            tail -20 "$log"
            echo "bench-schedules: fsmoe-run --schedule $s failed" >&2
            exit 1
        done
        # the report's step line: measured median, predicted
        read -r meas pred < <(awk '$1 == "step" && NF >= 4 && $2 ~ /^[0-9.]+$/ {print $2, $3}' "$log")
        conf=$(sed -n 's/^# conformance: \([0-9]*\) task ids.* planned, \([0-9]*\) mismatched.*/\1 ids, \2 mismatched/p' "$log")
        digest=$(sed -n 's/^# report: .*, digest \([0-9a-f]*\)).*/\1/p' "$log")
        printf '%s\t%s\t%s\t%s\t%s\n' "$s" "$meas" "$pred" "$conf" "${digest:-?}" >> "$runs"
    done
done
: > "$rows"
for s in "${schedules[@]}"; do
    awk -F'\t' -v s="$s" '$1 == s { m[++n] = $2; pred = $3; conf = $4; dig = $5 }
        END {
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (m[j] < m[i]) { t = m[i]; m[i] = m[j]; m[j] = t }
            med = n % 2 ? m[(n + 1) / 2] : (m[n / 2] + m[n / 2 + 1]) / 2
            printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", s, med, pred, conf, m[1], m[n], dig, n
        }' "$runs" >> "$rows"
done
plan_ms=$(awk -F'\t' '$1 == "plan" {print $2}' "$rows")
echo "$model_name (dp $dp, mp $mp, ep $ep, esp $esp) on the emulated 2 x $rpn cluster at $rate per link, $repeat x $steps steps per schedule after $warmup warm-up steps (this machine)"
echo "| schedule | measured ms/step | runs min-max | predicted ms/step | measured/predicted | plan speed-up (measured) | predicted speed-up | conformance | graph |"
echo "|---|---|---|---|---|---|---|---|---|"
plan_pred=$(awk -F'\t' '$1 == "plan" {print $3}' "$rows")
plan_dig=$(awk -F'\t' '$1 == "plan" {print $7}' "$rows")
awk -F'\t' -v pm="$plan_ms" -v pp="$plan_pred" -v pd="$plan_dig" '{
    g = $1 == "plan" ? $7 : $7 == pd ? "the plan'"'"'s" : "another"
    printf "| %s | %.1f | %.0f-%.0f | %.1f | %.2f | %.2fx | %.2fx | %s | %s |\n", $1, $2, $5, $6, $3, $2 / $3, $2 / pm, $3 / pp, $4, g }' "$rows"
# the schedules fsmoe-run runs as the plan's own graph (one digest: the same work) measure
# how far runs of one piece of work lie apart on this machine, and their runs and the plan's
# together measure that work (the median over all of them); the others are what the plan is
# compared with
awk -F'\t' -v pd="$plan_dig" '
    FNR == NR { if ($5 == pd) { v[++n] = $2; if (!($1 in named)) { named[$1] = 1; who = who (who ? ", " : "") $1 } } next }
    FNR == 1 {
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
        pm = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
        printf "the plan'"'"'s graph: %.1f ms per step, the median of its %d runs (%s; min-max %.0f-%.0f)\n", pm, n, who, v[1], v[n]
        lo = v[1]; hi = v[n]
    }
    $1 != "plan" && $7 != pd { no++; r = $2 / pm; if (no == 1 || r < olo) { olo = r; os = $1; omin = $5; omax = $6; on = $8 } }
    END {
        # whether the difference exceeds how far runs of one schedule lie apart here: whether
        # the run ranges of the two schedules overlap (a single run has no range)
        if (on < 2 || n < 2)
            spread = "one run of one of them: no spread to judge the difference by"
        else
            spread = sprintf("its runs %.0f-%.0f %s", omin, omax, omin <= hi && omax >= lo ? "overlap the plan'"'"'s graph'"'"'s: within the runs'"'"' spread" : "do not overlap the plan'"'"'s graph'"'"'s")
        if (no) printf "against the %d schedules with another graph: the fastest of them at %.2fx that step (%s; %s)\n", no, olo, os, spread
    }' "$runs" "$rows"
# the bar chart: per schedule, measured and predicted ms per step
svg=$out/$name-schedules.svg
awk -F'\t' -v title="$model_name (dp $dp, mp $mp, ep $ep, esp $esp), emulated 2 x $rpn at $rate: ms per step" '
    { n++; s[n] = $1; m[n] = $2; p[n] = $3; if ($2 > top) top = $2; if ($3 > top) top = $3 }
    END {
        W = 120 * n + 120; H = 360; x0 = 70; y0 = 300; h = 240
        step = 10; while (top / step > 8) step *= (step ~ /^1/ ? 2 : (step ~ /^2/ ? 2.5 : 2))
        ymax = step * (int(top / step) + 1)
        printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H
        printf "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
        printf "<text x=\"%d\" y=\"22\" font-size=\"14\">%s</text>\n", x0, title
        for (v = 0; v <= ymax + 1e-9; v += step) {
            y = y0 - h * v / ymax
            printf "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x0, W - 20, y, y
            printf "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", x0 - 6, y + 4, v
        }
        for (i = 1; i <= n; i++) {
            x = x0 + 20 + 120 * (i - 1)
            hm = h * m[i] / ymax; hp = h * p[i] / ymax
            printf "<rect x=\"%d\" y=\"%.1f\" width=\"40\" height=\"%.1f\" fill=\"#3a6ea5\"><title>%s measured %.1f ms</title></rect>\n", x, y0 - hm, hm, s[i], m[i]
            printf "<rect x=\"%d\" y=\"%.1f\" width=\"40\" height=\"%.1f\" fill=\"#f0a030\"><title>%s predicted %.1f ms</title></rect>\n", x + 42, y0 - hp, hp, s[i], p[i]
            printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x + 41, y0 + 18, s[i]
        }
        printf "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"#3a6ea5\"/><text x=\"%d\" y=\"%d\">measured (median step)</text>\n", x0, y0 + 32, x0 + 16, y0 + 42
        printf "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"#f0a030\"/><text x=\"%d\" y=\"%d\">predicted (schedule graph on the profile)</text>\n", x0 + 200, y0 + 32, x0 + 216, y0 + 42
        printf "</svg>\n"
    }' "$rows" > "$svg.tmp" && mv "$svg.tmp" "$svg"
echo "chart: $svg; per-schedule logs with the --report tables: $out/$name-*.log"
