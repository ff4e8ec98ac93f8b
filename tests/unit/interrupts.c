#include "unit.h"

/* ---- interrupts ----------------------------------------------------------------- */

int	interrupt_calls;
int	interrupt_jump_at;	/* longjmp on this call; 0: never */
void *interrupt_seen_arg;
jmp_buf interrupt_env;

void
on_interrupt(void *arg)
{
	interrupt_seen_arg = arg;
	if (++interrupt_calls == interrupt_jump_at)
		longjmp(interrupt_env, 1);
}

/*
 * Loads D and fits it with p on the given threads, where the callback (or
 * pending) longjmps out as the globals say; the set is closed after.
 * Whether it jumped.
 */
static bool
fit_jumps(pggpu_backend be, const dataset *D, const pggpu_kmeans_params *p, int threads,
		  pggpu_pending_fn pending)
{
	pggpu_data *volatile ds = load(be, D, 0);
	volatile bool jumped = false;
	double	   *C = (double *) xmalloc(sizeof(double) * p->k * D->d);
	int64_t    *sizes = (int64_t *) xmalloc(sizeof(int64_t) * p->k);
	pggpu_kmeans_result r = {0};
	pggpu_error err = {0};

	if (ds != NULL)
	{
		pggpu_data_set_threads(ds, threads, pending);
		r.centroids = C;
		r.sizes = sizes;
		interrupt_calls = 0;
		if (setjmp(interrupt_env) == 0)
			pggpu_kmeans(ds, p, &r, &err);
		else
			jumped = true;
		pggpu_data_close(ds);
	}
	free(C);
	free(sizes);
	return jumped;
}

/*
 * The callback runs between iterations and seeding steps (batches of them on
 * the GPU) with the caller's argument, and may longjmp out (PostgreSQL's CHECK_FOR_INTERRUPTS): the set
 * must then still close cleanly, and the library keep working.
 */
void
test_interrupts_on(pggpu_backend be)
{
	static int	marker;
	dataset		D;
	km_out		o;
	pggpu_kmeans_params p = {0};
	const int	k = 6;
	/* a callback per seeding step; the GPU makes its steps in batches */
	int			seed_calls = be == PGGPU_BACKEND_GPU ? 1 : k - 1;
	int			total;

	set_case("interrupts %s", be_name(be));
	gen_blobs(&D, 5000, 3, k, 20.0, 31);
	p.k = k;
	p.max_iter = 50;
	p.init = PGGPU_INIT_KMEANSPP;
	p.seed = 5;
	p.check_interrupts = on_interrupt;
	p.interrupt_arg = &marker;
	interrupt_calls = 0;
	interrupt_jump_at = 0;
	km_alloc(&o, D.n, k, D.d);
	if (km_run(be, &D, 0, &p, &o))
		CHECK(interrupt_calls >= o.iters + seed_calls && interrupt_seen_arg == &marker,
			  "callback ran %d times (%d iterations, %d for the seeding), arg %s",
			  interrupt_calls, o.iters, seed_calls, interrupt_seen_arg == &marker ? "ok" : "wrong");
	km_free(&o);
	total = interrupt_calls;

	/* out at the first callback (seeding), halfway, and at the last */
	for (int t = 0; t < 3 && total > 0; t++)
	{
		int			at = t == 0 ? 1 : t == 1 ? (total + 1) / 2 : total;

		interrupt_jump_at = at;
		CHECK(fit_jumps(be, &D, &p, 1, NULL), "no longjmp out of k-means at callback %d", at);
		interrupt_jump_at = 0;
	}
	/* k-means||: out at every callback (its rounds, the recluster's data set) */
	set_case("interrupts %s k-means||", be_name(be));
	p.init = PGGPU_INIT_PARALLEL;
	interrupt_calls = 0;
	km_alloc(&o, D.n, k, D.d);
	if (km_run(be, &D, 0, &p, &o))
		check_blobs("k-means||", &D, k, PGGPU_INIT_PARALLEL, &o);
	km_free(&o);
	total = interrupt_calls;
	for (int at = 1; at <= total; at++)
	{
		interrupt_jump_at = at;
		if (!CHECK(fit_jumps(be, &D, &p, 1, NULL), "no longjmp out of k-means|| at callback %d", at))
			break;
	}
	interrupt_jump_at = 0;
	/* still works afterwards */
	p.check_interrupts = NULL;
	km_alloc(&o, D.n, k, D.d);
	if (km_run(be, &D, 0, &p, &o))
		check_blobs("after interrupts", &D, k, PGGPU_INIT_PARALLEL, &o);
	km_free(&o);
	data_free(&D);
}

/*
 * The CPU backend also calls back inside its passes over the rows (every
 * 4096 rows at most, fewer where k d is large: a pass over 10^8 rows takes
 * seconds), and a longjmp from there leaves the set closable.
 */
void
test_interrupts_in_pass(void)
{
	static int	marker;
	dataset		D;
	km_out		o;
	pggpu_kmeans_params p = {0};
	const int	k = 3;
	const int64_t n = 40000;	/* 10 blocks of 4096 rows a pass */
	int			passes;

	int32_t    *o_labels;

	set_case("interrupts inside CPU passes");
	gen_blobs(&D, n, 2, k, 20.0, 37);
	o_labels = (int32_t *) xmalloc(sizeof(int32_t) * n);
	p.k = k;
	p.max_iter = 2;
	p.tol = 0;
	p.init = PGGPU_INIT_RANDOM;
	p.seed = 9;
	p.check_interrupts = on_interrupt;
	p.interrupt_arg = &marker;
	interrupt_calls = 0;
	interrupt_jump_at = 0;
	km_alloc(&o, D.n, k, D.d);
	if (km_run(PGGPU_BACKEND_CPU, &D, 0, &p, &o))
	{
		/* the Lloyd passes and the final labelling, 10 callbacks each */
		passes = o.iters + 1;
		CHECK(interrupt_calls >= passes * 10, "callback ran %d times in %d passes of %lld rows",
			  interrupt_calls, passes, (long long) n);
	}
	km_free(&o);
	for (int at = 5; at <= 15; at += 10)
	{
		interrupt_jump_at = at;
		CHECK(fit_jumps(PGGPU_BACKEND_CPU, &D, &p, 1, NULL), "no longjmp out of a pass at callback %d", at);
		interrupt_jump_at = 0;
	}
	/* pggpu_assign: the set's own callback (pggpu_data_set_interrupts), in its pass */
	for (int at = 0; at <= 5; at += 5)
	{
		pggpu_data *volatile ds = load(PGGPU_BACKEND_CPU, &D, 0);
		volatile bool jumped = false;
		pggpu_error err = {0};

		if (ds == NULL)
			break;
		pggpu_data_set_interrupts(ds, on_interrupt, &marker);
		interrupt_calls = 0;
		interrupt_jump_at = at;
		if (setjmp(interrupt_env) == 0)
			CHECK(pggpu_assign(ds, D.X, k, o_labels, NULL, &err) == PGGPU_OK, "assign: %s", err.msg);
		else
			jumped = true;
		interrupt_jump_at = 0;
		pggpu_data_close(ds);
		if (at == 0)
			CHECK(interrupt_calls >= 10, "assign: callback ran %d times in a pass of %lld rows",
				  interrupt_calls, (long long) n);
		else
			CHECK(jumped, "no longjmp out of assign at callback %d", at);
	}
	free(o_labels);
	data_free(&D);
}

/* ---- CPU threads -------------------------------------------------------------- */

static int	pending_polls;
static int	pending_from;		/* pending() says true from this poll on; 0: never */
static int	pending_until;		/* ... up to this poll */
static int	pending_every;		/* and on every such poll; 0: never */

bool
test_pending(void)
{
	++pending_polls;
	return (pending_from > 0 && pending_polls >= pending_from && pending_polls <= pending_until) ||
		(pending_every > 0 && pending_polls % pending_every == 0);
}

/* longjmps once pending() has said true */
static void
jump_if_pending(void *arg)
{
	(void) arg;
	if (pending_from > 0 && pending_polls >= pending_from)
		longjmp(interrupt_env, 1);
}

/* one fit of D on the CPU with the given threads; false when it failed */
static bool
fit_threads(const dataset *D, const pggpu_kmeans_params *p, int threads,
			pggpu_pending_fn pending, km_out *o)
{
	pggpu_data *ds = load(PGGPU_BACKEND_CPU, D, 0);
	pggpu_error err = {0};

	if (ds == NULL)
		return false;
	pggpu_data_set_threads(ds, threads, pending);
	fit_set(ds, p, o, &err);
	pggpu_data_close(ds);
	return CHECK(o->st == PGGPU_OK, "%d threads: %s", threads, err.msg);
}

/* bit for bit: centroids, inertia, sizes, labels, iterations */
void
cmp_exact(const char *what, const km_out *a, const km_out *b, int64_t n, int k, int d)
{
	CHECK(memcmp(a->C, b->C, sizeof(double) * k * d) == 0 &&
		  memcmp(&a->inertia, &b->inertia, sizeof(double)) == 0 &&
		  memcmp(a->sizes, b->sizes, sizeof(int64_t) * k) == 0 &&
		  memcmp(a->labels, b->labels, sizeof(int32_t) * n) == 0 &&
		  a->iters == b->iters && a->conv == b->conv,
		  "%s: not bit-identical (iterations %d vs %d, inertia %.17g vs %.17g)",
		  what, a->iters, b->iters, a->inertia, b->inertia);
}

/* a longjmp from the callback that a pending interrupt brought, with threads */
static void
threads_longjmp(const dataset *D, int k)
{
	pggpu_kmeans_params p = {0};

	p.k = k;
	p.max_iter = 5;
	p.seed = 3;
	p.check_interrupts = jump_if_pending;
	for (int at = 1; at <= 9; at *= 3)
	{
		bool		jumped;

		set_case("threads n=%lld d=%d k=%d: longjmp after poll %d", (long long) D->n, D->d, k, at);
		pending_polls = 0;
		pending_from = at;
		pending_until = INT_MAX;
		jumped = fit_jumps(PGGPU_BACKEND_CPU, D, &p, 4, test_pending);
		pending_from = 0;
		CHECK(jumped, "no longjmp out after pending from poll %d (%d polls)", at, pending_polls);
	}
}

/*
 * The CPU backend on several threads: tables of several parts (over 65536
 * rows) give the same result to the last bit on 1, 2, 3 and 8 threads, by
 * every init; an interrupt pending while threads run reaches the callback
 * (on this thread), the pass goes on where it stopped when the callback
 * returns (still bit-identical), and a longjmp from it leaves the set
 * closable.
 */
void
test_threads(void)
{
	static const struct
	{
		int64_t		n;
		int			d,
					k;
	}			shapes[] = {{200003, 2, 5}, {150000, 9, 40}, {70000, 3, 300}};
	static const int threads[] = {2, 3, 8};

	for (int t = 0; t < (int) (sizeof(shapes) / sizeof(shapes[0])); t++)
	{
		int64_t		n = shapes[t].n;
		int			d = shapes[t].d,
					k = shapes[t].k;
		dataset		D;
		double	   *given = (double *) xmalloc(sizeof(double) * k * d);

		gen_blobs(&D, n, d, k < 20 ? k : 20, 4.0, 500 + t);
		for (int i = 0; i < k * d; i++)
			given[i] = D.X[(int64_t) (i / d) * 13 % n * d + i % d];
		for (int init = PGGPU_INIT_KMEANSPP; init <= PGGPU_INIT_PARALLEL; init++)
		{
			pggpu_kmeans_params p = {0};
			km_out		one;

			set_case("threads n=%lld d=%d k=%d %s", (long long) n, d, k, init_name(init));
			p.k = k;
			p.max_iter = 12;
			p.tol = 0;
			p.init = init;
			p.seed = 77;
			p.init_centroids = init == PGGPU_INIT_GIVEN ? given : NULL;
			km_alloc(&one, n, k, d);
			if (!fit_threads(&D, &p, 1, NULL, &one))
			{
				km_free(&one);
				continue;
			}
			for (int h = 0; h < (int) (sizeof(threads) / sizeof(threads[0])); h++)
			{
				km_out		o;
				char		what[64];

				km_alloc(&o, n, k, d);
				snprintf(what, sizeof(what), "1 vs %d threads", threads[h]);
				if (fit_threads(&D, &p, threads[h], NULL, &o))
					cmp_exact(what, &one, &o, n, k, d);
				km_free(&o);
			}

			/* pending on polls 3-4 and every 5th: the callback runs, returns,
			 * and the passes go on where they stopped */
			if (init == PGGPU_INIT_KMEANSPP)
			{
				km_out		o;

				p.check_interrupts = on_interrupt;
				interrupt_calls = 0;
				interrupt_jump_at = 0;
				pending_polls = 0;
				pending_from = 3;
				pending_until = 4;
				pending_every = 5;
				km_alloc(&o, n, k, d);
				if (fit_threads(&D, &p, 4, test_pending, &o))
				{
					cmp_exact("4 threads, the callback run on a pending interrupt", &one, &o, n, k, d);
					CHECK(pending_polls > 10 && interrupt_calls > o.iters,
						  "pending polled %d times, callback %d times", pending_polls, interrupt_calls);
				}
				km_free(&o);
				p.check_interrupts = NULL;
				pending_from = 0;
				pending_every = 0;
			}
			km_free(&one);
		}

		threads_longjmp(&D, k);
		free(given);
		data_free(&D);
	}
}

/*
 * Work between polls, not rows: a pass over few rows but many centroids
 * calls back every few million squared differences (an assignment of 512
 * rows to 20000 centroids of 8 columns, 8.2e7 of them, at least 10 times;
 * polling by rows alone called once).
 */
void
test_poll_by_work(void)
{
	const int64_t n = 512;
	const int	d = 8,
				k = 20000;
	dataset		D,
				Cd;
	int32_t    *lab = (int32_t *) xmalloc(sizeof(int32_t) * n);
	pggpu_data *ds;
	pggpu_error err = {0};

	set_case("interrupts by work");
	gen_uniform(&D, n, d, -1, 1, 5);
	gen_uniform(&Cd, k, d, -1, 1, 6);
	ds = load(PGGPU_BACKEND_CPU, &D, 0);
	if (ds != NULL)
	{
		pggpu_data_set_interrupts(ds, on_interrupt, NULL);
		interrupt_calls = interrupt_jump_at = 0;
		CHECK(pggpu_assign(ds, Cd.X, k, lab, NULL, &err) == PGGPU_OK, "assign: %s", err.msg);
		CHECK(interrupt_calls >= 10, "callback ran %d times over %.2g squared differences",
			  interrupt_calls, (double) n * k * d);
		pggpu_data_close(ds);
	}
	free(lab);
	data_free(&D);
	data_free(&Cd);
}

/*
 * Passes cut by pggpu_data_set_poll_work (the CPU's runs of centroids, the
 * GPU's launches over ranges of rows) give the same results as whole ones,
 * on the tensor-core route (d = 4, k = 300) and lloyd's kernel (d = 40,
 * k = 50); the callback runs between the pieces.
 */
static void
fit_polled(pggpu_backend be, const dataset *D, const pggpu_kmeans_params *p, double work,
		   km_out *o)
{
	/* a hint of 1 row: tiles of 4096 rows, so that there are ranges */
	pggpu_data *ds = load(be, D, 1);
	pggpu_error err = {0};

	if (ds == NULL)
		return;
	pggpu_data_set_poll_work(ds, work);
	fit_set(ds, p, o, &err);
	CHECK(o->st == PGGPU_OK, "%s k-means: %s", be_name(be), err.msg);
	pggpu_data_close(ds);
}

void
test_poll_work_results(void)
{
	static const int shapes[][2] = {{4, 300}, {40, 50}};

	for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++)
	{
		int			d = shapes[si][0],
					k = shapes[si][1];
		const int64_t n = 20000;
		dataset		D;
		km_out		whole[2],
					cut[2];
		pggpu_kmeans_params p = {0};

		gen_blobs(&D, n, d, 40, 20.0, 600 + si);
		p.k = k;
		p.max_iter = 6;
		p.tol = 0;
		p.init = PGGPU_INIT_KMEANSPP;
		p.seed = 3;
		p.check_interrupts = on_interrupt;
		interrupt_jump_at = 0;
		for (int b = 0; b < 2; b++)
		{
			pggpu_backend be = b ? PGGPU_BACKEND_GPU : PGGPU_BACKEND_CPU;
			int			calls_whole;

			km_alloc(&whole[b], n, k, d);
			km_alloc(&cut[b], n, k, d);
			set_case("passes cut by poll work, d = %d, k = %d, %s", d, k, be_name(be));
			if (b == 1 && !have_gpu)
			{
				gpu_skipped++;
				continue;
			}
			interrupt_calls = 0;
			fit_polled(be, &D, &p, 0, &whole[b]);
			calls_whole = interrupt_calls;
			interrupt_calls = 0;
			/* a GPU range: one tile; a CPU run: one centroid */
			fit_polled(be, &D, &p, 1000, &cut[b]);
			if (whole[b].st == PGGPU_OK && cut[b].st == PGGPU_OK)
			{
				/* the GPU's update after labels given sums in another order */
				cmp_km("cut vs whole passes", &whole[b], &cut[b], n, k, d, b ? 1e-9 : 0);
				CHECK(interrupt_calls > calls_whole + 7, "callback ran %d times cut, %d whole",
					  interrupt_calls, calls_whole);
			}
		}
		if (have_gpu && cut[0].st == PGGPU_OK && cut[1].st == PGGPU_OK)
		{
			set_case("passes cut by poll work, d = %d, k = %d, cpu vs gpu", d, k);
			cmp_km("cut passes", &cut[0], &cut[1], n, k, d, 1e-9);
		}
		for (int b = 0; b < 2; b++)
			km_free(&whole[b]), km_free(&cut[b]);
		data_free(&D);
	}
}

void
test_interrupts(void)
{
	test_interrupts_in_pass();
	test_poll_by_work();
	test_poll_work_results();
	test_interrupts_on(PGGPU_BACKEND_CPU);
	if (have_gpu)
		test_interrupts_on(PGGPU_BACKEND_GPU);
	else
		gpu_skipped++;
}
