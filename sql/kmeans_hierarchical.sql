-- algorithm => 'hierarchical': about sqrt(k) groups, then each group's share
-- of k; every row labelled by its nearest centroid (as gpu_kmeans_apply
-- labels it), the inertia theirs; blobs within groups found as built; the
-- same fit whatever the rows' order; the model says so; bad arguments.
SET extra_float_digits = 0;
-- four groups far apart of four blobs each; each blob's rows in pairs about
-- its centre (so that its mean is the centre, exactly): k = 16 finds the
-- 4 groups, then each group's 4 blobs
CREATE TABLE kh (id int PRIMARY KEY, x float8, y float8);
INSERT INTO kh
SELECT b * 100 + i * 2 + s,
       (CASE WHEN b / 4 % 2 = 1 THEN 1000 ELSE -1000 END) + (CASE WHEN b % 2 = 1 THEN 10 ELSE -10 END)
         + (1 - 2 * s) * ((i * 37 % 19) / 10.0 - 0.9),
       (CASE WHEN b / 8 = 1 THEN 1000 ELSE -1000 END) + (CASE WHEN b / 2 % 2 = 1 THEN 10 ELSE -10 END)
         + (1 - 2 * s) * ((i * 53 % 23) / 12.0 - 0.9)
FROM generate_series(0, 15) b, generate_series(0, 24) i, generate_series(0, 1) s;
CREATE TABLE kh_fit AS
SELECT * FROM gpu_kmeans_fit('kh', 16, columns => ARRAY['x', 'y'], id_column => 'id', seed => 3,
                             memberships => true, algorithm => 'hierarchical');
SELECT model->>'algorithm' AS algorithm, model->'groups' AS groups, model->'trained' AS trained,
       round(inertia::numeric, 6) AS inertia, sizes, cardinality(ids) AS memberships FROM kh_fit;
-- every centroid a blob's centre, every blob one cluster
SELECT count(DISTINCT c.cluster) AS clusters,
       bool_and(abs(c.cx - b.cx) < 1e-9 AND abs(c.cy - b.cy) < 1e-9) AS at_centres
FROM (SELECT id / 100 AS blob, avg(x) AS cx, avg(y) AS cy FROM kh GROUP BY 1) b
JOIN (SELECT DISTINCT u.id / 100 AS blob, u.cluster,
             (f.centroids)[u.cluster][1] AS cx, (f.centroids)[u.cluster][2] AS cy
      FROM kh_fit f, unnest(f.ids, f.clusters) u(id, cluster)) c USING (blob);
-- the rows of a blob share its cluster
SELECT count(*) AS blobs_split
FROM (SELECT u.id / 100 AS blob FROM kh_fit f, unnest(f.ids, f.clusters) u(id, cluster)
      GROUP BY 1 HAVING count(DISTINCT u.cluster) > 1) s;

-- rows of 30 blobs in 3 dimensions, k = 30: every row's cluster is its
-- nearest centroid (gpu_kmeans_apply's), sizes count them, the inertia is
-- the sum of their squared distances; gpu_kmeans gives the same clusters
CREATE TABLE khb (id int PRIMARY KEY, a float8, b float8, c float8);
INSERT INTO khb
SELECT g, (g % 30) * 3.0 + ((g * 7919) % 1000) / 1000.0, (g % 30 / 5) * 4.0 + ((g * 104729) % 997) / 997.0,
       ((g * 1299709) % 991) / 991.0
FROM generate_series(1::bigint, 6000) g;
CREATE TABLE khb_fit AS
SELECT * FROM gpu_kmeans_fit('khb', 30, seed => 5, memberships => true, algorithm => 'hierarchical',
                             columns => ARRAY['a', 'b', 'c']);
SELECT (model->'groups')::int AS groups, (model->'trained')::int AS trained,
       (SELECT sum(s) FROM unnest(sizes) s) AS rows FROM khb_fit;
SELECT count(*) AS rows,
       count(*) FILTER (WHERE a.cluster = u.cluster) AS as_apply,
       abs(sum(a.distance ^ 2) / min(f.inertia) - 1) < 1e-9 AS inertia_as_distances
FROM khb_fit f CROSS JOIN LATERAL unnest(f.ids, f.clusters) u(id, cluster)
JOIN gpu_kmeans_apply('khb', f.model, 'id') a ON a.id = u.id;
SELECT count(*) FILTER (WHERE s.n <> f.sizes[s.cluster]) AS sizes_off
FROM khb_fit f, (SELECT u.cluster, count(*) AS n FROM khb_fit g, unnest(g.ids, g.clusters) u(id, cluster)
                GROUP BY 1) s;
SELECT count(*) AS rows, count(*) FILTER (WHERE k.cluster = u.cluster) AS as_fit
FROM gpu_kmeans('khb', 30, seed => 5, algorithm => 'hierarchical', columns => ARRAY['a', 'b', 'c']) k
JOIN (SELECT u.* FROM khb_fit f, unnest(f.ids, f.clusters) u(id, cluster)) u USING (id);
-- the same rows in another order (and other ids): the same fit
CREATE TABLE khb_rev AS SELECT 10000 - id AS id, a, b, c FROM khb ORDER BY id DESC;
SELECT f.centroids = r.centroids AS same_centroids, f.sizes = r.sizes AS same_sizes,
       abs(f.inertia / r.inertia - 1) < 1e-12 AS same_inertia
FROM khb_fit f,
     gpu_kmeans_fit('khb_rev', 30, seed => 5, algorithm => 'hierarchical', columns => ARRAY['a', 'b', 'c']) r;
-- beside Lloyd's from the same seed: an inertia within a few per cent
SELECT h.inertia <= 1.05 * l.inertia AS near_lloyd
FROM khb_fit h, gpu_kmeans_fit('khb', 30, seed => 5, columns => ARRAY['a', 'b', 'c']) l;
-- cosine, n_init and a sample: the labels still the nearest centroids
SELECT count(*) AS rows, count(*) FILTER (WHERE a.cluster = u.cluster) AS as_apply
FROM gpu_kmeans_fit('khb', 12, seed => 2, metric => 'cosine', n_init => 2, memberships => true,
                    algorithm => 'hierarchical', columns => ARRAY['a', 'b', 'c']) f
CROSS JOIN LATERAL unnest(f.ids, f.clusters) u(id, cluster)
JOIN gpu_kmeans_apply('khb', f.model, 'id') a ON a.id = u.id;
SELECT (model->'sample')::int AS sample, (model->'trained')::int AS trained
FROM gpu_kmeans_fit('khb', 30, seed => 5, sample => 3000, algorithm => 'hierarchical',
                    columns => ARRAY['a', 'b', 'c']);
-- ids of another type (the keyed overload)
SELECT count(*) AS rows, count(DISTINCT cluster) AS clusters
FROM gpu_kmeans('khb', 30, NULL::int, seed => 5, algorithm => 'HIERARCHICAL', columns => ARRAY['a', 'b', 'c']);

-- bad arguments
SELECT * FROM gpu_kmeans_fit('khb', 3, algorithm => 'bisecting', columns => ARRAY['a', 'b', 'c']);
SELECT * FROM gpu_kmeans_fit('khb', 3, algorithm => NULL, columns => ARRAY['a', 'b', 'c']);
SELECT * FROM gpu_kmeans_fit('khb', 2, algorithm => 'hierarchical', columns => ARRAY['a', 'b', 'c'],
                             init_centroids => ARRAY[[0, 0, 0], [1, 1, 1]]);
DROP TABLE kh, kh_fit, khb, khb_fit, khb_rev;
