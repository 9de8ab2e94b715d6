#!/usr/bin/env bash
# Installs what fsmoe needs on a fresh Debian 12 machine (toolchain.md) — idempotent, quiet.
# Needs root (or sudo). Skips the package manager when everything is already present.
set -euo pipefail

# clang + libclang-rt-dev: scripts/fuzz.sh (the fuzz suite) builds the libFuzzer harnesses with
# clang -fsanitize=fuzzer,address,undefined; Debian's clang only recommends its runtime
# (libclang_rt.fuzzer/asan/ubsan in libclang-rt-14-dev), so it is named here.
pkgs=(meson ninja-build pkg-config gcc libgsl-dev libnlopt-dev libyaml-dev libcmocka-dev iproute2
      libopenblas-dev libopenmpi-dev openmpi-bin python3-torch clang libclang-rt-dev)

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: all packages present"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
