/*
 * tests/unit/unit_compute - unit tests of pg_gpu's compute layer (cuda/), without
 * PostgreSQL: main.c runs the sections of the files in tests/unit, one
 * subject each (listed in docs/layout.md, "tests/", which tests/maps.sh
 * holds to the files), on common.c's bookkeeping, data and references.
 *
 *   tests/unit/unit_compute          the CI-sized grid (CPU; the GPU too if any)
 *   tests/unit/unit_compute --full   adds a heavier grid and the kernel grid (every
 *                               GPU routine over the GPU suite's shapes), for
 *                               a GPU machine: a few minutes on 16 cores
 *   tests/unit/unit_compute --small --only=kernel-grid,...
 *                               the kernel grid up to N = 1000, for
 *                               compute-sanitizer (tests/gpu/gpu-check.sh)
 *   (--verbose prints a line for every k-means run and matrix product)
 *
 * What is checked:
 *   - the CPU backend against a naive Lloyd written here from the documented
 *     rules (same arithmetic, so labels and iterations must agree exactly);
 *   - the transform (every row's n nearest centroids) against the
 *     reference's distances and the assignment, on both backends;
 *   - hierarchical k-means: its shares by hand, blobs within groups found
 *     as built, every row labelled by its nearest centroid, one fit over
 *     placements, row orders and devices, an interrupt while its groups
 *     fit at once on the GPU;
 *   - sample weights: a fit by hand, every weight 1 as none (bit for bit
 *     on the CPU), integer weights as repeated rows, rows of weight 0 never
 *     seeds nor pulling a centroid, one fit over parts, the GPU as the
 *     CPU, weights out of range refused, a sample of weighted rows;
 *   - loading through the staging batches, with good, missing and far too
 *     small row-count hints;
 *   - the GPU backend against the CPU backend: same seeds, memberships and
 *     iterations, centroids and inertia up to summation order;
 *   - the k-means++ draw: outcome frequencies over 2000 seeds against the
 *     law enumerated here, and the GPU seed for seed as the CPU (by either
 *     kernel of a k-means++ step);
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
#include "unit.h"

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
		else if (strcmp(argv[i], "--route-table") == 0)
		{
			print_route_table();
			return 0;
		}
		else
		{
			fprintf(stderr, "usage: %s [--full | --small] [--only=SECTION,...] [--verbose] | --route-table\n"
					"  --full      also run the heavier grid and the kernel grid (a GPU machine)\n"
					"  --small     the kernel grid up to N = 1000, float64 (for compute-sanitizer)\n"
					"  --only=...  just these sections (names as printed, - for a space)\n"
					"  --verbose   a line for every k-means run\n"
					"  --route-table  print the planner's route table (docs/routes.md) and exit\n", argv[0]);
			return 2;
		}
	}

	ngpu = pggpu_gpu_count(&err);
	have_gpu = ngpu > 0;
	unit_gpus = ngpu > 0 ? ngpu : 0;
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
	section("transform", test_transform);
	section("reference", test_reference);
	section("fit only", test_fit_only);
	section("draw", test_draw);
	section("weighted draw", test_weighted_draw);
	section("k-means++ steps", test_pp_kernels);
	section("cpu gemm", test_cpu_gemm);
	section("n_init", test_n_init);
	section("hierarchical", test_hierarchical);
	section("sample weights", test_sample_weights);
	section("reuse", test_reuse);
	section("standardize", test_standardize);
	section("silhouette", test_silhouette);
	section("parts", test_parts);
	section("sample", test_sample);
	section("dtype", test_dtype);
	section("interrupts", test_interrupts);
	section("threads", test_threads);
	section("scaling", test_scaling);
	section("mixed magnitudes", test_mixed_magnitudes);
	section("cosine", test_cosine);
	section("knn", test_knn);
	section("route table", test_route_table);
	section("routes on the GPU", test_routes_gpu);
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
	section("mm split", test_mm_split);

	printf("# total %.1f s\n", now_s() - t0);
	if (gpu_skipped > 0)
		printf("GPU cases skipped: %d (%s)\n", gpu_skipped, no_gpu_why);
	printf("%d passed, %d failed\n", n_passed, n_failed);
	return n_failed == 0 ? 0 : 1;
}
