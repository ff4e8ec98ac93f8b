/*
 * compute.c - the k-means driver (and assignment) of the compute layer's API;
 * the data sets it works on are dataset.c's.
 *
 * The driver is written once against pggpu_ops and runs unchanged on the CPU
 * backend (the reference) and the CUDA backend.  Per Lloyd iteration it asks
 * the backend for one pass (assignment + centroid update on the device) and
 * reads back three scalars; everything per row stays in the backend.
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
 * The exponent e for ds's data and the extra values (in the caller's units),
 * and ds scaled to 2^e times its rows as pushed.  ds keeps the exponent it
 * holds its rows at (ds->scale_e), so a later algorithm on the same set
 * scales from there: any number of fits and assignments on one set give
 * what each would alone.
 */
pggpu_status
pggpu_prepare_scale(pggpu_data *ds, const double *extra, int64_t nextra, int *e,
			  pggpu_error *err)
{
	double		lo = INFINITY,
				hi = 0;
	int			delta,
				first;
	pggpu_status st;

	*e = ds->scale_e;
	/*
	 * the rows' range in their own units (exact: powers of two), kept until
	 * the rows change (a push, an affine map): every partial step of a part
	 * asks again, and it is a pass over the rows
	 */
	if (ds->n > 0 && !ds->range_known)
	{
		if ((st = ds->ops->range(ds, &lo, &hi, err)) != PGGPU_OK)
			return st;
		if (hi > 0)
		{
			lo = ldexp(lo, -ds->scale_e);
			hi = ldexp(hi, -ds->scale_e);
		}
		ds->range_lo = lo;
		ds->range_hi = hi;
		ds->range_known = true;
	}
	else if (ds->n > 0)
	{
		lo = ds->range_lo;
		hi = ds->range_hi;
	}
	if (extra)
		pggpu_magnitudes(extra, nextra, &lo, &hi);
	if ((st = pggpu_scale_exponent(lo, hi, e, err)) != PGGPU_OK)
		return st;
	delta = *e - ds->scale_e;
	if (delta == 0 || ds->n == 0)
		return PGGPU_OK;
	/* subnormal data need 2^delta past double's range (delta > 1023): two steps */
	first = delta > 1000 || delta < -1000 ? delta / 2 : 0;
	if (first != 0 && (st = ds->ops->scale(ds, ldexp(1.0, first), err)) != PGGPU_OK)
		return st;
	if ((st = ds->ops->scale(ds, ldexp(1.0, delta - first), err)) == PGGPU_OK)
		ds->scale_e = *e;
	return st;
}


/* ---- empty clusters ------------------------------------------------------- */

#define CHECK(expr) do { if ((st = (expr)) != PGGPU_OK) goto done; } while (0)

/*
 * Empty clusters take the rows farthest from their centroids (as in
 * scikit-learn), one distinct row each, in cluster order.  Rows that sit on
 * their centroid never qualify (it would change nothing): with fewer distinct
 * rows than k, some clusters stay empty.
 */
static pggpu_status
repair_empty(pggpu_data *ds, const pggpu_kmeans_params *p, int64_t *counts,
			 pggpu_error *err)
{
	pggpu_status st;

	if ((st = ds->ops->km_counts(ds, counts, err)) != PGGPU_OK)
		return st;
	for (int c = 0; c < ds->k; c++)
	{
		int64_t		row;

		if (counts[c] != 0)
			continue;
		/* a pick is a pass over the rows: k of them may take long */
		pggpu_interrupts(p);
		if ((st = ds->ops->km_pick(ds, PGGPU_PICK_FARTHEST, 0, &row, err)) != PGGPU_OK)
			return st;
		/* no row qualifies, and picks only take rows away: none will */
		if (row < 0)
			break;
		if ((st = ds->ops->km_point(ds, row, c, PGGPU_D2_KEEP, NULL, err)) != PGGPU_OK)
			return st;
	}
	return PGGPU_OK;
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

/*
 * One start: seeding (given centroids, scaled by 2^e, or by p->init) and
 * Lloyd's iterations; the final labelling pass leaves labels, distances and
 * *sst consistent with the centroids.
 */
static pggpu_status
one_start(pggpu_data *ds, const pggpu_kmeans_params *p, int start, int e, int64_t *counts,
		  const double *given, pggpu_kmeans_result *r, pggpu_step_stats *sst,
		  pggpu_error *err)
{
	const pggpu_ops *ops = ds->ops;
	double		t0;
	pggpu_status st;

	if (p->progress)
		p->progress(p->progress_arg, start, 0);
	CHECK(ops->km_begin(ds, p->k, err));
	ds->k = p->k;
	t0 = pggpu_seconds();
	switch (p->init)
	{
		case PGGPU_INIT_GIVEN:
			CHECK(ops->km_put_centroids(ds, given, err));
			break;
		case PGGPU_INIT_RANDOM:
			CHECK(pggpu_seed_random(ds, p, err));
			break;
		case PGGPU_INIT_PARALLEL:
			CHECK(pggpu_seed_parallel(ds, p, err));
			break;
		default:
			CHECK(pggpu_seed_kmeanspp(ds, p, pggpu_seed_first(p, ds->n), err));
			break;
	}

	/*
	 * Iteration i labels every row by the centroids of iteration i-1 and
	 * moves each centroid to the mean of its rows.  It converged when at
	 * most tol * n labels changed (0 with tol = 0: then the centroids are
	 * the means of the labels they produce, a fixed point).
	 */
	r->seed_seconds += pggpu_seconds() - t0;
	t0 = pggpu_seconds();
	r->converged = false;
	r->iterations = 0;
	while (r->iterations < p->max_iter)
	{
		pggpu_interrupts(p);
		CHECK(ops->km_step(ds, true, sst, err));
		r->iterations++;
		r->changed = sst->changed;
		if (p->progress)
			p->progress(p->progress_arg, start, r->iterations);
		if (sst->empty > 0)
			CHECK(repair_empty(ds, p, counts, err));
		/* spherical: the means back onto the sphere (the rows' norm, 2^e) */
		if (ds->metric == PGGPU_METRIC_COSINE)
			CHECK(ops->km_normalize(ds, ldexp(1.0, e), err));
		if ((double) sst->changed <= p->tol * (double) ds->n)
		{
			r->converged = true;
			break;
		}
	}
	r->iterate_seconds += pggpu_seconds() - t0;

	/* labels, distances and sizes consistent with the final centroids */
	pggpu_interrupts(p);
	CHECK(ops->km_step(ds, false, sst, err));
done:
	return st;
}

pggpu_status
pggpu_kmeans(pggpu_data *ds, const pggpu_kmeans_params *p,
			 pggpu_kmeans_result *r, pggpu_error *err)
{
	const pggpu_ops *ops = ds->ops;
	int			d = ds->d;
	int			k = p->k;
	int			e = 0;
	int			starts = p->n_init > 1 ? p->n_init : 1;
	int64_t    *counts = NULL;
	double	   *given = NULL,
			   *best = NULL;
	double		best_inertia = INFINITY;
	int			best_iterations = 0;
	int64_t		best_changed = 0;
	bool		best_converged = false;
	pggpu_step_stats sst;
	pggpu_status st = PGGPU_OK;
	pggpu_interrupt_fn saved_interrupt = ds->interrupt;
	void	   *saved_arg = ds->interrupt_arg;

	if (k < 1 || k > ds->n)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "k = %d is not in 1..%lld",
						  k, (long long) ds->n);
	if (p->max_iter < 1 || !(p->tol >= 0))
		return pggpu_fail(err, PGGPU_ERR_INVALID, "max_iter or tol out of range");
	if ((unsigned) p->init > PGGPU_INIT_PARALLEL)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "unknown init %d", (int) p->init);
	if (p->init == PGGPU_INIT_GIVEN && p->init_centroids == NULL)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "no initial centroids given");
	if (p->init == PGGPU_INIT_GIVEN && starts > 1)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "n_init = %d with given centroids", starts);
	if ((st = pggpu_data_unpark(ds, err)) != PGGPU_OK)
		return st;

	counts = (int64_t *) pggpu_scratch_alloc(ds, sizeof(int64_t) * k);
	if (counts == NULL)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");

	if (p->check_interrupts)
	{
		ds->interrupt = p->check_interrupts;
		ds->interrupt_arg = p->interrupt_arg;
	}
	CHECK(pggpu_prepare_scale(ds, p->init == PGGPU_INIT_GIVEN ? p->init_centroids : NULL,
						(int64_t) k * d, &e, err));
	if (p->init == PGGPU_INIT_GIVEN)
	{
		given = (double *) pggpu_scratch_alloc(ds, sizeof(double) * k * d);
		if (given == NULL)
		{
			st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
			goto done;
		}
		for (int64_t i = 0; i < (int64_t) k * d; i++)
			given[i] = ldexp(p->init_centroids[i], e);
		if (ds->metric == PGGPU_METRIC_COSINE)
			pggpu_normalize_rows(given, k, d, ldexp(1.0, e));
	}
	if (starts > 1 && (best = (double *) pggpu_scratch_alloc(ds, sizeof(double) * k * d)) == NULL)
	{
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		goto done;
	}

	/*
	 * n_init starts, the seed of each from the caller's (pggpu_start_seed), the
	 * one of least inertia kept (the first on ties); its final labelling
	 * pass is made again from its centroids, which fix it
	 */
	r->seed_seconds = r->iterate_seconds = 0;
	for (int s = 0; s < starts; s++)
	{
		pggpu_kmeans_params q = *p;

		q.seed = pggpu_start_seed(p->seed, s);
		CHECK(one_start(ds, &q, s, e, counts, given, r, &sst, err));
		if (starts > 1 && sst.inertia < best_inertia)
		{
			best_inertia = sst.inertia;
			best_iterations = r->iterations;
			best_changed = r->changed;
			best_converged = r->converged;
			CHECK(ops->km_get_centroids(ds, best, err));
		}
	}
	if (starts > 1)
	{
		CHECK(ops->km_put_centroids(ds, best, err));
		pggpu_interrupts(p);
		CHECK(ops->km_step(ds, false, &sst, err));
		r->iterations = best_iterations;
		r->changed = best_changed;
		r->converged = best_converged;
	}

	CHECK(ops->km_counts(ds, r->sizes, err));
	CHECK(ops->km_get_centroids(ds, r->centroids, err));
	for (int64_t i = 0; i < (int64_t) k * d; i++)
		r->centroids[i] = ldexp(r->centroids[i], -e);
	r->inertia = ldexp(sst.inertia, -2 * e);
	if (ds->metric == PGGPU_METRIC_COSINE)
		r->inertia /= 2;		/* |x - c|^2 = 2 (1 - cos) on the sphere */
	if (r->labels)
		CHECK(ops->km_fetch(ds, r->labels, NULL, err));
	if (p->init != PGGPU_INIT_GIVEN)
		CHECK(pggpu_canonical_order(r, k, d, r->labels, ds->n, err));

done:
	ds->interrupt = saved_interrupt;
	ds->interrupt_arg = saved_arg;
	pggpu_scratch_free_all(ds);
	return st;
}

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
	CHECK(ds->ops->km_step(ds, false, &sst, err));
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
