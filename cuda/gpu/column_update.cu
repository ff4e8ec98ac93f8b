/*
 * column_update.cu - the centroid update from given labels at large k x d
 * (after a product labelled, d > 32): column_update_kernel (route.c,
 * PGGPU_SUM_COLUMNS).
 *
 * Block (b, s) sums columns b cw .. b cw + cw - 1 of the rows of slab s
 * (rows s, s + S, ... in blocks of BLOCK) into k x cw sums in shared memory,
 * one shared atomic a value, then adds them to global memory: k cw atomics
 * a block instead of one a value.  For a column its threads read
 * consecutive rows of a tile: whole sectors.  The blocks of the first
 * columns count the rows too, and sum their distances in a fixed order
 * (block_part[s]: the inertia as finalize_kernel adds it).
 */
#include <cuda_runtime.h>

#include "common.cuh"
#include "lloyd.cuh"

__global__ void __launch_bounds__(BLOCK)
column_update_kernel(const double *__restrict__ X, int64_t n, int d, int log_b, int k, int cw,
					 const int32_t *__restrict__ labels, const double *__restrict__ dist2,
					 double *sums, unsigned long long *cnt, double *block_part)
{
	extern __shared__ double s_sum[];	/* k x cw sums, then k counts */
	double	   *s_cnt = s_sum + (int64_t) k * cw;
	const int	j0 = blockIdx.x * cw;
	const int	w = d - j0 < cw ? d - j0 : cw;
	const bool	first = blockIdx.x == 0;
	const int64_t step = (int64_t) gridDim.y * BLOCK;
	double		inertia = 0;

	for (int64_t e = threadIdx.x; e < (int64_t) k * (cw + 1); e += BLOCK)
		s_sum[e] = 0;
	__syncthreads();
	for (int64_t i = blockIdx.y * (int64_t) BLOCK + threadIdx.x; i < n; i += step)
	{
		const int	c = labels[i];
		const double *x = X + pggpu_at(i, j0, d, log_b);

		for (int jj = 0; jj < w; jj++)
			atomicAdd(&s_sum[(int64_t) c * cw + jj], x[(int64_t) jj << log_b]);
		if (first)
		{
			atomicAdd(&s_cnt[c], 1.0);
			inertia += dist2[i];
		}
	}
	__syncthreads();
	for (int64_t e = threadIdx.x; e < (int64_t) k * cw; e += BLOCK)
	{
		int			c = (int) (e / cw),
					jj = (int) (e % cw);

		if (jj < w && s_sum[e] != 0)
			atomicAdd(&sums[(int64_t) c * d + j0 + jj], s_sum[e]);
	}
	if (first)
	{
		for (int c = threadIdx.x; c < k; c += BLOCK)
			if (s_cnt[c] != 0)
				atomicAdd(&cnt[c], (unsigned long long) s_cnt[c]);
		inertia = block_sum(inertia);
		if (threadIdx.x == 0)
			block_part[blockIdx.y] = inertia;
	}
}

pggpu_status
pggpu_column_update(const double *X, int64_t n, int d, int log_b, int k, int cw, size_t smem,
					int sm_count, int max_grid, const int32_t *labels, const double *dist2, double *sums,
					unsigned long long *cnt, double *block_part, int *slabs, cudaStream_t stream,
					pggpu_error *err)
{
	int			per_sm = 0;
	int			chunks = (d + cw - 1) / cw;
	int64_t		s;

	CU(cudaFuncSetAttribute(column_update_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int) smem));
	CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, column_update_kernel, BLOCK, smem));
	/* about two waves of blocks, at most max_grid slabs (block_part's length) */
	s = ((int64_t) (per_sm > 0 ? per_sm : 1) * sm_count * 2 + chunks - 1) / chunks;
	s = s < max_grid ? s : max_grid;
	s = s < (n + BLOCK - 1) / BLOCK ? s : (n + BLOCK - 1) / BLOCK;
	*slabs = (int) (s > 0 ? s : 1);
	column_update_kernel<<<dim3((unsigned) chunks, (unsigned) *slabs), BLOCK, smem, stream>>>(
		X, n, d, log_b, k, cw, labels, dist2, sums, cnt, block_part);
	LAUNCHED(column_update_kernel);
	return PGGPU_OK;
}
