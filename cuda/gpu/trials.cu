/*
 * trials.cu - the rows' content keys and greedy k-means++'s trials on the
 * GPU (pggpu_ops keys and km_trials), bit for bit cpu/trials.c's: the same
 * terms (compute_internal.h), summed in the same order.
 */
#include <cuda_runtime.h>

#include <climits>

#include "common.cuh"

/* a thread a row: its key from its values as pushed */
__global__ void
keys_kernel(const double *__restrict__ X, int64_t n, int d, int log_b, bool x_rows,
			unsigned long long *keys)
{
	for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
	{
		uint64_t	h = 0;
		int			emax = INT_MIN;

		for (int j = 0; j < d; j++)
		{
			double		v = X[x_at(i, j, d, log_b, x_rows)];

			if (v != 0 && pggpu_key_exponent(v) > emax)
				emax = pggpu_key_exponent(v);
		}
		for (int j = 0; j < d; j++)
			h += pggpu_key_term(X[x_at(i, j, d, log_b, x_rows)], emax, j);
		keys[i] = pggpu_key_final(h, d);
	}
}

pggpu_status
gpu_keys(pggpu_data *ds, uint64_t *keys, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	unsigned long long *dk = NULL;

	if (ds->n == 0)
		return PGGPU_OK;
	CU(cudaMallocAsync((void **) &dk, sizeof(unsigned long long) * ds->n, s->stream));
	keys_kernel<<<grid_for(s, ds->n), BLOCK, 0, s->stream>>>(s->X, ds->n, ds->d, ds->log_b, s->x_rows, dk);
	if (cudaPeekAtLastError() == cudaSuccess)
		(void) cudaMemcpyAsync(keys, dk, sizeof(uint64_t) * ds->n, cudaMemcpyDeviceToHost, s->stream);
	(void) cudaFreeAsync(dk, s->stream);
	LAUNCHED(keys_kernel);
	CU(cudaStreamSynchronize(s->stream));
	return PGGPU_OK;
}

/* C[t] := X[rows[t]] for the trials' candidates, a block a candidate */
__global__ void
trial_gather_kernel(const double *__restrict__ X, int d, int log_b, bool x_rows, const long long *rows,
					double *cand)
{
	for (int j = threadIdx.x; j < d; j += blockDim.x)
		cand[(int64_t) blockIdx.x * d + j] = X[x_at(rows[blockIdx.x], j, d, log_b, x_rows)];
}

/* candidates measured at once a pass over a block's rows (registers) */
#define TRIAL_CHUNK 8

/*
 * A block of PGGPU_DRAW_ROWS threads a block of the draw's rows: thread
 * 32 r + l takes row 256 b + 32 r + l, measures it against the candidates
 * and leaves its terms in shared memory; warp 0 then sums them in
 * pggpu_trial_block's order (lane l: r = 0..7 in order, then the butterfly).
 */
__global__ void __launch_bounds__(PGGPU_DRAW_ROWS)
trials_kernel(const double *__restrict__ X, int64_t n, int d, int log_b, bool x_rows,
			  const double *__restrict__ dist2, const double *__restrict__ rw,
			  const double *__restrict__ cand, int m, double *bsum, int64_t nblocks)
{
	__shared__ double t[TRIAL_CHUNK][PGGPU_DRAW_ROWS];
	int64_t		b = blockIdx.x;
	int64_t		i = b * PGGPU_DRAW_ROWS + threadIdx.x;
	int			lane = threadIdx.x & 31;

	for (int c0 = 0; c0 < m; c0 += TRIAL_CHUNK)
	{
		double		acc[TRIAL_CHUNK];
		int			mc = m - c0 < TRIAL_CHUNK ? m - c0 : TRIAL_CHUNK;

#pragma unroll
		for (int c = 0; c < TRIAL_CHUNK; c++)
			acc[c] = 0.0;
		if (i < n)
			for (int j = 0; j < d; j++)
			{
				double		x = X[x_at(i, j, d, log_b, x_rows)];

#pragma unroll
				for (int c = 0; c < TRIAL_CHUNK; c++)
					if (c < mc)
						acc[c] = sq_term(acc[c], x, cand[(int64_t) (c0 + c) * d + j]);
			}
#pragma unroll
		for (int c = 0; c < TRIAL_CHUNK; c++)
			t[c][threadIdx.x] = i < n && c < mc ? pggpu_trial_term(dist2[i], acc[c], rw, i) : 0.0;
		__syncthreads();
		if (threadIdx.x < 32)
			for (int c = 0; c < mc; c++)
			{
				double		sum = 0.0;

				for (int r = 0; r < PGGPU_DRAW_ROWS / 32; r++)
					sum = __dadd_rn(sum, t[c][r * 32 + lane]);
				for (int o = 16; o > 0; o >>= 1)
					sum = __dadd_rn(sum, __shfl_xor_sync(FULL, sum, o));
				if (lane == 0)
					bsum[(int64_t) (c0 + c) * nblocks + b] = sum;
			}
		__syncthreads();
	}
}

/* a thread a candidate: its blocks' sums in order */
__global__ void
trials_total_kernel(const double *bsum, int64_t nblocks, int m, double *pot)
{
	int			c = blockIdx.x * blockDim.x + threadIdx.x;
	double		s = 0.0;

	if (c >= m)
		return;
	for (int64_t b = 0; b < nblocks; b++)
		s = __dadd_rn(s, bsum[(int64_t) c * nblocks + b]);
	pot[c] = s;
}

pggpu_status
gpu_km_trials(pggpu_data *ds, const int64_t *rows, int m, double *pot, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		nblocks = (ds->n + PGGPU_DRAW_ROWS - 1) / PGGPU_DRAW_ROWS;
	size_t		bytes = sizeof(long long) * m + sizeof(double) * ((size_t) m * ds->d + (size_t) m * nblocks + m);
	char	   *buf = NULL;
	long long  *drows;
	double	   *cand,
			   *bsum,
			   *dpot;

	if (m < 1 || ds->n == 0)
	{
		for (int c = 0; c < m; c++)
			pot[c] = 0.0;
		return PGGPU_OK;
	}
	CU(cudaMallocAsync((void **) &buf, bytes, s->stream));
	cand = (double *) buf;
	bsum = cand + (size_t) m * ds->d;
	dpot = bsum + (size_t) m * nblocks;
	drows = (long long *) (dpot + m);
	if (cudaMemcpyAsync(drows, rows, sizeof(long long) * m, cudaMemcpyHostToDevice, s->stream) == cudaSuccess)
	{
		trial_gather_kernel<<<(unsigned) m, 128, 0, s->stream>>>(s->X, ds->d, ds->log_b, s->x_rows, drows, cand);
		trials_kernel<<<(unsigned) nblocks, PGGPU_DRAW_ROWS, 0, s->stream>>>(
			s->X, ds->n, ds->d, ds->log_b, s->x_rows, s->dist2, s->rw, cand, m, bsum, nblocks);
		trials_total_kernel<<<1, 32 * ((m + 31) / 32), 0, s->stream>>>(bsum, nblocks, m, dpot);
		if (cudaPeekAtLastError() == cudaSuccess)
			(void) cudaMemcpyAsync(pot, dpot, sizeof(double) * m, cudaMemcpyDeviceToHost, s->stream);
	}
	(void) cudaFreeAsync(buf, s->stream);
	LAUNCHED(trials_kernel);
	CU(cudaStreamSynchronize(s->stream));
	return PGGPU_OK;
}
