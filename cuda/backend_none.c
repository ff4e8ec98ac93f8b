/*
 * backend_none.c - stands in for backend_gpu.cu in builds without nvcc: the
 * same SQL interface, CPU only.
 */
#include "compute_internal.h"

#include <stddef.h>

const pggpu_ops *const pggpu_gpu_ops = NULL;

int
pggpu_gpu_count_impl(pggpu_error *err)
{
	pggpu_fail(err, PGGPU_ERR_NO_GPU, "pg_gpu was built without CUDA");
	return 0;
}

pggpu_status
pggpu_gpu_info_impl(int index, pggpu_device_info *out, pggpu_error *err)
{
	(void) index;
	(void) out;
	return pggpu_fail(err, PGGPU_ERR_NO_GPU, "pg_gpu was built without CUDA");
}
