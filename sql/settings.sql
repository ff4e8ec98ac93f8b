-- Who may set what: the settings that bound the host's resources are the
-- superuser's (PGC_SUSET, as temp_file_limit); the others are a role's own
-- choices, which bound nothing another role needs.
LOAD 'pg_gpu';
SELECT name, context FROM pg_settings WHERE name LIKE 'pg\_gpu.%' ORDER BY name;
CREATE ROLE st_user;
SET ROLE st_user;
-- the administrator's bounds: 42501
SET pg_gpu.max_memory = -1;
SET pg_gpu.pinned_memory_cache = '100GB';
SET pg_gpu.gpus = '0';
SET pg_gpu.parts = 64;
SHOW pg_gpu.max_memory;
-- the role's own
SET pg_gpu.device = cpu;
SET pg_gpu.cpu_threads = 64;
SET pg_gpu.kmeans_gpu_memory = '1GB';
SET pg_gpu.matmul_gpu_memory = '1GB';
SET pg_gpu.allow_tf32 = on;
SET pg_gpu.kmeans_precision = double;
SET pg_gpu.citus_nodes = off;
RESET ROLE;
-- a bound the superuser set holds for the role
SET pg_gpu.max_memory = '1MB';
SET ROLE st_user;
SHOW pg_gpu.max_memory;
CREATE TEMP TABLE st_pts AS SELECT g AS id, g::float8 AS x FROM generate_series(1, 100000) g;
ANALYZE st_pts;
SELECT count(*) FROM gpu_kmeans_fit('st_pts', 2, columns => ARRAY['x']);
DROP TABLE st_pts;
RESET ROLE;
RESET pg_gpu.max_memory;
RESET ALL;
DROP ROLE st_user;
