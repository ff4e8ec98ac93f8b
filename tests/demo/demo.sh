#!/usr/bin/env bash
# tests/demo/demo.sh - the main job on a fresh machine (README's first command):
# installs what the build needs, builds and installs pg_gpu, starts a
# throwaway PostgreSQL cluster, loads sample data and clusters it with
# gpu_kmeans (on the GPU where there is one, else on the CPU).
#   N=1000000 tests/demo/demo.sh     more rows (default 100000)
#   KEEP=1 tests/demo/demo.sh        leave the cluster running, to explore
#                                    (it prints how to connect and stop it)
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh
ensure_deps
build_and_install
cluster_start
log "sample data: ${N:=100000} points in three blobs; gpu_kmeans"
psql -X -q -v n="$N" -f tests/demo/demo.sql
log "an analyst's session (tests/demo/analyst.sql): scaling, several starts, a stored model, choosing k"
psql -X -q -v ON_ERROR_STOP=1 -f tests/demo/analyst.sql
if [ -n "${KEEP:-}" ]; then
  trap - EXIT
  log "done; the cluster keeps running:"
  echo "  connect: psql -h $PGHOST -p $PGPORT -U $PGUSER postgres"
  stop="$("$PG_CONFIG" --bindir)/pg_ctl -D $PG_TMP/data stop"
  [ "$(id -u)" -eq 0 ] && stop="runuser -u postgres -- $stop"
  echo "  stop:    $stop && rm -rf $PG_TMP"
else
  log "done (the cluster is removed on exit; KEEP=1 keeps it)"
fi
