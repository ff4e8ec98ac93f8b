/*
 * device.cu - the GPUs: which are usable (compute capability of this build's
 * target or newer), what gpu_info() reports, CUDA errors as pggpu errors.
 */
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

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

