/* pg_gpu 1.7 -> 1.8: one k-means driver for every placement; a Citus node draws its seeding rows by their content and gives its farthest rows to an emptied cluster */

\echo Use "ALTER EXTENSION pg_gpu UPDATE TO '1.8'" to load this file. \quit

-- The seeding sample is drawn by each row's content key (no index in the
-- union of the nodes' rows any more), so the same rows give the same fit on
-- Citus as in one table.
DROP FUNCTION pg_gpu_node_kmeans_sample(bigint, bigint, double precision);

CREATE FUNCTION pg_gpu_node_kmeans_sample(seed bigint, rate double precision)
RETURNS bytea
AS 'MODULE_PATHNAME', 'gpu_kmeans_node_sample'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION pg_gpu_node_kmeans_sample(bigint, double precision) IS
'internal (a distributed k-means on Citus): the loaded rows whose content key the seed draws at the rate, rows x values as big-endian doubles';

CREATE FUNCTION pg_gpu_node_kmeans_farthest(
    m integer,
    OUT rows bytea,
    OUT distances double precision[],
    OUT keys bigint[])
RETURNS record
AS 'MODULE_PATHNAME', 'gpu_kmeans_node_farthest'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION pg_gpu_node_kmeans_farthest(integer) IS
'internal (a distributed k-means on Citus): the m loaded rows farthest from their centroids in the last step (big-endian doubles), their squared distances and content keys, for emptied clusters';

REVOKE EXECUTE ON FUNCTION
    pg_gpu_node_kmeans_sample(bigint, double precision),
    pg_gpu_node_kmeans_farthest(integer)
FROM PUBLIC;
