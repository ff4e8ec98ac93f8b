/*
 * gemm_measure.cuh - what gemm_assign.cu's kernels share about one row: its
 * two smallest a_c (top2_scan over a thread's columns, top2_merge and
 * top2_warp joining the parts; top2_rows, a warp a row), its exact
 * distance to a centroid the reference's way (row_measure), the nearest of
 * a row's candidates by that measure (a warp's few, nearest_listed; a
 * block's many, nearest_block; both by measured_before), and
 * the products' error bounds (the float64 product's, product_bound; the FP16
 * product's, copy_scale, f16_bound and f16_farther), derived in
 * gemm_assign.cu's comments.  CUDA C++ only; device code.
 */
#ifndef PG_GPU_GEMM_MEASURE_CUH
#define PG_GPU_GEMM_MEASURE_CUH

#include "common.cuh"

/*
 * A thread's part of a row's two smallest a_c = nc[c] - f2 S_c (f2 = 2, or
 * 2 2^-2f of the halves' copies): columns first, first + stride, ... in
 * order, so that the lowest index wins ties.  TOP2_U columns' loads in
 * flight at once (one at a time, the scan of a chunk's few wide rows, k =
 * 20,000, waited on memory: 1.2 TB/s on an H200).  NaN never wins.
 */
#define TOP2_U 8

template <typename T>
__device__ __forceinline__ void
top2_scan(const T *__restrict__ s, int k, const double *__restrict__ nc, double f2, int first, int stride,
		  double *best, double *second, int *bi)
{
	double		b = INFINITY,
				sc = INFINITY;
	int			i = 0,
				c = first;

	for (; c + (TOP2_U - 1) * stride < k; c += TOP2_U * stride)
	{
		T			sv[TOP2_U];
		double		nv[TOP2_U];

#pragma unroll
		for (int u = 0; u < TOP2_U; u++)
		{
			sv[u] = s[c + u * stride];
			nv[u] = nc[c + u * stride];
		}
#pragma unroll
		for (int u = 0; u < TOP2_U; u++)
		{
			double		a = __dsub_rn(nv[u], __dmul_rn(f2, (double) sv[u]));

			if (a < b)
				sc = b, b = a, i = c + u * stride;
			else if (a < sc)
				sc = a;
		}
	}
	for (; c < k; c += stride)
	{
		double		a = __dsub_rn(nc[c], __dmul_rn(f2, (double) s[c]));

		if (a < b)
			sc = b, b = a, i = c;
		else if (a < sc)
			sc = a;
	}
	*best = b;
	*second = sc;
	*bi = i;
}

/*
 * Two parts' top-2 merged into the first: the lower best (the lower index
 * on ties), the second the least of the rest.  Symmetric, so that a
 * butterfly of shuffles leaves every lane the whole.
 */
__device__ __forceinline__ void
top2_merge(double *best, double *second, int *bi, double ob, double os, int oi)
{
	if (ob < *best || (ob == *best && oi < *bi))
	{
		*second = fmin(*best, os);
		*best = ob;
		*bi = oi;
	}
	else
		*second = fmin(*second, ob);
}

/* a warp's parts of a row's top-2 merged: every lane gets the whole */
__device__ __forceinline__ void
top2_warp(double *best, double *second, int *bi)
{
	for (int o = 16; o > 0; o >>= 1)
	{
		double		ob = __shfl_xor_sync(FULL, *best, o),
					os = __shfl_xor_sync(FULL, *second, o);
		int			oi = __shfl_xor_sync(FULL, *bi, o);

		top2_merge(best, second, bi, ob, os, oi);
	}
}

/*
 * A warp a row: the row's smallest a_c = nc[c] - 2 f S_c (f = 1, or the
 * halves' 2^-2f), its centroid (the lowest on ties) and the second
 * smallest, of rows t < rows (row t's products at S + t k).  NaN never wins.
 */
template <typename T>
__device__ __forceinline__ void
top2_rows(const T *__restrict__ S, int64_t rows, int k, const double *__restrict__ nc, double f,
		  double *top_a, double *top_b, int32_t *top_c)
{
	const int64_t t = (blockIdx.x * (int64_t) blockDim.x + threadIdx.x) >> 5;
	const int	lane = threadIdx.x & 31;
	double		best,
				second;
	int			bi;

	if (t >= rows)
		return;
	top2_scan(S + t * k, k, nc, 2.0 * f, lane, 32, &best, &second, &bi);
	top2_warp(&best, &second, &bi);
	if (lane == 0)
	{
		top_a[t] = best;
		top_b[t] = second;
		top_c[t] = bi;
	}
}

/*
 * A row's exact distance to centroid c (the reference's sum, columns in
 * order) and, with norm, its |x - mu|^2 (mu NULL: |x|^2; a bound's input,
 * its order of addition free): the row's values x[j xs].  The loads of
 * MEASURE_U columns are in flight at once (one at a time, the certifying
 * passes waited on memory: 0.8 TB/s at d = 768).
 */
#define MEASURE_U 8

template <typename T>
__device__ __forceinline__ double
row_measure(const T *__restrict__ x, int64_t xs, const double *__restrict__ c,
			const double *__restrict__ mu, int d, double *norm)
{
	double		exact = 0,
				nx = 0;
	int			j = 0;
	/*
	 * the centroid's values two at a time where its row is 16-byte aligned:
	 * each thread of a warp reads another centroid, a cache line an
	 * instruction each, and the loads' line count bounded the pass (3.2 ms
	 * at 10^6 x 768, k = 1024 on an H100)
	 */
	const bool	pairs = ((uintptr_t) c & 15) == 0;

	for (; j + MEASURE_U <= d; j += MEASURE_U)
	{
		double		v[MEASURE_U],
					w[MEASURE_U];

#pragma unroll
		for (int u = 0; u < MEASURE_U; u++)
			v[u] = (double) x[(int64_t) (j + u) * xs];
		if (pairs)
#pragma unroll
			for (int u = 0; u < MEASURE_U; u += 2)
			{
				double2		cw = *(const double2 *) (c + j + u);

				w[u] = cw.x;
				w[u + 1] = cw.y;
			}
		else
#pragma unroll
			for (int u = 0; u < MEASURE_U; u++)
				w[u] = c[j + u];
#pragma unroll
		for (int u = 0; u < MEASURE_U; u++)
		{
			if (norm)
			{
				double		y = mu ? v[u] - mu[j + u] : v[u];

				nx = __dadd_rn(nx, __dmul_rn(y, y));
			}
			exact = sq_term(exact, v[u], w[u]);
		}
	}
	for (; j < d; j++)
	{
		double		v = (double) x[(int64_t) j * xs];

		if (norm)
		{
			double		y = mu ? v - mu[j] : v;

			nx = __dadd_rn(nx, __dmul_rn(y, y));
		}
		exact = sq_term(exact, v, c[j]);
	}
	if (norm)
		*norm = nx;
	return exact;
}

/* the float64 product's bound E on a row's a_c (above), from |x|^2 */
__device__ __forceinline__ double
product_bound(int d, double nx, const unsigned long long *ncmax_bits)
{
	return 1.01 * (4.0 * d + 8.0) * 0x1p-53 * (nx + __longlong_as_double((long long) *ncmax_bits));
}

/*
 * 2^f of the copies: the largest |x_j - mu_j| (bits of a double) into
 * [2^12, 2^13): far from the halves' overflow (65504; a centroid up to 8
 * times as far out still fits) and their subnormals (2^-14: a value 2^-26
 * of the largest).
 */
__device__ __forceinline__ double
copy_scale(const unsigned long long *maxabs_bits)
{
	double		m = __longlong_as_double((long long) *maxabs_bits);

	return m > 0 && isfinite(m) ? ldexp(1.0, 12 - ilogb(m)) : 1.0;
}

/* the bound A on a row's a_c (above), from |x - mu|^2 (nxc), the largest |c - mu|^2 and 2^f */
__device__ __forceinline__ double
f16_bound(int d, double nxc, double cmax2, double scale)
{
	const double xn = sqrt(nxc),
				cn = sqrt(cmax2);

	return (d + 2.0) * 0x1p-52 * cmax2 +
		2.02 * ((0x1p-10 + 0x1p-20 + d * 0x1p-22) * xn * cn +
				0x1p-24 * sqrt((double) d) * (xn + cn) / scale + d * 0x1p-48 / (scale * scale));
}

/* whether a centroid's a_c puts it farther than best's by the reference's measure too (NaN: no) */
__device__ __forceinline__ bool
f16_farther(double ac, double best, double nxc, double A, int d)
{
	const double eps = 1.01 * (d + 3.0) * 0x1p-53;

	return ac - best > 2 * A + 2.05 * eps * (fabs(ac) + nxc + A);
}

/*
 * Of two exact distances e (centroid c) and oe (oc), whether the other
 * wins: the least, the lowest index on ties, NaN last (so that the order
 * the candidates were found in does not matter), c < 0 none.
 */
__device__ __forceinline__ bool
measured_before(double oe, int oc, double e, int c)
{
	if (oc < 0)
		return false;
	if (c < 0 || (isnan(e) && !isnan(oe)))
		return true;
	if (isnan(oe) && !isnan(e))
		return false;
	return oe < e || (!(oe > e) && oc < c);
}

/* a warp's least exact distance e (centroid c) by measured_before: every lane gets it */
__device__ __forceinline__ void
warp_least(double *e, int *c)
{
	for (int o = 16; o > 0; o >>= 1)
	{
		double		oe = __shfl_xor_sync(FULL, *e, o);
		int			oc = __shfl_xor_sync(FULL, *c, o);

		if (measured_before(oe, oc, *e, *c))
			*e = oe, *c = oc;
	}
}

/*
 * The sum of a row's rounded terms (x_j - c_j)^2 against centroid row c,
 * taken by a warp (every lane gets it): a lane a column, then a tree.  The
 * same terms as the reference's sum in another order: each within g =
 * 1.01 (d + 1) 2^-53 of the terms' exact sum, relative (non-negative
 * terms).
 */
template <typename T>
__device__ __forceinline__ double
warp_sum(const T *__restrict__ x, int64_t xs, const double *__restrict__ c, int d, int lane)
{
	double		s = 0;
	int			j = lane;

	for (; j + 3 * 32 < d; j += 4 * 32)
	{
		double		v[4],
					w[4];

#pragma unroll
		for (int u = 0; u < 4; u++)
		{
			v[u] = (double) x[(int64_t) (j + u * 32) * xs];
			w[u] = c[j + u * 32];
		}
#pragma unroll
		for (int u = 0; u < 4; u++)
			s = sq_term(s, v[u], w[u]);
	}
	for (; j < d; j += 32)
		s = sq_term(s, (double) x[(int64_t) j * xs], c[j]);
	for (int o = 16; o > 0; o >>= 1)
		s = __dadd_rn(s, __shfl_xor_sync(FULL, s, o));
	return s;
}

/* a candidate's warp sum s is not farther than the least one, lo, by the reference's measure (warp_sum) */
__device__ __forceinline__ bool
sum_near(double s, double lo, int d)
{
	const double g = 1.01 * (d + 1) * 0x1p-53;

	/* (no least sum finite: every candidate near) */
	return !(lo < INFINITY) || s <= __dmul_rn(lo, 1.0 + 8.0 * g);
}

/*
 * The nearest of an uncertain row's m (1 .. LISTED_MEASURED) candidates
 * cand[] by the reference's measure, the lowest index on ties (a warp's
 * call; the row's values x[j 2^log_b]).  First each candidate's sum of the
 * reference's rounded terms (x_j - c_j)^2 is taken by the whole warp, a
 * lane a column, then a tree: the same non-negative terms in another
 * order, so that it and the reference's sum are each within g = 1.01 (d +
 * 1) 2^-53 of the terms' exact sum, relative.  A candidate whose sum
 * exceeds the least one's times 1 + 8 g (both bounds, and that product's
 * rounding) is farther by the reference's measure too.  The rest (the
 * least, and its near ties) are measured the reference's way, a lane each
 * (row_measure), where more than one is left.  Where m (d / 32 + 10) >=
 * d, every candidate is measured so at once, as until 1.11 (m sums of the
 * warp take longer there: 9 to 32 candidates a row of 128 columns on
 * blobs, about 12 ms an iteration against 8.6).  Elsewhere the sums save most
 * of the measures, d dependent additions a lane: 10^6 x 768, k = 4096,
 * 18 % of its rows uncertain, took 28.7 ms an iteration, now 23.3.
 */
template <typename T>
__device__ int
nearest_listed(const T *__restrict__ x, int log_b, const double *__restrict__ C, int d,
			   const int *cand, int m, int lane)
{
	const int64_t xs = (int64_t) 1 << log_b;
	const int	c = lane < m ? cand[lane] : -1;
	bool		near = c >= 0;	/* not ruled out */
	double		e = INFINITY;
	int			best = -1;

	/* (many candidates of few columns: a lane each at once is sooner than m sums of the warp) */
	if (m * (d / 32 + 10) < d)
	{
		double		mine = NAN,
					lo;
		unsigned	nears;

		for (int q = 0; q < m; q++)
		{
			const double s = warp_sum(x, xs, C + (int64_t) cand[q] * d, d, lane);

			if (lane == q)
				mine = s;
		}
		/* the least sum (fmin passes NaN over); none finite: every candidate measured */
		lo = mine;
		for (int o = 16; o > 0; o >>= 1)
			lo = fmin(lo, __shfl_xor_sync(FULL, lo, o));
		near = c >= 0 && sum_near(mine, lo, d);
		nears = __ballot_sync(FULL, near);
		if (__popc(nears) == 1)
			return __shfl_sync(FULL, c, __ffs(nears) - 1);
	}
	if (near)
	{
		e = row_measure(x, xs, C + (int64_t) c * d, NULL, d, NULL);
		best = c;
	}
	warp_least(&e, &best);
	return best;
}

/*
 * The nearest of an uncertain row's m candidates cand[] (m up to
 * BLOCK_LISTED) by the reference's measure, the lowest index on ties: the
 * whole block's call (every thread gets it; sh its shared scratch), each
 * thread measuring the candidates threadIdx.x, threadIdx.x + blockDim.x,
 * ... the reference's way (row_measure), then the block's least by
 * measured_before.  Exact by construction, whatever order the candidates
 * were listed in.
 *
 * For the rows of many candidates of label_f16_kernel's WIDE case (k >
 * 4096): blobs of many centroids each, whose distances the FP16 product's
 * bound cannot tell apart, had 33 to 512 candidates for 56 % of their
 * rows at 10^6 x 256, k = 20,000, and each went to the float64 product of
 * all k centroids: 340 ms an iteration on an H200, 147 measured here.
 * (Warp sums first, as nearest_listed's, took 194: the block's warps each
 * summing a candidate at a time wait on memory more than its threads each
 * measuring one.)  Measuring m candidates reads m d doubles of centroids
 * (through the L2 cache); that product takes 2 k d flops a row: at about
 * 40 flops a byte read, the listing pays while m < k / 40 or so
 * (label_f16_kernel's cap).
 */
#define BLOCK_LISTED 512		/* the most candidates nearest_block takes */

typedef struct block_scratch
{
	double		part_e[32];
	int			part_c[32];
} block_scratch;

template <typename T>
__device__ int
nearest_block(const T *__restrict__ x, int log_b, const double *__restrict__ C, int d,
			  const int *cand, int m, block_scratch *sh)
{
	const int64_t xs = (int64_t) 1 << log_b;
	const int	lane = threadIdx.x & 31,
				warp = threadIdx.x >> 5;
	double		e = INFINITY;
	int			best = -1;

	for (int q = threadIdx.x; q < m; q += blockDim.x)
	{
		const int	c = cand[q];
		const double ex = row_measure(x, xs, C + (int64_t) c * d, NULL, d, NULL);

		if (measured_before(ex, c, e, best))
			e = ex, best = c;
	}
	warp_least(&e, &best);
	if (lane == 0)
		sh->part_e[warp] = e, sh->part_c[warp] = best;
	__syncthreads();
	e = sh->part_e[0], best = sh->part_c[0];
	for (int w = 1; w < (int) (blockDim.x >> 5); w++)
		if (measured_before(sh->part_e[w], sh->part_c[w], e, best))
			e = sh->part_e[w], best = sh->part_c[w];
	return best;
}

#endif							/* PG_GPU_GEMM_MEASURE_CUH */
