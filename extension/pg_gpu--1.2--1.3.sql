/* pg_gpu 1.2 -> 1.3: n_init on gpu_kmeans and gpu_kmeans_fit; row estimates for gpu_kmeans and gpu_kmeans_assign */

\echo Use "ALTER EXTENSION pg_gpu UPDATE TO '1.3'" to load this file. \quit

-- a new trailing argument: the functions are replaced (objects that depend on
-- them must be dropped first; the C library serves both signatures meanwhile)
DROP FUNCTION gpu_kmeans(regclass, integer, text[], text, integer, double precision, text, double precision[], bigint, text);
DROP FUNCTION gpu_kmeans_fit(regclass, integer, text[], text, integer, double precision, text, double precision[], bigint, text);

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
    n_init integer DEFAULT 1)
RETURNS TABLE(id bigint, cluster integer)
AS 'MODULE_PATHNAME', 'gpu_kmeans'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1000 SUPPORT pg_gpu_rows_support;

COMMENT ON FUNCTION gpu_kmeans(regclass, integer, text[], text, integer, double precision, text, double precision[], bigint, text, integer) IS
'k-means clustering of a relation''s numeric columns or one vector column (real[], double precision[], pgvector vector/halfvec), Euclidean or cosine (spherical), Lloyd with k-means++ or k-means|| seeding (n_init starts, the best kept), on the GPU or the CPU without one: (id, cluster) for every row, clusters 1..k, NULL for unusable rows';

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
    n_init integer DEFAULT 1)
RETURNS TABLE(centroids double precision[], sizes bigint[], inertia double precision,
              iterations integer, converged boolean, device text)
AS 'MODULE_PATHNAME', 'gpu_kmeans_fit'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1;

COMMENT ON FUNCTION gpu_kmeans_fit(regclass, integer, text[], text, integer, double precision, text, double precision[], bigint, text, integer) IS
'k-means model of a relation''s numeric columns or one vector column, Euclidean or cosine, the best of n_init starts: k x d centroids (in the order of columns; cosine: unit length), cluster sizes, inertia (cosine: sum of 1 - cos), iterations, whether it converged, and the device used';


ALTER FUNCTION gpu_kmeans_assign(regclass, double precision[], text[], text, text) SUPPORT pg_gpu_rows_support;
