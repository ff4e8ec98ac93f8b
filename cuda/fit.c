/*
 * fit.c - the k-means driver: Lloyd's algorithm written once, against a
 * source of rows (pggpu_kmeans_source), for every placement of the rows:
 * one data set (the CPU or one GPU), parts streamed through a GPU, shares
 * on several GPUs (parts.c), the nodes of a Citus cluster
 * (src/citus_kmeans.c).  Seeding, the iterations, the repair of empty
 * clusters, n_init, cosine and the numbering of the clusters live here and
 * nowhere else, so the same arguments and seed give the same fit wherever
 * the rows are and in whatever order they arrive:
 *
 *  - Seeding runs on the seeding set: the rows a counter hash of the seed
 *    and each row's content key (pggpu_row_key) picks, at a rate that keeps
 *    about SEED_ROWS(k) of them (all of them in smaller tables), sorted by
 *    key into one data set on the home's backend.  The set depends on the
 *    rows' values only, never on their order or holder, and the seeding on
 *    it (random rows, greedy k-means++, k-means||) is bit for bit the same
 *    on the CPU and the GPU.
 *  - An iteration is one step of the source: every row labelled by the
 *    centroids, each cluster's mean of its rows back.  A holder adds its
 *    rows in its order and holders' sums are added in holder order: the
 *    centroids agree across placements to within a few units in the last
 *    place (relative 1e-15), the labels with them.
 *  - An emptied cluster takes the row farthest from its centroid (largest
 *    distance, then least key), one distinct row each, in cluster order.
 *
 * The fit computes at 2^e times the caller's units (e from the rows' range
 * where the source knows it: compute.c), so that squares neither overflow
 * nor underflow.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compute_internal.h"

#define CHECK(expr) do { if ((st = (expr)) != PGGPU_OK) goto done; } while (0)

/*
 * The seeding set's rows: SEED_PER_K a cluster, at least SEED_MIN, but no
 * more than SEED_BYTES of values where that leaves SEED_FLOOR_K a cluster
 * (wide rows: 65,536 rows of 15,000 values would be 7.9 GB)
 */
#define SEED_PER_K 32
#define SEED_MIN 65536
#define SEED_BYTES ((int64_t) 1 << 30)
#define SEED_FLOOR_K 4

int64_t
pggpu_seed_rows(int k, int d)
{
	int64_t		want = (int64_t) k * SEED_PER_K;
	int64_t		fit = SEED_BYTES / ((int64_t) sizeof(double) * (d > 0 ? d : 1));
	int64_t		floor = (int64_t) k * SEED_FLOOR_K;

	want = want > SEED_MIN ? want : SEED_MIN;
	if (want > fit)
		want = fit > floor ? fit : floor;
	return want;
}

/* (key, place) pairs of a sample, to sort; then runs of one key by value */
typedef struct keyed
{
	uint64_t	key;
	int64_t		i;				/* its place in the sample */
	const double *x;			/* its values, where keys tie */
	double		w;				/* its weight (1: unweighted), where values tie */
} keyed;

static __thread int keyed_d;

/*
 * The places 0 .. m-1 by key, equal keys in place order, into kp (m
 * pairs): one pass into 2^b buckets by the keys' top b bits, about 16 keys
 * a bucket (the keys are content hashes, spread evenly), then each bucket
 * by insertion, or past SMALL_BUCKET keys (equal rows, or rows made to
 * collide) by a radix sort of its own, a byte a pass.  A radix sort of
 * every key, a byte a pass, took 0.12-0.16 s of a hierarchical fit's 1.0
 * at 10^6 rows (an H200's host), with the sorted pairs gathered again by
 * place after it; qsort took 0.29 s.  false: out of memory.
 */
typedef struct key_place
{
	uint64_t	key;
	int64_t		i;
} key_place;

#define SMALL_BUCKET 48

/* a[0 .. m-1] by key, stable, a byte a pass (a byte all keys share skipped); t: room for m */
static void
radix_bucket(key_place *a, key_place *t, int64_t m)
{
	int64_t		count[256];

	for (int p = 0; p < 8; p++)
	{
		int64_t		at = 0;
		bool		one = true;

		memset(count, 0, sizeof(count));
		for (int64_t i = 0; i < m; i++)
			count[(a[i].key >> (8 * p)) & 0xff]++;
		for (int v = 0; v < 256; v++)
		{
			int64_t		n = count[v];

			one &= n == 0 || n == m;
			count[v] = at;
			at += n;
		}
		if (one)
			continue;
		for (int64_t i = 0; i < m; i++)
			t[count[(a[i].key >> (8 * p)) & 0xff]++] = a[i];
		memcpy(a, t, sizeof(key_place) * m);
	}
}

static bool
key_order(const uint64_t *keys, int64_t m, key_place *kp)
{
	int			b = 4;
	int64_t    *end;
	key_place  *t = NULL;
	int64_t		big = 0;

	while (b < 16 && ((int64_t) 16 << b) < m)
		b++;
	if ((end = (int64_t *) calloc(((size_t) 1 << b) + 1, sizeof(int64_t))) == NULL)
		return false;
	/* end[v + 1]: bucket v's size, then its start; end[v] its end after the pass */
	for (int64_t i = 0; i < m; i++)
		end[(keys[i] >> (64 - b)) + 1]++;
	for (int v = 0; v < (1 << b); v++)
	{
		big = end[v + 1] > big ? end[v + 1] : big;
		end[v + 1] += end[v];
	}
	for (int64_t i = 0; i < m; i++)
	{
		int64_t    *at = &end[keys[i] >> (64 - b)];

		kp[*at].key = keys[i];
		kp[*at].i = i;
		++*at;
	}
	if (big > SMALL_BUCKET && (t = (key_place *) malloc(sizeof(key_place) * big)) == NULL)
	{
		free(end);
		return false;
	}
	for (int v = 0; v < (1 << b); v++)
	{
		int64_t		b0 = v == 0 ? 0 : end[v - 1],
					n = end[v] - b0;
		key_place  *a = kp + b0;

		if (n > SMALL_BUCKET)
			radix_bucket(a, t, n);
		else
			for (int64_t i = 1; i < n; i++)
			{
				key_place	x = a[i];
				int64_t		j = i;

				for (; j > 0 && a[j - 1].key > x.key; j--)
					a[j] = a[j - 1];
				a[j] = x;
			}
	}
	free(t);
	free(end);
	return true;
}

static int
cmp_values(const void *a, const void *b)
{
	const keyed *x = (const keyed *) a;
	const keyed *y = (const keyed *) b;

	/* (-0 before 0: rows equal as numbers but not in their bits are not interchangeable) */
	for (int j = 0; j < keyed_d; j++)
		if (x->x[j] != y->x[j] || signbit(x->x[j]) != signbit(y->x[j]))
			return x->x[j] < y->x[j] || (x->x[j] == y->x[j] && signbit(x->x[j])) ? -1 : 1;
	/* (equal rows of other weights are not interchangeable either) */
	if (x->w != y->w)
		return x->w < y->w ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* whether sorted pair i shares its key with a neighbour */
static bool
tied_key(const key_place *kp, int64_t m, int64_t i)
{
	return (i > 0 && kp[i].key == kp[i - 1].key) || (i + 1 < m && kp[i].key == kp[i + 1].key);
}

pggpu_status
pggpu_seed_order(pggpu_data *home, const uint64_t *keys, int64_t m, const double *rows, const double *w,
				 pggpu_status (*fetch) (void *arg, const int64_t *at, int64_t n, double *out,
										pggpu_error *err),
				 void *arg, int64_t *order, pggpu_error *err)
{
	int			d = home->d;
	key_place  *kp = (key_place *) pggpu_scratch_alloc(home, sizeof(key_place) * (m > 0 ? m : 1));
	keyed	   *ks = NULL;
	double	   *vals = NULL;
	int64_t    *at = NULL;
	int64_t		tied = 0;
	pggpu_status st = PGGPU_OK;

	if (kp == NULL || !key_order(keys, m, kp))
	{
		pggpu_scratch_free(home, kp);
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	}
	for (int64_t t = 0; t < m; t++)
	{
		order[t] = kp[t].i;
		tied += tied_key(kp, m, t);
	}
	if (tied == 0)
		goto done;

	/*
	 * Equal keys: equal rows (interchangeable) or, rarely, different rows;
	 * by value, the tied places alone (ks: their runs one after another).
	 * Without rows, every tied row's values in one fetch.
	 */
	ks = (keyed *) pggpu_scratch_alloc(home, sizeof(keyed) * tied);
	vals = rows ? NULL : (double *) pggpu_scratch_alloc(home, sizeof(double) * tied * d);
	at = rows ? NULL : (int64_t *) pggpu_scratch_alloc(home, sizeof(int64_t) * tied);
	if (ks == NULL || (rows == NULL && (vals == NULL || at == NULL)))
	{
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		goto done;
	}
	tied = 0;
	for (int64_t t = 0; t < m; t++)
		if (tied_key(kp, m, t))
		{
			int64_t		i = kp[t].i;

			ks[tied].key = kp[t].key;
			ks[tied].i = i;
			ks[tied].x = rows ? rows + i * d : vals + tied * d;
			ks[tied].w = w ? w[i] : 1.0;
			if (at)
				at[tied] = i;
			tied++;
		}
	if (rows == NULL)
		CHECK(fetch(arg, at, tied, vals, err));
	keyed_d = d;
	/* each run by value, back into its places in order */
	for (int64_t t = 0, q = 0, r1; t < m; t = r1)
	{
		for (r1 = t + 1; r1 < m && kp[r1].key == kp[t].key; r1++)
			;
		if (r1 - t < 2)
			continue;
		qsort(ks + q, r1 - t, sizeof(keyed), cmp_values);
		for (int64_t j = 0; j < r1 - t; j++)
			order[t + j] = ks[q + j].i;
		q += r1 - t;
	}
done:
	pggpu_scratch_free(home, kp);
	pggpu_scratch_free(home, ks);
	pggpu_scratch_free(home, vals);
	pggpu_scratch_free(home, at);
	return st;
}

/* the rate of the seeding sample: about pggpu_seed_rows of the source's rows */
static double
seeding_rate(const pggpu_kmeans_source *src, const pggpu_kmeans_params *p)
{
	int64_t		cap = pggpu_seed_rows(p->k, src->home->d);

	return src->n <= cap ? 1.0 : (double) cap / (double) src->n;
}

/* the seed of the seeding sample */
static uint64_t
seeding_seed(const pggpu_kmeans_params *p)
{
	return pggpu_mix64(p->seed ^ 0x3c6ef372fe94f82bULL);
}

/*
 * The rows of the seeding set (m x d, caller's units) through the host,
 * into *out, and their order by key, then by value, into *order (home's
 * scratch)
 */
static pggpu_status
seeding_rows(const pggpu_kmeans_source *src, double rate, uint64_t seed, int64_t least, double **out,
			 double **wout, int64_t **order, int64_t *m, pggpu_error *err)
{
	pggpu_data *home = src->home;
	int			d = home->d;
	double	   *rows = NULL,
			   *w = NULL;
	int64_t    *sorted = NULL;
	uint64_t   *keys = NULL;
	pggpu_status st = PGGPU_OK;

	*out = NULL;
	*wout = NULL;
	*order = NULL;
	for (;;)
	{
		*m = 0;
		CHECK(src->sample(src->arg, seed, rate, &rows, &keys, &w, m, err));
		/* (fewer than k rows drawn: a table just over the cap, unlucky; take them all) */
		if (*m >= least || rate >= 1)
			break;
		rate = 1.0;
	}
	if (keys == NULL)
	{
		keys = (uint64_t *) pggpu_scratch_alloc(home, sizeof(uint64_t) * (*m > 0 ? *m : 1));
		for (int64_t i = 0; keys != NULL && i < *m; i++)
			keys[i] = pggpu_row_key(rows + i * d, 1, d);
	}
	sorted = (int64_t *) pggpu_scratch_alloc(home, sizeof(int64_t) * (*m > 0 ? *m : 1));
	if (keys == NULL || sorted == NULL)
	{
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		goto done;
	}
	CHECK(pggpu_seed_order(home, keys, *m, rows, w, NULL, NULL, sorted, err));
	*out = rows;
	*wout = w;
	*order = sorted;
	rows = NULL;
	w = NULL;
	sorted = NULL;
done:
	pggpu_scratch_free(home, keys);
	pggpu_scratch_free(home, rows);
	pggpu_scratch_free(home, w);
	pggpu_scratch_free(home, sorted);
	return st;
}

/*
 * An empty set for m rows on backend (on the home's GPU), with the home's
 * settings; held: closed with the home (home->aux) until pggpu_fit_close
 * (else the caller's to close, and without the home's interrupt callback:
 * for a thread of hier.c's)
 */
pggpu_status
pggpu_fit_open(pggpu_data *home, pggpu_backend backend, int64_t m, bool held, pggpu_data **out,
			   pggpu_error *err)
{
	pggpu_data *sds = NULL;
	pggpu_status st = pggpu_data_open_lazy(&sds, backend, home->gpu_index, home->d, m, err);

	*out = NULL;
	if (st != PGGPU_OK)
	{
		pggpu_data_close(sds);
		return st;
	}
	if (held)
		home->aux = sds;		/* (closed with home after a longjmp) */
	sds->threads = home->threads;
	sds->pending = held ? home->pending : NULL;
	sds->interrupt = held ? home->interrupt : NULL;
	sds->interrupt_arg = held ? home->interrupt_arg : NULL;
	sds->poll_work = home->poll_work;
	sds->metric = home->metric;
	sds->double_only = home->double_only;
	sds->force.pp_warps = home->force.pp_warps;
	*out = sds;
	return PGGPU_OK;
}

void
pggpu_fit_close(pggpu_data *home, pggpu_data *sds)
{
	home->aux = NULL;
	pggpu_data_close(sds);
}

/*
 * A set of the source's rows on the home's backend, the rows that
 * pggpu_sampled(seed, key, rate) picks (all of them where that leaves fewer
 * than least), sorted by key then value, in the caller's units: the seeding
 * set, and hierarchical's (hier.c).  Where the source can put its
 * sample there itself (sample_set: one part where the set is, its GPU's
 * memory not crossing the host), so; else its rows through the host, onto
 * the CPU where the GPU has no room
 */
pggpu_status
pggpu_fit_set(const pggpu_kmeans_source *src, double rate, uint64_t seed, int64_t least,
			  pggpu_data **out, pggpu_error *err)
{
	pggpu_data *home = src->home;
	pggpu_data *sds = NULL;
	double	   *rows = NULL,
			   *w = NULL;
	int64_t    *order = NULL;
	int64_t		m = 0;
	pggpu_status st = PGGPU_OK;

	*out = NULL;
	if (src->sample_set)
	{
		double		r = rate;

		for (;;)
		{
			CHECK(pggpu_fit_open(home, home->backend, (int64_t) (r * src->n) + 1, true, &sds, err));
			st = src->sample_set(src->arg, seed, r, sds, &m, err);
			if (st != PGGPU_OK || m >= least || r >= 1)
				break;
			pggpu_fit_close(home, sds);
			sds = NULL;
			r = 1.0;
		}
		if (st == PGGPU_OK)
		{
			*out = sds;
			return PGGPU_OK;
		}
		pggpu_fit_close(home, sds);
		sds = NULL;
		if (st != PGGPU_ERR_INVALID && st != PGGPU_ERR_GPU_MEMORY)
			return st;
		err->code = PGGPU_OK;	/* (the rows go through the host) */
		err->msg[0] = '\0';
	}
	CHECK(seeding_rows(src, rate, seed, least, &rows, &w, &order, &m, err));
	st = pggpu_fit_open(home, home->backend, m, true, &sds, err);
	if (st == PGGPU_OK)
		st = pggpu_data_push_rows(sds, rows, w, order, m, err);
	if (st == PGGPU_ERR_GPU_MEMORY && home->backend == PGGPU_BACKEND_GPU)
	{
		pggpu_fit_close(home, sds);
		sds = NULL;
		if ((st = pggpu_fit_open(home, PGGPU_BACKEND_CPU, m, true, &sds, err)) == PGGPU_OK)
			st = pggpu_data_push_rows(sds, rows, w, order, m, err);
	}
	if (st == PGGPU_OK)
	{
		*out = sds;
		sds = NULL;
	}
done:
	if (sds)
		pggpu_fit_close(home, sds);
	pggpu_scratch_free(home, rows);
	pggpu_scratch_free(home, w);
	pggpu_scratch_free(home, order);
	return st;
}

/* one start's initial centroids (p->seed the start's) into C, at 2^e the caller's units */
static pggpu_status
seed_start(const pggpu_kmeans_source *src, const pggpu_kmeans_params *p, int e, double *C,
		   pggpu_error *err)
{
	pggpu_data *home = src->home;
	pggpu_data *sds = NULL;
	int			es = 0;
	pggpu_status st = PGGPU_OK;

	CHECK(pggpu_fit_set(src, seeding_rate(src, p), seeding_seed(p), p->k, &sds, err));
	CHECK(pggpu_prepare_scale(sds, NULL, 0, &es, err));
	CHECK(sds->ops->km_begin(sds, p->k, err));
	sds->k = p->k;
	switch (p->init)
	{
		case PGGPU_INIT_RANDOM:
			CHECK(pggpu_seed_random(sds, p, err));
			break;
		case PGGPU_INIT_PARALLEL:
			CHECK(pggpu_seed_parallel(sds, p, err));
			break;
		default:
			CHECK(pggpu_seed_greedy(sds, p, pggpu_seed_first(p, sds), err));
			break;
	}
	CHECK(sds->ops->km_get_centroids(sds, C, err));
	for (int64_t i = 0; i < (int64_t) p->k * home->d; i++)
		C[i] = ldexp(C[i], e - es);
done:
	if (sds)
		pggpu_fit_close(home, sds);
	return st;
}

/*
 * Empty clusters (counts 0) take the farthest rows of the last step, one
 * each, in cluster order; fewer rows away from their centroids than empty
 * clusters: the rest stay as they are.  Cosine: each row taken is scaled
 * onto the sphere as the update scales a centroid (a row stored as float32
 * or scaled in SQL need not be there to the last bit); the other centroids
 * are as the update left them.  (Until 1.11 every centroid was scaled
 * again: 3.8 ms of host time a repair at k = 1024, d = 768, for a second
 * rounding of centroids already on the sphere.)
 */
static pggpu_status
repair_empty(const pggpu_kmeans_source *src, const pggpu_kmeans_params *p, int e, double *C,
			 const int64_t *counts, pggpu_error *err)
{
	pggpu_data *home = src->home;
	int			d = home->d;
	int			m = 0,
				got = 0;
	double	   *rows,
			   *d2;
	uint64_t   *keys;
	pggpu_status st = PGGPU_OK;

	for (int c = 0; c < p->k; c++)
		m += counts[c] == 0;
	rows = (double *) pggpu_scratch_alloc(home, sizeof(double) * m * d);
	d2 = (double *) pggpu_scratch_alloc(home, sizeof(double) * m);
	keys = (uint64_t *) pggpu_scratch_alloc(home, sizeof(uint64_t) * m);
	if (!rows || !d2 || !keys)
	{
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		goto done;
	}
	pggpu_interrupts(p);
	CHECK(src->farthest(src->arg, m, e, rows, d2, keys, &got, err));
	for (int c = 0, j = 0; c < p->k && j < got; c++)
		if (counts[c] == 0)
		{
			memcpy(C + (int64_t) c * d, rows + (int64_t) (j++) * d, sizeof(double) * d);
			if (home->metric == PGGPU_METRIC_COSINE)
				pggpu_normalize(C + (int64_t) c * d, d, ldexp(1.0, e));
		}
done:
	pggpu_scratch_free(home, rows);
	pggpu_scratch_free(home, d2);
	pggpu_scratch_free(home, keys);
	return st;
}

void
pggpu_centroids_update(double *C, const double *sums, const int64_t *counts, const double *mass, int k,
					   int d, pggpu_metric metric, int e)
{
	for (int c = 0; c < k; c++)
	{
		double		m = mass ? mass[c] : (double) counts[c];

		for (int j = 0; m > 0 && j < d; j++)
			C[(int64_t) c * d + j] = sums[(int64_t) c * d + j] / m;
	}
	if (metric == PGGPU_METRIC_COSINE)
		pggpu_normalize_rows(C, k, d, ldexp(1.0, e));
}

/*
 * One start's Lloyd iterations from C; C the final centroids after.  The
 * centroids stay with the source between iterations but where a repair
 * changes them.
 */
static pggpu_status
lloyd(const pggpu_kmeans_source *src, const pggpu_kmeans_params *p, int start, int e, double *C,
	  int64_t *counts, pggpu_kmeans_result *r, pggpu_error *err)
{
	int			k = p->k;
	const double *put = C;
	pggpu_status st;

	r->iterations = 0;
	r->converged = false;
	while (r->iterations < p->max_iter)
	{
		int64_t		changed,
					empty;

		pggpu_interrupts(p);
		/* (no inertia: a backend may then leave the rows' distances until a repair reads them) */
		if ((st = src->step(src->arg, put, k, e, r->iterations == 0, true, &empty, NULL, NULL,
							&changed, NULL, err)) != PGGPU_OK)
			return st;
		put = NULL;
		if (empty > 0)
		{
			if ((st = src->counts(src->arg, counts, err)) != PGGPU_OK ||
				(st = src->centroids(src->arg, C, err)) != PGGPU_OK ||
				(st = repair_empty(src, p, e, C, counts, err)) != PGGPU_OK)
				return st;
			put = C;
		}
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
	return put ? PGGPU_OK : src->centroids(src->arg, C, err);
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
	int			e = 0;
	double		lo = INFINITY,
				hi = 0;
	double	   *C = NULL,
			   *best = NULL;
	int64_t    *counts = NULL;
	double		best_inertia = INFINITY,
				inertia;
	int			best_iterations = 0;
	int64_t		best_changed = 0,
				changed,
				empty;
	bool		best_converged = false;
	pggpu_status st = PGGPU_OK;

	if (k < 1 || k > n)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "k = %d is not in 1..%lld", k, (long long) n);
	if (p->max_iter < 1 || !(p->tol >= 0))
		return pggpu_fail(err, PGGPU_ERR_INVALID, "max_iter or tol out of range");
	if ((unsigned) p->init > PGGPU_INIT_PARALLEL)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "unknown init %d", (int) p->init);
	if (p->init == PGGPU_INIT_GIVEN && p->init_centroids == NULL)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "no initial centroids given");
	if (p->init == PGGPU_INIT_GIVEN && starts > 1)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "n_init = %d with given centroids", starts);
	if ((unsigned) p->algorithm > PGGPU_ALGORITHM_HIERARCHICAL)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "unknown algorithm %d", (int) p->algorithm);
	if (p->algorithm == PGGPU_ALGORITHM_HIERARCHICAL && p->init == PGGPU_INIT_GIVEN)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "the hierarchical algorithm seeds its own fits: no initial centroids");
	if (src->range && (st = src->range(src->arg, &lo, &hi, err)) != PGGPU_OK)
		return st;
	if (p->init == PGGPU_INIT_GIVEN)
		pggpu_magnitudes(p->init_centroids, (int64_t) k * d, &lo, &hi);
	if ((st = pggpu_scale_exponent(lo, hi, &e, err)) != PGGPU_OK)
		return st;
	C = (double *) pggpu_scratch_alloc(home, sizeof(double) * k * d);
	best = (double *) pggpu_scratch_alloc(home, sizeof(double) * k * d);
	counts = (int64_t *) pggpu_scratch_alloc(home, sizeof(int64_t) * k);
	if (!C || !best || !counts)
	{
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		goto done;
	}

	/*
	 * n_init starts, the seed of each from the caller's (pggpu_start_seed),
	 * the one of least inertia kept (the first on ties)
	 */
	r->seed_seconds = r->iterate_seconds = 0;
	r->groups = 0;
	r->trained = 0;
	if (p->algorithm == PGGPU_ALGORITHM_HIERARCHICAL)
	{
		/* its fits make n_init starts each; the source only labels, once, below */
		if (p->progress)
			p->progress(p->progress_arg, 0, 0);
		CHECK(pggpu_hierarchical(src, p, e, C, r, err));
		starts = 1;
	}
	for (int s = 0; s < starts && p->algorithm == PGGPU_ALGORITHM_LLOYD; s++)
	{
		pggpu_kmeans_params q = *p;
		double		t0 = pggpu_seconds();

		q.seed = pggpu_start_seed(p->seed, s);
		if (p->progress)
			p->progress(p->progress_arg, s, 0);
		if (p->init == PGGPU_INIT_GIVEN)
		{
			for (int64_t i = 0; i < (int64_t) k * d; i++)
				C[i] = ldexp(p->init_centroids[i], e);
			if (home->metric == PGGPU_METRIC_COSINE)
				pggpu_normalize_rows(C, k, d, ldexp(1.0, e));
		}
		else
			CHECK(seed_start(src, &q, e, C, err));
		r->seed_seconds += pggpu_seconds() - t0;
		t0 = pggpu_seconds();
		CHECK(lloyd(src, &q, s, e, C, counts, r, err));
		r->iterate_seconds += pggpu_seconds() - t0;
		if (starts == 1)
			break;
		/* the start's inertia: its labelling by its own final centroids */
		pggpu_interrupts(p);
		CHECK(src->step(src->arg, C, k, e, false, false, &empty, NULL, &inertia, &changed, NULL, err));
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

	/* labels, distances and sizes consistent with the final centroids */
	pggpu_interrupts(p);
	CHECK(src->step(src->arg, C, k, e, p->algorithm == PGGPU_ALGORITHM_HIERARCHICAL, false, &empty, r->sizes,
					&inertia, &changed, r->labels, err));
	for (int64_t i = 0; i < (int64_t) k * d; i++)
		r->centroids[i] = ldexp(C[i], -e);
	r->inertia = ldexp(inertia, -2 * e);
	if (home->metric == PGGPU_METRIC_COSINE)
		r->inertia /= 2;		/* |x - c|^2 = 2 (1 - cos) on the sphere */
	if (p->init != PGGPU_INIT_GIVEN)
		CHECK(pggpu_canonical_order(r, k, d, r->labels, n, err));
done:
	pggpu_scratch_free(home, C);
	pggpu_scratch_free(home, best);
	pggpu_scratch_free(home, counts);
	return st;
}
