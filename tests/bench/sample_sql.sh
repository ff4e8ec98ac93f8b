#!/usr/bin/env bash
# tests/bench/sample_sql.sh [OUT.tsv] - a fit on a sample against the fit on
# every row (BENCHMARKS.md section 5, issue 41's "sample at 10^7 rows"): N
# embedding-like `vector` rows (emb_table.sh); the read floor; gpu_kmeans_fit
# on every row (FULL=0 skips it) and on SAMPLE rows; gpu_kmeans on the
# sample (every row labelled, streamed; its DEBUG1 line gives the inertia of
# every row by the sample's centroids, to set beside the full fit's); then
# the read floor and a 3-iteration fit with WORKERS workers each.  Needs a server with pg_gpu and pgvector (PGHOST
# etc.: the bundle's start-server.sh); N, D, K, SAMPLE, WORKERS, GEN from the
# environment (10^7, 768, 1000, 256 a cluster, 8, 16).
set -eu
N=${N:-10000000} D=${D:-768} K=${K:-1000} WORKERS=${WORKERS:-8} GEN=${GEN:-16}
SAMPLE=${SAMPLE:-$((256 * K))} FULL=${FULL:-1}
out=${1:-sample-sql.tsv}
db=pg_gpu_sample
. "$(dirname "$0")/emb_table.sh"
t0=$(date +%s.%N)
emb_table $db "$N" "$D" "$GEN"
q -c "VACUUM ANALYZE emb_v"
echo "made the table in $(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN{printf "%.1f", a - b}') s: $(q -At -c "SELECT pg_size_pretty(pg_total_relation_size('emb_v'))")"

# run LABEL SQL: one timed statement (timed_run), its result and DEBUG stages in the note
run() {
  timed_run sample "$1" 'stages|sample|labelled|workers' "SET max_parallel_workers_per_gather = $WORKERS" \
    "SET pg_gpu.max_memory = -1" "SET work_mem = '1GB'" "$2"
}
[ -s "$out" ] || printf 'section\tmethod\tn\td\tk\tseconds\tnote\n' >"$out"
q -c "CREATE TABLE models (what text PRIMARY KEY, model jsonb)"
run read_vector "SELECT sum(vector_dims(e)) FROM emb_v"
run fit_sample "INSERT INTO models SELECT 'sample', model FROM gpu_kmeans_fit('emb_v', $K, seed => 1, sample => $SAMPLE) RETURNING model->'iterations', model->'sample', round((model->>'inertia')::numeric)"
run kmeans_sample "SELECT count(*), count(DISTINCT cluster) FROM gpu_kmeans('emb_v', $K, seed => 1, sample => $SAMPLE)"
if [ "$FULL" = 1 ]; then
  run fit_full "INSERT INTO models SELECT 'full', model FROM gpu_kmeans_fit('emb_v', $K, seed => 1) RETURNING model->'iterations', round((model->>'inertia')::numeric)"
fi
# the read against its floor with the same workers: WORKERS for both
q -c "ALTER TABLE emb_v SET (parallel_workers = $WORKERS)"
run read_vector_w$WORKERS "SELECT sum(vector_dims(e)) FROM emb_v"
run fit_3it_w$WORKERS "SELECT iterations FROM gpu_kmeans_fit('emb_v', $K, seed => 1, max_iter => 3, tol => 0)"
