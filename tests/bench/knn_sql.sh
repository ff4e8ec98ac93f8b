#!/usr/bin/env bash
# tests/bench/knn_sql.sh [OUT.tsv] - gpu_knn in SQL (BENCHMARKS.md, "Nearest
# neighbours"): NQ query rows against N base rows of d-dimensional
# embedding-like vectors (pgvector `vector`: 1000 random topic directions
# plus as much noise, emb_table.sh), k nearest each; beside the floors (the
# parallel scan of each table, sum(vector_dims(e)), and the cuBLAS product
# of the same shape, knn_torch.py), PyTorch's nearest neighbours on the
# GPU (knn_torch.py, TF32 and FP32) and pgvector's exact scan, `LATERAL
# (SELECT ... ORDER BY e <-> q.e LIMIT k)`, for NPG queries (scaled to NQ in
# the report).  Needs a server with pg_gpu and pgvector (PGHOST etc. set:
# the bundle's start-server.sh); N, NQ, D, K, NPG, WORKERS, GEN from the
# environment (10^6, 10^4, 768, 10, 10, 8, 16).
set -eu
N=${N:-1000000} NQ=${NQ:-10000} D=${D:-768} K=${K:-10} NPG=${NPG:-10} WORKERS=${WORKERS:-8} GEN=${GEN:-16}
out=${1:-knn-sql.tsv}
db=pg_gpu_knn
here=$(dirname "$0")
. "$here/emb_table.sh"
t0=$(date +%s.%N)
emb_table $db "$N" "$D" "$GEN"
q -c "CREATE UNLOGGED TABLE emb_q (id bigint PRIMARY KEY, e vector($D))" \
  -c "INSERT INTO emb_q SELECT i, t.e + array(SELECT (random() - 0.5)::real FROM generate_series(1, $D) WHERE i > 0)::vector FROM generate_series(1, $NQ) i JOIN topics t ON t.id = (i * 7) % 1000" \
  -c "VACUUM ANALYZE emb_v" -c "VACUUM ANALYZE emb_q"
for t in emb_v emb_q; do q -c "ALTER TABLE $t SET (parallel_workers = $WORKERS)"; done
echo "made the tables in $(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN{printf "%.1f", a - b}') s: $(q -At -c "SELECT pg_size_pretty(pg_total_relation_size('emb_v'))")"

run() {
  timed_run knn "$1" 'gpu_knn of|workers|read of' "SET max_parallel_workers_per_gather = $WORKERS" \
    "SET pg_gpu.max_memory = -1" ${2:+"$2"} "$3"
}
[ -s "$out" ] || printf 'section\tmethod\tn\td\tk\tseconds\tnote\n' >"$out"
run read_base "" "SELECT sum(vector_dims(e)) FROM emb_v"
run read_queries "" "SELECT sum(vector_dims(e)) FROM emb_q"
run read_base "" "SELECT sum(vector_dims(e)) FROM emb_v"
run gpu_knn "SET pg_gpu.device = gpu" "SELECT count(*), round(sum(distance)::numeric, 6) FROM gpu_knn('emb_q', 'emb_v', $K)"
run gpu_knn "SET pg_gpu.device = gpu" "SELECT count(*), round(sum(distance)::numeric, 6) FROM gpu_knn('emb_q', 'emb_v', $K)"
run gpu_knn_cosine "SET pg_gpu.device = gpu" "SELECT count(*), round(sum(distance)::numeric, 6) FROM gpu_knn('emb_q', 'emb_v', $K, metric => 'cosine')"
# the same answers on the CPU and by pgvector, for the first NPG queries
q -c "CREATE TABLE knn_first AS SELECT * FROM gpu_knn('emb_q', 'emb_v', $K) WHERE query_id <= $NPG"
run pgvector_exact "SET enable_indexscan = off" "CREATE TABLE pgv AS SELECT q.id AS query_id, n.id AS base_id, n.rank, n.d FROM emb_q q CROSS JOIN LATERAL (SELECT id, d, row_number() OVER (ORDER BY d, id) AS rank FROM (SELECT id, e <-> q.e AS d FROM emb_v ORDER BY e <-> q.e LIMIT $K) s) n WHERE q.id <= $NPG"
run same_as_pgvector "" "SELECT count(*) AS pairs, count(*) FILTER (WHERE p.base_id = k.base_id) AS same_ids, max(abs(p.d - k.distance)) AS max_diff FROM pgv p JOIN knn_first k USING (query_id, rank)"
q -c "CREATE TABLE emb_q1k AS SELECT * FROM emb_q WHERE id <= 1000" -c "ALTER TABLE emb_q1k ADD PRIMARY KEY (id)"
run gpu_knn_1000q "SET pg_gpu.device = gpu" "SELECT count(*), round(sum(distance)::numeric, 6) FROM gpu_knn('emb_q1k', 'emb_v', $K)"
[ "${QUICK:-0}" = 1 ] || run gpu_knn_cpu_1000q "SET pg_gpu.device = cpu" "SELECT count(*), round(sum(distance)::numeric, 6) FROM gpu_knn('emb_q1k', 'emb_v', $K)"
if [ -n "${PYTHON:-}" ] || command -v python3 >/dev/null; then
  LD_LIBRARY_PATH=${PYTHON_LD_LIBRARY_PATH:-} "${PYTHON:-python3}" "$here/knn_torch.py" --tsv "$out" "$NQ" "$N" "$D" "$K" || true
fi
