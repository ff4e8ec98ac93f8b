#include "unit.h"

/* ---- standard scaling, rows out, nearest, silhouette (cuda/columns.c) ---------- */

/* all rows of ds, as the algorithms see them */
static double *
all_rows(pggpu_data *ds, int64_t n, int d)
{
	int64_t    *rows = xmalloc(sizeof(int64_t) * n);
	double	   *out = xmalloc(sizeof(double) * n * d);
	pggpu_error err = {0};

	for (int64_t i = 0; i < n; i++)
		rows[i] = i;
	if (!CHECK(pggpu_data_get_rows(ds, rows, (int) n, out, &err) == PGGPU_OK, "get_rows: %s", err.msg))
		memset(out, 0, sizeof(double) * n * d);
	free(rows);
	return out;
}

/*
 * One data set standardized: mean and std near a long-double reference,
 * each row exactly (x - mean) / std, a constant column centred only; the
 * rows held at 2^-900 (a power of two: exact) standardize to the same
 * rows; another set of the same rows with the stored scaling
 * (shift_scale) holds them bit for bit; the GPU computes the same bits.
 */
static void
standardize_on(pggpu_backend be, const dataset *D, const double *mean0, const double *std0,
			   const double *rows0)
{
	int			d = D->d;
	double	   *mean = xmalloc(sizeof(double) * d),
			   *std = xmalloc(sizeof(double) * d);
	pggpu_error err = {0};
	pggpu_data *ds = load(be, D, 0);
	double	   *rows;

	if (ds == NULL)
		return;
	CHECK(pggpu_data_standardize(ds, mean, std, &err) == PGGPU_OK, "standardize: %s", err.msg);
	for (int j = 0; j < d; j++)
		CHECK(mean[j] == mean0[j] && std[j] == std0[j], "%s column %d: mean %.17g std %.17g, the CPU's %.17g %.17g",
			  be_name(be), j, mean[j], std[j], mean0[j], std0[j]);
	rows = all_rows(ds, D->n, d);
	CHECK(memcmp(rows, rows0, sizeof(double) * D->n * d) == 0, "%s: standardized rows differ from the CPU's", be_name(be));
	free(rows);
	pggpu_data_close(ds);

	/* a model's scaling on a fresh set of the same rows */
	ds = load(be, D, 0);
	CHECK(ds && pggpu_data_shift_scale(ds, mean0, std0, &err) == PGGPU_OK, "shift_scale: %s", err.msg);
	rows = all_rows(ds, D->n, d);
	CHECK(memcmp(rows, rows0, sizeof(double) * D->n * d) == 0, "%s: shift_scale's rows differ from standardize's", be_name(be));
	free(rows);
	pggpu_data_close(ds);
	free(mean);
	free(std);
}

void
test_standardize(void)
{
	dataset		D,
				T;
	int			d = 4;
	int64_t		n = 70001;		/* several tiles, the last one partial */
	double		mean[4],
				std[4];
	pggpu_error err = {0};
	pggpu_data *ds;
	double	   *rows;

	gen_uniform(&D, n, d, -1, 1, 5);
	for (int64_t i = 0; i < n; i++)
	{
		D.X[i * d + 0] = D.X[i * d + 0] * 1e5 + 3e6;	/* income-like */
		D.X[i * d + 1] *= 1e-3;
		D.X[i * d + 3] = 7.25;	/* constant */
	}
	set_case("standardize cpu");
	ds = load(PGGPU_BACKEND_CPU, &D, 0);
	if (ds == NULL)
		return;
	CHECK(pggpu_data_standardize(ds, mean, std, &err) == PGGPU_OK, "standardize: %s", err.msg);
	for (int j = 0; j < d; j++)
	{
		long double s = 0,
					ss = 0,
					m;

		for (int64_t i = 0; i < n; i++)
			s += D.X[i * d + j];
		m = s / n;
		for (int64_t i = 0; i < n; i++)
			ss += (D.X[i * d + j] - m) * (D.X[i * d + j] - m);
		CHECK(rel_close(mean[j], (double) m, 1e-12) || fabs(mean[j] - (double) m) < 1e-15,
			  "column %d: mean %.17g, reference %.17Lg", j, mean[j], m);
		if (j == 3)
			CHECK(std[j] == 1.0 && mean[j] == 7.25, "a constant column: mean %.17g std %.17g, not 7.25 and 1", mean[j], std[j]);
		else
			CHECK(rel_close(std[j], (double) sqrtl(ss / n), 1e-12), "column %d: std %.17g, reference %.17Lg",
				  j, std[j], sqrtl(ss / n));
	}
	rows = all_rows(ds, n, d);
	for (int64_t i = 0; i < n; i++)
		for (int j = 0; j < d; j++)
		{
			double		want = (D.X[i * d + j] - mean[j]) / std[j];

			if (!CHECK(rows[i * d + j] == want, "row %lld column %d: %.17g, not (x - mean) / std = %.17g",
					   (long long) i, j, rows[i * d + j], want))
				i = n;
		}
	pggpu_data_close(ds);

	/* then a fit on it: the same as on rows standardized beforehand */
	{
		dataset		S = D;
		pggpu_kmeans_params p = {.k = 5, .max_iter = 50, .tol = 0, .init = PGGPU_INIT_KMEANSPP, .seed = 3};
		km_out		a,
					b;

		S.X = rows;
		km_alloc(&a, n, p.k, d);
		km_alloc(&b, n, p.k, d);
		ds = load(PGGPU_BACKEND_CPU, &D, 0);
		if (ds && pggpu_data_standardize(ds, mean, std, &err) == PGGPU_OK)
			fit_set(ds, &p, &a, &err);
		pggpu_data_close(ds);
		km_run(PGGPU_BACKEND_CPU, &S, 0, &p, &b);
		cmp_km("fit after standardize vs on standardized rows", &a, &b, n, p.k, d, 0);
		km_free(&a);
		km_free(&b);
	}

	set_case("standardize, rows at 2^-900");
	data_alloc(&T, n, d, false);
	for (int64_t i = 0; i < n * d; i++)
		T.X[i] = ldexp(D.X[i], -900);
	{
		double		m2[4],
					s2[4];
		double	   *r2;

		ds = load(PGGPU_BACKEND_CPU, &T, 0);
		CHECK(ds && pggpu_data_standardize(ds, m2, s2, &err) == PGGPU_OK, "standardize: %s", err.msg);
		for (int j = 0; j < d; j++)
			CHECK(m2[j] == ldexp(mean[j], -900) && (j == 3 ? s2[j] == 1.0 : s2[j] == ldexp(std[j], -900)),
				  "column %d: mean %.17g std %.17g, not 2^-900 times the unscaled ones", j, m2[j], s2[j]);
		r2 = all_rows(ds, n, d);
		/* a constant column: 0 either way; the others: the same rows */
		CHECK(memcmp(r2, rows, sizeof(double) * n * d) == 0, "rows at 2^-900 standardize to other rows");
		free(r2);
		pggpu_data_close(ds);
	}
	data_free(&T);

	set_case("standardize: again, and on the gpu");
	standardize_on(PGGPU_BACKEND_CPU, &D, mean, std, rows);
	if (have_gpu)
		standardize_on(PGGPU_BACKEND_GPU, &D, mean, std, rows);
	else
		gpu_skipped++;

	set_case("shift_scale refuses");
	{
		double		bad[4] = {1, 1, 0, 1};

		ds = load(PGGPU_BACKEND_CPU, &D, 0);
		expect_error(ds ? pggpu_data_shift_scale(ds, mean, bad, &err) : PGGPU_ERR_INVALID, &err,
					 PGGPU_ERR_INVALID, "a zero deviation");
		pggpu_data_close(ds);
	}
	free(rows);
	data_free(&D);
}

/*
 * pggpu_nearest labels as the CPU's assignment pass; the silhouette as a
 * hand-computed case and a direct transcription of its definition.
 */
void
test_silhouette(void)
{
	dataset		D;
	int			k = 6,
				m = 300;
	km_out		o;
	pggpu_kmeans_params p = {.k = k, .max_iter = 100, .tol = 0, .init = PGGPU_INIT_KMEANSPP, .seed = 9};
	pggpu_error err = {0};
	pggpu_data *ds;
	int32_t    *lab;

	gen_blobs(&D, 5000, 3, k, 3.0, 21);
	km_alloc(&o, D.n, k, D.d);
	set_case("nearest");
	ds = load(PGGPU_BACKEND_CPU, &D, 0);
	if (ds == NULL)
		return;
	fit_set(ds, &p, &o, &err);
	for (int64_t i = 0; i < D.n; i++)
		if (!CHECK(pggpu_nearest(D.X + i * D.d, o.C, k, D.d, NULL) == o.labels[i],
				   "row %lld: nearest %d, the fit's label %d", (long long) i,
				   pggpu_nearest(D.X + i * D.d, o.C, k, D.d, NULL), o.labels[i]))
			break;

	set_case("silhouette");
	{
		int64_t    *rows = xmalloc(sizeof(int64_t) * m);
		double	   *X = xmalloc(sizeof(double) * m * D.d);
		double		score,
					want = 0;

		lab = xmalloc(sizeof(int32_t) * m);
		for (int i = 0; i < m; i++)
		{
			rows[i] = (i * 7919) % D.n;
			lab[i] = o.labels[rows[i]];
		}
		CHECK(pggpu_data_get_rows(ds, rows, m, X, &err) == PGGPU_OK, "get_rows: %s", err.msg);
		for (int i = 0; i < m; i++)
			CHECK(memcmp(X + i * D.d, D.X + rows[i] * D.d, sizeof(double) * D.d) == 0, "row %d fetched wrong", i);
		CHECK(pggpu_silhouette(ds, X, lab, m, k, &score, &err) == PGGPU_OK, "silhouette: %s", err.msg);
		/* the definition, row by row */
		for (int i = 0; i < m; i++)
		{
			double		a = 0,
						b = INFINITY;
			int			na = 0;

			for (int c = 0; c < k; c++)
			{
				double		s = 0;
				int			nc = 0;

				for (int j = 0; j < m; j++)
					if (lab[j] == c && j != i)
					{
						s += sqrt(sqdist(X + i * D.d, X + j * D.d, D.d));
						nc++;
					}
				if (c == lab[i])
					a = s, na = nc;
				else if (nc > 0)
					b = fmin(b, s / nc);
			}
			want += na == 0 ? 0 : (b - a / na) / fmax(a / na, b);
		}
		want /= m;
		CHECK(fabs(score - want) < 1e-12, "silhouette %.17g, by definition %.17g", score, want);
		CHECK(score > 0.5, "well separated blobs: silhouette %.3f", score);
		free(rows);
		free(X);
		free(lab);
	}
	pggpu_data_close(ds);

	/* by hand: {0, 1} and {10, 11} on a line; one cluster: NaN */
	{
		double		X[4] = {0, 1, 10, 11},
					score;
		int32_t		l2[4] = {0, 0, 1, 1},
					l1[4] = {0, 0, 0, 0};
		dataset		H;
		double		s0 = (10.5 - 1) / 10.5,
					s1 = (9.5 - 1) / 9.5;

		data_alloc(&H, 4, 1, false);
		memcpy(H.X, X, sizeof(X));
		ds = load(PGGPU_BACKEND_CPU, &H, 0);
		CHECK(ds && pggpu_silhouette(ds, X, l2, 4, 2, &score, &err) == PGGPU_OK, "silhouette: %s", err.msg);
		CHECK(fabs(score - (s0 + s1) / 2) < 1e-15, "hand case: %.17g, not %.17g", score, (s0 + s1) / 2);
		CHECK(ds && pggpu_silhouette(ds, X, l1, 4, 2, &score, &err) == PGGPU_OK && isnan(score),
			  "one cluster: %.17g, not NaN", score);

		/*
		 * scale-invariant: the same rows times 2^530 (squares overflow),
		 * 2^-560 (squares underflow) and 2^-1070 (subnormal) give the same
		 * silhouette, bit for bit (they are scaled as a fit scales)
		 */
		{
			double		want = 0;
			const int	es[3] = {530, -560, -1070};

			CHECK(ds && pggpu_silhouette(ds, X, l2, 4, 2, &want, &err) == PGGPU_OK, "silhouette: %s", err.msg);
			for (int t = 0; t < 3; t++)
			{
				double		Y[4];

				for (int i = 0; i < 4; i++)
					Y[i] = ldexp(X[i], es[t]);
				CHECK(ds && pggpu_silhouette(ds, Y, l2, 4, 2, &score, &err) == PGGPU_OK && score == want,
					  "rows times 2^%d: silhouette %.17g, unscaled %.17g", es[t], score, want);
			}
		}
		pggpu_data_close(ds);
		data_free(&H);
	}
	km_free(&o);
	data_free(&D);
}
