#!/usr/bin/env bash
# Implements: the gpu-suite check of the cuda backend on many ranks (NCCL collectives): the
# same training (tiny-moe, 2 ranks, ep 2, r 2, 6 steps) with --backend cuda and with --backend
# host prints the same losses within 2e-3 (fp32 on both; the cuda backend's atomics and cuBLAS
# sum in other orders, and the printed losses carry 4 decimals). Exits 77 (skipped) without the
# cuda backend or with fewer than 2 devices (NCCL needs one device per rank of a node).
# usage: test_runtime_cuda_mpi.sh FSMOE_RUN SOURCE_ROOT
set -u
run=$1 src=$2
tmp=$(mktemp -d /tmp/fsmoe-cuda-mpi.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mpi=(timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2)
args=(--model "$src/models/tiny-moe.yaml" --steps 6 --threads 1 --eval-every 0 --ep 2 --chunks 2)
if ! "$run" --model "$src/models/tiny-moe.yaml" --backend cuda --steps 1 --eval-every 0 \
        > /dev/null 2> "$tmp/probe.err"; then
    echo "skipped: $(cat "$tmp/probe.err")"
    exit 77
fi
devices=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${devices:-0}" -lt 2 ]; then
    echo "skipped: $devices CUDA device(s); 2 ranks need 2"
    exit 77
fi
losses() { awk '/^step/ {print $2, $5}' "$1"; }
for b in host cuda; do
    "${mpi[@]}" "$run" "${args[@]}" --backend $b > "$tmp/$b.out" 2> "$tmp/$b.err" || {
        cat "$tmp/$b.err"
        echo "FAIL: 2 ranks with --backend $b"
        exit 1
    }
done
worst=$(paste -d' ' <(losses "$tmp/host.out") <(losses "$tmp/cuda.out") |
    awk '$1 == $3 {n++; d = $2 - $4; if (d < 0) d = -d; if (d > w) w = d}
         END {if (n != 6) print "missing"; else printf "%.4g\n", w + 0}')
paste <(losses "$tmp/host.out") <(losses "$tmp/cuda.out")
if [ "$worst" != missing ] && awk -v w="$worst" 'BEGIN {exit !(w <= 2e-3)}'; then
    echo "ok: cuda on 2 ranks (NCCL) matches host on 2 ranks (MPI) within $worst"
else
    echo "FAIL: cuda vs host loss difference $worst (limit 2e-3)"
    exit 1
fi
