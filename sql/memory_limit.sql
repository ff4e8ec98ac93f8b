-- pg_gpu.max_memory bounds the data of one call (rows read with their ids,
-- labels and distances; gpu_matmul's three matrices), on every device alike.
-- A call over it fails with 53400 before it allocates: by the table's
-- statistics, or as the rows arrive when the statistics are stale.
CREATE TABLE ml_pts (id int PRIMARY KEY, x float8, y float8);
INSERT INTO ml_pts SELECT i, i % 7, i % 3 FROM generate_series(1, 100000) i;
ANALYZE ml_pts;
SET pg_gpu.max_memory = '1MB';
-- 100000 rows x (8 + 8 + 12) bytes
SELECT sizes FROM gpu_kmeans_fit('ml_pts', 2, columns => ARRAY['x', 'y']);
SELECT count(*) FROM gpu_kmeans('ml_pts', 2);
-- statistics that say 10 rows: stopped while reading
CREATE TABLE ml_stale (x float8) WITH (autovacuum_enabled = off);
INSERT INTO ml_stale SELECT i FROM generate_series(1, 10) i;
ANALYZE ml_stale;
INSERT INTO ml_stale SELECT i % 5 FROM generate_series(1, 200000) i;
\set VERBOSITY terse
SELECT sizes FROM gpu_kmeans_fit('ml_stale', 2);
\set VERBOSITY default
-- within the limit: 100000 x 28 bytes
SET pg_gpu.max_memory = '4MB';
SELECT setting, unit FROM pg_settings WHERE name = 'pg_gpu.max_memory';
SELECT sizes FROM gpu_kmeans_fit('ml_pts', 7, columns => ARRAY['x'], seed => 1);
-- gpu_matmul: A, B and C; 300 x 300 float8 = 0.7 MB each
SET pg_gpu.max_memory = '1MB';
SELECT array_length(gpu_matmul(array_fill(1::float8, ARRAY[300, 300]), array_fill(1::float8, ARRAY[300, 300])), 1);
SELECT array_length(gpu_matmul(array_fill(1::float8, ARRAY[100, 100]), array_fill(1::float8, ARRAY[100, 100])), 1);
CREATE TABLE ml_a AS SELECT i AS row_id, array_fill(1::float8, ARRAY[300]) AS row_vec FROM generate_series(1, 300) i;
SELECT count(*) FROM gpu_matmul('ml_a'::regclass, 'ml_a'::regclass);
CREATE TABLE ml_s AS SELECT i AS row_id, i AS col_id, 1.0 AS value FROM generate_series(1, 50000) i;
SELECT count(*) FROM gpu_matmul('ml_s'::regclass, 'ml_s'::regclass);
-- 0: no limit
SET pg_gpu.max_memory = 0;
SELECT count(*) FROM gpu_matmul('ml_a'::regclass, 'ml_a'::regclass);
RESET pg_gpu.max_memory;
DROP TABLE ml_pts, ml_stale, ml_a, ml_s;
