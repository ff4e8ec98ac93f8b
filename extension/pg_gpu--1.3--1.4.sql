/* pg_gpu 1.3 -> 1.4: models (scale, gpu_kmeans_fit's model and memberships, gpu_kmeans_apply, gpu_kmeans_predict), gpu_kmeans_choose_k */

\echo Use "ALTER EXTENSION pg_gpu UPDATE TO '1.4'" to load this file. \quit

-- a new trailing argument (and gpu_kmeans_fit a new column): the functions
-- are replaced (objects that depend on them must be dropped first; the C
-- library serves both signatures meanwhile)
DROP FUNCTION gpu_kmeans(regclass, integer, text[], text, integer, double precision, text, double precision[], bigint, text, integer);
DROP FUNCTION gpu_kmeans_fit(regclass, integer, text[], text, integer, double precision, text, double precision[], bigint, text, integer);

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

