/*
 * trials.cu - what the driver's seeding reads of the rows on the GPU
 * (pggpu_ops keys, get_rows and km_trials): their content keys, rows by
 * index, and greedy k-means++'s trials, bit for bit cpu/trials.c's: the
 * same terms (compute_internal.h), summed in the same order.
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

/* out[t] := X[rows[t]] (row-major), a block a row; zeros for a row -1 */
__global__ void
rows_gather_kernel(const double *__restrict__ X, int d, int log_b, bool x_rows, const long long *rows,
				   double *out)
{
	long long	r = rows[blockIdx.x];

	for (int j = threadIdx.x; j < d; j += blockDim.x)
		out[(int64_t) blockIdx.x * d + j] = r < 0 ? 0.0 : X[x_at(r, j, d, log_b, x_rows)];
}

/* rows a gather at most (its grid's blocks) */
#define GATHER_ROWS 65536

pggpu_status
gpu_get_rows(pggpu_data *ds, const int64_t *rows, int64_t m, double *out, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		chunk = m < GATHER_ROWS ? m : GATHER_ROWS;
	char	   *buf = NULL;
	cudaError_t e = cudaSuccess;

	if (m == 0)
		return PGGPU_OK;
	CU(cudaMallocAsync((void **) &buf, (sizeof(long long) + sizeof(double) * ds->d) * chunk, s->stream));
	for (int64_t i0 = 0; i0 < m && e == cudaSuccess; i0 += chunk)
	{
		int64_t		take = m - i0 < chunk ? m - i0 : chunk;
		double	   *dout = (double *) (buf + sizeof(long long) * chunk);

		e = cudaMemcpyAsync(buf, rows + i0, sizeof(long long) * take, cudaMemcpyHostToDevice, s->stream);
		if (e == cudaSuccess)
		{
			rows_gather_kernel<<<(unsigned) take, 128, 0, s->stream>>>(s->X, ds->d, ds->log_b, s->x_rows,
																	   (const long long *) buf, dout);
			e = cudaPeekAtLastError();
		}
		if (e == cudaSuccess)
			e = cudaMemcpyAsync(out + i0 * ds->d, dout, sizeof(double) * ds->d * take, cudaMemcpyDeviceToHost,
								s->stream);
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(s->stream);	/* rows and out are pageable: the next chunk reuses buf */
	}
	(void) cudaFreeAsync(buf, s->stream);
	CU(e);
	CU(cudaStreamSynchronize(s->stream));
	return PGGPU_OK;
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

/* a thread a candidate: its blocks' sums in order (INFINITY for no row) */
__global__ void
trials_total_kernel(const double *bsum, int64_t nblocks, int m, const long long *rows, double *pot)
{
	int			c = blockIdx.x * blockDim.x + threadIdx.x;
	double		s = 0.0;

	if (c >= m)
		return;
	for (int64_t b = 0; b < nblocks; b++)
		s = __dadd_rn(s, bsum[(int64_t) c * nblocks + b]);
	pot[c] = rows[c] < 0 ? INFINITY : s;
}

/*
 * The draws (seed.cu), the candidates' values, the potentials, and one copy
 * back and wait for all of it, in a workspace kept with the k-means state
 */
pggpu_status
gpu_km_trials(pggpu_data *ds, const uint64_t *keys, int m, int64_t *rows, double *pot, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		nblocks = (ds->n + PGGPU_DRAW_ROWS - 1) / PGGPU_DRAW_ROWS;
	size_t		bytes = sizeof(double) * ((size_t) m * ds->d + (size_t) m * nblocks + m) + sizeof(long long) * m;
	double	   *cand,
			   *bsum,
			   *dpot;
	long long  *drows;
	pggpu_status st;

	if (m < 1)
		return PGGPU_OK;
	if (s->trial_ws_bytes < bytes)
	{
		CU(cudaStreamSynchronize(s->stream));
		cudaFree(s->trial_ws);
		s->trial_ws = NULL;
		s->trial_ws_bytes = 0;
		CU(cudaMalloc(&s->trial_ws, bytes));
		s->trial_ws_bytes = bytes;
	}
	cand = (double *) s->trial_ws;
	bsum = cand + (size_t) m * ds->d;
	dpot = bsum + (size_t) m * nblocks;
	drows = (long long *) (dpot + m);
	if ((st = gpu_draw_rows(ds, keys, m, drows, err)) != PGGPU_OK)
		return st;
	rows_gather_kernel<<<(unsigned) m, 128, 0, s->stream>>>(s->X, ds->d, ds->log_b, s->x_rows, drows, cand);
	LAUNCHED(rows_gather_kernel);
	trials_kernel<<<(unsigned) nblocks, PGGPU_DRAW_ROWS, 0, s->stream>>>(
		s->X, ds->n, ds->d, ds->log_b, s->x_rows, s->dist2, s->rw, cand, m, bsum, nblocks);
	LAUNCHED(trials_kernel);
	trials_total_kernel<<<1, 32 * ((m + 31) / 32), 0, s->stream>>>(bsum, nblocks, m, drows, dpot);
	LAUNCHED(trials_total_kernel);
	static_assert(sizeof(long long) == sizeof(int64_t), "rows as the draws leave them");
	CU(cudaMemcpyAsync(pot, dpot, sizeof(double) * m, cudaMemcpyDeviceToHost, s->stream));
	CU(cudaMemcpyAsync(rows, drows, sizeof(long long) * m, cudaMemcpyDeviceToHost, s->stream));
	CU(cudaStreamSynchronize(s->stream));
	return PGGPU_OK;
}
