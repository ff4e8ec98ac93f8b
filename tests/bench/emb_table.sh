# tests/bench/emb_table.sh - sourced by embeddings_sql.sh, sample_sql.sh and
# gpus_sql.sh: emb_table DB N D GEN makes database DB (dropped first) with
# pg_gpu and pgvector, and in it emb_v (id bigint, e vector(D)): N
# embedding-like rows, 1000 random topic directions plus as much noise,
# inserted by GEN sessions at once; it defines q (psql on DB, stopping at the
# first error).  timed_run (below) times one statement into a TSV.
emb_table() {
  local db=$1 n=$2 d=$3 gen=$4
  psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
  eval "q() { psql -X -q -v ON_ERROR_STOP=1 -d $db \"\$@\"; }"
  q -c "CREATE EXTENSION pg_gpu" -c "CREATE EXTENSION vector" \
    -c "CREATE TABLE topics AS SELECT t AS id, array(SELECT (random() - 0.5)::real FROM generate_series(1, $d) WHERE t >= 0)::vector AS e FROM generate_series(0, 999) t" \
    -c "CREATE UNLOGGED TABLE emb_v (id bigint PRIMARY KEY, e vector($d))"
  for s in $(seq 0 $((gen - 1))); do
    q -c "INSERT INTO emb_v SELECT i, t.e + array(SELECT (random() - 0.5)::real FROM generate_series(1, $d) WHERE i > 0)::vector FROM generate_series($((s * n / gen + 1)), $(((s + 1) * n / gen))) i JOIN topics t ON t.id = i % 1000" &
  done
  wait
}

# timed_run SECTION LABEL GREP SQL...: the statements (psql -c each: settings,
# then the one timed) on $db with DEBUG2, its wall time (psql's) as a row of
# $out (section, method, $N, $D, $K, seconds, note): the note holds its
# output and the DEBUG lines that match GREP
timed_run() {
  local section=$1 label=$2 pat=$3 t1 t2 log note args=()
  shift 3
  for c in "$@"; do args+=(-c "$c"); done
  log=$(mktemp)
  t1=$(date +%s.%N)
  if psql -X -q -v ON_ERROR_STOP=1 -d "$db" -c "SET client_min_messages = debug2" "${args[@]}" >"$log" 2>&1; then
    t2=$(date +%s.%N)
    note=$(grep -E "$pat" "$log" | grep -v 'DEBUG:  .*parallel' | tr '\n' ' ' | tr '\t' ' ' | cut -c1-2400)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s %s\n' "$section" "$label" "$N" "$D" "$K" \
      "$(awk -v a="$t2" -v b="$t1" 'BEGIN{printf "%.3f", a - b}')" "$(grep -v DEBUG "$log" | tr '\n' ' ' | cut -c1-200)" "$note" >>"$out"
  else
    printf '%s\t%s\t%s\t%s\t%s\t\tfailed: %s\n' "$section" "$label" "$N" "$D" "$K" "$(tail -3 "$log" | tr '\n\t' '  ')" >>"$out"
  fi
  tail -1 "$out" | cut -c1-300
  rm -f "$log"
}
