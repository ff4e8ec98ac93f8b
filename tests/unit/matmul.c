#include "unit.h"

#include <pthread.h>

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

/* a workspace on be (GPU gpu), or NULL: no GPU (a skipped case) or a failed open */
static pggpu_matmul *
mm_open_on(pggpu_backend be, int gpu)
{
	pggpu_error err = {0};
	pggpu_matmul *mm = NULL;
	pggpu_status st;

	if (be == PGGPU_BACKEND_GPU && !have_gpu)
	{
		gpu_skipped++;
		return NULL;
	}
	st = pggpu_matmul_open(&mm, be, gpu, &err);
	if (!CHECK(st == PGGPU_OK && mm != NULL, "matmul_open (%s): %d %s", be_name(be), (int) st, err.msg))
		return NULL;
	CHECK(pggpu_matmul_backend(mm) == be &&
		  (be == PGGPU_BACKEND_GPU) == (strcmp(pggpu_matmul_device_name(mm), "cpu") != 0),
		  "%s workspace: backend %d, device \"%s\"", be_name(be), (int) pggpu_matmul_backend(mm),
		  pggpu_matmul_device_name(mm));
	return mm;
}

/* a workspace on be (the first GPU), or NULL: no GPU (a skipped case) or a failed open */
pggpu_matmul *
mm_open(pggpu_backend be)
{
	return mm_open_on(be, 0);
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
bool
mm_product(pggpu_matmul *mm, const pggpu_matmul_params *p, bool mixed, uint64_t seed,
		   pggpu_matmul_info *info)
{
	void	   *A,
			   *B,
			   *C;

	return mm_operands(mm, p, mixed, seed, &A, &B, &C) && mm_run_check(mm, p, A, B, C, info);
}

pggpu_matmul_params
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

void
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
void
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
void
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
void
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
void
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
void
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
void
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
void
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
void
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

/* the split's poller: yes once, at its first poll; the callback counted, and where it ran */
static int	split_polls,
			split_callbacks;
static bool split_elsewhere;
static pthread_t split_caller;

/* pending from the first poll until the callback has run (as InterruptPending) */
static bool
split_pending(void)
{
	return ++split_polls >= 1 && split_callbacks == 0;
}

static void
split_callback(void *arg)
{
	(void) arg;
	split_callbacks += split_polls >= 1;
	split_elsewhere |= !pthread_equal(pthread_self(), split_caller);
}

/*
 * A product split over three workspaces (pggpu_matmul_run_split): a's rows
 * in three contiguous shares, on the GPU at once (a thread each), on the
 * CPU one after another; the product checked as any, also with fewer rows
 * than workspaces.  On the GPU, an interrupt pending at the poller's first
 * look stops the threads; the callback runs on the caller's thread alone
 * and (it returns) the product is finished there, whole.
 */
void
test_mm_split(void)
{
	for (int b = 0; b < 2; b++)
	{
		pggpu_backend be = b ? PGGPU_BACKEND_GPU : PGGPU_BACKEND_CPU;
		pggpu_matmul *mms[3] = {0};
		int64_t		shapes[4][3] = {{1000, 300, 200}, {2, 50, 40}, {3000, 500, 700}, {2000, 1100, 1000}};

		/* (on the GPU: a GPU each in turn; b of over 2^20 values is staged by the three together) */
		for (int i = 0; i < 3; i++)
			mms[i] = mm_open_on(be, unit_gpus > 0 ? i % unit_gpus : 0);
		if (mms[0] == NULL || mms[1] == NULL || mms[2] == NULL)
		{
			for (int i = 0; i < 3; i++)
				pggpu_matmul_close(mms[i]);
			continue;
		}
		for (int s = 0; s < 4; s++)
		{
			pggpu_matmul_params p = mm_params(F64, shapes[s][0], shapes[s][1], shapes[s][2], 0);
			pggpu_matmul_info info = {0};
			pggpu_error err = {0};
			bool		interrupted = s == 2;
			void	   *A,
					   *B,
					   *C;

			mm_set_case(interrupted ? "split in 3, interrupted," : "split in 3", be, &p);
			if (interrupted)
			{
				p.check_interrupts = split_callback;
				p.pending = split_pending;
				split_polls = split_callbacks = 0;
				split_elsewhere = false;
				split_caller = pthread_self();
			}
			if (!mm_operands(mms[0], &p, false, 7000 + s, &A, &B, &C))
				continue;
			for (int64_t e = 0; e < p.m * p.n; e++)
				mm_set(C, e, p.dtype, NAN);
			if (!CHECK(pggpu_matmul_run_split(mms, 3, &p, A, B, C, &info, &err) == PGGPU_OK,
					   "split product: %s", err.msg))
				continue;
			mm_verify(&p, A, B, C, MM_TOL64);
			if (s == 3)
			{
				/* then one workspace alone, with another b: nothing staged is left to it */
				mm_set_case("after a split, one workspace alone,", be, &p);
				for (int64_t e = 0; e < p.k * p.n; e++)
					mm_set(B, e, p.dtype, mm_get(B, e, p.dtype) * 0.5 + 1);
				if (CHECK(pggpu_matmul_run(mms[1], &p, A, B, C, &info, &err) == PGGPU_OK, "product: %s", err.msg))
					mm_verify(&p, A, B, C, MM_TOL64);
			}
			if (interrupted && b)
				CHECK(split_polls >= 1 && split_callbacks >= 1 && !split_elsewhere,
					  "%d polls, %d callbacks%s", split_polls, split_callbacks,
					  split_elsewhere ? ", some on another thread" : "");
		}
		for (int i = 0; i < 3; i++)
			pggpu_matmul_close(mms[i]);
	}
	/* (the pinned buffers the workspaces cached, freed: a leak check sees none) */
	pggpu_pinned_cache_limit(0);
	pggpu_pinned_cache_limit((size_t) 512 << 20);
}
