#!/usr/bin/env bash
# tests/bench/embeddings_sql.sh [OUT.tsv] - k-means of embeddings in SQL
# (BENCHMARKS.md section 5): N rows of d-dimensional embedding-like vectors
# (1000 random topic directions plus as much noise) as pgvector `vector`
# and as `real[]`; the read floor (sum(vector_dims(e)) / sum(array_length(e,
# 1)) with the same parallel workers), gpu_kmeans_fit(..., K) on every row
# on the GPU (stages from DEBUG2), pgvector's CREATE INDEX ... USING ivfflat
# (lists = K), which clusters a sample, and on the CPU (3 iterations, after
# k-means|| and after k-means++: minutes at 10^6 x 768 x 1000); the GPU fit
# with k-means|| too.  Needs a server with pg_gpu and pgvector
# (PGHOST etc. set: the bundle's start-server.sh); N, D, K, WORKERS from the
# environment (10^6, 768, 1000, 8): every table's parallel_workers is
# WORKERS, so the floors and the fits read with the same workers.  QUICK=1
# leaves out the ivfflat build and the CPU fits (minutes).
set -eu
N=${N:-1000000} D=${D:-768} K=${K:-1000} WORKERS=${WORKERS:-8} GEN=${GEN:-16}
out=${1:-embeddings-sql.tsv}
db=pg_gpu_emb
. "$(dirname "$0")/emb_table.sh"
t0=$(date +%s.%N)
emb_table $db "$N" "$D" "$GEN"
q -c "CREATE UNLOGGED TABLE emb_r AS SELECT id, e::real[] AS e FROM emb_v" -c "ALTER TABLE emb_r ADD PRIMARY KEY (id)" \
  -c "CREATE UNLOGGED TABLE emb_h AS SELECT id, e::halfvec($D) AS e FROM emb_v" -c "ALTER TABLE emb_h ADD PRIMARY KEY (id)" \
  -c "VACUUM ANALYZE emb_v" -c "VACUUM ANALYZE emb_r" -c "VACUUM ANALYZE emb_h"
for t in emb_v emb_r emb_h; do q -c "ALTER TABLE $t SET (parallel_workers = $WORKERS)"; done
echo "made the tables in $(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN{printf "%.1f", a - b}') s: $(q -At -c "SELECT pg_size_pretty(pg_total_relation_size('emb_v')) || ' (vector), ' || pg_size_pretty(pg_total_relation_size('emb_r')) || ' (real[])'")"

# run LABEL SETTINGS SQL: one timed statement (timed_run), its DEBUG2 stages in the note
run() {
  timed_run sql "$1" 'stages|route|workers|result|read of|batches of' "SET max_parallel_workers_per_gather = $WORKERS" \
    "SET max_parallel_maintenance_workers = $WORKERS" "SET maintenance_work_mem = '16GB'" \
    "SET pg_gpu.max_memory = -1" ${2:+"$2"} "$3"
}
[ -s "$out" ] || printf 'section\tmethod\tn\td\tk\tseconds\tnote\n' >"$out"
run read_vector "" "SELECT sum(vector_dims(e)) FROM emb_v"
run read_real "" "SELECT sum(array_length(e, 1)) FROM emb_r"
run read_halfvec "" "SELECT sum(vector_dims(e)) FROM emb_h"
run read_vector "" "SELECT sum(vector_dims(e)) FROM emb_v"
run fit_gpu_vector "SET pg_gpu.device = gpu" "SELECT iterations, converged, round(inertia) FROM gpu_kmeans_fit('emb_v', $K, seed => 1)"
run fit_gpu_real "SET pg_gpu.device = gpu" "SELECT iterations, converged, round(inertia) FROM gpu_kmeans_fit('emb_r', $K, seed => 1)"
run fit_gpu_halfvec "SET pg_gpu.device = gpu" "SELECT iterations, converged, round(inertia) FROM gpu_kmeans_fit('emb_h', $K, seed => 1)"
run kmeans_gpu_vector_10it "SET pg_gpu.device = gpu" "SELECT count(*), count(DISTINCT cluster) FROM gpu_kmeans('emb_v', $K, seed => 1, max_iter => 10)"
run fit_gpu_vector_cosine "SET pg_gpu.device = gpu" "SELECT iterations, converged, round(inertia::numeric, 1) FROM gpu_kmeans_fit('emb_v', $K, seed => 1, metric => 'cosine')"
run fit_gpu_vector_3it "SET pg_gpu.device = gpu" "SELECT iterations FROM gpu_kmeans_fit('emb_v', $K, seed => 1, max_iter => 3, tol => 0)"
run fit_gpu_vector_kmeans_par "SET pg_gpu.device = gpu" "SELECT iterations, converged, round(inertia) FROM gpu_kmeans_fit('emb_v', $K, seed => 1, init => 'k-means||')"
[ "${QUICK:-0}" = 1 ] && exit 0
run ivfflat_vector "" "CREATE INDEX ON emb_v USING ivfflat (e vector_l2_ops) WITH (lists = $K)"
run fit_cpu_vector_par_3it "SET pg_gpu.device = cpu" "SELECT iterations FROM gpu_kmeans_fit('emb_v', $K, seed => 1, max_iter => 3, tol => 0, init => 'k-means||')"
run fit_cpu_vector_3it "SET pg_gpu.device = cpu" "SELECT iterations FROM gpu_kmeans_fit('emb_v', $K, seed => 1, max_iter => 3, tol => 0)"
