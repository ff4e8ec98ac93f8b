-- pg_gpu.cpu_threads: the CPU path's passes over the rows on several threads.
-- The result does not depend on the number of threads, to the last bit
-- (a table of over 65536 rows is summed in parts whatever the threads).
SET pg_gpu.device = 'cpu';
CREATE TABLE t_pts AS
SELECT i AS id, ((i::bigint * 7919) % 1009) / 101.0 + (i % 4) * 20 AS x,
       ((i::bigint * 104729) % 997) / 97.0 AS y, (i % 7) / 3.0 AS z
FROM generate_series(1, 150000) i;
ALTER TABLE t_pts ALTER x TYPE float8, ALTER y TYPE float8, ALTER z TYPE float8;
CREATE TEMP TABLE fits AS
SELECT 1 AS threads, * FROM gpu_kmeans_fit('t_pts', 12, columns => ARRAY['x', 'y', 'z'], seed => 5, max_iter => 20);
SHOW pg_gpu.cpu_threads;
SET pg_gpu.cpu_threads = 4;
INSERT INTO fits
SELECT 4, * FROM gpu_kmeans_fit('t_pts', 12, columns => ARRAY['x', 'y', 'z'], seed => 5, max_iter => 20);
SET pg_gpu.cpu_threads = 64;
INSERT INTO fits
SELECT 64, * FROM gpu_kmeans_fit('t_pts', 12, columns => ARRAY['x', 'y', 'z'], seed => 5, max_iter => 20);
SELECT f.threads, f.centroids = o.centroids AS same_centroids, f.inertia = o.inertia AS same_inertia,
       f.sizes = o.sizes AS same_sizes, f.iterations = o.iterations AS same_iterations
FROM fits f, fits o WHERE o.threads = 1 ORDER BY f.threads;
-- memberships too
SET pg_gpu.cpu_threads = 1;
CREATE TEMP TABLE m1 AS
SELECT * FROM gpu_kmeans('t_pts', 12, columns => ARRAY['x', 'y', 'z'], id_column => 'id', seed => 5, max_iter => 20);
SET pg_gpu.cpu_threads = 4;
SELECT count(*) AS rows, count(*) FILTER (WHERE m1.cluster IS DISTINCT FROM m4.cluster) AS differing
FROM m1 FULL JOIN gpu_kmeans('t_pts', 12, columns => ARRAY['x', 'y', 'z'], id_column => 'id', seed => 5, max_iter => 20) m4
  USING (id);
-- cancellation reaches a call while its threads run (2000 clusters take
-- seconds to seed and many more to converge)
SET pg_gpu.cpu_threads = 4;
SET statement_timeout = '1s';
SELECT * FROM gpu_kmeans_fit('t_pts', 2000, columns => ARRAY['x', 'y', 'z'], tol => 0, max_iter => 1000000);
RESET statement_timeout;
SELECT sizes FROM gpu_kmeans_fit('t_pts', 1, columns => ARRAY['x', 'y', 'z']);
-- out of range
SET pg_gpu.cpu_threads = 65;
SET pg_gpu.cpu_threads = -1;
RESET pg_gpu.cpu_threads;
DROP TABLE t_pts;
