-- One k-means driver: a seeded fit is the same wherever the rows are and
-- however they arrive.  Each init (k-means++, k-means||, random), n_init 3,
-- and a cluster emptied from given centroids, on the rows held whole, split
-- into 3 and 5 shares (pg_gpu.parts), streamed in parts
-- (pg_gpu.kmeans_gpu_memory), read in parallel, and through a view whose
-- plan returns them in another order: the same memberships, sizes and
-- iterations, centroids and inertia within 1e-12 (the sums added in another
-- order).
CREATE TABLE pl_pts (id int PRIMARY KEY, a float8, b float8, c float8);
INSERT INTO pl_pts
SELECT i, (i % 7) * 4 + sin(i) * 2, (i % 7 / 3) * 5 + cos(i * 1.1) * 2, sin(i * 0.37)
FROM generate_series(1, 40000) i;
CREATE TABLE pl_tag (id int PRIMARY KEY, tag int);
INSERT INTO pl_tag SELECT i, i % 11 FROM generate_series(40000, 1, -1) i;
ANALYZE pl_pts, pl_tag;
CREATE VIEW pl_joined AS SELECT p.id, p.a, p.b, p.c FROM pl_pts p JOIN pl_tag t USING (id);
CREATE VIEW pl_shuffled AS SELECT * FROM pl_pts ORDER BY md5(id::text);
CREATE FUNCTION pl_close(x float8[], y float8[]) RETURNS boolean LANGUAGE sql IMMUTABLE
AS $$ SELECT cardinality(x) = cardinality(y)
             AND bool_and(abs(u - v) <= 1e-12 * greatest(1, abs(v))) FROM unnest(x, y) t(u, v) $$;
CREATE TEMP TABLE pl_runs (placement text, init text, sizes bigint[], iterations int, centroids float8[],
                           inertia float8, labels int[]);
CREATE FUNCTION pl_fit(placement text, rel regclass) RETURNS void LANGUAGE plpgsql AS $$
DECLARE i text;
BEGIN
  FOREACH i IN ARRAY ARRAY['k-means++', 'k-means||', 'random', 'n_init 3', 'emptied'] LOOP
    INSERT INTO pl_runs
    SELECT placement, i, f.sizes, f.iterations, f.centroids::float8[], f.inertia,
           (SELECT array_agg(c ORDER BY d) FROM unnest(f.ids, f.clusters) u(d, c))
    FROM gpu_kmeans_fit(rel, 7, columns => ARRAY['a', 'b', 'c'], id_column => 'id', seed => 11,
                        memberships => true,
                        init => CASE WHEN i IN ('n_init 3', 'emptied') THEN 'k-means++' ELSE i END,
                        n_init => CASE WHEN i = 'n_init 3' THEN 3 ELSE 1 END,
                        init_centroids => CASE WHEN i = 'emptied'
                                               THEN ARRAY[[0, 0, 0], [4, 0, 0], [8, 0, 0], [12, 5, 0],
                                                          [16, 5, 0], [20, 5, 0], [1e6, 1e6, 1e6]] END) f;
  END LOOP;
END $$;
SELECT pl_fit('whole', 'pl_pts');
SET pg_gpu.parts = 3;
SELECT pl_fit('3 shares', 'pl_pts');
SET pg_gpu.parts = 5;
SELECT pl_fit('5 shares', 'pl_pts');
RESET pg_gpu.parts;
SET pg_gpu.kmeans_gpu_memory = '1MB';
SELECT pl_fit('streamed', 'pl_pts');
RESET pg_gpu.kmeans_gpu_memory;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 4;
SELECT pl_fit('parallel', 'pl_pts');
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_seqscan = off;
SELECT pl_fit('view, nested loop', 'pl_joined');
RESET enable_seqscan;
RESET enable_hashjoin;
RESET enable_mergejoin;
SET enable_nestloop = off;
SET enable_hashjoin = off;
SELECT pl_fit('view, merge join', 'pl_joined');
RESET enable_nestloop;
RESET enable_hashjoin;
SELECT pl_fit('view, shuffled', 'pl_shuffled');
-- the emptied cluster took a row; every placement as the whole
SELECT sizes[7] > 0 AS emptied_refilled FROM pl_runs WHERE placement = 'whole' AND init = 'emptied';
SELECT r.placement, r.init, r.sizes = w.sizes AS same_sizes, r.iterations = w.iterations AS same_iterations,
       pl_close(r.centroids, w.centroids) AS centroids_1e_12,
       abs(r.inertia - w.inertia) <= 1e-12 * w.inertia AS inertia_1e_12, r.labels = w.labels AS same_labels
FROM pl_runs r JOIN pl_runs w ON w.placement = 'whole' AND w.init = r.init
WHERE r.placement <> 'whole'
ORDER BY r.placement, r.init;
DROP VIEW pl_joined, pl_shuffled;
DROP TABLE pl_pts, pl_tag;
DROP FUNCTION pl_fit, pl_close;
