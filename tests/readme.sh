#!/usr/bin/env bash
# tests/readme.sh - every SQL example of README.md runs as written, on the
# server in PGHOST/PGPORT/PGUSER (tests/run.sh's), section by section, each
# in a database of its own made as the README says:
#   - a ```sql block: its statements as they stand;
#   - a psql transcript (```, lines "=# ..."): each statement from its "=#"
#     to its ";" (continuation lines indented, $$ bodies whole); the output
#     shown is not compared (figures differ by device and data), but every
#     statement must succeed;
#   - the "Points" section runs after tests/demo/demo.sql, as it says.
# Prints "readme: N statements in M sections ran" and exits non-zero on the
# first statement that fails (psql names it).
set -euo pipefail
cd "$(dirname "$0")/.."
device=${PG_GPU_DEVICE:-cpu}
dir=$(mktemp -d)
trap "rm -rf $dir" EXIT

# one file a section (sNN.sql) with its title (sNN.title) and statements
awk -v dir="$dir" '
  function flush_stmt() { if (stmt != "") { print stmt >> file; nstmt++; stmt = "" } }
  /^#+ / { title = $0; sub(/^#+ /, "", title); sec++; file = sprintf("%s/s%02d.sql", dir, sec);
           printf "%s\n", title > sprintf("%s/s%02d.title", dir, sec); next }
  /^```/ {
    if (!incode) { incode = 1; lang = substr($0, 4); next }
    flush_stmt(); incode = 0; next }
  !incode { next }
  lang == "sql" { print >> file; next }
  lang != "" { next }
  {
    line = $0
    if (stmt == "" && line !~ /^=# /) next          # output, or a comment between statements
    if (line ~ /^=# /) { flush_stmt(); sub(/^=# /, "", line) }
    else sub(/^   /, "", line)
    stmt = stmt (stmt == "" ? "" : "\n") line
    n = gsub(/\$\$/, "&", line); if (n % 2) indollar = !indollar
    tail = line; sub(/[ \t]*--.*$/, "", tail)
    if (!indollar && (tail ~ /;[ \t]*$/ || tail ~ /\\gset[ \t]*$/)) flush_stmt()
  }
  END { flush_stmt() }
' README.md

total=0 sections=0
for f in "$dir"/s*.sql; do
  title=$(cat "${f%.sql}.title")
  db=pg_gpu_readme_$(basename "$f" .sql)
  psql -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
  if [ "$title" = "Points" ]; then
    psql -X -q -v ON_ERROR_STOP=1 -v n=20000 -d "$db" -f tests/demo/demo.sql >/dev/null
  elif ! grep -q "CREATE EXTENSION pg_gpu" "$f"; then
    psql -X -q -d "$db" -c "CREATE EXTENSION pg_gpu"
  fi
  n=$(grep -c ';' "$f" || true)
  echo "readme: \"$title\": $n statements"
  PGOPTIONS="-c pg_gpu.device=$device -c client_min_messages=warning" \
    psql -X -q -v ON_ERROR_STOP=1 -d "$db" -f "$f" >/dev/null
  psql -X -q -d postgres -c "DROP DATABASE $db"
  total=$((total + n)) sections=$((sections + 1))
done
echo "readme: $total statements in $sections sections ran"
