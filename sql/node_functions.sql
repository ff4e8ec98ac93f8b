-- A Citus node's share of a distributed k-means or gpu_matmul (src/worker.c),
-- called here by hand on plain tables (tests/citus.sh runs them on a
-- cluster): what the coordinator receives must equal what SQL (or the same
-- call on one table) computes from the same rows.
CREATE TABLE nd_a (id int PRIMARY KEY, x float8, y float8);
CREATE TABLE nd_b (id int PRIMARY KEY, x float8, y float8);
INSERT INTO nd_a SELECT i, (i % 3) * 10 + sin(i), cos(i) FROM generate_series(1, 600) i;
INSERT INTO nd_b SELECT i, (i % 3) * 10 + sin(i * 0.7), cos(i * 1.1) FROM generate_series(601, 1000) i;
INSERT INTO nd_b VALUES (1001, NULL, 1);
CREATE VIEW nd_all AS SELECT * FROM nd_a UNION ALL SELECT * FROM nd_b;
-- doubles as the nodes pass them: bytea of big-endian doubles, and back
CREATE FUNCTION nd_wire(float8[]) RETURNS bytea LANGUAGE sql IMMUTABLE
AS $$ SELECT string_agg(float8send(x), ''::bytea ORDER BY i) FROM unnest($1) WITH ORDINALITY u(x, i) $$;
CREATE FUNCTION nd_doubles(b bytea) RETURNS float8[] LANGUAGE sql IMMUTABLE
AS $$ SELECT coalesce(array_agg(CASE WHEN e = 0 THEN 0::float8
                                     ELSE (1 - 2 * s) * (1 + m::float8 / 4503599627370496) * power(2::float8, e - 1023) END
                                ORDER BY i), '{}')
      FROM (SELECT i, (u >> 63) & 1 AS s, (u >> 52) & 2047 AS e, u & 4503599627370495 AS m
            FROM (SELECT i, ('x' || encode(substr(b, 8 * i + 1, 8), 'hex'))::bit(64)::bigint AS u
                  FROM generate_series(0, length(b) / 8 - 1) i) w) t $$;
SELECT nd_doubles(nd_wire('{1.5, -2, 0, 1e-300, 3.141592653589793}')) AS round_trip;

-- nothing loaded yet
SELECT * FROM gpu_kmeans_node_step(nd_wire('{0,0}'), true);

-- both "shards" into one set: their usable rows and the unusable one
SELECT rows, invalid FROM gpu_kmeans_node_load(ARRAY['nd_a', 'nd_b']::regclass[], ARRAY['x', 'y'], 'id',
                                               'euclidean', 2, NULL, NULL);

-- a step: the per-cluster sums and counts of the rows nearest each centroid
CREATE TEMP TABLE nd_c AS SELECT ARRAY[[0, 0], [10, 0], [20, 0]]::float8[] AS c, nd_wire('{0, 0, 10, 0, 20, 0}') AS w;
CREATE TEMP TABLE nd_sql AS
SELECT n, count(*) AS cnt, sum(x) AS sx, sum(y) AS sy,
       sum((x - (SELECT c FROM nd_c)[n][1]) ^ 2 + (y - (SELECT c FROM nd_c)[n][2]) ^ 2) AS inertia
FROM (SELECT x, y, (SELECT i FROM generate_series(1, 3) i
                    ORDER BY (x - (SELECT c FROM nd_c)[i][1]) ^ 2 + (y - (SELECT c FROM nd_c)[i][2]) ^ 2 LIMIT 1) AS n
      FROM nd_all WHERE x IS NOT NULL) t GROUP BY n;
SELECT s.counts = (SELECT array_agg(cnt ORDER BY n) FROM nd_sql) AS same_counts,
       (SELECT bool_and(abs((nd_doubles(s.sums))[2 * n - 1] - sx) < 1e-9 AND abs((nd_doubles(s.sums))[2 * n] - sy) < 1e-9)
        FROM nd_sql) AS same_sums,
       abs(s.inertia - (SELECT sum(inertia) FROM nd_sql)) < 1e-9 AS same_inertia,
       s.changed AS changed_on_begin
FROM nd_c, gpu_kmeans_node_step(nd_c.w, true) s;
-- the same centroids again: no row changes
SELECT changed FROM nd_c, gpu_kmeans_node_step(nd_c.w, false);
-- another k without begin is refused
SELECT * FROM gpu_kmeans_node_step(nd_wire('{0, 0, 1, 1}'), false);
-- centroids that are not k rows of d doubles
SELECT * FROM gpu_kmeans_node_step('\x0102'::bytea, true);

-- the labels: every id once, as gpu_kmeans_assign gives them (the unusable row NULL)
SELECT count(*) AS rows, count(*) FILTER (WHERE a.cluster IS DISTINCT FROM l.cluster
                                          OR abs(a.distance - l.distance) > 1e-12) AS differ,
       count(*) FILTER (WHERE l.cluster IS NULL) AS null_clusters
FROM (SELECT unnest(ids) AS id, unnest(clusters) AS cluster, unnest(distances) AS distance
      FROM nd_c, gpu_kmeans_node_labels(nd_c.w)) l
FULL JOIN gpu_kmeans_assign('nd_all', (SELECT c FROM nd_c), id_column => 'id') a USING (id);

-- the sample: rate 1 is every usable row, in order; a rate picks by index and seed
SELECT length(gpu_kmeans_node_sample(1, 0, 1.0)) / 16 AS all_rows,
       gpu_kmeans_node_sample(7, 0, 0.05) = gpu_kmeans_node_sample(7, 0, 0.05) AS reproducible,
       gpu_kmeans_node_sample(7, 0, 0.05) <> gpu_kmeans_node_sample(7, 500, 0.05) AS by_index;

-- scaled rows: (x - mean) / std on load
SELECT rows FROM gpu_kmeans_node_load(ARRAY['nd_a']::regclass[], ARRAY['x', 'y'], NULL, 'euclidean', 2,
                                      '{10, 0}', '{5, 2}');
SELECT (SELECT bool_and(abs(v - w) < 1e-12)
        FROM unnest(nd_doubles(gpu_kmeans_node_sample(1, 0, 1.0))) WITH ORDINALITY s(v, i)
        JOIN (SELECT row_number() OVER () AS i, w
              FROM (SELECT unnest(ARRAY[(x - 10) / 5, y / 2]) AS w FROM (SELECT * FROM nd_a ORDER BY id) o) u) t USING (i))
       AS scaled_on_load;
-- loaded without an id column: no labels
SELECT * FROM nd_c, gpu_kmeans_node_labels(nd_c.w);

-- a shard of other width than the coordinator resolved
SELECT * FROM gpu_kmeans_node_load(ARRAY['nd_a']::regclass[], ARRAY['x', 'y'], NULL, 'euclidean', 3, NULL, NULL);
SELECT gpu_kmeans_node_close();
SELECT * FROM gpu_kmeans_node_step(nd_wire('{0,0}'), true);
DROP VIEW nd_all;
DROP TABLE nd_a, nd_b;

-- gpu_matmul's share: a node's rows of a from two "shards" (odd and even
-- row ids, float8[] and real[]), times b, with their ids
CREATE TABLE nm_a1 (row_id int, row_vec float8[]);
CREATE TABLE nm_a2 (row_id bigint, row_vec real[]);
INSERT INTO nm_a1 SELECT i, ARRAY[i, 1, sin(i)] FROM generate_series(1, 300, 2) i;
INSERT INTO nm_a2 SELECT i, ARRAY[i, 2, cos(i)]::real[] FROM generate_series(2, 300, 2) i;
CREATE TABLE nm_all AS SELECT row_id, row_vec FROM nm_a1 UNION ALL SELECT row_id, row_vec::float8[] FROM nm_a2;
CREATE TABLE nm_b (row_id int, row_vec float8[]);
INSERT INTO nm_b SELECT i, ARRAY(SELECT i * 0.5 - j FROM generate_series(1, 4) j) FROM generate_series(1, 3) i;
-- nothing loaded yet
SELECT * FROM gpu_matmul_node_product(nd_wire('{1}'), 1, 1);
SELECT rows, first_id, min_id, max_id, len
FROM gpu_matmul_node_load(ARRAY['nm_a1', 'nm_a2']::regclass[], ARRAY['row_id', 'row_vec']);
-- b of another size than k x n doubles, or another k than the rows' length
SELECT * FROM gpu_matmul_node_product(nd_wire('{1, 2, 3}'), 3, 4);
SELECT * FROM gpu_matmul_node_product(nd_wire('{1, 2, 3, 4}'), 2, 2);
-- every row once, equal to gpu_matmul of all the rows (a piece: its rows'
-- ids as big-endian bigints, then the rows, 4 doubles each)
SELECT count(*) AS rows, count(DISTINCT id) AS ids,
       count(*) FILTER (WHERE (SELECT max(abs(x - y)) FROM unnest(p.v, m.row_vec) u(x, y)) > 1e-12) AS differ
FROM (SELECT ('x' || encode(substr(piece, 8 * i + 1, 8), 'hex'))::bit(64)::bigint AS id,
             nd_doubles(substr(piece, 8 * rows + 32 * i + 1, 32)) AS v
      FROM (SELECT piece, length(piece) / 40 AS rows
            FROM gpu_matmul_node_product((SELECT nd_wire(array_agg(x ORDER BY row_id, j))
                                          FROM nm_b, unnest(row_vec) WITH ORDINALITY u(x, j)), 3, 4) piece) q,
           generate_series(0, rows - 1) i) p
JOIN gpu_matmul('nm_all'::regclass, 'nm_b') m ON m.row_id = p.id;
-- the product frees the rows
SELECT * FROM gpu_matmul_node_product(nd_wire('{1, 2, 3, 4}'), 1, 4);
-- no rows: NULL shape; a sparse table's columns; rows of two lengths
SELECT rows, first_id, len FROM gpu_matmul_node_load('{}'::regclass[], ARRAY['row_id', 'row_vec']);
SELECT * FROM gpu_matmul_node_load(ARRAY['nm_a1']::regclass[], ARRAY['row_id', 'row_id', 'row_vec']);
INSERT INTO nm_a2 VALUES (400, '{1, 2}');
SELECT * FROM gpu_matmul_node_load(ARRAY['nm_a1', 'nm_a2']::regclass[], ARRAY['row_id', 'row_vec']);
DROP TABLE nm_a1, nm_a2, nm_all, nm_b;
DROP FUNCTION nd_wire(float8[]), nd_doubles(bytea);
