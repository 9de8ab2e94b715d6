# Sourced by the scripts/gpu-*.sh scripts, from the source root.
# gpu_args DEFAULT_OUT [--out DIR] [BUILD] [ARGS...]: sets out, build (default build) and the
# array rest.
gpu_args()
{
    out=$1
    shift
    if [ "${1:-}" = --out ]; then
        out=${2:?--out needs a folder}
        shift 2
    fi
    build=${1:-build}
    [ $# -gt 0 ] && shift
    rest=("$@")
}
# gpu_probe FSMOE_RUN: exits 77, saying why, when fsmoe-run cannot train on a CUDA device (no
# device, or a build without the cuda backend); $out must exist.
gpu_probe()
{
    if ! "$1" --model models/tiny-moe.yaml --backend cuda --steps 1 --eval-every 0 \
            --data data/jargon.txt > /dev/null 2> "$out/probe.err"; then
        echo "$(basename "$0" .sh): skipped: $(cat "$out/probe.err")"
        exit 77
    fi
}
