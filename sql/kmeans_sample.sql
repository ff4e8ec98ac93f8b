-- sample => m: the iterations run on m of the usable rows, drawn by the seed
-- from the rows' values (so the same rows whatever order a scan returns
-- them in), and gpu_kmeans labels every row by the sample's centroids,
-- a chunk of rows at a time.  A sample of at least every row is the fit
-- without one.
CREATE TABLE sp_pts (id int PRIMARY KEY, a float8, b float8, c float8);
INSERT INTO sp_pts
SELECT i, (i % 4) * 10 + sin(i), (i % 4 / 2) * 5 + cos(i), sin(i * 1.7)
FROM generate_series(1, 20000) i;
INSERT INTO sp_pts VALUES (20001, NULL, 1, 1), (20002, 'NaN', 1, 1);
-- the same rows in another physical order, and behind a view (read through SPI)
CREATE TABLE sp_shuffled AS SELECT * FROM sp_pts ORDER BY md5(id::text);
ALTER TABLE sp_shuffled ADD PRIMARY KEY (id);
CREATE VIEW sp_view AS SELECT * FROM sp_pts WHERE id > 0;
ANALYZE sp_pts, sp_shuffled;

CREATE TEMP TABLE fits AS
SELECT 'table' AS src, * FROM gpu_kmeans_fit('sp_pts', 4, columns => ARRAY['a', 'b', 'c'], seed => 3, sample => 1000)
UNION ALL
SELECT 'shuffled', * FROM gpu_kmeans_fit('sp_shuffled', 4, columns => ARRAY['a', 'b', 'c'], seed => 3, sample => 1000)
UNION ALL
SELECT 'view', * FROM gpu_kmeans_fit('sp_view', 4, columns => ARRAY['a', 'b', 'c'], seed => 3, sample => 1000, id_column => 'id')
UNION ALL
SELECT 'seed 4', * FROM gpu_kmeans_fit('sp_pts', 4, columns => ARRAY['a', 'b', 'c'], seed => 4, sample => 1000);
-- the model says it was a sample, and of how many rows
SELECT src, (SELECT sum(s) FROM unnest(sizes) s) AS fit_on, model->'rows' AS usable,
       model->'sample' AS sample, converged
FROM fits ORDER BY src;
-- the same rows whatever their order or path: the same fit
SELECT f.src, f.sizes = t.sizes AND f.iterations = t.iterations AS same_fit,
       (SELECT max(abs(x.v - y.v)) FROM unnest(f.centroids) WITH ORDINALITY x(v, i)
        JOIN unnest(t.centroids) WITH ORDINALITY y(v, i) USING (i)) < 1e-12 * 40 AS same_centroids
FROM fits f, fits t WHERE t.src = 'table' AND f.src IN ('shuffled', 'view') ORDER BY 1;
-- another seed, another sample (the same four groups found)
SELECT f.sizes <> t.sizes AS other_sample FROM fits f, fits t WHERE f.src = 'seed 4' AND t.src = 'table';

-- gpu_kmeans on a sample: every row labelled by the fit's centroids, NULL
-- for the unusable ones; each row's cluster is its nearest centroid
CREATE TEMP TABLE labels AS
SELECT * FROM gpu_kmeans('sp_pts', 4, columns => ARRAY['a', 'b', 'c'], seed => 3, sample => 1000);
SELECT count(*) AS rows, count(cluster) AS labelled, count(DISTINCT id) AS ids,
       count(DISTINCT (cluster, id % 4)) FILTER (WHERE cluster IS NOT NULL) AS pairs
FROM labels;
WITH c AS (SELECT (centroids) AS m FROM fits WHERE src = 'table'),
     near AS (
       SELECT p.id, (SELECT j FROM generate_series(1, 4) j
                     ORDER BY (p.a - m[j][1])^2 + (p.b - m[j][2])^2 + (p.c - m[j][3])^2, j LIMIT 1) AS j
       FROM sp_pts p, c WHERE p.a IS NOT NULL AND p.a <> 'NaN')
SELECT count(*) FILTER (WHERE l.cluster IS DISTINCT FROM near.j) AS not_nearest
FROM near JOIN labels l USING (id);
-- the same as the model's assignment, and as memberships => true
SELECT count(*) FILTER (WHERE l.cluster IS DISTINCT FROM a.cluster) AS differ
FROM labels l JOIN gpu_kmeans_apply('sp_pts', (SELECT model FROM fits WHERE src = 'table')) a USING (id);
SELECT count(*) FILTER (WHERE l.cluster IS DISTINCT FROM m.cluster) AS differ, count(*) AS rows
FROM labels l JOIN (SELECT unnest(ids) AS id, unnest(clusters) AS cluster
                    FROM gpu_kmeans_fit('sp_pts', 4, columns => ARRAY['a', 'b', 'c'], seed => 3,
                                        sample => 1000, memberships => true)) m USING (id);

-- a sample of at least every row: the fit without one (no "sample" in the model)
CREATE TEMP TABLE whole AS
SELECT * FROM gpu_kmeans_fit('sp_pts', 4, columns => ARRAY['a', 'b', 'c'], seed => 3);
SELECT s.sizes = w.sizes AND s.iterations = w.iterations AS same_fit,
       (SELECT max(abs(x.v - y.v)) FROM unnest(s.centroids) WITH ORDINALITY x(v, i)
        JOIN unnest(w.centroids) WITH ORDINALITY y(v, i) USING (i)) < 1e-12 * 40 AS same_centroids,
       s.model ? 'sample' AS says_sample
FROM gpu_kmeans_fit('sp_pts', 4, columns => ARRAY['a', 'b', 'c'], seed => 3, sample => 20000) s, whole w;
SELECT count(*) FILTER (WHERE s.cluster IS DISTINCT FROM w.cluster) AS differ
FROM gpu_kmeans('sp_pts', 4, columns => ARRAY['a', 'b', 'c'], seed => 3, sample => 9223372036854775807) s
JOIN gpu_kmeans('sp_pts', 4, columns => ARRAY['a', 'b', 'c'], seed => 3) w USING (id);

-- with parallel workers reading: the same sample
SET max_parallel_workers_per_gather = 2;
SET min_parallel_table_scan_size = 0;
SET parallel_setup_cost = 0;
SELECT f.sizes = t.sizes AND f.iterations = t.iterations AS same_fit
FROM gpu_kmeans_fit('sp_shuffled', 4, columns => ARRAY['a', 'b', 'c'], seed => 3, sample => 1000) f,
     fits t WHERE t.src = 'table';
RESET max_parallel_workers_per_gather;
RESET min_parallel_table_scan_size;
RESET parallel_setup_cost;

-- scaled and cosine fits on a sample label every row as their models do
SELECT count(*) FILTER (WHERE l.cluster IS DISTINCT FROM a.cluster) AS differ_standard
FROM gpu_kmeans('sp_pts', 4, columns => ARRAY['a', 'b', 'c'], scale => 'standard', sample => 500) l
JOIN gpu_kmeans_apply('sp_pts', (SELECT model FROM gpu_kmeans_fit('sp_pts', 4, columns => ARRAY['a', 'b', 'c'],
                                                                   scale => 'standard', sample => 500))) a USING (id);
SELECT count(*) FILTER (WHERE l.cluster IS DISTINCT FROM a.cluster) AS differ_cosine
FROM gpu_kmeans('sp_pts', 3, columns => ARRAY['a', 'b', 'c'], metric => 'cosine', sample => 500) l
JOIN gpu_kmeans_apply('sp_pts', (SELECT model FROM gpu_kmeans_fit('sp_pts', 3, columns => ARRAY['a', 'b', 'c'],
                                                                   metric => 'cosine', sample => 500))) a USING (id);

-- choosing k on a sample
SELECT k, sample_rows, model->'sample' AS sample
FROM gpu_kmeans_choose_k('sp_pts', ARRAY[2, 4], columns => ARRAY['a', 'b', 'c'], sample => 3000, sample_size => 500);

-- errors
SELECT * FROM gpu_kmeans_fit('sp_pts', 4, columns => ARRAY['a', 'b', 'c'], sample => 0);
SELECT * FROM gpu_kmeans('sp_pts', 4, columns => ARRAY['a', 'b', 'c'], sample => -5);
SELECT * FROM gpu_kmeans('sp_pts', 4, columns => ARRAY['a', 'b', 'c'], sample => -9223372036854775808);
-- sample => NULL: every row
SELECT sizes = (SELECT sizes FROM whole) AS every_row
FROM gpu_kmeans_fit('sp_pts', 4, columns => ARRAY['a', 'b', 'c'], seed => 3, sample => NULL);
SELECT * FROM gpu_kmeans_fit('sp_pts', 4, columns => ARRAY['a', 'b', 'c'], sample => 3);
SELECT * FROM gpu_kmeans_choose_k('sp_pts', ARRAY[2, 40], columns => ARRAY['a', 'b', 'c'], sample => 30);
-- a sample counts against pg_gpu.max_memory (8 bytes a value; 4 for float32 values)
SET pg_gpu.max_memory = '100kB';
SELECT iterations > 0 FROM gpu_kmeans_fit('sp_pts', 4, columns => ARRAY['a', 'b', 'c'], sample => 1000);
SELECT iterations FROM gpu_kmeans_fit('sp_pts', 4, columns => ARRAY['a', 'b', 'c'], sample => 100000);
RESET pg_gpu.max_memory;
-- float32 rows (real[]) are kept as floats (4 bytes a value): the sample and
-- the fit of the same values as doubles, and every row labelled the same
CREATE TABLE sp_vec AS SELECT id, ARRAY[a, b, c]::real[] AS e, ARRAY[a, b, c]::real[]::float8[] AS e8 FROM sp_pts;
SELECT (SELECT (centroids, sizes, inertia, iterations, model->'sample')::text
        FROM gpu_kmeans_fit('sp_vec', 4, columns => ARRAY['e'], id_column => 'id', seed => 3, sample => 1000)) =
       (SELECT (centroids, sizes, inertia, iterations, model->'sample')::text
        FROM gpu_kmeans_fit('sp_vec', 4, columns => ARRAY['e8'], id_column => 'id', seed => 3, sample => 1000))
       AS float32_same;
SELECT count(*) FILTER (WHERE a.cluster IS DISTINCT FROM b.cluster) AS differ
FROM gpu_kmeans('sp_vec', 4, columns => ARRAY['e'], id_column => 'id', seed => 3, sample => 1000) a
     JOIN gpu_kmeans('sp_vec', 4, columns => ARRAY['e8'], id_column => 'id', seed => 3, sample => 1000) b USING (id);
DROP TABLE sp_vec;
DROP VIEW sp_view;
DROP TABLE sp_pts, sp_shuffled;
