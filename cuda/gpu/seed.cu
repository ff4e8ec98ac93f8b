/*
 * seed.cu - k-means++ seeding on the GPU: the draws (the CPU's order, from
 * compute_internal.h's keys), the steps that measure every row against a new
 * centre (pruned by the triangle inequality), the picks (largest distance,
 * or a weighted sample).
 */
#include <cuda_runtime.h>

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstring>

#include "common.cuh"
#include "draw.cuh"


/*
 * Triangle-inequality pruning of a k-means++ step: a row whose nearest
 * centre a is at squared distance D cannot come closer to a new centre c
 * when |c - C[a]|^2 >= 4 D (then |x - c| >= |c - C[a]| - |x - C[a]| >=
 * |x - C[a]|).  The step tests it in float32 on bounds: |c - C[a]|^2
 * (computed in float64) rounded down, D by an upper bound (the row's word,
 * below), with a margin of 2^-19 rounded up, which dwarfs the rounding of
 * the float64 distances on both sides: a pruned row is one whose computed
 * distance could not have been below D.  D == 0 can never decrease.  Below
 * 2^-100 the bound is no longer within a factor of 2 of D: no pruning there.
 */
#define PRUNE_MARGIN_F (1.0f + 0x1p-19f)
#define PRUNE_MIN_F 0x1p-100f


/*
 * Before a k-means++ step: C[c] := X[row], and with prune sep[a] :=
 * |C[c] - C[a]|^2 for every earlier centre a < c (one thread each),
 * rounded down to float32 (the step's pruning test is in float32).
 */
__global__ void
seed_prep_kernel(xview X, int d, int log_b, bool rows, int64_t row,
				 double *C, int c, bool prune, float *sep)
{
	extern __shared__ double cn[];

	for (int j = threadIdx.x; j < d; j += blockDim.x)
	{
		cn[j] = X[x_at(row, j, d, log_b, rows)];
		if (blockIdx.x == 0)
			C[(int64_t) c * d + j] = cn[j];
	}
	__syncthreads();
	if (prune)
		grid_separations(C, c, d, cn, sep);
}

/*
 * One k-means++ step for the centre c (SET: the first, dist2 := |x - C[c]|^2;
 * else dist2 := the min with it); the rows' words (pp_pack) follow, and
 * wsum[b] := S_b, the weight of each block b of the draw (compute_internal.h).
 * With pick, the same pass makes stage 1 of the next PGGPU_PICK_SAMPLE with
 * key (as pick_kernel would on the new dist2).
 *
 * A warp takes PP_R * 32 = PGGPU_DRAW_ROWS consecutive rows, one block of
 * the draw: coalesced loads of their words (those of the warp's next rows
 * in flight meanwhile), the pruning test, then the rows left are listed
 * (ballot) and measured a lane each, PP_CH columns at a time: a row stops
 * being read once its partial sum reaches the bound of D (the terms are >= 0
 * and rounding is monotone, so the full sum could not be below D: the
 * result is that of the whole sum), and D itself is read only for a row
 * whose whole sum is below the bound.  S_b is recomputed from dist2 (in the
 * order of pggpu_draw_weight) only when a row of the block came closer,
 * else read back.  stats, when not NULL: nothing to do once a draw of
 * km_pp_steps failed.  rows: X lies by rows (x_at), so PP_CH = 4 columns
 * are one sector; beyond X_ROWS_MAX_D columns (by rows or by columns) a
 * lane loads PP_CH_WIDE columns at once (CH).  Where its blocks would not
 * fill the GPU, pp_rows_kernel (below) makes the step instead.
 *
 * Measured (H100, N = 10^7, d = 8, k = 1024, ncu at a step near c = 600):
 * the rows the pruning leaves (scattered) are what costs; by columns each
 * took up to 8 sectors, and a step 107 us at 182 MB read (DRAM 52%: random
 * sectors); by rows, PP_CH = 4: 81 us at 116 MB, and the whole seeding
 * 122 -> 95 ms (PP_CH = 2: 111 ms, 8: 117 ms; 4 blocks an SM, 64 registers:
 * 1% better than 3 at 83).  The 4-byte words alone (not the layout) saved
 * nothing against 12 bytes: 182 against 182 MB, the scattered rows being
 * most of it.  At d = 256 and 768 a step has few warps (a warp for 256
 * rows), each lane's loads one after another: with 4 columns a load round
 * a step over 65,536 rows of 768 took 1.1 ms, where the bytes take 0.13;
 * with 16 (PP_CH_WIDE, 2 blocks an SM for the registers), k-means||'s
 * reclustering of 10,047 candidates of 768 into 1000 took 0.34 s, not 1.06
 * (H200), and of 200,083 of 256 into 20,000 1.67 s, not 2.80.
 */
#define PP_R 8
#ifndef PP_CH
#define PP_CH 4
#endif
#define PP_CH_WIDE 16
#define PP_WARPS (BLOCK / 32)
#define PP_L2_FETCH 32
#define PP_SMEM (24 * 1024)		/* the centre, and the separations when they fit */

static_assert(PP_R * 32 == PGGPU_DRAW_ROWS, "a warp's rows of pp_step_kernel: one block of the draw");

#ifndef PP_MIN_BLOCKS
#define PP_MIN_BLOCKS 4			/* __launch_bounds__ blocks per SM of pp_step_kernel */
#endif

/*
 * |x_i - cn|^2 of a row, CH columns a load round, stopped once it reaches
 * Dq, the bound of the row's D (SET: none); then, below it, D itself
 * decides.  True: the row came closer (SET: always), its sum in *acc.  A
 * round's addresses from its first (x_at): by columns a tile's column
 * apart, by rows consecutive unless the round crosses a run of 32 (d not a
 * multiple of CH); loads of T, the set's own type (pp_measure, below).
 */
template <bool SET, int CH, typename T>
__device__ __forceinline__ bool
pp_measure_t(const T *X, int64_t i, int d, int log_b, bool rows, const double *cn, double Dq,
			 const double *dist2, double *acc)
{
	double		a = 0.0;
	bool		live = true;
	const int64_t step = rows ? 1 : (int64_t) 1 << log_b;

	for (int j0 = 0; j0 < d && live; j0 += CH)
	{
		const int64_t e0 = x_at(i, j0, d, log_b, rows);
		const bool	apart = rows && (e0 & 31) + CH > 32;	/* (then each its own) */
		double		v[CH];

#pragma unroll
		for (int jj = 0; jj < CH; jj++)
			v[jj] = j0 + jj >= d ? 0.0 :
				(double) __ldg(X + (apart ? x_at(i, j0 + jj, d, log_b, rows) : e0 + jj * step));
#pragma unroll
		for (int jj = 0; jj < CH; jj++)
			if (j0 + jj < d)
				a = sq_term(a, v[jj], cn[j0 + jj]);
		if (!SET && a >= Dq)
			live = false;		/* >= the bound, so >= D */
	}
	if (!SET && live)
		live = a < dist2[i];	/* below the bound: D decides */
	*acc = a;
	return live;
}

template <bool SET, int CH>
__device__ __forceinline__ bool
pp_measure(xview X, int64_t i, int d, int log_b, bool rows, const double *cn, double Dq,
		   const double *dist2, double *acc)
{
	if (X.f16)
		return pp_measure_t<SET, CH>((const __half *) X.p, i, d, log_b, rows, cn, Dq, dist2, acc);
	if (X.f32)
		return pp_measure_t<SET, CH>((const float *) X.p, i, d, log_b, rows, cn, Dq, dist2, acc);
	return pp_measure_t<SET, CH>((const double *) X.p, i, d, log_b, rows, cn, Dq, dist2, acc);
}

/*
 * The prune test of row i (word wd): false when it cannot come closer;
 * *Du, the bound of its D (0 past n)
 */
__device__ __forceinline__ bool
pp_need(int64_t i, int64_t n, uint32_t wd, bool packed, uint32_t lmask, const float *sp,
		const double *dist2, float *Du)
{
	float		sa;

	*Du = packed ? __uint_as_float(wd & ~lmask) : i < n ? __double2float_ru(dist2[i]) : 0.0f;
	/* no branches: a row past n has word 0, label 0 < c */
	sa = sp[wd & lmask];
	return (i < n) & (*Du != 0.0f) &
		!((*Du >= PRUNE_MIN_F) & (sa >= __fmul_ru(4.0f * *Du, PRUNE_MARGIN_F)));
}

/*
 * By one warp, after a step's measures of the block of the draw at i0
 * (blk): its weight S_b from the rows' D (wD[q], rows i0 + q, SET; else
 * dist2) when one came closer, else as it was; with pick, its key against
 * the warp's best (bk, br)
 */
template <bool SET>
__device__ __forceinline__ void
pp_block_weight(int64_t i0, int64_t n, int lane, bool closer, const double *wD, const double *dist2,
				const double *rw, double *wsum, bool pick, uint64_t key, double *bk, long long *br)
{
	long long	blk = i0 / PGGPU_DRAW_ROWS;
	double		S;

	if (closer)
	{
		double		wt[PP_R];

#pragma unroll
		for (int r = 0; r < PP_R; r++)
		{
			int64_t		i = i0 + r * 32 + lane;

			wt[r] = SET ? wD[r * 32 + lane] : i < n ? __ldcg(dist2 + i) : 0.0;
			if (rw && i < n)
				wt[r] = PGGPU_MUL(pggpu_draw_w(wt[r]), rw[i]);
		}
		S = warp_draw_weight(wt);
		if (lane == 0)
			wsum[blk] = S;
	}
	else
		S = wsum[blk];
	if (pick)
	{
		double		kv = pggpu_draw_key(key, blk, S);

		if (pick_better(kv, blk, *bk, *br))
			*bk = kv, *br = blk;
	}
}

/* the centre c into shared memory (cn), and the separations when they fit (the step's sp) */
__device__ __forceinline__ const float *
pp_stage(const double *C, int c, int d, const float *sep, bool sep_shared, double *sh)
{
	for (int j = threadIdx.x; j < d; j += blockDim.x)
		sh[j] = C[(int64_t) c * d + j];
	if (sep_shared)
		for (int a = threadIdx.x; a < c; a += blockDim.x)
			((float *) (sh + d))[a] = sep[a];
	__syncthreads();
	return sep_shared ? (const float *) (sh + d) : sep;
}

template <bool SET, int CH>
__global__ void __launch_bounds__(BLOCK, CH > PP_CH ? 2 : PP_MIN_BLOCKS)
pp_step_kernel(xview X, int64_t n, int d, int log_b, bool rows,
			   const double *__restrict__ C, int c, const float *__restrict__ sep, int lb,
			   uint32_t *words, double *dist2, const double *rw, double *wsum, bool pick, uint64_t key,
			   double *part_key, long long *part_row, const dev_stats *stats)
{
	extern __shared__ double sh[];
	__shared__ double s_D[PP_WARPS][PP_R * 32];
	__shared__ short s_list[PP_WARPS][PP_R * 32];
	double	   *cn = sh;
	const bool	packed = lb <= PP_LB_MAX;
	const uint32_t lmask = packed ? (1u << lb) - 1 : ~0u;
	int			w = threadIdx.x >> 5;
	int			lane = threadIdx.x & 31;
	double	   *wD = s_D[w];
	short	   *wl = s_list[w];
	double		bk = INFINITY;
	long long	br = LLONG_MAX;

	if (stats && stats->pp_stalled)
		return;

	const float *sp = pp_stage(C, c, d, sep, !SET && sizeof(double) * d + sizeof(float) * c <= PP_SMEM, sh);
	const int64_t stride = (int64_t) gridDim.x * PP_WARPS * (PP_R * 32);
	int64_t		i0 = (blockIdx.x * (int64_t) PP_WARPS + w) * (PP_R * 32);
	uint32_t	nx[PP_R];		/* the words of the warp's next rows, in flight */

#pragma unroll
	for (int r = 0; r < PP_R; r++)
	{
		int64_t		i = i0 + r * 32 + lane;

		nx[r] = !SET && i < n ? words[i] : 0;
	}
	for (; i0 < n; i0 += stride)
	{
		float		Du[PP_R];	/* the bound of D */
		int			m = 0;
		bool		closer = false;	/* a row of this lane's came closer */

		if (!SET)
		{
			uint32_t	wd[PP_R];

#pragma unroll
			for (int r = 0; r < PP_R; r++)
			{
				int64_t		i = i0 + stride + r * 32 + lane;

				wd[r] = nx[r];
				nx[r] = i < n ? words[i] : 0;
			}
#pragma unroll
			for (int r = 0; r < PP_R; r++)
			{
				bool		need = pp_need(i0 + r * 32 + lane, n, wd[r], packed, lmask, sp, dist2, &Du[r]);
				unsigned	mask = __ballot_sync(FULL, need);

				if (need)
					wl[m + __popc(mask & ((1u << lane) - 1))] = (short) (r * 32 + lane);
				m += __popc(mask);
			}
		}
		else
		{
			int			rows = n - i0 < PP_R * 32 ? (int) (n - i0) : PP_R * 32;

			for (int t = lane; t < rows; t += 32)
				wl[t] = (short) t;
			m = rows;
#pragma unroll
			for (int r = 0; r < PP_R; r++)
				wD[r * 32 + lane] = 0.0;	/* rows past n weigh 0 */
			__syncwarp();
		}
		if (!SET)
#pragma unroll
			for (int r = 0; r < PP_R; r++)
				wD[r * 32 + lane] = (double) Du[r];
		__syncwarp();
		for (int t = lane; t < m; t += 32)
		{
			int			q = wl[t];
			int64_t		i = i0 + q;
			double		acc;

			/* the bound, until D is read */
			if (pp_measure<SET, CH>(X, i, d, log_b, rows, cn, SET ? INFINITY : wD[q], dist2, &acc))
			{
				dist2[i] = acc;
				words[i] = pp_pack(acc, c, lb);
				wD[q] = acc;
				closer = true;
			}
		}
		__syncwarp();
		pp_block_weight<SET>(i0, n, lane, __any_sync(FULL, closer), wD, dist2, rw, wsum, pick, key, &bk, &br);
		__syncwarp();			/* wl and wD are rewritten next round */
	}
	if (!pick)
		return;
	block_pick_min(&bk, &br);
	if (threadIdx.x == 0)
	{
		part_key[blockIdx.x] = bk;
		part_row[blockIdx.x] = br;
	}
}

/*
 * pp_step_kernel where its warps would not fill the GPU (k-means||'s
 * candidates, the seeding set): a block of PPR_THREADS a block of the draw,
 * its rows that the pruning leaves listed and measured a thread each, so
 * that a step's longest chain of loads is one row's, not a lane's share of
 * 256 rows, and a warp measures 32 rows, not the 2 or 3 of its own that
 * the pruning leaves.  The separations are read from memory (staging them
 * would cost each block c loads).  The same measures, words and weights:
 * the same step.  (H200, 200,083 candidates of 256 into 20,000:
 * pp_step_kernel's 98 blocks took 73-109 us a step, reading 22-36 MB,
 * about 0.35 TB/s; a block of 256 a block of the draw, a thread a row, 80
 * us, issuing half the time, 3.8 threads an instruction.  This kernel,
 * each round's addresses from its first: the whole seeding 3.74 -> 2.82 s;
 * k-means|| on 10^6 embeddings of 768 into 1000, 0.98 -> 0.44 s; greedy
 * k-means++ on the seeding set as before, within 3 %.)
 */
#define PPR_THREADS 64

template <bool SET, int CH>
__global__ void __launch_bounds__(PPR_THREADS, 8)
pp_rows_kernel(xview X, int64_t n, int d, int log_b, bool rows,
			   const double *__restrict__ C, int c, const float *__restrict__ sep, int lb,
			   uint32_t *words, double *dist2, const double *rw, double *wsum, bool pick, uint64_t key,
			   double *part_key, long long *part_row, const dev_stats *stats)
{
	extern __shared__ double sh[];
	__shared__ double s_D[PGGPU_DRAW_ROWS];
	__shared__ short s_list[PGGPU_DRAW_ROWS];
	__shared__ int s_m;
	const bool	packed = lb <= PP_LB_MAX;
	const uint32_t lmask = packed ? (1u << lb) - 1 : ~0u;
	const int	w = threadIdx.x >> 5,
				lane = threadIdx.x & 31;
	double		bk = INFINITY;
	long long	br = LLONG_MAX;

	if (stats && stats->pp_stalled)
		return;
	if (threadIdx.x == 0)
		s_m = 0;
	pp_stage(C, c, d, sep, false, sh);	/* (its barrier: s_m too) */
	for (int64_t i0 = blockIdx.x * (int64_t) PGGPU_DRAW_ROWS; i0 < n; i0 += (int64_t) gridDim.x * PGGPU_DRAW_ROWS)
	{
		constexpr int RPT = PGGPU_DRAW_ROWS / PPR_THREADS;	/* rows a thread lists */
		uint32_t	wd[RPT];
		float		Du[RPT];
		bool		need[RPT];
		bool		closer = false;
		int			m;

		/* the words, then the separations, each all in flight at once */
#pragma unroll
		for (int r = 0; r < RPT; r++)
		{
			const int64_t i = i0 + threadIdx.x + r * PPR_THREADS;

			wd[r] = !SET && i < n ? words[i] : 0;
		}
#pragma unroll
		for (int r = 0; r < RPT; r++)
		{
			const int64_t i = i0 + threadIdx.x + r * PPR_THREADS;

			Du[r] = 0.0f;		/* SET: rows past n weigh 0 */
			need[r] = SET ? i < n : pp_need(i, n, wd[r], packed, lmask, sep, dist2, &Du[r]);
		}
#pragma unroll
		for (int r = 0; r < RPT; r++)
		{
			const int	q = threadIdx.x + r * PPR_THREADS;
			unsigned	mask = __ballot_sync(FULL, need[r]);
			int			at = 0;

			if (lane == 0 && mask)
				at = atomicAdd(&s_m, __popc(mask));
			at = __shfl_sync(FULL, at, 0);
			if (need[r])
				s_list[at + __popc(mask & ((1u << lane) - 1))] = (short) q;
			s_D[q] = Du[r];
		}
		__syncthreads();
		m = s_m;
		for (int t = threadIdx.x; t < m; t += PPR_THREADS)
		{
			const int	q = s_list[t];
			const int64_t i = i0 + q;
			double		acc;

			/* the bound, until D is read */
			if (pp_measure<SET, CH>(X, i, d, log_b, rows, sh, SET ? INFINITY : s_D[q], dist2, &acc))
			{
				dist2[i] = acc;
				words[i] = pp_pack(acc, c, lb);
				s_D[q] = acc;
				closer = true;
			}
		}
		closer = __syncthreads_or(closer);	/* (dist2 written: seen by the block after it) */
		if (threadIdx.x == 0)
			s_m = 0;			/* (every thread has read it) */
		if (w == 0)
			pp_block_weight<SET>(i0, n, lane, closer, s_D, dist2, rw, wsum, pick, key, &bk, &br);
		__syncthreads();		/* s_D, s_list are rewritten next round */
	}
	if (!pick)
		return;
	block_pick_min(&bk, &br);
	if (threadIdx.x == 0)
	{
		part_key[blockIdx.x] = bk;
		part_row[blockIdx.x] = br;
	}
}

/*
 * A kernel's dynamic shared memory past the default 48 KB needs its
 * opt-in: a centre of d > 6144 doubles (d goes to 16000)
 */
pggpu_status
smem_opt_in(const void *fn, size_t shmem, pggpu_error *err)
{
	if (shmem > 48 * 1024)
		CU(gpu_smem_allow(fn, shmem));
	return PGGPU_OK;
}

static size_t
pp_step_smem(int d, int c, bool set)
{
	size_t		b = sizeof(double) * d + sizeof(float) * c;

	return !set && b <= PP_SMEM ? b : sizeof(double) * d;
}

/*
 * km_pp_steps' draw and preparation of the centre c, with no host: the
 * minimum of the partial picks that the last pass left (as
 * pick_final_kernel) and stage 2 in its block, then C[c] := that row and
 * sep[a] := |C[c] - C[a]|^2 for a < c, rounded down (as seed_prep_kernel).
 * Every block reduces the parts (a few thousand pairs); block 0 records the
 * row.  No row: pp_stalled, and every later kernel of the batch returns at
 * once.
 */
__global__ void
pp_next_kernel(const double *part_key, const long long *part_row, int nparts,
			   const double *dist2, const double *rw, int64_t n, uint64_t key,
			   xview X, int d, int log_b, bool x_rows, double *C, int c,
			   float *sep, long long *rows, dev_stats *stats)
{
	extern __shared__ double cn[];
	__shared__ long long s_row;
	double		bk;
	long long	br;

	if (threadIdx.x == 0)
		s_row = stats->pp_stalled ? -2 : 0;
	__syncthreads();
	if (s_row == -2)
		return;
	block_parts_min(part_key, part_row, nparts, &bk, &br);
	if (threadIdx.x == 0)
		s_row = bk == INFINITY ? -1 : br;	/* the block of the draw */
	__syncthreads();
	br = block_draw_row(dist2, rw, n, s_row, key);
	if (threadIdx.x == 0)
		s_row = br;
	__syncthreads();
	if (s_row < 0)
	{
		if (blockIdx.x == 0 && threadIdx.x == 0)
			stats->pp_stalled = 1;
		return;
	}
	if (blockIdx.x == 0 && threadIdx.x == 0)
		rows[c] = s_row;
	for (int j = threadIdx.x; j < d; j += blockDim.x)
	{
		cn[j] = X[x_at(s_row, j, d, log_b, x_rows)];
		if (blockIdx.x == 0)
			C[(int64_t) c * d + j] = cn[j];
	}
	__syncthreads();
	grid_separations(C, c, d, cn, sep);
}

/*
 * First stage of a pick, the best (key, item) of each CUDA block: FARTHEST,
 * rows by -dist2; SAMPLE, stage 1 of the draw (compute_internal.h), a warp
 * per block of the draw.  See cpu/kmeans.c.
 */
__global__ void
pick_kernel(const double *dist2, const double *rw, int64_t n, int mode, uint64_t key,
			double *part_key, long long *part_row)
{
	double		bk = INFINITY;
	long long	br = LLONG_MAX;

	if (mode == PGGPU_PICK_SAMPLE)
		grid_draw_blocks(dist2, rw, n, key, &bk, &br);
	else
		for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n;
			 i += (int64_t) gridDim.x * blockDim.x)
		{
			double		w = dist2[i];
			double		kv = w > 0 ? -w : INFINITY;

			if (pick_better(kv, i, bk, br))
				bk = kv, br = i;
		}
	block_pick_min(&bk, &br);
	if (threadIdx.x == 0)
	{
		part_key[blockIdx.x] = bk;
		part_row[blockIdx.x] = br;
	}
}

/* second stage, one block: the minimum of the per-block bests; SAMPLE: stage 2 in its block */
__global__ void
pick_final_kernel(const double *part_key, const long long *part_row, int nparts,
				  int mode, uint64_t key, double *dist2, const double *rw, int64_t n,
				  dev_stats *stats, long long *out_row)
{
	__shared__ long long s_blk;
	double		bk;
	long long	br;

	block_parts_min(part_key, part_row, nparts, &bk, &br);
	if (bk == INFINITY)
		br = -1;
	if (mode == PGGPU_PICK_SAMPLE)
	{
		if (threadIdx.x == 0)
			s_blk = br;
		__syncthreads();
		br = block_draw_row(dist2, rw, n, s_blk, key);
	}
	if (threadIdx.x != 0)
		return;
	if (mode == PGGPU_PICK_FARTHEST && br >= 0)
		dist2[br] = -1.0;
	if (out_row)
	{
		*out_row = br;
		return;
	}
	stats->pick_key = bk;
	stats->pick_row = br;
}


/*
 * pp_step_kernel's grid: a block for every PP_WARPS blocks of the draw, at
 * most one wave (as many blocks as fit on the SMs at once).  Fewer than a
 * wave: *by_rows, pp_rows_kernel's grid, a block a block of the draw.
 */
static int
pp_grid(gpu_state *s, int64_t n, bool warps, bool *by_rows)
{
	int64_t		grid = (n + BLOCK * PP_R - 1) / (BLOCK * PP_R);
	int64_t		cap;

	if (s->pp_blocks_per_sm == 0 &&
		(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&s->pp_blocks_per_sm, pp_step_kernel<false, PP_CH>,
													   BLOCK, PP_SMEM) != cudaSuccess ||
		 s->pp_blocks_per_sm < 1))
	{
		(void) cudaGetLastError();
		s->pp_blocks_per_sm = 4;
	}
	cap = (int64_t) s->sm_count * s->pp_blocks_per_sm;
	if (cap > MAX_BLOCKS)
		cap = MAX_BLOCKS;
	*by_rows = grid < cap && !warps;
	if (*by_rows)
	{
		grid = (n + PGGPU_DRAW_ROWS - 1) / PGGPU_DRAW_ROWS;
		cap = MAX_BLOCKS;
	}
	return (int) (grid < 1 ? 1 : grid > cap ? cap : grid);
}

pggpu_status
pp_launch_step(pggpu_data *ds, int c, bool set, bool pick, uint64_t key, const dev_stats *stats,
			   pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	bool		by_rows;
	int			grid = pp_grid(s, ds->n, ds->force.pp_warps, &by_rows);
	size_t		shmem = pp_step_smem(ds->d, c, set);
	int			lb = pp_lbits(ds->k);
	uint32_t   *words = (uint32_t *) s->labels;	/* see pp_pack */
	bool		narrow = s->x_rows && ds->d <= X_ROWS_MAX_D;	/* PP_CH columns a load round */

	pggpu_status st;

	void		(*fn) (xview, int64_t, int, int, bool, const double *, int, const float *, int,
					   uint32_t *, double *, const double *, double *, bool, uint64_t, double *, long long *,
					   const dev_stats *);

	if (by_rows)
		shmem = sizeof(double) * ds->d;	/* the centre only */
	if (by_rows)
		fn = narrow ? (set ? pp_rows_kernel<true, PP_CH> : pp_rows_kernel<false, PP_CH>) :
			(set ? pp_rows_kernel<true, PP_CH_WIDE> : pp_rows_kernel<false, PP_CH_WIDE>);
	else
		fn = narrow ? (set ? pp_step_kernel<true, PP_CH> : pp_step_kernel<false, PP_CH>) :
			(set ? pp_step_kernel<true, PP_CH_WIDE> : pp_step_kernel<false, PP_CH_WIDE>);
	if ((st = smem_opt_in((const void *) fn, shmem, err)) != PGGPU_OK)
		return st;
	fn<<<(unsigned) grid, by_rows ? PPR_THREADS : BLOCK, shmem, s->stream>>>(xview_of(ds), ds->n, ds->d, ds->log_b, s->x_rows, s->C, c, s->sep,
													 lb, words, s->dist2, s->rw, s->wsum, pick, key, s->pick_key,
													 s->pick_row, stats);
	LAUNCHED(pp_step_kernel);
	s->labels_seeding = true;
	s->counts_at = UPD_NONE;
	s->pick_ready = pick;
	s->pick_ready_key = key;
	s->pick_parts = grid;
	return PGGPU_OK;
}

pggpu_status
gpu_km_point(pggpu_data *ds, int64_t row, int c, int mode, const uint64_t *next_key,
			 pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int			d = ds->d;
	bool		prune = mode == PGGPU_D2_MIN;

	pggpu_status st;

	s->pick_ready = false;
	/* (SET measures every row again; MIN takes the least with dist2) */
	if (mode == PGGPU_D2_SET)
		s->dists_stale = false;
	if (mode == PGGPU_D2_MIN && (st = pggpu_gpu_fresh_dists(ds, err)) != PGGPU_OK)
		return st;
	if ((st = smem_opt_in((const void *) seed_prep_kernel, sizeof(double) * d, err)) != PGGPU_OK)
		return st;
	seed_prep_kernel<<<prune ? sep_grid(s, c) : 1, SEP_THREADS, sizeof(double) * d, s->stream>>>(
		xview_of(ds), d, ds->log_b, s->x_rows, row, s->C, c, prune, s->sep);
	LAUNCHED(seed_prep_kernel);
	if (mode == PGGPU_D2_KEEP)
		return PGGPU_OK;
	return pp_launch_step(ds, c, mode == PGGPU_D2_SET, next_key != NULL,
						  next_key ? *next_key : 0, NULL, err);
}

/* C[c] := X[rows[c]], a block a centre (km_gather) */
__global__ void
gather_centres_kernel(xview X, int d, int log_b, bool x_rows,
					  const long long *rows, double *C)
{
	int			c = blockIdx.x;

	for (int j = threadIdx.x; j < d; j += blockDim.x)
		C[(int64_t) c * d + j] = X[x_at(rows[c], j, d, log_b, x_rows)];
}

pggpu_status
gpu_km_gather(pggpu_data *ds, const int64_t *rows, int m, pggpu_error *err)
{
	gpu_state  *s = ST(ds);

	if (m < 1)
		return PGGPU_OK;
	static_assert(sizeof(long long) == sizeof(int64_t), "the rows as pp_rows holds them");
	s->pick_ready = false;
	CU(cudaMemcpyAsync(s->pp_rows, rows, sizeof(long long) * m, cudaMemcpyHostToDevice, s->stream));
	gather_centres_kernel<<<(unsigned) m, 128, 0, s->stream>>>(xview_of(ds), ds->d, ds->log_b, s->x_rows,
															   s->pp_rows, s->C);
	LAUNCHED(gather_centres_kernel);
	CU(cudaStreamSynchronize(s->stream));	/* rows may be pageable memory the caller reuses */
	return PGGPU_OK;
}

/* see pggpu_ops: pp_next_kernel and pp_step_kernel per step, one sync a batch */
/* km_pp_steps' launches and its sync: the rows drawn into cnt_h, stats fetched */
static pggpu_status
pp_batch(pggpu_data *ds, int c0, int c1, const uint64_t *keys, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	dev_stats  *stalled = s->stats;
	pggpu_status st;

	if ((st = smem_opt_in((const void *) pp_next_kernel, sizeof(double) * ds->d, err)) != PGGPU_OK)
		return st;
	CU(cudaMemsetAsync(&stalled->pp_stalled, 0, sizeof(stalled->pp_stalled), s->stream));
	CU(cudaMemsetAsync(s->pp_rows + c0, 0xff, sizeof(long long) * (c1 - c0), s->stream));
	for (int c = c0; c < c1; c++)
	{
		bool		pick = c + 1 < ds->k;

		pp_next_kernel<<<sep_grid(s, c), SEP_THREADS, sizeof(double) * ds->d, s->stream>>>(
			s->pick_key, s->pick_row, s->pick_parts, s->dist2, s->rw, ds->n, keys[c - c0], xview_of(ds), ds->d,
			ds->log_b, s->x_rows, s->C, c, s->sep, s->pp_rows, stalled);
		LAUNCHED(pp_next_kernel);
		if ((st = pp_launch_step(ds, c, false, pick, pick ? keys[c - c0 + 1] : 0, stalled, err)) != PGGPU_OK)
			return st;
	}
	CU(cudaMemcpyAsync(s->cnt_h, s->pp_rows + c0, sizeof(long long) * (c1 - c0),
					   cudaMemcpyDeviceToHost, s->stream));
	return fetch_stats(s, err);
}

pggpu_status
gpu_km_pp_steps(pggpu_data *ds, int c0, int c1, const uint64_t *keys, int64_t *rows,
				int *done, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	size_t		fetch;
	pggpu_status st;

	if ((st = pggpu_gpu_fresh_dists(ds, err)) != PGGPU_OK || (st = x_layout(ds, true, err)) != PGGPU_OK)
		return st;
	if (!(s->pick_ready && s->pick_ready_key == keys[0]))
	{
		s->pick_parts = grid_for(s, ds->n);
		pick_kernel<<<s->pick_parts, BLOCK, 0, s->stream>>>(s->dist2, s->rw, ds->n, PGGPU_PICK_SAMPLE,
															keys[0], s->pick_key, s->pick_row);
		LAUNCHED(pick_kernel);
	}
	/*
	 * The rows that pruning leaves are scattered: fetching 32 bytes from
	 * memory, not the default 64, halves the bytes their reads move (3% to
	 * 17% less time on an H100, d = 8 to 32).  Restored after the batch,
	 * on errors too.
	 */
	CU(cudaDeviceGetLimit(&fetch, cudaLimitMaxL2FetchGranularity));
	if (fetch != PP_L2_FETCH)
		CU(cudaDeviceSetLimit(cudaLimitMaxL2FetchGranularity, PP_L2_FETCH));
	st = pp_batch(ds, c0, c1, keys, err);
	if (fetch != PP_L2_FETCH)
	{
		cudaError_t e = cudaDeviceSetLimit(cudaLimitMaxL2FetchGranularity, fetch);

		if (e != cudaSuccess && st == PGGPU_OK)
			return pggpu_cuda_fail(err, e, "cudaDeviceSetLimit");
	}
	if (st != PGGPU_OK)
		return st;
	*done = 0;
	while (*done < c1 - c0 && (long long) s->cnt_h[*done] >= 0)
	{
		rows[*done] = (int64_t) s->cnt_h[*done];
		(*done)++;
	}
	if (s->stats_h->pp_stalled)
		s->pick_ready = false;	/* km_pick draws again from dist2 */
	return PGGPU_OK;
}

pggpu_status
gpu_km_pick(pggpu_data *ds, int mode, uint64_t key, int64_t *row, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int			grid = grid_for(s, ds->n);
	pggpu_status st;

	if ((st = pggpu_gpu_fresh_dists(ds, err)) != PGGPU_OK)
		return st;
	if (s->pick_ready && mode == PGGPU_PICK_SAMPLE && key == s->pick_ready_key)
		grid = s->pick_parts;	/* the first stage is done */
	else
	{
		pick_kernel<<<grid, BLOCK, 0, s->stream>>>(s->dist2, s->rw, ds->n, mode, key, s->pick_key,
												   s->pick_row);
		LAUNCHED(pick_kernel);
	}
	s->pick_ready = false;
	pick_final_kernel<<<1, 1024, 0, s->stream>>>(s->pick_key, s->pick_row, grid, mode, key,
												  s->dist2, s->rw, ds->n, s->stats, NULL);
	LAUNCHED(pick_final_kernel);
	if ((st = fetch_stats(s, err)) != PGGPU_OK)
		return st;
	*row = (int64_t) s->stats_h->pick_row;
	return PGGPU_OK;
}

/* the PGGPU_PICK_SAMPLE draws of keys[0..m-1] into rows (device), on the stream, no wait */
pggpu_status
gpu_draw_rows(pggpu_data *ds, const uint64_t *keys, int m, long long *rows, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int			grid = grid_for(s, ds->n);

	s->pick_ready = false;
	for (int t = 0; t < m; t++)
	{
		pick_kernel<<<grid, BLOCK, 0, s->stream>>>(s->dist2, s->rw, ds->n, PGGPU_PICK_SAMPLE, keys[t],
												   s->pick_key, s->pick_row);
		pick_final_kernel<<<1, 1024, 0, s->stream>>>(s->pick_key, s->pick_row, grid, PGGPU_PICK_SAMPLE,
													  keys[t], s->dist2, s->rw, ds->n, s->stats, rows + t);
	}
	LAUNCHED(pick_final_kernel);
	return PGGPU_OK;
}
