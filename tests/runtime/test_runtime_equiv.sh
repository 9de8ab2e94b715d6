#!/usr/bin/env bash
# Implements: the mpi-suite equivalence runs (test_runtime_equiv.c): dp2, dp4, dp2·ep2, ep4,
# tensor parallelism and expert slices (mp2, esp2, mp2·ep2, esp2·ep2, mp2·ep2·esp2; the ESP
# pipeline and Parm's S1),
# dropless and with capacity, several pipeline degrees, both expert kinds and three gates in
# the fp64 build, once with one in-order stream (--no-overlap) and three times with the gradient
# AllReduce cut into tasks at every anchor of the backward on two streams (partitioned: the
# scheduled Gradient-AllReduce of grad_sync.h); 50 steps of dp2, dp4, dp2·ep2 and ep4 in the
# fp32 build, once partitioned.
# usage: test_runtime_equiv.sh EQUIV64 EQUIV32
set -u
e64=$1 e32=$2
mpi=(mpirun --allow-run-as-root --oversubscribe --mca mpi_yield_when_idle 1)
passed=0 failed=0
run() { # NP BIN args...
    local np=$1 bin=$2
    shift 2
    if timeout 300 "${mpi[@]}" -np "$np" "$bin" "$@"; then
        passed=$((passed + 1))
    else
        echo "FAIL: -np $np $(basename "$bin") $*"
        failed=$((failed + 1))
    fi
}
#        np bin  ep rf rb cap  steps expert gate
run 2 "$e64" 1 1 1 0   3 gpt gshard
run 2 "$e64" 2 2 3 0   3 gpt gshard
run 2 "$e64" 2 1 1 1.2 3 swiglu gshard
run 4 "$e64" 1 1 1 1.2 3 gpt sigmoid
run 4 "$e64" 2 3 2 0   3 swiglu gshard
run 4 "$e64" 4 1 4 0   3 gpt xmoe
run 4 "$e64" 4 2 2 1.0 3 gpt gshard
run 4 "$e64" 2 3 2 0   3 swiglu gshard serial
run 2 "$e64" 2 2 3 0   3 gpt gshard partitioned
run 4 "$e64" 2 2 3 0   3 gpt gshard partitioned
run 4 "$e64" 4 1 2 1.2 3 swiglu gshard partitioned
# tensor parallelism (MPxEPxESP): duplicated tokens, vocabulary-parallel cross-entropy, expert
# slices with the ESP AllGather/ReduceScatter, dense FFN blocks split over MP
run 2 "$e64" 2x1x1 1 1 0   3 gpt gshard dense
run 2 "$e64" 1x1x2 2 1 0   3 gpt gshard
run 4 "$e64" 1x2x2 1 2 0   3 swiglu gshard
run 4 "$e64" 2x2x1 2 3 0   3 gpt gshard
run 4 "$e64" 2x2x2 1 2 0   3 gpt gshard
run 4 "$e64" 2x2x2 2 1 1.2 3 swiglu sigmoid
run 4 "$e64" 2x2x2 3 2 0   3 gpt gshard dense
run 4 "$e64" 2x2x2 2 2 0   3 gpt gshard partitioned
# Parm's S1 (PauseMP): tokens split over MP, AllToAll over EP&ESP to every slice
run 2 "$e64" 2x1x1 1 1 0   3 gpt gshard pause
run 4 "$e64" 2x2x2 1 2 0   3 gpt gshard pause
run 4 "$e64" 2x2x2 2 1 1.2 3 swiglu sigmoid pause
run 4 "$e64" 2x4x1 2 2 0   3 gpt gshard pause
run 4 "$e64" 2x1x2 2 2 0   3 gpt xmoe pause
# DeepSpeed's expert tensor parallelism (mp = esp)
run 2 "$e64" 2x1x2 1 1 0   3 gpt gshard etp
run 4 "$e64" 2x2x2 1 1 1.2 3 swiglu gshard etp
run 4 "$e64" 2x2x2 2 3 0   3 gpt gshard etp
# Parm's S2: slots split over MP, AllToAll over EP&ESP, MP AllGather per chunk (SAA)
run 2 "$e64" 2x1x1 1 1 0   3 gpt gshard s2
run 2 "$e64" 1x1x2 2 1 0   3 gpt gshard s2
run 4 "$e64" 2x2x2 1 2 0   3 gpt gshard s2
run 4 "$e64" 2x2x2 3 2 1.2 3 swiglu sigmoid s2
run 4 "$e64" 2x4x1 2 2 0   3 gpt gshard s2
# MoNTA's O1 and O2/O3 (mp = esp; R_FWD/R_BWD the AllToAll chunks)
run 2 "$e64" 2x1x2 1 1 0   3 gpt gshard o1
run 4 "$e64" 2x2x2 1 1 0   3 gpt gshard o1
run 4 "$e64" 2x2x2 3 2 0   3 gpt gshard o2
run 4 "$e64" 2x2x2 2 3 1.2 3 swiglu sigmoid o2
run 2 "$e32" 1 1 1 0  50 gpt gshard
run 4 "$e32" 1 2 2 0  50 gpt gshard
run 4 "$e32" 2 2 1 0  50 swiglu gshard
run 4 "$e32" 4 1 1 0  50 gpt gshard
run 4 "$e32" 2 2 2 0  50 gpt gshard partitioned
run 4 "$e32" 2x2x2 2 2 0 50 gpt gshard
run 4 "$e32" 2x2x2 2 2 0 50 gpt gshard pause
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
