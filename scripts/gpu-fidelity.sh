#!/usr/bin/env bash
# The cost model against fsmoe-run on this machine's first GPU, one rank: per model, fsmoe-bench
# (NCCL backend) fits the GEMM at the model's expert shape and the device copy, fsmoe-plan plans
# one rank on that profile, and fsmoe-run --backend cuda --plan --report trains it; prints each
# run's step and its measured/predicted table per task kind. A measurement, not a test: it exits
# 0 whatever the figures (77 without a CUDA device or without the cuda backend, non-zero when a
# program fails). Needs a tree built with the gpu feature (BUILD, default build).
# usage: scripts/gpu-fidelity.sh [--out DIR] [BUILD] [MODEL:BATCH:SEQ:STEPS ...]
#        default models: comm-moe:4:256:40 gpt2-moe:4:1024:12
set -u
cd "$(dirname "$0")/.."
. scripts/gpu-common.sh
gpu_args out/gpu-fidelity "$@"
runs=("${rest[@]}")
[ ${#runs[@]} -gt 0 ] || runs=(comm-moe:4:256:40 gpt2-moe:4:1024:12)
bench=$build/microbench/fsmoe-bench plan=$build/planner/fsmoe-plan run=$build/runtime/fsmoe-run
for f in "$bench" "$plan" "$run"; do
    [ -x "$f" ] || { echo "gpu-fidelity: $f is not built (scripts/build.sh $build)" >&2; exit 2; }
done
mkdir -p "$out" || exit 2
gpu_probe "$run"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for spec in "${runs[@]}"; do
    IFS=: read -r name b l n <<< "$spec"
    model=models/$name.yaml
    [ -f "$model" ] && [ -n "$n" ] ||
        { echo "gpu-fidelity: '$spec': expected MODEL:BATCH:SEQ:STEPS with models/MODEL.yaml" >&2; exit 2; }
    M=$(awk '$1 == "hidden:" {print $2; exit}' "$model")
    H=$(awk '$1 == "ffn_hidden:" {print $2; exit}' "$model")
    mpirun -np 1 "$bench" --backend nccl --ops gemm,copy --gemm-shapes "$M:$H" \
        -o "$out/$name-gpu.yaml" > "$out/$name-bench.log" 2>&1 ||
        { tail -5 "$out/$name-bench.log"; echo "gpu-fidelity: fsmoe-bench failed" >&2; exit 1; }
    "$plan" --model "$model" --cluster "$out/$name-gpu.yaml" --world 1 --gpus-per-node 1 --dp 1 \
        --mp 1 --ep 1 --esp 1 --batch "$b" --seq "$l" -o "$out/$name-plan.yaml" --quiet ||
        { echo "gpu-fidelity: fsmoe-plan failed for $name" >&2; exit 1; }
    "$run" --backend cuda --model "$model" --data data/jargon.txt --plan "$out/$name-plan.yaml" \
        --batch "$b" --seq "$l" --steps "$n" --eval-every 0 --report > "$out/$name-run.log" 2>&1 ||
        { tail -5 "$out/$name-run.log"; echo "gpu-fidelity: fsmoe-run failed for $name" >&2; exit 1; }
    echo "== $name (batch $b x seq $l, $n steps): $(grep -m1 '^# mean step' "$out/$name-run.log")"
    sed -n '/^  per kind/,/^  step /p' "$out/$name-run.log" | grep -v '^  \(per layer\|outside\|L[0-9]\)'
done
echo "profiles, plans and logs: $out/"
