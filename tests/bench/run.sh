#!/usr/bin/env bash
# tests/bench/run.sh [--smoke|--small|--full] [--out DIR] [--e2e-max N] [--only SECTIONS]
#                    [--e2e-n "N ..."] [--e2e-k K,K] [--no-export] [--append]
# The benchmark suite (README, "Benchmarks"): every figure measured side by
# side in this run, on seeded Gaussian blobs (tests/bench/blobs.h):
#   1. per Lloyd iteration on the GPU, through the compute layer, beside the
#      HBM floor (bandwidth measured here) and a PyTorch Lloyd; k-means++;
#   2. the CPU backend beside scikit-learn's Lloyd on the same cores (one
#      thread, and every core);
#   3. gpu_kmeans_fit and gpu_kmeans end to end, in stages, beside reading
#      the table, returning N rows, a Lloyd step in SQL and the export route;
#   4. gpu_matmul beside cuBLAS and beside SQL's join-and-sum.
# --full (the default where nvidia-smi sees a GPU; about 8 minutes on an
# H100 host with 16 cores): N up to 1e8; --small (the default elsewhere; a
# few minutes on 2 cores): N up to 1e6; --smoke: N = 1e4, every code path,
# for CI.  --e2e-max N: the largest table end to end (--full: 1e7).
# Writes DIR/BENCHMARKS.md and DIR/tests/bench/results/ (bench.tsv,
# machine.tsv, bench.png), the repository's layout: DIR defaults to the
# repository, for --smoke to a temporary directory (removed after).
# Uses the server in PGHOST when set; otherwise installs what it needs,
# builds and starts a throwaway cluster (tests/lib.sh).  BENCH_PREBUILT=1:
# the programs are there already (the GPU bundle's `bench`).  PYTHON=path
# picks the interpreter.  Ends with "N passed, M failed".
set -euo pipefail
command="${BENCH_COMMAND:-bash tests/bench/run.sh} $*"
mode= out= e2e_max= only= e2e_n_set= e2e_k_set= export=true append=false
while [ $# -gt 0 ]; do
  case $1 in
    --smoke | --small | --full) mode=${1#--} ;;
    --out) out=$(realpath -m "$2"); shift ;;
    --e2e-max) e2e_max=$2; shift ;;
    --only) only=,$2,; shift ;;
    --e2e-n) e2e_n_set=$2; shift ;;
    --e2e-k) e2e_k_set=$2; shift ;;
    --no-export) export=false ;;
    --append) append=true ;;
    *) sed -n '2,3p' "$0" >&2; exit 2 ;;
  esac
  shift
done
cd "$(dirname "$0")/../.."
. tests/lib.sh
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
mode=${mode:-$([ -n "$gpu" ] && echo full || echo small)}

# sizes and time budgets (seconds) of each mode
case $mode in
  smoke)
    kernel_n="1e4" kernel_d="2 8" kernel_k="8 16"
    cpu_n="1e4" cpu_d="8" cpu_k="8 16"
    e2e_n="1e4" e2e_k="8,16" lloyd_max=1e4
    matmul_n="64" matmul_sql_n=16 iters=3 reps=1 cap=30
    budget_kernel=60 budget_torch=30 budget_cpu=60 budget_e2e=120 budget_matmul=30 ;;
  small)
    kernel_n="1e5 1e6" kernel_d="2 8 32" kernel_k="8 256"
    cpu_n="1e5 1e6" cpu_d="2 8 32" cpu_k="8 64"
    e2e_n="1e5 1e6" e2e_k="8,16" lloyd_max=1e6
    matmul_n="256 1024" matmul_sql_n=128 iters=5 reps=3 cap=30
    budget_kernel=60 budget_torch=60 budget_cpu=120 budget_e2e=150 budget_matmul=30 ;;
  full)
    kernel_n="1e6 1e7 1e8" kernel_d="2 8 32" kernel_k="8 256 1024"
    cpu_n="1e5 1e6" cpu_d="2 8 32" cpu_k="8 64"
    e2e_n="1e6 1e7 1e8" e2e_k="8,256" lloyd_max=1e6 e2e_max=${e2e_max:-1e7}
    matmul_n="4096 8192" matmul_sql_n=256 iters=10 reps=3 cap=60
    budget_kernel=130 budget_torch=55 budget_cpu=45 budget_e2e=210 budget_matmul=35 ;;
esac
if [ -n "$e2e_max" ]; then
  e2e_n=$(for n in $e2e_n; do awk -v n="$n" -v m="$e2e_max" 'BEGIN { if (n + 0 <= m + 0) print n }'; done | xargs)
  # a table of 1e8 rows: about 4 minutes more (making it, then reading it)
  if awk -v m="$e2e_max" 'BEGIN { exit !(m + 0 >= 1e8) }'; then budget_e2e=$((budget_e2e + 240)); fi
fi
# --e2e-n / --e2e-k: these tables and k instead (a 1e8 table alone: --e2e-n 1e8
# --e2e-k 8 --no-export, about 7 minutes on the H100 host)
if [ -n "$e2e_n_set" ]; then
  e2e_n=$e2e_n_set
  if awk -v n="$e2e_n" 'BEGIN { exit !(n + 0 >= 1e8) }'; then budget_e2e=$((budget_e2e + 240)); fi
fi
e2e_k=${e2e_k_set:-$e2e_k}

# the cases N,d,k, N outermost (each time is predicted from the N before)
grid() {
  local n d k
  for n in $1; do for d in $2; do for k in $3; do echo "$n,$d,$k"; done; done; done
}

smoke_tmp=
if [ -z "$out" ] && [ "$mode" = smoke ]; then
  # a smoke run's report goes to the terminal only
  out=$(mktemp -d /tmp/pg_gpu_bench_smoke.XXXXXX) smoke_tmp=$out
fi
out=${out:-.}
# DIR/BENCHMARKS.md and DIR/tests/bench/results: the repository's layout
results=$out/tests/bench/results
mkdir -p "$results"
tsv=$results/bench.tsv meta=$results/machine.tsv
# --append: add to the TSV of an earlier run in the same --out (one report of both)
if ! $append || [ ! -s "$tsv" ]; then
  printf 'section\tmethod\tn\td\tk\tseconds\tnote\n' >"$tsv"
  append=false
fi

# --- what the suite needs: a server, its programs, python with numpy ---
if [ -z "${PGHOST:-}" ]; then
  ensure_deps
  build_and_install
  cluster_start
fi
[ -z "$smoke_tmp" ] || trap 'rm -rf "$smoke_tmp"; cluster_stop' EXIT
if [ -z "${BENCH_PREBUILT:-}" ]; then
  make -s tests/bench/bench_kernel tests/bench/bench_sql tests/bench/bench_matmul PG_CONFIG="${PG_CONFIG:-pg_config}"
fi

# python runs with the caller's libraries (the GPU bundle's wrapper puts
# its own first for PostgreSQL, and keeps the caller's here)
pylib=${PYTHON_LD_LIBRARY_PATH-${LD_LIBRARY_PATH:-}}
pick_python() {
  local p
  for p in ${PYTHON:-} python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null &&
       LD_LIBRARY_PATH=$pylib "$p" -c 'import numpy, sklearn, matplotlib' 2>/dev/null; then
      echo "$p"
      return
    fi
  done
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    log "installing python3-numpy python3-sklearn python3-matplotlib" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      python3-numpy python3-sklearn python3-matplotlib >/dev/null
    echo /usr/bin/python3
  else
    echo "numpy, scikit-learn or matplotlib missing (run as root to install them)" >&2
    echo "${PYTHON:-python3}"
  fi
}
py=(env "LD_LIBRARY_PATH=$pylib" "$(pick_python)")
export_cmd=
$export && export_cmd="${py[*]} tests/bench/compare.py --tsv $tsv export"
device=cpu
[ -n "$gpu" ] && device=gpu
# max_parallel_workers_per_gather of the bench database: half the cores, 2 to 8
# (within the server's default max_parallel_workers, 8)
workers=$(( $(nproc) / 2 ))
workers=$(( workers < 2 ? 2 : workers > 8 ? 8 : workers ))

machine() {
  printf 'date\t%s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
  printf 'mode\t%s\n' "$mode"
  if $append; then
    printf 'command\t%s\n' "$(awk -F'\t' '$1 == "command" { print $2 }' "$meta") && $command"
  else
    printf 'command\t%s\n' "$command"
  fi
  printf 'commit\t%s\n' "$(git rev-parse --short HEAD 2>/dev/null || cat COMMIT 2>/dev/null || echo unknown)"
  printf 'gpu\t%s\n' "${gpu:-none}"
  [ -n "$gpu" ] && printf 'gpu_memory\t%s\n' "$(nvidia-smi --query-gpu=memory.total --format=csv,noheader | head -1)"
  printf 'cpu\t%s\n' "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  printf 'cores\t%s\n' "$(nproc)"
  printf 'memory\t%s\n' "$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
  printf 'device\t%s\n' "$device"
  printf 'python\t%s\n' "$("${py[@]}" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null || echo none)"
  printf 'numpy\t%s\n' "$("${py[@]}" -c 'import numpy; print(numpy.__version__)' 2>/dev/null || echo none)"
  printf 'sklearn\t%s\n' "$("${py[@]}" -c 'import sklearn; print(sklearn.__version__)' 2>/dev/null || echo none)"
  printf 'torch\t%s\n' "$("${py[@]}" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)"
  tests/bench/bench_sql info -W "$workers"
}
machine >"$meta.new"
mv "$meta.new" "$meta"
cat "$meta"

# limit BUDGET PROGRAM...: stopped when it runs past its budget and one cap
limit() { local budget=$1; shift; timeout --kill-after=10 "$((budget + cap))" "$@"; }
# compare BUDGET ARGS...: compare.py (torch, scikit-learn) within BUDGET
compare() {
  local budget=$1; shift
  limit "$budget" "${py[@]}" tests/bench/compare.py --tsv "$tsv" --cap "$cap" --budget "$budget" "$@"
}

# Each section runs all its measurements and fails when one of them did
# (the rows say which); set -e does not apply inside a step.
generator_check() {
  local f=$results/blobs_c.txt rc=0
  tests/bench/bench_kernel print 8 300 >"$f" || rc=1
  "${py[@]}" tests/bench/blobs.py check 300 8 "$f" | tee -a "$tsv" || rc=1
  rm -f "$f"
  return $rc
}

gpu_kernels() {
  local cases rc=0
  cases=$(grid "$kernel_n" "$kernel_d" "$kernel_k")
  if [ -z "$gpu" ]; then
    echo "(no GPU here: the kernel section is measured on a GPU host, --full)"
    compare 10 torch "${cases%%$'\n'*}"
    return
  fi
  tests/bench/bench_kernel bandwidth -t "$tsv" || rc=1
  limit "$budget_kernel" tests/bench/bench_kernel gpu -t "$tsv" -i "$iters" -b "$budget_kernel" -c "$cap" $cases || rc=1
  compare "$budget_torch" --iters 5 torch $cases || rc=1
  return $rc
}

# ours on one thread and on every core (pg_gpu.cpu_threads), like scikit-learn
cpu_path() {
  local cases rc=0 cores share
  cases=$(grid "$cpu_n" "$cpu_d" "$cpu_k")
  cores=$(nproc)
  share=$((budget_cpu * 2 / 5 / (cores > 1 ? 2 : 1)))
  limit "$share" tests/bench/bench_kernel cpu -t "$tsv" -i "$iters" -b "$share" -c "$cap" $cases || rc=1
  if [ "$cores" -gt 1 ]; then
    limit "$share" tests/bench/bench_kernel cpu -T "$cores" -t "$tsv" -i "$iters" -b "$share" -c "$cap" \
      $cases || rc=1
  fi
  compare "$((budget_cpu * 3 / 5))" --iters "$iters" sklearn $cases || rc=1
  return $rc
}

end_to_end() {
  limit "$budget_e2e" tests/bench/bench_sql e2e -W "$workers" -t "$tsv" -b "$budget_e2e" -c "$cap" -r "$reps" -D "$device" -d 8 \
    -k "$e2e_k" -l "$lloyd_max" -T 20 \
    ${export_cmd:+-x "$export_cmd"} $e2e_n
}

matmul() {
  local f=$results/matmul.txt rc=0
  tests/bench/bench_matmul "$device" $matmul_n | tee "$f" || rc=1
  awk '$3 == "x" && $6 == "ms" { printf "matmul\t%s\t%s\t\t\t%.6g\tmedian (tests/bench/bench_matmul)\n", $1, $2, $5 / 1e3 }' \
    "$f" >>"$tsv"
  rm -f "$f"
  limit "$budget_matmul" tests/bench/bench_sql matmul -W "$workers" -t "$tsv" -r "$reps" -D "$device" -b "$budget_matmul" \
    -c "$cap" "$matmul_sql_n" || rc=1
  return $rc
}

# --only kernel,cpu,e2e,matmul: those sections (and the report of them)
section() { [ -z "$only" ] || [[ $only == *,$1,* ]]; }
section data && step "data: the C generator and numpy agree" generator_check
section kernel && step "1. kernels on the GPU beside the HBM floor and PyTorch" gpu_kernels
section cpu && step "2. the CPU backend beside scikit-learn" cpu_path
section e2e && step "3. SQL end to end ($e2e_n rows), pg_gpu.device=$device" end_to_end
section matmul && step "4. matrix products" matmul
step "report: $out/BENCHMARKS.md" "${py[@]}" tests/bench/report.py --tsv "$tsv" --meta "$meta" --out "$out" \
  --results "$results"
echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
