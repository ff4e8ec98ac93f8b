#!/usr/bin/env bash
# tests/demo.sh - the main job on a fresh machine (README's first command):
# installs what the build needs, builds and installs pg_gpu, starts a
# throwaway PostgreSQL cluster, loads sample data and clusters it with
# gpu_kmeans (on the GPU where there is one, else on the CPU).
#   N=1000000 tests/demo.sh     more rows (default 100000)
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/lib.sh
ensure_deps
build_and_install
cluster_start
log "sample data: ${N:=100000} points in three blobs; gpu_kmeans"
psql -X -q -v ON_ERROR_STOP=1 -v n="$N" <<'SQL'
CREATE EXTENSION pg_gpu;
\echo '-- the GPUs this backend sees (none: no rows)'
SELECT * FROM gpu_info();
CREATE TABLE points (id bigint PRIMARY KEY, x double precision, y double precision);
SELECT setseed(0.42);
INSERT INTO points
SELECT i, (ARRAY[0, 8, 4])[1 + i % 3] + random() + random() - 1,
          (ARRAY[0, 0, 7])[1 + i % 3] + random() + random() - 1
FROM generate_series(1, :n) i;
ANALYZE points;
\timing on
\echo '-- the model: centroids (k x d), cluster sizes, inertia'
SELECT * FROM gpu_kmeans_fit('points', 3, seed => 42);
\echo '-- memberships: (id, cluster) for every row'
SELECT * FROM gpu_kmeans('points', 3) ORDER BY id LIMIT 5;
CREATE TABLE seg AS SELECT * FROM gpu_kmeans('points', 3);
SELECT cluster, count(*), round(avg(x)::numeric, 2) AS x, round(avg(y)::numeric, 2) AS y
FROM seg JOIN points USING (id) GROUP BY cluster ORDER BY cluster;
\echo '-- new points, nearest centroid of the model'
CREATE TABLE new_points (id int PRIMARY KEY, x float8, y float8);
INSERT INTO new_points VALUES (1, 0.5, 0.2), (2, 7.5, -0.3), (3, 4, 6.5);
SELECT a.* FROM gpu_kmeans_fit('points', 3, seed => 42) m,
               LATERAL gpu_kmeans_assign('new_points', m.centroids) a ORDER BY id;
SQL
log "done (the cluster is removed on exit)"
