#!/usr/bin/env bash
# tests/run.sh - the whole test suite on a fresh machine (README's second
# command; CI runs it through .ci/run):
#   1. installs the build dependencies (Debian, as root),
#   2. builds the CPU-only variant (proves the no-nvcc build), then the normal one
#      (both against Debian's PostgreSQL 15, without compiler warnings),
#   3. runs the compute-layer unit tests (GPU cases too where a GPU exists) and
#      the libFuzzer target over it for a fixed budget,
#   4. installs the extension, starts a throwaway PostgreSQL cluster and runs
#      the pg_regress suite with pg_gpu.device=cpu (and =gpu where a GPU exists),
#      then 16 concurrent backends against one backend's answers (CPU path),
#      the isolation tests (sessions changing a table while others cluster it),
#      pg_dump/restore of a database that uses the extension, the analyst's
#      session of docs/models.md, Citus
#      distributed tables (tests/citus.sh: Citus built once from
#      ../shared/vendor), and a smoke run of the benchmark suite
#      (tests/bench/run.sh --smoke);
#   5. the same build (CPU only) and the regress and isolation suites against
#      PostgreSQL 18, built once from ../shared/vendor into /var/cache.
# The map of the sources (docs/layout.md) is checked first (tests/maps.sh),
# then the Makefile's prerequisites against the sources' includes (tests/deps.sh).
# Ends with one line "N passed, M failed" (suites) and exits non-zero on failure.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/lib.sh

ensure_deps || exit 1
step "docs/layout.md names every source file, and no file that is gone (tests/maps.sh)" bash tests/maps.sh
step "the Makefile rebuilds every object when a header it includes changes (tests/deps.sh)" \
  env PG_CONFIG="$PG_CONFIG" bash tests/deps.sh

cpu_only_build() {
  local d
  d=$(mktemp -d)
  # from clean: the copy's objects (if any were built here) are removed first
  cp -r Makefile META.json cuda src extension "$d"/ &&
    make -s -C "$d" clean >/dev/null 2>&1 &&
    { HEARTBEAT_FD=3 heartbeat "building without CUDA" make -s -C "$d" WITH_CUDA=0 PG_CONFIG="$PG_CONFIG" >/dev/null; } 3>&1 &&
    ! nm "$d/pg_gpu.so" | grep -q cudaGetDeviceCount
  local rc=$?
  rm -rf "$d"
  return $rc
}
step "CPU-only build (WITH_CUDA=0)" cpu_only_build

make -s clean >/dev/null 2>&1
step "build and install, without warnings" build_warning_free
step "unit tests of the compute layer" make -s unit PG_CONFIG="$PG_CONFIG"
# docs/routes.md's table is the planner's (tests/unit/unit_compute --route-table)
routes_doc() {
  diff <(tests/unit/unit_compute --route-table) \
       <(sed -n '/^<!-- route table/,/^<!-- end of route table/p' docs/routes.md | sed '1d;$d') &&
    echo "docs/routes.md: the planner's table, $(grep -c '^| [0-9]' docs/routes.md) routes"
}
step "docs/routes.md is the route planner's table (unit_compute --route-table)" routes_doc

# libFuzzer over the compute layer's validation and data handling (ASan,
# UBSan): a fixed budget of inputs from a fixed seed
fuzz() {
  local dir rc
  make -s tests/fuzz/fuzz_compute PG_CONFIG="$PG_CONFIG" || return 1
  dir=$(mktemp -d)
  HEARTBEAT_FD=1 heartbeat "fuzzing (at most 180 s)" \
    bash -c 'cd "$1" && OPENBLAS_NUM_THREADS=1 "$2/tests/fuzz/fuzz_compute" -seed=1 -runs=40000 \
       -max_total_time=180 -max_len=512 -print_final_stats=1 >fuzz.log 2>&1' _ "$dir" "$PWD"
  rc=$?
  grep -E "^stat::number_of_executed_units|^Done|ERROR|SUMMARY|^k-means|^assign|^matmul|^open|^push" "$dir/fuzz.log" | head -20
  [ $rc -ne 0 ] && ls "$dir"/crash-* 2>/dev/null
  rm -rf "$dir"
  return $rc
}
step "fuzzing the compute layer (tests/fuzz/fuzz_compute, 40000 inputs)" fuzz
# the GPU suite's client (make gpu-check) must at least build here
step "GPU suite client builds (tests/gpu/gpu_resources)" make -s tests/gpu/gpu_resources PG_CONFIG="$PG_CONFIG"

# pgvector for the vector-column tests (built once from ../shared/vendor)
step "pgvector $PGVECTOR_VERSION installed for the tests" ensure_pgvector
step "PostGIS installed for the tests (Debian's package)" ensure_postgis
cluster_start || exit 1
step "pg_regress, pg_gpu.device=cpu" tests/regress.sh --device cpu
step "isolation tests, pg_gpu.device=cpu" tests/regress.sh --device cpu --isolation
step "16 backends at once, CPU path (tests/gpu/gpu_resources --cpu)" tests/gpu/gpu_resources --cpu
step "pg_dump and restore of a database using pg_gpu" tests/dump_restore.sh
analyst_session() {
  psql -X -q -d postgres -c "DROP DATABASE IF EXISTS pg_gpu_analyst" -c "CREATE DATABASE pg_gpu_analyst" &&
    psql -X -q -v ON_ERROR_STOP=1 -d pg_gpu_analyst -c "SET pg_gpu.device = cpu" -f tests/demo/analyst.sql >/dev/null &&
    psql -X -q -d postgres -c "DROP DATABASE pg_gpu_analyst"
}
step "the analyst's session of docs/models.md runs (tests/demo/analyst.sql)" analyst_session
step "every SQL example of README.md runs as written (tests/readme.sh)" bash tests/readme.sh
step "Citus distributed tables (tests/citus.sh)" bash tests/citus.sh
step "benchmark suite, smoke run (tests/bench/run.sh --smoke)" bash tests/bench/run.sh --smoke
gpus=$(psql -X -At -d postgres -c "CREATE EXTENSION IF NOT EXISTS pg_gpu; SELECT count(*) FROM gpu_info()" 2>/dev/null | tail -1)
if [ "${gpus:-0}" -gt 0 ]; then
  step "pg_regress, pg_gpu.device=gpu" tests/regress.sh --device gpu
else
  echo "(no GPU here: the GPU regress run is skipped; see README, 'GPU tests')"
fi
cluster_stop

# the release archive (PGXN): make dist, with META.json agreeing with the
# control file (1.1 there is 1.1.0 here) and naming files that exist, and
# extension/ one install script (1.0) and the upgrades up to the control's
# version (after the benchmarks, which install python3)
dist_check() {
  local ctl meta file zip
  ctl=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" extension/pg_gpu.control)
  meta=$(sed -n 's/^   "version": "\([0-9.]*\)",$/\1/p' META.json)
  file=$(sed -n 's/^ *"file": "\(.*\)",$/\1/p' META.json)
  zip=pg_gpu-$meta.zip
  echo "control $ctl, META.json $meta, provides $file"
  [ "$meta" = "$ctl.0" ] && [ -f "$file" ] && [ "$file" = "extension/pg_gpu.control" ] &&
    [ "$(ls extension/pg_gpu--*.sql | grep -vc -- '--.*--')" -eq 1 ] && [ -f extension/pg_gpu--1.0.sql ] &&
    ls extension/pg_gpu--*--"$ctl".sql >/dev/null 2>&1 &&
    grep -q "\"version\": \"$meta\"" <(sed -n '/"provides"/,/}/p' META.json) &&
    make -s dist PG_CONFIG="$PG_CONFIG" >/dev/null && [ -f "$zip" ] &&
    python3 - "$zip" "pg_gpu-$meta" <<'PY'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
need = ["META.json", "Makefile", "README.md", "extension/pg_gpu.control", "src/pg_gpu.c", "cuda/pg_gpu_compute.h"]
missing = [n for n in need if sys.argv[2] + "/" + n not in names]
print("%d files in %s; missing: %s" % (len(names), sys.argv[1], missing or "none"))
sys.exit(1 if missing else 0)
PY
  local rc=$?
  rm -f "$zip"
  return $rc
}
step "release archive (make dist) and META.json" dist_check

# PostgreSQL 18 (built once from ../shared/vendor, see ensure_pg18): the
# CPU-only build against it, without warnings, in a copy of the tree, then
# the regress and isolation suites against a server of it
pg18_build() {
  local d rc
  d=$(mktemp -d)
  cp -r Makefile META.json cuda src extension "$d"/ &&
    (cd "$d" && make -s clean >/dev/null 2>&1 && build_warning_free WITH_CUDA=0)
  rc=$?
  rm -rf "$d"
  return $rc
}
if pg18_config=$(ensure_pg18); then
  pg15_config=$PG_CONFIG pg15_path=$PATH
  export PG_CONFIG=$pg18_config PATH="$(dirname "$pg18_config"):$PATH"
  if step "PostgreSQL $PG18_VERSION: build and install, without warnings" pg18_build &&
     cluster_start; then
    step "PostgreSQL $PG18_VERSION: pg_regress, pg_gpu.device=cpu" tests/regress.sh --device cpu
    step "PostgreSQL $PG18_VERSION: isolation tests, pg_gpu.device=cpu" tests/regress.sh --device cpu --isolation
    cluster_stop
  fi
  export PG_CONFIG=$pg15_config PATH=$pg15_path
else
  failed=$((failed + 1)); echo "-- FAILED: PostgreSQL $PG18_VERSION could not be built"
fi

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
