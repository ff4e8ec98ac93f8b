#!/usr/bin/env bash
# tests/bench/postgis.sh [OUT.tsv] - k-means of PostGIS points beside PostGIS's
# own ST_ClusterKMeans(geom, k) OVER () (BENCHMARKS.md section 6): N points
# (geometry(Point), 200 city-like Gaussian clusters on a 100 km square) and
# k = 10, 100, 1000 (KS): each method's labels into a table, timed, then the
# inertia of every labelling computed alike in SQL (the sum of squared
# distances to the means of its clusters), so the figures compare whatever
# each method reports.  pg_gpu on the CPU (pg_gpu.device = cpu, WORKERS
# parallel workers and threads) and, where a GPU is, on the GPU, with
# n_init = 1 and 10 (n_init's cost).  Needs a server with pg_gpu and PostGIS
# (PGHOST etc. set: the bundle's start-server.sh); N, KS, WORKERS from the
# environment (10^5; "10 100 1000"; 8).
set -eu
N=${N:-100000} KS=${KS:-"10 100 1000"} WORKERS=${WORKERS:-8}
out=${1:-postgis.tsv}
db=pg_gpu_postgis
psql -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
q() { psql -X -q -v ON_ERROR_STOP=1 -d $db "$@"; }
q -c "SET client_min_messages = warning" -c "CREATE EXTENSION pg_gpu" -c "CREATE EXTENSION postgis" \
  -c "SELECT setseed(0.5)" \
  -c "CREATE TABLE cities AS SELECT c, random() * 100000 AS cx, random() * 100000 AS cy, 500 + random() * 3000 AS r FROM generate_series(0, 199) c" \
  -c "CREATE TABLE pts AS SELECT i AS id, ST_MakePoint(cx + r * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()),
                                                       cy + r * sqrt(-2 * ln(1 - random())) * sin(2 * pi() * random()))::geometry(Point) AS geom
                        FROM generate_series(1, $N) i JOIN cities ON c = i % 200" \
  -c "ALTER TABLE pts ADD PRIMARY KEY (id)" -c "VACUUM ANALYZE pts" >/dev/null
gpus=$(q -At -c "SELECT count(*) FROM gpu_info()")

# run LABEL K SETTINGS SQL: SQL fills table lab (id, c); its wall time and the labelling's inertia
run() {
  local label=$1 k=$2 sets=$3 sql=$4 t1 t2 inertia
  q -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS lab"
  t1=$(date +%s.%N)
  if q -c "SET max_parallel_workers_per_gather = $WORKERS" -c "SET pg_gpu.cpu_threads = $WORKERS" \
       -c "SET client_min_messages = warning" ${sets:+-c "$sets"} -c "CREATE TABLE lab AS $sql" >/dev/null 2>&1; then
    t2=$(date +%s.%N)
    inertia=$(q -At -c "SELECT round(sum((ST_X(p.geom) - m.mx) ^ 2 + (ST_Y(p.geom) - m.my) ^ 2)::numeric)
                         FROM pts p JOIN lab USING (id)
                         JOIN (SELECT c, avg(ST_X(geom)) mx, avg(ST_Y(geom)) my FROM pts JOIN lab USING (id) GROUP BY c) m USING (c)")
    printf 'postgis\t%s\t%s\t2\t%s\t%s\t%s\n' "$label" "$N" "$k" "$(awk -v a="$t2" -v b="$t1" 'BEGIN{printf "%.3f", a - b}')" "$inertia" >>"$out"
  else
    printf 'postgis\t%s\t%s\t2\t%s\t\tfailed\n' "$label" "$N" "$k" >>"$out"
  fi
  tail -1 "$out"
}
[ -s "$out" ] || printf 'section\tmethod\tn\td\tk\tseconds\tinertia\n' >"$out"
for k in $KS; do
  run ST_ClusterKMeans "$k" "" "SELECT id, ST_ClusterKMeans(geom, $k) OVER () AS c FROM pts"
  run pg_gpu_cpu "$k" "SET pg_gpu.device = cpu" "SELECT id, cluster AS c FROM gpu_kmeans('pts', $k, columns => ARRAY['geom'])"
  run pg_gpu_cpu_n_init_10 "$k" "SET pg_gpu.device = cpu" "SELECT id, cluster AS c FROM gpu_kmeans('pts', $k, columns => ARRAY['geom'], n_init => 10)"
  if [ "${gpus:-0}" -gt 0 ]; then
    run pg_gpu_gpu "$k" "SET pg_gpu.device = gpu" "SELECT id, cluster AS c FROM gpu_kmeans('pts', $k, columns => ARRAY['geom'])"
    run pg_gpu_gpu_n_init_10 "$k" "SET pg_gpu.device = gpu" "SELECT id, cluster AS c FROM gpu_kmeans('pts', $k, columns => ARRAY['geom'], n_init => 10)"
  fi
done
psql -X -q -d postgres -c "DROP DATABASE $db"
