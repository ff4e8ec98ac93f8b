-- weight_column: sample weights, as scikit-learn's sample_weight.
--
-- Against scikit-learn: the Iris, Wine and Digits rows weighted by views
-- (row id i weighs ((7 i) mod 5) / 2: 0, 0.5, 1, 1.5 or 2), from the same
-- init_centroids with tol => 0: memberships, centroids (1e-6 relative),
-- inertia and iterations match KMeans(...).fit(X, sample_weight=w)
-- (tests/data/sklearn_reference.py wrote the figures).
\set ECHO none
SET client_min_messages = warning;
DROP TABLE IF EXISTS iris, wine, digits, sk_expected, sk_weighted CASCADE;
\i tests/data/sklearn.sql
RESET client_min_messages;
\set ECHO all
CREATE VIEW iris_w AS SELECT *, ((id * 7) % 5) / 2.0 AS w FROM iris;
CREATE VIEW wine_w AS SELECT *, ((id * 7) % 5) / 2.0 AS w FROM wine;
CREATE VIEW digits_w AS SELECT *, ((id * 7) % 5) / 2.0 AS w FROM digits;
SELECT s.name,
       (SELECT array_agg(cluster ORDER BY id)
        FROM gpu_kmeans(s.name || '_w', s.k, columns => c.cols, id_column => 'id', init_centroids => s.init,
                        tol => 0, weight_column => 'w')) = s.labels AS labels_match,
       (SELECT bool_and(abs(a - b) <= 1e-6 * abs(b) + 1e-12)
        FROM unnest(f.centroids, s.centroids) u(a, b)) AS centroids_match,
       abs(f.inertia - s.inertia) <= 1e-6 * s.inertia AS inertia_match,
       f.iterations = s.n_iter AS iterations_match,
       f.converged,
       f.model->>'weights' AS weights,
       -- (the same fit unweighted differs: the comparison can fail)
       f.centroids = (SELECT g.centroids FROM gpu_kmeans_fit(s.name || '_w', s.k, columns => c.cols,
                                                             init_centroids => s.init, tol => 0) g) AS as_unweighted
FROM sk_weighted s,
     LATERAL (SELECT array_agg('c' || j ORDER BY j)
              FROM generate_series(1, array_length(s.init, 2)) j) c(cols),
     LATERAL gpu_kmeans_fit(s.name || '_w', s.k, columns => c.cols, init_centroids => s.init, tol => 0,
                            weight_column => 'w') f
ORDER BY s.name;

-- By hand: 0, 1, 10, 11 weighing 3, 1, 1, 3 from 0 and 11: centroids 0.25
-- and 10.75, inertia 3/16 + 9/16 + 9/16 + 3/16 = 1.5; the row at 100 of
-- weight 0 is labelled (sizes count it) and moves nothing.
CREATE TABLE wt (id int PRIMARY KEY, x float8, w numeric);
INSERT INTO wt VALUES (1, 0, 3), (2, 1, 1), (3, 10, 1), (4, 11, 3), (5, 100, 0);
SELECT centroids, sizes, inertia, iterations, converged
FROM gpu_kmeans_fit('wt', 2, columns => ARRAY['x'], init_centroids => ARRAY[[0], [11]], weight_column => 'w');
SELECT * FROM gpu_kmeans('wt', 2, columns => ARRAY['x'], init_centroids => ARRAY[[0], [11]],
                         weight_column => 'w') ORDER BY id;
-- a NULL, NaN or infinite weight: the row is unusable, as a NULL value
INSERT INTO wt VALUES (6, 5, NULL), (7, 5, 'NaN'), (8, 5, 'Infinity');
SELECT * FROM gpu_kmeans('wt', 2, columns => ARRAY['x'], init_centroids => ARRAY[[0], [11]],
                         weight_column => 'w') ORDER BY id;
SELECT centroids, sizes, inertia
FROM gpu_kmeans_fit('wt', 2, columns => ARRAY['x'], init_centroids => ARRAY[[0], [11]], weight_column => 'w');
DELETE FROM wt WHERE id > 5;

-- Every weight 1: the unweighted fit, bit for bit (k-means++, k-means||,
-- random; standard scaling); integer weights: the rows repeated that many
-- times, from the same centroids
CREATE TABLE blobs AS
SELECT g AS id, (g % 4) * 10 + sin(g) AS a, (g % 4) * 3 + cos(g * 1.7) AS b, 1 AS one, g % 4 + 1 AS rep
FROM generate_series(1, 2000) g;
SELECT init, scale,
       (SELECT (centroids, sizes, inertia, iterations)::text
        FROM gpu_kmeans_fit('blobs', 5, columns => ARRAY['a', 'b'], init => init, scale => scale, seed => 3,
                            weight_column => 'one')) =
       (SELECT (centroids, sizes, inertia, iterations)::text
        FROM gpu_kmeans_fit('blobs', 5, columns => ARRAY['a', 'b'], init => init, scale => scale, seed => 3))
       AS same
FROM (VALUES ('k-means++', 'none'), ('k-means||', 'none'), ('random', 'none'), ('k-means++', 'standard')) v(init, scale);
CREATE VIEW blobs_repeated AS
SELECT row_number() OVER () AS id, a, b FROM blobs, generate_series(1, rep) r;
WITH w AS (SELECT centroids, inertia FROM gpu_kmeans_fit('blobs', 3, columns => ARRAY['a', 'b'], tol => 0,
                                                         init_centroids => ARRAY[[1, 1], [12, 4], [29, 9]],
                                                         weight_column => 'rep')),
     r AS (SELECT centroids, inertia FROM gpu_kmeans_fit('blobs_repeated', 3, columns => ARRAY['a', 'b'], tol => 0,
                                                         init_centroids => ARRAY[[1, 1], [12, 4], [29, 9]]))
SELECT (SELECT bool_and(abs(x - y) <= 1e-9 * (1 + abs(y))) FROM unnest(w.centroids, r.centroids) u(x, y))
       AS centroids_match,
       abs(w.inertia - r.inertia) <= 1e-9 * r.inertia AS inertia_match
FROM w, r;

-- sample => m of weighted rows: each row drawn keeps its weight; a sample
-- of every row is the weighted fit itself (to the rounding of the rows'
-- other order); every row is labelled after it
SELECT s.sizes = f.sizes AND s.iterations = f.iterations
       AND (SELECT bool_and(abs(x - y) <= 1e-12 * (1 + abs(y))) FROM unnest(s.centroids, f.centroids) u(x, y))
       AND abs(s.inertia - f.inertia) <= 1e-12 * f.inertia AS every_row
FROM gpu_kmeans_fit('blobs', 4, ARRAY['a', 'b'], seed => 2, weight_column => 'rep', sample => 5000) s,
     gpu_kmeans_fit('blobs', 4, ARRAY['a', 'b'], seed => 2, weight_column => 'rep') f;
SELECT (SELECT sum(s) FROM unnest(sizes) s) AS fit_rows, model->>'sample' AS sample, model->>'weights' AS weights,
       (SELECT count(cluster) FROM gpu_kmeans('blobs', 4, ARRAY['a', 'b'], 'id', seed => 2, weight_column => 'rep',
                                              sample => 300)) AS labelled
FROM gpu_kmeans_fit('blobs', 4, ARRAY['a', 'b'], seed => 2, weight_column => 'rep', sample => 300);
SELECT k, iterations > 0 AS fit FROM gpu_kmeans_choose_k('blobs', ARRAY[2, 4], ARRAY['a', 'b'], weight_column => 'rep',
                                                          sample => 400) ORDER BY k;
-- the same weighted sample by a serial read, by parallel workers (their
-- priorities weighed as the leader's) and through a view of the rows reversed
CREATE TABLE wpar AS SELECT g AS id, (g % 7) * 3 + sin(g) AS a, cos(g * 0.7) AS b, (g % 5) * 0.5 AS w
FROM generate_series(1, 100000) g;
CREATE VIEW wpar_rev AS SELECT * FROM wpar ORDER BY id DESC;
CREATE TEMP TABLE wfits AS
SELECT 'serial' AS how, * FROM gpu_kmeans_fit('wpar', 7, ARRAY['a', 'b'], seed => 4, sample => 3000, weight_column => 'w')
UNION ALL
SELECT 'view', * FROM gpu_kmeans_fit('wpar_rev', 7, ARRAY['a', 'b'], seed => 4, sample => 3000, weight_column => 'w');
SET max_parallel_workers_per_gather = 2;
SET min_parallel_table_scan_size = 0;
SET parallel_setup_cost = 0;
INSERT INTO wfits
SELECT 'parallel', * FROM gpu_kmeans_fit('wpar', 7, ARRAY['a', 'b'], seed => 4, sample => 3000, weight_column => 'w');
RESET max_parallel_workers_per_gather;
RESET min_parallel_table_scan_size;
RESET parallel_setup_cost;
SELECT f.how, f.sizes = s.sizes AND f.iterations = s.iterations
       AND (SELECT bool_and(abs(x - y) <= 1e-12 * (1 + abs(y))) FROM unnest(f.centroids, s.centroids) u(x, y)) AS same_fit
FROM wfits f, wfits s WHERE s.how = 'serial' ORDER BY f.how;

-- Rows of weight 0 are never seeds: far rows weighing 0 take no centroid
-- (unweighted, k-means++ puts one there)
CREATE TABLE far AS
SELECT g AS id, CASE WHEN g % 100 = 0 THEN 1e5 + g ELSE (g % 3) * 5 + sin(g) END AS a,
       CASE WHEN g % 100 = 0 THEN 0 ELSE 1 END AS w
FROM generate_series(1, 3000) g;
SELECT init,
       (SELECT max(c) FROM gpu_kmeans_fit('far', 3, columns => ARRAY['a'], init => init, weight_column => 'w') f,
               unnest(f.centroids) c) < 100 AS weighted_near,
       (SELECT max(c) FROM gpu_kmeans_fit('far', 3, columns => ARRAY['a'], init => init) f,
               unnest(f.centroids) c) > 100 AS unweighted_far
FROM (VALUES ('k-means++'), ('k-means||'), ('random')) v(init);

-- a vector column, keyed ids, hierarchical and gpu_kmeans_choose_k take weights too
CREATE TABLE vecs AS SELECT g AS id, ARRAY[(g % 5) * 4 + sin(g), cos(g)]::real[] AS v, (g % 3)::float8 AS w
FROM generate_series(1, 1000) g;
ALTER TABLE vecs ADD PRIMARY KEY (id);
SELECT sizes, round(inertia::numeric, 4) AS inertia
FROM gpu_kmeans_fit('vecs', 5, ARRAY['v'], init_centroids => ARRAY[[0, 0], [4, 0], [8, 0], [12, 0], [16, 0]],
                    weight_column => 'w');
SELECT count(*), count(cluster) FROM gpu_kmeans('vecs', 5, NULL::int, ARRAY['v'], weight_column => 'w');
SELECT sizes = (SELECT sizes FROM gpu_kmeans_fit('vecs', 9, ARRAY['v'], algorithm => 'hierarchical')) AS same,
       model->>'weights' AS weights, model->>'algorithm' AS algorithm
FROM gpu_kmeans_fit('vecs', 9, ARRAY['v'], algorithm => 'hierarchical', weight_column => 'w');
SELECT k, round(inertia::numeric, 4) AS inertia, model->>'weights' AS weights
FROM gpu_kmeans_choose_k('vecs', ARRAY[2, 5], ARRAY['v'], weight_column => 'w', seed => 1)
ORDER BY k;

-- errors
INSERT INTO wt VALUES (9, 5, -1);
SELECT centroids FROM gpu_kmeans_fit('wt', 2, columns => ARRAY['x'], weight_column => 'w');
DELETE FROM wt WHERE id = 9;
SELECT centroids FROM gpu_kmeans_fit('wt', 2, columns => ARRAY['x'], weight_column => 'nope');
ALTER TABLE wt ADD COLUMN label text DEFAULT 'a';
SELECT centroids FROM gpu_kmeans_fit('wt', 2, columns => ARRAY['x'], weight_column => 'label');
-- a partitioned table whose leaf lays its columns out in another order:
-- each leaf's weight column found by name, the fit of the same rows
CREATE TABLE wparted (id int, x float8, w float8) PARTITION BY RANGE (id);
CREATE TABLE wparted_a PARTITION OF wparted FOR VALUES FROM (1) TO (6);
CREATE TABLE wparted_b (w float8, x float8, id int);
ALTER TABLE wparted ATTACH PARTITION wparted_b FOR VALUES FROM (6) TO (100);
INSERT INTO wparted VALUES (1, 0, 3), (2, 1, 1), (3, 10, 1), (4, 11, 3), (6, 0.5, 2), (7, 10.5, 2);
CREATE TABLE wflat AS SELECT * FROM wparted;
SELECT (SELECT (centroids, sizes, inertia)::text FROM gpu_kmeans_fit('wparted', 2, ARRAY['x'], init_centroids => ARRAY[[0], [11]],
                                                                     weight_column => 'w')) =
       (SELECT (centroids, sizes, inertia)::text FROM gpu_kmeans_fit('wflat', 2, ARRAY['x'], init_centroids => ARRAY[[0], [11]],
                                                                     weight_column => 'w')) AS same_fit;
-- no row with a usable weight
UPDATE wflat SET w = NULL;
SELECT sizes FROM gpu_kmeans_fit('wflat', 1, ARRAY['x'], weight_column => 'w');
DROP TABLE wparted, wflat;
-- every weight 0: no mean to move to; the centroids stay where they began
UPDATE wt SET w = 0;
SELECT centroids, sizes, inertia
FROM gpu_kmeans_fit('wt', 2, columns => ARRAY['x'], init_centroids => ARRAY[[0], [11]], weight_column => 'w');
DROP TABLE iris, wine, digits, sk_expected, sk_weighted, wt, blobs, far, vecs, wpar CASCADE;
