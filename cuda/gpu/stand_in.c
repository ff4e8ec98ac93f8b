/*
 * stand_in.c - stands in for the CUDA backend (cuda/gpu/) in builds without
 * nvcc: the same SQL interface, CPU only.
 */
#include "compute_internal.h"
#include "knn.h"

#include <stddef.h>

const pggpu_ops *const pggpu_gpu_ops = NULL;

int
pggpu_gpu_count_impl(pggpu_error *err)
{
	pggpu_fail(err, PGGPU_ERR_NO_GPU, "pg_gpu was built without CUDA");
	return 0;
}

int
pggpu_gpu_list_impl(int *usable, int max, int *total, pggpu_error *err)
{
	(void) usable;
	(void) max;
	*total = 0;
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

pggpu_status
pggpu_gpu_mm_open(pggpu_matmul *mm, int gpu_index, pggpu_error *err)
{
	(void) mm;
	(void) gpu_index;
	return pggpu_fail(err, PGGPU_ERR_NO_GPU, "pg_gpu was built without CUDA");
}

void *
pggpu_gpu_host_alloc(size_t bytes, size_t *got)
{
	(void) bytes;
	*got = 0;
	return NULL;
}

void
pggpu_gpu_host_free(void *p, size_t size)
{
	(void) p;
	(void) size;
}

bool
pggpu_host_register(void *p, size_t bytes)
{
	(void) p, (void) bytes;
	return false;
}

void
pggpu_host_unregister(void *p)
{
	(void) p;
}

void
pggpu_pinned_cache_limit(size_t bytes)
{
	(void) bytes;
}

size_t
pggpu_pinned_cache_bytes(void)
{
	return 0;
}

pggpu_status
pggpu_gpu_mm_run(pggpu_matmul *mm, const pggpu_matmul_params *p,
				 const void *a, const void *b, void *c,
				 pggpu_matmul_info *info, pggpu_error *err)
{
	(void) mm, (void) p, (void) a, (void) b, (void) c, (void) info;
	return pggpu_fail(err, PGGPU_ERR_NO_GPU, "pg_gpu was built without CUDA");
}

void
pggpu_gpu_mm_close(pggpu_matmul *mm)
{
	(void) mm;
}

pggpu_status
pggpu_gpu_mm_stage_b(pggpu_matmul *mm, const pggpu_matmul_params *p, const void *b, int64_t lo, int64_t hi,
					 pggpu_error *err)
{
	(void) mm, (void) p, (void) b, (void) lo, (void) hi;
	return pggpu_fail(err, PGGPU_ERR_NO_GPU, "pg_gpu was built without CUDA");
}

pggpu_status
pggpu_gpu_mm_gather_b(pggpu_matmul *const *mms, int n, int i, const int64_t *cuts, int64_t cols, int64_t es,
					  pggpu_error *err)
{
	(void) mms, (void) n, (void) i, (void) cuts, (void) cols, (void) es;
	return pggpu_fail(err, PGGPU_ERR_NO_GPU, "pg_gpu was built without CUDA");
}

void
pggpu_blas_load(void)
{
}

void
pggpu_gpu_start_impl(int gpu)
{
	(void) gpu;
}

pggpu_status
pggpu_gpu_knn_open(pggpu_knn *kn, int gpu_index, pggpu_error *err)
{
	(void) kn;
	(void) gpu_index;
	return pggpu_fail(err, PGGPU_ERR_NO_GPU, "pg_gpu was built without CUDA");
}

pggpu_status
pggpu_gpu_knn_fill(pggpu_knn *kn, int b, pggpu_error *err)
{
	(void) kn, (void) b;
	return pggpu_fail(err, PGGPU_ERR_NO_GPU, "pg_gpu was built without CUDA");
}

pggpu_status
pggpu_gpu_knn_put(pggpu_knn *kn, int b, int64_t at, const void *v, int64_t pitch, int64_t n, bool by_rows,
				  bool pinned, pggpu_error *err)
{
	(void) kn, (void) b, (void) at, (void) v, (void) pitch, (void) n, (void) by_rows, (void) pinned;
	return pggpu_fail(err, PGGPU_ERR_NO_GPU, "pg_gpu was built without CUDA");
}

pggpu_status
pggpu_gpu_knn_start(pggpu_knn *kn, int b, int64_t nb, const int32_t *rank, const double *bound, pggpu_error *err)
{
	(void) kn, (void) b, (void) nb, (void) rank, (void) bound;
	return pggpu_fail(err, PGGPU_ERR_NO_GPU, "pg_gpu was built without CUDA");
}

pggpu_status
pggpu_gpu_knn_finish(pggpu_knn *kn, int64_t *idx, double *dist, pggpu_error *err)
{
	(void) kn;
	(void) idx;
	(void) dist;
	return pggpu_fail(err, PGGPU_ERR_NO_GPU, "pg_gpu was built without CUDA");
}

void
pggpu_gpu_knn_close(pggpu_knn *kn)
{
	(void) kn;
}
