#!/usr/bin/env bash
# tests/bench/weights_sql.sh - weight_column in SQL (BENCHMARKS.md, section
# 12, "Sample weights"): one answer over placements (all GPUs, two parts,
# streamed parts, one GPU, the CPU: sizes, inertia and the largest centroid
# difference from the CPU's), then weighted fits beside unweighted ones on
# each device (the same rows, k, seed, 20 iterations, tol 0), each
# statement in a new session, and scikit-learn's KMeans with and without
# sample_weight on rows of the same shape (python3 with scikit-learn).
# Needs a server with pg_gpu (PGHOST etc. set: the bundle's start-server.sh)
# and a GPU; tables wd (10^6 x 8 float8) and wr (200,000 x 96 real[]) in
# database wt, each with a weight column w.
set -u
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS wt" -c "CREATE DATABASE wt"
psql -X -d wt -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION pg_gpu;
SET pg_gpu.max_memory = -1;
CREATE TABLE wd AS SELECT g AS id, random() AS x1, random() AS x2, random() AS x3, random() AS x4,
  random() AS x5, random() AS x6, random() AS x7, random() AS x8, (g % 7) * 0.5 AS w
  FROM generate_series(1, 1000000) g;
ALTER TABLE wd ADD PRIMARY KEY (id);
CREATE TABLE wr AS SELECT g AS id,
  array(SELECT ((((g % 50) * 37 + j * 11) % 41) - 20 + ((g * j) % 7) * 0.125)::real FROM generate_series(1, 96) j WHERE g > 0) AS v,
  1 + (g % 5) AS w
  FROM generate_series(1, 200000) g;
ALTER TABLE wr ADD PRIMARY KEY (id);
ALTER TABLE wd SET (parallel_workers = 4); ALTER TABLE wr SET (parallel_workers = 4);
VACUUM ANALYZE wd; VACUUM ANALYZE wr;
SET max_parallel_workers_per_gather = 4;
CREATE TEMP TABLE outs (what text, tab text, sizes bigint[], inertia float8, centroids float8[]);
CREATE FUNCTION runall(what text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO outs SELECT what, 'wd', sizes, inertia, centroids
    FROM gpu_kmeans_fit('wd', 64, ARRAY['x1', 'x2', 'x3', 'x4', 'x5', 'x6', 'x7', 'x8'], seed => 5, max_iter => 50,
                        weight_column => 'w');
  INSERT INTO outs SELECT what, 'wr', sizes, inertia, centroids
    FROM gpu_kmeans_fit('wr', 100, ARRAY['v'], seed => 5, max_iter => 50, init => 'k-means||', weight_column => 'w');
END $$;
SET pg_gpu.device = gpu;
SELECT runall('all gpus');
SET pg_gpu.parts = 2; SELECT runall('all gpus, 2 parts'); RESET pg_gpu.parts;
SET pg_gpu.kmeans_gpu_memory = 16; SELECT runall('all gpus, streamed'); RESET pg_gpu.kmeans_gpu_memory;
SET pg_gpu.gpus = '0'; SELECT runall('one gpu'); RESET pg_gpu.gpus;
SET pg_gpu.device = cpu; SELECT runall('cpu');
SELECT o.tab, o.what, o.sizes = c.sizes AS sizes_as_cpu, abs(o.inertia - c.inertia) / c.inertia AS inertia_rel,
       (SELECT max(abs(a - b)) FROM unnest(o.centroids, c.centroids) u(a, b)) AS centroids_max_diff
FROM outs o JOIN outs c ON c.what = 'cpu' AND c.tab = o.tab
ORDER BY 1, 2;
SQL
# a fit's time, weighted and not, on each device (20 iterations from the same seeds)
for dev in gpu cpu; do
  for q in "gpu_kmeans_fit('wd', 64, ARRAY['x1', 'x2', 'x3', 'x4', 'x5', 'x6', 'x7', 'x8'], seed => 5, max_iter => 20, tol => 0%s)" \
           "gpu_kmeans_fit('wr', 100, ARRAY['v'], seed => 5, max_iter => 20, tol => 0%s)"; do
    for w in "" ", weight_column => 'w'"; do
      sql=$(printf "$q" "$w")
      for rep in 1 2; do
        s=$(psql -X -d wt -At -c "SET pg_gpu.device = $dev" -c "SET max_parallel_workers_per_gather = 4" -c "\\timing on" \
            -c "SET client_min_messages = debug2" -c "SELECT iterations, round(inertia::numeric, 3) FROM $sql" 2>&1 |
            grep -E "stages|Time:|^[0-9]+\|" | sed 's/.*stages (ms): //' | tr '\n' ' ')
        echo "bench $dev | $sql | $s"
      done
    done
  done
done
# scikit-learn on rows of wd's shape: the same 20 iterations, with and without sample_weight
LD_LIBRARY_PATH=${PYTHON_LD_LIBRARY_PATH:-} python3 - <<'PY'
import time
import numpy as np
from sklearn.cluster import KMeans
rng = np.random.default_rng(0)
n = 10**6
g = np.arange(1, n + 1)
X = rng.random((n, 8))
w = (g % 7) * 0.5
init = X[:64].copy()
for sw in (None, w):
    best = None
    for rep in range(2):
        t = time.perf_counter()
        km = KMeans(64, init=init, n_init=1, max_iter=20, tol=0, algorithm="lloyd").fit(X, sample_weight=sw)
        t = time.perf_counter() - t
        best = t if best is None else min(best, t)
    print(f"sklearn | 10^6 x 8, k = 64, 20 iterations, {'weighted' if sw is not None else 'unweighted'} | {best * 1e3:.1f} ms | n_iter {km.n_iter_}")
PY
