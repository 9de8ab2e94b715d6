#!/usr/bin/env bash
# The main job (README, first command): install, build, and plan the reference models on the
# papers' testbeds, printing each plan's summary. Plans land in out/plans/.
# As more capabilities land (fsmoe-bench, fsmoe-run) they join this job (design.md §1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh build
mkdir -p out/plans
plan=build/planner/fsmoe-plan
while read -r golden model cluster extra; do
    case "$golden" in ''|'#'*) continue ;; esac
    name=$(basename "$golden")
    # The planner's summary (stderr): layout, predicted iteration, speed-ups, pipeline degrees.
    # shellcheck disable=SC2086
    "$plan" --model "$model" --cluster "$cluster" $extra -o "out/plans/$name" 2>&1
    echo
done < scripts/goldens.list
echo "main job: $(ls out/plans | wc -l) plans written to out/plans/"
echo "  per-layer tables:  $plan explain out/plans/<plan>.yaml"
echo "  compare to golden: $plan diff plans/<plan>.yaml out/plans/<plan>.yaml"
