#include "unit.h"
#include "compute_internal.h"

/* ---- the k-means++ draw ----------------------------------------------------------- */

/*
 * Greedy k-means++ must draw, for each next centre, 2 + floor(ln k)
 * candidates, each with probability proportional to its squared distance to
 * the nearest centre so far, and keep the one of least potential (the first
 * drawn on ties).  One column of a few distinct values, in runs of rows (so
 * the library's blocks of the draw get different weights); k = 3, one
 * iteration: the centroids after it tell which values were chosen.  The
 * probability of each outcome is enumerated here over the ordered draws of
 * the candidates; the frequencies over DRAW_SEEDS seeds on the CPU must lie
 * within 5 standard deviations (plus 1) of them, and the GPU must give the
 * CPU's answer seed for seed.
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

/* candidates a greedy step draws at k = 3 */
#define DRAW_TRIALS 3

/*
 * The law of the next centre of a greedy step after centres cs[0..nc-1]:
 * pr[v] for each value (the potentials are integers: exact in doubles, so
 * ties are ties)
 */
static void
greedy_law(const double *vals, const int64_t *mult, const int *cs, int nc, double *pr)
{
	double		D[DRAW_VALUES],
				pot[DRAW_VALUES],
				w = 0;
	int			t[DRAW_TRIALS];

	for (int u = 0; u < DRAW_VALUES; u++)
	{
		D[u] = INFINITY;
		for (int c = 0; c < nc; c++)
			D[u] = fmin(D[u], (vals[u] - vals[cs[c]]) * (vals[u] - vals[cs[c]]));
		w += mult[u] * D[u];
		pr[u] = 0;
	}
	for (int v = 0; v < DRAW_VALUES; v++)
	{
		pot[v] = 0;
		for (int u = 0; u < DRAW_VALUES; u++)
			pot[v] += mult[u] * fmin(D[u], (vals[u] - vals[v]) * (vals[u] - vals[v]));
	}
	/* every ordered tuple of candidates */
	for (int code = 0; code < DRAW_VALUES * DRAW_VALUES * DRAW_VALUES; code++)
	{
		double		p = 1;
		int			best = 0;

		for (int i = 0, c = code; i < DRAW_TRIALS; i++, c /= DRAW_VALUES)
		{
			t[i] = c % DRAW_VALUES;
			p *= mult[t[i]] * D[t[i]] / w;
		}
		for (int i = 1; i < DRAW_TRIALS; i++)
			if (pot[t[i]] < pot[t[best]])
				best = i;
		pr[t[best]] += p;
	}
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

void
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

	/* every ordered choice a, b, c: its probability, into its outcome */
	for (int a = 0; a < DRAW_VALUES; a++)
	{
		double		pb[DRAW_VALUES];
		int			cs[2] = {a, 0};

		greedy_law(vals, mult, cs, 1, pb);
		for (int b = 0; b < DRAW_VALUES; b++)
		{
			double		pc[DRAW_VALUES];

			if (pb[b] == 0)
				continue;
			cs[1] = b;
			greedy_law(vals, mult, cs, 2, pc);
			for (int c = 0; c < DRAW_VALUES; c++)
			{
				double		pr = (double) mult[a] / n * pb[b] * pc[c],
							C[3];
				int			sd[3] = {a, b, c};
				int			i;

				if (pr == 0)
					continue;
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
		}
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

/* ---- the weighted draw (k-means||'s recluster) ------------------------------------- */

/*
 * The draw with row weights (km_weights) must treat a weight as a
 * multiplicity: the rows of test_draw, one of each value, weighted by its
 * count, k-means++ from the row of 0: every ordered pair (b, c) of the next
 * two centres with the probability it has in test_draw given a = 0.  The
 * frequencies over DRAW_SEEDS seeds on the CPU within 5 standard deviations
 * (plus 1); the GPU the same centres seed for seed.
 */
static bool
weighted_seed(pggpu_backend be, const double *vals, const double *w, uint64_t seed,
			  double *C)
{
	pggpu_data *ds;
	pggpu_error err = {0};
	pggpu_kmeans_params p = {0};
	bool		ok;

	if (!CHECK(pggpu_data_open(&ds, be, 0, 1, DRAW_VALUES, &err) == PGGPU_OK, "open: %s", err.msg))
		return false;
	memcpy(pggpu_data_batch(ds), vals, sizeof(double) * DRAW_VALUES);
	p.k = 3;
	p.seed = seed;
	ok = pggpu_data_push(ds, DRAW_VALUES, &err) == PGGPU_OK &&
		ds->ops->km_begin(ds, 3, &err) == PGGPU_OK &&
		(ds->k = 3, ds->ops->km_weights(ds, w, &err) == PGGPU_OK) &&
		pggpu_seed_kmeanspp(ds, &p, 0, &err) == PGGPU_OK &&
		ds->ops->km_get_centroids(ds, C, &err) == PGGPU_OK;
	CHECK(ok, "%s weighted k-means++: %s", be_name(be), err.msg);
	pggpu_data_close(ds);
	return ok;
}

void
test_weighted_draw(void)
{
	static const double vals[DRAW_VALUES] = {0, 1, 5, 20, 50};
	static const double w[DRAW_VALUES] = {500, 300, 100, 70, 30};
	int			seen[DRAW_VALUES][DRAW_VALUES] = {{0}};
	double		w2 = 0,
				C[3];

	for (int v = 0; v < DRAW_VALUES; v++)
		w2 += w[v] * vals[v] * vals[v];
	set_case("weighted draw cpu");
	for (int sd = 0; sd < DRAW_SEEDS; sd++)
	{
		int			b = -1,
					c = -1;

		if (!weighted_seed(PGGPU_BACKEND_CPU, vals, w, 5000 + sd, C))
			return;
		for (int v = 0; v < DRAW_VALUES; v++)
		{
			if (C[1] == vals[v])
				b = v;
			if (C[2] == vals[v])
				c = v;
		}
		if (!CHECK(C[0] == 0 && b > 0 && c > 0 && b != c, "seed %d: centres %g %g %g",
				   5000 + sd, C[0], C[1], C[2]))
			return;
		seen[b][c]++;
	}
	for (int b = 1; b < DRAW_VALUES; b++)
	{
		double		w3 = 0;

		for (int v = 0; v < DRAW_VALUES; v++)
		{
			double		da = vals[v] * vals[v],
						db = (vals[v] - vals[b]) * (vals[v] - vals[b]);

			w3 += w[v] * (da < db ? da : db);
		}
		for (int c = 1; c < DRAW_VALUES; c++)
		{
			double		da = vals[c] * vals[c],
						db = (vals[c] - vals[b]) * (vals[c] - vals[b]);
			double		pr = c == b ? 0 : w[b] * vals[b] * vals[b] / w2 * (w[c] * (da < db ? da : db) / w3);
			double		mu = DRAW_SEEDS * pr,
						sdv = sqrt(mu * (1 - pr));

			CHECK(fabs(seen[b][c] - mu) <= 5 * sdv + 1, "centres 0, %g, %g: %d of %d draws, expected %.1f (sd %.1f)",
				  vals[b], vals[c], seen[b][c], DRAW_SEEDS, mu, sdv);
		}
	}

	set_case("weighted draw gpu vs cpu");
	if (!have_gpu)
	{
		gpu_skipped++;
		return;
	}
	for (int sd = 0; sd < DRAW_GPU_SEEDS; sd++)
	{
		double		G[3];

		if (!weighted_seed(PGGPU_BACKEND_CPU, vals, w, 5000 + sd, C) ||
			!weighted_seed(PGGPU_BACKEND_GPU, vals, w, 5000 + sd, G))
			return;
		if (!CHECK(memcmp(C, G, sizeof(C)) == 0, "seed %d: gpu %g %g %g, cpu %g %g %g",
				   5000 + sd, G[0], G[1], G[2], C[0], C[1], C[2]))
			return;
	}
}

/*
 * The GPU's k-means++ steps by either kernel (pp_rows_kernel, a block a
 * block of the draw, where pp_step_kernel's warps would not fill the GPU;
 * pp_step_kernel, forced): the CPU's seeding, row for row, on sets by
 * columns and by rows (d <= 32, and wider where a group of 32 fits in
 * shared memory), doubles and floats, greedy k-means++ and k-means||
 * (whose reclustering of its candidates is plain k-means++, weighted).
 */
void
test_pp_kernels(void)
{
	static const struct
	{
		int64_t		n;
		int			d,
					k;
		pggpu_init	init;
		pggpu_dtype dtype;
	}			cases[] = {
		{20000, 8, 64, PGGPU_INIT_KMEANSPP, PGGPU_FLOAT64},
		{20000, 8, 64, PGGPU_INIT_PARALLEL, PGGPU_FLOAT32},
		{6000, 300, 40, PGGPU_INIT_PARALLEL, PGGPU_FLOAT64},
		{6000, 300, 40, PGGPU_INIT_PARALLEL, PGGPU_FLOAT32},
		{3000, 96, 30, PGGPU_INIT_KMEANSPP, PGGPU_FLOAT16},
	};

	if (!have_gpu)
	{
		gpu_skipped++;
		return;
	}
	for (size_t t = 0; t < sizeof(cases) / sizeof(cases[0]); t++)
	{
		dataset		D = {0};
		km_out		o[3];
		pggpu_kmeans_params p = {0};

		gen_blobs(&D, cases[t].n, cases[t].d, cases[t].k, 6.0, 400 + t);
		for (int64_t i = 0; i < D.n * D.d; i++)
			D.X[i] = cases[t].dtype == PGGPU_FLOAT16 ? pggpu_half_to_float(pggpu_half_from_double(D.X[i])) :
				cases[t].dtype == PGGPU_FLOAT32 ? (float) D.X[i] : D.X[i];
		p.k = cases[t].k;
		p.max_iter = 3;
		p.tol = 0;
		p.init = cases[t].init;
		p.seed = 11 + t;
		p.n_init = 1;
		for (int r = 0; r < 3; r++)
		{
			pggpu_data *ds = load_typed(r == 0 ? PGGPU_BACKEND_CPU : PGGPU_BACKEND_GPU, &D, cases[t].dtype,
										LOAD_COLUMNS);
			pggpu_error err = {0};

			set_case("k-means++ steps n=%lld d=%d k=%d %s %s, %s", (long long) D.n, D.d, p.k,
					 init_name(p.init), cases[t].dtype == PGGPU_FLOAT64 ? "float64" :
					 cases[t].dtype == PGGPU_FLOAT32 ? "float32" : "float16",
					 r == 0 ? "cpu" : r == 1 ? "gpu" : "gpu, pp_step_kernel");
			km_alloc(&o[r], D.n, p.k, D.d);
			if (!CHECK(ds != NULL, "load failed"))
				continue;
			pggpu_data_force_pp_warps(ds, r == 2);
			fit_set(ds, &p, &o[r], &err);
			pggpu_data_close(ds);
			if (CHECK(o[r].st == PGGPU_OK, "fit: %s", err.msg) && r > 0 && o[0].st == PGGPU_OK)
				cmp_km("cpu vs gpu", &o[0], &o[r], D.n, p.k, D.d, 1e-9);
		}
		for (int r = 0; r < 3; r++)
			km_free(&o[r]);
		data_free(&D);
	}
}
