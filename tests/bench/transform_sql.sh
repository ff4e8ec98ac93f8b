#!/usr/bin/env bash
# tests/bench/transform_sql.sh - gpu_kmeans_transform in SQL (BENCHMARKS.md,
# section 3, "Distances to every cluster"): one answer over placements (all
# GPUs, two parts, streamed parts, one GPU, the CPU: an order-free digest
# of every result row, and n => 1 against gpu_kmeans_apply), then rows a
# second beside gpu_kmeans_apply on each device, each statement in a new
# session.  Needs a server with pg_gpu (PGHOST etc. set: the bundle's
# start-server.sh) and a GPU; tables kr (200,000 x 96 real[], some zero or
# NaN rows) and kd (10^6 x 8 float8) in database tr.
set -u
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS tr" -c "CREATE DATABASE tr"
psql -X -d tr -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION pg_gpu;
SET pg_gpu.max_memory = -1;
CREATE TABLE kr AS SELECT g AS id,
  CASE WHEN g % 997 = 0 THEN array_fill(0::real, ARRAY[96])
       WHEN g % 1009 = 0 THEN array_fill('NaN'::real, ARRAY[96])
       ELSE array(SELECT ((((g % 50) * 37 + j * 11) % 41) - 20 + ((g * j) % 7) * 0.125)::real FROM generate_series(1, 96) j WHERE g > 0) END AS v
  FROM generate_series(1, 200000) g;
ALTER TABLE kr ADD PRIMARY KEY (id);
ALTER TABLE kr SET (parallel_workers = 4);
CREATE TABLE kd AS SELECT g AS id, random() AS x1, random() AS x2, random() AS x3, random() AS x4,
  random() AS x5, random() AS x6, random() AS x7, random() AS x8 FROM generate_series(1, 1000000) g;
ALTER TABLE kd ADD PRIMARY KEY (id);
VACUUM ANALYZE kr; VACUUM ANALYZE kd;
SET max_parallel_workers_per_gather = 4;
SET pg_gpu.device = cpu;
CREATE TABLE models AS
SELECT 'kr' AS tab, m AS metric, (gpu_kmeans_fit('kr', 80, columns => ARRAY['v'], seed => 7, max_iter => 5, metric => m)).model
FROM unnest(ARRAY['euclidean', 'cosine']) m
UNION ALL SELECT 'kd', 'euclidean', (gpu_kmeans_fit('kd', 64, seed => 3, max_iter => 5, scale => 'standard')).model;
CREATE TEMP TABLE outs (what text, tab text, metric text, n int, rows bigint, digest text);
CREATE FUNCTION runall(what text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE r record; nn int;
BEGIN
  FOR r IN SELECT * FROM models LOOP
    FOREACH nn IN ARRAY CASE WHEN r.tab = 'kd' THEN ARRAY[1, 5] ELSE ARRAY[1, 5, 0] END LOOP
      EXECUTE format('INSERT INTO outs SELECT %L, %L, %L, %s, count(*), sum(hashtextextended(id || '':'' || coalesce(rank, 0) || '':'' || coalesce(cluster, 0) || '':'' || coalesce(float8send(distance)::text, ''-''), 0)::numeric)::text FROM gpu_kmeans_transform(%L, (SELECT model FROM models WHERE tab = %L AND metric = %L), n => %s)',
                     what, r.tab, r.metric, nn, r.tab, r.tab, r.metric, CASE WHEN nn = 0 THEN 'NULL' ELSE nn::text END);
    END LOOP;
  END LOOP;
END $$;
SET pg_gpu.device = gpu;
SELECT runall('all gpus');
SET pg_gpu.parts = 2; SELECT runall('all gpus, 2 parts'); RESET pg_gpu.parts;
SET pg_gpu.kmeans_gpu_memory = 16; SELECT runall('all gpus, streamed'); RESET pg_gpu.kmeans_gpu_memory;
SET pg_gpu.gpus = '0'; SELECT runall('one gpu'); RESET pg_gpu.gpus;
SET pg_gpu.device = cpu; SELECT runall('cpu');
SELECT o.tab, o.metric, o.n, count(*) AS placements, min(o.rows) AS rows,
       count(*) FILTER (WHERE o.digest = c.digest) AS as_cpu
FROM outs o JOIN outs c ON c.what = 'cpu' AND c.tab = o.tab AND c.metric = o.metric AND c.n = o.n
GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
-- n => 1 is apply's, on the GPU
SET pg_gpu.device = gpu;
SELECT m.tab, m.metric, count(*) AS rows, count(*) FILTER (WHERE t.cluster IS NOT DISTINCT FROM a.cluster AND t.distance IS NOT DISTINCT FROM a.distance) AS as_apply
FROM models m CROSS JOIN LATERAL gpu_kmeans_transform(m.tab::regclass, m.model, 1) t JOIN gpu_kmeans_apply(m.tab::regclass, m.model) a USING (id)
GROUP BY 1, 2 ORDER BY 1, 2;
SQL
# rows a second: apply beside transform (n => 1, 8, all), each timed twice, on each device
for dev in gpu cpu; do
  for q in "gpu_kmeans_apply('kd', m.model)" "gpu_kmeans_transform('kd', m.model, 1)" "gpu_kmeans_transform('kd', m.model, 8)" \
           "gpu_kmeans_apply('kr', m.model)" "gpu_kmeans_transform('kr', m.model, 1)" "gpu_kmeans_transform('kr', m.model)"; do
    tab=$(echo "$q" | grep -o "'k[rd]'" | tr -d "'")
    for rep in 1; do
      s=$(psql -X -d tr -At -c "SET pg_gpu.device = $dev" -c "SET max_parallel_workers_per_gather = 4" -c "\\timing on" \
          -c "SELECT count(*) FROM models m, $q WHERE m.tab = '$tab' AND m.metric = 'euclidean'" 2>&1 | tr '\n' ' ')
      echo "bench $dev | $q | $s"
    done
  done
done
