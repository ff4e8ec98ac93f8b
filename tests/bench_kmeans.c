/*
 * bench_kmeans.c - times the compute layer without a database.
 *
 *   bench_kmeans [cpu|gpu] N d k [iters]
 *
 * Uniform random data (no cluster structure, so Lloyd does not converge
 * early); initial centroids drawn from the same distribution.  Prints, for the backend:
 *   load  : time to push all batches (GPU: host->device copies overlapped
 *           with filling the next staging buffer), as GB/s
 *   iter  : time per Lloyd iteration = (t(iters) - t(2)) / (iters - 2) from
 *           two fits, so the per-fit costs (setup, final pass, read-back) cancel
 *   kmeans++ : seeding time = t(k-means++, max_iter 2) - t(given, max_iter 2)
 *   floor : bytes one iteration must read (N * d * 8 + N * 4) / bandwidth given
 *           by PGGPU_BENCH_GBPS (default 3000, an H100's copy rate, GB/s)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pg_gpu_compute.h"

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 88172645463325252ULL;

static double
uniform(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (rng >> 11) * (1.0 / 9007199254740992.0);
}

static void
die(const char *what, const pggpu_error *err)
{
	fprintf(stderr, "%s: %s\n", what, err->msg);
	exit(1);
}

/* loads N x d rows (same data every time: the generator restarts) */
static pggpu_data *
load(pggpu_backend be, int64_t n, int d, double *load_s)
{
	pggpu_data *ds;
	pggpu_error err = {0};
	double		t0;

	rng = 88172645463325252ULL;
	if (pggpu_data_open(&ds, be, -1, d, n, &err) != PGGPU_OK)
		die("open", &err);
	t0 = now();
	for (int64_t done = 0; done < n;)
	{
		int64_t		b = pggpu_data_batch_rows(ds);
		int64_t		m = n - done < b ? n - done : b;
		double	   *buf = pggpu_data_batch(ds);

		for (int j = 0; j < d; j++)
			for (int64_t r = 0; r < m; r++)
				buf[j * b + r] = uniform();
		if (pggpu_data_push(ds, m, &err) != PGGPU_OK)
			die("push", &err);
		done += m;
	}
	*load_s = now() - t0;
	return ds;
}

static double
fit(pggpu_backend be, int64_t n, int d, int k, int iters, pggpu_init init,
	const double *C, int *done_iters, double *load_s)
{
	pggpu_data *ds = load(be, n, d, load_s);
	pggpu_kmeans_params p = {0};
	pggpu_kmeans_result r = {0};
	pggpu_error err = {0};
	double		t0;

	p.k = k;
	p.max_iter = iters;
	p.tol = 0;
	p.init = init;
	p.init_centroids = C;
	p.seed = 1;
	r.centroids = malloc(sizeof(double) * k * d);
	r.sizes = malloc(sizeof(int64_t) * k);
	t0 = now();
	if (pggpu_kmeans(ds, &p, &r, &err) != PGGPU_OK)
		die("kmeans", &err);
	t0 = now() - t0;
	*done_iters = r.iterations;
	free(r.centroids);
	free(r.sizes);
	pggpu_data_close(ds);
	return t0;
}

int
main(int argc, char **argv)
{
	pggpu_backend be;
	int64_t		n;
	int			d,
				k,
				iters,
				i1,
				i2,
				i3;
	double	   *C;
	double		load_s,
				t1,
				t2,
				t3,
				gbps = getenv("PGGPU_BENCH_GBPS") ? atof(getenv("PGGPU_BENCH_GBPS")) : 3000;
	pggpu_error err = {0};

	if (argc < 5)
	{
		fprintf(stderr, "usage: %s cpu|gpu N d k [iters]\n", argv[0]);
		return 2;
	}
	be = strcmp(argv[1], "gpu") == 0 ? PGGPU_BACKEND_GPU : PGGPU_BACKEND_CPU;
	n = atoll(argv[2]);
	d = atoi(argv[3]);
	k = atoi(argv[4]);
	iters = argc > 5 ? atoi(argv[5]) : 12;
	if (be == PGGPU_BACKEND_GPU && pggpu_gpu_count(&err) == 0)
		die("gpu", &err);

	/* initial centroids: a separate draw from the data's distribution */
	C = malloc(sizeof(double) * k * d);
	rng = 12345;
	for (int64_t e = 0; e < (int64_t) k * d; e++)
		C[e] = uniform();

	t1 = fit(be, n, d, k, 2, PGGPU_INIT_GIVEN, C, &i1, &load_s);
	t2 = fit(be, n, d, k, iters, PGGPU_INIT_GIVEN, C, &i2, &load_s);
	t3 = fit(be, n, d, k, 2, PGGPU_INIT_KMEANSPP, NULL, &i3, &load_s);
	printf("%-3s N=%-9lld d=%-3d k=%-5d load %7.2f GB/s  iter %9.3f ms (%d-%d iters)  kmeans++ %9.1f ms  floor %7.3f ms\n",
		   argv[1], (long long) n, d, k,
		   n * d * 8.0 / load_s / 1e9,
		   i2 > i1 ? (t2 - t1) / (i2 - i1) * 1e3 : -1.0, i1, i2,
		   (t3 - t1) * 1e3,
		   (n * d * 8.0 + n * 4.0) / (gbps * 1e9) * 1e3);
	free(C);
	return 0;
}
