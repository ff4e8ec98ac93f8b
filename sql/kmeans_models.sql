-- Models: scaling, several starts, a stored model applied by column name
-- (gpu_kmeans_apply) and row by row (gpu_kmeans_predict), memberships in
-- the same call, choosing k.  The trap cases of issue 27 first.
CREATE FUNCTION try_model(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE q;
  RETURN 'ok';
EXCEPTION WHEN others THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- shoppers: two spending groups (100 and 300 a week, odd and even ids);
-- incomes spread from 20,000 to 200,000 whatever the group
CREATE TABLE shoppers (id int PRIMARY KEY, income float8, spend float8);
INSERT INTO shoppers
SELECT i, 20000 + (i * 7919) % 180000, CASE WHEN i % 2 = 0 THEN 100 ELSE 300 END + i % 13
FROM generate_series(1, 1000) i;

-- unscaled, income's range decides: each cluster about half of each group
SELECT cluster, count(*) AS rows, count(*) FILTER (WHERE id % 2 = 0) AS even_spenders
FROM gpu_kmeans('shoppers', 2, columns => ARRAY['income', 'spend']) GROUP BY 1 ORDER BY 1;
-- standardized, the best of 5 starts: the two groups exactly
SELECT cluster, count(*) AS rows, count(*) FILTER (WHERE id % 2 = 0) AS even_spenders
FROM gpu_kmeans('shoppers', 2, columns => ARRAY['income', 'spend'], scale => 'standard', n_init => 5)
GROUP BY 1 ORDER BY 1;
-- greedy k-means++ finds the spending split from one start (plain k-means++ landed in the
-- income split, a worse local minimum); 5 starts are never worse
SELECT round(one.inertia::numeric, 3) AS one_start, round(five.inertia::numeric, 3) AS five_starts,
       five.inertia <= one.inertia AS never_worse
FROM gpu_kmeans_fit('shoppers', 2, columns => ARRAY['income', 'spend'], scale => 'standard') one,
     gpu_kmeans_fit('shoppers', 2, columns => ARRAY['income', 'spend'], scale => 'standard', n_init => 5) five;

-- the model: the scaling is the columns' mean and population deviation,
-- the centroids are in the columns' units (the means of their rows)
CREATE TABLE models AS
SELECT 'spending' AS name, f.* FROM gpu_kmeans_fit('shoppers', 2, columns => ARRAY['income', 'spend'],
                                                  scale => 'standard', n_init => 5) f;
SELECT model->>'kind' AS kind, model->'version' AS version, model->'columns' AS columns,
       model->'column_types' AS types, model->>'input' AS input, model->>'metric' AS metric,
       model->>'scale' AS scale, model->'k' AS k, model->'dims' AS dims, model->'n_init' AS n_init,
       model->>'relation' AS relation, model->'rows' AS rows, model->'sizes' AS sizes,
       model->'converged' AS converged, (model->>'inertia')::float8 = inertia AS inertia_same
FROM models;
SELECT abs((m.model->'mean'->>0)::float8 - s.mi) < 1e-9 * abs(s.mi) AS income_mean,
       abs((m.model->'mean'->>1)::float8 - s.ms) < 1e-9 * abs(s.ms) AS spend_mean,
       abs((m.model->'std'->>0)::float8 - s.si) < 1e-9 * s.si AS income_std,
       abs((m.model->'std'->>1)::float8 - s.ss) < 1e-9 * s.ss AS spend_std
FROM models m, (SELECT avg(income) mi, avg(spend) ms, stddev_pop(income) si, stddev_pop(spend) ss FROM shoppers) s;
WITH c AS (SELECT cluster, avg(income) AS income, avg(spend) AS spend
           FROM gpu_kmeans('shoppers', 2, columns => ARRAY['income', 'spend'], scale => 'standard', n_init => 5)
           JOIN shoppers USING (id) GROUP BY cluster)
SELECT c.cluster, abs(m.centroids[c.cluster][1] - c.income) < 1e-9 * c.income AS income_is_mean,
       abs(m.centroids[c.cluster][2] - c.spend) < 1e-9 * c.spend AS spend_is_mean,
       m.model->'centroids'->(c.cluster - 1)->>0 = m.centroids[c.cluster][1]::text AS model_same
FROM c, models m ORDER BY 1;

-- memberships => true: the model and every row's cluster from one fit
SELECT cardinality(ids) AS ids, (SELECT count(*) FROM unnest(ids, clusters) u(id, cluster)
                                 JOIN gpu_kmeans('shoppers', 2, columns => ARRAY['income', 'spend'],
                                                 scale => 'standard', n_init => 5) g USING (id)
                                 WHERE u.cluster = g.cluster) AS same_as_gpu_kmeans,
       model = (SELECT model FROM models) AS same_model
FROM gpu_kmeans_fit('shoppers', 2, columns => ARRAY['income', 'spend'], scale => 'standard', n_init => 5,
                    memberships => true);
SELECT ids IS NULL AND clusters IS NULL AS not_asked FROM gpu_kmeans_fit('shoppers', 2, columns => ARRAY['income', 'spend']);

-- applied by the model's column names: the fit's clusters, on the table and
-- on a view of the columns in another order (the trap: applying centroids
-- by position put every row in one cluster)
CREATE VIEW shoppers_swapped AS SELECT spend, id, income FROM shoppers;
SELECT count(*) AS rows, count(*) FILTER (WHERE a.cluster = g.cluster) AS same_cluster,
       count(*) FILTER (WHERE v.cluster = g.cluster) AS same_on_swapped_view
FROM gpu_kmeans('shoppers', 2, columns => ARRAY['income', 'spend'], scale => 'standard', n_init => 5) g
JOIN gpu_kmeans_apply('shoppers', (SELECT model FROM models)) a USING (id)
JOIN gpu_kmeans_apply('shoppers_swapped', (SELECT model FROM models), id_column => 'id') v USING (id);
-- distances are in the scaled space: the inertia again
SELECT abs(sum(distance * distance) - (SELECT inertia FROM models)) < 1e-9 * (SELECT inertia FROM models) AS distances_scaled
FROM gpu_kmeans_apply('shoppers', (SELECT model FROM models));
-- new rows (a NULL: no cluster)
CREATE TABLE new_shoppers (id int PRIMARY KEY, income float8, spend float8);
INSERT INTO new_shoppers VALUES (1, 150000, 105), (2, 150000, 290), (3, 25000, 310), (4, NULL, 100);
SELECT id, cluster FROM gpu_kmeans_apply('new_shoppers', (SELECT model FROM models)) ORDER BY id;

-- one row at a time: gpu_kmeans_predict, by the row or by an array of its
-- values in the model's column order; NULL where a value is missing
SELECT count(*) AS rows, count(*) FILTER (WHERE gpu_kmeans_predict(m.model, s) = a.cluster) AS same_as_apply
FROM shoppers s JOIN gpu_kmeans_apply('shoppers', (SELECT model FROM models)) a USING (id), models m;
SELECT n.id, gpu_kmeans_predict(m.model, n) AS by_row,
       gpu_kmeans_predict(m.model, ARRAY[n.income, n.spend]) AS by_array
FROM new_shoppers n, models m ORDER BY n.id;
-- parallel safe: in parallel workers too
SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
                       THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END, 'on', false) AS parallel_forced;
SELECT count(*) FILTER (WHERE gpu_kmeans_predict((SELECT model FROM models), s) = 1) AS cluster_1
FROM shoppers s;
RESET parallel_setup_cost; RESET parallel_tuple_cost; RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
                       THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END, 'off', false) AS parallel_forced;
-- in a trigger: every new row gets its cluster
ALTER TABLE new_shoppers ADD COLUMN cluster int;
CREATE FUNCTION new_shopper_cluster() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.cluster := gpu_kmeans_predict((SELECT model FROM models WHERE name = 'spending'), NEW);
  RETURN NEW;
END $$;
CREATE TRIGGER new_shopper_cluster BEFORE INSERT OR UPDATE ON new_shoppers
FOR EACH ROW EXECUTE FUNCTION new_shopper_cluster();
INSERT INTO new_shoppers (id, income, spend) VALUES (5, 90000, 99), (6, 90000, 301);
UPDATE new_shoppers SET spend = spend WHERE id <= 4;
SELECT n.id, n.cluster, n.cluster IS NOT DISTINCT FROM a.cluster AS as_apply
FROM new_shoppers n LEFT JOIN gpu_kmeans_apply('new_shoppers', (SELECT model FROM models)) a USING (id) ORDER BY n.id;

-- a vector model: cosine, applied to arrays
CREATE TABLE docs (id int PRIMARY KEY, emb real[]);
INSERT INTO docs SELECT i, CASE WHEN i % 3 = 0 THEN ARRAY[1, 0.1 * sin(i), 0] WHEN i % 3 = 1 THEN ARRAY[0, 1, 0.1 * cos(i)]
                           ELSE ARRAY[0.1 * sin(i), 0, 1] END::real[] FROM generate_series(1, 90) i;
CREATE TABLE doc_model AS SELECT model FROM gpu_kmeans_fit('docs', 3, columns => ARRAY['emb'], metric => 'cosine', n_init => 3);
SELECT model->>'input' AS input, model->'columns' AS columns, model->'column_types' AS types, model->'dims' AS dims
FROM doc_model;
SELECT count(*) FILTER (WHERE a.cluster = gpu_kmeans_predict(m.model, d)) AS by_row,
       count(*) FILTER (WHERE a.cluster = gpu_kmeans_predict(m.model, d.emb)) AS by_vector,
       count(DISTINCT (a.cluster, d.id % 3)) AS clusters_are_groups
FROM docs d JOIN gpu_kmeans_apply('docs', (SELECT model FROM doc_model)) a USING (id), doc_model m;
SELECT gpu_kmeans_predict(model, ARRAY[0, 0, 0]::real[]) AS zero_vector FROM doc_model;

-- choosing k: 4 separated blobs; with every row sampled the silhouette is
-- the plain definition's (computed in SQL below)
CREATE TABLE blobs (id int PRIMARY KEY, x float8, y float8);
INSERT INTO blobs SELECT i, (i % 4) * 10 + sin(i), (i % 4 / 2) * 10 + cos(i * 1.7) FROM generate_series(1, 80) i;
CREATE TABLE ks AS SELECT * FROM gpu_kmeans_choose_k('blobs', ARRAY[2, 3, 4, 5, 6], ARRAY['x', 'y'], n_init => 3, seed => 1);
SELECT k, inertia < lag(inertia) OVER (ORDER BY k) AS lower_than_before, round(silhouette::numeric, 3) AS silhouette,
       sample_rows, (model->'k')::int = k AS model_k
FROM ks ORDER BY k;
SELECT k AS best_k FROM ks ORDER BY silhouette DESC LIMIT 1;
WITH lab AS (SELECT k, a.id, a.cluster FROM ks, gpu_kmeans_apply('blobs', ks.model) a),
     pts AS (SELECT lab.*, b.x, b.y FROM lab JOIN blobs b USING (id)),
     d AS (SELECT p.k, p.id, p.cluster, q.cluster AS other, avg(sqrt((p.x - q.x) ^ 2 + (p.y - q.y) ^ 2)) AS mean_d,
                  count(*) AS n
           FROM pts p JOIN pts q ON p.k = q.k AND p.id <> q.id GROUP BY 1, 2, 3, 4),
     s AS (SELECT k, id, coalesce(max(mean_d) FILTER (WHERE other = cluster), 0) AS a,
                  min(mean_d) FILTER (WHERE other <> cluster) AS b,
                  bool_or(other = cluster) AS not_alone
           FROM d GROUP BY k, id)
SELECT s.k, abs(avg(CASE WHEN not_alone THEN (b - a) / greatest(a, b) ELSE 0 END) - ks.silhouette) < 1e-12 AS silhouette_by_definition
FROM s JOIN ks USING (k) GROUP BY s.k, ks.silhouette ORDER BY s.k;
-- a sample: about sample_size rows, the same for every k
SELECT count(DISTINCT sample_rows) AS one_sample, min(sample_rows) BETWEEN 20 AND 60 AS about_40
FROM gpu_kmeans_choose_k('blobs', ARRAY[3, 4], ARRAY['x', 'y'], sample_size => 40);
-- one cluster has no silhouette
SELECT k, silhouette FROM gpu_kmeans_choose_k('blobs', ARRAY[1], ARRAY['x', 'y']);

-- errors: clean, with SQLSTATEs
CREATE TABLE shoppers_text (id int PRIMARY KEY, income text, spend float8);
INSERT INTO shoppers_text VALUES (1, 'high', 100);
CREATE TABLE shoppers_half (id int PRIMARY KEY, income float8);
INSERT INTO shoppers_half VALUES (1, 1);
CREATE TABLE emb_scalar (id int PRIMARY KEY, emb float8);
INSERT INTO emb_scalar VALUES (1, 1);
SELECT q, try_model(q) FROM (VALUES
  ($$SELECT * FROM gpu_kmeans('shoppers', 2, scale => 'minmax')$$),
  ($$SELECT * FROM gpu_kmeans('shoppers', 2, scale => NULL)$$),
  ($$SELECT * FROM gpu_kmeans('docs', 2, scale => 'standard', metric => 'cosine')$$),
  ($$SELECT * FROM gpu_kmeans_apply('shoppers_half', (SELECT model FROM models))$$),
  ($$SELECT * FROM gpu_kmeans_apply('shoppers_text', (SELECT model FROM models))$$),
  ($$SELECT * FROM gpu_kmeans_apply('docs', (SELECT model FROM models))$$),
  ($$SELECT * FROM gpu_kmeans_apply('shoppers', (SELECT model FROM doc_model))$$),
  ($$SELECT * FROM gpu_kmeans_apply('emb_scalar', (SELECT model FROM doc_model))$$),
  ($$SELECT * FROM gpu_kmeans_apply('shoppers', NULL)$$),
  ($$SELECT * FROM gpu_kmeans_apply('shoppers', '[1, 2]')$$),
  ($$SELECT * FROM gpu_kmeans_apply('shoppers', '{"kind": "something else"}')$$),
  ($$SELECT * FROM gpu_kmeans_apply('shoppers', (SELECT model - 'centroids' FROM models))$$),
  ($$SELECT * FROM gpu_kmeans_apply('shoppers', (SELECT jsonb_set(model, '{version}', '2') FROM models))$$),
  ($$SELECT * FROM gpu_kmeans_apply('shoppers', (SELECT jsonb_set(model, '{std,0}', '0') FROM models))$$),
  ($$SELECT * FROM gpu_kmeans_apply('shoppers', (SELECT jsonb_set(model, '{centroids,0}', '[1]') FROM models))$$),
  ($$SELECT gpu_kmeans_predict(model, ARRAY[1, 2, 3]) FROM models$$),
  ($$SELECT gpu_kmeans_predict(model, ARRAY[[1, 2]]) FROM models$$),
  ($$SELECT gpu_kmeans_predict(model, 'text'::text) FROM models$$),
  ($$SELECT gpu_kmeans_predict(model, ROW(1, 2)) FROM models$$),
  ($$SELECT gpu_kmeans_predict(model, s) FROM models, shoppers_text s$$),
  ($$SELECT gpu_kmeans_predict(model, ARRAY[1, 2]::real[]) FROM doc_model$$),
  ($$SELECT * FROM gpu_kmeans_choose_k('blobs', ARRAY[]::int[])$$),
  ($$SELECT * FROM gpu_kmeans_choose_k('blobs', ARRAY[2, NULL])$$),
  ($$SELECT * FROM gpu_kmeans_choose_k('blobs', ARRAY[2, 81])$$),
  ($$SELECT * FROM gpu_kmeans_choose_k('blobs', ARRAY[0])$$),
  ($$SELECT * FROM gpu_kmeans_choose_k('blobs', ARRAY[2], sample_size => 1)$$),
  ($$SELECT * FROM gpu_kmeans_choose_k('blobs', ARRAY[[2]])$$)
) t(q);
DROP TABLE shoppers, shoppers_text, shoppers_half, emb_scalar, new_shoppers, models, docs, doc_model, blobs, ks CASCADE;
DROP FUNCTION new_shopper_cluster(), try_model(text);
