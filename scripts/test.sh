#!/usr/bin/env bash
# All tests (README, second command): install, build, run every suite, then the unit suite once
# more under AddressSanitizer + UndefinedBehaviorSanitizer. Exits non-zero if anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh build
meson test -C build --print-errorlogs --num-processes 2

# Sanitizers: a separate build; any UB report aborts the test (halt_on_error).
scripts/build.sh build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C build-asan --suite unit --print-errorlogs --num-processes 2 --timeout-multiplier 4
echo "test: all suites passed (plain and ASan+UBSan)"
