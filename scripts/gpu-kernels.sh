#!/usr/bin/env bash
# Where a training step's GPU time goes, kernel by kernel: fsmoe-run --backend cuda under
# Nsight Compute (one metric, the kernel's duration; kernels serialised, so the sum is the
# device's busy time, not the step), then the kernels grouped by name: calls, total and share,
# largest first. A measurement, not a test: exits 77 without ncu or a CUDA device.
# usage: scripts/gpu-kernels.sh [--out DIR] [BUILD] [MODEL:BATCH:SEQ:STEPS ...]
#        default: gpt2-moe:4:1024:2 comm-moe:4:256:3
set -u
cd "$(dirname "$0")/.."
. scripts/gpu-common.sh
gpu_args out/gpu-kernels "$@"
runs=("${rest[@]}")
[ ${#runs[@]} -gt 0 ] || runs=(gpt2-moe:4:1024:2 comm-moe:4:256:3)
run=$build/runtime/fsmoe-run
[ -x "$run" ] || { echo "gpu-kernels: $run is not built" >&2; exit 2; }
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "gpu-kernels: skipped: no ncu"; exit 77; }
mkdir -p "$out" || exit 2
gpu_probe "$run"
for spec in "${runs[@]}"; do
    IFS=: read -r name b l n <<< "$spec"
    [ -f "models/$name.yaml" ] && [ -n "$n" ] ||
        { echo "gpu-kernels: '$spec': expected MODEL:BATCH:SEQ:STEPS" >&2; exit 2; }
    "$ncu" --csv --metrics gpu__time_duration.sum --clock-control none --print-units base \
        "$run" --backend cuda --model "models/$name.yaml" --data data/jargon.txt --batch "$b" \
        --seq "$l" --steps "$n" --eval-every 0 > "$out/$name.csv" 2> "$out/$name.err" ||
        { tail -5 "$out/$name.err"; echo "gpu-kernels: ncu failed for $name" >&2; exit 1; }
    echo "== $name (batch $b x seq $l, $n steps): GPU time per kernel, all steps"
    # CSV rows: "ID","Process ID",...,"Kernel Name",...,"Metric Name","Metric Unit","Metric Value"
    python3 - "$out/$name.csv" <<'EOF'
import csv, re, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5]
head = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
h = rows[head]
k, u, v = h.index("Kernel Name"), h.index("Metric Unit"), h.index("Metric Value")
scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3, "nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}
tot = {}
for r in rows[head + 1:]:
    name = re.sub(r"\(.*", "", r[k]).replace("void ", "")
    ms = float(r[v].replace(",", "")) * scale[r[u]]
    c, t = tot.get(name, (0, 0.0))
    tot[name] = (c + 1, t + ms)
all_ms = sum(t for _, t in tot.values())
print(f"  {'kernel':48s} {'calls':>7s} {'ms':>9s} {'share':>6s}")
for name, (c, t) in sorted(tot.items(), key=lambda x: -x[1][1])[:25]:
    print(f"  {name[:48]:48s} {c:7d} {t:9.3f} {100 * t / all_ms:5.1f}%")
print(f"  {'all kernels':48s} {sum(c for c, _ in tot.values()):7d} {all_ms:9.3f}")
EOF
done
