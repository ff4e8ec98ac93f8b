#!/usr/bin/env bash
# tests/bench/citus.sh [OUT.tsv] - "Scaling out" (BENCHMARKS.md section 8):
# k-means on a Citus distributed table, run on its workers
# (src/citus_kmeans.c), beside the same call on a plain table of the
# coordinator (the single node).  A throwaway cluster on this host: a
# coordinator and 4 workers (all on this machine's one GPU, or its CPUs);
# for W = 1, 2, 4 workers a table distributed over the first W of them
# (8 shards), for 10^7 x 8 float8 (N8) and 10^6 x 768 real[] (N768).
#
# Per table: the whole call with init_centroids (the same for every table), tol 0
# and at most ITERS iterations, its read and its iterations' time (pg_gpu's
# DEBUG2 stages line; an iteration = the difference of the iterate stages of
# that fit and of a fit of one iteration, over the iterations but the first,
# whose time holds each node's setup); the
# whole default call (k-means++, tol 1e-4) and its iterations.  The
# coordination an iteration costs (the round trip of the partial sums on
# localhost) is an iteration on one worker less one on the single node.
# Bytes a node sends and receives per iteration are computed from the
# message sizes (the centroids out, k x d doubles; the sums and counts
# back, k x (d + 1)), and the TSV says so.
#
# The rows are made on the workers in parallel (run_command_on_shards, each
# shard its share of generate_series: ids repeat across shards, which
# k-means does not look at), the single node's by one INSERT.  The 768-d
# rows are 50 fixed vectors, repeated with their first 8 values random
# (cheap to make; an iteration's work does not depend on the values).  Needs a PostgreSQL with Citus and pg_gpu
# installed (the bundle's, via PG_CONFIG); DEVICE (gpu if gpu_info() lists
# one, else cpu), N8, N768, K (100), ITERS (20), WORKERS ("1 2 4"), KINDS
# ("8 768 mm") from the environment.
#
# KINDS "mm": the table form of gpu_matmul with a dense a (MM_M x MM_K
# float8[], 100000 x 768) distributed by row_id over W workers (or a plain
# table), times a local b (MM_K x MM_N, 768 x 768): the whole call
# (SELECT count(*) of its rows), and its read and product from the DEBUG2
# stages; into citusmm-*.tsv beside OUT (OUT's name with "citus" made
# "citusmm").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
out=$(realpath -m "${1:-citus.tsv}")
N8=${N8:-10000000} N768=${N768:-1000000} K=${K:-100} ITERS=${ITERS:-20} WORKERS=${WORKERS:-"1 2 4"} KINDS=${KINDS:-"8 768 mm"}
MM_M=${MM_M:-100000} MM_K=${MM_K:-768} MM_N=${MM_N:-768}
out_mm=$(dirname "$out")/$(basename "$out" | sed 's/^citus/citusmm/')
[ "$out_mm" != "$out" ] || out_mm=${out%.tsv}-matmul.tsv
base=54361
ensure_citus || { echo "bench citus: no Citus" >&2; exit 1; }
if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then useradd -r -m postgres; fi
user=$( [ "$(id -u)" -eq 0 ] && echo postgres || id -un )
tmp=$(mktemp -d /tmp/pg_gpu_citus_bench.XXXXXX)
chmod 755 "$tmp"
[ "$(id -u)" -eq 0 ] && chown "$user" "$tmp"
bindir=$("$PG_CONFIG" --bindir)
cleanup() {
  for d in "$tmp"/*/; do
    [ -f "$d/postmaster.pid" ] && as_owner "$bindir/pg_ctl" -D "$d" -m immediate -w stop >/dev/null 2>&1 || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

q() { psql -X -q -At -v ON_ERROR_STOP=1 -h "$tmp" -p "$1" -U "$user" -d postgres -c "SET client_min_messages = warning" -c "$2"; }
settings=("shared_buffers = '2GB'" "max_connections = 200" "max_worker_processes = 32"
          "max_parallel_workers = 16" "max_parallel_workers_per_gather = 4")
log "a Citus coordinator (port $base) and 4 workers"
citus_node_start "$tmp" coordinator $base "${settings[@]}"
for w in 1 2 3 4; do citus_node_start "$tmp" "worker$w" $((base + w)) "${settings[@]}"; done
for w in 1 2 3 4; do q $((base + w)) "CREATE EXTENSION citus"; done
q $base "CREATE EXTENSION citus"
q $base "SELECT citus_set_coordinator_host('127.0.0.1', $base)" >/dev/null
for w in 1 2 3 4; do q $base "SELECT citus_add_node('127.0.0.1', $((base + w)))" >/dev/null; done
q $base "CREATE EXTENSION pg_gpu"
device=${DEVICE:-$( [ "$(q $base "SELECT count(*) FROM gpu_info()")" -gt 0 ] && echo gpu || echo cpu)}
echo "device $device; $(q $base "SELECT name FROM gpu_info() LIMIT 1")"

# make NAME KIND ROWS W: table NAME (kind 8: 8 float8 columns; 768: a real[])
# distributed over the first W workers (W = 0: a plain table here)
row8="i, 40 * sin(mod(i, 100) * 1.3 + 0.1) + 20 * random(), 40 * sin(mod(i, 100) * 2.1 + 0.2) + 20 * random(),
      40 * sin(mod(i, 100) * 2.9 + 0.3) + 20 * random(), 40 * sin(mod(i, 100) * 3.7 + 0.4) + 20 * random(),
      40 * sin(mod(i, 100) * 4.3 + 0.5) + 20 * random(), 40 * sin(mod(i, 100) * 5.1 + 0.6) + 20 * random(),
      40 * sin(mod(i, 100) * 5.9 + 0.7) + 20 * random(), 40 * sin(mod(i, 100) * 6.7 + 0.8) + 20 * random()"
# the 768-d rows: base vector b (one of 50, the same on every node; made once: OFFSET
# 0 keeps the planner from computing it again for every row) with its first
# 8 values random; the starting centroids of every fit: base c mod 50 (and for
# 8 columns the centre of blob c), the first 8 values 0.5 + c / 1000
base768="ARRAY(SELECT sin(j * 0.37 * (b + 1) + b)::real FROM generate_series(1, 768) j)"
init768="(SELECT array_agg(ARRAY(SELECT CASE WHEN j <= 8 THEN 0.5 + c / 1000.0 ELSE sin(j * 0.37 * (c % 50 + 1) + c % 50) END
                                 FROM generate_series(1, 768) j) ORDER BY c) FROM generate_series(0, $K - 1) c)"
init8="(SELECT array_agg(ARRAY[40 * sin(c % 100 * 1.3 + 0.1) + 10 + c / 1000.0, 40 * sin(c % 100 * 2.1 + 0.2) + 10,
                               40 * sin(c % 100 * 2.9 + 0.3) + 10, 40 * sin(c % 100 * 3.7 + 0.4) + 10,
                               40 * sin(c % 100 * 4.3 + 0.5) + 10, 40 * sin(c % 100 * 5.1 + 0.6) + 10,
                               40 * sin(c % 100 * 5.9 + 0.7) + 10, 40 * sin(c % 100 * 6.7 + 0.8) + 10] ORDER BY c)
        FROM generate_series(0, $K - 1) c)"
make_table() {
  local name=$1 kind=$2 rows=$3 w=$4 cols sel
  if [ "$kind" = 8 ]; then
    cols="id bigint, c1 float8, c2 float8, c3 float8, c4 float8, c5 float8, c6 float8, c7 float8, c8 float8"
    sel="SELECT $row8 FROM generate_series(1, ROWS) i"
  else
    cols="id bigint, v real[]"
    sel="SELECT i, ARRAY[random(), random(), random(), random(), random(), random(), random(), random()]::real[] || c.v[9:768]
         FROM generate_series(1, ROWS) i
         JOIN (SELECT b, $base768 AS v FROM generate_series(0, 49) b OFFSET 0) c ON c.b = mod(i, 50)"
  fi
  q $base "CREATE TABLE $name ($cols)"
  if [ "$w" -eq 0 ]; then
    q $base "INSERT INTO $name ${sel//ROWS/$rows}"
  else
    for v in 1 2 3 4; do
      q $base "SELECT citus_set_node_property('127.0.0.1', $((base + v)), 'shouldhaveshards', $([ $v -le "$w" ] && echo true || echo false))" >/dev/null
    done
    q $base "SET citus.shard_count = 8; SELECT create_distributed_table('$name', 'id')" >/dev/null
    q $base "SELECT count(*) FROM run_command_on_shards('$name', \$cmd\$INSERT INTO %s ${sel//ROWS/$((rows / 8))}\$cmd\$)" >/dev/null
  fi
  q $base "VACUUM ANALYZE $name"
}

# staged SQL: "wall_s read_s iterate_s iterations" of one fit on the coordinator, its
# stages from pg_gpu's DEBUG2 line (read = the rows onto the device(s), here or on
# the nodes; iterate = the Lloyd iterations alone)
staged() {
  local t0 t1 line
  t0=$(date +%s.%N)
  line=$(psql -X -q -At -v ON_ERROR_STOP=1 -h "$tmp" -p $base -U "$user" -d postgres \
           -c "SET pg_gpu.device = $device" -c "SET client_min_messages = debug2" -c "$1" 2>&1 >/dev/null |
         grep -o 'stages (ms): read [0-9.]*, transfer [0-9.]*, seed [0-9.]*, iterate [0-9.]*, iterations [0-9]*')
  t1=$(date +%s.%N)
  echo "$line" | awk -v a="$t1" -v b="$t0" '{ gsub(",", ""); printf "%.3f %.3f %.4f %d", a - b, $4 / 1e3, $10 / 1e3, $12 }'
}

# per_iter T_N T_1 N: an iteration's time without the first (its setup: each node's
# k-means state, cuBLAS's handle), from fits of N and of 1 iterations
per_iter() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { if (n > 1) printf "%.5f", (a - b) / (n - 1); else printf "NaN" }'; }

[ -s "$out" ] || printf 'section\tdata\tworkers\tn\td\tk\tcall_s\tread_s\titerations\titer_s\tdefault_call_s\tdefault_iterations\tbytes_out_per_node\tbytes_back_per_node\tdevice\n' >"$out"
# matmul NAME: "wall_s read_s product_s" of gpu_matmul(NAME, mm_b) on the coordinator
matmul() {
  local t0 t1 line
  t0=$(date +%s.%N)
  line=$(psql -X -q -At -v ON_ERROR_STOP=1 -h "$tmp" -p $base -U "$user" -d postgres \
           -c "SET pg_gpu.device = $device" -c "SET client_min_messages = debug2" \
           -c "SELECT count(*) FROM gpu_matmul('$1'::regclass, 'mm_b')" 2>&1 >/dev/null |
         grep -o 'gpu_matmul stages (ms): open [0-9.]*, read [0-9.]*, densify [0-9.]*, result buffer [0-9.]*, product [0-9.]*')
  t1=$(date +%s.%N)
  echo "$line" | awk -v a="$t1" -v b="$t0" '{ gsub(",", ""); printf "%.3f %.3f %.3f", a - b, $7 / 1e3, $14 / 1e3 }'
}
mm_bench() {
  local w name call rd prod
  [ -s "$out_mm" ] || printf 'section\tdata\tworkers\tm\tk\tn\tcall_s\tread_s\tproduct_s\tdevice\n' >"$out_mm"
  # a's rows: one of 50 base rows each, its first value the row id
  q $base "CREATE TABLE mm_src AS SELECT i AS row_id, ARRAY[i::float8] || c.v[2:$MM_K] AS row_vec
           FROM generate_series(1, $MM_M) i
           JOIN (SELECT b, ARRAY(SELECT sin(j * 0.37 * (b + 1) + b) FROM generate_series(1, $MM_K) j) AS v
                 FROM generate_series(0, 49) b OFFSET 0) c ON c.b = mod(i, 50)"
  q $base "CREATE TABLE mm_b AS SELECT i AS row_id, ARRAY(SELECT cos(i * 0.01 + j) FROM generate_series(1, $MM_N) j) AS row_vec
           FROM generate_series(1, $MM_K) i"
  for w in 0 $WORKERS; do
    name=mm_w$w
    log "$name: gpu_matmul of $MM_M x $MM_K by $MM_K x $MM_N, a over $w workers"
    q $base "CREATE TABLE $name (row_id bigint, row_vec float8[])"
    if [ "$w" -gt 0 ]; then
      for v in 1 2 3 4; do
        q $base "SELECT citus_set_node_property('127.0.0.1', $((base + v)), 'shouldhaveshards', $([ $v -le "$w" ] && echo true || echo false))" >/dev/null
      done
      q $base "SET citus.shard_count = 8; SELECT create_distributed_table('$name', 'row_id')" >/dev/null
    fi
    q $base "INSERT INTO $name SELECT * FROM mm_src"
    q $base "VACUUM ANALYZE $name"
    matmul "$name" >/dev/null   # warm
    read -r call rd prod <<<"$(matmul "$name")"
    printf 'citus_matmul\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$w" "$MM_M" "$MM_K" "$MM_N" \
      "$call" "$rd" "$prod" "$device" | tee -a "$out_mm"
    q $base "DROP TABLE $name"
  done
  q $base "DROP TABLE mm_src, mm_b"
}

for kind in $KINDS; do
  if [ "$kind" = mm ]; then mm_bench; continue; fi
  rows=$([ "$kind" = 8 ] && echo "$N8" || echo "$N768")
  cols=$([ "$kind" = 8 ] && echo "ARRAY['c1','c2','c3','c4','c5','c6','c7','c8']" || echo "ARRAY['v']")
  for w in 0 $WORKERS; do
    name=t${kind}_w$w
    log "$name: $rows rows x $kind over $w workers"
    make_table "$name" "$kind" "$rows" "$w"
    init=$([ "$kind" = 8 ] && echo "$init8" || echo "$init768")
    fit="SELECT iterations FROM gpu_kmeans_fit('$name', $K, columns => $cols, tol => 0, init_centroids => $init, max_iter => "
    staged "$fit 1)" >/dev/null   # warm: the GPUs' contexts, the pages
    read -r call rd it its <<<"$(staged "$fit $ITERS)")"
    read -r _ _ it1 _ <<<"$(staged "$fit 1)")"
    read -r dcall _ _ dits <<<"$(staged "SELECT iterations FROM gpu_kmeans_fit('$name', $K, columns => $cols, seed => 1)")"
    dev=$(q $base "SET pg_gpu.device = $device; SELECT device FROM gpu_kmeans_fit('$name', 2, columns => $cols, max_iter => 1)")
    # per node and iteration, about: the centroids out (a bytea of k x d doubles, 8 bytes
    # each, and its length) with the query's messages (about 160 bytes); back the sums
    # (the same), the counts (a bigint[] in binary: 20 bytes of header, 12 a value),
    # inertia and changed (24), the result's messages (about 150)
    bout=$((w > 0 ? 4 + 8 * K * kind + 160 : 0))
    bback=$((w > 0 ? 4 + 8 * K * kind + 20 + 12 * K + 24 + 150 : 0))
    printf 'citus\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$w" "$rows" "$kind" "$K" \
      "$call" "$rd" "$its" "$(per_iter "$it" "$it1" "$its")" "$dcall" "$dits" "$bout" "$bback" "$dev" | tee -a "$out"
    q $base "DROP TABLE $name"
  done
done
