/*
 * columns.c - what a stored model needs beside the fit: standard scaling of
 * a data set's columns (the same on both backends: the backends sum each
 * tile's column in the order of pggpu_col_sum, the tiles are added here in
 * order), its rows scaled to norm 1 (cosine), rows copied out (a sample
 * for the silhouette), and the nearest centroid of one row on the host (a
 * scalar assignment), and the silhouette of a clustering on a sample of its
 * rows (choosing k).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compute_internal.h"

/* sum[j] := the sum of column j's terms over all rows (center: see col_sums) */
static pggpu_status
column_totals(pggpu_data *ds, const double *center, double *sum, pggpu_error *err)
{
	int64_t		tiles = (ds->n + ((int64_t) 1 << ds->log_b) - 1) >> ds->log_b;
	double	   *sums = (double *) pggpu_scratch_alloc(ds, sizeof(double) * tiles * ds->d);
	pggpu_status st;

	if (sums == NULL)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	if ((st = ds->ops->col_sums(ds, center, sums, err)) == PGGPU_OK)
		for (int j = 0; j < ds->d; j++)
		{
			sum[j] = 0.0;
			for (int64_t t = 0; t < tiles; t++)
				sum[j] = PGGPU_ADD(sum[j], sums[t * ds->d + j]);
		}
	pggpu_scratch_free(ds, sums);
	return st;
}

/* rows := (rows - sub) / div, sub and div in the units the rows were pushed in */
static pggpu_status
affine(pggpu_data *ds, const double *sub, const double *div, pggpu_error *err)
{
	double	   *h = (double *) pggpu_scratch_alloc(ds, sizeof(double) * 2 * ds->d);
	pggpu_status st;

	if (h == NULL)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	/* in the units the rows are held in (2^scale_e times): exact */
	for (int j = 0; j < ds->d; j++)
	{
		h[j] = ldexp(sub[j], ds->scale_e);
		h[ds->d + j] = ldexp(div[j], ds->scale_e);
	}
	ds->range_known = false;
	if ((st = ds->ops->col_affine(ds, h, h + ds->d, err)) == PGGPU_OK)
		ds->scale_e = 0;
	pggpu_scratch_free(ds, h);
	return st;
}

/*
 * sum[j] += column j's totals over every part (center: in the caller's
 * units, or NULL), each part's in the units part 0 holds its rows in
 * (exact: powers of two; squares: pow 2)
 */
static pggpu_status
parts_totals(pggpu_data *const *parts, int nparts, const double *center, int pow, double *sum,
			 pggpu_error *err)
{
	int			d = parts[0]->d;
	double	   *t = (double *) pggpu_scratch_alloc(parts[0], sizeof(double) * 2 * d);
	pggpu_status st = PGGPU_OK;

	if (t == NULL)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	memset(sum, 0, sizeof(double) * d);
	for (int pi = 0; pi < nparts && st == PGGPU_OK; pi++)
	{
		pggpu_data *ds = parts[pi];
		bool		was = ds->parked;

		if (ds->n == 0)
			continue;
		if ((st = pggpu_data_unpark(ds, err)) != PGGPU_OK)
			break;
		for (int j = 0; center && j < d; j++)
			t[d + j] = ldexp(center[j], ds->scale_e);
		st = column_totals(ds, center ? t + d : NULL, t, err);
		for (int j = 0; st == PGGPU_OK && j < d; j++)
			sum[j] = PGGPU_ADD(sum[j], ldexp(t[j], pow * (parts[0]->scale_e - ds->scale_e)));
		st = pggpu_repark(ds, was, st, err);
	}
	pggpu_scratch_free(parts[0], t);
	return st;
}

pggpu_status
pggpu_data_standardize_parts(pggpu_data *const *parts, int nparts, double *mean, double *std,
							 pggpu_error *err)
{
	pggpu_status st;
	double		n = 0;
	int			e0,
				d = parts[0]->d;
	bool		weighted = false;

	for (int pi = 0; pi < nparts; pi++)
	{
		pggpu_data *ds = parts[pi];
		bool		was = ds->parked;
		int			e;

		if (ds->d != d)
			return pggpu_fail(err, PGGPU_ERR_INVALID, "part %d has %d columns, part 1 %d", pi + 1, ds->d, d);
		/* weighted: the weighted mean and deviation (the terms times the weights; n their sum) */
		if ((st = pggpu_weights_sync(ds, err)) != PGGPU_OK)
			return st;
		weighted |= pggpu_data_weights(ds) != NULL;
		n += (double) ds->n;
		/* squares of the differences in range (exact: a power of two) */
		if (ds->n > 0 && ((st = pggpu_data_unpark(ds, err)) != PGGPU_OK ||
						  (st = pggpu_repark(ds, was, pggpu_prepare_scale(ds, NULL, 0, &e, err), err)) != PGGPU_OK))
			return st;
	}
	if (weighted)
		n = 0;
	for (int pi = 0; weighted && pi < nparts; pi++)
	{
		const double *w = pggpu_data_weights(parts[pi]);

		for (int64_t i = 0; i < parts[pi]->n; i++)
			n += w ? w[i] : 1.0;
	}
	if (n == 0)
		return pggpu_fail(err, PGGPU_ERR_INVALID, weighted ? "the rows weigh 0 in all: no weighted mean to standardize by" :
						  "no rows to standardize");
	e0 = parts[0]->scale_e;
	if ((st = parts_totals(parts, nparts, NULL, 1, mean, err)) != PGGPU_OK)
		return st;
	for (int j = 0; j < d; j++)
		mean[j] = ldexp(mean[j] / n, -e0);
	if ((st = parts_totals(parts, nparts, mean, 2, std, err)) != PGGPU_OK)
		return st;
	for (int j = 0; j < d; j++)
	{
		std[j] = sqrt(std[j] / n);
		/* as scikit-learn: a constant column is only centred */
		if (std[j] == 0)
			std[j] = ldexp(1.0, e0);
		/* back to the units pushed: exact, unless that leaves double's normal range */
		std[j] = ldexp(std[j], -e0);
		if (!isfinite(mean[j]) || !isfinite(std[j]) || std[j] < DBL_MIN ||
			(mean[j] != 0 && fabs(mean[j]) < DBL_MIN))
			return pggpu_fail(err, PGGPU_ERR_RANGE,
							  "column %d's mean (%g) or standard deviation (%g) is outside double precision's normal range",
							  j + 1, mean[j], std[j]);
	}
	for (int pi = 0; pi < nparts; pi++)
		if (parts[pi]->n > 0 && (st = pggpu_data_shift_scale(parts[pi], mean, std, err)) != PGGPU_OK)
			return st;
	return PGGPU_OK;
}

pggpu_status
pggpu_data_standardize(pggpu_data *ds, double *mean, double *std, pggpu_error *err)
{
	return pggpu_data_standardize_parts(&ds, 1, mean, std, err);
}

pggpu_status
pggpu_data_unit_rows(pggpu_data *ds, pggpu_error *err)
{
	bool		was = ds->parked;
	pggpu_status st;

	if (ds->scale_e != 0)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "rows are scaled to norm 1 before any other scaling");
	if (ds->n == 0)
		return PGGPU_OK;
	if ((st = pggpu_data_unpark(ds, err)) != PGGPU_OK)
		return st;
	ds->range_known = false;
	return pggpu_repark(ds, was, ds->ops->unit_rows(ds, err), err);
}

bool
pggpu_unit_row(double *x, int64_t stride, int d)
{
	return pggpu_normalize_at(x, stride, d, 1.0);
}

pggpu_status
pggpu_data_shift_scale(pggpu_data *ds, const double *mean, const double *std, pggpu_error *err)
{
	pggpu_status st;

	for (int j = 0; j < ds->d; j++)
		if (!isfinite(mean[j]) || !(std[j] > 0) || !isfinite(std[j]))
			return pggpu_fail(err, PGGPU_ERR_INVALID, "the scaling of column %d is not a finite mean and a positive deviation", j + 1);
	if (ds->n == 0)
		return PGGPU_OK;
	{
		bool		was = ds->parked;

		if ((st = pggpu_data_unpark(ds, err)) != PGGPU_OK)
			return st;
		return pggpu_repark(ds, was, affine(ds, mean, std, err), err);
	}
}

/*
 * x[i] := ldexp(x[i], e) for i < n.  Where 2^e is a normal double, x * 2^e
 * is the same correctly rounded value, and a multiplication the compiler
 * vectorizes (ldexp a call per value: half a second for a seeding set of
 * 65,536 rows of 768).
 */
void
pggpu_ldexp_all(double *x, int64_t n, int e)
{
	if (e == 0)
		return;
	if (e >= -1022 && e <= 1023)
	{
		double		f = ldexp(1.0, e);

		for (int64_t i = 0; i < n; i++)
			x[i] *= f;
	}
	else
		for (int64_t i = 0; i < n; i++)
			x[i] = ldexp(x[i], e);
}

pggpu_status
pggpu_data_get_rows(pggpu_data *ds, const int64_t *rows, int m, double *out, pggpu_error *err)
{
	pggpu_status st;

	for (int i = 0; i < m; i++)
		if (rows[i] < 0 || rows[i] >= ds->n)
			return pggpu_fail(err, PGGPU_ERR_INVALID, "row %lld is not in the data set", (long long) rows[i]);
	if (m == 0)
		return PGGPU_OK;
	if ((st = pggpu_data_unpark(ds, err)) != PGGPU_OK ||
		(st = ds->ops->get_rows(ds, rows, m, out, err)) != PGGPU_OK)
		return st;
	pggpu_ldexp_all(out, (int64_t) m * ds->d, -ds->scale_e);
	return PGGPU_OK;
}

int
pggpu_nearest(const double *x, const double *C, int k, int d, double *dist2)
{
	int			best = 0;
	double		bd = INFINITY;

	for (int c = 0; c < k; c++)
	{
		double		s = 0;

		for (int j = 0; j < d; j++)
		{
			double		v = PGGPU_ADD(x[j], -C[(int64_t) c * d + j]);

			s = PGGPU_ADD(s, PGGPU_MUL(v, v));
		}
		if (s < bd)
		{
			bd = s;
			best = c;
		}
	}
	if (dist2)
		*dist2 = bd;
	return best;
}

void
pggpu_unit_rows(double *C, int k, int d)
{
	pggpu_normalize_rows(C, k, d, 1.0);
}

bool
pggpu_sampled(uint64_t seed, int64_t i, double p)
{
	return pggpu_uniform(pggpu_mix64(seed ^ 0x5111b0e77e5a3b1dULL), i) <= p;
}

/* the distance the silhouette uses: Euclidean, or 1 - cos between unit rows */
static double
sil_distance(const double *a, const double *b, int d, pggpu_metric metric)
{
	double		s = 0;

	if (metric == PGGPU_METRIC_COSINE)
	{
		for (int j = 0; j < d; j++)
			s = PGGPU_ADD(s, PGGPU_MUL(a[j], b[j]));
		return fmax(0.0, 1.0 - s);
	}
	for (int j = 0; j < d; j++)
	{
		double		v = PGGPU_ADD(a[j], -b[j]);

		s = PGGPU_ADD(s, PGGPU_MUL(v, v));
	}
	return sqrt(s);
}

pggpu_status
pggpu_silhouette(pggpu_data *ds, double *X, const int32_t *labels, int m, int k,
				 double *score, pggpu_error *err)
{
	int			d = ds->d;
	double	   *sum;
	int64_t    *cnt;
	double		total = 0;
	int			used = 0;

	*score = NAN;

	/*
	 * Euclidean: the distances of rows near 1e154 overflow when squared, and
	 * those near 1e-162 underflow, as in a fit.  The silhouette is a ratio
	 * of distances, unchanged when every row is multiplied by one power of
	 * two: X is scaled as a fit scales its data (exact; e = 0 where it lies
	 * in range already).  Cosine rows are unit vectors: no scale.
	 */
	if (ds->metric != PGGPU_METRIC_COSINE)
	{
		double		lo = INFINITY,
					hi = 0;
		int			e;
		pggpu_status st;

		pggpu_magnitudes(X, (int64_t) m * d, &lo, &hi);
		if ((st = pggpu_scale_exponent(lo, hi, &e, err)) != PGGPU_OK)
			return st;
		pggpu_ldexp_all(X, (int64_t) m * d, e);
	}
	sum = (double *) pggpu_scratch_alloc(ds, sizeof(double) * m * (size_t) k);
	cnt = (int64_t *) pggpu_scratch_alloc(ds, sizeof(int64_t) * k);
	if (sum == NULL || cnt == NULL)
	{
		pggpu_scratch_free(ds, sum);
		pggpu_scratch_free(ds, cnt);
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory for a silhouette of %d rows and %d clusters", m, k);
	}
	memset(sum, 0, sizeof(double) * m * (size_t) k);
	memset(cnt, 0, sizeof(int64_t) * k);
	for (int i = 0; i < m; i++)
		cnt[labels[i]]++;
	/* every pair once: sum[i][c] := the distances from row i to the rows of cluster c */
	for (int i = 0; i < m; i++)
	{
		if (ds->interrupt)
			ds->interrupt(ds->interrupt_arg);
		for (int j = i + 1; j < m; j++)
		{
			double		dist = sil_distance(X + (int64_t) i * d, X + (int64_t) j * d, d, ds->metric);

			sum[(int64_t) i * k + labels[j]] += dist;
			sum[(int64_t) j * k + labels[i]] += dist;
		}
	}
	/* as scikit-learn: s = (b - a) / max(a, b), 0 for a row alone in its cluster */
	for (int i = 0; i < m; i++)
	{
		int			own = labels[i];
		double		a,
					b = INFINITY;

		for (int c = 0; c < k; c++)
			if (c != own && cnt[c] > 0)
				b = fmin(b, sum[(int64_t) i * k + c] / (double) cnt[c]);
		if (isinf(b))
			continue;			/* one cluster only in the sample */
		used++;
		if (cnt[own] < 2)
			continue;
		a = sum[(int64_t) i * k + own] / (double) (cnt[own] - 1);
		if (fmax(a, b) > 0)
			total += (b - a) / fmax(a, b);
	}
	if (used > 0)
		*score = total / used;
	pggpu_scratch_free(ds, sum);
	pggpu_scratch_free(ds, cnt);
	return PGGPU_OK;
}
