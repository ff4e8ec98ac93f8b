#!/bin/bash
# tests/maps.sh - docs/layout.md against the repository: every tracked file
# under src/, cuda/ and tests/unit/ must be named there in backquotes
# (`cuda/gpu/seed.cu`; the headers of cuda/gpu/common.cuh and
# tests/unit/main.c point here rather than keep lists of their own),
# and every path it names in backquotes under src/, cuda/, tests/ or
# extension/ must
# exist (a file, or a folder ending in /).  Exits 1 and says what is wrong;
# else prints "maps: N files checked, M missing, K gone".
set -euo pipefail
cd "$(dirname "$0")/.."

map=docs/layout.md
[ -f "$map" ] || { echo "maps: $map is missing"; exit 1; }

# the paths named in backquotes, one a line
named=$(grep -o '`[^`]*`' "$map" | tr -d '`' | sort -u)

checked=0 missing=0 gone=0
while IFS= read -r f; do
  checked=$((checked + 1))
  if ! grep -qxF -- "$f" <<<"$named"; then
    echo "maps: $f is tracked but not named in $map"
    missing=$((missing + 1))
  fi
done < <(git ls-files -- src cuda tests/unit)

while IFS= read -r p; do
  case "$p" in
    src/*|cuda/*|tests/*|extension/*) ;;
    *) continue ;;
  esac
  case "$p" in *'*'*|*1.N*) continue ;; esac   # a pattern, not a path
  if [ ! -e "$p" ]; then
    echo "maps: $map names $p, which does not exist"
    gone=$((gone + 1))
  fi
done <<<"$named"

echo "maps: $checked files checked, $missing missing, $gone gone"
[ "$missing" -eq 0 ] && [ "$gone" -eq 0 ] || exit 1
