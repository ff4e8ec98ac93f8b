/* pg_gpu 1.8 -> 1.9: sample => m on gpu_kmeans, gpu_kmeans_fit and gpu_kmeans_choose_k */

\echo Use "ALTER EXTENSION pg_gpu UPDATE TO '1.9'" to load this file. \quit

-- a new trailing argument: the functions are replaced (objects that depend
-- on them must be dropped first; the C library serves both signatures
-- meanwhile)
DROP FUNCTION gpu_kmeans(regclass, integer, text[], text, integer, double precision, text, double precision[], bigint, text, integer, text);
DROP FUNCTION gpu_kmeans_fit(regclass, integer, text[], text, integer, double precision, text, double precision[], bigint, text, integer, text, boolean);
DROP FUNCTION gpu_kmeans_choose_k(regclass, integer[], text[], integer, double precision, text, bigint, text, integer, text, integer);

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
    sample bigint DEFAULT NULL)
RETURNS TABLE(id bigint, cluster integer)
AS 'MODULE_PATHNAME', 'gpu_kmeans'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1000 SUPPORT pg_gpu_rows_support;

COMMENT ON FUNCTION gpu_kmeans(regclass, integer, text[], text, integer, double precision, text, double precision[], bigint, text, integer, text, bigint) IS
'k-means clustering of a relation''s numeric columns, one vector column (real[], double precision[], pgvector vector/halfvec) or PostGIS points, Euclidean or cosine (spherical), columns scaled or not, Lloyd with k-means++ or k-means|| seeding (n_init starts, the best kept), on every row or on a sample of rows drawn by the seed, on the GPU or the CPU without one: (id, cluster) for every row, clusters 1..k, NULL for unusable rows';

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
    sample bigint DEFAULT NULL)
RETURNS TABLE(centroids double precision[], sizes bigint[], inertia double precision,
              iterations integer, converged boolean, device text, model jsonb,
              ids bigint[], clusters integer[])
AS 'MODULE_PATHNAME', 'gpu_kmeans_fit'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1;

COMMENT ON FUNCTION gpu_kmeans_fit(regclass, integer, text[], text, integer, double precision, text, double precision[], bigint, text, integer, text, boolean, bigint) IS
'k-means model of a relation''s numeric columns, one vector column or PostGIS points, Euclidean or cosine, the best of n_init starts, on every row or on a sample of rows drawn by the seed: k x d centroids (in the columns'' units, in the order of columns; cosine: unit length), cluster sizes and inertia (of the rows fit: scaled where scale is standard; cosine: sum of 1 - cos), iterations, whether it converged, the device used, the model (jsonb) that gpu_kmeans_apply and gpu_kmeans_predict apply, and with memberships every row''s id and cluster (as gpu_kmeans returns them) in two arrays';

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
    sample bigint DEFAULT NULL)
RETURNS TABLE(k integer, inertia double precision, silhouette double precision,
              iterations integer, converged boolean, sample_rows integer, model jsonb)
AS 'MODULE_PATHNAME', 'gpu_kmeans_choose_k'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 10;

COMMENT ON FUNCTION gpu_kmeans_choose_k(regclass, integer[], text[], integer, double precision, text, bigint, text, integer, text, integer, bigint) IS
'k-means for each k of ks on one read of the relation (every row, or a sample of rows drawn by the seed): inertia, the mean silhouette of about sample_size of the rows fit (Euclidean, or 1 - cos), iterations, convergence, the rows sampled for the silhouette, and each fit''s model';
