"""The benchmark data, vectorised: the formula of tests/bench/blobs.h in
numpy (and the same code in torch, on the GPU), plus the check that the C
generator and numpy agree.

    python3 blobs.py check ROWS D C_OUTPUT     compares with `bench_kernel print`

Arithmetic modulo 2^64 is done in int64 (two's complement wraps like
uint64), with logical right shifts masked by hand, so numpy and torch run
the same lines.
"""
import math
import sys

SEED = 20261123
CLUSTERS = 16
SPACING = 3.0


def _s64(u):
    """an unsigned 64-bit constant as the int64 with the same bits"""
    return u - (1 << 64) if u >= 1 << 63 else u


GOLDEN = _s64(0x9E3779B97F4A7C15)
M1 = _s64(0xBF58476D1CE4E5B9)
M2 = _s64(0x94D049BB133111EB)


def _shr(x, s):
    """logical right shift of int64 bits"""
    return (x >> s) & ((1 << (64 - s)) - 1)


def _mix(z):
    z = (z ^ _shr(z, 30)) * M1
    z = (z ^ _shr(z, 27)) * M2
    return z ^ _shr(z, 31)


def _uniform(base, counter, lib):
    bits = _shr(_mix(base + _s64(counter * GOLDEN % (1 << 64))), 11)
    return (lib.float64(bits) + 0.5) * 2.0 ** -53


class _Numpy:
    def __init__(self):
        import numpy
        self.np = numpy

    def arange(self, a, b):
        return self.np.arange(a, b, dtype=self.np.int64)

    def float64(self, x):
        return x.astype(self.np.float64)

    def __getattr__(self, name):       # sqrt, log, cos, stack
        return getattr(self.np, name)


class _Torch:
    def __init__(self, device):
        import torch
        self.torch, self.device = torch, device

    def arange(self, a, b):
        return self.torch.arange(a, b, dtype=self.torch.int64, device=self.device)

    def float64(self, x):
        return x.to(self.torch.float64)

    def __getattr__(self, name):
        return getattr(self.torch, name)


def _columns(lib, row0, row1, d, seed):
    base = _mix(lib.arange(row0, row1) * GOLDEN + seed)
    cluster = _mix(base) & (CLUSTERS - 1)
    for j in range(d):
        digit = (cluster >> (2 * (j % 2))) & 3
        u1 = _uniform(base, 2 * j + 1, lib)
        u2 = _uniform(base, 2 * j + 2, lib)
        yield SPACING * lib.float64(digit) + lib.sqrt(-2.0 * lib.log(u1)) * lib.cos(2.0 * math.pi * u2)


def numpy_rows(row0, row1, d, seed=SEED):
    """rows row0..row1-1 as a (rows, d) float64 array"""
    lib = _Numpy()
    return lib.stack(list(_columns(lib, row0, row1, d, seed)), axis=1)


def torch_rows(n, d, device, seed=SEED, chunk=1 << 24):
    """rows 0..n-1 as an (n, d) float64 tensor on device, made there"""
    import torch
    lib = _Torch(device)
    out = torch.empty((n, d), dtype=torch.float64, device=device)
    for r in range(0, n, chunk):
        for j, col in enumerate(_columns(lib, r, min(n, r + chunk), d, seed)):
            out[r:r + chunk, j] = col
    return out


def compare(a, b):
    """(bit-identical?, largest |a - b| / max(1, |a|))"""
    import numpy as np
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False, math.inf
    same = bool(np.array_equal(a.view(np.int64), b.view(np.int64)))
    return same, float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(a)), initial=0.0))


def check(rows, d, c_output):
    """C generator's rows (one a line, %a hex floats) against numpy"""
    c = [[float.fromhex(v) for v in line.split()] for line in open(c_output)]
    same, diff = compare(c, numpy_rows(0, rows, d))
    ok = same or diff <= 1e-15
    print("check\tblobs_c_numpy\t%d\t%d\t\t\t%s" % (
        rows, d, "bit-identical" if same else
        "agree within 1e-15 (largest relative difference %.3g)" % diff if ok else
        "FAILED: C and numpy differ by %.3g" % diff))
    return ok


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[1] != "check":
        sys.exit(__doc__)
    sys.exit(0 if check(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]) else 1)
