-- gpu_knn against the nearest neighbours computed in SQL (the same
-- arithmetic: squared differences summed in column order), with exact ties
-- (values on a grid of quarters) broken by the lower base id, unusable rows
-- on both sides, each metric, a vector column, k beyond the base, a base of
-- several tiles, and the errors.
SET extra_float_digits = 0;
CREATE TABLE kq (id bigint PRIMARY KEY, x float8, y float8, v real[]);
CREATE TABLE kb (id bigint PRIMARY KEY, x float8, y float8, v real[]);
INSERT INTO kq SELECT g, (g * 7 % 13) * 0.25, (g * 5 % 11) * 0.25,
                      ARRAY[(g * 7 % 13) * 0.25, (g * 5 % 11) * 0.25, g % 3]::real[]
FROM generate_series(1, 60) g;
INSERT INTO kb SELECT g, (g * 3 % 17) * 0.25, (g * 11 % 19) * 0.25,
                      ARRAY[(g * 3 % 17) * 0.25, (g * 11 % 19) * 0.25, g % 4]::real[]
FROM generate_series(1, 2000) g;
UPDATE kq SET x = NULL, v = NULL WHERE id % 20 = 0;
UPDATE kb SET y = 'NaN', v = ARRAY[1, 'NaN', 2]::real[] WHERE id % 100 = 0;
-- the reference: every usable pair, ranked by (squared distance, base id)
CREATE TEMP TABLE ref AS
SELECT q.id AS query_id, b.id AS base_id,
       (q.x - b.x) * (q.x - b.x) + (q.y - b.y) * (q.y - b.y) AS s,
       -(q.x * b.x + q.y * b.y) AS ip,
       row_number() OVER (PARTITION BY q.id ORDER BY (q.x - b.x) * (q.x - b.x) + (q.y - b.y) * (q.y - b.y), b.id) AS rank_e,
       row_number() OVER (PARTITION BY q.id ORDER BY -(q.x * b.x + q.y * b.y), b.id) AS rank_ip
FROM kq q, kb b
WHERE q.x IS NOT NULL AND q.y IS NOT NULL AND b.x IS NOT NULL AND b.y <> 'NaN';
SELECT count(DISTINCT query_id) AS queries, count(*) FILTER (WHERE rank_e <= 10) AS pairs,
       count(*) FILTER (WHERE rank_e <= 10 AND s IN (SELECT s FROM ref r2 WHERE r2.query_id = ref.query_id AND r2.rank_e <> ref.rank_e)) > 0 AS has_ties
FROM ref;
-- euclidean: every rank's base row and distance
SELECT count(*) AS rows, count(*) FILTER (WHERE k.base_id = r.base_id AND k.distance = sqrt(r.s)) AS same
FROM gpu_knn('kq', 'kb', 10, columns => ARRAY['x', 'y']) k
FULL JOIN (SELECT * FROM ref WHERE rank_e <= 10) r ON r.query_id = k.query_id AND r.rank_e = k.rank;
-- the negative inner product (pgvector's <#>)
SELECT count(*) AS rows, count(*) FILTER (WHERE k.base_id = r.base_id AND k.distance = r.ip) AS same
FROM gpu_knn('kq', 'kb', 7, columns => ARRAY['x', 'y'], metric => 'inner_product') k
FULL JOIN (SELECT * FROM ref WHERE rank_ip <= 7) r ON r.query_id = k.query_id AND r.rank_ip = k.rank;
-- a real[] column (its third value too), the same reference computed with it
SELECT count(*) AS rows,
       count(*) FILTER (WHERE k.base_id = r.base_id) AS same
FROM gpu_knn('kq', 'kb', 5, columns => ARRAY['v']) k
FULL JOIN (SELECT q.id AS query_id, b.id AS base_id,
                  row_number() OVER (PARTITION BY q.id ORDER BY
                    (q.v[1]::float8 - b.v[1]) * (q.v[1]::float8 - b.v[1]) + (q.v[2]::float8 - b.v[2]) * (q.v[2]::float8 - b.v[2])
                    + (q.v[3]::float8 - b.v[3]) * (q.v[3]::float8 - b.v[3]), b.id) AS rank
           FROM kq q, kb b WHERE q.v IS NOT NULL AND b.id % 100 <> 0) r
  ON r.query_id = k.query_id AND r.rank = k.rank
WHERE r.rank IS NULL OR r.rank <= 5;
-- cosine: 1 - cos of the rows scaled to unit length, on values without ties (compared to 1e-12)
CREATE TEMP TABLE cq AS SELECT g AS id, ARRAY[sin(g), cos(g * 1.7), sin(g * 0.3) + 0.5] AS v FROM generate_series(1, 40) g;
CREATE TEMP TABLE cb AS SELECT g AS id, ARRAY[sin(g * 2.1), cos(g * 0.9), sin(g * 1.3) - 0.2] AS v FROM generate_series(1, 3000) g;
ALTER TABLE cq ADD PRIMARY KEY (id);
ALTER TABLE cb ADD PRIMARY KEY (id);
SELECT count(*) AS rows,
       count(*) FILTER (WHERE k.base_id = r.base_id AND abs(k.distance - r.dist) < 1e-12) AS same
FROM gpu_knn('cq', 'cb', 3, metric => 'cosine') k
FULL JOIN (SELECT query_id, base_id, dist, row_number() OVER (PARTITION BY query_id ORDER BY dist, base_id) AS rank
           FROM (SELECT q.id AS query_id, b.id AS base_id,
                        1 - (q.v[1] * b.v[1] + q.v[2] * b.v[2] + q.v[3] * b.v[3])
                            / sqrt(q.v[1] ^ 2 + q.v[2] ^ 2 + q.v[3] ^ 2)
                            / sqrt(b.v[1] ^ 2 + b.v[2] ^ 2 + b.v[3] ^ 2) AS dist
                 FROM cq q, cb b) p) r
  ON r.query_id = k.query_id AND r.rank = k.rank
WHERE r.rank IS NULL OR r.rank <= 3;
-- ids of any type: uuid queries and text base rows (zero-padded: ordered as
-- the integers), the same neighbours as by the bigint ids, ties included
CREATE TEMP TABLE kq_u AS SELECT md5(id::text)::uuid AS id, x, y FROM kq;
CREATE TEMP TABLE kb_t AS SELECT 'doc-' || lpad(id::text, 5, '0') AS doc, x, y FROM kb;
ALTER TABLE kq_u ADD PRIMARY KEY (id);
ALTER TABLE kb_t ADD PRIMARY KEY (doc);
SELECT pg_typeof(k.query_id) AS query_id, pg_typeof(k.base_id) AS base_id, count(*) AS rows,
       count(*) FILTER (WHERE k.base_id = 'doc-' || lpad(r.base_id::text, 5, '0') AND k.distance = sqrt(r.s)) AS same
FROM gpu_knn('kq_u', 'kb_t', 10, query_id_type => NULL::uuid, base_id_type => NULL::text) k
JOIN ref r ON md5(r.query_id::text)::uuid = k.query_id AND r.rank_e = k.rank
GROUP BY 1, 2;
SELECT * FROM gpu_knn('kq_u', 'kb_t', 3, NULL::uuid, NULL::bigint);
-- k beyond the base: every usable row, in order; a query relation of one row
CREATE TEMP TABLE kq1 (id bigint PRIMARY KEY, x float8, y float8);
INSERT INTO kq1 VALUES (42, 1, 1);
CREATE TEMP TABLE kb5 (id bigint PRIMARY KEY, x float8, y float8);
INSERT INTO kb5 VALUES (1, 0, 0), (2, 2, 2), (3, 1, 1), (4, NULL, 0), (5, 1, 1);
SELECT * FROM gpu_knn('kq1', 'kb5', 10);
-- a base of several tiles (65536 rows a tile at d = 2), ties between tiles to the lower id
CREATE TEMP TABLE kbig AS SELECT g AS id, (g % 97) * 0.5 AS x, (g % 89) * 0.5 AS y FROM generate_series(1, 150000) g;
ALTER TABLE kbig ADD PRIMARY KEY (id);
SELECT k.rank, k.base_id, k.distance
FROM gpu_knn('kq1', 'kbig', 4) k ORDER BY k.rank;
SELECT min(id) FILTER (WHERE x = 1 AND y = 1) AS first_exact FROM kbig;
-- wide rows (d = 24: a float32 product proposes, the plain loop measures the
-- pairs its bound leaves uncertain, each tile's given every query's k-th so
-- far) over a base of three tiles whose rows repeat every 5000 ids (exact
-- ties the bound cannot split, across tiles): the same neighbours and
-- distances as SQL's sums in column order, at k = 5 and k = 40
CREATE TEMP TABLE wq AS SELECT g AS id, array(SELECT ((g * 7 + j * 13) % 29) * 0.125 - 1 FROM generate_series(1, 24) j)::real[] AS v
FROM generate_series(1, 3) g;
CREATE TEMP TABLE wb AS SELECT g AS id, array(SELECT (((g % 5000) * 3 + j * 11) % 31) * 0.125 - 1 FROM generate_series(1, 24) j WHERE g > 0)::real[] AS v
FROM generate_series(1, 140000) g;
ALTER TABLE wq ADD PRIMARY KEY (id);
ALTER TABLE wb ADD PRIMARY KEY (id);
CREATE TEMP TABLE wref AS
SELECT q.id AS query_id, b.id AS base_id, r.s,
       row_number() OVER (PARTITION BY q.id ORDER BY r.s, b.id) AS rank
FROM wq q
CROSS JOIN LATERAL (SELECT p.id % 5000 AS pattern,
                           (SELECT sum((a::float8 - c::float8) * (a::float8 - c::float8) ORDER BY i)
                            FROM unnest(q.v, p.v) WITH ORDINALITY AS u(a, c, i)) AS s
                    FROM wb p WHERE p.id <= 5000) r
JOIN wb b ON b.id % 5000 = r.pattern;
SELECT ks.k, (SELECT count(*) FROM wref WHERE rank <= ks.k) AS expected,
       (SELECT count(*) FROM gpu_knn('wq', 'wb', ks.k, columns => ARRAY['v'])) AS rows,
       (SELECT count(*) FROM gpu_knn('wq', 'wb', ks.k, columns => ARRAY['v']) w
        JOIN wref r ON r.query_id = w.query_id AND r.rank = w.rank AND r.base_id = w.base_id
                       AND w.distance = sqrt(r.s)) AS same
FROM (VALUES (5), (40)) AS ks(k);
-- long text ids over two tiles: the ids kept are compacted after the first
-- (their store past twice its live bytes); the same neighbours as by bigint ids
CREATE TEMP TABLE kb2 AS SELECT id, x, y FROM kbig WHERE id <= 70000;
CREATE TEMP TABLE kb2_t AS SELECT repeat('k', 100) || lpad(id::text, 6, '0') AS doc, x, y FROM kb2;
CREATE TEMP TABLE kq2 AS SELECT id, x + 0.25 AS x, y FROM kbig WHERE id <= 20000;
ALTER TABLE kb2 ADD PRIMARY KEY (id);
ALTER TABLE kb2_t ADD PRIMARY KEY (doc);
ALTER TABLE kq2 ADD PRIMARY KEY (id);
SELECT count(*) AS rows, count(*) FILTER (WHERE t.base_id = repeat('k', 100) || lpad(b.base_id::text, 6, '0')
                                              AND t.distance = b.distance) AS same
FROM gpu_knn('kq2', 'kb2_t', 2, NULL::integer, NULL::text, columns => ARRAY['x', 'y']) t
JOIN gpu_knn('kq2', 'kb2', 2, columns => ARRAY['x', 'y']) b USING (query_id, rank);
-- the queries are held: pg_gpu.max_memory counts them as they are read
SET pg_gpu.max_memory = '1MB';
SELECT count(*) FROM gpu_knn('kbig', 'kq1', 1);
RESET pg_gpu.max_memory;
-- statement_timeout (as Ctrl-C) stops a long call in time: 150000 queries
-- against 150000 rows, 100 nearest each (the CPU polls by work inside a
-- tile; the GPU while it waits, with little work queued at once)
CREATE FUNCTION knn_answered_in_time(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE q;
  RETURN 'finished before the timeout';
EXCEPTION WHEN query_canceled THEN
  RETURN CASE WHEN clock_timestamp() - statement_timestamp() < interval '2 s'
              THEN 'cancelled in time' ELSE 'cancelled late' END;
END $$;
SET statement_timeout = '1s';
SELECT knn_answered_in_time($q$SELECT count(*) FROM gpu_knn('kbig', 'kbig', 100, columns => ARRAY['x', 'y'])$q$);
RESET statement_timeout;
DROP FUNCTION knn_answered_in_time(text);
-- errors: k, the metric, rows of two lengths, a relation without a key
SELECT * FROM gpu_knn('kq', 'kb', 0, columns => ARRAY['x', 'y']);
SELECT * FROM gpu_knn('kq', 'kb', 3, columns => ARRAY['x', 'y'], metric => 'manhattan');
SELECT * FROM gpu_knn('kq', 'kb', 3, columns => ARRAY['x', 'y'], base_columns => ARRAY['v']);
CREATE TEMP TABLE knokey (x float8, y float8);
SELECT * FROM gpu_knn('kq', 'knokey', 3, columns => ARRAY['x', 'y']);
SELECT * FROM gpu_knn(NULL, 'kb', 3);
SELECT * FROM gpu_knn('kq', NULL, 3);
SELECT * FROM gpu_knn('kq', 'kb', NULL);
SELECT * FROM gpu_knn('kq', 'kb', 3, columns => ARRAY['x', 'y'], metric => NULL);
SELECT * FROM gpu_knn('kq', 'kb', 3, columns => ARRAY['x', NULL]);
SELECT count(*) FROM gpu_knn('kq', 'kb', 3, columns => ARRAY['x', 'y'], metric => 'Inner_Product');
SELECT * FROM gpu_knn('kq', 'kb', 3, columns => ARRAY['x', 'y'], query_id_column => 'nope');
SELECT * FROM gpu_knn(0::oid::regclass, 'kb', 3);
-- a role sees only the rows row security gives it, and needs SELECT
CREATE ROLE knn_reader;
GRANT SELECT ON kq, kb TO knn_reader;
ALTER TABLE kb ENABLE ROW LEVEL SECURITY;
CREATE POLICY kb_even ON kb FOR SELECT TO knn_reader USING (id % 2 = 0);
SET ROLE knn_reader;
SELECT count(*) AS rows, count(*) FILTER (WHERE base_id % 2 = 0) AS even
FROM gpu_knn('kq', 'kb', 4, columns => ARRAY['x', 'y']);
RESET ROLE;
REVOKE SELECT ON kb FROM knn_reader;
SET ROLE knn_reader;
SELECT * FROM gpu_knn('kq', 'kb', 4, columns => ARRAY['x', 'y']);
RESET ROLE;
DROP POLICY kb_even ON kb;
DROP TABLE kq, kb;
DROP ROLE knn_reader;
