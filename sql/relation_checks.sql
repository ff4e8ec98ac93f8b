-- A relation passed by OID gets the checks a SELECT of it by name gets:
-- it must exist (42P01, not an internal error), and the caller must have
-- USAGE on its schema (42501), on the parallel-read path as through SPI.
-- Dropped columns are skipped when the columns are chosen by default.
\set VERBOSITY terse
SELECT * FROM gpu_kmeans_fit(0::regclass, 1);
SELECT * FROM gpu_kmeans(0::regclass, 1);
SELECT * FROM gpu_kmeans_assign(0::regclass, ARRAY[[1]]::float8[]);
SELECT * FROM gpu_matmul(0::regclass, 0::regclass);
CREATE TABLE rc_gone (id int PRIMARY KEY, x float8);
SELECT 'rc_gone'::regclass::oid AS gone_oid \gset
DROP TABLE rc_gone;
-- (the OID differs from run to run: the SQLSTATE only)
\set VERBOSITY sqlstate
SELECT * FROM gpu_kmeans_fit(:gone_oid::oid::regclass, 1);
\set VERBOSITY default
-- a table with a dropped column, columns by default
CREATE TABLE rc_dropped (id int PRIMARY KEY, a float8, note text, b float8, c float8);
INSERT INTO rc_dropped SELECT g, g % 5, 'x', g % 3, g FROM generate_series(1, 300) g;
ALTER TABLE rc_dropped DROP COLUMN note, DROP COLUMN c;
SELECT sizes FROM gpu_kmeans_fit('rc_dropped', 3, seed => 1);
SELECT count(*) FROM gpu_kmeans('rc_dropped', 3, seed => 1);
SELECT count(*) FROM gpu_kmeans_assign('rc_dropped', ARRAY[[0, 0], [4, 2]]::float8[]);
-- SELECT on a table in a schema without USAGE: refused by OID as by name
CREATE ROLE rc_user;
CREATE SCHEMA rc_hidden;
CREATE TABLE rc_hidden.m (id int PRIMARY KEY, x float8);
INSERT INTO rc_hidden.m SELECT g, g FROM generate_series(1, 100) g;
CREATE TABLE rc_hidden.mat (row_id int, row_vec float8[]);
INSERT INTO rc_hidden.mat VALUES (1, '{1,2}'), (2, '{3,4}');
GRANT SELECT ON rc_hidden.m, rc_hidden.mat TO rc_user;
SELECT 'rc_hidden.m'::regclass::oid AS m_oid, 'rc_hidden.mat'::regclass::oid AS mat_oid \gset
SET ROLE rc_user;
SELECT count(*) FROM rc_hidden.m;
SELECT sizes FROM gpu_kmeans_fit(:m_oid::oid::regclass, 2);
SELECT count(*) FROM gpu_kmeans(:m_oid::oid::regclass, 2);
SELECT count(*) FROM gpu_kmeans_assign(:m_oid::oid::regclass, ARRAY[[1]]::float8[]);
SELECT * FROM gpu_matmul(:mat_oid::oid::regclass, :mat_oid::oid::regclass);
RESET ROLE;
GRANT USAGE ON SCHEMA rc_hidden TO rc_user;
SET ROLE rc_user;
SELECT sizes FROM gpu_kmeans_fit(:m_oid::oid::regclass, 2, seed => 1);
SELECT * FROM gpu_matmul(:mat_oid::oid::regclass, :mat_oid::oid::regclass);
RESET ROLE;
DROP SCHEMA rc_hidden CASCADE;
DROP ROLE rc_user;
DROP TABLE rc_dropped;
