/*
 * farthest.c - the rows that take emptied clusters (fit.c's repair): each
 * part's rows farthest from their centroids in the last step, merged over
 * the parts into the m farthest (larger distance first, then smaller
 * content key, so that every placement of the rows takes the same ones).
 * Only rows at or beyond a part's m-th largest distance are candidates:
 * the backend lists them (op km_farthest) or every distance is fetched.
 */
#include <stdlib.h>
#include <string.h>

#include "compute_internal.h"

#define CHECK(expr) do { if ((st = (expr)) != PGGPU_OK) goto done; } while (0)

/* (d2, key) pairs: larger d2 first, then smaller key */
static bool
farther(double da, uint64_t ka, double db, uint64_t kb)
{
	return da > db || (da == db && ka < kb);
}

int
pggpu_farthest_slot(double *d2, uint64_t *keys, void *extra, size_t size, int m, int *got, double dv,
					uint64_t kv)
{
	int			q;

	if (*got == m && (m == 0 || !farther(dv, kv, d2[m - 1], keys[m - 1])))
		return -1;
	q = *got < m ? (*got)++ : m - 1;
	for (; q > 0 && farther(dv, kv, d2[q - 1], keys[q - 1]); q--)
	{
		d2[q] = d2[q - 1], keys[q] = keys[q - 1];
		if (extra)
			memcpy((char *) extra + size * q, (char *) extra + size * (q - 1), size);
	}
	d2[q] = dv, keys[q] = kv;
	return q;
}

/*
 * The m-th largest of the positive distances D[0 .. n - 1] (the smallest
 * positive one where there are fewer), by insertion into top (m of room,
 * largest first); 0 when none is positive
 */
static double
farthest_floor(const double *D, int64_t n, int m, double *top)
{
	int			got = 0;

	for (int64_t i = 0; i < n; i++)
	{
		int			q;

		if (!(D[i] > 0) || (got == m && D[i] <= top[m - 1]))
			continue;
		q = got < m ? got++ : m - 1;
		for (; q > 0 && top[q - 1] < D[i]; q--)
			top[q] = top[q - 1];
		top[q] = D[i];
	}
	return got > 0 ? top[got - 1] : 0;
}

void
pggpu_farthest_rows(const double *D, int64_t n, int m, int64_t cap, double *top, double *floor,
					int64_t *count, int64_t *rows, double *d2)
{
	*floor = farthest_floor(D, n, m, top);
	*count = 0;
	for (int64_t i = 0; i < n; i++)
		if (D[i] > 0 && D[i] >= *floor)
		{
			if (*count < cap)
				rows[*count] = i, d2[*count] = D[i];
			++*count;
		}
}

/*
 * A part's rows at or beyond its m-th largest positive distance: their
 * places and distances into cand and cd2 (*c of them; more than cap: their
 * count alone), by the backend's km_farthest or from every distance
 * fetched (D: n of room)
 */
static pggpu_status
farthest_candidates(pggpu_data *ds, int m, int64_t cap, double *top, double *D, int64_t *cand, double *cd2,
					int64_t *c, pggpu_error *err)
{
	double		t;
	pggpu_status st;

	if (ds->ops->km_farthest)
		return ds->ops->km_farthest(ds, m, cap, &t, c, cand, cd2, err);
	if ((st = ds->ops->km_fetch(ds, NULL, D, err)) != PGGPU_OK)
		return st;
	pggpu_farthest_rows(D, ds->n, m, cap, top, &t, c, cand, cd2);
	return PGGPU_OK;
}

/* candidates' rows fetched for their keys, at most (more tied at the floor: every row's key) */
#define FARTHEST_ROWS_MAX 65536

/*
 * One part's m farthest rows of its last step (distance > 0): their rows
 * (as held), distances and keys, into rows/d2/keys, *got of them, best
 * first.  The k-means state is left as it was.
 *
 * Only rows at the m-th largest distance or beyond can be among the m:
 * their keys alone, from their rows as held (pggpu_row_key, as the
 * backend's keys pass computes every row's: a pass over all the rows,
 * about 20 ms an iteration that repaired at 10^6 x 768).  Where more than
 * FARTHEST_ROWS_MAX rows tie at that floor, every row's key.
 */
static pggpu_status
part_farthest(pggpu_data *ds, pggpu_data *home, int m, double *rows, double *d2, uint64_t *keys,
			  int *got, pggpu_error *err)
{
	int64_t		nb = ds->n > 0 ? ds->n : 1;
	int64_t		cap = nb < FARTHEST_ROWS_MAX ? nb : FARTHEST_ROWS_MAX;
	/* (three of the home's few scratch slots at most: the fit holds some too) */
	int64_t    *cand = (int64_t *) pggpu_scratch_alloc(home, (sizeof(int64_t) + sizeof(double)) * cap +
													  sizeof(int64_t) * (m > 0 ? m : 1));
	double	   *cd2 = cand ? (double *) (cand + cap) : NULL;
	int64_t    *idx = cand ? (int64_t *) (cd2 + cap) : NULL;
	/* every distance, where the backend cannot find the candidates itself */
	double	   *D = ds->ops->km_farthest ? NULL : (double *) pggpu_scratch_alloc(home, sizeof(double) * nb);
	double	   *crows = NULL;
	uint64_t   *K = NULL;
	bool		was = ds->parked;
	int64_t		c = 0;
	pggpu_status st = PGGPU_OK;

	*got = 0;
	if (!cand || (!ds->ops->km_farthest && !D))
	{
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		goto done;
	}
	if (ds->n == 0 || m == 0)
		goto done;
	CHECK(pggpu_data_unpark(ds, err));
	CHECK(farthest_candidates(ds, m, cap, d2, D, cand, cd2, &c, err));
	/* (their rows where they fit in memory, else every row's key below, as with ties beyond cap) */
	if (c <= cap &&
		(crows = (double *) pggpu_scratch_alloc(home, sizeof(double) * (size_t) (c > 0 ? c : 1) * ds->d)) != NULL)
	{
		if (c > 0)
			CHECK(ds->ops->get_rows(ds, cand, c, crows, err));
		/* the m best by insertion (m: the empty clusters, few), idx their candidates */
		for (int64_t a = 0; a < c; a++)
		{
			int			q = pggpu_farthest_slot(d2, keys, idx, sizeof(int64_t), m, got, cd2[a],
												pggpu_row_key(crows + a * ds->d, 1, ds->d));

			if (q >= 0)
				idx[q] = a;
		}
		for (int q = 0; q < *got; q++)
			memcpy(rows + (int64_t) q * ds->d, crows + idx[q] * ds->d, sizeof(double) * ds->d);
		goto done;
	}
	/* (ties at the floor beyond FARTHEST_ROWS_MAX rows, or their rows too large) every row's distance and key */
	{
		double	   *DK = D ? (double *) pggpu_scratch_realloc(home, D, 2 * sizeof(double) * nb) :
			(double *) pggpu_scratch_alloc(home, 2 * sizeof(double) * nb);

		if (DK == NULL)
		{
			st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
			goto done;
		}
		D = DK;
		K = (uint64_t *) (D + nb);
	}
	CHECK(ds->ops->km_fetch(ds, NULL, D, err));
	CHECK(ds->ops->keys(ds, K, err));
	for (int64_t i = 0; i < ds->n; i++)
	{
		int			q = D[i] > 0 ? pggpu_farthest_slot(d2, keys, idx, sizeof(int64_t), m, got, D[i], K[i]) : -1;

		if (q >= 0)
			idx[q] = i;
	}
	if (*got > 0)
		CHECK(ds->ops->get_rows(ds, idx, *got, rows, err));
done:
	st = pggpu_repark(ds, was, st, err);
	pggpu_scratch_free(home, cand);
	pggpu_scratch_free(home, D);
	pggpu_scratch_free(home, crows);
	return st;
}

pggpu_status
pggpu_parts_farthest(pggpu_data *const *parts, int nparts, int m, double *rows, double *d2,
					 uint64_t *keys, int *got, pggpu_error *err)
{
	int			d = parts[0]->d;
	pggpu_data *home = parts[0];
	/* one part's best, then merged into the running best */
	double	   *prow = (double *) pggpu_scratch_alloc(home, (sizeof(double) * (d + 1) + sizeof(uint64_t)) * (m > 0 ? m : 1));
	double	   *pd2 = prow ? prow + (int64_t) m * d : NULL;
	uint64_t   *pkeys = prow ? (uint64_t *) (pd2 + m) : NULL;
	pggpu_status st = PGGPU_OK;

	*got = 0;
	if (prow == NULL)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	for (int pi = 0; pi < nparts; pi++)
	{
		int			pg;

		if ((st = part_farthest(parts[pi], home, m, prow, pd2, pkeys, &pg, err)) != PGGPU_OK)
			break;
		/* (a part's best come best first: the first not taken ends it) */
		for (int a = 0; a < pg; a++)
		{
			int			q = pggpu_farthest_slot(d2, keys, rows, sizeof(double) * d, m, got, pd2[a], pkeys[a]);

			if (q < 0)
				break;
			memcpy(rows + (int64_t) q * d, prow + (int64_t) a * d, sizeof(double) * d);
		}
	}
	pggpu_scratch_free(home, prow);
	return st;
}
