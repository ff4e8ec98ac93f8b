/*
 * gpu/matmul.cu - the GPU matrix product: cuBLAS GEMM over blocks streamed
 * through the device.
 *
 * C = A B (row-major, in host memory, pinned when it comes from the
 * workspace) is cut into blocks: rows of A and C (mb), columns of B and C
 * (nb), and the inner dimension (kb).  When all of B fits, nb = n and kb = k:
 * B is copied once and the row blocks of A and C stream past it, so the
 * copy of one block overlaps the product of the previous one and the copy
 * back of the one before.  When B does not fit, blocks of all three
 * matrices stream, and each C block accumulates over the blocks of k.
 * Three streams (copies in, products, copies out) with two buffers each,
 * ordered by events; the host waits for a buffer to come free before
 * reusing it, and checks for interrupts there.
 *
 * cuBLAS is loaded with dlopen() on first use, so that the extension loads,
 * and runs on the CPU, on machines without it.  Row-major C = A B is
 * column-major C^T = B^T A^T, hence the operands are passed to cuBLAS as
 * (B, A).
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <pthread.h>

#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "blas.cuh"
#include "common.cuh"

/* GPU memory kept free for cuBLAS's workspace and other users */
#define RESERVE_BYTES ((int64_t) 256 << 20)
/* a product too small to be worth cutting into blocks */
#define MIN_SPLIT_ROWS 2048

/* ---- cuBLAS, loaded on first use -------------------------------------- */

typedef cublasStatus_t (*create_fn) (cublasHandle_t *);
typedef cublasStatus_t (*destroy_fn) (cublasHandle_t);
typedef cublasStatus_t (*set_stream_fn) (cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*set_math_fn) (cublasHandle_t, cublasMath_t);
typedef const char *(*status_string_fn) (cublasStatus_t);
typedef cublasStatus_t (*dgemm_fn) (cublasHandle_t, cublasOperation_t, cublasOperation_t,
									int, int, int, const double *, const double *, int,
									const double *, int, const double *, double *, int);
typedef cublasStatus_t (*sgemm_fn) (cublasHandle_t, cublasOperation_t, cublasOperation_t,
									int, int, int, const float *, const float *, int,
									const float *, int, const float *, float *, int);
typedef cublasStatus_t (*gemm_batched_ex_fn) (cublasHandle_t, cublasOperation_t, cublasOperation_t,
											  int, int, int, const void *, const void *, cudaDataType,
											  int, long long, const void *, cudaDataType, int, long long,
											  const void *, void *, cudaDataType, int, long long, int,
											  cublasComputeType_t, cublasGemmAlgo_t);

static struct
{
	bool		ok;
	char		why[256];
	create_fn	create;
	destroy_fn	destroy;
	set_stream_fn set_stream;
	set_math_fn set_math;
	status_string_fn status_string;
	dgemm_fn	dgemm;
	sgemm_fn	sgemm;
	gemm_batched_ex_fn gemm_batched_ex;
} blas;

#define STR_(x) #x
#define STR(x) STR_(x)

static void
try_cublas(void)
{
	static const char *const names[] = {
		"libcublas.so." STR(CUBLAS_VER_MAJOR), "libcublas.so",
		"/usr/local/cuda/lib64/libcublas.so." STR(CUBLAS_VER_MAJOR)
	};
	void	   *h = NULL;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && h == NULL; i++)
		h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (h == NULL)
	{
		snprintf(blas.why, sizeof(blas.why), "cuBLAS could not be loaded (%s)", dlerror());
		return;
	}
	blas.create = (create_fn) dlsym(h, "cublasCreate_v2");
	blas.destroy = (destroy_fn) dlsym(h, "cublasDestroy_v2");
	blas.set_stream = (set_stream_fn) dlsym(h, "cublasSetStream_v2");
	blas.set_math = (set_math_fn) dlsym(h, "cublasSetMathMode");
	blas.status_string = (status_string_fn) dlsym(h, "cublasGetStatusString");
	blas.dgemm = (dgemm_fn) dlsym(h, "cublasDgemm_v2");
	blas.sgemm = (sgemm_fn) dlsym(h, "cublasSgemm_v2");
	blas.gemm_batched_ex = (gemm_batched_ex_fn) dlsym(h, "cublasGemmStridedBatchedEx");
	if (!blas.create || !blas.destroy || !blas.set_stream || !blas.set_math ||
		!blas.status_string || !blas.dgemm || !blas.sgemm || !blas.gemm_batched_ex)
	{
		snprintf(blas.why, sizeof(blas.why), "the cuBLAS library found lacks a needed function");
		return;
	}
	blas.ok = true;
}

/* once a process (pggpu_gpus_warm may load it from another thread) */
static bool
load_cublas(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, try_cublas);
	return blas.ok;
}

extern "C" void
pggpu_blas_load(void)
{
	(void) load_cublas();
}

/* ---- for k-means (blas.cuh) ---------------------------------------------- */

pggpu_status
pggpu_blas_open(cudaStream_t stream, cublasHandle_t *handle, pggpu_error *err)
{
	cublasStatus_t s;

	if (!load_cublas())
		return pggpu_fail(err, PGGPU_ERR_CUDA, "%s", blas.why);
	if ((s = blas.create(handle)) != CUBLAS_STATUS_SUCCESS)
		return pggpu_fail(err, s == CUBLAS_STATUS_ALLOC_FAILED ? PGGPU_ERR_GPU_MEMORY : PGGPU_ERR_CUDA,
						  "cuBLAS error in cublasCreate: %s", blas.status_string(s));
	if ((s = blas.set_stream(*handle, stream)) != CUBLAS_STATUS_SUCCESS ||
		(s = blas.set_math(*handle, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS)
	{
		blas.destroy(*handle);
		return pggpu_fail(err, PGGPU_ERR_CUDA, "cuBLAS error in its setup: %s", blas.status_string(s));
	}
	return PGGPU_OK;
}

void
pggpu_blas_close(cublasHandle_t handle)
{
	if (blas.ok && handle)
		blas.destroy(handle);
}

/*
 * Handles a data set's fits take and give back (gpu_km_begin, free_km),
 * kept by GPU while any set is open there: cublasDestroy waits for the
 * whole device (it frees the handle's workspace), and hier.c's many small
 * fits, run at once, each waited for the others' work at its end
 */
#define BLAS_KEPT 16
static struct
{
	cublasHandle_t h;
	int			dev;
}			blas_kept[BLAS_KEPT];
static std::mutex blas_kept_lock;

pggpu_status
pggpu_blas_take(int dev, cudaStream_t stream, cublasHandle_t *handle, pggpu_error *err)
{
	cublasHandle_t h = NULL;

	{
		std::lock_guard<std::mutex> g(blas_kept_lock);

		for (int i = 0; i < BLAS_KEPT && h == NULL; i++)
			if (blas_kept[i].h && blas_kept[i].dev == dev)
			{
				h = blas_kept[i].h;
				blas_kept[i].h = NULL;
			}
	}
	if (h == NULL)
		return pggpu_blas_open(stream, handle, err);
	if (blas.set_stream(h, stream) != CUBLAS_STATUS_SUCCESS)
	{
		blas.destroy(h);
		return pggpu_blas_open(stream, handle, err);
	}
	*handle = h;
	return PGGPU_OK;
}

/* (its work done: the caller has waited for its stream) */
void
pggpu_blas_give(int dev, cublasHandle_t handle)
{
	if (!blas.ok || handle == NULL)
		return;
	{
		std::lock_guard<std::mutex> g(blas_kept_lock);

		for (int i = 0; i < BLAS_KEPT; i++)
			if (blas_kept[i].h == NULL)
			{
				blas_kept[i].h = handle;
				blas_kept[i].dev = dev;
				return;
			}
	}
	blas.destroy(handle);
}

/* the handles kept for dev destroyed (its last set closed) */
void
pggpu_blas_drop(int dev)
{
	cublasHandle_t drop[BLAS_KEPT];
	int			n = 0;

	{
		std::lock_guard<std::mutex> g(blas_kept_lock);

		for (int i = 0; i < BLAS_KEPT; i++)
			if (blas_kept[i].h && blas_kept[i].dev == dev)
			{
				drop[n++] = blas_kept[i].h;
				blas_kept[i].h = NULL;
			}
	}
	for (int i = 0; i < n; i++)
		blas.destroy(drop[i]);
}

pggpu_status
pggpu_blas_row_products(cublasHandle_t h, bool f16, const void *C, int k, int d, const void *X, int ld,
						long long stride_x, int rows, void *S, long long stride_s, int batches,
						pggpu_error *err)
{
	const double one = 1.0,
				zero = 0.0;
	const float one_f = 1.0f,
				zero_f = 0.0f;
	const cudaDataType in = f16 ? CUDA_R_16F : CUDA_R_64F,
				out = f16 ? CUDA_R_32F : CUDA_R_64F;

	/* S^T (k x rows, by columns) = C (k x d: d x k by columns, transposed) X^T (X: rows x d, ld) */
	cublasStatus_t s = blas.gemm_batched_ex(h, CUBLAS_OP_T, CUBLAS_OP_T, k, rows, d,
											f16 ? (const void *) &one_f : (const void *) &one,
											C, in, d, 0, X, in, ld, stride_x,
											f16 ? (const void *) &zero_f : (const void *) &zero,
											S, out, k, stride_s, batches,
											f16 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_64F,
											CUBLAS_GEMM_DEFAULT);

	if (s != CUBLAS_STATUS_SUCCESS)
		return pggpu_fail(err, PGGPU_ERR_CUDA, "cuBLAS error in cublasGemmStridedBatchedEx: %s",
						  blas.status_string(s));
	return PGGPU_OK;
}

pggpu_status
pggpu_blas_sgemm_nn(cublasHandle_t h, int m, int n, int k, const float *A, int lda, const float *B, int ldb,
					float beta, float *C, int ldc, pggpu_error *err)
{
	const float one = 1.0f;
	/* PEDANTIC: float32 in every phase (no TF32, no emulation): pggpu_knn_margin's arithmetic */
	cublasStatus_t s = blas.gemm_batched_ex(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, A, CUDA_R_32F, lda, 0,
											B, CUDA_R_32F, ldb, 0, &beta, C, CUDA_R_32F, ldc, 0, 1,
											CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT);

	if (s != CUBLAS_STATUS_SUCCESS)
		return pggpu_fail(err, PGGPU_ERR_CUDA, "cuBLAS error in cublasGemmStridedBatchedEx: %s",
						  blas.status_string(s));
	return PGGPU_OK;
}

/* ---- the workspace's GPU state ------------------------------------------ */

typedef struct mm_gpu
{
	int			dev;
	cudaStream_t h2d,
				comp,
				d2h;
	bool		streams_ok;
	cudaEvent_t ev[10];			/* see EV_* */
	int			nev;
	cublasHandle_t handle;
	bool		handle_ok;
	void	   *dA[2],
			   *dB[2],
			   *dC[2];
	size_t		capA,
				capB,
				capC;			/* bytes of each buffer */
	pggpu_matmul *mm;			/* its workspace (for mm->stopped) */
	/* a split product's b, staged by the workspaces together (pggpu_gpu_mm_stage_b) */
	int			staged;			/* 0: no; 1: its rows of b; 2: all of b, the next run uses it */
	int64_t		st_mb;			/* the blocks planned for it */
	int64_t		st_nb;
	int64_t		st_kb;
} mm_gpu;

/* events: per buffer slot s, EV_X + s */
#define EV_A_FREE 0				/* the products reading dA[s] are done */
#define EV_B_FREE 2				/* ... dB[s] */
#define EV_C_FREE 4				/* the copy out of dC[s] is done */
#define EV_READY 6				/* the copies into dA[s] (and B) are done */
#define EV_C_READY 8			/* the products into dC[s] are done */

static pggpu_status
blas_fail(pggpu_error *err, cublasStatus_t s, const char *what)
{
	return pggpu_fail(err, s == CUBLAS_STATUS_ALLOC_FAILED ? PGGPU_ERR_GPU_MEMORY : PGGPU_ERR_CUDA,
					  "cuBLAS error in %s: %s", what, blas.status_string(s));
}

#define BL(call) do { cublasStatus_t s_ = (call); \
	if (s_ != CUBLAS_STATUS_SUCCESS) return blas_fail(err, s_, #call); } while (0)

/*
 * Pinned host memory is slow to get (page-locking costs about as much as
 * copying the bytes several times), so freed buffers are kept for the next
 * product in this process, up to pggpu_pinned_cache_limit bytes in all.
 */
#define CACHE_SLOTS 4

static struct
{
	void	   *p[CACHE_SLOTS];
	size_t		size[CACHE_SLOTS];
	size_t		total;
	size_t		limit;
} pinned = {{0}, {0}, 0, (size_t) 512 << 20};

static void
cache_drop(int i)
{
	cudaFreeHost(pinned.p[i]);
	pinned.total -= pinned.size[i];
	pinned.p[i] = NULL;
	pinned.size[i] = 0;
}

extern "C" void
pggpu_pinned_cache_limit(size_t bytes)
{
	pinned.limit = bytes;
	for (int i = 0; i < CACHE_SLOTS && pinned.total > pinned.limit; i++)
		if (pinned.p[i] != NULL)
			cache_drop(i);
}

extern "C" size_t
pggpu_pinned_cache_bytes(void)
{
	return pinned.total;
}

/*
 * (portable: a product split over several GPUs feeds them all from one
 * workspace's buffers, pggpu_matmul_run_split)
 */
extern "C" void *
pggpu_gpu_host_alloc(size_t bytes, size_t *got)
{
	void	   *p = NULL;
	int			best = -1;

	/* the smallest cached buffer that is large enough */
	for (int i = 0; i < CACHE_SLOTS; i++)
		if (pinned.p[i] != NULL && pinned.size[i] >= bytes &&
			(best < 0 || pinned.size[i] < pinned.size[best]))
			best = i;
	if (best >= 0)
	{
		p = pinned.p[best];
		*got = pinned.size[best];
		pinned.total -= pinned.size[best];
		pinned.p[best] = NULL;
		pinned.size[best] = 0;
		return p;
	}
	if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess)
	{
		(void) cudaGetLastError();
		/* cached buffers too small to use may be what is in the way */
		for (int i = 0; i < CACHE_SLOTS; i++)
			if (pinned.p[i] != NULL)
				cache_drop(i);
		if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess)
		{
			(void) cudaGetLastError();
			return NULL;
		}
	}
	*got = bytes;
	return p;
}

extern "C" void
pggpu_gpu_host_free(void *p, size_t size)
{
	int			smallest = -1;

	if (p == NULL)
		return;
	if (size > pinned.limit)
	{
		cudaFreeHost(p);
		return;
	}
	/* make room by dropping smaller buffers, smallest first */
	for (;;)
	{
		int			free_slot = -1;

		smallest = -1;
		for (int i = 0; i < CACHE_SLOTS; i++)
		{
			if (pinned.p[i] == NULL)
				free_slot = free_slot < 0 ? i : free_slot;
			else if (smallest < 0 || pinned.size[i] < pinned.size[smallest])
				smallest = i;
		}
		if (free_slot >= 0 && pinned.total + size <= pinned.limit)
		{
			pinned.p[free_slot] = p;
			pinned.size[free_slot] = size;
			pinned.total += size;
			return;
		}
		if (smallest < 0 || pinned.size[smallest] > size)
			break;
		cache_drop(smallest);
	}
	cudaFreeHost(p);
}

extern "C" pggpu_status
pggpu_gpu_mm_open(pggpu_matmul *mm, int gpu_index, pggpu_error *err)
{
	mm_gpu	   *g = (mm_gpu *) calloc(1, sizeof(mm_gpu));
	cudaDeviceProp prop;

	if (g == NULL)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	mm->impl = g;
	g->mm = mm;
	g->dev = -1;
	if (pggpu_find_gpus(gpu_index, &g->dev, &prop, err) == 0 || g->dev < 0)
		return PGGPU_ERR_NO_GPU;
	mm->gpu = g->dev;
	if (!load_cublas())
		return pggpu_fail(err, PGGPU_ERR_NO_GPU, "%s", blas.why);
	snprintf(mm->device_name, sizeof(mm->device_name), "%s", prop.name);
	CU(cudaSetDevice(g->dev));
	CU(cudaStreamCreateWithFlags(&g->h2d, cudaStreamNonBlocking));
	CU(cudaStreamCreateWithFlags(&g->comp, cudaStreamNonBlocking));
	CU(cudaStreamCreateWithFlags(&g->d2h, cudaStreamNonBlocking));
	g->streams_ok = true;
	for (; g->nev < 10; g->nev++)
		CU(cudaEventCreateWithFlags(&g->ev[g->nev], cudaEventDisableTiming));
	BL(blas.create(&g->handle));
	g->handle_ok = true;
	BL(blas.set_stream(g->handle, g->comp));
	return PGGPU_OK;
}

static void
free_buffers(mm_gpu *g)
{
	for (int s = 0; s < 2; s++)
	{
		cudaFree(g->dA[s]);
		cudaFree(g->dB[s]);
		cudaFree(g->dC[s]);
		g->dA[s] = g->dB[s] = g->dC[s] = NULL;
	}
	g->capA = g->capB = g->capC = 0;
}

static void
sync_all(mm_gpu *g)
{
	if (g->streams_ok)
	{
		cudaStreamSynchronize(g->h2d);
		cudaStreamSynchronize(g->comp);
		cudaStreamSynchronize(g->d2h);
	}
	(void) cudaGetLastError();
}

extern "C" void
pggpu_gpu_mm_close(pggpu_matmul *mm)
{
	mm_gpu	   *g = (mm_gpu *) mm->impl;

	if (g == NULL)
		return;
	if (g->dev >= 0)
	{
		cudaSetDevice(g->dev);
		sync_all(g);
		if (g->handle_ok)
			blas.destroy(g->handle);
		free_buffers(g);
		for (int i = 0; i < g->nev; i++)
			cudaEventDestroy(g->ev[i]);
		if (g->streams_ok)
		{
			cudaStreamDestroy(g->h2d);
			cudaStreamDestroy(g->comp);
			cudaStreamDestroy(g->d2h);
		}
		(void) cudaGetLastError();
	}
	free(g);
	mm->impl = NULL;
}

/* ---- blocking --------------------------------------------------------- */

static int64_t
min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* x rounded down to a multiple of 64 when that leaves something, capped */
static int64_t
block_round(int64_t x, int64_t full)
{
	if (x >= full)
		return full;
	if (x > 64)
		x -= x % 64;
	return min64(x, (int64_t) 1 << 30);
}

/*
 * Blocks for an m x k by k x n product in `elems` elements of GPU memory;
 * false when not even the smallest blocks fit.
 */
static bool
choose_blocks(int64_t m, int64_t n, int64_t k, int64_t elems,
			  int64_t *mb, int64_t *nb, int64_t *kb)
{
	int64_t		rows_min = min64(m, 64);

	if (k * n + 2 * rows_min * (k + n) <= elems)
	{
		/* all of B stays; rows of A and C stream in two buffers */
		*kb = k;
		*nb = n;
		*mb = min64((elems - k * n) / (2 * (k + n)), m);
		/* several blocks so that copies overlap products */
		if (m >= MIN_SPLIT_ROWS)
		{
			int64_t		quarter = (m + 3) / 4;

			*mb = min64(*mb, quarter > 512 ? quarter : 512);
		}
		*mb = block_round(*mb, m);
		if (*mb > INT_MAX)
			*mb = (int64_t) 1 << 30;
		return true;
	}
	else
	{
		/* blocks of all three, two buffers each */
		int64_t		t = (int64_t) sqrt((double) (elems / 6));

		while (t > 1 && 6 * t * t > elems)
			t--;
		if (t < 1)
			return false;
		*kb = block_round(min64(k, t), k);
		*nb = block_round(min64(n, t), n);
		*mb = block_round(min64(m, t), m);
		return true;
	}
}

static pggpu_status
ensure(void **slots, size_t *cap, int nslots, size_t bytes, pggpu_error *err)
{
	if (bytes <= *cap && slots[nslots - 1] != NULL)
		return PGGPU_OK;
	for (int s = 0; s < 2; s++)
	{
		cudaFree(slots[s]);
		slots[s] = NULL;
	}
	*cap = 0;
	for (int s = 0; s < nslots; s++)
		CU(cudaMalloc(&slots[s], bytes));
	*cap = bytes;
	return PGGPU_OK;
}

/* Allocates buffers for blocks within budget, halving it while that fails. */
static pggpu_status
plan(mm_gpu *g, const pggpu_matmul_params *p, int64_t es,
	 int64_t *mb, int64_t *nb, int64_t *kb, pggpu_error *err)
{
	size_t		fr = 0,
				tot = 0;
	int64_t		held = (int64_t) (2 * (g->capA + g->capC) + 2 * g->capB);
	int64_t		budget;
	pggpu_status st = PGGPU_OK;

	CU(cudaMemGetInfo(&fr, &tot));
	budget = (int64_t) fr + held - RESERVE_BYTES;
	if (p->gpu_memory > 0 && p->gpu_memory < budget)
		budget = p->gpu_memory;
	for (;;)
	{
		int			bslots;

		if (budget < 6 * es || !choose_blocks(p->m, p->n, p->k, budget / es, mb, nb, kb))
			return st != PGGPU_OK ? st :
				pggpu_fail(err, PGGPU_ERR_GPU_MEMORY,
						   "too little GPU memory for a matrix product (%.1f MB free of %.1f MB)",
						   fr / 1048576.0, tot / 1048576.0);
		bslots = (*kb == p->k && *nb == p->n) ? 1 : 2;
		if ((st = ensure(g->dA, &g->capA, 2, *mb * *kb * es, err)) == PGGPU_OK &&
			(st = ensure(g->dB, &g->capB, bslots, *kb * *nb * es, err)) == PGGPU_OK &&
			(st = ensure(g->dC, &g->capC, 2, *mb * *nb * es, err)) == PGGPU_OK)
			return PGGPU_OK;
		if (st != PGGPU_ERR_GPU_MEMORY)
			return st;
		/* someone else holds memory: start again with half */
		free_buffers(g);
		budget /= 2;
	}
}

/* one product of blocks: C(mb x nb) (+)= A(mb x kb) B(kb x nb), row-major */
static pggpu_status
gemm(mm_gpu *g, const pggpu_matmul_params *p, int mb, int nb, int kb,
	 const void *dA, const void *dB, void *dC, bool accumulate, pggpu_error *err)
{
	if (p->dtype == PGGPU_FLOAT64)
	{
		const double one = 1.0,
					beta = accumulate ? 1.0 : 0.0;

		BL(blas.dgemm(g->handle, CUBLAS_OP_N, CUBLAS_OP_N, nb, mb, kb, &one,
					  (const double *) dB, nb, (const double *) dA, kb, &beta, (double *) dC, nb));
	}
	else
	{
		const float one = 1.0f,
					beta = accumulate ? 1.0f : 0.0f;

		BL(blas.sgemm(g->handle, CUBLAS_OP_N, CUBLAS_OP_N, nb, mb, kb, &one,
					  (const float *) dB, nb, (const float *) dA, kb, &beta, (float *) dC, nb));
	}
	return PGGPU_OK;
}

static pggpu_status
run(mm_gpu *g, const pggpu_matmul_params *p, const char *A, const char *B, char *C,
	pggpu_matmul_info *info, pggpu_error *err)
{
	int64_t		es = p->dtype == PGGPU_FLOAT64 ? 8 : 4;
	int64_t		m = p->m,
				n = p->n,
				k = p->k;
	int64_t		mb,
				nb,
				kb;
	int64_t		item = 0,
				tile = 0;
	int64_t		btag[2][2] = {{-1, -1}, {-1, -1}};	/* (p0, j0) held by dB[s] */
	int			last_b = 1;
	cudaEvent_t *ev = g->ev;
	pggpu_status st;

	CU(cudaSetDevice(g->dev));
	BL(blas.set_math(g->handle, p->dtype == PGGPU_FLOAT32 && p->allow_tf32
					 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
	if (g->staged == 2)
	{
		/* all of b is in dB[0] already (staged with the other workspaces) */
		mb = g->st_mb, nb = g->st_nb, kb = g->st_kb;
		btag[0][0] = 0;
		btag[0][1] = 0;
		last_b = 0;
	}
	else if ((st = plan(g, p, es, &mb, &nb, &kb, err)) != PGGPU_OK)
		return st;
	info->mb = mb;
	info->nb = nb;
	info->kb = kb;

	for (int64_t j0 = 0; j0 < n; j0 += nb)
	{
		int			nbb = (int) min64(nb, n - j0);

		for (int64_t i0 = 0; i0 < m; i0 += mb)
		{
			int			mbb = (int) min64(mb, m - i0);
			int			cs = (int) (tile++ & 1);

			for (int64_t p0 = 0; p0 < k; p0 += kb)
			{
				int			kbb = (int) min64(kb, k - p0);
				int			as = (int) (item++ & 1);
				int			bs;

				/* dA[as] is free once the product two items back is done */
				CU(cudaEventSynchronize(ev[EV_A_FREE + as]));
				if (p->check_interrupts)
					p->check_interrupts(p->interrupt_arg);
				if (g->mm->stopped && g->mm->stopped(g->mm->stopped_arg))
					return pggpu_fail(err, PGGPU_ERR_INVALID, "stopped");

				CU(cudaMemcpy2DAsync(g->dA[as], kbb * es, A + (i0 * k + p0) * es, k * es,
									 kbb * es, mbb, cudaMemcpyHostToDevice, g->h2d));
				if (btag[0][0] == p0 && btag[0][1] == j0)
					bs = 0;
				else if (btag[1][0] == p0 && btag[1][1] == j0)
					bs = 1;
				else
				{
					bs = g->dB[last_b ^ 1] != NULL ? last_b ^ 1 : last_b;
					CU(cudaStreamWaitEvent(g->h2d, ev[EV_B_FREE + bs], 0));
					CU(cudaMemcpy2DAsync(g->dB[bs], nbb * es, B + (p0 * n + j0) * es, n * es,
										 nbb * es, kbb, cudaMemcpyHostToDevice, g->h2d));
					btag[bs][0] = p0;
					btag[bs][1] = j0;
				}
				last_b = bs;
				CU(cudaEventRecord(ev[EV_READY + as], g->h2d));

				CU(cudaStreamWaitEvent(g->comp, ev[EV_READY + as], 0));
				if (p0 == 0)
					CU(cudaStreamWaitEvent(g->comp, ev[EV_C_FREE + cs], 0));
				if ((st = gemm(g, p, mbb, nbb, kbb, g->dA[as], g->dB[bs], g->dC[cs],
							   p0 > 0, err)) != PGGPU_OK)
					return st;
				info->products++;
				CU(cudaEventRecord(ev[EV_A_FREE + as], g->comp));
				CU(cudaEventRecord(ev[EV_B_FREE + bs], g->comp));
			}
			CU(cudaEventRecord(ev[EV_C_READY + cs], g->comp));
			CU(cudaStreamWaitEvent(g->d2h, ev[EV_C_READY + cs], 0));
			CU(cudaMemcpy2DAsync(C + (i0 * n + j0) * es, n * es, g->dC[cs], nbb * es,
								 nbb * es, mbb, cudaMemcpyDeviceToHost, g->d2h));
			CU(cudaEventRecord(ev[EV_C_FREE + cs], g->d2h));
		}
	}
	CU(cudaStreamSynchronize(g->d2h));
	CU(cudaStreamSynchronize(g->comp));
	return PGGPU_OK;
}

extern "C" pggpu_status
pggpu_gpu_mm_run(pggpu_matmul *mm, const pggpu_matmul_params *p,
				 const void *a, const void *b, void *c,
				 pggpu_matmul_info *info, pggpu_error *err)
{
	mm_gpu	   *g = (mm_gpu *) mm->impl;
	pggpu_status st = run(g, p, (const char *) a, (const char *) b, (char *) c, info, err);

	g->staged = 0;
	if (st != PGGPU_OK)
		sync_all(g);			/* nothing of this product still runs */
	return st;
}

/*
 * A product split over workspaces on GPUs (cuda/matmul.c), where each keeps
 * all of b (the blocks' plan for its p): b's rows lo .. hi-1 from the host
 * into its copy of b (each workspace copies a part, not all of b, over its
 * own link).  PGGPU_ERR_INVALID where b would not stay whole on the GPU.
 * b NULL: what was staged is forgotten.
 */
extern "C" pggpu_status
pggpu_gpu_mm_stage_b(pggpu_matmul *mm, const pggpu_matmul_params *p, const void *b, int64_t lo, int64_t hi,
					 pggpu_error *err)
{
	mm_gpu	   *g = (mm_gpu *) mm->impl;
	int64_t		es = p->dtype == PGGPU_FLOAT64 ? 8 : 4;
	pggpu_status st;

	g->staged = 0;
	if (b == NULL)
		return PGGPU_OK;		/* (b NULL: nothing staged any more) */
	CU(cudaSetDevice(g->dev));
	if ((st = plan(g, p, es, &g->st_mb, &g->st_nb, &g->st_kb, err)) != PGGPU_OK)
		return st;
	if (g->st_kb != p->k || g->st_nb != p->n)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "b does not stay on the GPU");
	if (hi > lo)
	{
		CU(cudaMemcpyAsync((char *) g->dB[0] + lo * p->n * es, (const char *) b + lo * p->n * es,
						   (hi - lo) * p->n * es, cudaMemcpyHostToDevice, g->h2d));
		CU(cudaStreamSynchronize(g->h2d));
	}
	g->staged = 1;
	return PGGPU_OK;
}

/* dst's GPU may read peer's memory directly (NVLink or PCIe), once asked; false where it cannot */
static bool
peer_access(int dst, int peer)
{
	static bool asked[PGGPU_MAX_THREADS][PGGPU_MAX_THREADS];
	int			can = 0;

	if (dst == peer || dst < 0 || peer < 0 || dst >= PGGPU_MAX_THREADS || peer >= PGGPU_MAX_THREADS)
		return dst == peer;
	if (cudaDeviceCanAccessPeer(&can, dst, peer) != cudaSuccess || !can)
	{
		(void) cudaGetLastError();
		return false;
	}
	if (!asked[dst][peer])
	{
		cudaError_t e;

		(void) cudaSetDevice(dst);
		e = cudaDeviceEnablePeerAccess(peer, 0);
		if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
		{
			(void) cudaGetLastError();
			return false;
		}
		(void) cudaGetLastError();
		asked[dst][peer] = true;
	}
	return true;
}

/* pggpu_gpu_peer_access for the k-means backend (trials.cu's copies between GPUs) */
bool
gpu_peer_access(int dst, int peer)
{
	return peer_access(dst, peer);
}

/*
 * Workspace i of n, each with its rows cuts[j] .. cuts[j+1]-1 of b staged:
 * the others' rows copied from their GPUs into i's (peer copies); then i's
 * next run uses that b
 */
extern "C" pggpu_status
pggpu_gpu_mm_gather_b(pggpu_matmul *const *mms, int n, int i, const int64_t *cuts, int64_t cols, int64_t es,
					  pggpu_error *err)
{
	mm_gpu	   *g = (mm_gpu *) mms[i]->impl;

	if (g->staged != 1)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "b is not staged");
	for (int j = 0; j < n; j++)
	{
		mm_gpu	   *h = (mm_gpu *) mms[j]->impl;
		size_t		off = cuts[j] * cols * es,
					bytes = (cuts[j + 1] - cuts[j]) * cols * es;

		if (j == i || bytes == 0)
			continue;
		if (h->staged < 1)
			return pggpu_fail(err, PGGPU_ERR_INVALID, "b is not staged");
		if (h->dev == g->dev)
			CU(cudaMemcpyAsync((char *) g->dB[0] + off, (const char *) h->dB[0] + off, bytes,
							   cudaMemcpyDeviceToDevice, g->h2d));
		else
		{
			(void) peer_access(g->dev, h->dev);
			CU(cudaSetDevice(g->dev));
			CU(cudaMemcpyPeerAsync((char *) g->dB[0] + off, g->dev, (const char *) h->dB[0] + off, h->dev, bytes,
								   g->h2d));
		}
	}
	CU(cudaSetDevice(g->dev));
	CU(cudaStreamSynchronize(g->h2d));
	g->staged = 2;
	return PGGPU_OK;
}
