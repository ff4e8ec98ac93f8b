#include "unit.h"
#include "compute_internal.h"

/* ---- hierarchical k-means (cuda/hier.c) --------------------------------------- */

/* the groups and each group's share of k, by hand */
static void
shares_checks(void)
{
	static const struct
	{
		int			g;
		int64_t		rows[4];
		int			k;
		int			want[4];
	}			cases[] = {
		{3, {10, 30, 60}, 10, {1, 3, 6}},	/* whole parts */
		{3, {5, 5, 5}, 4, {2, 1, 1}},	/* the rest by D'Hondt, the lower group on ties */
		{2, {1, 100}, 5, {0, 5}},	/* a group too small for a centroid of its own */
		{3, {2, 2, 100}, 100, {1, 1, 98}},
		{2, {3, 1000}, 1003, {3, 1000}},	/* every row a centroid */
		{3, {1, 1, 1}, 3, {1, 1, 1}},
		{2, {0, 7}, 3, {0, 3}},	/* an empty group */
		{4, {9, 1, 1, 1}, 12, {9, 1, 1, 1}},	/* capped at the rows, the rest elsewhere */
	};

	set_case("hierarchical: groups and shares");
	CHECK(pggpu_hier_groups(20000, 1000000) == 141, "k = 20000: %d groups", pggpu_hier_groups(20000, 1000000));
	CHECK(pggpu_hier_groups(262144, 10000000) == 512, "k = 262144: %d groups", pggpu_hier_groups(262144, 10000000));
	CHECK(pggpu_hier_groups(1, 10) == 1 && pggpu_hier_groups(2, 10) == 1 && pggpu_hier_groups(3, 10) == 2,
		  "k = 1, 2, 3: %d, %d, %d groups", pggpu_hier_groups(1, 10), pggpu_hier_groups(2, 10),
		  pggpu_hier_groups(3, 10));
	CHECK(pggpu_hier_groups(100, 5) == 5, "k = 100 on 5 rows: %d groups", pggpu_hier_groups(100, 5));
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
	{
		int			got[4] = {0};
		bool		same = true;

		pggpu_hier_shares(cases[c].rows, cases[c].g, cases[c].k, got);
		for (int j = 0; j < cases[c].g; j++)
			same &= got[j] == cases[c].want[j];
		CHECK(same, "case %d: shares %d %d %d %d, want %d %d %d %d", (int) c, got[0], got[1], got[2], got[3],
			  cases[c].want[0], cases[c].want[1], cases[c].want[2], cases[c].want[3]);
	}
}

/* a fit of D (on be; in parts cut at cuts[0..np] where np > 1, else one set), into o */
static bool
hier_fit(const dataset *D, pggpu_backend be, pggpu_metric metric, const pggpu_kmeans_params *p,
		 const int64_t *cuts, int np, km_out *o, pggpu_kmeans_result *r)
{
	pggpu_data *parts[4] = {0};
	pggpu_error err = {0};
	bool		ok = true;

	memset(r, 0, sizeof(*r));
	for (int i = 0; i < (np > 1 ? np : 1) && ok; i++)
	{
		dataset		S = *D;

		if (np > 1)
		{
			S.X = D->X + cuts[i] * D->d;
			S.n = cuts[i + 1] - cuts[i];
			S.group = NULL;
		}
		ok = (parts[i] = load(be, &S, 0)) != NULL;
		if (ok)
			pggpu_data_set_metric(parts[i], metric);
	}
	if (ok)
	{
		r->centroids = o->C;
		r->sizes = o->sizes;
		r->labels = o->labels;
		o->st = np > 1 ? pggpu_kmeans_parts(parts, np, p, r, &err) : pggpu_kmeans(parts[0], p, r, &err);
		o->inertia = r->inertia;
		o->iters = r->iterations;
		o->conv = r->converged;
		ok = CHECK(o->st == PGGPU_OK, "kmeans: %s", err.msg);
	}
	for (int i = 0; i < 4; i++)
		pggpu_data_close(parts[i]);
	return ok;
}

/*
 * Every row labelled by its nearest of the fit's centroids (the reference's
 * distances, the lower index on ties), sizes counting them, the inertia
 * their sum (cosine: of 1 - cos on the unit rows)
 */
static void
check_nearest(const char *what, const dataset *D, const km_out *o, int k, pggpu_metric metric)
{
	int			d = D->d;
	int64_t		bad = 0;
	int64_t    *sizes = xmalloc(sizeof(int64_t) * k);
	double	   *C = xmalloc(sizeof(double) * k * d),
			   *x = xmalloc(sizeof(double) * d);
	double		inertia = 0;

	memcpy(C, o->C, sizeof(double) * k * d);
	if (metric == PGGPU_METRIC_COSINE)
		pggpu_unit_rows(C, k, d);
	memset(sizes, 0, sizeof(int64_t) * k);
	for (int64_t i = 0; i < D->n; i++)
	{
		double		best;
		int			c;

		memcpy(x, D->X + i * d, sizeof(double) * d);
		if (metric == PGGPU_METRIC_COSINE)
			pggpu_unit_rows(x, 1, d);
		c = nearest(x, C, k, d, &best);
		bad += o->labels[i] != c;
		sizes[c]++;
		inertia += metric == PGGPU_METRIC_COSINE ? best / 2 : best;
	}
	CHECK(bad == 0, "%s: %lld rows not labelled by their nearest centroid", what, (long long) bad);
	bad = 0;
	for (int c = 0; c < k; c++)
		bad += sizes[c] != o->sizes[c];
	CHECK(bad == 0, "%s: %lld sizes differ from the labels' counts", what, (long long) bad);
	CHECK(rel_close(o->inertia, inertia, 1e-9), "%s: inertia %.17g, the labels' distances %.17g", what,
		  o->inertia, inertia);
	free(sizes);
	free(C);
	free(x);
}

/*
 * Four far groups of four tight blobs each, every blob's rows in pairs
 * about its centre (so its mean is the centre): the groups are found, each
 * split into its four blobs, and the centroids are the blobs' centres
 */
static void
nested_blobs(pggpu_backend be)
{
	const int	d = 3,
				k = 16,
				per = 100;		/* pairs a blob (3,200 rows: all of them trained) */
	dataset		D;
	km_out		o;
	pggpu_kmeans_result r;
	pggpu_kmeans_params p = {.k = k, .max_iter = 100, .tol = 0, .seed = 7,
	.algorithm = PGGPU_ALGORITHM_HIERARCHICAL};
	double		ctr[16][3];
	rng			g = rng_make(5);
	int64_t		n = (int64_t) k * per * 2,
				bad = 0;

	set_case("hierarchical: nested blobs, %s", be_name(be));
	data_alloc(&D, n, d, true);
	D.ngroups = k;
	for (int b = 0; b < k; b++)
	{
		ctr[b][0] = (b / 4 % 2 ? 1000.0 : -1000.0) + (b % 2 ? 10.0 : -10.0);
		ctr[b][1] = (b / 8 ? 1000.0 : -1000.0) + (b / 2 % 2 ? 10.0 : -10.0);
		ctr[b][2] = 0.25 * b;
	}
	for (int64_t i = 0; i < n; i += 2)
	{
		int			b = (int) (i / (2 * per));

		for (int j = 0; j < d; j++)
		{
			double		off = rng_gauss(&g);

			D.X[i * d + j] = ctr[b][j] + off;
			D.X[(i + 1) * d + j] = ctr[b][j] - off;
		}
		D.group[i] = D.group[i + 1] = b;
	}
	km_alloc(&o, n, k, d);
	if (hier_fit(&D, be, PGGPU_METRIC_EUCLIDEAN, &p, NULL, 1, &o, &r))
	{
		CHECK(r.groups == 4 && r.trained == n, "groups %d, rows trained %lld (want 4, %lld)", r.groups,
			  (long long) r.trained, (long long) n);
		for (int b = 0; b < k; b++)
		{
			int			c = o.labels[(int64_t) b * 2 * per];
			bool		at = true;

			for (int j = 0; j < d; j++)
				at &= fabs(o.C[c * d + j] - ctr[b][j]) <= 1e-9 * (1 + fabs(ctr[b][j]));
			bad += !at || o.sizes[c] != 2 * per;
			for (int64_t i = (int64_t) b * 2 * per; i < (int64_t) (b + 1) * 2 * per; i++)
				bad += o.labels[i] != c;
		}
		CHECK(bad == 0, "%lld blobs or rows not found as built", (long long) bad);
		check_nearest("nested blobs", &D, &o, k, PGGPU_METRIC_EUCLIDEAN);
	}
	km_free(&o);
	data_free(&D);
}

/* pending from the first poll on (the fits at once stop at once) */
static int	polls;

static bool
always_pending(void)
{
	polls++;
	return true;
}

/*
 * On the GPU the groups fit several at once, on threads that call no
 * callback: an interrupt found pending stops them, the callback runs on
 * the caller's thread, and where it returns (interrupts held off) the
 * groups left are fit there: the same fit as uninterrupted.  Where it
 * longjmps (at any of its calls), the set closes cleanly.
 */
static void
hier_interrupts(const dataset *D, const pggpu_kmeans_params *p0, const km_out *want)
{
	pggpu_kmeans_params p = *p0;
	const int	k = p.k;
	km_out		o;
	int			total;

	set_case("hierarchical on the gpu, stopped while its groups fit at once");
	p.check_interrupts = on_interrupt;
	p.interrupt_arg = NULL;
	km_alloc(&o, D->n, k, D->d);
	interrupt_calls = polls = 0;
	interrupt_jump_at = 0;
	{
		pggpu_data *ds = load(PGGPU_BACKEND_GPU, D, 0);
		pggpu_kmeans_result r = {0};
		pggpu_error err = {0};

		if (ds)
		{
			pggpu_data_set_threads(ds, 1, always_pending);
			r.centroids = o.C;
			r.sizes = o.sizes;
			r.labels = o.labels;
			o.st = pggpu_kmeans(ds, &p, &r, &err);
			o.inertia = r.inertia;
			o.iters = r.iterations;
			o.conv = r.converged;
			if (CHECK(o.st == PGGPU_OK, "kmeans: %s", err.msg))
				cmp_km("held off vs uninterrupted", &o, want, D->n, k, D->d, 0);
			CHECK(polls > 0, "pending was never polled");
			pggpu_data_close(ds);
		}
	}
	total = interrupt_calls;
	for (int t = 1; t <= 4 && total > 0; t++)
	{
		int			at = t == 4 ? total : total * t / 4 + 1;
		pggpu_data *volatile ds = load(PGGPU_BACKEND_GPU, D, 0);
		volatile bool jumped = false;
		pggpu_kmeans_result r = {0};
		pggpu_error err = {0};

		if (ds == NULL)
			break;
		pggpu_data_set_threads(ds, 1, always_pending);
		r.centroids = o.C;
		r.sizes = o.sizes;
		interrupt_calls = 0;
		interrupt_jump_at = at;
		if (setjmp(interrupt_env) == 0)
			pggpu_kmeans(ds, &p, &r, &err);
		else
			jumped = true;
		interrupt_jump_at = 0;
		pggpu_data_close(ds);
		CHECK(jumped, "no longjmp out of the hierarchy at callback %d of %d", at, total);
	}
	km_free(&o);
}

void
test_hierarchical(void)
{
	const int	k = 64;
	const int64_t n = 30000;
	int64_t		cuts[4] = {0, 7000, 19000, n};
	dataset		D,
				R,
				U;
	km_out		one,
				other,
				flat;
	pggpu_kmeans_result r,
				r2;
	pggpu_kmeans_params p = {.k = k, .max_iter = 50, .tol = 1e-4, .seed = 3,
	.algorithm = PGGPU_ALGORITHM_HIERARCHICAL};
	pggpu_error err = {0};

	shares_checks();
	nested_blobs(PGGPU_BACKEND_CPU);
	if (have_gpu)
		nested_blobs(PGGPU_BACKEND_GPU);
	else
		gpu_skipped++;

	gen_blobs(&D, n, 6, 48, 3.0, 17);
	/* the same rows backwards */
	data_alloc(&R, n, D.d, false);
	for (int64_t i = 0; i < n; i++)
		memcpy(R.X + i * D.d, D.X + (n - 1 - i) * D.d, sizeof(double) * D.d);
	/* cosine: the rows on the unit sphere, as a cosine read leaves them */
	data_alloc(&U, n, D.d, false);
	memcpy(U.X, D.X, sizeof(double) * n * D.d);
	for (int64_t i = 0; i < n; i++)
		pggpu_unit_rows(U.X + i * D.d, 1, D.d);
	km_alloc(&one, n, k, D.d);
	km_alloc(&other, n, k, D.d);
	km_alloc(&flat, n, k, D.d);
	for (int metric = PGGPU_METRIC_EUCLIDEAN; metric <= PGGPU_METRIC_COSINE; metric++)
		for (int init = PGGPU_INIT_KMEANSPP; init <= PGGPU_INIT_PARALLEL; init++)
		{
			const char *mname = metric ? "cosine" : "euclidean";
			const dataset *X = metric ? &U : &D;

			if (init == PGGPU_INIT_GIVEN)
				continue;
			p.init = (pggpu_init) init;
			set_case("hierarchical, %s, %s, cpu", mname, init_name((pggpu_init) init));
			if (!hier_fit(X, PGGPU_BACKEND_CPU, (pggpu_metric) metric, &p, NULL, 1, &one, &r))
				continue;
			/* 30,000 rows, 256 a centroid: the fits run on a sample of about 16,384 */
			CHECK(r.groups == 8 && r.trained > 15000 && r.trained < 18000, "groups %d, rows trained %lld",
				  r.groups, (long long) r.trained);
			check_nearest("cpu", X, &one, k, (pggpu_metric) metric);
			if (hier_fit(X, PGGPU_BACKEND_CPU, (pggpu_metric) metric, &p, cuts, 3, &other, &r2))
				cmp_km("3 parts on the cpu vs one set", &other, &one, n, k, D.d, 1e-12);
			if (metric == PGGPU_METRIC_EUCLIDEAN && hier_fit(&R, PGGPU_BACKEND_CPU, (pggpu_metric) metric, &p, NULL, 1, &other, &r2))
			{
				cmp_centroids("the rows backwards vs forwards", other.C, one.C, k, D.d, 1e-12);
				CHECK(rel_close(other.inertia, one.inertia, 1e-12), "backwards: inertia %.17g vs %.17g",
					  other.inertia, one.inertia);
			}
			if (have_gpu)
			{
				set_case("hierarchical, %s, %s, gpu", mname, init_name((pggpu_init) init));
				if (hier_fit(X, PGGPU_BACKEND_GPU, (pggpu_metric) metric, &p, NULL, 1, &other, &r2))
				{
					cmp_km("the gpu vs the cpu", &other, &one, n, k, D.d, 1e-12);
					if (metric == PGGPU_METRIC_EUCLIDEAN && init == PGGPU_INIT_KMEANSPP)
						hier_interrupts(X, &p, &other);
				}
				if (hier_fit(X, PGGPU_BACKEND_GPU, (pggpu_metric) metric, &p, cuts, 3, &other, &r2))
					cmp_km("3 parts on the gpu vs one set on the cpu", &other, &one, n, k, D.d, 1e-12);
			}
			else
				gpu_skipped++;
			/* its inertia beside flat Lloyd's of the same seeding, on rows of 48 blobs */
			if (metric == PGGPU_METRIC_EUCLIDEAN && init == PGGPU_INIT_KMEANSPP)
			{
				pggpu_kmeans_params q = p;

				q.algorithm = PGGPU_ALGORITHM_LLOYD;
				if (hier_fit(X, PGGPU_BACKEND_CPU, PGGPU_METRIC_EUCLIDEAN, &q, NULL, 1, &flat, &r2))
					CHECK(one.inertia <= 1.03 * flat.inertia, "inertia %.6g, flat Lloyd's %.6g", one.inertia,
						  flat.inertia);
			}
		}

	/* every row a centroid: each its own cluster */
	set_case("hierarchical, k = n");
	{
		dataset		S;
		pggpu_kmeans_params q = p;

		gen_uniform(&S, 50, 2, -1, 1, 9);
		q.k = 50;
		q.init = PGGPU_INIT_KMEANSPP;
		if (hier_fit(&S, PGGPU_BACKEND_CPU, PGGPU_METRIC_EUCLIDEAN, &q, NULL, 1, &other, &r))
		{
			int64_t		ones = 0;

			for (int c = 0; c < 50; c++)
				ones += other.sizes[c] == 1;
			CHECK(ones == 50 && other.inertia == 0, "%lld clusters of one row, inertia %g", (long long) ones,
				  other.inertia);
		}
		data_free(&S);
	}

	/* given centroids: refused, the hierarchy seeds its own fits */
	set_case("hierarchical, given centroids");
	{
		pggpu_data *ds = load(PGGPU_BACKEND_CPU, &D, 0);
		pggpu_kmeans_params q = p;

		q.init = PGGPU_INIT_GIVEN;
		q.init_centroids = D.X;
		if (ds)
		{
			fit_set(ds, &q, &other, &err);
			CHECK(other.st == PGGPU_ERR_INVALID, "status %d (%s)", (int) other.st, err.msg);
			pggpu_data_close(ds);
		}
	}
	km_free(&one);
	km_free(&other);
	km_free(&flat);
	data_free(&D);
	data_free(&R);
	data_free(&U);
}
