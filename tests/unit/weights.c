#include "unit.h"
#include "compute_internal.h"

/* ---- sample weights (pggpu_data_batch_weights, pggpu_data_set_weights) ------ */

/*
 * D's rows [lo, hi) on be, each weighing w[i] (w NULL: unweighted), pushed
 * through the staging batches with their weights (by_set: pushed
 * unweighted, then pggpu_data_set_weights)
 */
static pggpu_data *
load_w(pggpu_backend be, const dataset *D, const double *w, int64_t lo, int64_t hi, bool by_set)
{
	pggpu_error err = {0};
	pggpu_data *ds = NULL;
	int64_t		B;

	if (!CHECK(pggpu_data_open(&ds, be, 0, D->d, hi - lo, &err) == PGGPU_OK, "open: %s", err.msg))
		return NULL;
	B = pggpu_data_batch_rows(ds);
	for (int64_t r0 = lo; r0 < hi; r0 += B)
	{
		int64_t		m = hi - r0 < B ? hi - r0 : B;
		double	   *buf = pggpu_data_batch(ds);
		double	   *wb = w && !by_set ? pggpu_data_batch_weights(ds) : NULL;

		for (int j = 0; j < D->d; j++)
			for (int64_t r = 0; r < m; r++)
				buf[j * B + r] = D->X[(r0 + r) * D->d + j];
		for (int64_t r = 0; wb && r < m; r++)
			wb[r] = w[r0 + r];
		if (!CHECK(pggpu_data_push(ds, m, &err) == PGGPU_OK, "push: %s", err.msg))
		{
			pggpu_data_close(ds);
			return NULL;
		}
	}
	if (w && by_set && !CHECK(pggpu_data_set_weights(ds, w + lo, &err) == PGGPU_OK, "set weights: %s", err.msg))
	{
		pggpu_data_close(ds);
		return NULL;
	}
	return ds;
}

/* a fit of D weighing w on be, over np parts (cut evenly; 1: one set), into o (km_alloc'd) */
static bool
wfit(const dataset *D, const double *w, pggpu_backend be, const pggpu_kmeans_params *p, int np, bool by_set,
	 km_out *o)
{
	pggpu_data *parts[4] = {0};
	pggpu_kmeans_result r = {0};
	pggpu_error err = {0};
	bool		ok = true;

	for (int i = 0; i < np && ok; i++)
		ok = (parts[i] = load_w(be, D, w, D->n * i / np, D->n * (i + 1) / np, by_set)) != NULL;
	if (ok)
	{
		r.centroids = o->C;
		r.sizes = o->sizes;
		r.labels = o->labels;
		o->st = np > 1 ? pggpu_kmeans_parts(parts, np, p, &r, &err) : pggpu_kmeans(parts[0], p, &r, &err);
		o->inertia = r.inertia;
		o->iters = r.iterations;
		o->conv = r.converged;
		ok = CHECK(o->st == PGGPU_OK, "kmeans: %s", err.msg);
	}
	for (int i = 0; i < 4; i++)
		pggpu_data_close(parts[i]);
	return ok;
}

/* the same labels, sizes and iterations, centroids and inertia within tol (0: the same bits) */
static void
cmp_fits(const char *what, const km_out *a, const km_out *b, int64_t n, int k, int d, double tol)
{
	int64_t		lab = 0,
				sz = 0,
				cen = 0;

	for (int64_t i = 0; i < n; i++)
		lab += a->labels[i] != b->labels[i];
	for (int c = 0; c < k; c++)
		sz += a->sizes[c] != b->sizes[c];
	for (int64_t e = 0; e < (int64_t) k * d; e++)
		cen += tol == 0 ? memcmp(&a->C[e], &b->C[e], sizeof(double)) != 0 :
			fabs(a->C[e] - b->C[e]) > tol * (1 + fabs(b->C[e]));
	CHECK(lab == 0 && sz == 0 && cen == 0 && a->iters == b->iters &&
		  (tol == 0 ? a->inertia == b->inertia : rel_close(a->inertia, b->inertia, tol)),
		  "%s: %lld labels, %lld sizes, %lld centroid values differ; iterations %d and %d; inertia %.17g and %.17g",
		  what, (long long) lab, (long long) sz, (long long) cen, a->iters, b->iters, a->inertia, b->inertia);
}

/* rows 0, 1, 10, 11 weighing 3, 1, 1, 3 from centroids 0 and 11: 0.25 and 10.75, inertia 1.5, by hand */
static void
by_hand(pggpu_backend be)
{
	static const double X[] = {0, 1, 10, 11},
				w[] = {3, 1, 1, 3},
				init[] = {0, 11};
	dataset		D = {.n = 4, .d = 1, .X = (double *) X};
	pggpu_kmeans_params p = {.k = 2, .max_iter = 10, .tol = 0, .init = PGGPU_INIT_GIVEN, .init_centroids = init};
	km_out		o;

	set_case("weights by hand (%s)", be_name(be));
	km_alloc(&o, 4, 2, 1);
	if (wfit(&D, w, be, &p, 1, false, &o))
		CHECK(o.C[0] == 0.25 && o.C[1] == 10.75 && o.inertia == 1.5 && o.sizes[0] == 2 && o.sizes[1] == 2 &&
			  o.labels[0] == 0 && o.labels[3] == 1,
			  "centroids %.17g %.17g, inertia %.17g, sizes %lld %lld", o.C[0], o.C[1], o.inertia,
			  (long long) o.sizes[0], (long long) o.sizes[1]);
	/* a row of weight 0 is labelled and moves nothing: the far row 100 with weight 0 */
	{
		static const double X2[] = {0, 1, 10, 11, 100},
					w2[] = {3, 1, 1, 3, 0};
		dataset		D2 = {.n = 5, .d = 1, .X = (double *) X2};
		km_out		o2;

		km_alloc(&o2, 5, 2, 1);
		if (wfit(&D2, w2, be, &p, 1, false, &o2))
			CHECK(o2.C[0] == 0.25 && o2.C[1] == 10.75 && o2.labels[4] == 1 && o2.sizes[1] == 3 &&
				  o2.inertia == 1.5,
				  "weight 0: centroids %.17g %.17g, label %d, size %lld, inertia %.17g", o2.C[0], o2.C[1],
				  o2.labels[4], (long long) o2.sizes[1], o2.inertia);
		km_free(&o2);
	}
	km_free(&o);
}

/*
 * Every weight 1: the unweighted fit (the set fits as an unweighted one:
 * bit for bit on the CPU, on the GPU as two of its runs agree); integer
 * weights: the fit of the rows repeated that many times (given centroids:
 * the same Lloyd iterations)
 */
static void
ones_and_repeats(pggpu_backend be, int64_t n, int d, int k, uint64_t seed)
{
	dataset		D = {0},
				R = {0};
	double	   *ones = xmalloc(sizeof(double) * n),
			   *w = xmalloc(sizeof(double) * n),
			   *init = xmalloc(sizeof(double) * k * d);
	int64_t		m = 0;
	rng			g = rng_make(seed);
	km_out		a,
				b,
				rep;
	/* (the GPU's global atomics add a sum in any order: its own runs differ in the last bits) */
	double		tol = be == PGGPU_BACKEND_CPU ? 0 : 1e-12;
	pggpu_kmeans_params p = {.k = k, .max_iter = 100, .tol = 0, .seed = seed, .init = PGGPU_INIT_KMEANSPP};

	gen_blobs(&D, n, d, k, 8, seed);
	for (int64_t i = 0; i < n; i++)
	{
		ones[i] = 1;
		w[i] = (double) (rng_u64(&g) % 4);
		m += (int64_t) w[i];
	}
	km_alloc(&a, n, k, d);
	km_alloc(&b, n, k, d);
	set_case("weights 1 (%s, %lld x %d, k = %d)", be_name(be), (long long) n, d, k);
	for (int init_kind = 0; init_kind < 3; init_kind++)
	{
		char		what[64];

		p.init = init_kind == 0 ? PGGPU_INIT_KMEANSPP : init_kind == 1 ? PGGPU_INIT_RANDOM : PGGPU_INIT_PARALLEL;
		snprintf(what, sizeof(what), "all 1 against none, init %s", init_name(p.init));
		if (wfit(&D, NULL, be, &p, 1, false, &a) && wfit(&D, ones, be, &p, 1, false, &b))
			cmp_fits(what, &b, &a, n, k, d, tol);
	}

	/* repeats: the first k rows of weight > 0 as the given centroids */
	data_alloc(&R, m, d, false);
	for (int64_t i = 0, r = 0, c = 0; i < n; i++)
	{
		for (int t = 0; t < (int) w[i]; t++, r++)
			memcpy(R.X + r * d, D.X + i * d, sizeof(double) * d);
		if (w[i] > 0 && c < k)
			memcpy(init + d * c++, D.X + i * d, sizeof(double) * d);
	}
	p.init = PGGPU_INIT_GIVEN;
	p.init_centroids = init;
	km_alloc(&rep, m, k, d);
	set_case("weights 0..3 as repeated rows (%s, %lld x %d, k = %d)", be_name(be), (long long) n, d, k);
	if (wfit(&D, w, be, &p, 1, false, &a) && wfit(&R, NULL, be, &p, 1, false, &rep))
	{
		int64_t		bad = 0,
					cen = 0;

		for (int64_t i = 0, r = 0; i < n; r += (int64_t) w[i], i++)
			bad += w[i] > 0 && a.labels[i] != rep.labels[r];
		for (int64_t e = 0; e < (int64_t) k * d; e++)
			cen += fabs(a.C[e] - rep.C[e]) > 1e-9 * (1 + fabs(rep.C[e]));
		/* (a row of weight 0 may change its label once more: one iteration more, no move) */
		CHECK(bad == 0 && cen == 0 && (a.iters == rep.iters || a.iters == rep.iters + 1) &&
			  rel_close(a.inertia, rep.inertia, 1e-9),
			  "%lld labels, %lld centroid values differ; iterations %d and %d; inertia %.17g and %.17g",
			  (long long) bad, (long long) cen, a.iters, rep.iters, a.inertia, rep.inertia);
	}
	km_free(&rep);
	km_free(&a);
	km_free(&b);
	data_free(&D);
	data_free(&R);
	free(ones);
	free(w);
	free(init);
}

/*
 * Far rows of weight 0 are never seeds and never pull a centroid (each
 * init); unweighted, the same rows take centroids of their own (so the
 * check can fail).  One fit over one set, three parts, weights by batch
 * or set at once.
 */
static void
zero_weight_outliers(pggpu_backend be)
{
	const int64_t n = 4000;
	const int	d = 4,
				k = 6,
				far = 40;
	dataset		D = {0};
	double	   *w = xmalloc(sizeof(double) * n);
	km_out		o,
				other;
	pggpu_kmeans_params p = {.k = k, .max_iter = 100, .tol = 1e-4, .seed = 11};

	gen_blobs(&D, n, d, k, 8, 5);
	for (int64_t i = 0; i < n; i++)
		w[i] = i % 7 == 0 ? 0.5 : 2.0;
	for (int64_t i = 0; i < far; i++)
	{
		for (int j = 0; j < d; j++)
			D.X[(i * 97) * d + j] = 1e4 * (1 + (double) i);
		w[i * 97] = 0;
	}
	km_alloc(&o, n, k, d);
	km_alloc(&other, n, k, d);
	set_case("weights 0 on far rows (%s)", be_name(be));
	for (int init_kind = 0; init_kind < 3; init_kind++)
	{
		int			big = 0;

		p.init = init_kind == 0 ? PGGPU_INIT_KMEANSPP : init_kind == 1 ? PGGPU_INIT_RANDOM : PGGPU_INIT_PARALLEL;
		if (!wfit(&D, w, be, &p, 1, false, &o))
			continue;
		for (int64_t e = 0; e < (int64_t) k * d; e++)
			big += fabs(o.C[e]) > 1000;
		CHECK(big == 0, "init %s: %d centroid values out among the rows of weight 0", init_name(p.init), big);
		if (wfit(&D, w, be, &p, 3, true, &other))
			cmp_fits(init_name(p.init), &other, &o, n, k, d, 1e-12);
		if (p.init == PGGPU_INIT_KMEANSPP && wfit(&D, NULL, be, &p, 1, false, &other))
		{
			big = 0;
			for (int64_t e = 0; e < (int64_t) k * d; e++)
				big += fabs(other.C[e]) > 1000;
			CHECK(big > 0, "unweighted: no centroid among the far rows (the check could not fail)");
		}
	}
	km_free(&o);
	km_free(&other);
	data_free(&D);
	free(w);
}

/* the CPU's weighted fit and the GPU's: the same labels, centroids to summation order */
static void
cpu_gpu(int64_t n, int d, int k, pggpu_init init, pggpu_algorithm algorithm)
{
	dataset		D = {0};
	double	   *w = xmalloc(sizeof(double) * n);
	rng			g = rng_make(99);
	km_out		c,
				gp;
	pggpu_kmeans_params p = {.k = k, .max_iter = 50, .tol = 1e-4, .seed = 21, .init = init,
	.algorithm = algorithm};

	set_case("weights, CPU and GPU (%lld x %d, k = %d, %s%s)", (long long) n, d, k, init_name(init),
			 algorithm == PGGPU_ALGORITHM_HIERARCHICAL ? ", hierarchical" : "");
	gen_blobs(&D, n, d, k, 6, 17);
	for (int64_t i = 0; i < n; i++)
		w[i] = 0.25 + 4 * rng_unif(&g);
	km_alloc(&c, n, k, d);
	km_alloc(&gp, n, k, d);
	if (wfit(&D, w, PGGPU_BACKEND_CPU, &p, 1, false, &c) && wfit(&D, w, PGGPU_BACKEND_GPU, &p, 1, false, &gp))
		cmp_fits("GPU against CPU", &gp, &c, n, k, d, 1e-11);
	km_free(&c);
	km_free(&gp);
	data_free(&D);
	free(w);
}

/*
 * Standard scaling of a weighted set: its weighted mean and deviation; every
 * weight 1 as none, bit for bit; integer weights as repeated rows
 */
static void
standardize_weighted(pggpu_backend be)
{
	const int64_t n = 1500;
	const int	d = 3;
	dataset		D = {0},
				R = {0};
	double	   *w = xmalloc(sizeof(double) * n),
			   *ones = xmalloc(sizeof(double) * n);
	double		mean[3][3],
				sd[3][3];
	int64_t		m = 0;
	pggpu_error err = {0};

	set_case("weights: standard scaling (%s)", be_name(be));
	gen_uniform(&D, n, d, -5, 20, 3);
	for (int64_t i = 0; i < n; i++)
	{
		w[i] = (double) (i % 3);
		ones[i] = 1;
		m += i % 3;
	}
	data_alloc(&R, m, d, false);
	for (int64_t i = 0, r = 0; i < n; i++)
		for (int t = 0; t < (int) w[i]; t++, r++)
			memcpy(R.X + r * d, D.X + i * d, sizeof(double) * d);
	for (int v = 0; v < 3; v++)
	{
		const dataset *S = v == 2 ? &R : &D;
		pggpu_data *ds = load_w(be, S, v == 0 ? w : v == 1 ? ones : NULL, 0, S->n, v == 1);

		if (ds == NULL)
			continue;
		CHECK(pggpu_data_standardize(ds, mean[v], sd[v], &err) == PGGPU_OK, "standardize: %s", err.msg);
		pggpu_data_close(ds);
	}
	for (int j = 0; j < d; j++)
		CHECK(rel_close(mean[0][j], mean[2][j], 1e-12) && rel_close(sd[0][j], sd[2][j], 1e-12),
			  "column %d: weighted mean %.17g sd %.17g, of the repeated rows %.17g %.17g", j, mean[0][j], sd[0][j],
			  mean[2][j], sd[2][j]);
	{
		pggpu_data *ds = load_w(be, &D, NULL, 0, n, false);
		double		m0[3],
					s0[3];

		if (ds && CHECK(pggpu_data_standardize(ds, m0, s0, &err) == PGGPU_OK, "standardize: %s", err.msg))
			CHECK(memcmp(m0, mean[1], sizeof(m0)) == 0 && memcmp(s0, sd[1], sizeof(s0)) == 0,
				  "every weight 1: mean %.17g, sd %.17g; none: %.17g, %.17g", mean[1][0], sd[1][0], m0[0], s0[0]);
		pggpu_data_close(ds);
	}
	data_free(&D);
	data_free(&R);
	free(w);
	free(ones);
}

/* a sample's rows as kept: sorted rows (m x d) and their weights, by the sample's order */
static int64_t
sample_of(const dataset *D, const double *w, bool reversed, bool weigh, int64_t m, double *rows, double *ws)
{
	pggpu_sample *s = NULL;
	pggpu_error err = {0};
	double	   *X = xmalloc(sizeof(double) * D->n * D->d),
			   *W = xmalloc(sizeof(double) * D->n);
	const void *kept;
	const int64_t *order;
	int64_t		got = -1;

	/* column-major, in the given or the reversed order, in two offers */
	for (int64_t i = 0; i < D->n; i++)
	{
		int64_t		src = reversed ? D->n - 1 - i : i;

		for (int j = 0; j < D->d; j++)
			X[(int64_t) j * D->n + i] = D->X[src * D->d + j];
		W[i] = w ? w[src] : 1.0;
	}
	if (!CHECK(pggpu_sample_open(&s, D->d, m, 77, &err) == PGGPU_OK, "sample open: %s", err.msg))
		goto done;
	for (int part = 0; part < 2; part++)
	{
		int64_t		lo = part == 0 ? 0 : D->n / 3,
					hi = part == 0 ? D->n / 3 : D->n;

		if (weigh && !CHECK(pggpu_sample_weigh(s, W + lo, &err) == PGGPU_OK, "weigh: %s", err.msg))
			goto done;
		if (!CHECK(pggpu_sample_offer(s, X + lo, D->n, hi - lo, &err) == PGGPU_OK, "offer: %s", err.msg))
			goto done;
	}
	got = pggpu_sample_result(s, &kept, &order);
	for (int64_t t = 0; t < got; t++)
	{
		memcpy(rows + t * D->d, (const double *) kept + order[t] * D->d, sizeof(double) * D->d);
		ws[t] = pggpu_sample_weights(s) ? pggpu_sample_weights(s)[order[t]] : -1;
	}
done:
	pggpu_sample_close(s);
	free(X);
	free(W);
	return got;
}

/*
 * A weighted sample: the same rows and weights in the same order whatever
 * order the rows come in; every weight 1 as no weights; rows of equal
 * values and other weights both kept; each row with its own weight
 */
static void
weighted_sample(void)
{
	const int64_t n = 3000,
				m = 500;
	const int	d = 3;
	dataset		D = {0};
	double	   *w = xmalloc(sizeof(double) * n),
			   *ones = xmalloc(sizeof(double) * n);
	double	   *r[4],
			   *ws[4];
	int64_t		got[4];

	set_case("weights: a sample of weighted rows");
	gen_few(&D, n, d, 40, 3);	/* (40 distinct rows: many equal ones) */
	for (int64_t i = 0; i < n; i++)
	{
		w[i] = (double) (i % 3);
		ones[i] = 1;
	}
	for (int v = 0; v < 4; v++)
	{
		r[v] = xmalloc(sizeof(double) * m * d);
		ws[v] = xmalloc(sizeof(double) * m);
	}
	got[0] = sample_of(&D, w, false, true, m, r[0], ws[0]);
	got[1] = sample_of(&D, w, true, true, m, r[1], ws[1]);
	got[2] = sample_of(&D, ones, false, true, m, r[2], ws[2]);
	got[3] = sample_of(&D, NULL, true, false, m, r[3], ws[3]);
	CHECK(got[0] == m && got[1] == m && memcmp(r[0], r[1], sizeof(double) * m * d) == 0 &&
		  memcmp(ws[0], ws[1], sizeof(double) * m) == 0,
		  "the rows reversed: %lld and %lld rows, %s", (long long) got[0], (long long) got[1],
		  memcmp(r[0], r[1], sizeof(double) * m * d) ? "other rows" : "other weights");
	CHECK(got[2] == m && got[3] == m && memcmp(r[2], r[3], sizeof(double) * m * d) == 0,
		  "every weight 1: not the unweighted sample");
	{
		int64_t		heavy = 0,
					bad = 0;

		/* (of 40 distinct rows in 3 weights each, a sample of 500 holds equal rows of other weights) */
		for (int64_t t = 0; t < m; t++)
			for (int64_t u = t + 1; u < m; u++)
				heavy += memcmp(r[0] + t * d, r[0] + u * d, sizeof(double) * d) == 0 && ws[0][t] != ws[0][u];
		for (int64_t t = 0; t < m; t++)
			bad += !(ws[0][t] == 0 || ws[0][t] == 1 || ws[0][t] == 2);
		CHECK(heavy > 0 && bad == 0, "%lld neighbours of equal values and other weights, %lld weights not the rows'",
			  (long long) heavy, (long long) bad);
	}
	for (int v = 0; v < 4; v++)
		free(r[v]), free(ws[v]);
	data_free(&D);
	free(w);
	free(ones);
}

/* a weight no row may have: the push (or the set) fails, its rows not taken */
static void
bad_weights(pggpu_backend be)
{
	static const double bad[] = {-1, NAN, INFINITY, -INFINITY};
	pggpu_error err = {0};

	set_case("weights out of range (%s)", be_name(be));
	for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++)
	{
		pggpu_data *ds = NULL;
		double		w[3] = {1, bad[b], 2};

		if (pggpu_data_open(&ds, be, 0, 2, 3, &err) != PGGPU_OK)
		{
			CHECK(false, "open: %s", err.msg);
			continue;
		}
		memset(pggpu_data_batch(ds), 0, sizeof(double) * 2 * pggpu_data_batch_rows(ds));
		memcpy(pggpu_data_batch_weights(ds), w, sizeof(w));
		CHECK(pggpu_data_push(ds, 3, &err) == PGGPU_ERR_INVALID && pggpu_data_rows(ds) == 0,
			  "a push weighing %g: status %d, %lld rows", bad[b], (int) err.code, (long long) pggpu_data_rows(ds));
		w[1] = 1;
		memcpy(pggpu_data_batch_weights(ds), w, sizeof(w));
		CHECK(pggpu_data_push(ds, 3, &err) == PGGPU_OK, "push: %s", err.msg);
		w[1] = bad[b];
		CHECK(pggpu_data_set_weights(ds, w, &err) == PGGPU_ERR_INVALID && pggpu_data_weights(ds)[1] == 1,
			  "set_weights weighing %g", bad[b]);
		pggpu_data_close(ds);
	}
}

void
test_sample_weights(void)
{
	pggpu_backend bes[2] = {PGGPU_BACKEND_CPU, PGGPU_BACKEND_GPU};

	weighted_sample();
	for (int b = 0; b < 2; b++)
	{
		if (bes[b] == PGGPU_BACKEND_GPU && !have_gpu)
		{
			gpu_skipped++;
			continue;
		}
		by_hand(bes[b]);
		bad_weights(bes[b]);
		ones_and_repeats(bes[b], 3000, 5, 8, 1);
		ones_and_repeats(bes[b], 2000, 48, 70, 2);	/* (the GPU's product route) */
		zero_weight_outliers(bes[b]);
		standardize_weighted(bes[b]);
	}
	if (!have_gpu)
		return;
	cpu_gpu(20000, 8, 16, PGGPU_INIT_KMEANSPP, PGGPU_ALGORITHM_LLOYD);
	cpu_gpu(20000, 24, 200, PGGPU_INIT_KMEANSPP, PGGPU_ALGORITHM_LLOYD);	/* (tensor cores) */
	cpu_gpu(10000, 96, 100, PGGPU_INIT_PARALLEL, PGGPU_ALGORITHM_LLOYD);	/* (the product) */
	cpu_gpu(20000, 8, 100, PGGPU_INIT_RANDOM, PGGPU_ALGORITHM_HIERARCHICAL);
}
