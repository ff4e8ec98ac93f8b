-- On a GPU host: when the GPU runs out of memory, a call fails with a clean
-- ERROR (SQLSTATE 53200) and the backend goes on; once memory is free again
-- the same call works.  Needs tests/gpu_hog (make tests/gpu_hog) and a server
-- on this machine:   psql -X -f tests/gpu_oom.sql
\set ON_ERROR_STOP off
\set VERBOSITY verbose
CREATE EXTENSION IF NOT EXISTS pg_gpu;
DROP TABLE IF EXISTS oom_pts;
CREATE TABLE oom_pts AS
SELECT i AS id, random() x1, random() x2, random() x3, random() x4,
       random() x5, random() x6, random() x7, random() x8
FROM generate_series(1, 4000000) i;      -- 256 MB of float8 on the GPU
SET pg_gpu.device = gpu;
-- this backend's CUDA context exists before the memory is taken
SELECT sizes FROM gpu_kmeans_fit('oom_pts', 1, columns => ARRAY['x1']);
SELECT memory_free_mb > 1000 AS plenty_free FROM gpu_info();
\! (tests/gpu_hog 64 &) ; sleep 5
SELECT memory_free_mb < 200 AS nearly_full FROM gpu_info();
SELECT sizes FROM gpu_kmeans_fit('oom_pts', 8);
SELECT count(*) FROM gpu_kmeans('oom_pts', 8, id_column => 'id');
SELECT 1 AS backend_alive;
\! pkill -f tests/gpu_hog; sleep 2
SELECT array_length(sizes, 1) AS k FROM gpu_kmeans_fit('oom_pts', 8);
DROP TABLE oom_pts;
