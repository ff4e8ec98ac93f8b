-- Every bad input is a clean ERROR with a proper SQLSTATE and a hint; the
-- backend keeps running.  try() shows SQLSTATE and message compactly (and
-- proves that errors inside subtransactions clean up).
CREATE TABLE e_pts (id integer PRIMARY KEY, x float8, y float8, label text);
INSERT INTO e_pts SELECT i, i % 5, i % 7, 'p' || i FROM generate_series(1, 20) i;
CREATE TABLE e_nokey (a float8, b float8);
INSERT INTO e_nokey VALUES (1, 2), (3, 4);
CREATE TABLE e_text (id integer PRIMARY KEY, name text);
INSERT INTO e_text VALUES (1, 'a');
CREATE TABLE e_bad (id integer PRIMARY KEY, x float8);
INSERT INTO e_bad VALUES (1, NULL), (2, 'NaN'), (3, 'Infinity');
CREATE TABLE e_empty (id integer PRIMARY KEY, x float8);
CREATE TABLE e_textid (tid text PRIMARY KEY, x float8);
INSERT INTO e_textid VALUES ('a', 1);
CREATE TABLE e_nullid (id integer, x float8);
INSERT INTO e_nullid VALUES (1, 1), (NULL, 2);
CREATE SEQUENCE e_seq;

CREATE FUNCTION try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE q;
  RETURN 'ok';
EXCEPTION WHEN others THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

SELECT q, try(q) FROM (VALUES
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', 0)$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', -3)$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', 21)$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', NULL)$$),
  ($$SELECT * FROM gpu_kmeans_fit(NULL, 2)$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', 2, columns => ARRAY['nope'])$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', 2, columns => ARRAY['label'])$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', 2, columns => ARRAY['x', 'x'])$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', 2, columns => ARRAY[]::text[])$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', 2, columns => ARRAY['x', NULL])$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', 2, columns => ARRAY[['x'], ['y']])$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_text', 1)$$),
  ($$SELECT * FROM gpu_kmeans('e_nokey', 1)$$),
  ($$SELECT * FROM gpu_kmeans('e_pts', 2, id_column => 'nope')$$),
  ($$SELECT * FROM gpu_kmeans('e_pts', 2, id_column => 'x')$$),
  ($$SELECT * FROM gpu_kmeans('e_textid', 1)$$),
  ($$SELECT * FROM gpu_kmeans('e_nullid', 1, id_column => 'id')$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', 2, max_iter => 0)$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', 2, max_iter => NULL)$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', 2, tol => -0.1)$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', 2, tol => 'NaN')$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', 2, init => 'kmeans')$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', 2, init => NULL)$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', 2, seed => NULL)$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', 2, n_init => 0)$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', 2, n_init => 1001)$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', 2, n_init => NULL)$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', 2, n_init => 2, init_centroids => ARRAY[[1, 2], [3, 4]])$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', 2, init_centroids => ARRAY[[1, 2]])$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', 2, init_centroids => ARRAY[[1, 2, 3], [4, 5, 6]])$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', 2, init_centroids => ARRAY[1, 2, 3, 4])$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', 2, init_centroids => ARRAY[[1, 2], [3, NULL]])$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_pts', 2, init_centroids => ARRAY[[1, 2], [3, 'NaN'::float8]])$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_bad', 1)$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_empty', 1)$$),
  ($$SELECT * FROM gpu_kmeans_fit('e_seq', 1)$$),
  ($$SELECT * FROM gpu_kmeans_fit('no_such_table', 1)$$),
  ($$SELECT * FROM gpu_kmeans_assign('e_pts', NULL)$$),
  ($$SELECT * FROM gpu_kmeans_assign('e_pts', ARRAY[1, 2])$$),
  ($$SELECT * FROM gpu_kmeans_assign('e_pts', ARRAY[[1, 2, 3]])$$),
  ($$SELECT * FROM gpu_kmeans_assign('e_pts', '{}')$$),
  ($$SELECT * FROM gpu_kmeans_assign('e_nokey', ARRAY[[1, 2]])$$)
) t(q);

-- hints, shown in full for a few
SELECT * FROM gpu_kmeans('e_nokey', 1);
SELECT * FROM gpu_kmeans_fit('e_pts', 2, init_centroids => ARRAY[[1, 2]]);
SELECT * FROM gpu_kmeans_fit('e_pts', 21);
SELECT * FROM gpu_kmeans_fit('e_pts', 2, columns => ARRAY['label']);
SET pg_gpu.device = 'nonsense';
SET pg_gpu.nonsense = 1;

-- the backend is still fine
SELECT sizes FROM gpu_kmeans_fit('e_pts', 1);
