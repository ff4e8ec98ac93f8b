#include "unit.h"

/* ---- the shape grid ----------------------------------------------------------- */

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
	{"blobs", 1000000, 2, 4, DATA_BLOBS, 0, 0, I_PP | I_PAR, 50, 0},
	{"uniform", 200000, 5, 8, DATA_UNIFORM, 0, 0, I_GIVEN, 30, 1},
	/* wide rows, many centroids */
	{"blobs", 20000, 128, 4, DATA_BLOBS, 0, 0, I_GIVEN | I_PP, 50, 1},
	{"blobs", 20000, 8, 1024, DATA_BLOBS, 0, 0, I_GIVEN | I_PP | I_PAR, 20, 1},
	{"uniform", 3000, 128, 100, DATA_UNIFORM, 0, 0, I_PP | I_PAR, 10, -1},
	{"blobs", 5000, 33, 33, DATA_BLOBS, 0, 0, I_ALL, 50, 1},
	{"uniform", 5000, 31, 9, DATA_UNIFORM, 0, 0, I_GIVEN | I_RAND, 50, 1},
	{"uniform", 5000, 32, 16, DATA_UNIFORM, 0, 0, I_PP, 50, 0},
	{"blobs", 5000, 32, 17, DATA_BLOBS, 0, 0, I_GIVEN, 50, 1},
	{"blobs", 4096, 2, 5, DATA_BLOBS, 0, 0, I_ALL, 50, 1},
	{"uniform", 4097, 2, 32, DATA_UNIFORM, 0, 0, I_GIVEN, 200, 1},
	/* k-means++ must find every blob when they are far apart */
	{"far blobs", 20000, 5, 10, DATA_BLOBS, 0, 1000, I_PP | I_PAR, 50, 1},
	{"far blobs", 20000, 3, 100, DATA_BLOBS, 0, 1000, I_PP | I_PAR, 50, 1},
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
	{"big blobs", 1000000, 128, 1024, DATA_BLOBS, 0, 0, I_GIVEN | I_PP | I_PAR, 10, 1, false, MODE_FULL_GPU},
	{"big blobs", 1000000, 32, 1024, DATA_BLOBS, 0, 0, I_GIVEN | I_RAND, 10, -1, false, MODE_FULL_GPU},
	{"big uniform", 1000000, 1, 1024, DATA_UNIFORM, 0, 0, I_PP | I_PAR, 20, 0, false, MODE_FULL_GPU},
	{"big far centroid", 1000000, 16, 64, DATA_FAR, 1, 0, I_GIVEN, 20, 1, false, MODE_FULL_GPU},
};

void
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
double *
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
		(init == PGGPU_INIT_GIVEN ||
		 ((init == PGGPU_INIT_KMEANSPP || init == PGGPU_INIT_PARALLEL) && gc->value >= 1000));

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

void
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
		if (gc->inits & I_PAR)
			run_case(gc, PGGPU_INIT_PARALLEL);
	}
}

/* ---- the naive reference on its own terms ------------------------------------ */

/*
 * CPU backend vs the naive Lloyd beyond the grid: blobs, uniform data that
 * needs many iterations, an iteration cap that stops it early, and tol > 0;
 * the GPU against the CPU backend on each.
 */
void
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

void
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
void
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

void
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

void
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

	/*
	 * --full: more rows than a span of the GPU's FP16 route (2^20,
	 * gpu/gemm_assign.cu: SPAN_ROWS), integer rows among integer centroids
	 * of which the last 4 repeat the first 4: exact ties in both spans,
	 * measured in place or left to the float64 product, the lowest index
	 * winning.
	 */
	if (full_grid)
	{
		dataset		D;
		const int	d = 33,
					k = 64;
		double		C[64 * 33];

		data_alloc(&D, 1100000, d, false);
		for (int64_t i = 0; i < D.n; i++)
			for (int j = 0; j < d; j++)
				D.X[i * d + j] = (double) ((i * 7 + j * 3 + i / 5) % 4);
		for (int c = 0; c < k; c++)
			for (int j = 0; j < d; j++)
				C[c * d + j] = c >= k - 4 ? C[(c - (k - 4)) * d + j] : (double) ((c * 5 + j + c / 7) % 4);
		assign_case("integer rows, two certified spans", &D, C, k);
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
void
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

void
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

/* ---- fit only (no labels) ------------------------------------------------------- */

void
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
