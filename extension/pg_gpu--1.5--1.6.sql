/* pg_gpu 1.5 -> 1.6: a Citus node's share of gpu_matmul on a distributed table (gpu_matmul_node_*) */

\echo Use "ALTER EXTENSION pg_gpu UPDATE TO '1.6'" to load this file. \quit

-- A Citus node's share of gpu_matmul(a regclass, b regclass) where a is a
-- distributed dense matrix table (src/citus_node.c): called by the
-- coordinator's pg_gpu over libpq, one connection a node, during one call.
-- Not meant to be called by hand.  b and the product's rows travel as bytea
-- of big-endian doubles.

CREATE FUNCTION gpu_matmul_node_load(
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

COMMENT ON FUNCTION gpu_matmul_node_load(regclass[], text[]) IS
'internal (gpu_matmul of a Citus distributed table): reads this node''s rows of a (its shards'' id and vector columns) into this session''s GPU or CPU workspace until gpu_matmul_node_product or the session''s end';

CREATE FUNCTION gpu_matmul_node_product(b bytea, k integer, n integer)
RETURNS SETOF bytea
AS 'MODULE_PATHNAME', 'gpu_matmul_node_product'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION gpu_matmul_node_product(bytea, integer, integer) IS
'internal (gpu_matmul of a Citus distributed table): the loaded rows of a times b (k x n big-endian doubles), in pieces of their row ids (big-endian bigints) then their rows; then frees them';
