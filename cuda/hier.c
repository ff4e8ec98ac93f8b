/*
 * hier.c - hierarchical k-means (algorithm 'hierarchical'): for very large
 * k, where Lloyd's iteration costs N x k, k-means of the rows into about
 * sqrt(k) groups, then of each group's rows into its share of k, with the
 * fit's metric, seeding, n_init, max_iter and tol (every fit is
 * pggpu_kmeans, Lloyd's, on one data set).  The driver (fit.c) then labels
 * every row of the source by its nearest of the k centroids, exactly, as
 * after Lloyd; the centroids are not Lloyd's fixed point over all rows
 * (each is the mean of its group's rows nearest it among its group's).
 *
 * The fits run on one set of the source's rows on the home's backend
 * (pggpu_fit_set): every row, or HIER_PER_K a centroid where that is fewer
 * (FAISS's default too), and no more than HIER_BYTES of doubles, drawn by
 * their content and sorted by key, so that the fits, like a seeding set,
 * depend on the rows' values alone, never on their order or holder.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compute_internal.h"

#define CHECK(expr) do { if ((st = (expr)) != PGGPU_OK) goto done; } while (0)

#define HIER_PER_K 256
#define HIER_BYTES ((int64_t) 4 << 30)

/* the rows the fits run on: all, or HIER_PER_K a centroid within HIER_BYTES */
static double
hier_rate(const pggpu_kmeans_source *src, int k)
{
	int64_t		cap = (int64_t) k * HIER_PER_K;
	int64_t		fit = HIER_BYTES / ((int64_t) sizeof(double) * src->home->d);

	if (cap > fit)
		cap = fit > k ? fit : k;
	return src->n <= cap ? 1.0 : (double) cap / (double) src->n;
}

/* the first level's groups: about sqrt(k), at most the rows */
int
pggpu_hier_groups(int k, int64_t rows)
{
	int			g = (int) lround(sqrt((double) k));

	if (g < 1)
		g = 1;
	return rows < g ? (int) rows : g;
}

/*
 * Each group's share of k (in share): k split in proportion to the groups'
 * rows, a group never given more centroids than rows.  The whole parts
 * first, then the rest one at a time by the highest average (D'Hondt: rows
 * / (share + 1)), the lower group on ties.  k <= the rows in all.
 */
void
pggpu_hier_shares(const int64_t *rows, int g, int k, int *share)
{
	int64_t		n = 0;
	int			given = 0;

	for (int j = 0; j < g; j++)
		n += rows[j];
	for (int j = 0; j < g; j++)
	{
		double		q = n > 0 ? floor((double) k * (double) rows[j] / (double) n) : 0;

		share[j] = (int) (q < (double) rows[j] ? q : (double) rows[j]);
		given += share[j];
	}
	while (given < k)
	{
		int			best = -1;

		for (int j = 0; j < g; j++)
			if (share[j] < rows[j] &&
				(best < 0 || (double) rows[j] * (share[best] + 1) > (double) rows[best] * (share[j] + 1)))
				best = j;
		if (best < 0)
			break;				/* (fewer rows than k: never, k <= rows) */
		share[best]++;
		given++;
	}
}

/* one fit of the hierarchy on ds, its centroids (caller's units) into C; its figures into r */
static pggpu_status
hier_fit(pggpu_data *ds, const pggpu_kmeans_params *p, int k, uint64_t seed, double *C,
		 int64_t *sizes, int32_t *labels, pggpu_kmeans_result *r, pggpu_error *err)
{
	pggpu_kmeans_params q = *p;
	pggpu_kmeans_result f = {0};
	pggpu_status st;

	q.k = k;
	q.seed = seed;
	q.algorithm = PGGPU_ALGORITHM_LLOYD;
	q.progress = NULL;
	f.centroids = C;
	f.sizes = sizes;
	f.labels = labels;
	if ((st = pggpu_kmeans(ds, &q, &f, err)) != PGGPU_OK)
		return st;
	if (f.iterations > r->iterations)
		r->iterations = f.iterations;
	r->converged &= f.converged;
	r->changed += f.changed;
	r->seed_seconds += f.seed_seconds;
	r->iterate_seconds += f.iterate_seconds;
	return PGGPU_OK;
}

/* a group's rows (places `at` of set, m of them) into sub, as pushed into set */
static pggpu_status
hier_rows(pggpu_data *set, pggpu_data *sub, const int64_t *at, int64_t m, double *buf,
		  pggpu_error *err)
{
	int			e = -set->scale_e;
	pggpu_status st;

	if (sub->ops->copy_rows && sub->backend == set->backend)
	{
		st = sub->ops->copy_rows(sub, &set, 1, NULL, at, m, &e, err);
		if (st != PGGPU_ERR_INVALID)
			return st;
		err->code = PGGPU_OK;	/* (through the host, below) */
		err->msg[0] = '\0';
	}
	if ((st = set->ops->get_rows(set, at, m, buf, err)) != PGGPU_OK)
		return st;
	pggpu_ldexp_all(buf, m * set->d, e);
	return pggpu_data_push_rows(sub, buf, NULL, m, err);
}

pggpu_status
pggpu_hierarchical(const pggpu_kmeans_source *src, const pggpu_kmeans_params *p, int e, double *C,
				   pggpu_kmeans_result *r, pggpu_error *err)
{
	pggpu_data *home = src->home;
	pggpu_data *set = NULL,
			   *sub = NULL;
	int			d = home->d;
	int			k = p->k;
	int			g;
	int64_t		m;
	void	   *space = NULL;
	double	   *C1,
			   *buf = NULL;
	int64_t    *rows1,
			   *sizes,
			   *at,
			   *first;
	int32_t    *labels1;
	int		   *share;
	int64_t		most = 0;
	int			done_k = 0;
	pggpu_status st = PGGPU_OK;

	r->iterations = 0;
	r->converged = true;
	r->changed = 0;
	CHECK(pggpu_fit_set(src, hier_rate(src, k), pggpu_mix64(p->seed ^ 0x510e527fade682d1ULL), k, &set,
						err));
	m = set->n;
	g = pggpu_hier_groups(k, m);
	r->groups = g;
	r->trained = m;
	/* (one block of the home's few scratch slots, freed with it after a longjmp) */
	space = pggpu_scratch_alloc(home, sizeof(double) * g * d + sizeof(int64_t) * (2 * (g + 1) + k + m) +
								sizeof(int32_t) * m + sizeof(int) * g);
	if (!space)
	{
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		goto done;
	}
	C1 = (double *) space;
	rows1 = (int64_t *) (C1 + (int64_t) g * d);
	first = rows1 + g + 1;
	sizes = first + g + 1;
	at = sizes + k;
	labels1 = (int32_t *) (at + m);
	share = (int *) (labels1 + m);

	/* the groups: a fit of the set's rows into g */
	CHECK(hier_fit(set, p, g, pggpu_mix64(p->seed ^ 0x9b05688c2b3e6c1fULL), C1, rows1, labels1, r, err));
	pggpu_hier_shares(rows1, g, k, share);

	/* each group's rows, in the set's order: at[first[j] ..] */
	first[0] = 0;
	for (int j = 0; j < g; j++)
	{
		first[j + 1] = first[j] + rows1[j];
		if (share[j] > 0 && rows1[j] > most)
			most = rows1[j];
	}
	for (int j = 0; j < g; j++)
		rows1[j] = first[j];
	for (int64_t i = 0; i < m; i++)
		at[rows1[labels1[i]]++] = i;
	/* (the groups' rows through the host where they cannot go from set to set) */
	buf = (double *) pggpu_scratch_alloc(home, sizeof(double) * (most > 0 ? most : 1) * d);
	if (!buf)
	{
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		goto done;
	}

	/* then each group's rows into its share, the centroids in group order */
	for (int j = 0; j < g; j++)
	{
		int64_t		mj = first[j + 1] - first[j];

		if (share[j] == 0)
			continue;
		pggpu_interrupts(p);
		CHECK(pggpu_fit_open(set, set->backend, mj, &sub, err));
		CHECK(hier_rows(set, sub, at + first[j], mj, buf, err));
		CHECK(hier_fit(sub, p, share[j], pggpu_mix64(p->seed ^ (0x1f83d9abfb41bd6bULL * (uint64_t) (j + 1))),
					   C + (int64_t) done_k * d, sizes, NULL, r, err));
		pggpu_fit_close(set, sub);
		sub = NULL;
		done_k += share[j];
	}
	if (done_k != k)
	{
		st = pggpu_fail(err, PGGPU_ERR_INVALID, "hierarchical k-means made %d of %d centroids", done_k, k);
		goto done;
	}
	/* (caller's units to the fit's; cosine: the fits' unit centroids to norm 2^e, as the driver's) */
	pggpu_ldexp_all(C, (int64_t) k * d, e);
done:
	if (sub)
		pggpu_fit_close(set, sub);
	if (set)
		pggpu_fit_close(home, set);
	pggpu_scratch_free(home, space);
	pggpu_scratch_free(home, buf);
	return st;
}
