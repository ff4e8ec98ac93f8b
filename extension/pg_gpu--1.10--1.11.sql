/* pg_gpu 1.10 -> 1.11: ids of any type (uuid, text, numeric, a composite through a view); gpu_knn; gpu_kmeans_transform; algorithm => 'hierarchical'; weight_column */

\echo Use "ALTER EXTENSION pg_gpu UPDATE TO '1.11'" to load this file. \quit

-- algorithm => 'lloyd' | 'hierarchical' and weight_column => 'w', new
-- trailing arguments of gpu_kmeans and gpu_kmeans_fit (weight_column of
-- gpu_kmeans_choose_k too): the functions are replaced (objects that
-- depend on them must be dropped first; the C library serves both
-- signatures meanwhile)
DROP FUNCTION gpu_kmeans(regclass, integer, text[], text, integer, double precision, text, double precision[], bigint, text, integer, text, bigint);
DROP FUNCTION gpu_kmeans_fit(regclass, integer, text[], text, integer, double precision, text, double precision[], bigint, text, integer, text, boolean, bigint);
DROP FUNCTION gpu_kmeans_choose_k(regclass, integer[], text[], integer, double precision, text, bigint, text, integer, text, integer, bigint);

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
    scale text DEFAULT 'none',
    sample bigint DEFAULT NULL,
    algorithm text DEFAULT 'lloyd',
    weight_column text DEFAULT NULL)
RETURNS TABLE(id bigint, cluster integer)
AS 'MODULE_PATHNAME', 'gpu_kmeans'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1000 SUPPORT pg_gpu_rows_support;

COMMENT ON FUNCTION gpu_kmeans(regclass, integer, text[], text, integer, double precision, text, double precision[], bigint, text, integer, text, bigint, text, text) IS
'k-means clustering of a relation''s numeric columns, one vector column (real[], double precision[], pgvector vector/halfvec) or PostGIS points, Euclidean or cosine (spherical), columns scaled or not, Lloyd with k-means++ or k-means|| seeding (n_init starts, the best kept) or hierarchical for very large k, rows weighted by weight_column (or points by M) or not, on every row or on a sample of rows drawn by the seed, on the GPU or the CPU without one: (id, cluster) for every row, clusters 1..k, NULL for unusable rows';

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
    memberships boolean DEFAULT false,
    sample bigint DEFAULT NULL,
    algorithm text DEFAULT 'lloyd',
    weight_column text DEFAULT NULL)
RETURNS TABLE(centroids double precision[], sizes bigint[], inertia double precision,
              iterations integer, converged boolean, device text, model jsonb,
              ids bigint[], clusters integer[])
AS 'MODULE_PATHNAME', 'gpu_kmeans_fit'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1;

COMMENT ON FUNCTION gpu_kmeans_fit(regclass, integer, text[], text, integer, double precision, text, double precision[], bigint, text, integer, text, boolean, bigint, text, text) IS
'k-means model of a relation''s numeric columns, one vector column or PostGIS points, Euclidean or cosine, the best of n_init starts (Lloyd, or hierarchical for very large k), rows weighted by weight_column (or points by M) or not, on every row or on a sample of rows drawn by the seed: k x d centroids (in the columns'' units, in the order of columns; cosine: unit length), cluster sizes and inertia (of the rows fit: scaled where scale is standard; cosine: sum of 1 - cos), iterations, whether it converged, the device used, the model (jsonb) that gpu_kmeans_apply and gpu_kmeans_predict apply, and with memberships every row''s id and cluster (as gpu_kmeans returns them) in two arrays';

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
    sample_size integer DEFAULT 2000,
    sample bigint DEFAULT NULL,
    weight_column text DEFAULT NULL)
RETURNS TABLE(k integer, inertia double precision, silhouette double precision,
              iterations integer, converged boolean, sample_rows integer, model jsonb)
AS 'MODULE_PATHNAME', 'gpu_kmeans_choose_k'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 10;

COMMENT ON FUNCTION gpu_kmeans_choose_k(regclass, integer[], text[], integer, double precision, text, bigint, text, integer, text, integer, bigint, text) IS
'k-means for each k of ks on one read of the relation (every row, or a sample of rows drawn by the seed; rows weighted by weight_column, or points by M, or not): inertia (weighted), the mean silhouette of about sample_size of the rows fit (Euclidean, or 1 - cos; unweighted), iterations, convergence, the rows sampled for the silhouette, and each fit''s model';

-- The keyed overloads: id_type => NULL::uuid (any type with equality) gives
-- the ids in a column of that type, as the id column (or primary key) holds
-- them.  SQL types a function's result by its arguments, not by a relation
-- named at run time, hence the argument.  It comes after the arguments
-- without defaults so that every call of the overloads without it still
-- finds them (which return bigint ids of an integer column).

CREATE FUNCTION gpu_kmeans(
    relation regclass,
    k integer,
    id_type anyelement,
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
    sample bigint DEFAULT NULL,
    algorithm text DEFAULT 'lloyd',
    weight_column text DEFAULT NULL)
RETURNS TABLE(id anyelement, cluster integer)
AS 'MODULE_PATHNAME', 'gpu_kmeans_keyed'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1000 SUPPORT pg_gpu_rows_support;

COMMENT ON FUNCTION gpu_kmeans(regclass, integer, anyelement, text[], text, integer, double precision, text, double precision[], bigint, text, integer, text, bigint, text, text) IS
'gpu_kmeans with ids of any type: id_type => NULL::uuid (the id column''s type) returns (id of that type, cluster) for every row';

CREATE FUNCTION gpu_kmeans_fit(
    relation regclass,
    k integer,
    id_type anyelement,
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
    memberships boolean DEFAULT false,
    sample bigint DEFAULT NULL,
    algorithm text DEFAULT 'lloyd',
    weight_column text DEFAULT NULL)
RETURNS TABLE(centroids double precision[], sizes bigint[], inertia double precision,
              iterations integer, converged boolean, device text, model jsonb,
              ids anyarray, clusters integer[])
AS 'MODULE_PATHNAME', 'gpu_kmeans_fit_keyed'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1;

COMMENT ON FUNCTION gpu_kmeans_fit(regclass, integer, anyelement, text[], text, integer, double precision, text, double precision[], bigint, text, integer, text, boolean, bigint, text, text) IS
'gpu_kmeans_fit with ids of any type: id_type => NULL::uuid (the id column''s type); with memberships, ids is an array of that type';

CREATE FUNCTION gpu_kmeans_assign(
    relation regclass,
    centroids double precision[],
    id_type anyelement,
    columns text[] DEFAULT NULL,
    id_column text DEFAULT NULL,
    metric text DEFAULT 'euclidean')
RETURNS TABLE(id anyelement, cluster integer, distance double precision)
AS 'MODULE_PATHNAME', 'gpu_kmeans_assign_keyed'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1000 SUPPORT pg_gpu_rows_support;

COMMENT ON FUNCTION gpu_kmeans_assign(regclass, double precision[], anyelement, text[], text, text) IS
'gpu_kmeans_assign with ids of any type: id_type => NULL::uuid (the id column''s type) returns (id of that type, cluster, distance)';

CREATE FUNCTION gpu_kmeans_apply(
    relation regclass,
    model jsonb,
    id_type anyelement,
    id_column text DEFAULT NULL)
RETURNS TABLE(id anyelement, cluster integer, distance double precision)
AS 'MODULE_PATHNAME', 'gpu_kmeans_apply_keyed'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1000 SUPPORT pg_gpu_rows_support;

COMMENT ON FUNCTION gpu_kmeans_apply(regclass, jsonb, anyelement, text) IS
'gpu_kmeans_apply with ids of any type: id_type => NULL::uuid (the id column''s type) returns (id of that type, cluster, distance)';

-- A Citus node's labels: ids passed by reference travel as text in keys.
DROP FUNCTION pg_gpu_node_kmeans_labels(bytea);

CREATE FUNCTION pg_gpu_node_kmeans_labels(centroids bytea)
RETURNS TABLE(ids bigint[], clusters integer[], distances double precision[], keys text[])
AS 'MODULE_PATHNAME', 'gpu_kmeans_node_labels'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION pg_gpu_node_kmeans_labels(bytea) IS
'internal (a distributed k-means on Citus): every loaded row''s id (by value in ids, else as text in keys), nearest centroid and distance, in chunks';

REVOKE EXECUTE ON FUNCTION pg_gpu_node_kmeans_labels(bytea) FROM PUBLIC;

-- A Citus node's weighted rows: the load reads a weight column (or the
-- points' M), the step answers the clusters' weights too, and the sample's
-- rows carry their weight as a last value.
DROP FUNCTION pg_gpu_node_kmeans_load(regclass[], text[], text, text, integer, double precision[], double precision[]);
DROP FUNCTION pg_gpu_node_kmeans_step(bytea, boolean);

CREATE FUNCTION pg_gpu_node_kmeans_load(
    shards regclass[],
    columns text[],
    id_column text,
    metric text,
    dims integer,
    mean double precision[],
    std double precision[],
    weight_column text DEFAULT NULL,
    m_weights boolean DEFAULT false,
    OUT rows bigint,
    OUT invalid bigint,
    OUT device text)
RETURNS record
AS 'MODULE_PATHNAME', 'gpu_kmeans_node_load'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION pg_gpu_node_kmeans_load(regclass[], text[], text, text, integer, double precision[], double precision[], text, boolean) IS
'internal (a distributed k-means on Citus): reads this node''s shards (and the rows'' weights: weight_column, or with m_weights the points'' M) into this backend''s GPU or CPU until pg_gpu_node_kmeans_close or the transaction''s end';

CREATE FUNCTION pg_gpu_node_kmeans_step(
    centroids bytea,
    begin boolean,
    OUT sums bytea,
    OUT counts bigint[],
    OUT inertia double precision,
    OUT changed bigint,
    OUT mass bytea)
RETURNS record
AS 'MODULE_PATHNAME', 'gpu_kmeans_node_step'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION pg_gpu_node_kmeans_step(bytea, boolean) IS
'internal (a distributed k-means on Citus): the loaded rows labelled by the centroids (k x d big-endian doubles), their per-cluster sums (the same; weighted rows: of weight x row), counts, and for weighted rows the clusters'' weights (k big-endian doubles; else NULL)';

REVOKE EXECUTE ON FUNCTION
    pg_gpu_node_kmeans_load(regclass[], text[], text, text, integer, double precision[], double precision[], text, boolean),
    pg_gpu_node_kmeans_step(bytea, boolean)
FROM PUBLIC;

-- Nearest neighbours of many rows at once.
CREATE FUNCTION gpu_knn(
    queries regclass,
    base regclass,
    k integer,
    columns text[] DEFAULT NULL,
    base_columns text[] DEFAULT NULL,
    metric text DEFAULT 'euclidean',
    query_id_column text DEFAULT NULL,
    base_id_column text DEFAULT NULL)
RETURNS TABLE(query_id bigint, rank integer, base_id bigint, distance double precision)
AS 'MODULE_PATHNAME', 'gpu_knn'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1000;

COMMENT ON FUNCTION gpu_knn(regclass, regclass, integer, text[], text[], text, text, text) IS
'exact k nearest neighbours: for every usable row of queries its k nearest usable rows of base (euclidean distance, cosine distance 1 - cos, or the negative inner product, as pgvector''s <->, <=> and <#>), rank 1..k, ties to the lower base id, on the GPU or the CPU';

-- gpu_knn with ids of any type: two independent polymorphic families, as the
-- queries and the base may be keyed by different types
CREATE FUNCTION gpu_knn(
    queries regclass,
    base regclass,
    k integer,
    query_id_type anyelement,
    base_id_type anycompatible,
    columns text[] DEFAULT NULL,
    base_columns text[] DEFAULT NULL,
    metric text DEFAULT 'euclidean',
    query_id_column text DEFAULT NULL,
    base_id_column text DEFAULT NULL)
RETURNS TABLE(query_id anyelement, rank integer, base_id anycompatible, distance double precision)
AS 'MODULE_PATHNAME', 'gpu_knn_keyed'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1000;

COMMENT ON FUNCTION gpu_knn(regclass, regclass, integer, anyelement, anycompatible, text[], text[], text, text, text) IS
'gpu_knn with ids of any type: query_id_type => NULL::uuid and base_id_type => NULL::text (the id columns'' types) return the ids as those types; ties to the lower base id by its type''s ordering';

-- gpu_kmeans_transform: every row's distance to each cluster of a model, or to its n nearest
CREATE FUNCTION gpu_kmeans_transform(
    relation regclass,
    model jsonb,
    n integer DEFAULT NULL,
    id_column text DEFAULT NULL)
RETURNS TABLE(id bigint, rank integer, cluster integer, distance double precision)
AS 'MODULE_PATHNAME', 'gpu_kmeans_transform'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1000;

COMMENT ON FUNCTION gpu_kmeans_transform(regclass, jsonb, integer, text) IS
'distances to a model''s clusters (scikit-learn''s transform) for every row of a relation, by the model''s columns, metric and scaling, on the GPU or the CPU: the n nearest clusters of each row (every cluster when n is NULL), rank 1..n nearest first, ties to the lower cluster; with n => 1 gpu_kmeans_apply''s cluster and distance; an unusable row once, with rank, cluster and distance NULL';

CREATE FUNCTION gpu_kmeans_transform(
    relation regclass,
    model jsonb,
    id_type anyelement,
    n integer DEFAULT NULL,
    id_column text DEFAULT NULL)
RETURNS TABLE(id anyelement, rank integer, cluster integer, distance double precision)
AS 'MODULE_PATHNAME', 'gpu_kmeans_transform_keyed'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1000;

COMMENT ON FUNCTION gpu_kmeans_transform(regclass, jsonb, anyelement, integer, text) IS
'gpu_kmeans_transform with ids of any type: id_type => NULL::uuid (the id column''s type) returns (id of that type, rank, cluster, distance)';
