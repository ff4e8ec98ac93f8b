#!/usr/bin/env bash
# tests/bench/gpus.sh [OUT.tsv] - "Several GPUs" (BENCHMARKS.md section 9):
# bench_kernel -G: a k-means iteration with the rows in one share a GPU (the
# shares' steps at once, their sums added on the host) beside the same fit
# whole on one GPU, for each list of GPUS ("0 0,1 0,1,2,3"; on one GPU
# "0 0,0 0,0,0,0" measures what the split costs there); then bench_matmul
# -G: a 16384^2 float64 product split by rows over the same lists.  The
# 768-d case is 5 x 10^6 rows, so that the shares and the whole fit (31 GB
# each) fit one 80 GB GPU in turn.  Needs
# the bench programs (the bundle's suite); GPUS, CASES, ITERS, MM_N from the
# environment.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-gpus.tsv}
B=${BENCH_KERNEL:-$here/bench_kernel}
M=${BENCH_MATMUL:-$here/bench_matmul}
gpus=${GPUS:-"0 0,0 0,0,0,0"}
[ -s "$out" ] || printf 'section\tmethod\tn\td\tk\tseconds\tnote\n' >"$out"
# (a case that fails says so in the TSV; the others go on)
for g in $gpus; do
  "$B" gpu -t "$out" -i "${ITERS:-10}" -G "$g" ${CASES:-1e8,8,16 5e6,768,100} || true
done
args=()
for g in $gpus; do args+=(-G "$g"); done
# the product's rows: "split LIST  N x N  ms  TFLOP/s" into the TSV as section gpus_matmul
"$M" gpu "${args[@]}" "${MM_N:-16384}" | tee /dev/stderr |
  awk -v OFS='\t' '$1 == "pg_gpu" || $1 == "split" {
      list = $1 == "pg_gpu" ? "one workspace" : $2; n = $1 == "pg_gpu" ? $2 : $3; ms = $1 == "pg_gpu" ? $5 : $6
      print "gpus_matmul", list, n, n, n, ms / 1000, "seconds a " n "^2 float64 product, host to host" }' >>"$out"
