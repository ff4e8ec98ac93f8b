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
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
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

/* what one fit of the hierarchy reports, added in group order after */
typedef struct hier_stats
{
	int			iterations;
	bool		converged;
	int64_t		changed;
	double		seed_seconds;
	double		iterate_seconds;
} hier_stats;

static void
hier_add(pggpu_kmeans_result *r, const hier_stats *f)
{
	if (f->iterations > r->iterations)
		r->iterations = f->iterations;
	r->converged &= f->converged;
	r->changed += f->changed;
	r->seed_seconds += f->seed_seconds;
	r->iterate_seconds += f->iterate_seconds;
}

/* one fit of the hierarchy on ds (q: the caller's settings), its centroids (caller's units) into C */
static pggpu_status
hier_fit(pggpu_data *ds, const pggpu_kmeans_params *q0, int k, uint64_t seed, double *C,
		 int64_t *sizes, int32_t *labels, hier_stats *out, pggpu_error *err)
{
	pggpu_kmeans_params q = *q0;
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
	out->iterations = f.iterations;
	out->converged = f.converged;
	out->changed = f.changed;
	out->seed_seconds = f.seed_seconds;
	out->iterate_seconds = f.iterate_seconds;
	return PGGPU_OK;
}

/*
 * The groups' fits: GPU sets several at once (a thread and a data set
 * each, drawing groups in turn: a group's fit is many short steps, each
 * too small to fill the GPU); each writes its own centroids and figures,
 * so the result is the same however they interleave.  As many as the
 * GPU's hardware queues for this process, at most 16: CUDA gives 8 unless
 * CUDA_DEVICE_MAX_CONNECTIONS says more, and streams beyond them wait
 * behind each other's kernels.  At 10^6 x 256, k = 20,000 (141 groups of
 * about 7,000 rows, H200): 8 queues, 8 threads 0.54-0.63 s and 16 no
 * faster; 32 queues, 16 threads 0.46 s (8: 0.50, 32: 0.49).  pg_gpu does
 * not raise the queues itself: each costs the GPU's channels, shared by
 * every process, and with 32 queues each only about 13 processes could hold a
 * context on an H200 at once, where 8 lets about 56 (docs/gpus.md).
 */
#define HIER_THREADS_MAX 16

static int
hier_threads(void)
{
	const char *q = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
	long		n = q ? strtol(q, NULL, 10) : 0;

	return n >= HIER_THREADS_MAX ? HIER_THREADS_MAX : 8;
}

typedef struct hier_work
{
	const pggpu_kmeans_params *p;
	pggpu_data *set;
	const int64_t *at;			/* the set's rows by group: at[first[j] .. first[j + 1]) */
	const int64_t *first;
	const int  *share;
	const int64_t *offset;		/* group j's first centroid */
	double	   *C;
	hier_stats *stats;			/* a group's */
	pggpu_status *status;		/* a group's (PGGPU_OK before it ran: see done) */
	bool	   *done;
	int			g;
	_Atomic int next;			/* the next group to take */
	pthread_mutex_t host;		/* get_rows of the set, one thread at a time */
	pggpu_stop *stop;
	/* the first failure (of the least group) and its error */
	pthread_mutex_t mu;
	int			failed;
	pggpu_error err;
} hier_work;

/* a worker's own: where its group's interrupt check leaves to (the stop flag set) */
typedef struct hier_slot
{
	hier_work  *w;
	jmp_buf		out;
} hier_slot;

static void
hier_check(void *arg)
{
	hier_slot  *sl = (hier_slot *) arg;

	if (pggpu_stopped(sl->w->stop))
		longjmp(sl->out, 1);
}

/*
 * rows (places `at` of set, m of them) into sub, as pushed into set; host:
 * the lock of set's get_rows where threads share it, or NULL
 */
static pggpu_status
hier_rows(pggpu_data *set, pthread_mutex_t *host, pggpu_data *sub, const int64_t *at, int64_t m,
		  pggpu_error *err)
{
	int			e = -set->scale_e;
	const double *sw = pggpu_data_weights(set);
	double	   *buf,
			   *wg = NULL;
	pggpu_status st;

	if (sub->ops->copy_rows && sub->backend == set->backend)
	{
		st = pggpu_copy_rows(sub, &set, 1, NULL, at, m, &e, err);
		if (st != PGGPU_ERR_INVALID)
			return st;
		err->code = PGGPU_OK;	/* (through the host, below) */
		err->msg[0] = '\0';
	}
	/* (sub's scratch: freed when it closes, also after hier_check leaves) */
	if ((buf = (double *) pggpu_scratch_alloc(sub, sizeof(double) * (m > 0 ? m : 1) * set->d)) == NULL ||
		(sw && (wg = (double *) pggpu_scratch_alloc(sub, sizeof(double) * (m > 0 ? m : 1))) == NULL))
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	for (int64_t t = 0; wg && t < m; t++)
		wg[t] = sw[at[t]];
	if (host)
		pthread_mutex_lock(host);
	st = set->ops->get_rows(set, at, m, buf, err);
	if (host)
		pthread_mutex_unlock(host);
	if (st != PGGPU_OK)
		return st;
	pggpu_ldexp_all(buf, m * set->d, e);
	st = pggpu_data_push_rows(sub, buf, wg, NULL, m, err);
	pggpu_scratch_free(sub, buf);
	pggpu_scratch_free(sub, wg);
	return st;
}

/*
 * The groups' fit: of the set's first HIER_PER_K rows a group where the
 * set has more (the set is in key order, so they are drawn by content, the
 * same wherever the rows are held), FAISS's rule for a level's training
 * rows.  Of all the set's rows it was 0.21 s of 1.0 at 10^6 x 256, k =
 * 20,000 (141 groups, an H200); the groups are then every row's nearest
 * (pggpu_assign), one pass.  Centroids (caller's units) into C.
 */
static pggpu_status
hier_top(pggpu_data *set, const pggpu_kmeans_params *p, int g, double *C, hier_stats *out,
		 pggpu_error *err)
{
	uint64_t	seed = pggpu_mix64(p->seed ^ 0x9b05688c2b3e6c1fULL);
	int64_t		mt = (int64_t) g * HIER_PER_K;
	pggpu_data *volatile top = NULL;
	int64_t    *at;
	int64_t    *sizes;
	pggpu_status st;

	if (set->n <= mt)
	{
		if ((sizes = (int64_t *) pggpu_scratch_alloc(set, sizeof(int64_t) * g)) == NULL)
			return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		st = hier_fit(set, p, g, seed, C, sizes, NULL, out, err);
		pggpu_scratch_free(set, sizes);
		return st;
	}
	/* (top: closed with set after a longjmp; its scratch with it) */
	if ((st = pggpu_fit_open(set, set->backend, mt, true, (pggpu_data **) &top, err)) != PGGPU_OK)
		goto done;
	if ((at = (int64_t *) pggpu_scratch_alloc(top, sizeof(int64_t) * mt)) == NULL ||
		(sizes = (int64_t *) pggpu_scratch_alloc(top, sizeof(int64_t) * g)) == NULL)
	{
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		goto done;
	}
	for (int64_t i = 0; i < mt; i++)
		at[i] = i;
	if ((st = hier_rows(set, NULL, top, at, mt, err)) == PGGPU_OK)
		st = hier_fit(top, p, g, seed, C, sizes, NULL, out, err);
done:
	if (top)
		pggpu_fit_close(set, top);
	return st;
}

/* group j's fit on a data set of its own, closed after; check and arg: its interrupt check */
static pggpu_status
hier_group(hier_work *w, int j, pggpu_interrupt_fn check, void *arg, pggpu_data *volatile *sub,
		   pggpu_error *err)
{
	pggpu_kmeans_params q = *w->p;
	int64_t		mj = w->first[j + 1] - w->first[j];
	int64_t    *sizes;
	pggpu_status st;

	q.check_interrupts = check;
	q.interrupt_arg = arg;
	if ((st = pggpu_fit_open(w->set, w->set->backend, mj, check == w->p->check_interrupts, (pggpu_data **) sub,
							 err)) != PGGPU_OK)
		return st;
	if ((st = hier_rows(w->set, &w->host, *sub, w->at + w->first[j], mj, err)) != PGGPU_OK)
		return st;
	if ((sizes = (int64_t *) pggpu_scratch_alloc(*sub, sizeof(int64_t) * w->share[j])) == NULL)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	st = hier_fit(*sub, &q, w->share[j], pggpu_mix64(w->p->seed ^ (0x1f83d9abfb41bd6bULL * (uint64_t) (j + 1))),
				  w->C + w->offset[j] * (*sub)->d, sizes, NULL, &w->stats[j], err);
	return st;
}

/* a worker: groups in turn until none is left, a failure anywhere, or the stop flag */
static void
hier_job(void *arg, int i, pggpu_stop *stop)
{
	hier_work  *w = (hier_work *) arg;
	hier_slot	sl = {w};
	pggpu_data *volatile sub = NULL;
	volatile int j = -1;
	pggpu_error err = {0};

	(void) i;
	(void) stop;
	if (setjmp(sl.out) != 0)
	{
		/* (stopped inside a fit: the group stays undone, for the caller) */
		pggpu_data_close(sub);
		return;
	}
	for (;;)
	{
		pggpu_status st;

		j = atomic_fetch_add(&w->next, 1);
		while (j < w->g && w->share[j] == 0)
			w->done[j] = true, j = atomic_fetch_add(&w->next, 1);
		if (j >= w->g || pggpu_stopped(w->stop) || w->failed < w->g)
			return;
		sub = NULL;
		st = hier_group(w, j, hier_check, &sl, &sub, &err);
		pggpu_data_close(sub);
		sub = NULL;
		w->status[j] = st;
		w->done[j] = st == PGGPU_OK;
		if (st != PGGPU_OK)
		{
			pthread_mutex_lock(&w->mu);
			if (j < w->failed)
				w->failed = j, w->err = err;
			pthread_mutex_unlock(&w->mu);
			return;
		}
	}
}

pggpu_status
pggpu_hierarchical(const pggpu_kmeans_source *src, const pggpu_kmeans_params *p, int e, double *C,
				   pggpu_kmeans_result *r, pggpu_error *err)
{
	pggpu_data *home = src->home;
	pggpu_data *set = NULL;
	pggpu_data *volatile sub = NULL;
	int			d = home->d;
	int			k = p->k;
	int			g,
				busy = 0;
	int64_t		m;
	void	   *space = NULL;
	double	   *C1;
	int64_t    *rows1,
			   *at,
			   *first,
			   *offset;
	int32_t    *labels1;
	int		   *share;
	hier_stats *stats,
				top = {0};
	pggpu_status *status;
	bool	   *done;
	hier_work	w;
	pggpu_stop	stop;
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
	space = pggpu_scratch_alloc(home, sizeof(double) * g * d + sizeof(int64_t) * (3 * (g + 1) + m) +
								sizeof(hier_stats) * g + sizeof(pggpu_status) * g +
								sizeof(int32_t) * m + sizeof(int) * g + sizeof(bool) * g);
	if (!space)
	{
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		goto done;
	}
	C1 = (double *) space;
	stats = (hier_stats *) (C1 + (int64_t) g * d);
	rows1 = (int64_t *) (stats + g);
	first = rows1 + g + 1;
	offset = first + g + 1;
	at = offset + g + 1;
	status = (pggpu_status *) (at + m);
	labels1 = (int32_t *) (status + g);
	share = (int *) (labels1 + m);
	done = (bool *) (share + g);

	/* the groups: a fit into g, then every row of the set by its nearest group */
	CHECK(hier_top(set, p, g, C1, &top, err));
	hier_add(r, &top);
	CHECK(pggpu_assign(set, C1, g, labels1, NULL, err));
	memset(rows1, 0, sizeof(int64_t) * g);
	for (int64_t i = 0; i < m; i++)
		rows1[labels1[i]]++;
	pggpu_hier_shares(rows1, g, k, share);

	/* each group's rows, in the set's order (at[first[j] ..]), and its first centroid */
	first[0] = offset[0] = 0;
	for (int j = 0; j < g; j++)
	{
		first[j + 1] = first[j] + rows1[j];
		offset[j + 1] = offset[j] + share[j];
		busy += share[j] > 0;
		done[j] = share[j] == 0;
		status[j] = PGGPU_OK;
		memset(&stats[j], 0, sizeof(hier_stats));
		stats[j].converged = true;
	}
	if (offset[g] != k)
	{
		st = pggpu_fail(err, PGGPU_ERR_INVALID, "hierarchical k-means shared out %lld of %d centroids",
						(long long) offset[g], k);
		goto done;
	}
	for (int j = 0; j < g; j++)
		rows1[j] = first[j];
	for (int64_t i = 0; i < m; i++)
		at[rows1[labels1[i]]++] = i;

	/* then each group's rows into its share, the centroids in group order */
	memset(&w, 0, sizeof(w));
	w.p = p;
	w.set = set;
	w.at = at;
	w.first = first;
	w.share = share;
	w.offset = offset;
	w.C = C;
	w.stats = stats;
	w.status = status;
	w.done = done;
	w.g = g;
	w.failed = g;
	w.stop = &stop;
	atomic_init(&w.next, 0);
	pthread_mutex_init(&w.host, NULL);
	pthread_mutex_init(&w.mu, NULL);
	if (set->backend == PGGPU_BACKEND_GPU && busy > 1)
	{
		/* (the threads call no callback: this thread polls, as for parts on several GPUs) */
		int			threads = hier_threads();

		pggpu_run_together(hier_job, &w, busy < threads ? busy : threads, home->pending, &stop);
		if (w.failed < g)
		{
			*err = w.err;
			st = w.status[w.failed];
		}
		/* an interrupt seen pending: the callback here (it may longjmp) */
		if (st == PGGPU_OK && pggpu_stopped(&stop))
			pggpu_interrupts(p);
	}
	/* the groups left: all of them on the CPU or with one group; after an interrupt held off, the rest */
	for (int j = 0; j < g && st == PGGPU_OK; j++)
	{
		if (done[j])
			continue;
		pggpu_interrupts(p);
		st = hier_group(&w, j, p->check_interrupts, p->interrupt_arg, &sub, err);
		if (sub)
			pggpu_fit_close(set, sub);
		sub = NULL;
	}
	pthread_mutex_destroy(&w.host);
	pthread_mutex_destroy(&w.mu);
	if (st != PGGPU_OK)
		goto done;
	for (int j = 0; j < g; j++)
		if (share[j] > 0)
			hier_add(r, &stats[j]);
	/* (caller's units to the fit's; cosine: the fits' unit centroids to norm 2^e, as the driver's) */
	pggpu_ldexp_all(C, (int64_t) k * d, e);
done:
	if (sub)
		pggpu_fit_close(set, sub);
	if (set)
		pggpu_fit_close(home, set);
	pggpu_scratch_free(home, space);
	return st;
}
