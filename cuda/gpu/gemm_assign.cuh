/*
 * gemm_assign.cuh - the labels of a data set's rows by a matrix product,
 * exact (gemm_assign.cu): float64 (route gemm) or TF32 on centred copies
 * (route gemm_tf32).  CUDA C++ only.
 */
#ifndef PG_GPU_GEMM_ASSIGN_CUH
#define PG_GPU_GEMM_ASSIGN_CUH

#include <cublas_v2.h>

#include "common.cuh"

/* device workspace bytes of the passes on n rows, k centroids, d columns, tiles of 2^log_b rows */
size_t		pggpu_gemm_workspace_bytes(int64_t n, int k, int d, int log_b, bool tf32, bool f32);

/*
 * tf32: the rows' centred TF32 copy into ws (sized for k centroids), from
 * the tiled rows X (device, by columns) of ds; once per fit, after the rows
 * are final.
 */
pggpu_status pggpu_gemm_prepare(pggpu_data *ds, int k, xview X, void *ws, cudaStream_t stream,
								pggpu_error *err);

/*
 * labels[i], dist2[i] of every row of ds against the k x d centroids C
 * (device, row-major), exactly as the CPU reference; *changed += the rows
 * whose label changed.  tf32_ws: ws is a tf32 one (prepared); then *tf32
 * says whether the product is the TF32 one, and a pass that finds more
 * than half the rows uncertain sets it false; *uncertain: the rows it
 * could not certify (-1: the float64 product ran).  Async on stream (h's), but
 * for a sync after each chunk of rows with tf32 and before each call of
 * ds's interrupt callback.
 */
pggpu_status pggpu_gemm_label(pggpu_data *ds, cublasHandle_t h, xview X, const double *C,
							  bool tf32_ws, bool *tf32, void *ws, int32_t *labels, double *dist2,
							  unsigned long long *changed, int64_t *uncertain, cudaStream_t stream,
							  pggpu_error *err);

#endif							/* PG_GPU_GEMM_ASSIGN_CUH */
