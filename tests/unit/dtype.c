#include "unit.h"
#include "compute_internal.h"	/* (f32_held: how the backend holds the rows) */

/*
 * ---- dtype: rows pushed as float32 -----------------------------------------
 *
 * A FLOAT32 set holds float32 values (pgvector's vector, real[]); a float32
 * value is exact as a double, so every answer must be the one the same
 * values pushed into a FLOAT64 set give, to the last bit: fits (each
 * seeding, n_init, the CPU's GEMM route and the GPU's routes, threads),
 * assignments, standard scaling and a power-of-two scale (both widen the
 * rows to doubles first), through the staging batch and pggpu_data_push_rows,
 * parked and unparked (streaming).  Both backends hold the rows as floats,
 * 4 bytes a value, until an op rewrites them.
 */

/* D's values rounded to float32 (the values a FLOAT32 set is for) */
static void
round_to_float(dataset *D)
{
	for (int64_t i = 0; i < D->n * D->d; i++)
		D->X[i] = (float) D->X[i];
}

typedef struct dtype_case
{
	const char *name;
	int64_t		n;
	int			d;
	int			k;
	pggpu_init	init;
	int			n_init;
	int			threads;
	int			route;			/* pggpu_data_force_route's label, 0: the planner's */
	bool		standardize;
	bool		far_init;		/* given centroids far out: a power-of-two scale */
	bool		by_rows;
	bool		park;			/* parked and unparked before the fit */
} dtype_case;

/* one fit on a set of each type, and an assignment after it: the same bits */
static void
dtype_fit(pggpu_backend be, const dtype_case *tc)
{
	dataset		D = {0};
	km_out		o[2];
	double	   *init = NULL;
	double	   *dist[2];
	int32_t    *lab[2];

	set_case("dtype %s %s", be_name(be), tc->name);
	gen_blobs(&D, tc->n, tc->d, tc->k, 6.0, 77 + tc->n);
	round_to_float(&D);
	if (tc->init == PGGPU_INIT_GIVEN)
	{
		init = xmalloc(sizeof(double) * tc->k * tc->d);
		for (int c = 0; c < tc->k; c++)
			for (int j = 0; j < tc->d; j++)
				init[c * tc->d + j] = D.X[(int64_t) c * 7 % D.n * tc->d + j];
		if (tc->far_init)
			init[0] = 1e200;
	}
	for (int t = 0; t < 2; t++)
	{
		pggpu_dtype dtype = t == 0 ? PGGPU_FLOAT64 : PGGPU_FLOAT32;
		pggpu_data *ds = load_typed(be, &D, dtype, tc->by_rows);
		pggpu_kmeans_params p = {0};
		pggpu_error err = {0};

		km_alloc(&o[t], D.n, tc->k, D.d);
		dist[t] = xmalloc(sizeof(double) * D.n);
		lab[t] = xmalloc(sizeof(int32_t) * D.n);
		if (ds == NULL)
		{
			o[t].st = PGGPU_ERR_INVALID;
			continue;
		}
		if (tc->park)
			CHECK(pggpu_data_park(ds, &err) == PGGPU_OK && pggpu_data_unpark(ds, &err) == PGGPU_OK,
				  "park and unpark: %s", err.msg);
		p.k = tc->k;
		p.max_iter = 20;
		p.tol = 0;
		p.init = tc->init;
		p.seed = 5;
		p.n_init = tc->n_init;
		p.init_centroids = init;
		pggpu_data_set_threads(ds, tc->threads, NULL);
		if (tc->route)
			pggpu_data_force_route(ds, tc->route, false);
		if (tc->standardize)
		{
			double	   *mean = xmalloc(sizeof(double) * D.d),
					   *std = xmalloc(sizeof(double) * D.d);

			CHECK(pggpu_data_standardize(ds, mean, std, &err) == PGGPU_OK, "standardize: %s", err.msg);
			free(mean);
			free(std);
		}
		fit_set(ds, &p, &o[t], &err);
		CHECK(o[t].st == PGGPU_OK, "%s fit: %s", t ? "float32" : "float64", err.msg);
		CHECK(ds->f32_held == (t == 1 && !tc->standardize && !tc->far_init),
			  "the rows held as %s", ds->f32_held ? "floats" : "doubles");
		CHECK(pggpu_assign(ds, o[0].C, tc->k, lab[t], dist[t], &err) == PGGPU_OK,
			  "assign: %s", err.msg);
		pggpu_data_close(ds);
	}
	if (o[0].st == PGGPU_OK && o[1].st == PGGPU_OK)
	{
		cmp_km("float32 against float64", &o[1], &o[0], D.n, tc->k, D.d, 0.0);
		cmp_labels("assignment", lab[1], lab[0], D.n);
		for (int64_t i = 0; i < D.n; i++)
			if (dist[1][i] != dist[0][i])
			{
				CHECK(false, "assignment distance of row %lld: %.17g against %.17g",
					  (long long) i, dist[1][i], dist[0][i]);
				break;
			}
	}
	for (int t = 0; t < 2; t++)
	{
		km_free(&o[t]);
		free(dist[t]);
		free(lab[t]);
	}
	free(init);
	data_free(&D);
}

void
test_dtype(void)
{
	static const dtype_case cases[] = {
		{"k-means++", 5000, 8, 16, PGGPU_INIT_KMEANSPP, 1, 1, 0},
		{"k-means|| n_init 3", 4000, 24, 12, PGGPU_INIT_PARALLEL, 3, 1, 0},
		{"random, 3 threads", 3001, 5, 9, PGGPU_INIT_RANDOM, 1, 3, 0},
		{"wide rows (CPU GEMM)", 3000, 300, 40, PGGPU_INIT_KMEANSPP, 1, 2, 0},
		{"wide rows, Lloyd's loop", 2000, 300, 40, PGGPU_INIT_KMEANSPP, 1, 1, 1},
		{"tc_scan", 3000, 64, 40, PGGPU_INIT_KMEANSPP, 1, 1, 2},
		{"tc_resident", 3000, 64, 40, PGGPU_INIT_KMEANSPP, 1, 1, 3},
		{"gemm", 3000, 96, 40, PGGPU_INIT_KMEANSPP, 1, 1, 4},
		{"gemm, chunks of whole tiles", 20000, 96, 40, PGGPU_INIT_KMEANSPP, 1, 1, 4},
		{"gemm_f16", 20000, 96, 40, PGGPU_INIT_KMEANSPP, 1, 1, 5},
		{"parked and unparked", 5000, 40, 16, PGGPU_INIT_KMEANSPP, 1, 1, 0, false, false, false, true},
		{"parked, then standardized", 3000, 10, 8, PGGPU_INIT_KMEANSPP, 1, 1, 0, true, false, false, true},
		{"standardized", 3000, 6, 8, PGGPU_INIT_KMEANSPP, 1, 1, 0, true},
		{"given far centroids (scaled)", 2000, 4, 5, PGGPU_INIT_GIVEN, 1, 1, 0, false, true},
		{"push_rows", 2500, 7, 6, PGGPU_INIT_KMEANSPP, 1, 1, 0, false, false, true},
	};

	for (int b = 0; b < 2; b++)
	{
		pggpu_backend be = b == 0 ? PGGPU_BACKEND_CPU : PGGPU_BACKEND_GPU;

		if (be == PGGPU_BACKEND_GPU && !have_gpu)
		{
			gpu_skipped++;
			continue;
		}
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			dtype_fit(be, &cases[i]);
	}

	/* the type is set before the first push, and only to a known one */
	{
		dataset		D = {0};
		pggpu_data *ds;
		pggpu_error err = {0};

		set_case("dtype errors");
		gen_blobs(&D, 100, 3, 2, 6.0, 1);
		ds = load(PGGPU_BACKEND_CPU, &D, D.n);
		if (ds)
		{
			CHECK(pggpu_data_set_dtype(ds, PGGPU_FLOAT32, &err) == PGGPU_ERR_INVALID,
				  "a set with rows took another type");
			CHECK(pggpu_data_set_dtype(ds, (pggpu_dtype) 7, &err) == PGGPU_ERR_INVALID,
				  "an unknown type was taken");
			CHECK(pggpu_data_dtype(ds) == PGGPU_FLOAT64, "the type changed");
			pggpu_data_close(ds);
		}
		CHECK(pggpu_dtype_bytes(PGGPU_FLOAT32) == 4 && pggpu_dtype_bytes(PGGPU_FLOAT64) == 8,
			  "bytes a value");
		data_free(&D);
	}

	/* a type set twice before the first push: the second holds (the memory made ready for it) */
	for (int b = 0; b < 2; b++)
	{
		pggpu_backend be = b == 0 ? PGGPU_BACKEND_CPU : PGGPU_BACKEND_GPU;
		dataset		D = {0};
		pggpu_data *ds = NULL;
		pggpu_error err = {0};

		if (be == PGGPU_BACKEND_GPU && !have_gpu)
			continue;
		set_case("dtype %s: float32, then float64", be_name(be));
		gen_blobs(&D, 20000, 6, 4, 6.0, 9);
		if (pggpu_data_open(&ds, be, -1, D.d, D.n, &err) != PGGPU_OK ||
			pggpu_data_set_dtype(ds, PGGPU_FLOAT32, &err) != PGGPU_OK ||
			pggpu_data_set_dtype(ds, PGGPU_FLOAT64, &err) != PGGPU_OK)
			CHECK(false, "open and type: %s", err.msg);
		else
		{
			CHECK(!ds->f32_held && pggpu_data_batch(ds) != NULL, "doubles staged and held");
			CHECK(pggpu_data_push_rows(ds, D.X, NULL, D.n, &err) == PGGPU_OK, "push_rows: %s", err.msg);
			{
				double	   *out = xmalloc(sizeof(double) * D.d);
				int64_t		r = D.n - 1;

				CHECK(pggpu_data_get_rows(ds, &r, 1, out, &err) == PGGPU_OK &&
					  memcmp(out, D.X + r * D.d, sizeof(double) * D.d) == 0, "the last row as pushed");
				free(out);
			}
		}
		pggpu_data_close(ds);
		data_free(&D);
	}

	/* a float32 set widened (standard scaling rewrites its rows) takes no more rows, on either backend */
	for (int b = 0; b < 2; b++)
	{
		pggpu_backend be = b == 0 ? PGGPU_BACKEND_CPU : PGGPU_BACKEND_GPU;
		pggpu_data *ds = NULL;
		pggpu_error err = {0};
		int64_t		B;

		if (be == PGGPU_BACKEND_GPU && !have_gpu)
			continue;
		set_case("dtype %s: no push after widening", be_name(be));
		if (pggpu_data_open(&ds, be, -1, 3, 0, &err) != PGGPU_OK ||
			pggpu_data_set_dtype(ds, PGGPU_FLOAT32, &err) != PGGPU_OK)
		{
			CHECK(false, "open: %s", err.msg);
			pggpu_data_close(ds);
			continue;
		}
		B = pggpu_data_batch_rows(ds);
		for (int64_t e = 0; e < 3 * B; e++)
			pggpu_data_batch_f32(ds)[e] = (float) (e % 7);
		CHECK(pggpu_data_push(ds, B, &err) == PGGPU_OK, "push: %s", err.msg);
		{
			double		mean[3],
						std[3];

			CHECK(pggpu_data_standardize(ds, mean, std, &err) == PGGPU_OK, "standardize: %s", err.msg);
		}
		CHECK(!ds->f32_held, "standardized rows are held as doubles");
		CHECK(pggpu_data_push(ds, B, &err) == PGGPU_ERR_INVALID, "a push after widening was taken");
		pggpu_data_close(ds);
	}
}
