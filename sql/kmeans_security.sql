-- Reading honours what SELECT honours: table and column privileges and
-- row-level security.  No function is SECURITY DEFINER.
SELECT proname, prosecdef FROM pg_proc WHERE proname LIKE 'gpu\_%' OR proname LIKE 'pg\_gpu\_%' ORDER BY 1;
CREATE ROLE regress_pg_gpu_reader;
CREATE ROLE regress_pg_gpu_colreader;
CREATE TABLE s_pts (id int PRIMARY KEY, x float8, y float8, owner text);
INSERT INTO s_pts SELECT i, i % 2 * 10, i % 2 * 10, CASE WHEN i <= 6 THEN 'alice' ELSE 'bob' END
FROM generate_series(1, 10) i;
SELECT model AS s_model FROM gpu_kmeans_fit('s_pts', 2, columns => ARRAY['x'], seed => 1) \gset

SET ROLE regress_pg_gpu_reader;
SELECT * FROM gpu_kmeans_fit('s_pts', 2);
SELECT * FROM gpu_kmeans_transform('s_pts', :'s_model');
SELECT * FROM gpu_kmeans('s_pts', 2);
-- a sample's read, and the labelling after it, check the same
SELECT * FROM gpu_kmeans_fit('s_pts', 2, sample => 4);
SELECT * FROM gpu_kmeans('s_pts', 2, sample => 4);
RESET ROLE;

-- column privileges: only on the used columns (id included)
GRANT SELECT (id, x) ON s_pts TO regress_pg_gpu_colreader;
SET ROLE regress_pg_gpu_colreader;
SELECT sizes FROM gpu_kmeans_fit('s_pts', 2, columns => ARRAY['x']);
SELECT count(*) FROM gpu_kmeans('s_pts', 2, columns => ARRAY['x']);
SELECT count(*) FROM gpu_kmeans_transform('s_pts', :'s_model', id_column => 'id');
SELECT sizes FROM gpu_kmeans_fit('s_pts', 2);
SELECT * FROM gpu_kmeans('s_pts', 2, columns => ARRAY['y']);
-- a weight column is a used column: its privilege too
SELECT sizes FROM gpu_kmeans_fit('s_pts', 2, columns => ARRAY['x'], weight_column => 'y');
SELECT sizes FROM gpu_kmeans_fit('s_pts', 2, columns => ARRAY['x'], weight_column => 'id');
RESET ROLE;
GRANT SELECT (x, y) ON s_pts TO regress_pg_gpu_reader;
SET ROLE regress_pg_gpu_reader;
SELECT * FROM gpu_kmeans('s_pts', 2, columns => ARRAY['x']);
RESET ROLE;

-- row-level security: the policy filters the rows used
GRANT SELECT ON s_pts TO regress_pg_gpu_reader;
ALTER TABLE s_pts ENABLE ROW LEVEL SECURITY;
CREATE POLICY only_alice ON s_pts FOR SELECT TO regress_pg_gpu_reader USING (owner = 'alice');
SET ROLE regress_pg_gpu_reader;
SELECT count(*) FROM s_pts;
SELECT sizes FROM gpu_kmeans_fit('s_pts', 2);
SELECT * FROM gpu_kmeans('s_pts', 2) ORDER BY id;
SELECT id FROM gpu_kmeans_assign('s_pts', ARRAY[[0, 0]]) ORDER BY id;
SELECT count(*) AS results, count(DISTINCT id) AS rows FROM gpu_kmeans_transform('s_pts', :'s_model');
-- on a sample: drawn from the policy's rows, and only they labelled
SELECT sizes, model->'rows' AS rows, model->'sample' AS sample
FROM gpu_kmeans_fit('s_pts', 2, columns => ARRAY['x', 'y'], sample => 4);
SELECT id, cluster IS NOT NULL AS labelled
FROM gpu_kmeans('s_pts', 2, columns => ARRAY['x', 'y'], sample => 4) ORDER BY id;
RESET ROLE;
-- the owner is not subject to the policy
SELECT sizes FROM gpu_kmeans_fit('s_pts', 2);

-- a security-barrier view shows only what it shows
CREATE VIEW s_bob WITH (security_barrier) AS SELECT id, x, y FROM s_pts WHERE owner = 'bob';
GRANT SELECT ON s_bob TO regress_pg_gpu_colreader;
SET ROLE regress_pg_gpu_colreader;
SELECT * FROM gpu_kmeans('s_bob', 1, id_column => 'id') ORDER BY id;
RESET ROLE;

-- partitioned tables: the parent's privileges count, as in SELECT; a
-- partition read directly needs its own
CREATE TABLE s_part (id int, x float8) PARTITION BY RANGE (id);
CREATE TABLE s_part_1 PARTITION OF s_part FOR VALUES FROM (1) TO (6);
CREATE TABLE s_part_2 PARTITION OF s_part FOR VALUES FROM (6) TO (11);
INSERT INTO s_part SELECT i, i % 2 FROM generate_series(1, 10) i;
GRANT SELECT ON s_part TO regress_pg_gpu_reader;
SET ROLE regress_pg_gpu_reader;
SELECT sizes FROM gpu_kmeans_fit('s_part', 2, columns => ARRAY['x'], seed => 1);
SELECT sizes FROM gpu_kmeans_fit('s_part_1', 1, columns => ARRAY['x']);
RESET ROLE;
DROP TABLE s_part;

-- temporary tables: the session's own, by plain or pg_temp-qualified name
CREATE TEMP TABLE s_tmp AS SELECT i AS id, (i % 3)::float8 AS x FROM generate_series(1, 9) i;
SELECT sizes FROM gpu_kmeans_fit('s_tmp', 3, columns => ARRAY['x'], seed => 1);
SELECT count(*) FROM gpu_kmeans('pg_temp.s_tmp', 3, columns => ARRAY['x'], id_column => 'id');
DROP TABLE s_tmp;

DROP TABLE s_pts CASCADE;
DROP ROLE regress_pg_gpu_reader;
DROP ROLE regress_pg_gpu_colreader;
