"""What users would run instead, timed on the suite's data (blobs.py):

    compare.py --tsv F [--iters M] [--budget S] [--cap S] torch N,d,k ...
        a straightforward PyTorch Lloyd on the GPU (torch.cdist + argmin,
        index_add_ for the sums), float64, from the first k rows as
        centroids, like bench_kernel: seconds per iteration
    compare.py --tsv F [--iters M] [--budget S] [--cap S] torch32 N,d,k ...
        float32 on the GPU, the rows of the same data rounded: PyTorch's
        Lloyd in matmul form (|c|^2 - 2 x.c by torch.addmm, argmin,
        index_add_), with TF32 off (torch32) and on (torch32_tf32); and
        the floor, cuBLAS alone computing the same N x d x k products in
        the same chunks (cublas_fp32, cublas_tf32)
    compare.py --tsv F [--iters M] [--budget S] [--cap S] flash N,d,k ...
        flash-kmeans (svg-project/flash-kmeans at 3f1ea6b, a peer, not
        exact: Triton kernels, a fused distance-argmin and a sort-based
        update; its FP32 path multiplies in TF32) on the same rows in FP16
        (flash_fp16) and in FP32 (flash_fp32), from the first k rows:
        seconds per iteration from the fits of 1 and 1 + ITERS iterations.
        Its source, unpacked from ../shared/vendor by tests/bundle.sh, is
        peers/flash-kmeans-*/ beside this file (or on PYTHONPATH)
    compare.py --tsv F [--iters M] [--budget S] [--cap S] [--float32] sklearn N,d,k ...
        scikit-learn's KMeans(algorithm='lloyd', n_init=1, init=the first k
        rows, tol=0): seconds per iteration from the fits of 2 and of
        2 + 2 ITERS iterations (each the fastest of 3, after a warm-up), with
        one thread and with every core
    compare.py --tsv F export IN N D K OUT
        the middle of the export route: numpy loads the binary COPY file IN,
        KMeans(k, init='k-means++', n_init=1, algorithm='lloyd') fits it on
        every core, the labels go to OUT as a binary COPY file

Rows are appended to the TSV (section, method, N, d, k, seconds, note),
like the C programs'.  A case predicted (from the same d and k at a smaller
N) to take more than the cap or what is left of the budget is skipped.
"""
import argparse
import os
import sys
import time

import blobs

COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"


class Rows:
    """the TSV, the clock and the budget"""

    def __init__(self, path, budget, cap):
        self.path, self.budget, self.cap = path, budget, cap
        self.start = time.monotonic()
        self.done = {}

    def emit(self, section, method, n, d, k, sec, note):
        fields = [section, method, str(n), str(d or ""), str(k or ""),
                  "" if sec is None else "%.6g" % sec, note.replace("\t", " ")]
        print("%-10s %-24s N=%-10s d=%-3s k=%-5s %11s s  %s" % tuple(fields), flush=True)
        with open(self.path, "a") as f:
            f.write("\t".join(fields) + "\n")

    def skip(self, key, n):
        """None, or why key at n is skipped (see bench.h)"""
        left = self.budget - (time.monotonic() - self.start)
        smaller = [(m, c) for m, c in self.done.get(key, []) if m < n]
        pred = smaller[-1][1] * n / smaller[-1][0] if smaller else 0
        if left <= 0:
            return "skipped: budget spent"
        if pred > self.cap:
            return "skipped: >%.0fs (predicted %.0f s)" % (self.cap, pred)
        if pred > left:
            return "skipped: budget (predicted %.0f s, %.0f s left)" % (pred, left)
        return None

    def record(self, key, n, cost):
        self.done.setdefault(key, []).append((n, cost))


def cases(args):
    for c in args.cases:
        n, d, k = c.split(",")
        yield int(float(n)), int(d), int(k)


def torch_lloyd(X, C, iters):
    """iters Lloyd iterations from C; cdist in chunks of at most 2^27 distances"""
    import torch
    n, k = X.shape[0], C.shape[0]
    chunk = max(1, (1 << 27) // k)
    labels = torch.empty(n, dtype=torch.int64, device=X.device)
    for _ in range(iters):
        for r in range(0, n, chunk):
            labels[r:r + chunk] = torch.cdist(X[r:r + chunk], C).argmin(dim=1)
        sums = torch.zeros_like(C).index_add_(0, labels, X)
        counts = torch.bincount(labels, minlength=k).to(X.dtype)[:, None]
        C = torch.where(counts > 0, sums / counts.clamp(min=1), C)
    return C


def torch_lloyd_mm(X, C, iters, product_only=False):
    """iters Lloyd iterations in matmul form, chunks of at most 2^28 products"""
    import torch
    n, k = X.shape[0], C.shape[0]
    chunk = max(1, (1 << 28) // k)
    labels = torch.empty(n, dtype=torch.int64, device=X.device)
    for _ in range(iters):
        if product_only:
            for r in range(0, n, chunk):
                torch.mm(X[r:r + chunk], C.T)
            continue
        cc = (C * C).sum(1)
        for r in range(0, n, chunk):
            labels[r:r + chunk] = torch.addmm(cc[None, :], X[r:r + chunk], C.T, alpha=-2).argmin(dim=1)
        sums = torch.zeros_like(C).index_add_(0, labels, X)
        counts = torch.bincount(labels, minlength=k).to(X.dtype)[:, None]
        C = torch.where(counts > 0, sums / counts.clamp(min=1), C)
    return C


def run_torch32(args, out):
    import torch
    if not torch.cuda.is_available():
        for n, d, k in cases(args):
            out.emit("embed", "torch32", n, d, k, None, "n/a (torch sees no GPU)")
        return True
    X = None
    for n, d, k in cases(args):
        if X is None or X.shape != (n, d):
            X = None
            torch.cuda.empty_cache()
            X = blobs.torch_rows(n, d, "cuda").float()
        C = X[:k].clone()
        for method, tf32, product in (("cublas_fp32", False, True), ("cublas_tf32", True, True),
                                      ("torch32", False, False), ("torch32_tf32", True, False)):
            key = (method, d, k)
            why = out.skip(key, n)
            if why:
                out.emit("embed", method, n, d, k, None, why)
                continue
            t0 = time.monotonic()
            try:
                torch.backends.cuda.matmul.allow_tf32 = tf32
                torch_lloyd_mm(X, C, 1, product)        # warm-up
                torch.cuda.synchronize()
                t1 = time.monotonic()
                torch_lloyd_mm(X, C, args.iters, product)
                torch.cuda.synchronize()
                out.emit("embed", method, n, d, k, (time.monotonic() - t1) / args.iters,
                         "iterations=%d float32 tf32=%s torch %s" % (args.iters, tf32, torch.__version__))
            except Exception as e:                      # out of memory, mostly
                out.emit("embed", method, n, d, k, None, "failed: %s" % str(e).splitlines()[0])
                torch.cuda.empty_cache()
            out.record(key, n, time.monotonic() - t0)
    torch.backends.cuda.matmul.allow_tf32 = False
    return True


def import_flash():
    """flash-kmeans' batch_kmeans_Euclid, from peers/ beside this file or PYTHONPATH; None if absent"""
    import glob
    import types
    here = os.path.dirname(os.path.abspath(__file__))
    for root in sorted(glob.glob(os.path.join(here, "peers", "flash-kmeans-*"))):
        if root not in sys.path:
            sys.path.insert(0, root)
    try:
        import tqdm  # noqa: F401 (flash-kmeans imports trange; a stub where it is not installed)
    except ImportError:
        sys.modules["tqdm"] = types.SimpleNamespace(trange=range, tqdm=lambda x, *a, **k: x)
    try:
        from flash_kmeans import batch_kmeans_Euclid
    except ImportError:
        return None
    return batch_kmeans_Euclid


def run_flash(args, out):
    import torch
    fit = import_flash()
    if fit is None or not torch.cuda.is_available():
        why = "n/a (no flash-kmeans: peers/ or PYTHONPATH)" if fit is None else "n/a (torch sees no GPU)"
        for n, d, k in cases(args):
            for method in ("flash_fp16", "flash_fp32"):
                out.emit("embed", method, n, d, k, None, why)
        return True
    X = None
    for n, d, k in cases(args):
        if X is None or X.shape != (n, d):
            X = None
            torch.cuda.empty_cache()
            X = blobs.torch_rows(n, d, "cuda").float()
        for method, dtype in (("flash_fp16", torch.float16), ("flash_fp32", torch.float32)):
            key = (method, d, k)
            why = out.skip(key, n)
            if why:
                out.emit("embed", method, n, d, k, None, why)
                continue
            t0 = time.monotonic()
            try:
                x = X.to(dtype)[None]
                c = x[:, :k].clone()
                fit(x, k, max_iters=1, tol=-1.0, init_centroids=c)     # warm-up (Triton compiles)
                times = []
                for iters in (1, 1 + args.iters):
                    torch.cuda.synchronize()
                    t1 = time.monotonic()
                    fit(x, k, max_iters=iters, tol=-1.0, init_centroids=c.clone())
                    torch.cuda.synchronize()
                    times.append(time.monotonic() - t1)
                out.emit("embed", method, n, d, k, (times[1] - times[0]) / args.iters,
                         "iterations=%d %s, from the fits of 1 and %d (%.3f s, %.3f s); flash-kmeans 3f1ea6b"
                         % (args.iters, "float16" if dtype == torch.float16 else "float32", 1 + args.iters,
                            times[0], times[1]))
                del x, c
            except Exception as e:                      # out of memory, mostly
                out.emit("embed", method, n, d, k, None, "failed: %s" % str(e).splitlines()[0])
                torch.cuda.empty_cache()
            out.record(key, n, time.monotonic() - t0)
    return True


def run_torch(args, out):
    try:
        import torch
        gpu = torch.cuda.is_available()
    except ImportError:
        gpu = None
    if not gpu:
        why = "n/a (no torch)" if gpu is None else "n/a (torch sees no GPU)"
        for n, d, k in cases(args):
            out.emit("kernel", "torch", n, d, k, None, why)
        return True
    same, diff = blobs.compare(blobs.torch_rows(300, 8, "cuda").cpu().numpy(),
                               blobs.numpy_rows(0, 300, 8))
    out.emit("check", "blobs_torch_numpy", 300, 8, None, None,
             "bit-identical" if same else "largest relative difference %.3g" % diff)
    X = None
    for n, d, k in cases(args):
        key, t0 = (d, k), time.monotonic()
        why = out.skip(key, n)
        if why:
            out.emit("kernel", "torch", n, d, k, None, why)
            continue
        try:
            if X is None or X.shape != (n, d):
                X = None
                torch.cuda.empty_cache()
                X = blobs.torch_rows(n, d, "cuda")
            C = X[:k].clone()
            torch_lloyd(X, C, 1)                        # warm-up
            torch.cuda.synchronize()
            t1 = time.monotonic()
            torch_lloyd(X, C, args.iters)
            torch.cuda.synchronize()
            out.emit("kernel", "torch", n, d, k, (time.monotonic() - t1) / args.iters,
                     "iterations=%d torch %s" % (args.iters, torch.__version__))
        except Exception as e:                          # out of memory, mostly
            out.emit("kernel", "torch", n, d, k, None, "failed: %s" % str(e).splitlines()[0])
            X = None
            torch.cuda.empty_cache()
        out.record(key, n, time.monotonic() - t0)
    return True


def fit_sklearn(KMeans, X, k, max_iter, reps=3):
    """(fastest of reps fits in seconds, iterations) from the first k rows"""
    times = []
    for _ in range(reps):
        km = KMeans(k, init=X[:k], n_init=1, algorithm="lloyd", max_iter=max_iter, tol=0)
        t0 = time.monotonic()
        km.fit(X)
        times.append(time.monotonic() - t0)
    return min(times), km.n_iter_


def run_sklearn(args, out):
    try:
        from sklearn.cluster import KMeans
        from threadpoolctl import threadpool_limits
    except ImportError:
        for n, d, k in cases(args):
            out.emit("cpu", "sklearn", n, d, k, None, "n/a (no scikit-learn)")
        return True
    import sklearn
    cores = os.cpu_count()
    for n, d, k in cases(args):
        X = blobs.numpy_rows(0, n, d)
        if args.float32:
            import numpy as np
            X = X.astype(np.float32)       # scikit-learn keeps float32 data in float32 (sgemm)
        for threads in sorted({1, cores}):
            method = "sklearn_%dt%s" % (threads, "_f32" if args.float32 else "")
            key, t0 = (method, d, k), time.monotonic()
            why = out.skip(key, n)
            if why:
                out.emit("cpu", method, n, d, k, None, why)
                continue
            with threadpool_limits(threads):
                fit_sklearn(KMeans, X, k, 1)             # warm-up
                runs = [fit_sklearn(KMeans, X, k, m) for m in (2, 2 + 2 * args.iters)]
            (ta, ia), (tb, ib) = runs
            if ib > ia and tb > ta:
                out.emit("cpu", method, n, d, k, (tb - ta) / (ib - ia),
                         "iterations %d-%d threads=%d sklearn %s" % (ia, ib, threads, sklearn.__version__))
            else:
                out.emit("cpu", method, n, d, k, None,
                         "n/a: fits of %d and %d iterations took %.3g and %.3g s (converged, or noise)"
                         % (ia, ib, ta, tb))
            out.record(key, n, time.monotonic() - t0)
    return True


def copy_dtype(fields):
    """numpy record of a binary COPY tuple of fixed-width, non-NULL fields"""
    dt = [("nfields", ">i2")]
    for name, typ in fields:
        dt += [("len_" + name, ">i4"), (name, typ)]
    return dt


def run_export(args, out):
    import numpy as np
    from sklearn.cluster import KMeans
    path, n, d, k, labels_path = args.cases[0], int(args.cases[1]), int(args.cases[2]), \
        int(args.cases[3]), args.cases[4]
    t0 = time.monotonic()
    buf = open(path, "rb").read()
    if buf[:11] != COPY_SIGNATURE or buf[15:19] != b"\0\0\0\0":
        sys.exit("%s: not a binary COPY file without header extension" % path)
    rec = np.frombuffer(buf, np.dtype(copy_dtype([("id", ">i8")] + [("x%d" % j, ">f8") for j in range(d)])),
                        count=n, offset=19)
    if not (rec["nfields"] == 1 + d).all() or buf[19 + n * rec.itemsize:] != b"\xff\xff":
        sys.exit("%s: unexpected layout" % path)
    X = np.column_stack([rec["x%d" % j].astype(np.float64) for j in range(d)])
    ids = rec["id"].astype(np.int64)
    out.emit("e2e", "export_load", n, d, k, time.monotonic() - t0,
             "1 run; numpy.frombuffer of the binary COPY file")
    t0 = time.monotonic()
    km = KMeans(k, init="k-means++", n_init=1, algorithm="lloyd", random_state=0).fit(X)
    out.emit("e2e", "export_fit", n, d, k, time.monotonic() - t0,
             "1 run; KMeans(k, init='k-means++', n_init=1, algorithm='lloyd'), %d iterations, %d cores"
             % (km.n_iter_, os.cpu_count()))
    t0 = time.monotonic()
    lab = np.empty(n, np.dtype(copy_dtype([("id", ">i8"), ("cluster", ">i4")])))
    lab["nfields"], lab["len_id"], lab["len_cluster"] = 2, 8, 4
    lab["id"], lab["cluster"] = ids, km.labels_ + 1
    with open(labels_path, "wb") as f:
        f.write(COPY_SIGNATURE + b"\0" * 8)
        f.write(lab.tobytes())
        f.write(b"\xff\xff")
    out.emit("e2e", "export_save", n, d, k, time.monotonic() - t0,
             "1 run; the labels as a binary COPY file")
    return True


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tsv", required=True)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--budget", type=float, default=1e12)
    p.add_argument("--cap", type=float, default=1e12)
    p.add_argument("--float32", action="store_true",
                   help="sklearn: the rows as float32 (method suffix _f32)")
    p.add_argument("what", choices=["torch", "torch32", "flash", "sklearn", "export"])
    p.add_argument("cases", nargs="*")
    args = p.parse_args()
    out = Rows(args.tsv, args.budget, args.cap)
    run = {"torch": run_torch, "torch32": run_torch32, "flash": run_flash, "sklearn": run_sklearn,
           "export": run_export}[args.what]
    sys.exit(0 if run(args, out) else 1)


if __name__ == "__main__":
    main()
