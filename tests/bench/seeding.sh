#!/usr/bin/env bash
# tests/bench/seeding.sh [OUT.tsv] - BENCHMARKS.md's Seeding section (issue
# 40): bench_kernel gpu -P on embedding-like rows (10^6 x 768, k = 1000,
# 12 iterations: k-means++ and k-means||, each seeding alone and a whole fit
# with its inertia) and the FAISS workload (10^6 x 256, k = 20,000,
# k-means||, 25 iterations); the same with BEFORE=path/to/an older
# bench_kernel (its rows' method gets "_before"); then seeding_quality.py
# (the server in PGHOST: scikit-learn beside gpu_kmeans on blobs).  Then
# prints the section.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/results/seeding-$(hostname -s)-$(date +%F).tsv}
printf 'section\tmethod\tn\td\tk\tseconds\tnote\n' >"$out"
"$here/bench_kernel" gpu -E -P -i 12 -t "$out" 1000000,768,1000
"$here/bench_kernel" gpu -P -S -i 25 -t "$out" 1000000,256,20000
if [ -n "${BEFORE:-}" ]; then
  tmp=$(mktemp)
  "$BEFORE" gpu -E -P -i 12 -t "$tmp" 1000000,768,1000
  awk -F'\t' -v OFS='\t' 'NR > 1 { $2 = $2 "_before"; print }' "$tmp" >>"$out"
  rm -f "$tmp"
fi
# the quality rows: section quality, method, n (the seed), the ARI in seconds' place
if [ -n "${PGHOST:-}" ]; then
  # (PSQL_ first: bash expands each prefix assignment after the ones before it)
  PSQL_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-} LD_LIBRARY_PATH=${PYTHON_LD_LIBRARY_PATH:-${LD_LIBRARY_PATH:-}} \
    python3 "$here/seeding_quality.py" |
    awk -F'\t' -v OFS='\t' 'NR > 1 && $3 != "-" { print "quality", $2, $3, 0, 0, $4, $1 " (" $5 " s)" }' >>"$out" || true
fi
python3 "$here/report.py" --embeddings "$out"
