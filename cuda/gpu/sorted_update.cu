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
 * The work is a list of stages, a chunk's group of columns each, in order
 * (chunk by chunk, its groups of columns in turn), and every block takes a
 * run of it of equal length (within one stage), sorting the labels of each
 * chunk it enters: a small set's chunks are so split by columns between
 * blocks (a hierarchical group's 7,000 rows are 4 chunks, 128 stages at d
 * = 256), and a large set's blocks end together.
 *
 * Two blocks a multiprocessor (256 threads, about 78 KB of shared memory
 * each), so that one block's copies overlap the other's walk.  A stage's
 * columns come in by 16-byte cp.async, from addresses worked out once a
 * chunk.  A group of lanes walks a contiguous share of its warp's places
 * (64 of floats), each place's row marked where its run ends, so that a
 * value costs a few instructions and an atomic ends a run or a share.
 * Until 1.11 a group took 8 places of each span of 32 in turn, testing the
 * next label and whether the set was weighted at each, and staged the
 * columns a value a load: at 10^6 x 768, k = 256 (embeddings, float32,
 * H200) the update took 2.58 ms of a 4.35 ms iteration, issuing 1.4 x 10^9
 * warp instructions (Nsight Compute: DRAM 19 % busy); the iteration now
 * takes 3.18 ms, and 1536 x 256 5.59 against 7.90.  One block of two
 * buffers, the next stage's copies in flight during the walk, took longer
 * (5.0 ms: 8 warps a multiprocessor, each issuing once every 6 cycles).
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

/*
 * Columns staged at a time (cols), 64 KB of values either way; a warp's
 * lanes are cols columns by 32 / cols groups, each group walking a
 * contiguous share of the warp's places (per) in order.  A staged column
 * is padded to a multiple of 16 bytes (vec values), so that every 16-byte
 * copy lands aligned, and lies 4 banks from the last.
 */
template <typename T>
struct su_cfg
{
	/* 8 floats (and halves: the same runs as floats'), 4 doubles */
	static constexpr int cols = 32 / (sizeof(T) < sizeof(float) ? (int) sizeof(float) : (int) sizeof(T));
	static constexpr int per = SU_ROWS / SU_WARPS / (32 / cols);	/* places a group walks */
	static constexpr int vec = 16 / (int) sizeof(T);	/* values a 16-byte copy */
	static constexpr int stride = SU_ROWS + vec;	/* a staged column's values, padded */
	static constexpr int pieces = SU_ROWS / vec / SU_THREADS;	/* copies a thread a column */
};

typedef cub::BlockRadixSort<unsigned, SU_THREADS, SU_ITEMS, int> su_sort;

#define SU_END 0x8000			/* in a place's row: the last place of its run */

template <typename T>
struct su_smem
{
	T			vals[su_cfg<T>::cols][su_cfg<T>::stride];
	union
	{
		typename su_sort::TempStorage sort;
		struct
		{
			int			lab[SU_ROWS];	/* the chunk's labels in sorted order (k: past the rows) */
			unsigned short row[SU_ROWS];	/* their rows' places in the chunk, | SU_END */
		}			w;
	}			u;
};

static_assert(2 * sizeof(su_smem<float>) <= PGGPU_SORTED_SMEM && 2 * sizeof(su_smem<double>) <= PGGPU_SORTED_SMEM &&
			  2 * sizeof(su_smem<__half>) <= PGGPU_SORTED_SMEM,
			  "route.h's PGGPU_SORTED_SMEM: the planner's test of the GPU's shared memory (two blocks)");

static size_t
sorted_update_smem(xview X)
{
	return X.f16 ? sizeof(su_smem<__half>) : X.f32 ? sizeof(su_smem<float>) : sizeof(su_smem<double>);
}

template <typename T, bool W>
__global__ void __launch_bounds__(SU_THREADS, 2)
sorted_update_kernel(const T *__restrict__ X, int64_t n, int d, int log_b, int k, int bits,
					 const int32_t *__restrict__ labels, const double *__restrict__ dist2,
					 const double *__restrict__ rw, double *sums, unsigned long long *cnt, double *mass,
					 double *block_part)
{
	constexpr int G = su_cfg<T>::cols,
				PER = su_cfg<T>::per,
				V = su_cfg<T>::vec,
				P = su_cfg<T>::pieces;
	extern __shared__ __align__(16) unsigned char su_raw[];
	su_smem<T> &sm = *reinterpret_cast<su_smem<T> *>(su_raw);
	const int	lane = threadIdx.x & 31;
	const int	warp = threadIdx.x >> 5;
	const int	col = lane % G,
				grp = lane / G;
	const int	p0 = warp * (SU_ROWS / SU_WARPS) + grp * PER;	/* the group's places */
	const int64_t b = (int64_t) 1 << log_b;
	const int64_t groups = (d + G - 1) / G;
	const int64_t stages = (n + SU_ROWS - 1) / SU_ROWS * groups;
	/* the block's stages, a run of the (chunk, group of columns) pairs in order */
	const int64_t first = stages * blockIdx.x / gridDim.x,
				last = stages * (blockIdx.x + 1) / gridDim.x;
	int64_t		chunk = -1;
	const T    *src[P];			/* the thread's copies' rows, in column 0 */
	int			bytes[P];		/* of each, 16, fewer (the last row), or 0 (past n) */
	double		inertia = 0;

	static_assert(SU_ROWS < SU_END, "row places and the run's end share a short");
	for (int64_t st = first; st < last; st++)
	{
		const int64_t c0 = st / groups * SU_ROWS;
		const int	j0 = (int) (st % groups) * G;

		if (c0 != chunk)
		{
			/* a new chunk: its labels, by their places, sorted (stable: places ascending in a run) */
			unsigned	key[SU_ITEMS];
			int			place[SU_ITEMS];

			chunk = c0;
#pragma unroll
			for (int u = 0; u < P; u++)
			{
				const int64_t i = c0 + (int64_t) (threadIdx.x + u * SU_THREADS) * V;

				src[u] = X + (i >> log_b) * b * d + (i & (b - 1));
				bytes[u] = i >= n ? 0 : n - i >= V ? 16 : (int) (n - i) * (int) sizeof(T);
			}
#pragma unroll
			for (int u = 0; u < SU_ITEMS; u++)
			{
				int			p = threadIdx.x * SU_ITEMS + u;
				int64_t		i = c0 + p;

				key[u] = (unsigned) (i < n ? labels[i] : k);
				place[u] = p;
				/* (the chunk's inertia from the block that walks its first columns) */
				if (i < n && j0 == 0)
					inertia += W ? __dmul_rn(rw[i], dist2[i]) : dist2[i];
			}
			__syncthreads();	/* the last chunk's walks are done (u.sort overlays its places) */
			su_sort(sm.u.sort).Sort(key, place, 0, bits);
			__syncthreads();
#pragma unroll
			for (int u = 0; u < SU_ITEMS; u++)
				sm.u.w.lab[threadIdx.x * SU_ITEMS + u] = (int) key[u];
			__syncthreads();
			/* a place's row, marked where its run ends (the chunk's last place ends one) */
#pragma unroll
			for (int u = 0; u < SU_ITEMS; u++)
			{
				const int	p = threadIdx.x * SU_ITEMS + u;

				sm.u.w.row[p] = (unsigned short) (place[u] |
												  (p == SU_ROWS - 1 || sm.u.w.lab[p + 1] != (int) key[u] ? SU_END : 0));
			}
		}
		__syncthreads();		/* the last stage's walk done; the places in */
		/* the stage's columns, 16 bytes a copy (a copy's vec rows lie in one tile: tiles are 32 rows or more) */
#pragma unroll
		for (int g = 0; g < G; g++)
#pragma unroll
			for (int u = 0; u < P; u++)
				if (bytes[u] > 0 && j0 + g < d)
				{
					const unsigned s = (unsigned) __cvta_generic_to_shared(
						&sm.vals[g][(threadIdx.x + u * SU_THREADS) * V]);

					asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
								 ::"r"(s), "l"(src[u] + (int64_t) (j0 + g) * b), "r"(bytes[u]));
				}
		asm volatile("cp.async.commit_group;");
		asm volatile("cp.async.wait_group 0;");
		__syncthreads();
		if (j0 + col >= d)
			continue;

		/*
		 * The group walks its places in order, a run's sum added where it
		 * ends (the place's SU_END), and where the share ends; a run past
		 * the rows (label k, which sorts last) adds nothing.  8 places'
		 * loads at a time, ahead of their additions.
		 */
		const T    *vals = sm.vals[col];
		double		acc = 0,
					macc = 0;
		int			m = 0;

#pragma unroll 1
		for (int q0 = 0; q0 < PER; q0 += 8)
		{
			unsigned	w[8];
			T			v[8];

#pragma unroll
			for (int q = 0; q < 8; q++)
			{
				w[q] = sm.u.w.row[p0 + q0 + q];
				v[q] = vals[w[q] & (SU_END - 1)];
			}
#pragma unroll
			for (int q = 0; q < 8; q++)
			{
				if (W)
				{
					const int	lab = sm.u.w.lab[p0 + q0 + q];
					const double wt = lab < k ? __ldg(&rw[c0 + (w[q] & (SU_END - 1))]) : 0.0;

					acc += __dmul_rn(wt, (double) v[q]);
					macc += wt;
				}
				else
					acc += (double) v[q];
				m++;
				if ((w[q] & SU_END) || q0 + q == PER - 1)
				{
					const int	lab = sm.u.w.lab[p0 + q0 + q];

					if (lab < k)
					{
						atomicAdd(&sums[(int64_t) lab * d + j0 + col], acc);
						if (j0 + col == 0)
						{
							atomicAdd(&cnt[lab], (unsigned long long) m);
							if (W)
								atomicAdd(&mass[lab], macc);
						}
					}
					acc = 0;
					macc = 0;
					m = 0;
				}
			}
		}
	}
	inertia = block_sum(inertia);
	if (threadIdx.x == 0)
		block_part[blockIdx.x] = inertia;
}

/*
 * The update from labels[0 .. n - 1] and dist2 into sums and cnt (zeroed),
 * the blocks' inertia into block_part[0 .. *grid - 1]
 */
cudaError_t
pggpu_sorted_update(xview X, int64_t n, int d, int log_b, int k, const int32_t *labels,
					const double *dist2, const double *rw, double *sums, unsigned long long *cnt,
					double *mass, double *block_part, int max_grid, int64_t *grid, cudaStream_t stream)
{
	const size_t smem = sorted_update_smem(X);
	const void *fn = X.f16 ? (rw ? (const void *) sorted_update_kernel<__half, true> :
							  (const void *) sorted_update_kernel<__half, false>) :
		X.f32 ? (rw ? (const void *) sorted_update_kernel<float, true> :
				 (const void *) sorted_update_kernel<float, false>) :
		(rw ? (const void *) sorted_update_kernel<double, true> : (const void *) sorted_update_kernel<double, false>);
	const int	G = X.f16 ? su_cfg<__half>::cols : X.f32 ? su_cfg<float>::cols : su_cfg<double>::cols;
	const int64_t stages = (n + SU_ROWS - 1) / SU_ROWS * ((d + G - 1) / G);
	int			bits = 1,
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
	/* (every block a run of stages: a small set's chunks split by columns between blocks) */
	*grid = (int64_t) (per_sm > 0 ? per_sm : 1) * sms;
	if (*grid > max_grid)
		*grid = max_grid;
	if (*grid > stages)
		*grid = stages;
	if (*grid < 1)
		*grid = 1;
	{
		void	   *args[] = {(void *) &X.p, &n, &d, &log_b, &k, &bits, &labels, &dist2, &rw, &sums, &cnt, &mass,
							  &block_part};

		e = cudaLaunchKernel(fn, dim3((unsigned) *grid), dim3(SU_THREADS), args, smem, stream);
	}
	if (e != cudaSuccess)
		return e;
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
