/*
 * compute.c - what every algorithm of the compute layer computes with: the
 * power-of-two scale of the rows, the canonical numbering of clusters, the
 * seeds of n_init's starts, the assignment to given centroids, and the
 * transform (every centroid's distance, or the n nearest).  The k-means
 * driver is fit.c's; the data sets are dataset.c's.
 */
#include "compute_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- scaling -------------------------------------------------------------- */

/*
 * Squared distances of values near 1e200 overflow a double, and those of
 * values near 1e-200 underflow.  So the data (with any centroids given) are
 * multiplied by one power of two 2^e before any arithmetic, exact, chosen
 * so that every non-zero magnitude lies within [2^SCALE_LO, 2^(SCALE_HI+1)):
 * there the squares, and their sums over up to 2^20 columns, are normal
 * doubles with 2^22 to spare below (at most 2^1023 above: the inertia, a
 * sum over rows, may still be Infinity).  e = 0 where the data lie there already (results bit-identical
 * to unscaled); else the middle of the exponents that work, so that 1e200
 * beside 1 keeps both.  Magnitudes that span more than the window (2^1001,
 * about 1e301) have no such scale: PGGPU_ERR_RANGE, never a silently wrong
 * partition.
 */
#define SCALE_HI 500
#define SCALE_LO (-500)

/* the least and largest non-zero magnitudes of x (INFINITY and 0 if none) */
void
pggpu_magnitudes(const double *x, int64_t len, double *lo, double *hi)
{
	for (int64_t i = 0; i < len; i++)
	{
		double		a = fabs(x[i]);

		if (a > *hi)
			*hi = a;
		if (a > 0 && a < *lo)
			*lo = a;
	}
}

/*
 * The scale exponent for non-zero magnitudes in [lo, hi] (lo = INFINITY:
 * none), or PGGPU_ERR_RANGE.
 */
pggpu_status
pggpu_scale_exponent(double lo, double hi, int *e, pggpu_error *err)
{
	int			e_lo,
				e_hi;

	*e = 0;
	if (!(hi > 0) || !isfinite(hi) || !isfinite(lo))
		return PGGPU_OK;
	e_lo = SCALE_LO - ilogb(lo);
	e_hi = SCALE_HI - ilogb(hi);
	if (e_lo > e_hi)
		return pggpu_fail(err, PGGPU_ERR_RANGE,
						  "non-zero magnitudes from %.3g to %.3g span more than double precision can square at once (a ratio of 2^%d, about 1e301)",
						  lo, hi, SCALE_HI + 1 - SCALE_LO);
	if (e_lo > 0 || e_hi < 0)
		*e = e_lo + (e_hi - e_lo) / 2;
	return PGGPU_OK;
}

/*
 * The least and largest non-zero |value| of ds's rows as pushed (exact:
 * powers of two), kept until the rows change (a push, an affine map): every
 * step of a part asks again, and it is a pass over the rows
 */
pggpu_status
pggpu_data_range(pggpu_data *ds, double *lo, double *hi, pggpu_error *err)
{
	pggpu_status st;

	*lo = INFINITY;
	*hi = 0;
	if (ds->n == 0)
		return PGGPU_OK;
	if (!ds->range_known)
	{
		bool		was = ds->parked;

		if ((st = pggpu_data_unpark(ds, err)) != PGGPU_OK ||
			(st = pggpu_repark(ds, was, ds->ops->range(ds, lo, hi, err), err)) != PGGPU_OK)
			return st;
		if (*hi > 0)
		{
			*lo = ldexp(*lo, -ds->scale_e);
			*hi = ldexp(*hi, -ds->scale_e);
		}
		ds->range_lo = *lo;
		ds->range_hi = *hi;
		ds->range_known = true;
	}
	*lo = ds->range_lo;
	*hi = ds->range_hi;
	return PGGPU_OK;
}

/*
 * ds held at 2^e times its rows as pushed: ds keeps the exponent it holds
 * its rows at (ds->scale_e), so a later algorithm on the same set scales
 * from there, and any number of fits and assignments on one set give what
 * each would alone
 */
pggpu_status
pggpu_scale_to(pggpu_data *ds, int e, pggpu_error *err)
{
	int			delta = e - ds->scale_e,
				first;
	pggpu_status st;

	if (delta == 0 || ds->n == 0)
		return PGGPU_OK;
	/* subnormal data need 2^delta past double's range (delta > 1023): two steps */
	first = delta > 1000 || delta < -1000 ? delta / 2 : 0;
	if (first != 0 && (st = ds->ops->scale(ds, ldexp(1.0, first), err)) != PGGPU_OK)
		return st;
	if ((st = ds->ops->scale(ds, ldexp(1.0, delta - first), err)) == PGGPU_OK)
		ds->scale_e = e;
	return st;
}

/*
 * The exponent e for ds's data and the extra values (in the caller's
 * units), and ds scaled to 2^e times its rows as pushed
 */
pggpu_status
pggpu_prepare_scale(pggpu_data *ds, const double *extra, int64_t nextra, int *e,
					pggpu_error *err)
{
	double		lo,
				hi;
	pggpu_status st;

	*e = ds->scale_e;
	if ((st = pggpu_data_range(ds, &lo, &hi, err)) != PGGPU_OK)
		return st;
	if (extra)
		pggpu_magnitudes(extra, nextra, &lo, &hi);
	if ((st = pggpu_scale_exponent(lo, hi, e, err)) != PGGPU_OK)
		return st;
	return pggpu_scale_to(ds, *e, err);
}

/* ---- canonical numbering -------------------------------------------------- */

/* qsort's comparator reads these: one set a thread, so threads may fit at once */
static __thread const double *sort_centroids;
static __thread const int64_t *sort_sizes;
static __thread int sort_d;

static int
cmp_cluster(const void *a, const void *b)
{
	int			ia = *(const int *) a;
	int			ib = *(const int *) b;

	for (int j = 0; j < sort_d; j++)
	{
		double		x = sort_centroids[(int64_t) ia * sort_d + j];
		double		y = sort_centroids[(int64_t) ib * sort_d + j];

		if (x < y)
			return -1;
		if (x > y)
			return 1;
	}
	if (sort_sizes[ia] != sort_sizes[ib])
		return sort_sizes[ia] > sort_sizes[ib] ? -1 : 1;
	return ia < ib ? -1 : ia > ib;
}

/* renumbers clusters by centroid order; perm[new] = old */
pggpu_status
pggpu_canonical_order(pggpu_kmeans_result *r, int k, int d, int32_t *labels,
					  int64_t n, pggpu_error *err)
{
	int		   *perm = (int *) malloc(sizeof(int) * k);
	int32_t    *rank = (int32_t *) malloc(sizeof(int32_t) * k);
	double	   *c2 = (double *) malloc(sizeof(double) * k * d);
	int64_t    *s2 = (int64_t *) malloc(sizeof(int64_t) * k);

	if (!perm || !rank || !c2 || !s2)
	{
		free(perm), free(rank), free(c2), free(s2);
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	}
	for (int c = 0; c < k; c++)
		perm[c] = c;
	sort_centroids = r->centroids;
	sort_sizes = r->sizes;
	sort_d = d;
	qsort(perm, k, sizeof(int), cmp_cluster);
	for (int c = 0; c < k; c++)
	{
		rank[perm[c]] = c;
		memcpy(c2 + (int64_t) c * d, r->centroids + (int64_t) perm[c] * d,
			   sizeof(double) * d);
		s2[c] = r->sizes[perm[c]];
	}
	memcpy(r->centroids, c2, sizeof(double) * k * d);
	memcpy(r->sizes, s2, sizeof(int64_t) * k);
	if (labels)
		for (int64_t i = 0; i < n; i++)
			labels[i] = rank[labels[i]];
	free(perm), free(rank), free(c2), free(s2);
	return PGGPU_OK;
}

/* ---- k-means -------------------------------------------------------------- */

/* the seed of start s of n_init: start 0 has the caller's own */
uint64_t
pggpu_start_seed(uint64_t seed, int s)
{
	return s == 0 ? seed : pggpu_mix64(seed ^ (0xd6e8feb86659fd93ULL * (uint64_t) s));
}

#define CHECK(expr) do { if ((st = (expr)) != PGGPU_OK) goto done; } while (0)

pggpu_status
pggpu_assign(pggpu_data *ds, const double *centroids, int k, int32_t *labels,
			 double *distances, pggpu_error *err)
{
	int			d = ds->d;
	int			e;
	double	   *scaled;
	pggpu_step_stats sst;
	pggpu_status st;

	if (k < 1)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "k must be at least 1");
	if (ds->n == 0)
		return PGGPU_OK;
	if ((st = pggpu_data_unpark(ds, err)) != PGGPU_OK)
		return st;
	/* scratch: the CPU pass may call the callback, which may longjmp */
	scaled = (double *) pggpu_scratch_alloc(ds, sizeof(double) * k * d);
	if (scaled == NULL)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	CHECK(pggpu_prepare_scale(ds, centroids, (int64_t) k * d, &e, err));
	for (int64_t i = 0; i < (int64_t) k * d; i++)
		scaled[i] = ldexp(centroids[i], e);
	if (ds->metric == PGGPU_METRIC_COSINE)
		pggpu_normalize_rows(scaled, k, d, ldexp(1.0, e));
	CHECK(ds->ops->km_begin(ds, k, err));
	ds->k = k;
	CHECK(ds->ops->km_put_centroids(ds, scaled, err));
	CHECK(ds->ops->km_step(ds, false, true, &sst, err));
	CHECK(ds->ops->km_fetch(ds, labels, distances, err));
	if (distances && ds->metric == PGGPU_METRIC_COSINE)
		for (int64_t i = 0; i < ds->n; i++)
			distances[i] = ldexp(distances[i], -2 * e) / 2;	/* 1 - cos */
	else if (distances)
		for (int64_t i = 0; i < ds->n; i++)
			distances[i] = ldexp(sqrt(distances[i]), -e);
done:
	pggpu_scratch_free_all(ds);
	return st;
}

/*
 * The transform: for the rows first .. first + m - 1 of ds, each row's n
 * nearest of the k centroids (the lowest index on ties), nearest first, at
 * clusters[i n + r] (0-based) and distances[i n + r] as pggpu_assign's.  The same arithmetic as the
 * assignment's: rows and centroids at its power of two (cosine: the
 * centroids normalised to it), every distance the plain loop's sum; the
 * nearest-neighbour search (knn.c: exact on every route) with the rows as
 * its queries and the centroids as one tile, on the set's backend.  So
 * with n = 1 each row's cluster and distance are pggpu_assign's.
 */
pggpu_status
pggpu_transform(pggpu_data *ds, const double *centroids, int k, int n, int64_t first, int64_t m,
				int32_t *clusters, double *distances, pggpu_error *err)
{
	int			d = ds->d;
	int			e;
	int64_t    *at,
			   *idx;
	double	   *Q,
			   *C;
	pggpu_status st;

	if (k < 1 || n < 1 || n > k)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "n must be between 1 and k (%d), not %d", k, n);
	if (first < 0 || m < 0 || first > ds->n - m)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "rows %lld .. %lld are not in the data set",
						  (long long) first, (long long) (first + m - 1));
	if (m > INT32_MAX)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "a transform takes at most %d rows at a time", INT32_MAX);
	if (m == 0)
		return PGGPU_OK;
	if ((st = pggpu_data_unpark(ds, err)) != PGGPU_OK)
		return st;
	/* scratch: the interrupt callback may longjmp (and the handle is aux_knn for it) */
	at = (int64_t *) pggpu_scratch_alloc(ds, sizeof(int64_t) * m);
	idx = (int64_t *) pggpu_scratch_alloc(ds, sizeof(int64_t) * m * n);
	Q = (double *) pggpu_scratch_alloc(ds, sizeof(double) * m * d);
	C = (double *) pggpu_scratch_alloc(ds, sizeof(double) * k * d);
	if (!at || !idx || !Q || !C)
	{
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		goto done;
	}
	CHECK(pggpu_prepare_scale(ds, centroids, (int64_t) k * d, &e, err));
	for (int64_t i = 0; i < m; i++)
		at[i] = first + i;
	CHECK(pggpu_data_get_rows(ds, at, (int) m, Q, err));
	pggpu_ldexp_all(Q, m * d, e);	/* (the set's own values: get_rows gives them unscaled) */
	for (int64_t i = 0; i < (int64_t) k * d; i++)
		C[i] = ldexp(centroids[i], e);
	if (ds->metric == PGGPU_METRIC_COSINE)
		pggpu_normalize_rows(C, k, d, ldexp(1.0, e));
	CHECK(pggpu_knn_open(&ds->aux_knn, ds->backend, ds->gpu_index, d, PGGPU_METRIC_EUCLIDEAN, Q, m, n, err));
	pggpu_knn_set_threads(ds->aux_knn, ds->threads);
	if (ds->interrupt)
		pggpu_knn_set_interrupts(ds->aux_knn, ds->interrupt, ds->interrupt_arg);
	CHECK(pggpu_knn_tile(ds->aux_knn, C, k, false, NULL, NULL, idx, distances, err));
	for (int64_t i = 0; i < m * n; i++)
	{
		clusters[i] = (int32_t) idx[i];
		distances[i] = ds->metric == PGGPU_METRIC_COSINE ? ldexp(distances[i], -2 * e) / 2 :
			ldexp(sqrt(distances[i]), -e);
	}
done:
	pggpu_knn_close(ds->aux_knn);
	ds->aux_knn = NULL;
	pggpu_scratch_free_all(ds);
	return st;
}
