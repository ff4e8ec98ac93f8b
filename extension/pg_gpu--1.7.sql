/* pg_gpu 1.7 */

\echo Use "CREATE EXTENSION pg_gpu" to load this file. \quit

-- the planner's row estimate of gpu_kmeans and gpu_kmeans_assign: their relation's rows
CREATE FUNCTION pg_gpu_rows_support(internal)
RETURNS internal
AS 'MODULE_PATHNAME', 'pg_gpu_rows_support'
LANGUAGE C STRICT;

COMMENT ON FUNCTION pg_gpu_rows_support(internal) IS
'planner support for gpu_kmeans and gpu_kmeans_assign: estimates their rows as those of the relation they read';

CREATE FUNCTION gpu_kmeans(
    relation regclass,
    k integer,
    columns text[] DEFAULT NULL,
    id_column text DEFAULT NULL,
    max_iter integer DEFAULT 300,
    tol double precision DEFAULT 1e-4,
    init text DEFAULT 'k-means++',
    init_centroids double precision[] DEFAULT NULL,
    seed bigint DEFAULT 0,
    metric text DEFAULT 'euclidean',
    n_init integer DEFAULT 1,
    scale text DEFAULT 'none')
RETURNS TABLE(id bigint, cluster integer)
AS 'MODULE_PATHNAME', 'gpu_kmeans'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1000 SUPPORT pg_gpu_rows_support;

COMMENT ON FUNCTION gpu_kmeans(regclass, integer, text[], text, integer, double precision, text, double precision[], bigint, text, integer, text) IS
'k-means clustering of a relation''s numeric columns, one vector column (real[], double precision[], pgvector vector/halfvec) or PostGIS points, Euclidean or cosine (spherical), columns scaled or not, Lloyd with k-means++ or k-means|| seeding (n_init starts, the best kept), on the GPU or the CPU without one: (id, cluster) for every row, clusters 1..k, NULL for unusable rows';

CREATE FUNCTION gpu_kmeans_fit(
    relation regclass,
    k integer,
    columns text[] DEFAULT NULL,
    id_column text DEFAULT NULL,
    max_iter integer DEFAULT 300,
    tol double precision DEFAULT 1e-4,
    init text DEFAULT 'k-means++',
    init_centroids double precision[] DEFAULT NULL,
    seed bigint DEFAULT 0,
    metric text DEFAULT 'euclidean',
    n_init integer DEFAULT 1,
    scale text DEFAULT 'none',
    memberships boolean DEFAULT false)
RETURNS TABLE(centroids double precision[], sizes bigint[], inertia double precision,
              iterations integer, converged boolean, device text, model jsonb,
              ids bigint[], clusters integer[])
AS 'MODULE_PATHNAME', 'gpu_kmeans_fit'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1;

COMMENT ON FUNCTION gpu_kmeans_fit(regclass, integer, text[], text, integer, double precision, text, double precision[], bigint, text, integer, text, boolean) IS
'k-means model of a relation''s numeric columns, one vector column or PostGIS points, Euclidean or cosine, the best of n_init starts: k x d centroids (in the columns'' units, in the order of columns; cosine: unit length), cluster sizes, inertia (of the rows as clustered: scaled where scale is standard; cosine: sum of 1 - cos), iterations, whether it converged, the device used, the model (jsonb) that gpu_kmeans_apply and gpu_kmeans_predict apply, and with memberships every row''s id and cluster (as gpu_kmeans returns them) in two arrays';

CREATE FUNCTION gpu_kmeans_apply(
    relation regclass,
    model jsonb,
    id_column text DEFAULT NULL)
RETURNS TABLE(id bigint, cluster integer, distance double precision)
AS 'MODULE_PATHNAME', 'gpu_kmeans_apply'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1000 SUPPORT pg_gpu_rows_support;

COMMENT ON FUNCTION gpu_kmeans_apply(regclass, jsonb, text) IS
'nearest centroid of a model (gpu_kmeans_fit''s model column) for every row of a relation, by the model''s columns, metric and scaling, on the GPU or the CPU: (id, cluster 1..k, distance as compared: scaled where the model scales), NULL for unusable rows';

CREATE FUNCTION gpu_kmeans_predict(model jsonb, x anyelement)
RETURNS integer
AS 'MODULE_PATHNAME', 'gpu_kmeans_predict'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION gpu_kmeans_predict(jsonb, anyelement) IS
'the cluster (1..k) of one row under a model, on the CPU: x is a row with the model''s columns (gpu_kmeans_predict(model, t) FROM t), an array of their values in order, a vector or a point; NULL for a row with a NULL, NaN or infinite value';

CREATE FUNCTION gpu_kmeans_choose_k(
    relation regclass,
    ks integer[],
    columns text[] DEFAULT NULL,
    max_iter integer DEFAULT 300,
    tol double precision DEFAULT 1e-4,
    init text DEFAULT 'k-means++',
    seed bigint DEFAULT 0,
    metric text DEFAULT 'euclidean',
    n_init integer DEFAULT 1,
    scale text DEFAULT 'none',
    sample_size integer DEFAULT 2000)
RETURNS TABLE(k integer, inertia double precision, silhouette double precision,
              iterations integer, converged boolean, sample_rows integer, model jsonb)
AS 'MODULE_PATHNAME', 'gpu_kmeans_choose_k'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 10;

COMMENT ON FUNCTION gpu_kmeans_choose_k(regclass, integer[], text[], integer, double precision, text, bigint, text, integer, text, integer) IS
'k-means for each k of ks on one read of the relation: inertia, the mean silhouette of about sample_size rows (Euclidean, or 1 - cos), iterations, convergence, the rows sampled, and each fit''s model';

CREATE FUNCTION gpu_kmeans_assign(
    relation regclass,
    centroids double precision[],
    columns text[] DEFAULT NULL,
    id_column text DEFAULT NULL,
    metric text DEFAULT 'euclidean')
RETURNS TABLE(id bigint, cluster integer, distance double precision)
AS 'MODULE_PATHNAME', 'gpu_kmeans_assign'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1000 SUPPORT pg_gpu_rows_support;

COMMENT ON FUNCTION gpu_kmeans_assign(regclass, double precision[], text[], text, text) IS
'nearest of the given k x d centroids for every row of a relation''s numeric columns or vector column: (id, cluster 1..k, Euclidean distance, or with metric cosine the cosine distance 1 - cos)';

CREATE FUNCTION gpu_info()
RETURNS TABLE(device_id integer, name text, compute_capability text, multiprocessors integer,
              memory_total_mb bigint, memory_free_mb bigint, driver_version text,
              runtime_version text)
AS 'MODULE_PATHNAME', 'gpu_info'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1;

COMMENT ON FUNCTION gpu_info() IS
'the GPUs this backend sees (none: no rows): name, compute capability, memory, driver and runtime versions';

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

-- A Citus node's share of a distributed k-means (src/worker.c): called by
-- the coordinator's pg_gpu over libpq, one connection a node, in one
-- transaction, during one call of gpu_kmeans, gpu_kmeans_fit,
-- gpu_kmeans_assign or gpu_kmeans_apply on a distributed table.  Internal:
-- PUBLIC may not execute them; a Citus deployment grants EXECUTE, on every
-- node, to the roles that run distributed fits.  The rows loaded live until
-- the transaction ends and serve only the role that loaded them.
-- Centroids, sums and sample rows travel as bytea of big-endian doubles
-- (float8send's form), which costs far less to send and receive than a
-- float8[] of as many.

CREATE FUNCTION pg_gpu_node_kmeans_load(
    shards regclass[],
    columns text[],
    id_column text,
    metric text,
    dims integer,
    mean double precision[],
    std double precision[],
    OUT rows bigint,
    OUT invalid bigint,
    OUT device text)
RETURNS record
AS 'MODULE_PATHNAME', 'gpu_kmeans_node_load'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION pg_gpu_node_kmeans_load(regclass[], text[], text, text, integer, double precision[], double precision[]) IS
'internal (a distributed k-means on Citus): reads this node''s shards into this backend''s GPU or CPU until pg_gpu_node_kmeans_close or the transaction''s end';

CREATE FUNCTION pg_gpu_node_kmeans_sample(seed bigint, first bigint, rate double precision)
RETURNS bytea
AS 'MODULE_PATHNAME', 'gpu_kmeans_node_sample'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION pg_gpu_node_kmeans_sample(bigint, bigint, double precision) IS
'internal (a distributed k-means on Citus): the loaded rows of the seeding sample, rows x values as big-endian doubles';

CREATE FUNCTION pg_gpu_node_kmeans_step(
    centroids bytea,
    begin boolean,
    OUT sums bytea,
    OUT counts bigint[],
    OUT inertia double precision,
    OUT changed bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'gpu_kmeans_node_step'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION pg_gpu_node_kmeans_step(bytea, boolean) IS
'internal (a distributed k-means on Citus): the loaded rows labelled by the centroids (k x d big-endian doubles), their per-cluster sums (the same) and counts';

CREATE FUNCTION pg_gpu_node_kmeans_labels(centroids bytea)
RETURNS TABLE(ids bigint[], clusters integer[], distances double precision[])
AS 'MODULE_PATHNAME', 'gpu_kmeans_node_labels'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION pg_gpu_node_kmeans_labels(bytea) IS
'internal (a distributed k-means on Citus): every loaded row''s id, nearest centroid and distance, in chunks';

CREATE FUNCTION pg_gpu_node_kmeans_close()
RETURNS void
AS 'MODULE_PATHNAME', 'gpu_kmeans_node_close'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION pg_gpu_node_kmeans_close() IS
'internal (a distributed k-means on Citus): frees the rows pg_gpu_node_kmeans_load read';

-- A Citus node's share of gpu_matmul(a regclass, b regclass) where a is a
-- distributed dense matrix table (src/worker.c): called by the
-- coordinator's pg_gpu over libpq, one connection a node, in one
-- transaction, during one call.  Internal, as above.  b and the product's
-- rows travel as bytea of big-endian doubles.

CREATE FUNCTION pg_gpu_node_matmul_load(
    shards regclass[],
    columns text[],
    OUT rows bigint,
    OUT first_id bigint,
    OUT min_id bigint,
    OUT max_id bigint,
    OUT len integer,
    OUT device text)
RETURNS record
AS 'MODULE_PATHNAME', 'gpu_matmul_node_load'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION pg_gpu_node_matmul_load(regclass[], text[]) IS
'internal (gpu_matmul of a Citus distributed table): reads this node''s rows of a (its shards'' id and vector columns) into this backend''s GPU or CPU workspace until pg_gpu_node_matmul_product or the transaction''s end';

CREATE FUNCTION pg_gpu_node_matmul_product(b bytea, k integer, n integer)
RETURNS SETOF bytea
AS 'MODULE_PATHNAME', 'gpu_matmul_node_product'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION pg_gpu_node_matmul_product(bytea, integer, integer) IS
'internal (gpu_matmul of a Citus distributed table): the loaded rows of a times b (k x n big-endian doubles), in pieces of their row ids (big-endian bigints) then their rows; then frees the loaded rows';

REVOKE EXECUTE ON FUNCTION
    pg_gpu_node_kmeans_load(regclass[], text[], text, text, integer, double precision[], double precision[]),
    pg_gpu_node_kmeans_sample(bigint, bigint, double precision),
    pg_gpu_node_kmeans_step(bytea, boolean),
    pg_gpu_node_kmeans_labels(bytea),
    pg_gpu_node_kmeans_close(),
    pg_gpu_node_matmul_load(regclass[], text[]),
    pg_gpu_node_matmul_product(bytea, integer, integer)
FROM PUBLIC;
