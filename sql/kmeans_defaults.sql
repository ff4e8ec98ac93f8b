-- Columns chosen by default are named in a NOTICE, and a relation without
-- usable rows says which columns are at fault, with a hint to pass columns.
CREATE TABLE kd_shop (id int PRIMARY KEY, income float8, spend float8, segment int);
INSERT INTO kd_shop SELECT g, 1000 + g % 50, g % 7, NULL FROM generate_series(1, 200) g;
-- the empty segment column meant for the result makes every row unusable
SELECT sizes FROM gpu_kmeans_fit('kd_shop', 2);
SELECT count(*) FROM gpu_kmeans('kd_shop', 2);
-- the columns named: no notice
SELECT sizes FROM gpu_kmeans_fit('kd_shop', 2, columns => ARRAY['income', 'spend'], seed => 1);
-- memberships written back into the table: the next default call shows it uses them
UPDATE kd_shop s SET segment = k.cluster FROM gpu_kmeans('kd_shop', 2, columns => ARRAY['income', 'spend'], seed => 1) k
WHERE s.id = k.id;
SELECT cardinality(sizes) FROM gpu_kmeans_fit('kd_shop', 2, seed => 1);
-- columns NULL in some rows each, but no row usable
CREATE TABLE kd_holes (a float8, b float8);
INSERT INTO kd_holes VALUES (1, NULL), (NULL, 2), ('NaN', 3), (4, 'Infinity');
SELECT sizes FROM gpu_kmeans_fit('kd_holes', 1);
SELECT sizes FROM gpu_kmeans_fit('kd_holes', 1, columns => ARRAY['b']);
-- an empty relation
CREATE TABLE kd_empty (x float8);
SELECT sizes FROM gpu_kmeans_fit('kd_empty', 1);
-- an embedding beside a score and a year: the default would fit the numbers
-- alone; which is meant is the caller's to say (42702, each choice in the hint)
CREATE TABLE kd_docs (id int PRIMARY KEY, score real, year int, body text, emb real[]);
INSERT INTO kd_docs SELECT g, g % 5, 2000 + g % 20, 'doc ' || g, ARRAY[g % 3, (g % 3) * 2 + g % 2]
FROM generate_series(1, 60) g;
SELECT sizes FROM gpu_kmeans_fit('kd_docs', 3);
SELECT count(*) FROM gpu_kmeans('kd_docs', 3);
SELECT * FROM gpu_kmeans_choose_k('kd_docs', ARRAY[2, 3]);
-- either choice, named, runs
SELECT sizes FROM gpu_kmeans_fit('kd_docs', 3, columns => ARRAY['emb'], seed => 1);
SELECT cardinality(sizes) FROM gpu_kmeans_fit('kd_docs', 3, columns => ARRAY['score', 'year'], seed => 1);
-- two vector columns beside the numbers: both named in the hint
ALTER TABLE kd_docs ADD COLUMN emb2 float8[];
SELECT sizes FROM gpu_kmeans_fit('kd_docs', 3);
-- the vectors alone (the id is no numeric column to fit): today's default and its NOTICE
ALTER TABLE kd_docs DROP COLUMN score, DROP COLUMN year, DROP COLUMN emb2;
SELECT sizes FROM gpu_kmeans_fit('kd_docs', 3, seed => 1);
DROP TABLE kd_shop, kd_holes, kd_empty, kd_docs;
