#!/usr/bin/env bash
# tests/bench/embeddings.sh [OUT.tsv] - BENCHMARKS.md's Embeddings section, on
# a GPU machine, every figure in one run: bench_kernel -E -F (embedding-like
# rows, cosine, held as float32 as SQL holds vector and real[]) with the FP16
# route and with -D (the float64 product), the blobs with the
# FP16 route (it hands itself to float64), compare.py torch32 (cuBLAS
# alone and PyTorch's float32 Lloyd, TF32 off and on) and compare.py flash
# (flash-kmeans, FP16 and FP32; the bundle carries it) on the same shapes.
# Then prints the section (report.py --embeddings).  Run from the checkout
# after `make tests/bench/bench_kernel`, or from the bundle's suite/.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/results/embeddings-$(hostname -s)-$(date +%F).tsv}
cases="1000000,128,256 1000000,128,1024 1000000,128,4096 1000000,384,256 1000000,384,1024 1000000,384,4096 1000000,768,256 1000000,768,1024 1000000,768,4096 1000000,1536,256 1000000,1536,1024 1000000,1536,4096"
faiss=1000000,256,20000			# the FAISS wiki's workload (k = 20,000)
printf 'section\tmethod\tn\td\tk\tseconds\tnote\n' >"$out"
"$here/bench_kernel" gpu -E -F -S -t "$out" -i 5 -b 160 -c 30 $cases $faiss
"$here/bench_kernel" gpu -E -F -D -S -t "$out" -i 5 -b 120 -c 30 $cases
"$here/bench_kernel" gpu -F -S -t "$out" -i 5 -b 50 -c 20 1000000,768,1024 1000000,128,1024
(cd "$here" && python3 compare.py --tsv "$out" --iters 5 --budget 160 --cap 30 torch32 $cases $faiss)
(cd "$here" && python3 compare.py --tsv "$out" --iters 5 --budget 160 --cap 30 flash $cases $faiss)
python3 "$here/report.py" --embeddings "$out"
