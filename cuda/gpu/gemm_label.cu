/*
 * gemm_label.cu - the labels of a chunk's rows from their products on
 * halves (route gemm_f16, gemm_assign.cu, which says how a row is
 * certified): label_f16_kernel (a warp or a block a row), label_rows_kernel
 * (a thread a row, at few centroids and columns), an uncertain row's label
 * (label_uncertain, both), and pggpu_label_f16, which launches one.
 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <type_traits>

#include "common.cuh"
#include "gemm_assign.cuh"
#include "gemm_measure.cuh"

/*
 * The products on halves of a chunk's rows g0 .. g0 + rows - 1 (row t's at
 * S + t k) to labels, in one pass while they are in hand: each row's two
 * smallest a_c (f = 2^-2f of the copies, from maxabs) and the test that
 * certifies its best (f16_farther, from the row's |x - mu|^2 in nxc).  A
 * certain row gets its label.  For an uncertain one (counts[1] counts
 * them) its products are read again (from the cache), and of the
 * centroids the test cannot rule out the nearest by the reference's
 * measure is its label (nearest_listed; nearest_block for more than
 * LISTED_MEASURED, WIDE only).  No distance is written (pggpu_gemm_label
 * measures every row after, where asked).  A row with none or more than
 * its cap of such centroids (clusters 11 bits cannot tell apart: each
 * measure reads a centroid's row) goes to over (counts[0] of them) for the
 * float64 product, whose bound leaves few.  The cap: LISTED_MEASURED a
 * warp a row; WIDE, k / 40 between that and LISTED_WIDE (nearest_block
 * says why).
 *
 * WIDE: a block a row, its 8 warps sharing the columns (at k = 20,000 a
 * chunk is 2048 rows: a warp a row left 16 warps on each multiprocessor,
 * waiting on memory); else a warp a row, 8 rows a block.  (Until 1.11 the
 * uncertain rows were listed, gathered, their products computed again and
 * measured by another kernel, a thread a candidate only where candidates
 * shared a column of 32: 60 % of an iteration at 10^6 x 768, k = 4096.)
 */
#define LISTED_MEASURED 32
#define LISTED_WIDE BLOCK_LISTED

/*
 * (WIDE: 5 blocks a multiprocessor, 48 registers: nearest_block took it to
 * 59 and 4 blocks, and rows of few candidates, 10^6 x 256 embeddings at k =
 * 20,000, 3 % longer an iteration)
 */
#define LABEL_WIDE_K 4096		/* more centroids: label_f16_kernel WIDE */

/*
 * An uncertain row's label (g: its row, s: its products, x: its values,
 * best its smallest a_c), by the threads of a row (a warp; WIDE, the
 * block: bsh is then its block_scratch), -1 where the float64 product is
 * to label it (then listed in over); counts[1] counts the uncertain rows.
 * cand and ncand: the row's scratch in shared memory.
 */
template <typename T, bool WIDE>
__device__ int
label_uncertain(const float *__restrict__ s, int k, const double *__restrict__ nc, double f2, double best,
				double nx, double A, int d, const T *__restrict__ x, int log_b, const double *__restrict__ C,
				int *cand, unsigned int *ncand, void *bsh, unsigned int cap, int64_t g, int64_t *over,
				unsigned int *counts)
{
	constexpr int THREADS = WIDE ? BLOCK : 32;
	const int	lane = threadIdx.x & 31,
				warp = threadIdx.x >> 5,
				first = WIDE ? (int) threadIdx.x : lane;
	int			label = -1;

	/*
	 * the row's values on their way to the cache (each measure below reads
	 * them a few at a time, 8 loads in flight); the candidates; then a
	 * thread of the first warp measures each
	 */
	for (int j = first; j < d; j += THREADS)
		asm volatile("prefetch.global.L2 [%0];" :: "l"(x + ((int64_t) j << log_b)));
	if (first == 0)
		*ncand = 0;
	if (WIDE)
		__syncthreads();
	else
		__syncwarp();
	for (int c = first; c < k; c += THREADS)
		if (!f16_farther(__dsub_rn(nc[c], __dmul_rn(f2, (double) s[c])), best, nx, A, d))
		{
			unsigned int i = atomicAdd(ncand, 1u);

			if (i < cap)
				cand[i] = c;
		}
	if (WIDE)
		__syncthreads();
	else
		__syncwarp();

	const unsigned int m = *ncand;

	if (m == 0 || m > cap)
		;
	else if constexpr (WIDE)
	{
		if (m > LISTED_MEASURED)
			label = nearest_block(x, log_b, C, d, cand, (int) m, (block_scratch *) bsh);
		else if (warp == 0)
			label = nearest_listed(x, log_b, C, d, cand, (int) m, lane);
	}
	else
		label = nearest_listed(x, log_b, C, d, cand, (int) m, lane);
	/* (none: the float64 product's; WIDE, first is in warp 0, which has the label) */
	if (first == 0 && label < 0)
		over[atomicAdd(&counts[0], 1u)] = g;
	if (first == 0)
		atomicAdd(&counts[1], 1u);
	return label;
}

template <typename T, bool WIDE>
__global__ void __launch_bounds__(BLOCK, WIDE ? 5 : 4)
label_f16_kernel(const float *__restrict__ S, int64_t g0, int64_t rows, int k,
				 const double *__restrict__ nc, const unsigned long long *ncmax_bits,
				 const unsigned long long *maxabs_bits, const double *__restrict__ nxc,
				 const T *__restrict__ X, int d, int log_b, const double *__restrict__ C,
				 int32_t *labels, unsigned long long *changed, int64_t *over, unsigned int *counts)
{
	constexpr int GROUPS = WIDE ? 1 : BLOCK / 32;	/* rows a block */
	constexpr int THREADS = WIDE ? BLOCK : 32;	/* threads a row */
	constexpr int LISTED = WIDE ? LISTED_WIDE : LISTED_MEASURED;
	__shared__ double part_b[BLOCK / 32],
				part_s[BLOCK / 32];
	__shared__ int part_i[BLOCK / 32],
				cand[GROUPS][LISTED];
	__shared__ typename std::conditional<WIDE, block_scratch, char>::type bsh;	/* nearest_block's */
	__shared__ unsigned int ncand[GROUPS];
	const int	lane = threadIdx.x & 31,
				warp = threadIdx.x >> 5;
	const int	grp = WIDE ? 0 : warp,
				first = WIDE ? (int) threadIdx.x : lane;
	const int64_t t = WIDE ? (int64_t) blockIdx.x : blockIdx.x * (int64_t) GROUPS + warp;

	/*
	 * (no barrier of the block but where a block is a row: 8 rows' warps
	 * waiting on one another's uncertain rows held a block slot each, 24
	 * ms of a pass at 10^6 x 768, k = 4096)
	 */
	if (t < rows)				/* (the whole block, WIDE) */
	{
		const float *s = S + t * k;
		const double scale = copy_scale(maxabs_bits);
		const double f2 = 2.0 / (scale * scale);
		const int64_t g = g0 + t;
		double		best,
					second;
		int			bi,
					label;

		top2_scan(s, k, nc, f2, first, THREADS, &best, &second, &bi);
		top2_warp(&best, &second, &bi);
		if (WIDE)
		{
			if (lane == 0)
				part_b[warp] = best, part_s[warp] = second, part_i[warp] = bi;
			__syncthreads();
			best = part_b[0], second = part_s[0], bi = part_i[0];
			for (int w = 1; w < BLOCK / 32; w++)
				top2_merge(&best, &second, &bi, part_b[w], part_s[w], part_i[w]);
		}

		const double nx = nxc[g];
		const double A = f16_bound(d, nx, __longlong_as_double((long long) *ncmax_bits), scale);
		const unsigned int cap = WIDE ? min(LISTED_WIDE, max(LISTED_MEASURED, k / 40)) : LISTED_MEASURED;

		label = bi;
		if (!f16_farther(second, best, nx, A, d))
			label = label_uncertain<T, WIDE>(s, k, nc, f2, best, nx, A, d, X + pggpu_at(g, 0, d, log_b), log_b, C,
											 cand[grp], &ncand[grp], &bsh, cap, g, over, counts);
		if (first == 0 && label >= 0)
		{
			if (labels[g] != label)
				atomicAdd(changed, 1ULL);
			labels[g] = label;
		}
	}
}


/*
 * label_f16_kernel's work at few centroids and columns (k <= LABEL_ROWS_K,
 * d <= LABEL_ROWS_D), a thread a row: a warp's 32 rows' products come to
 * shared memory 32 columns at a time (a load a row, coalesced), each lane
 * scans its row's in column order and tests its best, and the warp then
 * takes its uncertain rows one at a time (label_uncertain).  The same
 * labels: a row's two smallest are the same in any order, the lowest index
 * winning ties.  A warp a row spends most of its instructions on what a
 * row costs once (merging the lanes' top-2, the bound).  On an H200,
 * 10^6 embeddings (float32, cosine), ms an iteration with the update of
 * sorted_update.cu, two runs: d = 128, k = 256: 1.27-1.31 against
 * 1.47; but d = 768, k = 256: 3.18-3.26 against 3.18, d = 1536: 5.86-5.95
 * against 5.59, d = 768, k = 1024: 11.4-11.9 against 10.1 (a warp's
 * uncertain rows in turn, each measure d long, while the other warps wait
 * on none).
 */
#define LABEL_ROWS_K 256
#define LABEL_ROWS_D 128

template <typename T>
__global__ void __launch_bounds__(BLOCK)
label_rows_kernel(const float *__restrict__ S, int64_t g0, int64_t rows, int k,
				  const double *__restrict__ nc, const unsigned long long *ncmax_bits,
				  const unsigned long long *maxabs_bits, const double *__restrict__ nxc,
				  const T *__restrict__ X, int d, int log_b, const double *__restrict__ C,
				  int32_t *labels, unsigned long long *changed, int64_t *over, unsigned int *counts)
{
	__shared__ float tile[BLOCK / 32][32][33];	/* a warp's rows by 32 columns (+ 1: a row a bank apart) */
	__shared__ double ncs[LABEL_ROWS_K];
	__shared__ int cand[BLOCK / 32][LISTED_MEASURED];
	__shared__ unsigned int ncand[BLOCK / 32];
	const int	lane = threadIdx.x & 31,
				warp = threadIdx.x >> 5;
	const int64_t t0 = blockIdx.x * (int64_t) BLOCK + warp * 32,	/* the warp's first row */
				t = t0 + lane;
	const double scale = copy_scale(maxabs_bits);
	const double f2 = 2.0 / (scale * scale);
	double		best = INFINITY,
				second = INFINITY,
				nx = 0,
				A = 0;
	int			bi = 0;
	bool		uncertain = false;

	for (int c = threadIdx.x; c < k; c += BLOCK)
		ncs[c] = nc[c];
	__syncthreads();
	if (t0 >= rows)
		return;					/* (the whole warp) */
	for (int c0 = 0; c0 < k; c0 += 32)
	{
		const int	w = k - c0 < 32 ? k - c0 : 32;

#pragma unroll
		for (int r = 0; r < 32; r++)
			if (t0 + r < rows && lane < w)
				tile[warp][r][lane] = S[(t0 + r) * k + c0 + lane];
		__syncwarp();
#pragma unroll 8
		for (int j = 0; j < w; j++)
		{
			const double a = __dsub_rn(ncs[c0 + j], __dmul_rn(f2, (double) tile[warp][lane][j]));

			if (a < best)
				second = best, best = a, bi = c0 + j;
			else if (a < second)
				second = a;
		}
		__syncwarp();
	}
	if (t < rows)
	{
		nx = nxc[g0 + t];
		A = f16_bound(d, nx, __longlong_as_double((long long) *ncmax_bits), scale);
		uncertain = !f16_farther(second, best, nx, A, d);
		if (!uncertain)
		{
			if (labels[g0 + t] != bi)
				atomicAdd(changed, 1ULL);
			labels[g0 + t] = bi;
		}
	}
	for (unsigned m = __ballot_sync(FULL, uncertain); m; m &= m - 1)
	{
		const int	r = __ffs(m) - 1;
		const int64_t g = g0 + t0 + r;
		const int	label = label_uncertain<T, false>(S + (t0 + r) * k, k, nc, f2, __shfl_sync(FULL, best, r),
													  __shfl_sync(FULL, nx, r), __shfl_sync(FULL, A, r), d,
													  X + pggpu_at(g, 0, d, log_b), log_b, C, cand[warp],
													  &ncand[warp], NULL, LISTED_MEASURED, g, over, counts);

		if (lane == 0 && label >= 0)
		{
			if (labels[g] != label)
				atomicAdd(changed, 1ULL);
			labels[g] = label;
		}
		__syncwarp();			/* the row's candidates read before the next row's are listed */
	}
}

template <typename T>
static void
launch_label(const T *X, const float *S, const double *nc, const unsigned long long *ncmax,
			 const unsigned long long *maxabs, const double *nxc, int64_t *over, unsigned int *counts,
			 int64_t g0, int64_t rows, int k, int d, int log_b, const double *C, int32_t *labels,
			 unsigned long long *changed, cudaStream_t stream)
{
	if (k > LABEL_WIDE_K)
		label_f16_kernel<T, true><<<(unsigned) rows, BLOCK, 0, stream>>>(
			S, g0, rows, k, nc, ncmax, maxabs, nxc, X, d, log_b, C, labels, changed, over, counts);
	else if (k <= LABEL_ROWS_K && d <= LABEL_ROWS_D)
		label_rows_kernel<T><<<(unsigned) ((rows + BLOCK - 1) / BLOCK), BLOCK, 0, stream>>>(
			S, g0, rows, k, nc, ncmax, maxabs, nxc, X, d, log_b, C, labels, changed, over, counts);
	else
		label_f16_kernel<T, false><<<warps_grid(rows), BLOCK, 0, stream>>>(
			S, g0, rows, k, nc, ncmax, maxabs, nxc, X, d, log_b, C, labels, changed, over, counts);
}

void
pggpu_label_f16(xview X, const float *S, const double *nc, const unsigned long long *ncmax,
				const unsigned long long *maxabs, const double *nxc, int64_t *over, unsigned int *counts,
				int64_t g0, int64_t rows, int k, int d, int log_b, const double *C, int32_t *labels,
				unsigned long long *changed, cudaStream_t stream)
{
	if (X.f16)
		launch_label((const __half *) X.p, S, nc, ncmax, maxabs, nxc, over, counts, g0, rows, k, d, log_b, C,
					 labels, changed, stream);
	else if (X.f32)
		launch_label((const float *) X.p, S, nc, ncmax, maxabs, nxc, over, counts, g0, rows, k, d, log_b, C,
					 labels, changed, stream);
	else
		launch_label((const double *) X.p, S, nc, ncmax, maxabs, nxc, over, counts, g0, rows, k, d, log_b, C,
					 labels, changed, stream);
}
