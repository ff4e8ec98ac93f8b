-- tests/demo/analyst.sql - an analyst's session (docs/models.md's): fit with
-- scaling and several starts, store the model, apply it to new rows by
-- column name, one row at a time in a trigger, and pick k.  Creates what it
-- uses; psql -f tests/demo/analyst.sql in a database with pg_gpu.
\set ECHO queries
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_gpu;
DROP TABLE IF EXISTS shoppers, new_shoppers, segment_models CASCADE;
RESET client_min_messages;

-- 10,000 shoppers: two spending groups (about 100 and 300 a week), incomes
-- around 100,000 (standard deviation 30,000) in both
SELECT setseed(0.42) \gset
CREATE TABLE shoppers (id bigint PRIMARY KEY, income float8, weekly_spend float8);
INSERT INTO shoppers
SELECT i, round(100000 + 30000 * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random())),
       CASE WHEN i % 2 = 0 THEN 100 ELSE 300 END + round(10 * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()))
FROM generate_series(1, 10000) i;

-- unscaled, income's range decides the split; scaled (and the best of 10
-- starts) the two spending groups come out
SELECT cluster, count(*), round(avg(weekly_spend)) AS spend
FROM gpu_kmeans('shoppers', 2, columns => ARRAY['income', 'weekly_spend'])
JOIN shoppers USING (id) GROUP BY cluster ORDER BY cluster;
SELECT cluster, count(*), round(avg(weekly_spend)) AS spend
FROM gpu_kmeans('shoppers', 2, columns => ARRAY['income', 'weekly_spend'], scale => 'standard', n_init => 10)
JOIN shoppers USING (id) GROUP BY cluster ORDER BY cluster;

-- keep the model: a jsonb value, in any table; centroids in the columns' units
CREATE TABLE segment_models AS
SELECT 'spending' AS name, now() AS fitted, model
FROM gpu_kmeans_fit('shoppers', 2, columns => ARRAY['income', 'weekly_spend'], scale => 'standard', n_init => 10);
SELECT name, model->'columns' AS columns, model->>'scale' AS scale, model->'centroids' AS centroids,
       model->'sizes' AS sizes
FROM segment_models;

-- new rows, assigned by the model's column names (whatever their order here)
CREATE TABLE new_shoppers (weekly_spend float8, income float8, id bigint PRIMARY KEY, segment int);
INSERT INTO new_shoppers VALUES (95, 180000, 1, NULL), (310, 30000, 2, NULL);
SELECT * FROM gpu_kmeans_apply('new_shoppers', (SELECT model FROM segment_models WHERE name = 'spending'));

-- one row at a time, on the CPU: a trigger gives every new shopper a segment
CREATE FUNCTION set_segment() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.segment := gpu_kmeans_predict((SELECT model FROM segment_models WHERE name = 'spending'), NEW);
  RETURN NEW;
END $$;
CREATE TRIGGER set_segment BEFORE INSERT OR UPDATE ON new_shoppers FOR EACH ROW EXECUTE FUNCTION set_segment();
INSERT INTO new_shoppers (id, income, weekly_spend) VALUES (3, 50000, 290), (4, 150000, 105) RETURNING *;

-- which k? one read of the table, a fit per k: inertia (the elbow) and the
-- silhouette of a sample (higher is better), each with its model
SELECT k, round(inertia) AS inertia, round(silhouette::numeric, 3) AS silhouette
FROM gpu_kmeans_choose_k('shoppers', ARRAY[2, 3, 4, 5, 6], columns => ARRAY['income', 'weekly_spend'],
                         scale => 'standard', n_init => 3);
