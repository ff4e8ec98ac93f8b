/*
 * gemm_assign.cu - nearest-centroid labels for many columns (d > 32) by a
 * float64 matrix product, exact.
 *
 * |x - c|^2 = |x|^2 + |c|^2 - 2 x.c: cuBLAS DGEMM (float64 tensor cores on
 * Hopper) computes x.c for a chunk of rows against every centroid into S
 * (rows x k, at most GEMM_S_BYTES), then gemm_label_kernel takes each row's
 * smallest a_c = |c|^2 - 2 S_c and its second smallest.  The product's
 * rounding is bounded: every a_c is within E of the reference's distance
 * (cpu/kmeans.c: sum over j in order of (x_j - c_j)^2, each operation
 * rounded) less |x|^2, with E = 1.01 (4 d + 8) 2^-53 (|x|^2 + max |c|^2)
 * (the norms and each dot product err by at most d 2^-53 (1 + ...) of
 * |x|^2 + |c|^2, and so does the reference's own sum).  A row whose second
 * smallest is more than 2 E above the smallest is certain: its label is
 * the smallest's centroid and its distance is measured the reference's
 * way.  Other rows (near ties) measure every centroid within 2 E of the
 * smallest the reference's way, lowest index on ties.  So labels and
 * distances are exactly the CPU's.  Data far from the origin (|x|^2 much
 * larger than the distances) make more rows uncertain: slower, never
 * wrong.
 */
#include <cuda_runtime.h>

#include "blas.cuh"
#include "common.cuh"
#include "gemm_assign.cuh"

#define GEMM_S_BYTES ((size_t) 256 << 20)	/* the products of a chunk */

/* |c|^2 of every centroid, and the largest (bits of a non-negative double) */
__global__ void
centroid_norms_kernel(const double *__restrict__ C, int k, int d, double *nc,
					  unsigned long long *ncmax)
{
	int			c = blockIdx.x * blockDim.x + threadIdx.x;

	if (c < k)
	{
		double		s = 0;

		for (int j = 0; j < d; j++)
			s = __dadd_rn(s, __dmul_rn(C[(int64_t) c * d + j], C[(int64_t) c * d + j]));
		nc[c] = s;
		atomicMax(ncmax, (unsigned long long) __double_as_longlong(s));
	}
}

/*
 * A thread a row: rows g0 .. g0 + rows - 1 of X, their products in S in
 * blocks of R rows (block b: k columns of R, column-major).
 */
__global__ void __launch_bounds__(BLOCK)
gemm_label_kernel(const double *__restrict__ X, int64_t g0, int64_t rows, int d, int log_b,
				  const double *__restrict__ C, int k, const double *__restrict__ S, int R,
				  const double *__restrict__ nc, const unsigned long long *ncmax_bits,
				  int32_t *labels, double *dist2, unsigned long long *changed)
{
	int64_t		i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x;
	unsigned long long moved = 0;

	if (i < rows)
	{
		int64_t		g = g0 + i;
		const double *s = S + (i / R) * R * (int64_t) k + i % R;
		const double *x = X + (g >> log_b) * ((int64_t) d << log_b) + (g & (((int64_t) 1 << log_b) - 1));
		const int64_t xs = (int64_t) 1 << log_b;	/* x_j at x[j xs] */
		double		best = INFINITY,
					second = INFINITY,
					nx = 0,
					exact = 0;
		int			bi = 0;

		for (int c = 0; c < k; c++)
		{
			double		a = __dsub_rn(nc[c], __dmul_rn(2.0, s[(int64_t) c * R]));

			if (a < best)
				second = best, best = a, bi = c;
			else if (a < second)
				second = a;
		}
		for (int j = 0; j < d; j++)
		{
			double		v = x[j * xs];

			nx = __dadd_rn(nx, __dmul_rn(v, v));
			exact = sq_term(exact, v, C[(int64_t) bi * d + j]);
		}

		double		e = 1.01 * (4.0 * d + 8.0) * 0x1p-53 *
			(nx + __longlong_as_double((long long) *ncmax_bits));
		int			label = bi;

		if (!(second - best > 2 * e))
		{
			/* a near tie: every centroid within 2 E, measured exactly */
			double		lim = best + 2 * e;

			label = -1;
			for (int c = 0; c < k; c++)
				if (__dsub_rn(nc[c], __dmul_rn(2.0, s[(int64_t) c * R])) <= lim)
				{
					double		dc = 0;

					for (int j = 0; j < d; j++)
						dc = sq_term(dc, x[j * xs], C[(int64_t) c * d + j]);
					if (label < 0 || dc < exact)
						exact = dc, label = c;
				}
		}
		moved = labels[g] != label;
		labels[g] = label;
		dist2[g] = exact;
	}
	moved = __reduce_add_sync(0xffffffffu, (unsigned) moved);
	if ((threadIdx.x & 31) == 0 && moved)
		atomicAdd(changed, moved);
}

size_t
pggpu_gemm_workspace_bytes(int64_t n, int k, int log_b)
{
	size_t		tile = sizeof(double) * ((size_t) k << log_b);
	size_t		need = sizeof(double) * (size_t) k * (size_t) (n > 0 ? n : 1);
	size_t		s = need < GEMM_S_BYTES ? need : GEMM_S_BYTES;

	if (s < tile && s < need)
		s = s / (sizeof(double) * 32 * k) * (sizeof(double) * 32 * k);	/* whole blocks of 32 rows */
	if (s < sizeof(double) * 32 * (size_t) k)
		s = sizeof(double) * 32 * (size_t) k;
	/* then |c|^2 (k) and their largest */
	return s + sizeof(double) * (size_t) k + 64;
}

pggpu_status
pggpu_gemm_label(pggpu_data *ds, cublasHandle_t h, const double *C, void *ws, size_t ws_bytes,
				 int32_t *labels, double *dist2, unsigned long long *changed, cudaStream_t stream,
				 pggpu_error *err)
{
	const int	k = ds->k,
				d = ds->d;
	const int64_t B = (int64_t) 1 << ds->log_b;
	const int64_t n = ds->n;
	const size_t s_bytes = ws_bytes - sizeof(double) * (size_t) k - 64;
	double	   *S = (double *) ws;
	double	   *nc = (double *) ((char *) ws + s_bytes);
	unsigned long long *ncmax = (unsigned long long *) (nc + k);
	const gpu_state *st = ST(ds);
	/* whole tiles a chunk where one fits, else blocks of R rows of a tile */
	const int64_t tile_s = (int64_t) k * B;
	const int64_t per = (int64_t) (s_bytes / sizeof(double));
	const bool	whole = per >= tile_s;
	const int	R = whole ? (int) B : (int) (per / k / 32 * 32);
	const int64_t chunk_rows = whole ? per / tile_s * B : R;
	int64_t		rows;

	CU(cudaMemsetAsync(ncmax, 0, sizeof(*ncmax), stream));
	centroid_norms_kernel<<<(unsigned) ((k + 127) / 128), 128, 0, stream>>>(C, k, d, nc, ncmax);
	LAUNCHED(centroid_norms_kernel);
	for (int64_t g0 = 0; g0 < n; g0 += rows)
	{
		pggpu_status ps;

		/* whole tiles; or R rows, not past the tile's end */
		rows = n - g0 < chunk_rows ? n - g0 : chunk_rows;
		if (!whole && rows > B - (g0 & (B - 1)))
			rows = B - (g0 & (B - 1));
		if (g0 > 0 && ds->interrupt)
		{
			/* (what is queued runs on: free_km syncs before it frees) */
			CU(cudaStreamSynchronize(stream));
			ds->interrupt(ds->interrupt_arg);
		}
		if (whole)
			ps = pggpu_blas_dgemm_batched(h, (int) B, k, d, st->X + (g0 >> ds->log_b) * B * d, (int) B,
										  B * d, C, d, S, (int) B, tile_s,
										  (int) ((rows + B - 1) / B), err);
		else
			ps = pggpu_blas_dgemm_batched(h, (int) rows, k, d,
										  st->X + (g0 >> ds->log_b) * B * d + (g0 & (B - 1)), (int) B,
										  0, C, d, S, R, 0, 1, err);
		if (ps != PGGPU_OK)
			return ps;
		gemm_label_kernel<<<(unsigned) ((rows + BLOCK - 1) / BLOCK), BLOCK, 0, stream>>>(
			st->X, g0, rows, d, ds->log_b, C, k, S, R, nc, ncmax, labels, dist2, changed);
		LAUNCHED(gemm_label_kernel);
	}
	return PGGPU_OK;
}
