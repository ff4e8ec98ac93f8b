/*
 * gemm_assign.cuh - the labels of a data set's rows by a matrix product,
 * exact (gemm_assign.cu): float64 (route gemm) or on halves, centred and
 * scaled copies (route gemm_f16).  CUDA C++ only.
 */
#ifndef PG_GPU_GEMM_ASSIGN_CUH
#define PG_GPU_GEMM_ASSIGN_CUH

#include <cublas_v2.h>

#include "common.cuh"

/* blocks for rows t < rows of a pass, 32 threads a row */
static inline unsigned
warps_grid(int64_t rows)
{
	return (unsigned) ((rows * 32 + BLOCK - 1) / BLOCK);
}

/* device workspace bytes of the passes on n rows, k centroids, d columns, tiles of 2^log_b rows */
size_t		pggpu_gemm_workspace_bytes(int64_t n, int k, int d, int log_b, bool f16, bool f32);

/*
 * f16: the rows' centred copy in halves into ws (sized for k centroids), from
 * the tiled rows X (device, by columns) of ds; once per fit, after the rows
 * are final.
 */
pggpu_status pggpu_gemm_prepare(pggpu_data *ds, int k, xview X, void *ws, cudaStream_t stream,
								pggpu_error *err);

/*
 * labels[i], dist2[i] of every row of ds against the k x d centroids C
 * (device, row-major), exactly as the CPU reference; *changed += the rows
 * whose label changed.  f16_ws: ws is an f16 one (prepared); then *f16
 * says whether the product is still the one on halves, and a pass that
 * leaves more than half the rows to the float64 product sets it false;
 * tally[0]: the rows it could not certify, tally[1]: those of them left to
 * the float64 product (both -1: the float64 product ran).  measure false: with
 * the product on halves, the rows it certifies keep their dist2 (a Lloyd
 * step that wants no distances; pggpu_gemm_dists measures them later).
 * Async on stream (h's), but for a sync after each span of rows with f16
 * and before each call of ds's interrupt callback.
 */
pggpu_status pggpu_gemm_label(pggpu_data *ds, cublasHandle_t h, xview X, const double *C,
							  bool f16_ws, bool *f16, void *ws, bool measure, int32_t *labels,
							  double *dist2, unsigned long long *changed, int64_t tally[2],
							  cudaStream_t stream, pggpu_error *err);

/*
 * dist2[i] = the exact distance (the CPU reference's) of every row of ds
 * to C[labels[i]]: the distances a step without measure left.  Async on
 * stream.
 */
pggpu_status pggpu_gemm_dists(pggpu_data *ds, xview X, const double *C, const int32_t *labels, double *dist2,
							  cudaStream_t stream, pggpu_error *err);

/*
 * The labels of rows g0 .. g0 + rows - 1 from their products on halves S
 * (a row's k adjacent), as the route gemm_f16 certifies them
 * (gemm_label.cu; the arrays are the workspace's, gemm_assign.cu).  Async
 * on stream.
 */
void		pggpu_label_f16(xview X, const float *S, const double *nc, const unsigned long long *ncmax,
							const unsigned long long *maxabs, const double *nxc, int64_t *over,
							unsigned int *counts, int64_t g0, int64_t rows, int k, int d, int log_b,
							const double *C, int32_t *labels, unsigned long long *changed, cudaStream_t stream);

#endif							/* PG_GPU_GEMM_ASSIGN_CUH */
