#!/usr/bin/env bash
# tests/gpu/gpu-check.sh (make gpu-check) - what only a GPU host can prove (CI has
# no GPU).  Exits non-zero on any failure; ends with "N passed, M failed".
#   1. kernel tests: tests/unit/unit_compute --full, every GPU routine against the
#      CPU reference over the kernel grid (N x d x k x float64/float32 and
#      edge cases), matrix products against a long-double reference;
#   2. compute-sanitizer memcheck (with leak check), racecheck, synccheck and
#      initcheck over the kernel tests up to N = 1000 (--small), at once;
#   3. the whole pg_regress suite with pg_gpu.device=gpu, then =cpu, against
#      the same expected files, and the isolation tests on the GPU;
#   4. resource checks in the server (tests/gpu/gpu_resources): GPU memory around
#      200 calls, after errors and cancellations, 16 backends at once, out
#      of GPU memory.
# Uses the server in PGHOST/PGPORT/PGUSER when PGHOST is set (for example one
# started from a PostgreSQL bundle on an air-gapped host, see README, "GPU
# tests"); otherwise installs what the build needs, builds, installs and
# starts a throwaway cluster like tests/run.sh.  The client programs must run
# on the server's machine.
# Prebuilt binaries: UNIT=path (unit_compute), RESOURCES=path (gpu_resources,
# with gpu_hog beside it).  SKIP=sanitizer,regress,... leaves steps out
# (unit, sanitizer, regress, resources, citus); a skipped step counts as failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh

if [ -z "${PGHOST:-}" ]; then
  ensure_deps || exit 1
  build_and_install || exit 1
  make -s tests/unit/unit_compute tests/gpu/gpu_resources tests/gpu/gpu_hog PG_CONFIG="$PG_CONFIG" || exit 1
  cluster_start || exit 1
fi
unit=${UNIT:-tests/unit/unit_compute}
resources=${RESOURCES:-tests/gpu/gpu_resources}
skip=",${SKIP:-},"
skipped() { case $skip in *",$1,"*) failed=$((failed + 1)); echo "-- SKIPPED: $1 (counts as failed)"; return 0;; esac; return 1; }

# the sections the sanitizers run: every kernel, none of the CPU-only ones
SAN_SECTIONS=errors,loading,assign,dtype,fit-only,interrupts,scaling,routes-on-the-GPU,kernel-grid,mm-products,mm-buffers,mm-reuse,mm-blocks,mm-nan/inf,mm-errors,mm-interrupts,mm-pinned
SAN_TOOLS="memcheck racecheck synccheck initcheck"
san_dir=$(mktemp -d /tmp/pg_gpu_sanitizer.XXXXXX)

sanitizers_start() {
  local cs
  cs=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
  if [ ! -x "$cs" ]; then
    echo "compute-sanitizer not found (CUDA toolkit's bin/)" | tee "$san_dir/none"
    return
  fi
  log "compute-sanitizer: $SAN_TOOLS over $unit --small (running beside the unit tests)"
  for tool in $SAN_TOOLS; do
    local extra=
    [ "$tool" = memcheck ] && extra="--leak-check full"
    ( "$cs" --tool "$tool" $extra --error-exitcode 9 "$unit" --small --only="$SAN_SECTIONS" \
        >"$san_dir/$tool.log" 2>&1; echo $? >"$san_dir/$tool.rc" ) &
  done
}

# sanitizer_result TOOL: waits for its run; ok when the tool found no error
# and every check passed
sanitizer_result() {
  local tool=$1
  [ -f "$san_dir/none" ] && return 1
  while [ ! -f "$san_dir/$tool.rc" ]; do sleep 1; done
  # the tool's own reports (lines starting =========) and the tests' counts
  grep -E "^=========|^[0-9]+ passed|^# kernel grid:|^FAIL" "$san_dir/$tool.log" | head -60
  echo "(exit status $(cat "$san_dir/$tool.rc"); whole log: $san_dir/$tool.log)"
  [ "$(cat "$san_dir/$tool.rc")" = 0 ] &&
    grep -Eq "ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors, 0 warnings\)" "$san_dir/$tool.log"
}

sanitize=true
skipped sanitizer && sanitize=false
$sanitize && sanitizers_start
skipped unit || step "kernel tests: $unit --full (GPU against the CPU reference)" "$unit" ${UNIT_ARGS:---full}
if $sanitize; then
  for tool in $SAN_TOOLS; do step "compute-sanitizer --tool $tool" sanitizer_result "$tool"; done
fi
[ "$failed" -eq 0 ] && rm -rf "$san_dir"
if ! skipped regress; then
  step "pg_regress, pg_gpu.device=gpu" tests/regress.sh --device gpu
  step "pg_regress, pg_gpu.device=cpu" tests/regress.sh --device cpu
  step "isolation tests, pg_gpu.device=gpu" tests/regress.sh --device gpu --isolation
fi
skipped resources || step "resource checks in the server: $resources" "$resources"
skipped citus || step "Citus: a coordinator and two workers, every node on the GPU (tests/citus.sh)" \
  env PG_GPU_DEVICE=gpu bash tests/citus.sh
echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
