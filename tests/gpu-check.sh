#!/usr/bin/env bash
# tests/gpu-check.sh - what only a GPU host can prove (CI has no GPU):
#   1. the compute-layer unit tests with their GPU cases (GPU vs CPU reference),
#   2. the whole pg_regress suite with pg_gpu.device=gpu, then =cpu, against
#      the same expected files.
# Uses the server in PGHOST/PGPORT/PGUSER when set (for example one started by
# a PostgreSQL bundle on an air-gapped host, see README); otherwise builds,
# installs and starts a throwaway cluster like tests/run.sh.
# UNIT=path runs a prebuilt unit-test binary; UNIT_ARGS (default --full).
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/lib.sh

if [ -z "${PGHOST:-}" ]; then
  ensure_deps || exit 1
  build_and_install || exit 1
  make -s tests/unit_compute PG_CONFIG="$PG_CONFIG" || exit 1
  cluster_start || exit 1
fi
unit=${UNIT:-tests/unit_compute}
step "unit tests, GPU against the CPU reference" "$unit" ${UNIT_ARGS:---full}
step "pg_regress, pg_gpu.device=gpu" tests/regress.sh --device gpu
step "pg_regress, pg_gpu.device=cpu" tests/regress.sh --device cpu
echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
