-- gpu_matmul on arrays: hand-checkable products, both element types, the
-- per-row form, IEEE special values, and larger products against SQL.
SELECT gpu_matmul(ARRAY[[1,2],[3,4]]::float8[], ARRAY[[5],[6]]::float8[]);
SELECT gpu_matmul(ARRAY[[1,2],[3,4]]::real[], ARRAY[[5],[6]]::real[]);
SELECT pg_typeof(gpu_matmul(ARRAY[[1]]::real[], ARRAY[[2]]::real[]));
-- 1x1, dot product (1xn by nx1), outer product (nx1 by 1xn), identity
SELECT gpu_matmul(ARRAY[[3]]::float8[], ARRAY[[-4]]::float8[]);
SELECT gpu_matmul(ARRAY[[1,2,3]]::float8[], ARRAY[[4],[5],[6]]::float8[]);
SELECT gpu_matmul(ARRAY[[1],[2],[3]]::float8[], ARRAY[[4,5]]::float8[]);
SELECT gpu_matmul(ARRAY[[1,0],[0,1]]::float8[], ARRAY[[7,8,9],[10,11,12]]::float8[]);
SELECT gpu_matmul(ARRAY[[0.5,0.25]]::real[], ARRAY[[2,4],[8,16]]::real[]);
-- any lower bounds in; lower bounds 1 out
SELECT gpu_matmul('[0:1][5:6]={{1,2},{3,4}}'::float8[], '[-3:-2][0:0]={{1},{1}}'::float8[]) AS r,
       array_lower(gpu_matmul('[0:1][5:6]={{1,2},{3,4}}'::float8[], '[-3:-2][0:0]={{1},{1}}'::float8[]), 1) AS lb;
-- STRICT: NULL in, NULL out
SELECT gpu_matmul(NULL::float8[], ARRAY[[1]]::float8[]) IS NULL AS a_null,
       gpu_matmul(ARRAY[[1]]::real[], NULL::real[]) IS NULL AS b_null;
-- NaN and Infinity propagate as in IEEE arithmetic (Infinity x 0 = NaN)
SELECT gpu_matmul(ARRAY[['NaN', 1], [1, 1]]::float8[], ARRAY[[1], [1]]::float8[]);
SELECT gpu_matmul(ARRAY[['Infinity', 1]]::float8[], ARRAY[[0, 1], [1, 1]]::float8[]);
SELECT gpu_matmul(ARRAY[['-Infinity', 1]]::real[], ARRAY[[2], [1]]::real[]);
-- float8 keeps what float4 would round: 1 + 2^-40
SELECT gpu_matmul(ARRAY[[1, 1]]::float8[], ARRAY[[1], [2^(-40)]]::float8[]) = ARRAY[[1 + 2^(-40)]]::float8[] AS exact;

-- one product per row
CREATE TABLE layers (id int, w float8[], x float8[]);
INSERT INTO layers VALUES
  (1, '{{1,2},{3,4}}', '{{1},{1}}'),
  (2, '{{2,0},{0,2}}', '{{1,2},{3,4}}'),
  (3, '{{1,1,1}}', '{{1},{2},{3}}'),
  (4, NULL, '{{1}}');
SELECT id, gpu_matmul(w, x) FROM layers ORDER BY id;
DROP TABLE layers;

-- larger, odd shapes against the product written in SQL (join and sum)
CREATE FUNCTION mm_matrix(m int, n int, seed int) RETURNS float8[] LANGUAGE sql AS
$$ SELECT array_agg(r ORDER BY i) FROM (
     SELECT i, array_agg(sin(i * 7.0 + j * 3.0 + seed) ORDER BY j) r
     FROM generate_series(1, m) i, generate_series(1, n) j GROUP BY i) s $$;
CREATE FUNCTION mm_reference(a float8[], b float8[]) RETURNS TABLE(i int, j int, v float8, mag float8)
LANGUAGE sql AS
$$ SELECT i, j, sum(a[i][p] * b[p][j]), sum(abs(a[i][p] * b[p][j]))
   FROM generate_series(1, array_length(a, 1)) i, generate_series(1, array_length(b, 2)) j,
        generate_series(1, array_length(a, 2)) p
   GROUP BY i, j $$;
-- the largest error relative to sum |a_ip b_pj| (the bound of any summation order)
CREATE FUNCTION mm_error(a float8[], b float8[], c anyarray) RETURNS float8 LANGUAGE sql AS
$$ SELECT max(abs(c[i][j] - v) / mag) FROM mm_reference(a, b) $$;
SELECT mm_error(mm_matrix(17, 33, 1), mm_matrix(33, 5, 2),
                gpu_matmul(mm_matrix(17, 33, 1), mm_matrix(33, 5, 2))) < 1e-12 AS float8_17x33x5;
SELECT mm_error(mm_matrix(1, 200, 3), mm_matrix(200, 1, 4),
                gpu_matmul(mm_matrix(1, 200, 3), mm_matrix(200, 1, 4))) < 1e-12 AS float8_dot_200;
SELECT mm_error(mm_matrix(40, 70, 5), mm_matrix(70, 60, 6),
                gpu_matmul(mm_matrix(40, 70, 5), mm_matrix(70, 60, 6))) < 1e-12 AS float8_40x70x60;
SELECT mm_error(mm_matrix(40, 70, 5), mm_matrix(70, 60, 6),
                gpu_matmul(mm_matrix(40, 70, 5)::real[], mm_matrix(70, 60, 6)::real[])) < 1e-5 AS float4_40x70x60;
-- products too large for one GPU block of pg_gpu.matmul_gpu_memory stream
-- through in blocks (on the CPU the setting changes nothing): integer
-- values, so every summation order gives the same exact result
CREATE TABLE mm_big AS
SELECT (SELECT array_agg(r ORDER BY i) FROM (SELECT i, array_agg(((i * 7 + j * 3) % 11 - 5)::float8 ORDER BY j) r
        FROM generate_series(1, 300) i, generate_series(1, 400) j GROUP BY i) s) AS a,
       (SELECT array_agg(r ORDER BY i) FROM (SELECT i, array_agg(((i * 5 + j * 2) % 13 - 6)::float8 ORDER BY j) r
        FROM generate_series(1, 400) i, generate_series(1, 500) j GROUP BY i) s) AS b;
SET pg_gpu.matmul_gpu_memory = '1MB';
CREATE TABLE mm_blocked AS SELECT gpu_matmul(a, b) AS c FROM mm_big;
RESET pg_gpu.matmul_gpu_memory;
SET pg_gpu.device = cpu;
SELECT c = gpu_matmul(a, b) AS blocked_equals_cpu, array_dims(c),
       c[1][1] = (SELECT sum(a[1][p] * b[p][1]) FROM generate_series(1, 400) p) AS c11,
       c[300][500] = (SELECT sum(a[300][p] * b[p][500]) FROM generate_series(1, 400) p) AS c_last
FROM mm_big, mm_blocked;
RESET pg_gpu.device;
DROP TABLE mm_big, mm_blocked;
-- b_transposed: b's rows are the right operand's columns, a x b^T
-- {{1,2},{3,4}} x {{5,6},{7,8}}^T = {{17,23},{39,53}}
SELECT gpu_matmul(ARRAY[[1,2],[3,4]]::float8[], ARRAY[[5,6],[7,8]]::float8[], b_transposed => true);
SELECT gpu_matmul(ARRAY[[1,2],[3,4]]::real[], ARRAY[[5,6],[7,8]]::real[], true);
-- 1 x 3 times (2 x 3)^T: 1 x 2
SELECT gpu_matmul(ARRAY[[1,2,3]]::float8[], ARRAY[[1,0,0],[1,1,1]]::float8[], b_transposed => true);
-- (the array forms are strict: a NULL argument, b_transposed too, gives NULL)
SELECT gpu_matmul(ARRAY[[1,2]]::float8[], ARRAY[[5,6]]::float8[], b_transposed => NULL) IS NULL AS null_gives_null;
SELECT gpu_matmul(ARRAY[[1,2]]::float8[], ARRAY[[5,6]]::float8[], b_transposed => false) AS not_conformable;
SELECT gpu_matmul(ARRAY[[1,2]]::float8[], ARRAY[[5,6,7]]::float8[], b_transposed => true) AS not_conformable;
SELECT gpu_matmul(ARRAY[[1,2]]::float8[], ARRAY[[5,6]]::float8[], NULL) IS NULL AS strict_null;
-- a larger a x b^T: the product of b transposed in SQL, to the bit, on both
-- devices (the CPU's and the GPU's above 256^3 multiply-adds)
CREATE TABLE mm_tt AS
SELECT (SELECT array_agg(r ORDER BY i) FROM (SELECT i, array_agg(((i * 7 + j * 3) % 11 - 5)::float8 ORDER BY j) r
        FROM generate_series(1, 300) i, generate_series(1, 200) j GROUP BY i) s) AS a,
       (SELECT array_agg(r ORDER BY i) FROM (SELECT i, array_agg(((i * 5 + j * 2) % 13 - 6 + 0.25)::float8 ORDER BY j) r
        FROM generate_series(1, 400) i, generate_series(1, 200) j GROUP BY i) s) AS b,
       -- the same values with i and j swapped: b transposed
       (SELECT array_agg(r ORDER BY j) FROM (SELECT j, array_agg(((i * 5 + j * 2) % 13 - 6 + 0.25)::float8 ORDER BY i) r
        FROM generate_series(1, 400) i, generate_series(1, 200) j GROUP BY j) s) AS b_t;
SELECT array_dims(gpu_matmul(a, b, b_transposed => true)) AS dims,
       gpu_matmul(a, b, b_transposed => true) = gpu_matmul(a, b_t) AS same_as_transposed,
       gpu_matmul(a::real[], b::real[], b_transposed => true) = gpu_matmul(a::real[], b_t::real[]) AS same_real
FROM mm_tt;
SET pg_gpu.device = cpu;
SELECT gpu_matmul(a, b, b_transposed => true) = gpu_matmul(a, b_t) AS same_on_cpu FROM mm_tt;
RESET pg_gpu.device;
DROP TABLE mm_tt;
DROP FUNCTION mm_error(float8[], float8[], anyarray), mm_reference(float8[], float8[]), mm_matrix(int, int, int);
