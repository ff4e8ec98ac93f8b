-- gpu_kmeans_transform: every row's distance to each cluster of a model
-- (scikit-learn's transform), nearest first, ties to the lower cluster; with
-- n => 1 gpu_kmeans_apply's cluster and distance exactly; the model's
-- scaling and metric; unusable rows; ids of any type; bad arguments.
SET extra_float_digits = 0;
CREATE TABLE kt (id int PRIMARY KEY, x float8, y float8);
INSERT INTO kt SELECT g, (g % 4) * 1.5 + (g % 7) * 0.1, (g % 3) * 2.0 FROM generate_series(1, 40) g;
CREATE TABLE kt_models AS
SELECT 'plain' AS kind, (gpu_kmeans_fit('kt', 3, columns => ARRAY['x', 'y'], seed => 1)).model
UNION ALL
SELECT 'standard', (gpu_kmeans_fit('kt', 3, columns => ARRAY['x', 'y'], seed => 1, scale => 'standard')).model
UNION ALL
SELECT 'cosine', (gpu_kmeans_fit('kt', 3, columns => ARRAY['x', 'y'], seed => 1, metric => 'cosine')).model;
-- every row has each cluster once, ranks 1..k, distances ascending (ties: the lower cluster first)
SELECT m.kind, count(*) AS results, count(DISTINCT t.id) AS rows,
       bool_and(t.rank BETWEEN 1 AND 3) AS ranks,
       count(*) = count(DISTINCT (t.id, t.cluster)) AS each_cluster_once
FROM kt_models m CROSS JOIN LATERAL gpu_kmeans_transform('kt', m.model, id_column => 'id') t
GROUP BY m.kind ORDER BY m.kind;
SELECT m.kind, count(*) AS out_of_order
FROM kt_models m CROSS JOIN LATERAL gpu_kmeans_transform('kt', m.model, id_column => 'id') a
JOIN gpu_kmeans_transform('kt', m.model, id_column => 'id') b ON a.id = b.id AND b.rank = a.rank + 1
WHERE a.distance > b.distance OR (a.distance = b.distance AND a.cluster > b.cluster)
GROUP BY m.kind ORDER BY m.kind;
-- n => 1: gpu_kmeans_apply's cluster and distance, bit for bit
SELECT m.kind, count(*) AS rows,
       count(*) FILTER (WHERE t.cluster = a.cluster AND t.distance = a.distance AND t.rank = 1) AS as_apply
FROM kt_models m
CROSS JOIN LATERAL gpu_kmeans_transform('kt', m.model, 1, 'id') t
JOIN gpu_kmeans_apply('kt', m.model, 'id') a ON a.id = t.id
GROUP BY m.kind ORDER BY m.kind;
-- the distances are the Euclidean ones to the centroids (plain model), as computed here
SELECT count(*) AS results,
       count(*) FILTER (WHERE abs(t.distance - sqrt((k.x - c.cx) ^ 2 + (k.y - c.cy) ^ 2)) < 1e-12) AS as_computed
FROM kt_models m
CROSS JOIN LATERAL gpu_kmeans_transform('kt', m.model, id_column => 'id') t
JOIN kt k ON k.id = t.id
JOIN LATERAL (SELECT (m.model->'centroids'->(t.cluster - 1)->>0)::float8 AS cx,
                     (m.model->'centroids'->(t.cluster - 1)->>1)::float8 AS cy) c ON true
WHERE m.kind = 'plain';
-- n => 2 is the first two of every cluster's; n past k is every cluster
SELECT (SELECT count(*) FROM kt_models m, gpu_kmeans_transform('kt', m.model, 2, 'id') WHERE m.kind = 'plain') AS two,
       (SELECT count(*) FROM kt_models m, gpu_kmeans_transform('kt', m.model, 2, 'id') t
        JOIN gpu_kmeans_transform('kt', m.model, n => NULL, id_column => 'id') u USING (id, rank)
        WHERE m.kind = 'plain' AND t.cluster = u.cluster AND t.distance = u.distance) AS as_all,
       (SELECT count(*) FROM kt_models m, gpu_kmeans_transform('kt', m.model, 99, 'id') WHERE m.kind = 'plain') AS past_k;
-- a small pg_gpu.kmeans_gpu_memory: the rows measured in slices of about 2,800, the same results
CREATE TABLE kt_many AS SELECT g AS id, (g % 17) * 0.37 AS x, (g % 11) * 0.5 AS y FROM generate_series(1, 12000) g;
CREATE TABLE kt_whole AS
SELECT t.* FROM kt_models m, gpu_kmeans_transform('kt_many', m.model, id_column => 'id') t WHERE m.kind = 'standard';
SET pg_gpu.kmeans_gpu_memory = 1;
SELECT count(*) AS results, count(*) FILTER (WHERE t.cluster = w.cluster AND t.distance = w.distance) AS as_whole
FROM kt_models m, gpu_kmeans_transform('kt_many', m.model, id_column => 'id') t JOIN kt_whole w USING (id, rank)
WHERE m.kind = 'standard';
RESET pg_gpu.kmeans_gpu_memory;
-- exact ties: a row halfway between two centroids (0 and 4) lists the lower cluster first
CREATE TABLE kt_fit (id int PRIMARY KEY, x float8);
INSERT INTO kt_fit VALUES (1, 4), (2, 4), (3, 0), (4, 0);
CREATE TABLE kt_tie_model AS SELECT model FROM gpu_kmeans_fit('kt_fit', 2, columns => ARRAY['x'], seed => 1);
SELECT model->'centroids' AS centroids FROM kt_tie_model;
CREATE TABLE kt_tie (id int PRIMARY KEY, x float8);
INSERT INTO kt_tie VALUES (1, 2), (2, -1), (3, 5), (4, 2);
SELECT t.* FROM kt_tie_model m, gpu_kmeans_transform('kt_tie', m.model, id_column => 'id') t ORDER BY id, rank;
-- unusable rows come back once, with rank, cluster and distance NULL (and a NOTICE)
CREATE TABLE kt_null (id int PRIMARY KEY, x float8, y float8);
INSERT INTO kt_null VALUES (1, 0, 0), (2, NULL, 1), (3, 'NaN', 2), (4, 5, 5);
SELECT t.id, t.rank, t.cluster, t.distance IS NULL AS no_distance
FROM kt_models m, gpu_kmeans_transform('kt_null', m.model, id_column => 'id') t
WHERE m.kind = 'plain' ORDER BY t.id, t.rank;
-- ids of any type
CREATE TABLE kt_uuid AS SELECT md5(id::text)::uuid AS uid, x, y FROM kt;
SELECT pg_typeof(t.id) AS id_type, count(*) AS results,
       count(*) FILTER (WHERE t.distance = u.distance AND t.cluster = u.cluster) AS as_bigint_ids
FROM kt_models m
CROSS JOIN LATERAL gpu_kmeans_transform('kt_uuid', m.model, NULL::uuid, 2, 'uid') t
JOIN kt k ON md5(k.id::text)::uuid = t.id
JOIN gpu_kmeans_transform('kt', m.model, 2, 'id') u ON u.id = k.id AND u.rank = t.rank
WHERE m.kind = 'standard'
GROUP BY 1;
-- bad arguments
\set VERBOSITY sqlstate
SELECT * FROM kt_models m, gpu_kmeans_transform('kt', m.model, 0, 'id') WHERE m.kind = 'plain';
SELECT * FROM kt_models m, gpu_kmeans_transform('kt', m.model, -3, 'id') WHERE m.kind = 'plain';
SELECT * FROM gpu_kmeans_transform('kt', NULL, 1, 'id');
SELECT * FROM gpu_kmeans_transform(NULL, (SELECT model FROM kt_models WHERE kind = 'plain'));
SELECT * FROM gpu_kmeans_transform('kt', '{"k": 2}'::jsonb);
SELECT * FROM kt_models m, gpu_kmeans_transform('kt_tie', m.model, 1, 'id') WHERE m.kind = 'plain';
SELECT * FROM kt_models m, gpu_kmeans_transform('kt', m.model, 1, 'nope') WHERE m.kind = 'plain';
\set VERBOSITY default
SELECT * FROM kt_models m, gpu_kmeans_transform('kt', m.model, 0, 'id') WHERE m.kind = 'plain';
DROP TABLE kt, kt_models, kt_many, kt_whole, kt_fit, kt_tie, kt_tie_model, kt_null, kt_uuid;
