#!/usr/bin/env bash
# tests/demo/demo.sh - the main job on a fresh machine (README's first command):
# installs what the build needs, builds and installs pg_gpu, starts a
# throwaway PostgreSQL cluster, loads sample data and clusters it with
# gpu_kmeans (on the GPU where there is one, else on the CPU).
#   N=1000000 tests/demo/demo.sh     more rows (default 100000)
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh
ensure_deps
build_and_install
cluster_start
log "sample data: ${N:=100000} points in three blobs; gpu_kmeans"
psql -X -q -v n="$N" -f tests/demo/demo.sql
log "done (the cluster is removed on exit)"
