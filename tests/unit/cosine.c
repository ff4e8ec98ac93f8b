#include "unit.h"
#include "compute_internal.h"

/* ---- cosine: spherical k-means and cosine assignment ------------------------ */

/* the rows of D scaled to unit length (the caller's part: src/ does it as it reads) */
static void
unit_rows(dataset *D)
{
	for (int64_t i = 0; i < D->n; i++)
	{
		double	   *x = D->X + i * D->d;
		double		ss = 0;

		for (int j = 0; j < D->d; j++)
			ss += x[j] * x[j];
		for (int j = 0; j < D->d; j++)
			x[j] /= sqrt(ss);
	}
}

static double
dot(const double *x, const double *y, int d)
{
	double		s = 0;

	for (int j = 0; j < d; j++)
		s += x[j] * y[j];
	return s;
}

/*
 * Spherical k-means the textbook way, from given centroids: each row to the
 * centroid of largest cosine (lowest index on ties), each centroid the
 * normalised mean of its rows; max_iter iterations, then the final
 * assignment.  Returns the inertia, the sum of 1 - cos.
 */
static double
spherical_reference(const dataset *D, const double *C0, int k, int iters, double *C, int32_t *lab)
{
	int			d = D->d;
	double	   *sum = xmalloc(sizeof(double) * k * d);
	int64_t    *cnt = xmalloc(sizeof(int64_t) * k);
	double		inertia = 0;

	memcpy(C, C0, sizeof(double) * k * d);
	for (int c = 0; c < k; c++)
	{
		double		nrm = sqrt(dot(C + c * d, C + c * d, d));

		for (int j = 0; j < d; j++)
			C[c * d + j] /= nrm;
	}
	for (int it = 0; it <= iters; it++)
	{
		inertia = 0;
		memset(sum, 0, sizeof(double) * k * d);
		memset(cnt, 0, sizeof(int64_t) * k);
		for (int64_t i = 0; i < D->n; i++)
		{
			const double *x = D->X + i * d;
			int			best = 0;
			double		bc = -INFINITY;

			for (int c = 0; c < k; c++)
			{
				double		cs = dot(x, C + c * d, d);

				if (cs > bc)
					bc = cs, best = c;
			}
			lab[i] = best;
			inertia += 1 - bc;
			cnt[best]++;
			for (int j = 0; j < d; j++)
				sum[best * d + j] += x[j];
		}
		if (it == iters)
			break;
		for (int c = 0; c < k; c++)
		{
			double		nrm = sqrt(dot(sum + c * d, sum + c * d, d));

			if (cnt[c] > 0 && nrm > 0)
				for (int j = 0; j < d; j++)
					C[c * d + j] = sum[c * d + j] / nrm;
		}
	}
	free(sum);
	free(cnt);
	return inertia;
}

static bool
fit_cosine(pggpu_backend be, const dataset *D, const pggpu_kmeans_params *p, km_out *o)
{
	pggpu_data *ds = load(be, D, D->n);
	pggpu_error err = {0};

	if (ds == NULL)
		return false;
	pggpu_data_set_metric(ds, PGGPU_METRIC_COSINE);
	fit_set(ds, p, o, &err);
	pggpu_data_close(ds);
	return CHECK(o->st == PGGPU_OK, "%s cosine k-means: %s", be_name(be), err.msg);
}

/*
 * pggpu_normalize on vectors below double's normal range: the factor
 * 1 / |c| overflowed (Infinity, the vector NaN).  Now finite, of norm 1,
 * and equal to the same vector scaled into range first (exact) to within
 * an ulp or two; vectors in range keep their results bit for bit.
 */
static void
normalize_subnormal(void)
{
	const double cases[][3] = {
		{5e-324, 0, 0},
		{0, -5e-324, 1e-323},
		{1e-310, -3e-310, 2e-315},
		{2.2e-308, 1e-308, 0},
		{0x1p-1022, 0, 0},
	};

	set_case("pggpu_normalize on subnormal vectors");
	for (int t = 0; t < (int) (sizeof(cases) / sizeof(cases[0])); t++)
	{
		double		c[3],
					up[3],
					nrm = 0;

		memcpy(c, cases[t], sizeof(c));
		for (int j = 0; j < 3; j++)
			up[j] = ldexp(cases[t][j], 600);
		pggpu_normalize(c, 3, 1.0);
		pggpu_normalize(up, 3, 1.0);
		for (int j = 0; j < 3; j++)
		{
			CHECK(isfinite(c[j]), "case %d: element %d is %g", t, j, c[j]);
			CHECK(fabs(c[j] - up[j]) <= 4 * DBL_EPSILON, "case %d: element %d is %.17g, scaled first %.17g",
				  t, j, c[j], up[j]);
			nrm += c[j] * c[j];
		}
		CHECK(fabs(sqrt(nrm) - 1) < 1e-15, "case %d: norm %.17g", t, sqrt(nrm));
		/* a norm other than 1, as the fit's 2^e */
		memcpy(c, cases[t], sizeof(c));
		pggpu_normalize(c, 3, 0x1p500);
		for (int j = 0; j < 3; j++)
			CHECK(isfinite(c[j]) && fabs(ldexp(c[j], -500) - up[j]) <= 4 * DBL_EPSILON,
				  "case %d, norm 2^500: element %d is %.17g", t, j, c[j]);
	}
	/* in range: the one factor, as before */
	{
		double		c[3] = {3, -4, 0},
					f = 1.0 / (4 * sqrt(0.75 * 0.75 + 1));

		pggpu_normalize(c, 3, 1.0);
		CHECK(c[0] == 3 * f && c[1] == -4 * f && c[2] == 0, "{3, -4, 0}: %.17g %.17g %.17g", c[0], c[1], c[2]);
	}
	/* the public one, as gpu_kmeans_predict normalises a model's centroids */
	{
		double		C[4] = {5e-324, 0, 0, -5e-324};

		pggpu_unit_rows(C, 2, 2);
		CHECK(C[0] == 1 && C[1] == 0 && C[2] == 0 && C[3] == -1, "unit rows: %g %g %g %g", C[0], C[1], C[2], C[3]);
	}
}

/*
 * The backends' km_normalize (on the GPU a warp a centroid, its squares
 * summed by turns of the lanes) against pggpu_normalize on the host, bit
 * for bit: d below, at and past a warp's width and wide; centroids of
 * ordinary values, of values whose squares overflow, of subnormal values
 * (the other branch), zero, holding a NaN, and a signed zero; norms 1,
 * 2^-20 and 2^500 (the fit's scaled ones).
 */
static void
normalize_backends(void)
{
	static const int dims[] = {1, 3, 31, 32, 33, 100, 768};
	static const double norms[] = {1.0, 0x1p-20, 0x1p500};
	const int	k = 6;

	for (size_t di = 0; di < sizeof(dims) / sizeof(dims[0]); di++)
	{
		const int	d = dims[di];
		double	   *C = xmalloc(sizeof(double) * k * d),
				   *want = xmalloc(sizeof(double) * k * d),
				   *got = xmalloc(sizeof(double) * k * d);
		uint64_t	z = 0x9E3779B97F4A7C15ULL * (uint64_t) (d + 1);

		for (int j = 0; j < d; j++)
		{
			double		u;

			z = z * 6364136223846793005ULL + 1442695040888963407ULL;
			u = (double) (z >> 11) * 0x1p-53;
			C[0 * d + j] = (u - 0.5) * pow(10.0, (double) (j % 7) - 3);
			C[1 * d + j] = (j % 2 ? -1.0 : 1.0) * 1e300 * (0.5 + u);
			C[2 * d + j] = (double) (j % 3 - 1) * 5e-324 * (double) (1 + j % 5);
			C[3 * d + j] = 0.0;
			C[4 * d + j] = j == d / 2 ? NAN : u;
			C[5 * d + j] = j == 0 ? -0.0 : (u - 0.25) * 1e-200;
		}
		for (size_t ni = 0; ni < sizeof(norms) / sizeof(norms[0]); ni++)
		{
			memcpy(want, C, sizeof(double) * k * d);
			pggpu_normalize_rows(want, k, d, norms[ni]);
			for (int b = 0; b < 2; b++)
			{
				pggpu_backend be = b ? PGGPU_BACKEND_GPU : PGGPU_BACKEND_CPU;
				pggpu_data *ds = NULL;
				pggpu_error err = {0};
				int64_t		off = 0;

				set_case("km_normalize d=%d norm %g, %s against pggpu_normalize", d, norms[ni], be_name(be));
				if (b == 1 && !have_gpu)
				{
					gpu_skipped++;
					continue;
				}
				if (!CHECK(pggpu_data_open(&ds, be, 0, d, k, &err) == PGGPU_OK, "open: %s", err.msg))
					continue;
				memset(pggpu_data_batch(ds), 0, sizeof(double) * d * pggpu_data_batch_rows(ds));
				if (CHECK(pggpu_data_push(ds, k, &err) == PGGPU_OK &&
						  ds->ops->km_begin(ds, k, &err) == PGGPU_OK && (ds->k = k) > 0 &&
						  ds->ops->km_put_centroids(ds, C, &err) == PGGPU_OK &&
						  ds->ops->km_normalize(ds, norms[ni], &err) == PGGPU_OK &&
						  ds->ops->km_get_centroids(ds, got, &err) == PGGPU_OK,
						  "normalize: %s", err.msg))
				{
					/* (the same bits; NaN the same where it is NaN) */
					for (int64_t e = 0; e < (int64_t) k * d; e++)
						if (memcmp(&got[e], &want[e], sizeof(double)) != 0 && !(isnan(got[e]) && isnan(want[e])))
							off++;
					CHECK(off == 0, "%lld of %d values differ from pggpu_normalize's", (long long) off, k * d);
				}
				pggpu_data_close(ds);
			}
		}
		free(C);
		free(want);
		free(got);
	}
}

/*
 * A cosine fit's repair of an emptied cluster, bit for bit: 24 rows (and
 * a copy of the first), each near a given centroid of its own, and a 25th
 * centroid near none (emptied by the first step).  After one iteration
 * each row's centroid is its mean, the row itself, scaled onto the sphere
 * once (pggpu_normalize); the emptied one takes the row farthest from its
 * given centroid, scaled once.  (Until 1.11 a repair scaled every
 * centroid a second time: the same to 1e-16, not the same bits, for about
 * 40 % of vectors.)
 */
static void
cosine_repair(void)
{
	enum
	{
		m = 24,					/* rows apart from the copy, each its own centroid */
		n = m + 1,
		d = 48,
		k = m + 1
	};
	dataset		D = {0};
	rng			r = rng_make(977);
	double	   *C0 = xmalloc(sizeof(double) * k * d),
			   *want = xmalloc(sizeof(double) * k * d),
				far = -1;
	int			fi = -1;
	pggpu_kmeans_params p = {0};

	D.n = n;
	D.d = d;
	D.X = xmalloc(sizeof(double) * n * d);
	for (int64_t e = 0; e < (int64_t) m * d; e++)
		D.X[e] = rng_gauss(&r);
	D.n = m;
	unit_rows(&D);
	D.n = n;
	memcpy(D.X + m * d, D.X, sizeof(double) * d);
	/* row i's centroid: the row moved by 0.02 + 0.01 i (a random direction); the last near no row */
	for (int i = 0; i < m; i++)
	{
		double		u[d],
					nu = 0,
					nc = 0,
					dist = 0;

		for (int j = 0; j < d; j++)
			u[j] = rng_gauss(&r), nu += u[j] * u[j];
		for (int j = 0; j < d; j++)
			C0[i * d + j] = D.X[i * d + j] + (0.02 + 0.01 * i) * u[j] / sqrt(nu);
		for (int j = 0; j < d; j++)
			nc += C0[i * d + j] * C0[i * d + j];
		for (int j = 0; j < d; j++)
			dist += (D.X[i * d + j] - C0[i * d + j] / sqrt(nc)) * (D.X[i * d + j] - C0[i * d + j] / sqrt(nc));
		if (dist > far)
			far = dist, fi = i;
		memcpy(want + i * d, D.X + i * d, sizeof(double) * d);
		pggpu_normalize(want + i * d, d, 1.0);
	}
	for (int j = 0; j < d; j++)
		C0[m * d + j] = -D.X[0 * d + j] - D.X[1 * d + j];
	memcpy(want + m * d, want + fi * d, sizeof(double) * d);
	p.k = k;
	p.max_iter = 1;
	p.tol = 0;
	p.init = PGGPU_INIT_GIVEN;
	p.init_centroids = C0;
	for (int b = 0; b < 2; b++)
	{
		pggpu_backend be = b ? PGGPU_BACKEND_GPU : PGGPU_BACKEND_CPU;
		km_out		o;
		bool		used[k] = {false};
		int			unmatched = 0;

		set_case("cosine, an emptied cluster repaired (one iteration), %s", be_name(be));
		if (b == 1 && !have_gpu)
		{
			gpu_skipped++;
			continue;
		}
		km_alloc(&o, n, k, d);
		if (fit_cosine(be, &D, &p, &o))
		{
			/* (as a set: the result's order is the fit's own) */
			for (int c = 0; c < k; c++)
			{
				int			w = 0;

				while (w < k && (used[w] || memcmp(o.C + c * d, want + w * d, sizeof(double) * d) != 0))
					w++;
				if (w < k)
					used[w] = true;
				else
					unmatched++;
			}
			CHECK(unmatched == 0, "%d of %d centroids are not a row scaled once by pggpu_normalize", unmatched, k);
		}
		km_free(&o);
	}
	free(C0);
	free(want);
	data_free(&D);
}

void
test_cosine(void)
{
	normalize_subnormal();
	normalize_backends();
	cosine_repair();
	static const int shapes[][3] = {{5000, 8, 5}, {20000, 64, 300}, {3000, 300, 16}};

	for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++)
	{
		const int64_t n = shapes[si][0];
		const int	d = shapes[si][1],
					k = shapes[si][2];
		dataset		D;
		double	   *C0 = xmalloc(sizeof(double) * k * d),
				   *Cref = xmalloc(sizeof(double) * k * d);
		int32_t    *lref = xmalloc(sizeof(int32_t) * n);
		km_out		o[2];
		pggpu_kmeans_params p = {0};
		double		iref;

		/* k blobs of directions, the rows at lengths 0.5 to 50: cosine ignores them */
		gen_blobs(&D, n, d, k, 6.0, 900 + si);
		for (int64_t i = 0; i < n; i++)
			for (int j = 0; j < d; j++)
				D.X[i * d + j] *= 0.5 + (double) (i % 100) / 2;
		/* given: the first row of each blob, at another length (no cluster goes empty) */
		for (int c = 0; c < k; c++)
			for (int64_t i = 0; i < n; i++)
				if (D.group[i] == c)
				{
					for (int j = 0; j < d; j++)
						C0[c * d + j] = 7.5 * D.X[i * d + j];
					break;
				}
		unit_rows(&D);
		iref = spherical_reference(&D, C0, k, 4, Cref, lref);

		p.k = k;
		p.max_iter = 4;
		p.tol = 0;
		p.init = PGGPU_INIT_GIVEN;
		p.init_centroids = C0;
		for (int b = 0; b < 2; b++)
		{
			pggpu_backend be = b ? PGGPU_BACKEND_GPU : PGGPU_BACKEND_CPU;
			int64_t		diff = 0;
			double		worst = 0;

			set_case("cosine n=%lld d=%d k=%d, %s against the spherical reference", (long long) n, d, k,
					 be_name(be));
			km_alloc(&o[b], n, k, d);
			if (b == 1 && !have_gpu)
			{
				gpu_skipped++;
				continue;
			}
			if (!fit_cosine(be, &D, &p, &o[b]))
				continue;
			for (int64_t i = 0; i < n; i++)
				diff += o[b].labels[i] != lref[i];
			for (int64_t e = 0; e < (int64_t) k * d; e++)
				worst = fmax(worst, fabs(o[b].C[e] - Cref[e]));
			CHECK(diff == 0, "%lld labels differ from the reference", (long long) diff);
			CHECK(worst < 1e-12, "centroids differ from the reference by %g", worst);
			CHECK(fabs(o[b].inertia - iref) <= 1e-9 * fmax(1, iref), "inertia %.17g, reference %.17g",
				  o[b].inertia, iref);
			for (int c = 0; c < k; c++)
			{
				double		nrm = sqrt(dot(o[b].C + c * d, o[b].C + c * d, d));

				if (o[b].sizes[c] > 0 && fabs(nrm - 1) > 1e-14)
				{
					CHECK(false, "centroid %d has norm %.17g", c, nrm);
					break;
				}
			}
		}
		if (have_gpu && o[0].st == PGGPU_OK && o[1].st == PGGPU_OK)
		{
			set_case("cosine n=%lld d=%d k=%d, cpu vs gpu", (long long) n, d, k);
			cmp_km("cosine", &o[0], &o[1], n, k, d, 1e-12);
		}

		/* assignment: the cosine distance to the nearest normalised centroid */
		for (int b = 0; b < 2; b++)
		{
			pggpu_backend be = b ? PGGPU_BACKEND_GPU : PGGPU_BACKEND_CPU;
			pggpu_data *ds;
			pggpu_error err = {0};
			int32_t    *lab = xmalloc(sizeof(int32_t) * n);
			double	   *dist = xmalloc(sizeof(double) * n);

			set_case("cosine assign n=%lld d=%d k=%d, %s", (long long) n, d, k, be_name(be));
			if (b == 1 && !have_gpu)
				gpu_skipped++;
			else if ((ds = load(be, &D, n)) != NULL)
			{
				int64_t		diff = 0;
				double		worst = 0;

				pggpu_data_set_metric(ds, PGGPU_METRIC_COSINE);
				/* C0: not of unit length, normalised by the call */
				if (CHECK(pggpu_assign(ds, C0, k, lab, dist, &err) == PGGPU_OK, "assign: %s", err.msg))
					for (int64_t i = 0; i < n; i++)
					{
						const double *x = D.X + i * d;
						const double *c = C0 + (int64_t) lab[i] * d;
						double		cosv = dot(x, c, d) / sqrt(dot(c, c, d));

						for (int cc = 0; cc < k; cc++)
						{
							const double *y = C0 + (int64_t) cc * d;

							diff += dot(x, y, d) / sqrt(dot(y, y, d)) > cosv + 1e-12;
						}
						worst = fmax(worst, fabs(dist[i] - (1 - cosv)));
					}
				CHECK(diff == 0, "%lld rows have a centroid of larger cosine", (long long) diff);
				CHECK(worst < 1e-12, "distances differ from 1 - cos by %g", worst);
				pggpu_data_close(ds);
			}
			free(lab);
			free(dist);
		}
		for (int b = 0; b < 2; b++)
			km_free(&o[b]);
		free(C0);
		free(Cref);
		free(lref);
		data_free(&D);
	}
}
