#!/usr/bin/env python3
"""tests/bench/seeding_quality.py - issue 40's seeding check against
scikit-learn, on the server in PGHOST/PGPORT/PGUSER (psql on PATH):

  1. make_blobs(n_samples=20000, n_features=384, centers=20, cluster_std=1.0,
     center_box=(-10, 10), random_state=5) as a real[] column: for seeds
     1..6, gpu_kmeans(..., 20, seed => s)'s adjusted Rand index against the
     truth, beside scikit-learn's KMeans(20, n_init=1, random_state=s);
  2. 195,000 such rows of 20 blobs plus 5,000 uniform noise rows (2.5 %):
     the default fit's ARI (noise rows left out of the score), beside
     scikit-learn's with n_init 1 and 10.

Prints a TSV line a result (what, method, seed, ari, seconds) and exits
non-zero when pg_gpu finds the 20 blobs of (1) for fewer seeds than
scikit-learn does.  Needs numpy and scikit-learn.
"""
import os
import subprocess
import sys
import time

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score as ari



# psql's libraries (the bundle's) where python runs with its own
PSQL_ENV = dict(os.environ)
if "PSQL_LD_LIBRARY_PATH" in PSQL_ENV:
    PSQL_ENV["LD_LIBRARY_PATH"] = PSQL_ENV["PSQL_LD_LIBRARY_PATH"]


def psql(sql, stdin=None):
    r = subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", "postgres", "-c", sql],
                       input=stdin, capture_output=True, text=True, env=PSQL_ENV)
    if r.returncode != 0:
        sys.exit(f"psql failed: {r.stderr}")
    return r.stdout


def load(name, X):
    psql(f"DROP TABLE IF EXISTS {name}; CREATE TABLE {name} (id int PRIMARY KEY, e real[])")
    lines = "".join(f"{i + 1}\t{{{','.join(repr(float(v)) for v in row)}}}\n" for i, row in enumerate(X))
    psql(f"COPY {name} FROM STDIN", stdin=lines)
    psql(f"ANALYZE {name}")


def labels(name, k, extra=""):
    t0 = time.time()
    out = psql(f"SELECT id, cluster FROM gpu_kmeans('{name}', {k}{extra}) ORDER BY id")
    dt = time.time() - t0
    return np.array([int(l.split("|")[1]) for l in out.splitlines()]), dt


def emit(*f):
    print("\t".join(str(x) for x in f), flush=True)


psql("CREATE EXTENSION IF NOT EXISTS pg_gpu")
emit("what", "method", "seed", "ari", "seconds")
X, y = make_blobs(n_samples=20000, n_features=384, centers=20, cluster_std=1.0, center_box=(-10, 10),
                  random_state=5)
X = X.astype(np.float32)
load("sq_blobs", X)
found = {"pg_gpu": 0, "sklearn": 0}
for s in range(1, 7):
    lab, dt = labels("sq_blobs", 20, f", seed => {s}")
    a = ari(y, lab)
    found["pg_gpu"] += a > 0.9999
    emit("blobs 20000x384", "pg_gpu", s, f"{a:.4f}", f"{dt:.2f}")
    t0 = time.time()
    km = KMeans(20, n_init=1, random_state=s).fit(X)
    a = ari(y, km.labels_)
    found["sklearn"] += a > 0.9999
    emit("blobs 20000x384", "sklearn n_init=1", s, f"{a:.4f}", f"{time.time() - t0:.2f}")
emit("blobs 20000x384", "found all 20 blobs (of 6 seeds)", "-", f"pg_gpu {found['pg_gpu']}, sklearn {found['sklearn']}", "-")

rng = np.random.default_rng(7)
Xb, yb = make_blobs(n_samples=195000, n_features=384, centers=20, cluster_std=1.0, center_box=(-10, 10),
                    random_state=5)
noise = rng.uniform(-10, 10, size=(5000, 384))
Xn = np.vstack([Xb, noise]).astype(np.float32)
yn = np.concatenate([yb, -1 - np.arange(5000)])
blob = yn >= 0
load("sq_noisy", Xn)
lab, dt = labels("sq_noisy", 20)
emit("noisy 200000x384", "pg_gpu default", 0, f"{ari(yn[blob], lab[blob]):.4f}", f"{dt:.2f}")
for n_init in (1, 10):
    t0 = time.time()
    km = KMeans(20, n_init=n_init, random_state=0).fit(Xn)
    emit("noisy 200000x384", f"sklearn n_init={n_init}", 0, f"{ari(yn[blob], km.labels_[blob]):.4f}",
         f"{time.time() - t0:.2f}")
psql("DROP TABLE sq_blobs, sq_noisy")
sys.exit(0 if found["pg_gpu"] >= found["sklearn"] else 1)
