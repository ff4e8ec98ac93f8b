-- Mixed magnitudes: one row near 1e200 beside ordinary ones clusters as
-- exact arithmetic does (the outlier alone, the others as without it), and
-- a centroid near 1e300 takes no row that is nearer another; magnitudes no
-- double-precision scale can square at once are an error (22003), never a
-- silently wrong partition.
CREATE TABLE mm_pts (id int PRIMARY KEY, x float8, y float8);
INSERT INTO mm_pts SELECT g, g % 7, g % 11 FROM generate_series(1, 1000) g;
CREATE TABLE mm_fit AS
SELECT * FROM gpu_kmeans_fit('mm_pts', 2, columns => ARRAY['x', 'y'], init_centroids => ARRAY[[1, 1], [5, 8]]);
SELECT sizes, round(inertia::numeric, 6) AS inertia FROM mm_fit;
INSERT INTO mm_pts VALUES (1001, 1e200, 0);
-- the outlier alone; the others split as without it, with the same inertia
SELECT f.sizes, f.sizes[1:2] = m.sizes AS same_split, f.centroids[3:3] AS outlier,
       f.centroids[1:2] = m.centroids AS same_centroids, f.inertia = m.inertia AS same_inertia
FROM gpu_kmeans_fit('mm_pts', 3, columns => ARRAY['x', 'y'],
                    init_centroids => ARRAY[[1, 1], [5, 8], [1e200, 0]]) f, mm_fit m;
-- k-means++ finds the outlier too
SELECT sizes @> '{1}' AS outlier_alone, cardinality(sizes) AS k, iterations > 0 AS ran
FROM gpu_kmeans_fit('mm_pts', 3, columns => ARRAY['x', 'y'], seed => 0);
SELECT cluster, count(*) FROM gpu_kmeans('mm_pts', 3, columns => ARRAY['x', 'y'],
       init_centroids => ARRAY[[1, 1], [5, 8], [1e200, 0]]) WHERE id > 995 GROUP BY 1 ORDER BY 1;
DELETE FROM mm_pts WHERE id = 1001;
-- assignment beside a far centroid: the labels and distances of the near ones
SELECT count(*) AS rows, count(*) FILTER (WHERE a.cluster = b.cluster) AS same_cluster,
       count(*) FILTER (WHERE a.distance = b.distance) AS same_distance,
       count(*) FILTER (WHERE a.cluster = 3) AS at_far_centroid
FROM gpu_kmeans_assign('mm_pts', ARRAY[[3, 5], [1, 1], [1e300, 0]]::float8[], columns => ARRAY['x', 'y']) a
JOIN gpu_kmeans_assign('mm_pts', ARRAY[[3, 5], [1, 1]]::float8[], columns => ARRAY['x', 'y']) b USING (id);
-- tiny beside huge: from 1e-200 to 1e100 fits, 1e-300 to 1e300 does not
INSERT INTO mm_pts VALUES (1001, 1e100, 0), (1002, 1e-200, 0);
SELECT sizes FROM gpu_kmeans_fit('mm_pts', 3, columns => ARRAY['x', 'y'],
                                 init_centroids => ARRAY[[0, 0], [5, 8], [1e100, 0]]);
UPDATE mm_pts SET x = 1e300 WHERE id = 1001;
UPDATE mm_pts SET x = 1e-300 WHERE id = 1002;
SELECT sizes FROM gpu_kmeans_fit('mm_pts', 3, columns => ARRAY['x', 'y']);
SELECT count(*) FROM gpu_kmeans_assign('mm_pts', ARRAY[[0, 0]]::float8[], columns => ARRAY['x', 'y']);
DELETE FROM mm_pts WHERE id > 1000;
SELECT count(*) FROM gpu_kmeans_assign('mm_pts', ARRAY[[1e-300, 0], [1e300, 0]]::float8[], columns => ARRAY['x', 'y']);
DROP TABLE mm_pts, mm_fit;
