-- Hostile input, table-driven: every call below ends in a clean ERROR (its
-- SQLSTATE and message shown) or in a documented result ("ok: ...").  Each
-- runs in its own subtransaction; a crash would end the session and the
-- test.  No call may give an internal error (XX000).
SET client_min_messages = warning;
CREATE TABLE h_pts (id int PRIMARY KEY, x float8, y float8, t text);
INSERT INTO h_pts SELECT i, i % 4, i % 5, 'row ' || i FROM generate_series(1, 100) i;
CREATE TABLE h_nokey (x float8);
INSERT INTO h_nokey SELECT i FROM generate_series(1, 10) i;
CREATE TABLE h_empty (id int PRIMARY KEY, x float8);
CREATE TABLE h_one (id int PRIMARY KEY, x float8);
INSERT INTO h_one VALUES (1, 42);
CREATE TABLE h_distinct (id int PRIMARY KEY, x float8);
INSERT INTO h_distinct SELECT i, i * i FROM generate_series(1, 10) i;
CREATE TABLE h_same (id int PRIMARY KEY, x float8, y float8);
INSERT INTO h_same SELECT i, 2.5, -1 FROM generate_series(1, 50) i;
CREATE TABLE h_bad (id int PRIMARY KEY, x float8);
INSERT INTO h_bad VALUES (1, 1), (2, NULL), (3, 'NaN'), (4, 'Infinity'), (5, '-Infinity'), (6, 2);
CREATE TABLE h_ext (id int PRIMARY KEY, x float8);
INSERT INTO h_ext VALUES (1, 1e308), (2, 1.5e308), (3, -1e308), (4, -1.7e308), (5, 5e-324);
CREATE TABLE h_big_id (id numeric PRIMARY KEY, x float8);
INSERT INTO h_big_id VALUES (1e30, 1), (2, 2);
DO $$
BEGIN
  EXECUTE 'CREATE TABLE h_wide (id int PRIMARY KEY, '
       || (SELECT string_agg(format('c%s float8', j), ', ') FROM generate_series(1, 1000) j) || ')';
  EXECUTE 'INSERT INTO h_wide SELECT i, '
       || (SELECT string_agg(format('(i + %s) %% 2', j), ', ') FROM generate_series(1, 1000) j)
       || ' FROM generate_series(1, 20) i';
END $$;
CREATE TYPE h_comp AS (x float8);
-- matrix tables: dense (row_id, row_vec) and sparse (row_id, col_id, value)
CREATE TABLE m_ok (row_id int, row_vec float8[]);
INSERT INTO m_ok VALUES (1, '{1,2}'), (2, '{3,4}');
CREATE TABLE m_dup (row_id int, row_vec float8[]);
INSERT INTO m_dup VALUES (1, '{1,2}'), (1, '{3,4}');
CREATE TABLE m_gap (row_id int, row_vec float8[]);
INSERT INTO m_gap VALUES (1, '{1,2}'), (3, '{3,4}');
CREATE TABLE m_nullvec (row_id int, row_vec float8[]);
INSERT INTO m_nullvec VALUES (1, '{1,2}'), (2, NULL);
CREATE TABLE m_nullelem (row_id int, row_vec float8[]);
INSERT INTO m_nullelem VALUES (1, '{1,NULL}'), (2, '{3,4}');
CREATE TABLE m_ragged (row_id int, row_vec float8[]);
INSERT INTO m_ragged VALUES (1, '{1,2}'), (2, '{3,4,5}');
CREATE TABLE m_2d (row_id int, row_vec float8[]);
INSERT INTO m_2d VALUES (1, '{{1,2}}'), (2, '{{3,4}}');
CREATE TABLE m_zero (row_id int, row_vec float8[]);
INSERT INTO m_zero VALUES (0, '{1,2}'), (1, '{3,4}');
CREATE TABLE m_empty (row_id int, row_vec float8[]);
CREATE TABLE s_neg (row_id int, col_id int, value float8);
INSERT INTO s_neg VALUES (1, 1, 1), (-1, 2, 1);
CREATE TABLE s_dup (row_id int, col_id int, value float8);
INSERT INTO s_dup VALUES (1, 1, 1), (1, 1, 2);
CREATE TABLE s_null (row_id int, col_id int, value float8);
INSERT INTO s_null VALUES (1, 1, 1), (2, 2, NULL);
CREATE TABLE s_huge (row_id bigint, col_id bigint, value float8);
INSERT INTO s_huge VALUES (1, 1, 1), (4000000000, 1, 1);
CREATE TABLE s_ok (row_id int, col_id int, value float8);
INSERT INTO s_ok VALUES (1, 1, 2), (2, 2, 3);

CREATE TABLE calls (n serial PRIMARY KEY, call text NOT NULL);
INSERT INTO calls (call) VALUES
-- gpu_kmeans_fit: k
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 0, columns => ARRAY['x', 'y'])$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', -5, columns => ARRAY['x', 'y'])$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', NULL, columns => ARRAY['x', 'y'])$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 101, columns => ARRAY['x', 'y'])$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2147483647, columns => ARRAY['x', 'y'])$$),
($$SELECT sizes FROM gpu_kmeans_fit(NULL, 3)$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_no_such_table', 3)$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_comp', 1)$$),
-- columns
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY['nope'])$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY[]::text[])$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY[NULL]::text[])$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY['x', 'x'])$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY['t'])$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY[['x'], ['y']])$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY['X'])$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY[repeat('x', 100)])$$),
-- id column
($$SELECT count(*) FROM gpu_kmeans('h_pts', 2, columns => ARRAY['x'], id_column => 'nope')$$),
($$SELECT count(*) FROM gpu_kmeans('h_pts', 2, columns => ARRAY['x'], id_column => 'x')$$),
($$SELECT count(*) FROM gpu_kmeans('h_pts', 2, columns => ARRAY['x'], id_column => 't')$$),
($$SELECT count(*) FROM gpu_kmeans('h_nokey', 2)$$),
($$SELECT count(*) FROM gpu_kmeans('h_big_id', 1, columns => ARRAY['x'])$$),
-- iterations, tolerance, init, seed
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY['x'], max_iter => 0)$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY['x'], max_iter => NULL)$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY['x'], tol => -1)$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY['x'], tol => 'NaN')$$),
($$SELECT sizes::text || ' ' || iterations FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY['x'], tol => 'Infinity')$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY['x'], init => 'kmeans')$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY['x'], init => '')$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY['x'], init => NULL)$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY['x'], seed => NULL)$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 4, columns => ARRAY['x'], seed => -9223372036854775808)$$),
-- algorithm
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY['x'], algorithm => '')$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY['x'], algorithm => repeat('hierarchical', 8))$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY['x'], algorithm => E'hierarchical\\x00')$$),
($$SELECT count(*) FROM gpu_kmeans('h_pts', 999999, columns => ARRAY['x'], algorithm => 'hierarchical')$$),
-- weight_column: empty, long, a system column, a text column, the id, a column weighing 0 in every row
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY['x'], weight_column => '')$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY['x'], weight_column => repeat('w', 100))$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY['x'], weight_column => 'ctid')$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY['x'], weight_column => 't')$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY['x'], weight_column => 'id')$$),
($$SELECT sizes::text || ' ' || inertia FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY['y'], weight_column => 'x', init_centroids => ARRAY[[0], [4]])$$),
-- init_centroids
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 3, columns => ARRAY['x', 'y'], init_centroids => ARRAY[[1, 2]]::float8[])$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 3, columns => ARRAY['x', 'y'], init_centroids => ARRAY[[1], [2], [3]]::float8[])$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 3, columns => ARRAY['x', 'y'], init_centroids => ARRAY[1, 2, 3]::float8[])$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 1, columns => ARRAY['x', 'y'], init_centroids => ARRAY[[1, NULL]]::float8[])$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 1, columns => ARRAY['x', 'y'], init_centroids => ARRAY[[1, 'NaN']]::float8[])$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 1, columns => ARRAY['x', 'y'], init_centroids => ARRAY[[1, '-Infinity']]::float8[])$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 1, columns => ARRAY['x', 'y'], init_centroids => ARRAY[[[1, 2]]]::float8[])$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 1, columns => ARRAY['x', 'y'], init_centroids => '{}'::float8[])$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_pts', 1, columns => ARRAY['x', 'y'], init_centroids => '[0:0][5:6]={{1,2}}'::float8[])$$),
-- the rows themselves
($$SELECT sizes FROM gpu_kmeans_fit('h_empty', 1)$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_one', 1)$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_one', 2)$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_distinct', 10)$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_same', 3)$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_bad', 2)$$),
($$SELECT string_agg(id || ':' || coalesce(cluster::text, 'NULL'), ',' ORDER BY id) FROM gpu_kmeans('h_bad', 2)$$),
($$SELECT sizes::text || ' ' || (centroids[1][1] < -1e308) || ' ' || inertia FROM gpu_kmeans_fit('h_ext', 2)$$),
($$SELECT sizes FROM gpu_kmeans_fit('h_wide', 2)$$),
-- gpu_kmeans_assign
($$SELECT count(*) FROM gpu_kmeans_assign('h_pts', NULL, columns => ARRAY['x'])$$),
($$SELECT count(*) FROM gpu_kmeans_assign('h_pts', ARRAY[[1]]::float8[], columns => ARRAY['x', 'y'])$$),
($$SELECT count(*) FROM gpu_kmeans_assign('h_pts', '{}'::float8[], columns => ARRAY['x'])$$),
($$SELECT count(*) FROM gpu_kmeans_assign('h_pts', ARRAY[['NaN']]::float8[], columns => ARRAY['x'])$$),
($$SELECT count(*) FROM gpu_kmeans_assign('h_nokey', ARRAY[[1]]::float8[])$$),
-- gpu_kmeans_transform: n, the model, the rows
($$SELECT count(*) FROM gpu_kmeans_transform('h_pts', (SELECT model FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY['x', 'y'], seed => 1)), 2147483647)$$),
($$SELECT count(*) FROM gpu_kmeans_transform('h_pts', (SELECT model FROM gpu_kmeans_fit('h_pts', 2, columns => ARRAY['x', 'y'], seed => 1)), -2147483648)$$),
($$SELECT count(*) FROM gpu_kmeans_transform('h_pts', '{"kind": "pg_gpu.kmeans", "k": 1000000000}'::jsonb)$$),
($$SELECT count(*) FROM gpu_kmeans_transform('h_pts', '[]'::jsonb)$$),
($$SELECT count(*) FROM gpu_kmeans_transform('h_nokey', (SELECT model FROM gpu_kmeans_fit('h_nokey', 2, seed => 1)))$$),
($$SELECT count(*) || ' ' || count(rank) FROM gpu_kmeans_transform('h_bad', (SELECT model FROM gpu_kmeans_fit('h_bad', 2, seed => 1)))$$),
($$SELECT count(*) || ' ' || min(distance) FROM gpu_kmeans_transform('h_ext', (SELECT model FROM gpu_kmeans_fit('h_ext', 2, seed => 1)))$$),
($$SELECT count(*) FROM gpu_kmeans_transform('h_wide', (SELECT model FROM gpu_kmeans_fit('h_wide', 2, seed => 1)))$$),
($$SELECT count(*) FROM gpu_kmeans_transform('h_empty', (SELECT model FROM gpu_kmeans_fit('h_one', 1, seed => 1)))$$),
-- gpu_matmul on arrays
($$SELECT gpu_matmul(NULL::float8[], ARRAY[[1]]::float8[])$$),
($$SELECT gpu_matmul(ARRAY[1, 2]::float8[], ARRAY[[1], [2]]::float8[])$$),
($$SELECT gpu_matmul(ARRAY[[[1]]]::float8[], ARRAY[[1]]::float8[])$$),
($$SELECT gpu_matmul('{}'::float8[], ARRAY[[1]]::float8[])$$),
($$SELECT gpu_matmul(ARRAY[[1, NULL]]::float8[], ARRAY[[1], [2]]::float8[])$$),
($$SELECT gpu_matmul(ARRAY[[1, 2]]::float8[], ARRAY[[1, 2]]::float8[])$$),
($$SELECT gpu_matmul(ARRAY[['NaN', 1]]::float8[], ARRAY[[1], ['Infinity']]::float8[])$$),
($$SELECT gpu_matmul(ARRAY[[1e308, 1e308]]::float8[], ARRAY[[1e308], [1e308]]::float8[])$$),
($$SELECT gpu_matmul(ARRAY[[3e38]]::real[], ARRAY[[3e38]]::real[])$$),
($$SELECT gpu_matmul(array_fill(1::float8, ARRAY[40000, 1]), array_fill(1::float8, ARRAY[1, 40000]))$$),
($$SELECT gpu_matmul('[5:5][-3:-2]={{1,2}}'::float8[], '[0:1][0:0]={{3},{4}}'::float8[])$$),
-- gpu_matmul on tables
($$SELECT count(*) FROM gpu_matmul('h_pts'::regclass, 'm_ok'::regclass)$$),
($$SELECT count(*) FROM gpu_matmul('m_dup'::regclass, 'm_ok'::regclass)$$),
($$SELECT count(*) FROM gpu_matmul('m_gap'::regclass, 'm_ok'::regclass)$$),
($$SELECT count(*) FROM gpu_matmul('m_nullvec'::regclass, 'm_ok'::regclass)$$),
($$SELECT count(*) FROM gpu_matmul('m_nullelem'::regclass, 'm_ok'::regclass)$$),
($$SELECT count(*) FROM gpu_matmul('m_ragged'::regclass, 'm_ok'::regclass)$$),
($$SELECT count(*) FROM gpu_matmul('m_2d'::regclass, 'm_ok'::regclass)$$),
($$SELECT count(*) FROM gpu_matmul('m_zero'::regclass, 'm_ok'::regclass)$$),
($$SELECT count(*) FROM gpu_matmul('m_empty'::regclass, 'm_ok'::regclass)$$),
($$SELECT count(*) FROM gpu_matmul('s_neg'::regclass, 'm_ok'::regclass)$$),
($$SELECT count(*) FROM gpu_matmul('s_dup'::regclass, 'm_ok'::regclass)$$),
($$SELECT count(*) FROM gpu_matmul('s_null'::regclass, 'm_ok'::regclass)$$),
($$SELECT count(*) FROM gpu_matmul('s_huge'::regclass, 's_huge'::regclass)$$),
($$SELECT count(*) FROM gpu_matmul('m_ok'::regclass, 'm_ok'::regclass, ARRAY['row_id'])$$),
($$SELECT count(*) FROM gpu_matmul('m_ok'::regclass, 'm_ok'::regclass, ARRAY['a', 'b'])$$),
($$SELECT count(*) FROM gpu_matmul('m_ok'::regclass, 'm_ok'::regclass, ARRAY[NULL, NULL]::text[])$$),
($$SELECT string_agg(row_id || '=' || row_vec::text, ' ' ORDER BY row_id) FROM gpu_matmul('s_ok'::regclass, 'm_ok'::regclass)$$),
($$SELECT count(*) FROM gpu_matmul(NULL::regclass, 'm_ok'::regclass)$$),
($$SELECT count(*) FROM gpu_matmul('h_comp'::regclass, 'm_ok'::regclass)$$);

-- runs one call in a subtransaction: "ok: <its result>" or "<SQLSTATE> <message>"
CREATE FUNCTION try_call(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  r text;
  st text;
  msg text;
BEGIN
  EXECUTE sql INTO r;
  RETURN 'ok: ' || coalesce(r, 'NULL');
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
  RETURN st || ' ' || msg;
END $$;

CREATE TEMP TABLE outcomes AS SELECT n, try_call(call) AS outcome FROM calls ORDER BY n;
SELECT n, outcome FROM outcomes ORDER BY n;
SELECT count(*) AS calls, count(*) FILTER (WHERE outcome LIKE 'ok:%') AS documented_results,
       count(*) FILTER (WHERE outcome NOT LIKE 'ok:%') AS clean_errors,
       count(*) FILTER (WHERE outcome LIKE 'XX%') AS internal_errors
FROM outcomes;
SELECT 1 AS still_here;
DROP FUNCTION try_call(text);
DROP TABLE calls, h_pts, h_nokey, h_empty, h_one, h_distinct, h_same, h_bad, h_ext, h_big_id, h_wide,
  m_ok, m_dup, m_gap, m_nullvec, m_nullelem, m_ragged, m_2d, m_zero, m_empty, s_neg, s_dup, s_null, s_huge, s_ok;
DROP TYPE h_comp;
