#include "unit.h"
#include "compute_internal.h"	/* (narrow_held: how the backend holds the rows) */

/*
 * ---- dtype: rows pushed as float32 or as halves --------------------------
 *
 * A FLOAT32 set holds float32 values (pgvector's vector, real[]), a FLOAT16
 * set binary16 values (halfvec); either is exact as a double, so every
 * answer must be the one the same values pushed into a FLOAT64 set give, to
 * the last bit: fits (each seeding, n_init, the CPU's GEMM route and the
 * GPU's routes, threads), assignments, standard scaling and a power-of-two
 * scale (both widen the rows to doubles first), through the staging batch
 * (by columns, and by rows) and pggpu_data_push_rows, parked and unparked (streaming),
 * hierarchical k-means.  Both backends
 * hold float32 rows as floats, 4 bytes a value, and halves as halves, 2
 * bytes a value, until an op rewrites them (the GPU's halves past 32
 * columns: its tensor-core scans take them widened to floats as they are
 * pushed).
 */

/* D's values rounded to float32, or to halves (the values a set of the type is for) */
static void
round_to(dataset *D, pggpu_dtype dtype)
{
	for (int64_t i = 0; i < D->n * D->d; i++)
		D->X[i] = dtype == PGGPU_FLOAT16 ? pggpu_half_to_float(pggpu_half_from_double(D->X[i])) :
			(float) D->X[i];
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
	load_how	how;			/* the set of type dt's (the float64 one's by columns) */
	bool		park;			/* parked and unparked before the fit */
	bool		hier;			/* algorithm 'hierarchical': its sets copied from the rows, held as they are */
} dtype_case;

/* one fit on a FLOAT64 set and one on a set of type dt, and an assignment after each: the same bits */
static void
dtype_fit(pggpu_backend be, const dtype_case *tc, pggpu_dtype dt)
{
	const char *name = dt == PGGPU_FLOAT16 ? "float16" : "float32";

	dataset		D = {0};
	km_out		o[2];
	double	   *init = NULL;
	double	   *dist[2];
	int32_t    *lab[2];

	set_case("dtype %s %s %s", be_name(be), name, tc->name);
	gen_blobs(&D, tc->n, tc->d, tc->k, 6.0, 77 + tc->n);
	round_to(&D, dt);
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
		pggpu_dtype dtype = t == 0 ? PGGPU_FLOAT64 : dt;
		pggpu_data *ds = load_typed(be, &D, dtype, t == 0 ? LOAD_COLUMNS : tc->how);
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
		p.algorithm = tc->hier ? PGGPU_ALGORITHM_HIERARCHICAL : PGGPU_ALGORITHM_LLOYD;
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
		CHECK(o[t].st == PGGPU_OK, "%s fit: %s", t ? name : "float64", err.msg);
		CHECK(ds->narrow_held == (t == 1 && !tc->standardize && !tc->far_init),
			  "the rows held as %s", ds->narrow_held ? "floats" : "doubles");
		/* (halves are held as they are: on the CPU, and on the GPU past the tensor cores' scans' columns) */
		CHECK(ds->f16_held == (ds->narrow_held && dtype == PGGPU_FLOAT16 && (be == PGGPU_BACKEND_CPU || D.d > 32)),
			  "the rows held as halves: %d", (int) ds->f16_held);
		CHECK(pggpu_assign(ds, o[0].C, tc->k, lab[t], dist[t], &err) == PGGPU_OK,
			  "assign: %s", err.msg);
		pggpu_data_close(ds);
	}
	if (o[0].st == PGGPU_OK && o[1].st == PGGPU_OK)
	{
		cmp_km(dt == PGGPU_FLOAT16 ? "float16 against float64" : "float32 against float64", &o[1], &o[0], D.n,
			   tc->k, D.d, 0.0);
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
		/* k-means||'s k-means++ over its candidates: by rows on the GPU, even doubles' at d = 300 */
		{"k-means||, wide rows", 4000, 300, 40, PGGPU_INIT_PARALLEL, 1, 1, 0},
		/* doubles too wide to turn to rows (a group's 32 x 1001 in shared memory), floats not */
		{"k-means||, rows wider", 1500, 1000, 8, PGGPU_INIT_PARALLEL, 1, 1, 0},
		{"parked and unparked", 5000, 40, 16, PGGPU_INIT_KMEANSPP, 1, 1, 0, false, false, LOAD_COLUMNS, true},
		{"parked, then standardized", 3000, 10, 8, PGGPU_INIT_KMEANSPP, 1, 1, 0, true, false, LOAD_COLUMNS, true},
		{"standardized", 3000, 6, 8, PGGPU_INIT_KMEANSPP, 1, 1, 0, true},
		{"given far centroids (scaled)", 2000, 4, 5, PGGPU_INIT_GIVEN, 1, 1, 0, false, true},
		{"push_rows", 2500, 7, 6, PGGPU_INIT_KMEANSPP, 1, 1, 0, false, false, LOAD_PUSH_ROWS},
		{"batches by rows", 2500, 7, 6, PGGPU_INIT_KMEANSPP, 1, 1, 0, false, false, LOAD_BY_ROWS},
		{"batches by rows, wide", 3000, 300, 40, PGGPU_INIT_KMEANSPP, 1, 2, 0, false, false, LOAD_BY_ROWS},
		{"batches by rows, parked", 5000, 40, 16, PGGPU_INIT_KMEANSPP, 1, 1, 0, false, false, LOAD_BY_ROWS, true},
		{"hierarchical", 6000, 16, 90, PGGPU_INIT_KMEANSPP, 1, 1, 0, false, false, LOAD_COLUMNS, false, true},
		{"hierarchical, wide rows", 4000, 40, 64, PGGPU_INIT_KMEANSPP, 1, 1, 0, false, false, LOAD_COLUMNS, false, true},
		{"hierarchical, standardized", 4000, 6, 36, PGGPU_INIT_KMEANSPP, 1, 1, 0, true, false, LOAD_COLUMNS, false,
		true},
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
		{
			dtype_fit(be, &cases[i], PGGPU_FLOAT32);
			dtype_fit(be, &cases[i], PGGPU_FLOAT16);
		}
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
		CHECK(pggpu_dtype_bytes(PGGPU_FLOAT32) == 4 && pggpu_dtype_bytes(PGGPU_FLOAT64) == 8 &&
			  pggpu_dtype_bytes(PGGPU_FLOAT16) == 2 && pggpu_dtype_held_bytes(PGGPU_FLOAT16, 32) == 4 &&
			  pggpu_dtype_held_bytes(PGGPU_FLOAT16, 33) == 2 && pggpu_dtype_held_bytes(PGGPU_FLOAT32, 33) == 4,
			  "bytes a value");
		data_free(&D);
	}

	/*
	 * Rows copied from sets that hold them narrow (pggpu_copy_rows: a fit's
	 * seeding and hierarchical sets) are held so, the same values; copied at
	 * a scale, or from a set holding doubles, they are doubles
	 */
	for (int b = 0; b < 6; b++)
	{
		pggpu_backend be = b % 2 == 0 ? PGGPU_BACKEND_CPU : PGGPU_BACKEND_GPU;
		pggpu_dtype dt = b < 2 ? PGGPU_FLOAT32 : b < 4 ? PGGPU_FLOAT16 : PGGPU_FLOAT64;
		const char *name = dt == PGGPU_FLOAT16 ? "float16" : dt == PGGPU_FLOAT32 ? "float32" : "float64";
		dataset		D = {0};
		pggpu_data *src[2] = {NULL, NULL};
		int64_t		rows[5] = {3, 0, 2999, 3, 1700};
		int			which[5] = {0, 1, 1, 0, 0};

		if (be == PGGPU_BACKEND_GPU && !have_gpu)
			continue;
		gen_blobs(&D, 3000, 40, 4, 6.0, 21);
		if (dt != PGGPU_FLOAT64)
			round_to(&D, dt);
		src[0] = load_typed(be, &D, dt, LOAD_COLUMNS);
		src[1] = load_typed(be, &D, dt, LOAD_COLUMNS);
		for (int how = 0; how < 3 && src[0] && src[1]; how++)
		{
			pggpu_data *dst = NULL;
			pggpu_error err = {0};
			int			e[2] = {0, how == 1 ? 2 : 0};
			double	   *out = xmalloc(sizeof(double) * 5 * D.d);
			bool		narrow = dt != PGGPU_FLOAT64 && how != 1;

			set_case("dtype %s: %s rows copied%s", be_name(be), name,
					 how == 1 ? ", one source at a scale" : how == 2 ? ", from two sources" : "");
			if (pggpu_data_open(&dst, be, -1, D.d, 5, &err) != PGGPU_OK ||
				pggpu_copy_rows(dst, src, how == 0 ? 1 : 2, how == 0 ? NULL : which, rows, 5, e, &err) != PGGPU_OK)
				CHECK(false, "copy: %s", err.msg);
			else
			{
				CHECK(pggpu_data_dtype(dst) == (narrow ? dt : PGGPU_FLOAT64) && dst->narrow_held == narrow,
					  "the copy held as %s", dst->narrow_held ? "narrow" : "doubles");
				CHECK(pggpu_data_get_rows(dst, (int64_t[]) {0, 1, 2, 3, 4}, 5, out, &err) == PGGPU_OK, "get_rows: %s",
					  err.msg);
				for (int t = 0; t < 5; t++)
					for (int j = 0; j < D.d; j++)
					{
						double		f = how != 0 && which[t] == 1 ? ldexp(1.0, e[1]) : 1.0;

						if (out[t * D.d + j] != D.X[rows[t] * D.d + j] * f)
						{
							CHECK(false, "row %d column %d: %.17g, not %.17g", t, j, out[t * D.d + j],
								  D.X[rows[t] * D.d + j] * f);
							t = 5;
							break;
						}
					}
			}
			free(out);
			pggpu_data_close(dst);
		}
		pggpu_data_close(src[0]);
		pggpu_data_close(src[1]);
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
			CHECK(!ds->narrow_held && pggpu_data_batch(ds) != NULL, "doubles staged and held");
			CHECK(pggpu_data_push_rows(ds, D.X, NULL, NULL, D.n, &err) == PGGPU_OK, "push_rows: %s", err.msg);
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

	/* a float32 or float16 set widened (standard scaling rewrites its rows) takes no more rows, on either backend */
	for (int b = 0; b < 4; b++)
	{
		pggpu_backend be = b % 2 == 0 ? PGGPU_BACKEND_CPU : PGGPU_BACKEND_GPU;
		pggpu_dtype dt = b < 2 ? PGGPU_FLOAT32 : PGGPU_FLOAT16;
		pggpu_data *ds = NULL;
		pggpu_error err = {0};
		int64_t		B;

		if (be == PGGPU_BACKEND_GPU && !have_gpu)
			continue;
		set_case("dtype %s: no push after widening, %s", be_name(be), dt == PGGPU_FLOAT16 ? "float16" : "float32");
		if (pggpu_data_open(&ds, be, -1, 3, 0, &err) != PGGPU_OK ||
			pggpu_data_set_dtype(ds, dt, &err) != PGGPU_OK)
		{
			CHECK(false, "open: %s", err.msg);
			pggpu_data_close(ds);
			continue;
		}
		B = pggpu_data_batch_rows(ds);
		for (int64_t e = 0; e < 3 * B; e++)
			if (dt == PGGPU_FLOAT16)
				pggpu_data_batch_f16(ds)[e] = pggpu_half_from_double((double) (e % 7));
			else
				pggpu_data_batch_f32(ds)[e] = (float) (e % 7);
		CHECK(pggpu_data_push(ds, B, &err) == PGGPU_OK, "push: %s", err.msg);
		{
			double		mean[3],
						std[3];

			CHECK(pggpu_data_standardize(ds, mean, std, &err) == PGGPU_OK, "standardize: %s", err.msg);
		}
		CHECK(!ds->narrow_held, "standardized rows are held as doubles");
		CHECK(pggpu_data_push(ds, B, &err) == PGGPU_ERR_INVALID, "a push after widening was taken");
		pggpu_data_close(ds);
	}

	/*
	 * Batches by rows (pggpu_data_push_by_rows: a parallel read's parts as
	 * its workers wrote them) give the set the rows that the same batches
	 * by columns give, bit for bit: every type, columns fewer and more than
	 * a block of the GPU's turn (32) and not a multiple of it, halves
	 * widened on the device (d <= 32) and held, a partial last batch
	 */
	for (int b = 0; b < 2; b++)
	{
		static const int ds_[] = {1, 5, 32, 33, 100, 300, 768};
		pggpu_backend be = b == 0 ? PGGPU_BACKEND_CPU : PGGPU_BACKEND_GPU;

		if (be == PGGPU_BACKEND_GPU && !have_gpu)
			continue;
		for (int t = 0; t < 3; t++)
			for (size_t di = 0; di < sizeof(ds_) / sizeof(ds_[0]); di++)
			{
				pggpu_dtype dt = t == 0 ? PGGPU_FLOAT64 : t == 1 ? PGGPU_FLOAT32 : PGGPU_FLOAT16;
				dataset		D = {0};
				pggpu_data *by[2];
				pggpu_error err = {0};

				set_case("dtype %s: batches by rows, type %d, d %d", be_name(be), (int) dt, ds_[di]);
				gen_blobs(&D, 5077, ds_[di], 3, 6.0, 31 + di);
				round_to(&D, dt == PGGPU_FLOAT64 ? PGGPU_FLOAT32 : dt);
				by[0] = load_typed(be, &D, dt, LOAD_COLUMNS);
				by[1] = load_typed(be, &D, dt, LOAD_BY_ROWS);
				if (by[0] && by[1])
				{
					int64_t    *all = xmalloc(sizeof(int64_t) * D.n);
					double	   *x[2];

					for (int64_t r = 0; r < D.n; r++)
						all[r] = D.n - 1 - r;
					for (int w = 0; w < 2; w++)
					{
						x[w] = xmalloc(sizeof(double) * D.n * D.d);
						CHECK(pggpu_data_get_rows(by[w], all, (int) D.n, x[w], &err) == PGGPU_OK,
							  "get_rows: %s", err.msg);
					}
					CHECK(pggpu_data_rows(by[1]) == D.n, "%lld rows by rows of %lld",
						  (long long) pggpu_data_rows(by[1]), (long long) D.n);
					CHECK(memcmp(x[0], x[1], sizeof(double) * D.n * D.d) == 0,
						  "the rows by rows differ from those by columns");
					CHECK(memcmp(x[0], D.X + (D.n - 1) * D.d, sizeof(double) * D.d) == 0,
						  "the last row is not the one pushed");
					free(x[0]);
					free(x[1]);
					free(all);
				}
				pggpu_data_close(by[0]);
				pggpu_data_close(by[1]);
				data_free(&D);
			}
	}

	/*
	 * Cosine's rows read as stored (pggpu_data_hold_wide, pushed by rows,
	 * then pggpu_data_unit_rows): the same doubles as the rows scaled by
	 * pggpu_unit_row before a push into a FLOAT64 set, bit for bit (a
	 * subnormal row and rows of the largest floats among them; parked
	 * before the scaling, too), and a cosine fit of each the same fit; a
	 * set held wide takes no batch by columns
	 */
	for (int b = 0; b < 2; b++)
	{
		pggpu_backend be = b == 0 ? PGGPU_BACKEND_CPU : PGGPU_BACKEND_GPU;

		if (be == PGGPU_BACKEND_GPU && !have_gpu)
			continue;
		for (int t = 0; t < 2; t++)
			for (int di = 0; di < 3; di++)
				for (int park = 0; park < 2; park++)
				{
					static const int dd[] = {3, 33, 300};
					pggpu_dtype dt = t == 0 ? PGGPU_FLOAT32 : PGGPU_FLOAT16;
					dataset		D = {0},
								U = {0};
					pggpu_data *ds[2] = {NULL, NULL};
					pggpu_error err = {0};
					int64_t		B;
					km_out		o[2];
					pggpu_kmeans_params p = {0};

					set_case("dtype %s: unit rows of %s, d %d%s", be_name(be), t ? "halves" : "floats", dd[di],
							 park ? ", parked" : "");
					gen_blobs(&D, 2600, dd[di], 5, 6.0, 90 + di);
					for (int j = 0; j < D.d; j++)
					{
						D.X[7 * D.d + j] = j == 0 ? (t ? ldexp(1.0, -24) : ldexp(1.0, -149)) : 0;	/* subnormal */
						D.X[8 * D.d + j] = t ? 65504.0 : 3.4028234663852886e38;
					}
					round_to(&D, dt);
					gen_blobs(&U, D.n, D.d, 5, 6.0, 90 + di);
					memcpy(U.X, D.X, sizeof(double) * D.n * D.d);
					{
						int64_t		zero = 0;

						for (int64_t i = 0; i < U.n; i++)
							zero += !pggpu_unit_row(U.X + i * U.d, 1, U.d);
						CHECK(zero == 0, "%lld rows are zero", (long long) zero);
					}
					ds[0] = load(be, &U, U.n);
					if (pggpu_data_open(&ds[1], be, -1, D.d, D.n, &err) != PGGPU_OK ||
						pggpu_data_set_dtype(ds[1], dt, &err) != PGGPU_OK ||
						pggpu_data_hold_wide(ds[1], &err) != PGGPU_OK)
					{
						CHECK(false, "open and hold wide: %s", err.msg);
						pggpu_data_close(ds[0]);
						pggpu_data_close(ds[1]);
						data_free(&D);
						data_free(&U);
						continue;
					}
					B = pggpu_data_batch_rows(ds[1]);
					CHECK(pggpu_data_push(ds[1], 1, &err) == PGGPU_ERR_INVALID, "a set held wide took a batch by columns");
					for (int64_t r0 = 0; r0 < D.n; r0 += B)
					{
						int64_t		m = D.n - r0 < B ? D.n - r0 : B;

						for (int64_t e = 0; e < m * D.d; e++)
							if (dt == PGGPU_FLOAT16)
								pggpu_data_batch_f16(ds[1])[e] = pggpu_half_from_double(D.X[r0 * D.d + e]);
							else
								pggpu_data_batch_f32(ds[1])[e] = (float) D.X[r0 * D.d + e];
						CHECK(pggpu_data_push_by_rows(ds[1], m, &err) == PGGPU_OK, "push by rows: %s", err.msg);
					}
					if (park)
						CHECK(pggpu_data_park(ds[1], &err) == PGGPU_OK, "park: %s", err.msg);
					CHECK(pggpu_data_unit_rows(ds[1], &err) == PGGPU_OK, "unit rows: %s", err.msg);
					CHECK(!ds[1]->narrow_held, "unit rows held as doubles");
					if (ds[0])
					{
						int64_t    *all = xmalloc(sizeof(int64_t) * D.n);
						double	   *x = xmalloc(sizeof(double) * D.n * D.d);
						int64_t		bad = 0;

						for (int64_t r = 0; r < D.n; r++)
							all[r] = r;
						CHECK(pggpu_data_get_rows(ds[1], all, (int) D.n, x, &err) == PGGPU_OK, "get_rows: %s", err.msg);
						for (int64_t e = 0; e < D.n * D.d; e++)
							bad += memcmp(&x[e], &U.X[e], sizeof(double)) != 0;
						CHECK(bad == 0, "%lld values differ from pggpu_unit_row's", (long long) bad);
						free(x);
						free(all);
						for (int w = 0; w < 2; w++)
						{
							km_alloc(&o[w], D.n, 5, D.d);
							pggpu_data_set_metric(ds[w], PGGPU_METRIC_COSINE);
							p.k = 5;
							p.max_iter = 10;
							p.tol = 0;
							p.init = PGGPU_INIT_KMEANSPP;
							p.seed = 3;
							p.n_init = 1;
							fit_set(ds[w], &p, &o[w], &err);
							CHECK(o[w].st == PGGPU_OK, "cosine fit: %s", err.msg);
						}
						if (o[0].st == PGGPU_OK && o[1].st == PGGPU_OK)
							cmp_km("unit rows against rows scaled before the push", &o[1], &o[0], D.n, 5, D.d, 0.0);
						km_free(&o[0]);
						km_free(&o[1]);
					}
					pggpu_data_close(ds[0]);
					pggpu_data_close(ds[1]);
					data_free(&D);
					data_free(&U);
				}
	}

	/*
	 * The halves' conversions (compute_internal.h) against the compiler's
	 * binary16 (GCC's _Float16: correctly rounded): every half to a float,
	 * and doubles to halves, ties, subnormals, overflow and signs included
	 */
#ifdef __FLT16_MANT_DIG__
	{
		rng			r = rng_make(16);
		int64_t		bad = 0;

		set_case("dtype: halves' conversions");
		for (uint32_t h = 0; h < 65536; h++)
		{
			_Float16	f;
			float		want,
						got = pggpu_half_to_float((uint16_t) h);
			uint16_t	hb = (uint16_t) h;

			memcpy(&f, &hb, sizeof(f));
			want = (float) f;
			if (isnan(want) ? !isnan(got) : memcmp(&want, &got, sizeof(float)) != 0)
				bad++;
			else if (!isnan(want) && pggpu_half_from_double((double) want) != hb)
				bad++;
		}
		for (int i = 0; i < 200000; i++)
		{
			/* values around every binade of halves and past them, and exact midpoints */
			double		v = ldexp(1 + rng_unif(&r), (int) (rng_unif(&r) * 50) - 28);
			_Float16	f;
			uint16_t	want;

			if (i % 3 == 0)
			{
				/* halfway between two neighbouring halves (ties: to even), 0 to 65504 */
				uint16_t	h = (uint16_t) (rng_u64(&r) % 0x7bff);

				v = ((double) pggpu_half_to_float(h) + (double) pggpu_half_to_float((uint16_t) (h + 1))) / 2;
			}
			if (i % 2)
				v = -v;
			f = (_Float16) v;
			memcpy(&want, &f, sizeof(want));
			bad += pggpu_half_from_double(v) != want;
		}
		CHECK(bad == 0, "%lld conversions differ from _Float16's", (long long) bad);
	}
#endif
}
