-- Column and id types, keys, quoting, and the kinds of relation SELECT reads.
CREATE DOMAIN t_pos AS double precision CHECK (VALUE >= 0);
CREATE TABLE "Mixed Case" ("The Id" smallint PRIMARY KEY, a smallint, b integer, c bigint,
                           d real, e double precision, f numeric(10, 2), g t_pos,
                           note text, flag boolean);
INSERT INTO "Mixed Case"
SELECT i, i % 2, (i % 2) * 10, (i % 2) * 100, (i % 2) * 0.5, (i % 2) * 2.5, (i % 2) * 1.25, i % 2,
       'n' || i, i % 2 = 0
FROM generate_series(1, 10) i;
-- default columns: every numeric column but the id, in table order
SELECT centroids, sizes FROM gpu_kmeans_fit('"Mixed Case"', 2);
SELECT * FROM gpu_kmeans('"Mixed Case"', 2) ORDER BY id;
CREATE TABLE "we""ird" ("x y" float8, "id" int PRIMARY KEY);
INSERT INTO "we""ird" VALUES (1, 1), (2, 2), (10, 3);
SELECT * FROM gpu_kmeans('"we""ird"', 2, columns => ARRAY['x y']) ORDER BY id;

-- id types and keys
CREATE TABLE t_big (k bigint PRIMARY KEY, v float8);
INSERT INTO t_big VALUES (9000000000, 1), (-9000000000, 5);
SELECT * FROM gpu_kmeans('t_big', 2) ORDER BY id;
CREATE TABLE t_nopk (code int, v float8);
INSERT INTO t_nopk VALUES (7, 1), (8, 5);
SELECT * FROM gpu_kmeans('t_nopk', 2, id_column => 'code') ORDER BY id;
-- without a key, gpu_kmeans_fit uses every numeric column (nothing is excluded)
SELECT array_dims(centroids) FROM gpu_kmeans_fit('t_nopk', 2);
-- a composite primary key is not an id
CREATE TABLE t_comp (a int, b int, v float8, PRIMARY KEY (a, b));
INSERT INTO t_comp VALUES (1, 1, 0), (1, 2, 9);
SELECT * FROM gpu_kmeans('t_comp', 2);
SELECT * FROM gpu_kmeans('t_comp', 2, id_column => 'b', columns => ARRAY['v']) ORDER BY id;

-- schema-qualified names
CREATE SCHEMA "Other Schema";
CREATE TABLE "Other Schema".pts (id int PRIMARY KEY, v float8);
INSERT INTO "Other Schema".pts VALUES (1, 0), (2, 10);
SELECT * FROM gpu_kmeans('"Other Schema".pts', 2) ORDER BY id;

-- views, materialized views, partitioned and inherited tables
CREATE VIEW v_pts AS SELECT id, v * 2 AS w FROM "Other Schema".pts;
SELECT * FROM gpu_kmeans('v_pts', 2, id_column => 'id') ORDER BY id;
CREATE MATERIALIZED VIEW mv_pts AS SELECT * FROM "Other Schema".pts;
SELECT * FROM gpu_kmeans('mv_pts', 2, id_column => 'id') ORDER BY id;
CREATE TABLE parted (id int PRIMARY KEY, v float8) PARTITION BY RANGE (id);
CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (1) TO (100);
CREATE TABLE parted_2 PARTITION OF parted FOR VALUES FROM (100) TO (200);
INSERT INTO parted VALUES (1, 0), (2, 1), (150, 20), (151, 21);
SELECT * FROM gpu_kmeans('parted', 2) ORDER BY id;
SELECT sizes FROM gpu_kmeans_fit('parted_2', 1);
CREATE TABLE parent (id int, v float8);
CREATE TABLE child () INHERITS (parent);
INSERT INTO parent VALUES (1, 0);
INSERT INTO child VALUES (2, 10);
SELECT * FROM gpu_kmeans('parent', 2, id_column => 'id') ORDER BY id;
CREATE TEMP TABLE tmp_pts (id int PRIMARY KEY, v float8);
INSERT INTO tmp_pts VALUES (1, 0), (2, 10), (3, 11);
SELECT * FROM gpu_kmeans('tmp_pts', 2) ORDER BY id;
