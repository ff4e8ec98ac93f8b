-- Values like 1e200 cluster correctly in double precision (no overflow to
-- Infinity in the distances); so do values like 1e-200.
CREATE TABLE big (id int PRIMARY KEY, x float8, y float8);
INSERT INTO big VALUES (1, 1e200, 0), (2, 1.1e200, 0), (3, -1e200, 1e200), (4, -1.1e200, 1e200),
                       (5, 0, -1e200);
SELECT centroids, sizes FROM gpu_kmeans_fit('big', 3);
SELECT * FROM gpu_kmeans('big', 3) ORDER BY id;
SELECT id, cluster, distance FROM gpu_kmeans_assign('big', ARRAY[[1e200, 0], [0, 0]]) ORDER BY id;
-- the inertia itself is beyond double precision here
SELECT inertia FROM gpu_kmeans_fit('big', 1);
CREATE TABLE tiny (id int PRIMARY KEY, x float8);
INSERT INTO tiny VALUES (1, 1e-200), (2, 2e-200), (3, 9e-200), (4, 10e-200);
SELECT centroids, sizes FROM gpu_kmeans_fit('tiny', 2);
SELECT * FROM gpu_kmeans('tiny', 2) ORDER BY id;
-- subnormal values (below 2.2e-308): scaled into range in two steps
CREATE TABLE subnormal (id int PRIMARY KEY, x float8);
INSERT INTO subnormal VALUES (1, 1e-310), (2, 2e-310), (3, 9e-310), (4, 1e-309);
SELECT centroids, sizes FROM gpu_kmeans_fit('subnormal', 2);
SELECT id, cluster, distance FROM gpu_kmeans_assign('subnormal', ARRAY[[1.5e-310], [9.5e-310]]) ORDER BY id;
