#include "unit.h"
#include "compute_internal.h"	/* (pggpu_half_from_double) */

/* ---- bookkeeping ---------------------------------------------------------- */

int	n_passed;
int	n_failed;
char case_name[200] = "";
bool full_grid;			/* --full */
bool verbose;			/* --verbose: a line per k-means run */
bool have_gpu;
int			unit_gpus;
char no_gpu_why[600];
int	gpu_skipped;		/* GPU cases not run for want of a GPU */
__thread bool in_worker; /* a kernel-grid worker thread: no CHECK, no output */

void
set_case(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(case_name, sizeof(case_name), fmt, ap);
	va_end(ap);
}

/* counts one check; prints a line with the details when it failed */
bool
check_at(bool ok, int line, const char *fmt,...)
{
	va_list		ap;

	if (ok)
	{
		n_passed++;
		return true;
	}
	n_failed++;
	printf("FAIL [%s] (line %d): ", case_name, line);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	return false;
}

/* the tests' own allocations: failing them is not the library's fault */
void *
xmalloc(size_t bytes)
{
	void	   *p = malloc(bytes ? bytes : 1);

	if (p == NULL)
	{
		fprintf(stderr, "unit_compute: out of memory (%zu bytes)\n", bytes);
		exit(2);
	}
	return p;
}

double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

const char *
be_name(pggpu_backend be)
{
	return be == PGGPU_BACKEND_GPU ? "gpu" : "cpu";
}

const char *
init_name(pggpu_init init)
{
	return init == PGGPU_INIT_GIVEN ? "given" :
		init == PGGPU_INIT_RANDOM ? "random" :
		init == PGGPU_INIT_PARALLEL ? "k-means||" : "k-means++";
}

/* ---- random numbers (independent of the library's hash) ------------------ */

rng
rng_make(uint64_t seed)
{
	rng			r = {seed * 2 + 0x1234567ULL, false, 0};

	return r;
}

/* xorshift64* */
uint64_t
rng_u64(rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 0x2545F4914F6CDD1DULL;
}

/* uniform in [0, 1) */
double
rng_unif(rng *r)
{
	return (double) (rng_u64(r) >> 11) * 0x1p-53;
}

/* standard normal (Box-Muller, both halves used) */
double
rng_gauss(rng *r)
{
	double		u1,
				u2,
				m;

	if (r->have_spare)
	{
		r->have_spare = false;
		return r->spare;
	}
	u1 = 1.0 - rng_unif(r);		/* (0, 1]: log is finite */
	u2 = rng_unif(r);
	m = sqrt(-2.0 * log(u1));
	r->spare = m * sin(2.0 * M_PI * u2);
	r->have_spare = true;
	return m * cos(2.0 * M_PI * u2);
}

/* ---- data sets ------------------------------------------------------------- */

void
data_free(dataset *D)
{
	free(D->X);
	free(D->group);
	memset(D, 0, sizeof(*D));
}

void
data_alloc(dataset *D, int64_t n, int d, bool groups)
{
	memset(D, 0, sizeof(*D));
	D->n = n;
	D->d = d;
	D->X = (double *) xmalloc(sizeof(double) * n * d);
	if (groups)
		D->group = (int32_t *) xmalloc(sizeof(int32_t) * n);
}

/*
 * nb Gaussian blobs (sigma 1).  Centre b sits at sep * b along column 0
 * (sep >= 20 keeps every row far nearer its own centre than any other) and
 * at random in [-50, 50) in the other columns.  Row b < nb belongs to blob b,
 * so the first nb rows make one initial centroid per blob.
 */
void
gen_blobs(dataset *D, int64_t n, int d, int nb, double sep, uint64_t seed)
{
	rng			r = rng_make(seed);
	double	   *ctr = (double *) xmalloc(sizeof(double) * nb * d);

	data_alloc(D, n, d, true);
	D->ngroups = nb;
	for (int b = 0; b < nb; b++)
	{
		ctr[(int64_t) b * d] = sep * (b - 0.5 * (nb - 1));
		for (int j = 1; j < d; j++)
			ctr[(int64_t) b * d + j] = 100.0 * rng_unif(&r) - 50.0;
	}
	for (int64_t i = 0; i < n; i++)
	{
		int			b = i < nb ? (int) i : (int) (rng_u64(&r) % (uint64_t) nb);

		D->group[i] = b;
		for (int j = 0; j < d; j++)
			D->X[i * d + j] = ctr[(int64_t) b * d + j] + rng_gauss(&r);
	}
	free(ctr);
}

void
gen_uniform(dataset *D, int64_t n, int d, double lo, double hi, uint64_t seed)
{
	rng			r = rng_make(seed);

	data_alloc(D, n, d, false);
	for (int64_t i = 0; i < n * d; i++)
		D->X[i] = lo + (hi - lo) * rng_unif(&r);
}

/* every row identical: value * (1, 2, ..., d) */
void
gen_same(dataset *D, int64_t n, int d, double value)
{
	data_alloc(D, n, d, true);
	D->ngroups = 1;
	for (int64_t i = 0; i < n; i++)
	{
		D->group[i] = 0;
		for (int j = 0; j < d; j++)
			D->X[i * d + j] = value * (j + 1);
	}
}

/*
 * Rows drawn from m distinct integer points (rows 0..m-1 are the points
 * themselves).  Integers keep every sum exact, so means do not depend on
 * summation order and both backends must agree exactly.
 */
void
gen_few(dataset *D, int64_t n, int d, int m, uint64_t seed)
{
	rng			r = rng_make(seed);
	double	   *pt = (double *) xmalloc(sizeof(double) * m * d);

	data_alloc(D, n, d, true);
	D->ngroups = m;
	for (int q = 0; q < m; q++)
	{
		pt[(int64_t) q * d] = 3.0 * q - m;	/* distinct */
		for (int j = 1; j < d; j++)
			pt[(int64_t) q * d + j] = (double) (int) (rng_u64(&r) % 201) - 100.0;
	}
	for (int64_t i = 0; i < n; i++)
	{
		int			q = i < m ? (int) i : (int) (rng_u64(&r) % (uint64_t) m);

		D->group[i] = q;
		memcpy(D->X + i * d, pt + (int64_t) q * d, sizeof(double) * d);
	}
	free(pt);
}

/* ---- loading -------------------------------------------------------------- */

/*
 * Opens a data set on a backend and pushes D through the staging batches
 * (structure-of-arrays, last batch partial), checking the row count after
 * every push.  NULL, with why[] saying what went wrong, on failure.  No
 * CHECK: worker threads call it (see the kernel grid).
 */
pggpu_data *
load_quiet(pggpu_backend be, const dataset *D, int64_t hint, char *why, size_t whylen)
{
	return load_quiet_on(be, 0, D, hint, why, whylen);
}

/* load_quiet on GPU gpu (be GPU) */
pggpu_data *
load_quiet_on(pggpu_backend be, int gpu, const dataset *D, int64_t hint, char *why, size_t whylen)
{
	pggpu_error err = {0};
	pggpu_data *ds = NULL;
	pggpu_status st;
	int64_t		B;

	why[0] = 0;
	st = pggpu_data_open(&ds, be, gpu, D->d, hint, &err);
	if (st != PGGPU_OK || ds == NULL)
	{
		snprintf(why, whylen, "open (%s, d=%d, hint=%lld) failed: %d %s",
				 be_name(be), D->d, (long long) hint, (int) st, err.msg);
		return NULL;
	}
	B = pggpu_data_batch_rows(ds);
	for (int64_t r0 = 0; r0 < D->n; r0 += B)
	{
		int64_t		m = D->n - r0 < B ? D->n - r0 : B;
		double	   *buf = pggpu_data_batch(ds);

		if (buf == NULL)
		{
			snprintf(why, whylen, "no staging buffer at row %lld", (long long) r0);
			break;
		}
		for (int j = 0; j < D->d; j++)
			for (int64_t r = 0; r < m; r++)
				buf[j * B + r] = D->X[(r0 + r) * D->d + j];
		st = pggpu_data_push(ds, m, &err);
		if (st != PGGPU_OK)
		{
			snprintf(why, whylen, "push of %lld rows at row %lld: %d %s",
					 (long long) m, (long long) r0, (int) st, err.msg);
			break;
		}
		if (pggpu_data_rows(ds) != r0 + m)
		{
			snprintf(why, whylen, "after a push of %lld rows at row %lld, rows = %lld",
					 (long long) m, (long long) r0, (long long) pggpu_data_rows(ds));
			break;
		}
	}
	if (why[0] != 0)
	{
		char		more[120];

		snprintf(more, sizeof(more), " (loading %lld x %d rows on the %s, hint=%lld, batch %lld)",
				 (long long) D->n, D->d, be_name(be), (long long) hint, (long long) B);
		strncat(why, more, whylen - strlen(why) - 1);
		pggpu_data_close(ds);
		return NULL;
	}
	return ds;
}

/* load_quiet, counted as one check */
pggpu_data *
load(pggpu_backend be, const dataset *D, int64_t hint)
{
	return load_on(be, 0, D, hint);
}

/* load on GPU gpu (be GPU) */
pggpu_data *
load_on(pggpu_backend be, int gpu, const dataset *D, int64_t hint)
{
	char		why[700];
	pggpu_data *ds = load_quiet_on(be, gpu, D, hint, why, sizeof(why));

	CHECK(ds != NULL, "%s", why);
	return ds;
}

/* ---- k-means runs and the naive reference ---------------------------------- */

void
km_alloc(km_out *o, int64_t n, int k, int d)
{
	memset(o, 0, sizeof(*o));
	o->C = (double *) xmalloc(sizeof(double) * k * d);
	o->sizes = (int64_t *) xmalloc(sizeof(int64_t) * k);
	o->labels = (int32_t *) xmalloc(sizeof(int32_t) * n);
	/* poison: what the library leaves unwritten shows up */
	for (int64_t i = 0; i < (int64_t) k * d; i++)
		o->C[i] = NAN;
	for (int c = 0; c < k; c++)
		o->sizes[c] = -1;
	for (int64_t i = 0; i < n; i++)
		o->labels[i] = -7;
	o->inertia = NAN;
	o->iters = -1;
	o->st = PGGPU_ERR_INVALID;	/* not run yet */
}

void
km_free(km_out *o)
{
	free(o->C);
	free(o->sizes);
	free(o->labels);
	memset(o, 0, sizeof(*o));
}

/*
 * Loads D, runs k-means, closes; o must be km_alloc'ed.  false, with why[]
 * saying what went wrong, on failure.  No CHECK (worker threads call it).
 */
bool
km_run_quiet(pggpu_backend be, const dataset *D, int64_t hint,
			 const pggpu_kmeans_params *p, km_out *o, char *why, size_t whylen)
{
	pggpu_error err = {0};
	pggpu_kmeans_result r = {0};
	pggpu_data *ds = load_quiet(be, D, hint, why, whylen);
	double		t0;

	o->st = PGGPU_ERR_INVALID;
	if (ds == NULL)
		return false;
	r.centroids = o->C;
	r.sizes = o->sizes;
	r.labels = o->labels;
	t0 = now_s();
	o->st = pggpu_kmeans(ds, p, &r, &err);
	o->inertia = r.inertia;
	o->iters = r.iterations;
	o->conv = r.converged;
	pggpu_data_close(ds);
	if (verbose && !in_worker)
		printf("#   [%s] %s k-means: %d iterations, converged %d, inertia %.17g, %.3f s\n",
			   case_name, be_name(be), o->iters, o->conv, o->inertia, now_s() - t0);
	if (o->st != PGGPU_OK)
		snprintf(why, whylen, "%s k-means (k=%d, %s) failed: %d %s", be_name(be),
				 p->k, init_name(p->init), (int) o->st, err.msg);
	return o->st == PGGPU_OK;
}

/* km_run_quiet, counted as one check */
bool
km_run(pggpu_backend be, const dataset *D, int64_t hint,
	   const pggpu_kmeans_params *p, km_out *o)
{
	char		why[800];

	return CHECK(km_run_quiet(be, D, hint, p, o, why, sizeof(why)), "%s", why);
}

double
sqdist(const double *x, const double *c, int d)
{
	double		acc = 0.0;

	for (int j = 0; j < d; j++)
	{
		double		diff = x[j] - c[j];

		acc += diff * diff;
	}
	return acc;
}

/*
 * nearest of k centroids, lowest index on ties.  Four centroids at a time,
 * each distance still summed on its own over columns 0..d-1 (the same
 * rounding as sqdist), only faster.
 */
int
nearest(const double *x, const double *C, int k, int d, double *best_out)
{
	double		best = INFINITY;
	int			bc = 0;
	int			c0 = 0;

	for (; c0 + 4 <= k; c0 += 4)
	{
		const double *p = C + (int64_t) c0 * d;
		double		a[4] = {0, 0, 0, 0};

		for (int j = 0; j < d; j++)
		{
			double		t0 = x[j] - p[j],
						t1 = x[j] - p[d + j],
						t2 = x[j] - p[2 * d + j],
						t3 = x[j] - p[3 * d + j];

			a[0] += t0 * t0;
			a[1] += t1 * t1;
			a[2] += t2 * t2;
			a[3] += t3 * t3;
		}
		for (int q = 0; q < 4; q++)
			if (a[q] < best)
			{
				best = a[q];
				bc = c0 + q;
			}
	}
	for (int c = c0; c < k; c++)
	{
		double		dd = sqdist(x, C + (int64_t) c * d, d);

		if (dd < best)
		{
			best = dd;
			bc = c;
		}
	}
	*best_out = best;
	return bc;
}

/* ---- threads: the references of big cases use every core ------------------- */

int
ncpu(void)
{
	long		n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > 64 ? 64 : (int) n;
}

void *
range_main(void *p)
{
	range_task *t = (range_task *) p;

	t->fn(t->arg, t->lo, t->hi);
	return NULL;
}

/* fn over [0, n) cut into one range a core (one range when work is small) */
void
parallel_range(range_fn fn, void *arg, int64_t n, double work)
{
	pthread_t	th[64];
	range_task	t[64];
	bool		started[64];
	int			T = work < 1e7 ? 1 : ncpu();

	if (T > n)
		T = (int) n;
	if (T <= 1)
	{
		fn(arg, 0, n);
		return;
	}
	for (int i = 0; i < T; i++)
	{
		t[i] = (range_task) {fn, arg, n * i / T, n * (i + 1) / T};
		started[i] = pthread_create(&th[i], NULL, range_main, &t[i]) == 0;
		if (!started[i])
			range_main(&t[i]);
	}
	for (int i = 0; i < T; i++)
		if (started[i])
			pthread_join(th[i], NULL);
}

void
nearest_range(void *arg, int64_t lo, int64_t hi)
{
	nearest_job *j = (nearest_job *) arg;
	int			d = j->D->d;

	for (int64_t i = lo; i < hi; i++)
	{
		double		b;

		j->lab[i] = nearest(j->D->X + i * d, j->C, j->k, d, &b);
		if (j->best)
			j->best[i] = b;
	}
}

/* every row's nearest centroid (and its squared distance), on every core */
void
nearest_all(const dataset *D, const double *C, int k, int32_t *lab, double *best)
{
	nearest_job j = {D, C, k, lab, best};

	parallel_range(nearest_range, &j, D->n, (double) D->n * k * D->d);
}

/*
 * Naive Lloyd, as compute.c documents it: no row has a label at first; an
 * iteration labels every row by the current centroids, counts the changed
 * labels, and moves each centroid to the mean of its rows; it converged when
 * at most tol * n labels changed.  One more labelling with the final
 * centroids gives labels, sizes and inertia.  Returns false (and stops) if a
 * cluster goes empty: the library re-seeds those, this does not.
 */
bool
ref_lloyd(const dataset *D, int k, const double *init, int max_iter, double tol,
		  km_out *o)
{
	int64_t		n = D->n;
	int			d = D->d;
	double	   *sums = (double *) xmalloc(sizeof(double) * k * d);
	int64_t    *cnt = (int64_t *) xmalloc(sizeof(int64_t) * k);
	int32_t    *newlab = (int32_t *) xmalloc(sizeof(int32_t) * n);
	double	   *best = (double *) xmalloc(sizeof(double) * n);
	bool		ok = true;

	memcpy(o->C, init, sizeof(double) * k * d);
	for (int64_t i = 0; i < n; i++)
		o->labels[i] = -1;
	o->iters = 0;
	o->conv = false;
	while (o->iters < max_iter)
	{
		int64_t		changed = 0;

		nearest_all(D, o->C, k, newlab, NULL);
		for (int64_t i = 0; i < n; i++)
		{
			changed += o->labels[i] != newlab[i];
			o->labels[i] = newlab[i];
		}
		memset(sums, 0, sizeof(double) * k * d);
		memset(cnt, 0, sizeof(int64_t) * k);
		for (int64_t i = 0; i < n; i++)
		{
			cnt[o->labels[i]]++;
			for (int j = 0; j < d; j++)
				sums[(int64_t) o->labels[i] * d + j] += D->X[i * d + j];
		}
		for (int c = 0; c < k; c++)
		{
			if (cnt[c] == 0)
				ok = false;
			else
				for (int j = 0; j < d; j++)
					o->C[(int64_t) c * d + j] = sums[(int64_t) c * d + j] / (double) cnt[c];
		}
		o->iters++;
		if (!ok)
			break;
		if ((double) changed <= tol * (double) n)
		{
			o->conv = true;
			break;
		}
	}
	o->inertia = 0.0;
	memset(o->sizes, 0, sizeof(int64_t) * k);
	nearest_all(D, o->C, k, o->labels, best);
	for (int64_t i = 0; i < n; i++)
	{
		o->sizes[o->labels[i]]++;
		o->inertia += best[i];
	}
	o->st = PGGPU_OK;
	free(sums);
	free(cnt);
	free(newlab);
	free(best);
	return ok;
}

/* ---- comparisons ------------------------------------------------------------ */

/* |a - b| <= tol * max(|a|, |b|); equal infinities pass, NaN never does */
bool
rel_close(double a, double b, double tol)
{
	if (a == b)
		return true;
	if (!isfinite(a) || !isfinite(b))
		return false;
	return fabs(a - b) <= tol * fmax(fabs(a), fabs(b));
}

void
cmp_labels(const char *what, const int32_t *a, const int32_t *b, int64_t n)
{
	int64_t		ndiff = 0,
				first = -1;

	for (int64_t i = 0; i < n; i++)
		if (a[i] != b[i])
		{
			if (ndiff++ == 0)
				first = i;
		}
	CHECK(ndiff == 0, "%s: %lld of %lld labels differ (first: row %lld, %d vs %d)",
		  what, (long long) ndiff, (long long) n, (long long) first,
		  first >= 0 ? a[first] : 0, first >= 0 ? b[first] : 0);
}

/*
 * Centroids agree within tol relative to each centroid's largest component:
 * a component near 0 is as accurate as the mean's large components allow.
 */
void
cmp_centroids(const char *what, const double *a, const double *b, int k, int d,
			  double tol)
{
	int64_t		nbad = 0,
				first = -1;

	for (int c = 0; c < k; c++)
	{
		double		scale = 0;

		for (int j = 0; j < d; j++)
			scale = fmax(scale, fmax(fabs(a[(int64_t) c * d + j]), fabs(b[(int64_t) c * d + j])));
		for (int j = 0; j < d; j++)
		{
			int64_t		e = (int64_t) c * d + j;

			if (!(a[e] == b[e] || fabs(a[e] - b[e]) <= tol * scale))
			{
				if (nbad++ == 0)
					first = e;
			}
		}
	}
	CHECK(nbad == 0, "%s: %lld centroid components differ beyond %g (first: centroid %lld column %lld, %.17g vs %.17g)",
		  what, (long long) nbad, tol, (long long) (first >= 0 ? first / d : 0),
		  (long long) (first >= 0 ? first % d : 0),
		  first >= 0 ? a[first] : 0.0, first >= 0 ? b[first] : 0.0);
}

void
cmp_sizes(const char *what, const int64_t *a, const int64_t *b, int k)
{
	int			first = -1;

	for (int c = 0; c < k && first < 0; c++)
		if (a[c] != b[c])
			first = c;
	CHECK(first < 0, "%s: sizes differ (first: cluster %d, %lld vs %lld)", what, first,
		  (long long) (first >= 0 ? a[first] : 0), (long long) (first >= 0 ? b[first] : 0));
}

/* two k-means results on the same data: everything must agree */
void
cmp_km(const char *what, const km_out *a, const km_out *b, int64_t n, int k, int d,
	   double tol)
{
	cmp_labels(what, a->labels, b->labels, n);
	cmp_sizes(what, a->sizes, b->sizes, k);
	cmp_centroids(what, a->C, b->C, k, d, tol);
	CHECK(a->iters == b->iters, "%s: iterations %d vs %d", what, a->iters, b->iters);
	CHECK(a->conv == b->conv, "%s: converged %d vs %d", what, a->conv, b->conv);
	CHECK(rel_close(a->inertia, b->inertia, tol), "%s: inertia %.17g vs %.17g",
		  what, a->inertia, b->inertia);
}

/* lexicographic order of two centroids */
int
lexcmp(const double *x, const double *y, int d)
{
	for (int j = 0; j < d; j++)
	{
		if (x[j] < y[j])
			return -1;
		if (x[j] > y[j])
			return 1;
	}
	return 0;
}

/*
 * What every k-means result must satisfy, whatever the backend: finite
 * centroids inside the data's range; labels in range and counted by sizes (sizes >= 0, sum n);
 * canonical numbering unless the centroids were given.  With sample > 0,
 * also (on sample rows spread over the data) every label is a nearest
 * centroid, the lowest index among equals when the numbering is the
 * library's own (given centroids), and the inertia is the sum of the rows'
 * squared distances to their centroids.  sample = 0 skips those (data whose
 * squared distances overflow unscaled).
 */
void
check_sane(const char *what, const dataset *D, int k, pggpu_init init, const km_out *o,
		   int64_t sample)
{
	int64_t		n = D->n;
	int			d = D->d;
	int64_t    *cnt = (int64_t *) calloc(k, sizeof(int64_t));
	int64_t		nonfinite = 0,
				badlab = 0,
				badsize = 0,
				total = 0;

	for (int64_t e = 0; e < (int64_t) k * d; e++)
		nonfinite += !isfinite(o->C[e]);
	CHECK(nonfinite == 0, "%s: %lld centroid components are not finite", what, (long long) nonfinite);
	for (int64_t i = 0; i < n; i++)
	{
		if (o->labels[i] < 0 || o->labels[i] >= k)
			badlab++;
		else
			cnt[o->labels[i]]++;
	}
	CHECK(badlab == 0, "%s: %lld labels out of 0..%d", what, (long long) badlab, k - 1);
	for (int c = 0; c < k; c++)
	{
		badsize += o->sizes[c] < 0 || o->sizes[c] != cnt[c];
		total += o->sizes[c];
	}
	CHECK(badsize == 0 && total == n, "%s: sizes do not count the labels (%lld bad, sum %lld, n %lld)",
		  what, (long long) badsize, (long long) total, (long long) n);
	CHECK(!isnan(o->inertia) && o->inertia >= 0, "%s: inertia %g", what, o->inertia);

	/*
	 * After an iteration every centroid is the mean of its rows or, if it
	 * went empty, a row put there by the repair: inside the data's bounding
	 * box (up to the rounding of a mean).  A given centroid left far away
	 * means the repair did not happen.
	 */
	{
		int64_t		outside = 0,
					first = -1;

		for (int j = 0; j < d; j++)
		{
			double		lo = INFINITY,
						hi = -INFINITY,
						slack;

			for (int64_t i = 0; i < n; i++)
			{
				lo = fmin(lo, D->X[i * d + j]);
				hi = fmax(hi, D->X[i * d + j]);
			}
			slack = 1e-12 * fmax(fabs(lo), fabs(hi));
			for (int c = 0; c < k; c++)
			{
				double		v = o->C[(int64_t) c * d + j];

				if (!(v >= lo - slack && v <= hi + slack))
				{
					if (outside++ == 0)
						first = (int64_t) c * d + j;
				}
			}
		}
		CHECK(outside == 0, "%s: %lld centroid components outside the data's range (first: centroid %lld column %lld = %g)",
			  what, (long long) outside, (long long) (first >= 0 ? first / d : 0),
			  (long long) (first >= 0 ? first % d : 0), first >= 0 ? o->C[first] : 0.0);
	}
	if (init != PGGPU_INIT_GIVEN)
	{
		int			bad = -1;

		for (int c = 1; c < k && bad < 0; c++)
		{
			int			s = lexcmp(o->C + (int64_t) (c - 1) * d, o->C + (int64_t) c * d, d);

			if (s > 0 || (s == 0 && o->sizes[c - 1] < o->sizes[c]))
				bad = c;
		}
		CHECK(bad < 0, "%s: clusters %d and %d are not in canonical order", what, bad - 1, bad);
	}
	if (sample > 0)
	{
		int64_t		step = sample >= n ? 1 : n / sample;
		int64_t		nbad = 0,
					first = -1;
		double		inertia = 0.0;

		for (int64_t i = 0; i < n; i += step)
		{
			double		best;
			int			c = nearest(D->X + i * d, o->C, k, d, &best);
			int			l = o->labels[i];

			if (l < 0 || l >= k ||
				sqdist(D->X + i * d, o->C + (int64_t) l * d, d) != best ||
				(init == PGGPU_INIT_GIVEN && l != c))
			{
				if (nbad++ == 0)
					first = i;
			}
		}
		CHECK(nbad == 0, "%s: %lld sampled rows are not labelled with their nearest centroid (first: row %lld)",
			  what, (long long) nbad, (long long) first);
		if (badlab == 0)
		{
			for (int64_t i = 0; i < n; i++)
				inertia += sqdist(D->X + i * d, o->C + (int64_t) o->labels[i] * d, d);
			CHECK(rel_close(inertia, o->inertia, 1e-9), "%s: inertia %.17g, but the rows' squared distances sum to %.17g",
				  what, o->inertia, inertia);
		}
	}
	free(cnt);
}

/*
 * Well-separated blobs, one cluster per blob: the clusters must be the
 * blobs.  With given centroids (one row per blob, in blob order) the labels
 * are the blob numbers, the centroids the blobs' means and the inertia the
 * sum of squared distances to them; and Lloyd converged.
 */
void
check_blobs(const char *what, const dataset *D, int k, pggpu_init init, const km_out *o)
{
	int64_t		n = D->n;
	int			d = D->d;
	int32_t    *lab_of = (int32_t *) xmalloc(sizeof(int32_t) * k);
	int32_t    *grp_of = (int32_t *) xmalloc(sizeof(int32_t) * k);
	int64_t		bad = 0;

	for (int c = 0; c < k; c++)
		lab_of[c] = grp_of[c] = -1;
	for (int64_t i = 0; i < n; i++)
	{
		int			g = D->group[i],
					l = o->labels[i];

		if (l < 0 || l >= k)
			bad++;
		else if (lab_of[g] < 0 && grp_of[l] < 0)
			lab_of[g] = l, grp_of[l] = g;
		else if (lab_of[g] != l)
			bad++;
	}
	CHECK(bad == 0, "%s: %lld rows are not in one cluster with the rest of their blob",
		  what, (long long) bad);
	if (init == PGGPU_INIT_GIVEN && bad == 0)
	{
		double	   *mean = (double *) calloc((size_t) k * d, sizeof(double));
		int64_t    *cnt = (int64_t *) calloc(k, sizeof(int64_t));
		double		inertia = 0.0;
		int			moved = -1;

		for (int g = 0; g < k && moved < 0; g++)
			if (lab_of[g] != g)
				moved = g;
		CHECK(moved < 0, "%s: blob %d was labelled %d", what, moved, moved >= 0 ? lab_of[moved] : 0);
		for (int64_t i = 0; i < n; i++)
		{
			cnt[D->group[i]]++;
			for (int j = 0; j < d; j++)
				mean[(int64_t) D->group[i] * d + j] += D->X[i * d + j];
		}
		for (int g = 0; g < k; g++)
			for (int j = 0; j < d; j++)
				mean[(int64_t) g * d + j] /= (double) cnt[g];
		for (int64_t i = 0; i < n; i++)
			inertia += sqdist(D->X + i * d, mean + (int64_t) D->group[i] * d, d);
		cmp_centroids(what, mean, o->C, k, d, 1e-9);
		CHECK(rel_close(inertia, o->inertia, 1e-9), "%s: inertia %.17g, blobs' %.17g",
			  what, o->inertia, inertia);
		CHECK(o->conv, "%s: did not converge in %d iterations", what, o->iters);
		free(mean);
		free(cnt);
	}
	free(lab_of);
	free(grp_of);
}

/* rows whose nearest centroid check_sane can afford (about 3e8 distance terms) */
int64_t
affordable_rows(int64_t n, int k, int d)
{
	double		rows = 3e8 / ((double) k * d);

	if (rows >= n)
		return n;
	return rows < 1000 ? 1000 : (int64_t) rows;
}

/* k-means on a loaded set into o (status in o->st) */
void
fit_set(pggpu_data *ds, const pggpu_kmeans_params *p, km_out *o, pggpu_error *err)
{
	pggpu_kmeans_result r = {0};

	r.centroids = o->C;
	r.sizes = o->sizes;
	r.labels = o->labels;
	o->st = pggpu_kmeans(ds, p, &r, err);
	o->inertia = r.inertia;
	o->iters = r.iterations;
	o->conv = r.converged;
}

/*
 * D loaded as dtype on be: by its staging batches, by columns (FLOAT64:
 * load()) or by rows (pggpu_data_push_by_rows), or by
 * pggpu_data_push_rows
 */
pggpu_data *
load_typed(pggpu_backend be, const dataset *D, pggpu_dtype dtype, load_how how)
{
	pggpu_error err = {0};
	pggpu_data *ds = NULL;
	int64_t		B;

	const char *name = dtype == PGGPU_FLOAT16 ? "float16" : dtype == PGGPU_FLOAT32 ? "float32" : "float64";

	if (dtype == PGGPU_FLOAT64 && how == LOAD_COLUMNS)
		return load(be, D, D->n);
	if (pggpu_data_open(&ds, be, -1, D->d, D->n, &err) != PGGPU_OK ||
		pggpu_data_set_dtype(ds, dtype, &err) != PGGPU_OK)
	{
		CHECK(false, "open a %s set on %s: %s", name, be_name(be), err.msg);
		pggpu_data_close(ds);
		return NULL;
	}
	CHECK(pggpu_data_dtype(ds) == dtype && (pggpu_data_batch(ds) != NULL) == (dtype == PGGPU_FLOAT64) &&
		  (pggpu_data_batch_f32(ds) != NULL) == (dtype == PGGPU_FLOAT32) &&
		  (pggpu_data_batch_f16(ds) != NULL) == (dtype == PGGPU_FLOAT16),
		  "a %s set stages its own type only", name);
	if (how == LOAD_PUSH_ROWS)
	{
		if (pggpu_data_push_rows(ds, D->X, NULL, NULL, D->n, &err) != PGGPU_OK)
		{
			CHECK(false, "push_rows into a %s set: %s", name, err.msg);
			pggpu_data_close(ds);
			return NULL;
		}
		return ds;
	}
	B = pggpu_data_batch_rows(ds);
	for (int64_t r0 = 0; r0 < D->n; r0 += B)
	{
		int64_t		m = D->n - r0 < B ? D->n - r0 : B;
		double	   *buf64 = pggpu_data_batch(ds);
		float	   *buf = pggpu_data_batch_f32(ds);
		uint16_t   *buf16 = pggpu_data_batch_f16(ds);

		for (int j = 0; j < D->d; j++)
			for (int64_t r = 0; r < m; r++)
			{
				int64_t		at = how == LOAD_BY_ROWS ? r * D->d + j : j * B + r;
				double		v = D->X[(r0 + r) * D->d + j];

				if (buf16)
					buf16[at] = pggpu_half_from_double(v);
				else if (buf)
					buf[at] = (float) v;
				else
					buf64[at] = v;
			}
		if ((how == LOAD_BY_ROWS ? pggpu_data_push_by_rows(ds, m, &err) : pggpu_data_push(ds, m, &err)) != PGGPU_OK)
		{
			CHECK(false, "push into a %s set: %s", name, err.msg);
			pggpu_data_close(ds);
			return NULL;
		}
	}
	return ds;
}
