/*
 * blas.cuh - cuBLAS for the k-means passes (gemm_assign.cu), loaded on first
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
 * C_b = A_b B for b < batches, column-major float64 (A_b = A + b stride_a,
 * m x k; B, k x n, the same for every b; C_b = C + b stride_c, m x n)
 */
pggpu_status pggpu_blas_dgemm_batched(cublasHandle_t h, int m, int n, int k, const double *A, int lda,
									  long long stride_a, const double *B, int ldb, double *C,
									  int ldc, long long stride_c, int batches, pggpu_error *err);

/* the same in float32 with TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32) */
pggpu_status pggpu_blas_tf32_batched(cublasHandle_t h, int m, int n, int k, const float *A, int lda,
									 long long stride_a, const float *B, int ldb, float *C, int ldc,
									 long long stride_c, int batches, pggpu_error *err);

#endif							/* PG_GPU_BLAS_CUH */
