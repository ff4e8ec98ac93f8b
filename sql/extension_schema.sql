-- pg_gpu installs into any schema (CREATE EXTENSION ... SCHEMA), moves with
-- ALTER EXTENSION ... SET SCHEMA, and every function works with an empty
-- search_path (names qualified by the caller; nothing inside depends on it).
-- Ends with the extension back in public for the tests that follow.
CREATE SCHEMA gpu;
DROP EXTENSION pg_gpu;
CREATE EXTENSION pg_gpu SCHEMA gpu;
SELECT n.nspname, count(*) AS functions
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_gpu'
GROUP BY 1;
CREATE TABLE es_pts (id int PRIMARY KEY, x float8, y real);
INSERT INTO es_pts SELECT i, (i % 3) * 10 + (i % 7) / 10.0, i % 2 FROM generate_series(1, 300) i;
CREATE VIEW es_view AS SELECT * FROM es_pts;
CREATE TABLE es_a (row_id int PRIMARY KEY, row_vec float8[]);
INSERT INTO es_a VALUES (1, '{1,2}'), (2, '{3,4}');
CREATE TABLE es_s (row_id int, col_id int, value numeric);
INSERT INTO es_s VALUES (1, 1, 1), (2, 2, 1);
-- a schema first in the path that shadows what a careless script would use
CREATE SCHEMA evil;
CREATE FUNCTION evil.quote_ident(text) RETURNS text LANGUAGE sql AS 'SELECT ''hacked''';
CREATE TABLE evil.es_pts (id int, x float8, y real);
SET search_path = '';
SELECT sizes, iterations FROM gpu.gpu_kmeans_fit('public.es_pts', 3, columns => ARRAY['x'], seed => 1);
SELECT sizes, model->>'algorithm' AS algorithm
FROM gpu.gpu_kmeans_fit('public.es_pts', 4, columns => ARRAY['x'], seed => 1, algorithm => 'hierarchical');
-- a weight column, read from the table and through a view (its SELECT built by pg_gpu)
SELECT t.sizes = v.sizes AND t.inertia = v.inertia AS same_weighted_fit, t.model->>'weights' AS weights
FROM gpu.gpu_kmeans_fit('public.es_pts', 3, columns => ARRAY['x'], seed => 1, weight_column => 'y') t,
     gpu.gpu_kmeans_fit('public.es_view', 3, columns => ARRAY['x'], seed => 1, weight_column => 'y') v;
SELECT cluster, count(*) FROM gpu.gpu_kmeans('public.es_pts', 3, columns => ARRAY['x'], id_column => 'id')
GROUP BY cluster ORDER BY cluster;
SELECT cluster, count(*), max(distance) < 1 AS near
FROM gpu.gpu_kmeans_assign('public.es_pts', ARRAY[[0.3, 0.5], [10.3, 0.5], [20.3, 0.5]]::pg_catalog.float8[])
GROUP BY cluster ORDER BY cluster;
SELECT t.rank, count(*), max(t.distance) < 20 AS near
FROM gpu.gpu_kmeans_fit('public.es_pts', 3, columns => ARRAY['x'], seed => 1) f,
     gpu.gpu_kmeans_transform('public.es_pts', f.model, 2) t
GROUP BY t.rank ORDER BY t.rank;
SELECT pg_catalog.pg_typeof(t.id), count(*)
FROM gpu.gpu_kmeans_fit('public.es_pts', 3, columns => ARRAY['x'], seed => 1) f,
     gpu.gpu_kmeans_transform('public.es_pts', f.model, NULL::pg_catalog.int4, n => 1) t
GROUP BY 1;
SELECT gpu.gpu_matmul(ARRAY[[1, 2]]::pg_catalog.float8[], ARRAY[[3], [4]]::pg_catalog.float8[]);
SELECT gpu.gpu_matmul(ARRAY[[1, 2]]::pg_catalog.float4[], ARRAY[[3], [4]]::pg_catalog.float4[]);
SELECT * FROM gpu.gpu_matmul('public.es_a'::pg_catalog.regclass, 'public.es_s'::pg_catalog.regclass);
SELECT count(*) >= 0 AS listed FROM gpu.gpu_info();
SET search_path = evil, public;
-- unqualified names resolve as the caller's path says: evil.es_pts is empty
SELECT * FROM gpu.gpu_kmeans_fit('es_pts', 1);
RESET search_path;
-- relocatable: moves with its functions
ALTER EXTENSION pg_gpu SET SCHEMA public;
SELECT sizes FROM gpu_kmeans_fit('es_pts', 1, columns => ARRAY['y']);
-- dropped and created again, the same objects
DROP EXTENSION pg_gpu;
CREATE EXTENSION pg_gpu;
SELECT sizes FROM gpu_kmeans_fit('es_pts', 1, columns => ARRAY['y']);
DROP SCHEMA evil CASCADE;
DROP SCHEMA gpu;
DROP TABLE es_pts, es_a, es_s CASCADE;
