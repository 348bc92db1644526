#!/usr/bin/env bash
# Times one jaxbench command on a store in turns: the code of an older commit, then this
# checkout with the store's cache emptied (cold), then with it as that run left it (warm).
# Three turns; wall seconds. Run it alone, from a folder that holds the store (e.g. the A/ and
# B/ that scripts/store_scale.py's generate() writes):
#
#   bash /path/to/scripts/store_turns.sh OLD_REV compare A B | tee turns.txt
#
# OLD_REV is checked out into a temporary clone (its modules compiled first, as an installed
# jaxbench's are); this checkout is used as it is. Needs the checkout's .venv.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
py="$here/.venv/bin/python"
old_rev="$1"; shift
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
git clone -q "$here" "$work/old" && git -C "$work/old" checkout -q "$old_rev"
"$py" -m compileall -q "$work/old/jaxbench" "$here/jaxbench" > /dev/null
secs() { local s; s=$(date +%s.%N); "$@" > /dev/null 2>&1 || true; echo "$(date +%s.%N) - $s" | bc; }
echo "jaxbench $* on $(hostname), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); old $(git -C "$work/old" rev-parse --short HEAD), new $(git -C "$here" rev-parse --short HEAD)$(git -C "$here" diff --quiet || echo ' (with uncommitted changes)')"
for turn in 1 2 3; do
  o=$(PYTHONPATH="$work/old" secs "$py" -m jaxbench "$@")
  rm -rf "$work/cache"
  c=$(JAXBENCH_STORE_CACHE="$work/cache" PYTHONPATH="$here" secs "$py" -m jaxbench "$@")
  w=$(JAXBENCH_STORE_CACHE="$work/cache" PYTHONPATH="$here" secs "$py" -m jaxbench "$@")
  echo "turn $turn: old $o s, new (cold cache) $c s, new (warm cache) $w s"
done
