#!/usr/bin/env bash
# tests/dump_restore.sh - a database using pg_gpu (installed in its own
# schema, a view over gpu_kmeans_fit, a table of gpu_kmeans results, a table
# of stored models) survives pg_dump and restore, custom format with
# pg_restore and plain SQL with psql: the restored view gives the same
# answer, and the restored model the same clusters.  Uses the server in PGHOST/PGPORT
# (tests/run.sh starts one).
set -euo pipefail
src=pg_gpu_dump_src
q() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$1" -c "$2"; }
dump=$(mktemp -d)
trap 'rm -rf "$dump"' EXIT
for db in $src pg_gpu_dump_custom pg_gpu_dump_plain; do
  psql -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
done
psql -X -q -v ON_ERROR_STOP=1 -d $src <<'SQL'
SET client_min_messages = warning;
CREATE SCHEMA gpu;
CREATE EXTENSION pg_gpu SCHEMA gpu;
CREATE TABLE points (id int PRIMARY KEY, x float8, y float8);
INSERT INTO points SELECT i, (i % 3) * 10 + (i % 7) / 10.0, (i % 3) * -5 FROM generate_series(1, 3000) i;
CREATE VIEW model AS
  SELECT sizes, centroids FROM gpu.gpu_kmeans_fit('points', 3, seed => 7);
CREATE TABLE segments AS SELECT * FROM gpu.gpu_kmeans('points', 3, seed => 7);
CREATE TABLE models AS
  SELECT 'points' AS name, model FROM gpu.gpu_kmeans_fit('points', 3, seed => 7, scale => 'standard');
SQL
want=$(q $src "SET pg_gpu.device = cpu; SELECT sizes::text || centroids::text FROM model")
# the stored model, and the clusters it gives row by row
model_q="SELECT md5(m.model::text) || ' ' || md5(string_agg(gpu.gpu_kmeans_predict(m.model, p)::text, ',' ORDER BY p.id))
         FROM models m, points p GROUP BY m.model"
want_model=$(q $src "$model_q")
pg_dump -Fc -d $src -f "$dump/db.dump"
pg_restore -d pg_gpu_dump_custom "$dump/db.dump"
pg_dump -d $src -f "$dump/db.sql"
psql -X -q -v ON_ERROR_STOP=1 -d pg_gpu_dump_plain -f "$dump/db.sql" >/dev/null
rc=0
for db in pg_gpu_dump_custom pg_gpu_dump_plain; do
  got=$(q $db "SET pg_gpu.device = cpu; SELECT sizes::text || centroids::text FROM model")
  where=$(q $db "SELECT extnamespace::regnamespace || ' ' || extversion FROM pg_extension WHERE extname = 'pg_gpu'")
  rows=$(q $db "SELECT count(*) FROM segments")
  got_model=$(q $db "$model_q")
  if [ "$got" = "$want" ] && [ "$where" = "gpu $(q $src "SELECT extversion FROM pg_extension WHERE extname = 'pg_gpu'")" ] && [ "$rows" = 3000 ] &&
     [ "$got_model" = "$want_model" ]; then
    echo "ok   - $db: extension in schema $where, the view gives the same model, $rows segment rows, the stored model the same clusters"
  else
    echo "FAIL - $db: extension '$where', $rows segment rows, view: $got (expected $want), stored model: $got_model (expected $want_model)"; rc=1
  fi
done
for db in $src pg_gpu_dump_custom pg_gpu_dump_plain; do psql -X -q -d postgres -c "DROP DATABASE $db"; done
exit $rc
