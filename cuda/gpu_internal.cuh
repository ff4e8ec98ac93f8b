/*
 * gpu_internal.cuh - what the CUDA sources (backend_gpu.cu, matmul_gpu.cu)
 * share: CUDA error reporting and the choice of GPU.  CUDA C++ only.
 */
#ifndef PG_GPU_GPU_INTERNAL_CUH
#define PG_GPU_GPU_INTERNAL_CUH

#include <cuda_runtime.h>

#include "compute_internal.h"

#ifndef PGGPU_MIN_CC
#define PGGPU_MIN_CC 90			/* the oldest architecture the build targets */
#endif

/* fills err from a CUDA error (out of memory: PGGPU_ERR_GPU_MEMORY) */
pggpu_status pggpu_cuda_fail(pggpu_error *err, cudaError_t e, const char *what);

#define CU(call) do { cudaError_t e_ = (call); \
	if (e_ != cudaSuccess) return pggpu_cuda_fail(err, e_, #call); } while (0)

/*
 * Walks the GPUs once: returns how many are usable and, in *chosen and *props,
 * the first usable one that is `want` (any, when want < 0), or -1.  Without
 * one, err says why.
 */
int			pggpu_find_gpus(int want, int *chosen, cudaDeviceProp *props, pggpu_error *err);

#endif							/* PG_GPU_GPU_INTERNAL_CUH */
