"""The suite's report: tables from one run's measurements, printed and
written to BENCHMARKS.md, with a plot (time against N, log-log).

    report.py --tsv results/bench.tsv --meta results/machine.tsv --out DIR --results DIR/results
    report.py --embeddings results/embeddings-MACHINE-DATE.tsv
    report.py --embeddings results/postgis-MACHINE-DATE.tsv

The Embeddings section comes from the newest results/embeddings-*.tsv
(tests/bench/embeddings.sh makes one on a GPU machine); --embeddings prints
that section alone.

Every number comes from a row of the TSV (or is a ratio of two rows of the
same run); a missing measurement shows its row's note (skipped, failed,
n/a) instead.
"""
import argparse
import re
import csv
import os
import sys


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    for r in rows:
        r["n"] = int(r["n"]) if r["n"] else 0
        r["d"] = int(r["d"]) if r["d"] else 0
        r["k"] = int(r["k"]) if r["k"] else 0
        r["sec"] = float(r["seconds"]) if r["seconds"] else None
    return rows


class Data:
    def __init__(self, rows):
        self.rows = rows
        self.index = {(r["section"], r["method"], r["n"], r["d"], r["k"]): r for r in rows}

    def get(self, section, method, n=0, d=0, k=0):
        return self.index.get((section, method, n, d, k))

    def sec(self, *key):
        r = self.get(*key)
        return r["sec"] if r else None

    def shapes(self, section, method=None):
        """(n, d, k) of the rows of a section, in order, once each"""
        seen = []
        for r in self.rows:
            s = (r["n"], r["d"], r["k"])
            if r["section"] == section and (method is None or r["method"] == method) and s not in seen:
                seen.append(s)
        return seen


def fmt_time(sec):
    if sec is None:
        return "—"
    if sec < 1e-3:
        return "%.3g ms" % (sec * 1e3)
    if sec < 1:
        return "%.3g ms" % (sec * 1e3) if sec < 0.1 else "%.0f ms" % (sec * 1e3)
    return "%.3g s" % sec


def cell(row):
    """a measurement, or the short form of why there is none"""
    if row is None:
        return "—"
    if row["sec"] is not None:
        return fmt_time(row["sec"])
    note = row["note"]
    if note.startswith("skipped:"):
        return note.split(" (")[0]
    if note.startswith("failed"):
        return "failed"
    return note


def ratio(a, b):
    if a is None or not b:
        return "—"
    r = a / b
    return "%.2gx" % r if r < 10 else "%.0fx" % r


def fmt_n(n):
    """10^k for powers of ten from 1000 on, else the number"""
    return "10^%d" % (len(str(n)) - 1) if n >= 1000 and str(n).rstrip("0") == "1" else str(n)


def table(head, rows):
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    # a | in a cell (k-means||) would end it
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(lines)


def machine_section(meta):
    gpu = meta.get("gpu", "none")
    if gpu != "none":
        gpu += " (%s)" % meta.get("gpu_memory", "?")
    return table(["", ""], [
        ["GPU", gpu],
        ["CPU", "%s, %s cores, %s" % (meta.get("cpu"), meta.get("cores"), meta.get("memory"))],
        ["PostgreSQL", "%s; shared_buffers %s, work_mem %s, max_parallel_workers_per_gather %s"
         % (meta.get("server_version"), meta.get("shared_buffers"), meta.get("work_mem"),
            meta.get("max_parallel_workers_per_gather"))],
        ["pg_gpu", "%s, pg_gpu.device = %s, commit %s"
         % (meta.get("pg_gpu_version"), meta.get("device"), meta.get("commit"))],
        ["Python", "%s: numpy %s, scikit-learn %s, torch %s"
         % (meta.get("python"), meta.get("numpy"), meta.get("sklearn"), meta.get("torch"))],
    ])


def kernel_section(data, meta):
    bw = data.get("bandwidth", "cudaMemcpy_d2d", 1 << 30)
    shapes = data.shapes("kernel", "pg_gpu")
    if not shapes:
        torch = [r["note"] for r in data.rows if r["section"] == "kernel" and r["method"] == "torch"]
        return ("No GPU on this machine (nvidia-smi finds none): this section is measured by "
                "`--full` on a GPU host. PyTorch: %s." % (torch[0] if torch else "not run"))
    gbps = 2 * bw["n"] / bw["sec"] if bw and bw["sec"] else None
    out = ["GPU memory bandwidth, measured in this run: %s (%s)." % (
        "%.0f GB/s" % (gbps / 1e9) if gbps else cell(bw), bw["note"] if bw else "not measured"),
        "The floor of an iteration is reading the data and the labels once: "
        "(N·d·8 + N·4) bytes / that bandwidth. pg_gpu: the compute layer's time per Lloyd "
        "iteration (no database), after a warm-up fit on the first 65536 rows (CUDA loads a kernel "
        "on its first launch); PyTorch: `torch.cdist` + `argmin` + `index_add_` in float64 "
        "from the same initial centroids (the first k rows), after a warm-up.", ""]
    rows = []
    for n, d, k in shapes:
        ours = data.sec("kernel", "pg_gpu", n, d, k)
        floor = (n * d * 8 + n * 4) / gbps if gbps else None
        torch = data.get("kernel", "torch", n, d, k)
        rows.append([fmt_n(n), d, k, cell(data.get("kernel", "pg_gpu", n, d, k)), fmt_time(floor),
                     ratio(ours, floor), cell(torch), ratio(torch and torch["sec"], ours),
                     cell(data.get("seed", "pg_gpu", n, d, k))])
    out.append(table(["N", "d", "k", "pg_gpu / iteration", "HBM floor", "pg_gpu / floor",
                      "PyTorch / iteration", "PyTorch / pg_gpu", "k-means++ seeding"], rows))
    return "\n".join(out)


def cpu_section(data, meta):
    shapes = data.shapes("cpu", "pg_gpu")
    if not shapes:
        return "Not measured."
    cores = int(meta.get("cores", "1"))
    many, ours_many = "sklearn_%dt" % cores, "pg_gpu_%dt" % cores
    rows = []
    for n, d, k in shapes:
        ours = data.sec("cpu", "pg_gpu", n, d, k)
        one, all_ = data.get("cpu", "sklearn_1t", n, d, k), data.get("cpu", many, n, d, k)
        row = [fmt_n(n), d, k, cell(data.get("cpu", "pg_gpu", n, d, k)), cell(one),
               ratio(one and one["sec"], ours)]
        if cores > 1:
            mine = data.get("cpu", ours_many, n, d, k)
            row += [cell(mine), cell(all_), ratio(all_ and all_["sec"], mine and mine["sec"])]
        rows.append(row + [cell(data.get("cpu_seed", "pg_gpu", n, d, k))])
    head = ["N", "d", "k", "pg_gpu CPU, 1 thread", "scikit-learn, 1 thread", "sklearn / pg_gpu"]
    if cores > 1:
        head += ["pg_gpu CPU, %d threads" % cores, "scikit-learn, %d threads" % cores,
                 "sklearn / pg_gpu"]
    return ("Per Lloyd iteration, the compute layer's CPU backend beside scikit-learn's "
            "`KMeans(algorithm='lloyd', n_init=1, init=<the first k rows>, tol=0)` on the same data, "
            "timed by the difference of two `max_iter` values (the fastest of 3 fits each), with one "
            "thread and with all %d cores (ours: `pg_gpu.cpu_threads`, the same result to the last bit "
            "on any number of threads; our distances are exact sums of squared differences, "
            "scikit-learn's come from a matrix product).\n\n" % cores
            + table(head + ["pg_gpu k-means++, 1 thread"], rows))


def made_cell(row):
    if row and row["sec"] is not None:
        return ("made in " if row["method"] == "create" else "reused, checked in ") + fmt_time(row["sec"])
    return cell(row)


def note_int(row, key):
    """the number after `key` in a row's note ("...; key 12"), or None"""
    vals = [p.split()[-1] for p in (row["note"] if row else "").split("; ") if p.startswith(key)]
    return int(vals[0]) if vals else None


def iterations(row):
    """the iterations a k-means row's note reports, or None"""
    return note_int(row, "iterations")


EXPORT = ["export_load", "export_fit", "export_save", "export_copy_in"]


def export_total(data, n, d, k):
    parts = [data.sec("e2e", "export_copy_out", n, d)] + [data.sec("e2e", m, n, d, k) for m in EXPORT]
    return sum(parts) if None not in parts else None


def e2e_section(data, meta):
    tables = sorted({(n, d) for n, d, k in data.shapes("e2e")} - {(n, 0) for n, d, k in data.shapes("e2e")})
    if not tables:
        return "Not measured."
    # the blob table's row (made or reused), not the row-array table's (create_rows)
    made = {(r["n"], r["d"]): r for r in data.rows
            if r["section"] == "table" and r["method"] in ("create", "reuse")}
    out = ["Tables of N rows (`id bigint` primary key, `x1..x8 float8`), made by COPY from the "
           "generator; pg_gpu.device = %s, pg_gpu.max_memory = -1. Statements: median of 3 after a "
           "warm-up unless the cell says otherwise; the plain-SQL Lloyd step and the export route "
           "run once (they take seconds to minutes)." % meta.get("device"), "",
           "**Floors**: reading (`SELECT count(*), avg(x1), ..., avg(x8) FROM t`, with "
           "max_parallel_workers_per_gather = %s and with 0) and returning N rows "
           "(`SELECT count(*) FROM generate_series(1, N)`):" % meta.get("max_parallel_workers_per_gather"), ""]
    out.append(table(["N", "table", "read", "read, no parallel workers", "N rows returned"], [
        [fmt_n(n), made_cell(made.get((n, d))), cell(data.get("e2e", "scan_avg", n, d)),
         cell(data.get("e2e", "scan_avg_serial", n, d)), cell(data.get("e2e", "generate_series", n))]
        for n, d in tables]))
    rows, stages, export, par = [], [], [], []
    for n, d in tables:
        read = data.sec("e2e", "scan_avg", n, d)
        series = data.sec("e2e", "generate_series", n)
        for k in sorted({k for m, dd, k in data.shapes("e2e") if m == n and k}):
            fit = data.get("e2e", "gpu_kmeans_fit", n, d, k)
            km = data.get("e2e", "gpu_kmeans", n, d, k)
            total = export_total(data, n, d, k)
            step = data.get("e2e", "sql_lloyd_step", n, d, k)
            iterate = data.sec("stage", "gpu_kmeans_fit:iterate", n, d, k)
            per_iter = iterate / iterations(fit) if iterate and iterations(fit) else None
            rows.append([fmt_n(n), k, cell(fit), ratio(fit and fit["sec"], read), cell(km),
                         ratio(km and km["sec"], read + series if read and series else None),
                         fmt_time(per_iter), cell(step), ratio(step and step["sec"], per_iter),
                         fmt_time(total) if total else cell(data.get("e2e", "export_fit", n, d, k)),
                         ratio(total, km and km["sec"])])
            spi_fit = data.get("e2e", "gpu_kmeans_fit_spi", n, d, k)
            spi_km = data.get("e2e", "gpu_kmeans_spi", n, d, k)
            if spi_fit or spi_km:
                floor2 = read + series if read and series else None
                workers = note_int(fit, "parallel workers")
                par.append([fmt_n(n), k, "—" if workers is None else workers, cell(spi_fit),
                            ratio(spi_fit and spi_fit["sec"], read), cell(fit),
                            ratio(fit and fit["sec"], read), cell(spi_km),
                            ratio(spi_km and spi_km["sec"], floor2), cell(km),
                            ratio(km and km["sec"], floor2)])
            for f in ("gpu_kmeans_fit", "gpu_kmeans"):
                r = data.get("e2e", f, n, d, k)
                stages.append([f, fmt_n(n), k] + [
                    cell(data.get("stage", "%s:%s" % (f, s), n, d, k) or data.get("stage", f, n, d, k))
                    for s in ("read", "transfer", "seed", "iterate")] +
                    [iterations(r) or "—", cell(data.get("stage", f + ":return", n, d, k)
                                                or data.get("stage", f, n, d, k)), cell(r)])
            export.append([fmt_n(n), k, cell(data.get("e2e", "export_copy_out", n, d))]
                          + [cell(data.get("e2e", m, n, d, k)) for m in EXPORT]
                          + [fmt_time(total) if total else "—"])
    out += ["", "**k-means**: `SELECT * FROM gpu_kmeans_fit('t', k)`, `SELECT count(*) FROM "
            "gpu_kmeans('t', k)` (defaults: k-means++, max_iter 300, tol 1e-4), beside one Lloyd "
            "step in plain SQL (nearest of the first k rows by `CROSS JOIN LATERAL (... ORDER BY "
            "distance LIMIT 1)`, then `GROUP BY` with `avg`), set against one iteration of "
            "`gpu_kmeans_fit` (its iterate stage ÷ its iterations), and the export route (below):", ""]
    out.append(table(["N", "k", "gpu_kmeans_fit", "÷ read", "gpu_kmeans", "÷ (read + N rows)",
                      "one of its iterations", "one Lloyd step in SQL", "÷ one of ours",
                      "export route", "export ÷ gpu_kmeans"], rows))
    if par:
        out += ["", "**Reading in parallel**: the same calls on the table (read by parallel workers, "
                "in block order; the workers are those of the DEBUG1 message) and on a view of it "
                "(`CREATE VIEW t_v AS SELECT * FROM t`: read through SPI, as every table was before "
                "parallel reading), set against the floors above (read; read + N rows returned):", ""]
        out.append(table(["N", "k", "our workers", "fit, SPI read", "÷ read", "fit, parallel read",
                          "÷ read", "gpu_kmeans, SPI read", "÷ (read + N rows)",
                          "gpu_kmeans, parallel read", "÷ (read + N rows)"], par))
    mm = []
    for n, d in tables:
        rscan = data.get("e2e", "rows_scan", n, d)
        if rscan is None:
            continue
        rs = data.sec("e2e", "rows_scan", n, d)
        series = data.sec("e2e", "generate_series", n)
        floor2 = rs + series if rs and series else None
        par_mm = data.get("e2e", "gpu_matmul_rows", n, d)
        spi_mm = data.get("e2e", "gpu_matmul_rows_spi", n, d)
        workers = note_int(par_mm, "parallel workers")
        mm.append([fmt_n(n), d, cell(rscan), cell(data.get("e2e", "generate_series", n)),
                   "—" if workers is None else workers, cell(spi_mm),
                   ratio(spi_mm and spi_mm["sec"], floor2), cell(par_mm),
                   ratio(par_mm and par_mm["sec"], floor2)])
    if mm:
        out += ["", "**gpu_matmul on a dense table**: the same rows as `(row_id, row_vec float8[])` "
                "(`SELECT count(*) FROM gpu_matmul('t_rows', 'eye')`, times a d x d matrix: N result "
                "rows), read in parallel and through a view (SPI), beside reading the table "
                "(`SELECT count(*), sum(row_vec[1]), sum(array_length(row_vec, 1))`, parallel) and "
                "returning N rows:", ""]
        out.append(table(["N", "d", "read", "N rows returned", "our workers", "gpu_matmul, SPI read",
                          "÷ (read + N rows)", "gpu_matmul, parallel read", "÷ (read + N rows)"], mm))
    out += ["", "**Stages** of our calls (the DEBUG2 message `pg_gpu: ... stages (ms)`; read "
            "includes transfer, the wait for host-to-device copies):", ""]
    out.append(table(["call", "N", "k", "read", "transfer", "seed", "iterate", "iterations",
                      "return rows", "whole call"], stages))
    out += ["", "**Export route**, each stage timed: COPY (binary) out through libpq into a file; "
            "numpy loads it; scikit-learn `KMeans(k, init='k-means++', n_init=1, "
            "algorithm='lloyd')` on all %s cores; the labels written as a COPY file and "
            "COPY'd into a new table:" % meta.get("cores"), ""]
    out.append(table(["N", "k", "COPY out", "numpy load", "scikit-learn fit", "write labels",
                      "COPY in", "total"], export))
    return "\n".join(out)


def matmul_section(data, meta):
    out = []
    sizes = [n for n, d, k in data.shapes("matmul", "pg_gpu")]
    if sizes:
        rows = []
        for n in sizes:
            ours = data.sec("matmul", "pg_gpu", n)
            cells = [fmt_n(n)]
            for m in ("pg_gpu", "cublas", "cublas+copy"):
                s = data.sec("matmul", m, n)
                cells.append("%s, %.3g TFLOP/s" % (fmt_time(s), 2.0 * n ** 3 / s / 1e12) if s else
                             "n/a (no GPU)" if meta.get("gpu") == "none" else "—")
            rows.append(cells + [ratio(ours, data.sec("matmul", "cublas", n))])
        out += ["N x N float64 products through the compute layer (`tests/bench/bench_matmul %s`): pg_gpu "
                "host to host (operands in host memory, result back) beside cuBLAS DGEMM on operands "
                "already on the GPU and cuBLAS with the copies in turn (on the CPU: OpenBLAS only):"
                % meta.get("device"), "",
                table(["N", "pg_gpu", "cuBLAS DGEMM", "cuBLAS + copies", "pg_gpu ÷ cuBLAS"], rows), ""]
    sql = [n for n, d, k in data.shapes("matmul_sql")]
    for n in sql:
        dense = data.get("matmul_sql", "gpu_matmul_dense", n)
        entries = data.get("matmul_sql", "gpu_matmul_entries", n)
        join = data.get("matmul_sql", "sql_join_sum", n)
        agree = data.get("check", "matmul_agree", n)
        out += ["In SQL, %d x %d: `gpu_matmul` on dense-row tables `(row_id, row_vec)` and on entry "
                "tables `(row_id, col_id, value)`, beside `SELECT a.row_id, b.col_id, "
                "sum(a.value * b.value) FROM a JOIN b ON a.col_id = b.row_id GROUP BY 1, 2` on "
                "the same entry tables (`count(*)` of each; pg_gpu.device = %s). %s" % (
                    n, n, meta.get("device"), agree["note"] if agree else ""), "",
                table(["N", "gpu_matmul, dense rows", "gpu_matmul, entries", "SQL join-and-sum",
                       "SQL ÷ gpu_matmul (entries)"],
                      [[n, cell(dense), cell(entries), cell(join),
                        ratio(join and join["sec"], entries and entries["sec"])]])]
    return "\n".join(out) if out else "Not measured."


def plot(data, path):
    """time against N, log-log: end to end (k = 8) and one iteration"""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "n/a (no matplotlib)"
    e2e = {"gpu_kmeans_fit": "gpu_kmeans_fit", "gpu_kmeans": "gpu_kmeans",
           "scan_avg": "read floor (SELECT avg)", "scan_avg_serial": "read floor, no workers",
           "generate_series": "return floor (generate_series)", "sql_lloyd_step": "one Lloyd step in SQL"}
    iteration = [("kernel", "pg_gpu", "pg_gpu, GPU"), ("kernel", "torch", "PyTorch, GPU"),
                 ("cpu", "pg_gpu", "pg_gpu, CPU 1 thread"), ("cpu", "sklearn_1t", "scikit-learn, 1 thread")]
    cores = max([int(m[len("sklearn_"):-1]) for (s, m, n, d, k) in data.index
                 if s == "cpu" and m.startswith("sklearn_")] or [1])
    if cores > 1:
        iteration.append(("cpu", "pg_gpu_%dt" % cores, "pg_gpu, CPU %d threads" % cores))
        iteration.append(("cpu", "sklearn_%dt" % cores, "scikit-learn, %d threads" % cores))
    bw = data.get("bandwidth", "cudaMemcpy_d2d", 1 << 30)
    ks = sorted({k for s, m, n, d, k in data.index if s in ("kernel", "cpu") and d == 8})
    panels = [("k-means end to end (d = 8, k = 8)", "e2e")] + \
        [("one Lloyd iteration (d = 8, k = %d)" % k, k) for k in (ks[:1] + ks[-1:] if len(ks) > 1 else ks)]
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.8))
    for ax, (title, what) in zip(axes if len(panels) > 1 else [axes], panels):
        lines = []
        if what == "e2e":
            for m, label in e2e.items():
                k = 8 if m.startswith("gpu_kmeans") or m == "sql_lloyd_step" else 0
                d = 0 if m == "generate_series" else 8
                lines.append((label, [(n, data.sec("e2e", m, n, d, k)) for n in
                                      sorted({n for n, dd, kk in data.shapes("e2e")})]))
            ns = sorted({n for n, dd, kk in data.shapes("e2e")})
            lines.append(("export route", [(n, export_total(data, n, 8, 8)) for n in ns]))
        else:
            for s, m, label in iteration:
                lines.append((label, [(n, data.sec(s, m, n, 8, what)) for n, d, k in data.shapes(s, m)
                                      if d == 8 and k == what]))
            if bw and bw["sec"]:
                gbps = 2 * bw["n"] / bw["sec"]
                ns = [n for n, d, k in data.shapes("kernel", "pg_gpu") if d == 8 and k == what]
                lines.append(("HBM floor", [(n, (n * 8 * 8 + n * 4) / gbps) for n in ns]))
        for label, pts in lines:
            pts = [(n, s) for n, s in pts if s]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                        linestyle="--" if "floor" in label else "-", label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("N (rows)")
        ax.set_ylabel("seconds")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return None


def notes_section(data):
    rows = [r for r in data.rows if r["sec"] is None and r["section"] != "check"]
    if not rows:
        return "Nothing was skipped or failed."
    return table(["section", "method", "N", "d", "k", "why"],
                 [[r["section"], r["method"], fmt_n(r["n"]), r["d"] or "", r["k"] or "", r["note"]]
                  for r in rows])


def embeddings_section(path, base="."):
    """ms per Lloyd iteration at embedding shapes (tests/bench/embeddings.sh's TSV)"""
    import re
    if path is None:
        return "Not measured: no `results/embeddings-*.tsv` (`tests/bench/embeddings.sh` on a GPU machine)."
    sec, unc, notes = {}, {}, {}
    # the product the route proposes with: FP16 (route gemm_f16, from 2026-11-27), else TF32
    P = "FP16" if any("gemm_f16" in r["note"] for r in load(path)) else "TF32"
    for r in load(path):
        if r["section"] in ("kernel", "embed") and r["sec"] is not None:
            sec[(r["method"], r["d"], r["k"])] = r["sec"] * 1e3
            m = re.search(r"([\d.]+)% of rows uncertain", r["note"])
            if m:
                unc[(r["method"], r["d"], r["k"])] = m.group(1) + " %"
            if "float64 alone" in r["note"]:
                notes[(r["method"], r["d"], r["k"])] = "float64 after the first pass"
    # rows held as float32 (-F, since the run of 2026-11-27), else as float64 (earlier runs)
    f32 = any(m == "pg_gpu_emb_f32" for (m, d, k) in sec)
    EMB, F64, BLOBS = (("pg_gpu_emb_f32", "pg_gpu_f64_emb_f32", "pg_gpu_f32") if f32 else
                       ("pg_gpu_emb", "pg_gpu_f64_emb", "pg_gpu"))
    keys = sorted({(d, k) for (m, d, k) in sec if m == EMB}, key=lambda x: (x[1] > 4096, x[0], x[1]))

    def f(m, d, k):
        v = sec.get((m, d, k))
        return "—" if v is None else "%.2f" % v

    flash = any(m.startswith("flash_") for (m, d, k) in sec)
    rows = []
    for d, k in keys:
        ours, floor, torch = (sec.get((m, d, k)) for m in (EMB, "cublas_tf32", "torch32"))
        rows.append([d, k, f("cublas_tf32", d, k), f("cublas_fp32", d, k), "**%s**" % f(EMB, d, k),
                     unc.get((EMB, d, k), "—"), f(F64, d, k), f("torch32", d, k),
                     f("torch32_tf32", d, k)] + ([f("flash_fp32", d, k), f("flash_fp16", d, k)] if flash else []) + [
                     "%.1fx" % (ours / floor) if ours and floor else "—",
                     "%.2fx" % (torch / ours) if ours and torch else "—"])
    r_floor = [sec[(EMB, d, k)] / sec[("cublas_tf32", d, k)] for d, k in keys if ("cublas_tf32", d, k) in sec]
    r_torch = [sec[("torch32", d, k)] / sec[(EMB, d, k)] for d, k in keys if ("torch32", d, k) in sec]
    faiss = sec.get((EMB, 256, 20000))
    r_tf32 = [sec[("torch32_tf32", d, k)] / sec[(EMB, d, k)] for d, k in keys if ("torch32_tf32", d, k) in sec]
    r_flash = [sec[("flash_fp32", d, k)] / sec[(EMB, d, k)] for d, k in keys if ("flash_fp32", d, k) in sec]
    r_flash16 = [sec[("flash_fp16", d, k)] / sec[(EMB, d, k)] for d, k in keys if ("flash_fp16", d, k) in sec]
    bound = ("What bounds them: an iteration writes and reads the N x k products (the product's top-2 of "
             "each row), reads every row and its proposed centroid once more to certify it (the centroids' "
             "rows, float64, read by every row, are most of that pass's traffic), and once more for the "
             "update (chunks sorted by label, an atomic a run of a label and column); where many rows are "
             "uncertain (k = 4096 at d >= 768) their float64 product is the rest" if f32 else
             "What bounds them: pg_gpu keeps the rows in float64 (twice PyTorch's bytes), and an iteration "
             "reads them twice more than the product does (the certifying pass measures each row against "
             "its centroid exactly; the update adds every value to the sums with global atomics), and writes "
             "and reads the N x k products; where many rows are uncertain (k = 4096 at d >= 768) their "
             "float64 product is the rest")
    targets = [
        "Targets (issue 41, item 3): an iteration within 1.5x the TF32 product: met at %d of %d shapes (%.1fx "
        "to %.1fx); faster than PyTorch's float32 Lloyd with TF32: met at %d of %d (%.2fx to %.2fx as fast)%s%s. "
        "%s." % (
            sum(r <= 1.5 for r in r_floor), len(r_floor), min(r_floor or [0]), max(r_floor or [0]),
            sum(r >= 1 for r in r_tf32), len(r_tf32), min(r_tf32 or [0]), max(r_tf32 or [0]),
            "; faster than flash-kmeans FP32: met at %d of %d (%.2fx to %.2fx as fast); flash-kmeans FP16 "
            "(float32 rows here, not `halfvec`) %.2fx to %.2fx as fast as pg_gpu" % (
                sum(r >= 1 for r in r_flash), len(r_flash), min(r_flash), max(r_flash),
                1 / max(r_flash16 or [1]), 1 / min(r_flash16 or [1])) if r_flash else
            "; flash-kmeans not measured in this run",
            "; the FAISS workload's 25 iterations at this rate take %.1f s, k-means++ seeding apart (target: "
            "2 s with seeding)" % (25 * faiss / 1e3) if faiss else "", bound)]
    blobs = [[d, k, f(BLOBS, d, k), unc.get((BLOBS, d, k), "—"), notes.get((BLOBS, d, k), P + " throughout"),
              f(F64, d, k)] for (m, d, k) in sorted(sec) if m == BLOBS]
    return "\n".join([
        "From [`%s`](%s), N = 10^6 rows, ms per Lloyd iteration (5 iterations from the first k rows, tol 0; "
        "labelling, update and the step's three scalars%s). pg_gpu: `bench_kernel gpu -E%s` (the compute layer; "
        "embedding-like rows: 1000 random topic directions plus as much noise, normalised, metric cosine; "
        "%s in memory), with `pg_gpu.kmeans_precision` auto (the %s product, certified) and `-D` "
        "(double: the float64 product). The floor is cuBLAS alone computing the same N x d x k product in "
        "float32 with TF32 (and without), and PyTorch's float32 Lloyd in matmul form (addmm, argmin, "
        "index_add_) with TF32 off and on, from `compare.py torch32` in the same run." % (
            os.path.basename(path), os.path.relpath(path, base),
            "; timed from the end of the first iteration, the device state's setup left out" if f32 else "",
            " -F" if f32 else "", "float32 (the rows' own precision, as SQL holds `vector` and `real[]`)" if f32
            else "float64", P) + (" flash-kmeans (svg-project/flash-kmeans at 3f1ea6b, not exact: a fused "
                                  "distance-argmin in Triton, its FP32 products in TF32) on the same rows in FP32 "
                                  "and FP16, from `compare.py flash`." if flash else ""),
        "",
        table(["d", "k", "cuBLAS TF32 product", "cuBLAS FP32 product", "pg_gpu, %s route" % P, "rows uncertain",
               "pg_gpu, float64 route", "PyTorch f32", "PyTorch f32 + TF32"] +
              (["flash-kmeans FP32", "flash-kmeans FP16"] if flash else []) +
              ["pg_gpu / TF32 floor", "PyTorch f32 / pg_gpu"], rows),
        "",
        "Every pg_gpu figure has memberships and distances exactly those of the float64 reference (the "
        "%s product only proposes; rows it cannot certify are labelled %s). On the "
        "suite's Gaussian blobs (tight clusters far from the data's mean) its 11 bits cannot separate most "
        "rows' two nearest centroids, and the fit hands itself to the float64 product after one pass:" % (
            P, "by measuring their few candidates exactly" if P == "FP16" else "by the float64 product"),
        "",
        table(["d", "k", "pg_gpu, blobs, auto", "rows uncertain in %s" % P, "then", "embeddings, float64 route"],
              blobs),
        ""] + targets)


def embeddings_sql_section(path, base="."):
    """tests/bench/embeddings_sql.sh's TSV: the read floor, the fits' stages, ivfflat"""
    import re
    if path is None:
        return ""
    recs = [r for r in load(path) if r["section"] == "sql"]
    rows = []
    floors = {}                 # by type: the least of its read_ statements
    for r in recs:
        if r["method"].startswith("read_") and r["sec"] is not None:
            t = r["method"][5:]
            floors[t] = min(floors.get(t, r["sec"]), r["sec"])
    floor = floors.get("vector", min(floors.values()) if floors else None)
    for r in recs:
        st = re.search(r"stages \(ms\): read ([\d.]+), transfer [\d.]+, seed ([\d.]+), iterate ([\d.]+), "
                       r"iterations (\d+)", r["note"])
        own = next((floors[t] for t in ("real", "halfvec") if "_%s" % t in r["method"] and t in floors), floor)
        rows.append([r["method"], "%.2f s" % r["sec"] if r["sec"] is not None else r["note"][:80],
                     "%.2f s" % (float(st.group(1)) / 1e3) if st else "",
                     "%.1fx" % (float(st.group(1)) / 1e3 / own) if st and own else "",
                     "%.2f s" % (float(st.group(2)) / 1e3) if st else "",
                     "%.2f s (%s)" % (float(st.group(3)) / 1e3, st.group(4)) if st else ""])
    return "\n".join([
        "In SQL, from [`%s`](%s) (`tests/bench/embeddings_sql.sh`: N = %d rows of d = %d, k = %d, "
        "1000 topics plus noise, as pgvector `vector` and as `real[]`, %s parallel workers; k-means++ "
        "seeding (k-means|| in the statements named _par), default tol unless 3 iterations; pgvector's "
        "ivfflat build with lists = k and 8 parallel maintenance workers; read / floor: the read against "
        "the scan of its own table (`vector`, `real[]`, `halfvec`)):" % (os.path.basename(path), os.path.relpath(path, base),
                                    recs[0]["n"] if recs else 0, recs[0]["d"] if recs else 0,
                                    recs[0]["k"] if recs else 0, "8"),
        "",
        table(["statement", "whole call", "read", "read / floor", "seed", "iterate (iterations)"], rows),
        "",
        reads_sentence(recs, floor) + bound_sentence(recs)])


def bound_sentence(recs):
    """what bounds the parallel reads: their DEBUG2 lines (pg_gpu: read of ...), where the run kept them"""
    out = []
    for r in recs:
        m = re.search(r'read of "[^"]+" \(ms\): ([\d.]+) in all.*?leader: consuming ([\d.]+), scanning ([\d.]+)'
                      r'(?: \([^)]*\))?, waiting ([\d.]+); (\d+) workers: busy ([\d.]+) on average', r["note"])
        if m and r["method"] in ("fit_gpu_vector", "fit_gpu_halfvec"):
            total, consuming, scanning, waiting, n, busy = (float(m.group(i)) / 1e3 for i in (1, 2, 3, 4, 5, 6))
            # (the leader bounds the read when it is seldom idle; else the workers do)
            out.append("`%s`'s read: %.2f s, its %d workers busy %.2f s each, its leader consuming "
                       "(copying the parts into the staging buffers) %.2f s and waiting %.2f s: bound by %s" % (
                           r["method"], total, int(n * 1e3), busy, consuming, waiting,
                           "the leader" if consuming + scanning > 0.9 * total else "the workers"))
    return (" " + "; ".join(out) + ".") if out else ""


def reads_sentence(recs, floor):
    """what the SQL table says about the read, from its own figures"""
    reads = []
    for r in recs:
        st = re.search(r"stages \(ms\): read ([\d.]+)", r["note"])
        # (halfvec's reads beside their own floor, in the table)
        if st and (r["method"].startswith("fit_gpu") or r["method"].startswith("kmeans_gpu")) \
                and "halfvec" not in r["method"]:
            reads.append(float(st.group(1)) / 1e3)
    if not reads or not floor:
        return ""
    ivf = [r for r in recs if "ivfflat" in r["method"] and r["sec"] is not None]
    ran_ivf = any("ivfflat" in r["method"] for r in recs)
    return ("On the GPU the read is the largest part of the call: %.1f-%.1f s for `vector` and `real[]` rows "
            "whose parallel scan takes %.1f s (%.1f-%.1fx its floor; `halfvec`'s floor reads no value: `vector_dims` takes a value's length "
            "from its header, and 768 halves are stored in line). %s" % (
                min(reads), max(reads), floor, min(reads) / floor, max(reads) / floor,
                "pgvector's ivfflat build took %.1f s." % ivf[0]["sec"] if ivf else
                "pgvector's `CREATE INDEX ... USING ivfflat` was not reached within the run's time limit."
                if ran_ivf else "This run left out the ivfflat build and the CPU fits (`QUICK=1`)."))


def sample_sql_section(path, base="."):
    """tests/bench/sample_sql.sh's TSV: a fit on a sample against the fit on every row"""
    if path is None:
        return ""
    recs = [r for r in load(path) if r["section"] == "sample"]
    rows = []
    for r in recs:
        st = re.search(r"stages \(ms\): read ([\d.]+), transfer [\d.]+, seed ([\d.]+), iterate ([\d.]+), "
                       r"iterations (\d+)", r["note"])
        lab = re.search(r"labelled by the sample's centroids in ([\d.]+) ms \(inertia ([\d.e+]+)\)", r["note"])
        inertia = re.search(r"-+\s+(\d+)\s+\|\s+(?:(\d+)\s+\|\s+)?(\d+)\s+\(1 row\)", r["note"])
        rows.append([r["method"], "%.2f s" % r["sec"] if r["sec"] is not None else r["note"][:80],
                     "%.2f s" % (float(st.group(1)) / 1e3) if st else "",
                     "%.2f s (%s)" % (float(st.group(3)) / 1e3, st.group(4)) if st else "",
                     "%.2f s" % (float(lab.group(1)) / 1e3) if lab else "",
                     "%.0f" % float(lab.group(2)) if lab else
                     (inertia.group(3) + (" (of the sample)" if r["method"] == "fit_sample" else "")
                      if inertia and r["method"].startswith("fit_") and "3it" not in r["method"] else "")])
    return "\n".join([
        "A fit on a sample, from [`%s`](%s) (`tests/bench/sample_sql.sh`: N = %s rows of d = %s `vector`, "
        "k = %s, `sample => 256 k`; `kmeans_sample` is `gpu_kmeans` on the sample, every row then labelled "
        "by its centroids in a second read, the inertia of every row beside the full fit's; the last two "
        "statements with the table's parallel_workers = 8, the floor's too):" % (
            os.path.basename(path), os.path.relpath(path, base), recs[0]["n"] if recs else 0,
            recs[0]["d"] if recs else 0, recs[0]["k"] if recs else 0),
        "",
        table(["statement", "whole call", "read", "iterate (iterations)", "labelling every row", "inertia"], rows),
        "", sample_sentence(recs)])


def sample_sentence(recs):
    """per-row rates of the sample's reads, and its inertia on every row against the full fit's"""
    by = {r["method"]: r for r in recs}
    n = float(recs[0]["n"]) if recs else 0
    fs, ks, ff = by.get("fit_sample"), by.get("kmeans_sample"), by.get("fit_full")
    rd = re.search(r"stages \(ms\): read ([\d.]+)", fs["note"]) if fs else None
    lab = re.search(r"labelled by the sample's centroids in ([\d.]+) ms \(inertia ([\d.e+]+)\)", ks["note"]) if ks else None
    full = re.search(r"-+\s+\d+\s+\|\s+(\d+)\s+\(1 row\)", ff["note"]) if ff else None
    if not (rd and lab and n):
        return ""
    text = ("The sample's read took %.2f µs a row and the labelling of every row %.2f µs a row: a "
            "`gpu_kmeans(..., sample => ...)` of 10^8 such rows would take at most about %.0f s on this host (the "
            "rows that enter the sample and are copied, about m (1 + ln(n / m)), grow with ln n, not n), "
            "holding the sample (8 bytes a value) and a chunk of rows (256 MB) at most." % (
                float(rd.group(1)) * 1e3 / n, float(lab.group(1)) * 1e3 / n,
                (float(rd.group(1)) + float(lab.group(1))) / 1e3 / n * 1e8))
    if full:
        text += (" Its centroids' inertia on every row is %+.3f%% of the fit on every row's." %
                 (100 * (float(lab.group(2)) / float(full.group(1)) - 1)))
    return text


def embeddings_kind(path):
    """which script made an embeddings TSV: gpu, sql, cpu or seed; ab: two builds side by side, by hand"""
    m = re.match(r"embeddings-(sql|cpu|seed|ab)-", os.path.basename(path))
    return m.group(1) if m else "gpu"


def newest_embeddings(results, kind="gpu"):
    import glob
    # by the date in the name (a fresh clone's files all have the same mtime), then mtime
    found = sorted((f for f in glob.glob(os.path.join(results, "embeddings-*.tsv"))
                    if embeddings_kind(f) == kind),
                   key=lambda f: (re.findall(r"\d{4}-\d\d-\d\d", f)[-1:], os.path.getmtime(f), f))
    return found[-1] if found else None


def newest_sample(results):
    import glob
    found = sorted(glob.glob(os.path.join(results, "sample-sql-*.tsv")),
                   key=lambda f: (re.findall(r"\d{4}-\d\d-\d\d", f)[-1:], os.path.getmtime(f), f))
    return found[-1] if found else None


def embeddings_cpu_section(path, base="."):
    """tests/bench/embeddings_cpu.sh's TSV: the CPU path beside scikit-learn, on float64 and float32 rows"""
    if path is None:
        return ""
    sec = {(r["method"], r["d"], r["k"]): r["sec"] for r in load(path) if r["section"] == "cpu"}
    threads = sorted({int(m.split("_")[1][:-1]) for (m, d, k) in sec if m.startswith("sklearn_")})
    fmt = lambda v: "%.3f" % v if v else "—"
    ratio = lambda a, b: "%.2fx" % (a / b) if a and b else "—"
    rows = []
    met = []
    for d, k in sorted({(d, k) for (m, d, k) in sec}):
        for t in threads:
            ours = "pg_gpu" if t == 1 else "pg_gpu_%dt" % t
            o, p, s = sec.get((ours, d, k)), sec.get((ours + "_r1", d, k)), sec.get(("sklearn_%dt" % t, d, k))
            o32, s32 = sec.get((ours + "_f32", d, k)), sec.get(("sklearn_%dt_f32" % t, d, k))
            rows.append([d, k, t, fmt(o), fmt(p), fmt(s), ratio(o, s), fmt(o32), fmt(s32), ratio(o32, s32)])
            if o32 and s32:
                met.append(o32 <= s32)
    verdict = ("met at every shape" if met and all(met) else
               "met at %d of %d shapes" % (sum(met), len(met)) if met else "not measured")
    return "\n".join([
        "The CPU path, from [`%s`](%s) (`tests/bench/embeddings_cpu.sh`: the compute layer's CPU backend, "
        "`bench_kernel cpu`, beside scikit-learn's Lloyd on the same cores, N = 10^5 rows of the suite's blobs, "
        "seconds per iteration from the first k rows). pg_gpu's default route takes OpenBLAS's GEMM from "
        "d = 256 (`cpu/gemm.c`: every label certified or its near ties measured by the plain loop, so the "
        "answers are the plain loop's bit for bit); the plain loop alone beside it. Then the same rows rounded "
        "to float32: pg_gpu holds them as floats (`bench_kernel -F`) and its GEMM route is sgemm, certified "
        "the same way; scikit-learn is given a float32 array (it computes in float32):" % (
            os.path.basename(path), os.path.relpath(path, base)),
        "",
        table(["d", "k", "threads", "pg_gpu", "pg_gpu, plain loop", "scikit-learn", "pg_gpu / scikit-learn",
               "pg_gpu float32", "scikit-learn float32", "float32: pg_gpu / scikit-learn"], rows),
        "",
        "Target (issue 41, item 6): on float32 rows an iteration no slower than scikit-learn's: %s. "
        "What remains beside the product: centring the rows for it, the winners' distances by the plain "
        "loop (which scikit-learn's pass does not do: its distances are the GEMM's), the near-tied rows' "
        "measurements and the update's sums." % verdict,
        ""])


def embeddings_seed_section(path, base="."):
    """tests/bench/embeddings_seed.sh's TSV: k-means++ and k-means|| seeding, whole fits"""
    if path is None:
        return ""
    recs = load(path)
    it = {(r["d"], r["k"]): r["sec"] for r in recs if r["section"] == "kernel" and r["sec"] is not None}
    out = {}
    for r in recs:
        if r["section"] in ("seed", "whole") and r["sec"] is not None:
            init = "k-means||" if "k-means||" in r["note"] else "k-means++"
            m = re.search(r"inertia ([\d.e+]+)", r["note"])
            out.setdefault((r["d"], r["k"], init), {})[r["section"]] = r["sec"]
            if m:
                out[(r["d"], r["k"], init)]["inertia"] = float(m.group(1))
    rows = []
    for (d, k, init), v in sorted(out.items()):
        pp = out.get((d, k, "k-means++"), {}).get("inertia")
        rows.append([d, k, init, "%.2f" % v["seed"] if "seed" in v else "—",
                     "%.2f" % v["whole"] if "whole" in v else "—",
                     "%.1f" % (it[(d, k)] * 1e3) if (d, k) in it else "—",
                     "%.4f" % (v["inertia"] / pp) if "inertia" in v and pp else "—"])
    return "\n".join([
        "Seeding, from [`%s`](%s) (`tests/bench/embeddings_seed.sh`: `bench_kernel gpu -P`, N = 10^6, "
        "embedding-like rows at d = 128 and 768, the FAISS workload's blobs at d = 256; seconds; the whole "
        "fit is seeding, 10 iterations (25 for the FAISS workload) and the final labelling, the load apart; "
        "inertia relative to k-means++'s fit of the same iterations):" % (
            os.path.basename(path), os.path.relpath(path, base)),
        "",
        table(["d", "k", "init", "seeding (s)", "whole fit (s)", "an iteration (ms)", "inertia / k-means++'s"],
              rows),
        "",
        "k-means++ is k passes; k-means|| is 5 passes that each measure every row against about 2k new "
        "candidates (the labelling pass of Lloyd, on its tensor-core route), then k-means++ over the "
        "candidates (about 10k rows) on the GPU. At k = 20,000 (the FAISS workload) most of its time is "
        "the 5 passes against 2k = 40,000 candidates and the 20,000 steps over the candidates; the whole "
        "fit's target of 2 s is not met, the 25 iterations alone taking several times that.",
        ""])


def provenance(*paths):
    """Where results measured apart come from: the machine and date their
    names say, and the commit that last wrote them (git, where the report runs
    in a checkout: the code measured is that commit's parent or earlier)."""
    import subprocess
    said = []
    for path in paths:
        if path is None:
            continue
        name = os.path.basename(path)
        m = re.match(r"^(.*)-([a-z0-9]+)-(\d{4}-\d\d-\d\d)(?:-[a-z0-9]+)?\.tsv$", name)
        machine, date = (m.group(2).upper(), m.group(3)) if m else ("an unnamed machine", "an unnamed date")
        try:
            added = subprocess.run(["git", "log", "--format=%h %ad", "--date=short", "-1",
                                    "--", os.path.abspath(path)], capture_output=True, text=True,
                                   cwd=os.path.dirname(os.path.abspath(path))).stdout.split()
        except OSError:
            added = []
        commit = ("last written in commit %s (%s), so measured on the code of its parent or earlier" % (added[0], added[1])
                  if len(added) == 2 else "not in a git checkout here: its commit is unknown")
        said.append("`%s`: on %s, %s, %s" % (name, machine, date, commit))
    return ("Made apart from the run above: " + "; ".join(said) + ".") if said else ""


def newest_results(results, prefix):
    """the newest results/PREFIX-*.tsv, by the date in its name, then its run of the day (-2, -3 ...), then mtime"""
    import glob

    def when(f):
        run = re.search(r"\d{4}-\d\d-\d\d-(\d+)\.tsv$", f)
        return (re.findall(r"\d{4}-\d\d-\d\d", f)[-1:], int(run.group(1)) if run else 1, os.path.getmtime(f))
    found = sorted(glob.glob(os.path.join(results, prefix + "-*.tsv")), key=when)
    return found[-1] if found else None


def postgis_section(path, base="."):
    """tests/bench/postgis.sh's TSV: pg_gpu on PostGIS points beside ST_ClusterKMeans"""
    if path is None:
        return "Not measured here: `tests/bench/postgis.sh` makes its TSV on a machine with PostGIS."
    recs = [r for r in load(path) if r["section"] == "postgis"]
    by = {(r["method"], r["k"]): r for r in recs}
    methods = [m for m in ["ST_ClusterKMeans", "pg_gpu_cpu", "pg_gpu_cpu_n_init_10", "pg_gpu_gpu",
                           "pg_gpu_gpu_n_init_10"] if any(r["method"] == m for r in recs)]
    rows = []
    for k in sorted({r["k"] for r in recs}):
        st = by.get(("ST_ClusterKMeans", k))
        for m in methods:
            r = by.get((m, k))
            if r is None:
                continue
            rows.append([k, m.replace("pg_gpu_", "pg_gpu ").replace("_n_init_10", ", n_init 10"),
                         "%.3f s" % r["sec"] if r["sec"] is not None else r.get("inertia", ""),
                         ratio(st["sec"], r["sec"]) if st and r is not st else "",
                         "%.4f" % (float(r["inertia"]) / float(st["inertia"]))
                         if st and r["inertia"] and st["inertia"] else ""])
    return "\n".join([
        "From [`%s`](%s) (`tests/bench/postgis.sh`: N = %d points, `geometry(Point)`, 200 city-like "
        "Gaussian clusters on a 100 km square; each statement writes its labels into a table, timed "
        "whole; each labelling's inertia computed alike in SQL, as the sum of squared distances to its "
        "clusters' means; pg_gpu with its defaults, k-means++ and tol 1e-4, 8 parallel workers and "
        "threads on the CPU):" % (os.path.basename(path), os.path.relpath(path, base), recs[0]["n"] if recs else 0),
        "",
        table(["k", "method", "whole statement", "ST_ClusterKMeans / this", "inertia / ST_ClusterKMeans's"], rows)])


def n_init_section(path, base="."):
    """tests/bench/n_init.sh's TSV: what several starts cost"""
    if path is None:
        return ""
    recs = [r for r in load(path) if r["section"] == "n_init"]
    rows = []
    for r in recs:
        st = re.search(r"read ([\d.]+), transfer [\d.]+, seed ([\d.]+), iterate ([\d.]+)", r["note"])
        one = next((o for o in recs if o["method"] == r["method"].rsplit("_", 1)[0] + "_1"), None)
        rows.append([r["method"].split("_")[0], r["method"].rsplit("_", 1)[1],
                     "%.2f s" % r["sec"] if r["sec"] is not None else "failed",
                     "%.2f s" % (float(st.group(1)) / 1e3) if st else "",
                     "%.3f s" % (float(st.group(2)) / 1e3) if st else "",
                     "%.3f s" % (float(st.group(3)) / 1e3) if st else "",
                     ratio(r["sec"], one["sec"]) if one and r["sec"] else ""])
    return "\n".join([
        "Several starts, from [`%s`](%s) (`tests/bench/n_init.sh`: gpu_kmeans_fit on N = %s rows of "
        "d = %d, 16 blobs, k = %d, 50 iterations a start; stages from DEBUG2; the rows are read once):" % (
            os.path.basename(path), os.path.relpath(path, base), fmt_n(recs[0]["n"]) if recs else "",
            recs[0]["d"] if recs else 0, recs[0]["k"] if recs else 0),
        "",
        table(["device", "n_init", "whole call", "read", "seed", "iterate", "whole / n_init 1"], rows)])


def stream_section(path, base="."):
    """bench_kernel -M's TSV (tests/bench/stream.sh): streamed passes beside the PCIe floor"""
    if path is None:
        return "Not measured here: `tests/bench/stream.sh` makes its TSV on a GPU machine."
    recs = load(path)
    h2d = next((r for r in recs if r["method"] == "cudaMemcpy_h2d_pinned" and r["sec"]), None)
    rate = h2d["n"] / h2d["sec"] if h2d else None
    rows = []
    for r in recs:
        if r["section"] != "stream":
            continue
        m = re.search(r"(\d+) parts of (\d+) MB, (\d+) parked; ([\d.e+]+) bytes streamed a pass; resident ([\d.]+) s a pass; "
                      r"centroids within ([\d.e+-]+)", r["note"])
        if not m or r["sec"] is None:
            rows.append([fmt_n(r["n"]), r["d"], r["k"], r["note"][:80], "", "", "", ""])
            continue
        floor = float(m.group(4)) / rate if rate else None
        rows.append([fmt_n(r["n"]), r["d"], r["k"], "%s x %s MB (%s parked)" % (m.group(1), m.group(2), m.group(3)),
                     "%.4f s" % r["sec"], "%.4f s" % floor if floor else "—",
                     "%.2fx" % (r["sec"] / floor) if floor else "—", "%s s" % m.group(5), m.group(6)])
    return "\n".join([
        "Beyond the GPU's memory, from [`%s`](%s) (`tests/bench/stream.sh`: `bench_kernel gpu -M MB`, blobs, "
        "the rows in parts of MB, all but the last parked in pinned host memory and streamed through the GPU "
        "every pass, beside the same fit resident; the PCIe floor is the bytes streamed a pass over the pinned "
        "host-to-device rate measured in the same run%s):" % (
            os.path.basename(path), os.path.relpath(path, base),
            ", %.1f GB/s" % (rate / 1e9) if rate else ""),
        "",
        table(["N", "d", "k", "parts", "a pass, streamed", "PCIe floor", "streamed / floor", "a pass, resident",
               "centroids vs resident"], [[str(c) for c in row] for row in rows])])


def citus_section(path, base="."):
    """tests/bench/citus.sh's TSV: k-means on a Citus table's workers beside the single node"""
    if path is None:
        return "Not measured here: `tests/bench/citus.sh` makes its TSV on a machine with Citus."
    import csv
    with open(path) as f:
        recs = [r for r in csv.DictReader(f, delimiter="\t") if r["section"] == "citus"]
    single = {r["d"]: r for r in recs if r["workers"] == "0"}

    def ms(v):
        try:
            return "%.2f ms" % (float(v) * 1e3)
        except ValueError:
            return v

    rows = []
    for r in recs:
        one = single.get(r["d"])
        rows.append(["%s x %s" % (fmt_n(int(r["n"])), r["d"]), r["workers"] if r["workers"] != "0" else "single node",
                     "%s s" % r["call_s"], "%s s" % r["read_s"], ms(r["iter_s"]),
                     "%.2fx" % (float(r["iter_s"]) / float(one["iter_s"])) if one and r is not one else "",
                     "%s s (%s)" % (r["default_call_s"], r["default_iterations"]),
                     "%.1f KB / %.1f KB" % (int(r["bytes_out_per_node"]) / 1e3, int(r["bytes_back_per_node"]) / 1e3)
                     if r["workers"] != "0" else ""])
    return "\n".join([
        "From [`%s`](%s) (`tests/bench/citus.sh`: a Citus coordinator and 4 workers on this one host, "
        "every node on its one GPU; each table distributed in 8 shards over the first W workers, or a "
        "plain table of the coordinator; k = %s from the same starting centroids, tol 0, at most 20 "
        "iterations; read and iterations from pg_gpu's DEBUG2 stages, an iteration without the first, "
        "which holds each node's setup; the default call seeds by k-means++ and stops at tol 1e-4; "
        "bytes a node sends and receives an iteration computed from the message sizes):" % (
            os.path.basename(path), os.path.relpath(path, base), recs[0]["k"] if recs else ""),
        "",
        table(["rows", "workers", "whole call", "read", "an iteration", "iteration / single node's",
               "default call (iterations)", "bytes out / back a node, an iteration"], rows),
        "",
        "What bounds these figures: the read scales with the workers, each reading its own shards "
        "(10^6 x 768 `real[]`: 15.9 s on the single node, 3.4 s over 4 workers; rows of 3 KB are "
        "TOASTed, so a read is mostly detoasting). An iteration does not: every worker here shares the "
        "one GPU, whose processes take turns on it, so more workers only add round trips and context "
        "switches (10^7 x 8: 0.65 ms single, 1.4 ms on 1 worker, 3.1 ms on 4). The coordination is one "
        "round trip an iteration, all workers at once, of k x d doubles out and k x (d + 1) back: "
        "about 0.7 ms at d = 8 and 5 ms at d = 768, k = 100 (the difference of an iteration on one "
        "worker and on the single node). On a cluster of hosts with a GPU each, the iteration's compute "
        "divides by the workers and this round trip stays."])


def gpus_section(path, base="."):
    """tests/bench/gpus.sh's TSV: k-means and gpu_matmul over shares on the GPUs listed"""
    if path is None:
        return "Not measured here: `tests/bench/gpus.sh` makes its TSV on a GPU machine."
    recs = load(path)
    rows = []
    for r in recs:
        if r["section"] != "gpus":
            continue
        m = re.search(r"(\d+) shares on GPUs ([\d,]+); whole on one GPU ([\d.]+) s a pass; centroids within ([\d.e+-]+)",
                      r["note"])
        if not m or r["sec"] is None:
            rows.append([fmt_n(r["n"]), r["d"], r["k"], r["note"][:80], "", "", "", "", "", ""])
            continue
        # an iteration's own time (fits of ITERS and 3 ITERS apart), where the run measured it
        it = re.search(r"an iteration \(fits of (\d+) and (\d+) iterations apart\) ([\d.]+) s, whole ([\d.]+) s",
                       r["note"])
        rows.append([fmt_n(r["n"]), r["d"], r["k"], m.group(2),
                     "%.2f ms" % (1e3 * float(it.group(3))) if it else "",
                     "%.2f ms" % (1e3 * float(it.group(4))) if it else "",
                     "%.2fx" % (float(it.group(4)) / float(it.group(3))) if it else "",
                     "%.2f ms" % (1e3 * r["sec"]), "%.2fx" % (float(m.group(3)) / r["sec"]), m.group(4)])
    sql = [r for r in recs if r["section"] == "gpus_sql"]
    srows = []
    for r in sql:
        st = re.search(r"read ([\d.]+), transfer [\d.]+, seed ([\d.]+), iterate ([\d.]+), iterations (\d+)", r["note"])
        g = re.search(r"pg_gpu.gpus = (\S+) \((\d+) GPUs", r["note"])
        res = re.search(r"result: *(\d+) \| ([\d.]+) \| (.+?) *$", r["note"])
        srows.append([fmt_n(r["n"]), r["d"], r["k"], ("'%s'" % g.group(1)) if g else "",
                      "second" if "second call of a session" in r["note"] else "first",
                      "%.2f s" % r["sec"] if r["sec"] is not None else r["note"][:60],
                      "%.2f s" % (float(st.group(1)) / 1e3) if st else "",
                      "%.2f s" % (float(st.group(2)) / 1e3) if st else "",
                      "%.2f s (%s)" % (float(st.group(3)) / 1e3, st.group(4)) if st else "",
                      res.group(2) if res else "", res.group(3).strip() if res else ""])
    mm = [r for r in recs if r["section"] == "gpus_matmul"]
    one = next((r for r in mm if r["method"] == "one workspace"), None)
    mrows = [["%s^2" % r["n"], r["method"], "%.3f s" % r["sec"],
              "%.2fx" % (one["sec"] / r["sec"]) if one and r["sec"] else ""] for r in mm]
    return "\n".join([
        "From [`%s`](%s) (`tests/bench/gpus.sh`: `bench_kernel gpu -G LIST`, blobs, the rows in contiguous "
        "shares on the GPUs listed (\"0,0\": two shares on GPU 0), 10 iterations from the first k rows and the "
        "final labelling, the shares' steps at once (a thread a GPU), beside the same fit whole on one GPU; "
        "an iteration: the difference of fits of 10 and 30 iterations over 20, without what a fit costs once; "
        "a pass of the fit: the fit of 10 over its 11 passes; "
        "`bench_matmul gpu -G LIST`: a float64 product host to host, a's rows split over a workspace a GPU "
        "listed):" % (os.path.basename(path), os.path.relpath(path, base)),
        "",
        table(["N", "d", "k", "GPUs", "an iteration", "whole, one GPU", "speedup", "a pass of the fit",
               "speedup", "centroids vs whole"],
              [[str(c) for c in row] for row in rows]),
        "",
        table(["product", "workspaces on GPUs", "time", "one workspace / this"], mrows)] +
        (["", "In SQL (`tests/bench/gpus_sql.sh`: `gpu_kmeans_fit(..., seed => 1)` of `vector` rows, every GPU "
          "beside `pg_gpu.gpus = '0'`, in turn; the stages from pg_gpu's DEBUG2 line):", "",
          table(["N", "d", "k", "pg_gpu.gpus", "call of its session", "whole call", "read", "seed",
                 "iterate (iterations)", "inertia", "device"], srows)] if srows else []))


def citusmm_section(path, base="."):
    """tests/bench/citus.sh's matmul TSV: gpu_matmul of a Citus table on its workers beside the single node"""
    if path is None:
        return "Not measured here: `tests/bench/citus.sh` makes its matmul TSV on a machine with Citus."
    import csv
    with open(path) as f:
        recs = [r for r in csv.DictReader(f, delimiter="\t") if r["section"] == "citus_matmul"]
    single = next((r for r in recs if r["workers"] == "0"), None)
    rows = [["%s x %s by %s x %s" % (fmt_n(int(r["m"])), r["k"], r["k"], r["n"]),
             r["workers"] if r["workers"] != "0" else "single node",
             "%s s" % r["call_s"], "%s s" % r["read_s"], "%s s" % r["product_s"],
             "%.2fx" % (float(single["call_s"]) / float(r["call_s"])) if single and r is not single else ""]
            for r in recs]
    return "\n".join([
        "The table form of `gpu_matmul` with `a` distributed by rows, from [`%s`](%s) (the same cluster; "
        "`a` of float8[] rows in 8 shards over the first W workers, or a plain table; `b` a plain table of "
        "the coordinator; the whole call is `SELECT count(*)` of its rows; read and product from pg_gpu's "
        "DEBUG2 stages: on the workers, read is theirs of `a` beside the coordinator's of `b`, and product "
        "is `b` sent to each, their products and the rows back in order):" % (
            os.path.basename(path), os.path.relpath(path, base)),
        "",
        table(["product", "workers", "whole call", "read", "product", "single node's call / this"], rows),
        "",
        "What bounds these figures: on one host the single node's product stays in its memory, while on the "
        "workers the result (m x n doubles, 614 MB here) crosses libpq to the coordinator, about 0.4-0.5 GB/s "
        "with the coordinator putting the rows in order, and the read of `a` gains little (the single node "
        "reads it with parallel workers too). What the workers save is moving `a`: it never crosses the "
        "network; `b` crosses it once a node, the result once."])


def borrowed_rows(path, recs, want):
    """recs' rows that want picks, from path; where it has none, those of the newest other
    seeding-*.tsv beside it that has some: (rows, the file they are from)"""
    import glob
    got = [r for r in recs if want(r)]
    if got:
        return got, path
    for f in sorted(glob.glob(os.path.join(os.path.dirname(path), "seeding-*.tsv")), reverse=True):
        got = [r for r in load(f) if want(r)] if f != path else []
        if got:
            return got, f
    return [], path


def seeding_section(path, base="."):
    """tests/bench/seeding.sh's TSV: seeding's time and inertia before and after, and its quality"""
    if path is None:
        return "Not measured here: `tests/bench/seeding.sh` makes its TSV on a GPU machine."
    recs = load(path)
    # (a run without BEFORE: 1.7's rows from the newest earlier run that has them, said so)
    before, before_src = borrowed_rows(path, recs, lambda r: r["method"].endswith("_before"))
    recs = recs + ([] if before_src == path else before)
    it = {(r["method"].endswith("_before"), r["d"], r["k"]): r["sec"] for r in recs
          if r["section"] == "kernel" and r["sec"] is not None}
    fits = {}
    for r in recs:
        if r["section"] in ("seed", "whole") and r["sec"] is not None:
            before = r["method"].endswith("_before")
            init = "k-means||" if "k-means||" in r["note"] else "k-means++"
            v = fits.setdefault((r["d"], r["k"], init, before), {})
            v[r["section"]] = r["sec"]
            m = re.search(r"inertia ([\d.e+]+)", r["note"])
            if m:
                v["inertia"] = float(m.group(1))
    rows = []
    for (d, k, init, before), v in sorted(fits.items(), key=lambda x: (x[0][0], x[0][1], x[0][2], not x[0][3])):
        base_inertia = fits.get((d, k, init, True), {}).get("inertia")
        iters = 25 if k >= 20000 else 12
        whole_gpu = (v.get("seed", 0) + iters * it.get((before, d, k), 0)) if (before, d, k) in it else None
        rows.append([d, k, init, "1.7 (before)" if before else "1.8",
                     "%.2f" % v["seed"] if "seed" in v else "—",
                     "%.1f" % (it[(before, d, k)] * 1e3) if (before, d, k) in it else "—",
                     "%.0f %%" % (100 * v["seed"] / whole_gpu) if whole_gpu and "seed" in v else "—",
                     "%.6g" % v["inertia"] if "inertia" in v else "—",
                     "%.4f" % (v["inertia"] / base_inertia) if "inertia" in v and base_inertia else "—"])
    # (a run without a server: the newest earlier run's quality rows, said so)
    q, qsrc = borrowed_rows(path, recs, lambda r: r["section"] == "quality")
    qrows = [[r["note"].split(" (")[0], r["method"], r["n"], "%.4f" % r["sec"]] for r in q]
    return "\n".join([
        "From [`%s`](%s) (`tests/bench/seeding.sh`: `bench_kernel gpu -P` on embedding-like rows (cosine) "
        "and the FAISS workload's blobs, each seeding alone, an iteration, and the inertia of the whole fit "
        "(seeding, the iterations, the final labelling); the rows marked before are pg_gpu 1.7's "
        "`bench_kernel`, %s; the share is the seeding's of seeding plus the iterations):" % (
            os.path.basename(path), os.path.relpath(path, base),
            "run beside" if before_src == path else "from [`%s`](%s), an earlier run on the same kind of GPU" % (
                os.path.basename(before_src), os.path.relpath(before_src, base))),
        "",
        table(["d", "k", "init", "pg_gpu", "seeding (s)", "an iteration (ms)", "seeding's share",
               "inertia", "inertia / before"], [[str(c) for c in row] for row in rows]),
        "",
        "Quality (`tests/bench/seeding_quality.py`: `gpu_kmeans(..., 20, seed => s)` on scikit-learn's "
        "`make_blobs(20000, 384, centers=20, cluster_std=1, center_box=(-10, 10), random_state=5)` as a "
        "`real[]` column, and on 195,000 such rows plus 5,000 uniform noise rows, beside scikit-learn's "
        "`KMeans`; the adjusted Rand index against the blobs, noise rows left out%s):" % (
            "" if qsrc == path else "; from [`%s`](%s), an earlier run: the seeding since is the same bit for bit"
            % (os.path.basename(qsrc), os.path.relpath(qsrc, base))),
        "",
        table(["data", "method", "seed", "ARI"], [[str(c) for c in row] for row in qrows]) if qrows else
        "(no quality rows: the script needs a server)",
        "",
        SEEDING_NOTE])


SEEDING_NOTE = (
    "1.8 seeds every fit on the seeding set: about 32 rows a cluster, at least 65,536, drawn by content "
    "keys, so that every placement seeds alike; k-means++ there is the greedy variant (2 + ln k trials a "
    "step). Its centres are better (the whole fit's inertia 6 % below 1.7's at 10^6 x 768 x 1000; every "
    "blob found where plain k-means++ merged some), and it is now faster than 1.7's plain k-means++ over "
    "every row: 0.25 s against 2.0 s at 10^6 x 768 x 1000 on an H100 (the first 1.8 took 3.3 s: a round "
    "trip to the host a step, and the set gathered through the host). The steps run in batches on the "
    "device (`km_greedy_steps`: draws, trials, choice and update, no host between steps; the trials read "
    "the set once a step at the memory's speed), and where one part holds the rows the set is copied on "
    "the GPU (`copy_rows`; only the keys come up). The targets of issue 40 are not met: seeding is 40 % of "
    "seeding plus the iterations at 10^6 x 768 x 1000 (44 % of the whole fit; target 25 %), and k-means|| at k = 20,000 takes 6.1 s "
    "(target 3 s; 12.7 s before). What bounds them: at k = 1000 the 1000 greedy steps each read the "
    "65,536 x 768 float64 set (0.13 s in all at the memory's speed, about 0.2 s with the draws), more than "
    "a quarter of a 0.57 s fit by themselves: the target needs the set in float32 (issue 41, rows in "
    "their own precision) or fewer trials' reads. At k = 20,000, k-means|| spends about 3.6 s in its 5 "
    "rounds (524,000 rows labelled against about 40,000 new candidates each, most rows uncertain in TF32 "
    "and so measured in float64) and 1.7 s reclustering 200,000 candidates (20,000 steps of plain "
    "k-means++; 2.8 s before its steps loaded 16 columns a round). The whole FAISS-shape fit's inertia "
    "differs from the first 1.8 run's (2.37744e+08 against 2.37601e+08) because the seeding set is now "
    "capped at 1 GB (524,288 rows of 256, not 640,000); the changes since are the same fit bit for bit "
    "(the k = 1000 fits' inertias are unchanged, and k-means|| on the CPU gives the same fits as before "
    "them).")


GPUS_NOTE = (
    "On a host with 4 GPUs (4 H200s linked by NVLink, NV18 each pair; 2026-11-26), against issue 40's "
    "targets: an iteration is 1.91x (10^8 x 8, k = 16) and 1.90x (5 x 10^6 x 768, k = 100) faster on 2 GPUs "
    "than whole on one (target 1.9x: met), 3.48x and 3.45x on 4 (target 3.6x: not met); the 16384^2 "
    "float64 product 1.90x on 2 and 3.26x on 4 (targets 1.8x and 3.2x: met). The same host with the code "
    "before (commit d4f70f1, a pass of a 10-iteration fit): 1.68x and 2.85x at 10^8 x 8; the product 1.69x "
    "and 2.30x. What changed: a share's step takes its sums and counts as its GPU added them (`km_sums`: one "
    "copy, no pass over the labels to count them, no means times counts), into buffers kept from step to "
    "step (a fresh 49 MB a step at k = 1000, d = 768 cost page faults each time); the host adds the shares' "
    "sums a slice a thread; the calling thread is woken as the GPUs finish (it slept 0.2 ms at a time); the "
    "product's b is copied from the host once, a part by each GPU, and the rest between the GPUs over "
    "NVLink (each GPU copied all of b over its own link before its first product could start). What bounds "
    "4 GPUs: each step's fixed cost, a GPU's k x d centroids in and sums out through the host and the "
    "host's adding and update, against a quarter of the rows each: 0.4 ms a step at d = 8 (2.72 ms against "
    "an ideal 2.36), 2.3 ms at d = 768, k = 100, and 6 ms at k = 1000, d = 768 (17.0 ms against 11.1: "
    "2.62x), where those are 6 MB a GPU each way. In SQL a call runs on one GPU when its iteration is "
    "estimated under 60 ms there (fitted to these figures: 1 ms a GB of rows, 2 x 10^10 multiply-adds a "
    "ms): 10^6 x 768 at k = 1000 (44 ms) does, and all GPUs then cost nothing: 12.8, 11.5 and 11.8 s "
    "(pg_gpu.gpus = 'all') against 11.9, 10.9 and 12.8 s ('0'), the read varying by a second from call to "
    "call in both (first calls of their sessions, run in either order; as the second call of a session "
    "11.0 against 11.4 s). "
    "Issue 40 measured 21.0 s against 11.0 s there before (H100s: the seeding through the host and "
    "every iteration split). At k = 4000 (an iteration of 160 ms estimated on one GPU) the rows are dealt to "
    "the 4 GPUs: iterations 0.89 s against 1.45 s, seeding the same (2.57 and 2.53 s: the seeding set is "
    "gathered on each GPU and copied to the first over NVLink), the whole call 16.5 against 15.8 s, of which "
    "the read 11.8 against 10.8 s (the same spread). Making the contexts of 4 H200s costs 0.49 s at once "
    "(0.57 s in turn), which the first call of a session that uses several GPUs pays. (The SQL rows' "
    "whole call is psql's wall clock, the second calls' its \\timing: `gpus_sql.sh` now times every call "
    "so.)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--embeddings")
    p.add_argument("--tsv")
    p.add_argument("--meta")
    p.add_argument("--out")
    p.add_argument("--results")
    args = p.parse_args()
    # a TSV measured apart, rendered alone by its name's prefix
    apart = {"postgis-": postgis_section, "n_init-": n_init_section, "stream-": stream_section,
             "citus-": citus_section, "citusmm-": citusmm_section, "gpus-": gpus_section,
             "seeding-": seeding_section}
    for prefix, section in apart.items():
        if args.embeddings and os.path.basename(args.embeddings).startswith(prefix):
            print(section(args.embeddings))
            return
    if args.embeddings:
        print({"gpu": embeddings_section, "sql": embeddings_sql_section, "cpu": embeddings_cpu_section,
               "seed": embeddings_seed_section}[embeddings_kind(args.embeddings)](args.embeddings))
        return
    if not (args.tsv and args.meta and args.out and args.results):
        p.error("--tsv, --meta, --out and --results are required")
    data = Data(load(args.tsv))
    meta = dict(line.rstrip("\n").split("\t", 1) for line in open(args.meta) if "\t" in line)
    png = os.path.join(args.results, "bench.png")
    plot_error = plot(data, png)
    checks = [r for r in data.rows if r["section"] == "check"]
    failed = [r for r in checks if "FAILED" in r["note"]]
    md = ["# pg_gpu benchmarks", "",
          "Generated by `%s` on %s (%s mode). Every figure below was measured by that command "
          "(where it chains several, a row's figures by the same one), side by side on the same "
          "data; each ratio divides two cells of the same row. The raw "
          "measurements are in [`%s`](%s); how they are made is in `tests/bench/` and the README's "
          "[Benchmarks](README.md#benchmarks) section." % (
              meta.get("command"), meta.get("date"), meta.get("mode"),
              os.path.relpath(args.tsv, args.out), os.path.relpath(args.tsv, args.out)), "",
          "## Machine", "", machine_section(meta), "",
          "## Data", "",
          "Seeded Gaussian blobs: 16 clusters on a grid, 3 standard deviations apart "
          "(`tests/bench/blobs.h`); a row's values are a function of (seed, row, column), made "
          "by the same formula in C (tables, compute-layer runs) and numpy/torch (scikit-learn, "
          "PyTorch). Checks in this run: %s." % "; ".join(
              "%s over %d rows x %d columns: %s" % (r["method"], r["n"], r["d"], r["note"])
              for r in checks if r["method"].startswith("blobs")), "",
          "Sections 1 to 4 were made by that command, at commit %s, on %s, on the machine below; "
          "each later section says which run made it." % (meta.get("commit"), meta.get("date")), "",
          "## 1. One Lloyd iteration on the GPU", "", kernel_section(data, meta), "",
          "## 2. The CPU backend beside scikit-learn", "", cpu_section(data, meta), "",
          "## 3. k-means in SQL, end to end", "", e2e_section(data, meta), "",
          "## 4. Matrix products", "", matmul_section(data, meta), "",
          "## 5. Embeddings", "", embeddings_section(newest_embeddings(args.results), args.out), "",
          embeddings_seed_section(newest_embeddings(args.results, "seed"), args.out), "",
          embeddings_sql_section(newest_embeddings(args.results, "sql"), args.out), "",
          sample_sql_section(newest_sample(args.results), args.out), "",
          embeddings_cpu_section(newest_embeddings(args.results, "cpu"), args.out), "",
          "### Seeding", "", seeding_section(newest_results(args.results, "seeding"), args.out), "",
          provenance(newest_results(args.results, "seeding")), "",
          "This section was measured apart from the rest of this report, on the GPU machine, by the "
          "scripts it names (their TSVs are the newest `results/embeddings-*.tsv`); the run above did not "
          "include it.", "",
          provenance(*([newest_embeddings(args.results, kind) for kind in ("gpu", "seed", "sql", "cpu")] +
                       [newest_sample(args.results)])), "",
          "## 6. PostGIS points, and several starts", "",
          postgis_section(newest_results(args.results, "postgis"), args.out), "",
          n_init_section(newest_results(args.results, "n_init"), args.out), "",
          "Measured apart from the rest of this report, on the GPU machine, by the scripts it names "
          "(their TSVs are the newest `results/postgis-*.tsv` and `results/n_init-*.tsv`).", "",
          provenance(newest_results(args.results, "postgis"), newest_results(args.results, "n_init")), "",
          "## 7. Beyond the GPU's memory", "", stream_section(newest_results(args.results, "stream"), args.out), "",
          "Measured apart from the rest of this report, on the GPU machine (the newest `results/stream-*.tsv`).", "",
          provenance(newest_results(args.results, "stream")), "",
          "## 8. Scaling out", "", citus_section(newest_results(args.results, "citus"), args.out), "",
          citusmm_section(newest_results(args.results, "citusmm"), args.out), "",
          "Measured apart from the rest of this report, on the GPU machine (the newest `results/citus-*.tsv`).", "",
          provenance(newest_results(args.results, "citus"), newest_results(args.results, "citusmm")), "",
          "## 9. Several GPUs", "", gpus_section(newest_results(args.results, "gpus"), args.out), "",
          GPUS_NOTE, "",
          provenance(newest_results(args.results, "gpus")), "",
          "## Plot", "",
          plot_error or "![time against N](%s)" % os.path.relpath(png, args.out), "",
          "## Skipped, failed, not available", "", notes_section(data), "",
          "## Commands", "",
          "```sh", meta.get("command", ""), "```", "",
          "On a GPU host without a package registry, from the bundle of `tests/bundle.sh`: "
          "`/opt/pg_gpu-gpu-suite/bench --full --out DIR`.", ""]
    text = "\n".join(md)
    with open(os.path.join(args.out, "BENCHMARKS.md"), "w") as f:
        f.write(text)
    print(text)
    if failed:
        print("FAILED checks: %s" % "; ".join(r["note"] for r in failed), file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
