# tests/bench/emb_table.sh - sourced by embeddings_sql.sh and gpus_sql.sh:
# emb_table DB N D GEN makes database DB (dropped first) with pg_gpu and
# pgvector, and in it emb_v (id bigint, e vector(D)): N embedding-like rows,
# 1000 random topic directions plus as much noise, inserted by GEN sessions
# at once; it defines q (psql on DB, stopping at the first error).
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
