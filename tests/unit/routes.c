#include "unit.h"

#include "route.h"

/* ---- the routes of a Lloyd step (route.c), as a table ---------------------- */

/* an H100's shape: 132 SMs, 227 KB of shared memory a block */
static const pggpu_gpu_shape h100 = {132, 232448};

#define MAX_GRID 1056			/* 132 SMs x 8 blocks (gpu/dataset.cu) */
#define RANGE_WORK 549755813888.0	/* 2^39 (gpu/step.cu) */

typedef struct route_case
{
	int64_t		n;
	int			k;
	int			d;
	pggpu_label_route force;
	bool		no_fuse;
	/* expected */
	pggpu_label_route label;
	pggpu_sum_route sum;
	int			mode;			/* UPD_* */
	bool		ranged;
	bool		f16;
	int			ks;
	int			shape;			/* lloyd: dr_label; tc_scan: nw; tc_resident: nm */
	const char *why;			/* the reason the row stands for */
} route_case;

static const route_case route_cases[] = {
	/* few centroids: lloyd_kernel labels and sums in one pass, rows in registers */
	{10000000, 8, 8, 0, false, PGGPU_LABEL_LLOYD, PGGPU_SUM_IN_PASS, UPD_PRIVATE, false, false, 0, 8, "k = 8"},
	{10000000, 2, 2, 0, false, PGGPU_LABEL_LLOYD, PGGPU_SUM_IN_PASS, UPD_PRIVATE, false, false, 0, 4, "d = 2"},
	{10000000, 63, 8, 0, false, PGGPU_LABEL_LLOYD, PGGPU_SUM_IN_PASS, UPD_PRIVATE, false, false, 0, 8, "k under 64"},
	{10000000, 127, 2, 0, false, PGGPU_LABEL_LLOYD, PGGPU_SUM_IN_PASS, UPD_PRIVATE, false, false, 0, 4, "k under 128 at d = 2"},
	/* d > 32: lloyd_kernel with centroid tiles, whatever k */
	{10000000, 50, 40, 0, false, PGGPU_LABEL_LLOYD, PGGPU_SUM_IN_PASS, UPD_SHARED, false, false, 0, 0, "d = 40"},
	/* d > 32 from k = 64: the FP16 product, then lloyd_kernel sums by the labels */
	{1000000, 1024, 128, 0, false, PGGPU_LABEL_GEMM_F16, PGGPU_SUM_SORTED, UPD_GLOBAL, false, false, 0, 0, "d = 128, k = 1024"},
	{1000000, 64, 768, 0, false, PGGPU_LABEL_GEMM_F16, PGGPU_SUM_SORTED, UPD_GLOBAL, false, false, 0, 0, "d = 768, k = 64"},
	{1000000, 63, 768, 0, false, PGGPU_LABEL_LLOYD, PGGPU_SUM_IN_PASS, UPD_GLOBAL, false, false, 0, 0, "d = 768, k = 63"},
	/* k <= 256, small d: tc_resident, fused with the update */
	{10000000, 256, 8, 0, false, PGGPU_LABEL_TC_RESIDENT, PGGPU_SUM_IN_PASS, UPD_PRIVATE, false, true, 2, 16, "k = 256, d = 8: f16"},
	{10000000, 128, 8, 0, false, PGGPU_LABEL_TC_RESIDENT, PGGPU_SUM_IN_PASS, UPD_PRIVATE, false, false, 3, 8, "k = 128, d = 8: tf32"},
	{10000000, 256, 4, 0, false, PGGPU_LABEL_TC_RESIDENT, PGGPU_SUM_IN_PASS, UPD_PRIVATE, false, true, 1, 16, "d = 4: f16 at one k-step"},
	{10000000, 128, 2, 0, false, PGGPU_LABEL_TC_RESIDENT, PGGPU_SUM_IN_PASS, UPD_PRIVATE, false, false, 1, 8, "d = 2 from k = 128"},
	/* no fused kernel in the table (it spilled): labels, then owned_update_kernel */
	{10000000, 256, 5, 0, false, PGGPU_LABEL_TC_RESIDENT, PGGPU_SUM_IN_PASS, UPD_PRIVATE, false, true, 1, 16, "d = 5: f16 at one k-step"},
	{10000000, 256, 10, 0, false, PGGPU_LABEL_TC_RESIDENT, PGGPU_SUM_OWNED, UPD_PRIVATE, false, true, 2, 16, "f16 2 k-steps of 10 columns, 16 m-tiles"},
	{10000000, 256, 8, 0, true, PGGPU_LABEL_TC_RESIDENT, PGGPU_SUM_OWNED, UPD_PRIVATE, false, true, 2, 16, "no_fuse"},
	/* KS = 3 with 9..12 m-tiles: no row (spills), tc_scan */
	{10000000, 160, 8, 0, false, PGGPU_LABEL_TC_SCAN, PGGPU_SUM_OWNED, UPD_PRIVATE, false, false, 3, 16, "k = 160, d = 8"},
	/* 16 < d <= 32 and k <= 256: tc_scan, owned update */
	{10000000, 256, 32, 0, false, PGGPU_LABEL_TC_SCAN, PGGPU_SUM_OWNED, UPD_PRIVATE, false, true, 6, 8, "d = 32"},
	/* k > 256: tc_scan, then lloyd_kernel sums by the labels given */
	{10000000, 1024, 8, 0, false, PGGPU_LABEL_TC_SCAN, PGGPU_SUM_LABELS_GIVEN, UPD_SHARED, false, true, 2, 16, "k = 1024, d = 8"},
	{10000000, 1024, 2, 0, false, PGGPU_LABEL_TC_SCAN, PGGPU_SUM_LABELS_GIVEN, UPD_SHARED, false, false, 1, 16, "k = 1024, d = 2"},
	{10000000, 65536, 32, 0, false, PGGPU_LABEL_TC_SCAN, PGGPU_SUM_SORTED, UPD_GLOBAL, true, true, 6, 8, "k = 65536: 1.3e12 / 16, ranged"},
	/* more than 2^39 squared differences a pass: labelled in ranges first */
	{1000000000, 50, 40, 0, false, PGGPU_LABEL_LLOYD, PGGPU_SUM_LABELS_GIVEN, UPD_SHARED, true, false, 0, 0, "2e12 on the CUDA cores"},
	{100000000, 1024, 40, 0, false, PGGPU_LABEL_GEMM_F16, PGGPU_SUM_SORTED, UPD_GLOBAL, false, false, 0, 0, "4e12 as a product: it polls between chunks"},
	{100000000, 4096, 32, 0, false, PGGPU_LABEL_TC_SCAN, PGGPU_SUM_SORTED, UPD_GLOBAL, true, true, 6, 8, "1.3e13 / 16 on the tensor cores"},
	{100000000, 200, 40, 0, false, PGGPU_LABEL_GEMM_F16, PGGPU_SUM_LABELS_GIVEN, UPD_SHARED, false, false, 0, 0, "d = 40, k = 200"},
	/* forced (tests): where the route can run */
	{100000, 256, 8, PGGPU_LABEL_LLOYD, false, PGGPU_LABEL_LLOYD, PGGPU_SUM_IN_PASS, UPD_SHARED, false, false, 0, 8, "forced lloyd"},
	{100000, 8, 2, PGGPU_LABEL_TC_SCAN, false, PGGPU_LABEL_TC_SCAN, PGGPU_SUM_LABELS_GIVEN, UPD_PRIVATE, false, false, 1, 16, "forced tc_scan, k = 8"},
	{100000, 256, 8, PGGPU_LABEL_TC_SCAN, false, PGGPU_LABEL_TC_SCAN, PGGPU_SUM_OWNED, UPD_PRIVATE, false, true, 2, 16, "forced tc_scan, k = 256"},
	{100000, 40, 4, PGGPU_LABEL_TC_RESIDENT, false, PGGPU_LABEL_TC_RESIDENT, PGGPU_SUM_IN_PASS, UPD_PRIVATE, false, false, 2, 4, "forced tc_resident, k = 40"},
	{100000, 1024, 8, PGGPU_LABEL_TC_RESIDENT, false, PGGPU_LABEL_TC_SCAN, PGGPU_SUM_LABELS_GIVEN, UPD_SHARED, false, true, 2, 16, "forced tc_resident, k = 1024: cannot"},
	{100000, 256, 8, PGGPU_LABEL_GEMM, false, PGGPU_LABEL_GEMM, PGGPU_SUM_OWNED, UPD_PRIVATE, false, false, 0, 0, "forced gemm, d = 8"},
	{100000, 256, 8, PGGPU_LABEL_GEMM_F16, false, PGGPU_LABEL_GEMM_F16, PGGPU_SUM_OWNED, UPD_PRIVATE, false, false, 0, 0, "forced gemm_f16, d = 8"},
	{1000000, 1024, 768, PGGPU_LABEL_GEMM, false, PGGPU_LABEL_GEMM, PGGPU_SUM_SORTED, UPD_GLOBAL, false, false, 0, 0, "forced gemm, d = 768"},
	{100000, 50, 40, PGGPU_LABEL_TC_SCAN, false, PGGPU_LABEL_LLOYD, PGGPU_SUM_IN_PASS, UPD_SHARED, false, false, 0, 0, "forced tc_scan, d = 40: cannot"},
};

static int
route_shape(const pggpu_route *r)
{
	return r->label == PGGPU_LABEL_LLOYD ? r->dr_label : r->label == PGGPU_LABEL_TC_SCAN ? r->nw :
		r->label == PGGPU_LABEL_TC_RESIDENT ? r->nm : 0;
}

/* the planner's route for a case, described into line */
static void
plan_case(const route_case *c, pggpu_route *r, char *line, size_t len)
{
	pggpu_route_force f = {c->force, 0, 0, 0, c->no_fuse};

	pggpu_plan_step(c->n, c->k, c->d, &h100, RANGE_WORK, MAX_GRID, true, &f, r);
	pggpu_route_describe(r, line, len);
}

/*
 * The table as markdown (unit_compute --route-table): docs/routes.md holds
 * it, and tests/run.sh fails when the two differ, so the docs' table is the
 * planner's and the test's
 */
void
print_route_table(void)
{
	char		line[512];

	printf("| n | k | d | forced | what `pggpu_plan_step` plans (`SET client_min_messages = debug2` shows it) | the case |\n");
	printf("| --- | --- | --- | --- | --- | --- |\n");
	for (size_t i = 0; i < sizeof(route_cases) / sizeof(route_cases[0]); i++)
	{
		const route_case *c = &route_cases[i];
		pggpu_route r;

		plan_case(c, &r, line, sizeof(line));
		for (char *q = line; *q; q++)
			if (*q == '|')
				*q = '/';
		printf("| %lld | %d | %d | %s | %s | %s |\n", (long long) c->n, c->k, c->d,
			   c->no_fuse ? "not fused" : c->force ? pggpu_label_route_name(c->force) : "", line, c->why);
	}
}

void
test_route_table(void)
{
	char		line[256];

	for (size_t i = 0; i < sizeof(route_cases) / sizeof(route_cases[0]); i++)
	{
		const route_case *c = &route_cases[i];
		pggpu_route r;

		plan_case(c, &r, line, sizeof(line));
		set_case("route n=%lld k=%d d=%d (%s)", (long long) c->n, c->k, c->d, c->why);
		CHECK(r.label == c->label && r.sum == c->sum && r.mode == c->mode && r.ranged == c->ranged &&
			  r.f16 == c->f16 && r.ks == c->ks && route_shape(&r) == c->shape,
			  "planned %s; wanted %s, sums %d (mode %d), ranged %d, %s ks=%d shape %d", line,
			  pggpu_label_route_name(c->label), (int) c->sum, c->mode, c->ranged,
			  c->f16 ? "f16" : "tf32", c->ks, c->shape);
		if (verbose)
			printf("#   n=%lld k=%d d=%d: %s\n", (long long) c->n, c->k, c->d, line);
	}

	/* the user's precision double: the float64 product where FP16 would run */
	set_case("route n=1000000 k=1024 d=768, double only");
	{
		pggpu_route r;

		pggpu_plan_step(1000000, 1024, 768, &h100, RANGE_WORK, MAX_GRID, false, NULL, &r);
		CHECK(r.label == PGGPU_LABEL_GEMM && r.sum == PGGPU_SUM_SORTED, "planned %s",
			  pggpu_route_describe(&r, line, sizeof(line)));
	}

	/*
	 * The estimates that choose how many GPUs a k-means call uses
	 * (src/gpus.c), against 2 H200s' steps (BENCHMARKS.md section 9): at
	 * 10^6 x 768, k = 4096 on the FP16 product a step took 29 ms on one GPU
	 * and 58 ms over two (the combine costs more than half a step saves);
	 * 10 times the rows, or float64 products, and two GPUs save more
	 */
	set_case("route estimates: when two GPUs pay");
	{
		const double one = pggpu_estimate_step_ms(1e6, 768, 4096, false),
					dbl = pggpu_estimate_step_ms(1e6, 768, 4096, true),
					big = pggpu_estimate_step_ms(1e7, 768, 4096, false),
					mix = pggpu_estimate_combine_ms(4096, 768);

		CHECK(one > 20 && one < 60 && one / 2 < mix, "10^6 x 768, k = 4096: %.1f ms, combine %.1f", one, mix);
		CHECK(dbl / 2 > mix && big / 2 > mix, "float64 %.1f ms, 10^7 rows %.1f, combine %.1f", dbl, big, mix);
		CHECK(pggpu_estimate_step_ms(1e6, 32, 4096, false) == pggpu_estimate_step_ms(1e6, 32, 4096, true),
			  "d <= 32 takes no FP16 product");
	}

	/* a GPU whose blocks get less shared memory than the sorted update's: lloyd_kernel's global atomics */
	set_case("route n=1000000 k=1024 d=768, 99 KB of shared memory a block");
	{
		const pggpu_gpu_shape small = {84, 101376};
		pggpu_route r;

		pggpu_plan_step(1000000, 1024, 768, &small, RANGE_WORK, MAX_GRID, true, NULL, &r);
		CHECK(r.label == PGGPU_LABEL_GEMM_F16 && r.sum == PGGPU_SUM_LABELS_GIVEN && r.mode == UPD_GLOBAL,
			  "planned %s", pggpu_route_describe(&r, line, sizeof(line)));
	}

	/*
	 * Over a grid of shapes: the plan is self-consistent (shared memory
	 * within the GPU's, the update's partial sums allocated where it
	 * needs them, the tensor cores only for d <= 32, fused only on
	 * tc_resident), and no interrupt callback means no ranges.
	 */
	set_case("route grid");
	{
		int			bad = 0;
		char		first[300] = "";

		for (int d = 1; d <= 64; d += d < 16 ? 1 : 8)
			for (int k = 1; k <= 70000; k = k < 300 ? k + 1 : k * 2)
			{
				pggpu_route r;
				bool		ok;

				pggpu_plan_step(1000000, k, d, &h100, 0, MAX_GRID, true, NULL, &r);
				ok = r.smem <= (size_t) h100.smem_optin && r.label_smem <= (size_t) h100.smem_optin &&
					!r.ranged && (r.label == PGGPU_LABEL_LLOYD || (r.label == PGGPU_LABEL_GEMM_F16) == (d > 32)) &&
					((r.mode != UPD_PRIVATE) || r.part_rows > 0) &&
					(r.sum != PGGPU_SUM_IN_PASS || r.label != PGGPU_LABEL_TC_SCAN) &&
					(r.label != PGGPU_LABEL_TC_RESIDENT || (k <= 256 && d <= 16 && r.nm * 16 >= k)) &&
					r.why != NULL;
				if (!ok && bad++ == 0)
					snprintf(first, sizeof(first), "k=%d d=%d: %s", k, d,
							 pggpu_route_describe(&r, line, sizeof(line)));
			}
		CHECK(bad == 0, "%d inconsistent plans, the first %s", bad, first);
	}
}

/*
 * Every route the planner can force, on the GPU, against the CPU
 * reference: memberships and sizes identical, centroids and inertia within
 * 1e-9 (the update's sums in another order), and the data set names the
 * route that ran.  Blobs for every shape; for the products (d > 32) also
 * rows of a few integer points (exact ties everywhere), blobs shifted 10^6
 * from the origin, and uniform rows.  Tight blobs leave the FP16 product
 * most rows uncertain (it hands the fit to the float64 product, and says
 * so); on uniform rows it must certify most rows itself.
 */
/*
 * One fit from given centroids C on the GPU, the FP16 product forced,
 * against the CPU's; certify: the FP16 product must have run throughout
 * (it certified most rows itself).
 */
static char last_route[512];	/* f16_vs_cpu's last GPU fit's route */

static void
f16_vs_cpu(const char *what, dataset *D, int64_t n, int d, int k, const double *C, int max_iter, bool certify)
{
	km_out		ref = {0},
				o = {0};
	pggpu_kmeans_params p = {0};
	pggpu_error err = {0};
	pggpu_data *ds;

	last_route[0] = '\0';
	p.k = k;
	p.max_iter = max_iter;
	p.tol = 0;
	p.init = PGGPU_INIT_GIVEN;
	p.init_centroids = C;
	km_alloc(&ref, n, k, d);
	km_alloc(&o, n, k, d);
	set_case("routes: %s: cpu reference", what);
	if (km_run(PGGPU_BACKEND_CPU, D, n, &p, &ref))
	{
		set_case("routes: %s", what);
		if (!have_gpu)
			gpu_skipped++;
		else if ((ds = load(PGGPU_BACKEND_GPU, D, n)) != NULL)
		{
			pggpu_data_force_route(ds, PGGPU_LABEL_GEMM_F16, false);
			fit_set(ds, &p, &o, &err);
			if (CHECK(o.st == PGGPU_OK, "gpu k-means: %s", err.msg))
			{
				CHECK(strstr(pggpu_data_route(ds), "% of rows uncertain in FP16") != NULL &&
					  (!certify || strstr(pggpu_data_route(ds), "float64 alone") == NULL),
					  "the FP16 product did not run throughout: \"%s\"", pggpu_data_route(ds));
				cmp_km("gemm_f16 vs cpu", &ref, &o, n, k, d, 1e-9);
				snprintf(last_route, sizeof(last_route), "%s", pggpu_data_route(ds));
				if (verbose)
					printf("#   %s\n", pggpu_data_route(ds));
			}
			pggpu_data_close(ds);
		}
	}
	km_free(&ref);
	km_free(&o);
}

/*
 * Emptied clusters on the FP16 product: given centroids with three
 * duplicated (the copy, at the higher index, gets no row), so that the
 * first step empties three clusters and their repair reads the rows'
 * distances, which that step, wanting none, left unmeasured for the rows
 * it certified (step.cu: dists_stale): measured then from that step's
 * centroids, the repair takes the CPU's rows.  Uniform rows, which the
 * FP16 product certifies mostly by itself.
 */
static void
routes_gpu_repair(void)
{
	const int64_t n = 20000;
	const int	d = 96,
				k = 24;
	dataset		D;
	double	   *C = (double *) xmalloc(sizeof(double) * k * d);

	gen_uniform(&D, n, d, -1, 1, 4242);
	memcpy(C, D.X, sizeof(double) * k * d);
	for (int c = 0; c < 3; c++)
		memcpy(C + (int64_t) (5 * c + 2) * d, C + (int64_t) (5 * c + 1) * d, sizeof(double) * d);
	f16_vs_cpu("emptied clusters repaired after gemm_f16 steps", &D, n, d, k, C, 10, true);
	free(C);
	data_free(&D);
}

/*
 * Tight blobs far from the data's mean, a few hundred centroids or fewer:
 * 11 bits leave most rows uncertain, and measuring their candidates costs
 * more than the float64 product of so few centroids, so the FP16 route's
 * first pass hands the rest of the fit to that product (gemm_assign.cu's
 * F16_UNCERTAIN_K); the answers the CPU's
 */
static void
routes_gpu_uncertain(void)
{
	const int64_t n = 20000;
	const int	d = 96,
				k = 64;
	dataset		D;

	/* (four blobs, 16 centroids in each: near ties whose distances 11 bits cannot tell apart) */
	gen_blobs(&D, n, d, 4, 6.0, 5153);
	f16_vs_cpu("most rows uncertain, 64 centroids", &D, n, d, k, D.X, 4, false);
	if (have_gpu && last_route[0])
		CHECK(strstr(last_route, "then float64 alone (over half uncertain)") != NULL,
			  "the FP16 product kept: \"%s\"", last_route);
	data_free(&D);
}

/*
 * More than 4096 centroids: the FP16 product's rows labelled a block a row
 * (gemm_label.cu: label_f16_kernel, WIDE), from the first k rows.
 * Uniform rows, which it must certify mostly by itself (the uncertain ones
 * measured against their candidates); tight blobs, about 139 centroids
 * each, whose rows have tens to hundreds of candidates (nearest_block up
 * to the cap, k / 40 = 104 here, the float64 product beyond); and a few
 * points, each the centroid about 69 times (60 points: every row's exact
 * ties measured by nearest_block, none left to the float64 product, the
 * lowest index winning) or about 208 times (20 points: more than the cap,
 * every row left to the float64 product).
 */
static void
routes_gpu_wide(void)
{
	const int64_t n = 8192;
	const int	d = 40,
				k = 4160;
	dataset		D;

	gen_uniform(&D, n, d, -1, 1, 5151);
	f16_vs_cpu("k = 4160 (a block a row), uniform", &D, n, d, k, D.X, 2, true);
	data_free(&D);
	gen_blobs(&D, n, d, 30, 12.0, 5152);
	f16_vs_cpu("k = 4160 (a block a row), blobs", &D, n, d, k, D.X, 2, false);
	data_free(&D);
	gen_few(&D, n, d, 60, 5153);
	f16_vs_cpu("k = 4160 (a block a row), 60 points", &D, n, d, k, D.X, 2, true);
	if (have_gpu)
		CHECK(strstr(last_route, ", 0.0% left to float64") != NULL,
			  "60 points: rows left to the float64 product: \"%s\"", last_route);
	data_free(&D);
	gen_few(&D, n, d, 20, 5154);
	f16_vs_cpu("k = 4160 (a block a row), 20 points", &D, n, d, k, D.X, 2, false);
	data_free(&D);
}

void
test_routes_gpu(void)
{
	static const int shapes[][3] = {{4, 256, 0}, {8, 128, 0}, {8, 1000, 0}, {20, 64, 0}, {40, 50, 0},
	{2, 40, 0}, {130, 300, 0}, {40, 200, 0}, {130, 300, 1}, {96, 64, 2}, {64, 256, 3}};
	static const char *const kinds[] = {"blobs", "few points", "shifted blobs", "uniform"};
	static const struct
	{
		int			label;
		bool		no_fuse;
		const char *name;
	}			forces[] = {{0, false, ""}, {PGGPU_LABEL_LLOYD, false, "lloyd"},
		{PGGPU_LABEL_TC_SCAN, false, "tc_scan"}, {PGGPU_LABEL_TC_RESIDENT, false, "tc_resident"},
		{PGGPU_LABEL_TC_RESIDENT, true, "tc_resident"}, {PGGPU_LABEL_GEMM, false, "gemm"},
		{PGGPU_LABEL_GEMM_F16, false, "gemm_f16"}};

	for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++)
	{
		const int	d = shapes[si][0],
					k = shapes[si][1],
					kind = shapes[si][2];
		const int64_t n = 8192;
		dataset		D;
		km_out		ref = {0};
		pggpu_kmeans_params p = {0};

		if (kind == 1)
			gen_few(&D, n, d, 500, 700 + si);
		else if (kind == 3)
			gen_uniform(&D, n, d, -1, 1, 700 + si);
		else
			gen_blobs(&D, n, d, 30, 12.0, 700 + si);
		if (kind == 2)
			for (int64_t e = 0; e < n * d; e++)
				D.X[e] += 1e6;
		p.k = k;
		p.max_iter = 5;
		p.tol = 0;
		p.init = PGGPU_INIT_KMEANSPP;
		p.seed = 11;
		km_alloc(&ref, n, k, d);
		set_case("routes d=%d k=%d %s: cpu reference", d, k, kinds[kind]);
		if (!km_run(PGGPU_BACKEND_CPU, &D, n, &p, &ref))
		{
			km_free(&ref);
			data_free(&D);
			continue;
		}
		for (size_t fi = 0; fi < sizeof(forces) / sizeof(forces[0]); fi++)
		{
			km_out		o = {0};
			pggpu_error err = {0};
			pggpu_data *ds;
			pggpu_route planned;
			pggpu_route_force f = {(pggpu_label_route) forces[fi].label, 0, 0, 0, forces[fi].no_fuse};
			char		want[64];

			set_case("routes d=%d k=%d %s forced %s%s", d, k, kinds[kind],
					 forces[fi].label ? forces[fi].name : "none", forces[fi].no_fuse ? " (no fuse)" : "");
			if (!have_gpu)
			{
				gpu_skipped++;
				continue;
			}
			ds = load(PGGPU_BACKEND_GPU, &D, n);
			if (ds == NULL)
				continue;
			pggpu_data_force_route(ds, forces[fi].label, forces[fi].no_fuse);
			km_alloc(&o, n, k, d);
			fit_set(ds, &p, &o, &err);
			if (CHECK(o.st == PGGPU_OK, "gpu k-means: %s", err.msg))
			{
				/* the route that ran is the one the planner gives for this forcing */
				pggpu_plan_step(n, k, d, &h100, 0, MAX_GRID, true, &f, &planned);
				snprintf(want, sizeof(want), "route %s ", pggpu_label_route_name(planned.label));
				CHECK(strncmp(pggpu_data_route(ds), want, strlen(want)) == 0,
					  "ran \"%s\", planned %s", pggpu_data_route(ds), want);
				if (kind == 3 && planned.label == PGGPU_LABEL_GEMM_F16)
					CHECK(strstr(pggpu_data_route(ds), "float64 alone") == NULL &&
						  strstr(pggpu_data_route(ds), "% of rows uncertain in FP16") != NULL,
						  "uniform rows: the FP16 product gave up: \"%s\"", pggpu_data_route(ds));
				cmp_km("forced route vs cpu", &ref, &o, n, k, d, kind == 2 ? 1e-9 * 1e6 : 1e-9);
				if (verbose)
					printf("#   %s\n", pggpu_data_route(ds));
			}
			pggpu_data_close(ds);
			km_free(&o);
		}
		km_free(&ref);
		data_free(&D);
	}
	routes_gpu_repair();
	routes_gpu_uncertain();
	routes_gpu_wide();
}
