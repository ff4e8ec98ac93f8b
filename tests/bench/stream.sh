#!/usr/bin/env bash
# tests/bench/stream.sh [OUT.tsv] - k-means beyond the GPU's memory
# (BENCHMARKS.md section 7): the pinned host-to-device rate (the PCIe floor),
# then bench_kernel -M: N rows of d columns (blobs) in parts of MB, all but
# the last parked in pinned host memory and streamed through the GPU every
# pass, beside the same fit resident.  Needs a GPU and the bench programs
# (the bundle's suite); CASES, MB, ITERS from the environment.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-stream.tsv}
B=${BENCH_KERNEL:-$here/bench_kernel}
[ -s "$out" ] || printf 'section\tmethod\tn\td\tk\tseconds\tnote\n' >"$out"
"$B" bandwidth -t "$out"
"$B" gpu -t "$out" -i "${ITERS:-5}" -M "${MB:-1024}" ${CASES:-1e8,8,16 1e8,8,256}
