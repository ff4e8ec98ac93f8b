#!/usr/bin/env bash
# tests/regress.sh [--device auto|gpu|cpu] [--isolation] - the pg_regress
# suite (sql/, expected/), or with --isolation the isolation tests
# (tests/isolation/specs, expected/: sessions changing a table while others
# use pg_gpu on it), against the server in PGHOST/PGPORT/PGUSER, with the
# given pg_gpu.device.  The same expected files hold on the CPU and the GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
device=cpu isolation=false
while [ $# -gt 0 ]; do
  case $1 in
    --device) device=$2; shift 2 ;;
    --isolation) isolation=true; shift ;;
    *) echo "usage: $0 [--device auto|gpu|cpu] [--isolation]" >&2; exit 2 ;;
  esac
done

pgxs_test=$(dirname "$(pg_config --pgxs)")/../test
if $isolation; then
  runner=$(command -v pg_isolation_regress 2>/dev/null || echo "$pgxs_test/isolation/pg_isolation_regress")
  indir=tests/isolation outdir=tests/isolation/out db=pg_gpu_isolation
  tests=$(ls tests/isolation/specs/*.spec | xargs -n1 basename | sed 's/\.spec$//' | sort)
else
  runner=$(command -v pg_regress 2>/dev/null || echo "$pgxs_test/regress/pg_regress")
  indir=. outdir=. db=pg_gpu_regress
  tests=$(ls sql/*.sql | xargs -n1 basename | sed 's/\.sql$//' | sort)
fi

export PGOPTIONS="-c pg_gpu.device=$device"
echo "$(basename "$runner") with pg_gpu.device=$device"
set +e
"$runner" --inputdir="$indir" --outputdir="$outdir" --dbname=$db \
  --bindir="$(dirname "$(command -v psql)")" $tests
rc=$?
set -e
[ $rc -ne 0 ] && [ -f "$outdir/regression.diffs" ] && head -200 "$outdir/regression.diffs"
exit $rc
