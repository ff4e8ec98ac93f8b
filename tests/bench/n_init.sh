#!/usr/bin/env bash
# tests/bench/n_init.sh [OUT.tsv] - what several starts cost (BENCHMARKS.md
# section 6): gpu_kmeans_fit on N rows of D columns (16 Gaussian blobs), k = K,
# 50 iterations a start (max_iter 50, tol 0: the same work in every start),
# n_init = 1, 3 and 10 on the GPU, 1 and 3 on the CPU (WORKERS parallel
# workers and threads): the whole call, and from DEBUG2 its read, seeding and
# iterating (the rows are read once, whatever n_init).  Needs a server with pg_gpu
# (PGHOST etc.: the bundle's start-server.sh); N, D, K, WORKERS, DEVICES from
# the environment (10^7, 8, 100, 8, "gpu cpu").
set -eu
N=${N:-10000000} D=${D:-8} K=${K:-100} WORKERS=${WORKERS:-8} DEVICES=${DEVICES:-"gpu cpu"}
out=${1:-n_init.tsv}
db=pg_gpu_n_init
psql -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
q() { psql -X -q -v ON_ERROR_STOP=1 -d $db "$@"; }
cols=$(seq -s, -f "(i %% 16) * 10 + sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()) AS c%g" 1 "$D")
q -c "CREATE EXTENSION pg_gpu" -c "CREATE UNLOGGED TABLE pts AS SELECT i AS id, $cols FROM generate_series(1, $N) i" \
  -c "ALTER TABLE pts ADD PRIMARY KEY (id)" -c "VACUUM ANALYZE pts" >/dev/null
[ -s "$out" ] || printf 'section\tmethod\tn\td\tk\tseconds\tnote\n' >"$out"
for dev in $DEVICES; do
  starts="1 3 10"
  [ "$dev" = gpu ] || starts="1 3"
  for s in $starts; do
    log=$(mktemp)
    t1=$(date +%s.%N)
    q -c "SET max_parallel_workers_per_gather = $WORKERS" -c "SET pg_gpu.cpu_threads = $WORKERS" \
      -c "SET pg_gpu.device = $dev" -c "SET client_min_messages = debug2" \
      -c "SELECT iterations, round(inertia) FROM gpu_kmeans_fit('pts', $K, seed => 1, n_init => $s, max_iter => 50, tol => 0)" >"$log" 2>&1
    t2=$(date +%s.%N)
    printf 'n_init\t%s_n_init_%s\t%s\t%s\t%s\t%s\t%s\n' "$dev" "$s" "$N" "$D" "$K" \
      "$(awk -v a="$t2" -v b="$t1" 'BEGIN{printf "%.3f", a - b}')" "$(grep -E 'stages' "$log" | tr '\n\t' '  ' | cut -c1-300)" >>"$out"
    tail -1 "$out"
    rm -f "$log"
  done
done
psql -X -q -d postgres -c "DROP DATABASE $db"
