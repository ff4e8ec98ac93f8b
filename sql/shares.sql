-- Rows dealt to shares (pg_gpu.parts; on a host with several GPUs, one a
-- GPU of pg_gpu.gpus): a batch at a time to each in turn, every iteration
-- their sums added in share order, the GPUs at once.  From the same starting
-- centroids the shares give the fit of the rows held whole: the same
-- memberships (every id where it was), sizes and iterations, centroids
-- within 1e-12.  gpu_matmul splits a's rows over as many workspaces.
CREATE TABLE sh_pts (id int PRIMARY KEY, a float8, b float8, c float8, d float8);
INSERT INTO sh_pts
SELECT i, (i % 5) * 10 + sin(i), (i % 5 / 2) * 7 + cos(i), sin(i * 1.3), cos(i * 0.7)
FROM generate_series(1, 300000) i;
INSERT INTO sh_pts VALUES (300001, NULL, 1, 1, 1), (300002, 'NaN', 1, 1, 1);
ANALYZE sh_pts;
CREATE TEMP TABLE sh_init AS
SELECT ARRAY[[0, 0, 0, 0], [10, 0, 0, 0], [20, 7, 0, 0], [30, 7, 0, 0], [40, 14, 0, 0]]::float8[] AS c;
-- within 1e-12 of y (absolutely under 1)
CREATE FUNCTION sh_close(x float8, y float8) RETURNS boolean LANGUAGE sql IMMUTABLE
AS $$ SELECT abs(x - y) <= 1e-12 * greatest(1, abs(y)) $$;
CREATE FUNCTION sh_close(x float8[], y float8[]) RETURNS boolean LANGUAGE sql IMMUTABLE
AS $$ SELECT cardinality(x) = cardinality(y) AND bool_and(sh_close(u, v)) FROM unnest(x, y) t(u, v) $$;

-- each call with 3 shares, then held whole
CREATE TEMP TABLE f3 AS
SELECT * FROM gpu_kmeans_fit('sh_pts', 5, columns => ARRAY['a', 'b', 'c', 'd'],
                             init_centroids => (SELECT c FROM sh_init), tol => 0, memberships => true);
SHOW pg_gpu.parts;
SHOW pg_gpu.gpus;
SET pg_gpu.parts = 3;
CREATE TEMP TABLE s3 AS
SELECT * FROM gpu_kmeans_fit('sh_pts', 5, columns => ARRAY['a', 'b', 'c', 'd'],
                             init_centroids => (SELECT c FROM sh_init), tol => 0, memberships => true);
CREATE TEMP TABLE k3 AS
SELECT * FROM gpu_kmeans('sh_pts', 5, columns => ARRAY['a', 'b', 'c', 'd'],
                         init_centroids => (SELECT c FROM sh_init), tol => 0);
CREATE TEMP TABLE a3 AS
SELECT * FROM gpu_kmeans_assign('sh_pts', (SELECT centroids FROM f3), columns => ARRAY['a', 'b', 'c', 'd']);
CREATE TEMP TABLE m3 AS
SELECT model FROM gpu_kmeans_fit('sh_pts', 5, columns => ARRAY['a', 'b', 'c', 'd'], scale => 'standard',
                                 init_centroids => (SELECT c FROM sh_init), tol => 0);
CREATE TEMP TABLE p3 AS SELECT * FROM gpu_kmeans_apply('sh_pts', (SELECT model FROM m3));
CREATE TEMP TABLE c3 AS
SELECT * FROM gpu_kmeans_fit('sh_pts', 5, columns => ARRAY['a', 'b', 'c', 'd'], seed => 4, n_init => 2);
-- a fit on a sample over shares, every row labelled after it
CREATE TEMP TABLE sp3 AS
SELECT * FROM gpu_kmeans_fit('sh_pts', 5, columns => ARRAY['a', 'b', 'c', 'd'], seed => 4, sample => 50000,
                             memberships => true);
-- fewer rows than shares, and shares streamed in parts (pg_gpu.kmeans_gpu_memory)
CREATE TEMP TABLE tiny AS SELECT * FROM sh_pts WHERE id <= 2;
SELECT sizes FROM gpu_kmeans_fit('tiny', 2, columns => ARRAY['a', 'b'], init_centroids => '{{1,1},{20,7}}');
SET pg_gpu.kmeans_gpu_memory = '2MB';
CREATE TEMP TABLE t3 AS
SELECT * FROM gpu_kmeans_fit('sh_pts', 5, columns => ARRAY['a', 'b', 'c', 'd'],
                             init_centroids => (SELECT c FROM sh_init), tol => 0, memberships => true);
RESET pg_gpu.kmeans_gpu_memory;
-- no usable row at all, over shares: the clean error of one share (a
-- relation without rows, or whose rows all have a NULL, crashed the
-- rows-out calls when the ids were put back in the data's order)
CREATE TEMP TABLE sh_none (id int PRIMARY KEY, x float8);
SELECT count(*) FROM gpu_kmeans('sh_none', 2, columns => ARRAY['x']);
INSERT INTO sh_none VALUES (1, NULL), (2, NULL), (3, 'NaN');
SELECT count(*) FROM gpu_kmeans('sh_none', 2, columns => ARRAY['x']);
SELECT count(*) FROM gpu_kmeans_assign('sh_none', ARRAY[[1]]::float8[], columns => ARRAY['x']);
SELECT sizes FROM gpu_kmeans_fit('sh_none', 2, columns => ARRAY['x'], memberships => true);
RESET pg_gpu.parts;

-- the sample's fit over shares is its fit held whole, and so are its memberships
SELECT s.sizes = w.sizes AND s.iterations = w.iterations AS same_sample_fit,
       sh_close(s.centroids::float8[], w.centroids::float8[]) AS sample_centroids_within_1e_12,
       s.ids = w.ids AND s.clusters IS NOT DISTINCT FROM w.clusters AS same_sample_memberships,
       (s.model->>'sample')::int AS sample
FROM sp3 s, gpu_kmeans_fit('sh_pts', 5, columns => ARRAY['a', 'b', 'c', 'd'], seed => 4, sample => 50000,
                           memberships => true) w;
SELECT s.sizes = f.sizes AS same_sizes, s.iterations = f.iterations AS same_iterations,
       sh_close(s.centroids::float8[], f.centroids::float8[]) AS centroids_within_1e_12,
       sh_close(s.inertia, f.inertia) AS same_inertia, split_part(s.device, ' (', 1) = split_part(f.device, ' (', 1) AS same_device,
       t.sizes = f.sizes AND t.iterations = f.iterations AND sh_close(t.centroids::float8[], f.centroids::float8[])
       AS streamed_too
FROM s3 s, f3 f, t3 t;
-- memberships => true: every id with its cluster, as held whole
SELECT count(*) AS ids, count(*) FILTER (WHERE s.cluster IS DISTINCT FROM f.cluster) AS differ,
       count(*) FILTER (WHERE t.cluster IS DISTINCT FROM f.cluster) AS differ_streamed
FROM (SELECT unnest(ids) AS id, unnest(clusters) AS cluster FROM s3) s
FULL JOIN (SELECT unnest(ids) AS id, unnest(clusters) AS cluster FROM f3) f USING (id)
FULL JOIN (SELECT unnest(ids) AS id, unnest(clusters) AS cluster FROM t3) t USING (id);
-- gpu_kmeans: every row, the unusable ones NULL, the others where the whole fit put them
SELECT count(*) AS rows, count(*) FILTER (WHERE k.cluster IS NULL) AS unusable,
       count(*) FILTER (WHERE k.cluster IS DISTINCT FROM f.cluster) AS differ
FROM k3 k LEFT JOIN (SELECT unnest(ids) AS id, unnest(clusters) AS cluster FROM f3) f USING (id);
-- assignment, and a scaled model fitted and applied: the same clusters and distances
SELECT count(*) AS rows, count(*) FILTER (WHERE a.cluster IS DISTINCT FROM w.cluster
                                          OR NOT coalesce(sh_close(a.distance, w.distance), true)) AS differ
FROM a3 a JOIN gpu_kmeans_assign('sh_pts', (SELECT centroids FROM f3), columns => ARRAY['a', 'b', 'c', 'd']) w
USING (id);
SELECT count(*) AS rows, count(*) FILTER (WHERE p.cluster IS DISTINCT FROM w.cluster
                                          OR NOT coalesce(sh_close(p.distance, w.distance), true)) AS differ
FROM p3 p JOIN gpu_kmeans_apply('sh_pts', (SELECT model FROM m3)) w USING (id);
SELECT sh_close(((SELECT model FROM m3) -> 'mean' ->> 0)::float8,
                ((SELECT model FROM gpu_kmeans_fit('sh_pts', 5, columns => ARRAY['a', 'b', 'c', 'd'],
                                                   scale => 'standard', init_centroids => (SELECT c FROM sh_init),
                                                   tol => 0)) -> 'mean' ->> 0)::float8) AS same_scaling;
-- seeded over shares (a sample of every share): the 5 groups found
SELECT (SELECT array_agg(v ORDER BY v) FROM unnest(sizes) v) AS sizes FROM c3;

-- gpu_matmul: a's rows split over 3 workspaces, the product as one
CREATE TABLE sh_a (row_id int, row_vec float8[]);
INSERT INTO sh_a SELECT i, ARRAY(SELECT sin(i * j * 0.01) FROM generate_series(1, 40) j) FROM generate_series(1, 1000) i;
CREATE TABLE sh_b (row_id int, row_vec float8[]);
INSERT INTO sh_b SELECT i, ARRAY(SELECT cos(i + j) FROM generate_series(1, 30) j) FROM generate_series(1, 40) i;
CREATE TEMP TABLE mm1 AS SELECT * FROM gpu_matmul('sh_a'::regclass, 'sh_b');
SET pg_gpu.parts = 3;
SELECT count(*) AS rows, count(*) FILTER (WHERE NOT sh_close(s.row_vec, w.row_vec)) AS differ
FROM gpu_matmul('sh_a'::regclass, 'sh_b') s JOIN mm1 w USING (row_id);
SELECT sh_close(gpu_matmul((SELECT array_agg(row_vec ORDER BY row_id) FROM sh_a WHERE row_id <= 7),
                           (SELECT array_agg(row_vec ORDER BY row_id) FROM sh_b))::float8[],
                (SELECT array_agg(row_vec ORDER BY row_id) FROM mm1 WHERE row_id <= 7)::float8[]) AS arrays_too;
-- fewer rows than shares: one workspace
CREATE TEMP TABLE sh_a2 AS SELECT * FROM sh_a WHERE row_id <= 2;
SELECT count(*) AS rows, count(*) FILTER (WHERE NOT sh_close(s.row_vec, w.row_vec)) AS differ
FROM gpu_matmul('sh_a2'::regclass, 'sh_b') s JOIN mm1 w USING (row_id);
RESET pg_gpu.parts;

-- the settings
SET pg_gpu.gpus = '1, 0';
SHOW pg_gpu.gpus;
SET pg_gpu.gpus = 'first';
SET pg_gpu.gpus = '0,0';
SET pg_gpu.gpus = '0;1';
SET pg_gpu.parts = 65;
RESET pg_gpu.gpus;
DROP TABLE sh_pts, sh_a, sh_b;
DROP FUNCTION sh_close(float8, float8), sh_close(float8[], float8[]);
