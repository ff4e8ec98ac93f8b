#include "unit.h"

/* ---- the transform: every row's n nearest centroids --------------------------- */

/* rows of D scaled to unit length, as a cosine read leaves them (no zero row here) */
static void
unit_length(dataset *D)
{
	for (int64_t i = 0; i < D->n; i++)
		pggpu_unit_rows(D->X + i * D->d, 1, D->d);
}

/*
 * One case on one backend: with n = k every row's centroids in order of
 * (distance, index), each distance the reference's (the plain loop's sum,
 * its square root; cosine: half of it, 1 - cos) where the values need no
 * scaling; with n = 1 pggpu_assign's labels and distances bit for bit;
 * with n = 3 the first 3 of n = k, taken in slices of rows (the first
 * slice 1 row, then 7 a slice).  out: the n = k results, for the other
 * backend's comparison.
 */
static void
transform_case(pggpu_backend be, const char *name, const dataset *D, const double *C, int k,
			   pggpu_metric metric, bool plain, int32_t *cl, double *dist)
{
	const int64_t n = D->n;
	const int	d = D->d;
	pggpu_data *ds;
	pggpu_error err = {0};
	int32_t    *lab = xmalloc(sizeof(int32_t) * n),
			   *c1 = xmalloc(sizeof(int32_t) * n),
			   *c3 = xmalloc(sizeof(int32_t) * n * 3);
	double	   *ad = xmalloc(sizeof(double) * n),
			   *d1 = xmalloc(sizeof(double) * n),
			   *d3 = xmalloc(sizeof(double) * n * 3),
			   *Cu = xmalloc(sizeof(double) * k * d);
	int64_t		bad = 0,
				off = 0;

	set_case("transform %s n=%lld d=%d k=%d %s, %s", name, (long long) n, d, k,
			 metric == PGGPU_METRIC_COSINE ? "cosine" : "euclidean", be_name(be));
	if ((ds = load(be, D, n)) == NULL)
		goto out;
	pggpu_data_set_metric(ds, metric);
	if (!CHECK(pggpu_transform(ds, C, k, k, 0, n, cl, dist, &err) == PGGPU_OK, "n = k: %s", err.msg) ||
		!CHECK(pggpu_transform(ds, C, k, 1, 0, n, c1, d1, &err) == PGGPU_OK, "n = 1: %s", err.msg) ||
		!CHECK(pggpu_assign(ds, C, k, lab, ad, &err) == PGGPU_OK, "assign: %s", err.msg))
		goto close;
	for (int64_t i0 = 0; k >= 3 && i0 < n; i0 += i0 == 0 ? 1 : 7)
	{
		int64_t		m = i0 == 0 ? 1 : n - i0 < 7 ? n - i0 : 7;

		if (!CHECK(pggpu_transform(ds, C, k, 3, i0, m, c3 + i0 * 3, d3 + i0 * 3, &err) == PGGPU_OK,
				   "n = 3, rows %lld ..: %s", (long long) i0, err.msg))
			goto close;
	}
	if (k >= 3)
		for (int64_t i = 0; i < n; i++)
			for (int r = 0; r < 3; r++)
				bad += c3[i * 3 + r] != cl[i * k + r] || memcmp(&d3[i * 3 + r], &dist[i * k + r], sizeof(double)) != 0;
	CHECK(bad == 0, "n = 3: %lld results differ from n = k's first 3", (long long) bad);
	bad = 0;
	for (int64_t i = 0; i < n; i++)
		bad += c1[i] != lab[i] || memcmp(&d1[i], &ad[i], sizeof(double)) != 0 || cl[i * k] != lab[i];
	CHECK(bad == 0, "n = 1: %lld rows differ from pggpu_assign's label and distance", (long long) bad);

	/* every row: a permutation of the centroids, by (distance, index); the reference's distances */
	memcpy(Cu, C, sizeof(double) * k * d);
	if (metric == PGGPU_METRIC_COSINE)
		pggpu_unit_rows(Cu, k, d);
	bad = 0;
	for (int64_t i = 0; i < n && bad == 0; i++)
	{
		const int32_t *c = cl + i * k;
		const double *g = dist + i * k;

		for (int r = 0; r < k; r++)
		{
			double		s = sqdist(D->X + i * d, Cu + (int64_t) c[r] * d, d);
			double		want = metric == PGGPU_METRIC_COSINE ? s / 2 : sqrt(s);

			if (c[r] < 0 || c[r] >= k || (plain && g[r] != want) ||
				(r > 0 && (g[r] < g[r - 1] || (g[r] == g[r - 1] && c[r] <= c[r - 1]))))
			{
				bad++, off = i;
				break;
			}
		}
	}
	CHECK(bad == 0, "row %lld: its clusters are not every centroid by (distance, index) at the reference's distances",
		  (long long) off);
	CHECK(pggpu_transform(ds, C, k, 0, 0, n, c1, d1, &err) == PGGPU_ERR_INVALID &&
		  pggpu_transform(ds, C, k, k + 1, 0, n, c1, d1, &err) == PGGPU_ERR_INVALID &&
		  pggpu_transform(ds, C, k, 1, 1, n, c1, d1, &err) == PGGPU_ERR_INVALID &&
		  pggpu_transform(ds, C, k, 1, -1, 1, c1, d1, &err) == PGGPU_ERR_INVALID,
		  "n = 0, n = k + 1 and rows past the set were not refused");
close:
	pggpu_data_close(ds);
out:
	free(lab), free(c1), free(c3), free(ad), free(d1), free(d3), free(Cu);
}

/* both backends, the GPU's results the CPU's bit for bit */
static void
transform_both(const char *name, const dataset *D, const double *C, int k, pggpu_metric metric, bool plain)
{
	int32_t    *cl[2];
	double	   *dist[2];

	for (int b = 0; b < 2; b++)
	{
		cl[b] = xmalloc(sizeof(int32_t) * D->n * k);
		dist[b] = xmalloc(sizeof(double) * D->n * k);
	}
	transform_case(PGGPU_BACKEND_CPU, name, D, C, k, metric, plain, cl[0], dist[0]);
	if (!have_gpu)
		gpu_skipped++;
	else
	{
		transform_case(PGGPU_BACKEND_GPU, name, D, C, k, metric, plain, cl[1], dist[1]);
		CHECK(memcmp(cl[0], cl[1], sizeof(int32_t) * D->n * k) == 0 &&
			  memcmp(dist[0], dist[1], sizeof(double) * D->n * k) == 0,
			  "the GPU's transform is not the CPU's");
	}
	for (int b = 0; b < 2; b++)
		free(cl[b]), free(dist[b]);
}

void
test_transform(void)
{
	static const struct
	{
		int64_t		n;
		int			d,
					k;
	}			shapes[] = {
		{1, 1, 1}, {1000, 3, 7}, {3000, 33, 40}, {2000, 128, 100}, {5000, 8, 300},
	};

	for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++)
	{
		dataset		D,
					CD;

		gen_uniform(&D, shapes[t].n, shapes[t].d, -10, 10, 500 + t);
		gen_uniform(&CD, shapes[t].k, shapes[t].d, -10, 10, 600 + t);
		transform_both("uniform", &D, CD.X, shapes[t].k, PGGPU_METRIC_EUCLIDEAN, true);
		unit_length(&D);
		transform_both("uniform", &D, CD.X, shapes[t].k, PGGPU_METRIC_COSINE, true);
		data_free(&D);
		data_free(&CD);
	}

	/* exact ties (rows halfway between integer centroids, a centroid twice): the lower index first */
	{
		dataset		D;
		const double C[] = {6, 0, 2, 4, 8, 4, 10};

		data_alloc(&D, 1000, 1, false);
		for (int64_t i = 0; i < D.n; i++)
			D.X[i] = (double) (i % 13) - 1;
		transform_both("ties", &D, C, 7, PGGPU_METRIC_EUCLIDEAN, true);
		data_free(&D);
	}

	/* values near 1e200: computed at the assignment's power of two (the plain sum would overflow) */
	{
		dataset		D,
					CD;

		gen_uniform(&D, 500, 4, -1e200, 1e200, 700);
		gen_uniform(&CD, 6, 4, -1e200, 1e200, 701);
		transform_both("near 1e200", &D, CD.X, 6, PGGPU_METRIC_EUCLIDEAN, false);
		data_free(&D);
		data_free(&CD);
	}
}
