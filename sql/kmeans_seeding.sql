-- Greedy k-means++ (scikit-learn's default): each step keeps the best of
-- 2 + ln k candidates, so separated blobs each get a centre, where plain
-- k-means++ often puts two in one blob and Lloyd cannot move them apart.
-- 20 blobs of 100 rows in 32 dimensions, centres spread in [-10, 10]^32 and
-- rows within 1.6 of their centre in each coordinate (md5 as the dice):
-- of seeds 1 to 12, plain k-means++ (pg_gpu 1.7's) found the 20 blobs
-- (20 pairs of blob and cluster) for one, greedy k-means++ for 11.
CREATE TABLE sd_blobs (id int PRIMARY KEY, blob int, e float8[]);
INSERT INTO sd_blobs
SELECT i, i % 20,
       array_agg(10 * ('x' || substr(md5((i % 20) || ':' || j), 1, 8))::bit(32)::int::float8 / 2147483648
                 + 1.6 * ('x' || substr(md5(i || ':' || j), 1, 8))::bit(32)::int::float8 / 2147483648 ORDER BY j)
FROM generate_series(1, 2000) i, generate_series(1, 32) j GROUP BY i;
SELECT s AS seed, count(DISTINCT cluster) AS clusters, count(DISTINCT (blob, cluster)) AS pairs
FROM generate_series(1, 12) s,
     LATERAL gpu_kmeans('sd_blobs', 20, columns => ARRAY['e'], id_column => 'id', seed => s) k
     JOIN sd_blobs USING (id)
GROUP BY s ORDER BY s;
SELECT count(*) FILTER (WHERE pairs = 20) AS seeds_finding_every_blob
FROM (SELECT s, count(DISTINCT (blob, cluster)) AS pairs
      FROM generate_series(1, 12) s,
           LATERAL gpu_kmeans('sd_blobs', 20, columns => ARRAY['e'], id_column => 'id', seed => s) k
           JOIN sd_blobs USING (id) GROUP BY s) t;
-- the seeding alone (max_iter 1): the inertia after one iteration, against the blobs'
SELECT s AS seed, round((f.inertia / b.inertia)::numeric, 2) AS ratio_to_blobs
FROM generate_series(1, 3) s,
     LATERAL gpu_kmeans_fit('sd_blobs', 20, columns => ARRAY['e'], seed => s, max_iter => 1) f,
     (SELECT sum(d) AS inertia
      FROM (SELECT (SELECT sum((v - m) ^ 2) FROM unnest(e, c) u(v, m)) AS d
            FROM sd_blobs JOIN (SELECT blob, array_agg(m ORDER BY j) AS c
                                FROM (SELECT blob, j, avg(v) AS m FROM sd_blobs, unnest(e) WITH ORDINALITY u(v, j)
                                      GROUP BY blob, j) a GROUP BY blob) cm USING (blob)) t) b
ORDER BY s;
DROP TABLE sd_blobs;
