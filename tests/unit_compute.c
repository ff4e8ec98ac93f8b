/*
 * unit_compute.c - unit tests of pg_gpu's compute layer (cuda/), without
 * PostgreSQL.
 *
 *   tests/unit_compute          the CI-sized grid (CPU; the GPU too if any)
 *   tests/unit_compute --full   adds a heavier grid and the kernel grid (every
 *                               GPU routine over the GPU suite's shapes), for
 *                               a GPU machine: a few minutes on 16 cores
 *   tests/unit_compute --small --only=kernel-grid,...
 *                               the kernel grid up to N = 1000, for
 *                               compute-sanitizer (tests/gpu-check.sh)
 *   (--verbose prints a line for every k-means run and matrix product)
 *
 * What is checked:
 *   - the CPU backend against a naive Lloyd written here from the documented
 *     rules (same arithmetic, so labels and iterations must agree exactly);
 *   - loading through the staging batches, with good, missing and far too
 *     small row-count hints;
 *   - the GPU backend against the CPU backend: same seeds, memberships and
 *     iterations, centroids and inertia up to summation order;
 *   - the k-means++ draw: outcome frequencies over 2000 seeds against the
 *     law enumerated here, and the GPU seed for seed as the CPU;
 *   - a grid of shapes (N, d, k), k = N, duplicate rows, clusters that go
 *     empty, values near 1e200 and 1e-200;
 *   - the kernel grid: N in {1, k, 31, 32, 33, 1000, 10^6} x d in {1, 2, 3,
 *     8, 33, 128} x k in {1, 2, 7, 256, 1024}, float64 and float32 data,
 *     and edge cases, GPU against the CPU reference (see test_kernel_grid);
 *   - error paths and the interrupt callback;
 *   - matrix products C = A B on both backends against a naive product in
 *     long double (float64, float32, TF32), over edge and random shapes,
 *     mixed magnitudes, NaN and infinity, blocks forced by little GPU
 *     memory, reused workspaces and their host buffers, errors and
 *     interrupts.
 *
 * One line per failed check, then "N passed, M failed" (N and M count
 * individual checks); exit status 0 iff M = 0.  Built, like the library,
 * with -ffp-contract=off, so the naive distances here round exactly as the
 * backends' do: a squared distance is summed over columns 0..d-1 from 0.0,
 * each (x - c) * (x - c) rounded on its own.
 */
#include "pg_gpu_compute.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- bookkeeping ---------------------------------------------------------- */

static int	n_passed;
static int	n_failed;
static char case_name[200] = "";
static bool full_grid;			/* --full */
static bool verbose;			/* --verbose: a line per k-means run */
static bool have_gpu;
static char no_gpu_why[600];
static int	gpu_skipped;		/* GPU cases not run for want of a GPU */
static __thread bool in_worker; /* a kernel-grid worker thread: no CHECK, no output */

static void
set_case(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(case_name, sizeof(case_name), fmt, ap);
	va_end(ap);
}

/* counts one check; prints a line with the details when it failed */
static bool
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

#define CHECK(ok, ...) check_at((ok), __LINE__, __VA_ARGS__)

/* the tests' own allocations: failing them is not the library's fault */
static void *
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

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *
be_name(pggpu_backend be)
{
	return be == PGGPU_BACKEND_GPU ? "gpu" : "cpu";
}

static const char *
init_name(pggpu_init init)
{
	return init == PGGPU_INIT_GIVEN ? "given" :
		init == PGGPU_INIT_RANDOM ? "random" : "k-means++";
}

/* ---- random numbers (independent of the library's hash) ------------------ */

typedef struct rng
{
	uint64_t	s;
	bool		have_spare;
	double		spare;
} rng;

static rng
rng_make(uint64_t seed)
{
	rng			r = {seed * 2 + 0x1234567ULL, false, 0};

	return r;
}

/* xorshift64* */
static uint64_t
rng_u64(rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 0x2545F4914F6CDD1DULL;
}

/* uniform in [0, 1) */
static double
rng_unif(rng *r)
{
	return (double) (rng_u64(r) >> 11) * 0x1p-53;
}

/* standard normal (Box-Muller, both halves used) */
static double
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

typedef struct dataset
{
	int64_t		n;
	int			d;
	double	   *X;				/* n x d, row-major */
	int32_t    *group;			/* generating blob/point of each row, or NULL */
	int			ngroups;
} dataset;

static void
data_free(dataset *D)
{
	free(D->X);
	free(D->group);
	memset(D, 0, sizeof(*D));
}

static void
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
static void
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

static void
gen_uniform(dataset *D, int64_t n, int d, double lo, double hi, uint64_t seed)
{
	rng			r = rng_make(seed);

	data_alloc(D, n, d, false);
	for (int64_t i = 0; i < n * d; i++)
		D->X[i] = lo + (hi - lo) * rng_unif(&r);
}

/* every row identical: value * (1, 2, ..., d) */
static void
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
static void
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
static pggpu_data *
load_quiet(pggpu_backend be, const dataset *D, int64_t hint, char *why, size_t whylen)
{
	pggpu_error err = {0};
	pggpu_data *ds = NULL;
	pggpu_status st;
	int64_t		B;

	why[0] = 0;
	st = pggpu_data_open(&ds, be, 0, D->d, hint, &err);
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
static pggpu_data *
load(pggpu_backend be, const dataset *D, int64_t hint)
{
	char		why[700];
	pggpu_data *ds = load_quiet(be, D, hint, why, sizeof(why));

	CHECK(ds != NULL, "%s", why);
	return ds;
}

/* ---- k-means runs and the naive reference ---------------------------------- */

typedef struct km_out
{
	pggpu_status st;
	double	   *C;				/* k x d */
	int64_t    *sizes;
	int32_t    *labels;
	double		inertia;
	int			iters;
	bool		conv;
} km_out;

static void
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

static void
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
static bool
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
static bool
km_run(pggpu_backend be, const dataset *D, int64_t hint,
	   const pggpu_kmeans_params *p, km_out *o)
{
	char		why[800];

	return CHECK(km_run_quiet(be, D, hint, p, o, why, sizeof(why)), "%s", why);
}

static double
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
static int
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

static int
ncpu(void)
{
	long		n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > 64 ? 64 : (int) n;
}

typedef void (*range_fn) (void *arg, int64_t lo, int64_t hi);

typedef struct range_task
{
	range_fn	fn;
	void	   *arg;
	int64_t		lo,
				hi;
} range_task;

static void *
range_main(void *p)
{
	range_task *t = (range_task *) p;

	t->fn(t->arg, t->lo, t->hi);
	return NULL;
}

/* fn over [0, n) cut into one range a core (one range when work is small) */
static void
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

typedef struct nearest_job
{
	const dataset *D;
	const double *C;
	int			k;
	int32_t    *lab;
	double	   *best;			/* or NULL */
} nearest_job;

static void
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
static void
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
static bool
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
static bool
rel_close(double a, double b, double tol)
{
	if (a == b)
		return true;
	if (!isfinite(a) || !isfinite(b))
		return false;
	return fabs(a - b) <= tol * fmax(fabs(a), fabs(b));
}

static void
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
static void
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

static void
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
static void
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
static int
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
static void
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
static void
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
static int64_t
affordable_rows(int64_t n, int k, int d)
{
	double		rows = 3e8 / ((double) k * d);

	if (rows >= n)
		return n;
	return rows < 1000 ? 1000 : (int64_t) rows;
}

/* ---- the shape grid ----------------------------------------------------------- */

typedef enum data_kind
{
	DATA_BLOBS,					/* param blobs (0: k), sep apart */
	DATA_UNIFORM,				/* uniform in [-10, 10) */
	DATA_SAME,					/* all rows identical: value * (1..d) */
	DATA_FEW,					/* param distinct integer points */
	DATA_FAR					/* blobs + param given centroids far from all rows */
} data_kind;

#define I_GIVEN 1
#define I_PP    2
#define I_RAND  4
#define I_ALL   7

typedef enum grid_mode
{
	MODE_CI,					/* always */
	MODE_FULL_GPU				/* --full: GPU only (too slow for the CPU) */
} grid_mode;

typedef struct grid_case
{
	const char *name;
	int64_t		n;
	int			d;
	int			k;
	data_kind	kind;
	int			param;
	double		value;			/* blobs: sep (0: 20); same: the value (0: 1.5) */
	unsigned	inits;
	int			max_iter;
	int64_t		hint;			/* expected_rows; -1: exactly n */
	bool		no_cmp;			/* backends may legitimately differ: no GPU/CPU compare */
	grid_mode	mode;
} grid_case;

/*
 * The CI grid runs in a few seconds on two cores: large N only with small
 * k * d, k = 1024 with modest N.  Shapes straddle the GPU kernel's tile
 * sizes (k: 4, 8, 16, 32 centroids a tile; d: 32 columns a tile) and its
 * shared-memory limit for per-block sums (k * d * 8 bytes around 100 kB).
 * Hint 1 makes small (4096-row) batches: many tiles, and many growths of
 * the GPU allocation.
 */
static const grid_case grid[] = {
	/* tiny and k = N */
	{"one row", 1, 1, 1, DATA_UNIFORM, 0, 0, I_ALL, 10, -1},
	{"one wide row", 1, 128, 1, DATA_UNIFORM, 0, 0, I_ALL, 10, 0},
	{"k=N", 2, 1, 2, DATA_UNIFORM, 0, 0, I_ALL, 10, -1},
	{"k=N", 64, 3, 64, DATA_UNIFORM, 0, 0, I_ALL, 10, -1},
	{"k=N", 300, 33, 300, DATA_UNIFORM, 0, 0, I_ALL, 10, 1},
	{"k=1", 1000, 1, 1, DATA_BLOBS, 0, 0, I_ALL, 10, -1},
	/* large N, small k * d */
	{"blobs", 1000000, 1, 3, DATA_BLOBS, 0, 0, I_GIVEN, 50, 1},
	{"blobs", 1000000, 2, 4, DATA_BLOBS, 0, 0, I_PP, 50, 0},
	{"uniform", 200000, 5, 8, DATA_UNIFORM, 0, 0, I_GIVEN, 30, 1},
	/* wide rows, many centroids */
	{"blobs", 20000, 128, 4, DATA_BLOBS, 0, 0, I_GIVEN | I_PP, 50, 1},
	{"blobs", 20000, 8, 1024, DATA_BLOBS, 0, 0, I_GIVEN | I_PP, 20, 1},
	{"uniform", 3000, 128, 100, DATA_UNIFORM, 0, 0, I_PP, 10, -1},
	{"blobs", 5000, 33, 33, DATA_BLOBS, 0, 0, I_ALL, 50, 1},
	{"uniform", 5000, 31, 9, DATA_UNIFORM, 0, 0, I_GIVEN | I_RAND, 50, 1},
	{"uniform", 5000, 32, 16, DATA_UNIFORM, 0, 0, I_PP, 50, 0},
	{"blobs", 5000, 32, 17, DATA_BLOBS, 0, 0, I_GIVEN, 50, 1},
	{"blobs", 4096, 2, 5, DATA_BLOBS, 0, 0, I_ALL, 50, 1},
	{"uniform", 4097, 2, 32, DATA_UNIFORM, 0, 0, I_GIVEN, 200, 1},
	/* k-means++ must find every blob when they are far apart */
	{"far blobs", 20000, 5, 10, DATA_BLOBS, 0, 1000, I_PP, 50, 1},
	{"far blobs", 20000, 3, 100, DATA_BLOBS, 0, 1000, I_PP, 50, 1},
	/* duplicates */
	{"all same", 1000, 5, 3, DATA_SAME, 0, 0, I_ALL, 20, -1},
	{"all same", 1, 3, 1, DATA_SAME, 0, 0, I_ALL, 20, -1},
	{"all same k=N", 300, 2, 300, DATA_SAME, 0, 0, I_ALL, 20, 1},
	{"few distinct", 5000, 4, 20, DATA_FEW, 20, 0, I_ALL, 50, 1},
	{"few distinct", 5000, 4, 25, DATA_FEW, 20, 0, I_ALL, 50, 1},
	{"few distinct", 5000, 4, 10, DATA_FEW, 20, 0, I_ALL, 50, 1},
	{"few distinct k=N", 60, 2, 60, DATA_FEW, 7, 0, I_ALL, 50, -1},
	/*
	 * Non-dyadic duplicates: the mean of n copies of 0.1 need not be 0.1,
	 * and rounds differently per summation order, so the backends may
	 * differ; only sanity is checked.  (The library then re-seeds the empty
	 * clusters with exact rows, which win every row next iteration: it runs
	 * to max_iter without converging.)
	 */
	{"all same 0.1", 1000, 3, 4, DATA_SAME, 0, 0.1, I_ALL, 20, -1, true},
	/* clusters that go empty: given centroids far from every row */
	{"far centroid", 10000, 3, 6, DATA_FAR, 1, 0, I_GIVEN, 50, 1},
	{"far centroids", 10000, 3, 8, DATA_FAR, 3, 0, I_GIVEN, 50, 1},
	{"far centroid", 20000, 40, 20, DATA_FAR, 2, 0, I_GIVEN, 50, 1},

	/*
	 * --full, GPU only: checked against the blobs and by sampled rows, over
	 * more iterations than the kernel grid's big cases (which compare with
	 * the CPU)
	 */
	{"big blobs", 1000000, 128, 256, DATA_BLOBS, 0, 0, I_GIVEN, 20, 0, false, MODE_FULL_GPU},
	{"big blobs", 1000000, 128, 1024, DATA_BLOBS, 0, 0, I_GIVEN | I_PP, 10, 1, false, MODE_FULL_GPU},
	{"big blobs", 1000000, 32, 1024, DATA_BLOBS, 0, 0, I_GIVEN | I_RAND, 10, -1, false, MODE_FULL_GPU},
	{"big uniform", 1000000, 1, 1024, DATA_UNIFORM, 0, 0, I_PP, 20, 0, false, MODE_FULL_GPU},
	{"big far centroid", 1000000, 16, 64, DATA_FAR, 1, 0, I_GIVEN, 20, 1, false, MODE_FULL_GPU},
};

static void
make_data(const grid_case *gc, dataset *D)
{
	uint64_t	seed = (uint64_t) gc->n * 1000003u + gc->d * 1009u + gc->k * 17u + gc->kind;

	switch (gc->kind)
	{
		case DATA_BLOBS:
			gen_blobs(D, gc->n, gc->d, gc->param ? gc->param : gc->k,
					  gc->value > 0 ? gc->value : 20.0, seed);
			break;
		case DATA_FAR:
			gen_blobs(D, gc->n, gc->d, gc->k - gc->param, 20.0, seed);
			break;
		case DATA_UNIFORM:
			gen_uniform(D, gc->n, gc->d, -10.0, 10.0, seed);
			break;
		case DATA_SAME:
			gen_same(D, gc->n, gc->d, gc->value != 0 ? gc->value : 1.5);
			break;
		case DATA_FEW:
			gen_few(D, gc->n, gc->d, gc->param, seed);
			break;
	}
}

/* given centroids: the first k rows (one per blob), then the far ones */
static double *
make_init(const grid_case *gc, const dataset *D)
{
	int			d = D->d;
	int			near = gc->kind == DATA_FAR ? gc->k - gc->param : gc->k;
	double	   *C = (double *) xmalloc(sizeof(double) * gc->k * d);

	memcpy(C, D->X, sizeof(double) * near * d);
	for (int c = near; c < gc->k; c++)
		for (int j = 0; j < d; j++)
			C[(int64_t) c * d + j] = 1e6 * (c - near + 1);
	return C;
}

static void
run_case(const grid_case *gc, pggpu_init init)
{
	dataset		D;
	km_out		cpu = {0},
				gpu = {0},
				ref = {0};
	pggpu_kmeans_params p = {0};
	double	   *C0 = NULL;
	bool		cpu_ok = false;
	bool		blobs_known;
	int64_t		hint,
				sample;
	int			k = gc->k;

	set_case("%s n=%lld d=%d k=%d %s", gc->name, (long long) gc->n, gc->d, k, init_name(init));
	make_data(gc, &D);
	hint = gc->hint < 0 ? D.n : gc->hint;
	sample = affordable_rows(D.n, k, D.d);
	p.k = k;
	p.max_iter = gc->max_iter;
	p.tol = 0;
	p.init = init;
	p.seed = 20240601u + (uint64_t) k;
	if (init == PGGPU_INIT_GIVEN)
		p.init_centroids = C0 = make_init(gc, &D);
	/* clusters = blobs: given one row per blob, or k-means++ on far blobs */
	blobs_known = gc->kind == DATA_BLOBS && D.ngroups == k &&
		(init == PGGPU_INIT_GIVEN || (init == PGGPU_INIT_KMEANSPP && gc->value >= 1000));

	if (gc->mode != MODE_FULL_GPU)
	{
		km_alloc(&cpu, D.n, k, D.d);
		cpu_ok = km_run(PGGPU_BACKEND_CPU, &D, hint, &p, &cpu);
		if (cpu_ok)
		{
			check_sane("cpu", &D, k, init, &cpu, sample);
			if (blobs_known)
				check_blobs("cpu", &D, k, init, &cpu);
			if (init == PGGPU_INIT_GIVEN && gc->kind != DATA_FAR)
			{
				km_alloc(&ref, D.n, k, D.d);
				if (ref_lloyd(&D, k, C0, p.max_iter, p.tol, &ref))
					cmp_km("naive vs cpu", &ref, &cpu, D.n, k, D.d, 1e-9);
				else if (gc->kind == DATA_BLOBS || gc->kind == DATA_UNIFORM)
					CHECK(false, "test data unsuitable: a cluster went empty in the naive Lloyd");
			}
		}
	}
	if (!have_gpu)
		gpu_skipped++;
	else
	{
		km_alloc(&gpu, D.n, k, D.d);
		if (km_run(PGGPU_BACKEND_GPU, &D, hint, &p, &gpu))
		{
			check_sane("gpu", &D, k, init, &gpu, sample);
			if (blobs_known)
				check_blobs("gpu", &D, k, init, &gpu);
			if (cpu_ok && !gc->no_cmp)
				cmp_km("cpu vs gpu", &cpu, &gpu, D.n, k, D.d, 1e-9);
		}
	}
	km_free(&cpu);
	km_free(&gpu);
	km_free(&ref);
	free(C0);
	data_free(&D);
}

static void
test_grid(void)
{
	for (size_t i = 0; i < sizeof(grid) / sizeof(grid[0]); i++)
	{
		const grid_case *gc = &grid[i];

		if (gc->mode != MODE_CI && !full_grid)
			continue;
		if (gc->mode == MODE_FULL_GPU && !have_gpu)
		{
			gpu_skipped++;
			continue;
		}
		if (gc->inits & I_GIVEN)
			run_case(gc, PGGPU_INIT_GIVEN);
		if (gc->inits & I_PP)
			run_case(gc, PGGPU_INIT_KMEANSPP);
		if (gc->inits & I_RAND)
			run_case(gc, PGGPU_INIT_RANDOM);
	}
}

/* ---- the naive reference on its own terms ------------------------------------ */

/*
 * CPU backend vs the naive Lloyd beyond the grid: blobs, uniform data that
 * needs many iterations, an iteration cap that stops it early, and tol > 0;
 * the GPU against the CPU backend on each.
 */
static void
test_reference(void)
{
	static const struct
	{
		const char *name;
		int64_t		n;
		int			d,
					k;
		bool		blobs;
		int			max_iter;
		double		tol;
		bool		expect_conv;
	}			cases[] = {
		{"blobs", 1000, 2, 5, true, 100, 0, true},
		{"blobs", 20000, 3, 8, true, 100, 0, true},
		{"blobs", 100000, 1, 3, true, 100, 0, true},
		{"uniform, many iterations", 20000, 2, 7, false, 500, 0, true},
		{"uniform, capped", 5000, 4, 6, false, 3, 0, false},
		{"uniform, tol 1%", 20000, 2, 7, false, 500, 0.01, true},
		/*
		 * on the GPU the fused tensor-core pass, each step queued before
		 * the last one's result is known: the queued step must do nothing
		 * after tol stops the loop, and none may follow the cap
		 */
		{"uniform, tol 1%, fused pass", 50000, 8, 256, false, 500, 0.01, true},
		{"uniform, tol 0.5%, fused pass", 50000, 3, 64, false, 500, 0.005, true},
		{"uniform, capped, fused pass", 50000, 4, 128, false, 3, 0, false},
	};

	for (size_t t = 0; t < sizeof(cases) / sizeof(cases[0]); t++)
	{
		dataset		D;
		km_out		cpu,
					ref,
					gpu;
		pggpu_kmeans_params p = {0};
		int64_t		n = cases[t].n;
		int			d = cases[t].d,
					k = cases[t].k;

		set_case("reference: %s n=%lld d=%d k=%d", cases[t].name, (long long) n, d, k);
		if (cases[t].blobs)
			gen_blobs(&D, n, d, k, 20.0, 77 + t);
		else
			gen_uniform(&D, n, d, 0.0, 1.0, 77 + t);
		p.k = k;
		p.max_iter = cases[t].max_iter;
		p.tol = cases[t].tol;
		p.init = PGGPU_INIT_GIVEN;
		p.init_centroids = D.X;	/* the first k rows */
		km_alloc(&cpu, n, k, d);
		km_alloc(&ref, n, k, d);
		km_alloc(&gpu, n, k, d);
		if (!CHECK(ref_lloyd(&D, k, D.X, p.max_iter, p.tol, &ref),
				   "test data unsuitable: a cluster went empty in the naive Lloyd"))
			goto next;
		CHECK(ref.conv == cases[t].expect_conv, "naive Lloyd: converged %d after %d iterations",
			  ref.conv, ref.iters);
		if (km_run(PGGPU_BACKEND_CPU, &D, n, &p, &cpu))
		{
			cmp_km("naive vs cpu", &ref, &cpu, n, k, d, 1e-9);
			check_sane("cpu", &D, k, p.init, &cpu, n);
			if (cases[t].blobs)
				check_blobs("cpu", &D, k, p.init, &cpu);
		}
		if (!have_gpu)
			gpu_skipped++;
		else if (km_run(PGGPU_BACKEND_GPU, &D, n, &p, &gpu))
			cmp_km("cpu vs gpu", &cpu, &gpu, n, k, d, 1e-9);
next:
		km_free(&cpu);
		km_free(&ref);
		km_free(&gpu);
		data_free(&D);
	}
}

/* ---- loading ------------------------------------------------------------------ */

/*
 * Reads the stored rows back through pggpu_assign: with centroids that are
 * not symmetric in the columns, the labels and distances pin every value to
 * its row and column.  Checks against the naive computation.
 */
static void
verify_stored(const char *what, pggpu_data *ds, const dataset *D)
{
	const int	K = 3;
	double	   *C = (double *) xmalloc(sizeof(double) * K * D->d);
	int32_t    *lab = (int32_t *) xmalloc(sizeof(int32_t) * D->n);
	double	   *dist = (double *) xmalloc(sizeof(double) * D->n);
	pggpu_error err = {0};
	pggpu_status st;
	int64_t		nbad = 0,
				first = -1;

	for (int c = 0; c < K; c++)
		for (int j = 0; j < D->d; j++)
			C[c * D->d + j] = (c - 1) * 4.0 + 0.37 * j * (c + 1);
	st = pggpu_assign(ds, C, K, lab, dist, &err);
	if (CHECK(st == PGGPU_OK, "%s: assign failed: %d %s", what, (int) st, err.msg))
	{
		for (int64_t i = 0; i < D->n; i++)
		{
			double		best;
			int			c = nearest(D->X + i * D->d, C, K, D->d, &best);

			if (lab[i] != c || !rel_close(dist[i], sqrt(best), 1e-12))
			{
				if (nbad++ == 0)
					first = i;
			}
		}
		CHECK(nbad == 0, "%s: %lld rows read back wrong (first: row %lld)", what,
			  (long long) nbad, (long long) first);
	}
	free(C);
	free(lab);
	free(dist);
}

static void
test_loading_on(pggpu_backend be)
{
	static const int dims[] = {1, 3, 40};
	static const char *const hint_names[] = {"exact", "0", "1 (far too small)"};

	for (size_t di = 0; di < sizeof(dims) / sizeof(dims[0]); di++)
	{
		int			d = dims[di];
		int64_t		B0 = 0;
		pggpu_data *probe = NULL;
		pggpu_error err = {0};

		/* the batch size with no hint: rows around it, too */
		set_case("loading %s d=%d", be_name(be), d);
		if (!CHECK(pggpu_data_open(&probe, be, 0, d, 0, &err) == PGGPU_OK, "open: %s", err.msg))
			continue;
		B0 = pggpu_data_batch_rows(probe);
		pggpu_data_close(probe);

		for (int h = 0; h < 3; h++)
		{
			int64_t		sizes[] = {1, 1000, 4095, 4096, 4097, 3 * 4096 + 17, B0 - 1, B0, B0 + 1};

			for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
			{
				int64_t		n = sizes[si];
				int64_t		hint = h == 0 ? n : h == 1 ? 0 : 1;
				dataset		D;
				pggpu_data *ds;
				int64_t		B;

				if (n > 2000000 / d + 2)
					continue;	/* keep it quick */
				set_case("loading %s d=%d n=%lld hint %s", be_name(be), d, (long long) n, hint_names[h]);
				gen_uniform(&D, n, d, -10.0, 10.0, 1000 + n + d);
				ds = load(be, &D, hint);
				if (ds != NULL)
				{
					B = pggpu_data_batch_rows(ds);
					CHECK(B >= 1024 && (B & (B - 1)) == 0, "batch_rows = %lld", (long long) B);
					CHECK(pggpu_data_rows(ds) == n && pggpu_data_cols(ds) == d &&
						  pggpu_data_backend(ds) == be,
						  "rows %lld, cols %d, backend %d", (long long) pggpu_data_rows(ds),
						  pggpu_data_cols(ds), (int) pggpu_data_backend(ds));
					CHECK(be == PGGPU_BACKEND_CPU ? strcmp(pggpu_data_device_name(ds), "cpu") == 0
						  : pggpu_data_device_name(ds)[0] != 0 && strcmp(pggpu_data_device_name(ds), "cpu") != 0,
						  "device name \"%s\"", pggpu_data_device_name(ds));
					verify_stored("read back", ds, &D);
					pggpu_data_close(ds);
				}
				data_free(&D);
			}
		}
	}

	/* two data sets filled turn about: their staging buffers are their own */
	{
		dataset		A,
					Bd;
		pggpu_data *da = NULL,
				   *db = NULL;
		pggpu_error err = {0};
		bool		ok = true;

		set_case("loading %s two sets at once", be_name(be));
		gen_uniform(&A, 10000, 3, -5, 5, 11);
		gen_uniform(&Bd, 9000, 3, -5, 5, 12);
		if (CHECK(pggpu_data_open(&da, be, 0, 3, 1, &err) == PGGPU_OK &&
				  pggpu_data_open(&db, be, 0, 3, 1, &err) == PGGPU_OK, "open: %s", err.msg))
		{
			int64_t		bs = pggpu_data_batch_rows(da);

			for (int64_t r0 = 0; ok && (r0 < A.n || r0 < Bd.n); r0 += bs)
				for (int w = 0; w < 2 && ok; w++)
				{
					const dataset *D = w ? &Bd : &A;
					pggpu_data *ds = w ? db : da;
					int64_t		m = D->n - r0 < bs ? D->n - r0 : bs;
					double	   *buf;

					if (m <= 0)
						continue;
					buf = pggpu_data_batch(ds);
					for (int j = 0; j < 3; j++)
						for (int64_t r = 0; r < m; r++)
							buf[j * bs + r] = D->X[(r0 + r) * 3 + j];
					ok = pggpu_data_push(ds, m, &err) == PGGPU_OK;
				}
			if (CHECK(ok, "push: %s", err.msg))
			{
				verify_stored("set A", da, &A);
				verify_stored("set B", db, &Bd);
			}
		}
		pggpu_data_close(da);
		pggpu_data_close(db);
		data_free(&A);
		data_free(&Bd);
	}
}

/*
 * The hint changes the batch (= storage tile) size, never the result: on the
 * CPU bit for bit; on the GPU as far as summation order allows.
 */
static void
test_hint_independence(void)
{
	static const int64_t hints[] = {-1, 0, 1};
	dataset		D;
	km_out		out[3][2];
	pggpu_kmeans_params p = {0};
	const int64_t n = 30000;
	const int	d = 3,
				k = 4;

	gen_blobs(&D, n, d, k, 20.0, 5);
	p.k = k;
	p.max_iter = 50;
	p.init = PGGPU_INIT_KMEANSPP;
	p.seed = 99;
	for (int h = 0; h < 3; h++)
	{
		int64_t		hint = hints[h] < 0 ? n : hints[h];

		set_case("hint independence, hint %lld", (long long) hint);
		km_alloc(&out[h][0], n, k, d);
		km_alloc(&out[h][1], n, k, d);
		if (km_run(PGGPU_BACKEND_CPU, &D, hint, &p, &out[h][0]) && h > 0 &&
			out[0][0].st == PGGPU_OK)
			cmp_km("cpu, exact hint vs this hint", &out[0][0], &out[h][0], n, k, d, 0.0);
		if (!have_gpu)
			gpu_skipped++;
		else if (km_run(PGGPU_BACKEND_GPU, &D, hint, &p, &out[h][1]) &&
				 out[h][0].st == PGGPU_OK)
			cmp_km("cpu vs gpu", &out[h][0], &out[h][1], n, k, d, 1e-9);
	}
	for (int h = 0; h < 3; h++)
		km_free(&out[h][0]), km_free(&out[h][1]);
	data_free(&D);
}

static void
test_loading(void)
{
	test_loading_on(PGGPU_BACKEND_CPU);
	if (!have_gpu)
		gpu_skipped++;
	else
	{
		dataset		D;
		pggpu_data *ds;

		test_loading_on(PGGPU_BACKEND_GPU);
		/* a hint far beyond the GPU's memory: the first allocation is capped */
		set_case("loading gpu, hint 1e10 rows");
		gen_uniform(&D, 5000, 2, -1, 1, 3);
		ds = load(PGGPU_BACKEND_GPU, &D, (int64_t) 10000000000LL);
		if (ds)
		{
			verify_stored("read back", ds, &D);
			pggpu_data_close(ds);
		}
		data_free(&D);
	}
	test_hint_independence();
}

/* ---- nearest-centroid assignment ------------------------------------------- */

static void
assign_case(const char *name, const dataset *D, const double *C, int k)
{
	int64_t		n = D->n;
	int			d = D->d;
	int32_t    *lab[2],
			   *lab_nodist;
	double	   *dist[2];
	int32_t    *nlab = (int32_t *) xmalloc(sizeof(int32_t) * n);
	double	   *ndist = (double *) xmalloc(sizeof(double) * n);
	bool		ok[2] = {false, false};

	set_case("assign %s n=%lld d=%d k=%d", name, (long long) n, d, k);
	for (int64_t i = 0; i < n; i++)
	{
		double		best;

		nlab[i] = nearest(D->X + i * d, C, k, d, &best);
		ndist[i] = sqrt(best);
	}
	lab_nodist = (int32_t *) xmalloc(sizeof(int32_t) * n);
	for (int b = 0; b < 2; b++)
	{
		pggpu_backend be = b ? PGGPU_BACKEND_GPU : PGGPU_BACKEND_CPU;
		pggpu_error err = {0};
		pggpu_data *ds;
		pggpu_status st;
		int64_t		nbad = 0,
					first = -1;
		char		what[64];

		lab[b] = (int32_t *) xmalloc(sizeof(int32_t) * n);
		dist[b] = (double *) xmalloc(sizeof(double) * n);
		if (b == 1 && !have_gpu)
		{
			gpu_skipped++;
			continue;
		}
		if ((ds = load(be, D, 1)) == NULL)
			continue;
		st = pggpu_assign(ds, C, k, lab[b], dist[b], &err);
		pggpu_data_close(ds);
		if (!CHECK(st == PGGPU_OK, "%s assign failed: %d %s", be_name(be), (int) st, err.msg))
			continue;
		ok[b] = true;
		snprintf(what, sizeof(what), "naive vs %s", be_name(be));
		cmp_labels(what, nlab, lab[b], n);
		for (int64_t i = 0; i < n; i++)
			if (!rel_close(ndist[i], dist[b][i], 1e-12))
			{
				if (nbad++ == 0)
					first = i;
			}
		CHECK(nbad == 0, "%s: %lld distances differ (first: row %lld, %.17g vs %.17g)", what,
			  (long long) nbad, (long long) first, first >= 0 ? ndist[first] : 0.0,
			  first >= 0 ? dist[b][first] : 0.0);

		/* distances are optional */
		if ((ds = load(be, D, 0)) != NULL)
		{
			st = pggpu_assign(ds, C, k, lab_nodist, NULL, &err);
			pggpu_data_close(ds);
			if (CHECK(st == PGGPU_OK, "%s assign without distances failed: %s", be_name(be), err.msg))
				cmp_labels("with vs without distances", lab[b], lab_nodist, n);
		}
	}
	if (ok[0] && ok[1])
	{
		int64_t		nbad = 0;

		cmp_labels("cpu vs gpu", lab[0], lab[1], n);
		for (int64_t i = 0; i < n; i++)
			nbad += !rel_close(dist[0][i], dist[1][i], 1e-12);
		CHECK(nbad == 0, "cpu vs gpu: %lld distances differ", (long long) nbad);
	}
	for (int b = 0; b < 2; b++)
		free(lab[b]), free(dist[b]);
	free(lab_nodist);
	free(nlab);
	free(ndist);
}

static void
test_assign(void)
{
	static const struct
	{
		int64_t		n;
		int			d,
					k;
	}			shapes[] = {
		{1, 1, 1}, {1000, 1, 7}, {5000, 3, 1}, {5000, 33, 40}, {20000, 8, 1024},
		{3000, 128, 100}, {100000, 2, 5}, {70000, 31, 17},
	};

	for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++)
	{
		dataset		D,
					CD;

		gen_uniform(&D, shapes[t].n, shapes[t].d, -10, 10, 300 + t);
		gen_uniform(&CD, shapes[t].k, shapes[t].d, -10, 10, 400 + t);
		assign_case("uniform", &D, CD.X, shapes[t].k);
		data_free(&D);
		data_free(&CD);
	}

	/*
	 * Exact ties: integer rows halfway between two integer centroids, and a
	 * centroid listed twice.  The lowest index must win.
	 */
	{
		dataset		D;
		const double C1[] = {6, 0, 2, 4, 8, 4, 10};	/* 4 twice */
		double		C2[7 * 2];

		data_alloc(&D, 1000, 1, false);
		for (int64_t i = 0; i < D.n; i++)
			D.X[i] = (double) (i % 13) - 1;
		assign_case("ties", &D, C1, 7);
		data_free(&D);

		data_alloc(&D, 1000, 2, false);
		for (int64_t i = 0; i < D.n; i++)
			D.X[2 * i] = (double) (i % 13) - 1, D.X[2 * i + 1] = (double) (i % 3);
		for (int c = 0; c < 7; c++)
			C2[2 * c] = C1[c], C2[2 * c + 1] = 1;
		assign_case("ties", &D, C2, 7);
		data_free(&D);
	}
}

/* ---- values near 1e200 and 1e-200 --------------------------------------------- */

/*
 * Squares of 1e200 overflow and squares of 1e-200 underflow, so the library
 * rescales.  The same blobs at scale f and at scale 1 (the data divided by f
 * again) must give the same memberships, and centroids and distances that
 * scale by f.
 */
static void
test_scaling(void)
{
	static const double factors[] = {1e200, 1e-200, 0x1p600, 0x1p-1040};
	const int64_t n = 4000;
	const int	d = 4,
				k = 5;

	for (size_t fi = 0; fi < sizeof(factors) / sizeof(factors[0]); fi++)
	{
		double		f = factors[fi];
		dataset		X0,
					Xs,
					Xu;
		km_out		res_s[2][2],	/* [backend][given, k-means++] */
					res_u[2][2];

		gen_blobs(&X0, n, d, k, 20.0, 900 + fi);
		data_alloc(&Xs, n, d, true);
		data_alloc(&Xu, n, d, true);
		Xs.ngroups = Xu.ngroups = k;
		for (int64_t i = 0; i < n * d; i++)
		{
			Xs.X[i] = X0.X[i] * f;
			Xu.X[i] = Xs.X[i] / f;
		}
		memcpy(Xs.group, X0.group, sizeof(int32_t) * n);
		memcpy(Xu.group, X0.group, sizeof(int32_t) * n);

		for (int b = 0; b < 2; b++)
			for (int ii = 0; ii < 2; ii++)
			{
				pggpu_backend be = b ? PGGPU_BACKEND_GPU : PGGPU_BACKEND_CPU;
				pggpu_init	init = ii ? PGGPU_INIT_KMEANSPP : PGGPU_INIT_GIVEN;
				pggpu_kmeans_params p = {0};
				km_out	   *s = &res_s[b][ii],
						   *u = &res_u[b][ii];
				double	   *Cs = (double *) xmalloc(sizeof(double) * k * d);
				long double expect;

				km_alloc(s, n, k, d);
				km_alloc(u, n, k, d);
				set_case("scale %g %s %s", f, be_name(be), init_name(init));
				if (b == 1 && !have_gpu)
				{
					gpu_skipped++;
					free(Cs);
					continue;
				}
				p.k = k;
				p.max_iter = 50;
				p.init = init;
				p.seed = 4242;
				p.init_centroids = Xs.X;
				if (!km_run(be, &Xs, n, &p, s))
				{
					free(Cs);
					continue;
				}
				p.init_centroids = Xu.X;
				if (!km_run(be, &Xu, n, &p, u))
				{
					free(Cs);
					continue;
				}
				check_sane("scaled", &Xs, k, init, s, 0);
				check_sane("unscaled", &Xu, k, init, u, n);
				check_blobs("unscaled", &Xu, k, init, u);
				cmp_labels("scaled vs unscaled", s->labels, u->labels, n);
				cmp_sizes("scaled vs unscaled", s->sizes, u->sizes, k);
				CHECK(s->iters == u->iters && s->conv == u->conv,
					  "iterations %d vs %d, converged %d vs %d", s->iters, u->iters, s->conv, u->conv);
				for (int64_t e = 0; e < (int64_t) k * d; e++)
					Cs[e] = s->C[e] / f;
				cmp_centroids("scaled centroids / f vs unscaled", Cs, u->C, k, d, 1e-9);

				/*
				 * Inertia scales by f^2, which may leave the doubles: long
				 * double (x87, 15-bit exponent) holds it, then rounds as a
				 * double would.
				 */
				expect = (long double) u->inertia * f * f;
				if ((double) expect == INFINITY)
					CHECK(s->inertia == INFINITY, "inertia %g, expected to overflow", s->inertia);
				else if ((double) expect < DBL_MIN)
					CHECK(s->inertia >= 0 && s->inertia < DBL_MIN * 4,
						  "inertia %g, expected %Lg", s->inertia, expect);
				else
					CHECK(rel_close(s->inertia, (double) expect, 1e-9), "inertia %.17g, expected %.17Lg",
						  s->inertia, expect);

				/* assignment: labels and distances, scaled the same way */
				{
					int32_t    *ls = (int32_t *) xmalloc(sizeof(int32_t) * n),
							   *lu = (int32_t *) xmalloc(sizeof(int32_t) * n);
					double	   *ds_ = (double *) xmalloc(sizeof(double) * n),
							   *du = (double *) xmalloc(sizeof(double) * n);
					pggpu_error err = {0};
					pggpu_data *a = load(be, &Xs, n),
							   *c = load(be, &Xu, n);
					int64_t		nbad = 0;

					if (a && c &&
						CHECK(pggpu_assign(a, s->C, k, ls, ds_, &err) == PGGPU_OK &&
							  pggpu_assign(c, u->C, k, lu, du, &err) == PGGPU_OK,
							  "assign failed: %s", err.msg))
					{
						cmp_labels("assign scaled vs unscaled", ls, lu, n);
						cmp_labels("assign vs k-means labels", ls, s->labels, n);
						for (int64_t i = 0; i < n; i++)
							nbad += !isfinite(ds_[i]) || !rel_close(ds_[i] / f, du[i], 1e-9);
						CHECK(nbad == 0, "assign: %lld distances are not finite or do not scale",
							  (long long) nbad);
					}
					pggpu_data_close(a);
					pggpu_data_close(c);
					free(ls), free(lu), free(ds_), free(du);
				}
				free(Cs);
			}
		if (have_gpu)
			for (int ii = 0; ii < 2; ii++)
			{
				set_case("scale %g cpu vs gpu %s", f, ii ? "k-means++" : "given");
				if (res_s[0][ii].st == PGGPU_OK && res_s[1][ii].st == PGGPU_OK)
					cmp_km("scaled", &res_s[0][ii], &res_s[1][ii], n, k, d, 1e-9);
			}
		for (int b = 0; b < 2; b++)
			for (int ii = 0; ii < 2; ii++)
				km_free(&res_s[b][ii]), km_free(&res_u[b][ii]);
		data_free(&X0);
		data_free(&Xs);
		data_free(&Xu);
	}
}

/*
 * Mixed magnitudes: one scale must keep both ends.  Blobs of ordinary size
 * beside one row near 1e200 (or, scaled down, near 1e-150 beside 1e120)
 * cluster as exact arithmetic does: the outlier alone, the rest exactly as
 * without it; assignment against a far centroid likewise.  Magnitudes that
 * span more than double precision can square at once are an error
 * (PGGPU_ERR_RANGE), on both backends.
 */
static void expect_error(pggpu_status st, const pggpu_error *err, pggpu_status want,
						 const char *what);

static void
test_mixed_magnitudes(void)
{
	static const double units[] = {1.0, 1e-150};
	const int64_t n = 2000;
	const int	d = 2,
				k = 2;

	for (size_t ui = 0; ui < sizeof(units) / sizeof(units[0]); ui++)
		for (int b = 0; b < 2; b++)
		{
			pggpu_backend be = b ? PGGPU_BACKEND_GPU : PGGPU_BACKEND_CPU;
			double		u = units[ui];
			double		far = u == 1.0 ? 1e200 : 1e120;
			dataset		D,
						Dx;
			km_out		o,
						ox;
			pggpu_kmeans_params p = {0};
			double		C3[3 * 2];

			set_case("mixed magnitudes %g beside %g %s", u, far, be_name(be));
			if (b == 1 && !have_gpu)
			{
				gpu_skipped++;
				continue;
			}
			gen_blobs(&D, n, d, k, 20.0, 77);
			for (int64_t i = 0; i < n * d; i++)
				D.X[i] *= u;
			data_alloc(&Dx, n + 1, d, false);
			memcpy(Dx.X, D.X, sizeof(double) * n * d);
			Dx.X[n * d] = far;
			Dx.X[n * d + 1] = 0;
			/* the blobs' first rows, then the outlier */
			memcpy(C3, D.X, sizeof(double) * 2 * d);
			C3[4] = far;
			C3[5] = 0;
			p.max_iter = 50;
			p.init = PGGPU_INIT_GIVEN;
			p.k = k;
			p.init_centroids = C3;
			km_alloc(&o, n, k, d);
			km_alloc(&ox, n + 1, k + 1, d);
			if (km_run(be, &D, 0, &p, &o))
			{
				p.k = k + 1;
				if (km_run(be, &Dx, 0, &p, &ox))
				{
					cmp_labels("the blobs' labels with the outlier vs without", ox.labels, o.labels, n);
					CHECK(ox.labels[n] == 2 && ox.sizes[2] == 1 && ox.C[4] == far,
						  "outlier: label %d, size %lld, centroid %g", ox.labels[n],
						  (long long) ox.sizes[2], ox.C[4]);
					cmp_sizes("sizes with the outlier vs without", ox.sizes, o.sizes, k);
					cmp_centroids("centroids with the outlier vs without", ox.C, o.C, k, d, 1e-12);
					CHECK(rel_close(ox.inertia, o.inertia, 1e-12), "inertia %.17g vs %.17g",
						  ox.inertia, o.inertia);
				}
			}

			/* assignment of the blobs against their centroids and a far one */
			{
				pggpu_data *a = load(be, &D, 0),
						   *c = load(be, &D, 0);
				int32_t    *la = (int32_t *) xmalloc(sizeof(int32_t) * n),
						   *lc = (int32_t *) xmalloc(sizeof(int32_t) * n);
				double	   *da = (double *) xmalloc(sizeof(double) * n),
						   *dc = (double *) xmalloc(sizeof(double) * n);
				double		C3b[3 * 2];
				pggpu_error err = {0};
				int64_t		nbad = 0;

				memcpy(C3b, o.C, sizeof(double) * k * d);
				C3b[4] = u == 1.0 ? 1e280 : far;
				C3b[5] = 0;
				if (a && c &&
					CHECK(pggpu_assign(a, C3b, 3, la, da, &err) == PGGPU_OK &&
						  pggpu_assign(c, o.C, 2, lc, dc, &err) == PGGPU_OK, "assign: %s", err.msg))
				{
					cmp_labels("assign beside a far centroid vs without it", la, lc, n);
					for (int64_t i = 0; i < n; i++)
						nbad += !(da[i] > 0) || !rel_close(da[i], dc[i], 1e-12);
					CHECK(nbad == 0, "assign: %lld distances differ", (long long) nbad);
				}
				pggpu_data_close(a);
				pggpu_data_close(c);
				free(la), free(lc), free(da), free(dc);
			}

			/* no scale for 1e-300 beside 1e300 */
			{
				pggpu_data *a;
				pggpu_kmeans_result r = {0};
				pggpu_error err = {0};
				int32_t    *lab = (int32_t *) xmalloc(sizeof(int32_t) * n);

				Dx.X[n * d] = 1e300;
				Dx.X[0] = 1e-300;
				p.k = 2;
				p.init = PGGPU_INIT_KMEANSPP;
				r.centroids = ox.C;
				r.sizes = ox.sizes;
				a = load(be, &Dx, 0);
				if (a)
				{
					pggpu_status st = pggpu_kmeans(a, &p, &r, &err);

					expect_error(st, &err, PGGPU_ERR_RANGE, "k-means over 1e-300 and 1e300");
					pggpu_data_close(a);
				}
				a = load(be, &D, 0);
				if (a)
				{
					double		Cr[4] = {1e-300, 1.0, 1e300, 0};
					pggpu_status st;

					memset(&err, 0, sizeof(err));
					st = pggpu_assign(a, Cr, 2, lab, NULL, &err);
					/* the blobs' 1 and Cr's 1e300 and 1e-300 */
					expect_error(st, &err, PGGPU_ERR_RANGE, "assign to 1e-300 and 1e300");
					pggpu_data_close(a);
				}
				free(lab);
			}
			km_free(&o);
			km_free(&ox);
			data_free(&D);
			data_free(&Dx);
		}
}

/* ---- errors ------------------------------------------------------------------- */

static void
expect_error(pggpu_status st, const pggpu_error *err, pggpu_status want, const char *what)
{
	CHECK(st == want && err->code == want && err->msg[0] != 0,
		  "%s: status %d (code %d, message \"%s\"), expected %d with a message",
		  what, (int) st, (int) err->code, err->msg, (int) want);
}

static void
test_errors_on(pggpu_backend be)
{
	pggpu_error err;
	pggpu_data *ds = NULL;
	pggpu_status st;
	pggpu_kmeans_params p = {0};
	pggpu_kmeans_result r = {0};
	double		C[3 * 2];
	int64_t		sizes[4];
	int32_t		labels[4];
	double	   *buf;
	int64_t		B;

	set_case("errors %s", be_name(be));
	memset(&err, 0, sizeof(err));
	ds = (pggpu_data *) 1;
	st = pggpu_data_open(&ds, be, 0, 0, 0, &err);
	expect_error(st, &err, PGGPU_ERR_INVALID, "open with d = 0");
	CHECK(ds == NULL, "open with d = 0 left *out set");

	memset(&err, 0, sizeof(err));
	st = pggpu_data_open(&ds, be, 0, 2, 3, &err);
	if (!CHECK(st == PGGPU_OK, "open: %s", err.msg))
		return;
	B = pggpu_data_batch_rows(ds);

	/* pushes of 0, negative and too many rows: refused, nothing stored */
	memset(&err, 0, sizeof(err));
	expect_error(pggpu_data_push(ds, 0, &err), &err, PGGPU_ERR_INVALID, "push of 0 rows");
	memset(&err, 0, sizeof(err));
	expect_error(pggpu_data_push(ds, -5, &err), &err, PGGPU_ERR_INVALID, "push of -5 rows");
	memset(&err, 0, sizeof(err));
	expect_error(pggpu_data_push(ds, B + 1, &err), &err, PGGPU_ERR_INVALID, "push of batch_rows + 1");
	CHECK(pggpu_data_rows(ds) == 0, "rows = %lld after refused pushes", (long long) pggpu_data_rows(ds));

	/* k-means / assign on an empty set */
	p.k = 1;
	p.max_iter = 10;
	p.init = PGGPU_INIT_KMEANSPP;
	r.centroids = C;
	r.sizes = sizes;
	r.labels = labels;
	memset(&err, 0, sizeof(err));
	expect_error(pggpu_kmeans(ds, &p, &r, &err), &err, PGGPU_ERR_INVALID, "k-means on 0 rows");

	/* three rows in one partial batch */
	buf = pggpu_data_batch(ds);
	for (int r0 = 0; r0 < 3; r0++)
	{
		buf[r0] = r0 * 10.0;
		buf[B + r0] = -r0;
	}
	memset(&err, 0, sizeof(err));
	CHECK(pggpu_data_push(ds, 3, &err) == PGGPU_OK, "push of 3 rows: %s", err.msg);
	memset(&err, 0, sizeof(err));
	expect_error(pggpu_data_push(ds, 1, &err), &err, PGGPU_ERR_INVALID, "push after a partial batch");
	CHECK(pggpu_data_rows(ds) == 3, "rows = %lld after a refused push", (long long) pggpu_data_rows(ds));

	/* invalid parameters: refused before the data are touched */
	{
		static const struct
		{
			const char *what;
			int			k,
						max_iter;
			double		tol;
			pggpu_init	init;
		}			bad[] = {
			{"k = 0", 0, 10, 0, PGGPU_INIT_KMEANSPP},
			{"k = -1", -1, 10, 0, PGGPU_INIT_KMEANSPP},
			{"k > N", 4, 10, 0, PGGPU_INIT_RANDOM},
			{"max_iter = 0", 2, 0, 0, PGGPU_INIT_KMEANSPP},
			{"tol < 0", 2, 10, -0.5, PGGPU_INIT_KMEANSPP},
			{"tol NaN", 2, 10, NAN, PGGPU_INIT_KMEANSPP},
			{"given without centroids", 2, 10, 0, PGGPU_INIT_GIVEN},
		};

		for (size_t t = 0; t < sizeof(bad) / sizeof(bad[0]); t++)
		{
			p.k = bad[t].k;
			p.max_iter = bad[t].max_iter;
			p.tol = bad[t].tol;
			p.init = bad[t].init;
			p.init_centroids = NULL;
			memset(&err, 0, sizeof(err));
			expect_error(pggpu_kmeans(ds, &p, &r, &err), &err, PGGPU_ERR_INVALID, bad[t].what);
		}
		memset(&err, 0, sizeof(err));
		expect_error(pggpu_assign(ds, C, 0, labels, NULL, &err), &err, PGGPU_ERR_INVALID,
					 "assign with k = 0");
	}

	/* the set is still good after all that: k = N = 3 */
	p.k = 3;
	p.max_iter = 10;
	p.tol = 0;
	p.init = PGGPU_INIT_KMEANSPP;
	p.seed = 1;
	memset(&err, 0, sizeof(err));
	st = pggpu_kmeans(ds, &p, &r, &err);
	if (CHECK(st == PGGPU_OK, "k-means after refused calls: %s", err.msg))
	{
		/* one row each, in canonical order: (0,0), (10,-1), (20,-2) */
		CHECK(sizes[0] == 1 && sizes[1] == 1 && sizes[2] == 1 && labels[0] == 0 &&
			  labels[1] == 1 && labels[2] == 2 && C[0] == 0 && C[1] == 0 && C[2] == 10 &&
			  C[3] == -1 && C[4] == 20 && C[5] == -2 && r.inertia == 0 && r.converged,
			  "k = N = 3 gave sizes %lld %lld %lld, labels %d %d %d, inertia %g",
			  (long long) sizes[0], (long long) sizes[1], (long long) sizes[2],
			  labels[0], labels[1], labels[2], r.inertia);
	}
	pggpu_data_close(ds);
	pggpu_data_close(NULL);		/* documented as fine */
	CHECK(true, "close(NULL) returned");
}

static void
test_errors(void)
{
	pggpu_error err;
	pggpu_data *ds = NULL;
	pggpu_status st;

	test_errors_on(PGGPU_BACKEND_CPU);
	set_case("errors gpu");
	if (have_gpu)
	{
		pggpu_device_info info;
		int			count;

		test_errors_on(PGGPU_BACKEND_GPU);
		set_case("errors gpu");
		memset(&err, 0, sizeof(err));
		count = pggpu_gpu_count(&err);
		memset(&err, 0, sizeof(err));
		st = pggpu_gpu_info(0, &info, &err);
		CHECK(st == PGGPU_OK && info.name[0] && info.cc_major >= 9 && info.multiprocessors > 0 &&
			  info.memory_total > 0 && info.memory_free > 0 && info.memory_free <= info.memory_total &&
			  info.driver_version > 0 && info.runtime_version > 0,
			  "gpu_info(0): status %d (%s), name \"%s\", cc %d.%d, %d SMs, %lld of %lld bytes free",
			  (int) st, err.msg, info.name, info.cc_major, info.cc_minor, info.multiprocessors,
			  (long long) info.memory_free, (long long) info.memory_total);
		memset(&err, 0, sizeof(err));
		st = pggpu_gpu_info(count + 7, &info, &err);
		CHECK(st != PGGPU_OK && err.msg[0], "gpu_info(%d) of %d GPUs: status %d", count + 7, count, (int) st);
		memset(&err, 0, sizeof(err));
		ds = (pggpu_data *) 1;
		st = pggpu_data_open(&ds, PGGPU_BACKEND_GPU, count + 7, 2, 0, &err);
		expect_error(st, &err, PGGPU_ERR_NO_GPU, "open on a GPU that does not exist");
		CHECK(ds == NULL, "failed open left *out set");
	}
	else
	{
		/* no GPU: opening a GPU data set fails cleanly */
		memset(&err, 0, sizeof(err));
		ds = (pggpu_data *) 1;
		st = pggpu_data_open(&ds, PGGPU_BACKEND_GPU, 0, 2, 0, &err);
		CHECK(st != PGGPU_OK && err.msg[0] && ds == NULL,
			  "GPU open without a GPU: status %d, message \"%s\"", (int) st, err.msg);
		CHECK(st == PGGPU_ERR_NO_GPU, "GPU open without a GPU: status %d (\"%s\"), expected PGGPU_ERR_NO_GPU",
			  (int) st, err.msg);
		gpu_skipped++;
	}
}

/* ---- interrupts ----------------------------------------------------------------- */

static int	interrupt_calls;
static int	interrupt_jump_at;	/* longjmp on this call; 0: never */
static void *interrupt_seen_arg;
static jmp_buf interrupt_env;

static void
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
static void
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
	/* still works afterwards */
	p.check_interrupts = NULL;
	km_alloc(&o, D.n, k, D.d);
	if (km_run(be, &D, 0, &p, &o))
		check_blobs("after interrupts", &D, k, PGGPU_INIT_KMEANSPP, &o);
	km_free(&o);
	data_free(&D);
}

/*
 * The CPU backend also calls back inside its passes over the rows (every
 * 4096 rows: a pass over 10^8 rows takes seconds), and a longjmp from there
 * leaves the set closable.
 */
static void
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

static bool
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

/* k-means on a loaded set into o (status in o->st) */
static void
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
static void
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
static void
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
		for (int init = PGGPU_INIT_KMEANSPP; init <= PGGPU_INIT_GIVEN; init++)
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
static void
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

static void
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

static void
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

/* ---- fit only (no labels) ------------------------------------------------------- */

static void
test_fit_only(void)
{
	dataset		D;
	const int	k = 7;

	gen_blobs(&D, 12000, 4, k, 20.0, 61);
	for (int b = 0; b < 2; b++)
	{
		pggpu_backend be = b ? PGGPU_BACKEND_GPU : PGGPU_BACKEND_CPU;
		pggpu_kmeans_params p = {0};
		km_out		with;
		double		C[7 * 4];
		int64_t		sizes[7];
		pggpu_kmeans_result r = {0};
		pggpu_error err = {0};
		pggpu_data *ds;

		set_case("fit only %s", be_name(be));
		if (b == 1 && !have_gpu)
		{
			gpu_skipped++;
			continue;
		}
		p.k = k;
		p.max_iter = 50;
		p.init = PGGPU_INIT_RANDOM;
		p.seed = 8;
		km_alloc(&with, D.n, k, D.d);
		if (km_run(be, &D, 0, &p, &with) && (ds = load(be, &D, 0)) != NULL)
		{
			r.centroids = C;
			r.sizes = sizes;
			r.labels = NULL;
			if (CHECK(pggpu_kmeans(ds, &p, &r, &err) == PGGPU_OK, "fit without labels: %s", err.msg))
			{
				cmp_sizes("with vs without labels", with.sizes, sizes, k);
				cmp_centroids("with vs without labels", with.C, C, k, D.d, 0.0);
				CHECK(with.inertia == r.inertia && with.iters == r.iterations,
					  "with vs without labels: inertia %.17g vs %.17g, iterations %d vs %d",
					  with.inertia, r.inertia, with.iters, r.iterations);
			}
			pggpu_data_close(ds);
		}
		km_free(&with);
	}
	data_free(&D);
}

/* ---- the k-means++ draw ----------------------------------------------------------- */

/*
 * k-means++ must draw each next centre with probability proportional to its
 * squared distance to the nearest centre so far.  One column of a few
 * distinct values, in runs of rows (so the library's blocks of the draw get
 * different weights); k = 3, one iteration: the centroids after it tell which
 * values were drawn.  The probability of each outcome is enumerated here
 * over the ordered draws; the frequencies over DRAW_SEEDS seeds on the CPU
 * must lie within 5 standard deviations (plus 1) of them, and the GPU must
 * give the CPU's answer seed for seed.
 */
#define DRAW_VALUES 5
#define DRAW_SEEDS 2000
#define DRAW_GPU_SEEDS 400

typedef struct draw_outcome
{
	double		C[3];			/* the centroids after one iteration, sorted */
	double		p;
	int			seen;
} draw_outcome;

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

/* the outcome of centres vals[sd[0..2]] (in draw order) after one iteration */
static void
draw_result(const double *vals, const int64_t *mult, const int *sd, double *C)
{
	double		sum[3] = {0, 0, 0};
	int64_t		cnt[3] = {0, 0, 0};

	for (int v = 0; v < DRAW_VALUES; v++)
	{
		int			best = 0;

		for (int c = 1; c < 3; c++)
			if (fabs(vals[v] - vals[sd[c]]) < fabs(vals[v] - vals[sd[best]]))
				best = c;
		sum[best] += mult[v] * vals[v];
		cnt[best] += mult[v];
	}
	for (int c = 0; c < 3; c++)
		C[c] = sum[c] / cnt[c];
	qsort(C, 3, sizeof(double), cmp_double);
}

static int
draw_find(draw_outcome *o, int no, const double *C)
{
	for (int i = 0; i < no; i++)
		if (fabs(o[i].C[0] - C[0]) < 1e-9 && fabs(o[i].C[1] - C[1]) < 1e-9 &&
			fabs(o[i].C[2] - C[2]) < 1e-9)
			return i;
	return -1;
}

static void
test_draw(void)
{
	static const double vals[DRAW_VALUES] = {0, 1, 5, 20, 50};
	static const int64_t mult[DRAW_VALUES] = {500, 300, 100, 70, 30};
	draw_outcome out[60];
	int			no = 0;
	int64_t		n = 0;
	dataset		D;
	km_out		o;
	pggpu_kmeans_params p = {0};
	double		total = 0;

	for (int v = 0; v < DRAW_VALUES; v++)
		n += mult[v];
	data_alloc(&D, n, 1, false);
	for (int v = 0, i = 0; v < DRAW_VALUES; v++)
		for (int64_t m = 0; m < mult[v]; m++)
			D.X[i++] = vals[v];

	/* every ordered draw a, b, c: its probability, into its outcome */
	for (int a = 0; a < DRAW_VALUES; a++)
		for (int b = 0; b < DRAW_VALUES; b++)
			for (int c = 0; c < DRAW_VALUES; c++)
			{
				double		w2 = 0,
							w3 = 0,
							pr,
							C[3];
				int			sd[3] = {a, b, c};
				int			i;

				if (a == b || a == c || b == c)
					continue;
				for (int v = 0; v < DRAW_VALUES; v++)
				{
					double		da = (vals[v] - vals[a]) * (vals[v] - vals[a]),
								db = (vals[v] - vals[b]) * (vals[v] - vals[b]);

					w2 += mult[v] * da;
					w3 += mult[v] * (da < db ? da : db);
				}
				pr = (double) mult[a] / n *
					(mult[b] * (vals[b] - vals[a]) * (vals[b] - vals[a]) / w2);
				{
					double		da = (vals[c] - vals[a]) * (vals[c] - vals[a]),
								db = (vals[c] - vals[b]) * (vals[c] - vals[b]);

					pr *= mult[c] * (da < db ? da : db) / w3;
				}
				draw_result(vals, mult, sd, C);
				if ((i = draw_find(out, no, C)) < 0)
				{
					i = no++;
					memcpy(out[i].C, C, sizeof(C));
					out[i].p = 0;
					out[i].seen = 0;
				}
				out[i].p += pr;
				total += pr;
			}
	set_case("k-means++ draw: the law");
	CHECK(fabs(total - 1) < 1e-12, "the outcomes' probabilities sum to %.17g", total);

	p.k = 3;
	p.max_iter = 1;
	p.init = PGGPU_INIT_KMEANSPP;
	km_alloc(&o, n, 3, 1);
	set_case("k-means++ draw cpu");
	for (int sd = 0; sd < DRAW_SEEDS; sd++)
	{
		int			i;
		char		why[800];

		p.seed = 1000 + sd;
		if (!km_run_quiet(PGGPU_BACKEND_CPU, &D, 0, &p, &o, why, sizeof(why)))
		{
			CHECK(false, "%s", why);
			break;
		}
		if ((i = draw_find(out, no, o.C)) < 0)
		{
			CHECK(false, "seed %d: centroids %g %g %g are no outcome of k-means++",
				  (int) p.seed, o.C[0], o.C[1], o.C[2]);
			break;
		}
		out[i].seen++;
	}
	for (int i = 0; i < no; i++)
	{
		double		mu = DRAW_SEEDS * out[i].p;
		double		sd = sqrt(mu * (1 - out[i].p));

		if (verbose)
			printf("#   outcome (%g, %g, %g): %d of %d, expected %.1f\n", out[i].C[0], out[i].C[1],
				   out[i].C[2], out[i].seen, DRAW_SEEDS, mu);
		CHECK(fabs(out[i].seen - mu) <= 5 * sd + 1,
			  "outcome (%g, %g, %g): %d of %d draws, expected %.1f (sd %.1f)",
			  out[i].C[0], out[i].C[1], out[i].C[2], out[i].seen, DRAW_SEEDS, mu, sd);
	}

	set_case("k-means++ draw gpu vs cpu");
	if (!have_gpu)
		gpu_skipped++;
	else
	{
		km_out		g;

		km_alloc(&g, n, 3, 1);
		for (int sd = 0; sd < DRAW_GPU_SEEDS; sd++)
		{
			p.seed = 1000 + sd;
			if (!km_run(PGGPU_BACKEND_CPU, &D, 0, &p, &o) || !km_run(PGGPU_BACKEND_GPU, &D, 0, &p, &g))
				break;
			if (!CHECK(memcmp(o.C, g.C, sizeof(double) * 3) == 0,
					   "seed %d: gpu %g %g %g, cpu %g %g %g", (int) p.seed,
					   g.C[0], g.C[1], g.C[2], o.C[0], o.C[1], o.C[2]))
				break;
		}
		km_free(&g);
	}
	km_free(&o);
	data_free(&D);
}

/* ---- matrix products ------------------------------------------------------------ */

/*
 * C = A B is checked element by element against a naive product in long
 * double (x87, 64-bit mantissa: its own rounding is negligible), normwise:
 * |C - R| <= tol * S + k * (the dtype's smallest normal), R = sum_p A_ip B_pj,
 * S = sum_p |A_ip B_pj|.  A k-term sum in working precision u is within
 * k u S; in practice within about u S.  The tolerances:
 *   float64  1e-12 (u = 1.1e-16; the issue asks for 1e-10 relative to numpy)
 *   float32  1e-5 (u = 6e-8)
 *   TF32     4e-3 (float32 with allow_tf32 on the GPU: inputs keep 10 bits)
 * Seen with --full on OpenBLAS and an H100's cuBLAS: at most 6e-16 S for
 * float64, 9e-7 S for float32 and 1.2e-4 S for TF32.
 */
#define MM_TOL64 1e-12
#define MM_TOL32 1e-5
#define MM_TOL_TF32 4e-3
/* long double multiply-adds per check; larger products are checked on sampled rows */
#define MM_CHECK_WORK 2e7

#define F64 PGGPU_FLOAT64
#define F32 PGGPU_FLOAT32

static const char *
dt_name(pggpu_dtype t)
{
	return t == F64 ? "float64" : "float32";
}

static size_t
dt_size(pggpu_dtype t)
{
	return t == F64 ? sizeof(double) : sizeof(float);
}

static double
mm_get(const void *X, int64_t e, pggpu_dtype t)
{
	return t == F64 ? ((const double *) X)[e] : ((const float *) X)[e];
}

static void
mm_set(void *X, int64_t e, pggpu_dtype t, double v)
{
	if (t == F64)
		((double *) X)[e] = v;
	else
		((float *) X)[e] = (float) v;
}

/*
 * count values uniform in [-1, 1); mixed: each also times 2^e, e uniform in
 * [-300, 300] (float32: [-30, 30]), so products and sums stay finite
 */
static void
mm_fill(void *X, int64_t count, pggpu_dtype t, bool mixed, uint64_t seed)
{
	rng			r = rng_make(seed);
	int			emax = t == F64 ? 300 : 30;

	for (int64_t e = 0; e < count; e++)
	{
		double		v = 2.0 * rng_unif(&r) - 1.0;

		if (mixed)
			v = ldexp(v, (int) (rng_u64(&r) % (2 * emax + 1)) - emax);
		mm_set(X, e, t, v);
	}
}

/* a workspace on be, or NULL: no GPU (a skipped case) or a failed open */
static pggpu_matmul *
mm_open(pggpu_backend be)
{
	pggpu_error err = {0};
	pggpu_matmul *mm = NULL;
	pggpu_status st;

	if (be == PGGPU_BACKEND_GPU && !have_gpu)
	{
		gpu_skipped++;
		return NULL;
	}
	st = pggpu_matmul_open(&mm, be, 0, &err);
	if (!CHECK(st == PGGPU_OK && mm != NULL, "matmul_open (%s): %d %s", be_name(be), (int) st, err.msg))
		return NULL;
	CHECK(pggpu_matmul_backend(mm) == be &&
		  (be == PGGPU_BACKEND_GPU) == (strcmp(pggpu_matmul_device_name(mm), "cpu") != 0),
		  "%s workspace: backend %d, device \"%s\"", be_name(be), (int) pggpu_matmul_backend(mm),
		  pggpu_matmul_device_name(mm));
	return mm;
}

/*
 * C against the reference (see above) on every row or, past MM_CHECK_WORK,
 * on rows an odd step apart (so they fall at every offset within a block)
 * and the last row.  Where R is NaN or infinite, C must be the same.  One
 * check.
 */
static bool
mm_verify(const pggpu_matmul_params *p, const void *A, const void *B, const void *C,
		  double tol)
{
	int64_t		m = p->m,
				n = p->n,
				k = p->k;
	int64_t		step = (int64_t) ((double) m * n * k / MM_CHECK_WORK) | 1;
	long double tiny = (long double) k * (p->dtype == F64 ? DBL_MIN : FLT_MIN);
	long double first_r = 0,
				first_s = 0;
	int64_t		nbad = 0,
				nchecked = 0,
				first = -1;
	double		worst = 0;

	/* rows 0, step, 2 step, ..., m - 1 */
	for (int64_t i = 0; i < m; i = i == m - 1 ? m : (i + step < m ? i + step : m - 1))
		for (int64_t j = 0; j < n; j++)
		{
			long double r = 0,
						s = 0;
			double		c = mm_get(C, i * n + j, p->dtype);
			bool		ok;

			for (int64_t q = 0; q < k; q++)
			{
				long double x = (long double) mm_get(A, i * k + q, p->dtype) * mm_get(B, q * n + j, p->dtype);

				r += x;
				s += fabsl(x);
			}
			if (isnan(r))
				ok = isnan(c);
			else if (isinf(r))
				ok = c == r;
			else
			{
				ok = fabsl(c - r) <= tol * s + tiny;
				if (ok && s > 0)
					worst = fmax(worst, (double) (fabsl(c - r) / s));
			}
			nchecked++;
			if (!ok && nbad++ == 0)
			{
				first = i * n + j;
				first_r = r;
				first_s = s;
			}
		}
	if (verbose)
		printf("#   [%s] %lld elements checked, worst |C - R| / S = %.3g\n",
			   case_name, (long long) nchecked, worst);
	return CHECK(nbad == 0, "%lld of %lld elements off by more than %g S (first: C[%lld][%lld] = %.17g, R = %.17Lg, S = %.3Lg)",
				 (long long) nbad, (long long) nchecked, tol, (long long) (first >= 0 ? first / n : 0),
				 (long long) (first >= 0 ? first % n : 0), first >= 0 ? mm_get(C, first, p->dtype) : 0.0,
				 first_r, first_s);
}

/* A and B in mm's host buffers from seed (see mm_fill), and room for C; one check */
static bool
mm_operands(pggpu_matmul *mm, const pggpu_matmul_params *p, bool mixed, uint64_t seed,
			void **A, void **B, void **C)
{
	pggpu_error err = {0};
	size_t		es = dt_size(p->dtype);

	*A = pggpu_matmul_buffer(mm, PGGPU_MM_A, p->m * p->k * es, 0, &err);
	*B = pggpu_matmul_buffer(mm, PGGPU_MM_B, p->k * p->n * es, 0, &err);
	*C = pggpu_matmul_buffer(mm, PGGPU_MM_C, p->m * p->n * es, 0, &err);
	if (!CHECK(*A && *B && *C, "host buffers for %lld x %lld by %lld x %lld: %s",
			   (long long) p->m, (long long) p->k, (long long) p->k, (long long) p->n, err.msg))
		return false;
	mm_fill(*A, p->m * p->k, p->dtype, mixed, seed);
	mm_fill(*B, p->k * p->n, p->dtype, mixed, seed + 1);
	return true;
}

/*
 * Runs C = A B into C poisoned with NaN (what the product leaves unwritten
 * shows), then checks the status, info (blocks within the dimensions, one
 * BLAS call each; whole rows on the CPU) and C.  false if the run failed.
 */
static bool
mm_run_check(pggpu_matmul *mm, const pggpu_matmul_params *p, const void *A, const void *B,
			 void *C, pggpu_matmul_info *info)
{
	pggpu_error err = {0};
	pggpu_matmul_info own;
	pggpu_status st;
	bool		gpu = pggpu_matmul_backend(mm) == PGGPU_BACKEND_GPU;

	if (info == NULL)
		info = &own;
	for (int64_t e = 0; e < p->m * p->n; e++)
		mm_set(C, e, p->dtype, NAN);
	st = pggpu_matmul_run(mm, p, A, B, C, info, &err);
	if (!CHECK(st == PGGPU_OK, "product of %lld x %lld by %lld x %lld failed: %d %s",
			   (long long) p->m, (long long) p->k, (long long) p->k, (long long) p->n, (int) st, err.msg))
		return false;
	CHECK(info->mb >= 1 && info->mb <= p->m && info->nb >= 1 && info->nb <= p->n &&
		  info->kb >= 1 && info->kb <= p->k && (gpu || (info->nb == p->n && info->kb == p->k)) &&
		  info->products == ((p->m + info->mb - 1) / info->mb) * ((p->n + info->nb - 1) / info->nb) *
		  ((p->k + info->kb - 1) / info->kb),
		  "info: %lld products of %lld x %lld x %lld blocks", (long long) info->products,
		  (long long) info->mb, (long long) info->kb, (long long) info->nb);
	mm_verify(p, A, B, C, p->dtype == F64 ? MM_TOL64 :
			  gpu && p->allow_tf32 ? MM_TOL_TF32 : MM_TOL32);
	return true;
}

/* mm_operands, then mm_run_check */
static bool
mm_product(pggpu_matmul *mm, const pggpu_matmul_params *p, bool mixed, uint64_t seed,
		   pggpu_matmul_info *info)
{
	void	   *A,
			   *B,
			   *C;

	return mm_operands(mm, p, mixed, seed, &A, &B, &C) && mm_run_check(mm, p, A, B, C, info);
}

static pggpu_matmul_params
mm_params(pggpu_dtype t, int64_t m, int64_t k, int64_t n, int64_t gpu_memory)
{
	pggpu_matmul_params p = {0};

	p.dtype = t;
	p.m = m;
	p.k = k;
	p.n = n;
	p.gpu_memory = gpu_memory;
	return p;
}

static void
mm_set_case(const char *what, pggpu_backend be, const pggpu_matmul_params *p)
{
	set_case("matmul %s %s %s %lldx%lldx%lld%s", what, be_name(be), dt_name(p->dtype),
			 (long long) p->m, (long long) p->k, (long long) p->n, p->allow_tf32 ? " tf32" : "");
	if (p->gpu_memory > 0 && be == PGGPU_BACKEND_GPU)
		snprintf(case_name + strlen(case_name), sizeof(case_name) - strlen(case_name),
				 " in %lld bytes", (long long) p->gpu_memory);
}

/*
 * Shapes m x k x n, both element types, one workspace per backend: edge
 * shapes, tall-skinny, mixed magnitudes, then random odd shapes.  The GPU
 * cuts m >= 2048 into row blocks by itself; the CPU cuts only products of
 * billions of multiply-adds into row blocks (20000 x 1100 x 1000, --full).
 */
static void
test_mm_products(void)
{
	static const struct
	{
		int64_t		m,
					k,
					n;
		bool		mixed;
		bool		full;
	}			shapes[] = {
		{1, 1, 1}, {1, 50, 300}, {300, 50, 1}, {200, 1, 150}, {17, 33, 5}, {257, 129, 65},
		{100000, 8, 3}, {63, 70, 45, true}, {1, 9, 1, true},
		{3000, 2000, 1000, false, true}, {1000, 1000, 1000, true, true},
		{20000, 1100, 1000, false, true}, {5, 100000, 7, false, true},
	};
	const int	nfixed = sizeof(shapes) / sizeof(shapes[0]),
				nrandom = full_grid ? 10 : 4;

	for (int b = 0; b < 2; b++)
	{
		pggpu_backend be = b ? PGGPU_BACKEND_GPU : PGGPU_BACKEND_CPU;
		rng			r = rng_make(77);
		pggpu_matmul *mm;

		set_case("matmul %s", be_name(be));
		if ((mm = mm_open(be)) == NULL)
			continue;
		for (int s = 0; s < nfixed + nrandom; s++)
		{
			int64_t		mkn[3];
			bool		mixed = false;

			if (s < nfixed)
			{
				if (shapes[s].full && !full_grid)
					continue;
				mkn[0] = shapes[s].m;
				mkn[1] = shapes[s].k;
				mkn[2] = shapes[s].n;
				mixed = shapes[s].mixed;
			}
			else
				for (int x = 0; x < 3; x++)
					mkn[x] = 1 + 2 * (int64_t) (rng_u64(&r) % (full_grid ? 500 : 64));
			for (int t = 0; t < 2; t++)
			{
				pggpu_matmul_params p = mm_params(t ? F32 : F64, mkn[0], mkn[1], mkn[2], 0);

				mm_set_case(mixed ? "mixed" : "shape", be, &p);
				mm_product(mm, &p, mixed, 1000 + s, NULL);
			}
		}
		pggpu_matmul_close(mm);
	}
}

/*
 * Host buffers: grown piece by piece keeping what is there (as src/ fills
 * them row by row), independent of each other, not shrunk by a smaller
 * request; keep_only(C) leaves C readable after a product.
 */
static void
test_mm_buffers(void)
{
	for (int b = 0; b < 2; b++)
	{
		pggpu_backend be = b ? PGGPU_BACKEND_GPU : PGGPU_BACKEND_CPU;
		pggpu_error err = {0};
		pggpu_matmul *mm;
		pggpu_matmul_params p = mm_params(F64, 17, 33, 5, 0);
		unsigned char *A,
				   *C;
		double	   *B = NULL;
		int64_t		filled,
					nbad = 0;
		void	   *a,
				   *bb,
				   *c;

		set_case("matmul buffers %s", be_name(be));
		if ((mm = mm_open(be)) == NULL)
			continue;
		A = pggpu_matmul_buffer(mm, PGGPU_MM_A, 1000, 0, &err);
		C = pggpu_matmul_buffer(mm, PGGPU_MM_C, 1000, 0, &err);
		if (!CHECK(A && C, "buffers of 1000 bytes: %s", err.msg))
		{
			pggpu_matmul_close(mm);
			continue;
		}
		for (int i = 0; i < 1000; i++)
			A[i] = (unsigned char) (i * 7 + 1), C[i] = (unsigned char) (i * 13 + 5);
		/* B: 100003 doubles appended 37 at a time, keeping what was filled */
		for (filled = 0; filled < 100003; filled += 37)
		{
			int64_t		add = filled + 37 <= 100003 ? 37 : 100003 - filled;

			if ((B = pggpu_matmul_buffer(mm, PGGPU_MM_B, sizeof(double) * (filled + add),
										 sizeof(double) * filled, &err)) == NULL)
				break;
			for (int64_t q = filled; q < filled + add; q++)
				B[q] = q + 0.25;
		}
		if (CHECK(B != NULL, "growing B at %lld doubles: %s", (long long) filled, err.msg))
		{
			for (int64_t q = 0; q < 100003; q++)
				nbad += B[q] != q + 0.25;
			CHECK(nbad == 0, "B grown piece by piece: %lld of 100003 values lost", (long long) nbad);
		}
		nbad = 0;
		for (int i = 0; i < 1000; i++)
			nbad += A[i] != (unsigned char) (i * 7 + 1) || C[i] != (unsigned char) (i * 13 + 5);
		CHECK(nbad == 0, "growing B changed %lld bytes of A or C", (long long) nbad);

		/* A: grown to 4 MB keeping 600 bytes, then a smaller request */
		A = pggpu_matmul_buffer(mm, PGGPU_MM_A, 4 << 20, 600, &err);
		if (CHECK(A != NULL, "A of 4 MB: %s", err.msg))
		{
			nbad = 0;
			for (int i = 0; i < 600; i++)
				nbad += A[i] != (unsigned char) (i * 7 + 1);
			memset(A + 600, 0xab, (4 << 20) - 600);
			A = pggpu_matmul_buffer(mm, PGGPU_MM_A, 3 << 20, 3 << 20, &err);
			for (int i = 600; A != NULL && i < 3 << 20; i += 4099)
				nbad += A[i] != 0xab;
			CHECK(A != NULL && nbad == 0, "A: %lld bytes lost growing with keep, or by a smaller request (%s)",
				  (long long) nbad, err.msg);
		}

		/* a product in these buffers, then keep only C */
		if (mm_operands(mm, &p, false, 11, &a, &bb, &c) && mm_run_check(mm, &p, a, bb, c, NULL))
		{
			double		copy[17 * 5];

			memcpy(copy, c, sizeof(copy));
			pggpu_matmul_keep_only(mm, PGGPU_MM_C);
			CHECK(memcmp(copy, c, sizeof(copy)) == 0, "C changed by keep_only(C)");
		}
		memset(&err, 0, sizeof(err));
		CHECK(pggpu_matmul_buffer(mm, 3, 8, 0, &err) == NULL && err.code == PGGPU_ERR_INVALID && err.msg[0],
			  "buffer 3: code %d, message \"%s\", expected PGGPU_ERR_INVALID", (int) err.code, err.msg);
		pggpu_matmul_close(mm);
	}
}

/*
 * One workspace for products of changing shapes, element types and GPU
 * memory in a row: its buffers (host and device) grow and are reused.
 * 9000 x 200 x 333 makes 3 row blocks on the CPU.
 */
static void
test_mm_reuse(void)
{
	static const struct
	{
		pggpu_dtype t;
		int64_t		m,
					k,
					n,
					gpu_memory;
	}			seq[] = {
		{F64, 17, 33, 5, 0}, {F64, 257, 129, 65, 20 << 10}, {F32, 257, 129, 65, 0},
		{F64, 1000, 3000, 7, 200 << 10}, {F32, 3, 4, 5, 0}, {F64, 100000, 8, 3, 0},
		{F32, 1000, 3000, 7, 20 << 10}, {F32, 9000, 200, 333, 0}, {F64, 17, 33, 5, 0},
	};

	for (int b = 0; b < 2; b++)
	{
		pggpu_backend be = b ? PGGPU_BACKEND_GPU : PGGPU_BACKEND_CPU;
		pggpu_matmul *mm;

		set_case("matmul reuse %s", be_name(be));
		if ((mm = mm_open(be)) == NULL)
			continue;
		for (size_t s = 0; s < sizeof(seq) / sizeof(seq[0]); s++)
		{
			pggpu_matmul_params p = mm_params(seq[s].t, seq[s].m, seq[s].k, seq[s].n, seq[s].gpu_memory);

			mm_set_case("reuse", be, &p);
			mm_product(mm, &p, false, 2000 + s, NULL);
		}
		pggpu_matmul_close(mm);
	}
}

/*
 * GPU only: little GPU memory forces blocks.  Rows only (all of B on the
 * device), rows and k, rows and n, or all three; blocks of k accumulate
 * into C.  Then TF32.
 */
static void
test_mm_blocks(void)
{
	static const struct
	{
		pggpu_dtype t;
		int64_t		m,
					k,
					n,
					gpu_memory;
		bool		cut_k,
					cut_n;
		bool		full;
	}			cases[] = {
		{F64, 257, 129, 65, 300 << 10, false, false},
		{F64, 257, 129, 65, 200 << 10, true, false},
		{F64, 257, 129, 65, 20 << 10, true, true},
		{F64, 257, 5, 300, 20 << 10, false, true},
		{F32, 257, 129, 65, 300 << 10, false, false},
		{F32, 257, 129, 65, 20 << 10, true, true},
		{F64, 1000, 3000, 7, 4 << 20, false, false},
		{F64, 1000, 3000, 7, 200 << 10, true, false},
		{F64, 3000, 2000, 1000, 8 << 20, true, true, true},
		{F32, 5000, 3000, 2000, 8 << 20, true, true, true},
	};
	pggpu_matmul *mm;
	pggpu_matmul_params p = mm_params(F32, 257, 129, 65, 0);

	set_case("matmul blocks gpu");
	if ((mm = mm_open(PGGPU_BACKEND_GPU)) == NULL)
		return;
	for (size_t s = 0; s < sizeof(cases) / sizeof(cases[0]); s++)
	{
		pggpu_matmul_info info;

		if (cases[s].full && !full_grid)
			continue;
		p = mm_params(cases[s].t, cases[s].m, cases[s].k, cases[s].n, cases[s].gpu_memory);
		mm_set_case("blocks", PGGPU_BACKEND_GPU, &p);
		if (mm_product(mm, &p, false, 3000 + s, &info))
			CHECK((info.kb < p.k) == cases[s].cut_k && (info.nb < p.n) == cases[s].cut_n &&
				  info.mb < p.m && info.products > 1,
				  "%lld products of %lld x %lld x %lld blocks; expected blocks of rows%s%s",
				  (long long) info.products, (long long) info.mb, (long long) info.kb,
				  (long long) info.nb, cases[s].cut_k ? ", k" : "", cases[s].cut_n ? ", n" : "");
	}
	p = mm_params(F32, 257, 129, 65, 0);
	p.allow_tf32 = true;
	mm_set_case("blocks", PGGPU_BACKEND_GPU, &p);
	mm_product(mm, &p, false, 3100, NULL);
	pggpu_matmul_close(mm);
}

/*
 * NaN and infinity propagate as IEEE says: a NaN in row 1 of A makes row 1
 * of C NaN, one in B's column 3 column 3 of C; A's row 3 starts with
 * infinity, met by 0 (NaN), 0.5 (+inf) and -0.25 (-inf).  Again in blocks
 * of 3 x 3 x 3 on the GPU.
 */
static void
test_mm_nonfinite(void)
{
	for (int b = 0; b < 2; b++)
	{
		pggpu_backend be = b ? PGGPU_BACKEND_GPU : PGGPU_BACKEND_CPU;
		pggpu_matmul *mm;

		set_case("matmul nan/inf %s", be_name(be));
		if ((mm = mm_open(be)) == NULL)
			continue;
		for (int t = 0; t < 2; t++)
			for (int blocked = 0; blocked < 2; blocked++)
			{
				pggpu_dtype dt = t ? F32 : F64;
				pggpu_matmul_params p = mm_params(dt, 6, 5, 4, blocked ? 75 * dt_size(dt) : 0);
				pggpu_matmul_info info;
				void	   *A,
						   *B,
						   *C;
				int			nbad = 0;

				if (blocked && be == PGGPU_BACKEND_CPU)
					continue;
				mm_set_case("nan/inf", be, &p);
				if (!mm_operands(mm, &p, false, 4000 + t, &A, &B, &C))
					continue;
				mm_set(A, 1 * 5 + 2, dt, NAN);
				mm_set(A, 3 * 5 + 0, dt, INFINITY);
				mm_set(B, 0 * 4 + 0, dt, 0.0);
				mm_set(B, 0 * 4 + 1, dt, 0.5);
				mm_set(B, 0 * 4 + 2, dt, -0.25);
				mm_set(B, 4 * 4 + 3, dt, NAN);
				if (!mm_run_check(mm, &p, A, B, C, &info))
					continue;
				for (int i = 0; i < 6; i++)
					for (int j = 0; j < 4; j++)
					{
						double		c = mm_get(C, i * 4 + j, dt);

						if (i == 1 || j == 3 || (i == 3 && j == 0))
							nbad += !isnan(c);
						else if (i == 3)
							nbad += c != (j == 1 ? INFINITY : -INFINITY);
						else
							nbad += !isfinite(c);
					}
				CHECK(nbad == 0, "%d elements of C are not as IEEE says", nbad);
				CHECK(!blocked || (info.kb < p.k && info.nb < p.n && info.mb < p.m),
					  "not in blocks: %lld x %lld x %lld", (long long) info.mb, (long long) info.kb,
					  (long long) info.nb);
			}
		pggpu_matmul_close(mm);
	}
}

/* refused shapes and element types; the workspace works after them */
static void
test_mm_errors(void)
{
	static const struct
	{
		const char *what;
		int			t;
		int64_t		m,
					k,
					n;
	}			bad[] = {
		{"m = 0", F64, 0, 3, 2}, {"k = 0", F64, 2, 0, 2}, {"n = 0", F32, 2, 3, 0},
		{"m = -1", F64, -1, 3, 2}, {"k = -2", F32, 2, -2, 2}, {"n = -5", F64, 2, 3, -5},
		{"n > INT_MAX", F64, 2, 3, (int64_t) INT_MAX + 1}, {"k > INT_MAX", F32, 2, (int64_t) INT_MAX + 1, 3},
		{"unknown element type", 7, 2, 3, 2},
	};
	double		dummy[16] = {0};
	pggpu_error err;
	pggpu_matmul *mm;
	pggpu_status st;

	for (int b = 0; b < 2; b++)
	{
		pggpu_backend be = b ? PGGPU_BACKEND_GPU : PGGPU_BACKEND_CPU;
		pggpu_matmul_params p;

		set_case("matmul errors %s", be_name(be));
		if ((mm = mm_open(be)) == NULL)
			continue;
		for (size_t s = 0; s < sizeof(bad) / sizeof(bad[0]); s++)
		{
			p = mm_params((pggpu_dtype) bad[s].t, bad[s].m, bad[s].k, bad[s].n, 0);
			memset(&err, 0, sizeof(err));
			expect_error(pggpu_matmul_run(mm, &p, dummy, dummy, dummy, NULL, &err), &err,
						 PGGPU_ERR_INVALID, bad[s].what);
		}
		p = mm_params(F64, 2, 2, 2, 0);
		memset(&err, 0, sizeof(err));
		expect_error(pggpu_matmul_run(mm, &p, dummy, NULL, dummy, NULL, &err), &err,
					 PGGPU_ERR_INVALID, "B missing");
		p = mm_params(F32, 3, 4, 5, 0);
		mm_product(mm, &p, false, 5000, NULL);
		pggpu_matmul_close(mm);
	}
	set_case("matmul errors gpu");
	memset(&err, 0, sizeof(err));
	mm = (pggpu_matmul *) 1;
	st = pggpu_matmul_open(&mm, PGGPU_BACKEND_GPU, have_gpu ? pggpu_gpu_count(&err) + 7 : 0, &err);
	expect_error(st, &err, PGGPU_ERR_NO_GPU, have_gpu ? "open on a GPU that does not exist" : "GPU open without a GPU");
	CHECK(mm == NULL, "failed open left *out set");
	pggpu_matmul_close(NULL);	/* documented as fine */
}

/* runs the product with a longjmp out of callback `at`; true if it came */
static bool
mm_run_jump(pggpu_matmul *mm, const pggpu_matmul_params *p, const void *A, const void *B,
			void *C, int at)
{
	pggpu_error err = {0};
	volatile bool jumped = false;

	interrupt_calls = 0;
	interrupt_jump_at = at;
	if (setjmp(interrupt_env) == 0)
		pggpu_matmul_run(mm, p, A, B, C, NULL, &err);
	else
		jumped = true;
	interrupt_jump_at = 0;
	return jumped;
}

/*
 * The callback runs between blocks with the caller's argument, at least once
 * per BLAS call: per CPU row block (several for 20000 x 1100 x 1000 with
 * --full, else one or more for 10000 x 300 x 200), per block on the GPU (cut
 * into 364).  It may longjmp out, after which the workspace still closes,
 * and a new one works.
 */
static void
test_mm_interrupts(void)
{
	static int	marker;

	for (int b = 0; b < 2; b++)
	{
		pggpu_backend be = b ? PGGPU_BACKEND_GPU : PGGPU_BACKEND_CPU;
		pggpu_matmul_params p = b ? mm_params(F64, 257, 129, 65, 20 << 10) :
			full_grid ? mm_params(F64, 20000, 1100, 1000, 0) : mm_params(F64, 10000, 300, 200, 0);
		bool		blocks = b || full_grid;	/* several BLAS calls expected */
		pggpu_matmul_info info = {0};
		pggpu_matmul *mm;
		void	   *A,
				   *B,
				   *C;

		set_case("matmul interrupts %s", be_name(be));
		if ((mm = mm_open(be)) == NULL)
			continue;
		p.check_interrupts = on_interrupt;
		p.interrupt_arg = &marker;
		interrupt_calls = 0;
		interrupt_jump_at = 0;
		interrupt_seen_arg = NULL;
		if (mm_product(mm, &p, false, 6000, &info))
			CHECK(interrupt_calls >= info.products && (info.products > 1 || !blocks) &&
				  interrupt_seen_arg == &marker,
				  "callback ran %d times for %lld products (expected %s), arg %s", interrupt_calls,
				  (long long) info.products, blocks ? "several" : "one or more",
				  interrupt_seen_arg == &marker ? "ok" : "wrong");
		if (mm_operands(mm, &p, false, 6000, &A, &B, &C))
			CHECK(mm_run_jump(mm, &p, A, B, C, info.products > 1 ? 2 : 1),
				  "no longjmp out of the product at callback %d", info.products > 1 ? 2 : 1);
		pggpu_matmul_close(mm);
		if ((mm = mm_open(be)) != NULL)
		{
			p = mm_params(F64, 17, 33, 5, 0);
			mm_set_case("after interrupts", be, &p);
			mm_product(mm, &p, false, 6001, NULL);
			pggpu_matmul_close(mm);
		}
	}
}

/*
 * Pinned buffers of a closed GPU workspace stay for the next one, up to the
 * cache limit; a buffer over the limit is freed; limit 0 empties the cache.
 */
static void
test_mm_pinned_cache(void)
{
	pggpu_error err = {0};
	pggpu_matmul *mm;
	size_t		before;
	unsigned char *a,
			   *again;

	set_case("pinned cache");
	pggpu_pinned_cache_limit(0);	/* start empty */
	pggpu_pinned_cache_limit((size_t) 64 << 20);
	if ((mm = mm_open(PGGPU_BACKEND_GPU)) == NULL)
		return;
	before = pggpu_pinned_cache_bytes();
	a = pggpu_matmul_buffer(mm, PGGPU_MM_A, (size_t) 3 << 20, 0, &err);
	CHECK(a != NULL, "3 MB pinned buffer: %s", err.msg);
	CHECK(pggpu_matmul_buffer(mm, PGGPU_MM_B, (size_t) 100 << 20, 0, &err) != NULL,
		  "100 MB pinned buffer: %s", err.msg);
	pggpu_matmul_close(mm);
	CHECK(pggpu_pinned_cache_bytes() == before + ((size_t) 3 << 20),
		  "after close the cache holds %zu bytes, expected %zu (3 MB kept, 100 MB over the limit freed)",
		  pggpu_pinned_cache_bytes(), before + ((size_t) 3 << 20));
	if ((mm = mm_open(PGGPU_BACKEND_GPU)) == NULL)
		return;
	again = pggpu_matmul_buffer(mm, PGGPU_MM_C, 1000, 0, &err);
	CHECK(again == a && pggpu_pinned_cache_bytes() == before,
		  "a small request reuses the cached buffer (%p, was %p; cache %zu bytes)",
		  (void *) again, (void *) a, pggpu_pinned_cache_bytes());
	pggpu_matmul_close(mm);
	pggpu_pinned_cache_limit(0);
	CHECK(pggpu_pinned_cache_bytes() == 0, "limit 0 leaves %zu bytes cached", pggpu_pinned_cache_bytes());
	pggpu_pinned_cache_limit((size_t) 512 << 20);
}

/* ---- the kernel grid: the GPU suite's shapes against the CPU reference ------- */

/*
 * Every (N, d, k) with N in {1, k, 31, 32, 33, 1000, 10^6}, d in {1, 2, 3, 8,
 * 33, 128}, k in {1, 2, 7, 256, 1024}, for float64 data and for float32 data
 * (values rounded to float, as a real column gives them; the kernels compute
 * in double either way), plus edge cases: all-equal rows, duplicate rows,
 * clusters that go empty, values near the limits of each type.  Each case
 * runs one fit on the GPU and the same fit on the CPU reference:
 * memberships, sizes, iterations and convergence must be identical,
 * centroids and inertia within KG_TOL (relative; see cmp_centroids), then
 * nearest-centroid assignment with the reference's centroids: labels
 * identical, distances within 1e-12.  N < k must fail as invalid on both.
 *
 * The reference is the library's CPU backend, run by worker threads ahead
 * of the GPU runs (at most two cases a worker ahead, data kept for the GPU
 * run).  Where that would take minutes (N = 10^6 and k * d above
 * KG_HEAVY_KD) it is the naive Lloyd above over every core, from given
 * centroids for 1 iteration; the GPU also runs k-means++ there, checked on
 * sampled rows (check_sane).
 */
#define KG_TOL 1e-9
#define KG_HEAVY_KD 256

static const int64_t kg_ns[] = {1, 0 /* k */ , 31, 32, 33, 1000, 1000000};
static const int kg_ds[] = {1, 2, 3, 8, 33, 128};
static const int kg_ks[] = {1, 2, 7, 256, 1024};

typedef struct kg_case
{
	char		name[120];
	int64_t		n;
	int			d;
	int			k;
	bool		f32;			/* data rounded to float */
	data_kind	kind;
	int			param;
	double		scale;			/* data times this (0: 1) */
	pggpu_init	init;
	int			max_iter;
	bool		invalid;		/* k > n: both backends must refuse */
	bool		heavy;			/* reference: the naive Lloyd, given centroids */
	/* the reference, filled by a worker */
	dataset		D;
	double	   *C0;				/* given centroids */
	km_out		ref;
	int32_t    *alab;			/* CPU assignment with ref's centroids */
	double	   *adist;
	bool		ref_ok;
	char		why[800];
	bool		done;
} kg_case;

static kg_case *kg_cases;
static int	kg_ncases;
static int	kg_next;			/* next case for a worker */
static int	kg_consumed;		/* cases the main thread is done with */
static int	kg_ahead;			/* how far workers may run ahead of it */
static pthread_mutex_t kg_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t kg_cv = PTHREAD_COND_INITIALIZER;
static bool small_grid;			/* --small: N <= 1000, float64 (for compute-sanitizer) */

static kg_case *
kg_add(const char *name, int64_t n, int d, int k, bool f32, data_kind kind, int param,
	   double scale, pggpu_init init)
{
	kg_case    *c;
	double		work = (double) n * k * d;

	if (small_grid && n > 1000)
		return NULL;
	kg_cases = (kg_case *) realloc(kg_cases, sizeof(kg_case) * (kg_ncases + 1));
	if (kg_cases == NULL)
	{
		fprintf(stderr, "unit_compute: out of memory\n");
		exit(2);
	}
	c = &kg_cases[kg_ncases++];
	memset(c, 0, sizeof(*c));
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->n = n;
	c->d = d;
	c->k = k;
	c->f32 = f32;
	c->kind = kind;
	c->param = param;
	c->scale = scale;
	c->init = init;
	c->invalid = k > n;
	c->heavy = n >= 1000000 && (int64_t) k * d > KG_HEAVY_KD && kind == DATA_BLOBS;
	if (c->heavy)
		c->init = PGGPU_INIT_GIVEN;
	c->max_iter = c->heavy ? 1 : work <= 1e8 ? 50 : work <= 2e9 ? 10 : 4;
	return c;
}

static void
kg_build(void)
{
	/* --small: float32 data run the very same kernels, so float64 only */
	for (int t = 0; t < (small_grid ? 1 : 2); t++)
	{
		bool		f32 = t == 1;

		for (size_t di = 0; di < sizeof(kg_ds) / sizeof(kg_ds[0]); di++)
			for (size_t ki = 0; ki < sizeof(kg_ks) / sizeof(kg_ks[0]); ki++)
				for (size_t ni = 0; ni < sizeof(kg_ns) / sizeof(kg_ns[0]); ni++)
				{
					int			d = kg_ds[di],
								k = kg_ks[ki];
					int64_t		n = kg_ns[ni] ? kg_ns[ni] : k;

					if (ni > 0 && kg_ns[ni] == k)
						continue;	/* N = k listed once */
					/* blobs (one a cluster) in even d, uniform in odd d */
					kg_add(d % 2 == 0 || n >= 1000000 ? "blobs" : "uniform", n, d, k, f32,
						   d % 2 == 0 || n >= 1000000 ? DATA_BLOBS : DATA_UNIFORM, 0, 0,
						   n == k ? PGGPU_INIT_RANDOM : PGGPU_INIT_KMEANSPP);
				}

		/* all rows equal (dyadic, so every backend's mean is exact) */
		for (int k = 1; k <= 7; k += k < 2 ? 1 : 5)
			kg_add("all equal", 1000, 3, k, f32, DATA_SAME, 0, 0, PGGPU_INIT_KMEANSPP);
		kg_add("all equal", 33, 128, 7, f32, DATA_SAME, 0, 0, PGGPU_INIT_RANDOM);
		/* duplicate rows: 5 distinct points, k below, at and above 5 */
		kg_add("duplicates", 1000, 8, 2, f32, DATA_FEW, 5, 0, PGGPU_INIT_KMEANSPP);
		kg_add("duplicates", 1000, 8, 5, f32, DATA_FEW, 5, 0, PGGPU_INIT_KMEANSPP);
		kg_add("duplicates", 1000, 8, 7, f32, DATA_FEW, 5, 0, PGGPU_INIT_KMEANSPP);
		kg_add("duplicates", 1000000, 2, 256, f32, DATA_FEW, 100, 0, PGGPU_INIT_KMEANSPP);
		/* clusters that go empty: given centroids far from every row */
		kg_add("emptying", 1000, 3, 7, f32, DATA_FAR, 2, 0, PGGPU_INIT_GIVEN);
		kg_add("emptying", 1000, 33, 256, f32, DATA_FAR, 16, 0, PGGPU_INIT_GIVEN);
		kg_add("emptying", 1000000, 8, 7, f32, DATA_FAR, 3, 0, PGGPU_INIT_GIVEN);
		/* near the limits of the type: huge, tiny, subnormal */
		{
			static const double s64[] = {1e300, 1e-300, 1e-310};
			static const double s32[] = {1e36, 1e-36, 1e-40};

			for (int i = 0; i < 3; i++)
			{
				kg_add("near the limits", 1000, 2, 7, f32, DATA_BLOBS, 0, f32 ? s32[i] : s64[i],
					   PGGPU_INIT_KMEANSPP);
				kg_add("near the limits", 1000, 8, 7, f32, DATA_BLOBS, 0, f32 ? s32[i] : s64[i],
					   PGGPU_INIT_GIVEN);
			}
		}
	}
}

/* as a grid_case, for make_data and make_init */
static grid_case
kg_as_grid_case(const kg_case *c)
{
	grid_case	gc = {0};

	gc.n = c->n;
	gc.d = c->d;
	gc.k = c->k;
	gc.kind = c->kind;
	gc.param = c->param;
	return gc;
}

/* make_data's rows, scaled and rounded to float as the case says */
static void
kg_data(const kg_case *c, dataset *D)
{
	grid_case	gc = kg_as_grid_case(c);

	make_data(&gc, D);
	for (int64_t i = 0; i < c->n * c->d; i++)
	{
		if (c->scale != 0)
			D->X[i] *= c->scale;
		if (c->f32)
			D->X[i] = (float) D->X[i];
	}
}

/* given centroids: the first rows (one per blob), then any far ones */
static double *
kg_init(const kg_case *c, const dataset *D)
{
	grid_case	gc = kg_as_grid_case(c);

	return make_init(&gc, D);
}

static pggpu_kmeans_params
kg_params(const kg_case *c, pggpu_init init, const double *C0)
{
	pggpu_kmeans_params p = {0};

	p.k = c->k;
	p.max_iter = c->max_iter;
	p.tol = 0;
	p.init = init;
	p.seed = 7000u + (uint64_t) c->k * 31u + (uint64_t) c->d;
	p.init_centroids = init == PGGPU_INIT_GIVEN ? C0 : NULL;
	return p;
}

/* the reference of one case (a worker thread: no CHECK); keeps the data */
static void
kg_reference(kg_case *c)
{
	dataset    *D = &c->D;
	pggpu_kmeans_params p;

	kg_data(c, D);
	if (c->invalid)
		return;
	c->C0 = kg_init(c, D);
	p = kg_params(c, c->init, c->C0);
	km_alloc(&c->ref, c->n, c->k, c->d);
	if (c->heavy)
	{
		c->ref_ok = ref_lloyd(D, c->k, c->C0, p.max_iter, p.tol, &c->ref);
		if (!c->ref_ok)
			snprintf(c->why, sizeof(c->why), "test data unsuitable: a cluster went empty in the naive Lloyd");
	}
	else if ((c->ref_ok = km_run_quiet(PGGPU_BACKEND_CPU, D, 0, &p, &c->ref, c->why, sizeof(c->why))))
	{
		pggpu_error err = {0};
		pggpu_data *ds = load_quiet(PGGPU_BACKEND_CPU, D, 0, c->why, sizeof(c->why));
		pggpu_status st;

		c->alab = (int32_t *) xmalloc(sizeof(int32_t) * c->n);
		c->adist = (double *) xmalloc(sizeof(double) * c->n);
		c->ref_ok = ds != NULL;
		if (ds != NULL)
		{
			st = pggpu_assign(ds, c->ref.C, c->k, c->alab, c->adist, &err);
			pggpu_data_close(ds);
			if (st != PGGPU_OK)
			{
				c->ref_ok = false;
				snprintf(c->why, sizeof(c->why), "cpu assign failed: %d %s", (int) st, err.msg);
			}
		}
	}
}

static void *
kg_worker(void *arg)
{
	(void) arg;
	in_worker = true;
	for (;;)
	{
		int			i;

		pthread_mutex_lock(&kg_mu);
		while (kg_next < kg_ncases && kg_next >= kg_consumed + kg_ahead)
			pthread_cond_wait(&kg_cv, &kg_mu);
		i = kg_next < kg_ncases ? kg_next++ : -1;
		pthread_mutex_unlock(&kg_mu);
		if (i < 0)
			return NULL;
		kg_reference(&kg_cases[i]);
		pthread_mutex_lock(&kg_mu);
		kg_cases[i].done = true;
		pthread_cond_broadcast(&kg_cv);
		pthread_mutex_unlock(&kg_mu);
	}
}

/* k > n: refused as invalid by both backends, nothing else touched */
static void
kg_invalid(const kg_case *c)
{
	const dataset *D = &c->D;

	for (int b = 0; b < 2; b++)
	{
		pggpu_backend be = b ? PGGPU_BACKEND_GPU : PGGPU_BACKEND_CPU;
		pggpu_kmeans_params p = kg_params(c, PGGPU_INIT_KMEANSPP, NULL);
		pggpu_kmeans_result r = {0};
		pggpu_error err = {0};
		pggpu_data *ds = load(be, D, 0);
		double	   *C = (double *) xmalloc(sizeof(double) * c->k * c->d);
		int64_t    *sz = (int64_t *) xmalloc(sizeof(int64_t) * c->k);
		pggpu_status st;

		if (ds == NULL)
			continue;
		r.centroids = C;
		r.sizes = sz;
		st = pggpu_kmeans(ds, &p, &r, &err);
		CHECK(st == PGGPU_ERR_INVALID && err.msg[0] != 0, "%s: k=%d > n=%lld gave status %d (%s)",
			  be_name(be), c->k, (long long) c->n, (int) st, err.msg);
		pggpu_data_close(ds);
		free(C);
		free(sz);
	}
}

/* the GPU side of one case, against its reference (main thread) */
static void
kg_gpu(kg_case *c)
{
	dataset		D = c->D;		/* a shallow copy: kg_done frees */
	km_out		g = {0};
	pggpu_kmeans_params p;
	int64_t		sample;

	if (!CHECK(c->ref_ok, "reference: %s", c->why))
		return;
	p = kg_params(c, c->init, c->C0);
	/* squared distances of unscaled data out of double's range: no sampled check */
	sample = c->scale > 1e150 || (c->scale != 0 && c->scale < 1e-150) ? 0 :
		affordable_rows(D.n, c->k, D.d);
	km_alloc(&g, D.n, c->k, D.d);
	if (km_run(PGGPU_BACKEND_GPU, &D, 0, &p, &g))
	{
		check_sane("gpu", &D, c->k, c->init, &g, sample);
		cmp_km(c->heavy ? "naive vs gpu" : "cpu vs gpu", &c->ref, &g, D.n, c->k, D.d, KG_TOL);
	}
	km_free(&g);

	if (c->heavy)
	{
		/* seeding at this size, checked on its own terms */
		p = kg_params(c, PGGPU_INIT_KMEANSPP, NULL);
		km_alloc(&g, D.n, c->k, D.d);
		if (km_run(PGGPU_BACKEND_GPU, &D, 0, &p, &g))
			check_sane("gpu k-means++", &D, c->k, PGGPU_INIT_KMEANSPP, &g, sample);
		km_free(&g);
	}
	else
	{
		pggpu_error err = {0};
		pggpu_data *ds = load(PGGPU_BACKEND_GPU, &D, 1);
		int32_t    *lab = (int32_t *) xmalloc(sizeof(int32_t) * D.n);
		double	   *dist = (double *) xmalloc(sizeof(double) * D.n);
		pggpu_status st;

		if (ds != NULL)
		{
			int64_t		nbad = 0,
						first = -1;

			st = pggpu_assign(ds, c->ref.C, c->k, lab, dist, &err);
			pggpu_data_close(ds);
			if (CHECK(st == PGGPU_OK, "gpu assign failed: %d %s", (int) st, err.msg))
			{
				cmp_labels("assign, cpu vs gpu", c->alab, lab, D.n);
				for (int64_t i = 0; i < D.n; i++)
					if (!rel_close(c->adist[i], dist[i], 1e-12) && nbad++ == 0)
						first = i;
				CHECK(nbad == 0, "assign, cpu vs gpu: %lld distances differ (first: row %lld, %.17g vs %.17g)",
					  (long long) nbad, (long long) first, first >= 0 ? c->adist[first] : 0.0,
					  first >= 0 ? dist[first] : 0.0);
			}
		}
		free(lab);
		free(dist);
	}
}

/*
 * Matrix products over the same edge sizes: m, k, n in {1, 31, 32, 33,
 * 1000}, both types, on the GPU against the long-double reference, once
 * whole and once in blocks (64 kB of GPU memory).
 */
static void
kg_matmul(void)
{
	static const int64_t dims[] = {1, 31, 32, 33, 1000};
	const int	nd = sizeof(dims) / sizeof(dims[0]);
	pggpu_matmul *mm = mm_open(PGGPU_BACKEND_GPU);

	if (mm == NULL)
		return;
	for (int t = 0; t < 2; t++)
		for (int a = 0; a < nd; a++)
			for (int b = 0; b < nd; b++)
				for (int e = 0; e < nd; e++)
					for (int blocked = 0; blocked < 2; blocked++)
					{
						pggpu_matmul_params p;

						if (small_grid && dims[a] * dims[b] * dims[e] > 40000)
							continue;
						p = mm_params(t ? F32 : F64, dims[a], dims[b], dims[e],
									  blocked ? 64 << 10 : 0);
						if (blocked && p.m * p.k + p.k * p.n + p.m * p.n <= 2048)
							continue;	/* fits in 64 kB whole */
						mm_set_case("grid", PGGPU_BACKEND_GPU, &p);
						mm_product(mm, &p, false, 8000 + a * 100 + b * 10 + e, NULL);
					}
	pggpu_matmul_close(mm);
}

static void
test_kernel_grid(void)
{
	pthread_t	th[64];
	int			nth = ncpu() > 1 ? ncpu() - 1 : 1;
	int			started = 0,
				fits = 0,
				heavy = 0,
				invalid = 0;

	if (!full_grid && !small_grid)
		return;					/* minutes of work: --full or --small */
	if (!have_gpu)
	{
		gpu_skipped++;
		return;
	}
	kg_build();
	kg_ahead = nth + 2;
	for (int i = 0; i < nth; i++)
		if (pthread_create(&th[started], NULL, kg_worker, NULL) == 0)
			started++;
	if (started == 0)
	{
		kg_worker(NULL);		/* no threads: every reference first, here */
		in_worker = false;
	}
	for (int i = 0; i < kg_ncases; i++)
	{
		kg_case    *c = &kg_cases[i];

		pthread_mutex_lock(&kg_mu);
		while (!c->done)
			pthread_cond_wait(&kg_cv, &kg_mu);
		pthread_mutex_unlock(&kg_mu);
		set_case("kernel grid %s %s n=%lld d=%d k=%d %s%s", c->name, c->f32 ? "float32" : "float64",
				 (long long) c->n, c->d, c->k, init_name(c->init),
				 c->scale != 0 ? " scaled" : "");
		if (c->scale != 0)
			snprintf(case_name + strlen(case_name), sizeof(case_name) - strlen(case_name),
					 " by %g", c->scale);
		if (c->invalid)
		{
			kg_invalid(c);
			invalid++;
		}
		else
		{
			kg_gpu(c);
			fits++;
			heavy += c->heavy;
		}
		km_free(&c->ref);
		free(c->alab);
		free(c->adist);
		free(c->C0);
		data_free(&c->D);
		c->alab = NULL;
		c->adist = NULL;
		c->C0 = NULL;
		pthread_mutex_lock(&kg_mu);
		kg_consumed = i + 1;
		pthread_cond_broadcast(&kg_cv);
		pthread_mutex_unlock(&kg_mu);
	}
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	printf("# kernel grid: %d k-means cases (%d of them against the naive Lloyd), %d with k > N refused\n",
		   fits, heavy, invalid);
	free(kg_cases);
	kg_cases = NULL;
	kg_ncases = kg_next = kg_consumed = 0;
	kg_matmul();
}

/* ---- main ----------------------------------------------------------------------- */

static const char *only_sections;	/* --only=a,b: just these sections */

/* is name in the comma-separated list (spaces in names may be written as -)? */
static bool
listed(const char *list, const char *name)
{
	size_t		len = strlen(name);

	for (const char *p = list; *p;)
	{
		const char *e = strchr(p, ',');
		size_t		l = e ? (size_t) (e - p) : strlen(p);

		if (l == len)
		{
			size_t		i = 0;

			while (i < len && (p[i] == name[i] || (p[i] == '-' && name[i] == ' ')))
				i++;
			if (i == len)
				return true;
		}
		p += l + (e != NULL);
	}
	return false;
}

static void
section(const char *name, void (*fn) (void))
{
	int			p0 = n_passed,
				f0 = n_failed;
	double		t0 = now_s();

	if (only_sections && !listed(only_sections, name))
		return;
	fn();
	printf("# %-14s %6d checks, %d failed, %.2f s\n", name, n_passed + n_failed - p0 - f0,
		   n_failed - f0, now_s() - t0);
	fflush(stdout);
}

int
main(int argc, char **argv)
{
	pggpu_error err = {0};
	int			ngpu;
	double		t0 = now_s();

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "--full") == 0)
			full_grid = true;
		else if (strcmp(argv[i], "--small") == 0)
			small_grid = true;
		else if (strncmp(argv[i], "--only=", 7) == 0)
			only_sections = argv[i] + 7;
		else if (strcmp(argv[i], "--verbose") == 0)
			verbose = true;
		else
		{
			fprintf(stderr, "usage: %s [--full | --small] [--only=SECTION,...] [--verbose]\n"
					"  --full      also run the heavier grid and the kernel grid (a GPU machine)\n"
					"  --small     the kernel grid up to N = 1000, float64 (for compute-sanitizer)\n"
					"  --only=...  just these sections (names as printed, - for a space)\n"
					"  --verbose   a line for every k-means run\n", argv[0]);
			return 2;
		}
	}

	ngpu = pggpu_gpu_count(&err);
	have_gpu = ngpu > 0;
	if (!have_gpu)
		snprintf(no_gpu_why, sizeof(no_gpu_why), "%s", err.msg[0] ? err.msg : "no GPU found");
	else
	{
		pggpu_device_info info;

		memset(&err, 0, sizeof(err));
		if (pggpu_gpu_info(0, &info, &err) == PGGPU_OK)
			printf("# GPU 0: %s (cc %d.%d, %d SMs)\n", info.name, info.cc_major, info.cc_minor,
				   info.multiprocessors);
	}
	printf("# CUDA backend built: %s; usable GPUs: %d; grid: %s\n",
		   pggpu_cuda_built() ? "yes" : "no", ngpu,
		   full_grid ? "full" : small_grid ? "small" : "CI");
	fflush(stdout);

	section("errors", test_errors);
	section("loading", test_loading);
	section("assign", test_assign);
	section("reference", test_reference);
	section("fit only", test_fit_only);
	section("draw", test_draw);
	section("interrupts", test_interrupts);
	section("threads", test_threads);
	section("scaling", test_scaling);
	section("mixed magnitudes", test_mixed_magnitudes);
	section("grid", test_grid);
	section("kernel grid", test_kernel_grid);
	section("mm products", test_mm_products);
	section("mm buffers", test_mm_buffers);
	section("mm reuse", test_mm_reuse);
	section("mm blocks", test_mm_blocks);
	section("mm nan/inf", test_mm_nonfinite);
	section("mm errors", test_mm_errors);
	section("mm interrupts", test_mm_interrupts);
	section("mm pinned", test_mm_pinned_cache);

	printf("# total %.1f s\n", now_s() - t0);
	if (gpu_skipped > 0)
		printf("GPU cases skipped: %d (%s)\n", gpu_skipped, no_gpu_why);
	printf("%d passed, %d failed\n", n_passed, n_failed);
	return n_failed == 0 ? 0 : 1;
}
