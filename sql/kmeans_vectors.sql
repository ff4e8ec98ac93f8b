-- Vector columns (real[], double precision[]) and metric => 'cosine'.
-- The same points as scalar columns and as vectors give the same fit.
CREATE TABLE v_scalar (id int PRIMARY KEY, a float8, b float8, c float8, d float8);
INSERT INTO v_scalar
SELECT i, (i % 3) * 10 + sin(i), (i % 3) * -5 + cos(i), (i % 3) + sin(2 * i) / 4, cos(3 * i) / 8
FROM generate_series(1, 300) i;
CREATE TABLE v_real (id int PRIMARY KEY, emb real[]);
INSERT INTO v_real SELECT id, ARRAY[a, b, c, d]::real[] FROM v_scalar;
-- double precision[] with another lower bound
CREATE TABLE v_float8 (id int PRIMARY KEY, emb float8[]);
INSERT INTO v_float8 SELECT id, '[0:3]={0,0,0,0}'::float8[] FROM v_scalar;
UPDATE v_float8 f SET emb[0] = s.a, emb[1] = s.b, emb[2] = s.c, emb[3] = s.d FROM v_scalar s WHERE s.id = f.id;
SELECT array_lower(emb, 1), array_length(emb, 1) FROM v_float8 LIMIT 1;

-- the default column is the one vector column (NOTICE), d from its first row
SELECT array_dims(centroids), sizes FROM gpu_kmeans_fit('v_float8', 3, seed => 1);
-- float8[] equals the scalar columns exactly; real[] the scalars rounded to float
SELECT (SELECT centroids FROM gpu_kmeans_fit('v_float8', 3, columns => ARRAY['emb'], seed => 1)) =
       (SELECT centroids FROM gpu_kmeans_fit('v_scalar', 3, columns => ARRAY['a', 'b', 'c', 'd'], seed => 1))
       AS float8_same;
CREATE VIEW v_scalar_f4 AS SELECT id, a::real AS a, b::real AS b, c::real AS c, d::real AS d FROM v_scalar;
SELECT (SELECT centroids FROM gpu_kmeans_fit('v_real', 3, seed => 1)) =
       (SELECT centroids FROM gpu_kmeans_fit('v_scalar_f4', 3, columns => ARRAY['a', 'b', 'c', 'd'], seed => 1))
       AS real_same;
SELECT count(*) AS differ
FROM gpu_kmeans('v_real', 3, seed => 1) v JOIN gpu_kmeans('v_scalar_f4', 3, id_column => 'id', seed => 1) s USING (id)
WHERE v.cluster <> s.cluster;
-- real[] rows are held as float32 (4 bytes a value); the same values read
-- from float8 columns are held as doubles: the same fit, bit for bit, and
-- the same memberships
CREATE VIEW v_scalar_f8 AS
SELECT id, a::real::float8 AS a, b::real::float8 AS b, c::real::float8 AS c, d::real::float8 AS d FROM v_scalar;
SELECT (SELECT (centroids, inertia, iterations, sizes) FROM gpu_kmeans_fit('v_real', 3, seed => 1, init => 'k-means||')) =
       (SELECT (centroids, inertia, iterations, sizes)
        FROM gpu_kmeans_fit('v_scalar_f8', 3, columns => ARRAY['a', 'b', 'c', 'd'], seed => 1, init => 'k-means||'))
       AS float32_same;
SELECT count(*) AS differ
FROM gpu_kmeans('v_real', 3, seed => 1) v
     JOIN gpu_kmeans('v_scalar_f8', 3, columns => ARRAY['a', 'b', 'c', 'd'], id_column => 'id', seed => 1) s USING (id)
WHERE v.cluster IS DISTINCT FROM s.cluster;

-- unusable rows: NULL vector, NULL element, NaN, infinity (cluster NULL, one NOTICE)
CREATE TABLE v_bad (id int PRIMARY KEY, emb real[]);
INSERT INTO v_bad VALUES (1, '{0,0}'), (2, '{0,1}'), (3, '{10,10}'), (4, '{10,11}'),
  (5, NULL), (6, '{1,NULL}'), (7, '{NaN,1}'), (8, '{1,Infinity}');
SELECT * FROM gpu_kmeans('v_bad', 2) ORDER BY id;
-- a vector of another length: 22000 naming the row
INSERT INTO v_bad VALUES (9, '{1,2,3}');
SELECT * FROM gpu_kmeans_fit('v_bad', 2);
DELETE FROM v_bad WHERE id = 9;
-- a two-dimensional array: 2202E
INSERT INTO v_bad VALUES (10, '{{1,2},{3,4}}');
SELECT * FROM gpu_kmeans_fit('v_bad', 2);
DELETE FROM v_bad WHERE id = 10;
-- ... also where the first vector is (its length is read there)
CREATE TABLE v_2d (id int PRIMARY KEY, emb float8[]);
INSERT INTO v_2d VALUES (1, '{{1,2},{3,4}}'), (2, '{1,2}');
SELECT * FROM gpu_kmeans_fit('v_2d', 1, columns => ARRAY['emb']);
-- every vector unusable
CREATE TABLE v_none (id int PRIMARY KEY, emb float8[]);
INSERT INTO v_none VALUES (1, NULL), (2, NULL);
SELECT * FROM gpu_kmeans_fit('v_none', 1);
INSERT INTO v_none VALUES (3, '{NaN}');
SELECT * FROM gpu_kmeans_fit('v_none', 1);
-- a vector column beside others, or two of them
CREATE TABLE v_two (id int PRIMARY KEY, x float8, e1 real[], e2 float8[]);
INSERT INTO v_two VALUES (1, 1, '{1}', '{1}');
SELECT * FROM gpu_kmeans_fit('v_two', 1, columns => ARRAY['x', 'e1']);
SELECT * FROM gpu_kmeans_fit('v_two', 1, columns => ARRAY['e1', 'e2']);
ALTER TABLE v_two DROP COLUMN x;
SELECT * FROM gpu_kmeans_fit('v_two', 1);
SELECT centroids FROM gpu_kmeans_fit('v_two', 1, columns => ARRAY['e2']);
-- init_centroids and assign take k x d with d the vectors' length
SELECT centroids, sizes FROM gpu_kmeans_fit('v_bad', 2, init_centroids => ARRAY[[0, 0], [10, 10]]);
SELECT * FROM gpu_kmeans_fit('v_bad', 2, init_centroids => ARRAY[[0, 0, 0], [1, 1, 1]]);
SELECT id, cluster, round(distance::numeric, 6) AS distance
FROM gpu_kmeans_assign('v_bad', ARRAY[[0, 0], [10, 10]]) ORDER BY id;

-- metric => 'cosine': spherical k-means; lengths do not matter, directions do
CREATE TABLE c_pts (id int PRIMARY KEY, x float8, y float8);
INSERT INTO c_pts VALUES (1, 1, 0.1), (2, 50, 4), (3, 0.2, 0), (4, 0.1, 1), (5, 3, 40), (6, 0, 0.5),
  (7, 0, 0);
SELECT * FROM gpu_kmeans('c_pts', 2, metric => 'cosine', init_centroids => ARRAY[[1, 0], [0, 1]]) ORDER BY id;
-- centroids of unit length, the normalised means; inertia the sum of 1 - cos
SELECT c.i, round(c.x::numeric, 12) AS x, round(c.y::numeric, 12) AS y, round((c.x * c.x + c.y * c.y)::numeric, 12) AS norm2
FROM gpu_kmeans_fit('c_pts', 2, metric => 'cosine', init_centroids => ARRAY[[1, 0], [0, 1]]) f,
     LATERAL (SELECT i, f.centroids[i][1] AS x, f.centroids[i][2] AS y FROM generate_series(1, 2) i) c
ORDER BY c.i;
WITH u AS (SELECT id, x / sqrt(x * x + y * y) AS ux, y / sqrt(x * x + y * y) AS uy FROM c_pts WHERE id <> 7),
m AS (SELECT id <= 3 AS first, sum(ux) AS sx, sum(uy) AS sy FROM u GROUP BY 1),
c AS (SELECT first, sx / sqrt(sx * sx + sy * sy) AS cx, sy / sqrt(sx * sx + sy * sy) AS cy FROM m)
SELECT round(sum(1 - (u.ux * c.cx + u.uy * c.cy))::numeric, 12) AS reference_inertia
FROM u JOIN c ON c.first = (u.id <= 3);
SELECT round(inertia::numeric, 12) AS inertia
FROM gpu_kmeans_fit('c_pts', 2, metric => 'cosine', init_centroids => ARRAY[[1, 0], [0, 1]]);
-- assign: the cosine distance 1 - cos to the nearest given centroid (normalised)
SELECT a.id, a.cluster, round(a.distance::numeric, 12) AS distance,
       round((1 - (p.x * 3 + p.y * 4) / nullif(5 * sqrt(p.x * p.x + p.y * p.y), 0))::numeric, 12) AS to_3_4
FROM gpu_kmeans_assign('c_pts', ARRAY[[3, 4], [-1, 0]], metric => 'cosine') a LEFT JOIN c_pts p USING (id)
ORDER BY a.id;
-- vectors too
SELECT count(*) AS differ
FROM gpu_kmeans('v_real', 3, metric => 'cosine', seed => 2) v
JOIN gpu_kmeans('v_scalar_f4', 3, id_column => 'id', metric => 'cosine', seed => 2) s USING (id)
WHERE v.cluster <> s.cluster;
-- errors
SELECT * FROM gpu_kmeans_fit('c_pts', 2, metric => 'manhattan');
SELECT * FROM gpu_kmeans_fit('c_pts', 2, metric => NULL);
SELECT * FROM gpu_kmeans_fit('c_pts', 2, metric => 'cosine', init_centroids => ARRAY[[0, 0], [0, 1]]);
SELECT * FROM gpu_kmeans_assign('c_pts', ARRAY[[1, 0], [0, 0]], metric => 'cosine');
DELETE FROM c_pts WHERE id <> 7;
SELECT * FROM gpu_kmeans_fit('c_pts', 1, metric => 'cosine');
-- limits and types: a domain over real[]; magnitudes far apart (cosine
-- normalises each row by its largest element first); too long, empty and
-- integer vectors
CREATE DOMAIN v_emb2 AS real[] CHECK (array_length(VALUE, 1) = 2);
CREATE TABLE v_dom (id int PRIMARY KEY, e v_emb2);
INSERT INTO v_dom VALUES (1, '{1,2}'), (2, '{3,4}');
SELECT centroids FROM gpu_kmeans_fit('v_dom', 1);
CREATE TABLE v_far (id int PRIMARY KEY, e float8[]);
INSERT INTO v_far VALUES (1, '{1e300, 1e300}'), (2, '{-1e300, 1e-300}'), (3, '{2e-300, 2e-300}');
SELECT centroids, round(inertia::numeric, 12) AS inertia
FROM gpu_kmeans_fit('v_far', 2, metric => 'cosine', init_centroids => ARRAY[[1, 0], [-1, 0]]);
CREATE TABLE v_long (id int PRIMARY KEY, e real[]);
INSERT INTO v_long SELECT 1, array_fill(1::real, ARRAY[16001]);
SELECT * FROM gpu_kmeans_fit('v_long', 1);
CREATE TABLE v_empty (id int PRIMARY KEY, e real[]);
INSERT INTO v_empty VALUES (1, '{}'), (2, '{1}');
SELECT * FROM gpu_kmeans_fit('v_empty', 1);
CREATE TABLE v_int (id int PRIMARY KEY, e int[]);
INSERT INTO v_int VALUES (1, '{1}');
SELECT * FROM gpu_kmeans_fit('v_int', 1, columns => ARRAY['e']);
-- pg_gpu.kmeans_precision: on the GPU d > 32 and k >= 64 take the TF32
-- product (auto) or the float64 one (double); both give float64's answers
CREATE TABLE v_wide (id int PRIMARY KEY, e real[]);
INSERT INTO v_wide
SELECT i, array_agg(sin(i * 0.37 + j * 1.3 + (i % 7) * j)::real ORDER BY j)
FROM generate_series(1, 3000) i, generate_series(1, 40) j GROUP BY i;
CREATE TEMP TABLE v_wide_auto AS
SELECT * FROM gpu_kmeans('v_wide', 64, max_iter => 4, tol => 0, seed => 5);
SET pg_gpu.kmeans_precision = double;
SELECT count(*) AS rows, count(*) FILTER (WHERE a.cluster IS DISTINCT FROM d.cluster) AS moved
FROM v_wide_auto a JOIN gpu_kmeans('v_wide', 64, max_iter => 4, tol => 0, seed => 5) d USING (id);
RESET pg_gpu.kmeans_precision;
SET pg_gpu.kmeans_precision = single;
-- init => 'k-means||' (scalable k-means++): each of 12 separated blobs one cluster,
-- an inertia like k-means++'s, the same answer for the same seed
CREATE TABLE v_blobs (id int PRIMARY KEY, blob int, e real[]);
INSERT INTO v_blobs
SELECT i, i % 12, array_agg(((i % 12) * (j % 3 + 1) * 10 + sin(i * 1.7 + j))::real ORDER BY j)
FROM generate_series(1, 2400) i, generate_series(1, 24) j GROUP BY i;
SELECT count(DISTINCT cluster) AS clusters, count(DISTINCT (blob, cluster)) AS pairs
FROM gpu_kmeans('v_blobs', 12, columns => ARRAY['e'], init => 'k-means||', seed => 3) JOIN v_blobs USING (id);
SELECT round(((SELECT inertia FROM gpu_kmeans_fit('v_wide', 64, init => 'k-means||', seed => 5)) /
              (SELECT inertia FROM gpu_kmeans_fit('v_wide', 64, seed => 5)))::numeric, 1) AS ratio_to_kmeanspp;
SELECT (SELECT centroids FROM gpu_kmeans_fit('v_wide', 64, init => 'k-means||', seed => 9)) =
       (SELECT centroids FROM gpu_kmeans_fit('v_wide', 64, init => 'k-means||', seed => 9)) AS reproducible;
