-- The interface: gpu_kmeans, gpu_kmeans_fit, gpu_kmeans_assign on data whose
-- answers do not depend on float noise (three well-separated blobs).
-- 300 rows in three blobs around (0,0), (10,0), (0,10); blob = i % 3
CREATE TABLE points (id integer PRIMARY KEY, x double precision, y double precision);
INSERT INTO points
SELECT i,
       (ARRAY[0, 10, 0])[1 + i % 3] + ((i * 37) % 11 - 5) * 0.1,
       (ARRAY[0, 0, 10])[1 + i % 3] + ((i * 53) % 13 - 6) * 0.1
FROM generate_series(1, 300) i;

CREATE FUNCTION rounded(a double precision[], digits int DEFAULT 6)
RETURNS numeric[] LANGUAGE sql IMMUTABLE
AS $$ SELECT array_agg(round(v::numeric, digits) ORDER BY o) FROM unnest(a) WITH ORDINALITY u(v, o) $$;

-- the model: clusters numbered by centroid, lexicographically
SELECT array_dims(centroids), rounded(centroids), sizes, round(inertia::numeric, 6) AS inertia,
       converged
FROM gpu_kmeans_fit('points', 3, seed => 42);

-- memberships: one cluster per blob, clusters 1..3, every row once
SELECT i % 3 AS blob, min(cluster), max(cluster), count(*)
FROM gpu_kmeans('points', 3) g JOIN generate_series(1, 300) i ON g.id = i
GROUP BY 1 ORDER BY 1;

-- centroids are the means of their members, sizes their counts
WITH m AS (SELECT * FROM gpu_kmeans_fit('points', 3)),
     g AS (SELECT cluster, avg(x) ax, avg(y) ay, count(*) n
           FROM gpu_kmeans('points', 3) JOIN points USING (id) GROUP BY cluster)
SELECT cluster,
       abs(m.centroids[cluster][1] - ax) < 1e-9 AS x_is_mean,
       abs(m.centroids[cluster][2] - ay) < 1e-9 AS y_is_mean,
       m.sizes[cluster] = n AS size_is_count
FROM g, m ORDER BY cluster;

-- inertia is the sum of squared distances to the own centroid
WITH m AS (SELECT * FROM gpu_kmeans_fit('points', 3))
SELECT abs(m.inertia - (SELECT sum(distance ^ 2) FROM gpu_kmeans_assign('points', m.centroids))) < 1e-9
FROM m;

-- canonical numbering: the same partition gets the same numbers whatever the seed or init
-- (ten starts each: one random start of three puts two centres in one blob too often)
SELECT count(DISTINCT (SELECT string_agg(cluster::text, ',' ORDER BY id)
                       FROM gpu_kmeans('points', 3, seed => s, init => i, n_init => 10)))
FROM generate_series(1, 5) s, unnest(ARRAY['k-means++', 'random', 'k-means||', 'K-Means||']) i;

-- the same seed gives the same answer
SELECT (SELECT rounded(centroids) FROM gpu_kmeans_fit('points', 3, init => 'random', seed => 7))
     = (SELECT rounded(centroids) FROM gpu_kmeans_fit('points', 3, init => 'random', seed => 7));

-- init_centroids: cluster i is the one started from row i (no renumbering)
SELECT rounded(centroids, 1), sizes
FROM gpu_kmeans_fit('points', 3, init_centroids => ARRAY[[0, 9], [9, 0], [1, 1]]);
SELECT cluster, count(*), round(avg(x))::int AS x, round(avg(y))::int AS y
FROM gpu_kmeans('points', 3, init_centroids => ARRAY[[0, 9], [9, 0], [1, 1]]) JOIN points USING (id)
GROUP BY cluster ORDER BY cluster;

-- max_iter caps the iterations; tol => 0 runs to a fixed point
SELECT iterations, converged
FROM gpu_kmeans_fit('points', 3, max_iter => 1, init_centroids => ARRAY[[5, 5], [6, 6], [7, 7]]);
SELECT iterations > 1 AS more_than_one, converged
FROM gpu_kmeans_fit('points', 3, tol => 0, init_centroids => ARRAY[[5, 5], [6, 6], [7, 7]]);
-- tol => 1 stops after the first iteration, which changed every label (100%)
SELECT iterations, converged FROM gpu_kmeans_fit('points', 3, tol => 1);

-- k = 1: the mean; k = N: every row its own cluster, inertia 0
SELECT rounded(centroids), sizes, iterations FROM gpu_kmeans_fit('points', 1);
SELECT (SELECT rounded(ARRAY[avg(x), avg(y)]) FROM points) AS mean;
CREATE TABLE few (id bigint PRIMARY KEY, v real);
INSERT INTO few VALUES (10, 3), (20, -1), (30, 7), (40, 5);
SELECT centroids, sizes, inertia FROM gpu_kmeans_fit('few', 4);
SELECT * FROM gpu_kmeans('few', 4) ORDER BY id;

-- columns and id_column
SELECT rounded(centroids) FROM gpu_kmeans_fit('points', 1, columns => ARRAY['y']);
SELECT rounded(centroids) FROM gpu_kmeans_fit('points', 1, columns => ARRAY['y', 'x']);
SELECT count(*), count(DISTINCT id) FROM gpu_kmeans('points', 2, id_column => 'id', columns => ARRAY['x']);

-- gpu_kmeans_assign: nearest centroid and the Euclidean distance to it
SELECT * FROM gpu_kmeans_assign('few', ARRAY[[0], [6]]) ORDER BY id;
SELECT id, cluster, round(distance::numeric, 6) AS distance
FROM gpu_kmeans_assign('points', ARRAY[[0, 0], [10, 0], [0, 10]]) WHERE id <= 6 ORDER BY id;
-- ties go to the lower cluster number
SELECT * FROM gpu_kmeans_assign('few', ARRAY[[4], [6], [4]]) ORDER BY id;

-- in the select list the rows stream; CREATE TABLE AS works
CREATE TABLE seg AS SELECT * FROM gpu_kmeans('points', 3);
SELECT count(*), count(DISTINCT cluster) FROM seg;
SELECT count(*) FROM (SELECT gpu_kmeans('points', 3)) s;

-- n_init: several seeded starts, the least inertia kept; start 1 is n_init => 1's own fit
SELECT (SELECT inertia FROM gpu_kmeans_fit('points', 3, n_init => 4, seed => 5, init => 'random')) <=
       (SELECT inertia FROM gpu_kmeans_fit('points', 3, seed => 5, init => 'random')) AS no_worse;
SELECT (SELECT centroids FROM gpu_kmeans_fit('points', 3, n_init => 3, seed => 2)) =
       (SELECT centroids FROM gpu_kmeans_fit('points', 3, n_init => 3, seed => 2)) AS reproducible;

-- the planner's estimate of gpu_kmeans's, gpu_kmeans_assign's and gpu_kmeans_apply's rows: the relation's
ANALYZE points;
CREATE FUNCTION plan_rows(q text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE j jsonb;
BEGIN
  EXECUTE 'EXPLAIN (FORMAT JSON) ' || q INTO j;
  RETURN jsonb_path_query_first(j, 'strict $.**?(@."Node Type" == "Function Scan")."Plan Rows"')::float8;
END $$;
SELECT plan_rows($$SELECT * FROM gpu_kmeans('points', 3)$$) AS kmeans,
       plan_rows($$SELECT * FROM gpu_kmeans_assign('points', ARRAY[[0, 0]])$$) AS assign,
       plan_rows($$SELECT * FROM gpu_kmeans_apply('points', '{}')$$) AS apply,
       plan_rows($$SELECT * FROM gpu_kmeans_fit('points', 3)$$) AS fit,
       (SELECT count(*) FROM points) AS table_rows;
-- the relation not a constant: the declared 1000
CREATE TEMP TABLE rels AS SELECT 'points'::regclass AS r;
SELECT plan_rows($$SELECT * FROM rels, gpu_kmeans(rels.r, 3)$$) AS declared;
DROP TABLE rels;
DROP FUNCTION plan_rows(text);
