#include "unit.h"
#include "route.h"

/* ---- the CPU's GEMM route against its plain loop ----------------------------------- */

/*
 * The CPU backend labels through OpenBLAS's GEMM where d and k make it pay
 * (cpu/gemm.c), certifying each label or measuring its near ties by the
 * plain loop: the fit must be the plain loop's bit for bit (centroids,
 * inertia, sizes, labels, iterations), on data built to defeat the bound:
 * integer points with exact ties, rows a million away from the origin,
 * identical rows; on several threads; with panels cut short by a small poll
 * budget, and so on threads stopped by pending interrupts, each pass then
 * finished where it stopped; and assignment distances too.  Each case twice: as doubles
 * (dgemm), and rounded to float32 in a FLOAT32 set (sgemm, a bound 2^29
 * times as wide), against the plain loop on the same values.
 */
static pggpu_dtype gemm_dtype;

/* pending every third poll (the caller's thread polls for all of them) */
static int	gemm_polls;

static bool
gemm_pending(void)
{
	return ++gemm_polls % 3 == 0;
}

static bool
fit_forced(const dataset *D, const pggpu_kmeans_params *p, int label, int threads,
		   double poll_work, km_out *o)
{
	pggpu_data *ds = load_typed(PGGPU_BACKEND_CPU, D, gemm_dtype, LOAD_COLUMNS);
	pggpu_error err = {0};

	if (ds == NULL)
		return false;
	pggpu_data_force_route(ds, label, false);
	pggpu_data_set_threads(ds, threads, p->check_interrupts ? gemm_pending : NULL);
	if (poll_work > 0)
		pggpu_data_set_poll_work(ds, poll_work);
	fit_set(ds, p, o, &err);
	pggpu_data_close(ds);
	return CHECK(o->st == PGGPU_OK, "%s, %d threads: %s", label == PGGPU_LABEL_GEMM ? "gemm" : "plain",
				 threads, err.msg);
}

static bool
assign_forced(const dataset *D, const double *C, int k, int label, int32_t *lab, double *dist)
{
	pggpu_data *ds = load_typed(PGGPU_BACKEND_CPU, D, gemm_dtype, LOAD_COLUMNS);
	pggpu_error err = {0};
	bool		ok;

	if (ds == NULL)
		return false;
	pggpu_data_force_route(ds, label, false);
	ok = pggpu_assign(ds, C, k, lab, dist, &err) == PGGPU_OK;
	pggpu_data_close(ds);
	return CHECK(ok, "assign: %s", err.msg);
}

void
test_cpu_gemm(void)
{
	static const struct
	{
		const char *name;
		int64_t		n;
		int			d,
					k;
		int			kind;		/* 0 blobs, 1 integer grid, 2 blobs + 1e6, 3 identical rows */
		pggpu_init	init;
	}			cases[] = {
		{"blobs", 20000, 32, 64, 0, PGGPU_INIT_KMEANSPP},
		{"blobs", 6000, 128, 100, 0, PGGPU_INIT_RANDOM},
		{"blobs", 3000, 5, 7, 0, PGGPU_INIT_KMEANSPP},
		{"integer grid", 5000, 16, 40, 1, PGGPU_INIT_KMEANSPP},
		{"integer grid", 4000, 3, 64, 1, PGGPU_INIT_RANDOM},
		{"far from the origin", 8000, 24, 40, 2, PGGPU_INIT_KMEANSPP},
		{"identical rows", 1000, 20, 5, 3, PGGPU_INIT_KMEANSPP},
		{"blobs, the default route GEMM", 3005, 300, 40, 0, PGGPU_INIT_KMEANSPP},
		/* (float32: sgemm's slices of columns, the bound's depth: cpu/gemm.c) */
		{"integer grid, 4 slices", 3000, 400, 64, 1, PGGPU_INIT_KMEANSPP},
		{"far from the origin, 5 slices", 3000, 520, 48, 2, PGGPU_INIT_RANDOM},
	};

	for (size_t cj = 0; cj < 2 * sizeof(cases) / sizeof(cases[0]); cj++)
	{
		size_t		ci = cj % (sizeof(cases) / sizeof(cases[0]));
		int64_t		n = cases[ci].n;
		int			d = cases[ci].d,
					k = cases[ci].k;
		dataset		D;
		pggpu_kmeans_params p = {0};
		km_out		plain,
					o;
		rng			r = rng_make(900 + ci);

		gemm_dtype = cj < sizeof(cases) / sizeof(cases[0]) ? PGGPU_FLOAT64 : PGGPU_FLOAT32;
		set_case("cpu gemm: %s n=%lld d=%d k=%d%s", cases[ci].name, (long long) n, d, k,
				 gemm_dtype == PGGPU_FLOAT32 ? ", float32" : "");
		if (cases[ci].kind == 0 || cases[ci].kind == 2)
			gen_blobs(&D, n, d, 12, 3.0, 40 + ci);
		else
			data_alloc(&D, n, d, false);
		for (int64_t e = 0; e < n * d; e++)
			if (cases[ci].kind == 1)
				D.X[e] = (double) (rng_u64(&r) % 4);
			else if (cases[ci].kind == 2)
				D.X[e] += 1e6;
			else if (cases[ci].kind == 3)
				D.X[e] = 0.1 * (e % d);
		if (gemm_dtype == PGGPU_FLOAT32)
			for (int64_t e = 0; e < n * d; e++)
				D.X[e] = (float) D.X[e];
		p.k = k;
		p.max_iter = 30;
		p.tol = 0;
		p.init = cases[ci].init;
		p.seed = 11;
		km_alloc(&plain, n, k, d);
		km_alloc(&o, n, k, d);
		if (fit_forced(&D, &p, PGGPU_LABEL_LLOYD, 1, 0, &plain))
		{
			if (fit_forced(&D, &p, PGGPU_LABEL_GEMM, 1, 0, &o))
				cmp_exact("gemm vs plain", &plain, &o, n, k, d);
			if (fit_forced(&D, &p, PGGPU_LABEL_GEMM, 3, 0, &o))
				cmp_exact("gemm on 3 threads vs plain", &plain, &o, n, k, d);
			if (fit_forced(&D, &p, PGGPU_LABEL_GEMM, 2, 32.0 * k * d, &o))
				cmp_exact("gemm, short panels, vs plain", &plain, &o, n, k, d);
			/* threads stopped mid-part and the passes finished where they stopped */
			p.check_interrupts = on_interrupt;
			interrupt_calls = interrupt_jump_at = gemm_polls = 0;
			if (fit_forced(&D, &p, PGGPU_LABEL_GEMM, 3, 32.0 * k * d, &o))
			{
				cmp_exact("gemm on 3 threads, short panels, interrupts pending, vs plain", &plain, &o,
						  n, k, d);
				CHECK(interrupt_calls > o.iters, "the callback ran %d times in %d iterations", interrupt_calls,
					  o.iters);
			}
			p.check_interrupts = NULL;
			if (fit_forced(&D, &p, 0, 1, 0, &o))
				cmp_exact("the default route vs plain", &plain, &o, n, k, d);
		}
		{
			int32_t    *l1 = (int32_t *) xmalloc(sizeof(int32_t) * n),
					   *l2 = (int32_t *) xmalloc(sizeof(int32_t) * n);
			double	   *d1 = (double *) xmalloc(sizeof(double) * n),
					   *d2 = (double *) xmalloc(sizeof(double) * n);

			/* given centroids: rows themselves, so that some rows sit on one */
			if (assign_forced(&D, D.X, k, PGGPU_LABEL_LLOYD, l1, d1) &&
				assign_forced(&D, D.X, k, PGGPU_LABEL_GEMM, l2, d2))
				CHECK(memcmp(l1, l2, sizeof(int32_t) * n) == 0 && memcmp(d1, d2, sizeof(double) * n) == 0,
					  "assign: gemm's labels or distances differ from the plain loop's");
			free(l1), free(l2), free(d1), free(d2);
		}
		km_free(&plain);
		km_free(&o);
		data_free(&D);
	}

	/*
	 * Emptied clusters: given centroids, three of them far from every row,
	 * so that the first step leaves them without rows and the repair takes
	 * the rows farthest from their centroids.  A Lloyd step on the GEMM
	 * route leaves the rows' distances until a read (cpu/kmeans.c
	 * fresh_dists): measured then from that step's centroids, they must
	 * choose the plain loop's rows (measured from the updated centroids,
	 * or not at all, they choose others).  Doubles and floats, 1 and 3
	 * threads.
	 */
	for (int f = 0; f < 2; f++)
	{
		int64_t		n = 5000;
		int			d = 96,
					k = 24;
		dataset		D;
		double	   *C = (double *) xmalloc(sizeof(double) * k * d);
		pggpu_kmeans_params p = {0};
		km_out		plain,
					o;

		gemm_dtype = f ? PGGPU_FLOAT32 : PGGPU_FLOAT64;
		set_case("cpu gemm: emptied clusters repaired%s", f ? ", float32" : "");
		gen_blobs(&D, n, d, 8, 3.0, 31);
		for (int64_t e = 0; f && e < n * d; e++)
			D.X[e] = (float) D.X[e];
		memcpy(C, D.X, sizeof(double) * k * d);
		for (int c = 0; c < 3; c++)
			for (int j = 0; j < d; j++)
				C[(int64_t) (5 * c + 2) * d + j] = 1e4 + c;
		p.k = k;
		p.max_iter = 20;
		p.tol = 0;
		p.init = PGGPU_INIT_GIVEN;
		p.init_centroids = C;
		km_alloc(&plain, n, k, d);
		km_alloc(&o, n, k, d);
		if (fit_forced(&D, &p, PGGPU_LABEL_LLOYD, 1, 0, &plain))
		{
			bool		far = false;

			/* (the repair moved them: none is far at the end) */
			for (int c = 0; c < k; c++)
				far |= plain.C[(int64_t) c * d] > 1e3;
			CHECK(!far, "a cluster left far from the rows: no repair?");
			if (fit_forced(&D, &p, PGGPU_LABEL_GEMM, 1, 0, &o))
				cmp_exact("gemm vs plain", &plain, &o, n, k, d);
			if (fit_forced(&D, &p, PGGPU_LABEL_GEMM, 3, 0, &o))
				cmp_exact("gemm on 3 threads vs plain", &plain, &o, n, k, d);
		}
		km_free(&plain);
		km_free(&o);
		free(C);
		data_free(&D);
	}

	/*
	 * A row near-tied with more centroids than the pairs' room (2048): 2100
	 * copies of one centroid tie every row, measured a room at a time; the
	 * first copy wins, as in the plain loop
	 */
	for (int f = 0; f < 2; f++)
	{
		int64_t		n = 300;
		int			d = 260,
					k = 2100;
		dataset		D;
		double	   *C = (double *) xmalloc(sizeof(double) * k * d);
		int32_t    *l1 = (int32_t *) xmalloc(sizeof(int32_t) * n),
				   *l2 = (int32_t *) xmalloc(sizeof(int32_t) * n);
		double	   *d1 = (double *) xmalloc(sizeof(double) * n),
				   *d2 = (double *) xmalloc(sizeof(double) * n);

		gemm_dtype = f ? PGGPU_FLOAT32 : PGGPU_FLOAT64;
		set_case("cpu gemm: %d tied centroids%s", k, f ? ", float32" : "");
		gen_blobs(&D, n, d, 3, 3.0, 77);
		for (int64_t e = 0; e < n * d; e++)
			D.X[e] = (float) D.X[e];
		for (int c = 0; c < k; c++)
			memcpy(C + (int64_t) c * d, D.X + 5 * d, sizeof(double) * d);
		if (assign_forced(&D, C, k, PGGPU_LABEL_LLOYD, l1, d1) &&
			assign_forced(&D, C, k, PGGPU_LABEL_GEMM, l2, d2))
			CHECK(memcmp(l1, l2, sizeof(int32_t) * n) == 0 && memcmp(d1, d2, sizeof(double) * n) == 0 &&
				  l2[0] == 0 && l2[n - 1] == 0,
				  "gemm's labels or distances differ from the plain loop's (row 0: %d, %d)", l1[0], l2[0]);
		free(C), free(l1), free(l2), free(d1), free(d2);
		data_free(&D);
	}

	/*
	 * Float32 rows on the bisectors of pairs of centroids, at d = 640 (the
	 * product in 5 slices): each row the midpoint of its pair plus noise
	 * orthogonal to the pair's difference, then rounded to float, so that
	 * the two distances differ by a little more than the rounding, where
	 * sgemm's own error decides the order unless the bound's depth covers it.  The
	 * plain loop's labels and distances, bit for bit (sgemm's error here
	 * reaches about u_f s^2, its bound 138 u_f s^2: a 2E of 0.5 u_f s^2
	 * mislabels 25 of these rows)
	 */
	{
		int64_t		n = 4000;
		int			d = 640,
					k = 16;
		dataset		D;
		double	   *C = (double *) xmalloc(sizeof(double) * k * d),
				   *v = (double *) xmalloc(sizeof(double) * d);
		int32_t    *l1 = (int32_t *) xmalloc(sizeof(int32_t) * n),
				   *l2 = (int32_t *) xmalloc(sizeof(int32_t) * n);
		double	   *d1 = (double *) xmalloc(sizeof(double) * n),
				   *d2 = (double *) xmalloc(sizeof(double) * n);
		rng			r = rng_make(640);
		int64_t		moved = 0;

		gemm_dtype = PGGPU_FLOAT32;
		set_case("cpu gemm: rows on bisectors, float32, d = %d", d);
		data_alloc(&D, n, d, false);
		for (int64_t e = 0; e < (int64_t) k * d; e++)
			C[e] = 3 * rng_unif(&r) - 1.5;
		for (int64_t i = 0; i < n; i++)
		{
			int			a = 2 * (int) (i % (k / 2));
			double	   *x = D.X + i * d,
						zv = 0,
						vv = 0;

			for (int j = 0; j < d; j++)
			{
				v[j] = C[(int64_t) (a + 1) * d + j] - C[(int64_t) a * d + j];
				x[j] = rng_gauss(&r);
				zv += x[j] * v[j];
				vv += v[j] * v[j];
			}
			/* and moved along v by t: the distances differ by 2 t |v|, from 0.05 to 20 u_f s^2 */
			double		t = (rng_unif(&r) < 0.5 ? -3e-7 : 3e-7) * pow(400, rng_unif(&r)) / 2;

			for (int j = 0; j < d; j++)
				x[j] = (float) ((C[(int64_t) a * d + j] + C[(int64_t) (a + 1) * d + j]) / 2 +
								x[j] - zv / vv * v[j] + t * v[j] / sqrt(vv));
		}
		if (assign_forced(&D, C, k, PGGPU_LABEL_LLOYD, l1, d1) &&
			assign_forced(&D, C, k, PGGPU_LABEL_GEMM, l2, d2))
		{
			for (int64_t i = 0; i < n; i++)
				moved += l1[i] != l2[i] || d1[i] != d2[i];
			CHECK(moved == 0, "gemm's labels or distances differ from the plain loop's on %lld of %lld rows",
				  (long long) moved, (long long) n);
		}
		free(C), free(v), free(l1), free(l2), free(d1), free(d2);
		data_free(&D);
	}
}
