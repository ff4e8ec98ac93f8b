/* pg_gpu 1.0 -> 1.1: gpu_matmul */

\echo Use "ALTER EXTENSION pg_gpu UPDATE TO '1.1'" to load this file. \quit

CREATE FUNCTION gpu_matmul(a double precision[], b double precision[])
RETURNS double precision[]
AS 'MODULE_PATHNAME', 'gpu_matmul_float8'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION gpu_matmul(double precision[], double precision[]) IS
'matrix product a x b of two-dimensional arrays (m x k times k x n gives m x n), in double precision: cuBLAS DGEMM on the GPU, OpenBLAS on the CPU';

CREATE FUNCTION gpu_matmul(a real[], b real[])
RETURNS real[]
AS 'MODULE_PATHNAME', 'gpu_matmul_float4'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION gpu_matmul(real[], real[]) IS
'matrix product a x b of two-dimensional arrays, in IEEE single precision (TF32 on the GPU only with pg_gpu.allow_tf32): cuBLAS SGEMM on the GPU, OpenBLAS on the CPU';

CREATE FUNCTION gpu_matmul(
    a regclass,
    b regclass,
    a_columns text[] DEFAULT NULL,
    b_columns text[] DEFAULT NULL)
RETURNS TABLE(row_id bigint, row_vec double precision[])
AS 'MODULE_PATHNAME', 'gpu_matmul_tables'
LANGUAGE C STABLE PARALLEL UNSAFE ROWS 1000;

COMMENT ON FUNCTION gpu_matmul(regclass, regclass, text[], text[]) IS
'matrix product of two matrix tables, dense (row_id, row_vec) or sparse (row_id, col_id, value); a_columns/b_columns name other columns; result rows (row_id 1..m, row_vec), in double precision';
