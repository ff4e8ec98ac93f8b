/*
 * owned_update.cu - the centroid update from given labels (after the tensor
 * cores labelled): owned_update_kernel.
 */
#include <cuda_runtime.h>

#include "common.cuh"
#include "lloyd.cuh"

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
#define OWN_LOADS 8				/* values in flight a thread while a chunk comes in */

template <int DMAX>
__global__ void __launch_bounds__(BLOCK, DMAX <= 8 ? 4 : 2)
owned_update_kernel(xview X, int64_t n, int d, int log_b, int k, int lg_r,
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

/* owned_update_kernel for d (d <= 32) */
owned_fn
owned_kernel(int d)
{
	return d <= 8 ? owned_update_kernel<8> : d <= 16 ? owned_update_kernel<16> : owned_update_kernel<32>;
}
