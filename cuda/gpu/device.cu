/*
 * device.cu - the GPUs: which are usable (compute capability of this build's
 * target or newer), what gpu_info() reports, CUDA errors as pggpu errors,
 * and the memory the data sets take and give back often.
 */
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "blas.cuh"
#include "common.cuh"

#define ST(ds) ((gpu_state *) (ds)->impl)
#define TILE(ds) ((int64_t) 1 << (ds)->log_b)

/*
 * A kernel's dynamic shared memory allowed up to bytes on the current
 * device, never lowered: the attribute is the function's, shared by every
 * thread, and data sets used at once from several threads (hier.c's fits)
 * would otherwise lower it under another's launch (cudaErrorInvalidValue)
 */
cudaError_t
gpu_smem_allow(const void *fn, size_t bytes)
{
	static std::mutex mu;
	static std::map<std::pair<int, const void *>, size_t> allowed;
	std::lock_guard<std::mutex> g(mu);
	int			dev = 0;
	cudaError_t e = cudaGetDevice(&dev);

	if (e != cudaSuccess)
		return e;
	size_t	   &have = allowed[std::make_pair(dev, fn)];

	if (have >= bytes)
		return cudaSuccess;
	if ((e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int) bytes)) == cudaSuccess)
		have = bytes;
	return e;
}

pggpu_status
pggpu_cuda_fail(pggpu_error *err, cudaError_t e, const char *what)
{
	(void) cudaGetLastError();	/* clear non-sticky errors */
	return pggpu_fail(err, e == cudaErrorMemoryAllocation ? PGGPU_ERR_GPU_MEMORY : PGGPU_ERR_CUDA,
					  "CUDA error in %s: %s", what, cudaGetErrorString(e));
}

static bool
usable(const cudaDeviceProp *p)
{
	return p->major * 10 + p->minor >= PGGPU_MIN_CC;
}

int
pggpu_find_gpus(int want, int *chosen, cudaDeviceProp *props, pggpu_error *err)
{
	int			n = 0;
	int			ok = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	*chosen = -1;
	if (e != cudaSuccess)
	{
		int			drv = 0;

		(void) cudaGetLastError();
		if (cudaDriverGetVersion(&drv) == cudaSuccess && drv == 0)
			pggpu_fail(err, PGGPU_ERR_NO_GPU, "no NVIDIA driver is installed");
		else
			pggpu_fail(err, PGGPU_ERR_NO_GPU, "CUDA finds no usable GPU (%s)", cudaGetErrorString(e));
		return 0;
	}
	for (int i = 0; i < n; i++)
	{
		cudaDeviceProp p;

		if (cudaGetDeviceProperties(&p, i) != cudaSuccess || !usable(&p))
			continue;
		ok++;
		if (*chosen < 0 && (want < 0 || want == i))
		{
			*chosen = i;
			*props = p;
		}
	}
	if (ok == 0)
		pggpu_fail(err, PGGPU_ERR_NO_GPU,
				   n ? "no GPU of compute capability %d.%d or newer (this build's target)"
				   : "no GPU found", PGGPU_MIN_CC / 10, PGGPU_MIN_CC % 10);
	else if (*chosen < 0)
		pggpu_fail(err, PGGPU_ERR_NO_GPU, "GPU %d is not a usable GPU", want);
	return ok;
}

extern "C" int
pggpu_gpu_count_impl(pggpu_error *err)
{
	int			chosen;
	cudaDeviceProp p;

	return pggpu_find_gpus(-1, &chosen, &p, err);
}

extern "C" int
pggpu_gpu_list_impl(int *usable_out, int max, int *total, pggpu_error *err)
{
	int			n = 0,
				ok = 0;

	/* properties only: no context is made (a GPU whose memory is full still lists) */
	*total = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess)
	{
		(void) cudaGetLastError();
		return pggpu_fail(err, PGGPU_ERR_NO_GPU, "CUDA finds no usable GPU"), 0;
	}
	*total = n;
	for (int i = 0; i < n && ok < max; i++)
	{
		cudaDeviceProp p;

		if (cudaGetDeviceProperties(&p, i) == cudaSuccess && usable(&p))
			usable_out[ok++] = i;
	}
	return ok;
}

/* one GPU's context (cudaFree(0) makes it), for pggpu_gpus_start */
extern "C" void
pggpu_gpu_start_impl(int gpu)
{
	if (cudaSetDevice(gpu) == cudaSuccess)
		(void) cudaFree(0);
	(void) cudaGetLastError();
}

/*
 * (portable: every GPU's copies read it; the caller's range whole, its
 * pages' edges within the mapping it lies in)
 */
extern "C" bool
pggpu_host_register(void *p, size_t bytes)
{
	int			n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0 ||
		cudaHostRegister(p, bytes, cudaHostRegisterPortable) != cudaSuccess)
	{
		(void) cudaGetLastError();
		return false;
	}
	return true;
}

extern "C" void
pggpu_host_unregister(void *p)
{
	if (cudaHostUnregister(p) != cudaSuccess)
		(void) cudaGetLastError();
}

extern "C" pggpu_status
pggpu_gpu_info_impl(int index, pggpu_device_info *out, pggpu_error *err)
{
	cudaDeviceProp p;
	size_t		fr = 0,
				tot = 0;
	int			n = 0;

	/* asked first, so a bad index is no CUDA error (compute-sanitizer flags those) */
	CU(cudaGetDeviceCount(&n));
	if (index < 0 || index >= n)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "there is no GPU %d (%d found)", index, n);
	CU(cudaGetDeviceProperties(&p, index));
	memset(out, 0, sizeof(*out));
	out->index = index;
	snprintf(out->name, sizeof(out->name), "%s", p.name);
	out->cc_major = p.major;
	out->cc_minor = p.minor;
	out->multiprocessors = p.multiProcessorCount;
	CU(cudaSetDevice(index));
	CU(cudaMemGetInfo(&fr, &tot));
	out->memory_total = (int64_t) tot;
	out->memory_free = (int64_t) fr;
	CU(cudaDriverGetVersion(&out->driver_version));
	CU(cudaRuntimeGetVersion(&out->runtime_version));
	return PGGPU_OK;
}


/* ---- memory the data sets take and give back often ------------------------ */

/*
 * cudaFree and cudaFreeHost wait for the whole device, and cudaMalloc and
 * cudaHostAlloc cost up to milliseconds: a fit that opens a set, begins
 * k-means and closes it waited for every other fit's work on its GPU at its
 * end (hier.c's groups' fits, run at once, each a few milliseconds).  So a
 * set's own device memory (its rows, its k-means state: memory no other GPU
 * reads) comes from its GPU's stream-ordered pool, taken and given back on
 * the set's stream; its small pinned buffers from a list kept here; its
 * cuBLAS handle from those kept in matmul.cu.  The pool keeps up to
 * POOL_KEEP of what is given back; when the process's last set on a GPU
 * closes, all of it goes back to the GPU (nothing stays after a call).
 */
#define POOL_KEEP ((uint64_t) 1 << 30)
#define PINNED_KEPT 64
#define PINNED_MAX ((size_t) 4 << 20)	/* larger buffers are not kept */

static std::mutex sets_lock;
static int	sets_open[PGGPU_MAX_THREADS];	/* by GPU */
static bool pool_set[PGGPU_MAX_THREADS];
static int	sets_all;

static struct
{
	void	   *p;
	size_t		bytes;
	bool		free;
}			pinned[PINNED_KEPT];

/* a set opened on dev: its pool keeps what is given back (set once) */
void
gpu_sets_opened(int dev)
{
	std::lock_guard<std::mutex> g(sets_lock);

	if (dev < 0 || dev >= PGGPU_MAX_THREADS)
		return;
	if (!pool_set[dev])
	{
		cudaMemPool_t pool;
		uint64_t	keep = POOL_KEEP;

		if (cudaDeviceGetDefaultMemPool(&pool, dev) == cudaSuccess &&
			cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) == cudaSuccess)
			pool_set[dev] = true;
		(void) cudaGetLastError();
	}
	sets_open[dev]++;
	sets_all++;
}

/* a set on dev closed (its stream's work done): the last one gives all back */
void
gpu_sets_closed(int dev)
{
	bool		last_dev,
				last_all;

	{
		std::lock_guard<std::mutex> g(sets_lock);

		if (dev < 0 || dev >= PGGPU_MAX_THREADS || sets_open[dev] == 0)
			return;
		last_dev = --sets_open[dev] == 0;
		last_all = --sets_all == 0;
	}
	if (last_dev)
	{
		cudaMemPool_t pool;
		int			was = -1;

		pggpu_blas_drop(dev);
		/* (the parked rows' buffers were given back on the GPU's legacy stream: done first) */
		(void) cudaGetDevice(&was);
		if (cudaSetDevice(dev) == cudaSuccess)
			(void) cudaStreamSynchronize(0);
		if (cudaDeviceGetDefaultMemPool(&pool, dev) == cudaSuccess)
			(void) cudaMemPoolTrimTo(pool, 0);
		if (was >= 0)
			(void) cudaSetDevice(was);
		(void) cudaGetLastError();
	}
	if (last_all)
	{
		std::lock_guard<std::mutex> g(sets_lock);

		for (int i = 0; i < PINNED_KEPT && sets_all == 0; i++)
			if (pinned[i].p && pinned[i].free)
			{
				cudaFreeHost(pinned[i].p);
				pinned[i].p = NULL;
			}
		(void) cudaGetLastError();
	}
}

/* bytes of device memory on stream (the current device's pool) */
cudaError_t
gpu_mem_take(void **p, size_t bytes, cudaStream_t stream)
{
	cudaError_t e = cudaMallocAsync(p, bytes > 0 ? bytes : 1, stream);

	if (e != cudaSuccess)
	{
		*p = NULL;
		(void) cudaGetLastError();
	}
	return e;
}

/* p (gpu_mem_take's, or NULL) given back on stream, after the work queued there */
void
gpu_mem_give(void *p, cudaStream_t stream)
{
	if (p && cudaFreeAsync(p, stream) != cudaSuccess)
		(void) cudaGetLastError();
}

/* pinned host memory, mapped (its device address: cudaHostGetDevicePointer) */
cudaError_t
gpu_pinned_take(void **p, size_t bytes)
{
	size_t		want = (bytes + 4095) & ~(size_t) 4095;
	cudaError_t e;

	if (want == 0)
		want = 4096;
	if (want <= PINNED_MAX)
	{
		std::lock_guard<std::mutex> g(sets_lock);

		for (int i = 0; i < PINNED_KEPT; i++)
			if (pinned[i].p && pinned[i].free && pinned[i].bytes >= want && pinned[i].bytes <= 4 * want)
			{
				pinned[i].free = false;
				*p = pinned[i].p;
				return cudaSuccess;
			}
	}
	if ((e = cudaHostAlloc(p, want, cudaHostAllocMapped | cudaHostAllocPortable)) != cudaSuccess)
	{
		*p = NULL;
		(void) cudaGetLastError();
		return e;
	}
	if (want <= PINNED_MAX)
	{
		std::lock_guard<std::mutex> g(sets_lock);

		for (int i = 0; i < PINNED_KEPT; i++)
			if (pinned[i].p == NULL)
			{
				pinned[i].p = *p;
				pinned[i].bytes = want;
				pinned[i].free = false;
				break;
			}
	}
	return cudaSuccess;
}

/* p (gpu_pinned_take's, or NULL), no longer read or written by any stream */
void
gpu_pinned_give(void *p)
{
	if (p == NULL)
		return;
	{
		std::lock_guard<std::mutex> g(sets_lock);

		for (int i = 0; i < PINNED_KEPT; i++)
			if (pinned[i].p == p)
			{
				pinned[i].free = true;
				return;
			}
	}
	cudaFreeHost(p);
}
