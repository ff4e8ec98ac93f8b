"""The peers and the floor of gpu_knn's benchmark (BENCHMARKS.md, "Nearest
neighbours"), on random float32 rows of the same shape on the GPU:

    knn_torch.py --tsv F NQ NB D K

cublas_tf32 / cublas_fp32: the NQ x NB x D product alone (torch.matmul,
TF32 on / off), the base in chunks of CHUNK rows, as a GPU would take it
from a stream; torch_tf32 / torch_fp32: PyTorch's nearest neighbours in
matmul form (|q|^2 - 2 q.b + |b|^2 by addmm, topk of each chunk, merged
with the running k by topk), as a user would write it; the note of
torch_tf32 says how many of its neighbours differ from torch_fp32's (TF32
rounds the rows to 10-bit mantissas).  Rows appended to the TSV (section,
method, N, d, k, seconds, note) as compare.py's.
"""
import argparse
import time

CHUNK = 1 << 17


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tsv", required=True)
    p.add_argument("nq", type=int)
    p.add_argument("nb", type=int)
    p.add_argument("d", type=int)
    p.add_argument("k", type=int)
    a = p.parse_args()

    def emit(method, sec, note=""):
        row = ["knn", method, str(a.nb), str(a.d), str(a.k), "" if sec is None else "%.6g" % sec,
               ("nq=%d " % a.nq) + note]
        print("\t".join(row), flush=True)
        with open(a.tsv, "a") as f:
            f.write("\t".join(row) + "\n")

    try:
        import torch
    except ImportError:
        emit("torch", None, "n/a (no torch)")
        return
    if not torch.cuda.is_available():
        emit("torch", None, "n/a (torch sees no GPU)")
        return
    g = torch.Generator(device="cuda").manual_seed(1)
    Q = torch.randn(a.nq, a.d, device="cuda", generator=g)
    B = torch.randn(a.nb, a.d, device="cuda", generator=g)
    Q = Q / Q.norm(dim=1, keepdim=True)
    B = B / B.norm(dim=1, keepdim=True)
    qn = (Q * Q).sum(1, keepdim=True)

    def product():
        for c in range(0, a.nb, CHUNK):
            torch.matmul(Q, B[c:c + CHUNK].T)

    def knn():
        best_d = torch.full((a.nq, a.k), float("inf"), device="cuda")
        best_i = torch.zeros((a.nq, a.k), dtype=torch.long, device="cuda")
        for c in range(0, a.nb, CHUNK):
            Bc = B[c:c + CHUNK]
            D = torch.addmm(qn + (Bc * Bc).sum(1)[None, :], Q, Bc.T, alpha=-2)
            v, i = torch.topk(D, min(a.k, Bc.shape[0]), dim=1, largest=False)
            v = torch.cat([best_d, v], 1)
            i = torch.cat([best_i, i + c], 1)
            best_d, j = torch.topk(v, a.k, dim=1, largest=False)
            best_i = torch.gather(i, 1, j)
        return best_i

    def timed(fn, reps=3):
        fn()
        torch.cuda.synchronize()
        best = None
        out = None
        for _ in range(reps):
            t = time.perf_counter()
            out = fn()
            torch.cuda.synchronize()
            s = time.perf_counter() - t
            best = s if best is None or s < best else best
        return best, out

    ids = {}
    for tf32 in (True, False):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        name = "tf32" if tf32 else "fp32"
        s, _ = timed(product)
        emit("cublas_" + name, s, "the product alone, chunks of %d base rows, fastest of 3" % CHUNK)
        s, ids[name] = timed(knn)
        emit("torch_" + name, s, "addmm + topk a chunk, merged by topk, fastest of 3")
    differ = (torch.sort(ids["tf32"], 1).values != torch.sort(ids["fp32"], 1).values).sum().item()
    emit("torch_tf32_vs_fp32", None, "%d of %d neighbours differ between TF32 and FP32" % (differ, a.nq * a.k))


if __name__ == "__main__":
    main()
