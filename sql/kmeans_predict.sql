-- gpu_kmeans_predict against gpu_kmeans_apply where the arithmetic needs the
-- power-of-two scale every other path applies, the silhouette of
-- gpu_kmeans_choose_k at any magnitude, cosine on subnormal vectors, the
-- predict cache (models changing within a query, in a trigger), and models
-- that round-trip exactly.
SET extra_float_digits = 0;
CREATE TABLE kp (id int PRIMARY KEY, x float8, y float8);
INSERT INTO kp SELECT g, CASE WHEN g <= 10 THEN 0 ELSE 3 END + (g % 3) * 0.7, (g % 5) * 0.6 FROM generate_series(1, 20) g;
CREATE TABLE kp_big AS SELECT id, x * 2::float8^530 AS x, y * 2::float8^530 AS y FROM kp;
CREATE TABLE kp_small AS SELECT id, x * 2::float8^(-560) AS x, y * 2::float8^(-560) AS y FROM kp;
CREATE TABLE kp_models AS
SELECT t, (gpu_kmeans_fit(t::regclass, 2, columns => ARRAY['x', 'y'], seed => 0)).model
FROM unnest(ARRAY['kp', 'kp_big', 'kp_small']) t;
-- predict equals apply on every row, at every scale, and the partition is the unscaled one
CREATE VIEW kp_rows AS
SELECT 'kp' AS t, * FROM kp UNION ALL SELECT 'kp_big', * FROM kp_big UNION ALL SELECT 'kp_small', * FROM kp_small;
SELECT m.t, count(*) AS rows,
       count(*) FILTER (WHERE gpu_kmeans_predict(m.model, r) = a.cluster) AS predict_equals_apply,
       count(*) FILTER (WHERE a.cluster = u.cluster) AS as_unscaled
FROM kp_models m
CROSS JOIN LATERAL gpu_kmeans_apply(m.t::regclass, m.model, 'id') a
JOIN kp_rows r ON r.t = m.t AND r.id = a.id
JOIN gpu_kmeans_apply('kp', (SELECT model FROM kp_models WHERE t = 'kp'), 'id') u ON u.id = a.id
GROUP BY m.t ORDER BY m.t;
-- arrays and a model applied to rows of another scale (the row's own scale is taken)
SELECT gpu_kmeans_predict(model, ARRAY[0, 0]) AS near_0, gpu_kmeans_predict(model, ARRAY[4, 1]) AS near_4,
       gpu_kmeans_predict(model, ARRAY[0, 0]::float8[]) AS zero
FROM kp_models WHERE t = 'kp';
SELECT gpu_kmeans_predict(model, ARRAY[0.1 * 2::float8^530, 0]) AS near_0,
       gpu_kmeans_predict(model, ARRAY[4 * 2::float8^530, 2::float8^530]) AS near_4
FROM kp_models WHERE t = 'kp_big';
SELECT gpu_kmeans_predict(model, ARRAY[0.1 * 2::float8^(-560), 0]) AS near_0,
       gpu_kmeans_predict(model, ARRAY[4 * 2::float8^(-560), 2::float8^(-560)]) AS near_4
FROM kp_models WHERE t = 'kp_small';
-- a row and centroids no scale can hold at once: 22003, as apply
\set VERBOSITY sqlstate
SELECT gpu_kmeans_predict(model, ARRAY[1e-300, 0]) FROM kp_models WHERE t = 'kp_big';
\set VERBOSITY default
-- choose_k's silhouette is the unscaled one at 2^530 and 2^(-560)
SELECT t, c.k, c.silhouette = u.silhouette AS same_silhouette,
       round(u.silhouette::numeric, 4) AS silhouette
FROM unnest(ARRAY['kp_big', 'kp_small']) t
CROSS JOIN LATERAL gpu_kmeans_choose_k(t::regclass, ARRAY[2, 3], columns => ARRAY['x', 'y']) c
JOIN gpu_kmeans_choose_k('kp', ARRAY[2, 3], columns => ARRAY['x', 'y']) u USING (k)
ORDER BY t, c.k;

-- cosine on vectors below double's normal range (5e-324 is the least double):
-- finite centroids, the right clusters, a model apply and predict accept
CREATE TABLE kp_sub (id int PRIMARY KEY, v float8[]);
INSERT INTO kp_sub VALUES (1, ARRAY[5e-324, 0]), (2, ARRAY[1e-310, 1e-320]), (3, ARRAY[3, 0.001]),
                          (4, ARRAY[0, 5e-324]), (5, ARRAY[1e-320, 2e-310]), (6, ARRAY[0.002, 7]);
CREATE TABLE kp_sub_fit AS
SELECT * FROM gpu_kmeans_fit('kp_sub', 2, columns => ARRAY['v'], metric => 'cosine',
                             init_centroids => ARRAY[[1, 0], [0, 1]]);
SELECT sizes, inertia < 1e-5 AS small_inertia, iterations,
       (SELECT bool_and(c::text NOT IN ('NaN', 'Infinity', '-Infinity')) FROM unnest(centroids) c) AS finite_centroids,
       round(centroids[1][1]::numeric, 6) AS c11, round(centroids[2][2]::numeric, 6) AS c22
FROM kp_sub_fit;
SELECT a.id, a.cluster, a.distance < 1e-5 AS near, gpu_kmeans_predict(f.model, s.v) AS predicted,
       p.cluster AS applied, p.distance < 1e-5 AS applied_near
FROM kp_sub_fit f
CROSS JOIN LATERAL gpu_kmeans_assign('kp_sub', f.centroids, columns => ARRAY['v'], metric => 'cosine') a
JOIN kp_sub s USING (id)
JOIN gpu_kmeans_apply('kp_sub', f.model) p USING (id)
ORDER BY a.id;

-- the predict cache: a model stored out of line (toasted) and changed
-- between statements is never taken for the last one (a trigger gets a
-- fresh fn_extra each statement; the backend keeps parsed models)
CREATE TABLE kp_vec (id int PRIMARY KEY, v float8[]);
INSERT INTO kp_vec SELECT g, array(SELECT (g % 2) * 10 + sin(g * j) FROM generate_series(1, 300) j)
FROM generate_series(1, 40) g;
CREATE TABLE kp_store (name text PRIMARY KEY, model jsonb);
ALTER TABLE kp_store ALTER COLUMN model SET STORAGE EXTERNAL;
CREATE TABLE kp_c AS SELECT centroids, model FROM gpu_kmeans_fit('kp_vec', 2, columns => ARRAY['v'], seed => 0);
INSERT INTO kp_store SELECT 'm', model FROM kp_c;
SELECT pg_column_size(model) > 8000 AS out_of_line FROM kp_store;
CREATE TABLE kp_in (id int, v float8[], cluster int);
CREATE FUNCTION kp_label() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.cluster := gpu_kmeans_predict((SELECT model FROM kp_store WHERE name = 'm'), NEW.v);
  RETURN NEW;
END $$;
CREATE TRIGGER kp_label BEFORE INSERT ON kp_in FOR EACH ROW EXECUTE FUNCTION kp_label();
INSERT INTO kp_in SELECT id, v FROM kp_vec WHERE id IN (1, 2);
INSERT INTO kp_in SELECT id, v FROM kp_vec WHERE id IN (3, 4);
-- the same model with its clusters numbered the other way
UPDATE kp_store SET model = (SELECT f.model FROM kp_c, gpu_kmeans_fit('kp_vec', 2, columns => ARRAY['v'],
    init_centroids => array_cat(centroids[2:2][:], centroids[1:1][:])) f);
VACUUM kp_store;
INSERT INTO kp_in SELECT id, v FROM kp_vec WHERE id IN (1, 2);
INSERT INTO kp_in SELECT id, v FROM kp_vec WHERE id IN (3, 4);
SELECT id, array_agg(cluster ORDER BY ctid) AS clusters FROM kp_in GROUP BY id ORDER BY id;
-- within one query: rows of two models interleaved, each by its own
INSERT INTO kp_store SELECT 'n', model FROM gpu_kmeans_fit('kp_vec', 2, columns => ARRAY['v'], seed => 0);
SELECT s.name, count(*) AS rows, count(*) FILTER (WHERE gpu_kmeans_predict(s.model, v.v) = a.cluster) AS as_apply
FROM kp_vec v CROSS JOIN kp_store s
JOIN LATERAL gpu_kmeans_apply('kp_vec', s.model) a ON a.id = v.id
GROUP BY s.name ORDER BY s.name;

-- a model of 300,000 values round-trips exactly: its centroids are the
-- fit's, bit for bit, and applied to its rows it gives the fit's clusters
CREATE TABLE kp_wide (id int PRIMARY KEY, v float8[]);
INSERT INTO kp_wide SELECT g, array(SELECT sin(g * 1.7 + j * 0.37) * 1e-3 * g FROM generate_series(1, 15000) j)
FROM generate_series(1, 40) g;
CREATE TABLE kp_wide_fit AS
SELECT * FROM gpu_kmeans_fit('kp_wide', 20, columns => ARRAY['v'], seed => 1, memberships => true);
SELECT (SELECT count(*) FROM kp_wide_fit f, jsonb_array_elements(f.model->'centroids') WITH ORDINALITY r(row, i),
               jsonb_array_elements_text(r.row) WITH ORDINALITY e(v, j), unnest(f.centroids) WITH ORDINALITY c(c, n)
        WHERE n = (i - 1) * 15000 + j AND e.v::float8 = c.c) AS same_values,
       (SELECT count(*) FROM kp_wide_fit f, unnest(f.ids, f.clusters) m(id, cluster)
        JOIN gpu_kmeans_apply('kp_wide', f.model) a USING (id) WHERE a.cluster = m.cluster) AS same_clusters;

-- messages name the value gpu_kmeans_predict was given
SELECT gpu_kmeans_predict(model, ARRAY[[1, 2], [3, 4]]::float8[]) FROM kp_store WHERE name = 'm';
SELECT gpu_kmeans_predict(s.model, r) FROM kp_store s, (SELECT 1 AS id, ARRAY[[1, 2]]::float8[] AS v) r WHERE s.name = 'm';
SELECT gpu_kmeans_predict(s.model, r) FROM kp_store s, (SELECT 1 AS id, ARRAY[1, 2]::float8[] AS v) r WHERE s.name = 'm';

-- a model past jsonb's limit of 256 MB (about 13 million values; 6.5
-- million centroids' values with scale 'standard', kept twice) is said
-- before the fit, which then returns its model NULL (here the fit itself
-- stops at once: 2 rows for k = 1000)
CREATE TABLE kp_huge (id int PRIMARY KEY, v real[]);
INSERT INTO kp_huge SELECT g, array_fill(g::real, ARRAY[16000]) FROM generate_series(1, 2) g;
SELECT model FROM gpu_kmeans_fit('kp_huge', 1000, columns => ARRAY['v']);
\set VERBOSITY terse
SELECT model FROM gpu_kmeans_fit('kp_huge', 500, columns => ARRAY['v'], scale => 'standard');
SELECT model FROM gpu_kmeans_choose_k('kp_huge', ARRAY[2, 1000], columns => ARRAY['v']);
-- within the limit: no NOTICE (k = 700: 11.2 million values)
SELECT model FROM gpu_kmeans_fit('kp_huge', 700, columns => ARRAY['v']);
\set VERBOSITY default

DROP TABLE kp, kp_big, kp_small, kp_models, kp_sub, kp_sub_fit, kp_vec, kp_store, kp_in, kp_c, kp_wide, kp_wide_fit, kp_huge CASCADE;
DROP FUNCTION kp_label();
