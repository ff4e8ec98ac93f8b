/*
 * lloyd.cuh - the CUDA-core passes a step launches (lloyd.cu,
 * owned_update.cu, sorted_update.cu): their instances for a plan's shapes, and the kernels
 * that turn partial sums into centroids.  CUDA C++ only.
 */
#ifndef PG_GPU_LLOYD_CUH
#define PG_GPU_LLOYD_CUH

#include "common.cuh"

typedef void (*lloyd_fn) (xview, int64_t, int, int, const double *, int, int,
						  int32_t *, double *, double *, unsigned long long *,
						  double *, double *, dev_stats *);
typedef void (*owned_fn) (xview, int64_t, int, int, int, int, const int32_t *,
						  const double *, double *, double *);

/* lloyd_kernel<tk, dr, mode> (dr: 4, 8, 16, 32, 0 or PGGPU_LABELS_GIVEN; mode: UPD_*) */
lloyd_fn	lloyd_pick(int tk, int dr, int mode);

/* owned_update_kernel for d <= 32 (route.c: pggpu_owned_lg_r, pggpu_owned_smem) */
owned_fn	owned_kernel(int d);

/*
 * sorted_update_kernel (sorted_update.cu): sums and counts (zeroed, global)
 * of the rows by labels given, the blocks' inertia into block_part[0 ..
 * *grid - 1]; at most max_grid blocks
 */
cudaError_t pggpu_sorted_update(xview X, int64_t n, int d, int log_b, int k, const int32_t *labels,
								const double *dist2, const double *rw, double *sums, unsigned long long *cnt,
								double *mass, double *block_part, int max_grid, int64_t *grid,
								cudaStream_t stream);

/*
 * A weighted set's inertia without an update: sum_i rw[i] dist2[i], the
 * blocks' parts into block_part[0 .. *grid - 1] (at most max_grid blocks)
 */
cudaError_t pggpu_weighted_inertia(const double *dist2, const double *rw, int64_t n, double *block_part,
								   int max_grid, int64_t *grid, cudaStream_t stream);

#define RF_BLOCK 256			/* reduce_finalize_kernel: 8 warps, 32 elements a block */

/*
 * UPD_PRIVATE: adds the blocks' partial sums and counts (rows of part) and
 * finalizes, one launch (lloyd.cu); with mirror, the step's stats into
 * pinned host memory too.  Other modes: finalize_kernel, one block.
 */
__global__ void reduce_finalize_kernel(const double *part, int64_t len, int nparts, double *sums,
									   double *C, int k, int d, const double *block_part,
									   dev_stats *stats, dev_stats *mirror);
__global__ void finalize_kernel(double *C, const double *sums, const unsigned long long *cnt,
								const double *mass, int k, int d, int mode, const double *block_part,
								int nparts, dev_stats *stats);

#endif							/* PG_GPU_LLOYD_CUH */
