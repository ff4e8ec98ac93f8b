# tests/lib.sh - shared by tests/demo/demo.sh, tests/run.sh and tests/regress.sh.
# Installs what the build needs (Debian, as root) and runs a throwaway
# PostgreSQL cluster on a Unix socket in a temporary directory.

PG_MAJOR=${PG_MAJOR:-15}

log() { printf '\n== %s\n' "$*"; }

# heartbeat LABEL COMMAND...: runs COMMAND, saying "LABEL: N s so far" every
# 30 s while it runs (on fd HEARTBEAT_FD, default 2), so that a long silent
# step (a build, the fuzzer) shows it is alive
heartbeat() {
  local label=$1 pid t=0
  shift
  "$@" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    t=$((t + 1))
    [ $((t % 30)) -eq 0 ] && echo "   ... $label: $t s so far" >&"${HEARTBEAT_FD:-2}"
  done
  wait "$pid"
}

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
  # clang with libFuzzer (tests/fuzz/fuzz_compute)
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

# PostGIS for the geometry-column tests and benchmark (pg_gpu does not need
# it): Debian's package, installed as root when missing; else the tests take
# their other expected output
ensure_postgis() {
  [ -f "/usr/share/postgresql/$PG_MAJOR/extension/postgis.control" ] && return 0
  [ "$(id -u)" -eq 0 ] || { echo "PostGIS is not installed (run as root to install it)" >&2; return 1; }
  log "installing postgresql-$PG_MAJOR-postgis-3"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -qq --no-install-recommends "postgresql-$PG_MAJOR-postgis-3" ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "postgresql-$PG_MAJOR-postgis-3"; }; } >/dev/null
}

# PostgreSQL 18 beside Debian's 15: not in Debian 12's archive, so built once
# from ../shared/vendor/postgresql-$PG18_VERSION.tar.bz2 into a prefix in a
# cache outside the checkout (4 to 6 minutes on 2 cores; later runs find it
# there), with its isolation tester beside pg_regress in lib/pgxs.  Prints
# the pg_config of that prefix.  PG18_TARBALL and PG_CACHE override the
# paths.
PG18_VERSION=18.6
ensure_pg18() {
  local cache=${PG_CACHE:-/var/cache/pg_gpu-test}
  local prefix=$cache/postgresql-$PG18_VERSION
  local tarball=${PG18_TARBALL:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/../shared/vendor/postgresql-$PG18_VERSION.tar.bz2}
  local src=$prefix-src iso=$prefix/lib/pgxs/src/test/isolation
  if [ -x "$prefix/bin/pg_config" ] && [ -x "$iso/pg_isolation_regress" ]; then
    echo "$prefix/bin/pg_config"
    return 0
  fi
  [ -f "$tarball" ] || { echo "no $tarball to build PostgreSQL $PG18_VERSION from" >&2; return 1; }
  if ! command -v bison >/dev/null || ! command -v flex >/dev/null || [ ! -f /usr/include/zlib.h ]; then
    [ "$(id -u)" -eq 0 ] || { echo "PostgreSQL $PG18_VERSION needs bison, flex and zlib1g-dev (run as root)" >&2; return 1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bison flex zlib1g-dev >/dev/null ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bison flex zlib1g-dev >/dev/null; } || return 1
  fi
  mkdir -p "$cache"
  log "building PostgreSQL $PG18_VERSION into $prefix (once)" >&2
  rm -rf "$src" "$prefix" && mkdir -p "$src" &&
    tar -xjf "$tarball" -C "$src" --strip-components=1 &&
    heartbeat "building PostgreSQL $PG18_VERSION (log: $cache/pg18-build.log)" \
      bash -c 'cd "$1" && ./configure --prefix="$2" --without-icu --without-readline >"$3" 2>&1 &&
        make -j"$(nproc)" -s >>"$3" 2>&1 && make -s install >>"$3" 2>&1 &&
        make -C src/test/isolation -s >>"$3" 2>&1 &&
        mkdir -p "$4" && cp src/test/isolation/pg_isolation_regress src/test/isolation/isolationtester "$4/"' \
      _ "$src" "$prefix" "$cache/pg18-build.log" "$iso" ||
    { tail -30 "$cache/pg18-build.log" >&2; return 1; }
  rm -rf "$src"
  echo "$prefix/bin/pg_config"
}

# pgvector (its vector and halfvec types, for the vector-column tests): not
# in Debian 12's archive, so built once from ../shared/vendor into a cache
# outside the checkout and installed into the PostgreSQL of PG_CONFIG (a
# few seconds; 30 s to build the first time).  pg_gpu never links to it;
# without it the tests take their other expected output.  PGVECTOR_TARBALL
# and PG_CACHE override the paths.
PGVECTOR_VERSION=0.8.6
ensure_pgvector() {
  local cache=${PG_CACHE:-/var/cache/pg_gpu-test}
  local tarball=${PGVECTOR_TARBALL:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/../shared/vendor/pgvector-$PGVECTOR_VERSION.tar.gz}
  local src=$cache/pgvector-$PGVECTOR_VERSION-$("$PG_CONFIG" --version | tr -dc '0-9.')
  if [ -f "$("$PG_CONFIG" --sharedir)/extension/vector.control" ]; then
    return 0
  fi
  if [ ! -f "$src/vector.so" ]; then
    [ -f "$tarball" ] || { echo "no $tarball to build pgvector from" >&2; return 1; }
    rm -rf "$src" && mkdir -p "$src" && tar -xzf "$tarball" -C "$src" --strip-components=1 &&
      make -C "$src" -s PG_CONFIG="$PG_CONFIG" OPTFLAGS= >"$src.log" 2>&1 ||
      { tail -20 "$src.log" >&2; return 1; }
  fi
  make -C "$src" -s install PG_CONFIG="$PG_CONFIG" >>"$src.log" 2>&1 || { tail -20 "$src.log" >&2; return 1; }
}

# Citus 13.2.2 (distributed tables, tests/citus.sh and its benchmark): not in
# Debian 12's archive, so built once from ../shared/vendor (about 4 minutes
# on 2 cores) in place in a cache outside the checkout, then only
# `make install`ed into the PostgreSQL of PG_CONFIG.  Returns 1 (nothing
# done) when it is not installed and there is no tarball or built tree.
# CITUS_TARBALL and CITUS_CACHE override the paths.
CITUS_TARBALL=${CITUS_TARBALL:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/../shared/vendor/citus-13.2.2-pg15.20.tar.gz}
CITUS_CACHE=${CITUS_CACHE:-/var/cache/pg_gpu-test/citus-13.2.2}
ensure_citus() {
  local cache=$CITUS_CACHE tarball=$CITUS_TARBALL
  local stamp="$cache/.pg_gpu-test-built" want t0
  [ -f "$("$PG_CONFIG" --pkglibdir)/citus.so" ] && return 0
  [ -f "$tarball" ] || [ -f "$stamp" ] || return 1
  # what the cached tree was built from and for: rebuild when either changes
  want="$(basename "$tarball") $("$PG_CONFIG" --version)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    log "installing Citus from the tree built before ($cache)"
    make -s -C "$cache" install >"$cache/install.log" 2>&1 || { cat "$cache/install.log"; return 2; }
    return 0
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "Citus is not installed and only root can build and install it" >&2
    return 2
  fi
  # Citus's configure wants lz4, zstd (columnar compression) and libcurl
  # (its statistics collection, turned off in the test clusters); its
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
  if ! { HEARTBEAT_FD=3 heartbeat "building Citus (log: $cache/build.log)" \
         bash -c 'cd "$1" && ./configure PG_CONFIG="$2" && make -j"$(nproc)"' _ "$cache" "$PG_CONFIG" \
         >"$cache/build.log" 2>&1; } 3>&2; then
    grep -E -m10 'error|Error' "$cache/build.log" || tail -20 "$cache/build.log"
    echo "Citus build failed; the whole log is $cache/build.log" >&2
    return 2
  fi
  echo "$want" >"$stamp"
  make -s -C "$cache" install >"$cache/install.log" 2>&1 || { cat "$cache/install.log"; return 2; }
  echo "Citus built and installed in $((SECONDS - t0)) s"
}

# citus_node_start DIR NAME PORT [SETTING...]: initdb and start one Citus
# node in DIR/NAME, owned by the cluster owner (postgres when root), with the
# extra postgresql.conf lines given.  The nodes reach each other over TCP
# (Citus's node addresses are host:port), so they listen on 127.0.0.1 only;
# psql reaches them on the Unix socket in DIR.
citus_node_start() {
  local dir=$1 name=$2 port=$3 bindir user line
  shift 3
  bindir=$("$PG_CONFIG" --bindir)
  user=$( [ "$(id -u)" -eq 0 ] && echo postgres || id -un )
  as_owner "$bindir/initdb" -D "$dir/$name" -U "$user" -A trust --no-sync \
    >"$dir/$name.initdb.log" 2>&1 || { cat "$dir/$name.initdb.log"; return 1; }
  cat >>"$dir/$name/postgresql.conf" <<EOF
shared_preload_libraries = 'citus'
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
fsync = off
# no network here: do not let Citus try to send its usage statistics
citus.enable_statistics_collection = off
EOF
  for line in "$@"; do echo "$line" >>"$dir/$name/postgresql.conf"; done
  as_owner "$bindir/pg_ctl" -D "$dir/$name" -l "$dir/$name.log" -w start >/dev/null \
    || { cat "$dir/$name.log"; return 1; }
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

build_header() {
  local cuda=$( { command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; } && echo 'with CUDA' || echo 'CPU only')
  case " $* " in *" WITH_CUDA=0 "*) cuda='CPU only' ;; esac
  log "building pg_gpu ($cuda) against $("$PG_CONFIG" --version)"
}

build_and_install() {
  [ -n "${BUILD_HEADER_SAID:-}" ] || build_header "$@"
  make -s -j"$(nproc)" PG_CONFIG="$PG_CONFIG" "$@"
  make -s install PG_CONFIG="$PG_CONFIG" "$@" >/dev/null
}

# build_and_install, failing on any compiler warning (printed); the header
# and a line every 30 s while it builds come first (fd 3: not captured)
build_warning_free() {
  local out rc
  build_header "$@"
  { out=$(BUILD_HEADER_SAID=1 HEARTBEAT_FD=3 heartbeat "building pg_gpu" build_and_install "$@" 2>&1); } 3>&1
  rc=$?
  printf '%s\n' "$out"
  [ $rc -eq 0 ] && ! grep -q "warning:" <<<"$out"
}
