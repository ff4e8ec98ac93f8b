-- gpu_matmul: every bad input is a clean ERROR with its SQLSTATE, and the
-- session goes on.
\set VERBOSITY default
\set SHOW_CONTEXT never
-- arrays: not two-dimensional, empty, NULL elements, shapes that differ
SELECT gpu_matmul(ARRAY[1, 2]::float8[], ARRAY[[1], [2]]::float8[]);
SELECT gpu_matmul(ARRAY[[1, 2]]::float8[], ARRAY[1, 2]::float8[]);
SELECT gpu_matmul('{}'::float8[], ARRAY[[1]]::float8[]);
SELECT gpu_matmul(ARRAY[[[1]]]::real[], ARRAY[[1]]::real[]);
SELECT gpu_matmul(ARRAY[[1, NULL]]::float8[], ARRAY[[1], [2]]::float8[]);
SELECT gpu_matmul(ARRAY[[1, 2]]::real[], ARRAY[[1], [NULL]]::real[]);
SELECT gpu_matmul(ARRAY[[1, 2, 3], [4, 5, 6]]::float8[], ARRAY[[1, 2], [3, 4]]::float8[]);
-- a result over 1 GB: the hint points to the table form
SELECT gpu_matmul(array_fill(1::float8, ARRAY[20000, 1]), array_fill(1::float8, ARRAY[1, 20000]));
SELECT 1 AS still_alive;

-- tables
CREATE TABLE e_dense (row_id int, row_vec float8[]);
INSERT INTO e_dense VALUES (1, '{1,2}'), (2, '{3,4}');
CREATE TABLE e_sparse (row_id int, col_id int, value float8);
INSERT INTO e_sparse VALUES (1, 1, 1), (2, 2, 1);
-- NULL relation
SELECT * FROM gpu_matmul(NULL::regclass, 'e_dense'::regclass);
-- neither format; both formats; wrong column types (dense/sparse mix-ups)
CREATE TABLE e_neither (id int, x float8);
SELECT * FROM gpu_matmul('e_neither'::regclass, 'e_dense'::regclass);
SELECT * FROM gpu_matmul('e_dense'::regclass, 'e_neither'::regclass);
CREATE TABLE e_both (row_id int, row_vec float8[], col_id int, value float8);
SELECT * FROM gpu_matmul('e_both'::regclass, 'e_dense'::regclass);
CREATE TABLE e_scalar_vec (row_id int, row_vec float8);
SELECT * FROM gpu_matmul('e_scalar_vec'::regclass, 'e_dense'::regclass);
CREATE TABLE e_array_value (row_id int, col_id int, value float8[]);
SELECT * FROM gpu_matmul('e_array_value'::regclass, 'e_dense'::regclass);
CREATE TABLE e_int_vec (row_id int, row_vec int[]);
SELECT * FROM gpu_matmul('e_int_vec'::regclass, 'e_dense'::regclass);
CREATE TABLE e_text_id (row_id text, row_vec float8[]);
SELECT * FROM gpu_matmul('e_text_id'::regclass, 'e_dense'::regclass);
CREATE TABLE e_float_col (row_id int, col_id float8, value float8);
SELECT * FROM gpu_matmul('e_float_col'::regclass, 'e_dense'::regclass);
CREATE SEQUENCE e_seq;
SELECT * FROM gpu_matmul('e_seq'::regclass, 'e_dense'::regclass);
-- column names: wrong count, missing column, NULL name
SELECT * FROM gpu_matmul('e_dense'::regclass, 'e_dense'::regclass, a_columns => ARRAY['row_id']);
SELECT * FROM gpu_matmul('e_dense'::regclass, 'e_dense'::regclass, b_columns => ARRAY['row_id', 'nope']);
SELECT * FROM gpu_matmul('e_dense'::regclass, 'e_dense'::regclass, a_columns => ARRAY['row_id', NULL]);
-- shapes that differ (a dense operand cannot widen)
INSERT INTO e_both VALUES (1, '{1,2,3}', NULL, NULL);
SELECT * FROM gpu_matmul('e_dense'::regclass, 'e_both'::regclass, b_columns => ARRAY['row_id', 'row_vec']);
INSERT INTO e_sparse VALUES (3, 3, 1);
SELECT * FROM gpu_matmul('e_sparse'::regclass, 'e_dense'::regclass);
DELETE FROM e_sparse WHERE row_id = 3;
-- dense rows: missing, duplicate, out-of-range ids; NULLs; lengths; shapes
INSERT INTO e_dense VALUES (4, '{5,6}');
SELECT * FROM gpu_matmul('e_dense'::regclass, 'e_sparse'::regclass);
UPDATE e_dense SET row_id = 2 WHERE row_id = 4;
SELECT * FROM gpu_matmul('e_dense'::regclass, 'e_sparse'::regclass);
UPDATE e_dense SET row_id = 0 WHERE row_vec = '{5,6}';
SELECT * FROM gpu_matmul('e_dense'::regclass, 'e_sparse'::regclass);
UPDATE e_dense SET row_id = NULL WHERE row_vec = '{5,6}';
SELECT * FROM gpu_matmul('e_dense'::regclass, 'e_sparse'::regclass);
UPDATE e_dense SET row_id = 3, row_vec = NULL WHERE row_vec = '{5,6}';
SELECT * FROM gpu_matmul('e_dense'::regclass, 'e_sparse'::regclass);
UPDATE e_dense SET row_vec = '{5,NULL}' WHERE row_id = 3;
SELECT * FROM gpu_matmul('e_dense'::regclass, 'e_sparse'::regclass);
UPDATE e_dense SET row_vec = '{5,6,7}' WHERE row_id = 3;
SELECT * FROM gpu_matmul('e_dense'::regclass, 'e_sparse'::regclass);
UPDATE e_dense SET row_vec = '{}' WHERE row_id = 3;
SELECT * FROM gpu_matmul('e_dense'::regclass, 'e_sparse'::regclass);
UPDATE e_dense SET row_vec = '{{5,6}}' WHERE row_id = 3;
SELECT * FROM gpu_matmul('e_dense'::regclass, 'e_sparse'::regclass);
DELETE FROM e_dense WHERE row_id = 3;
-- sparse entries: out of range, duplicate, NULLs, none at all
INSERT INTO e_sparse VALUES (0, 1, 1);
SELECT * FROM gpu_matmul('e_dense'::regclass, 'e_sparse'::regclass);
UPDATE e_sparse SET row_id = 1, col_id = -1 WHERE row_id = 0;
SELECT * FROM gpu_matmul('e_dense'::regclass, 'e_sparse'::regclass);
UPDATE e_sparse SET col_id = 1 WHERE col_id = -1;
SELECT * FROM gpu_matmul('e_dense'::regclass, 'e_sparse'::regclass);
UPDATE e_sparse SET value = NULL WHERE row_id = 2;
SELECT * FROM gpu_matmul('e_dense'::regclass, 'e_sparse'::regclass);
DELETE FROM e_sparse;
SELECT * FROM gpu_matmul('e_dense'::regclass, 'e_sparse'::regclass);
DELETE FROM e_dense;
SELECT * FROM gpu_matmul('e_dense'::regclass, 'e_dense'::regclass);
SELECT 1 AS still_alive;
DROP TABLE e_dense, e_sparse, e_neither, e_both, e_scalar_vec, e_array_value, e_int_vec,
           e_text_id, e_float_col;
DROP SEQUENCE e_seq;
