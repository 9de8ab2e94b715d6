#!/bin/sh
# fsmoe-run's memory table and steady state (runtime/backend.h rt_alloc, main.c memory_print):
#  1. the weights, gradients and optimizer rows of the start-up table equal the parameter count
#     computed here from the model's shape (4 bytes an element; AdamW keeps two moments), for two
#     sequence lengths (the position table grows with L) and both expert kinds;
#  2. the memory model's prediction (libfsmoe/memory.h), printed beside each category, is within
#     1 % of what was allocated, in every category (tiny-moe at two sequence lengths and both
#     expert kinds, comm-moe with GShard's order and an X-MoE gate, dp·ep on 2 ranks, and in the
#     mpi suite also mp·ep·esp on 4 ranks);
#     the categories add up to the total, and the GELU expert run holds no SwiGLU gate gradient
#     (its workspace is smaller than the SwiGLU run's by exactly the experts' E·C·H elements,
#     once: the MoE layers share their backward temporaries; C is GShard's capacity
#     ceil(k·f·N/E));
#  3. the steps allocate nothing: '0 backend allocations', on 1 and 2 threads, with evaluation
#     and checkpoints between the steps; and on 1 thread, after the first two steps, they fault
#     in no page ('0 page faults'). Not asserted on 2 threads, where a pool worker first touches
#     its part of OpenBLAS's lazily used buffer whenever it first runs the largest part of a GEMM
#     (which worker runs which part depends on timing), nor in a sanitizer build (its allocator
#     and shadow memory fault on their own);
#  4. with NP given (the mpi suite), no allocation in the steps on NP ranks under mpirun
#     (dp · ep) either. Page faults are not asserted there: Open MPI grows its own free lists
#     when messages arrive before their receives, which depends on timing.
# Usage: test_runtime_memory.sh FSMOE_RUN SOURCE_ROOT [NP]
set -eu
run=$1 root=$2 np=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
model="$root/models/tiny-moe.yaml"
# tiny-moe's shape (models/tiny-moe.yaml): V 256, M 64, H 256, 4 blocks, all MoE, E 4, k 2, f 1.2
V=256 M=64 H=256 NL=4 E=4 K=2

# the parameter count of a GPT-MoE of this shape with sequence length L: token and position
# tables, per block two layer norms, QKV and output projections with biases, the gate's
# M x E matrix and E experts (W1, b1, W2, b2; SwiGLU adds W3 and has no biases), the final layer
# norm and the untied head
params() { # L EXPERT
    awk -v V=$V -v M=$M -v H=$H -v NL=$NL -v E=$E -v L="$1" -v x="$2" 'BEGIN {
        ex = x == "gpt" ? 2 * M * H + H + M : 3 * M * H;
        blk = 2 * M + M * 3 * M + 3 * M + M * M + M + 2 * M + M * E + E * ex;
        printf "%d\n", V * M + L * M + NL * blk + 2 * M + M * V }'
}
row() { # FILE CATEGORY -> bytes
    awk -v c="$2" -F'|' '$2 ~ "^ *" c " *$" {gsub(/ /, "", $3); print $3; exit}' "$1"
}
check_table() { # FILE L EXPERT
    p=$(params "$2" "$3")
    for c in weights gradients; do
        b=$(row "$1" $c)
        [ "$b" = $((4 * p)) ] || fail "$1: $c $b bytes, expected 4 x $p parameters = $((4 * p))"
    done
    b=$(row "$1" optimizer)
    [ "$b" = $((8 * p)) ] || fail "$1: optimizer $b bytes, expected two moments = $((8 * p))"
    sum=0
    for c in weights gradients optimizer activations workspace buffers; do
        b=$(row "$1" $c)
        [ -n "$b" ] || fail "$1: no '$c' row in the memory table"
        sum=$((sum + b))
    done
    [ "$sum" = "$(row "$1" total)" ] || fail "$1: the categories add up to $sum, not the total"
    check_model "$1"
}
check_model() { # FILE: meas/pred of every category and the total within 1 %
    n=$(awk -F'|' 'NF >= 8 && $2 ~ /^ *(weights|gradients|optimizer|activations|workspace|buffers|total) *$/ {
            gsub(/ /, "", $7); if ($7 + 0 < 0.99 || $7 + 0 > 1.01) { print $2 "= " $7; bad++ } ; n++ }
            END { if (n != 7) print "rows: " n }' "$1")
    [ -z "$n" ] || fail "$1: measured / predicted off by more than 1 %: $n"
}
sanitized=0
ldd "$run" 2>/dev/null | grep -q 'libasan\|libubsan' && sanitized=1
check_steady() { # FILE [allocations-only]
    grep -q '^# memory: 0 backend allocations in the [0-9]* training steps' "$1" ||
        fail "$1: the steps allocated: $(grep '^# memory:' "$1")"
    [ -n "${2:-}" ] || [ $sanitized = 1 ] ||
        grep -q ', 0 page faults in the [0-9]* steps after the first two' "$1" ||
        fail "$1: the steps faulted: $(grep '^# memory:' "$1")"
}

# 1-3 on one rank
for L in 128 64; do
    for x in gpt swiglu; do
        out="$tmp/L$L-$x.out"
        "$run" --model "$model" --seq $L --expert $x --steps 4 --threads 1 --eval-every 0 \
            > "$out" || fail "run L $L $x failed"
        check_table "$out" $L $x
        check_steady "$out"
    done
    # SwiGLU keeps its gate gradient dg (E·C·H, one for all MoE layers); GELU experts do not
    N=$((8 * L))
    C=$(awk -v k=$K -v N=$N -v E=$E 'BEGIN {c = k * 1.2 * N / E; i = int(c); print (c > i + 1e-9 ? i + 1 : i)}')
    dw=$(( $(row "$tmp/L$L-swiglu.out" workspace) - $(row "$tmp/L$L-gpt.out" workspace) ))
    [ "$dw" = $((4 * E * C * H + 4)) ] ||
        fail "L $L: SwiGLU's workspace exceeds GELU's by $dw bytes, expected E·C·H once ($((4 * E * C * H + 4)))"
done
out="$tmp/comm.out"
"$run" --model "$root/models/comm-moe.yaml" --steps 2 --threads 1 --eval-every 0 --order gshard \
    --gate xmoe > "$out" || fail "comm-moe run failed"
check_model "$out"
out="$tmp/t2.out"
"$run" --model "$model" --steps 8 --threads 2 --eval-every 3 --save "$tmp/ck" --save-every 2 \
    > "$out" || fail "run on 2 threads with evaluation and checkpoints failed"
check_table "$out" 128 gpt
check_steady "$out" allocations-only

# 4: NP ranks
if [ -n "$np" ]; then
    out="$tmp/ranks.out"
    mpirun --allow-run-as-root --oversubscribe --mca mpi_yield_when_idle 1 -np "$np" \
        "$run" --model "$model" --ep 2 --steps 5 --threads 1 --eval-every 0 > "$out" ||
        fail "$np-rank run failed"
    check_steady "$out" allocations-only
    check_model "$out"
    grep -q '^# memory per rank (rank 0)' "$out" || fail "no per-rank memory table on $np ranks"
    if [ "$np" -ge 4 ]; then
        out="$tmp/ranks4.out"
        mpirun --allow-run-as-root --oversubscribe --mca mpi_yield_when_idle 1 -np "$np" \
            "$run" --model "$model" --mp 2 --ep 2 --esp 2 --steps 2 --threads 1 --eval-every 0 \
            > "$out" || fail "$np-rank mp·ep·esp run failed"
        check_model "$out"
    fi
fi
echo "runtime_memory: ok"
