#!/usr/bin/env bash
# tests/bench/gpus_sql.sh [OUT.tsv] - "Several GPUs" in SQL (BENCHMARKS.md
# section 9): gpu_kmeans_fit of N embedding-like `vector` rows (as
# embeddings_sql.sh makes them) with every GPU (pg_gpu.gpus = 'all') beside
# the same call on GPU 0 alone, ROUNDS times in turn, each a new session
# (as psql -c is); then each once more as the second call of a session
# (the GPUs' contexts made); and a small table (SMALL rows, which a call
# runs on one GPU whatever pg_gpu.gpus says).
# Seconds are psql's \timing of the call; the note has pg_gpu's DEBUG2
# stages (read, seed, iterate) and the fit's inertia, which must be equal.
# Needs a server with pg_gpu and pgvector (PGHOST etc.: the bundle's
# start-server.sh); N, D, K, BIG_K, SMALL, ROUNDS, WORKERS, ORDER (of the
# first runs: "one all"), QUICK (those runs only) from the environment.
set -eu
N=${N:-1000000} D=${D:-768} K=${K:-1000} K_SAVED=${K:-1000} SMALL=${SMALL:-20000} ROUNDS=${ROUNDS:-2} WORKERS=${WORKERS:-8} GEN=${GEN:-16}
out=${1:-gpus-sql.tsv}
db=pg_gpu_gpus
. "$(dirname "$0")/emb_table.sh"
emb_table $db "$N" "$D" "$GEN"
q -c "CREATE UNLOGGED TABLE small_v AS SELECT * FROM emb_v WHERE id <= $SMALL" -c "VACUUM ANALYZE emb_v" -c "VACUUM ANALYZE small_v"
[ -s "$out" ] || printf 'section\tmethod\tn\td\tk\tseconds\tnote\n' >"$out"
gpus=$(nvidia-smi -L | wc -l)
# run LABEL TABLE ROWS GPUS [second]: one fit timed by psql's \timing, the first call of a new
# session, or with "second" the second (after the same fit: the GPUs' contexts and libraries
# made, as a pooled connection has them)
run() {
  local label=$1 tab=$2 rows=$3 g=$4 second=${5:-} log
  local fit="SELECT iterations, round(inertia::numeric, 3) AS inertia, device FROM gpu_kmeans_fit('$tab', $K, seed => 1)"
  local calls=(-c "SET max_parallel_workers_per_gather = $WORKERS" -c "SET pg_gpu.max_memory = -1" -c "SET pg_gpu.gpus = '$g'")
  [ -n "$second" ] && calls+=(-c "$fit")
  log=$(mktemp)
  if q "${calls[@]}" -c "SET client_min_messages = debug2" -c '\timing on' -c "$fit" >"$log" 2>&1; then
    printf 'gpus_sql\t%s\t%s\t%s\t%s\t%s\tpg_gpu.gpus = %s (%s GPUs on the host)%s; %s %s\n' "$label" "$rows" "$D" "$K" \
      "$(grep -E '^Time: ' "$log" | tail -1 | awk '{printf "%.3f", $2 / 1000}')" "$g" "$gpus" \
      "${second:+, the second call of a session}" \
      "$(grep -E 'stages|dealt to' "$log" | tail -2 | sed 's/.*pg_gpu: //' | tr '\n\t' '  ')" \
      "result: $(grep -E '^ +[0-9]+ \|' "$log" | tail -1 | tr -s ' ' | tr -d '\n')" >>"$out"
  else
    printf 'gpus_sql\t%s\t%s\t%s\t%s\t\tfailed: %s\n' "$label" "$rows" "$D" "$K" "$(tail -3 "$log" | tr '\n\t' '  ')" >>"$out"
  fi
  tail -1 "$out" | cut -c1-400
  rm -f "$log"
}
for r in $(seq 1 "$ROUNDS"); do
  for o in ${ORDER:-one all}; do
    case $o in one) run one emb_v "$N" 0 ;; all) run all emb_v "$N" all ;; esac
  done
done
[ -n "${QUICK:-}" ] && exit 0
run one_warm emb_v "$N" 0 second
run all_warm emb_v "$N" all second
# (a fit worth several GPUs: k = BIG_K, an iteration estimated past 60 ms on one)
K=${BIG_K:-4000}
run one emb_v "$N" 0
run all emb_v "$N" all
K=${K_SAVED:-1000}
run small_one small_v "$SMALL" 0
run small_all small_v "$SMALL" all
