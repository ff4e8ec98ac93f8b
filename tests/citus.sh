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
# ../shared/vendor/README.md) when it is not installed yet, once (about 2
# minutes on 2 cores); the built tree is kept in $CITUS_CACHE so that later runs
# only `make install` it (then the whole test takes about 5 s).  Without the tarball (and without an installed
# Citus) the test prints "skipped" and exits 0; CI always has the tarball.
#
# Environment:
#   PG_GPU_DEVICE        pg_gpu.device for the checks (default cpu; gpu on a GPU machine)
#   CITUS_COORD_PORT     coordinator port (default 54341)
#   CITUS_WORKER_PORT    worker port (default 54342); both differ from the
#                        main test cluster's 54329
#   CITUS_TARBALL        the Citus source tarball (default ../shared/vendor/...)
#   CITUS_CACHE          where the built Citus tree is kept
#                        (default /var/cache/pg_gpu-test/citus-13.2.2)
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
tarball=${CITUS_TARBALL:-$repo/../shared/vendor/citus-13.2.2-pg15.20.tar.gz}
cache=${CITUS_CACHE:-/var/cache/pg_gpu-test/citus-13.2.2}

# sets PATH and PG_CONFIG to PostgreSQL $PG_MAJOR; a PostgreSQL given in
# PG_CONFIG with Citus in it already (the GPU suite's bundle) is taken as is
if [ -z "${PG_CONFIG:-}" ] || [ ! -f "$("$PG_CONFIG" --pkglibdir)/citus.so" ]; then
  ensure_deps
fi
bindir=$("$PG_CONFIG" --bindir)

# ---------------------------------------------------------------------------
# 1. Citus installed into this PostgreSQL
# ---------------------------------------------------------------------------
citus_make_install() {
  make -s -C "$cache" install >"$cache/install.log" 2>&1 || { cat "$cache/install.log"; return 1; }
}
install_citus() {
  local stamp="$cache/.pg_gpu-test-built" want t0
  # what the cached tree was built from and for: rebuild when either changes
  want="$(basename "$tarball") $("$PG_CONFIG" --version)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    log "installing Citus from the tree built before ($cache)"
    citus_make_install
    return
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "Citus is not installed and only root can build and install it" >&2
    return 1
  fi
  # Citus's configure wants lz4, zstd (columnar compression) and libcurl
  # (its statistics collection, turned off in the clusters below); its
  # sources include PostgreSQL's libpq/libpq-be.h, which includes
  # <gssapi/gssapi.h> (libkrb5-dev, which postgresql-server-dev-15 does not pull in)
  local deps=(liblz4-dev libzstd-dev libcurl4-openssl-dev libkrb5-dev)
  if ! dpkg -s "${deps[@]}" >/dev/null 2>&1; then
    log "installing Citus's build dependencies: ${deps[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${deps[@]}" >/dev/null
  fi
  log "building Citus from $(basename "$tarball") into $cache (once; a few minutes)"
  t0=$SECONDS
  # build in place ($cache): configure writes absolute paths into the tree,
  # so it cannot be moved afterwards.  The stamp is written only after a
  # complete build, so an interrupted one is started over next time.
  rm -rf "$cache"
  mkdir -p "$cache"
  tar xzf "$tarball" -C "$cache" --strip-components=1
  if ! (cd "$cache" && ./configure PG_CONFIG="$PG_CONFIG" && make -j"$(nproc)") >"$cache/build.log" 2>&1; then
    grep -E -m10 'error|Error' "$cache/build.log" || tail -20 "$cache/build.log"
    echo "Citus build failed; the whole log is $cache/build.log" >&2
    return 1
  fi
  echo "$want" >"$stamp"
  citus_make_install
  echo "Citus built and installed in $((SECONDS - t0)) s"
}

if [ ! -f "$("$PG_CONFIG" --pkglibdir)/citus.so" ]; then
  if [ ! -f "$tarball" ] && [ ! -f "$cache/.pg_gpu-test-built" ]; then
    echo "citus: skipped (Citus is not installed and there is no $tarball to build it from)"
    exit 0
  fi
  install_citus
fi

# ---------------------------------------------------------------------------
# 2. A throwaway Citus cluster: coordinator + one worker on 127.0.0.1
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
  for node in coordinator worker; do
    [ -f "$tmp/$node/postmaster.pid" ] &&
      as_owner "$bindir/pg_ctl" -D "$tmp/$node" -m immediate -w stop >/dev/null 2>&1 || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# node_start NAME PORT: initdb and start one node.  The nodes reach each other
# over TCP (Citus's node addresses are host:port), so they listen on
# 127.0.0.1 only; psql here uses the Unix socket in $tmp.
node_start() {
  local name=$1 port=$2
  as_owner "$bindir/initdb" -D "$tmp/$name" -U "$user" -A trust --no-sync \
    >"$tmp/$name.initdb.log" 2>&1 || { cat "$tmp/$name.initdb.log"; return 1; }
  cat >>"$tmp/$name/postgresql.conf" <<EOF
shared_preload_libraries = 'citus'
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$tmp'
fsync = off
# no network here: do not let Citus try to send its usage statistics
citus.enable_statistics_collection = off
EOF
  as_owner "$bindir/pg_ctl" -D "$tmp/$name" -l "$tmp/$name.log" -w start >/dev/null \
    || { cat "$tmp/$name.log"; return 1; }
}

# q PORT SQL: one query on a node, unaligned output, stops at the first error
q() {
  psql -X -q -At -v ON_ERROR_STOP=1 -h "$tmp" -p "$1" -U "$user" -d postgres \
    -c "SET client_min_messages = warning" -c "$2"
}

log "starting a Citus coordinator (port $coord_port) and worker (port $worker_port)"
node_start coordinator "$coord_port"
node_start worker "$worker_port"
q "$worker_port" "CREATE EXTENSION citus"
q "$coord_port" "CREATE EXTENSION citus"
q "$coord_port" "SELECT citus_set_coordinator_host('127.0.0.1', $coord_port)" >/dev/null
q "$coord_port" "SELECT citus_add_node('127.0.0.1', $worker_port)" >/dev/null
# Citus propagates CREATE EXTENSION to the worker (and refuses DDL run on a
# worker directly once it holds metadata), so check that it arrived there
q "$coord_port" "CREATE EXTENSION pg_gpu"
[ "$(q "$worker_port" "SELECT count(*) FROM pg_extension WHERE extname = 'pg_gpu'")" = 1 ] ||
  { echo "CREATE EXTENSION pg_gpu did not reach the worker" >&2; exit 1; }
echo "citus $(q "$coord_port" "SELECT extversion FROM pg_extension WHERE extname = 'citus'"),"\
 "pg_gpu $(q "$coord_port" "SELECT extversion FROM pg_extension WHERE extname = 'pg_gpu'"),"\
 "pg_gpu.device = $device"

# ---------------------------------------------------------------------------
# 3. The data: each table distributed, and a plain local copy of it
# ---------------------------------------------------------------------------
# The distributed tables are distributed while empty and filled afterwards, as
# usual: create_distributed_table on a filled table would leave a copy of the
# rows in the coordinator's shell table, and the point here is that the shell
# is empty and the rows are only on the worker.
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

# the same starting centroids, one near each blob: with them k-means does not
# depend on the order in which rows are read (the distributed table's rows
# come back in another order than the local table's)
init="ARRAY[[0,0],[10,0],[5,9]]::float8[]"
# tolerance: the same rows summed in another order.  Relative 1e-9, absolute
# for values under 1 (a centroid coordinate near 0 has no relative precision)
close() { echo "abs(($1) - ($2)) <= 1e-9 * greatest(1, abs($2))"; }

log "checks (pg_gpu.device = $device)"
check "the rows are on the worker's shards, none in the coordinator's shell" "
  SELECT (SELECT count(*) FROM pts) = 3000
         AND (SELECT count(DISTINCT nodeport) FROM citus_shards WHERE table_name = 'pts'::regclass) = 1
         AND (SELECT min(nodeport) FROM citus_shards WHERE table_name = 'pts'::regclass) = $worker_port
         AND pg_relation_size('pts') = 0 AND pg_relation_size('a') = 0 AND pg_relation_size('s') = 0,
         format('%s rows through Citus; shell sizes pts %s, a %s, s %s bytes', (SELECT count(*) FROM pts),
                pg_relation_size('pts'), pg_relation_size('a'), pg_relation_size('s'))"

# k-means++ picks its seeds by row position, so which blob becomes cluster 1
# may differ with the row order: compare the sizes as sorted lists
check "gpu_kmeans_fit, k-means++ seed 1: same sizes and inertia as the local table" "
  SELECT (SELECT array_agg(v ORDER BY v) FROM unnest(d.sizes) v) = (SELECT array_agg(v ORDER BY v) FROM unnest(l.sizes) v)
         AND $(close d.inertia l.inertia),
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
check "gpu_matmul('a', 'b'): distributed dense a x local b = the product of the local copies" \
  "$(matmul_same "'a'::regclass, 'b'::regclass" "'a_local'::regclass, 'b'::regclass" 200)"
check "gpu_matmul('a', 's'): distributed dense a x distributed sparse s = the product of the local copies" \
  "$(matmul_same "'a'::regclass, 's'::regclass" "'a_local'::regclass, 's_local'::regclass" 200)"

echo
echo "citus: $npass checks passed, $nfail failed ($((SECONDS - t_start)) s)"
[ "$nfail" -eq 0 ]
