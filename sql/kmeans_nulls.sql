-- Rows with NULL, NaN or +-Infinity in a used column take no part in the fit
-- and come back with cluster NULL; a NOTICE says how many.
CREATE TABLE n_pts (id bigint PRIMARY KEY, x float8, y numeric, z real);
INSERT INTO n_pts VALUES
  (1, 0, 0, 0), (2, 0, 1, 0), (3, 10, 10, 0), (4, 10, 11, 0),
  (5, NULL, 0, 0), (6, 'NaN', 0, 0), (7, 0, 'NaN', 0), (8, 0, 0, 'Infinity'),
  (9, '-Infinity', 0, 0), (10, 0, NULL, NULL);
SELECT centroids, sizes, inertia FROM gpu_kmeans_fit('n_pts', 2);
SELECT * FROM gpu_kmeans('n_pts', 2) ORDER BY id;
SELECT id, cluster, distance FROM gpu_kmeans_assign('n_pts', ARRAY[[0, 0, 0]]) ORDER BY id;
-- an unused column's NULLs don't matter
SELECT sizes FROM gpu_kmeans_fit('n_pts', 1, columns => ARRAY['z']);
-- numeric values beyond double precision are unusable like Infinity
CREATE TABLE n_huge (id int PRIMARY KEY, v numeric);
INSERT INTO n_huge VALUES (1, 1), (2, 2), (3, '1e400'), (4, '-1e400');
SELECT * FROM gpu_kmeans('n_huge', 1) ORDER BY id;
