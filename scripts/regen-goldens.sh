#!/bin/sh
# Rewrites every golden plan listed in scripts/goldens.list. Use it only for a deliberate change
# of the planner's decisions or of the plan schema; the regenerated plans/ are reviewed in the
# commit (git diff plans/). CI checks them with scripts/check-goldens.sh.
#   usage: scripts/regen-goldens.sh [FSMOE_PLAN_EXE]   (default: build/planner/fsmoe-plan)
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
exe=${1:-$root/build/planner/fsmoe-plan}
case $exe in
/*) ;;
*) exe=$(pwd)/$exe ;;
esac
if [ ! -x "$exe" ]; then
    echo "regen-goldens: $exe is not an executable (build first: ninja -C build)" >&2
    exit 2
fi
cd "$root"

n=0
while read -r golden model cluster extra; do
    case $golden in '' | '#'*) continue ;; esac
    # $extra is deliberately unquoted: it holds zero or more flags.
    # shellcheck disable=SC2086
    "$exe" --model "$model" --cluster "$cluster" $extra -o "$golden" --quiet
    echo "wrote $golden"
    n=$((n + 1))
done < scripts/goldens.list
echo "regenerated $n golden plans; review with: git diff plans/"
