/*
 * parts.c - k-means over the rows of several data sets at once: the parts
 * of one relation held apart (chunks streamed through one GPU, several GPUs,
 * the nodes of a cluster; issues 28 and 30 build on it).  Each iteration
 * every part labels its rows by the current centroids and sums them by
 * cluster (pggpu_kmeans_partial: k x (d + 1) values and two scalars, all
 * that has to travel); the sums are added in part order on the host, which
 * computes the next centroids.  With the same starting centroids, the parts
 * give the fit of their rows in one data set, up to the rounding of adding
 * the sums in another order.
 *
 * A part found parked (pggpu_data_park) is parked again after each of its
 * steps: then at most two parts at a time hold device memory for their rows
 * (the next one's copy runs while this one computes), and every iteration
 * streams the rows of the parked parts through the GPU.
 *
 * Seeding across parts: a uniform sample of the rows of every part (each
 * row by its index in the union, so the sample depends on the seed and the
 * parts' sizes only), clustered on the CPU by pggpu_kmeans with the caller's
 * init; its centroids start the fit of all rows.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compute_internal.h"

#define CHECK(expr) do { if ((st = (expr)) != PGGPU_OK) goto done; } while (0)

/* rows of the seeding sample: SAMPLE_PER_K a cluster, at least SAMPLE_MIN */
#define SAMPLE_PER_K 40
#define SAMPLE_MIN 4096

pggpu_status
pggpu_kmeans_partial(pggpu_data *ds, const double *C, int k, bool begin, double *sums,
					 int64_t *counts, double *inertia, int64_t *changed, pggpu_error *err)
{
	const pggpu_ops *ops = ds->ops;
	int			d = ds->d;
	int			e;
	double	   *held = NULL;
	pggpu_step_stats sst;
	pggpu_status st;

	if (k < 1)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "k must be at least 1");
	memset(sums, 0, sizeof(double) * k * d);
	memset(counts, 0, sizeof(int64_t) * k);
	*inertia = 0;
	*changed = 0;
	if (ds->n == 0)
		return PGGPU_OK;
	if (!begin && ds->k != k)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "a partial step of %d clusters on a state of %d", k, ds->k);
	if ((st = pggpu_data_unpark(ds, err)) != PGGPU_OK)
		return st;
	held = (double *) pggpu_scratch_alloc(ds, sizeof(double) * k * d);
	if (held == NULL)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	CHECK(pggpu_prepare_scale(ds, C, (int64_t) k * d, &e, err));
	for (int64_t i = 0; i < (int64_t) k * d; i++)
		held[i] = ldexp(C[i], e);
	if (begin)
	{
		CHECK(ops->km_begin(ds, k, err));
		ds->k = k;
	}
	CHECK(ops->km_put_centroids(ds, held, err));
	/* labels by C, and each cluster's mean of its rows (the old centroid where none) */
	CHECK(ops->km_step(ds, true, &sst, err));
	CHECK(ops->km_counts(ds, counts, err));
	CHECK(ops->km_get_centroids(ds, held, err));
	for (int c = 0; c < k; c++)
		for (int j = 0; j < d; j++)
			sums[(int64_t) c * d + j] = counts[c] ? ldexp(held[(int64_t) c * d + j], -e) * (double) counts[c] : 0.0;
	*inertia = ldexp(sst.inertia, -2 * e);
	*changed = sst.changed;
done:
	pggpu_scratch_free(ds, held);
	return st;
}

/* the index in the union of row i of part q (parts in order) */
static int64_t
union_row(pggpu_data *const *parts, int q, int64_t i)
{
	for (int j = 0; j < q; j++)
		i += parts[j]->n;
	return i;
}

/*
 * The starting centroids of one start (p->seed already the start's): k-means
 * of a uniform sample of the union's rows, on the CPU, with the caller's init
 */
static pggpu_status
seed_from_sample(pggpu_data *const *parts, int nparts, const pggpu_kmeans_params *p,
				 int64_t n, double *C, pggpu_error *err)
{
	int			d = parts[0]->d;
	int64_t		want = (int64_t) p->k * SAMPLE_PER_K > SAMPLE_MIN ? (int64_t) p->k * SAMPLE_PER_K : SAMPLE_MIN;
	double		rate = want >= n ? 1.0 : (double) want / (double) n;
	pggpu_data *sds = NULL;
	int64_t    *rows = NULL;
	double	   *coords = NULL;		/* the sample's rows, m x d, in part order */
	int64_t		m = 0;
	int64_t    *sizes = NULL;
	pggpu_kmeans_params q = *p;
	pggpu_kmeans_result r = {0};
	pggpu_status st = PGGPU_OK;

	/* every part's sampled rows (in batches: pggpu_data_get_rows takes an int count) */
	for (int pi = 0; pi < nparts; pi++)
	{
		pggpu_data *ds = parts[pi];
		int64_t		mp = 0;

		rows = (int64_t *) pggpu_scratch_realloc(parts[0], rows, sizeof(int64_t) * (ds->n > 0 ? ds->n : 1));
		if (rows == NULL)
			break;
		for (int64_t i = 0; i < ds->n; i++)
			if (rate >= 1.0 || pggpu_sampled(p->seed, union_row(parts, pi, i), rate))
				rows[mp++] = i;
		coords = (double *) pggpu_scratch_realloc(parts[0], coords, sizeof(double) * (m + mp > 0 ? m + mp : 1) * d);
		if (coords == NULL)
			break;
		for (int64_t i0 = 0; i0 < mp; i0 += 65536)
		{
			int			take = (int) (mp - i0 < 65536 ? mp - i0 : 65536);
			bool		was = ds->parked;

			CHECK(pggpu_repark(ds, was, pggpu_data_get_rows(ds, rows + i0, take, coords + (m + i0) * d, err), err));
		}
		m += mp;
	}
	if (rows == NULL || coords == NULL)
	{
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		goto done;
	}
	if (m < p->k)
	{
		st = pggpu_fail(err, PGGPU_ERR_INVALID, "the seeding sample has %lld rows, fewer than k = %d",
						(long long) m, p->k);
		goto done;
	}

	/* their set: parts[0]->aux while it lives (closed there after a longjmp) */
	CHECK(pggpu_data_open(&sds, PGGPU_BACKEND_CPU, 0, d, m, err));
	parts[0]->aux = sds;
	sds->threads = parts[0]->threads;
	sds->pending = parts[0]->pending;
	sds->metric = parts[0]->metric;
	CHECK(pggpu_push_rows(sds, coords, m, err));
	sizes = (int64_t *) pggpu_scratch_alloc(parts[0], sizeof(int64_t) * p->k);
	if (sizes == NULL)
	{
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		goto done;
	}
	q.n_init = 1;
	q.progress = NULL;
	r.centroids = C;
	r.sizes = sizes;
	st = pggpu_kmeans(sds, &q, &r, err);
done:
	parts[0]->aux = NULL;
	pggpu_data_close(sds);
	pggpu_scratch_free(parts[0], rows);
	pggpu_scratch_free(parts[0], coords);
	pggpu_scratch_free(parts[0], sizes);
	return st;
}

/* one start's Lloyd iterations from C (updated in place); the stats of the last */
static pggpu_status
lloyd_parts(pggpu_data *const *parts, int nparts, const pggpu_kmeans_params *p, int start,
			int64_t n, double *C, double *sums, double *psums, int64_t *counts, int64_t *pcounts,
			pggpu_kmeans_result *r, pggpu_error *err)
{
	int			k = p->k;
	int			d = parts[0]->d;
	pggpu_status st;

	r->iterations = 0;
	r->converged = false;
	while (r->iterations < p->max_iter)
	{
		int64_t		changed = 0;
		double		inertia = 0;
		bool		was = parts[0]->parked,
					next_was = false;

		pggpu_interrupts(p);
		memset(sums, 0, sizeof(double) * k * d);
		memset(counts, 0, sizeof(int64_t) * k);

		for (int pi = 0; pi < nparts; pi++, was = next_was)
		{
			double		pin;
			int64_t		pch;

			/*
			 * the next part's rows on their way to the GPU (its own stream)
			 * while this one computes: the copies run back to back
			 */
			if (pi + 1 < nparts && (next_was = parts[pi + 1]->parked) &&
				(st = pggpu_data_unpark(parts[pi + 1], err)) != PGGPU_OK)
				return st;
			st = pggpu_kmeans_partial(parts[pi], C, k, r->iterations == 0, psums, pcounts, &pin, &pch, err);
			if ((st = pggpu_repark(parts[pi], was, st, err)) != PGGPU_OK)
				return st;
			for (int64_t i = 0; i < (int64_t) k * d; i++)
				sums[i] = PGGPU_ADD(sums[i], psums[i]);
			for (int c = 0; c < k; c++)
				counts[c] += pcounts[c];
			inertia += pin;
			changed += pch;
		}
		/* a cluster without rows keeps its centroid */
		for (int c = 0; c < k; c++)
			if (counts[c] > 0)
				for (int j = 0; j < d; j++)
					C[(int64_t) c * d + j] = sums[(int64_t) c * d + j] / (double) counts[c];
		if (parts[0]->metric == PGGPU_METRIC_COSINE)
			pggpu_normalize_rows(C, k, d, 1.0);
		r->iterations++;
		if (p->progress)
			p->progress(p->progress_arg, start, r->iterations);
		if ((double) changed <= p->tol * (double) n)
		{
			r->converged = true;
			break;
		}
	}
	return PGGPU_OK;
}

/*
 * The final labelling of every part by C (a partial step's labels; its
 * update is not kept): sizes, inertia (cosine: 1 - cos), labels in part
 * order (labels may be NULL)
 */
static pggpu_status
label_parts(pggpu_data *const *parts, int nparts, const double *C, int k, double *psums,
			int64_t *pcounts, int32_t *labels, int64_t *sizes, double *inertia, pggpu_error *err)
{
	int64_t		off = 0;
	pggpu_status st;

	memset(sizes, 0, sizeof(int64_t) * k);
	*inertia = 0;
	for (int pi = 0; pi < nparts; pi++)
	{
		pggpu_data *ds = parts[pi];
		double		pin;
		int64_t		pch;
		bool		was = ds->parked;

		if (ds->n == 0)
			continue;
		if ((st = pggpu_kmeans_partial(ds, C, k, false, psums, pcounts, &pin, &pch, err)) == PGGPU_OK && labels)
			st = ds->ops->km_fetch(ds, labels + off, NULL, err);
		if ((st = pggpu_repark(ds, was, st, err)) != PGGPU_OK)
			return st;
		for (int c = 0; c < k; c++)
			sizes[c] += pcounts[c];
		*inertia += pin;
		off += ds->n;
	}
	if (parts[0]->metric == PGGPU_METRIC_COSINE)
		*inertia /= 2;			/* |x - c|^2 = 2 (1 - cos) on the sphere */
	return PGGPU_OK;
}

pggpu_status
pggpu_kmeans_parts(pggpu_data *const *parts, int nparts, const pggpu_kmeans_params *p,
				   pggpu_kmeans_result *r, pggpu_error *err)
{
	int			k = p->k;
	int			d;
	int			starts = p->n_init > 1 ? p->n_init : 1;
	int64_t		n = 0;
	double	   *C = NULL,
			   *best = NULL,
			   *sums = NULL,
			   *psums = NULL;
	int64_t    *counts = NULL,
			   *pcounts = NULL;
	double		best_inertia = INFINITY;
	int			best_iterations = 0;
	bool		best_converged = false;
	pggpu_status st = PGGPU_OK;

	if (nparts < 1 || parts == NULL)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "no parts");
	d = parts[0]->d;
	for (int pi = 0; pi < nparts; pi++)
	{
		if (parts[pi]->d != d || parts[pi]->metric != parts[0]->metric)
			return pggpu_fail(err, PGGPU_ERR_INVALID, "part %d has other columns or another metric than part 1", pi + 1);
		n += parts[pi]->n;
	}
	if (k < 1 || k > n)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "k = %d for %lld rows", k, (long long) n);
	if (p->max_iter < 1 || !(p->tol >= 0) || (unsigned) p->init > PGGPU_INIT_PARALLEL ||
		(p->init == PGGPU_INIT_GIVEN && (p->init_centroids == NULL || starts > 1)))
		return pggpu_fail(err, PGGPU_ERR_INVALID, "invalid k-means parameters");
	C = (double *) pggpu_scratch_alloc(parts[0], sizeof(double) * k * d);
	best = (double *) pggpu_scratch_alloc(parts[0], sizeof(double) * k * d);
	sums = (double *) pggpu_scratch_alloc(parts[0], sizeof(double) * k * d);
	psums = (double *) pggpu_scratch_alloc(parts[0], sizeof(double) * k * d);
	counts = (int64_t *) pggpu_scratch_alloc(parts[0], sizeof(int64_t) * k);
	pcounts = (int64_t *) pggpu_scratch_alloc(parts[0], sizeof(int64_t) * k);
	if (!C || !best || !sums || !psums || !counts || !pcounts)
	{
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		goto done;
	}
	r->seed_seconds = r->iterate_seconds = 0;
	for (int s = 0; s < starts; s++)
	{
		pggpu_kmeans_params q = *p;
		double		t0 = pggpu_seconds(),
					inertia;

		q.seed = pggpu_start_seed(p->seed, s);
		if (p->progress)
			p->progress(p->progress_arg, s, 0);
		if (p->init == PGGPU_INIT_GIVEN)
		{
			memcpy(C, p->init_centroids, sizeof(double) * k * d);
			if (parts[0]->metric == PGGPU_METRIC_COSINE)
				pggpu_normalize_rows(C, k, d, 1.0);
		}
		else
			CHECK(seed_from_sample(parts, nparts, &q, n, C, err));
		r->seed_seconds += pggpu_seconds() - t0;
		t0 = pggpu_seconds();
		CHECK(lloyd_parts(parts, nparts, &q, s, n, C, sums, psums, counts, pcounts, r, err));
		r->iterate_seconds += pggpu_seconds() - t0;
		if (starts == 1)
			break;
		/* the start's inertia: its labelling by its own final centroids */
		CHECK(label_parts(parts, nparts, C, k, psums, pcounts, NULL, counts, &inertia, err));
		if (inertia < best_inertia)
		{
			best_inertia = inertia;
			best_iterations = r->iterations;
			best_converged = r->converged;
			memcpy(best, C, sizeof(double) * k * d);
		}
	}
	if (starts > 1)
	{
		memcpy(C, best, sizeof(double) * k * d);
		r->iterations = best_iterations;
		r->converged = best_converged;
	}
	pggpu_interrupts(p);
	CHECK(label_parts(parts, nparts, C, k, psums, pcounts, r->labels, r->sizes, &r->inertia, err));
	memcpy(r->centroids, C, sizeof(double) * k * d);
	if (p->init != PGGPU_INIT_GIVEN)
		CHECK(pggpu_canonical_order(r, k, d, r->labels, n, err));
done:
	pggpu_scratch_free(parts[0], C);
	pggpu_scratch_free(parts[0], best);
	pggpu_scratch_free(parts[0], sums);
	pggpu_scratch_free(parts[0], psums);
	pggpu_scratch_free(parts[0], counts);
	pggpu_scratch_free(parts[0], pcounts);
	return st;
}
