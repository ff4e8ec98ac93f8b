#!/usr/bin/env bash
# tests/citus.sh - pg_gpu on Citus distributed tables.
#
# A Citus distributed table is an empty "shell" table on the coordinator; its
# rows live in shard tables on the workers and only a query planned by Citus
# sees them.  This starts a throwaway Citus cluster on this machine (a
# coordinator and one worker, each its own initdb'd cluster, talking over
# 127.0.0.1), builds the same data as a distributed table and as a plain local
# table, and checks that gpu_kmeans_fit, gpu_kmeans, gpu_kmeans_assign and the
# table form of gpu_matmul give the same answers on both.
#
# Needs pg_gpu installed (tests/run.sh runs `make install` first).  Citus
# 13.2.2 is built from ../shared/vendor/citus-13.2.2-pg15.20.tar.gz (see
# ../shared/vendor/README.md) when it is not installed yet, once
# (tests/lib.sh's ensure_citus); later runs only `make install` it (then the
# whole test takes about 15 s).  Without the tarball (and without an
# installed Citus) the test prints "skipped" and exits 0; CI always has the
# tarball.
#
# Environment:
#   PG_GPU_DEVICE        pg_gpu.device for the checks (default cpu; gpu on a GPU machine)
#   CITUS_COORD_PORT     coordinator port (default 54341)
#   CITUS_WORKER_PORT    the first worker's port (default 54342), the second's
#                        is one more; all differ from the main test cluster's 54329
#   CITUS_TARBALL        the Citus source tarball (default ../shared/vendor/...)
#   CITUS_CACHE          where the built Citus tree is kept
#                        (default /var/cache/pg_gpu-test/citus-13.2.2)
#   CITUS_BIG_ROWS       rows of the table "big" (default 60000)
#
# Prints "ok   - ..." / "FAIL - ..." per check and ends with
# "citus: N checks passed, M failed"; exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
. tests/lib.sh

device=${PG_GPU_DEVICE:-cpu}
coord_port=${CITUS_COORD_PORT:-54341}
worker_port=${CITUS_WORKER_PORT:-54342}
worker2_port=$((worker_port + 1))

# sets PATH and PG_CONFIG to PostgreSQL $PG_MAJOR; a PostgreSQL given in
# PG_CONFIG with Citus in it already (the GPU suite's bundle) is taken as is
if [ -z "${PG_CONFIG:-}" ] || [ ! -f "$("$PG_CONFIG" --pkglibdir)/citus.so" ]; then
  ensure_deps
fi
bindir=$("$PG_CONFIG" --bindir)

# ---------------------------------------------------------------------------
# 1. Citus installed into this PostgreSQL (tests/lib.sh)
# ---------------------------------------------------------------------------
rc=0
ensure_citus || rc=$?
if [ "$rc" -eq 1 ]; then
  echo "citus: skipped (Citus is not installed and there is no $CITUS_TARBALL to build it from)"
  exit 0
fi
[ "$rc" -eq 0 ] || exit 1

# ---------------------------------------------------------------------------
# 2. A throwaway Citus cluster: coordinator + two workers on 127.0.0.1
# ---------------------------------------------------------------------------
t_start=$SECONDS
if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
  useradd -r -m postgres
fi
user=$( [ "$(id -u)" -eq 0 ] && echo postgres || id -un )
tmp=$(mktemp -d /tmp/pg_gpu_citus.XXXXXX)
chmod 755 "$tmp"
[ "$(id -u)" -eq 0 ] && chown "$user" "$tmp"

# stop both servers and remove their directories however the script ends
cleanup() {
  local node
  for node in coordinator worker worker2; do
    [ -f "$tmp/$node/postmaster.pid" ] &&
      as_owner "$bindir/pg_ctl" -D "$tmp/$node" -m immediate -w stop >/dev/null 2>&1 || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

node_start() { citus_node_start "$tmp" "$1" "$2"; }

# q PORT SQL: one query on a node, unaligned output, stops at the first error
q() {
  psql -X -q -At -v ON_ERROR_STOP=1 -h "$tmp" -p "$1" -U "$user" -d postgres \
    -c "SET client_min_messages = warning" -c "$2"
}

log "starting a Citus coordinator (port $coord_port) and workers (ports $worker_port, $worker2_port)"
node_start coordinator "$coord_port"
node_start worker "$worker_port"
node_start worker2 "$worker2_port"
q "$worker_port" "CREATE EXTENSION citus"
q "$worker2_port" "CREATE EXTENSION citus"
q "$coord_port" "CREATE EXTENSION citus"
q "$coord_port" "SELECT citus_set_coordinator_host('127.0.0.1', $coord_port)" >/dev/null
q "$coord_port" "SELECT citus_add_node('127.0.0.1', $worker_port)" >/dev/null
q "$coord_port" "SELECT citus_add_node('127.0.0.1', $worker2_port)" >/dev/null
# Citus propagates CREATE EXTENSION to the worker (and refuses DDL run on a
# worker directly once it holds metadata), so check that it arrived there
q "$coord_port" "CREATE EXTENSION pg_gpu"
for port in "$worker_port" "$worker2_port"; do
  [ "$(q "$port" "SELECT count(*) FROM pg_extension WHERE extname = 'pg_gpu'")" = 1 ] ||
    { echo "CREATE EXTENSION pg_gpu did not reach the worker on port $port" >&2; exit 1; }
done
echo "citus $(q "$coord_port" "SELECT extversion FROM pg_extension WHERE extname = 'citus'"),"\
 "pg_gpu $(q "$coord_port" "SELECT extversion FROM pg_extension WHERE extname = 'pg_gpu'"),"\
 "pg_gpu.device = $device"

# ---------------------------------------------------------------------------
# 3. The data: each table distributed, and a plain local copy of it
# ---------------------------------------------------------------------------
# The distributed tables are distributed while empty and filled afterwards, as
# usual: create_distributed_table on a filled table would leave a copy of the
# rows in the coordinator's shell table, and the point here is that the shell
# is empty and the rows are only on the workers.
#
# pts: 3000 points in three well-separated blobs of unequal sizes (1500 around
# (0,0), 1000 around (10,0), 500 around (5,9), each within 1.5 of its centre),
# deterministic.  a: a dense 200 x 6 matrix (distributed); b: a dense 6 x 4
# matrix (local); s: a sparse 6 x 3 matrix (distributed).  Each SELECT below
# is inserted into both the distributed table and its local copy.
pts_rows="SELECT i::bigint,
       (ARRAY[0, 0, 0, 10, 10, 5])[i % 6 + 1] + sin(i * 1.3) * cos(i * 0.37),
       (ARRAY[0, 0, 0, 0, 0, 9])[i % 6 + 1] + cos(i * 0.7) * sin(i * 0.91)
FROM generate_series(1, 3000) i"
a_rows="SELECT i, ARRAY(SELECT sin(i * j + 0.5) FROM generate_series(1, 6) j)
FROM generate_series(1, 200) i"
s_rows="SELECT i, j, (i * 10 + j)::numeric / 7
FROM generate_series(1, 6) i, generate_series(1, 3) j WHERE (i + j) % 2 = 0"
# big: $big_n rows of 8 columns in 16 blobs (centres placed by a
# deterministic hash in [-20, 20]^8, rows within 0.8 of theirs in each
# column), every 997th row NULL in c1; the bench data of the seeding and
# equality checks, and a fit long enough to be stopped midway.  emb: 2000
# real[] rows of 24 values in 5 directions, for cosine.
big_n=${CITUS_BIG_ROWS:-60000}
big_cols="c1 float8, c2 float8, c3 float8, c4 float8, c5 float8, c6 float8, c7 float8, c8 float8"
frac() { echo "(abs(sin($1) * 43758.5453) - floor(abs(sin($1) * 43758.5453)) - 0.5)"; }
big_vals="CASE WHEN i % 997 = 0 THEN NULL ELSE 40 * $(frac "(i % 16) * 12.9898 + 78.233") + 1.6 * $(frac "i * 1.1 + 0.3") END"
for t in 2 3 4 5 6 7 8; do
  big_vals="$big_vals, 40 * $(frac "(i % 16) * 12.9898 + $t * 78.233") + 1.6 * $(frac "i * 1.$((t + 1)) + 0.$t")"
done
big_rows="SELECT i, $big_vals FROM generate_series(1, $big_n) i"
# weighted rows (weight_column): 0 to 1.5, NULL in some rows
wbig_rows="SELECT i, (i % 5) * 10 + sin(i), cos(i * 1.3), CASE WHEN i % 101 = 0 THEN NULL ELSE (i % 4) * 0.5 END FROM generate_series(1, 20000) i"
emb_rows="SELECT i, ARRAY(SELECT (cos(j * (i % 5 + 1)) + 0.2 * sin(i * j * 0.37))::real FROM generate_series(1, 24) j)
FROM generate_series(1, 2000) i"
# am: 9000 x 8 (distributed) times bm: 8 x 1200 (local), a product whose
# rows come back from each node in many pieces (of 2^19 values)
bm_n=1200
am_rows="SELECT i, ARRAY(SELECT cos(i * 0.01 * j) + j FROM generate_series(1, 8) j) FROM generate_series(1, 9000) i"
log "creating the distributed tables and their local copies"
q "$coord_port" "
SET citus.shard_count = 4;
CREATE TABLE pts (id bigint PRIMARY KEY, x float8, y float8);
SELECT create_distributed_table('pts', 'id');
CREATE TABLE pts_local (LIKE pts INCLUDING ALL);
INSERT INTO pts $pts_rows;
INSERT INTO pts_local $pts_rows;

CREATE TABLE a (row_id int, row_vec float8[]);
SELECT create_distributed_table('a', 'row_id');
CREATE TABLE a_local (LIKE a);
INSERT INTO a $a_rows;
INSERT INTO a_local $a_rows;

CREATE TABLE b (row_id int, row_vec float8[]);
INSERT INTO b SELECT i, ARRAY(SELECT cos(i + 2 * j) FROM generate_series(1, 4) j)
  FROM generate_series(1, 6) i;

CREATE TABLE s (row_id int, col_id int, value numeric);
SELECT create_distributed_table('s', 'row_id');
CREATE TABLE s_local (LIKE s);
INSERT INTO s $s_rows;
INSERT INTO s_local $s_rows;

CREATE TABLE big (id bigint PRIMARY KEY, $big_cols);
SELECT create_distributed_table('big', 'id');
CREATE TABLE big_local (LIKE big INCLUDING ALL);
INSERT INTO big $big_rows;
INSERT INTO big_local $big_rows;

CREATE TABLE wbig (id bigint PRIMARY KEY, x float8, y float8, w numeric);
SELECT create_distributed_table('wbig', 'id');
CREATE TABLE wbig_local (LIKE wbig INCLUDING ALL);
INSERT INTO wbig $wbig_rows;
INSERT INTO wbig_local $wbig_rows;

CREATE TABLE am (row_id int, row_vec float8[]);
SELECT create_distributed_table('am', 'row_id');
CREATE TABLE am_local (LIKE am);
INSERT INTO am $am_rows;
INSERT INTO am_local $am_rows;
CREATE TABLE bm (row_id int, row_vec float8[]);
INSERT INTO bm SELECT i, ARRAY(SELECT sin(i * 0.7 + j * 0.013) FROM generate_series(1, $bm_n) j)
  FROM generate_series(1, 8) i;

CREATE TABLE pts_uuid (id uuid PRIMARY KEY, x float8, y float8);
SELECT create_distributed_table('pts_uuid', 'id');
INSERT INTO pts_uuid SELECT md5(id::text)::uuid, x, y FROM pts_local;
CREATE TABLE pts_text (doc text PRIMARY KEY, x float8, y float8);
SELECT create_distributed_table('pts_text', 'doc');
INSERT INTO pts_text SELECT 'doc-' || id, CASE WHEN id % 700 = 0 THEN NULL ELSE x END, y FROM pts_local;

CREATE TABLE emb (id bigint PRIMARY KEY, v real[]);
SELECT create_distributed_table('emb', 'id');
CREATE TABLE emb_local (LIKE emb INCLUDING ALL);
INSERT INTO emb $emb_rows;
INSERT INTO emb_local $emb_rows;
" >/dev/null

# ---------------------------------------------------------------------------
# 4. The checks
# ---------------------------------------------------------------------------
# check NAME SQL: SQL (run on the coordinator with pg_gpu.device set) returns
# one row "ok|detail", ok a boolean; an error counts as a failure and its
# message is printed.
npass=0 nfail=0
check() {
  local name=$1 sql=$2 out
  if out=$(q "$coord_port" "SET pg_gpu.device = $device; $sql" 2>&1) && [ "${out%%|*}" = t ]; then
    npass=$((npass + 1)); echo "ok   - $name"
  else
    nfail=$((nfail + 1)); echo "FAIL - $name"; printf '%s\n' "${out#f|}" | sed 's/^/       /'
  fi
}

# expect_error NAME SQLSTATE PATTERN SQL [ROLE]: SQL fails with SQLSTATE and a message matching PATTERN
expect_error() {
  local name=$1 state=$2 pattern=$3 sql=$4 role=${5:-$user} out
  out=$(psql -X -q -At -v VERBOSITY=verbose -h "$tmp" -p "$coord_port" -U "$role" -d postgres \
          -c "SET pg_gpu.device = $device" -c "$sql" 2>&1) || true
  if printf '%s' "$out" | grep -q "ERROR:  $state: " && printf '%s' "$out" | grep -Eq "$pattern"; then
    npass=$((npass + 1)); echo "ok   - $name"
  else
    nfail=$((nfail + 1)); echo "FAIL - $name"; printf '%s\n' "$out" | head -5 | sed 's/^/       /'
  fi
}

# the same starting centroids, one near each blob: with them k-means does not
# depend on the order in which rows are read (the distributed table's rows
# come back in another order than the local table's)
init="ARRAY[[0,0],[10,0],[5,9]]::float8[]"
# tolerance: the same rows summed in another order.  Relative 1e-12, absolute
# for values under 1 (a centroid coordinate near 0 has no relative precision)
close() { echo "abs(($1) - ($2)) <= 1e-12 * greatest(1, abs($2))"; }

log "checks (pg_gpu.device = $device)"
check "the rows are on the workers' shards, none in the coordinator's shell" "
  SELECT (SELECT count(*) FROM pts) = 3000
         AND (SELECT count(DISTINCT nodeport) FROM citus_shards WHERE table_name = 'pts'::regclass) = 2
         AND (SELECT min(nodeport) FROM citus_shards WHERE table_name = 'pts'::regclass) = $worker_port
         AND pg_relation_size('pts') = 0 AND pg_relation_size('a') = 0 AND pg_relation_size('s') = 0,
         format('%s rows through Citus; shell sizes pts %s, a %s, s %s bytes', (SELECT count(*) FROM pts),
                pg_relation_size('pts'), pg_relation_size('a'), pg_relation_size('s'))"

# seeding draws rows by their content, not their position: the distributed
# fit is the local table's, cluster for cluster
check "gpu_kmeans_fit, k-means++ seed 1: same sizes and inertia as the local table" "
  SELECT d.sizes = l.sizes AND $(close d.inertia l.inertia),
         format('distributed: sizes %s inertia %s; local: sizes %s inertia %s', d.sizes, d.inertia, l.sizes, l.inertia)
  FROM gpu_kmeans_fit('pts', 3, seed => 1) d, gpu_kmeans_fit('pts_local', 3, seed => 1) l"

check "gpu_kmeans_fit, k-means++ seed 1: sizes 500, 1000, 1500 (the blobs)" "
  SELECT (SELECT array_agg(v ORDER BY v) FROM unnest(sizes) v) = '{500,1000,1500}', sizes::text
  FROM gpu_kmeans_fit('pts', 3, seed => 1)"

check "gpu_kmeans_fit, init_centroids: same centroids, sizes and inertia as the local table" "
  SELECT d.sizes = l.sizes AND $(close d.inertia l.inertia)
         AND d.iterations = l.iterations
         AND (SELECT bool_and($(close dc.v lc.v)) AND count(*) = 6
              FROM unnest(d.centroids) WITH ORDINALITY dc(v, n)
              JOIN unnest(l.centroids) WITH ORDINALITY lc(v, n) USING (n)),
         format('distributed: %s %s %s; local: %s %s %s',
                d.centroids, d.sizes, d.inertia, l.centroids, l.sizes, l.inertia)
  FROM gpu_kmeans_fit('pts', 3, init_centroids => $init) d,
       gpu_kmeans_fit('pts_local', 3, init_centroids => $init) l"

check "gpu_kmeans: 3000 rows in 3 clusters" "
  SELECT count(*) = 3000 AND count(DISTINCT cluster) = 3 AND count(DISTINCT id) = 3000,
         format('%s rows, %s ids, %s clusters', count(*), count(DISTINCT id), count(DISTINCT cluster))
  FROM gpu_kmeans('pts', 3, seed => 1)"

check "gpu_kmeans, init_centroids: every id in the same cluster as on the local table" "
  SELECT count(*) FILTER (WHERE d.cluster IS DISTINCT FROM l.cluster) = 0 AND count(*) = 3000,
         format('%s rows from the distributed table, %s from the local one, %s ids differ',
                count(d.id), count(l.id), count(*) FILTER (WHERE d.cluster IS DISTINCT FROM l.cluster))
  FROM gpu_kmeans('pts', 3, init_centroids => $init) d
  FULL JOIN gpu_kmeans('pts_local', 3, init_centroids => $init) l ON d.id = l.id"

check "gpu_kmeans_assign: every id gets the same cluster and distance as on the local table" "
  SELECT count(*) FILTER (WHERE bad) = 0 AND count(*) = 3000,
         format('%s rows from the distributed table, %s from the local one, %s ids differ',
                count(did), count(lid), count(*) FILTER (WHERE bad))
  FROM (SELECT d.id AS did, l.id AS lid,
               d.id IS NULL OR l.id IS NULL OR d.cluster IS DISTINCT FROM l.cluster
               OR NOT $(close d.distance l.distance) AS bad
        FROM gpu_kmeans_assign('pts', $init) d
        FULL JOIN gpu_kmeans_assign('pts_local', $init) l ON d.id = l.id) t"

# ids of any type (keyed overloads): the nodes send uuid and text ids as text
check "gpu_kmeans with uuid ids on the workers: every row's id (joined back) in the local table's cluster" "
  SELECT count(*) = 3000 AND count(*) FILTER (WHERE d.cluster IS DISTINCT FROM l.cluster) = 0
         AND bool_and(pg_typeof(d.id) = 'uuid'::regtype),
         format('%s rows, %s differ', count(*), count(*) FILTER (WHERE d.cluster IS DISTINCT FROM l.cluster))
  FROM gpu_kmeans('pts_uuid', 3, id_type => NULL::uuid, init_centroids => $init) d
  JOIN pts_uuid u ON u.id = d.id
  JOIN gpu_kmeans('pts_local', 3, init_centroids => $init) l ON md5(l.id::text)::uuid = d.id"

check "gpu_kmeans_assign and memberships with text ids on the workers: the local table's clusters, NULL rows NULL" "
  SELECT count(*) = 3000 AND count(*) FILTER (WHERE a.cluster IS DISTINCT FROM l.cluster
                                               OR a.cluster IS DISTINCT FROM m.cluster) = 0
         AND count(*) FILTER (WHERE a.cluster IS NULL) = 4,
         format('%s rows, %s differ, %s NULL', count(*),
                count(*) FILTER (WHERE a.cluster IS DISTINCT FROM l.cluster OR a.cluster IS DISTINCT FROM m.cluster),
                count(*) FILTER (WHERE a.cluster IS NULL))
  FROM gpu_kmeans_assign('pts_text', $init, id_type => NULL::text) a
  JOIN (SELECT 'doc-' || id AS doc, CASE WHEN id % 700 = 0 THEN NULL ELSE cluster END AS cluster
        FROM gpu_kmeans_assign('pts_local', $init)) l ON l.doc = a.id
  JOIN (SELECT unnest(ids) AS doc, unnest(clusters) AS cluster
        FROM gpu_kmeans_fit('pts_text', 3, NULL::text, init_centroids => $init, memberships => true)) m
    ON m.doc = a.id"

# the product of two matrix tables, distributed operand against a local copy:
# rows matched by row_id, every element within the tolerance
matmul_same() {
  echo "
  SELECT count(*) FILTER (WHERE bad) = 0 AND count(*) = $3,
         format('%s rows from the distributed operands, %s from the local ones, %s differ',
                count(drow), count(lrow), count(*) FILTER (WHERE bad))
  FROM (SELECT d.row_id AS drow, l.row_id AS lrow, d.row_id IS NULL OR l.row_id IS NULL
               OR cardinality(d.row_vec) IS DISTINCT FROM cardinality(l.row_vec)
               OR NOT (SELECT coalesce(bool_and($(close dv.v lv.v)), true)
                       FROM unnest(d.row_vec) WITH ORDINALITY dv(v, n)
                       JOIN unnest(l.row_vec) WITH ORDINALITY lv(v, n) USING (n)) AS bad
        FROM gpu_matmul($1) d FULL JOIN gpu_matmul($2) l ON d.row_id = l.row_id) t"
}
check "gpu_matmul('a'::regclass, 'b'): distributed dense a x local b = the product of the local copies" \
  "$(matmul_same "'a'::regclass, 'b'::regclass" "'a_local'::regclass, 'b'::regclass" 200)"
check "gpu_matmul('a', 's'): distributed dense a x distributed sparse s = the product of the local copies" \
  "$(matmul_same "'a'::regclass, 's'::regclass" "'a_local'::regclass, 's_local'::regclass" 200)"
check "gpu_matmul('a', 'a_local', b_transposed => true): distributed a x a^T = the product of the local copies" \
  "$(matmul_same "'a'::regclass, 'a_local'::regclass, b_transposed => true" "'a_local'::regclass, 'a_local'::regclass, b_transposed => true" 200)"

# ---- gpu_matmul on the workers (src/citus_matmul.c) ------------------------
# debug1 SQL: the DEBUG1 lines of SQL on the coordinator
debug1() {
  psql -X -q -At -h "$tmp" -p "$coord_port" -U "$user" -d postgres \
    -c "SET pg_gpu.device = $device" -c "SET client_min_messages = debug1" -c "$1" 2>&1 | grep "DEBUG:  pg_gpu" || true
}
out=$(debug1 "SELECT count(*) FROM gpu_matmul('a'::regclass, 'b')")
if printf '%s' "$out" | grep -q '"a" is read on the 2 Citus nodes'; then
  npass=$((npass + 1)); echo "ok   - gpu_matmul('a'::regclass, 'b') with a distributed dense a runs on its two workers"
else
  nfail=$((nfail + 1)); echo "FAIL - gpu_matmul('a'::regclass, 'b') with a distributed dense a runs on its two workers"; printf '%s\n' "$out" | sed 's/^/       /'
fi
check "gpu_matmul('am'::regclass, 'bm'), 9000 x 8 x 1200 on the workers (many pieces a node): the local product, 1e-12" "
  SELECT count(*) = 9000 AND count(*) FILTER (WHERE d.row_id IS NULL OR l.row_id IS NULL
           OR cardinality(d.row_vec) <> $bm_n
           OR (SELECT max(abs(x - y) / greatest(1, abs(y))) FROM unnest(d.row_vec, l.row_vec) u(x, y)) > 1e-12) = 0,
         format('%s rows, %s distributed, %s local', count(*), count(d.row_id), count(l.row_id))
  FROM gpu_matmul('am'::regclass, 'bm') d FULL JOIN gpu_matmul('am_local'::regclass, 'bm') l USING (row_id)"
q "$coord_port" "
CREATE TABLE a_bad (row_id int, row_vec float8[]);
SELECT create_distributed_table('a_bad', 'row_vec');" >/dev/null
bad_a() {
  q "$coord_port" "TRUNCATE a_bad; INSERT INTO a_bad VALUES $1" >/dev/null
}
bad_a "(1, '{1,2,3,4,5,6}'), (2, '{1,1,1,1,1,1}'), (3, '{2,2,2,2,2,2}'), (2, '{3,3,3,3,3,3}')"
expect_error "gpu_matmul on the workers: a row id twice (the copies on any shards): 22000" 22000 \
  'row 2 appears more than once in "a_bad"' "SELECT * FROM gpu_matmul('a_bad'::regclass, 'b')"
bad_a "(1, '{1,2,3,4,5,6}'), (2, '{1,1,1,1,1,1}'), (4, '{2,2,2,2,2,2}')"
expect_error "gpu_matmul on the workers: row ids not 1..m: 22000" 22000 \
  'the row ids of "a_bad" are not 1 to 3' "SELECT * FROM gpu_matmul('a_bad'::regclass, 'b')"
bad_a "$(for i in $(seq 1 40); do printf '(%d, %s),' "$i" "'{1,2,3,4,5,6}'"; done) (41, '{1,2,3,4,5}')"
expect_error "gpu_matmul on the workers: rows of two lengths: 22000" 22000 \
  'rows of "a_bad.*" differ in length' "SELECT * FROM gpu_matmul('a_bad'::regclass, 'b')"
expect_error "gpu_matmul on the workers: a 200 x 6 by b 8 x 1200: 22023 naming both shapes" 22023 \
  'matrix dimensions do not match: "a" is 200 x 6, "bm" is 8 x 1200' "SELECT * FROM gpu_matmul('a'::regclass, 'bm')"
q "$coord_port" "DROP TABLE a_bad" >/dev/null

# ---- k-means on the workers (src/citus_kmeans.c) ---------------------------
check "k-means on a distributed table runs on its two workers" "
  SELECT device LIKE '% (2 Citus nodes)', device FROM gpu_kmeans_fit('pts', 3, seed => 1)"

check "pg_gpu.citus_nodes = off reads through Citus's executor: the same fit" "
  SELECT d.sizes = e.sizes AND e.device NOT LIKE '%Citus%'
         AND (SELECT bool_and($(close dc.v ec.v))
              FROM unnest(d.centroids) WITH ORDINALITY dc(v, n)
              JOIN unnest(e.centroids) WITH ORDINALITY ec(v, n) USING (n)),
         format('nodes: %s %s; executor: %s %s', d.centroids, d.sizes, e.centroids, e.sizes)
  FROM gpu_kmeans_fit('pts', 3, init_centroids => $init) d,
       LATERAL (SELECT set_config('pg_gpu.citus_nodes', 'off', true)) s,
       LATERAL gpu_kmeans_fit('pts', 3, init_centroids => $init) e"

# the first 16 rows as starting centroids, tol 0: a fit to the fixed point
big_init="(SELECT array_agg(ARRAY[c1, c2, c3, c4, c5, c6, c7, c8] ORDER BY id) FROM big_local WHERE id BETWEEN 1 AND 16)"
check "big, init_centroids, tol 0: the distributed fit equals the single node's (centroids 1e-12 relative, sizes, iterations)" "
  SELECT d.sizes = l.sizes AND d.iterations = l.iterations AND d.converged
         AND (SELECT bool_and($(close dc.v lc.v)) AND count(*) = 128
              FROM unnest(d.centroids) WITH ORDINALITY dc(v, n)
              JOIN unnest(l.centroids) WITH ORDINALITY lc(v, n) USING (n))
         AND $(close d.inertia l.inertia),
         format('distributed: %s iterations, sizes %s, inertia %s; local: %s, %s, %s',
                d.iterations, d.sizes, d.inertia, l.iterations, l.sizes, l.inertia)
  FROM gpu_kmeans_fit('big', 16, init_centroids => $big_init, tol => 0, max_iter => 1000) d,
       gpu_kmeans_fit('big_local', 16, init_centroids => $big_init, tol => 0, max_iter => 1000) l"

check "big, init_centroids, tol 0: every row in the same cluster as on the single node (NULL rows NULL)" "
  SELECT count(*) FILTER (WHERE d.cluster IS DISTINCT FROM l.cluster) = 0 AND count(*) = $big_n
         AND count(*) FILTER (WHERE d.cluster IS NULL) = $big_n / 997,
         format('%s rows distributed, %s local, %s differ, %s NULL', count(d.id), count(l.id),
                count(*) FILTER (WHERE d.cluster IS DISTINCT FROM l.cluster), count(*) FILTER (WHERE d.cluster IS NULL))
  FROM gpu_kmeans('big', 16, init_centroids => $big_init, tol => 0, max_iter => 1000) d
  FULL JOIN gpu_kmeans('big_local', 16, init_centroids => $big_init, tol => 0, max_iter => 1000) l ON d.id = l.id"

# one driver: a seeded fit is the single node's wherever the rows are
# (centroids and inertia 1e-12, the sums added in another order)
for init_name in "k-means++" "k-means||" "random"; do
  check "big, seeded by $init_name (seed 7, n_init 5): the distributed fit equals the single node's" "
  SELECT d.sizes = l.sizes AND d.iterations = l.iterations
         AND (SELECT bool_and($(close dc.v lc.v)) AND count(*) = 128
              FROM unnest(d.centroids) WITH ORDINALITY dc(v, n)
              JOIN unnest(l.centroids) WITH ORDINALITY lc(v, n) USING (n))
         AND $(close d.inertia l.inertia),
         format('distributed: %s iterations, sizes %s, inertia %s; single node: %s, %s, %s',
                d.iterations, d.sizes, d.inertia, l.iterations, l.sizes, l.inertia)
  FROM gpu_kmeans_fit('big', 16, init => '$init_name', seed => 7, n_init => 5) d,
       gpu_kmeans_fit('big_local', 16, init => '$init_name', seed => 7, n_init => 5) l"
done
check "big, algorithm 'hierarchical' (k 64, seed 7): the distributed fit equals the single node's" "
  SELECT d.sizes = l.sizes AND d.iterations = l.iterations AND (d.model->>'groups')::int = 8
         AND (d.model->>'trained')::bigint = (l.model->>'trained')::bigint
         AND (SELECT bool_and($(close dc.v lc.v)) AND count(*) = 512
              FROM unnest(d.centroids) WITH ORDINALITY dc(v, n)
              JOIN unnest(l.centroids) WITH ORDINALITY lc(v, n) USING (n))
         AND $(close d.inertia l.inertia),
         format('distributed: %s iterations, inertia %s, %s rows trained; single node: %s, %s, %s',
                d.iterations, d.inertia, d.model->>'trained', l.iterations, l.inertia, l.model->>'trained')
  FROM gpu_kmeans_fit('big', 64, seed => 7, algorithm => 'hierarchical') d,
       gpu_kmeans_fit('big_local', 64, seed => 7, algorithm => 'hierarchical') l"
for init_name in 'k-means++' 'k-means||'; do
  check "wbig, weight_column, $init_name (seed 5): the fit on the nodes equals the single node's" "
    SELECT d.sizes = l.sizes AND d.iterations = l.iterations AND d.device LIKE '% (2 Citus nodes)'
           AND d.model->>'weights' = 'w'
           AND (SELECT bool_and($(close dc.v lc.v)) FROM unnest(d.centroids) WITH ORDINALITY dc(v, n)
                JOIN unnest(l.centroids) WITH ORDINALITY lc(v, n) USING (n))
           AND $(close d.inertia l.inertia),
           format('distributed: %s, sizes %s, inertia %s; single node: sizes %s, inertia %s',
                  d.device, d.sizes, d.inertia, l.sizes, l.inertia)
    FROM gpu_kmeans_fit('wbig', 7, ARRAY['x', 'y'], init => '$init_name', seed => 5, weight_column => 'w') d,
         gpu_kmeans_fit('wbig_local', 7, ARRAY['x', 'y'], init => '$init_name', seed => 5, weight_column => 'w') l"
done
check "wbig, weight_column: every row in the same cluster as on the single node, NULL weights unusable" "
  SELECT count(*) FILTER (WHERE d.cluster IS DISTINCT FROM l.cluster) = 0 AND count(*) = 20000
         AND count(*) FILTER (WHERE d.cluster IS NULL) = 198,
         format('%s rows, %s differ, %s unusable', count(*), count(*) FILTER (WHERE d.cluster IS DISTINCT FROM l.cluster),
                count(*) FILTER (WHERE d.cluster IS NULL))
  FROM gpu_kmeans('wbig', 7, ARRAY['x', 'y'], seed => 2, weight_column => 'w') d
  FULL JOIN gpu_kmeans('wbig_local', 7, ARRAY['x', 'y'], seed => 2, weight_column => 'w') l ON d.id = l.id"
check "big, seeded by k-means++ (seed 3): every row in the same cluster as on the single node" "
  SELECT count(*) FILTER (WHERE d.cluster IS DISTINCT FROM l.cluster) = 0 AND count(*) = $big_n,
         format('%s rows, %s differ', count(*), count(*) FILTER (WHERE d.cluster IS DISTINCT FROM l.cluster))
  FROM gpu_kmeans('big', 16, seed => 3) d FULL JOIN gpu_kmeans('big_local', 16, seed => 3) l ON d.id = l.id"
# a far starting centroid empties at once and takes the farthest row of any node
far_init="(SELECT array_agg(ARRAY[c1, c2, c3, c4, c5, c6, c7, c8] ORDER BY id) || ARRAY[[1e6, 1e6, 1e6, 1e6, 1e6, 1e6, 1e6, 1e6]]::float8[] FROM big_local WHERE id BETWEEN 1 AND 15)"
check "big, an emptied cluster: the distributed fit equals the single node's" "
  SELECT d.sizes = l.sizes AND d.iterations = l.iterations AND d.sizes[16] > 0
         AND (SELECT bool_and($(close dc.v lc.v)) FROM unnest(d.centroids) WITH ORDINALITY dc(v, n)
              JOIN unnest(l.centroids) WITH ORDINALITY lc(v, n) USING (n)),
         format('distributed: sizes %s; single node: sizes %s', d.sizes, l.sizes)
  FROM gpu_kmeans_fit('big', 16, init_centroids => $far_init, tol => 0, max_iter => 1000) d,
       gpu_kmeans_fit('big_local', 16, init_centroids => $far_init, tol => 0, max_iter => 1000) l"

check "big, seeded: the same seed gives the same fit again (reproducible for a shard layout)" "
  SELECT a.centroids = b.centroids AND a.sizes = b.sizes AND a.inertia = b.inertia,
         format('%s / %s', a.inertia, b.inertia)
  FROM gpu_kmeans_fit('big', 16, init => 'k-means||', seed => 3) a,
       gpu_kmeans_fit('big', 16, init => 'k-means||', seed => 3) b"

check "memberships => true on the workers: the ids and clusters gpu_kmeans returns" "
  SELECT count(*) = $big_n AND count(*) FILTER (WHERE g.cluster IS DISTINCT FROM m.cluster) = 0,
         format('%s ids, %s differ', count(*), count(*) FILTER (WHERE g.cluster IS DISTINCT FROM m.cluster))
  FROM (SELECT unnest(ids) AS id, unnest(clusters) AS cluster
        FROM gpu_kmeans_fit('big', 16, init_centroids => $big_init, memberships => true)) m
  JOIN gpu_kmeans('big', 16, init_centroids => $big_init) g USING (id)"

check "gpu_kmeans_apply of a scaled model (fit on the local copy): the same clusters and distances on the workers" "
  WITH f AS (SELECT model FROM gpu_kmeans_fit('big_local', 16, seed => 2, scale => 'standard'))
  SELECT count(*) = $big_n AND count(*) FILTER (WHERE d.cluster IS DISTINCT FROM l.cluster
                                                 OR NOT coalesce($(close d.distance l.distance), true)) = 0,
         format('%s rows, %s differ', count(*), count(*) FILTER (WHERE d.cluster IS DISTINCT FROM l.cluster))
  FROM f, gpu_kmeans_apply('big', f.model) d JOIN gpu_kmeans_apply('big_local', f.model) l USING (id)"

check "gpu_kmeans_transform of a scaled model on a distributed table (read through the executor): the local copy's, bit for bit" "
  WITH f AS (SELECT model FROM gpu_kmeans_fit('big_local', 16, seed => 2, scale => 'standard'))
  SELECT count(*) = 3 * (SELECT count(*) FROM big_local WHERE c1 IS NOT NULL) AND count(*) FILTER (WHERE d.cluster IS DISTINCT FROM l.cluster
                                                     OR d.distance IS DISTINCT FROM l.distance) = 0,
         format('%s results, %s differ', count(*), count(*) FILTER (WHERE d.cluster IS DISTINCT FROM l.cluster))
  FROM f, gpu_kmeans_transform('big', f.model, 3) d JOIN gpu_kmeans_transform('big_local', f.model, 3) l USING (id, rank)"

check "scale => 'standard' on a distributed table (read through the executor): the local table's fit" "
  SELECT d.sizes = l.sizes AND $(close d.inertia l.inertia), format('%s %s / %s %s', d.sizes, d.inertia, l.sizes, l.inertia)
  FROM gpu_kmeans_fit('big', 16, init_centroids => $big_init, scale => 'standard') d,
       gpu_kmeans_fit('big_local', 16, init_centroids => $big_init, scale => 'standard') l"

# labelling in place: a stored model applied on the shards by an UPDATE that
# Citus pushes down (gpu_kmeans_predict is IMMUTABLE), as the README advises
# for tables too large to bring memberships to the coordinator
q "$coord_port" "CREATE TABLE big_model AS SELECT model FROM gpu_kmeans_fit('big_local', 16, seed => 4)" >/dev/null
q "$coord_port" "ALTER TABLE big ADD COLUMN cluster integer" >/dev/null
q "$coord_port" "UPDATE big SET cluster = gpu_kmeans_predict('$(q "$coord_port" "SELECT model FROM big_model")'::jsonb, big)" >/dev/null
check "UPDATE big SET cluster = gpu_kmeans_predict(model, big), run on the shards: gpu_kmeans_apply's clusters" "
  SELECT count(*) = $big_n AND count(*) FILTER (WHERE b.cluster IS DISTINCT FROM a.cluster) = 0,
         format('%s rows, %s differ', count(*), count(*) FILTER (WHERE b.cluster IS DISTINCT FROM a.cluster))
  FROM big b JOIN gpu_kmeans_apply('big', (SELECT model FROM big_model)) a USING (id)"
q "$coord_port" "ALTER TABLE big DROP COLUMN cluster" >/dev/null

emb_init="(SELECT array_agg(v::float8[] ORDER BY id) FROM emb_local WHERE id BETWEEN 1 AND 5)"
check "real[] rows, metric cosine, init_centroids: the same clusters and centroids as the local table" "
  SELECT d.sizes = l.sizes AND d.device LIKE '%Citus%'
         AND (SELECT bool_and($(close dc.v lc.v)) FROM unnest(d.centroids) WITH ORDINALITY dc(v, n)
              JOIN unnest(l.centroids) WITH ORDINALITY lc(v, n) USING (n)),
         format('%s / %s', d.sizes, l.sizes)
  FROM gpu_kmeans_fit('emb', 5, metric => 'cosine', init_centroids => $emb_init) d,
       gpu_kmeans_fit('emb_local', 5, metric => 'cosine', init_centroids => $emb_init) l"

# ---- privileges and row security: as the calling user, on the workers ----
# (one statement a call: Citus propagates each to the workers)
for stmt in "CREATE ROLE analyst LOGIN" "GRANT USAGE ON SCHEMA public TO analyst" \
  "CREATE TABLE secret (id bigint PRIMARY KEY, x float8, y float8)" \
  "SELECT create_distributed_table('secret', 'id')" "INSERT INTO secret SELECT id, x, y FROM pts_local" \
  "GRANT SELECT ON pts TO analyst" "ALTER TABLE pts ENABLE ROW LEVEL SECURITY" \
  "CREATE POLICY analyst_half ON pts TO analyst USING (id % 2 = 0)" \
  "GRANT SELECT ON a, b, a_local TO analyst" "ALTER TABLE a ENABLE ROW LEVEL SECURITY" \
  "CREATE POLICY analyst_top ON a TO analyst USING (row_id <= 100)"; do
  q "$coord_port" "$stmt" >/dev/null
done
# the node functions are internal, not granted to PUBLIC: a deployment grants
# them to the roles that run distributed fits, on every node
node_fns="pg_gpu_node_kmeans_load, pg_gpu_node_kmeans_sample, pg_gpu_node_kmeans_step, pg_gpu_node_kmeans_farthest,
  pg_gpu_node_kmeans_labels, pg_gpu_node_kmeans_close, pg_gpu_node_matmul_load, pg_gpu_node_matmul_product"
grant_nodes() {  # grant_nodes SCHEMA ROLE
  local fns
  fns=$(echo "$node_fns" | tr -d '\n' | sed "s/pg_gpu_node_/$1.pg_gpu_node_/g")
  q "$coord_port" "SELECT bool_and(success) FROM run_command_on_all_nodes(\$\$GRANT EXECUTE ON FUNCTION $fns TO $2\$\$)" |
    grep -qx t || { echo "could not grant the node functions to $2 on every node" >&2; exit 1; }
}
grant_nodes public analyst
q "$coord_port" "CREATE ROLE outsider LOGIN" >/dev/null
q "$coord_port" "GRANT SELECT ON pts TO outsider" >/dev/null
q "$coord_port" "CREATE POLICY outsider_all ON pts TO outsider USING (true)" >/dev/null
# check_as ROLE NAME SQL: check, as ROLE
check_as() {
  local role=$1 name=$2 sql=$3 out
  if out=$(psql -X -q -At -h "$tmp" -p "$coord_port" -U "$role" -d postgres \
             -c "SET client_min_messages = warning" -c "SET pg_gpu.device = $device; $sql" 2>&1) &&
     [ "${out%%|*}" = t ]; then
    npass=$((npass + 1)); echo "ok   - $name"
  else
    nfail=$((nfail + 1)); echo "FAIL - $name"; printf '%s\n' "${out#f|}" | sed 's/^/       /'
  fi
}
check_as analyst "row security on the workers: a role's fit sees the rows the policy gives it (as through Citus)" "
  SELECT (SELECT sum(v) FROM unnest(f.sizes) v) = (SELECT count(*) FROM pts) AND (SELECT count(*) FROM pts) = 1500
         AND f.device LIKE '%Citus%',
         format('fit over %s rows, %s visible through Citus', (SELECT sum(v) FROM unnest(f.sizes) v), (SELECT count(*) FROM pts))
  FROM gpu_kmeans_fit('pts', 3, init_centroids => $init) f"
check_as analyst "row security on the workers: gpu_matmul of a role's rows of a (the policy's first 100) = their product" "
  SELECT count(*) = 100 AND count(*) FILTER (WHERE l.row_id IS NULL
           OR (SELECT max(abs(x - y) / greatest(1, abs(y))) FROM unnest(d.row_vec, l.row_vec) u(x, y)) > 1e-12) = 0,
         format('%s rows', count(*))
  FROM gpu_matmul('a'::regclass, 'b') d LEFT JOIN gpu_matmul('a_local'::regclass, 'b') l USING (row_id)"
expect_error "a role without SELECT on the distributed table: 42501" 42501 "permission denied" \
  "SELECT * FROM gpu_kmeans_fit('secret', 3)" analyst
check_as outsider "a role without EXECUTE on the node functions: the same fit, read through Citus's executor" "
  SELECT sizes = '{1500,1000,500}' AND device NOT LIKE '%Citus%', format('%s %s', sizes, device)
  FROM gpu_kmeans_fit('pts', 3, init_centroids => $init)"
out=$(psql -X -q -At -h "$tmp" -p "$coord_port" -U outsider -d postgres -c "SET pg_gpu.device = $device" \
        -c "SET client_min_messages = debug1" -c "SELECT sizes FROM gpu_kmeans_fit('pts', 3, init_centroids => $init)" 2>&1) || true
if printf '%s' "$out" | grep -q "may not execute pg_gpu's node functions (GRANT EXECUTE ON FUNCTION public.pg_gpu_node_kmeans_load"; then
  npass=$((npass + 1)); echo "ok   - without EXECUTE: DEBUG1 says why the executor path, naming the GRANT"
else
  nfail=$((nfail + 1)); echo "FAIL - without EXECUTE: DEBUG1 says why the executor path, naming the GRANT"; printf '%s\n' "$out" | grep -i "pg_gpu" | head -5 | sed 's/^/       /'
fi
# granted on the coordinator only: the worker's 42501 names the GRANT
q "$coord_port" "SET citus.enable_ddl_propagation = off; GRANT EXECUTE ON FUNCTION $node_fns TO outsider" >/dev/null
expect_error "EXECUTE granted on the coordinator only: the workers' 42501 names the GRANT" 42501 \
  "Citus node .*permission denied for function pg_gpu_node_kmeans_load" \
  "SELECT * FROM gpu_kmeans_fit('pts', 3, init_centroids => $init)" outsider
q "$coord_port" "SET citus.enable_ddl_propagation = off; REVOKE EXECUTE ON FUNCTION $node_fns FROM outsider" >/dev/null

# ---- schema: pg_gpu outside the caller's path, a planted function in it ----
# every call sent to a node is qualified with pg_gpu's schema, on a
# connection whose search_path is pg_catalog: a public.pg_gpu_node_* (public
# being on the caller's path) must never run
q "$coord_port" "CREATE SCHEMA gpu" >/dev/null
q "$coord_port" "ALTER EXTENSION pg_gpu SET SCHEMA gpu" >/dev/null
for port in "$worker_port" "$worker2_port"; do
  [ "$(q "$port" "SELECT extnamespace::regnamespace FROM pg_extension WHERE extname = 'pg_gpu'")" = gpu ] ||
    { echo "ALTER EXTENSION pg_gpu SET SCHEMA gpu did not reach the worker on port $port" >&2; exit 1; }
done
for port in "$coord_port" "$worker_port" "$worker2_port"; do
  q "$port" "SET citus.enable_ddl_propagation = off;
CREATE TABLE public.planted_log (at timestamptz);
GRANT INSERT ON public.planted_log TO PUBLIC;
CREATE FUNCTION public.pg_gpu_node_kmeans_load(regclass[], text[], text, text, integer, float8[], float8[],
    OUT rows bigint, OUT invalid bigint, OUT device text) RETURNS record LANGUAGE plpgsql
AS \$p\$ BEGIN INSERT INTO public.planted_log VALUES (now()); RAISE EXCEPTION 'the planted function ran'; END \$p\$;
CREATE FUNCTION public.pg_gpu_node_matmul_load(regclass[], text[], OUT rows bigint, OUT first_id bigint,
    OUT min_id bigint, OUT max_id bigint, OUT len integer, OUT device text) RETURNS record LANGUAGE plpgsql
AS \$p\$ BEGIN INSERT INTO public.planted_log VALUES (now()); RAISE EXCEPTION 'the planted function ran'; END \$p\$" >/dev/null
done
check "pg_gpu in schema gpu, off the caller's path: gpu.gpu_kmeans_fit runs on the workers, the planted public.pg_gpu_node_kmeans_load does not" "
  SELECT sizes = '{1500,1000,500}' AND device LIKE '% (2 Citus nodes)'
         AND current_setting('search_path') NOT LIKE '%gpu%'
         AND to_regproc('public.pg_gpu_node_kmeans_load') IS NOT NULL,
         format('%s %s, search_path %s', sizes, device, current_setting('search_path'))
  FROM gpu.gpu_kmeans_fit('pts', 3, init_centroids => $init)"
check "pg_gpu in schema gpu: gpu.gpu_matmul of a distributed a runs on the workers, the planted function does not" "
  SELECT count(*) = 200, format('%s rows', count(*)) FROM gpu.gpu_matmul('a'::regclass, 'b')"
runs=0
for port in "$coord_port" "$worker_port" "$worker2_port"; do
  runs=$((runs + $(q "$port" "SELECT count(*) FROM public.planted_log")))
  q "$port" "SET citus.enable_ddl_propagation = off;
DROP FUNCTION public.pg_gpu_node_kmeans_load(regclass[], text[], text, text, integer, float8[], float8[]);
DROP FUNCTION public.pg_gpu_node_matmul_load(regclass[], text[]); DROP TABLE public.planted_log" >/dev/null
done
check "the planted function never ran on any node" "SELECT $runs = 0, '$runs runs'"
q "$coord_port" "ALTER EXTENSION pg_gpu SET SCHEMA public" >/dev/null

# no pg_gpu session is left on a worker once a call has ended
sessions_left() {
  local port n=0 t
  for t in 1 2 3 4 5 6 7 8 9 10; do
    n=0
    for port in "$@"; do
      n=$((n + $(q "$port" "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pg_gpu'")))
    done
    [ "$n" -eq 0 ] && break
    sleep 0.2
  done
  echo "$n"
}
check "no pg_gpu session is left on the workers after the calls above" "
  SELECT $(sessions_left "$worker_port" "$worker2_port") = 0, '$(sessions_left "$worker_port" "$worker2_port") sessions left'"

# ---- failure and cancel ---------------------------------------------------
# a fit that runs for minutes, also on GPUs: a thousand starts of 400 clusters
long_fit="SELECT * FROM gpu_kmeans_fit('big', 400, init => 'random', n_init => 1000, seed => 5)"
# start_long NAME: the long fit in the background (its output in $tmp/NAME.out),
# back once the coordinator shows its iterations in pg_stat_activity
start_long() {
  (psql -X -q -At -v VERBOSITY=verbose -h "$tmp" -p "$coord_port" -U "$user" -d postgres \
     -c "SET pg_gpu.device = $device" -c "SET pg_gpu.cpu_threads = 1" -c "${2:-}" -c "$long_fit" \
     >"$tmp/$1.out" 2>&1; echo "rc=$?" >>"$tmp/$1.out") &
  long_pid=$!
  for _ in $(seq 1 100); do
    [ "$(q "$coord_port" "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '/* pg_gpu gpu_kmeans_fit: k = 400, iteration%'")" = 1 ] && return 0
    sleep 0.1
  done
  return 1
}
# ended_within NAME SECONDS: the background fit ended within SECONDS
ended_within() {
  local t0=$SECONDS
  while kill -0 "$long_pid" 2>/dev/null; do
    [ $((SECONDS - t0)) -gt "$2" ] && { kill "$long_pid"; return 1; }
    sleep 0.1
  done
  return 0
}
# result_check NAME OK FILE [WHY]: WHY, the step that failed, printed before FILE
result_check() {
  local name=$1 ok=$2 file=$3 why=${4:-}
  if [ "$ok" = t ]; then npass=$((npass + 1)); echo "ok   - $name"
  else
    nfail=$((nfail + 1)); echo "FAIL - $name"
    [ -n "$why" ] && echo "       ($why)"
    grep -v "^NOTICE\|^HINT\|^LOCATION" "$file" | sed 's/^/       /'
  fi
}
# mid_fit NAME SECONDS MESSAGE PORTS...: after start_long NAME and its interruption, the
# fit ended within SECONDS with MESSAGE and no pg_gpu session is left on PORTS; sets ok,
# and why to the first step that failed
mid_fit() {
  local name=$1 secs=$2 msg=$3 left
  shift 3
  ok=f
  if ! ended_within "$name" "$secs"; then why="still running $secs s after its iterations showed"
  elif ! grep -q "$msg" "$tmp/$name.out"; then why="not the error expected: $msg"
  elif left=$(sessions_left "$@"); [ "$left" -ne 0 ]; then why="$left pg_gpu sessions left on the workers 2 s after"
  else ok=t; why=; fi
}

ok=f why="the fit's iterations never showed, or the cancel was not sent"
if start_long cancel && q "$coord_port" "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '/* pg_gpu gpu_kmeans_fit%'" >/dev/null; then
  mid_fit cancel 3 "ERROR:  57014: canceling statement due to user request" "$worker_port" "$worker2_port"
fi
result_check "a cancel on the coordinator mid-fit: 57014 within 3 s, no session left on the workers" $ok "$tmp/cancel.out" "$why"

ok=f why="the fit's iterations never showed"
if start_long timeout "SET statement_timeout = '3s'"; then
  mid_fit timeout 4 "ERROR:  57014: canceling statement due to statement timeout" "$worker_port" "$worker2_port"
fi
result_check "statement_timeout = 3s mid-fit: 57014 in time, no session left on the workers" $ok "$tmp/timeout.out" "$why"

ok=f why="the fit's iterations never showed, or the worker did not stop"
if start_long stopped && as_owner "$bindir/pg_ctl" -D "$tmp/worker2" -m immediate -w stop >/dev/null; then
  mid_fit stopped 5 "ERROR:  08006: lost the connection to Citus node 127.0.0.1:$worker2_port" "$worker_port"
fi
result_check "a worker stopped mid-fit: 08006 naming it, no session left on the other worker" $ok "$tmp/stopped.out" "$why"

expect_error "a worker that is down: 08001 naming it" 08001 "could not connect to Citus node 127.0.0.1:$worker2_port" \
  "SELECT * FROM gpu_kmeans_fit('pts', 3)"
expect_error "a worker that is down, gpu_matmul: 08001 naming it" 08001 "could not connect to Citus node 127.0.0.1:$worker2_port" \
  "SELECT * FROM gpu_matmul('a'::regclass, 'b')"
as_owner "$bindir/pg_ctl" -D "$tmp/worker2" -l "$tmp/worker2.log" -w start >/dev/null
check "the worker back: the fit runs on both again" "
  SELECT sizes = '{1500,1000,500}' AND device LIKE '% (2 Citus nodes)', sizes::text
  FROM gpu_kmeans_fit('pts', 3, init_centroids => $init)"

echo
echo "citus: $npass checks passed, $nfail failed ($((SECONDS - t_start)) s)"
[ "$nfail" -eq 0 ]
