-- pg_gpu.max_memory bounds the data of one call (rows read with their ids,
-- labels and distances; gpu_matmul's three matrices; the parallel read's
-- shared memory), on every device alike.
-- A call over it fails with 53400 before it allocates: by the table's
-- statistics, or as the rows arrive when the statistics are stale.
CREATE TABLE ml_pts (id int PRIMARY KEY, x float8, y float8);
INSERT INTO ml_pts SELECT i, i % 7, i % 3 FROM generate_series(1, 100000) i;
ANALYZE ml_pts;
SET pg_gpu.max_memory = '1MB';
-- 100000 rows x (8 + 8 + 12) bytes
SELECT sizes FROM gpu_kmeans_fit('ml_pts', 2, columns => ARRAY['x', 'y']);
SELECT count(*) FROM gpu_kmeans('ml_pts', 2);
-- float32 values (real columns, real[], vector, halfvec) take 4 bytes a value:
-- 100000 x (4 + 4 + 8 + 12) bytes
CREATE TABLE ml_pts4 AS SELECT id, x::real AS x, y::real AS y FROM ml_pts;
ALTER TABLE ml_pts4 ADD PRIMARY KEY (id);
ANALYZE ml_pts4;
SELECT sizes FROM gpu_kmeans_fit('ml_pts4', 2, columns => ARRAY['x', 'y']);
SET pg_gpu.max_memory = '3MB';
SELECT sizes FROM gpu_kmeans_fit('ml_pts4', 2, columns => ARRAY['x', 'y'], seed => 1);
SET pg_gpu.max_memory = '1MB';
-- a weight a row takes 8 bytes more: 100000 x (4 + 4 + 8 + 8 + 12) bytes
ALTER TABLE ml_pts4 ADD COLUMN w real DEFAULT 1;
SET pg_gpu.max_memory = '3MB';
SELECT sizes FROM gpu_kmeans_fit('ml_pts4', 2, columns => ARRAY['x', 'y'], seed => 1, weight_column => 'w');
SET pg_gpu.max_memory = '4MB';
SELECT sizes FROM gpu_kmeans_fit('ml_pts4', 2, columns => ARRAY['x', 'y'], seed => 1, weight_column => 'w');
SET pg_gpu.max_memory = '1MB';
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
-- -1: no limit
SET pg_gpu.max_memory = -1;
SELECT count(*) FROM gpu_matmul('ml_a'::regclass, 'ml_a'::regclass);
-- a limit under a megabyte is a limit, never "no limit": kB, and 0 allows nothing
SET pg_gpu.max_memory = '1kB';
SELECT setting, unit FROM pg_settings WHERE name = 'pg_gpu.max_memory';
SELECT array_length(gpu_matmul(array_fill(1::float8, ARRAY[30, 30]), array_fill(1::float8, ARRAY[30, 30])), 1);
SET pg_gpu.max_memory = '100B';
SHOW pg_gpu.max_memory;
SELECT sizes FROM gpu_kmeans_fit('ml_pts', 2, columns => ARRAY['x'], seed => 1);
RESET pg_gpu.max_memory;
-- a never-analysed table of two long rows: the limit is checked against
-- what is read, not against a guess of 64 rows
CREATE TABLE ml_long (row_id int, row_vec float8[]) WITH (autovacuum_enabled = off);
INSERT INTO ml_long VALUES (1, array_fill(1::float8, ARRAY[2000000])), (2, array_fill(2::float8, ARRAY[2000000]));
CREATE TABLE ml_pick (row_id int, col_id int, value float8);
INSERT INTO ml_pick VALUES (2000000, 1, 3);
SET pg_gpu.max_memory = '64MB';
SELECT * FROM gpu_matmul('ml_long'::regclass, 'ml_pick'::regclass);
-- the parallel read's shared memory is bounded (128 MB of 4 MB slots; rows
-- longer than a slot: 16 MB, or two slots of a row) and within the limit:
-- over it, the table is read without workers
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 8;
ALTER TABLE ml_long SET (parallel_workers = 64);
SET pg_gpu.max_memory = '60MB';
SET client_min_messages = debug1;
-- a slot a row, two slots: two workers of the eight planned
SELECT * FROM gpu_matmul('ml_long'::regclass, 'ml_pick'::regclass);
SET pg_gpu.max_memory = '20MB';
SELECT * FROM gpu_matmul('ml_long'::regclass, 'ml_pick'::regclass);
RESET client_min_messages;
RESET pg_gpu.max_memory;
RESET max_parallel_workers_per_gather;
RESET min_parallel_table_scan_size;
DROP TABLE ml_pts, ml_stale, ml_a, ml_s, ml_long, ml_pick;
