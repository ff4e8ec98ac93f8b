-- gpu_matmul on matrix tables: dense (row_id, row_vec) and sparse (row_id,
-- col_id, value) operands in every combination, hand-checkable results.
CREATE TABLE t_a (row_id int, row_vec float8[]);          -- 2 x 3
INSERT INTO t_a VALUES (2, '{4,5,6}'), (1, '{1,2,3}');    -- rows arrive out of order
CREATE TABLE t_b (row_id bigint, row_vec real[]);          -- 3 x 2
INSERT INTO t_b VALUES (1, '{1,0}'), (2, '{0,1}'), (3, '{1,1}');
CREATE TABLE t_s (row_id int, col_id bigint, value numeric);  -- sparse 3 x 2
INSERT INTO t_s VALUES (1, 1, 1), (2, 2, 1), (3, 1, 1), (3, 2, 1);
CREATE TABLE t_i (row_id smallint, col_id smallint, value int);  -- sparse 2 x 2 identity
INSERT INTO t_i VALUES (1, 1, 1), (2, 2, 1);

-- dense x dense: {{1,2,3},{4,5,6}} x {{1,0},{0,1},{1,1}} = {{4,5},{10,11}}
SELECT * FROM gpu_matmul('t_a'::regclass, 't_b'::regclass);
-- dense x sparse: t_s holds the same matrix as t_b
SELECT * FROM gpu_matmul('t_a'::regclass, 't_s'::regclass);
-- sparse x dense: identity x t_a
SELECT * FROM gpu_matmul('t_i'::regclass, 't_a'::regclass);
-- sparse x sparse: t_s (3 x 2) x identity (2 x 2)
SELECT * FROM gpu_matmul('t_s'::regclass, 't_i'::regclass);
-- a sparse operand widens to the other's inner dimension: t_i (2 x 2) is
-- 2 x 3 left of t_b (3 rows), and 3 x 2 right of t_a (3 columns)
SELECT * FROM gpu_matmul('t_i'::regclass, 't_b'::regclass);
SELECT * FROM gpu_matmul('t_a'::regclass, 't_i'::regclass);
-- row_id comes back as bigint 1..m; row_vec as double precision[]
SELECT pg_typeof(row_id), pg_typeof(row_vec) FROM gpu_matmul('t_i'::regclass, 't_i'::regclass) LIMIT 1;
-- in the select list, and joined back to other tables
SELECT (gpu_matmul('t_a'::regclass, 't_b'::regclass)).row_vec;
-- other column names
CREATE TABLE t_named (i int, j int, x float8, note text);
INSERT INTO t_named VALUES (1, 2, 10, 'a'), (2, 1, 20, 'b');
SELECT * FROM gpu_matmul('t_named'::regclass, 't_i'::regclass, a_columns => ARRAY['i', 'j', 'x']);
CREATE TABLE t_named_dense (id bigint, v real[]);
INSERT INTO t_named_dense VALUES (1, '{1,1}');
SELECT * FROM gpu_matmul('t_named_dense'::regclass, 't_named'::regclass,
                         a_columns => ARRAY['id', 'v'], b_columns => ARRAY['i', 'j', 'x']);
-- views, materialized views and partitioned tables are read as SELECT reads them
CREATE VIEW t_a_view AS SELECT row_id, row_vec FROM t_a;
SELECT * FROM gpu_matmul('t_a_view'::regclass, 't_b'::regclass);
CREATE MATERIALIZED VIEW t_s_mat AS SELECT * FROM t_s;
SELECT * FROM gpu_matmul('t_a'::regclass, 't_s_mat'::regclass);
CREATE TABLE t_part (row_id int, row_vec float8[]) PARTITION BY RANGE (row_id);
CREATE TABLE t_part_1 PARTITION OF t_part FOR VALUES FROM (1) TO (2);
CREATE TABLE t_part_2 PARTITION OF t_part FOR VALUES FROM (2) TO (10);
INSERT INTO t_part SELECT * FROM t_a;
SELECT * FROM gpu_matmul('t_part'::regclass, 't_s'::regclass);
-- NaN and Infinity in tables propagate
CREATE TABLE t_nan (row_id int, col_id int, value float8);
INSERT INTO t_nan VALUES (1, 1, 'NaN'), (2, 2, 'Infinity');
SELECT * FROM gpu_matmul('t_nan'::regclass, 't_i'::regclass);

-- a tall-skinny product (several row blocks on the GPU) and one cut into
-- blocks of all three dimensions by pg_gpu.matmul_gpu_memory; integer values,
-- so any summation order is exact: compared with the CPU and with SQL
CREATE TABLE t_tall AS SELECT i AS row_id, ARRAY[i % 7, i % 5, 1, -(i % 3)]::float8[] AS row_vec
FROM generate_series(1, 5000) i;
CREATE TABLE t_small (row_id int, row_vec float8[]);
INSERT INTO t_small VALUES (1, '{1,0,2}'), (2, '{0,1,3}'), (3, '{1,1,1}'), (4, '{2,0,0}');
CREATE TABLE t_sq AS SELECT i AS row_id, array_agg(((i * 7 + j * 3) % 11 - 5)::float8 ORDER BY j) AS row_vec
FROM generate_series(1, 400) i, generate_series(1, 400) j GROUP BY i;
CREATE TABLE r_tall AS SELECT * FROM gpu_matmul('t_tall'::regclass, 't_small'::regclass);
SET pg_gpu.matmul_gpu_memory = '1MB';
CREATE TABLE r_sq AS SELECT * FROM gpu_matmul('t_sq'::regclass, 't_sq'::regclass);
RESET pg_gpu.matmul_gpu_memory;
SET pg_gpu.device = cpu;
SELECT count(*) AS rows, bool_and(r.row_vec = c.row_vec) AS equal_to_cpu
FROM r_tall r JOIN gpu_matmul('t_tall'::regclass, 't_small'::regclass) c USING (row_id);
SELECT count(*) AS rows, bool_and(r.row_vec = c.row_vec) AS equal_to_cpu
FROM r_sq r JOIN gpu_matmul('t_sq'::regclass, 't_sq'::regclass) c USING (row_id);
RESET pg_gpu.device;
SELECT row_vec = ARRAY[4999 % 7 + 1 - 2 * (4999 % 3), 4999 % 5 + 1, 2 * (4999 % 7) + 3 * (4999 % 5) + 1]::float8[] AS row_4999
FROM r_tall WHERE row_id = 4999;
SELECT j, r.row_vec[j] = (SELECT sum(a.row_vec[p] * b.row_vec[j])
                          FROM t_sq a, t_sq b, generate_series(1, 400) p
                          WHERE a.row_id = 17 AND b.row_id = p) AS c_17_j
FROM r_sq r, (VALUES (1), (255), (400)) v(j) WHERE r.row_id = 17 ORDER BY j;
-- b_transposed: b's rows are the right operand's columns (A B^T: two tables
-- of embeddings, every pair's inner product); t_a (2 x 3) times t_a^T:
-- {{1,2,3},{4,5,6}} {{1,4},{2,5},{3,6}} = {{14,32},{32,77}}
SELECT * FROM gpu_matmul('t_a'::regclass, 't_a'::regclass, b_transposed => true);
-- t_b (3 x 2) times t_b^T = 3 x 3; the same as its transpose written out
CREATE TABLE t_bt (row_id int, row_vec float8[]);
INSERT INTO t_bt VALUES (1, '{1,0,1}'), (2, '{0,1,1}');
SELECT (SELECT array_agg(row_vec ORDER BY row_id) FROM gpu_matmul('t_b'::regclass, 't_b'::regclass, b_transposed => true)) =
       (SELECT array_agg(row_vec ORDER BY row_id) FROM gpu_matmul('t_b'::regclass, 't_bt'::regclass)) AS same_as_transposed;
-- a sparse b transposed (t_s, 3 x 2, is t_b) widens to a's columns: t_a
-- (2 x 3) x t_s^T with t_s as 3 x 3 = {{1,2,3},{4,5,9}}; t_i (2 x 2) x t_s^T
SELECT * FROM gpu_matmul('t_a'::regclass, 't_s'::regclass, b_transposed => true);
SELECT * FROM gpu_matmul('t_i'::regclass, 't_s'::regclass, b_transposed => true);
SELECT * FROM gpu_matmul('t_a'::regclass, 't_b'::regclass, b_transposed => NULL);
DROP TABLE t_bt;
DROP VIEW t_a_view;
DROP MATERIALIZED VIEW t_s_mat;
DROP TABLE t_a, t_b, t_s, t_i, t_named, t_named_dense, t_part, t_nan, t_tall, t_small, t_sq, r_tall, r_sq;
