-- statement_timeout (like Ctrl-C) stops a call cleanly, here while the rows
-- are read; the next call in the same backend works.  (Cancellation between
-- iterations and seeding steps is covered by tests/unit/interrupts.c.)
CREATE TABLE c_pts AS
SELECT i AS id, (i::bigint * 7919 % 1000) / 1000.0 AS x, (i::bigint * 104729 % 997) / 997.0 AS y
FROM generate_series(1, 1000000) i;
ALTER TABLE c_pts ALTER x TYPE float8, ALTER y TYPE float8;
SET statement_timeout = '50ms';
SELECT * FROM gpu_kmeans_fit('c_pts', 10, columns => ARRAY['x', 'y'], tol => 0, max_iter => 100000);
SELECT count(*) FROM gpu_kmeans('c_pts', 10, id_column => 'id', tol => 0, max_iter => 100000);
-- a sample's read and every row's labelling after it
SELECT count(*) FROM gpu_kmeans('c_pts', 10, id_column => 'id', sample => 500000);
RESET statement_timeout;
-- inside a transaction: roll back to a savepoint and go on
BEGIN;
SAVEPOINT before;
SET LOCAL statement_timeout = '50ms';
SELECT * FROM gpu_kmeans_fit('c_pts', 10, columns => ARRAY['x', 'y'], tol => 0, max_iter => 100000);
ROLLBACK TO SAVEPOINT before;
SELECT sizes FROM gpu_kmeans_fit('c_pts', 1, columns => ARRAY['x', 'y']);
COMMIT;
SELECT sizes, converged FROM gpu_kmeans_fit('c_pts', 1, columns => ARRAY['x', 'y']);
-- Cancellation answers within about a second whatever k and d: the passes
-- poll by work, not by rows.  Here 4000 rows against 1000000 centroids of 8
-- columns, 3.2e10 squared differences in one pass on the CPU (about 2.7 s
-- on the test machine): polling every 4096 rows never polled inside it.
-- The function reports whether the cancel came within 1 s of the timeout.
CREATE TABLE c_few AS SELECT i AS id, i % 10 AS a, i % 7 AS b, i % 3 AS c, i % 11 AS e,
       i % 13 AS f, i % 17 AS g, i % 19 AS h, i % 23 AS j
FROM generate_series(1, 4000) i;
CREATE TABLE c_many AS
SELECT array_agg(ARRAY[i % 101, i % 103, i % 107, i % 109, i % 113, i % 127, i % 131, i % 137]::float8[]) AS c
FROM generate_series(1, 1000000) i;
CREATE FUNCTION c_answered_in_time(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE q;
  RETURN 'finished before the timeout';
EXCEPTION WHEN query_canceled THEN
  RETURN CASE WHEN clock_timestamp() - statement_timestamp() < interval '2 s'
              THEN 'cancelled in time' ELSE 'cancelled late' END;
END $$;
BEGIN;
SET LOCAL pg_gpu.device = cpu;
SET LOCAL statement_timeout = '1s';
SELECT c_answered_in_time($q$SELECT count(*) FROM gpu_kmeans_assign('c_few', (SELECT c FROM c_many), id_column => 'id',
                              columns => ARRAY['a', 'b', 'c', 'e', 'f', 'g', 'h', 'j'])$q$);
COMMIT;
-- algorithm 'hierarchical' (on the GPU its groups fit several at once, on
-- threads that poll no callback: the caller polls and stops them) answers
-- in time too, or has finished
BEGIN;
SET LOCAL statement_timeout = '1s';
SELECT c_answered_in_time($q$SELECT * FROM gpu_kmeans_fit('c_pts', 20000, columns => ARRAY['x', 'y'], tol => 0,
                              max_iter => 100000, algorithm => 'hierarchical')$q$) <> 'cancelled late' AS answered;
COMMIT;
SELECT sizes FROM gpu_kmeans_fit('c_pts', 1, columns => ARRAY['x', 'y'], algorithm => 'hierarchical');
DROP TABLE c_pts;
-- empty clusters no row can fill: the repair stops at the first (20000
-- identical rows, k = 20000 from random rows: one cluster takes them all)
CREATE TABLE c_same AS SELECT i AS id, 1.0::float8 AS x FROM generate_series(1, 20000) i;
SELECT sizes[1] AS first, (SELECT count(*) FROM unnest(sizes) s WHERE s = 0) AS empty, iterations
FROM gpu_kmeans_fit('c_same', 20000, columns => ARRAY['x'], init => 'random', max_iter => 3);
DROP TABLE c_few, c_many, c_same;
DROP FUNCTION c_answered_in_time(text);
