#!/usr/bin/env bash
# tests/bundle.sh [OUT.tar.xz] - packs everything the GPU suite needs for a
# GPU host without a package registry (air-gapped): this machine's
# PostgreSQL server (Debian's 15; another with PG_CONFIG=.../pg_config, for
# example PostgreSQL 18 from tests/lib.sh's ensure_pg18)
# (binaries, share/, modules, pg_regress) with the shared
# libraries they load beyond glibc and CUDA's own, pg_gpu built and installed
# into it, the suite's programs (unit_compute, gpu_resources, gpu_hog) and
# its scripts and SQL, and the benchmark suite (tests/bench: its programs,
# bench_matmul, its scripts and python).  Run it on a Debian/Ubuntu build
# machine (as root it installs what the build needs); the GPU host needs
# only the NVIDIA driver, a CUDA toolkit of the same major version (cuBLAS;
# compute-sanitizer for step 2) and tar/xz (the benchmarks: python3 with
# numpy, scikit-learn, matplotlib and torch).  There:
#     tar -xJf pg_gpu-gpu-suite.tar.xz && pg_gpu-gpu-suite/gpu-check
# runs tests/gpu/gpu-check.sh against a throwaway server started from the
# bundle (as root it runs the server as user postgres, created if missing);
#     pg_gpu-gpu-suite/bench [--smoke|--small|--full] [--out DIR]
# runs the benchmark suite (tests/bench/run.sh) against one the same way.
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/lib.sh
out=$(realpath -m "${1:-pg_gpu-gpu-suite.tar.xz}")
ensure_deps
# pgvector into this PostgreSQL, so that the bundle carries it (its tests)
ensure_pgvector || echo "pgvector not installed: its tests take their other expected output" >&2
ensure_postgis || echo "PostGIS not installed: its tests take their other expected output" >&2
ensure_citus || echo "Citus not installed: the suite's Citus step will say skipped" >&2
root=$(mktemp -d)
top=$root/pg_gpu-gpu-suite
bindir=$("$PG_CONFIG" --bindir) pkglib=$("$PG_CONFIG" --pkglibdir) share=$("$PG_CONFIG" --sharedir)
mkdir -p "$top$bindir" "$top$pkglib" "$top$share" "$top/deps" "$top/suite"

log "PostgreSQL $("$PG_CONFIG" --version) from $bindir"
for x in postgres initdb pg_ctl psql pg_isready pg_config; do cp -L "$bindir/$x" "$top$bindir/"; done
pgxs_test=$(dirname "$("$PG_CONFIG" --pgxs)")/../test
cp -L "$pgxs_test/regress/pg_regress" "$pgxs_test/isolation/pg_isolation_regress" \
  "$pgxs_test/isolation/isolationtester" "$top$bindir/"
# (PostGIS without its raster and address libraries: GDAL alone would double the bundle)
find "$pkglib" -maxdepth 1 -name '*.so' ! -name 'llvmjit*' ! -name 'postgis_raster*' ! -name 'address_standardizer*' \
  -exec cp -L {} "$top$pkglib/" \;
cp -a "$share/." "$top$share/"
# links out of the tree (Debian's alternatives: PostGIS's control files) as the files they name
find "$top$share" -type l -lname '/*' | while read -r l; do
  cp --remove-destination -L "$share/${l#"$top$share"/}" "$l"
done

log "pg_gpu, installed into the bundle, and the suite's programs"
# from clean: objects built against another PostgreSQL's headers would pass for current
make -s clean >/dev/null 2>&1
make -s -j"$(nproc)" PG_CONFIG="$PG_CONFIG"
make -s install DESTDIR="$top" PG_CONFIG="$PG_CONFIG" >/dev/null
programs="tests/unit/unit_compute tests/gpu/gpu_resources tests/gpu/gpu_hog tests/bench/bench_matmul tests/bench/bench_kernel tests/bench/bench_sql"
make -s $programs PG_CONFIG="$PG_CONFIG"
mkdir -p "$top/suite/tests/bench"
cp -a sql expected "$top/suite/"
mkdir -p "$top/suite/tests/data" && cp -a tests/data/. "$top/suite/tests/data/"
mkdir -p "$top/suite/tests/isolation" && cp -a tests/isolation/specs tests/isolation/expected "$top/suite/tests/isolation/"
mkdir -p "$top/suite/tests/unit" "$top/suite/tests/gpu"
cp tests/*.sh "$top/suite/tests/"
cp tests/unit/unit_compute "$top/suite/tests/unit/"
cp tests/gpu/gpu-check.sh tests/gpu/gpu_resources tests/gpu/gpu_hog "$top/suite/tests/gpu/"
cp tests/bench/*.sh tests/bench/*.py tests/bench/bench_kernel tests/bench/bench_sql tests/bench/bench_matmul "$top/suite/tests/bench/"
# the benchmarks' peer flash-kmeans (compare.py flash), where ../shared/vendor has it: never part of pg_gpu
for t in ../shared/vendor/flash-kmeans-*.tar.gz; do
  if [ -f "$t" ]; then
    mkdir -p "$top/suite/tests/bench/peers" && tar -C "$top/suite/tests/bench/peers" -xzf "$t"
  fi
done
git describe --always --dirty >"$top/suite/COMMIT" 2>/dev/null || echo unknown >"$top/suite/COMMIT"

# the shared libraries all of it loads, but for glibc, libstdc++/libgcc and
# the NVIDIA driver's and CUDA toolkit's own (the GPU host has those)
# (and OpenBLAS, which pg_gpu loads on the first CPU product: ldd does not
# name it)
# (awk reads all of it: an early exit could end ldconfig by SIGPIPE, and the script with it under pipefail)
openblas=$(ldconfig -p | awk '/libopenblas\.so\.0 / && !found {print $NF; found = 1}')
[ -n "$openblas" ] || { echo "libopenblas.so.0 not found (ldconfig -p)" >&2; exit 1; }
for f in "$top$bindir"/* "$top$pkglib"/*.so $(for p in $programs; do echo "$top/suite/$p"; done) "$openblas"; do
  [ "$f" != "$openblas" ] || echo "$openblas"
  ldd "$f" 2>/dev/null | awk '/=> \//{print $3}'
done | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
  grep -Ev '/(libcuda|libcudart|libcublas|libnv)[^/]*$' |
  while read -r lib; do cp -L "$lib" "$top/deps/"; done

# the wrappers: each starts a throwaway server from the bundle, then its suite
cat >"$top/start-server.sh" <<'SH'
# Sourced by the bundle's gpu-check and bench: a throwaway PostgreSQL server
# from the bundle's binaries on a private socket (as root, run as user
# postgres); exports PGHOST/PGPORT/PGUSER, PATH, LD_LIBRARY_PATH and
# PG_CONFIG, and PYTHON_LD_LIBRARY_PATH: the caller's own, for python.
top=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
suite=$top/suite
# the server's bin/: Debian's layout (usr/lib/postgresql/N/bin) or a prefix
# of its own (PostgreSQL 18 from source)
bindir=$(dirname "$(find "$top" -path "$top/suite" -prune -o -type f -name postgres -print | sort -V | tail -1)")
export PYTHON_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
export PATH="$bindir:${CUDA_HOME:-/usr/local/cuda}/bin:$PATH"
export LD_LIBRARY_PATH="$top/deps:${CUDA_HOME:-/usr/local/cuda}/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PG_CONFIG="$bindir/pg_config"
. "$suite/tests/lib.sh"
if [ "$(id -u)" -eq 0 ] && id postgres >/dev/null 2>&1 &&
   ! runuser -u postgres -- test -x "$bindir/postgres"; then
  echo "user postgres cannot run $bindir/postgres: unpack the bundle in a directory every user can read (/opt, /tmp)" >&2
  exit 1
fi
cluster_start || exit 1
SH
cat >"$top/gpu-check" <<'SH'
#!/usr/bin/env bash
# Runs pg_gpu's GPU suite from this bundle (tests/gpu/gpu-check.sh) against a
# throwaway server from the bundle.
set -uo pipefail
. "$(dirname "$0")/start-server.sh"
cd "$suite" || exit 1
UNIT=${UNIT:-tests/unit/unit_compute} RESOURCES=${RESOURCES:-tests/gpu/gpu_resources} bash tests/gpu/gpu-check.sh
SH
cat >"$top/bench" <<'SH'
#!/usr/bin/env bash
# Runs the benchmark suite from this bundle (tests/bench/run.sh, with the
# arguments given: [--smoke|--small|--full] [--out DIR] [--e2e-max N])
# against a throwaway server from the bundle.
set -uo pipefail
. "$(dirname "$0")/start-server.sh"
BENCH_PREBUILT=1 BENCH_COMMAND="$0" bash "$suite/tests/bench/run.sh" "$@"
SH
chmod +x "$top/gpu-check" "$top/bench"
tar -C "$root" -cJf "$out" pg_gpu-gpu-suite
rm -rf "$root"
ls -la "$out"
