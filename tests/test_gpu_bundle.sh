#!/usr/bin/env bash
# Implements: the mpi-suite check of scripts/gpu-bundle.sh, the folder that carries a
# gpu-feature build to a GPU machine with only CUDA's libraries: in a private mount namespace
# every system copy of the libraries it carries, and Open MPI's installation, is hidden (bind
# mounts of /dev/null and of an empty folder); then, with the bundle's env.sh, the programs
# find every library, `mpirun -np 2` trains tiny-moe for 2 steps on the host backend, fsmoe-plan
# plans, and the gpu tests run to their verdict (77 without a device, not a loader error).
# Exits 77 (skipped) on a build without the gpu feature, without Debian's Open MPI layout, or
# where a mount namespace cannot be made.
# usage: test_gpu_bundle.sh SOURCE_ROOT BUILD_ROOT
set -u
src=$1 build=$2
tmp=$(mktemp -d /tmp/fsmoe-gpu-bundle.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
out=$("$src/scripts/gpu-bundle.sh" "$build" "$tmp/b" 2>&1)
rc=$?
if [ $rc -eq 2 ]; then
    echo "skipped: $out"
    exit 77
fi
[ $rc -eq 0 ] || { echo "$out"; echo "FAIL: scripts/gpu-bundle.sh exited $rc"; exit 1; }
if ! unshare -m --propagation private true 2> /dev/null; then
    echo "skipped: no mount namespace here"
    exit 77
fi
cat > "$tmp/inside.sh" << 'INSIDE'
set -u
src=$1 b=$2 empty=$3
fail() { echo "FAIL: $*"; exit 1; }
hidden=0 seen=" "
for f in "$b"/lib/*; do
    n=$(basename "$f")
    for d in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu \
             /usr/lib/x86_64-linux-gnu/openblas-pthread; do
        [ -e "$d/$n" ] || continue
        real=$(readlink -f "$d/$n") # /lib and /usr/lib are one folder on a merged /usr
        case $seen in *" $real "*) continue ;; esac
        mount --bind /dev/null "$real" 2> /dev/null ||
            { echo "skipped: cannot bind-mount here"; exit 77; }
        seen="$seen$real " hidden=$((hidden + 1))
    done
done
for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/share/openmpi \
         /etc/openmpi; do
    [ -d "$d" ] && mount --bind "$empty" "$d"
done
for f in /usr/bin/orterun /usr/bin/orted; do
    [ -e "$f" ] && mount --bind /dev/null "$f"
done
[ "$hidden" -gt 0 ] || fail "no system copy of the bundle's libraries was found to hide"
. "$b/env.sh"
cd "$src" || fail "cd $src"
for p in runtime/fsmoe-run microbench/fsmoe-bench planner/fsmoe-plan \
         tests/runtime/test_runtime_cuda tests/microbench/test_bench_gpu; do
    missing=$(ldd "$b/build/$p" | grep 'not found')
    [ -z "$missing" ] || fail "$p: $missing"
done
out=$(timeout 120 mpirun --oversubscribe -np 2 "$b/build/runtime/fsmoe-run" \
    --model models/tiny-moe.yaml --steps 2 --eval-every 0 --threads 1 2>&1) ||
    { echo "$out"; fail "mpirun -np 2 fsmoe-run from the bundle"; }
echo "$out" | grep -q '^step 2/2 ' || { echo "$out"; fail "no second step"; }
"$b/build/planner/fsmoe-plan" --model models/tiny-moe.yaml --cluster clusters/testbed-b.yaml \
    --world 16 --quiet > /dev/null || fail "fsmoe-plan from the bundle"
for t in tests/runtime/test_runtime_cuda tests/microbench/test_bench_gpu; do
    "$b/build/$t" > "$b/t.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || [ $rc -eq 77 ] || { cat "$b/t.log"; fail "$t exited $rc"; }
done
echo "the bundle ran with $hidden system libraries and Open MPI hidden"
INSIDE
mkdir "$tmp/empty"
unshare -m --propagation private bash "$tmp/inside.sh" "$src" "$tmp/b" "$tmp/empty"
