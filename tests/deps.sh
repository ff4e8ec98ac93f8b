#!/bin/bash
# tests/deps.sh - the Makefile's hand-kept prerequisites against the
# sources: every object of src/ and cuda/ must be rebuilt when a header of
# this repository that it includes (directly or through another header)
# changes, as `make -n -W HEADER` shows.  Exits 1 and names each object
# and header that lack the rule; else prints "deps: N includes checked".
# Needs PG_CONFIG (PGXS) as the build does.
set -euo pipefail
cd "$(dirname "$0")/.."
PG_CONFIG=${PG_CONFIG:-pg_config}

# the local headers a file includes, transitively ("name" resolved beside
# the file, then in cuda/ and src/), one a line
includes() {
  local f=$1 seen=$2 h dir p
  dir=$(dirname "$f")
  for h in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
    for p in "$dir/$h" "cuda/$h" "src/$h"; do
      p=$(realpath --relative-to=. "$p" 2>/dev/null) || continue
      if [ -f "$p" ]; then
        if ! grep -qxF -- "$p" "$seen"; then
          echo "$p" >>"$seen"
          includes "$p" "$seen"
        fi
        break
      fi
    done
  done
}

pairs=$(mktemp) seen=$(mktemp) tree=$(mktemp -d)
trap 'rm -rf "$pairs" "$seen" "$tree"' EXIT
for f in $(git ls-files -- 'src/*.c' 'cuda/*.c' 'cuda/cpu/*.c' 'cuda/gpu/*.cu'); do
  : >"$seen"
  includes "$f" "$seen"
  sed "s|^|${f%.*}.o |" "$seen" >>"$pairs"
done

# in a copy whose objects are all up to date (touched, not built: no
# compiler needed), so that make -n -W lists just what depends on the header
git ls-files -- Makefile META.json src cuda extension | while IFS= read -r f; do
  mkdir -p "$tree/$(dirname "$f")" && cp -p "$f" "$tree/$f"
done
cd "$tree"
# shellcheck disable=SC2046
make -s -t $(cut -d' ' -f1 "$pairs" | sort -u) WITH_CUDA=1 PG_CONFIG="$PG_CONFIG" >/dev/null

checked=0 missing=0
# a make a header: which of the objects that include it it would rebuild
for h in $(cut -d' ' -f2 "$pairs" | sort -u); do
  objs=$(awk -v h="$h" '$2 == h { print $1 }' "$pairs")
  # shellcheck disable=SC2086
  rebuilt=$(make -n -W "$h" $objs WITH_CUDA=1 PG_CONFIG="$PG_CONFIG" 2>/dev/null || true)
  for o in $objs; do
    checked=$((checked + 1))
    src=$(ls -- "${o%.o}.c" "${o%.o}.cu" 2>/dev/null || true)
    if ! grep -qF -- "$src" <<<"$rebuilt"; then
      echo "deps: $o includes $h, but the Makefile does not rebuild it when $h changes"
      missing=$((missing + 1))
    fi
  done
done

echo "deps: $checked includes checked, $missing missing"
[ "$missing" -eq 0 ]
