#!/usr/bin/env bash
# Configures (once) and builds fsmoe into BUILD_DIR (default: build).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" >/dev/null
fi
ninja -C "$dir" >/dev/null
echo "build: $dir ok"
