-- The demo session (tests/demo/demo.sh runs it): sample data and gpu_kmeans.
--   psql -X -v n=100000 -f tests/demo/demo.sql
\set ON_ERROR_STOP on
\if :{?n}
\else
\set n 100000
\endif
CREATE EXTENSION pg_gpu;
\echo '-- the GPUs this backend sees (none: no rows)'
SELECT * FROM gpu_info();
CREATE TABLE points (id bigint PRIMARY KEY, x double precision, y double precision);
SELECT setseed(0.42);
INSERT INTO points
SELECT i, (ARRAY[0, 8, 4])[1 + i % 3] + random() + random() - 1,
          (ARRAY[0, 0, 7])[1 + i % 3] + random() + random() - 1
FROM generate_series(1, :n) i;
ANALYZE points;
\timing on
\echo '-- the model: centroids (k x d), cluster sizes, inertia'
SELECT * FROM gpu_kmeans_fit('points', 3, seed => 42);
\echo '-- memberships: (id, cluster) for every row'
SELECT * FROM gpu_kmeans('points', 3) ORDER BY id LIMIT 5;
CREATE TABLE seg AS SELECT * FROM gpu_kmeans('points', 3);
SELECT cluster, count(*), round(avg(x)::numeric, 2) AS x, round(avg(y)::numeric, 2) AS y
FROM seg JOIN points USING (id) GROUP BY cluster ORDER BY cluster;
\echo '-- new points, nearest centroid of the model'
CREATE TABLE new_points (id int PRIMARY KEY, x float8, y float8);
INSERT INTO new_points VALUES (1, 0.5, 0.2), (2, 7.5, -0.3), (3, 4, 6.5);
SELECT a.* FROM gpu_kmeans_fit('points', 3, seed => 42) m,
               LATERAL gpu_kmeans_assign('new_points', m.centroids) a ORDER BY id;
