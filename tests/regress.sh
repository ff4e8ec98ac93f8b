#!/usr/bin/env bash
# tests/regress.sh [--device auto|gpu|cpu] - the pg_regress suite (sql/,
# expected/) against the server in PGHOST/PGPORT/PGUSER, with the given
# pg_gpu.device.  The same expected files hold on the CPU and on the GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
device=cpu
[ "${1:-}" = "--device" ] && device=$2

regress=$(command -v pg_regress 2>/dev/null ||
  echo "$(dirname "$(pg_config --pgxs)")/../test/regress/pg_regress")
tests=$(ls sql/*.sql | xargs -n1 basename | sed 's/\.sql$//' | sort)

export PGOPTIONS="-c pg_gpu.device=$device"
echo "pg_regress with pg_gpu.device=$device"
set +e
"$regress" --inputdir=. --outputdir=. --dbname=pg_gpu_regress \
  --bindir="$(dirname "$(command -v psql)")" $tests
rc=$?
set -e
[ $rc -ne 0 ] && [ -f regression.diffs ] && head -200 regression.diffs
exit $rc
