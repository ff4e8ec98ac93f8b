/*
 * kernel.c - bench_kernel: k-means through the compute layer, without a
 * database, on the suite's blobs (blobs.h).
 *
 *   bench_kernel gpu|cpu [-t TSV] [-i ITERS] [-b BUDGET_S] [-c CAP_S] [-T THREADS] [-A] [-D] [-E] [-F] [-H] [-N] [-S] [-P] [-R LABEL] N,d,k ...
 *   bench_kernel bandwidth [-t TSV]
 *   bench_kernel print D ROWS          (the generator's first rows, %a)
 *
 * For each case (N rows, d columns, k clusters), in the order given (N
 * ascending):
 *   iteration: one fit from the first k rows as centroids, ITERS + 1
 *              Lloyd iterations with tol 0: the time from the end of the
 *              first to the end of the last (the progress callback) /
 *              ITERS, so that the first step's setup of the device state
 *              is left out (each timed iteration's ms in the note: one
 *              that repairs emptied clusters shows);
 *   seeding:   one k-means++ fit with max_iter 1: its seed_seconds;
 *   load:      pushing the rows through the staging buffers (the first fit).
 * On the GPU a warm-up fit on the first 65536 rows (k-means++, 2 iterations)
 * comes first: the CUDA runtime loads each kernel on its first launch
 * (-N: none, for a profiler: at k = 20,000 its seeding's launches outnumber
 * the timed iterations').
 * -T: the CPU backend's threads (pggpu_data_set_threads; method pg_gpu_<T>t
 * when more than 1).  -D: float64 products only (pggpu_data_set_double_only,
 * method pg_gpu_f64).  -E: embedding-like rows instead of the blobs, with
 * metric cosine (method suffix _emb; see embedding_fill).  -F: the rows
 * rounded to float32 and pushed as such (pggpu_data_set_dtype FLOAT32:
 * method suffix _f32; not with -M or -G); -H: to halves, pushed as such
 * (FLOAT16, halfvec's rows: method suffix _f16; nor with -M or -G).  -S: no seeding
 * fit (k-means++ at large k takes k passes).  -P: also k-means||, its
 * seeding (section seed, note k-means||) and a whole fit with it and ITERS
 * iterations (section whole: pggpu_kmeans's time, the load apart; its
 * inertia in the note), and k-means++'s fit (unless -S) with ITERS too.
 * -A: also a whole fit by algorithm 'hierarchical' (k-means++ seeding, at
 * most ITERS iterations each of its fits, tol 0; section whole, method
 * pg_gpu_hier: its time, the load apart, groups, rows and inertia in the
 * note), beside flat Lloyd's of -P.  -a: that fit alone (no timed
 * iterations of flat Lloyd: at k = 262,144 over 10^7 rows they take
 * minutes).
 * -R: the labelling route forced (pggpu_data_force_route: 1 the plain
 * loop, 4 GEMM on either backend; method suffix _r1, _r4).  The route that
 * ran is in the note.  A case whose time, predicted from the last case of the same d and k at a
 * smaller N (scaled by N), exceeds CAP_S or what is left of BUDGET_S is
 * skipped, and says so.
 *
 * -M MB: streamed (issue 28): the rows in parts of MB each, all but the
 * last parked in pinned host memory (pggpu_data_park), and ITERS Lloyd
 * iterations from the first k rows by pggpu_kmeans_parts beside the same
 * fit resident (section stream: seconds a pass over the rows, ITERS + 1
 * passes with the final labelling; the bytes streamed a pass and the
 * largest centroid difference from the resident fit in the note).
 *
 * -G GPUS: several GPUs (issue 30): the rows in contiguous shares on the
 * GPUs listed ("0,1"; "0,0": two shares on GPU 0), ITERS iterations from
 * the first k rows by pggpu_kmeans_parts (the shares' steps at once, a
 * thread a GPU) beside the same fit whole on the first GPU (section gpus:
 * seconds a pass, as -M; the whole fit's and the centroids' difference in
 * the note).
 *
 * bandwidth: the GPU's memory bandwidth, a device-to-device cudaMemcpy of
 * 1 GiB (it reads and writes every byte: 2 x bytes / time), median of 10;
 * and the PCIe floor of streaming, a 1 GiB copy from pinned host memory to
 * the device (h2d), median of 10.
 *
 * One TSV row a measurement: section, method, N, d, k, seconds, note.
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "blobs.h"
#include "pg_gpu_compute.h"
#include "compute_internal.h"	/* (pggpu_half_from_double) */

#ifdef BENCH_CUDA
#include <cuda_runtime.h>
#endif

static int	threads = 1;		/* -T */
#define WARM_ROWS 65536			/* rows of the GPU's warm-up fit */
static char method[32] = "pg_gpu";
static bool double_only = false;	/* -D */
static bool embeddings = false;	/* -E */
static bool float32 = false;	/* -F */
static bool float16 = false;	/* -H */
static bool no_seed = false;	/* -S */
static bool no_warm = false;	/* -N */
static bool parallel = false;	/* -P */
static bool hierarchical = false;	/* -A, -a */
static bool hier_only = false;	/* -a */
static int	force_label = 0;	/* -R */
static char route[256];			/* the last fit's route (pggpu_data_route) */
static double stream_mb = 0;	/* -M: streamed through parts of this many MB */
static const char *gpu_list = NULL;	/* -G: shares on these GPUs ("0,1") */

/*
 * One fit over the first n rows of X (d columns, column j at X + j * stride).
 * Returns false with err set when the compute layer fails.
 */
static bool
fit_more(pggpu_backend be, int64_t n, int64_t stride, int d, const double *X,
		 const pggpu_kmeans_params *p, pggpu_kmeans_result *r, double *load_s,
		 double *fit_s, const pggpu_kmeans_params *more, pggpu_kmeans_result *more_r,
		 double *more_s, pggpu_error *err)
{
	pggpu_data *ds;
	bool		ok;
	double		t0 = bench_now();

	if (pggpu_data_open(&ds, be, -1, d, n, err) != PGGPU_OK)
		return false;
	if ((float32 || float16) && pggpu_data_set_dtype(ds, float16 ? PGGPU_FLOAT16 : PGGPU_FLOAT32, err) != PGGPU_OK)
	{
		pggpu_data_close(ds);
		return false;
	}
	pggpu_data_set_threads(ds, threads, NULL);
	pggpu_data_set_double_only(ds, double_only);
	pggpu_data_force_route(ds, force_label, false);
	pggpu_data_set_metric(ds, embeddings ? PGGPU_METRIC_COSINE : PGGPU_METRIC_EUCLIDEAN);
	for (int64_t done = 0; done < n;)
	{
		int64_t		b = pggpu_data_batch_rows(ds);
		int64_t		m = n - done < b ? n - done : b;
		double	   *buf = pggpu_data_batch(ds);
		float	   *buf32 = pggpu_data_batch_f32(ds);
		uint16_t   *buf16 = pggpu_data_batch_f16(ds);

		for (int j = 0; j < d; j++)
			if (buf16)
				for (int64_t r = 0; r < m; r++)
					buf16[j * b + r] = pggpu_half_from_double(X[j * stride + done + r]);
			else if (buf32)
				for (int64_t r = 0; r < m; r++)
					buf32[j * b + r] = (float) X[j * stride + done + r];
			else
				memcpy(buf + j * b, X + j * stride + done, m * sizeof(double));
		if (pggpu_data_push(ds, m, err) != PGGPU_OK)
		{
			pggpu_data_close(ds);
			return false;
		}
		done += m;
	}
	*load_s = bench_now() - t0;
	t0 = bench_now();
	ok = pggpu_kmeans(ds, p, r, err) == PGGPU_OK;
	*fit_s = bench_now() - t0;
	if (ok && more)
	{
		/* (-G: a fit of more iterations on the same set, for an iteration's own time) */
		t0 = bench_now();
		ok = pggpu_kmeans(ds, more, more_r, err) == PGGPU_OK;
		*more_s = bench_now() - t0;
	}
	snprintf(route, sizeof(route), "%s", pggpu_data_route(ds));
	pggpu_data_close(ds);
	return ok;
}

/* the times at which iterations 1, 2, ... ended (a fit's progress callback) */
static double stamps[1024];
static int	stamps_n;

static void
stamp_iteration(void *arg, int start, int iteration)
{
	if (iteration >= 1 && stamps_n < 1024)
		stamps[stamps_n++] = bench_now();
}

static bool
fit(pggpu_backend be, int64_t n, int64_t stride, int d, const double *X,
	const pggpu_kmeans_params *p, pggpu_kmeans_result *r, double *load_s,
	double *fit_s, pggpu_error *err)
{
	return fit_more(be, n, stride, d, X, p, r, load_s, fit_s, NULL, NULL, NULL, err);
}

/*
 * Embedding-like rows (column j of row i at X[j stride + i]): 1000 topics,
 * random directions; a row is its topic's direction plus uniform noise of
 * the same length, normalised (cosine about 0.7 to its topic, about 0.5 to
 * another row of it, about 0 across topics), as sentence embeddings
 * roughly are.  Deterministic (splitmix64 from a fixed seed).
 */
static uint64_t
mix(uint64_t *s)
{
	uint64_t	z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static double
gauss(uint64_t *s)
{
	double		u = ((mix(s) >> 11) + 0.5) * 0x1p-53,
				v = ((mix(s) >> 11) + 0.5) * 0x1p-53;

	return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

static void
embedding_fill(int64_t n, int d, double *X, int64_t stride)
{
	const int	topics = 1000;
	double	   *T = malloc(sizeof(double) * topics * d),
			   *row = malloc(sizeof(double) * d);
	uint64_t	s = 20261124;

	for (int64_t e = 0; e < (int64_t) topics * d; e++)
		T[e] = gauss(&s) / sqrt((double) d);
	for (int64_t i = 0; i < n; i++)
	{
		const double *t = T + (mix(&s) % topics) * d;
		double		nn = 0;

		for (int j = 0; j < d; j++)
		{
			row[j] = t[j] + (((mix(&s) >> 11) * 0x1p-53) * 2 - 1) * sqrt(3.0 / d);
			nn += row[j] * row[j];
		}
		for (int j = 0; j < d; j++)
			X[j * stride + i] = row[j] / sqrt(nn);
	}
	free(T);
	free(row);
}

/*
 * The fit of all n rows as one data set, beside r (a fit of them held
 * apart): its seconds a pass, NaN when it failed; *diff the largest
 * difference of the centroids (relative above 1)
 */
static double
fit_whole(pggpu_backend be, int64_t n, int d, const double *X, const pggpu_kmeans_params *p,
		  const pggpu_kmeans_result *r, pggpu_kmeans_result *r1, double *diff, pggpu_error *err)
{
	double		load_s,
				fit_s;

	*diff = 0;
	if (!fit(be, n, n, d, X, p, r1, &load_s, &fit_s, err))
		return NAN;
	for (int64_t e = 0; e < (int64_t) p->k * d; e++)
	{
		double		scale = fabs(r1->centroids[e]) > 1 ? fabs(r1->centroids[e]) : 1;

		*diff = fmax(*diff, fabs(r->centroids[e] - r1->centroids[e]) / scale);
	}
	return fit_s;
}

/*
 * -M: the fit of ITERS iterations from the first k rows streamed through
 * parts of stream_mb MB, beside it resident
 */
static bool
run_stream(pggpu_backend be, int64_t n, int d, int k, const double *X, int iters)
{
	int64_t		part_rows = (int64_t) (stream_mb * 1048576.0 / (8.0 * d));
	int			np = 0;
	pggpu_data *parts[4096];
	pggpu_kmeans_params p = {.k = k, .max_iter = iters, .tol = 0, .init = PGGPU_INIT_GIVEN};
	pggpu_kmeans_result r = {0},
				r1 = {0};
	pggpu_error err = {0};
	double	   *C = malloc(sizeof(double) * k * d);
	double		t0,
				t_stream,
				fit_s,
				diff = 0,
				streamed = 0;
	bool		ok = true;

	for (int i = 0; i < k; i++)
		for (int j = 0; j < d; j++)
			C[i * d + j] = X[j * n + i];
	p.init_centroids = C;
	r.centroids = malloc(sizeof(double) * k * d);
	r.sizes = malloc(sizeof(int64_t) * k);
	r1.centroids = malloc(sizeof(double) * k * d);
	r1.sizes = malloc(sizeof(int64_t) * k);
	for (int64_t done = 0; done < n && ok && np < 4096;)
	{
		pggpu_data *ds;
		int64_t		b;

		ok = pggpu_data_open(&ds, be, -1, d, part_rows, &err) == PGGPU_OK;
		if (!ok)
			break;
		parts[np++] = ds;
		pggpu_data_set_threads(ds, threads, NULL);
		b = pggpu_data_batch_rows(ds);
		for (int64_t in_part = 0; ok && done < n && (in_part == 0 || in_part + b <= part_rows);)
		{
			int64_t		m = n - done < b ? n - done : b;
			double	   *buf = pggpu_data_batch(ds);

			for (int j = 0; j < d; j++)
				memcpy(buf + j * b, X + j * n + done, m * sizeof(double));
			ok = pggpu_data_push(ds, m, &err) == PGGPU_OK;
			done += m;
			in_part += m;
		}
		if (ok && done < n)
		{
			ok = pggpu_data_park(ds, &err) == PGGPU_OK;
			streamed += 8.0 * d * pggpu_data_rows(ds);
		}
	}
	if (ok)
	{
		t0 = bench_now();
		ok = pggpu_kmeans_parts(parts, np, &p, &r, &err) == PGGPU_OK;
		t_stream = bench_now() - t0;
	}
	for (int i = 0; i < np; i++)
		pggpu_data_close(parts[i]);
	fit_s = ok ? fit_whole(be, n, d, X, &p, &r, &r1, &diff, &err) : NAN;
	/* a fit of ITERS iterations passes over the rows ITERS + 1 times (the final labelling) */
	if (ok)
		bench_emit("stream", method, n, d, k, t_stream / (r.iterations + 1),
				   "seconds a pass over the rows (%d iterations and the final labelling); %d parts of %.0f MB, "
				   "%d parked; %.3g bytes streamed a pass; resident %.4f s a pass; centroids within %.2g of the resident fit's",
				   r.iterations, np, stream_mb, np - 1, streamed, fit_s / (r1.iterations + 1), diff);
	else
		bench_emit("stream", method, n, d, k, -1, "failed: %s", err.msg);
	free(C);
	free(r.centroids);
	free(r.sizes);
	free(r1.centroids);
	free(r1.sizes);
	return ok;
}

/*
 * -G: the fit of ITERS iterations from the first k rows with the rows in
 * contiguous shares on the GPUs of gpu_list ("0,1"; "0,0": two on GPU 0),
 * by pggpu_kmeans_parts (the shares' steps at once), beside it whole on the
 * first GPU.  Also a fit of 3 ITERS on each: the difference of the two,
 * over the difference of their iterations, is an iteration's own time
 * (without what a fit costs once: the state's set-up, the final labelling)
 */
static bool
run_shares(pggpu_backend be, int64_t n, int d, int k, const double *X, int iters)
{
	int			gpus[64];
	int			np = 0;
	pggpu_data *parts[64] = {0};
	pggpu_kmeans_params p = {.k = k, .max_iter = iters, .tol = 0, .init = PGGPU_INIT_GIVEN};
	pggpu_kmeans_params p3;
	pggpu_kmeans_result r = {0},
				r1 = {0},
				r3 = {0};
	pggpu_error err = {0};
	double	   *C = malloc(sizeof(double) * k * d);
	double		t0,
				t_shares = 0,
				t3_shares = 0,
				load_s,
				fit_s = NAN,
				fit3_s = NAN,
				diff = 0;
	int			it_shares = 0;
	bool		ok = true;

	for (const char *s = gpu_list; *s && np < 64; s = strchr(s, ',') ? strchr(s, ',') + 1 : s + strlen(s))
		gpus[np++] = atoi(s);
	for (int i = 0; i < k; i++)
		for (int j = 0; j < d; j++)
			C[i * d + j] = X[j * n + i];
	p.init_centroids = C;
	p3 = p;
	p3.max_iter = 3 * iters;
	r.centroids = malloc(sizeof(double) * k * d);
	r.sizes = malloc(sizeof(int64_t) * k);
	r1.centroids = malloc(sizeof(double) * k * d);
	r1.sizes = malloc(sizeof(int64_t) * k);
	r3.centroids = malloc(sizeof(double) * k * d);
	r3.sizes = malloc(sizeof(int64_t) * k);
	for (int s = 0; s < np && ok; s++)
	{
		int64_t		lo = n * s / np,
					hi = n * (s + 1) / np,
					b;

		ok = pggpu_data_open(&parts[s], be, gpus[s], d, hi - lo, &err) == PGGPU_OK;
		if (!ok)
			break;
		/* (as load's: -E's cosine was missed until 2026-11-28, the shares then fitting euclidean) */
		pggpu_data_set_threads(parts[s], threads, NULL);
		pggpu_data_set_double_only(parts[s], double_only);
		pggpu_data_force_route(parts[s], force_label, false);
		pggpu_data_set_metric(parts[s], embeddings ? PGGPU_METRIC_COSINE : PGGPU_METRIC_EUCLIDEAN);
		b = pggpu_data_batch_rows(parts[s]);
		for (int64_t done = lo; ok && done < hi; done += b)
		{
			int64_t		m = hi - done < b ? hi - done : b;
			double	   *buf = pggpu_data_batch(parts[s]);

			for (int j = 0; j < d; j++)
				memcpy(buf + j * b, X + j * n + done, m * sizeof(double));
			ok = pggpu_data_push(parts[s], m, &err) == PGGPU_OK;
		}
	}
	if (ok)
	{
		/* (a first fit: every GPU's setup) */
		ok = pggpu_kmeans_parts(parts, np, &p, &r, &err) == PGGPU_OK;
		t0 = bench_now();
		ok = ok && pggpu_kmeans_parts(parts, np, &p, &r, &err) == PGGPU_OK;
		t_shares = bench_now() - t0;
		t0 = bench_now();
		ok = ok && pggpu_kmeans_parts(parts, np, &p3, &r3, &err) == PGGPU_OK;
		t3_shares = bench_now() - t0;
		it_shares = r3.iterations - r.iterations;
	}
	for (int i = 0; i < np; i++)
		pggpu_data_close(parts[i]);
	if (ok && fit_more(be, n, n, d, X, &p, &r1, &load_s, &fit_s, &p3, &r3, &fit3_s, &err))
	{
		for (int64_t e = 0; e < (int64_t) k * d; e++)
		{
			double		scale = fabs(r1.centroids[e]) > 1 ? fabs(r1.centroids[e]) : 1;

			diff = fmax(diff, fabs(r.centroids[e] - r1.centroids[e]) / scale);
		}
		it_shares = it_shares == r3.iterations - r1.iterations ? it_shares : 0;
	}
	else
		ok = false;
	if (ok && it_shares > 0)
		bench_emit("gpus", method, n, d, k, t_shares / (r.iterations + 1),
				   "seconds a pass over the rows (%d iterations and the final labelling); %d shares on GPUs %s; "
				   "whole on one GPU %.4f s a pass; centroids within %.2g of the whole fit's; "
				   "an iteration (fits of %d and %d iterations apart) %.5f s, whole %.5f s",
				   r.iterations, np, gpu_list, fit_s / (r1.iterations + 1), diff, r.iterations,
				   r.iterations + it_shares, (t3_shares - t_shares) / it_shares, (fit3_s - fit_s) / it_shares);
	else
		bench_emit("gpus", method, n, d, k, -1, "failed: %s", ok ? "the fits made other iterations" : err.msg);
	free(C);
	free(r.centroids);
	free(r.sizes);
	free(r1.centroids);
	free(r1.sizes);
	free(r3.centroids);
	free(r3.sizes);
	return ok;
}

/* one case: per-iteration, seeding and load times; false when it failed */
static bool
run_case(pggpu_backend be, int64_t n, int d, int k, const double *X, int iters)
{
	bool		gpu = be == PGGPU_BACKEND_GPU;
	pggpu_kmeans_params p = {0};
	pggpu_kmeans_result r = {0};
	pggpu_error err = {0};
	double	   *C = malloc(sizeof(double) * k * d);
	double		load_s,
				fit_s;
	bool		ok;
	char		thr[16];

	snprintf(thr, sizeof(thr), "%d", threads);
	/* the first k rows are the initial centroids (torch starts there too) */
	for (int i = 0; i < k; i++)
		for (int j = 0; j < d; j++)
			C[i * d + j] = X[j * n + i];
	r.centroids = malloc(sizeof(double) * k * d);
	r.sizes = malloc(sizeof(int64_t) * k);
	p.k = k;
	p.tol = 0;
	p.seed = 1;
	/*
	 * GPU: a warm-up fit on the first WARM_ROWS rows first, k-means++ and
	 * two iterations (the CUDA runtime loads a kernel on its first launch,
	 * and the timed figures leave that out, as PyTorch's warm-up does)
	 */
	if (gpu && !no_warm && k <= WARM_ROWS)
	{
		p.init = PGGPU_INIT_KMEANSPP;
		p.max_iter = 2;
		ok = fit(be, n < WARM_ROWS ? n : WARM_ROWS, n, d, X, &p, &r, &load_s, &fit_s, &err);
		if (!ok)
			goto done;
	}
	/*
	 * an iteration's own time: from the end of the first iteration to the
	 * end of the last (the progress callback's stamps), ITERS + 1 of them,
	 * so that the first step's setup of the device state is left out
	 * (about 0.1 s at 10^6 x 768 on an H200)
	 */
	p.max_iter = iters + 1;
	ok = true;
	if (hier_only)
		goto hier;
	p.init = PGGPU_INIT_GIVEN;
	p.init_centroids = C;
	p.progress = stamp_iteration;
	stamps_n = 0;
	ok = fit(be, n, n, d, X, &p, &r, &load_s, &fit_s, &err);
	p.progress = NULL;
	/* (a fit converged at its first iteration: that one, its setup included) */
	if (ok && stamps_n >= 2)
	{
		r.iterate_seconds = stamps[stamps_n - 1] - stamps[0];
		r.iterations = stamps_n - 1;
	}
	if (ok)
	{
		/* each timed iteration's ms (a repair of emptied clusters shows as one slower) */
		char		each[512] = "";

		for (int i = 1; i < stamps_n && strlen(each) < sizeof(each) - 16; i++)
			snprintf(each + strlen(each), sizeof(each) - strlen(each), "%s%.2f", i > 1 ? " " : "",
					 1e3 * (stamps[i] - stamps[i - 1]));
		bench_emit(gpu ? "kernel" : "cpu", method, n, d, k,
				   r.iterate_seconds / r.iterations, "iterations=%d threads=%s%s%s; each (ms): %s",
				   r.iterations, gpu ? "gpu" : thr, route[0] ? " " : "", route, each);
		bench_emit("load", gpu ? "pg_gpu" : "pg_gpu_cpu", n, d, k, load_s,
				   "pushing N x d %s through the staging buffers", float16 ? "float16" : float32 ? "float32" : "float64");
		p.init = PGGPU_INIT_KMEANSPP;
		p.init_centroids = NULL;
		p.max_iter = parallel ? iters : 1;
		ok = no_seed || fit(be, n, n, d, X, &p, &r, &load_s, &fit_s, &err);
		if (ok && !no_seed)
			bench_emit(gpu ? "seed" : "cpu_seed", method, n, d, k,
					   r.seed_seconds, "k-means++");
		if (ok && !no_seed && parallel)
			bench_emit(gpu ? "whole" : "cpu_whole", method, n, d, k, fit_s,
					   "k-means++ and %d iterations, inertia %.9g", r.iterations, r.inertia);
	}
	if (ok && parallel)
	{
		p.init = PGGPU_INIT_PARALLEL;
		p.init_centroids = NULL;
		p.max_iter = iters;
		ok = fit(be, n, n, d, X, &p, &r, &load_s, &fit_s, &err);
		if (ok)
		{
			bench_emit(gpu ? "seed" : "cpu_seed", method, n, d, k, r.seed_seconds, "k-means||");
			bench_emit(gpu ? "whole" : "cpu_whole", method, n, d, k, fit_s,
					   "k-means|| and %d iterations, inertia %.9g", r.iterations, r.inertia);
		}
	}
	/* -A: algorithm 'hierarchical' (k-means++ seeding, the same iterations a fit), beside the above */
hier:
	if (ok && hierarchical)
	{
		p.algorithm = PGGPU_ALGORITHM_HIERARCHICAL;
		p.init = PGGPU_INIT_KMEANSPP;
		p.init_centroids = NULL;
		p.max_iter = iters;
		ok = fit(be, n, n, d, X, &p, &r, &load_s, &fit_s, &err);
		p.algorithm = PGGPU_ALGORITHM_LLOYD;
		if (ok)
			bench_emit(gpu ? "whole" : "cpu_whole", "pg_gpu_hier", n, d, k, fit_s,
					   "hierarchical: %d groups, fits on %lld rows, at most %d iterations each (ran %d), "
					   "seeding %.3f s, iterations %.3f s, inertia %.9g",
					   r.groups, (long long) r.trained, iters, r.iterations, r.seed_seconds,
					   r.iterate_seconds, r.inertia);
	}
done:
	if (!ok)
		bench_emit(gpu ? "kernel" : "cpu", method, n, d, k, -1, "failed: %s", err.msg);
	free(C);
	free(r.centroids);
	free(r.sizes);
	return ok;
}

#ifdef BENCH_CUDA
/* a copy's seconds, median of 10 after one to warm up */
static double
copy_seconds(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaEvent_t e0, cudaEvent_t e1)
{
	double		t[10];

	cudaMemcpy(dst, src, bytes, kind);
	for (int r = 0; r < 10; r++)
	{
		float		ms;

		cudaEventRecord(e0, 0);
		cudaMemcpy(dst, src, bytes, kind);
		cudaEventRecord(e1, 0);
		cudaEventSynchronize(e1);
		cudaEventElapsedTime(&ms, e0, e1);
		t[r] = ms / 1e3;
	}
	return bench_median(t, 10);
}
#endif

static int
bandwidth(void)
{
#ifdef BENCH_CUDA
	size_t		bytes = (size_t) 1 << 30;
	void	   *a,
			   *b;
	cudaEvent_t e0,
				e1;

	if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess ||
		cudaMemset(a, 1, bytes) != cudaSuccess)
	{
		bench_emit("bandwidth", "cudaMemcpy_d2d", bytes, 0, 0, -1,
				   "failed: %s", cudaGetErrorString(cudaGetLastError()));
		return 1;
	}
	cudaEventCreate(&e0);
	cudaEventCreate(&e1);
	bench_emit("bandwidth", "cudaMemcpy_d2d", bytes, 0, 0, copy_seconds(b, a, bytes, cudaMemcpyDeviceToDevice, e0, e1),
			   "1 GiB device-to-device copy, median of 10: it reads and writes every byte, bandwidth = 2 x bytes / time");
	cudaFree(b);
	/* the floor of streaming: pinned host memory to the device */
	if (cudaMallocHost(&b, bytes) == cudaSuccess)
	{
		memset(b, 1, bytes);
		bench_emit("bandwidth", "cudaMemcpy_h2d_pinned", bytes, 0, 0,
				   copy_seconds(a, b, bytes, cudaMemcpyHostToDevice, e0, e1),
				   "1 GiB from pinned host memory to the device, median of 10: the PCIe floor of streaming = bytes / time");
		cudaFreeHost(b);
	}
	cudaFree(a);
	return 0;
#else
	fprintf(stderr, "bench_kernel: built without CUDA\n");
	return 1;
#endif
}

static int
print_rows(int d, int64_t rows)
{
	for (int64_t r = 0; r < rows; r++)
		for (int j = 0; j < d; j++)
			printf("%a%c", blobs_value(BLOBS_SEED, r, j), j == d - 1 ? '\n' : ' ');
	return 0;
}

int
main(int argc, char **argv)
{
	pggpu_backend be;
	int			iters = 10,
				opt,
				failed = 0;
	double		budget = 1e12,
				cap = 1e12;
	double	   *X = NULL;
	int64_t		xn = 0;
	int			xd = 0;
	pggpu_error err = {0};

	if (argc == 4 && strcmp(argv[1], "print") == 0)
		return print_rows(atoi(argv[2]), atoll(argv[3]));
	if (argc < 2 || (strcmp(argv[1], "gpu") && strcmp(argv[1], "cpu") &&
					 strcmp(argv[1], "bandwidth")))
	{
		fprintf(stderr, "usage: %s gpu|cpu [-t TSV] [-i ITERS] [-b BUDGET_S] [-c CAP_S] [-T THREADS] [-a] [-A] [-D] [-E] [-F] [-H] [-N] [-S] [-P] [-R LABEL] [-M MB] [-G GPUS] N,d,k ...\n"
				"       %s bandwidth [-t TSV]\n       %s print D ROWS\n",
				argv[0], argv[0], argv[0]);
		return 2;
	}
	optind = 2;
	while ((opt = getopt(argc, argv, "t:i:b:c:T:aADEFHNSPR:M:G:")) != -1)
	{
		if (opt == 'A')
			hierarchical = true;
		else if (opt == 'a')
			hierarchical = hier_only = true;
		else
		if (opt == 'F')
			float32 = true;
		else if (opt == 'H')
			float16 = true;
		else
		if (opt == 'M')
			stream_mb = atof(optarg);
		else if (opt == 'G')
			gpu_list = optarg;
		else if (opt == 'D')
			double_only = true;
		else if (opt == 'E')
			embeddings = true;
		else if (opt == 'S')
			no_seed = true;
		else if (opt == 'N')
			no_warm = true;
		else if (opt == 'P')
			parallel = true;
		else if (opt == 'R')
			force_label = atoi(optarg);
		else if (opt == 't')
			bench_open_tsv(optarg);
		else if (opt == 'i')
			iters = atoi(optarg);
		else if (opt == 'b')
			budget = atof(optarg);
		else if (opt == 'c')
			cap = atof(optarg);
		else if (opt == 'T')
		{
			threads = atoi(optarg) < 1 ? 1 : atoi(optarg);
			if (threads > 1)
				snprintf(method, sizeof(method), "pg_gpu_%dt", threads);
		}
		else
			return 2;
	}
	if ((float32 || float16) && (stream_mb > 0 || gpu_list))
	{
		fprintf(stderr, "bench_kernel: -F and -H are for whole fits (not -M or -G)\n");
		return 2;
	}
	if (double_only || embeddings || float32 || float16)
		snprintf(method + strlen(method), sizeof(method) - strlen(method), "%s%s%s",
				 double_only ? "_f64" : "", embeddings ? "_emb" : "",
				 float16 ? "_f16" : float32 ? "_f32" : "");
	if (force_label)
		snprintf(method + strlen(method), sizeof(method) - strlen(method), "_r%d", force_label);
	bench_set_budget(budget, cap);
	if (strcmp(argv[1], "bandwidth") == 0)
		return bandwidth();
	be = strcmp(argv[1], "gpu") == 0 ? PGGPU_BACKEND_GPU : PGGPU_BACKEND_CPU;
	if (be == PGGPU_BACKEND_GPU && pggpu_gpu_count(&err) == 0)
	{
		fprintf(stderr, "bench_kernel: no GPU: %s\n", err.msg);
		return 1;
	}
	for (int a = optind; a < argc; a++)
	{
		const char *section = be == PGGPU_BACKEND_GPU ? "kernel" : "cpu";
		double		nf,
					t0 = bench_now();
		int64_t		n;
		int			d,
					k;
		char		key[64],
					note[128];

		if (sscanf(argv[a], "%lf,%d,%d", &nf, &d, &k) != 3 || nf < 1 || d < 1 || k < 1)
		{
			fprintf(stderr, "bad case \"%s\" (N,d,k)\n", argv[a]);
			return 2;
		}
		n = (int64_t) nf;
		snprintf(key, sizeof(key), "%d,%d", d, k);
		if (bench_skip(key, n, 1, note, sizeof(note)))
		{
			bench_emit(section, method, n, d, k, -1, "%s", note);
			continue;
		}
		if (n != xn || d != xd)
		{
			free(X);
			X = malloc(sizeof(double) * n * d);
			xn = X ? n : 0;
			xd = d;
			if (X && embeddings)
				embedding_fill(n, d, X, n);
			else if (X)
				blobs_fill(BLOBS_SEED, 0, n, d, X, n);
		}
		if (!X)
			bench_emit(section, method, n, d, k, -1, "failed: out of host memory");
		if (!X || !(gpu_list ? run_shares(be, n, d, k, X, iters) :
					stream_mb > 0 ? run_stream(be, n, d, k, X, iters) : run_case(be, n, d, k, X, iters)))
			failed++;
		bench_done(key, n, bench_now() - t0);
	}
	free(X);
	return failed > 0;
}
