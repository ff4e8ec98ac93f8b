/* pg_gpu 1.4 -> 1.5: a Citus node's share of a distributed k-means (gpu_kmeans_node_*) */

\echo Use "ALTER EXTENSION pg_gpu UPDATE TO '1.5'" to load this file. \quit

-- A Citus node's share of a distributed k-means (src/citus_node.c): called by
-- the coordinator's pg_gpu over libpq, one connection a node, during one
-- call of gpu_kmeans, gpu_kmeans_fit, gpu_kmeans_assign or gpu_kmeans_apply
-- on a distributed table.  Not meant to be called by hand.  Centroids, sums
-- and sample rows travel as bytea of big-endian doubles (float8send's form),
-- which costs far less to send and receive than a float8[] of as many.

CREATE FUNCTION gpu_kmeans_node_load(
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

COMMENT ON FUNCTION gpu_kmeans_node_load(regclass[], text[], text, text, integer, double precision[], double precision[]) IS
'internal (a distributed k-means on Citus): reads this node''s shards into this session''s GPU or CPU until gpu_kmeans_node_close or the session''s end';

CREATE FUNCTION gpu_kmeans_node_sample(seed bigint, first bigint, rate double precision)
RETURNS bytea
AS 'MODULE_PATHNAME', 'gpu_kmeans_node_sample'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION gpu_kmeans_node_sample(bigint, bigint, double precision) IS
'internal (a distributed k-means on Citus): the loaded rows of the seeding sample, rows x values as big-endian doubles';

CREATE FUNCTION gpu_kmeans_node_step(
    centroids bytea,
    begin boolean,
    OUT sums bytea,
    OUT counts bigint[],
    OUT inertia double precision,
    OUT changed bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'gpu_kmeans_node_step'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION gpu_kmeans_node_step(bytea, boolean) IS
'internal (a distributed k-means on Citus): the loaded rows labelled by the centroids (k x d big-endian doubles), their per-cluster sums (the same) and counts';

CREATE FUNCTION gpu_kmeans_node_labels(centroids bytea)
RETURNS TABLE(ids bigint[], clusters integer[], distances double precision[])
AS 'MODULE_PATHNAME', 'gpu_kmeans_node_labels'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION gpu_kmeans_node_labels(bytea) IS
'internal (a distributed k-means on Citus): every loaded row''s id, nearest centroid and distance, in chunks';

CREATE FUNCTION gpu_kmeans_node_close()
RETURNS void
AS 'MODULE_PATHNAME', 'gpu_kmeans_node_close'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION gpu_kmeans_node_close() IS
'internal (a distributed k-means on Citus): frees the rows gpu_kmeans_node_load read';
