#!/usr/bin/env bash
# tests/bench/embeddings_seed.sh [OUT.tsv] - BENCHMARKS.md's Embeddings
# section, the seeding: bench_kernel gpu -P (k-means++ and k-means||, each
# seeding alone and a whole fit of 10 iterations with it, their inertias) on
# embedding-like rows, and the FAISS workload (10^6 x 256, k = 20,000, 25
# iterations) with k-means||, in one run.  Then prints the section.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/results/embeddings-seed-$(hostname -s)-$(date +%F).tsv}
printf 'section\tmethod\tn\td\tk\tseconds\tnote\n' >"$out"
"$here/bench_kernel" gpu -E -P -t "$out" -i 10 1000000,128,4096 1000000,768,1024 1000000,768,4096
"$here/bench_kernel" gpu -P -S -t "$out" -i 25 1000000,256,20000
python3 "$here/report.py" --embeddings "$out"
