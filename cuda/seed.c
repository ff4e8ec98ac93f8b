/*
 * seed.c - the k-means driver's seeding, written once against pggpu_ops:
 * random rows, k-means++, and k-means|| (scalable k-means++), the same
 * centres on every backend for the same seed.
 */
#include "compute_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(expr) do { if ((st = (expr)) != PGGPU_OK) goto done; } while (0)

/* ---- a small set of row numbers (open addressing) ------------------------- */

typedef struct rowset
{
	int64_t    *slot;			/* -1 = empty */
	uint64_t	mask;
} rowset;

static bool
rowset_init(pggpu_data *ds, rowset *s, int64_t expected)
{
	uint64_t	cap = 16;

	while (cap < (uint64_t) expected * 2)
		cap <<= 1;
	s->slot = (int64_t *) pggpu_scratch_alloc(ds, cap * sizeof(int64_t));
	if (s->slot == NULL)
		return false;
	memset(s->slot, 0xff, cap * sizeof(int64_t));
	s->mask = cap - 1;
	return true;
}

/* true if added, false if it was there */
static bool
rowset_add(rowset *s, int64_t row)
{
	uint64_t	h = pggpu_mix64((uint64_t) row) & s->mask;

	while (s->slot[h] != -1)
	{
		if (s->slot[h] == row)
			return false;
		h = (h + 1) & s->mask;
	}
	s->slot[h] = row;
	return true;
}

static bool
rowset_has(const rowset *s, int64_t row)
{
	uint64_t	h = pggpu_mix64((uint64_t) row) & s->mask;

	while (s->slot[h] != -1)
	{
		if (s->slot[h] == row)
			return true;
		h = (h + 1) & s->mask;
	}
	return false;
}

/* ---- seeding -------------------------------------------------------------- */

const double *
pggpu_weights_drawn(const pggpu_data *ds)
{
	const double *w = pggpu_data_weights(ds);

	for (int64_t i = 1; w && i < ds->n; i++)
		if (w[i] != w[0])
			return w;
	return w && ds->n > 0 && w[0] > 0 ? NULL : w;
}


/* a weighted row's key in random's draw, and its place */
typedef struct keyed_row
{
	double		key;
	int64_t		row;
} keyed_row;

static int
keyed_cmp(const void *a, const void *b)
{
	const keyed_row *x = (const keyed_row *) a,
			   *y = (const keyed_row *) b;

	return x->key < y->key ? -1 : x->key > y->key ? 1 : x->row < y->row ? -1 : x->row > y->row;
}

/*
 * A weighted set's k distinct rows, drawn without replacement with
 * probability proportional to weight (as scikit-learn's): the k least keys
 * -log(u_i) / w_i (Efraimidis and Spirakis), rows of weight 0 last, in row
 * order; in key order
 */
static pggpu_status
seed_random_weighted(pggpu_data *ds, const pggpu_kmeans_params *p, const double *w, pggpu_error *err)
{
	uint64_t	key = pggpu_mix64(p->seed ^ 0x9fb21c651e98df25ULL);
	keyed_row  *kr = (keyed_row *) pggpu_scratch_alloc(ds, sizeof(keyed_row) * ds->n);
	pggpu_status st = PGGPU_OK;

	if (kr == NULL)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	for (int64_t i = 0; i < ds->n; i++)
		kr[i] = (keyed_row) {pggpu_draw_key(key, i, w[i]), i};
	pggpu_interrupts(p);
	qsort(kr, ds->n, sizeof(keyed_row), keyed_cmp);
	for (int c = 0; c < p->k; c++)
		CHECK(ds->ops->km_point(ds, kr[c].row, c, PGGPU_D2_KEEP, NULL, err));
done:
	pggpu_scratch_free(ds, kr);
	return st;
}

/* k distinct rows of n, seeded (Floyd's algorithm); weighted sets: by weight */
pggpu_status
pggpu_seed_random(pggpu_data *ds, const pggpu_kmeans_params *p, pggpu_error *err)
{
	rowset		set;
	int			c = 0;
	const double *drawn = pggpu_weights_drawn(ds);
	pggpu_status st = PGGPU_OK;

	if (drawn)
		return seed_random_weighted(ds, p, drawn, err);
	if (!rowset_init(ds, &set, p->k))
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	for (int64_t j = ds->n - p->k; j < ds->n; j++)
	{
		int64_t		t = (int64_t) (pggpu_mix64(p->seed ^ pggpu_mix64((uint64_t) j)) %
								   (uint64_t) (j + 1));
		int64_t		row = rowset_add(&set, t) ? t : j;

		if (row == j)
			rowset_add(&set, j);
		if ((c & 1023) == 0)
			pggpu_interrupts(p);
		CHECK(ds->ops->km_point(ds, row, c++, PGGPU_D2_KEEP, NULL, err));
	}
done:
	pggpu_scratch_free(ds, set.slot);	/* several starts seed in turn */
	return st;
}

/*
 * k-means++ (Arthur & Vassilvitskii): the first centre given (pggpu_seed_first: uniformly), each next
 * one drawn with probability proportional to the squared distance to the
 * nearest centre so far.  The draw is two exponential races (a block of
 * rows by the sum of its D_i^2, then a row of that block by its D_i^2; see
 * PGGPU_DRAW_ROWS in compute_internal.h), each key -log(u) / weight with u
 * from a counter-based hash of the seed, the step and the block or row, so
 * it needs one reduction and comes out the same on every backend.  When every distance is 0 (fewer distinct rows than k), the
 * next unchosen row is taken.
 */
/* the key of the draw of centre c */
static uint64_t
step_key(const pggpu_kmeans_params *p, int c)
{
	return pggpu_mix64(p->seed + 0x632be59bd9b4e019ULL * (uint64_t) c);
}

/*
 * k-means++ steps a backend's km_pp_steps makes between interrupt checks:
 * PP_BATCH, fewer where they would measure more than PP_WORK squared
 * differences (a step measures at most every row once, about 0.2 s at
 * the GPU's memory bandwidth)
 */
#define PP_BATCH 64
#define PP_WORK ((double) (1LL << 36))

pggpu_status
pggpu_seed_kmeanspp(pggpu_data *ds, const pggpu_kmeans_params *p, int64_t first,
					pggpu_error *err)
{
	uint64_t	key;
	rowset		chosen;
	int64_t		next_free = 0;
	int64_t		row = first;
	pggpu_status st = PGGPU_OK;

	/* fewer steps a batch where one step's pass is long (PP_WORK) */
	int			batch = PP_BATCH;

	while (batch > 1 && (double) batch * ds->n * ds->d > (ds->poll_work > 0 ? ds->poll_work : PP_WORK))
		batch >>= 1;
	if (!rowset_init(ds, &chosen, p->k))
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	rowset_add(&chosen, row);
	key = step_key(p, 1);
	CHECK(ds->ops->km_point(ds, row, 0, PGGPU_D2_SET, p->k > 1 ? &key : NULL, err));
	for (int c = 1; c < p->k;)
	{
		pggpu_interrupts(p);
		if (ds->ops->km_pp_steps)
		{
			/* a batch of steps on the backend */
			uint64_t	keys[PP_BATCH + 1];
			int64_t		rows[PP_BATCH];
			int			c1 = p->k - c < batch ? p->k : c + batch;
			int			done;

			for (int j = 0; j <= c1 - c; j++)
				keys[j] = step_key(p, c + j);
			CHECK(ds->ops->km_pp_steps(ds, c, c1, keys, rows, &done, err));
			for (int j = 0; j < done; j++)
				rowset_add(&chosen, rows[j]);
			c += done;
			if (c == c1)
				continue;
			/* the draw of step c found no row: that step is made here */
		}
		CHECK(ds->ops->km_pick(ds, PGGPU_PICK_SAMPLE, step_key(p, c), &row, err));
		if (row < 0 || rowset_has(&chosen, row))
		{
			while (rowset_has(&chosen, next_free))
				next_free++;
			row = next_free;
		}
		rowset_add(&chosen, row);
		key = step_key(p, c + 1);
		CHECK(ds->ops->km_point(ds, row, c, PGGPU_D2_MIN, c + 1 < p->k ? &key : NULL, err));
		c++;
	}
done:
	pggpu_scratch_free(ds, chosen.slot);	/* several starts seed in turn */
	return st;
}

/*
 * Greedy k-means++ (scikit-learn's default, after Arthur & Vassilvitskii):
 * each step draws 2 + floor(ln k) candidates as k-means++ draws one (an
 * exponential race each, keyed by the seed, the step and the trial), and
 * keeps the one that lowers the potential sum_i min(D_i^2, |x_i - c|^2)
 * most (km_trials: the same sums on every backend; the first on ties).
 * Plain k-means++ puts two centres in one blob far more often, and Lloyd
 * cannot move them apart.  When every distance is 0 (fewer distinct rows
 * than k), the next unchosen row is taken.
 */
/* the key of trial t of step c's draw */
static uint64_t
trial_key(const pggpu_kmeans_params *p, int c, int t)
{
	return pggpu_mix64(step_key(p, c) ^ (0x94d049bb133111ebULL * (uint64_t) (t + 1)));
}

int
pggpu_greedy_trials(int k)
{
	int			t = 2 + (int) log((double) k);

	return t > PGGPU_TRIALS_MAX ? PGGPU_TRIALS_MAX : t;
}

pggpu_status
pggpu_seed_greedy(pggpu_data *ds, const pggpu_kmeans_params *p, int64_t first, pggpu_error *err)
{
	int			trials = pggpu_greedy_trials(p->k);
	uint64_t	keys[PP_BATCH * PGGPU_TRIALS_MAX];
	int64_t		cand[PGGPU_TRIALS_MAX];
	double		pot[PGGPU_TRIALS_MAX];
	rowset		chosen;
	int64_t		next_free = 0;
	pggpu_status st = PGGPU_OK;
	int			batch = PP_BATCH;

	/* fewer steps a batch where one step's trials are long (PP_WORK) */
	while (batch > 1 && (double) batch * trials * ds->n * ds->d > (ds->poll_work > 0 ? ds->poll_work : PP_WORK))
		batch >>= 1;
	if (!rowset_init(ds, &chosen, p->k))
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	rowset_add(&chosen, first);
	CHECK(ds->ops->km_point(ds, first, 0, PGGPU_D2_SET, NULL, err));
	for (int c = 1; c < p->k;)
	{
		int			best = -1;
		int64_t		row;

		pggpu_interrupts(p);
		if (ds->ops->km_greedy_steps)
		{
			/* a batch of steps on the backend; where one finds no row, it is made here */
			int64_t		rows[PP_BATCH];
			int			c1 = p->k - c < batch ? p->k : c + batch;
			int			done;

			for (int j = 0; j < c1 - c; j++)
				for (int t = 0; t < trials; t++)
					keys[j * trials + t] = trial_key(p, c + j, t);
			CHECK(ds->ops->km_greedy_steps(ds, c, c1, keys, trials, rows, &done, err));
			for (int j = 0; j < done; j++)
				rowset_add(&chosen, rows[j]);
			c += done;
			if (c == c1)
				continue;
		}
		for (int t = 0; t < trials; t++)
			keys[t] = trial_key(p, c, t);
		CHECK(ds->ops->km_trials(ds, keys, trials, cand, pot, err));
		/* (a row chosen has distance 0: never drawn) */
		for (int t = 0; t < trials; t++)
			if (cand[t] >= 0 && !rowset_has(&chosen, cand[t]) && (best < 0 || pot[t] < pot[best]))
				best = t;
		if (best >= 0)
			row = cand[best];
		else
		{
			/* no row is away from every centre: the next one not chosen */
			while (rowset_has(&chosen, next_free))
				next_free++;
			row = next_free;
		}
		rowset_add(&chosen, row);
		CHECK(ds->ops->km_point(ds, row, c, PGGPU_D2_MIN, NULL, err));
		c++;
	}
done:
	pggpu_scratch_free(ds, chosen.slot);	/* several starts seed in turn */
	return st;
}

/* the first centre of k-means++ and k-means||: a row drawn uniformly */
int64_t
pggpu_seed_first(const pggpu_kmeans_params *p, const pggpu_data *ds)
{
	const double *w = pggpu_weights_drawn(ds);
	uint64_t	key = pggpu_mix64(p->seed);
	double		best = INFINITY;
	int64_t		row = -1;

	/* weighted: row i with probability w_i / sum w (an exponential race, the lowest row on ties) */
	for (int64_t i = 0; w && i < ds->n; i++)
	{
		double		kv = pggpu_draw_key(key, i, w[i]);

		if (kv < best)
			best = kv, row = i;
	}
	return row >= 0 ? row : (int64_t) (key % (uint64_t) ds->n);
}

/* ---- k-means|| --------------------------------------------------------------- */

/*
 * k-means|| (Bahmani et al., "Scalable k-means++", VLDB 2012): instead of k
 * passes over the rows, one for each centre, LL_ROUNDS passes that each
 * sample about LL_OVERSAMPLE * k candidates at once, then a weighted
 * k-means++ over the candidates alone (a few times k rows, not n):
 *
 *  1. The first candidate is the seed's uniform row (as k-means++'s).
 *  2. Each round measures every row against the candidates the last round
 *     added (km_gather, then km_step without update, the labelling pass of
 *     Lloyd: exact, the same on every backend), keeps each row's distance
 *     D_i^2 to its nearest candidate so far (lowest candidate on ties), and
 *     samples row i with probability min(1, l D_i^2 / sum D^2), l =
 *     LL_OVERSAMPLE k, by a counter-based hash of the seed, the round and i
 *     (on the host: the same rows on every backend).
 *  3. Each candidate weighs the rows nearest to it; k-means++ draws k of
 *     them with probability ~ weight x D^2 (km_weights), on a data set of
 *     the candidates on the same backend, from the first candidate.
 *
 * The candidates' count is random, about 1 + LL_ROUNDS LL_OVERSAMPLE k.
 * Where there are not more than k (few distinct rows), plain k-means++.
 */
#define LL_ROUNDS 5
#define LL_OVERSAMPLE 2.0

/* the key of round r's sample */
static uint64_t
round_key(const pggpu_kmeans_params *p, int r)
{
	return pggpu_mix64(p->seed ^ (0x5851f42d4c957f2dULL * (uint64_t) (r + 1)));
}

/* the candidates so far: their rows and coordinates (m x d), growing */
typedef struct cand_set
{
	int64_t		m;
	int64_t		cap;
	int64_t    *rows;
	double	   *coords;
} cand_set;

/* room for `more` candidates; false: out of memory */
static bool
cand_grow(pggpu_data *ds, cand_set *cs, int64_t more)
{
	int64_t		cap = cs->cap;
	int64_t    *rows;
	double	   *coords;

	if (cs->m + more <= cap)
		return true;
	while (cap < cs->m + more)
		cap = cap ? 2 * cap : 1024;
	rows = (int64_t *) pggpu_scratch_realloc(ds, cs->rows, sizeof(int64_t) * cap);
	if (rows == NULL)
		return false;
	cs->rows = rows;
	coords = (double *) pggpu_scratch_realloc(ds, cs->coords, sizeof(double) * cap * ds->d);
	if (coords == NULL)
		return false;
	cs->coords = coords;
	cs->cap = cap;
	return true;
}

/*
 * Measures every row against candidates cs->rows[m0 .. cs->m) (their
 * coordinates filled in here) and merges into D2 and lab (first: sets them).
 * d2 and lab2 are n-row buffers the pass may overwrite.
 */
static pggpu_status
ll_measure(pggpu_data *ds, cand_set *cs, int64_t m0, double *D2, int32_t *lab,
		   double *d2, int32_t *lab2, pggpu_error *err)
{
	const pggpu_ops *ops = ds->ops;
	int			mn = (int) (cs->m - m0);
	pggpu_step_stats sst;
	pggpu_status st;

	if ((st = ops->km_begin(ds, mn, err)) != PGGPU_OK)
		return st;
	ds->k = mn;
	if ((st = ops->km_gather(ds, cs->rows + m0, mn, err)) != PGGPU_OK ||
		(st = ops->km_get_centroids(ds, cs->coords + m0 * ds->d, err)) != PGGPU_OK ||
		(st = ops->km_step(ds, false, true, &sst, err)) != PGGPU_OK ||
		(st = ops->km_fetch(ds, lab2, d2, err)) != PGGPU_OK)
		return st;
	for (int64_t i = 0; i < ds->n; i++)
		if (m0 == 0 || d2[i] < D2[i])
		{
			D2[i] = d2[i];
			lab[i] = (int32_t) (m0 + lab2[i]);
		}
	return PGGPU_OK;
}

/* the rows of round r's sample appended to cs (step 2 above) */
static pggpu_status
ll_sample(pggpu_data *ds, const pggpu_kmeans_params *p, int r, const double *D2,
		  cand_set *cs, pggpu_error *err)
{
	const double *rw = pggpu_data_weights(ds);
	double		psi = 0,
				ell = LL_OVERSAMPLE * p->k;
	uint64_t	key = round_key(p, r);

	for (int64_t i = 0; i < ds->n; i++)
		psi += rw ? rw[i] * D2[i] : D2[i];
	if (!(psi > 0))
		return PGGPU_OK;
	for (int64_t i = 0; i < ds->n; i++)
		if (D2[i] > 0 && pggpu_uniform(key, i) * psi <= ell * (rw ? rw[i] * D2[i] : D2[i]))
		{
			if (!cand_grow(ds, cs, 1))
				return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
			cs->rows[cs->m++] = i;
		}
	return PGGPU_OK;
}

/*
 * Step 3: k of the candidates by k-means++ weighted by w, into C (k x d), on
 * a data set of them on ds's backend (ds->aux while it lives, so that a
 * longjmp out of the interrupt callback leaves nothing behind).
 */
static pggpu_status
ll_recluster(pggpu_data *ds, const pggpu_kmeans_params *p, const cand_set *cs,
			 const double *w, double *C, pggpu_error *err)
{
	pggpu_data *cds;
	pggpu_kmeans_params q = *p;
	int			d = ds->d;
	pggpu_status st;

	if ((st = pggpu_data_open(&cds, ds->backend, ds->gpu_index, d, cs->m, err)) != PGGPU_OK)
		return st;
	ds->aux = cds;
	cds->threads = ds->threads;
	cds->pending = ds->pending;
	cds->interrupt = ds->interrupt;
	cds->interrupt_arg = ds->interrupt_arg;
	cds->poll_work = ds->poll_work;
	cds->force.pp_warps = ds->force.pp_warps;
	CHECK(pggpu_data_push_rows(cds, cs->coords, w, NULL, cs->m, err));
	CHECK(cds->ops->km_begin(cds, p->k, err));
	cds->k = p->k;
	q.seed = pggpu_mix64(p->seed ^ 0x2545f4914f6cdd1dULL);
	CHECK(pggpu_seed_kmeanspp(cds, &q, 0, err));
	CHECK(cds->ops->km_get_centroids(cds, C, err));
done:
	ds->aux = NULL;
	pggpu_data_close(cds);
	return st;
}

pggpu_status
pggpu_seed_parallel(pggpu_data *ds, const pggpu_kmeans_params *p, pggpu_error *err)
{
	int64_t		n = ds->n;
	int			k = p->k;
	cand_set	cs = {0};
	double	   *D2 = (double *) pggpu_scratch_alloc(ds, sizeof(double) * n);
	double	   *d2 = (double *) pggpu_scratch_alloc(ds, sizeof(double) * n);
	int32_t    *lab = (int32_t *) pggpu_scratch_alloc(ds, sizeof(int32_t) * n);
	int32_t    *lab2 = (int32_t *) pggpu_scratch_alloc(ds, sizeof(int32_t) * n);
	double	   *w = NULL,
			   *C = NULL;
	const double *rw;
	pggpu_status st = PGGPU_OK;

	if (!D2 || !d2 || !lab || !lab2 || !cand_grow(ds, &cs, 1))
	{
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		goto done;
	}
	cs.rows[cs.m++] = pggpu_seed_first(p, ds);
	for (int r = 0, m0 = 0;; r++)
	{
		pggpu_interrupts(p);
		if (cs.m > m0)
			CHECK(ll_measure(ds, &cs, m0, D2, lab, d2, lab2, err));
		m0 = (int) cs.m;
		if (r == LL_ROUNDS)
			break;
		CHECK(ll_sample(ds, p, r, D2, &cs, err));
	}
	if (cs.m <= k)
	{
		/* few distinct rows: nothing to choose from */
		CHECK(ds->ops->km_begin(ds, k, err));
		ds->k = k;
		CHECK(pggpu_seed_kmeanspp(ds, p, pggpu_seed_first(p, ds), err));
		goto done;
	}
	w = (double *) pggpu_scratch_alloc(ds, sizeof(double) * cs.m);
	C = (double *) pggpu_scratch_alloc(ds, sizeof(double) * k * ds->d);
	if (!w || !C)
	{
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		goto done;
	}
	memset(w, 0, sizeof(double) * cs.m);
	rw = pggpu_data_weights(ds);
	for (int64_t i = 0; i < n; i++)
		w[lab[i]] += rw ? rw[i] : 1;
	pggpu_interrupts(p);
	CHECK(ll_recluster(ds, p, &cs, w, C, err));
	CHECK(ds->ops->km_begin(ds, k, err));
	ds->k = k;
	CHECK(ds->ops->km_put_centroids(ds, C, err));
done:
	/* several starts seed in turn: the scratch slots back */
	pggpu_scratch_free(ds, D2), pggpu_scratch_free(ds, d2);
	pggpu_scratch_free(ds, lab), pggpu_scratch_free(ds, lab2);
	pggpu_scratch_free(ds, cs.rows), pggpu_scratch_free(ds, cs.coords);
	pggpu_scratch_free(ds, w), pggpu_scratch_free(ds, C);
	return st;
}
