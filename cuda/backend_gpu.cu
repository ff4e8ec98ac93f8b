/*
 * backend_gpu.cu - the CUDA backend: staging pipeline and k-means kernels.
 *
 * Data path: the caller fills one of two pinned staging buffers while the
 * other is being copied to the device on a stream (double buffering); each
 * batch lands as one tile of the tiled structure-of-arrays layout described
 * in compute_internal.h.
 *
 * A Lloyd iteration (gpu_km_step) takes one of these routes:
 *  - lloyd_kernel: one pass labels and sums (nearest centroid, centroids in
 *    shared memory, resident for d <= 32 or staged in tiles; sums privatised
 *    per lane group, per block, or global atomics: update_mode), then
 *    reduce_finalize_kernel or finalize_kernel turns the sums into centroids;
 *  - tensor cores (assign_tc.cu, many centroids): they label, then
 *    owned_update_kernel (or lloyd_kernel with the labels given) sums;
 *  - tc2 fused (k <= 256, small d): one tensor-core pass labels and sums,
 *    its steps replayed as CUDA graphs, each queued before the last one's
 *    result is known (gated on the GPU by the host's own test);
 *  - a pass over much work labels in ranges of tiles first (label_ranges,
 *    the interrupt callback between them), then sums by the labels given.
 * Three scalars come back to the host per iteration.
 *
 * Arithmetic matches backend_cpu.c: squared distances summed over columns in
 * order with __dsub_rn/__dmul_rn/__dadd_rn, which are never fused.
 */
#include <cuda_runtime.h>

#include <cfloat>
#include <climits>
#include <cstddef>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gpu_internal.cuh"
#include "assign_tc.cuh"

#define BLOCK 256				/* threads per block of the data kernels */
#define DJ 32					/* columns per centroid tile in shared memory */
#define MAX_BLOCKS 4096			/* per-block partial arrays */
#define FULL 0xffffffffu
#define SMEM_SUMS_LIMIT (100 * 1024)	/* per-block sums in shared memory up to this */
#define RESIDENT_LIMIT (64 * 1024)	/* centroids stay in shared memory up to this */
#ifndef UPD_BATCH
#define UPD_BATCH 4				/* rows per batch of loads in the private update */
#endif
#define STG_STRIDE 34			/* UPD_PRIVATE staging: doubles per column of a warp's rows */
#ifndef LLOYD_MIN_BLOCKS
#define LLOYD_MIN_BLOCKS 1		/* __launch_bounds__ blocks per SM of lloyd_kernel */
#endif

struct dev_stats
{
	unsigned long long changed;
	unsigned long long empty;
	double		inertia;
	unsigned long long hiabs_bits;	/* range_kernel: the largest |x| */
	unsigned long long loabs_inv;	/* and ~ the least non-zero |x| (0: none) */
	double		pick_key;
	long long	pick_row;
	unsigned int pp_stalled;	/* km_pp_steps: a draw found no row */
	unsigned int parts_done;	/* reduce_finalize_kernel's blocks done */
	unsigned int skip;			/* a queued step's gate closed (pggpu_tc_gate): it did nothing */
};

struct gpu_state
{
	int			dev;
	int			sm_count;
	int			smem_optin;
	cudaStream_t stream;
	bool		stream_ok;
	double	   *stage[2];		/* pinned staging buffers */
	cudaEvent_t copied[2];
	bool		event_ok[2];
	int			cur;
	bool		finished;
	double	   *X;				/* device data, cap_tiles tiles */
	int64_t		cap_tiles;
	/* k-means state */
	double	   *C;
	int32_t    *labels;
	double	   *dist2;
	double	   *sums;
	unsigned long long *cnt;
	double	   *block_part;		/* per-block partial inertia */
	double	   *part;			/* per-block partial sums (UPD_PRIVATE, owned), or NULL */
	int			part_rows;		/* blocks part has room for */
	int			max_grid;		/* most blocks a Lloyd pass launches */
	double	   *pick_key;		/* MAX_BLOCKS partial picks */
	long long  *pick_row;
	/* k-means++: the next draw, made in the pass of the last centre */
	bool		pick_ready;
	uint64_t	pick_ready_key;
	int			pick_parts;		/* blocks whose partial picks it left */
	float	   *sep;			/* k: separations from the newest centre (rounded down) */
	double	   *wsum;			/* the blocks' weights in the draw, while seeding */
	long long  *pp_rows;		/* k: the rows km_pp_steps drew */
	int			pp_blocks_per_sm;	/* pp_step_kernel's occupancy, 0: not known yet */
	void	   *tc_ws;			/* assign_tc.cu's workspace, when it labels */
	bool		labels_seeding;	/* labels hold pp_pack's words while seeding */
	bool		x_rows;			/* X lies by rows (see x_at) */
	dev_stats  *stats;			/* device */
	dev_stats  *stats_h;		/* pinned mirrors: [0] copies and even steps', [1] odd steps' */
	dev_stats  *stats_hd;		/* stats_h's device address (mapped) */
	unsigned long long *cnt_h;	/* pinned, k */
	/* Lloyd steps with the fused pass queued ahead, as graphs (see gpu_km_step) */
	cudaGraphExec_t step_exec[2];	/* or NULL: a gated step writing stats_h[j] */
	unsigned long long step_limit;	/* their gate's limit (pggpu_data.next_limit) */
	bool		step_off;		/* their capture failed in this fit: no steps ahead */
	cudaStream_t cap_stream;	/* where they are captured */
	bool		cap_ok;
	cudaEvent_t step_done[2];	/* step i of the fit done: [i % 2] */
	bool		step_done_ok;
	int64_t		steps;			/* update steps of this fit queued */
	bool		ahead;			/* step steps - 1 is queued, and its gate opens */
};

#define ST(ds) ((gpu_state *) (ds)->impl)
#define TILE(ds) ((int64_t) 1 << (ds)->log_b)

pggpu_status
pggpu_cuda_fail(pggpu_error *err, cudaError_t e, const char *what)
{
	(void) cudaGetLastError();	/* clear non-sticky errors */
	return pggpu_fail(err, e == cudaErrorMemoryAllocation ? PGGPU_ERR_GPU_MEMORY : PGGPU_ERR_CUDA,
					  "CUDA error in %s: %s", what, cudaGetErrorString(e));
}

#define LAUNCHED(name) CU(cudaPeekAtLastError())

/* ---- device helpers ------------------------------------------------------- */

__device__ __forceinline__ double
warp_sum(double v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(FULL, v, o);
	return v;
}

/* block-wide sum in a fixed order; every thread gets the result */
__device__ double
block_sum(double v)
{
	__shared__ double part[32];
	int			lane = threadIdx.x & 31;
	int			warp = threadIdx.x >> 5;

	v = warp_sum(v);
	__syncthreads();
	if (lane == 0)
		part[warp] = v;
	__syncthreads();
	v = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.0;
	if (warp == 0)
		v = warp_sum(v);
	if (threadIdx.x == 0)
		part[0] = v;
	__syncthreads();
	return part[0];
}

__device__ __forceinline__ double
sq_term(double acc, double x, double c)
{
	double		diff = __dsub_rn(x, c);

	return __dadd_rn(acc, __dmul_rn(diff, diff));
}

/* (key, row) pairs: smaller key wins, then smaller row */
__device__ __forceinline__ bool
pick_better(double ka, long long ra, double kb, long long rb)
{
	return ka < kb || (ka == kb && ra < rb);
}

/* the warp's minimum (key, row), in every lane */
__device__ __forceinline__ void
warp_pick_min(double *bk, long long *br)
{
	for (int o = 16; o > 0; o >>= 1)
	{
		double		ok = __shfl_xor_sync(FULL, *bk, o);
		long long	orow = __shfl_xor_sync(FULL, *br, o);

		if (pick_better(ok, orow, *bk, *br))
			*bk = ok, *br = orow;
	}
}

/*
 * The block's minimum (key, row): the result in thread 0.  (key, row) pairs
 * are totally ordered, so the minimum does not depend on the order.
 */
__device__ void
block_pick_min(double *bk, long long *br)
{
	__shared__ double sk[32];
	__shared__ long long sr[32];

	warp_pick_min(bk, br);
	if ((threadIdx.x & 31) == 0)
		sk[threadIdx.x >> 5] = *bk, sr[threadIdx.x >> 5] = *br;
	__syncthreads();
	if (threadIdx.x == 0)
		for (int w = 1; w < (int) (blockDim.x >> 5); w++)
			if (pick_better(sk[w], sr[w], *bk, *br))
				*bk = sk[w], *br = sr[w];
}

/*
 * S_b of a block of the draw (compute_internal.h) from a warp: lane l holds
 * dist2 of rows 32 r + l, r = 0..7 (0 past n); every lane gets the sum of
 * their w.  The butterfly adds lane l's and lane l ^ h's sums in both: the
 * same value (a + b = b + a), the order of pggpu_draw_weight.
 */
__device__ __forceinline__ double
warp_draw_weight(const double (&d2)[PGGPU_DRAW_ROWS / 32])
{
	double		s = 0.0;

#pragma unroll
	for (int r = 0; r < PGGPU_DRAW_ROWS / 32; r++)
		s = __dadd_rn(s, pggpu_draw_w(d2[r]));
	for (int o = 16; o > 0; o >>= 1)
		s = __dadd_rn(s, __shfl_xor_sync(FULL, s, o));
	return s;
}

/*
 * Stage 2 of the draw, by the whole block (blockDim.x a multiple of 32):
 * the row drawn in block blk of the draw (-1: none), in thread 0.
 */
__device__ long long
block_draw_row(const double *dist2, int64_t n, long long blk, uint64_t key)
{
	uint64_t	k2 = pggpu_draw_row_key(key);
	double		bk = INFINITY;
	long long	br = LLONG_MAX;

	for (int q = threadIdx.x; blk >= 0 && q < PGGPU_DRAW_ROWS; q += blockDim.x)
	{
		int64_t		i = blk * PGGPU_DRAW_ROWS + q;
		double		kv = i < n ? pggpu_draw_key(k2, i, dist2[i]) : INFINITY;

		if (pick_better(kv, i, bk, br))
			bk = kv, br = i;
	}
	__syncthreads();			/* block_pick_min's shared memory may be in use */
	block_pick_min(&bk, &br);
	return bk == INFINITY ? -1 : br;
}

/* ---- kernels -------------------------------------------------------------- */

/*
 * The largest |x| and the least non-zero |x|, as the bits of non-negative
 * doubles (which order as the doubles do); the least one complemented, so
 * that both are maxima and zeroed stats mean "none".
 */
__global__ void
range_kernel(const double *__restrict__ x, int64_t len, dev_stats *stats)
{
	double		hi = 0,
				lo = INFINITY;

	for (int64_t e = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; e < len;
		 e += (int64_t) gridDim.x * blockDim.x)
	{
		double		a = fabs(x[e]);

		hi = fmax(hi, a);
		lo = a > 0 ? fmin(lo, a) : lo;
	}
	for (int o = 16; o > 0; o >>= 1)
	{
		hi = fmax(hi, __shfl_xor_sync(FULL, hi, o));
		lo = fmin(lo, __shfl_xor_sync(FULL, lo, o));
	}
	if ((threadIdx.x & 31) == 0)
	{
		atomicMax(&stats->hiabs_bits, (unsigned long long) __double_as_longlong(hi));
		if (lo < INFINITY)
			atomicMax(&stats->loabs_inv, ~(unsigned long long) __double_as_longlong(lo));
	}
}

__global__ void
scale_kernel(double *x, int64_t len, double f)
{
	for (int64_t e = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; e < len;
		 e += (int64_t) gridDim.x * blockDim.x)
		x[e] *= f;
}

/* how a Lloyd pass adds rows to their clusters' sums */
enum
{
	UPD_NONE = 0,				/* assignment only */
	UPD_PRIVATE,				/* per-(warp, lane group) sums in shared memory */
	UPD_SHARED,					/* per-block sums in shared memory, atomics */
	UPD_GLOBAL					/* global atomics (large k x d) */
};

/*
 * One Lloyd pass.  Each thread owns one row per grid-stride step.  Centroids
 * come through shared memory in tiles of TK centroids x DJ columns, each
 * thread keeping TK running distances in registers, so a row is read from
 * global memory once per TK centroids (once in all for k <= TK).
 *
 * The centroid update depends on k x d:
 *  - UPD_PRIVATE (small k x d): every (warp, lane group) owns a copy of the
 *    sums in shared memory.  A group has one lane per column; it walks its
 *    share of the warp's 32 rows, adding each row's value to the row's cluster
 *    in its own copy: no atomics, and a fixed order.  At the end each block
 *    adds its copies in order into its row of `part`, and reduce_finalize_kernel
 *    adds the blocks in order: the sums are deterministic.
 *    With the row in registers (DR > 0) the groups take the warp's rows from
 *    a per-warp staging area in shared memory rather than from global memory
 *    again (those loads touched 4 rows x d columns of sectors each, and
 *    missed L1 at d = 8: 0.55 -> 0.42 ms an iteration at N = 10^7, k = 8).
 *  - UPD_SHARED: k <= 64: rows of a warp that share a label are summed by
 *    shuffles, then one shared-memory atomic per (warp, label, column); k >
 *    64 (labels rarely shared): lane groups as in UPD_PRIVATE, one atomic a
 *    value, so that a warp's atomics hit whole rows of the sums and its
 *    loads whole sectors (one atomic per value by the row's own thread put
 *    32 lanes on 2 banks at d = 8: k = 256 3.2 -> 2.2 ms an iteration).
 *    Blocks add their sums to global memory atomically.
 *  - UPD_GLOBAL: as UPD_SHARED but straight into global memory.
 */
/*
 * The lane groups of a warp (lane group grp of groups, lanes col0, col0 +
 * 2^lg_lanes, ... of the columns) add the warp's rows, starting at row wbase,
 * each to its label lab (taken from the row's lane; -1: none): add(c, j, v)
 * per value, count(c) per row.  UPD_BATCH rows at a time, so that their
 * loads are in flight before the adds.
 */
template <typename Add, typename Count>
__device__ __forceinline__ void
group_add_rows(const double *__restrict__ X, int64_t wbase, int d, int log_b, int lab,
			   int grp, int groups, int col0, int lg_lanes, Add add, Count count)
{
	for (int t0 = 0; t0 < 32 / groups; t0 += UPD_BATCH)
	{
		int			lr[UPD_BATCH];
		const double *xr[UPD_BATCH];

#pragma unroll
		for (int u = 0; u < UPD_BATCH; u++)
		{
			int			r = grp + groups * (t0 + u);

			lr[u] = __shfl_sync(FULL, lab, r & 31);
			if (t0 + u >= 32 / groups)
				lr[u] = -1;
			xr[u] = X + (lr[u] >= 0 ? pggpu_at(wbase + r, 0, d, log_b) : 0);
		}
		for (int j = col0; j < d; j += 1 << lg_lanes)
		{
			double		v[UPD_BATCH];

#pragma unroll
			for (int u = 0; u < UPD_BATCH; u++)
				v[u] = lr[u] >= 0 ? xr[u][(int64_t) j << log_b] : 0.0;
#pragma unroll
			for (int u = 0; u < UPD_BATCH; u++)
				if (lr[u] >= 0)
					add(lr[u], j, v[u]);
		}
		if (col0 == 0)
#pragma unroll
			for (int u = 0; u < UPD_BATCH; u++)
				if (lr[u] >= 0)
					count(lr[u]);
	}
}

/* lloyd_kernel's DR for a pass that only updates, from given labels */
#define LABELS_GIVEN (-1)

template <int TK, int DR, int MODE>
__global__ void __launch_bounds__(BLOCK, LLOYD_MIN_BLOCKS)
lloyd_kernel(const double *__restrict__ X, int64_t n, int d, int log_b,
			 const double *__restrict__ C, int k, int lg_lanes, int32_t *labels,
			 double *dist2, double *g_sums, unsigned long long *g_cnt,
			 double *part, double *block_part, dev_stats *stats)
{
	extern __shared__ double smem[];
	double	   *sC = smem;
	int			kpad = (k + TK - 1) / TK * TK;
	double	   *s_acc = smem + (DR > 0 ? kpad * DR : DR == 0 ? TK * DJ : 0);
	int64_t		kd = (int64_t) k * d;
	int			lane = threadIdx.x & 31;
	int			warp = threadIdx.x >> 5;
	/* UPD_PRIVATE: lane groups of 2^lg_lanes lanes, one lane per column */
	int			groups = 32 >> lg_lanes;
	int			grp = lane >> lg_lanes;
	int			col0 = lane & ((1 << lg_lanes) - 1);
	int64_t		slot_len = kd + k;	/* sums, then counts */
	double	   *slot = s_acc + (int64_t) (warp * groups + grp) * slot_len;
	double	   *sums = MODE == UPD_SHARED ? s_acc : g_sums;
	unsigned long long *cnt = MODE == UPD_SHARED ? (unsigned long long *) (s_acc + kd) : g_cnt;
	double		my_inertia = 0;
	unsigned long long my_changed = 0;

	/*
	 * DR > 0 (d <= DR): all centroids stay in shared memory for the whole
	 * pass, as kpad rows of DR values, zero-padded.  A padded column adds
	 * (0 - 0)^2 = 0 to a distance, exactly, so distances are unchanged.
	 */
	if (DR > 0)
		for (int e = threadIdx.x; e < kpad * DR; e += BLOCK)
		{
			constexpr int w = DR > 0 ? DR : 1;	/* (DR <= 0 never gets here) */
			int			c = e / w;
			int			j = e % w;

			sC[e] = c < k && j < d ? C[(int64_t) c * d + j] : 0.0;
		}
	if (MODE == UPD_PRIVATE || MODE == UPD_SHARED)
	{
		int64_t		len = MODE == UPD_PRIVATE ? slot_len * (BLOCK / 32) * groups : slot_len;

		for (int64_t e = threadIdx.x; e < len; e += BLOCK)
			s_acc[e] = 0;
	}
	__syncthreads();

	for (int64_t base = (int64_t) blockIdx.x * BLOCK; base < n;
		 base += (int64_t) gridDim.x * BLOCK)
	{
		int64_t		i = base + threadIdx.x;
		bool		active = i < n;
		const double *xi = X + (active ? pggpu_at(i, 0, d, log_b) : 0);
		double		best = INFINITY;
		int			bestc = 0;
		double		xr[DR > 0 ? DR : 1];	/* DR > 0: the row */

		if (DR == LABELS_GIVEN)
		{
			/* the labels and distances of another kernel (assign_tc.cu) */
			if (active)
			{
				bestc = labels[i];
				best = dist2[i];
			}
		}
		else if (DR > 0)
		{
			/* the row in registers: all its loads in flight at once */
#pragma unroll
			for (int j = 0; j < DR; j++)
				xr[j] = active && j < d ? xi[(int64_t) j << log_b] : 0.0;
			for (int kt = 0; kt < k; kt += TK)
			{
				double		acc[TK];

#pragma unroll
				for (int t = 0; t < TK; t++)
					acc[t] = 0.0;
#pragma unroll
				for (int j = 0; j < DR; j++)
#pragma unroll
					for (int t = 0; t < TK; t++)
						acc[t] = sq_term(acc[t], xr[j], sC[(kt + t) * DR + j]);
#pragma unroll
				for (int t = 0; t < TK; t++)
					if (kt + t < k && acc[t] < best)
					{
						best = acc[t];
						bestc = kt + t;
					}
			}
		}
		else
			for (int kt = 0; kt < k; kt += TK)
			{
				/* centroid tiles of TK x DJ through shared memory */
				double		acc[TK];

#pragma unroll
				for (int t = 0; t < TK; t++)
					acc[t] = 0.0;
				for (int jt = 0; jt < d; jt += DJ)
				{
					int			dj = min(DJ, d - jt);

					__syncthreads();
					for (int e = threadIdx.x; e < TK * DJ; e += BLOCK)
					{
						int			t = e / DJ;
						int			j = e % DJ;

						sC[e] = (kt + t < k && j < dj) ? C[(int64_t) (kt + t) * d + jt + j] : 0.0;
					}
					__syncthreads();
					if (active)
						for (int j = 0; j < dj; j++)
						{
							double		xv = xi[(int64_t) (jt + j) << log_b];

#pragma unroll
							for (int t = 0; t < TK; t++)
								acc[t] = sq_term(acc[t], xv, sC[t * DJ + j]);
						}
				}
#pragma unroll
				for (int t = 0; t < TK; t++)
					if (kt + t < k && acc[t] < best)
					{
						best = acc[t];
						bestc = kt + t;
					}
			}

		if (active && DR != LABELS_GIVEN)
		{
			my_changed += labels[i] != bestc;
			labels[i] = bestc;
			dist2[i] = best;
		}
		if (active)
			my_inertia += best;

		if (MODE == UPD_PRIVATE && DR > 0)
		{
			/*
			 * The warp's rows, in registers, through its staging area
			 * [column][row] (column stride 34 doubles, 2 mod 16: no bank
			 * conflicts either way) to the lane groups.
			 */
			constexpr int w = DR > 0 ? DR : 1;
			double	   *stg = s_acc + slot_len * (BLOCK / 32) * groups + warp * (w * STG_STRIDE);
			int			lab = active ? bestc : -1;

			__syncwarp();
#pragma unroll
			for (int j = 0; j < w; j++)
				if (j < d)
					stg[j * STG_STRIDE + lane] = xr[j];
			__syncwarp();
			for (int t = 0; t < 32 / groups; t++)
			{
				int			r = grp + groups * t;
				int			lr = __shfl_sync(FULL, lab, r);

				if (lr >= 0)
				{
					for (int j = col0; j < d; j += 1 << lg_lanes)
						slot[(int64_t) lr * d + j] += stg[j * STG_STRIDE + r];
					if (col0 == 0)
						slot[kd + lr] += 1.0;
				}
			}
		}
		else if (MODE == UPD_PRIVATE)
			group_add_rows(X, base + (warp << 5), d, log_b, active ? bestc : -1, grp, groups,
						   col0, lg_lanes,
						   [&](int c, int j, double v) { slot[(int64_t) c * d + j] += v; },
						   [&](int c) { slot[kd + c] += 1.0; });
		else if ((MODE == UPD_SHARED || MODE == UPD_GLOBAL) && k > 64)
		{
			/* many clusters: lanes rarely share one; lane groups, no aggregation */
			group_add_rows(X, base + (warp << 5), d, log_b, active ? bestc : -1, grp, groups,
						   col0, lg_lanes,
						   [&](int c, int j, double v) { atomicAdd(&sums[(int64_t) c * d + j], v); },
						   [&](int c) { atomicAdd(&cnt[c], 1ULL); });
		}
		else if (MODE == UPD_SHARED || MODE == UPD_GLOBAL)
		{
			int			lab = active ? bestc : -1;
			unsigned	todo = __ballot_sync(FULL, active);

			while (todo)
			{
				int			leader = __ffs(todo) - 1;
				int			c = __shfl_sync(FULL, lab, leader);
				unsigned	members = __ballot_sync(FULL, lab == c);
				bool		mine = lab == c;

				todo &= ~members;
				for (int j = 0; j < d; j++)
				{
					double		v = warp_sum(mine ? xi[(int64_t) j << log_b] : 0.0);

					if (lane == leader)
						atomicAdd(&sums[(int64_t) c * d + j], v);
				}
				if (lane == leader)
					atomicAdd(&cnt[c], (unsigned long long) __popc(members));
			}
		}
	}

	/* per-block results: inertia in a fixed order, counts and sums added */
	my_inertia = block_sum(my_inertia);
	if (threadIdx.x == 0)
		block_part[blockIdx.x] = my_inertia;
	for (int o = 16; o > 0; o >>= 1)
		my_changed += __shfl_xor_sync(FULL, my_changed, o);
	if (lane == 0 && my_changed)
		atomicAdd(&stats->changed, my_changed);
	if (MODE == UPD_PRIVATE)
	{
		int			copies = (BLOCK / 32) * groups;

		__syncthreads();
		for (int64_t e = threadIdx.x; e < slot_len; e += BLOCK)
		{
			double		v = 0;

			for (int w = 0; w < copies; w++)
				v += s_acc[w * slot_len + e];
			part[blockIdx.x * slot_len + e] = v;
		}
	}
	if (MODE == UPD_SHARED)
	{
		__syncthreads();
		for (int64_t e = threadIdx.x; e < kd; e += BLOCK)
			if (s_acc[e] != 0)
				atomicAdd(&g_sums[e], s_acc[e]);
		for (int c = threadIdx.x; c < k; c += BLOCK)
			if (cnt[c])
				atomicAdd(&g_cnt[c], cnt[c]);
	}
}

/* the exclusive prefix sum of v over the block's threads, in thread order */
__device__ int
block_excl_scan(int v)
{
	__shared__ int wsum[32];
	int			lane = threadIdx.x & 31;
	int			warp = threadIdx.x >> 5;
	int			x = v;

	for (int o = 1; o < 32; o <<= 1)
	{
		int			y = __shfl_up_sync(FULL, x, o);

		if (lane >= o)
			x += y;
	}
	if (lane == 31)
		wsum[warp] = x;
	__syncthreads();
	if (warp == 0)
	{
		int			t = lane < (int) (blockDim.x >> 5) ? wsum[lane] : 0;

		for (int o = 1; o < 32; o <<= 1)
		{
			int			y = __shfl_up_sync(FULL, t, o);

			if (lane >= o)
				t += y;
		}
		wsum[lane] = t;
	}
	__syncthreads();
	x += (warp > 0 ? wsum[warp - 1] : 0) - v;
	__syncthreads();			/* wsum is free again */
	return x;
}

/*
 * The centroid update from given labels (the tensor-core pass labelled,
 * and could not sum as well: pggpu_tc_assign_update) for
 * 32 <= k <= BLOCK clusters, d <= DMAX <= 32 columns: P = BLOCK / k threads
 * own cluster c, each a share of its rows (every P-th), and keep their sums
 * in registers.  The block takes chunks of R = 2^lg_r rows
 * (its chunks blockIdx.x, + gridDim.x, ...): the chunk's values come to
 * shared memory (coalesced), then a stable counting sort by label lists each
 * cluster's rows in row order (per warp slice, ranks among lanes of the same
 * label by __match_any_sync; bases per warp and cluster; starts by a scan
 * over the clusters), and the owners add their rows, in order; at the end
 * the P shares are added in order.  No atomics, and
 * every addition in a fixed order: the block's sums (then counts, as
 * doubles) go to its row of `part`, reduce_finalize_kernel adds the blocks in
 * order, so the result is deterministic, as UPD_PRIVATE's.  Every row is
 * read once, from one coalesced load, and the block's threads all work in
 * every phase (the private copies' lane groups left 3/4 of the lanes idle
 * at d = 8).  Partial inertia per block in block_part.  Measured on the
 * H100 at N = 10^7, d = 8: 0.45 ms (k = 64) to 0.51 ms (k = 256) at locked
 * clocks, DRAM 45-51% busy: bound by the chunk's phases and their barriers,
 * not by the bytes.
 */
#define OWN_WARPS (BLOCK / 32)
#define OWNED_BLOCKS_PER_SM 5	/* part's rows: blocks an SM, at most (shared memory allows 5) */
#define OWN_LOADS 8				/* values in flight a thread while a chunk comes in */

template <int DMAX>
__global__ void __launch_bounds__(BLOCK, DMAX <= 8 ? 4 : 2)
owned_update_kernel(const double *__restrict__ X, int64_t n, int d, int log_b, int k, int lg_r,
					const int32_t *__restrict__ labels, const double *__restrict__ dist2,
					double *part, double *block_part)
{
	extern __shared__ double smem[];
	const int	R = 1 << lg_r;
	const int	S = R / OWN_WARPS;	/* rows of a warp's slice: a multiple of 32 */
	double	   *sX = smem;		/* [j][r] */
	int		   *sHw = (int *) (sX + (size_t) d * R);	/* [warp][c]: counts, then bases */
	int		   *sStart = sHw + OWN_WARPS * k;	/* [c]: where cluster c's rows start */
	int		   *sTot = sStart + k;	/* [c]: how many */
	short	   *sLab = (short *) (sTot + k);	/* [r] */
	short	   *sPos = sLab + R;	/* [r]: rank among the slice's rows of its label */
	short	   *sPerm = sPos + R;	/* rows sorted by label, stably */
	const int	lane = threadIdx.x & 31;
	const int	warp = threadIdx.x >> 5;
	/* P = BLOCK / k threads a cluster: thread (c, q) takes rows q, q + P, ... of c's */
	const int	P = BLOCK / k;
	const int	c = threadIdx.x % k;
	const int	q = threadIdx.x / k;
	const bool	own = q < P;
	double		acc[DMAX];
	double		cnt = 0;
	double		ine = 0;

#pragma unroll
	for (int j = 0; j < DMAX; j++)
		acc[j] = 0;
	for (int e = threadIdx.x; e < OWN_WARPS * k; e += BLOCK)
		sHw[e] = 0;
	for (int64_t r0 = (int64_t) blockIdx.x * R; r0 < n; r0 += (int64_t) gridDim.x * R)
	{
		const int	m = (int) (n - r0 < R ? n - r0 : R);
		int			tot = 0;

		/* the chunk's values (OWN_LOADS in flight a thread), labels; its distances into the inertia */
		for (int e0 = threadIdx.x; e0 < d * R; e0 += OWN_LOADS * BLOCK)
		{
			double		v[OWN_LOADS];

#pragma unroll
			for (int u = 0; u < OWN_LOADS; u++)
			{
				int			e = e0 + u * BLOCK;
				int			r = e & (R - 1);

				v[u] = e < d * R && r < m ? X[pggpu_at(r0 + r, e >> lg_r, d, log_b)] : 0.0;
			}
#pragma unroll
			for (int u = 0; u < OWN_LOADS; u++)
				if (e0 + u * BLOCK < d * R)
					sX[e0 + u * BLOCK] = v[u];
		}
		for (int r = threadIdx.x; r < m; r += BLOCK)
		{
			sLab[r] = (short) labels[r0 + r];
			ine += dist2[r0 + r];
		}
		__syncthreads();

		/* each warp ranks the rows of its slice among those of their label */
		for (int r = warp * S + lane; r < (warp + 1) * S; r += 32)
		{
			bool		valid = r < m;
			int			lab = valid ? sLab[r] : -1;
			unsigned	peers = __match_any_sync(FULL, lab);
			int			rank = __popc(peers & ((1u << lane) - 1));
			int			base = valid ? sHw[warp * k + lab] : 0;

			__syncwarp();
			if (valid)
			{
				sPos[r] = (short) (base + rank);
				if (rank == 0)
					sHw[warp * k + lab] = base + __popc(peers);
			}
			__syncwarp();
		}
		__syncthreads();

		/* per cluster (thread c < k): bases of the warps' slices, its total; starts */
		if (threadIdx.x < k)
			for (int w = 0; w < OWN_WARPS; w++)
			{
				int			h = sHw[w * k + c];

				sHw[w * k + c] = tot;
				tot += h;
			}

		int			start = block_excl_scan(tot);

		if (threadIdx.x < k)
		{
			sStart[c] = start;
			sTot[c] = tot;
		}
		__syncthreads();

		/* the rows in label order, row order within a label */
		for (int r = threadIdx.x; r < m; r += BLOCK)
		{
			int			lab = sLab[r];

			sPerm[sStart[lab] + sHw[(r / S) * k + lab] + sPos[r]] = (short) r;
		}
		__syncthreads();

		/* thread (c, q) adds its share of cluster c's rows, in order */
		if (own)
		{
			int			st = sStart[c],
						nt = sTot[c];

			for (int i = st + q; i < st + nt; i += P)
			{
				int			r = sPerm[i];

#pragma unroll
				for (int j = 0; j < DMAX; j++)
					if (j < d)
						acc[j] += sX[(j << lg_r) + r];
				cnt += 1;
			}
		}
		if (threadIdx.x < k)
			for (int w = 0; w < OWN_WARPS; w++)
				sHw[w * k + c] = 0;
		__syncthreads();
	}

	/* the P shares of a cluster added in order (through sX and sHw, free now) */
	int64_t		slot_len = (int64_t) k * d + k;

	if (own)
	{
#pragma unroll
		for (int j = 0; j < DMAX; j++)
			if (j < d)
				sX[(q * k + c) * d + j] = acc[j];
		sHw[q * k + c] = (int) cnt;
	}
	__syncthreads();
	if (threadIdx.x < k)
	{
		double	   *row = part + blockIdx.x * slot_len;
		int			total = 0;

		for (int j = 0; j < d; j++)
		{
			double		v = 0;

			for (int qq = 0; qq < P; qq++)
				v += sX[(qq * k + c) * d + j];
			row[(int64_t) c * d + j] = v;
		}
		for (int qq = 0; qq < P; qq++)
			total += sHw[qq * k + c];
		row[(int64_t) k * d + c] = total;
	}
	ine = block_sum(ine);
	if (threadIdx.x == 0)
		block_part[blockIdx.x] = ine;
}

/*
 * owned_update_kernel applies: 32 <= k <= BLOCK (P <= OWN_WARPS: the shares'
 * counts fit sHw; P k d <= BLOCK d <= d R: their sums fit sX), d <= 32
 */
#define OWNED_OK(k, d) ((k) >= 32 && (k) <= BLOCK && (d) <= 32)

/* its chunk: 2^lg rows, shared memory bytes */
static int
owned_lg_r(int d)
{
	return d <= 8 ? 9 : 8;		/* 512 rows (32 KB at d = 8), 256 beyond */
}

static size_t
owned_smem(int k, int d)
{
	int			r = 1 << owned_lg_r(d);

	return sizeof(double) * (size_t) d * r + sizeof(int) * ((size_t) OWN_WARPS * k + 2 * k) +
		sizeof(short) * 3 * (size_t) r;
}

/*
 * finalize_kernel's work, for its block: centroids from the sums
 * (UPD_PRIVATE: the reduced partials, counts after the sums), empty
 * clusters, total inertia.
 */
__device__ __forceinline__ void
finalize(double *C, const double *sums, const unsigned long long *cnt, int k, int d, int mode,
		 const double *block_part, int nparts, dev_stats *stats)
{
	int64_t		kd = (int64_t) k * d;
	double		inertia = 0;
	double		empty = 0;

	if (mode == UPD_PRIVATE)
	{
		constexpr int U = 4;	/* the loads first (else each waits behind the last store to C) */

		for (int64_t e0 = threadIdx.x; e0 < kd; e0 += U * blockDim.x)
		{
			double		m[U],
						v[U];

#pragma unroll
			for (int u = 0; u < U; u++)
			{
				int64_t		e = e0 + u * blockDim.x;

				m[u] = e < kd ? __ldcg(&sums[kd + e / d]) : 0.0;
				v[u] = e < kd ? __ldcg(&sums[e]) : 0.0;
			}
#pragma unroll
			for (int u = 0; u < U; u++)
				if (m[u] > 0)
					C[e0 + u * blockDim.x] = v[u] / m[u];
		}
		for (int c = threadIdx.x; c < k; c += blockDim.x)
			empty += __ldcg(&sums[kd + c]) == 0;
	}
	else if (mode != UPD_NONE)
	{
		for (int64_t e = threadIdx.x; e < kd; e += blockDim.x)
		{
			unsigned long long m = cnt[e / d];

			if (m)
				C[e] = sums[e] / (double) m;
		}
		for (int c = threadIdx.x; c < k; c += blockDim.x)
			empty += cnt[c] == 0;
	}
	for (int b = threadIdx.x; b < nparts; b += blockDim.x)
		inertia += block_part[b];
	inertia = block_sum(inertia);
	empty = block_sum(empty);
	if (threadIdx.x == 0)
	{
		stats->inertia = inertia;
		stats->empty = (unsigned long long) empty;
	}
}

#define RF_BLOCK 256			/* reduce_finalize_kernel: 8 warps, 32 elements a block */

/*
 * UPD_PRIVATE: adds the blocks' partial sums and counts (rows of `part`,
 * len each) into sums[0 .. len): a block per 32 elements, warp w adding rows
 * w, w + 8, ... in order, then the 8 warps' in order (a fixed order).  The
 * last block to finish (stats->parts_done, zeroed with the stats) then does
 * finalize's work: one launch for both; and with mirror (stats_h's device
 * address) it writes the step's changed, empty and inertia there.
 */
__global__ void __launch_bounds__(RF_BLOCK)
reduce_finalize_kernel(const double *part, int64_t len, int nparts, double *sums, double *C,
					   int k, int d, const double *block_part, dev_stats *stats, dev_stats *mirror)
{
	__shared__ double w_sum[RF_BLOCK / 32][32];
	__shared__ bool last;
	const int	lane = threadIdx.x & 31;
	const int	warp = threadIdx.x >> 5;
	const int64_t e = (int64_t) blockIdx.x * 32 + lane;
	double		v = 0;

	/* launched as the fused pass's dependent: its sums, once it is done (else a no-op) */
	asm volatile("griddepcontrol.wait;" ::: "memory");
	if (*(volatile unsigned *) &stats->skip)
		return;					/* a queued step whose gate closed: no sums */
	if (e < len)
	{
		constexpr int W = RF_BLOCK / 32;
		constexpr int U = 24;	/* loads in flight (192 parts: one trip), then their sums in order */

		for (int b0 = warp; b0 < nparts; b0 += U * W)
		{
			double		t[U];

#pragma unroll
			for (int u = 0; u < U; u++)
				t[u] = b0 + u * W < nparts ? part[(int64_t) (b0 + u * W) * len + e] : 0.0;
#pragma unroll
			for (int u = 0; u < U; u++)
				if (b0 + u * W < nparts)
					v += t[u];
		}
	}
	w_sum[warp][lane] = v;
	__syncthreads();
	if (warp == 0)
	{
		v = 0;
		for (int w = 0; w < RF_BLOCK / 32; w++)
			v += w_sum[w][lane];
		if (e < len)
			sums[e] = v;
		__threadfence();		/* the sums, before this block counts as done */
	}
	__syncthreads();
	if (threadIdx.x == 0)
		last = atomicAdd(&stats->parts_done, 1u) == gridDim.x - 1;
	__syncthreads();
	if (!last)
		return;
	__threadfence();
	finalize(C, sums, NULL, k, d, UPD_PRIVATE, block_part, nparts, stats);
	if (threadIdx.x == 0 && mirror)
	{
		/* the step's stats into pinned host memory: no copy after this kernel */
		mirror->changed = *(volatile unsigned long long *) &stats->changed;
		mirror->empty = stats->empty;
		mirror->inertia = stats->inertia;
	}
}

/* One block: finalize (the modes other than UPD_PRIVATE) */
__global__ void
finalize_kernel(double *C, const double *sums, const unsigned long long *cnt,
				int k, int d, int mode,
				const double *block_part, int nparts, dev_stats *stats)
{
	finalize(C, sums, cnt, k, d, mode, block_part, nparts, stats);
}

__global__ void
counts_kernel(const int32_t *labels, int64_t n, int k, unsigned long long *cnt)
{
	extern __shared__ unsigned long long s_cnt[];
	bool		shared = k <= 4096;

	if (shared)
	{
		for (int c = threadIdx.x; c < k; c += blockDim.x)
			s_cnt[c] = 0;
		__syncthreads();
	}
	for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
		atomicAdd(shared ? &s_cnt[labels[i]] : &cnt[labels[i]], 1ULL);
	if (shared)
	{
		__syncthreads();
		for (int c = threadIdx.x; c < k; c += blockDim.x)
			if (s_cnt[c])
				atomicAdd(&cnt[c], s_cnt[c]);
	}
}

/* |x_i - c|^2 with the Lloyd pass's arithmetic */
__device__ __forceinline__ double
row_dist(const double *__restrict__ xi, int d, int log_b, const double *c)
{
	double		acc = 0.0;

	for (int j = 0; j < d; j++)
		acc = sq_term(acc, xi[(int64_t) j << log_b], c[j]);
	return acc;
}

/*
 * While seeding, the data may lie "by rows" (x_rows in gpu_state): in each
 * group of 32 rows of a tile, whose d columns are d runs of 32 doubles a
 * tile apart, value j of the group's row r is at position p = r d + j of the
 * runs taken in order (run p / 32, place p % 32), so a row's values are
 * contiguous (across at most ceil(d / 32) + 1 runs): a k-means++ step reads
 * the few rows it measures, scattered, in 2 sectors of 32 bytes a row at
 * d = 8, not 8.  The same memory, permuted in place (x_layout_kernel);
 * every other kernel wants the columns, and gets them back first.
 */
#define X_ROWS_MAX_D 32

__device__ __forceinline__ int64_t
x_at(int64_t i, int j, int d, int log_b, bool rows)
{
	if (!rows)
		return pggpu_at(i, j, d, log_b);

	int64_t		t = (i >> log_b) * ((int64_t) d << log_b);
	int			q = (int) (i & (((int64_t) 1 << log_b) - 1));
	int			p = (q & 31) * d + j;

	return t + ((int64_t) (p >> 5) << log_b) + (q & ~31) + (p & 31);
}

/* a warp a group of 32 rows: columns to rows (to_rows) or back */
__global__ void
x_layout_kernel(double *X, int64_t groups, int d, int log_b, bool to_rows)
{
	extern __shared__ double xs[];
	int			lane = threadIdx.x & 31;
	double	   *w = xs + (threadIdx.x >> 5) * 32 * d;
	int64_t		gi = (blockIdx.x * (int64_t) blockDim.x + threadIdx.x) >> 5;
	int64_t		base;

	if (gi >= groups)
		return;
	base = (gi >> (log_b - 5)) * ((int64_t) d << log_b) + ((gi & ((1 << (log_b - 5)) - 1)) << 5);
	for (int r = 0; r < d; r++)
		w[to_rows ? lane * d + r : r * 32 + lane] = X[base + ((int64_t) r << log_b) + lane];
	__syncwarp();
	for (int r = 0; r < d; r++)
		X[base + ((int64_t) r << log_b) + lane] = w[to_rows ? r * 32 + lane : lane * d + r];
}

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
 * While seeding, labels hold a word a row: the low lb bits its nearest
 * centre (lb = bits of k - 1), the others an upper bound of its distance D
 * (float32, rounded up, then up to a multiple of 2^lb in its bits: positive
 * floats order as their bits, and +inf, 0x7f800000, is such a multiple for
 * lb <= 23).  A step then reads 4 bytes a row, not 12 (D and the label),
 * and D itself only where the bound does not settle the row.  For lb > 23
 * (k > 2^23) the word is the label and the bound is D's own.
 */
#define PP_LB_MAX 23

static __host__ __device__ __forceinline__ int
pp_lbits(int k)
{
	int			b = 1;

	while (b < 31 && ((int64_t) 1 << b) < k)
		b++;
	return b;
}

__device__ __forceinline__ uint32_t
pp_pack(double D, int lab, int lb)
{
	uint32_t	m = (1u << lb) - 1;
	uint32_t	b = __float_as_uint(__double2float_ru(D));

	if (lb > PP_LB_MAX)
		return (uint32_t) lab;
	b = b >= 0x7f800000u ? 0x7f800000u : (b + m) & ~m;	/* NaN: +inf */
	return b | (uint32_t) lab;
}

/*
 * Before a k-means++ step: C[c] := X[row], and with prune sep[a] :=
 * |C[c] - C[a]|^2 for every earlier centre a < c (one thread each),
 * rounded down to float32 (the step's pruning test is in float32).
 */
__global__ void
seed_prep_kernel(const double *__restrict__ X, int d, int log_b, bool rows, int64_t row,
				 double *C, int c, bool prune, float *sep)
{
	extern __shared__ double cn[];
	int			a = blockIdx.x * blockDim.x + threadIdx.x;

	for (int j = threadIdx.x; j < d; j += blockDim.x)
	{
		cn[j] = X[x_at(row, j, d, log_b, rows)];
		if (blockIdx.x == 0)
			C[(int64_t) c * d + j] = cn[j];
	}
	__syncthreads();
	if (prune && a < c)
		sep[a] = __double2float_rd(row_dist(C + (int64_t) a * d, d, 0, cn));
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
 * are one sector.
 *
 * Measured (H100, N = 10^7, d = 8, k = 1024, ncu at a step near c = 600):
 * the rows the pruning leaves (scattered) are what costs; by columns each
 * took up to 8 sectors, and a step 107 us at 182 MB read (DRAM 52%: random
 * sectors); by rows, PP_CH = 4: 81 us at 116 MB, and the whole seeding
 * 122 -> 95 ms (PP_CH = 2: 111 ms, 8: 117 ms; 4 blocks an SM, 64 registers:
 * 1% better than 3 at 83).  The 4-byte words alone (not the layout) saved
 * nothing against 12 bytes: 182 against 182 MB, the scattered rows being
 * most of it.
 */
#define PP_R 8
#ifndef PP_CH
#define PP_CH 4
#endif
#define PP_WARPS (BLOCK / 32)
#define PP_L2_FETCH 32
#define PP_SMEM (24 * 1024)		/* the centre, and the separations when they fit */

static_assert(PP_R * 32 == PGGPU_DRAW_ROWS, "a warp's rows of pp_step_kernel: one block of the draw");

#ifndef PP_MIN_BLOCKS
#define PP_MIN_BLOCKS 4			/* __launch_bounds__ blocks per SM of pp_step_kernel */
#endif

template <bool SET>
__global__ void __launch_bounds__(BLOCK, PP_MIN_BLOCKS)
pp_step_kernel(const double *__restrict__ X, int64_t n, int d, int log_b, bool rows,
			   const double *__restrict__ C, int c, const float *__restrict__ sep, int lb,
			   uint32_t *words, double *dist2, double *wsum, bool pick, uint64_t key,
			   double *part_key, long long *part_row, const dev_stats *stats)
{
	extern __shared__ double sh[];
	__shared__ double s_D[PP_WARPS][PP_R * 32];
	__shared__ short s_list[PP_WARPS][PP_R * 32];
	double	   *cn = sh;
	bool		sep_shared = !SET && sizeof(double) * d + sizeof(float) * c <= PP_SMEM;
	const float *sp = sep_shared ? (const float *) (sh + d) : sep;
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
	for (int j = threadIdx.x; j < d; j += blockDim.x)
		cn[j] = C[(int64_t) c * d + j];
	if (sep_shared)
		for (int a = threadIdx.x; a < c; a += blockDim.x)
			((float *) (sh + d))[a] = sep[a];
	__syncthreads();

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
			if (!packed)
#pragma unroll
				for (int r = 0; r < PP_R; r++)
				{
					int64_t		i = i0 + r * 32 + lane;

					Du[r] = i < n ? __double2float_ru(dist2[i]) : 0.0f;
				}
#pragma unroll
			for (int r = 0; r < PP_R; r++)
			{
				unsigned	mask;
				float		sa;
				bool		need;

				if (packed)
					Du[r] = __uint_as_float(wd[r] & ~lmask);
				/* no branches: a row past n has word 0, label 0 < c */
				sa = sp[wd[r] & lmask];
				need = (i0 + r * 32 + lane < n) & (Du[r] != 0.0f) &
					!((Du[r] >= PRUNE_MIN_F) & (sa >= __fmul_ru(4.0f * Du[r], PRUNE_MARGIN_F)));
				mask = __ballot_sync(FULL, need);
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
			double		Dq = SET ? INFINITY : wD[q];	/* the bound, until D is read */
			double		acc = 0.0;
			bool		live = true;

			for (int j0 = 0; j0 < d && live; j0 += PP_CH)
			{
				double		v[PP_CH];

#pragma unroll
				for (int jj = 0; jj < PP_CH; jj++)
					v[jj] = j0 + jj < d ? X[x_at(i, j0 + jj, d, log_b, rows)] : 0.0;
#pragma unroll
				for (int jj = 0; jj < PP_CH; jj++)
					if (j0 + jj < d)
						acc = sq_term(acc, v[jj], cn[j0 + jj]);
				if (!SET && acc >= Dq)
					live = false;	/* >= the bound, so >= D */
			}
			if (!SET && live)
				live = acc < dist2[i];	/* below the bound: D decides */
			if (live)
			{
				dist2[i] = acc;
				words[i] = pp_pack(acc, c, lb);
				wD[q] = acc;
				closer = true;
			}
		}
		__syncwarp();

		/* the block's weight: from the rows' D when one came closer, else as it was */
		{
			long long	blk = i0 / PGGPU_DRAW_ROWS;
			double		S;

			if (__any_sync(FULL, closer))
			{
				double		wt[PP_R];

#pragma unroll
				for (int r = 0; r < PP_R; r++)
				{
					int64_t		i = i0 + r * 32 + lane;

					wt[r] = SET ? wD[r * 32 + lane] : i < n ? __ldcg(dist2 + i) : 0.0;
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

				if (pick_better(kv, blk, bk, br))
					bk = kv, br = blk;
			}
		}
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
			   const double *dist2, int64_t n, uint64_t key,
			   const double *__restrict__ X, int d, int log_b, bool x_rows, double *C, int c,
			   float *sep, long long *rows, dev_stats *stats)
{
	extern __shared__ double cn[];
	__shared__ long long s_row;
	double		bk = INFINITY;
	long long	br = LLONG_MAX;
	int			a = blockIdx.x * blockDim.x + threadIdx.x;

	if (threadIdx.x == 0)
		s_row = stats->pp_stalled ? -2 : 0;
	__syncthreads();
	if (s_row == -2)
		return;
	for (int b = threadIdx.x; b < nparts; b += blockDim.x)
		if (pick_better(part_key[b], part_row[b], bk, br))
			bk = part_key[b], br = part_row[b];
	block_pick_min(&bk, &br);
	if (threadIdx.x == 0)
		s_row = bk == INFINITY ? -1 : br;	/* the block of the draw */
	__syncthreads();
	br = block_draw_row(dist2, n, s_row, key);
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
	if (a < c)
		sep[a] = __double2float_rd(row_dist(C + (int64_t) a * d, d, 0, cn));
}

/*
 * First stage of a pick, the best (key, item) of each CUDA block: FARTHEST,
 * rows by -dist2; SAMPLE, stage 1 of the draw (compute_internal.h), a warp
 * per block of the draw.  See backend_cpu.c.
 */
__global__ void
pick_kernel(const double *dist2, int64_t n, int mode, uint64_t key,
			double *part_key, long long *part_row)
{
	double		bk = INFINITY;
	long long	br = LLONG_MAX;

	if (mode == PGGPU_PICK_SAMPLE)
	{
		int			lane = threadIdx.x & 31;
		int64_t		nb = (n + PGGPU_DRAW_ROWS - 1) / PGGPU_DRAW_ROWS;

		for (int64_t blk = (blockIdx.x * (int64_t) blockDim.x + threadIdx.x) >> 5; blk < nb;
			 blk += ((int64_t) gridDim.x * blockDim.x) >> 5)
		{
			double		w[PGGPU_DRAW_ROWS / 32];

#pragma unroll
			for (int r = 0; r < PGGPU_DRAW_ROWS / 32; r++)
			{
				int64_t		i = blk * PGGPU_DRAW_ROWS + r * 32 + lane;

				w[r] = i < n ? dist2[i] : 0.0;
			}

			double		kv = pggpu_draw_key(key, blk, warp_draw_weight(w));

			if (pick_better(kv, blk, bk, br))
				bk = kv, br = blk;
		}
	}
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
				  int mode, uint64_t key, double *dist2, int64_t n, dev_stats *stats)
{
	__shared__ long long s_blk;
	double		bk = INFINITY;
	long long	br = LLONG_MAX;

	for (int b = threadIdx.x; b < nparts; b += blockDim.x)
		if (pick_better(part_key[b], part_row[b], bk, br))
			bk = part_key[b], br = part_row[b];
	block_pick_min(&bk, &br);
	if (bk == INFINITY)
		br = -1;
	if (mode == PGGPU_PICK_SAMPLE)
	{
		if (threadIdx.x == 0)
			s_blk = br;
		__syncthreads();
		br = block_draw_row(dist2, n, s_blk, key);
	}
	if (threadIdx.x != 0)
		return;
	if (mode == PGGPU_PICK_FARTHEST && br >= 0)
		dist2[br] = -1.0;
	stats->pick_key = bk;
	stats->pick_row = br;
}

/* ---- devices -------------------------------------------------------------- */

static bool
usable(const cudaDeviceProp *p)
{
	return p->major * 10 + p->minor >= PGGPU_MIN_CC;
}

int
pggpu_find_gpus(int want, int *chosen, cudaDeviceProp *props, pggpu_error *err)
{
	int			n = 0;
	int			ok = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	*chosen = -1;
	if (e != cudaSuccess)
	{
		int			drv = 0;

		(void) cudaGetLastError();
		if (cudaDriverGetVersion(&drv) == cudaSuccess && drv == 0)
			pggpu_fail(err, PGGPU_ERR_NO_GPU, "no NVIDIA driver is installed");
		else
			pggpu_fail(err, PGGPU_ERR_NO_GPU, "CUDA finds no usable GPU (%s)", cudaGetErrorString(e));
		return 0;
	}
	for (int i = 0; i < n; i++)
	{
		cudaDeviceProp p;

		if (cudaGetDeviceProperties(&p, i) != cudaSuccess || !usable(&p))
			continue;
		ok++;
		if (*chosen < 0 && (want < 0 || want == i))
		{
			*chosen = i;
			*props = p;
		}
	}
	if (ok == 0)
		pggpu_fail(err, PGGPU_ERR_NO_GPU,
				   n ? "no GPU of compute capability %d.%d or newer (this build's target)"
				   : "no GPU found", PGGPU_MIN_CC / 10, PGGPU_MIN_CC % 10);
	else if (*chosen < 0)
		pggpu_fail(err, PGGPU_ERR_NO_GPU, "GPU %d is not a usable GPU", want);
	return ok;
}

extern "C" int
pggpu_gpu_count_impl(pggpu_error *err)
{
	int			chosen;
	cudaDeviceProp p;

	return pggpu_find_gpus(-1, &chosen, &p, err);
}

extern "C" pggpu_status
pggpu_gpu_info_impl(int index, pggpu_device_info *out, pggpu_error *err)
{
	cudaDeviceProp p;
	size_t		fr = 0,
				tot = 0;
	int			n = 0;

	/* asked first, so a bad index is no CUDA error (compute-sanitizer flags those) */
	CU(cudaGetDeviceCount(&n));
	if (index < 0 || index >= n)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "there is no GPU %d (%d found)", index, n);
	CU(cudaGetDeviceProperties(&p, index));
	memset(out, 0, sizeof(*out));
	out->index = index;
	snprintf(out->name, sizeof(out->name), "%s", p.name);
	out->cc_major = p.major;
	out->cc_minor = p.minor;
	out->multiprocessors = p.multiProcessorCount;
	CU(cudaSetDevice(index));
	CU(cudaMemGetInfo(&fr, &tot));
	out->memory_total = (int64_t) tot;
	out->memory_free = (int64_t) fr;
	CU(cudaDriverGetVersion(&out->driver_version));
	CU(cudaRuntimeGetVersion(&out->runtime_version));
	return PGGPU_OK;
}

/* ---- data ----------------------------------------------------------------- */

static pggpu_status
gpu_open(pggpu_data *ds, int gpu_index, int64_t expected_rows, pggpu_error *err)
{
	gpu_state  *s = (gpu_state *) calloc(1, sizeof(gpu_state));
	size_t		fr = 0,
				tot = 0;
	int64_t		tile_bytes = TILE(ds) * ds->d * (int64_t) sizeof(double);
	int64_t		tiles;
	cudaDeviceProp p;

	if (s == NULL)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	ds->impl = s;
	pggpu_find_gpus(gpu_index, &s->dev, &p, err);
	if (s->dev < 0)
		return PGGPU_ERR_NO_GPU;
	CU(cudaSetDevice(s->dev));
	snprintf(ds->device_name, sizeof(ds->device_name), "%s", p.name);
	s->sm_count = p.multiProcessorCount;
	s->smem_optin = (int) p.sharedMemPerBlockOptin;
	CU(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
	s->stream_ok = true;
	for (int b = 0; b < 2; b++)
	{
		CU(cudaEventCreateWithFlags(&s->copied[b], cudaEventDisableTiming));
		s->event_ok[b] = true;
		if (cudaHostAlloc((void **) &s->stage[b], tile_bytes, cudaHostAllocDefault) != cudaSuccess)
		{
			s->stage[b] = NULL;
			(void) cudaGetLastError();
			return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY,
							  "could not allocate %.1f MB of pinned host memory",
							  tile_bytes / 1048576.0);
		}
	}
	CU(cudaHostAlloc((void **) &s->stats_h, 2 * sizeof(dev_stats), cudaHostAllocMapped));
	CU(cudaHostGetDevicePointer((void **) &s->stats_hd, s->stats_h, 0));

	/* first allocation: the expected rows, up to half of the free memory */
	CU(cudaMemGetInfo(&fr, &tot));
	tiles = expected_rows > 0 ? (expected_rows + TILE(ds) - 1) / TILE(ds) : 1;
	if (tiles * tile_bytes > (int64_t) (fr / 2))
		tiles = (int64_t) (fr / 2) / tile_bytes;
	if (tiles < 1)
		tiles = 1;
	if (cudaMalloc((void **) &s->X, tiles * tile_bytes) != cudaSuccess)
	{
		s->X = NULL;
		(void) cudaGetLastError();
		return pggpu_fail(err, PGGPU_ERR_GPU_MEMORY,
						  "could not allocate %.1f MB of GPU memory for %d columns (%.1f MB free)",
						  tiles * tile_bytes / 1048576.0, ds->d, fr / 1048576.0);
	}
	s->cap_tiles = tiles;
	CU(cudaMalloc((void **) &s->stats, sizeof(dev_stats)));
	return PGGPU_OK;
}

static double *
gpu_batch(pggpu_data *ds)
{
	return ST(ds)->stage[ST(ds)->cur];
}

static pggpu_status
grow(pggpu_data *ds, int64_t tiles, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		tile_bytes = TILE(ds) * ds->d * (int64_t) sizeof(double);
	int64_t		cap = s->cap_tiles * 2 > tiles ? s->cap_tiles * 2 : tiles;
	double	   *x = NULL;

	if (cudaMalloc((void **) &x, cap * tile_bytes) != cudaSuccess)
	{
		size_t		fr = 0,
					tot = 0;

		(void) cudaGetLastError();
		cap = tiles;			/* retry without headroom */
		if (cudaMalloc((void **) &x, cap * tile_bytes) != cudaSuccess)
		{
			(void) cudaGetLastError();
			cudaMemGetInfo(&fr, &tot);
			return pggpu_fail(err, PGGPU_ERR_GPU_MEMORY,
							  "the data do not fit in GPU memory: after %lld rows of %d columns, growing their copy from %.1f to %.1f MB failed (%.1f MB free of %.1f MB)",
							  (long long) ds->n, ds->d, s->cap_tiles * tile_bytes / 1048576.0,
							  cap * tile_bytes / 1048576.0, fr / 1048576.0, tot / 1048576.0);
		}
	}
	CU(cudaMemcpyAsync(x, s->X, s->cap_tiles * tile_bytes, cudaMemcpyDeviceToDevice, s->stream));
	CU(cudaStreamSynchronize(s->stream));
	CU(cudaFree(s->X));
	s->X = x;
	s->cap_tiles = cap;
	return PGGPU_OK;
}

/* X by rows (while seeding) or by columns (see x_at); range and scale take either */
static pggpu_status
x_layout(pggpu_data *ds, bool rows, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		groups = ((ds->n + TILE(ds) - 1) >> ds->log_b) << (ds->log_b - 5);
	int			d = ds->d;

	if (s->x_rows == rows || d < 2 || d > X_ROWS_MAX_D || groups == 0)
		return PGGPU_OK;
	x_layout_kernel<<<(unsigned) ((groups + 3) / 4), 128, sizeof(double) * 4 * 32 * d, s->stream>>>(
		s->X, groups, d, ds->log_b, rows);
	LAUNCHED(x_layout_kernel);
	s->x_rows = rows;
	return PGGPU_OK;
}

static pggpu_status
gpu_push(pggpu_data *ds, int64_t nrows, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		b = TILE(ds);
	int64_t		tile = ds->n >> ds->log_b;
	double	   *buf = s->stage[s->cur];
	pggpu_status st;

	if (s->finished)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "no batch may follow a partial batch");
	if ((st = x_layout(ds, false, err)) != PGGPU_OK)
		return st;
	for (int j = 0; j < ds->d && nrows < b; j++)
		memset(buf + j * b + nrows, 0, sizeof(double) * (b - nrows));
	if (tile >= s->cap_tiles && (st = grow(ds, tile + 1, err)) != PGGPU_OK)
		return st;
	CU(cudaMemcpyAsync(s->X + tile * b * ds->d, buf, sizeof(double) * b * ds->d,
					   cudaMemcpyHostToDevice, s->stream));
	CU(cudaEventRecord(s->copied[s->cur], s->stream));
	ds->n += nrows;
	s->finished = nrows < b;
	/* the other buffer is refilled next: its copy must be done */
	s->cur ^= 1;
	CU(cudaEventSynchronize(s->copied[s->cur]));
	return PGGPU_OK;
}

/* the fit's step graphs (gpu_km_step), if any */
static void
drop_step_graphs(gpu_state *s)
{
	for (int j = 0; j < 2; j++)
	{
		if (s->step_exec[j])
			cudaGraphExecDestroy(s->step_exec[j]);
		s->step_exec[j] = NULL;
	}
}

static void
free_km(gpu_state *s)
{
	/* (a step queued ahead may still run) */
	if (s->stream_ok)
		cudaStreamSynchronize(s->stream);
	cudaFree(s->C);
	cudaFree(s->labels);
	cudaFree(s->dist2);
	cudaFree(s->sums);
	cudaFree(s->cnt);
	cudaFree(s->block_part);
	cudaFree(s->part);
	cudaFree(s->pick_key);
	cudaFree(s->pick_row);
	cudaFree(s->sep);
	cudaFree(s->wsum);
	cudaFree(s->pp_rows);
	cudaFree(s->tc_ws);
	s->tc_ws = NULL;
	cudaFreeHost(s->cnt_h);
	drop_step_graphs(s);
	s->step_off = false;
	s->steps = 0;
	s->ahead = false;
	s->C = s->dist2 = s->sums = s->block_part = s->part = s->pick_key = s->wsum = NULL;
	s->sep = NULL;
	s->labels = NULL;
	s->cnt = s->cnt_h = NULL;
	s->pick_row = s->pp_rows = NULL;
}

static void
gpu_close(pggpu_data *ds)
{
	gpu_state  *s = ST(ds);

	if (s == NULL)
		return;
	if (s->stream_ok)
		cudaStreamSynchronize(s->stream);
	free_km(s);
	cudaFree(s->X);
	cudaFree(s->stats);
	cudaFreeHost(s->stats_h);
	for (int b = 0; b < 2; b++)
	{
		cudaFreeHost(s->stage[b]);
		if (s->event_ok[b])
			cudaEventDestroy(s->copied[b]);
	}
	if (s->stream_ok)
		cudaStreamDestroy(s->stream);
	if (s->cap_ok)
		cudaStreamDestroy(s->cap_stream);
	for (int j = 0; j < 2 && s->step_done_ok; j++)
		cudaEventDestroy(s->step_done[j]);
	(void) cudaGetLastError();
	free(s);
	ds->impl = NULL;
}

static int
grid_for(gpu_state *s, int64_t work)
{
	int64_t		g = (work + BLOCK - 1) / BLOCK;
	int64_t		cap = (int64_t) s->sm_count * 8;

	if (cap > MAX_BLOCKS)
		cap = MAX_BLOCKS;
	return (int) (g < 1 ? 1 : g > cap ? cap : g);
}

static int64_t
used_elems(pggpu_data *ds)
{
	return ((ds->n + TILE(ds) - 1) >> ds->log_b) * TILE(ds) * ds->d;
}

/*
 * copies the stats back and waits: the one sync of an iteration (mirrored:
 * a kernel wrote the ones wanted into stats_h itself, no copy)
 */
static pggpu_status
fetch_stats(gpu_state *s, pggpu_error *err, bool mirrored = false)
{
	if (!mirrored)
		CU(cudaMemcpyAsync(s->stats_h, s->stats, sizeof(dev_stats), cudaMemcpyDeviceToHost, s->stream));
	CU(cudaStreamSynchronize(s->stream));
	return PGGPU_OK;
}

static pggpu_status
gpu_range(pggpu_data *ds, double *lo, double *hi, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		len = used_elems(ds);
	unsigned long long inv;
	pggpu_status st;

	CU(cudaMemsetAsync(s->stats, 0, sizeof(dev_stats), s->stream));
	range_kernel<<<grid_for(s, len), BLOCK, 0, s->stream>>>(s->X, len, s->stats);
	LAUNCHED(range_kernel);
	if ((st = fetch_stats(s, err)) != PGGPU_OK)
		return st;
	memcpy(hi, &s->stats_h->hiabs_bits, sizeof(double));
	inv = ~s->stats_h->loabs_inv;
	if (s->stats_h->loabs_inv == 0)
		*lo = INFINITY;
	else
		memcpy(lo, &inv, sizeof(double));
	return PGGPU_OK;
}

static pggpu_status
gpu_scale(pggpu_data *ds, double factor, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		len = used_elems(ds);

	scale_kernel<<<grid_for(s, len), BLOCK, 0, s->stream>>>(s->X, len, factor);
	LAUNCHED(scale_kernel);
	return PGGPU_OK;
}

/* ---- k-means -------------------------------------------------------------- */

static pggpu_status
gpu_km_begin(pggpu_data *ds, int k, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		n = ds->n > 0 ? ds->n : 1;
	int64_t		kd = (int64_t) k * ds->d;

	free_km(s);
	CU(cudaMalloc((void **) &s->C, sizeof(double) * kd));
	CU(cudaMalloc((void **) &s->sums, sizeof(double) * (kd + k)));
	CU(cudaMalloc((void **) &s->cnt, sizeof(unsigned long long) * k));
	CU(cudaMalloc((void **) &s->labels, sizeof(int32_t) * n));
	CU(cudaMalloc((void **) &s->dist2, sizeof(double) * n));
	CU(cudaMalloc((void **) &s->block_part, sizeof(double) * MAX_BLOCKS));
	/* per-block partial sums, when private copies could fit (see update_mode) */
	s->max_grid = s->sm_count * (2048 / BLOCK);
	if (s->max_grid > MAX_BLOCKS)
		s->max_grid = MAX_BLOCKS;
	s->part_rows = 0;
	if (sizeof(double) * (kd + k) * (BLOCK / 32) <= SMEM_SUMS_LIMIT)
		s->part_rows = s->max_grid;
	else if (pggpu_tc_wanted(k, ds->d) && OWNED_OK(k, ds->d))
		s->part_rows = s->sm_count * OWNED_BLOCKS_PER_SM;	/* owned_update_kernel's */
	if (s->part_rows > 0)
		CU(cudaMalloc((void **) &s->part, sizeof(double) * (kd + k) * s->part_rows));
	CU(cudaMalloc((void **) &s->pick_key, sizeof(double) * MAX_BLOCKS));
	CU(cudaMalloc((void **) &s->pick_row, sizeof(long long) * MAX_BLOCKS));
	CU(cudaMalloc((void **) &s->sep, sizeof(float) * k));
	CU(cudaMalloc((void **) &s->wsum, sizeof(double) * ((n + PGGPU_DRAW_ROWS - 1) / PGGPU_DRAW_ROWS)));
	CU(cudaMalloc((void **) &s->pp_rows, sizeof(long long) * k));
	if (pggpu_tc_wanted(k, ds->d))
		CU(cudaMalloc(&s->tc_ws, pggpu_tc_workspace_bytes(n, k, ds->d)));
	CU(cudaHostAlloc((void **) &s->cnt_h, sizeof(unsigned long long) * k, cudaHostAllocDefault));
	CU(cudaMemsetAsync(s->labels, 0xff, sizeof(int32_t) * n, s->stream));
	s->pick_ready = false;
	s->labels_seeding = false;
	return PGGPU_OK;
}

static pggpu_status
gpu_put_centroids(pggpu_data *ds, const double *C, pggpu_error *err)
{
	gpu_state  *s = ST(ds);

	CU(cudaMemcpyAsync(s->C, C, sizeof(double) * ds->k * ds->d, cudaMemcpyHostToDevice, s->stream));
	CU(cudaStreamSynchronize(s->stream));
	return PGGPU_OK;
}

static pggpu_status
gpu_get_centroids(pggpu_data *ds, double *C, pggpu_error *err)
{
	gpu_state  *s = ST(ds);

	CU(cudaMemcpyAsync(C, s->C, sizeof(double) * ds->k * ds->d, cudaMemcpyDeviceToHost, s->stream));
	CU(cudaStreamSynchronize(s->stream));
	return PGGPU_OK;
}

typedef void (*lloyd_fn) (const double *, int64_t, int, int, const double *, int, int,
						  int32_t *, double *, double *, unsigned long long *,
						  double *, double *, dev_stats *);
typedef void (*owned_fn) (const double *, int64_t, int, int, int, int, const int32_t *,
						  const double *, double *, double *);

template <int TK, int DR>
static lloyd_fn
lloyd_mode(int mode)
{
	switch (mode)
	{
		case UPD_PRIVATE:
			return lloyd_kernel<TK, DR, UPD_PRIVATE>;
		case UPD_SHARED:
			return lloyd_kernel<TK, DR, UPD_SHARED>;
		case UPD_GLOBAL:
			return lloyd_kernel<TK, DR, UPD_GLOBAL>;
		default:
			return lloyd_kernel<TK, DR, UPD_NONE>;
	}
}

template <int TK>
static lloyd_fn
lloyd_variant(int dr, int mode)
{
	switch (dr)
	{
		case 4:
			return lloyd_mode<TK, 4>(mode);
		case 8:
			return lloyd_mode<TK, 8>(mode);
		case 16:
			return lloyd_mode<TK, 16>(mode);
		case 32:
			return lloyd_mode<TK, 32>(mode);
		case LABELS_GIVEN:
			return lloyd_mode<TK, LABELS_GIVEN>(mode);
		default:
			return lloyd_mode<TK, 0>(mode);
	}
}

/*
 * The update mode for k x d and its shared memory: private copies while they
 * fit (one lane per column, as many lane groups per warp as fit, at least
 * one; with rows in registers, dr > 0, each warp's staging area too), else
 * per-block sums with atomics, else global atomics.  *lg_lanes: log2 of the
 * lanes of a group.
 */
static int
update_mode(gpu_state *s, int k, int d, int dr, size_t tile_bytes, int *lg_lanes,
			size_t *acc_bytes)
{
	size_t		slot = sizeof(double) * ((size_t) k * d + k);
	size_t		limit = SMEM_SUMS_LIMIT < s->smem_optin ? SMEM_SUMS_LIMIT : s->smem_optin;
	int			lg_d = 0;

	/* a lane per column: groups of 2^lg_d lanes */
	while ((1 << lg_d) < d && lg_d < 5)
		lg_d++;
	for (*lg_lanes = lg_d; *lg_lanes <= 5; (*lg_lanes)++)
	{
		*acc_bytes = slot * (BLOCK / 32) * (32 >> *lg_lanes);
		if (tile_bytes + *acc_bytes <= limit && s->part != NULL)
		{
			/* and the warps' staging areas, with rows in registers */
			if (dr > 0)
				*acc_bytes += sizeof(double) * (BLOCK / 32) * dr * STG_STRIDE;
			return UPD_PRIVATE;
		}
	}
	*lg_lanes = lg_d;
	*acc_bytes = slot;
	if (tile_bytes + slot <= limit)
		return UPD_SHARED;
	*acc_bytes = 0;
	return UPD_GLOBAL;
}

/*
 * A pass over more than RANGE_WORK squared differences (rows x centroids x
 * columns: a few tenths of a second on lloyd's kernel in float64; the
 * tensor cores, about 16 times as fast there, count a sixteenth) labels its rows
 * in ranges of whole tiles, each at most that much work (or one tile),
 * calling the caller's interrupt callback between them, so that a cancel is
 * answered within about that; then the pass sums the rows by the labels
 * given (as after the tensor cores), and the results are the same.
 */
#define RANGE_WORK ((double) (1LL << 39))

static double
range_work(pggpu_data *ds)
{
	return ds->poll_work > 0 ? ds->poll_work : RANGE_WORK;
}

static bool
label_in_ranges(pggpu_data *ds)
{
	return ds->interrupt != NULL &&
		(double) ds->n * ds->k * ds->d / (ST(ds)->tc_ws ? 16 : 1) > range_work(ds);
}

/*
 * Labels, distances and changed (into the zeroed stats) of every row, range
 * by range: with the tensor cores, else with lloyd's kernel fn (no update)
 * and its shared memory.  May longjmp out of the interrupt callback: what
 * is queued runs on, and free_km syncs the stream before it frees.
 */
static pggpu_status
label_ranges(pggpu_data *ds, lloyd_fn fn, size_t shmem, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		tile = TILE(ds);
	double		per_tile = (double) tile * ds->k * ds->d / (s->tc_ws ? 16 : 1);
	int64_t		tiles = per_tile >= range_work(ds) ? 1 : (int64_t) (range_work(ds) / per_tile);
	int			per_sm = 0;

	CU(cudaMemsetAsync(s->stats, 0, sizeof(dev_stats), s->stream));
	if (!s->tc_ws)
	{
		CU(cudaFuncSetAttribute((const void *) fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int) shmem));
		CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, (const void *) fn, BLOCK, shmem));
	}
	for (int64_t r0 = 0; r0 < ds->n; r0 += tiles * tile)
	{
		int64_t		rows = ds->n - r0 < tiles * tile ? ds->n - r0 : tiles * tile;
		const double *X = s->X + (r0 >> ds->log_b) * tile * ds->d;

		if (r0 > 0)
		{
			CU(cudaStreamSynchronize(s->stream));
			ds->interrupt(ds->interrupt_arg);
		}
		if (s->tc_ws)
			CU(pggpu_tc_assign(X, rows, ds->d, ds->log_b, s->C, ds->k, s->tc_ws, s->labels + r0,
							   s->dist2 + r0, &s->stats->changed, s->stream));
		else
		{
			int64_t		grid = (int64_t) (per_sm > 0 ? per_sm : 1) * s->sm_count;

			if (grid > s->max_grid)
				grid = s->max_grid;
			if (grid > (rows + BLOCK - 1) / BLOCK)
				grid = (rows + BLOCK - 1) / BLOCK;
			fn<<<(unsigned) grid, BLOCK, shmem, s->stream>>>(X, rows, ds->d, ds->log_b, s->C, ds->k, 5,
															   s->labels + r0, s->dist2 + r0, s->sums,
															   s->cnt, s->part, s->block_part, s->stats);
			LAUNCHED(lloyd_kernel);
		}
	}
	return PGGPU_OK;
}

static pggpu_status
gpu_km_step(pggpu_data *ds, bool update, pggpu_step_stats *out, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int			k = ds->k;
	int			d = ds->d;
	int			tk = k <= 8 ? 8 : 32;
	int			kpad = (k + tk - 1) / tk * tk;
	/* rows in registers and centroids resident for d <= 32, while they fit */
	int			dr = d <= 4 ? 4 : d <= 8 ? 8 : d <= 16 ? 16 : d <= 32 ? 32 : 0;
	size_t		tile_bytes;
	size_t		acc_bytes = 0;
	int			lg_lanes = 5;
	int			mode;
	size_t		shmem;
	lloyd_fn	fn;

	if (dr && sizeof(double) * kpad * dr > RESIDENT_LIMIT)
		dr = 0;
	/* a long pass: labelled in ranges first (label_ranges), then as below */
	const bool	ranged = label_in_ranges(ds);
	const int	dr_label = dr;

	/* many centroids: tensor cores label (assign_tc.cu), this pass updates */
	if (s->tc_ws || ranged)
		dr = LABELS_GIVEN;
	tile_bytes = dr == LABELS_GIVEN ? 0 : sizeof(double) * (dr ? kpad * dr : tk * DJ);
	mode = update ? update_mode(s, k, d, dr, tile_bytes, &lg_lanes, &acc_bytes) : UPD_NONE;
	shmem = tile_bytes + acc_bytes;
	fn = tk == 8 ? lloyd_variant<8>(dr, mode) : lloyd_variant<32>(dr, mode);
	int			per_sm = 0;
	int64_t		grid;
	int64_t		rows_per_block = BLOCK;
	int			max_grid = s->max_grid;
	pggpu_status st;

	/* labels given: the owned update, when it applies (deterministic, as UPD_PRIVATE) */
	bool		owned = dr == LABELS_GIVEN && mode != UPD_NONE &&
		OWNED_OK(k, d) && s->part != NULL;
	const void *kfn = (const void *) fn;

	if (owned)
	{
		mode = UPD_PRIVATE;		/* the same partial sums: reduce_finalize_kernel */
		shmem = owned_smem(k, d);
		kfn = d <= 8 ? (const void *) owned_update_kernel<8> : d <= 16 ?
			(const void *) owned_update_kernel<16> : (const void *) owned_update_kernel<32>;
		rows_per_block = (int64_t) 1 << owned_lg_r(d);
		max_grid = s->part_rows;
	}
	s->pick_ready = false;
	if ((st = x_layout(ds, false, err)) != PGGPU_OK)
		return st;
	if (s->labels_seeding)
	{
		/* the first pass counts every row as changed, as on the CPU */
		CU(cudaMemsetAsync(s->labels, 0xff, sizeof(int32_t) * ds->n, s->stream));
		s->labels_seeding = false;
	}
	if (ranged)
	{
		size_t		label_shmem = sizeof(double) * (dr_label ? kpad * dr_label : tk * DJ);

		if ((st = label_ranges(ds, tk == 8 ? lloyd_variant<8>(dr_label, UPD_NONE) :
							   lloyd_variant<32>(dr_label, UPD_NONE), label_shmem, err)) != PGGPU_OK)
			return st;
	}
	/* the tensor-core pass labels, and sums too where it can (then it is the whole pass) */
	int			fused = 0;

	/*
	 * The step's launches on stream sm (every one of them: a graph may
	 * capture them); the reduction's stats into mirror slot; gate (or NULL):
	 * the fused pass's (pggpu_tc_gate).
	 */
	auto		enqueue = [&](cudaStream_t sm, int slot, const pggpu_tc_gate *gate,
							  pggpu_error *err) -> pggpu_status
	{
		/* the stats zeroed (with the tensor cores, by their first kernel; ranged, before the labels) */
		if (!s->tc_ws && !ranged)
			CU(cudaMemsetAsync(s->stats, 0, sizeof(dev_stats), sm));
		if (mode == UPD_SHARED || mode == UPD_GLOBAL)
		{
			CU(cudaMemsetAsync(s->sums, 0, sizeof(double) * (size_t) k * d, sm));
			CU(cudaMemsetAsync(s->cnt, 0, sizeof(unsigned long long) * k, sm));
		}
		fused = 0;
		if (s->tc_ws && !ranged)
			CU(pggpu_tc_assign_update(s->X, ds->n, d, ds->log_b, s->C, k, s->tc_ws, s->labels, s->dist2,
									  (unsigned long long *) ((char *) s->stats + offsetof(dev_stats, changed)),
									  owned ? s->part : NULL, s->block_part, s->part_rows, &fused,
									  s->stats, sizeof(dev_stats), gate, sm));
		if (fused)
			grid = fused;
		else
		{
			/* (host calls on an iteration's critical path: only where they are needed) */
			CU(cudaFuncSetAttribute(kfn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int) shmem));
			CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kfn, BLOCK, shmem));
			grid = (int64_t) (per_sm > 0 ? per_sm : 1) * s->sm_count;
			if (grid > max_grid)
				grid = max_grid;
			if (grid > (ds->n + rows_per_block - 1) / rows_per_block)
				grid = (ds->n + rows_per_block - 1) / rows_per_block;
			if (grid < 1)
				grid = 1;
			if (owned)
			{
				owned_fn	ofn = d <= 8 ? owned_update_kernel<8> : d <= 16 ? owned_update_kernel<16>
					: owned_update_kernel<32>;

				ofn<<<(unsigned) grid, BLOCK, shmem, sm>>>(s->X, ds->n, d, ds->log_b, k,
																owned_lg_r(d), s->labels, s->dist2,
																s->part, s->block_part);
				LAUNCHED(owned_update_kernel);
			}
			else
			{
				fn<<<(unsigned) grid, BLOCK, shmem, sm>>>(s->X, ds->n, d, ds->log_b, s->C, k,
															   lg_lanes, s->labels, s->dist2, s->sums,
															   s->cnt, s->part, s->block_part, s->stats);
				LAUNCHED(lloyd_kernel);
			}
		}
		if (mode == UPD_PRIVATE)
		{
			/* after the fused pass, its dependent: it starts as the pass ends */
			cudaLaunchAttribute at;
			cudaLaunchConfig_t cfg = pggpu_launch_config(&at, (unsigned) ((k * d + k + 31) / 32),
														 RF_BLOCK, 0, sm, fused != 0);

			CU(cudaLaunchKernelEx(&cfg, reduce_finalize_kernel, (const double *) s->part,
								  (int64_t) k * d + k, (int) grid, s->sums, s->C, k, d,
								  (const double *) s->block_part, s->stats, s->stats_hd + slot));
		}
		else
		{
			finalize_kernel<<<1, 1024, 0, sm>>>(s->C, s->sums, s->cnt, k, d, mode,
												s->block_part, (int) grid, s->stats);
			LAUNCHED(finalize_kernel);
		}
		return PGGPU_OK;
	};

	/*
	 * With the fused pass (the fit's steps then launch the same kernels with
	 * the same arguments), the first step's launches are also captured as
	 * two graphs, on cap_stream while that step runs, each a step gated on
	 * the one before (pggpu_tc_gate, with the caller's next_limit) and
	 * writing one of the two stats mirrors.  Then each update step queues
	 * the next one (graph (i + 1) % 2) before it waits for its own result:
	 * the GPU goes on from one step to the next without waiting for the
	 * host, and the next step does nothing where this one ends the loop
	 * (converged, or a cluster empty: the caller repairs it, then a step is
	 * launched directly).  The host knows which from this step's stats (the
	 * same test).  H100, N = 10^7, d = 8, k = 256, nsys: the next pass began
	 * 23 us after the stats' copy, 12 us of it the host's memset and
	 * launches; one graph a step, with the stats written by the reduction,
	 * 1.5% less an iteration; queued ahead, about 1.5% less again.  free_km
	 * drops the graphs.
	 */
	const int64_t i = update ? (s->ahead ? s->steps - 1 : s->steps++) : 0;
	const int	slot = (int) (i % 2);
	bool		queued = false;

	if (!update || !s->ahead)
	{
		if ((st = enqueue(s->stream, slot, NULL, err)) != PGGPU_OK)
			return st;
		if (fused && update && !s->step_off && !s->step_exec[0] && ds->next_limit >= 0)
		{
			pggpu_tc_gate gate = {&s->stats->changed, &s->stats->empty,
				(unsigned long long) ds->next_limit, &s->stats->skip};
			bool		ok = true;

			if (!s->cap_ok && cudaStreamCreateWithFlags(&s->cap_stream, cudaStreamNonBlocking) == cudaSuccess)
				s->cap_ok = true;
			if (!s->step_done_ok && cudaEventCreateWithFlags(&s->step_done[0], cudaEventDisableTiming) == cudaSuccess)
			{
				if (cudaEventCreateWithFlags(&s->step_done[1], cudaEventDisableTiming) == cudaSuccess)
					s->step_done_ok = true;
				else
					cudaEventDestroy(s->step_done[0]);
			}
			for (int j = 0; j < 2 && ok; j++)
			{
				cudaGraph_t g = NULL;
				cudaGraphExec_t ex = NULL;
				pggpu_error cerr = {};

				ok = s->cap_ok && s->step_done_ok &&
					cudaStreamBeginCapture(s->cap_stream, cudaStreamCaptureModeRelaxed) == cudaSuccess;
				if (ok)
				{
					ok = enqueue(s->cap_stream, j, &gate, &cerr) == PGGPU_OK;
					/* (the capture ends whatever happened) */
					ok = cudaStreamEndCapture(s->cap_stream, &g) == cudaSuccess && ok && g != NULL &&
						cudaGraphInstantiate(&ex, g, 0) == cudaSuccess;
				}
				if (g)
					cudaGraphDestroy(g);
				s->step_exec[j] = ok ? ex : NULL;
			}
			if (ok)
				s->step_limit = gate.limit;
			else
			{
				drop_step_graphs(s);
				s->step_off = true;
			}
			(void) cudaGetLastError();
		}
		if (update && s->step_exec[0])
			CU(cudaEventRecord(s->step_done[slot], s->stream));
	}
	s->ahead = false;
	/* the next step, queued now (its gate: this one's stats, as the caller's test) */
	if (update && s->step_exec[0] && ds->next_limit >= 0 &&
		(unsigned long long) ds->next_limit == s->step_limit)
	{
		const int	next = (int) (s->steps++ % 2);

		CU(cudaGraphLaunch(s->step_exec[next], s->stream));
		CU(cudaEventRecord(s->step_done[next], s->stream));
		queued = true;
	}
	if (update && s->step_exec[0])
		CU(cudaEventSynchronize(s->step_done[slot]));	/* this step (not the one queued) */
	else if ((st = fetch_stats(s, err, mode == UPD_PRIVATE)) != PGGPU_OK)
		return st;

	/* mirrored by the reduction in slot, else copied into slot 0 */
	const dev_stats *h = s->stats_h + (mode == UPD_PRIVATE ? slot : 0);

	out->changed = (int64_t) h->changed;
	out->empty = (int64_t) h->empty;
	out->inertia = h->inertia;
	s->ahead = queued && h->empty == 0 && h->changed > s->step_limit;
	return PGGPU_OK;
}

static pggpu_status
gpu_km_counts(pggpu_data *ds, int64_t *counts, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int			k = ds->k;
	size_t		shmem = k <= 4096 ? sizeof(unsigned long long) * k : 0;

	CU(cudaMemsetAsync(s->cnt, 0, sizeof(unsigned long long) * k, s->stream));
	counts_kernel<<<grid_for(s, ds->n), BLOCK, shmem, s->stream>>>(s->labels, ds->n, k, s->cnt);
	LAUNCHED(counts_kernel);
	CU(cudaMemcpyAsync(s->cnt_h, s->cnt, sizeof(unsigned long long) * k, cudaMemcpyDeviceToHost, s->stream));
	CU(cudaStreamSynchronize(s->stream));
	for (int c = 0; c < k; c++)
		counts[c] = (int64_t) s->cnt_h[c];
	return PGGPU_OK;
}

/* one wave of pp_step_kernel: as many blocks as fit on the SMs at once */
static int
pp_grid(gpu_state *s, int64_t n)
{
	int64_t		grid = (n + BLOCK * PP_R - 1) / (BLOCK * PP_R);
	int64_t		cap;

	if (s->pp_blocks_per_sm == 0 &&
		(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&s->pp_blocks_per_sm, pp_step_kernel<false>,
													   BLOCK, PP_SMEM) != cudaSuccess ||
		 s->pp_blocks_per_sm < 1))
	{
		(void) cudaGetLastError();
		s->pp_blocks_per_sm = 4;
	}
	cap = (int64_t) s->sm_count * s->pp_blocks_per_sm;
	if (cap > MAX_BLOCKS)
		cap = MAX_BLOCKS;
	return (int) (grid < 1 ? 1 : grid > cap ? cap : grid);
}

static pggpu_status
pp_launch_step(pggpu_data *ds, int c, bool set, bool pick, uint64_t key, const dev_stats *stats,
			   pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int			grid = pp_grid(s, ds->n);
	size_t		shmem = pp_step_smem(ds->d, c, set);
	int			lb = pp_lbits(ds->k);
	uint32_t   *words = (uint32_t *) s->labels;	/* see pp_pack */

	if (set)
		pp_step_kernel<true><<<(unsigned) grid, BLOCK, shmem, s->stream>>>(
			s->X, ds->n, ds->d, ds->log_b, s->x_rows, s->C, c, s->sep, lb, words, s->dist2, s->wsum,
			pick, key, s->pick_key, s->pick_row, stats);
	else
		pp_step_kernel<false><<<(unsigned) grid, BLOCK, shmem, s->stream>>>(
			s->X, ds->n, ds->d, ds->log_b, s->x_rows, s->C, c, s->sep, lb, words, s->dist2, s->wsum,
			pick, key, s->pick_key, s->pick_row, stats);
	LAUNCHED(pp_step_kernel);
	s->labels_seeding = true;
	s->pick_ready = pick;
	s->pick_ready_key = key;
	s->pick_parts = grid;
	return PGGPU_OK;
}

static pggpu_status
gpu_km_point(pggpu_data *ds, int64_t row, int c, int mode, const uint64_t *next_key,
			 pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int			d = ds->d;
	bool		prune = mode == PGGPU_D2_MIN;

	s->pick_ready = false;
	seed_prep_kernel<<<(unsigned) (prune ? (c + 255) / 256 : 1), 256, sizeof(double) * d, s->stream>>>(
		s->X, d, ds->log_b, s->x_rows, row, s->C, c, prune, s->sep);
	LAUNCHED(seed_prep_kernel);
	if (mode == PGGPU_D2_KEEP)
		return PGGPU_OK;
	return pp_launch_step(ds, c, mode == PGGPU_D2_SET, next_key != NULL,
						  next_key ? *next_key : 0, NULL, err);
}

/* see pggpu_ops: pp_next_kernel and pp_step_kernel per step, one sync a batch */
/* km_pp_steps' launches and its sync: the rows drawn into cnt_h, stats fetched */
static pggpu_status
pp_batch(pggpu_data *ds, int c0, int c1, const uint64_t *keys, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	dev_stats  *stalled = s->stats;
	pggpu_status st;

	CU(cudaMemsetAsync(&stalled->pp_stalled, 0, sizeof(stalled->pp_stalled), s->stream));
	CU(cudaMemsetAsync(s->pp_rows + c0, 0xff, sizeof(long long) * (c1 - c0), s->stream));
	for (int c = c0; c < c1; c++)
	{
		bool		pick = c + 1 < ds->k;

		pp_next_kernel<<<(unsigned) ((c + 255) / 256), 256, sizeof(double) * ds->d, s->stream>>>(
			s->pick_key, s->pick_row, s->pick_parts, s->dist2, ds->n, keys[c - c0], s->X, ds->d,
			ds->log_b, s->x_rows, s->C, c, s->sep, s->pp_rows, stalled);
		LAUNCHED(pp_next_kernel);
		if ((st = pp_launch_step(ds, c, false, pick, pick ? keys[c - c0 + 1] : 0, stalled, err)) != PGGPU_OK)
			return st;
	}
	CU(cudaMemcpyAsync(s->cnt_h, s->pp_rows + c0, sizeof(long long) * (c1 - c0),
					   cudaMemcpyDeviceToHost, s->stream));
	return fetch_stats(s, err);
}

static pggpu_status
gpu_km_pp_steps(pggpu_data *ds, int c0, int c1, const uint64_t *keys, int64_t *rows,
				int *done, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	size_t		fetch;
	pggpu_status st;

	if ((st = x_layout(ds, true, err)) != PGGPU_OK)
		return st;
	if (!(s->pick_ready && s->pick_ready_key == keys[0]))
	{
		s->pick_parts = grid_for(s, ds->n);
		pick_kernel<<<s->pick_parts, BLOCK, 0, s->stream>>>(s->dist2, ds->n, PGGPU_PICK_SAMPLE, keys[0],
															s->pick_key, s->pick_row);
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

static pggpu_status
gpu_km_pick(pggpu_data *ds, int mode, uint64_t key, int64_t *row, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int			grid = grid_for(s, ds->n);
	pggpu_status st;

	if (s->pick_ready && mode == PGGPU_PICK_SAMPLE && key == s->pick_ready_key)
		grid = s->pick_parts;	/* the first stage is done */
	else
	{
		pick_kernel<<<grid, BLOCK, 0, s->stream>>>(s->dist2, ds->n, mode, key, s->pick_key, s->pick_row);
		LAUNCHED(pick_kernel);
	}
	s->pick_ready = false;
	pick_final_kernel<<<1, 1024, 0, s->stream>>>(s->pick_key, s->pick_row, grid, mode, key,
												  s->dist2, ds->n, s->stats);
	LAUNCHED(pick_final_kernel);
	if ((st = fetch_stats(s, err)) != PGGPU_OK)
		return st;
	*row = (int64_t) s->stats_h->pick_row;
	return PGGPU_OK;
}

static pggpu_status
gpu_km_fetch(pggpu_data *ds, int32_t *labels, double *dist2, pggpu_error *err)
{
	gpu_state  *s = ST(ds);

	CU(cudaStreamSynchronize(s->stream));
	if (labels && ds->n > 0)
		CU(cudaMemcpy(labels, s->labels, sizeof(int32_t) * ds->n, cudaMemcpyDeviceToHost));
	if (dist2 && ds->n > 0)
		CU(cudaMemcpy(dist2, s->dist2, sizeof(double) * ds->n, cudaMemcpyDeviceToHost));
	return PGGPU_OK;
}

static const pggpu_ops gpu_ops = {
	gpu_open,
	gpu_batch,
	gpu_push,
	gpu_close,
	gpu_range,
	gpu_scale,
	gpu_km_begin,
	gpu_put_centroids,
	gpu_get_centroids,
	gpu_km_step,
	gpu_km_counts,
	gpu_km_point,
	gpu_km_pick,
	gpu_km_fetch,
	gpu_km_pp_steps,
};

extern "C" const pggpu_ops *const pggpu_gpu_ops = &gpu_ops;
