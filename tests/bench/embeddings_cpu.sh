#!/usr/bin/env bash
# tests/bench/embeddings_cpu.sh [OUT.tsv] - BENCHMARKS.md's Embeddings section,
# the CPU path: bench_kernel cpu (the default route: the plain loop or
# OpenBLAS's GEMM, cpu/gemm.c; and -R 1, the plain loop alone) on one thread
# and on every core, beside scikit-learn's Lloyd (compare.py sklearn) on the
# same cores, N = 10^5, k = 256, d = 128, 384, 768, in one run; and the same
# rows rounded to float32 (bench_kernel -F: a FLOAT32 set, sgemm; scikit-learn
# on a float32 array).  Then prints the section.  Run from the checkout after `make tests/bench/bench_kernel`,
# or from the bundle's suite/.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/results/embeddings-cpu-$(hostname -s)-$(date +%F).tsv}
cases="100000,128,256 100000,384,256 100000,768,256"
cores=$(nproc)
printf 'section\tmethod\tn\td\tk\tseconds\tnote\n' >"$out"
for t in 1 "$cores"; do
  "$here/bench_kernel" cpu -T "$t" -S -t "$out" -i 3 $cases
  "$here/bench_kernel" cpu -T "$t" -R 1 -S -t "$out" -i 3 $cases
  "$here/bench_kernel" cpu -T "$t" -F -S -t "$out" -i 3 $cases
done
(cd "$here" && python3 compare.py --tsv "$out" --iters 2 sklearn $cases)
(cd "$here" && python3 compare.py --tsv "$out" --iters 2 --float32 sklearn $cases)
python3 "$here/report.py" --embeddings "$out"
