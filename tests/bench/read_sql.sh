#!/usr/bin/env bash
# tests/bench/read_sql.sh [OUT.tsv] - k-means' read beside its floor
# (BENCHMARKS.md section 5, issue 41's "the read at the scan's speed"): N
# embedding-like rows (emb_table.sh) as pgvector `vector`, `halfvec`,
# `real[]` and (DOUBLES=1) `double precision[]`; ROUNDS times, for each, the
# floor (sum(vector_dims(e)) or sum(array_length(e, 1)) with WORKERS
# workers) then a 3-iteration gpu_kmeans_fit on the GPU, and a cosine fit of
# the `vector` rows; the DEBUG2 lines give the read's own time ("read of":
# the leader, the workers, detoasting) beside the fit's stages.  Needs a
# server with pg_gpu and pgvector (PGHOST etc.: the bundle's
# start-server.sh); N, D, K, WORKERS, GEN, ROUNDS, DOUBLES from the
# environment (10^6, 768, 1000, 8, 16, 2, 0).
set -eu
N=${N:-1000000} D=${D:-768} K=${K:-1000} WORKERS=${WORKERS:-8} GEN=${GEN:-16}
ROUNDS=${ROUNDS:-2} DOUBLES=${DOUBLES:-0}
out=${1:-read-sql.tsv}
db=pg_gpu_read
. "$(dirname "$0")/emb_table.sh"
t0=$(date +%s)
emb_table $db "$N" "$D" "$GEN"
q -c "CREATE UNLOGGED TABLE emb_h AS SELECT id, e::halfvec($D) AS e FROM emb_v" &
q -c "CREATE UNLOGGED TABLE emb_r AS SELECT id, e::real[] AS e FROM emb_v" &
wait
tabs="emb_v emb_h emb_r"
if [ "$DOUBLES" = 1 ]; then
  # stored uncompressed: doubles widened from floats compress (their low bits
  # are zero), and pglz then takes 0.57 ms a row of 768 (10^6 rows: 10
  # minutes in one session, against 8 s a 10^5 rows so)
  q -c "CREATE UNLOGGED TABLE emb_d (id bigint, e float8[])" -c "ALTER TABLE emb_d ALTER COLUMN e SET STORAGE EXTERNAL"
  for s in $(seq 0 $((GEN - 1))); do
    q -c "INSERT INTO emb_d SELECT id, e::real[]::float8[] FROM emb_r WHERE id > $((s * N / GEN)) AND id <= $(((s + 1) * N / GEN))" &
  done
  wait
  tabs="$tabs emb_d"
fi
for t in $tabs; do q -c "VACUUM ANALYZE $t" -c "ALTER TABLE $t SET (parallel_workers = $WORKERS)"; done
echo "made the tables in $(( $(date +%s) - t0 )) s"
[ -s "$out" ] || printf 'section\tmethod\tn\td\tk\tseconds\tnote\n' >"$out"
W="SET max_parallel_workers_per_gather = $WORKERS"
# fit LABEL TABLE [ARGS]: a 3-iteration fit on one GPU, its read's DEBUG2 lines in the note
fit() {
  timed_run sql "$1" 'stages|load of|read of|batches of' "$W" "SET pg_gpu.max_memory = -1" "SET pg_gpu.device = gpu" \
    "SET pg_gpu.gpus = '0'" "SELECT iterations, inertia FROM gpu_kmeans_fit('$2', $K, columns => ARRAY['e'], seed => 1, max_iter => 3, tol => 0${3:-})"
}
for i in $(seq 1 "$ROUNDS"); do
  timed_run sql read_vector 'read of' "$W" "SELECT sum(vector_dims(e)) FROM emb_v"
  fit fit_vector_3it emb_v
  timed_run sql read_real 'read of' "$W" "SELECT sum(array_length(e, 1)) FROM emb_r"
  fit fit_real_3it emb_r
  timed_run sql read_halfvec 'read of' "$W" "SELECT sum(vector_dims(e)) FROM emb_h"
  fit fit_halfvec_3it emb_h
  if [ "$DOUBLES" = 1 ]; then
    timed_run sql read_float8 'read of' "$W" "SELECT sum(array_length(e, 1)) FROM emb_d"
    fit fit_float8_3it emb_d
  fi
  timed_run sql read_vector 'read of' "$W" "SELECT sum(vector_dims(e)) FROM emb_v"
  fit fit_vector_cosine_3it emb_v ", metric => 'cosine'"
done
