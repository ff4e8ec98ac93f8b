/*
 * lloyd.cu - the CUDA-core Lloyd pass (lloyd_kernel: labels on the CUDA
 * cores in float64, and the sums of the update in the same pass) and the
 * kernels that turn the sums into centroids (reduce_finalize_kernel,
 * finalize_kernel).
 */
#include <cuda_runtime.h>

#include <cfloat>
#include <climits>
#include <cmath>

#include "common.cuh"
#include "lloyd.cuh"


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
group_add_rows(xview X, int64_t wbase, int d, int log_b, int lab,
			   int grp, int groups, int col0, int lg_lanes, Add add, Count count)
{
	for (int t0 = 0; t0 < 32 / groups; t0 += UPD_BATCH)
	{
		int			lr[UPD_BATCH];
		xview		xr[UPD_BATCH];

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
#define LABELS_GIVEN PGGPU_LABELS_GIVEN

template <int TK, int DR, int MODE>
__global__ void __launch_bounds__(BLOCK, LLOYD_MIN_BLOCKS)
lloyd_kernel(xview X, int64_t n, int d, int log_b,
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
		xview		xi = X + (active ? pggpu_at(i, 0, d, log_b) : 0);
		double		best = INFINITY;
		int			bestc = 0;
		double		xr[DR > 0 ? DR : 1];	/* DR > 0: the row */

		if (DR == LABELS_GIVEN)
		{
			/* the labels and distances of another kernel (the tensor cores: tc.cuh) */
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


/*
 * finalize_kernel's work, for its block: centroids from the sums
 * (UPD_PRIVATE: the reduced partials, counts after the sums), empty
 * clusters, total inertia.
 */
__device__ __forceinline__ void
finalize(double *C, const double *sums, const unsigned long long *cnt, int k, int d, int mode,
		 const double *block_part, int nparts, dev_stats *stats, bool spread = false,
		 const double *mass = NULL)
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
		/* spread: the centroids over the grid's blocks, the stats by the first */
		for (int64_t e = (spread ? blockIdx.x * (int64_t) blockDim.x : 0) + threadIdx.x; e < kd;
			 e += spread ? (int64_t) gridDim.x * blockDim.x : blockDim.x)
		{
			/* (weighted: the mass, where > 0; a cluster of no weight keeps its centroid) */
			double		m = mass ? mass[e / d] : (double) cnt[e / d];

			if (m > 0)
				C[e] = sums[e] / m;
		}
		if (spread && blockIdx.x > 0)
			return;
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

/*
 * finalize for the modes other than UPD_PRIVATE: the centroids over the
 * grid's blocks (one block of 1024 threads took 0.36 ms at k d = 786,432),
 * the stats by the first block
 */
__global__ void
finalize_kernel(double *C, const double *sums, const unsigned long long *cnt, const double *mass,
				int k, int d, int mode, const double *block_part, int nparts, dev_stats *stats)
{
	finalize(C, sums, cnt, k, d, mode, block_part, nparts, stats, true, mass);
}

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
		case PGGPU_LABELS_GIVEN:
			return lloyd_mode<TK, LABELS_GIVEN>(mode);
		default:
			return lloyd_mode<TK, 0>(mode);
	}
}

/* lloyd_kernel's instance for the plan's shape (route.h) */
lloyd_fn
lloyd_pick(int tk, int dr, int mode)
{
	return tk == 8 ? lloyd_variant<8>(dr, mode) : lloyd_variant<32>(dr, mode);
}
