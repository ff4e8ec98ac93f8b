#!/usr/bin/env bash
# tests/isolation.sh - isolation tests (tests/isolation/specs, expected/):
# concurrent sessions that change a table while others run pg_gpu on it.
# Uses the server in PGHOST/PGPORT/PGUSER; pg_gpu.device from --device.
set -euo pipefail
cd "$(dirname "$0")/.."
device=cpu
[ "${1:-}" = "--device" ] && device=$2
iso=$(command -v pg_isolation_regress 2>/dev/null ||
  echo "$(dirname "$(pg_config --pgxs)")/../test/isolation/pg_isolation_regress")
tests=$(ls tests/isolation/specs/*.spec | xargs -n1 basename | sed 's/\.spec$//' | sort)
export PGOPTIONS="-c pg_gpu.device=$device"
set +e
"$iso" --inputdir=tests/isolation --outputdir=tests/isolation/out --dbname=pg_gpu_isolation \
  --bindir="$(dirname "$(command -v psql)")" $tests
rc=$?
set -e
[ $rc -ne 0 ] && [ -f tests/isolation/out/regression.diffs ] && head -100 tests/isolation/out/regression.diffs
exit $rc
