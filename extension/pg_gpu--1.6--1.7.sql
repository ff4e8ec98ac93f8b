/* pg_gpu 1.6 -> 1.7: the Citus nodes' functions renamed pg_gpu_node_* (internal, out of \df gpu_*), not executable by PUBLIC, their rows kept for one transaction */

\echo Use "ALTER EXTENSION pg_gpu UPDATE TO '1.7'" to load this file. \quit

DROP FUNCTION gpu_kmeans_node_load(regclass[], text[], text, text, integer, double precision[], double precision[]);
DROP FUNCTION gpu_kmeans_node_sample(bigint, bigint, double precision);
DROP FUNCTION gpu_kmeans_node_step(bytea, boolean);
DROP FUNCTION gpu_kmeans_node_labels(bytea);
DROP FUNCTION gpu_kmeans_node_close();
DROP FUNCTION gpu_matmul_node_load(regclass[], text[]);
DROP FUNCTION gpu_matmul_node_product(bytea, integer, integer);

-- A Citus node's share of a distributed k-means (src/citus_node.c): called by
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
-- distributed dense matrix table (src/citus_node.c): called by the
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
