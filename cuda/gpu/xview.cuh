/*
 * xview.cuh - the rows of a data set as the kernels read them: a device
 * pointer to doubles, or to floats (a FLOAT32 set, 4 bytes a value), read
 * as doubles.  CUDA C++ only; apart from common.cuh so that tc.cuh, which
 * the tensor-core lab includes alone, has it too.
 */
#ifndef PG_GPU_XVIEW_CUH
#define PG_GPU_XVIEW_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

/*
 * The rows as the kernels read them (common.cuh: xview_of): doubles, or a
 * FLOAT32 set's floats (f32: 4 bytes a value on the device), or a FLOAT16
 * set's halves (f16: 2 bytes), each widened as it is loaded, which is
 * exact, so that every distance, sum and key is the one the same values
 * held as doubles give.  The type is the same in every thread of a launch:
 * its branch never diverges.  Only kernels that rewrite the rows (scale,
 * affine: the set is widened first, gpu_widen) take them as doubles; the
 * tensor cores' staging has its own way (tc_common.cuh: widen_staged).
 */
struct xview
{
	const void *p;
	bool		f32;
	bool		f16;

	__device__ __forceinline__ double operator[](int64_t e) const
	{
		return f16 ? (double) __half2float(__ldg((const __half *) p + e)) :
			f32 ? (double) __ldg((const float *) p + e) : __ldg((const double *) p + e);
	}
	__host__ __device__ __forceinline__ xview operator+(int64_t e) const
	{
		return xview{f16 ? (const void *) ((const __half *) p + e) :
					 f32 ? (const void *) ((const float *) p + e) : (const void *) ((const double *) p + e),
					 f32, f16};
	}
};

#endif							/* PG_GPU_XVIEW_CUH */
