-- Ids of any type: the keyed overloads (id_type => NULL::<type>) return the
-- id column's values in a column of its type, the same clusters as the
-- bigint ids of an integer key, on every path (a fit's labels, a sample's
-- labelling, assign and apply by chunks, memberships, the parallel read).
SET extra_float_digits = 0;
CREATE TABLE kk_int (id bigint PRIMARY KEY, x float8, y float8, e real[]);
INSERT INTO kk_int
SELECT g, (g % 3) * 10 + (g % 7) * 0.1, (g % 5) * 0.2,
       ARRAY[(g % 3) * 10 + (g % 7) * 0.1, (g % 5) * 0.2, g % 2]::real[]
FROM generate_series(1, 3000) g;
UPDATE kk_int SET x = NULL WHERE id % 500 = 0;
-- the same rows under other keys: uuid, text (long ones: a part holds few),
-- numeric, date (a type passed by value), and a composite through a view
CREATE TABLE kk_uuid (id uuid PRIMARY KEY, x float8, y float8, e real[]);
INSERT INTO kk_uuid SELECT md5(id::text)::uuid, x, y, e FROM kk_int;
CREATE TABLE kk_text (doc text PRIMARY KEY, x float8, y float8, e real[]);
INSERT INTO kk_text SELECT repeat('d', (id % 4)::int * 900) || id, x, y, e FROM kk_int;
CREATE TABLE kk_num (id numeric PRIMARY KEY, x float8, y float8);
INSERT INTO kk_num SELECT id + 0.5, x, y FROM kk_int;
CREATE TABLE kk_date (day date PRIMARY KEY, x float8, y float8);
INSERT INTO kk_date SELECT date '2000-01-01' + id::int, x, y FROM kk_int;
CREATE TYPE kk_pair AS (a int, b text);
CREATE VIEW kk_view AS SELECT ROW(id::int, 'p' || id)::kk_pair AS key, x, y FROM kk_int;
-- the reference: bigint ids of the integer key
CREATE TEMP TABLE kk_ref AS SELECT * FROM gpu_kmeans('kk_int', 3, columns => ARRAY['x', 'y'], seed => 1);
-- each key type: its type, and the same clusters row for row (joined back without a cast)
SELECT 'uuid' AS key, count(*) AS rows,
       count(*) FILTER (WHERE k.cluster IS NOT DISTINCT FROM r.cluster) AS same
FROM gpu_kmeans('kk_uuid', 3, id_type => NULL::uuid, columns => ARRAY['x', 'y'], seed => 1) k
JOIN kk_uuid u ON u.id = k.id JOIN kk_ref r ON md5(r.id::text)::uuid = u.id
UNION ALL
SELECT 'text', count(*), count(*) FILTER (WHERE k.cluster IS NOT DISTINCT FROM r.cluster)
FROM gpu_kmeans('kk_text', 3, id_type => NULL::text, columns => ARRAY['x', 'y'], seed => 1) k
JOIN kk_text t ON t.doc = k.id JOIN kk_ref r ON repeat('d', (r.id % 4)::int * 900) || r.id = t.doc
UNION ALL
SELECT 'numeric', count(*), count(*) FILTER (WHERE k.cluster IS NOT DISTINCT FROM r.cluster)
FROM gpu_kmeans('kk_num', 3, id_type => NULL::numeric, seed => 1) k
JOIN kk_num n ON n.id = k.id JOIN kk_ref r ON r.id + 0.5 = n.id
UNION ALL
SELECT 'date', count(*), count(*) FILTER (WHERE k.cluster IS NOT DISTINCT FROM r.cluster)
FROM gpu_kmeans('kk_date', 3, id_type => NULL::date, seed => 1) k
JOIN kk_date d ON d.day = k.id JOIN kk_ref r ON date '2000-01-01' + r.id::int = d.day
UNION ALL
SELECT 'composite', count(*), count(*) FILTER (WHERE k.cluster IS NOT DISTINCT FROM r.cluster)
FROM gpu_kmeans('kk_view', 3, id_type => NULL::kk_pair, id_column => 'key', seed => 1) k
JOIN kk_ref r ON (k.id).a = r.id AND (k.id).b = 'p' || r.id;
SELECT pg_typeof(id) FROM gpu_kmeans('kk_uuid', 3, id_type => NULL::uuid, columns => ARRAY['x', 'y']) LIMIT 1;
SELECT pg_typeof(id) FROM gpu_kmeans('kk_view', 3, NULL::kk_pair, id_column => 'key') LIMIT 1;
-- the unusable rows come back with their keys
SELECT k.id, k.cluster FROM gpu_kmeans('kk_text', 3, id_type => NULL::text, columns => ARRAY['x', 'y']) k
WHERE k.cluster IS NULL AND length(k.id) < 10 ORDER BY k.id;
-- an integer key asked for as its own type: integer ids, not bigint
SELECT pg_typeof(id), count(*) FROM gpu_kmeans('kk_int', 3, id_type => NULL::bigint, columns => ARRAY['x', 'y'])
GROUP BY 1;
-- a sample's labelling (a chunk at a time), assign and apply, memberships: the same as with bigint ids
CREATE TEMP TABLE kk_fit AS SELECT * FROM gpu_kmeans_fit('kk_int', 3, columns => ARRAY['x', 'y'], seed => 1, memberships => true);
SELECT count(*) AS rows, count(*) FILTER (WHERE s.cluster IS NOT DISTINCT FROM r.cluster) AS same
FROM gpu_kmeans('kk_text', 3, id_type => NULL::text, columns => ARRAY['x', 'y'], seed => 1, sample => 100000) s
JOIN kk_text t ON t.doc = s.id JOIN kk_ref r ON repeat('d', (r.id % 4)::int * 900) || r.id = t.doc;
SELECT count(*) AS rows, count(*) FILTER (WHERE a.cluster IS NOT DISTINCT FROM r.cluster) AS same,
       count(*) FILTER (WHERE a.distance IS NOT DISTINCT FROM b.distance) AS same_distance
FROM kk_fit f, gpu_kmeans_assign('kk_uuid', f.centroids, id_type => NULL::uuid, columns => ARRAY['x', 'y']) a
JOIN kk_ref r ON md5(r.id::text)::uuid = a.id
JOIN gpu_kmeans_assign('kk_int', (SELECT centroids FROM kk_fit), columns => ARRAY['x', 'y']) b ON b.id = r.id;
SELECT count(*) AS rows, count(*) FILTER (WHERE a.cluster IS NOT DISTINCT FROM r.cluster) AS same
FROM kk_fit f, gpu_kmeans_apply('kk_text', f.model, id_type => NULL::text) a
JOIN kk_ref r ON repeat('d', (r.id % 4)::int * 900) || r.id = a.id;
SELECT pg_typeof(k.ids) AS ids_type, cardinality(k.ids) AS ids,
       (SELECT array_agg(md5(i::text)::uuid ORDER BY o) FROM unnest(f.ids) WITH ORDINALITY x(i, o)) = k.ids AS same_ids,
       f.clusters = k.clusters AS same_clusters
FROM kk_fit f, gpu_kmeans_fit('kk_uuid', 3, NULL::uuid, columns => ARRAY['x', 'y'], seed => 1, memberships => true) k;
SELECT count(*) AS ids, count(*) FILTER (WHERE m.cluster IS NOT DISTINCT FROM r.cluster) AS same
FROM gpu_kmeans_fit('kk_text', 3, NULL::text, columns => ARRAY['x', 'y'], seed => 1,
                    memberships => true, sample => 100000) k,
     unnest(k.ids, k.clusters) m(id, cluster)
JOIN kk_ref r ON repeat('d', (r.id % 4)::int * 900) || r.id = m.id;
-- the parallel read: long text keys and vectors through the workers' parts
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SET pg_gpu.gpus = '0';
SELECT count(*) AS rows, count(*) FILTER (WHERE k.cluster IS NOT DISTINCT FROM r.cluster) AS same
FROM gpu_kmeans('kk_text', 3, id_type => NULL::text, columns => ARRAY['e'], seed => 1) k
JOIN kk_text t ON t.doc = k.id
JOIN gpu_kmeans('kk_int', 3, columns => ARRAY['e'], seed => 1) r ON repeat('d', (r.id % 4)::int * 900) || r.id = t.doc;
RESET max_parallel_workers_per_gather;
RESET min_parallel_table_scan_size;
RESET pg_gpu.gpus;
-- the old overloads are found as before: a text in third place is id_column (so
-- id_type => is best passed by name)
SELECT pg_typeof(id), count(*) FROM gpu_kmeans_apply('kk_int', (SELECT model FROM kk_fit), 'id') GROUP BY 1;
SELECT pg_typeof(id), count(*) FROM gpu_kmeans_apply('kk_int', (SELECT model FROM kk_fit), NULL::text) GROUP BY 1;
-- errors: a key that is not an integer without id_type (the hint says what to pass),
-- an id_type that is not the key's, a type without equality, a NULL key, a pseudo-type
SELECT * FROM gpu_kmeans('kk_uuid', 3, columns => ARRAY['x', 'y']);
SELECT * FROM gpu_kmeans('kk_text', 3, id_column => 'doc', columns => ARRAY['x', 'y']);
SELECT * FROM gpu_kmeans('kk_uuid', 3, id_type => NULL::text, columns => ARRAY['x', 'y']);
SELECT * FROM gpu_kmeans_assign('kk_int', ARRAY[[0, 0]]::float8[], id_type => NULL::integer, columns => ARRAY['x', 'y']);
SELECT * FROM gpu_kmeans('kk_int', 3, id_type => NULL::point, columns => ARRAY['x', 'y']);
CREATE VIEW kk_nullkey AS SELECT CASE WHEN id = 7 THEN NULL ELSE md5(id::text)::uuid END AS key, x, y FROM kk_int;
SELECT * FROM gpu_kmeans('kk_nullkey', 3, id_type => NULL::uuid, id_column => 'key');
SELECT * FROM gpu_kmeans('kk_int', 3, id_type => ROW(1, 2), columns => ARRAY['x', 'y']);
-- a fit without memberships needs no id: a date primary key is no error
SELECT array_length(centroids, 2) AS d FROM gpu_kmeans_fit('kk_date', 3, seed => 1);
DROP VIEW kk_nullkey, kk_view;
DROP TYPE kk_pair;
DROP TABLE kk_int, kk_uuid, kk_text, kk_num, kk_date;
