/*
 * parts.c - the rows of one relation held apart as a source of k-means
 * rows (fit.c): chunks streamed through one GPU, shares on several GPUs, or
 * one data set alone (pggpu_kmeans).  A step labels every part's rows by
 * the centroids and sums them by cluster (pggpu_kmeans_partial); the sums
 * are added in part order.  A Citus node answers its coordinator with the
 * same calls over its own parts (src/citus_node.c).
 *
 * A part found parked (pggpu_data_park) is parked again after each of its
 * steps: then at most two parts at a time hold device memory for their rows
 * (the next one's copy runs while this one computes), and every iteration
 * streams the rows of the parked parts through the GPU.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute_internal.h"

#define CHECK(expr) do { if ((st = (expr)) != PGGPU_OK) goto done; } while (0)

pggpu_status
pggpu_kmeans_partial(pggpu_data *ds, const double *C, int k, int e, bool begin, double *sums,
					 int64_t *counts, double *mass, double *inertia, int64_t *changed, pggpu_error *err)
{
	const pggpu_ops *ops = ds->ops;
	pggpu_step_stats sst;
	pggpu_status st;

	if (k < 1)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "k must be at least 1");
	memset(counts, 0, sizeof(int64_t) * k);
	if (inertia)
		*inertia = 0;
	*changed = 0;
	if (sums)
		memset(sums, 0, sizeof(double) * k * ds->d);
	if (sums && mass)
		memset(mass, 0, sizeof(double) * k);
	if (ds->n == 0)
		return PGGPU_OK;
	if (!begin && ds->k != k)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "a partial step of %d clusters on a state of %d", k, ds->k);
	if ((st = pggpu_data_unpark(ds, err)) != PGGPU_OK ||
		(st = pggpu_scale_to(ds, e, err)) != PGGPU_OK)
		return st;
	if (begin)
	{
		if ((st = ops->km_begin(ds, k, err)) != PGGPU_OK)
			return st;
		ds->k = k;
	}
	/* labels by C, and with sums each cluster's sum of its rows, as the step added them */
	if ((st = ops->km_put_centroids(ds, C, err)) != PGGPU_OK ||
		(st = ops->km_step(ds, sums != NULL, inertia != NULL, &sst, err)) != PGGPU_OK ||
		(st = sums ? ops->km_sums(ds, sums, counts, mass, err) : ops->km_counts(ds, counts, err)) != PGGPU_OK)
		return st;
	if (inertia)
		*inertia = sst.inertia;
	*changed = sst.changed;
	return PGGPU_OK;
}

/* the places of n rows whose keys the seeding sample (seed, rate) picks, in order, into at: how many */
static int64_t
sampled_places(const uint64_t *keys, int64_t n, uint64_t seed, double rate, int64_t *at)
{
	int64_t		m = 0;

	for (int64_t i = 0; i < n; i++)
		if (rate >= 1.0 || pggpu_sampled(seed, (int64_t) keys[i], rate))
			at[m++] = i;
	return m;
}

/*
 * The rows of the parts whose key pggpu_sampled(seed, key, rate) picks, in
 * part order, the caller's units: *m of them in *rows, their keys in *keep
 * where keep is not NULL, and where weights is not NULL and a part is
 * weighted, their weights in *weights (parts[0]'s scratch, grown)
 */
pggpu_status
pggpu_parts_sample(pggpu_data *const *parts, int nparts, uint64_t seed, double rate,
				   double **rows, uint64_t **keep, double **weights, int64_t *m, pggpu_error *err)
{
	bool		weighted = false;

	int			d = parts[0]->d;
	uint64_t   *keys = NULL;
	int64_t    *idx = NULL;
	pggpu_status st = PGGPU_OK;

	*m = 0;
	for (int pi = 0; weights && pi < nparts; pi++)
		weighted |= pggpu_data_weights(parts[pi]) != NULL;
	for (int pi = 0; pi < nparts; pi++)
	{
		pggpu_data *ds = parts[pi];
		int64_t		mp = 0;
		bool		was = ds->parked;
		size_t		nb = ds->n > 0 ? ds->n : 1;
		double	   *grown;

		keys = (uint64_t *) pggpu_scratch_realloc(parts[0], keys, sizeof(uint64_t) * nb);
		idx = (int64_t *) pggpu_scratch_realloc(parts[0], idx, sizeof(int64_t) * nb);
		if (keys == NULL || idx == NULL)
		{
			st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
			goto done;
		}
		if (ds->n == 0)
			continue;
		CHECK(pggpu_data_unpark(ds, err));
		CHECK(pggpu_repark(ds, was, ds->ops->keys(ds, keys, err), err));
		mp = sampled_places(keys, ds->n, seed, rate, idx);
		grown = (double *) pggpu_scratch_realloc(parts[0], *rows, sizeof(double) * (*m + mp > 0 ? *m + mp : 1) * d);
		if (grown != NULL)
			*rows = grown;
		if (grown != NULL && keep != NULL)
		{
			uint64_t   *kg = (uint64_t *) pggpu_scratch_realloc(parts[0], *keep,
																sizeof(uint64_t) * (*m + mp > 0 ? *m + mp : 1));

			if (kg != NULL)
			{
				*keep = kg;
				for (int64_t i = 0; i < mp; i++)
					kg[*m + i] = keys[idx[i]];
			}
			grown = kg ? grown : NULL;
		}
		if (grown != NULL && weighted)
		{
			const double *pw = pggpu_data_weights(ds);
			double	   *wg = (double *) pggpu_scratch_realloc(parts[0], *weights,
															 sizeof(double) * (*m + mp > 0 ? *m + mp : 1));

			if (wg != NULL)
			{
				*weights = wg;
				for (int64_t i = 0; i < mp; i++)
					wg[*m + i] = pw ? pw[idx[i]] : 1.0;
			}
			grown = wg ? grown : NULL;
		}
		if (grown == NULL)
		{
			st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
			goto done;
		}
		/* (in batches: pggpu_data_get_rows takes an int count) */
		for (int64_t i0 = 0; i0 < mp; i0 += 65536)
		{
			int			take = (int) (mp - i0 < 65536 ? mp - i0 : 65536);

			was = ds->parked;
			CHECK(pggpu_repark(ds, was, pggpu_data_get_rows(ds, idx + i0, take, *rows + (*m + i0) * d, err), err));
		}
		*m += mp;
	}
done:
	pggpu_scratch_free(parts[0], keys);
	pggpu_scratch_free(parts[0], idx);
	return st;
}

/* one group's share of a step: its parts' sums, added in part order */
typedef struct share
{
	double	   *sums;
	int64_t    *counts;
	double	   *psums;			/* a part's after the first, before it is added */
	int64_t    *pcounts;
	double	   *mass;			/* (the clusters' weights: as the counts) */
	double	   *pmass;
	bool		some;			/* sums and counts hold a part's (else nothing yet) */
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
	int			e;
	bool		begin;
	bool		update;			/* sums wanted */
	bool		mass;			/* and the clusters' weights */
	bool		dists;			/* the inertia wanted */
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
		double		pin = 0;
		int64_t		pch;
		pggpu_status st = PGGPU_OK;

		if (next_was)
			st = pggpu_data_unpark(parts[nx], &sh->err);
		/* (the group's first part's sums go straight to the group's: 0 plus them) */
		if (st == PGGPU_OK)
			st = pggpu_kmeans_partial(parts[pi], w->C, k, w->e, w->begin,
									  w->update ? (sh->some ? sh->psums : sh->sums) : NULL,
									  sh->some ? sh->pcounts : sh->counts,
									  w->mass ? (sh->some ? sh->pmass : sh->mass) : NULL, w->dists ? &pin : NULL,
									  &pch, &sh->err);
		if (st == PGGPU_OK && w->labels && parts[pi]->n > 0)
			st = parts[pi]->ops->km_fetch(parts[pi], w->labels + w->offs[pi], NULL, &sh->err);
		if ((sh->st = pggpu_repark(parts[pi], was, st, &sh->err)) != PGGPU_OK)
			break;
		if (sh->some)
		{
			for (int64_t i = 0; w->update && i < (int64_t) k * parts[0]->d; i++)
				sh->sums[i] = PGGPU_ADD(sh->sums[i], sh->psums[i]);
			for (int c = 0; c < k; c++)
				sh->counts[c] += sh->pcounts[c];
			for (int c = 0; w->mass && c < k; c++)
				sh->mass[c] = PGGPU_ADD(sh->mass[c], sh->pmass[c]);
		}
		sh->some = true;
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

/* the groups' sums added into sums (zeros), a slice of its k d elements at a time */
typedef struct add_work
{
	step_work  *w;
	int			ngroups;
	double	   *sums;
	int64_t		kd;
	int			nslices;
} add_work;

/* (an add of a few k d elements a thread is not worth its thread) */
#define ADD_THREADS_MIN 1048576.0

static void
add_slice(add_work *aw, int i, int nslices)
{
	int64_t		lo = aw->kd * i / nslices,
				hi = aw->kd * (i + 1) / nslices;

	for (int g = 0; g < aw->ngroups; g++)
	{
		const double *gs = aw->w->shares[g].sums;

		if (aw->w->shares[g].some)
			for (int64_t e = lo; e < hi; e++)
				aw->sums[e] = PGGPU_ADD(aw->sums[e], gs[e]);
	}
}

static void
add_slice_job(void *arg, int i, pggpu_stop *stop)
{
	add_work   *aw = (add_work *) arg;

	(void) stop;
	add_slice(aw, i, aw->nslices);
}

pggpu_status
pggpu_parts_step(pggpu_data *const *parts, int nparts, const double *C, int k, int e, bool begin,
				 double *sums, int64_t *counts, double *mass, double *inertia, int64_t *changed,
				 int32_t *labels, pggpu_error *err)
{
	int			d = parts[0]->d;
	step_work	w = {parts, nparts, C, k, e, begin, sums != NULL, sums != NULL && mass != NULL, inertia != NULL,
	labels};
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

	if (sums)
		memset(sums, 0, sizeof(double) * k * d);
	memset(counts, 0, sizeof(int64_t) * k);
	if (w.mass)
		memset(mass, 0, sizeof(double) * k);
	if (inertia)
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
	/* a group's share: its sums and counts, and a part's (kept in the home set from step to step) */
	per = sizeof(share) + 2 * (sizeof(double) * k * d + sizeof(int64_t) * k + sizeof(double) * k);
	if (per * ngroups > parts[0]->step_space_bytes)
	{
		free(parts[0]->step_space);
		parts[0]->step_space_bytes = 0;
		if ((parts[0]->step_space = malloc(per * ngroups)) == NULL)
		{
			st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
			goto done;
		}
		parts[0]->step_space_bytes = per * ngroups;
	}
	acc = (char *) parts[0]->step_space;
	memset(acc, 0, sizeof(share) * ngroups);
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
		sh->mass = (double *) (sh->pcounts + k);
		sh->pmass = sh->mass + k;
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
	/* (the groups' sums: each element in group order, in slices a thread each where they are many) */
	if (st == PGGPU_OK && sums)
	{
		add_work	aw = {&w, ngroups, sums, (int64_t) k * d, ngroups};

		if (ngroups > 1 && (double) k * d * ngroups >= ADD_THREADS_MIN)
		{
			pggpu_stop	stop;

			pggpu_run_together(add_slice_job, &aw, aw.nslices, NULL, &stop);
		}
		else
			add_slice(&aw, 0, 1);
	}
	for (int g = 0; g < ngroups && st == PGGPU_OK; g++)
	{
		if (!w.shares[g].some)
			continue;			/* (a group of empty parts only: nothing) */
		for (int c = 0; c < k; c++)
			counts[c] += w.shares[g].counts[c];
		for (int c = 0; w.mass && c < k; c++)
			mass[c] = PGGPU_ADD(mass[c], w.shares[g].mass[c]);
		if (inertia)
			*inertia += w.shares[g].inertia;
		*changed += w.shares[g].changed;
	}
done:
	pggpu_scratch_free(parts[0], book);
	return st;
}

/* the least and largest non-zero |value| of the parts' rows, as pushed */
pggpu_status
pggpu_parts_range(pggpu_data *const *parts, int nparts, double *lo, double *hi, pggpu_error *err)
{
	pggpu_status st;

	*lo = INFINITY;
	*hi = 0;
	for (int pi = 0; pi < nparts; pi++)
	{
		double		l,
					h;

		if ((st = pggpu_data_range(parts[pi], &l, &h, err)) != PGGPU_OK)
			return st;
		*lo = fmin(*lo, l);
		*hi = fmax(*hi, h);
	}
	return PGGPU_OK;
}

/* ---- the local parts as a source of rows (fit.c) -------------------------- */

typedef struct local_parts
{
	pggpu_data *const *parts;
	int			nparts;
	double	   *held;			/* several parts: the centroids (k x d, fit units) */
	double	   *sums;			/* and a step's sums */
	int64_t    *counts;			/* and counts */
	double	   *mass;			/* and the clusters' weights (weighted parts), else NULL */
	int			k;
} local_parts;

static pggpu_status
local_range(void *arg, double *lo, double *hi, pggpu_error *err)
{
	local_parts *lp = (local_parts *) arg;

	return pggpu_parts_range(lp->parts, lp->nparts, lo, hi, err);
}

/* one set: the centroids stay on its device, updated there (cosine: normalized there) */
static pggpu_status
one_step(pggpu_data *ds, const double *C, int k, int e, bool begin, bool update, int64_t *empty,
		 int64_t *counts, double *inertia, int64_t *changed, int32_t *labels, pggpu_error *err)
{
	const pggpu_ops *ops = ds->ops;
	bool		was = ds->parked;
	pggpu_step_stats sst = {0};
	pggpu_status st;

	if ((st = pggpu_data_unpark(ds, err)) != PGGPU_OK)
		return st;
	st = pggpu_scale_to(ds, e, err);
	if (st == PGGPU_OK && begin && (st = ops->km_begin(ds, k, err)) == PGGPU_OK)
		ds->k = k;
	if (st == PGGPU_OK && C)
		st = ops->km_put_centroids(ds, C, err);
	if (st == PGGPU_OK)
		st = ops->km_step(ds, update, inertia != NULL, &sst, err);
	if (st == PGGPU_OK && update && ds->metric == PGGPU_METRIC_COSINE)
		st = ops->km_normalize(ds, ldexp(1.0, e), err);
	/* (the counts are a pass of their own: the update counts empty clusters in its) */
	if (st == PGGPU_OK && (counts || !update))
	{
		int64_t    *own = counts ? counts : (int64_t *) pggpu_scratch_alloc(ds, sizeof(int64_t) * k);

		st = own ? ops->km_counts(ds, own, err) : pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		sst.empty = 0;
		for (int c = 0; own && c < k; c++)
			sst.empty += own[c] == 0;
		if (own != counts)
			pggpu_scratch_free(ds, own);
	}
	if (st == PGGPU_OK && labels)
		st = ops->km_fetch(ds, labels, NULL, err);
	*empty = sst.empty;
	if (inertia)
		*inertia = sst.inertia;
	*changed = sst.changed;
	return pggpu_repark(ds, was, st, err);
}

/* several parts: their sums added in part order, the centroids held here */
static pggpu_status
local_step(void *arg, const double *C, int k, int e, bool begin, bool update, int64_t *empty,
		   int64_t *counts, double *inertia, int64_t *changed, int32_t *labels, pggpu_error *err)
{
	local_parts *lp = (local_parts *) arg;
	pggpu_data *home = lp->parts[0];
	int			d = home->d;
	pggpu_status st;

	if (lp->nparts == 1 && home->n > 0)
		return one_step(home, C, k, e, begin, update, empty, counts, inertia, changed, labels, err);
	/* (the held centroids, a step's sums and its counts: one of the home's few scratch slots) */
	if (lp->held == NULL &&
		(lp->held = (double *) pggpu_scratch_alloc(home, (2 * sizeof(double) * d + sizeof(int64_t) +
														  sizeof(double)) * k)) == NULL)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	lp->sums = lp->held + (int64_t) k * d;
	lp->counts = (int64_t *) (lp->sums + (int64_t) k * d);
	lp->mass = NULL;
	for (int pi = 0; pi < lp->nparts; pi++)
		if (pggpu_data_weights(lp->parts[pi]))
			lp->mass = (double *) (lp->counts + k);
	lp->k = k;
	if (C)
		memcpy(lp->held, C, sizeof(double) * k * d);
	if ((st = pggpu_parts_step(lp->parts, lp->nparts, lp->held, k, e, begin, update ? lp->sums : NULL,
							   lp->counts, lp->mass, inertia, changed, labels, err)) != PGGPU_OK)
		return st;
	if (update)
		pggpu_centroids_update(lp->held, lp->sums, lp->counts, lp->mass, k, d, home->metric, e);
	*empty = 0;
	for (int c = 0; c < k; c++)
		*empty += lp->counts[c] == 0;
	if (counts)
		memcpy(counts, lp->counts, sizeof(int64_t) * k);
	return PGGPU_OK;
}

static pggpu_status
local_counts(void *arg, int64_t *counts, pggpu_error *err)
{
	local_parts *lp = (local_parts *) arg;
	pggpu_data *home = lp->parts[0];

	if (lp->nparts == 1 && home->n > 0)
		return home->ops->km_counts(home, counts, err);
	memcpy(counts, lp->counts, sizeof(int64_t) * lp->k);
	return PGGPU_OK;
}

static pggpu_status
local_centroids(void *arg, double *C, pggpu_error *err)
{
	local_parts *lp = (local_parts *) arg;
	pggpu_data *home = lp->parts[0];

	if (lp->nparts == 1 && home->n > 0)
		return home->ops->km_get_centroids(home, C, err);
	memcpy(C, lp->held, sizeof(double) * lp->k * home->d);
	return PGGPU_OK;
}

static pggpu_status
local_sample(void *arg, uint64_t seed, double rate, double **rows, uint64_t **keys, double **weights,
			 int64_t *m, pggpu_error *err)
{
	local_parts *lp = (local_parts *) arg;

	return pggpu_parts_sample(lp->parts, lp->nparts, seed, rate, rows, keys, weights, m, err);
}

/* a sampled row: its part and its place there */
typedef struct sampled
{
	int64_t		at;
	int			part;
} sampled;

/* the parts and their sample, for sample_rows */
typedef struct parts_sample
{
	pggpu_data *const *parts;
	const sampled *smp;
} parts_sample;

/* the values of sampled rows (places in the sample), caller's units: where keys tie */
static pggpu_status
sample_rows(void *arg, const int64_t *q, int64_t n, double *out, pggpu_error *err)
{
	parts_sample *ps = (parts_sample *) arg;
	int64_t		rows[1024];		/* (a fetch a round trip: a run of rows of one part at once) */

	for (int64_t i0 = 0; i0 < n;)
	{
		int			p = ps->smp[q[i0]].part;
		int			take = 0;
		pggpu_data *ds = ps->parts[p];
		pggpu_status st;

		while (i0 + take < n && take < 1024 && ps->smp[q[i0 + take]].part == p)
		{
			rows[take] = ps->smp[q[i0 + take]].at;
			take++;
		}
		if ((st = pggpu_data_get_rows(ds, rows, take, out + i0 * ds->d, err)) != PGGPU_OK)
			return st;
		i0 += take;
	}
	return PGGPU_OK;
}

/*
 * Parts that hold their rows where the backend can copy them to the set
 * (copy_rows: on the CPU, or on GPUs, not parked): their keys, the sample's
 * places ordered (pggpu_seed_order), and a copy on the set's device (from
 * other GPUs by peer copies), the rows scaled back to the caller's units
 */
static pggpu_status
local_sample_set(void *arg, uint64_t seed, double rate, pggpu_data *set, int64_t *m, pggpu_error *err)
{
	local_parts *lp = (local_parts *) arg;
	pggpu_data *home = lp->parts[0];
	int			np = lp->nparts;
	int64_t		most = 1,
				cap = 0;
	uint64_t   *keys = NULL,
			   *skeys = NULL;
	sampled    *smp = NULL;
	int64_t    *at = NULL,
			   *order = NULL;
	int		   *es = NULL,
			   *which = NULL;
	double	   *sw = NULL;
	bool		weighted = false;
	parts_sample ps;
	pggpu_status st = PGGPU_OK;

	*m = 0;
	if (set->ops->copy_rows == NULL || np > PGGPU_MAX_THREADS)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "the sample goes through the host");
	for (int pi = 0; pi < np; pi++)
	{
		pggpu_data *ds = lp->parts[pi];

		if (ds->parked || ds->backend != set->backend || -ds->scale_e < -1022 || -ds->scale_e > 1023)
			return pggpu_fail(err, PGGPU_ERR_INVALID, "the sample goes through the host");
		most = ds->n > most ? ds->n : most;
	}
	keys = (uint64_t *) pggpu_scratch_alloc(home, sizeof(uint64_t) * most);
	at = (int64_t *) pggpu_scratch_alloc(home, sizeof(int64_t) * most);
	es = (int *) pggpu_scratch_alloc(home, sizeof(int) * np);
	if (keys == NULL || at == NULL || es == NULL)
	{
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		goto done;
	}
	for (int pi = 0; pi < np; pi++)
	{
		pggpu_data *ds = lp->parts[pi];
		int64_t		mp = 0;

		es[pi] = -ds->scale_e;
		if (ds->n == 0)
			continue;
		CHECK(ds->ops->keys(ds, keys, err));
		mp = sampled_places(keys, ds->n, seed, rate, at);
		if (*m + mp > cap)
		{
			int64_t		want = *m + mp > 2 * cap ? *m + mp : 2 * cap;
			uint64_t   *kg = (uint64_t *) (skeys ? pggpu_scratch_realloc(home, skeys, sizeof(uint64_t) * want)
										   : pggpu_scratch_alloc(home, sizeof(uint64_t) * want));
			sampled    *sg = kg == NULL ? NULL :
				(sampled *) (smp ? pggpu_scratch_realloc(home, smp, sizeof(sampled) * want)
							 : pggpu_scratch_alloc(home, sizeof(sampled) * want));

			skeys = kg ? kg : skeys;
			smp = sg ? sg : smp;
			if (sg == NULL)
			{
				st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
				goto done;
			}
			cap = want;
		}
		for (int64_t q = 0; q < mp; q++, ++*m)
		{
			skeys[*m] = keys[at[q]];
			smp[*m].at = at[q];
			smp[*m].part = pi;
		}
	}
	if (*m == 0)
		goto done;
	pggpu_scratch_free(home, keys);
	pggpu_scratch_free(home, at);
	keys = NULL;
	at = NULL;
	order = (int64_t *) pggpu_scratch_alloc(home, sizeof(int64_t) * *m);
	if (order == NULL)
	{
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		goto done;
	}
	ps.parts = lp->parts;
	ps.smp = smp;
	/* (the sample's weights: a tie of equal rows is broken by them) */
	for (int pi = 0; pi < np; pi++)
		weighted |= pggpu_data_weights(lp->parts[pi]) != NULL;
	if (weighted && (sw = (double *) pggpu_scratch_alloc(home, sizeof(double) * *m)) == NULL)
	{
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		goto done;
	}
	for (int64_t i = 0; sw && i < *m; i++)
	{
		const double *pw = pggpu_data_weights(lp->parts[smp[i].part]);

		sw[i] = pw ? pw[smp[i].at] : 1.0;
	}
	CHECK(pggpu_seed_order(home, skeys, *m, NULL, sw, sample_rows, &ps, order, err));
	/* the rows in that order: each one's part, and its place there (in order's room) */
	which = (int *) pggpu_scratch_alloc(home, sizeof(int) * *m);
	if (which == NULL)
	{
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		goto done;
	}
	for (int64_t i = 0; i < *m; i++)
	{
		which[i] = smp[order[i]].part;
		order[i] = smp[order[i]].at;
	}
	CHECK(pggpu_copy_rows(set, lp->parts, np, which, order, *m, es, err));
done:
	pggpu_scratch_free(home, keys);
	pggpu_scratch_free(home, at);
	pggpu_scratch_free(home, which);
	pggpu_scratch_free(home, skeys);
	pggpu_scratch_free(home, smp);
	pggpu_scratch_free(home, order);
	pggpu_scratch_free(home, es);
	pggpu_scratch_free(home, sw);
	return st;
}

static pggpu_status
local_farthest(void *arg, int m, int e, double *rows, double *d2, uint64_t *keys, int *got,
			   pggpu_error *err)
{
	local_parts *lp = (local_parts *) arg;

	(void) e;					/* (the parts hold their rows at 2^e: their last step's) */
	return pggpu_parts_farthest(lp->parts, lp->nparts, m, rows, d2, keys, got, err);
}

pggpu_status
pggpu_kmeans_parts(pggpu_data *const *parts, int nparts, const pggpu_kmeans_params *p,
				   pggpu_kmeans_result *r, pggpu_error *err)
{
	local_parts lp = {parts, nparts, NULL, NULL, NULL, 0};
	pggpu_kmeans_source src = {0};
	pggpu_status st;

	if (nparts < 1 || parts == NULL)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "no parts");
	src.home = parts[0];
	for (int pi = 0; pi < nparts; pi++)
	{
		if (parts[pi]->d != parts[0]->d || parts[pi]->metric != parts[0]->metric)
			return pggpu_fail(err, PGGPU_ERR_INVALID, "part %d has other columns or another metric than part 1", pi + 1);
		src.n += parts[pi]->n;
	}
	src.range = local_range;
	src.step = local_step;
	src.centroids = local_centroids;
	src.counts = local_counts;
	src.sample = local_sample;
	src.sample_set = local_sample_set;
	src.farthest = local_farthest;
	src.arg = &lp;
	st = pggpu_kmeans_over(&src, p, r, err);
	pggpu_scratch_free(parts[0], lp.held);
	return st;
}

pggpu_status
pggpu_kmeans(pggpu_data *ds, const pggpu_kmeans_params *p, pggpu_kmeans_result *r,
			 pggpu_error *err)
{
	pggpu_interrupt_fn saved_interrupt = ds->interrupt;
	void	   *saved_arg = ds->interrupt_arg;
	pggpu_status st;

	/* the backend polls the caller's callback inside long passes */
	if (p->check_interrupts)
	{
		ds->interrupt = p->check_interrupts;
		ds->interrupt_arg = p->interrupt_arg;
	}
	st = pggpu_data_unpark(ds, err);
	if (st == PGGPU_OK)
		st = pggpu_kmeans_parts(&ds, 1, p, r, err);
	ds->interrupt = saved_interrupt;
	ds->interrupt_arg = saved_arg;
	pggpu_scratch_free_all(ds);
	return st;
}
