/*
 * cpu/matmul.c - the CPU product (OpenBLAS), for matmul.c's workspaces.
 *
 * The GPU product lives in gpu/matmul.cu, what both share (workspaces, host
 * buffers, argument checks, the split) in matmul.c; here: OpenBLAS's GEMM over
 * blocks of rows, so that interrupts are checked every few tens of
 * milliseconds even for very large products.  OpenBLAS is loaded with
 * dlopen() on the first CPU product: loading it starts its threads, which
 * every process that loads the extension (parallel workers too) would
 * otherwise pay for.
 */
#include <cblas.h>				/* only to check the enums' values below */
#include <dlfcn.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute_internal.h"

/*
 * Multiply-adds per CPU block between interrupt checks (about 0.05 s on 16
 * cores, a second on 2), and the fewest rows per block: each BLAS call packs
 * all of B again (k n, as much as a row's product), which thin blocks pay
 * for too often; at 16 rows that is a sixteenth more, and only where a row
 * is over 2^29 multiply-adds.
 */
#define CPU_BLOCK_WORK ((int64_t) 1 << 33)
#define CPU_BLOCK_MIN_ROWS 16

static struct
{
	bool		tried;
	char		why[256];
	int			threads;		/* OpenBLAS's own count when loaded */
	pggpu_openblas fns;
}			openblas;

/*
 * OpenBLAS built with DYNAMIC_ARCH picks its kernels by the CPU's model
 * number, and a release older than the CPU falls back to its generic
 * "Prescott" kernels: Debian 12's 0.3.21 on a 2024 Xeon (family 6, model
 * 207) ran dgemm at 9 GFlop/s on a core where its SkylakeX kernels run at
 * 43-50 (measured on the H100 machine's host, 256 x 256 x 768).  So unless
 * the user chose (OPENBLAS_CORETYPE, read when the library loads), the
 * kernels are chosen here by the instructions the CPU has: AVX-512 the
 * SkylakeX ones (what OpenBLAS itself takes for every AVX-512 CPU it
 * knows, for double precision), AVX2 with FMA the Haswell ones.
 */
static void
choose_coretype(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (getenv("OPENBLAS_CORETYPE") != NULL)
		return;
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		__builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
		setenv("OPENBLAS_CORETYPE", "SkylakeX", 0);
	else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		setenv("OPENBLAS_CORETYPE", "Haswell", 0);
#endif
}

const pggpu_openblas *
pggpu_openblas_load(const char **why)
{
	static const char *const names[] = {"libopenblas.so.0", "libopenblas.so"};
	void	   *h = NULL;

	*why = openblas.why;
	if (openblas.tried)
		return openblas.fns.dgemm ? &openblas.fns : NULL;
	openblas.tried = true;
	choose_coretype();
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && h == NULL; i++)
		h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (h == NULL)
	{
		snprintf(openblas.why, sizeof(openblas.why), "OpenBLAS could not be loaded (%s)", dlerror());
		return NULL;
	}
	openblas.fns.dgemm = (__typeof__(openblas.fns.dgemm)) dlsym(h, "cblas_dgemm");
	openblas.fns.sgemm = (__typeof__(openblas.fns.sgemm)) dlsym(h, "cblas_sgemm");
	openblas.fns.set_threads = (void (*) (int)) dlsym(h, "openblas_set_num_threads");
	if (!openblas.fns.dgemm || !openblas.fns.sgemm)
	{
		openblas.fns.dgemm = NULL;
		snprintf(openblas.why, sizeof(openblas.why), "the OpenBLAS library found lacks cblas_dgemm or cblas_sgemm");
		return NULL;
	}
	{
		int			(*get) (void) = (int (*) (void)) dlsym(h, "openblas_get_num_threads");

		openblas.threads = get ? get() : 0;
	}
	return &openblas.fns;
}

_Static_assert(CblasRowMajor == PGGPU_CBLAS_ROW_MAJOR && CblasColMajor == PGGPU_CBLAS_COL_MAJOR && CblasNoTrans == PGGPU_CBLAS_NO_TRANS &&
			   CblasTrans == PGGPU_CBLAS_TRANS, "cblas.h's enums");

/* the product's own threads (OpenBLAS's count as loaded: k-means sets 1) */
void
pggpu_openblas_threads(const pggpu_openblas *ob, int threads)
{
	if (ob->set_threads && threads > 0)
		ob->set_threads(threads);
}

pggpu_status
pggpu_cpu_mm_run(const pggpu_matmul_params *p, const void *a, const void *b, void *c,
		pggpu_matmul_info *info, pggpu_error *err)
{
	int64_t		es = p->dtype == PGGPU_FLOAT64 ? 8 : 4;
	int64_t		mb = CPU_BLOCK_WORK / (p->n * p->k);

	const pggpu_openblas *ob;
	const char *why;

	if ((ob = pggpu_openblas_load(&why)) == NULL)
		return pggpu_fail(err, PGGPU_ERR_LIBRARY, "%s", why);
	pggpu_openblas_threads(ob, openblas.threads);
	if (mb < CPU_BLOCK_MIN_ROWS)
		mb = CPU_BLOCK_MIN_ROWS;
	if (mb > p->m)
		mb = p->m;
	if (mb > INT_MAX)
		mb = INT_MAX;
	info->mb = mb;
	info->nb = p->n;
	info->kb = p->k;
	for (int64_t i0 = 0; i0 < p->m; i0 += mb)
	{
		int			rows = (int) (p->m - i0 < mb ? p->m - i0 : mb);
		const char *ai = (const char *) a + i0 * p->k * es;
		char	   *ci = (char *) c + i0 * p->n * es;

		if (p->check_interrupts)
			p->check_interrupts(p->interrupt_arg);
		if (p->dtype == PGGPU_FLOAT64)
			ob->dgemm(PGGPU_CBLAS_ROW_MAJOR, PGGPU_CBLAS_NO_TRANS, PGGPU_CBLAS_NO_TRANS, rows, (int) p->n, (int) p->k,
						1.0, (const double *) ai, (int) p->k, (const double *) b, (int) p->n,
						0.0, (double *) ci, (int) p->n);
		else
			ob->sgemm(PGGPU_CBLAS_ROW_MAJOR, PGGPU_CBLAS_NO_TRANS, PGGPU_CBLAS_NO_TRANS, rows, (int) p->n, (int) p->k,
						1.0f, (const float *) ai, (int) p->k, (const float *) b, (int) p->n,
						0.0f, (float *) ci, (int) p->n);
		info->products++;
	}
	return PGGPU_OK;
}
