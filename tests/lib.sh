# tests/lib.sh - shared by tests/demo.sh, tests/run.sh and tests/regress.sh.
# Installs what the build needs (Debian, as root) and runs a throwaway
# PostgreSQL cluster on a Unix socket in a temporary directory.

PG_MAJOR=${PG_MAJOR:-15}

log() { printf '\n== %s\n' "$*"; }

# step NAME COMMAND...: runs a suite step and counts it in passed/failed
passed=0 failed=0
step() {
  local name=$1; shift
  log "$name"
  if "$@"; then passed=$((passed + 1)); echo "-- ok: $name"
  else failed=$((failed + 1)); echo "-- FAILED: $name"; fi
}

# Build dependencies: a C compiler, PostgreSQL server + headers (PGXS),
# OpenBLAS, clang with libFuzzer (the fuzz target only).
# nvcc is optional: without it the build is CPU-only.
ensure_deps() {
  local need=()
  command -v make >/dev/null && command -v gcc >/dev/null || need+=(build-essential)
  [ -x "/usr/lib/postgresql/$PG_MAJOR/bin/postgres" ] || need+=("postgresql-$PG_MAJOR")
  [ -f "/usr/include/postgresql/$PG_MAJOR/server/postgres.h" ] || need+=("postgresql-server-dev-$PG_MAJOR")
  # OpenBLAS: the CPU matrix product (found through pkg-config)
  command -v pkg-config >/dev/null || need+=(pkg-config)
  pkg-config --exists openblas 2>/dev/null || need+=(libopenblas-dev)
  # clang with libFuzzer (tests/fuzz_compute)
  command -v clang >/dev/null || need+=(clang)
  [ -n "$(ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a 2>/dev/null)" ] ||
    need+=(libclang-rt-dev)
  if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
      echo "missing packages: ${need[*]} (run as root, or install them)" >&2
      return 1
    fi
    log "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
  export PATH="/usr/lib/postgresql/$PG_MAJOR/bin:$PATH"
  export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/$PG_MAJOR/bin/pg_config}
  [ -x "$PG_CONFIG" ] || PG_CONFIG=$(command -v pg_config)
}

# Runs a command as the cluster's owner (postgres when we are root: initdb
# refuses to run as root).
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# cluster_start: initdb + start on a private socket; exports PGHOST/PGPORT/PGUSER.
cluster_start() {
  local bindir
  bindir=$("$PG_CONFIG" --bindir)
  if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
    useradd -r -m postgres
  fi
  PG_TMP=$(mktemp -d /tmp/pg_gpu_cluster.XXXXXX)
  chmod 755 "$PG_TMP"
  [ "$(id -u)" -eq 0 ] && chown postgres "$PG_TMP"
  export PGHOST=$PG_TMP PGPORT=${PGPORT_TEST:-54329}
  export PGUSER=$( [ "$(id -u)" -eq 0 ] && echo postgres || id -un )
  as_owner "$bindir/initdb" -D "$PG_TMP/data" -U "$PGUSER" -A trust --no-sync >"$PG_TMP/initdb.log" 2>&1 \
    || { cat "$PG_TMP/initdb.log"; return 1; }
  as_owner "$bindir/pg_ctl" -D "$PG_TMP/data" -l "$PG_TMP/server.log" -w \
    -o "-k $PG_TMP -p $PGPORT -c listen_addresses='' -c fsync=off" start >/dev/null \
    || { cat "$PG_TMP/server.log"; return 1; }
  trap cluster_stop EXIT
}

cluster_stop() {
  [ -n "${PG_TMP:-}" ] || return 0
  as_owner "$("$PG_CONFIG" --bindir)/pg_ctl" -D "$PG_TMP/data" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$PG_TMP"
  PG_TMP=
}

build_and_install() {
  log "building pg_gpu ($( command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] && echo 'with CUDA' || echo 'CPU only'))"
  make -s -j"$(nproc)" PG_CONFIG="$PG_CONFIG" "$@"
  make -s install PG_CONFIG="$PG_CONFIG" "$@" >/dev/null
}
