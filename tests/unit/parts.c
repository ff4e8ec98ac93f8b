#include "unit.h"
#include "compute_internal.h"

#include <pthread.h>

/* ---- several parts (cuda/parts.c) ---------------------------------------------- */

/* GPU parts: on GPU i % unit_gpus (the i-th part), else all on GPU 0 */
static bool spread;

/* rows [lo, hi) of D as a data set of their own on be (GPU gpu) */
static pggpu_data *
load_rows(pggpu_backend be, int gpu, const dataset *D, int64_t lo, int64_t hi)
{
	dataset		S = *D;

	S.X = D->X + lo * D->d;
	S.n = hi - lo;
	S.group = NULL;
	return load_on(be, gpu, &S, 0);
}

/*
 * Parts on the GPU step at once, a thread each (together.c): the calling
 * thread polls "pending"; these count its calls, say yes to the
 * interrupt_at-th, and note the callback's calls and whether any came on
 * another thread than the caller's
 */
static int	polls,
			interrupt_at,
			callbacks;
static bool callback_elsewhere,
			handled;
static pthread_t caller;

/* pending from the interrupt_at-th poll until the callback has run (as InterruptPending) */
static bool
pending_once(void)
{
	return ++polls >= interrupt_at && !handled;
}

static void
note_callback(void *arg)
{
	(void) arg;
	if (polls >= interrupt_at)
		handled = true;
	callbacks += polls >= interrupt_at;
	callback_elsewhere |= !pthread_equal(pthread_self(), caller);
}

static bool	with_callbacks;

/* a fit over parts cut at cuts[0..np] (cuts[0] = 0, cuts[np] = n), each on bes[i] */
static bool
fit_parts_parked(const dataset *D, const int64_t *cuts, const pggpu_backend *bes, int np, pggpu_metric metric,
				 const pggpu_kmeans_params *p, km_out *o, bool park)
{
	pggpu_data *parts[8] = {0};
	pggpu_kmeans_result r = {0};
	pggpu_error err = {0};
	bool		ok = true;

	for (int i = 0; i < np && ok; i++)
	{
		parts[i] = load_rows(bes[i], spread && unit_gpus > 0 ? i % unit_gpus : 0, D, cuts[i], cuts[i + 1]);
		ok = parts[i] != NULL;
		if (ok)
			pggpu_data_set_metric(parts[i], metric);
		if (ok && with_callbacks)
		{
			pggpu_data_set_interrupts(parts[i], note_callback, NULL);
			pggpu_data_set_threads(parts[i], 1, pending_once);
		}
		if (ok && park)
			ok = CHECK(pggpu_data_park(parts[i], &err) == PGGPU_OK, "park: %s", err.msg);
	}
	if (ok)
	{
		r.centroids = o->C;
		r.sizes = o->sizes;
		r.labels = o->labels;
		o->st = pggpu_kmeans_parts(parts, np, p, &r, &err);
		o->inertia = r.inertia;
		o->iters = r.iterations;
		o->conv = r.converged;
		ok = CHECK(o->st == PGGPU_OK, "kmeans_parts: %s", err.msg);
	}
	for (int i = 0; i < np; i++)
		pggpu_data_close(parts[i]);
	return ok;
}

static bool
fit_parts(const dataset *D, const int64_t *cuts, const pggpu_backend *bes, int np, pggpu_metric metric,
		  const pggpu_kmeans_params *p, km_out *o)
{
	return fit_parts_parked(D, cuts, bes, np, metric, p, o, false);
}

/* fit_parts with every part's callback and pending (the threads' poller) set */
static bool
fit_parts_polled(const dataset *D, const int64_t *cuts, const pggpu_backend *bes, int np,
				 const pggpu_kmeans_params *p, km_out *o, int at)
{
	bool		ok;

	polls = callbacks = 0;
	interrupt_at = at;
	callback_elsewhere = handled = false;
	caller = pthread_self();
	with_callbacks = true;
	ok = fit_parts_parked(D, cuts, bes, np, PGGPU_METRIC_EUCLIDEAN, p, o, false);
	with_callbacks = false;
	return ok;
}

/* the same on one data set of every row */
static bool
fit_one(const dataset *D, pggpu_backend be, pggpu_metric metric, const pggpu_kmeans_params *p, km_out *o)
{
	pggpu_data *ds = load(be, D, 0);
	pggpu_error err = {0};

	if (ds == NULL)
		return false;
	pggpu_data_set_metric(ds, metric);
	fit_set(ds, p, o, &err);
	pggpu_data_close(ds);
	return CHECK(o->st == PGGPU_OK, "kmeans: %s", err.msg);
}

/* seed_order's fetch for rows NULL: the rows of a table (places are rows) */
static pggpu_status
order_fetch(void *arg, const int64_t *at, int64_t n, double *out, pggpu_error *err)
{
	const double *rows = (const double *) arg;

	(void) err;
	for (int64_t i = 0; i < n; i++)
		memcpy(out + i * 3, rows + at[i] * 3, sizeof(double) * 3);
	return PGGPU_OK;
}

/*
 * The seeding set's order (pggpu_seed_order) is the rows' own: whatever
 * order they come in, with their values at hand or fetched for ties only,
 * the rows come out the same, bit for bit: duplicates, rows equal but for
 * the sign of a zero, and different rows given one key (a hash collision)
 */
static void
seed_order_checks(void)
{
	enum
	{
		M = 240, D = 3
	};
	pggpu_data *home = NULL;
	pggpu_error err = {0};
	double		rows[M * D],
				perm[M * D],
				want[M * D],
				got[M * D];
	uint64_t	keys[M],
				pkeys[M];
	int64_t		order[M];

	if (pggpu_data_open(&home, PGGPU_BACKEND_CPU, 0, D, 0, &err) != PGGPU_OK)
	{
		CHECK(false, "seed order: a CPU data set: %s", err.msg);
		return;
	}
	for (int i = 0; i < M; i++)
	{
		/* 12 patterns; pattern 5 with -0 in place of 0 every other time */
		int			q = i % 12;

		rows[i * D] = q == 5 ? ((i / 12) % 2 ? -0.0 : 0.0) : (double) q;
		rows[i * D + 1] = q * 0.5 - 2;
		rows[i * D + 2] = (double) (q % 3);
		keys[i] = pggpu_row_key(rows + i * D, 1, D);
	}
	/* a collision: pattern 7's rows take pattern 8's key */
	for (int i = 0; i < M; i++)
		if (i % 12 == 7)
			keys[i] = keys[8];
	CHECK(pggpu_seed_order(home, keys, M, rows, NULL, NULL, NULL, order, &err) == PGGPU_OK, "seed order: %s", err.msg);
	for (int i = 0; i < M; i++)
		memcpy(want + i * D, rows + order[i] * D, sizeof(double) * D);
	for (int t = 0; t < 3; t++)
	{
		/* the rows reversed, rotated, interleaved */
		for (int i = 0; i < M; i++)
		{
			int			from = t == 0 ? M - 1 - i : t == 1 ? (i + 97) % M : (i * 7) % M;

			memcpy(perm + i * D, rows + from * D, sizeof(double) * D);
			pkeys[i] = keys[from];
		}
		for (int fetched = 0; fetched < 2; fetched++)
		{
			CHECK(pggpu_seed_order(home, pkeys, M, fetched ? NULL : perm, NULL, fetched ? order_fetch : NULL, perm,
								   order, &err) == PGGPU_OK, "seed order: %s", err.msg);
			for (int i = 0; i < M; i++)
				memcpy(got + i * D, perm + order[i] * D, sizeof(double) * D);
			CHECK(memcmp(got, want, sizeof(got)) == 0,
				  "seed order: the rows in order %d, %s, come out as in the first order, bit for bit", t,
				  fetched ? "ties fetched" : "values at hand");
		}
	}
	pggpu_data_close(home);
}

/* (key, value, place) triples, the order pggpu_seed_order must give */
typedef struct order_ref
{
	uint64_t	key;
	double		x;
	int64_t		i;
} order_ref;

static int
cmp_order_ref(const void *a, const void *b)
{
	const order_ref *x = (const order_ref *) a,
			   *y = (const order_ref *) b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	if (x->x != y->x)
		return x->x < y->x ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/*
 * The same at scale, against qsort by (key, value, place): 200,003 keys
 * spread evenly (buckets of a few, by insertion), keys that share their
 * top 44 bits (one bucket, sorted by bytes, many tied), and 50 keys each given to
 * many rows, some of them different rows (runs by value)
 */
static void
seed_order_scale_checks(void)
{
	const int64_t m = 200003;
	pggpu_data *home = NULL;
	pggpu_error err = {0};
	uint64_t   *keys = (uint64_t *) xmalloc(sizeof(uint64_t) * m);
	double	   *x = (double *) xmalloc(sizeof(double) * m);
	int64_t    *order = (int64_t *) xmalloc(sizeof(int64_t) * m);
	order_ref  *ref = (order_ref *) xmalloc(sizeof(order_ref) * m);
	static const char *what[] = {"keys spread evenly", "keys sharing their top 44 bits", "50 keys, runs of rows"};

	if (pggpu_data_open(&home, PGGPU_BACKEND_CPU, 0, 1, 0, &err) != PGGPU_OK)
		CHECK(false, "seed order: a CPU data set: %s", err.msg);
	for (int c = 0; home && c < 3; c++)
	{
		rng			r = rng_make(70 + c);
		int64_t		bad = 0;

		for (int64_t i = 0; i < m; i++)
		{
			uint64_t	u = rng_u64(&r);

			keys[i] = c == 0 ? u : c == 1 ? (0xabcdeULL << 44) | (u & 0xfffff) : pggpu_mix64(u % 50);
			x[i] = c == 2 ? (double) (u % 7) : (double) i;
			ref[i].key = keys[i];
			ref[i].x = x[i];
			ref[i].i = i;
		}
		qsort(ref, m, sizeof(order_ref), cmp_order_ref);
		if (CHECK(pggpu_seed_order(home, keys, m, x, NULL, NULL, NULL, order, &err) == PGGPU_OK,
				  "seed order, %s: %s", what[c], err.msg))
		{
			for (int64_t i = 0; i < m; i++)
				bad += order[i] != ref[i].i;
			CHECK(bad == 0, "seed order, %s: %lld places not those of qsort by key, value, place", what[c],
				  (long long) bad);
		}
	}
	pggpu_data_close(home);
	free(keys);
	free(x);
	free(order);
	free(ref);
}

/*
 * Parts give the fit of one set of all their rows: the same labels, sizes
 * and iterations, centroids and inertia within 1e-12 (the sums added in
 * another order); from given centroids (Euclidean and cosine) and seeded
 * (every init, n_init 1 and 3), parts on the CPU, on the GPU and mixed, an
 * empty part among them, parked, the rows in another order, a cluster
 * emptied.  Bad calls are refused.
 */
/*
 * copy_rows (the seeding set gathered where the rows are): rows of three
 * sources, scaled by each one's power of two, in a given order, bit for
 * bit; on the GPU with the sources on every GPU in turn and the set on the
 * first and on the last.  A row not in its source, a parked source, a set
 * not empty are refused.
 */
static void
copy_rows_checks(const dataset *D)
{
	int64_t		cuts[4] = {0, 7000, 7001, 20000};
	int			es[3] = {0, -3, 5};
	int64_t		m = 5000;
	int		   *which = xmalloc(sizeof(int) * m);
	int64_t    *rows = xmalloc(sizeof(int64_t) * m);
	double	   *got = xmalloc(sizeof(double) * m * D->d);
	uint64_t	x = 12345;
	int			d = D->d;

	for (int64_t t = 0; t < m; t++)
	{
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		which[t] = (int) ((x >> 33) % 3);
		rows[t] = (int64_t) ((x >> 11) % (uint64_t) (cuts[which[t] + 1] - cuts[which[t]]));
	}
	for (int be = PGGPU_BACKEND_CPU; be <= PGGPU_BACKEND_GPU; be++)
		for (int home = 0; home < (be == PGGPU_BACKEND_GPU && unit_gpus > 1 ? 2 : 1); home++)
		{
			pggpu_data *src[3] = {0};
			pggpu_data *set = NULL;
			pggpu_error err = {0};
			int			hg = home ? unit_gpus - 1 : 0;
			bool		ok = true;

			if (be == PGGPU_BACKEND_GPU && !have_gpu)
			{
				gpu_skipped++;
				continue;
			}
			set_case("copy_rows, %s, the set on GPU %d", be_name((pggpu_backend) be), hg);
			for (int p = 0; p < 3 && ok; p++)
				ok = (src[p] = load_rows((pggpu_backend) be, unit_gpus > 0 ? p % unit_gpus : 0, D, cuts[p],
										 cuts[p + 1])) != NULL;
			ok = ok && CHECK(pggpu_data_open(&set, (pggpu_backend) be, hg, d, m, &err) == PGGPU_OK, "open: %s",
							 err.msg);
			if (ok && CHECK(set->ops->copy_rows(set, src, 3, which, rows, m, es, &err) == PGGPU_OK,
							"copy_rows: %s", err.msg) &&
				CHECK(set->n == m, "%lld rows copied, not %lld", (long long) set->n, (long long) m))
			{
				int64_t    *all = xmalloc(sizeof(int64_t) * m);
				int64_t		bad = 0;

				for (int64_t t = 0; t < m; t++)
					all[t] = t;
				if (CHECK(pggpu_data_get_rows(set, all, (int) m, got, &err) == PGGPU_OK, "get_rows: %s", err.msg))
					for (int64_t t = 0; t < m; t++)
						for (int j = 0; j < d; j++)
							bad += got[t * d + j] != ldexp(D->X[(cuts[which[t]] + rows[t]) * d + j], es[which[t]]);
				CHECK(bad == 0, "%lld values not the sources' rows times their powers of two", (long long) bad);
				free(all);
				expect_error(set->ops->copy_rows(set, src, 3, which, rows, m, es, &err), &err, PGGPU_ERR_INVALID,
							 "a copy into a set not empty");
			}
			pggpu_data_close(set);
			set = NULL;
			if (ok && CHECK(pggpu_data_open(&set, (pggpu_backend) be, hg, d, m, &err) == PGGPU_OK, "open: %s",
							err.msg))
			{
				rows[7] = cuts[which[7] + 1] - cuts[which[7]];
				expect_error(set->ops->copy_rows(set, src, 3, which, rows, m, es, &err), &err, PGGPU_ERR_INVALID,
							 "a row past its source's end");
				rows[7] = 0;
				/* (the CPU's sets do not park) */
				if (CHECK(pggpu_data_park(src[1], &err) == PGGPU_OK, "park: %s", err.msg) && src[1]->parked)
					expect_error(set->ops->copy_rows(set, src, 3, which, rows, m, es, &err), &err,
								 PGGPU_ERR_INVALID, "a parked source");
			}
			pggpu_data_close(set);
			for (int p = 0; p < 3; p++)
				pggpu_data_close(src[p]);
		}
	free(which);
	free(rows);
	free(got);
}

/*
 * The CPU's content keys, a block of rows in vector lanes (keys_block), are
 * pggpu_row_key's of each row alone, bit for bit: zeros and -0, values of
 * very different exponents, a subnormal (its block taken a row at a time),
 * a partial last block, an odd number of columns; the GPU's are held to the
 * CPU's in the draw tests.
 */
static void
keys_checks(void)
{
	dataset		K = {0};
	int			d = 37;
	int64_t		n = 1000 + 7;
	uint64_t	x = 99;
	uint64_t   *got = xmalloc(sizeof(uint64_t) * n);
	pggpu_data *ds;
	pggpu_error err = {0};
	int64_t		bad = 0;

	set_case("content keys on the cpu, in blocks");
	K.n = n;
	K.d = d;
	K.X = xmalloc(sizeof(double) * n * d);
	for (int64_t e = 0; e < n * d; e++)
	{
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		K.X[e] = ldexp((double) (int64_t) (x >> 11) / 9007199254740992.0, (int) ((x >> 3) % 61) - 30);
		if ((x >> 40) % 7 == 0)
			K.X[e] = (x >> 50) % 2 ? 0.0 : -0.0;
	}
	K.X[500 * d + 3] = 1e-310;	/* a subnormal: its block a row at a time */
	for (int j = 0; j < d; j++)
		K.X[64 * d + j] = 0.0;	/* a row of zeros */
	if ((ds = load(PGGPU_BACKEND_CPU, &K, 0)) != NULL &&
		CHECK(ds->ops->keys(ds, got, &err) == PGGPU_OK, "keys: %s", err.msg))
	{
		for (int64_t i = 0; i < n; i++)
			bad += got[i] != pggpu_row_key(K.X + i * d, 1, d);
		CHECK(bad == 0, "%lld of %lld rows' keys are not pggpu_row_key's", (long long) bad, (long long) n);
	}
	pggpu_data_close(ds);
	free(K.X);
	free(got);
}

/*
 * The repair's farthest rows: by the backend's km_farthest (the CPU's) and
 * by every distance fetched (a backend without the op: the CPU's ops with
 * it taken away), the same rows, distances and keys, best first; with
 * distinct distances, and with more rows tied at the floor than the
 * candidates fetched (the fallback to every row's key).  On the GPU too
 * (its km_farthest, farthest.cu), against the CPU.
 */
static void
farthest_checks(void)
{
	struct
	{
		const char *what;
		int64_t		n;
		int			m;
	}			cases[] = {{"distinct distances", 20000, 5}, {"70,000 rows tied at the floor", 70000, 3}};

	for (int ci = 0; ci < 2; ci++)
	{
		dataset		D;
		int			d = 4,
					k = 3,
					m = cases[ci].m;
		double	   *C = xmalloc(sizeof(double) * k * d);
		double	   *rows[3],
				   *d2[3];
		uint64_t   *keys[3];
		int			got[3] = {0};

		if (ci == 0)
			gen_blobs(&D, cases[ci].n, d, k, 2.5, 7);
		else
			gen_same(&D, cases[ci].n, d, 1.0);
		for (int c = 0; c < k * d; c++)
			C[c] = c < d ? 0.0 : 1e3 + c;	/* centroid 0 near, the others far: emptied */
		for (int w = 0; w < 3; w++)
		{
			pggpu_backend be = w < 2 ? PGGPU_BACKEND_CPU : PGGPU_BACKEND_GPU;
			pggpu_data *ds;
			pggpu_ops	ops;
			pggpu_data	shadow;
			pggpu_step_stats sst = {0};
			pggpu_error err = {0};

			rows[w] = xmalloc(sizeof(double) * m * d);
			d2[w] = xmalloc(sizeof(double) * m);
			keys[w] = xmalloc(sizeof(uint64_t) * m);
			set_case("farthest rows, %s, %s", cases[ci].what,
					 w == 0 ? "cpu, km_farthest" : w == 1 ? "cpu, every distance fetched" : "gpu");
			if (be == PGGPU_BACKEND_GPU && !have_gpu)
			{
				gpu_skipped++;
				continue;
			}
			if ((ds = load_rows(be, 0, &D, 0, D.n)) == NULL)
				continue;
			if (CHECK(ds->ops->km_begin(ds, k, &err) == PGGPU_OK && (ds->k = k) > 0 &&
					  ds->ops->km_put_centroids(ds, C, &err) == PGGPU_OK &&
					  ds->ops->km_step(ds, false, true, &sst, &err) == PGGPU_OK, "a step: %s", err.msg))
			{
				pggpu_data *one = ds;

				if (w == 1)
				{
					/* (a shallow copy: its scratch slots its own, freed by the call) */
					ops = *ds->ops;
					ops.km_farthest = NULL;
					shadow = *ds;
					shadow.ops = &ops;
					one = &shadow;
				}
				CHECK(w != 0 || ds->ops->km_farthest != NULL, "the CPU has no km_farthest");
				CHECK(pggpu_parts_farthest(&one, 1, m, rows[w], d2[w], keys[w], &got[w], &err) == PGGPU_OK,
					  "farthest: %s", err.msg);
				CHECK(got[w] == m, "%d rows, not %d", got[w], m);
				for (int a = 1; a < got[w]; a++)
					CHECK(d2[w][a - 1] >= d2[w][a], "not farthest first at %d", a);
				if (w > 0 && got[w] == got[0])
				{
					CHECK(memcmp(d2[w], d2[0], sizeof(double) * m) == 0, "other distances than km_farthest's");
					CHECK(memcmp(keys[w], keys[0], sizeof(uint64_t) * m) == 0, "other keys than km_farthest's");
					CHECK(memcmp(rows[w], rows[0], sizeof(double) * m * d) == 0, "other rows than km_farthest's");
				}
			}
			pggpu_data_close(ds);
		}
		for (int w = 0; w < 3; w++)
		{
			free(rows[w]);
			free(d2[w]);
			free(keys[w]);
		}
		free(C);
		data_free(&D);
	}
}

void
test_parts(void)
{
	dataset		D;
	int			k = 8;
	int64_t		n = 30000;
	int64_t		cuts[5] = {0, 9000, 9000, 24000, n};
	pggpu_backend cpu4[4] = {PGGPU_BACKEND_CPU, PGGPU_BACKEND_CPU, PGGPU_BACKEND_CPU, PGGPU_BACKEND_CPU};
	pggpu_backend gpu4[4] = {PGGPU_BACKEND_GPU, PGGPU_BACKEND_GPU, PGGPU_BACKEND_GPU, PGGPU_BACKEND_GPU};
	pggpu_backend mix4[4] = {PGGPU_BACKEND_GPU, PGGPU_BACKEND_CPU, PGGPU_BACKEND_GPU, PGGPU_BACKEND_CPU};
	pggpu_kmeans_params p = {.k = k, .max_iter = 100, .tol = 0};
	km_out		one,
				many,
				again;
	double	   *init;

	seed_order_checks();
	seed_order_scale_checks();
	keys_checks();
	farthest_checks();
	gen_blobs(&D, n, 5, k, 2.5, 31);
	copy_rows_checks(&D);
	km_alloc(&one, n, k, D.d);
	km_alloc(&many, n, k, D.d);
	km_alloc(&again, n, k, D.d);
	init = xmalloc(sizeof(double) * k * D.d);
	for (int c = 0; c < k; c++)
		memcpy(init + c * D.d, D.X + (int64_t) (c * 997) * D.d, sizeof(double) * D.d);

	for (int metric = PGGPU_METRIC_EUCLIDEAN; metric <= PGGPU_METRIC_COSINE; metric++)
	{
		p.init = PGGPU_INIT_GIVEN;
		p.init_centroids = init;
		p.seed = 0;
		set_case("parts, given centroids, %s", metric ? "cosine" : "euclidean");
		if (!fit_one(&D, PGGPU_BACKEND_CPU, (pggpu_metric) metric, &p, &one))
			continue;
		if (fit_parts(&D, cuts, cpu4, 4, (pggpu_metric) metric, &p, &many))
			cmp_km("4 parts on the cpu vs one set", &many, &one, n, k, D.d, 1e-12);
		if (have_gpu)
		{
			if (fit_parts(&D, cuts, gpu4, 4, (pggpu_metric) metric, &p, &many))
				cmp_km("4 parts on the gpu vs one set", &many, &one, n, k, D.d, 1e-12);
			/* streamed: every part parked between its steps, the same bits as resident */
			if (fit_parts_parked(&D, cuts, gpu4, 4, (pggpu_metric) metric, &p, &again, true))
				cmp_km("4 parked parts on the gpu vs resident", &again, &many, n, k, D.d, 0);
			if (fit_parts(&D, cuts, mix4, 4, (pggpu_metric) metric, &p, &many))
				cmp_km("4 parts, gpu and cpu, vs one set", &many, &one, n, k, D.d, 1e-12);
		}
		else
			gpu_skipped++;
	}

	/*
	 * Threads: four GPU parts step at once, the caller polling; an interrupt
	 * found pending while they run stops them, the callback runs on the
	 * caller's thread alone, and (it returned: interrupts held off) the step
	 * is finished there: the same bits as uninterrupted.
	 */
	set_case("parts on the gpu at once, interrupted");
	if (have_gpu)
	{
		p.init = PGGPU_INIT_GIVEN;
		p.init_centroids = init;
		if (fit_parts(&D, cuts, gpu4, 4, PGGPU_METRIC_EUCLIDEAN, &p, &many) &&
			fit_parts_polled(&D, cuts, gpu4, 4, &p, &again, 1 << 30))
		{
			cmp_km("polled, never pending, vs unpolled", &again, &many, n, k, D.d, 0);
			CHECK(polls > 0 && callbacks == 0, "%d polls, %d callbacks: the caller did not poll", polls, callbacks);
		}
		for (int at = 1; at <= 3; at++)
			if (fit_parts_polled(&D, cuts, gpu4, 4, &p, &again, at))
			{
				cmp_km("interrupted (the callback returns), vs not", &again, &many, n, k, D.d, 0);
				CHECK(callbacks >= 1 && !callback_elsewhere, "pending at poll %d: %d callbacks%s", at,
					  callbacks, callback_elsewhere ? ", some on another thread" : "");
			}
	}
	else
		gpu_skipped++;

	/*
	 * One driver: a seeded fit (each init, n_init 1 and 3) is the one set's
	 * wherever the rows are: four parts (one empty), five, parked, on the
	 * GPU, and the rows in reverse order (the labels follow their rows);
	 * centroids and inertia within 1e-12 (sums added in another order),
	 * labels, sizes and iterations the same.
	 */
	p.init_centroids = NULL;
	p.tol = 1e-4;
	{
		int64_t		cuts5[6] = {0, 4999, 11000, 17003, 25000, n};
		int64_t		cuts4[5] = {0, 1, 15000, 29999, n};
		pggpu_backend cpu5[5] = {PGGPU_BACKEND_CPU, PGGPU_BACKEND_CPU, PGGPU_BACKEND_CPU, PGGPU_BACKEND_CPU,
		PGGPU_BACKEND_CPU};
		dataset		R = D;
		km_out		rev;

		R.X = xmalloc(sizeof(double) * n * D.d);
		for (int64_t i = 0; i < n; i++)
			memcpy(R.X + (n - 1 - i) * D.d, D.X + i * D.d, sizeof(double) * D.d);
		R.group = NULL;
		km_alloc(&rev, n, k, D.d);
		for (int init_kind = PGGPU_INIT_KMEANSPP; init_kind <= PGGPU_INIT_PARALLEL; init_kind++)
			for (int starts = 1; starts <= 3; starts += 2)
			{
				if (init_kind == PGGPU_INIT_GIVEN)
					continue;
				p.init = (pggpu_init) init_kind;
				p.seed = 7;
				p.n_init = starts;
				set_case("parts, seeded by %s, n_init %d", init_name(p.init), starts);
				if (!fit_one(&D, PGGPU_BACKEND_CPU, PGGPU_METRIC_EUCLIDEAN, &p, &one))
					continue;
				check_sane("one set", &D, k, p.init, &one, n);
				if (fit_parts(&D, cuts, cpu4, 4, PGGPU_METRIC_EUCLIDEAN, &p, &many))
					cmp_km("4 parts on the cpu vs one set", &many, &one, n, k, D.d, 1e-12);
				if (fit_parts(&D, cuts4, cpu4, 4, PGGPU_METRIC_EUCLIDEAN, &p, &many) &&
					fit_parts(&D, cuts5, cpu5, 5, PGGPU_METRIC_EUCLIDEAN, &p, &again))
				{
					cmp_km("4 other parts vs one set", &many, &one, n, k, D.d, 1e-12);
					cmp_km("5 parts vs one set", &again, &one, n, k, D.d, 1e-12);
				}
				if (fit_one(&R, PGGPU_BACKEND_CPU, PGGPU_METRIC_EUCLIDEAN, &p, &rev))
				{
					for (int64_t i = 0; i < n; i++)
						many.labels[i] = rev.labels[n - 1 - i];
					memcpy(many.C, rev.C, sizeof(double) * k * D.d);
					memcpy(many.sizes, rev.sizes, sizeof(int64_t) * k);
					many.inertia = rev.inertia, many.iters = rev.iters, many.conv = rev.conv;
					cmp_km("the rows in reverse order vs one set", &many, &one, n, k, D.d, 1e-12);
				}
				if (have_gpu)
				{
					if (fit_one(&D, PGGPU_BACKEND_GPU, PGGPU_METRIC_EUCLIDEAN, &p, &many))
						cmp_km("one set on the gpu vs the cpu", &many, &one, n, k, D.d, 1e-12);
					if (fit_parts(&D, cuts4, gpu4, 4, PGGPU_METRIC_EUCLIDEAN, &p, &many))
						cmp_km("4 parts on the gpu vs one set", &many, &one, n, k, D.d, 1e-12);
					if (fit_parts_parked(&D, cuts, gpu4, 4, PGGPU_METRIC_EUCLIDEAN, &p, &again, true))
						cmp_km("4 parked parts on the gpu vs one set", &again, &one, n, k, D.d, 1e-12);
					/* the parts on every GPU in turn: the seeding set by peer copies */
					spread = unit_gpus > 1;
					if (spread && fit_parts(&D, cuts4, gpu4, 4, PGGPU_METRIC_EUCLIDEAN, &p, &many))
						cmp_km("4 parts on several gpus vs one set", &many, &one, n, k, D.d, 1e-12);
					spread = false;
				}
				else
					gpu_skipped++;
			}

		/*
		 * An emptied cluster (a given centroid far from every row) takes the
		 * row farthest from its centroid, the same one wherever it is held
		 */
		p.init = PGGPU_INIT_GIVEN;
		p.n_init = 1;
		p.init_centroids = init;
		for (int j = 0; j < D.d; j++)
			init[(k - 1) * D.d + j] = 1e6;
		set_case("parts, an emptied cluster");
		if (fit_one(&D, PGGPU_BACKEND_CPU, PGGPU_METRIC_EUCLIDEAN, &p, &one))
		{
			CHECK(one.sizes[k - 1] > 0, "the emptied cluster kept no rows: %lld", (long long) one.sizes[k - 1]);
			if (fit_parts(&D, cuts5, cpu5, 5, PGGPU_METRIC_EUCLIDEAN, &p, &many))
				cmp_km("5 parts vs one set", &many, &one, n, k, D.d, 1e-12);
			if (fit_one(&R, PGGPU_BACKEND_CPU, PGGPU_METRIC_EUCLIDEAN, &p, &rev))
			{
				for (int64_t i = 0; i < n; i++)
					many.labels[i] = rev.labels[n - 1 - i];
				cmp_labels("the rows in reverse order vs one set", many.labels, one.labels, n);
			}
			if (have_gpu && fit_parts(&D, cuts, mix4, 4, PGGPU_METRIC_EUCLIDEAN, &p, &many))
				cmp_km("4 parts, gpu and cpu, vs one set", &many, &one, n, k, D.d, 1e-12);
		}
		km_free(&rev);
		free(R.X);
	}

	/* the seeding set's size: 32 rows a cluster, at least 65,536, at most 1 GB where 4 a cluster fit */
	set_case("seeding set sizes");
	{
		static const struct
		{
			int			k,
						d;
			int64_t		rows;
		}			sz[] = {{3, 2, 65536}, {1000, 768, 65536}, {20000, 256, 524288}, {10, 15000, 8947},
		{1000, 100000, 4000}, {100000, 2048, 400000}};

		for (int i = 0; i < (int) (sizeof(sz) / sizeof(sz[0])); i++)
			CHECK(pggpu_seed_rows(sz[i].k, sz[i].d) == sz[i].rows, "k = %d, d = %d: %lld rows, not %lld",
				  sz[i].k, sz[i].d, (long long) pggpu_seed_rows(sz[i].k, sz[i].d), (long long) sz[i].rows);
	}

	set_case("park");
	if (have_gpu)
	{
		pggpu_data *ds = load(PGGPU_BACKEND_GPU, &D, 0);
		pggpu_error err = {0};

		p.init = PGGPU_INIT_KMEANSPP;
		p.n_init = 1;
		p.seed = 3;
		if (ds && fit_one(&D, PGGPU_BACKEND_GPU, PGGPU_METRIC_EUCLIDEAN, &p, &one))
		{
			CHECK(pggpu_data_park(ds, &err) == PGGPU_OK, "park: %s", err.msg);
			expect_error(pggpu_data_push(ds, 1, &err), &err, PGGPU_ERR_INVALID, "a push to a parked set");
			fit_set(ds, &p, &many, &err);
			CHECK(many.st == PGGPU_OK, "fit of a parked set: %s", err.msg);
			cmp_km("a parked set's fit vs resident", &many, &one, n, k, D.d, 0);
			/* parked again after the fit: its rows come back unchanged */
			CHECK(pggpu_data_park(ds, &err) == PGGPU_OK && pggpu_data_park(ds, &err) == PGGPU_OK, "park twice: %s", err.msg);
			fit_set(ds, &p, &many, &err);
			cmp_km("parked twice", &many, &one, n, k, D.d, 0);
		}
		pggpu_data_close(ds);
	}
	else
		gpu_skipped++;

	set_case("standardize parts");
	{
		pggpu_data *ps[4] = {0};
		pggpu_data *whole = load(PGGPU_BACKEND_CPU, &D, 0);
		double		m1[5], s1[5], m4[5], s4[5];
		pggpu_error err = {0};
		bool		ok = whole != NULL;

		for (int i = 0; i < 4 && ok; i++)
			ok = (ps[i] = load_rows(have_gpu ? mix4[i] : PGGPU_BACKEND_CPU, 0, &D, cuts[i], cuts[i + 1])) != NULL;
		if (ok && CHECK(pggpu_data_standardize(whole, m1, s1, &err) == PGGPU_OK, "standardize: %s", err.msg) &&
			CHECK(pggpu_data_standardize_parts(ps, 4, m4, s4, &err) == PGGPU_OK, "standardize parts: %s", err.msg))
			for (int j = 0; j < D.d; j++)
				CHECK(fabs(m4[j] - m1[j]) <= 1e-12 * s1[j] && rel_close(s4[j], s1[j], 1e-12),
					  "column %d: parts %.17g %.17g, whole %.17g %.17g", j, m4[j], s4[j], m1[j], s1[j]);
		for (int i = 0; i < 4; i++)
			pggpu_data_close(ps[i]);
		pggpu_data_close(whole);
	}

	set_case("parts refused");
	{
		pggpu_data *a = load_rows(PGGPU_BACKEND_CPU, 0, &D, 0, 100);
		pggpu_data *b = NULL;
		pggpu_data *two[2];
		pggpu_kmeans_result r = {0};
		pggpu_error err = {0};
		dataset		E;

		gen_uniform(&E, 50, 3, 0, 1, 2);
		b = load(PGGPU_BACKEND_CPU, &E, 0);
		two[0] = a;
		two[1] = b;
		r.centroids = one.C;
		r.sizes = one.sizes;
		p.n_init = 1;
		p.init = PGGPU_INIT_KMEANSPP;
		expect_error(a && b ? pggpu_kmeans_parts(two, 2, &p, &r, &err) : PGGPU_ERR_INVALID, &err,
					 PGGPU_ERR_INVALID, "parts of other widths");
		p.k = 101;
		expect_error(a ? pggpu_kmeans_parts(&a, 1, &p, &r, &err) : PGGPU_ERR_INVALID, &err,
					 PGGPU_ERR_INVALID, "k above the rows");
		expect_error(pggpu_kmeans_parts(NULL, 0, &p, &r, &err), &err, PGGPU_ERR_INVALID, "no parts");
		pggpu_data_close(a);
		pggpu_data_close(b);
		data_free(&E);
	}
	free(init);
	km_free(&one);
	km_free(&many);
	km_free(&again);
	data_free(&D);
}
