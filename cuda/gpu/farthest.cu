/*
 * farthest.cu - gpu_km_farthest: the repair of emptied clusters' candidates
 * on the GPU (op km_farthest, compute_internal.h), so that a repair copies
 * a few rows' places and distances to the host, not every distance.
 *
 * The floor, the m-th largest positive distance (the least positive one
 * where fewer are positive), is found by a radix select on the distances'
 * bits (a non-negative double orders as its bits do): eight passes, each a
 * histogram of the next byte among the distances that match the bytes
 * chosen so far, the host choosing the byte that holds the m-th.  Then the
 * rows at or beyond it are listed (any order, by an atomic count) and
 * sorted by place on the host.  NaN is never positive, as in
 * pggpu_farthest_floor.
 */
#include <cuda_runtime.h>

#include <stdlib.h>
#include <string.h>

#include "common.cuh"

/* counts by byte (bits >> shift) & 255 of the positive distances whose bits & mask == prefix */
__global__ void __launch_bounds__(BLOCK)
farthest_hist_kernel(const double *__restrict__ D, int64_t n, unsigned long long prefix,
					 unsigned long long mask, int shift, unsigned long long *hist)
{
	__shared__ unsigned int h[256];

	for (int t = threadIdx.x; t < 256; t += blockDim.x)
		h[t] = 0;
	__syncthreads();
	for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x)
	{
		double		v = D[i];
		unsigned long long b = (unsigned long long) __double_as_longlong(v);

		if (v > 0 && (b & mask) == prefix)
			atomicAdd(&h[(b >> shift) & 255], 1u);
	}
	__syncthreads();
	for (int t = threadIdx.x; t < 256; t += blockDim.x)
		if (h[t])
			atomicAdd(&hist[t], (unsigned long long) h[t]);
}

/* the rows with a positive distance at or beyond floor (bits): *count of them, the first cap listed */
__global__ void __launch_bounds__(BLOCK)
farthest_list_kernel(const double *__restrict__ D, int64_t n, unsigned long long floor_bits, int64_t cap,
					 unsigned long long *count, long long *rows, double *d2)
{
	for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x)
	{
		double		v = D[i];

		if (v > 0 && (unsigned long long) __double_as_longlong(v) >= floor_bits)
		{
			unsigned long long at = atomicAdd(count, 1ULL);

			if ((int64_t) at < cap)
				rows[at] = (long long) i, d2[at] = v;
		}
	}
}

typedef struct place_d2
{
	int64_t		row;
	double		d2;
} place_d2;

static int
by_place(const void *a, const void *b)
{
	int64_t		x = ((const place_d2 *) a)->row,
				y = ((const place_d2 *) b)->row;

	return (x > y) - (x < y);
}

pggpu_status
gpu_km_farthest(pggpu_data *ds, int m, int64_t cap, double *floor, int64_t *count, int64_t *rows, double *d2,
				pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	const int64_t n = ds->n;
	unsigned int grid = (unsigned) ((n + BLOCK - 1) / BLOCK < 4 * 1024 ? (n + BLOCK - 1) / BLOCK + 1 : 4 * 1024);
	unsigned long long hist[256],
				prefix = 0,
				mask = 0,
				need = 0,
				npos = 0,
				got = 0;
	unsigned long long *dh = NULL;
	long long  *drows = NULL;
	double	   *dd2 = NULL;
	place_d2   *pairs = NULL;
	pggpu_status st = PGGPU_OK;
	cudaError_t e;

	*floor = 0;
	*count = 0;
	if (n == 0 || m <= 0)
		return PGGPU_OK;
	if ((st = pggpu_gpu_fresh_dists(ds, err)) != PGGPU_OK)
		return st;
#define FAR(call) do { if ((e = (call)) != cudaSuccess) { st = pggpu_cuda_fail(err, e, #call); goto done; } } while (0)
	FAR(cudaMalloc((void **) &dh, sizeof(unsigned long long) * 257));
	FAR(cudaMalloc((void **) &drows, sizeof(long long) * (cap > 0 ? cap : 1)));
	FAR(cudaMalloc((void **) &dd2, sizeof(double) * (cap > 0 ? cap : 1)));
	/* a byte a pass, the highest first; need: the rank sought among those matching */
	for (int shift = 56; shift >= 0; shift -= 8)
	{
		unsigned long long above = 0;
		int			b = 255;

		FAR(cudaMemsetAsync(dh, 0, sizeof(unsigned long long) * 256, s->stream));
		farthest_hist_kernel<<<grid, BLOCK, 0, s->stream>>>(s->dist2, n, prefix, mask, shift, dh);
		FAR(cudaPeekAtLastError());
		FAR(cudaMemcpyAsync(hist, dh, sizeof(hist), cudaMemcpyDeviceToHost, s->stream));
		FAR(cudaStreamSynchronize(s->stream));
		if (shift == 56)
		{
			for (int t = 0; t < 256; t++)
				npos += hist[t];
			if (npos == 0)
				goto done;		/* none positive: no candidate (floor 0) */
			need = npos < (unsigned long long) m ? npos : (unsigned long long) m;
		}
		for (; b > 0 && above + hist[b] < need; b--)
			above += hist[b];
		need -= above;
		prefix |= (unsigned long long) b << shift;
		mask |= 255ULL << shift;
	}
	memcpy(floor, &prefix, sizeof(double));
	FAR(cudaMemsetAsync(dh + 256, 0, sizeof(unsigned long long), s->stream));
	farthest_list_kernel<<<grid, BLOCK, 0, s->stream>>>(s->dist2, n, prefix, cap, dh + 256, drows, dd2);
	FAR(cudaPeekAtLastError());
	FAR(cudaMemcpyAsync(&got, dh + 256, sizeof(got), cudaMemcpyDeviceToHost, s->stream));
	FAR(cudaStreamSynchronize(s->stream));
	*count = (int64_t) got;
	if (*count > cap || *count == 0)
		goto done;
	/* their places ascending, as the host's scan lists them */
	if ((pairs = (place_d2 *) malloc(sizeof(place_d2) * *count)) == NULL)
	{
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		goto done;
	}
	FAR(cudaMemcpy(rows, drows, sizeof(int64_t) * *count, cudaMemcpyDeviceToHost));
	FAR(cudaMemcpy(d2, dd2, sizeof(double) * *count, cudaMemcpyDeviceToHost));
	for (int64_t a = 0; a < *count; a++)
		pairs[a].row = rows[a], pairs[a].d2 = d2[a];
	qsort(pairs, (size_t) *count, sizeof(place_d2), by_place);
	for (int64_t a = 0; a < *count; a++)
		rows[a] = pairs[a].row, d2[a] = pairs[a].d2;
#undef FAR
done:
	free(pairs);
	cudaFree(dh);
	cudaFree(drows);
	cudaFree(dd2);
	return st;
}
