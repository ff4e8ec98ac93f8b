/*
 * sorted_update.cu - the centroid update from given labels where the sums
 * (k x d float64) fit no block's shared memory (the product's routes at
 * d > 32): sorted_update_kernel.
 *
 * One add a value straight into the global sums (lloyd_kernel's
 * UPD_GLOBAL) puts N d atomics on the L2: at N = 10^6, d = 768 that was 7.9
 * ms an iteration on an H100, the largest part of it.  Here a block takes
 * chunks of SU_ROWS rows, sorts each by label in shared memory (CUB's
 * stable block radix sort of the labels, the rows' places riding along),
 * stages a few of the chunk's columns at a time in shared memory (read
 * coalesced, as stored), and a warp's lanes, a column each, walk its
 * sorted places in order, adding a run of equal labels and its count with
 * one atomic each where it ends (a lane a column: the atomics of a run hit
 * adjacent sums).  At k = 1024 a chunk's 2048 rows hold about 890 labels
 * (about 2.3 rows a run); at k = 256, 8.  The inertia is each block's sum
 * of its rows' distances in a fixed order.
 *
 * Where the chunks are fewer than the blocks the GPU holds (a small set: a
 * hierarchical group's 7,000 rows are 4 chunks), each chunk's columns are
 * split between blocks (blockIdx.y: every gridDim.y-th group of columns),
 * each sorting the chunk's labels itself: 4 blocks took 356 us an
 * iteration at 7,000 x 256, k = 141 (H200), each walking 32 groups of
 * columns in turn.
 *
 * Two blocks a multiprocessor (256 threads, at most 128 registers, about
 * 78 KB of shared memory each), so that one block's loads overlap the
 * other's walk, its barriers between them: at 10^6 x 128, k = 1024 (float32
 * blobs, H200) an iteration took 12.1-12.3 ms with one block of 512
 * threads (4096 rows a chunk), 8.9 with two; 128 threads x 4 blocks, the
 * same there and slower at 768 x 1024 (8.0 ms against 7.6).
 *
 * A weighted set's (rw): each value times its row's weight (one rounding,
 * as the CPU's), each run's weights summed into mass with its count, and
 * the inertia of w_i dist2[i]; a weighted set's steps all sum here
 * (route.c's pggpu_plan_weighted).
 *
 * The sums are float64 of the exact values (floats widened), as before; as
 * with any global atomics their order of addition, and so their last bits,
 * may differ between runs (lloyd_kernel's UPD_GLOBAL was the same).
 */
#include <cuda_runtime.h>

#include <cub/block/block_radix_sort.cuh>

#include "common.cuh"
#include "lloyd.cuh"

#define SU_THREADS 256
#define SU_ITEMS 8
#define SU_ROWS (SU_THREADS * SU_ITEMS)	/* rows a chunk */
#define SU_WARPS (SU_THREADS / 32)
#define SU_SPANS (SU_ROWS / 32 / SU_WARPS)	/* 32-place spans a warp */

/*
 * Columns staged at a time (cols), 64 KB of values either way; a warp's
 * lanes are cols columns by 32 / cols groups of places (a span of 32
 * places split between the groups, each walking its share, per, in order).
 */
template <typename T>
struct su_cfg
{
	/* 8 floats (and halves: the same runs as floats'), 4 doubles */
	static constexpr int cols = 32 / (sizeof(T) < sizeof(float) ? (int) sizeof(float) : (int) sizeof(T));
	static constexpr int per = 32 / (32 / cols);	/* places a group walks in a span */
};

typedef cub::BlockRadixSort<unsigned, SU_THREADS, SU_ITEMS, int> su_sort;

template <typename T>
struct su_smem
{
	union
	{
		typename su_sort::TempStorage sort;
		T			vals[su_cfg<T>::cols][SU_ROWS + 1];	/* (+ 1: a column a bank apart) */
	}			u;
	int			lab[SU_ROWS];	/* the chunk's labels in sorted order (k: past the rows) */
	short		row[SU_ROWS];	/* their rows' places in the chunk */
};

static_assert(sizeof(su_smem<float>) <= PGGPU_SORTED_SMEM && sizeof(su_smem<double>) <= PGGPU_SORTED_SMEM &&
			  sizeof(su_smem<__half>) <= PGGPU_SORTED_SMEM,
			  "route.h's PGGPU_SORTED_SMEM: the planner's test of the GPU's shared memory");

static size_t
sorted_update_smem(xview X)
{
	return X.f16 ? sizeof(su_smem<__half>) : X.f32 ? sizeof(su_smem<float>) : sizeof(su_smem<double>);
}

template <typename T>
__global__ void __launch_bounds__(SU_THREADS, 2)
sorted_update_kernel(const T *__restrict__ X, int64_t n, int d, int log_b, int k, int bits,
					 const int32_t *__restrict__ labels, const double *__restrict__ dist2,
					 const double *__restrict__ rw, double *sums, unsigned long long *cnt, double *mass,
					 double *block_part)
{
	constexpr int G = su_cfg<T>::cols,
				PER = su_cfg<T>::per;
	extern __shared__ __align__(16) unsigned char su_raw[];
	su_smem<T> &sm = *reinterpret_cast<su_smem<T> *>(su_raw);
	const int	lane = threadIdx.x & 31;
	const int	warp = threadIdx.x >> 5;
	const int	col = lane % G,
				grp = lane / G;
	const int64_t b = (int64_t) 1 << log_b;
	double		inertia = 0;

	static_assert(SU_ROWS <= 32768, "row places are shorts");
	for (int64_t c0 = (int64_t) blockIdx.x * SU_ROWS; c0 < n; c0 += (int64_t) gridDim.x * SU_ROWS)
	{
		unsigned	key[SU_ITEMS];
		int			place[SU_ITEMS];

		/* the chunk's labels, by their places, sorted (stable: places ascending in a run) */
#pragma unroll
		for (int u = 0; u < SU_ITEMS; u++)
		{
			int			p = threadIdx.x * SU_ITEMS + u;
			int64_t		i = c0 + p;

			key[u] = (unsigned) (i < n ? labels[i] : k);
			place[u] = p;
			if (i < n && blockIdx.y == 0)
				inertia += rw ? __dmul_rn(rw[i], dist2[i]) : dist2[i];
		}
		__syncthreads();		/* the last chunk's values are spent (u.sort overlays them) */
		su_sort(sm.u.sort).Sort(key, place, 0, bits);
#pragma unroll
		for (int u = 0; u < SU_ITEMS; u++)
		{
			sm.lab[threadIdx.x * SU_ITEMS + u] = (int) key[u];
			sm.row[threadIdx.x * SU_ITEMS + u] = (short) place[u];
		}

		for (int j0 = blockIdx.y * G; j0 < d; j0 += gridDim.y * G)
		{
			__syncthreads();	/* the sort's storage, or the last columns, spent */
			/* loads in flight before their stores (coalesced: a tile's column is contiguous) */
#pragma unroll
			for (int h = 0; h < SU_ITEMS; h += SU_ITEMS / 2)
			{
				T			ld[G][SU_ITEMS / 2];

#pragma unroll
				for (int g = 0; g < G; g++)
#pragma unroll
					for (int u = 0; u < SU_ITEMS / 2; u++)
					{
						int64_t		i = c0 + (h + u) * SU_THREADS + threadIdx.x;

						ld[g][u] = j0 + g < d && i < n ?
							X[(i >> log_b) * b * d + (int64_t) (j0 + g) * b + (i & (b - 1))] : (T) 0;
					}
#pragma unroll
				for (int g = 0; g < G; g++)
#pragma unroll
					for (int u = 0; u < SU_ITEMS / 2; u++)
						sm.u.vals[g][(h + u) * SU_THREADS + threadIdx.x] = ld[g][u];
			}
			__syncthreads();
			if (j0 + col >= d)
				continue;
			/* each group walks its places of the warp's spans, a run's sum added where it ends */
			for (int s = 0; s < SU_SPANS; s++)
			{
				const int	p0 = (warp * SU_SPANS + s) * 32 + grp * PER;
				double		acc = 0,
							macc = 0;
				unsigned long long m = 0;

				for (int q = 0; q < PER; q++)
				{
					const int	p = p0 + q;
					const int	lab = sm.lab[p];

					if (lab >= k)
						break;	/* (past the rows: they sort last) */
					if (rw)
					{
						const double w = __ldg(&rw[c0 + sm.row[p]]);

						acc += __dmul_rn(w, (double) sm.u.vals[col][sm.row[p]]);
						macc += w;
					}
					else
						acc += (double) sm.u.vals[col][sm.row[p]];
					m++;
					if (q == PER - 1 || sm.lab[p + 1] != lab)
					{
						atomicAdd(&sums[(int64_t) lab * d + j0 + col], acc);
						if (j0 + col == 0)
						{
							atomicAdd(&cnt[lab], m);
							if (rw)
								atomicAdd(&mass[lab], macc);
						}
						acc = 0;
						macc = 0;
						m = 0;
					}
				}
			}
		}
	}
	inertia = block_sum(inertia);
	if (threadIdx.x == 0 && blockIdx.y == 0)
		block_part[blockIdx.x] = inertia;
}

/*
 * The update from labels[0 .. n - 1] and dist2 into sums and cnt (zeroed),
 * the blocks' inertia into block_part[0 .. *grid - 1] (*grid: the chunks'
 * blocks; the blocks that split their columns, gy, add no inertia)
 */
cudaError_t
pggpu_sorted_update(xview X, int64_t n, int d, int log_b, int k, const int32_t *labels,
					const double *dist2, const double *rw, double *sums, unsigned long long *cnt,
					double *mass, double *block_part, int max_grid, int64_t *grid, cudaStream_t stream)
{
	const size_t smem = sorted_update_smem(X);
	const void *fn = X.f16 ? (const void *) sorted_update_kernel<__half> :
		X.f32 ? (const void *) sorted_update_kernel<float> : (const void *) sorted_update_kernel<double>;
	int			bits = 1,
				gy,
				dev = 0,
				sms = 0,
				per_sm = 0;
	cudaError_t e;

	while (bits < 31 && (1LL << bits) <= k)	/* the keys run to k (past the rows) */
		bits++;
	if ((e = gpu_smem_allow(fn, smem)) != cudaSuccess ||
		(e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, SU_THREADS, smem)) != cudaSuccess ||
		(e = cudaGetDevice(&dev)) != cudaSuccess ||
		(e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess)
		return e;
	*grid = (int64_t) (per_sm > 0 ? per_sm : 1) * sms;
	if (*grid > max_grid)
		*grid = max_grid;
	if (*grid > (n + SU_ROWS - 1) / SU_ROWS)
		*grid = (n + SU_ROWS - 1) / SU_ROWS;
	if (*grid < 1)
		*grid = 1;
	/* (the blocks the GPU holds, shared between the chunks' groups of columns) */
	{
		const int	G = X.f16 ? su_cfg<__half>::cols : X.f32 ? su_cfg<float>::cols : su_cfg<double>::cols;
		const int64_t room = (int64_t) (per_sm > 0 ? per_sm : 1) * sms / *grid;

		gy = room < (d + G - 1) / G ? (int) room : (d + G - 1) / G;
		if (gy < 1)
			gy = 1;
	}
	if (X.f16)
		sorted_update_kernel<__half><<<dim3((unsigned) *grid, (unsigned) gy), SU_THREADS, smem, stream>>>(
			(const __half *) X.p, n, d, log_b, k, bits, labels, dist2, rw, sums, cnt, mass, block_part);
	else if (X.f32)
		sorted_update_kernel<float><<<dim3((unsigned) *grid, (unsigned) gy), SU_THREADS, smem, stream>>>(
			(const float *) X.p, n, d, log_b, k, bits, labels, dist2, rw, sums, cnt, mass, block_part);
	else
		sorted_update_kernel<double><<<dim3((unsigned) *grid, (unsigned) gy), SU_THREADS, smem, stream>>>(
			(const double *) X.p, n, d, log_b, k, bits, labels, dist2, rw, sums, cnt, mass, block_part);
	return cudaPeekAtLastError();
}

__global__ void
weighted_inertia_kernel(const double *__restrict__ dist2, const double *__restrict__ rw, int64_t n,
						double *block_part)
{
	double		s = 0;

	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x)
		s += __dmul_rn(rw[i], dist2[i]);
	s = block_sum(s);
	if (threadIdx.x == 0)
		block_part[blockIdx.x] = s;
}

cudaError_t
pggpu_weighted_inertia(const double *dist2, const double *rw, int64_t n, double *block_part, int max_grid,
					   int64_t *grid, cudaStream_t stream)
{
	*grid = (n + BLOCK - 1) / BLOCK;
	if (*grid > max_grid)
		*grid = max_grid;
	if (*grid < 1)
		*grid = 1;
	weighted_inertia_kernel<<<(unsigned) *grid, BLOCK, 0, stream>>>(dist2, rw, n, block_part);
	return cudaPeekAtLastError();
}
