-- End-to-end timing of gpu_kmeans beside PostgreSQL's own scan of the same
-- columns, in one session:  psql -X -v n=10000000 -f tests/e2e_timing.sql
\set ON_ERROR_STOP on
\if :{?n}
\else
\set n 1000000
\endif
CREATE EXTENSION IF NOT EXISTS pg_gpu;
DROP TABLE IF EXISTS pts;
-- 8 Gaussian-ish blobs in 8 dimensions
CREATE TABLE pts AS
SELECT i AS id,
       (i % 8) * 3 + random() x1, (i % 8 * 5 % 8) * 3 + random() x2,
       (i % 8 * 3 % 8) * 3 + random() x3, (i % 8 * 7 % 8) * 3 + random() x4,
       random() x5, random() x6, random() x7, random() x8
FROM generate_series(1, :n) i;
ALTER TABLE pts ADD PRIMARY KEY (id);
VACUUM ANALYZE pts;
SET pg_gpu.device = gpu;
SELECT count(*) FROM gpu_kmeans('pts', 8);     -- warm-up: CUDA context, cache
\timing on
SELECT count(*), avg(x1), avg(x2), avg(x3), avg(x4), avg(x5), avg(x6), avg(x7), avg(x8) FROM pts;
SELECT count(*), avg(x1), avg(x2), avg(x3), avg(x4), avg(x5), avg(x6), avg(x7), avg(x8) FROM pts;
SELECT count(*) FROM gpu_kmeans('pts', 8);
SELECT count(*) FROM gpu_kmeans('pts', 8);
SELECT sizes, iterations, converged, device FROM gpu_kmeans_fit('pts', 8);
SELECT count(*) FROM generate_series(1, :n);
SET max_parallel_workers_per_gather = 0;
SELECT count(*), avg(x1), avg(x2), avg(x3), avg(x4), avg(x5), avg(x6), avg(x7), avg(x8) FROM pts;
SELECT count(*) FROM gpu_kmeans('pts', 8);
RESET max_parallel_workers_per_gather;
SET pg_gpu.device = cpu;
SELECT sizes, iterations, converged, device FROM gpu_kmeans_fit('pts', 8);
