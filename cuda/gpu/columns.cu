/*
 * columns.cu - the GPU's column statistics and affine map of the rows
 * (standard scaling: pggpu_data_standardize in ../columns.c), rounded as the
 * CPU's (cpu/columns.c): pggpu_col_sum's lanes are a warp's lanes; and the
 * rows scaled to norm 1 (cosine: pggpu_data_unit_rows).
 */
#include <cuda_runtime.h>

#include "common.cuh"

/* a warp a (tile, column): sums[t * d + j] as pggpu_col_sum */
__global__ void
col_sums_kernel(xview X, const double *__restrict__ rw, int64_t n, int d, int log_b,
				const double *__restrict__ center, double *sums, int64_t warps)
{
	int64_t		w = (blockIdx.x * (int64_t) blockDim.x + threadIdx.x) >> 5;
	int			lane = threadIdx.x & 31;
	int64_t		b = (int64_t) 1 << log_b;
	int64_t		t;
	int			j;
	int64_t		rows;
	xview		col;
	double		s = 0.0;

	if (w >= warps)
		return;
	t = w / d;
	j = (int) (w % d);
	rows = n - t * b < b ? n - t * b : b;
	col = X + (t * d + j) * b;
	for (int64_t r = lane; r < rows; r += 32)
		s = PGGPU_ADD(s, pggpu_col_weighed(pggpu_col_term(col[r], center, j), rw ? rw + t * b : NULL, r));
	for (int h = 16; h > 0; h >>= 1)
	{
		double		o = __shfl_down_sync(FULL, s, h);

		if (lane < h)
			s = s + o;
	}
	if (lane == 0)
		sums[w] = s;
}

__global__ void
col_affine_kernel(double *X, int64_t n, int d, int log_b, const double *__restrict__ sub,
				  const double *__restrict__ div, int64_t len)
{
	int64_t		per = (int64_t) d << log_b;

	for (int64_t e = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; e < len;
		 e += (int64_t) gridDim.x * blockDim.x)
	{
		int64_t		rem = e % per;
		int64_t		row = (e / per << log_b) + (rem & (((int64_t) 1 << log_b) - 1));
		int			j = (int) (rem >> log_b);

		if (row < n)
			X[e] = pggpu_affine(X[e], sub[j], div[j]);
	}
}

/* a thread a row: scaled to norm 1 in place, down its tile's column (pggpu_normalize_at) */
__global__ void
unit_rows_kernel(double *X, int64_t n, int d, int log_b)
{
	int64_t		i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x;

	if (i < n)
		(void) pggpu_normalize_at(X + (i >> log_b) * ((int64_t) d << log_b) + (i & (((int64_t) 1 << log_b) - 1)),
								  (int64_t) 1 << log_b, d, 1.0);
}

/* see pggpu_ops: col_sums */
pggpu_status
gpu_col_sums(pggpu_data *ds, const double *center, double *sums, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		warps = ((ds->n + TILE(ds) - 1) >> ds->log_b) * ds->d;
	double	   *dev = NULL;
	pggpu_status st;

	if (warps == 0)
		return PGGPU_OK;
	if ((st = x_layout(ds, false, err)) != PGGPU_OK)
		return st;
	CU(gpu_mem_take((void **) &dev, sizeof(double) * (warps + ds->d), s->stream));
	if (center)
		CU(cudaMemcpyAsync(dev + warps, center, sizeof(double) * ds->d, cudaMemcpyHostToDevice,
						   s->stream));
	col_sums_kernel<<<(unsigned) ((warps * 32 + BLOCK - 1) / BLOCK), BLOCK, 0, s->stream>>>(
		xview_of(ds), s->rw, ds->n, ds->d, ds->log_b, center ? dev + warps : NULL, dev, warps);
	if (cudaPeekAtLastError() == cudaSuccess)
		(void) cudaMemcpyAsync(sums, dev, sizeof(double) * warps, cudaMemcpyDeviceToHost, s->stream);
	st = cudaStreamSynchronize(s->stream) == cudaSuccess ? PGGPU_OK :
		pggpu_cuda_fail(err, cudaGetLastError(), "col_sums_kernel");
	gpu_mem_give(dev, s->stream);
	return st;
}

/* see pggpu_ops: col_affine */
pggpu_status
gpu_col_affine(pggpu_data *ds, const double *sub, const double *div, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		len = ((ds->n + TILE(ds) - 1) >> ds->log_b) * ((int64_t) ds->d << ds->log_b);
	double	   *dev = NULL;
	pggpu_status st;

	if (len == 0)
		return PGGPU_OK;
	/* (the values rewritten: doubles) */
	if ((st = x_layout(ds, false, err)) != PGGPU_OK || (st = gpu_widen(ds, err)) != PGGPU_OK)
		return st;
	CU(gpu_mem_take((void **) &dev, sizeof(double) * 2 * ds->d, s->stream));
	(void) cudaMemcpyAsync(dev, sub, sizeof(double) * ds->d, cudaMemcpyHostToDevice, s->stream);
	(void) cudaMemcpyAsync(dev + ds->d, div, sizeof(double) * ds->d, cudaMemcpyHostToDevice, s->stream);
	col_affine_kernel<<<grid_for(s, len), BLOCK, 0, s->stream>>>((double *) s->X, ds->n, ds->d, ds->log_b,
																 dev, dev + ds->d, len);
	s->xh_valid = false;
	st = cudaStreamSynchronize(s->stream) == cudaSuccess && cudaPeekAtLastError() == cudaSuccess ?
		PGGPU_OK : pggpu_cuda_fail(err, cudaGetLastError(), "col_affine_kernel");
	gpu_mem_give(dev, s->stream);
	return st;
}

/* see pggpu_ops: unit_rows */
pggpu_status
gpu_unit_rows(pggpu_data *ds, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	pggpu_status st;

	if ((st = x_layout(ds, false, err)) != PGGPU_OK || (st = gpu_widen(ds, err)) != PGGPU_OK)
		return st;
	if (ds->n == 0)
		return PGGPU_OK;
	unit_rows_kernel<<<(unsigned) ((ds->n + BLOCK - 1) / BLOCK), BLOCK, 0, s->stream>>>((double *) s->X, ds->n,
																					   ds->d, ds->log_b);
	s->xh_valid = false;
	return cudaStreamSynchronize(s->stream) == cudaSuccess && cudaPeekAtLastError() == cudaSuccess ?
		PGGPU_OK : pggpu_cuda_fail(err, cudaGetLastError(), "unit_rows_kernel");
}
