-- statement_timeout (like Ctrl-C) stops a call cleanly, here while the rows
-- are read; the next call in the same backend works.  (Cancellation between
-- iterations and seeding steps is covered by tests/unit_compute.c.)
CREATE TABLE c_pts AS
SELECT i AS id, (i::bigint * 7919 % 1000) / 1000.0 AS x, (i::bigint * 104729 % 997) / 997.0 AS y
FROM generate_series(1, 1000000) i;
ALTER TABLE c_pts ALTER x TYPE float8, ALTER y TYPE float8;
SET statement_timeout = '50ms';
SELECT * FROM gpu_kmeans_fit('c_pts', 10, columns => ARRAY['x', 'y'], tol => 0, max_iter => 100000);
SELECT count(*) FROM gpu_kmeans('c_pts', 10, id_column => 'id', tol => 0, max_iter => 100000);
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
DROP TABLE c_pts;
