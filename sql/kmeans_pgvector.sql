-- pgvector's vector and halfvec columns, where pgvector is installed (the
-- test scripts build it from ../shared/vendor); without it the other
-- expected output (kmeans_pgvector_1.out): pg_gpu does not need it.
SELECT count(*) > 0 AS have_pgvector FROM pg_available_extensions WHERE name = 'vector' \gset
\if :have_pgvector
CREATE EXTENSION vector;
CREATE TABLE pv (id int PRIMARY KEY, emb vector(3), h halfvec(3));
INSERT INTO pv
SELECT i, ARRAY[(i % 2) * 10 + sin(i), (i % 2) * -10 + cos(i), 0.5]::vector,
       ARRAY[(i % 2) * 10 + sin(i), (i % 2) * -10 + cos(i), 0.5]::halfvec
FROM generate_series(1, 40) i;
INSERT INTO pv VALUES (41, NULL, NULL);
CREATE VIEW pv_real AS SELECT id, emb::real[] AS emb FROM pv;
CREATE VIEW pv_half AS SELECT id, h::vector::real[] AS emb FROM pv;
-- vector: as its values in a real[]; halfvec: its halves, exactly as float
SELECT (SELECT centroids FROM gpu_kmeans_fit('pv', 2, columns => ARRAY['emb'], seed => 3)) =
       (SELECT centroids FROM gpu_kmeans_fit('pv_real', 2, id_column => 'id', seed => 3)) AS vector_same,
       (SELECT centroids FROM gpu_kmeans_fit('pv', 2, columns => ARRAY['h'], seed => 3)) =
       (SELECT centroids FROM gpu_kmeans_fit('pv_half', 2, id_column => 'id', seed => 3)) AS halfvec_same;
-- both are held as float32 (4 bytes a value); as doubles (float8[]) the same
-- values give the same model, bit for bit
CREATE VIEW pv_f8 AS SELECT id, emb::real[]::float8[] AS emb, h::vector::real[]::float8[] AS h FROM pv;
SELECT (SELECT (centroids, inertia, iterations, sizes) FROM gpu_kmeans_fit('pv', 2, columns => ARRAY['emb'], seed => 3)) =
       (SELECT (centroids, inertia, iterations, sizes) FROM gpu_kmeans_fit('pv_f8', 2, columns => ARRAY['emb'], id_column => 'id', seed => 3)) AS vector_float64_same,
       (SELECT (centroids, inertia, iterations, sizes) FROM gpu_kmeans_fit('pv', 2, columns => ARRAY['h'], seed => 3)) =
       (SELECT (centroids, inertia, iterations, sizes) FROM gpu_kmeans_fit('pv_f8', 2, columns => ARRAY['h'], id_column => 'id', seed => 3)) AS halfvec_float64_same;
SELECT cluster, count(*) FROM gpu_kmeans('pv', 2, columns => ARRAY['h'], metric => 'cosine') GROUP BY 1 ORDER BY 1;
SELECT id, cluster, round(distance::numeric, 6) AS distance
FROM gpu_kmeans_assign('pv', ARRAY[[10, -10, 0.5], [0, 0, 1]], columns => ARRAY['emb'])
WHERE id IN (1, 2, 41) ORDER BY id;
-- the two are vector columns: neither is taken by default
SELECT * FROM gpu_kmeans_fit('pv', 2);
-- rows of 8 values and more are widened many at a time (halves by the
-- CPU's F16C where it has it, on the CPU backend): the halves of a
-- halfvec(16) column, subnormal ones among them, give the model their
-- values give as real[] and float8[]
CREATE TABLE pv16 AS
SELECT i AS id,
       CASE WHEN i % 97 = 0 THEN NULL
            ELSE array(SELECT CASE j % 4 WHEN 0 THEN ((i % 7) - 3) * 2 ^ -17
                                         WHEN 1 THEN (i % 5) * 1000 + j
                                         WHEN 2 THEN -(i % 3) * 0.125
                                         ELSE (i % 11) * 0.001 END
                       FROM generate_series(1, 16) j)::halfvec END AS h
FROM generate_series(1, 3001) i;
CREATE VIEW pv16_v AS SELECT id, h::vector::real[] AS r, h::vector::real[]::float8[] AS d FROM pv16;
SELECT (SELECT (centroids, inertia, iterations, sizes)::text FROM gpu_kmeans_fit('pv16', 4, columns => ARRAY['h'], seed => 2)) =
       (SELECT (centroids, inertia, iterations, sizes)::text FROM gpu_kmeans_fit('pv16_v', 4, columns => ARRAY['r'], seed => 2)) AS real_same,
       (SELECT (centroids, inertia, iterations, sizes)::text FROM gpu_kmeans_fit('pv16', 4, columns => ARRAY['h'], seed => 2)) =
       (SELECT (centroids, inertia, iterations, sizes)::text FROM gpu_kmeans_fit('pv16_v', 4, columns => ARRAY['d'], seed => 2)) AS float8_same;
SELECT count(*) AS rows, count(*) FILTER (WHERE a.cluster IS NULL) AS skipped,
       count(*) FILTER (WHERE a.cluster IS DISTINCT FROM b.cluster) AS differ
FROM gpu_kmeans('pv16', 4, columns => ARRAY['h'], id_column => 'id', seed => 2) a
FULL JOIN gpu_kmeans('pv16_v', 4, columns => ARRAY['d'], id_column => 'id', seed => 2) b USING (id);
DROP TABLE pv16 CASCADE;
-- halves are held as halves past 32 dimensions (2 bytes a value, on the
-- GPU and the CPU), and pg_gpu.max_memory counts them so: 20000 x (2 x 40 +
-- 12) bytes fit in 2 MB, where floats (4 x 40 + 12) would not
CREATE TABLE ph40 AS SELECT i AS id, array_fill((i % 5)::real, ARRAY[40])::halfvec AS h FROM generate_series(1, 20000) i;
ANALYZE ph40;
SET pg_gpu.max_memory = '1MB';
SELECT sizes FROM gpu_kmeans_fit('ph40', 2, columns => ARRAY['h'], seed => 1);
SET pg_gpu.max_memory = '2MB';
SELECT sizes FROM gpu_kmeans_fit('ph40', 5, columns => ARRAY['h'], seed => 1);
RESET pg_gpu.max_memory;
DROP TABLE ph40;
-- gpu_knn against pgvector's exact ORDER BY ... LIMIT (no index): the same
-- neighbours in the same order for each operator, on rows without near ties
CREATE TABLE kv AS SELECT i AS id, ARRAY[sin(i * 1.1) * 3, cos(i * 0.7) * 2, sin(i * 0.13) + 1, cos(i * 2.3)]::vector(4) AS e
FROM generate_series(1, 500) i;
ALTER TABLE kv ADD PRIMARY KEY (id);
CREATE TABLE kvq AS SELECT id, e FROM kv WHERE id % 50 = 0;
ALTER TABLE kvq ADD PRIMARY KEY (id);
SELECT m.metric, count(*) AS rows,
       count(*) FILTER (WHERE k.base_id = p.id AND abs(k.distance - p.dist) < 1e-5) AS same
FROM unnest(ARRAY['euclidean', 'cosine', 'inner_product']) m(metric)
CROSS JOIN LATERAL gpu_knn('kvq', 'kv', 5, metric => m.metric) k
JOIN kvq q ON q.id = k.query_id
CROSS JOIN LATERAL (SELECT id, dist, row_number() OVER (ORDER BY dist, id) AS rank
                    FROM (SELECT b.id, CASE m.metric WHEN 'euclidean' THEN b.e <-> q.e WHEN 'cosine' THEN b.e <=> q.e
                                                     ELSE b.e <#> q.e END AS dist
                          FROM kv b ORDER BY 2, 1 LIMIT 5) t) p
WHERE p.rank = k.rank
GROUP BY m.metric ORDER BY m.metric;
-- a halfvec base (its halves read as doubles) gives what the same values as real[] give (floats)
CREATE TABLE kvh AS SELECT id, e::halfvec(4) AS h, e::halfvec(4)::vector(4)::real[] AS r FROM kv;
ALTER TABLE kvh ADD PRIMARY KEY (id);
SELECT count(*) AS rows, count(*) FILTER (WHERE a.base_id = b.base_id AND a.distance = b.distance) AS same
FROM gpu_knn('kvq', 'kvh', 5, columns => ARRAY['e'], base_columns => ARRAY['h']) a
JOIN gpu_knn('kvq', 'kvh', 5, columns => ARRAY['e'], base_columns => ARRAY['r']) b USING (query_id, rank);
DROP TABLE kvh;
DROP TABLE kv, kvq;
DROP TABLE pv CASCADE;
DROP EXTENSION vector;
\else
SELECT 'pgvector is not installed' AS skipped;
\endif
