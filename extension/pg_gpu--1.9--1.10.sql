/* pg_gpu 1.9 -> 1.10: gpu_matmul(..., b_transposed): A B^T, the usual product of two embedding tables */

\echo Use "ALTER EXTENSION pg_gpu UPDATE TO '1.10'" to load this file. \quit

-- a new trailing argument: the functions are replaced (objects that depend
-- on them must be dropped first; the C library serves both signatures
-- meanwhile)
DROP FUNCTION gpu_matmul(double precision[], double precision[]);
DROP FUNCTION gpu_matmul(real[], real[]);
DROP FUNCTION gpu_matmul(regclass, regclass, text[], text[]);

CREATE FUNCTION gpu_matmul(a double precision[], b double precision[], b_transposed boolean DEFAULT false)
RETURNS double precision[]
AS 'MODULE_PATHNAME', 'gpu_matmul_float8'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION gpu_matmul(double precision[], double precision[], boolean) IS
'matrix product a x b of two-dimensional arrays (m x k times k x n gives m x n; b_transposed: b is n x k and the product a x b^T), in double precision: cuBLAS DGEMM on the GPU, OpenBLAS on the CPU';

CREATE FUNCTION gpu_matmul(a real[], b real[], b_transposed boolean DEFAULT false)
RETURNS real[]
AS 'MODULE_PATHNAME', 'gpu_matmul_float4'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION gpu_matmul(real[], real[], boolean) IS
'matrix product a x b of two-dimensional arrays (b_transposed: a x b^T, b n x k), in IEEE single precision (TF32 on the GPU only with pg_gpu.allow_tf32): cuBLAS SGEMM on the GPU, OpenBLAS on the CPU';

CREATE FUNCTION gpu_matmul(
    a regclass,
    b regclass,
    a_columns text[] DEFAULT NULL,
    b_columns text[] DEFAULT NULL,
    b_transposed boolean DEFAULT false)
RETURNS TABLE(row_id bigint, row_vec double precision[])
AS 'MODULE_PATHNAME', 'gpu_matmul_tables'
LANGUAGE C STABLE PARALLEL UNSAFE ROWS 1000;

COMMENT ON FUNCTION gpu_matmul(regclass, regclass, text[], text[], boolean) IS
'matrix product of two matrix tables, dense (row_id, row_vec) or sparse (row_id, col_id, value); a_columns/b_columns name other columns; b_transposed: b''s rows are the columns of the right operand (a x b^T: two tables of embeddings, every pair''s inner product); result rows (row_id 1..m, row_vec), in double precision';
