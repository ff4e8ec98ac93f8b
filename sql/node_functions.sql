-- A Citus node's share of a distributed k-means or gpu_matmul (src/citus_node.c),
-- called here by hand on plain tables (tests/citus.sh runs them on a
-- cluster): what the coordinator receives must equal what SQL (or the same
-- call on one table) computes from the same rows.  The rows loaded live for
-- the transaction, so each load and its uses are in one transaction block.
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
SELECT * FROM pg_gpu_node_kmeans_step(nd_wire('{0,0}'), true);

-- both "shards" into one set: their usable rows and the unusable one
BEGIN;
SELECT rows, invalid FROM pg_gpu_node_kmeans_load(ARRAY['nd_a', 'nd_b']::regclass[], ARRAY['x', 'y'], 'id',
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
FROM nd_c, pg_gpu_node_kmeans_step(nd_c.w, true) s;
-- the same centroids again: no row changes
SELECT changed FROM nd_c, pg_gpu_node_kmeans_step(nd_c.w, false);
-- another k without begin is refused (the transaction with it)
SAVEPOINT s;
SELECT * FROM pg_gpu_node_kmeans_step(nd_wire('{0, 0, 1, 1}'), false);
ROLLBACK TO s;
-- centroids that are not k rows of d doubles, or not finite
SELECT * FROM pg_gpu_node_kmeans_step('\x0102'::bytea, true);
ROLLBACK TO s;
SELECT * FROM pg_gpu_node_kmeans_step(nd_wire('{0, NaN}'), true);
ROLLBACK TO s;

-- the labels: every id once, as gpu_kmeans_assign gives them (the unusable row NULL)
SELECT count(*) AS rows, count(*) FILTER (WHERE a.cluster IS DISTINCT FROM l.cluster
                                          OR abs(a.distance - l.distance) > 1e-12) AS differ,
       count(*) FILTER (WHERE l.cluster IS NULL) AS null_clusters
FROM (SELECT unnest(ids) AS id, unnest(clusters) AS cluster, unnest(distances) AS distance
      FROM nd_c, pg_gpu_node_kmeans_labels(nd_c.w)) l
FULL JOIN gpu_kmeans_assign('nd_all', (SELECT c FROM nd_c), id_column => 'id') a USING (id);

-- the farthest rows of the last step (an emptied cluster takes one): those
-- of the largest distances to their centroids, as gpu_kmeans_assign measures them
SELECT (SELECT array_agg(round(d::numeric, 9)) FROM unnest(f.distances) d)
       = (SELECT array_agg(round((distance ^ 2)::numeric, 9) ORDER BY distance DESC)
          FROM (SELECT distance FROM gpu_kmeans_assign('nd_all', (SELECT c FROM nd_c), id_column => 'id')
                WHERE distance IS NOT NULL ORDER BY distance DESC LIMIT 2) t) AS farthest_distances,
       nd_doubles(f.rows) = (SELECT array_agg(v ORDER BY o, j)
                             FROM (SELECT a.distance AS o0, row_number() OVER (ORDER BY a.distance DESC) AS o, x, y
                                   FROM gpu_kmeans_assign('nd_all', (SELECT c FROM nd_c), id_column => 'id') a
                                   JOIN nd_all USING (id) WHERE a.distance IS NOT NULL
                                   ORDER BY a.distance DESC LIMIT 2) t,
                             LATERAL unnest(ARRAY[x, y]) WITH ORDINALITY u(v, j)) AS farthest_rows,
       cardinality(f.keys) AS keys
FROM pg_gpu_node_kmeans_farthest(2) f;
-- m in 1..k
SELECT * FROM pg_gpu_node_kmeans_farthest(0);
ROLLBACK TO s;
SELECT * FROM pg_gpu_node_kmeans_farthest(4);
ROLLBACK TO s;

-- the sample: rate 1 is every usable row; a rate picks rows by their content and the seed
SELECT length(pg_gpu_node_kmeans_sample(1, 1.0)) / 16 AS all_rows,
       pg_gpu_node_kmeans_sample(7, 0.05) = pg_gpu_node_kmeans_sample(7, 0.05) AS reproducible,
       pg_gpu_node_kmeans_sample(7, 0.05) <> pg_gpu_node_kmeans_sample(8, 0.05) AS by_seed;

-- a sample's rate in (0, 1]
SELECT length(pg_gpu_node_kmeans_sample(1, 0)) AS zero_rate;
ROLLBACK TO s;
SELECT length(pg_gpu_node_kmeans_sample(1, 'NaN')) AS nan_rate;
ROLLBACK TO s;
-- NULL arguments of the strict functions: NULL, nothing read
SELECT pg_gpu_node_kmeans_sample(NULL, 1) IS NULL AS null_sample,
       pg_gpu_node_kmeans_farthest(NULL) IS NULL AS null_farthest,
       (SELECT count(*) FROM pg_gpu_node_kmeans_step(NULL, true) WHERE sums IS NOT NULL) AS null_step,
       (SELECT count(*) FROM pg_gpu_node_kmeans_labels(NULL)) AS null_labels;
COMMIT;

-- scaled rows: (x - mean) / std on load
BEGIN;
SELECT rows FROM pg_gpu_node_kmeans_load(ARRAY['nd_a']::regclass[], ARRAY['x', 'y'], NULL, 'euclidean', 2,
                                      '{10, 0}', '{5, 2}');
SELECT (SELECT bool_and(abs(v - w) < 1e-12)
        FROM unnest(nd_doubles(pg_gpu_node_kmeans_sample(1, 1.0))) WITH ORDINALITY s(v, i)
        JOIN (SELECT row_number() OVER () AS i, w
              FROM (SELECT unnest(ARRAY[(x - 10) / 5, y / 2]) AS w FROM (SELECT * FROM nd_a ORDER BY id) o) u) t USING (i))
       AS scaled_on_load;
-- loaded without an id column: no labels
SELECT * FROM nd_c, pg_gpu_node_kmeans_labels(nd_c.w);
ROLLBACK;

-- a shard of other width than the coordinator resolved
SELECT * FROM pg_gpu_node_kmeans_load(ARRAY['nd_a']::regclass[], ARRAY['x', 'y'], NULL, 'euclidean', 3, NULL, NULL);
-- close frees the rows
BEGIN;
SELECT rows FROM pg_gpu_node_kmeans_load(ARRAY['nd_a']::regclass[], ARRAY['x', 'y'], 'id', 'euclidean', 2, NULL, NULL);
SELECT pg_gpu_node_kmeans_close();
SELECT * FROM pg_gpu_node_kmeans_step(nd_wire('{0,0}'), true);
ROLLBACK;

-- hostile arguments of the load: each refused with its SQLSTATE, none read
SELECT * FROM pg_gpu_node_kmeans_load(NULL, ARRAY['x'], 'id', 'euclidean', 2, NULL, NULL);
SELECT * FROM pg_gpu_node_kmeans_load(ARRAY['nd_a']::regclass[], NULL, 'id', 'euclidean', 2, NULL, NULL);
SELECT * FROM pg_gpu_node_kmeans_load(ARRAY['nd_a']::regclass[], ARRAY['x'], 'id', NULL, 1, NULL, NULL);
SELECT * FROM pg_gpu_node_kmeans_load(ARRAY['nd_a']::regclass[], ARRAY['x'], 'id', 'euclidean', NULL, NULL, NULL);
SELECT * FROM pg_gpu_node_kmeans_load(ARRAY[NULL]::regclass[], ARRAY['x'], 'id', 'euclidean', 1, NULL, NULL);
SELECT * FROM pg_gpu_node_kmeans_load(ARRAY['nd_a']::regclass[], ARRAY['x', NULL], 'id', 'euclidean', 2, NULL, NULL);
SELECT * FROM pg_gpu_node_kmeans_load(ARRAY['nd_a']::regclass[], '{}', 'id', 'euclidean', 2, NULL, NULL);
SELECT * FROM pg_gpu_node_kmeans_load(ARRAY['nd_a']::regclass[], ARRAY['x'], 'id', 'manhattan', 1, NULL, NULL);
SELECT * FROM pg_gpu_node_kmeans_load(ARRAY['nd_a']::regclass[], ARRAY['x'], 'id', 'euclidean', 0, NULL, NULL);
SELECT * FROM pg_gpu_node_kmeans_load('{}'::regclass[], ARRAY['x'], 'id', 'euclidean', 2000000000, NULL, NULL);
SELECT * FROM pg_gpu_node_kmeans_load(ARRAY['nd_a']::regclass[], ARRAY['x'], 'id', 'euclidean', 1, '{0}', NULL);
SELECT * FROM pg_gpu_node_kmeans_load(ARRAY['nd_a']::regclass[], ARRAY['x'], 'id', 'euclidean', 1, '{0}', '{0}');
SELECT * FROM pg_gpu_node_kmeans_load(ARRAY['nd_a']::regclass[], ARRAY['x'], 'id', 'euclidean', 1, '{0}', '{-1}');
SELECT * FROM pg_gpu_node_kmeans_load(ARRAY['nd_a']::regclass[], ARRAY['x'], 'id', 'euclidean', 1, '{0}', '{NaN}');
SELECT * FROM pg_gpu_node_kmeans_load(ARRAY['nd_a']::regclass[], ARRAY['x'], 'id', 'euclidean', 1, '{Infinity}', '{1}');
SELECT * FROM pg_gpu_node_kmeans_load(ARRAY['nd_a']::regclass[], ARRAY['x'], 'id', 'euclidean', 1, '{0, 0}', '{1, 1}');
SELECT * FROM pg_gpu_node_kmeans_load(ARRAY['nd_a']::regclass[], ARRAY['x'], 'id', 'euclidean', 1, '{NULL}', '{1}');
SELECT * FROM pg_gpu_node_kmeans_load(ARRAY['nd_a']::regclass[], ARRAY['x'], 'nope', 'euclidean', 1, NULL, NULL);
-- no rows loaded: every use says so
SELECT * FROM pg_gpu_node_kmeans_step(nd_wire('{0,0}'), true);
SELECT pg_gpu_node_kmeans_sample(1, 1);
SELECT * FROM pg_gpu_node_kmeans_farthest(1);
SELECT * FROM pg_gpu_node_kmeans_labels(nd_wire('{0,0}'));
SELECT pg_gpu_node_kmeans_close();

-- no rows of a load survive its transaction: a load in one statement, then
-- a step in the next says no rows are loaded
SELECT rows FROM pg_gpu_node_kmeans_load(ARRAY['nd_a']::regclass[], ARRAY['x', 'y'], 'id', 'euclidean', 2, NULL, NULL);
SELECT * FROM pg_gpu_node_kmeans_step(nd_wire('{0,0}'), true);
SELECT length(pg_gpu_node_kmeans_sample(1, 1.0));
-- nor an aborted transaction
BEGIN;
SELECT rows FROM pg_gpu_node_kmeans_load(ARRAY['nd_a']::regclass[], ARRAY['x', 'y'], 'id', 'euclidean', 2, NULL, NULL);
ROLLBACK;
SELECT * FROM pg_gpu_node_kmeans_step(nd_wire('{0,0}'), true);

-- rows loaded as one role are refused to another (SET ROLE, SET SESSION
-- AUTHORIZATION, a SECURITY DEFINER function), and to PUBLIC nothing is
-- granted: a new role may not execute the node functions at all
CREATE ROLE regress_pg_gpu_node_a;
CREATE ROLE regress_pg_gpu_node_b;
GRANT SELECT ON nd_a TO regress_pg_gpu_node_a;
SET ROLE regress_pg_gpu_node_b;
SELECT * FROM pg_gpu_node_kmeans_close();
SELECT * FROM pg_gpu_node_matmul_product('\x', 1, 1);
RESET ROLE;
DO $$
DECLARE f regprocedure;
BEGIN
  FOR f IN SELECT p.oid FROM pg_proc p WHERE p.proname LIKE 'pg\_gpu\_node\_%' LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO regress_pg_gpu_node_a, regress_pg_gpu_node_b', f);
  END LOOP;
END $$;
BEGIN;
SET LOCAL ROLE regress_pg_gpu_node_a;
SELECT rows FROM pg_gpu_node_kmeans_load(ARRAY['nd_a']::regclass[], ARRAY['x', 'y'], 'id', 'euclidean', 2, NULL, NULL);
SELECT length(pg_gpu_node_kmeans_sample(1, 1.0)) / 16 AS own_rows;
SET LOCAL ROLE regress_pg_gpu_node_b;
SAVEPOINT s;
SELECT length(pg_gpu_node_kmeans_sample(1, 1.0));
ROLLBACK TO s;
SELECT count(*) FROM pg_gpu_node_kmeans_labels(nd_wire('{0,0}'));
ROLLBACK TO s;
SELECT * FROM pg_gpu_node_kmeans_step(nd_wire('{0,0}'), true);
ROLLBACK TO s;
SELECT * FROM pg_gpu_node_kmeans_farthest(1);
ROLLBACK TO s;
SELECT pg_gpu_node_kmeans_close();
ROLLBACK TO s;
RESET ROLE;
SELECT length(pg_gpu_node_kmeans_sample(1, 1.0));
ROLLBACK TO s;
SET LOCAL SESSION AUTHORIZATION regress_pg_gpu_node_b;
SELECT length(pg_gpu_node_kmeans_sample(1, 1.0));
ROLLBACK;
-- DISCARD ALL (outside a transaction block) leaves nothing loaded
SELECT rows FROM pg_gpu_node_kmeans_load(ARRAY['nd_a']::regclass[], ARRAY['x', 'y'], 'id', 'euclidean', 2, NULL, NULL);
DISCARD ALL;
SELECT * FROM pg_gpu_node_kmeans_step(nd_wire('{0,0}'), true);
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
SELECT * FROM pg_gpu_node_matmul_product(nd_wire('{1}'), 1, 1);
BEGIN;
SELECT rows, first_id, min_id, max_id, len
FROM pg_gpu_node_matmul_load(ARRAY['nm_a1', 'nm_a2']::regclass[], ARRAY['row_id', 'row_vec']);
-- b of another size than k x n doubles, or another k than the rows' length,
-- or k, n below 1 (the rows stay loaded)
SAVEPOINT s;
SELECT * FROM pg_gpu_node_matmul_product(nd_wire('{1, 2, 3}'), 3, 4);
ROLLBACK TO s;
SELECT * FROM pg_gpu_node_matmul_product(nd_wire('{1, 2, 3, 4}'), 2, 2);
ROLLBACK TO s;
SELECT * FROM pg_gpu_node_matmul_product('\x', 0, 4);
ROLLBACK TO s;
SELECT * FROM pg_gpu_node_matmul_product(nd_wire('{1}'), 1, -1);
ROLLBACK TO s;
SELECT * FROM pg_gpu_node_matmul_product(nd_wire('{1}'), 2147483647, 2147483647);
ROLLBACK TO s;
SELECT count(*) FROM pg_gpu_node_matmul_product(NULL, 3, 4);
-- every row once, equal to gpu_matmul of all the rows (a piece: its rows'
-- ids as big-endian bigints, then the rows, 4 doubles each)
SELECT count(*) AS rows, count(DISTINCT id) AS ids,
       count(*) FILTER (WHERE (SELECT max(abs(x - y)) FROM unnest(p.v, m.row_vec) u(x, y)) > 1e-12) AS differ
FROM (SELECT ('x' || encode(substr(piece, 8 * i + 1, 8), 'hex'))::bit(64)::bigint AS id,
             nd_doubles(substr(piece, 8 * rows + 32 * i + 1, 32)) AS v
      FROM (SELECT piece, length(piece) / 40 AS rows
            FROM pg_gpu_node_matmul_product((SELECT nd_wire(array_agg(x ORDER BY row_id, j))
                                          FROM nm_b, unnest(row_vec) WITH ORDINALITY u(x, j)), 3, 4) piece) q,
           generate_series(0, rows - 1) i) p
JOIN gpu_matmul('nm_all'::regclass, 'nm_b') m ON m.row_id = p.id;
-- the product frees the rows
SELECT * FROM pg_gpu_node_matmul_product(nd_wire('{1, 2, 3, 4}'), 1, 4);
ROLLBACK;
-- nothing loaded, or no rows: b's message says what it must be
SELECT * FROM pg_gpu_node_matmul_product(nd_wire('{1, 2, 3}'), 1, 4);
BEGIN;
SELECT rows, first_id, len FROM pg_gpu_node_matmul_load('{}'::regclass[], ARRAY['row_id', 'row_vec']);
SAVEPOINT s;
SELECT * FROM pg_gpu_node_matmul_product(nd_wire('{1, 2, 3}'), 1, 4);
ROLLBACK TO s;
SELECT count(*) FROM pg_gpu_node_matmul_product(nd_wire('{1, 2, 3, 4}'), 1, 4);
COMMIT;
-- a load outside a transaction block is gone at the statement's end
SELECT rows FROM pg_gpu_node_matmul_load(ARRAY['nm_a1']::regclass[], ARRAY['row_id', 'row_vec']);
SELECT * FROM pg_gpu_node_matmul_product(nd_wire('{1, 2, 3}'), 3, 1);
-- a sparse table's columns; rows of two lengths; hostile arguments
SELECT * FROM pg_gpu_node_matmul_load(ARRAY['nm_a1']::regclass[], ARRAY['row_id', 'row_id', 'row_vec']);
SELECT * FROM pg_gpu_node_matmul_load(ARRAY['nm_a1', NULL]::regclass[], ARRAY['row_id', 'row_vec']);
SELECT * FROM pg_gpu_node_matmul_load(ARRAY['nm_a1']::regclass[], ARRAY['row_id', NULL]);
SELECT * FROM pg_gpu_node_matmul_load(ARRAY['nm_a1']::regclass[], '{}');
SELECT count(*) FROM pg_gpu_node_matmul_load(NULL, ARRAY['row_id', 'row_vec']) WHERE rows IS NOT NULL;
INSERT INTO nm_a2 VALUES (400, '{1, 2}');
SELECT * FROM pg_gpu_node_matmul_load(ARRAY['nm_a1', 'nm_a2']::regclass[], ARRAY['row_id', 'row_vec']);
-- rows loaded by one role are refused to another
GRANT SELECT ON nm_a1 TO regress_pg_gpu_node_a;
BEGIN;
SET LOCAL ROLE regress_pg_gpu_node_a;
SELECT rows FROM pg_gpu_node_matmul_load(ARRAY['nm_a1']::regclass[], ARRAY['row_id', 'row_vec']);
SET LOCAL ROLE regress_pg_gpu_node_b;
SELECT * FROM pg_gpu_node_matmul_product(nd_wire('{1, 2, 3}'), 3, 1);
ROLLBACK;

-- the product owns what it returns: a second product in the same query, or
-- a new load while one is read, cannot free it under it (a clean result or
-- a clean error, never a crash)
CREATE TEMP TABLE nm_big (row_id int, row_vec float8[]);
INSERT INTO nm_big SELECT g, ARRAY[1.0] FROM generate_series(1, 100000) g;
BEGIN;
SELECT rows FROM pg_gpu_node_matmul_load(ARRAY['nm_big'::regclass], ARRAY['row_id', 'row_vec']);
SELECT count(p1), count(p2) FROM (SELECT
    pg_gpu_node_matmul_product(decode(repeat('3ff0000000000000', 8), 'hex'), 1, 8) AS p1,
    pg_gpu_node_matmul_product(decode(repeat('3ff0000000000000', 16), 'hex'), 1, 16) AS p2) s;
ROLLBACK;
BEGIN;
SELECT rows FROM pg_gpu_node_matmul_load(ARRAY['nm_big'::regclass], ARRAY['row_id', 'row_vec']);
DECLARE c CURSOR FOR
SELECT length(p) AS bytes, ('x' || encode(substr(p, 1, 8), 'hex'))::bit(64)::bigint AS first_id,
       substr(p, length(p) - 7) AS last_value
FROM (SELECT pg_gpu_node_matmul_product(decode(repeat('3ff0000000000000', 8), 'hex'), 1, 8) AS p) q;
FETCH 1 FROM c;
SELECT rows FROM pg_gpu_node_matmul_load(ARRAY['nm_a1'::regclass], ARRAY['row_id', 'row_vec']);
FETCH 1 FROM c;
FETCH ALL FROM c;
ROLLBACK;
DROP TABLE nm_a1, nm_a2, nm_all, nm_b;
DROP TABLE nm_big;
DROP FUNCTION nd_wire(float8[]), nd_doubles(bytea);

-- internal: out of a user's \df gpu_*, nothing executable by PUBLIC
SELECT count(*) AS gpu_node_functions FROM pg_proc WHERE proname LIKE 'gpu\_%node%';
SELECT p.proname, p.proacl IS NOT NULL AS has_acl,
       NOT EXISTS (SELECT FROM aclexplode(p.proacl) a WHERE a.grantee = 0) AS public_not_granted
FROM pg_proc p WHERE p.proname LIKE 'pg\_gpu\_node\_%' ORDER BY 1;
DO $$
DECLARE f regprocedure;
BEGIN
  FOR f IN SELECT p.oid FROM pg_proc p WHERE p.proname LIKE 'pg\_gpu\_node\_%' LOOP
    EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM regress_pg_gpu_node_a, regress_pg_gpu_node_b', f);
  END LOOP;
END $$;
DROP ROLE regress_pg_gpu_node_a, regress_pg_gpu_node_b;
