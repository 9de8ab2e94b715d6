#!/usr/bin/env bash
# Every GPU check in one go, for a machine where meson is not at hand (a lent or fresh GPU node):
# the gpu suite's tests run straight from the built programs (runtime_cuda, bench_gpu_nccl,
# runtime_cuda_ranks), then scripts/gpu-fidelity.sh measures the cost model on the first device.
# Each step has its own time limit and log under DIR; a summary line per step says PASS, FAIL,
# SKIP (77) or TIMEOUT. Exits 1 when a test failed, 77 when there is no CUDA device, else 0.
# usage: scripts/gpu-check.sh [--out DIR] [BUILD]   (BUILD: a build tree or a gpu-bundle's DIR/build)
set -u
cd "$(dirname "$0")/.."
. scripts/gpu-common.sh
gpu_args out/gpu-check "$@"
mkdir -p "$out" || exit 2
export FSMOE_SOURCE_ROOT=$PWD OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failed=0 ran=0
step() {  # step NAME SECONDS COMMAND...
    local name=$1 limit=$2 t0 rc verdict
    shift 2
    t0=$(date +%s.%N)
    timeout "$limit" "$@" > "$out/$name.log" 2>&1
    rc=$?
    case $rc in
        0) verdict=PASS ran=1 ;;
        77) verdict=SKIP ;;
        124) verdict=TIMEOUT failed=1 ;;
        *) verdict="FAIL (exit $rc)" failed=1 ;;
    esac
    printf '%-20s %-16s %6.1f s   %s\n' "$name" "$verdict" \
        "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {print b - a}')" "$out/$name.log"
    [ $rc -eq 0 ] || [ $rc -eq 77 ] || tail -15 "$out/$name.log" | sed 's/^/    /'
}
nvidia-smi -L > "$out/devices.log" 2>&1 && cat "$out/devices.log"
step runtime_cuda 200 "$build/tests/runtime/test_runtime_cuda"
step bench_gpu_nccl 150 tests/microbench/bench_gpu.sh "$build/microbench/fsmoe-bench" \
    "$build/tests/microbench/test_bench_gpu"
step runtime_cuda_ranks 60 tests/runtime/test_runtime_cuda_mpi.sh "$build/runtime/fsmoe-run" "$PWD"
step gpu_fidelity 240 scripts/gpu-fidelity.sh --out "$out/fidelity" "$build"
[ -f "$out/gpu_fidelity.log" ] && grep -v '^profiles' "$out/gpu_fidelity.log"
[ $failed -eq 0 ] || exit 1
[ $ran -eq 1 ] || exit 77
