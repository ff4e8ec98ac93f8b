#include "unit.h"

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
bool small_grid;			/* --small: N <= 1000, float64 (for compute-sanitizer) */

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

void
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
