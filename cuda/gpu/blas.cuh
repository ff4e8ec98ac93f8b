/*
 * blas.cuh - cuBLAS for the k-means passes (gemm_assign.cu) and gpu_knn's
 * product (knn.cu), loaded on first
 * use by matmul.cu, which owns the library's handle table.  CUDA C++ only.
 */
#ifndef PG_GPU_BLAS_CUH
#define PG_GPU_BLAS_CUH

#include <cublas_v2.h>

#include "common.cuh"

/* a handle on stream (cuBLAS loaded first: an error says why it cannot be) */
pggpu_status pggpu_blas_open(cudaStream_t stream, cublasHandle_t *handle, pggpu_error *err);
void		pggpu_blas_close(cublasHandle_t handle);

/*
 * A data set's handle on stream, on GPU dev, taken from those given back
 * (or opened), and given back after its stream's work is done; the ones
 * kept for dev destroyed by pggpu_blas_drop (pggpu_gpu_sets' last close)
 */
pggpu_status pggpu_blas_take(int dev, cudaStream_t stream, cublasHandle_t *handle, pggpu_error *err);
void		pggpu_blas_give(int dev, cublasHandle_t handle);
void		pggpu_blas_drop(int dev);

/*
 * The products of rows with centroids, a row's adjacent: for b < batches,
 * S_b[t k + c] = sum_j C[c d + j] X_b[t + j ld], t < rows (X_b = X + b
 * stride_x, by columns; S_b = S + b stride_s).  float64 (f16 false: C, X,
 * S double), or the tensor cores on halves (C, X __half), float32 products
 * accumulated in float32 (S float; CUBLAS_COMPUTE_32F).
 */
pggpu_status pggpu_blas_row_products(cublasHandle_t h, bool f16, const void *C, int k, int d,
									 const void *X, int ld, long long stride_x, int rows, void *S,
									 long long stride_s, int batches, pggpu_error *err);

/*
 * C (m x n, by columns, ldc) = A B + beta C, A m x k and B k x n by
 * columns (lda, ldb): float32 in every phase (gpu/knn.cu's product, whose
 * bound counts on it)
 */
pggpu_status pggpu_blas_sgemm_nn(cublasHandle_t h, int m, int n, int k, const float *A, int lda,
								 const float *B, int ldb, float beta, float *C, int ldc, pggpu_error *err);

#endif							/* PG_GPU_BLAS_CUH */
