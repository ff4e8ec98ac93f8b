-- End-to-end timing of gpu_matmul on two dense n x n tables beside
-- PostgreSQL's own read of them, in one session:
--   psql -X -v n=4096 -f tests/bench/matmul_timing.sql
\set ON_ERROR_STOP on
\if :{?n}
\else
\set n 1024
\endif
CREATE EXTENSION IF NOT EXISTS pg_gpu;
DROP TABLE IF EXISTS mt_a, mt_b;
CREATE TABLE mt_a AS SELECT i AS row_id, array(SELECT random() + 0 * i FROM generate_series(1, :n)) AS row_vec
FROM generate_series(1, :n) i;
CREATE TABLE mt_b AS SELECT i AS row_id, array(SELECT random() + 0 * i FROM generate_series(1, :n)) AS row_vec
FROM generate_series(1, :n) i;
VACUUM ANALYZE mt_a, mt_b;
SELECT pg_size_pretty(pg_total_relation_size('mt_a')) AS size_a;
SET pg_gpu.device = gpu;
\timing on
-- the first call in a backend also starts CUDA and pins host memory
SELECT count(*) FROM gpu_matmul('mt_a'::regclass, 'mt_b'::regclass);
SELECT sum(cardinality(row_vec)) FROM mt_a;
SELECT sum(cardinality(row_vec)) FROM mt_b;
SELECT sum(cardinality(row_vec)) FROM mt_a;
SELECT sum(cardinality(row_vec)) FROM mt_b;
SELECT count(*) FROM gpu_matmul('mt_a'::regclass, 'mt_b'::regclass);
SELECT count(*) FROM gpu_matmul('mt_a'::regclass, 'mt_b'::regclass);
SELECT sum(row_vec[1]) FROM gpu_matmul('mt_a'::regclass, 'mt_b'::regclass);
-- in the select list: rows stream out, no tuplestore
SELECT count(*) FROM (SELECT gpu_matmul('mt_a'::regclass, 'mt_b'::regclass)) s;
SET pg_gpu.device = cpu;
SELECT count(*) FROM gpu_matmul('mt_a'::regclass, 'mt_b'::regclass);
\timing off
-- the GPU and CPU results agree (max error relative to sum |a||b| <= 1e-10)
SET pg_gpu.device = gpu;
CREATE TEMP TABLE r_gpu AS SELECT * FROM gpu_matmul('mt_a'::regclass, 'mt_b'::regclass);
SET pg_gpu.device = cpu;
CREATE TEMP TABLE r_cpu AS SELECT * FROM gpu_matmul('mt_a'::regclass, 'mt_b'::regclass);
SELECT max(abs(g.v - c.v)) / :n AS max_error_vs_n_times_ab,
       max(abs(g.v - c.v)) / :n < 1e-10 AS agree
FROM (SELECT row_id, unnest(row_vec) v, generate_subscripts(row_vec, 1) j FROM r_gpu) g
JOIN (SELECT row_id, unnest(row_vec) v, generate_subscripts(row_vec, 1) j FROM r_cpu) c USING (row_id, j);
DROP TABLE mt_a, mt_b;
