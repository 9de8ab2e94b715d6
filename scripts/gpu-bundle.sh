#!/usr/bin/env bash
# Packs a built tree's programs and the GPU tests into a folder that runs on a GPU machine which
# has CUDA 13's libraries (cudart, cuBLAS, NCCL) and an x86-64 glibc at least this machine's, but
# none of fsmoe's other libraries: libyaml, GSL, NLopt, OpenBLAS and Open MPI (mpirun, its
# plugins, PMIx) travel in the folder. DIR/env.sh sets the paths; DIR/build mirrors the build
# tree's layout for the programs, so scripts that take a BUILD folder take DIR/build. The mpi
# suite's gpu_bundle test runs a bundle with the system's copies of all it carries hidden.
# usage: scripts/gpu-bundle.sh [BUILD] [DIR]      (default: build .gpu)
#        then, on the GPU machine, from the source root:
#        . DIR/env.sh && scripts/gpu-fidelity.sh DIR/build
set -eu
cd "$(dirname "$0")/.."
build=${1:-build} dir=${2:-.gpu}
progs=(runtime/fsmoe-run microbench/fsmoe-bench planner/fsmoe-plan
       tests/runtime/test_runtime_cuda tests/microbench/test_bench_gpu)
for p in "${progs[@]}"; do
    [ -x "$build/$p" ] || { echo "gpu-bundle: $build/$p is not built" >&2; exit 2; }
done
ldd "$build/runtime/fsmoe-run" | grep -q libcudart ||
    { echo "gpu-bundle: $build was built without the gpu feature" >&2; exit 2; }
ompi_lib=/usr/lib/x86_64-linux-gnu/openmpi/lib pmix=/usr/lib/x86_64-linux-gnu/pmix2
[ -d "$ompi_lib/openmpi3" ] && [ -x /usr/bin/orterun ] ||
    { echo "gpu-bundle: expected Debian's Open MPI 4 under $ompi_lib" >&2; exit 2; }
rm -rf "$dir"
mkdir -p "$dir/lib" "$dir/ompi/bin" "$dir/ompi/lib/x86_64-linux-gnu/openmpi/lib/openmpi3" \
    "$dir/ompi/share" "$dir/pmix/lib/pmix" "$dir/pmix/share"
for p in "${progs[@]}"; do
    mkdir -p "$dir/build/$(dirname "$p")"
    cp "$build/$p" "$dir/build/$p"
done
cp /usr/bin/orterun /usr/bin/orted "$dir/ompi/bin/"
ln -s orterun "$dir/ompi/bin/mpirun"
cp -r /usr/share/openmpi "$dir/ompi/share/"
cp -r "$pmix/share/pmix" "$dir/pmix/share/"
cp "$pmix"/lib/pmix/*.so "$dir/pmix/lib/pmix/"

# The libraries that travel: everything the programs, mpirun and the kept plugins load, except
# glibc's own and CUDA's (the GPU machine's must match its driver).
system='/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux-x86-64)\.so'
deps() { ldd "$@" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u; }
# An Open MPI plugin travels when it needs no network stack this bundle leaves out (verbs, UCX,
# libfabric, PSM: the GPU machine is one node, so shared memory and TCP carry MPI).
leave_out='libibverbs|libucp|libuct|libucs|libucm|libfabric|libpsm|libinfinipath|librdmacm|libefa|libnl-|liboshmem'
for f in "$ompi_lib"/openmpi3/*.so; do
    deps "$f" | grep -Eq "$leave_out" || cp "$f" "$dir/ompi/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/"
done
want=$( { for p in "${progs[@]}"; do deps "$build/$p"; done
          deps /usr/bin/orterun "$dir"/ompi/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/*.so \
               "$dir"/pmix/lib/pmix/*.so "$pmix/lib/libpmix.so.2"
          echo "$pmix/lib/libpmix.so.2"; } | sort -u | grep -Ev "$system" | grep -v '/cuda/')
for f in $want; do cp -L "$f" "$dir/lib/"; done

cat > "$dir/env.sh" <<'EOF'
# Source from the source root: . DIR/env.sh
_b=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
_cuda=
for _n in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
    _f=$(find /usr/local /opt /usr/lib -name "$_n" -print -quit 2>/dev/null)
    [ -n "$_f" ] || { echo "env.sh: no $_n on this machine" >&2; continue; }
    case ":$_cuda:" in *":$(dirname "$_f"):"*) ;; *) _cuda=$_cuda:$(dirname "$_f") ;; esac
done
export LD_LIBRARY_PATH=$_b/lib$_cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$_b/ompi/bin:$PATH OPAL_PREFIX=$_b/ompi PMIX_INSTALL_PREFIX=$_b/pmix
export PMIX_MCA_mca_base_component_path=$_b/pmix/lib/pmix
export OMPI_MCA_mca_base_component_path=$_b/ompi/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset _b _cuda _n _f
EOF
echo "gpu-bundle: $dir ($(du -sh "$dir" | cut -f1)); on the GPU machine: . $dir/env.sh"
