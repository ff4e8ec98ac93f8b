-- PostGIS geometry points as k-means rows, where PostGIS is installed
-- (Debian's postgresql-15-postgis-3; without it the other expected output,
-- kmeans_postgis_1.out: pg_gpu does not need it).  pg_gpu reads the points'
-- coordinates from PostGIS's documented layout, without calling PostGIS.
SELECT count(*) > 0 AS have_postgis FROM pg_available_extensions WHERE name = 'postgis' \gset
\if :have_postgis
SET client_min_messages = warning;
CREATE EXTENSION postgis;
RESET client_min_messages;
-- 4 groups of points, with an SRID; a NULL and an empty point
CREATE TABLE places (id int PRIMARY KEY, geom geometry(Point, 4326));
INSERT INTO places SELECT i, ST_SetSRID(ST_MakePoint((i % 4) * 10 + sin(i), (i % 4 / 2) * 10 + cos(i * 1.7)), 4326)
FROM generate_series(1, 200) i;
INSERT INTO places VALUES (201, NULL), (202, 'SRID=4326;POINT EMPTY');
CREATE VIEW places_xy AS SELECT id, ST_X(geom) AS x, ST_Y(geom) AS y FROM places;
-- the same fit as on ST_X, ST_Y
SELECT (SELECT centroids FROM gpu_kmeans_fit('places', 4, columns => ARRAY['geom'], seed => 2)) =
       (SELECT centroids FROM gpu_kmeans_fit('places_xy', 4, id_column => 'id', seed => 2)) AS same_centroids;
SELECT count(*) AS rows, count(cluster) AS clustered, count(DISTINCT (cluster, id % 4)) FILTER (WHERE cluster IS NOT NULL) AS pairs
FROM gpu_kmeans('places', 4, columns => ARRAY['geom'], seed => 2);
-- ST_ClusterKMeans finds the same 4 groups; the inertias, computed in SQL alike
WITH ours AS (SELECT p.id, k.cluster FROM gpu_kmeans('places', 4, columns => ARRAY['geom'], n_init => 3) k JOIN places p USING (id)),
     theirs AS (SELECT id, ST_ClusterKMeans(geom, 4) OVER () AS cluster FROM places WHERE geom IS NOT NULL AND NOT ST_IsEmpty(geom)),
     inertia AS (SELECT 'pg_gpu' AS who, sum((ST_X(p.geom) - c.cx) ^ 2 + (ST_Y(p.geom) - c.cy) ^ 2) AS inertia
                 FROM ours o JOIN places p USING (id)
                 JOIN (SELECT o2.cluster, avg(ST_X(p2.geom)) cx, avg(ST_Y(p2.geom)) cy FROM ours o2 JOIN places p2 USING (id) GROUP BY 1) c USING (cluster)
                 UNION ALL
                 SELECT 'ST_ClusterKMeans', sum((ST_X(p.geom) - c.cx) ^ 2 + (ST_Y(p.geom) - c.cy) ^ 2)
                 FROM theirs t JOIN places p USING (id)
                 JOIN (SELECT t2.cluster, avg(ST_X(p2.geom)) cx, avg(ST_Y(p2.geom)) cy FROM theirs t2 JOIN places p2 USING (id) GROUP BY 1) c USING (cluster))
SELECT (SELECT count(DISTINCT (o.cluster, t.cluster)) FROM ours o JOIN theirs t USING (id)) AS same_partition_pairs,
       round((SELECT inertia FROM inertia WHERE who = 'pg_gpu')::numeric, 6) =
       round((SELECT inertia FROM inertia WHERE who = 'ST_ClusterKMeans')::numeric, 6) AS same_inertia;
-- a model of points, applied by name and to one point
CREATE TABLE place_model AS SELECT model FROM gpu_kmeans_fit('places', 4, columns => ARRAY['geom'], n_init => 3);
SELECT model->>'input' AS input, model->'columns' AS columns, model->'column_types' AS types, model->'dims' AS dims FROM place_model;
SELECT count(*) FILTER (WHERE a.cluster = gpu_kmeans_predict(m.model, p.geom)) AS by_point,
       count(*) FILTER (WHERE a.cluster = gpu_kmeans_predict(m.model, p)) AS by_row
FROM places p JOIN gpu_kmeans_apply('places', (SELECT model FROM place_model)) a USING (id), place_model m;
SELECT gpu_kmeans_predict(model, 'POINT EMPTY'::geometry) AS empty_point FROM place_model;
-- 3-D points
CREATE TABLE places3 (id int PRIMARY KEY, geom geometry(PointZ));
INSERT INTO places3 SELECT i, ST_MakePoint(i % 2 * 10, sin(i), (i % 2) * -10 + cos(i)) FROM generate_series(1, 40) i;
SELECT array_length(centroids, 2) AS dims, sizes FROM gpu_kmeans_fit('places3', 2, columns => ARRAY['geom']);
-- errors: not points, 2-D and 3-D mixed, a point for a model of columns
-- Points with M weigh M, as ST_ClusterKMeans weighs them: the fit of the
-- points is that of their x, y weighted by weight_column => their M; a
-- weight_column says otherwise (here 1 each: the unweighted fit)
CREATE TABLE placesm (id int PRIMARY KEY, geom geometry(PointM), one int DEFAULT 1);
INSERT INTO placesm SELECT i, ST_MakePointM((i % 3) * 10 + sin(i), cos(i) + (i % 5), (i % 4) * 0.5)
FROM generate_series(1, 300) i;
CREATE VIEW placesm_xy AS SELECT id, ST_X(geom) AS x, ST_Y(geom) AS y, ST_M(geom) AS m, one FROM placesm;
SELECT (SELECT (centroids, sizes, inertia)::text FROM gpu_kmeans_fit('placesm', 4, columns => ARRAY['geom'], seed => 2)) =
       (SELECT (centroids, sizes, inertia)::text
        FROM gpu_kmeans_fit('placesm_xy', 4, columns => ARRAY['x', 'y'], seed => 2, weight_column => 'm')) AS weighted_by_m,
       (SELECT (centroids, sizes, inertia)::text
        FROM gpu_kmeans_fit('placesm', 4, columns => ARRAY['geom'], seed => 2, weight_column => 'one')) =
       (SELECT (centroids, sizes, inertia)::text
        FROM gpu_kmeans_fit('placesm_xy', 4, columns => ARRAY['x', 'y'], seed => 2)) AS weight_column_instead,
       (SELECT model->>'weights' FROM gpu_kmeans_fit('placesm', 4, columns => ARRAY['geom'], seed => 2)) AS weights;
SELECT (SELECT sum(s) FROM unnest(sizes) s) AS fit_rows, model->>'weights' AS weights
FROM gpu_kmeans_fit('placesm', 4, columns => ARRAY['geom'], sample => 100);
INSERT INTO placesm VALUES (301, 'POINTM(1 1 -2)');
SELECT * FROM gpu_kmeans('placesm', 4, columns => ARRAY['geom']);
CREATE TABLE shapes (id int PRIMARY KEY, geom geometry);
INSERT INTO shapes VALUES (1, 'POINT(0 0)'), (2, 'LINESTRING(0 0, 1 1)');
CREATE TABLE mixed (id int PRIMARY KEY, geom geometry);
INSERT INTO mixed VALUES (1, 'POINT(0 0)'), (2, 'POINT(1 1 1)');
\set VERBOSITY terse
SELECT * FROM gpu_kmeans('shapes', 2, columns => ARRAY['geom']);
SELECT * FROM gpu_kmeans('mixed', 2, columns => ARRAY['geom']);
SELECT gpu_kmeans_predict(model, 'POINT(1 1 1)'::geometry) FROM place_model;
SELECT gpu_kmeans_predict('{"kind": "pg_gpu k-means model", "version": 1, "k": 1, "dims": 2, "input": "columns", "columns": ["x", "y"], "metric": "euclidean", "scale": "none", "centroids": [[0, 0]]}', 'POINT(1 1)'::geometry);
\set VERBOSITY default
DROP TABLE places, places3, placesm, shapes, mixed, place_model CASCADE;
DROP EXTENSION postgis;
\else
SELECT 'PostGIS is not installed' AS skipped;
\endif
