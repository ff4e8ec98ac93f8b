/*
 * gemm_assign.cuh - the labels of a data set's rows by a float64 matrix
 * product, exact (gemm_assign.cu).  CUDA C++ only.
 */
#ifndef PG_GPU_GEMM_ASSIGN_CUH
#define PG_GPU_GEMM_ASSIGN_CUH

#include <cublas_v2.h>

#include "common.cuh"

/* device workspace bytes of pggpu_gemm_label for n rows, k centroids, tiles of 2^log_b rows */
size_t		pggpu_gemm_workspace_bytes(int64_t n, int k, int log_b);

/*
 * labels[i], dist2[i] of every row of ds against the k x d centroids C
 * (device, row-major), exactly as the CPU reference; *changed += the rows
 * whose label changed.  Async on stream (h's), but for a sync before each
 * call of ds's interrupt callback between chunks of rows.
 */
pggpu_status pggpu_gemm_label(pggpu_data *ds, cublasHandle_t h, const double *C, void *ws,
							  size_t ws_bytes, int32_t *labels, double *dist2,
							  unsigned long long *changed, cudaStream_t stream, pggpu_error *err);

#endif							/* PG_GPU_GEMM_ASSIGN_CUH */
