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
DROP TABLE pv CASCADE;
DROP EXTENSION vector;
\else
SELECT 'pgvector is not installed' AS skipped;
\endif
