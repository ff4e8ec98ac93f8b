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
 *
 * The fit (pggpu_kmeans_over) sees the holders of the rows only through a
 * source's step and sample, so the nodes of a Citus cluster (answering with
 * pggpu_parts_step and pggpu_parts_sample over their own parts; see
 * src/citus_kmeans.c) run the same loop as local parts.
 */
#include <math.h>
#include <stdio.h>
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

/* the rows of parts picked by pggpu_sampled(seed, their index in the union + first, rate), into "into" */
pggpu_status
pggpu_parts_sample(pggpu_data *const *parts, int nparts, int64_t first, uint64_t seed, double rate,
				   pggpu_data *into, pggpu_error *err)
{
	int			d = parts[0]->d;
	int64_t    *rows = NULL;
	double	   *coords = NULL;	/* the sample's rows, m x d, in part order */
	int64_t		m = 0;
	int64_t		off = first;
	pggpu_status st = PGGPU_OK;

	/* every part's sampled rows (in batches: pggpu_data_get_rows takes an int count) */
	for (int pi = 0; pi < nparts; off += parts[pi]->n, pi++)
	{
		pggpu_data *ds = parts[pi];
		int64_t		mp = 0;

		rows = (int64_t *) pggpu_scratch_realloc(parts[0], rows, sizeof(int64_t) * (ds->n > 0 ? ds->n : 1));
		if (rows == NULL)
			break;
		for (int64_t i = 0; i < ds->n; i++)
			if (rate >= 1.0 || pggpu_sampled(seed, off + i, rate))
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
	/* one push: a data set takes no batch after a partial one */
	if (rows == NULL || coords == NULL)
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	else
		st = pggpu_data_push_rows(into, coords, m, err);
done:
	pggpu_scratch_free(parts[0], rows);
	pggpu_scratch_free(parts[0], coords);
	return st;
}

/* one group's share of a step: its parts' sums, added in part order */
typedef struct share
{
	double	   *sums;
	int64_t    *counts;
	double	   *psums;			/* a part's, before it is added */
	int64_t    *pcounts;
	double		inertia;
	int64_t		changed;
	int			next;			/* the group's next part to do (nparts: all done) */
	bool		next_was;		/* whether it was parked (it may be unparked already) */
	pggpu_status st;
	pggpu_error err;
} share;

typedef struct step_work
{
	pggpu_data *const *parts;
	int			nparts;
	const double *C;
	int			k;
	bool		begin;
	int32_t    *labels;
	const int64_t *offs;		/* each part's first row in the union */
	const int  *group;			/* each part's group */
	share	   *shares;			/* a group's */
} step_work;

/* the group's next part after pi, or nparts */
static int
next_of(const step_work *w, int g, int pi)
{
	while (++pi < w->nparts && w->group[pi] != g)
		;
	return pi;
}

/*
 * Group g's parts in order, from the first not done: each one's share
 * added to the group's (a part found parked is parked again after it; the
 * next one's rows are on their way to its GPU while this one computes).
 * Leaves between parts when stop is set; on an error, with it in the share.
 */
static void
step_group(step_work *w, int g, pggpu_stop *stop)
{
	share	   *sh = &w->shares[g];
	pggpu_data *const *parts = w->parts;
	int			k = w->k,
				pi = sh->next;
	bool		was = sh->next_was;

	while (pi < w->nparts && sh->st == PGGPU_OK && !pggpu_stopped(stop))
	{
		int			nx = next_of(w, g, pi);
		bool		next_was = nx < w->nparts && parts[nx]->parked;
		double		pin;
		int64_t		pch;
		pggpu_status st = PGGPU_OK;

		if (next_was)
			st = pggpu_data_unpark(parts[nx], &sh->err);
		if (st == PGGPU_OK)
			st = pggpu_kmeans_partial(parts[pi], w->C, k, w->begin, sh->psums, sh->pcounts, &pin, &pch,
									  &sh->err);
		if (st == PGGPU_OK && w->labels && parts[pi]->n > 0)
			st = parts[pi]->ops->km_fetch(parts[pi], w->labels + w->offs[pi], NULL, &sh->err);
		if ((sh->st = pggpu_repark(parts[pi], was, st, &sh->err)) != PGGPU_OK)
			break;
		for (int64_t i = 0; i < (int64_t) k * parts[0]->d; i++)
			sh->sums[i] = PGGPU_ADD(sh->sums[i], sh->psums[i]);
		for (int c = 0; c < k; c++)
			sh->counts[c] += sh->pcounts[c];
		sh->inertia += pin;
		sh->changed += pch;
		sh->next = pi = nx;
		sh->next_was = was = next_was;
	}
}

static void
step_group_job(void *arg, int g, pggpu_stop *stop)
{
	step_group((step_work *) arg, g, stop);
}

/*
 * The groups of a step: on GPUs, each resident part alone and a GPU's
 * parked parts together (streamed through it one at a time), run at once,
 * a thread a group; else (parts on the CPU, whose passes have threads of
 * their own; one group; no way to poll for interrupts) one group in the
 * calling thread.  Returns the number of groups.
 */
static int
step_groups(pggpu_data *const *parts, int nparts, int *group)
{
	int			ngroups = 0;
	bool		threads = parts[0]->interrupt == NULL || parts[0]->pending != NULL;

	for (int pi = 0; pi < nparts; pi++)
		threads &= parts[pi]->backend == PGGPU_BACKEND_GPU;
	for (int pi = 0; pi < nparts; pi++)
	{
		group[pi] = -1;
		if (!threads)
			group[pi] = 0;
		else if (parts[pi]->parked)
			for (int pj = 0; pj < pi && group[pi] < 0; pj++)
				if (parts[pj]->parked && parts[pj]->gpu_index == parts[pi]->gpu_index)
					group[pi] = group[pj];
		if (group[pi] < 0)
			group[pi] = ngroups++;
	}
	if (!threads || ngroups > PGGPU_MAX_THREADS)
	{
		for (int pi = 0; pi < nparts; pi++)
			group[pi] = 0;
		ngroups = 1;
	}
	return ngroups < 1 ? 1 : ngroups;
}

/* whether the parts' GPUs are more than one */
static bool
several_gpus(pggpu_data *const *parts, int nparts)
{
	for (int pi = 1; pi < nparts; pi++)
		if (parts[pi]->backend == PGGPU_BACKEND_GPU && parts[pi]->gpu_index != parts[0]->gpu_index)
			return true;
	return false;
}

pggpu_status
pggpu_parts_step(pggpu_data *const *parts, int nparts, const double *C, int k, bool begin,
				 double *sums, int64_t *counts, double *inertia, int64_t *changed,
				 int32_t *labels, pggpu_error *err)
{
	int			d = parts[0]->d;
	step_work	w = {parts, nparts, C, k, begin, labels};
	/* (two of the home set's few scratch slots: the fit holds some too) */
	char	   *book = (char *) pggpu_scratch_alloc(parts[0], (sizeof(int) + sizeof(int64_t) +
															  sizeof(pggpu_interrupt_fn)) * nparts);
	int		   *group = (int *) book;
	int64_t    *offs = (int64_t *) (book + sizeof(int) * nparts);
	pggpu_interrupt_fn *saved = (pggpu_interrupt_fn *) (book + (sizeof(int) + sizeof(int64_t)) * nparts);
	char	   *acc = NULL;
	int			ngroups;
	size_t		per;
	pggpu_status st = PGGPU_OK;

	memset(sums, 0, sizeof(double) * k * d);
	memset(counts, 0, sizeof(int64_t) * k);
	*inertia = 0;
	*changed = 0;
	if (book == NULL)
	{
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		goto done;
	}
	ngroups = step_groups(parts, nparts, group);
	for (int pi = 0; pi < nparts; pi++)
		offs[pi] = pi == 0 ? 0 : offs[pi - 1] + parts[pi - 1]->n;
	/* a group's share: its sums and counts, and a part's */
	per = sizeof(share) + 2 * (sizeof(double) * k * d + sizeof(int64_t) * k);
	if ((acc = (char *) pggpu_scratch_alloc(parts[0], per * ngroups)) == NULL)
	{
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		goto done;
	}
	memset(acc, 0, per * ngroups);
	w.shares = (share *) acc;
	w.offs = offs;
	w.group = group;
	for (int g = 0; g < ngroups; g++)
	{
		share	   *sh = &w.shares[g];
		char	   *at = acc + sizeof(share) * ngroups + (per - sizeof(share)) * g;

		sh->sums = (double *) at;
		sh->psums = sh->sums + (size_t) k * d;
		sh->counts = (int64_t *) (sh->psums + (size_t) k * d);
		sh->pcounts = sh->counts + k;
		sh->next = next_of(&w, g, -1);
		sh->next_was = sh->next < nparts && parts[sh->next]->parked;
	}
	if (ngroups == 1)
		step_group(&w, 0, NULL);
	else
	{
		pggpu_stop	stop;
		bool		left = false;

		/* no callback from the threads: the calling thread polls (together.c) */
		for (int pi = 0; pi < nparts; pi++)
			saved[pi] = parts[pi]->interrupt, parts[pi]->interrupt = NULL;
		pggpu_run_together(step_group_job, &w, ngroups, parts[0]->pending, &stop);
		for (int pi = 0; pi < nparts; pi++)
			parts[pi]->interrupt = saved[pi];
		for (int g = 0; g < ngroups; g++)
			left |= w.shares[g].st == PGGPU_OK && w.shares[g].next < nparts;
		/* an interrupt seen pending: the callback here (it may longjmp) */
		if (pggpu_stopped(&stop) && parts[0]->interrupt)
			parts[0]->interrupt(parts[0]->interrupt_arg);
		/* it came back (interrupts held off): the rest on this thread */
		if (left)
			for (int g = 0; g < ngroups; g++)
				step_group(&w, g, NULL);
	}
	/* the groups' shares added in order; the first failure (in part order) reported */
	for (int pi = 0; pi < nparts && st == PGGPU_OK; pi++)
	{
		share	   *sh = &w.shares[group[pi]];

		if (sh->st != PGGPU_OK && sh->next == pi)
		{
			*err = sh->err;
			st = sh->st;
			if (parts[pi]->backend == PGGPU_BACKEND_GPU && several_gpus(parts, nparts))
			{
				char		msg[sizeof(err->msg)];

				snprintf(msg, sizeof(msg), "GPU %d: %s", parts[pi]->gpu_index, sh->err.msg);
				memcpy(err->msg, msg, sizeof(msg));
			}
		}
	}
	for (int g = 0; g < ngroups && st == PGGPU_OK; g++)
	{
		for (int64_t i = 0; i < (int64_t) k * d; i++)
			sums[i] = PGGPU_ADD(sums[i], w.shares[g].sums[i]);
		for (int c = 0; c < k; c++)
			counts[c] += w.shares[g].counts[c];
		*inertia += w.shares[g].inertia;
		*changed += w.shares[g].changed;
	}
done:
	pggpu_scratch_free(parts[0], book);
	pggpu_scratch_free(parts[0], acc);
	return st;
}

/*
 * The starting centroids of one start (p->seed already the start's): k-means
 * of a uniform sample of the union's rows, on the CPU, with the caller's init
 */
static pggpu_status
seed_from_sample(const pggpu_kmeans_source *src, const pggpu_kmeans_params *p, double *C,
				 pggpu_error *err)
{
	pggpu_data *home = src->home;
	int64_t		want = (int64_t) p->k * SAMPLE_PER_K > SAMPLE_MIN ? (int64_t) p->k * SAMPLE_PER_K : SAMPLE_MIN;
	double		rate = want >= src->n ? 1.0 : (double) want / (double) src->n;
	pggpu_data *sds = NULL;
	int64_t    *sizes = NULL;
	pggpu_kmeans_params q = *p;
	pggpu_kmeans_result r = {0};
	pggpu_status st = PGGPU_OK;

	/* the sample's set: home->aux while it lives (closed there after a longjmp) */
	CHECK(pggpu_data_open(&sds, PGGPU_BACKEND_CPU, 0, home->d, want + want / 2 + 64, err));
	home->aux = sds;
	sds->threads = home->threads;
	sds->pending = home->pending;
	sds->metric = home->metric;
	CHECK(src->sample(src->arg, p->seed, rate, sds, err));
	if (sds->n < p->k)
	{
		st = pggpu_fail(err, PGGPU_ERR_INVALID, "the seeding sample has %lld rows, fewer than k = %d",
						(long long) sds->n, p->k);
		goto done;
	}
	sizes = (int64_t *) pggpu_scratch_alloc(home, sizeof(int64_t) * p->k);
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
	home->aux = NULL;
	pggpu_data_close(sds);
	pggpu_scratch_free(home, sizes);
	return st;
}

/* one start's Lloyd iterations from C (updated in place); the stats of the last */
static pggpu_status
lloyd(const pggpu_kmeans_source *src, const pggpu_kmeans_params *p, int start, double *C,
	  double *sums, int64_t *counts, pggpu_kmeans_result *r, pggpu_error *err)
{
	int			k = p->k;
	int			d = src->home->d;
	pggpu_status st;

	r->iterations = 0;
	r->converged = false;
	while (r->iterations < p->max_iter)
	{
		int64_t		changed;
		double		inertia;

		pggpu_interrupts(p);
		if ((st = src->step(src->arg, C, k, r->iterations == 0, sums, counts, &inertia, &changed,
							NULL, err)) != PGGPU_OK)
			return st;
		/* a cluster without rows keeps its centroid */
		for (int c = 0; c < k; c++)
			if (counts[c] > 0)
				for (int j = 0; j < d; j++)
					C[(int64_t) c * d + j] = sums[(int64_t) c * d + j] / (double) counts[c];
		if (src->home->metric == PGGPU_METRIC_COSINE)
			pggpu_normalize_rows(C, k, d, 1.0);
		r->iterations++;
		r->changed = changed;
		if (p->progress)
			p->progress(p->progress_arg, start, r->iterations);
		if ((double) changed <= p->tol * (double) src->n)
		{
			r->converged = true;
			break;
		}
	}
	return PGGPU_OK;
}

/*
 * The final labelling of every row by C (a step's labels; its update is not
 * kept): sizes, inertia (cosine: 1 - cos), labels in row order (may be NULL)
 */
static pggpu_status
label_all(const pggpu_kmeans_source *src, const double *C, int k, double *sums,
		  int32_t *labels, int64_t *sizes, double *inertia, pggpu_error *err)
{
	int64_t		changed;
	pggpu_status st;

	if ((st = src->step(src->arg, C, k, false, sums, sizes, inertia, &changed, labels, err)) != PGGPU_OK)
		return st;
	if (src->home->metric == PGGPU_METRIC_COSINE)
		*inertia /= 2;			/* |x - c|^2 = 2 (1 - cos) on the sphere */
	return PGGPU_OK;
}

pggpu_status
pggpu_kmeans_over(const pggpu_kmeans_source *src, const pggpu_kmeans_params *p,
				  pggpu_kmeans_result *r, pggpu_error *err)
{
	pggpu_data *home = src->home;
	int			k = p->k;
	int			d = home->d;
	int			starts = p->n_init > 1 ? p->n_init : 1;
	int64_t		n = src->n;
	double	   *C = NULL,
			   *best = NULL,
			   *sums = NULL;
	int64_t    *counts = NULL;
	double		best_inertia = INFINITY;
	int			best_iterations = 0;
	int64_t		best_changed = 0;
	bool		best_converged = false;
	pggpu_status st = PGGPU_OK;

	if (k < 1 || k > n)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "k = %d for %lld rows", k, (long long) n);
	if (p->max_iter < 1 || !(p->tol >= 0) || (unsigned) p->init > PGGPU_INIT_PARALLEL ||
		(p->init == PGGPU_INIT_GIVEN && (p->init_centroids == NULL || starts > 1)))
		return pggpu_fail(err, PGGPU_ERR_INVALID, "invalid k-means parameters");
	C = (double *) pggpu_scratch_alloc(home, sizeof(double) * k * d);
	best = (double *) pggpu_scratch_alloc(home, sizeof(double) * k * d);
	sums = (double *) pggpu_scratch_alloc(home, sizeof(double) * k * d);
	counts = (int64_t *) pggpu_scratch_alloc(home, sizeof(int64_t) * k);
	if (!C || !best || !sums || !counts)
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
			if (home->metric == PGGPU_METRIC_COSINE)
				pggpu_normalize_rows(C, k, d, 1.0);
		}
		else
			CHECK(seed_from_sample(src, &q, C, err));
		r->seed_seconds += pggpu_seconds() - t0;
		t0 = pggpu_seconds();
		CHECK(lloyd(src, &q, s, C, sums, counts, r, err));
		r->iterate_seconds += pggpu_seconds() - t0;
		if (starts == 1)
			break;
		/* the start's inertia: its labelling by its own final centroids */
		CHECK(label_all(src, C, k, sums, NULL, counts, &inertia, err));
		if (inertia < best_inertia)
		{
			best_inertia = inertia;
			best_iterations = r->iterations;
			best_changed = r->changed;
			best_converged = r->converged;
			memcpy(best, C, sizeof(double) * k * d);
		}
	}
	if (starts > 1)
	{
		memcpy(C, best, sizeof(double) * k * d);
		r->iterations = best_iterations;
		r->changed = best_changed;
		r->converged = best_converged;
	}
	pggpu_interrupts(p);
	CHECK(label_all(src, C, k, sums, r->labels, r->sizes, &r->inertia, err));
	memcpy(r->centroids, C, sizeof(double) * k * d);
	if (p->init != PGGPU_INIT_GIVEN)
		CHECK(pggpu_canonical_order(r, k, d, r->labels, n, err));
done:
	pggpu_scratch_free(home, C);
	pggpu_scratch_free(home, best);
	pggpu_scratch_free(home, sums);
	pggpu_scratch_free(home, counts);
	return st;
}

/* the local parts as a source */
typedef struct local_parts
{
	pggpu_data *const *parts;
	int			nparts;
} local_parts;

static pggpu_status
local_step(void *arg, const double *C, int k, bool begin, double *sums, int64_t *counts,
		   double *inertia, int64_t *changed, int32_t *labels, pggpu_error *err)
{
	local_parts *lp = (local_parts *) arg;

	return pggpu_parts_step(lp->parts, lp->nparts, C, k, begin, sums, counts, inertia, changed,
							labels, err);
}

static pggpu_status
local_sample(void *arg, uint64_t seed, double rate, pggpu_data *into, pggpu_error *err)
{
	local_parts *lp = (local_parts *) arg;

	return pggpu_parts_sample(lp->parts, lp->nparts, 0, seed, rate, into, err);
}

pggpu_status
pggpu_kmeans_parts(pggpu_data *const *parts, int nparts, const pggpu_kmeans_params *p,
				   pggpu_kmeans_result *r, pggpu_error *err)
{
	local_parts lp = {parts, nparts};
	pggpu_kmeans_source src = {0};

	if (nparts < 1 || parts == NULL)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "no parts");
	src.home = parts[0];
	for (int pi = 0; pi < nparts; pi++)
	{
		if (parts[pi]->d != parts[0]->d || parts[pi]->metric != parts[0]->metric)
			return pggpu_fail(err, PGGPU_ERR_INVALID, "part %d has other columns or another metric than part 1", pi + 1);
		src.n += parts[pi]->n;
	}
	src.step = local_step;
	src.sample = local_sample;
	src.arg = &lp;
	return pggpu_kmeans_over(&src, p, r, err);
}
