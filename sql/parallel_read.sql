-- Tables are read by parallel workers in block order: the results are those
-- of a serial read, whatever the number of workers.
SET min_parallel_table_scan_size = 0;
-- one GPU: on several, the rows are also dealt to shares (sql/shares.sql),
-- which adds DEBUG1 lines of its own
SET pg_gpu.gpus = '0';
CREATE TABLE pr_pts (id bigint PRIMARY KEY, x float8, y real, z numeric, n int);
INSERT INTO pr_pts
SELECT i,
       (i % 7) * 3 + (i % 11) * 0.01,
       CASE WHEN i % 997 = 0 THEN NULL ELSE (i % 5) * 2 + (i % 13) * 0.02 END,
       CASE WHEN i % 1009 = 0 THEN 'NaN' ELSE ((i % 3) + (i % 17) * 0.001) END,
       i % 4
FROM generate_series(1, 30000) i;
-- a few deleted rows and a dead block range
DELETE FROM pr_pts WHERE id BETWEEN 5000 AND 5600 OR id % 101 = 0;
-- serial
SET max_parallel_workers_per_gather = 0;
CREATE TEMP TABLE pr_fit0 AS SELECT * FROM gpu_kmeans_fit('pr_pts', 6, seed => 7);
CREATE TEMP TABLE pr_lab0 AS SELECT * FROM gpu_kmeans('pr_pts', 6, seed => 7);
CREATE TEMP TABLE pr_fit3 AS SELECT * FROM pr_fit0 WITH NO DATA;
CREATE TEMP TABLE pr_lab3 AS SELECT * FROM pr_lab0 WITH NO DATA;
-- parallel, the workers named in a DEBUG1 message
SET max_parallel_workers_per_gather = 3;
SET client_min_messages = debug1;
INSERT INTO pr_fit3 SELECT * FROM gpu_kmeans_fit('pr_pts', 6, seed => 7);
INSERT INTO pr_lab3 SELECT * FROM gpu_kmeans('pr_pts', 6, seed => 7);
RESET client_min_messages;
SELECT a.centroids = b.centroids AS same_centroids, a.sizes = b.sizes AS same_sizes,
       a.inertia = b.inertia AS same_inertia, a.iterations = b.iterations AS same_iterations
FROM pr_fit0 a, pr_fit3 b;
SELECT count(*) AS rows, count(*) FILTER (WHERE a.cluster IS NULL) AS skipped,
       count(*) FILTER (WHERE a.cluster IS DISTINCT FROM b.cluster) AS differ
FROM pr_lab0 a FULL JOIN pr_lab3 b USING (id);
-- the rows used are exactly those a SELECT sees
SELECT (SELECT sum(s) FROM pr_fit3, unnest(sizes) s) =
       (SELECT count(*) FROM pr_pts WHERE y IS NOT NULL AND z <> 'NaN') AS all_rows_used;
-- float32 rows (real[]; real and smallint columns) go through the workers'
-- slots as floats: the same fit as serially, and as the values in float8
CREATE TABLE pr_vec AS
SELECT id, ARRAY[x, y, z, n]::real[] AS e, x::real AS a, y::real AS b, n::smallint AS c,
       ARRAY[x, y, z, n]::real[]::float8[] AS e8
FROM pr_pts;
SET max_parallel_workers_per_gather = 0;
CREATE TEMP TABLE pr_vfit0 AS
SELECT (SELECT (centroids, inertia, iterations, sizes)::text FROM gpu_kmeans_fit('pr_vec', 6, columns => ARRAY['e'], seed => 7)) AS vec,
       (SELECT (centroids, inertia, iterations, sizes)::text FROM gpu_kmeans_fit('pr_vec', 6, columns => ARRAY['a', 'b', 'c'], seed => 7)) AS cols;
CREATE TEMP TABLE pr_vlab0 AS SELECT * FROM gpu_kmeans('pr_vec', 6, columns => ARRAY['e'], id_column => 'id', seed => 7);
SET max_parallel_workers_per_gather = 3;
SELECT (SELECT (centroids, inertia, iterations, sizes)::text FROM gpu_kmeans_fit('pr_vec', 6, columns => ARRAY['e'], seed => 7)) = vec AS vec_same,
       (SELECT (centroids, inertia, iterations, sizes)::text FROM gpu_kmeans_fit('pr_vec', 6, columns => ARRAY['a', 'b', 'c'], seed => 7)) = cols AS cols_same,
       (SELECT (centroids, inertia, iterations, sizes)::text FROM gpu_kmeans_fit('pr_vec', 6, columns => ARRAY['e8'], seed => 7)) = vec AS float8_same
FROM pr_vfit0;
SELECT count(*) FILTER (WHERE a.cluster IS DISTINCT FROM b.cluster) AS differ
FROM pr_vlab0 a FULL JOIN gpu_kmeans('pr_vec', 6, columns => ARRAY['e'], id_column => 'id', seed => 7) b USING (id);
DROP TABLE pr_vec;
-- rows of 8 values and more are converted 128 at a time, row-major, then
-- turned into the part's columns (pg_gpu_part_flush): the same fits as of
-- the values in columns of their own, serial, parallel and through a view
-- (SPI's parts), with unusable rows between the usable ones
CREATE TABLE pr_wide AS
SELECT id, e, e::float8[] AS e8, e[1] AS c1, e[2] AS c2, e[3] AS c3, e[4] AS c4,
       e[5] AS c5, e[6] AS c6, e[7] AS c7, e[8] AS c8
FROM (SELECT i AS id,
             CASE WHEN i % 331 = 0 THEN ARRAY[1, 2, 3, 4, 5, 6, 'NaN', 8]::real[]
                  ELSE array(SELECT ((i % 5) * 10 + (i * (j + 3)) % 17 * 0.5 + j)::real
                             FROM generate_series(1, 8) j) END AS e
      FROM generate_series(1, 7001) i) s;
UPDATE pr_wide SET e = NULL, e8 = NULL, c3 = NULL WHERE id % 613 = 0;
CREATE VIEW pr_wide_v AS SELECT * FROM pr_wide;
SET max_parallel_workers_per_gather = 0;
CREATE TEMP TABLE pr_wfit AS
SELECT (SELECT (centroids, inertia, iterations, sizes)::text FROM gpu_kmeans_fit('pr_wide', 5, columns => ARRAY['c1', 'c2', 'c3', 'c4', 'c5', 'c6', 'c7', 'c8'], seed => 5)) AS cols,
       (SELECT (centroids, inertia, iterations, sizes)::text FROM gpu_kmeans_fit('pr_wide', 5, columns => ARRAY['c1', 'c2', 'c3', 'c4', 'c5', 'c6', 'c7', 'c8'], seed => 5, metric => 'cosine')) AS cols_cosine;
SELECT (SELECT (centroids, inertia, iterations, sizes)::text FROM gpu_kmeans_fit('pr_wide', 5, columns => ARRAY['e'], seed => 5)) = cols AS serial_same,
       (SELECT (centroids, inertia, iterations, sizes)::text FROM gpu_kmeans_fit('pr_wide', 5, columns => ARRAY['e8'], seed => 5)) = cols AS serial_float8_same,
       (SELECT (centroids, inertia, iterations, sizes)::text FROM gpu_kmeans_fit('pr_wide', 5, columns => ARRAY['e8'], seed => 5, metric => 'cosine')) = cols_cosine AS serial_cosine_same,
       (SELECT (centroids, inertia, iterations, sizes)::text FROM gpu_kmeans_fit('pr_wide_v', 5, columns => ARRAY['e'], seed => 5)) = cols AS view_same
FROM pr_wfit;
SET max_parallel_workers_per_gather = 3;
ALTER TABLE pr_wide SET (parallel_workers = 3);
SELECT (SELECT (centroids, inertia, iterations, sizes)::text FROM gpu_kmeans_fit('pr_wide', 5, columns => ARRAY['e'], seed => 5)) = cols AS parallel_same,
       (SELECT (centroids, inertia, iterations, sizes)::text FROM gpu_kmeans_fit('pr_wide', 5, columns => ARRAY['e8'], seed => 5)) = cols AS parallel_float8_same,
       (SELECT (centroids, inertia, iterations, sizes)::text FROM gpu_kmeans_fit('pr_wide', 5, columns => ARRAY['e8'], seed => 5, metric => 'cosine')) = cols_cosine AS parallel_cosine_same
FROM pr_wfit;
SELECT count(*) AS rows, count(*) FILTER (WHERE a.cluster IS NULL) AS skipped,
       count(*) FILTER (WHERE a.cluster IS DISTINCT FROM b.cluster) AS differ
FROM gpu_kmeans('pr_wide', 5, columns => ARRAY['e'], id_column => 'id', seed => 5) a
FULL JOIN gpu_kmeans('pr_wide_v', 5, columns => ARRAY['c1', 'c2', 'c3', 'c4', 'c5', 'c6', 'c7', 'c8'], id_column => 'id', seed => 5) b USING (id);
DROP VIEW pr_wide_v;
DROP TABLE pr_wide;
-- the table's parallel_workers, and max_parallel_workers_per_gather as the cap
ALTER TABLE pr_pts SET (parallel_workers = 1);
SET client_min_messages = debug1;
SELECT iterations > 0 AS ran FROM gpu_kmeans_fit('pr_pts', 6, seed => 7);
ALTER TABLE pr_pts RESET (parallel_workers);
SET max_parallel_workers_per_gather = 2;
SELECT iterations > 0 AS ran FROM gpu_kmeans_fit('pr_pts', 6, seed => 7);
RESET client_min_messages;
-- in a transaction that changed the table: its own changes, seen by the workers
BEGIN;
UPDATE pr_pts SET x = x + 1000 WHERE id <= 100;
SELECT sizes[1] AS rows_far_away
FROM gpu_kmeans_fit('pr_pts', 2, init_centroids => ARRAY[[1000.0, 0, 1, 1], [0.0, 0, 1, 1]]::float8[],
                    max_iter => 1);
ROLLBACK;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) AS rows_now FROM pr_pts;
UPDATE pr_pts SET x = x + 1000 WHERE id <= 50;
SELECT sizes[1] AS rows_far_away
FROM gpu_kmeans_fit('pr_pts', 2, init_centroids => ARRAY[[1000.0, 0, 1, 1], [0.0, 0, 1, 1]]::float8[],
                    max_iter => 1);
ROLLBACK;
-- a partitioned table, two levels, columns in another order in one leaf: read
-- leaf by leaf as a SELECT appends them, so the same results as through a view
CREATE TABLE pr_part (id bigint, g int, x float8, y float8) PARTITION BY RANGE (g);
CREATE TABLE pr_part_1 PARTITION OF pr_part FOR VALUES FROM (0) TO (1);
CREATE TABLE pr_part_2 (y float8, g int, x float8, id bigint);
ALTER TABLE pr_part ATTACH PARTITION pr_part_2 FOR VALUES FROM (1) TO (2);
CREATE TABLE pr_part_3 PARTITION OF pr_part FOR VALUES FROM (2) TO (4) PARTITION BY LIST (g);
CREATE TABLE pr_part_3a PARTITION OF pr_part_3 FOR VALUES IN (3);
CREATE TABLE pr_part_3b PARTITION OF pr_part_3 FOR VALUES IN (2);
INSERT INTO pr_part SELECT i, i % 4, (i % 9) * 2.5 + (i % 4), (i % 5) - (i % 4) * 3 FROM generate_series(1, 20000) i;
CREATE VIEW pr_part_v AS SELECT * FROM pr_part;
SET client_min_messages = debug1;
SELECT a.centroids = b.centroids AS same_centroids, a.sizes = b.sizes AS same_sizes,
       a.iterations = b.iterations AS same_iterations
FROM gpu_kmeans_fit('pr_part', 5, columns => ARRAY['x', 'y'], seed => 3) a,
     gpu_kmeans_fit('pr_part_v', 5, columns => ARRAY['x', 'y'], seed => 3) b;
RESET client_min_messages;
SELECT count(*) AS rows, count(*) FILTER (WHERE a.cluster IS DISTINCT FROM b.cluster) AS differ
FROM gpu_kmeans('pr_part', 5, columns => ARRAY['x', 'y'], id_column => 'id', seed => 3) a
FULL JOIN gpu_kmeans('pr_part_v', 5, columns => ARRAY['x', 'y'], id_column => 'id', seed => 3) b USING (id);
-- the parent's privileges, not the leaves'
CREATE ROLE regress_pr_part;
GRANT SELECT ON pr_part TO regress_pr_part;
SET ROLE regress_pr_part;
SELECT sizes FROM gpu_kmeans_fit('pr_part', 1, columns => ARRAY['x']);
SELECT sizes FROM gpu_kmeans_fit('pr_part_2', 1, columns => ARRAY['x']);
RESET ROLE;
DROP VIEW pr_part_v;
DROP TABLE pr_part;
DROP ROLE regress_pr_part;
-- dense matrix tables read in parallel: the same product as a serial read
CREATE TABLE pr_m (row_id int, row_vec float8[]);
INSERT INTO pr_m SELECT i, ARRAY[i, i % 7, 1.0 / i] FROM generate_series(1, 20000) i;
CREATE TABLE pr_n (row_id int, row_vec float8[]);
INSERT INTO pr_n VALUES (1, ARRAY[1.0, 0]), (2, ARRAY[0, 1.0]), (3, ARRAY[2.0, 3.0]);
SET max_parallel_workers_per_gather = 0;
CREATE TEMP TABLE pr_mm0 AS SELECT * FROM gpu_matmul('pr_m'::regclass, 'pr_n'::regclass);
CREATE TEMP TABLE pr_mm3 AS SELECT * FROM pr_mm0 WITH NO DATA;
SET max_parallel_workers_per_gather = 3;
SET client_min_messages = debug1;
INSERT INTO pr_mm3 SELECT * FROM gpu_matmul('pr_m'::regclass, 'pr_n'::regclass);
RESET client_min_messages;
SELECT count(*) AS rows, count(*) FILTER (WHERE a.row_vec <> b.row_vec) AS differ,
       max(abs(a.row_vec[1] - (a.row_id + 2.0 / a.row_id))) < 1e-9 AS right_values
FROM pr_mm0 a JOIN pr_mm3 b USING (row_id);
-- rows of another length, found by a worker
UPDATE pr_m SET row_vec = ARRAY[1.0, 2.0] WHERE row_id = 15000;
\set VERBOSITY terse
SELECT count(*) FROM gpu_matmul('pr_m'::regclass, 'pr_n'::regclass);
\set VERBOSITY default
-- privileges are checked as a SELECT checks them
CREATE ROLE regress_pr_reader;
GRANT SELECT (id, x) ON pr_pts TO regress_pr_reader;
SET ROLE regress_pr_reader;
SELECT iterations FROM gpu_kmeans_fit('pr_pts', 2, columns => ARRAY['x']) LIMIT 0;
SELECT iterations FROM gpu_kmeans_fit('pr_pts', 2, columns => ARRAY['x', 'y']);
RESET ROLE;
-- gpu_knn reads its base in parallel too (on a GPU, from slots pinned for it,
-- the rows by rows, copied and turned by the device): the same neighbours
-- as a serial read, over two tiles: rows repeat every 41 ids, so a query's
-- neighbours are at distance 0, the lowest ids of its class (ties across
-- tiles to the lower id), NULL and NaN rows left out
CREATE TABLE pr_knn AS
SELECT g AS id,
       CASE WHEN g = 777 THEN NULL WHEN g = 778 THEN array_fill('NaN'::real, ARRAY[40])
            ELSE array(SELECT ((g * 7 + j * 13) % 41) * 0.25 FROM generate_series(1, 40) j WHERE g > 0)::real[]
       END AS e
FROM generate_series(1, 70000) g;
ALTER TABLE pr_knn ADD PRIMARY KEY (id);
CREATE TEMP TABLE pr_knn_q AS SELECT id, e FROM pr_knn WHERE id % 1400 = 3;
SET max_parallel_workers_per_gather = 0;
CREATE TEMP TABLE pr_knn0 AS SELECT * FROM gpu_knn('pr_knn_q', 'pr_knn', 5, query_id_column => 'id');
SET max_parallel_workers_per_gather = 3;
SET client_min_messages = debug1;
CREATE TEMP TABLE pr_knn3 AS SELECT * FROM gpu_knn('pr_knn_q', 'pr_knn', 5, query_id_column => 'id');
RESET client_min_messages;
SELECT count(*) AS neighbours, count(DISTINCT a.query_id) AS queries,
       count(*) FILTER (WHERE (a.base_id, a.distance) IS DISTINCT FROM (b.base_id, b.distance)) AS differ,
       count(*) FILTER (WHERE a.distance <> 0 OR a.base_id <>
                              (SELECT p.id FROM pr_knn p WHERE p.id % 41 = a.query_id % 41 AND p.id NOT IN (777, 778)
                               ORDER BY p.id OFFSET a.rank - 1 LIMIT 1)) AS wrong
FROM pr_knn0 a FULL JOIN pr_knn3 b USING (query_id, rank);
DROP TABLE pr_knn;
DROP TABLE pr_pts, pr_m, pr_n;
DROP ROLE regress_pr_reader;
RESET max_parallel_workers_per_gather;
RESET min_parallel_table_scan_size;
