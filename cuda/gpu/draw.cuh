/*
 * draw.cuh - what seed.cu and trials.cu share of the draws of k-means++ on
 * the GPU: the weight of a block of the draw (S_b), its two stages, the
 * least of partial picks, the separations of a new centre from the earlier
 * ones, and the rows' words while seeding.  CUDA C++ only; after common.cuh.
 */
#ifndef PG_GPU_GPU_DRAW_CUH
#define PG_GPU_GPU_DRAW_CUH

/*
 * S_b of a block of the draw (compute_internal.h) from a warp: lane l holds
 * dist2 of rows 32 r + l, r = 0..7 (0 past n); every lane gets the sum of
 * their w.  The butterfly adds lane l's and lane l ^ h's sums in both: the
 * same value (a + b = b + a), the order of pggpu_draw_weight.
 */
static __device__ __forceinline__ double
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
static __device__ long long
block_draw_row(const double *dist2, const double *rw, int64_t n, long long blk, uint64_t key)
{
	uint64_t	k2 = pggpu_draw_row_key(key);
	double		bk = INFINITY;
	long long	br = LLONG_MAX;

	for (int q = threadIdx.x; blk >= 0 && q < PGGPU_DRAW_ROWS; q += blockDim.x)
	{
		int64_t		i = blk * PGGPU_DRAW_ROWS + q;
		double		kv = i < n ? pggpu_draw_key(k2, i, pggpu_draw_wt(dist2, rw, i)) : INFINITY;

		if (pick_better(kv, i, bk, br))
			bk = kv, br = i;
	}
	__syncthreads();			/* block_pick_min's shared memory may be in use */
	block_pick_min(&bk, &br);
	return bk == INFINITY ? -1 : br;
}

/*
 * Stage 1 of the draw (compute_internal.h) over the grid, a warp per block
 * of the draw: the thread's best (key, block) into *bk, *br
 */
static __device__ void
grid_draw_blocks(const double *dist2, const double *rw, int64_t n, uint64_t key, double *bk, long long *br)
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

			w[r] = i < n ? pggpu_draw_wt(dist2, rw, i) : 0.0;
		}

		double		kv = pggpu_draw_key(key, blk, warp_draw_weight(w));

		if (pick_better(kv, blk, *bk, *br))
			*bk = kv, *br = blk;
	}
}

/*
 * the least of nparts partial picks, in thread 0 (INFINITY: none); by the
 * whole block.  Read past L1 (__ldcg): trial_draw_kernel's last block reads
 * parts that other blocks wrote in the same launch, which its L1 may hold
 * stale; for parts of an earlier launch it costs nothing.
 */
static __device__ void
block_parts_min(const double *part_key, const long long *part_row, int nparts, double *bk, long long *br)
{
	*bk = INFINITY;
	*br = LLONG_MAX;
	for (int b = threadIdx.x; b < nparts; b += blockDim.x)
	{
		const double kb = __ldcg(&part_key[b]);
		const long long rb = __ldcg(&part_row[b]);

		if (pick_better(kb, rb, *bk, *br))
			*bk = kb, *br = rb;
	}
	block_pick_min(bk, br);
}

/*
 * sep[a] := |C[a] - cn|^2 for a < c, rounded down to float32, a warp a
 * centre (lanes over the columns: C's rows read coalesced, where a thread a
 * centre read d scattered doubles one after another: at d = 768 that was
 * most of a step).  The order of the sum does not matter to the pruning
 * (see PRUNE_MARGIN_F).
 */
static __device__ void
grid_separations(const double *C, int c, int d, const double *cn, float *sep)
{
	int			lane = threadIdx.x & 31;
	int			warps = gridDim.x * (blockDim.x >> 5);

	for (int a = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); a < c; a += warps)
	{
		double		acc = 0.0;

		for (int j = lane; j < d; j += 32)
			acc = sq_term(acc, C[(int64_t) a * d + j], cn[j]);
		for (int o = 16; o > 0; o >>= 1)
			acc = __dadd_rn(acc, __shfl_xor_sync(FULL, acc, o));
		if (lane == 0)
			sep[a] = __double2float_rd(acc);
	}
}

/* blocks of SEP_THREADS for grid_separations over c centres */
#define SEP_THREADS 256

static unsigned
sep_grid(const gpu_state *s, int c)
{
	int64_t		g = ((int64_t) c + SEP_THREADS / 32 - 1) / (SEP_THREADS / 32);
	int64_t		cap = (int64_t) s->sm_count * 8;

	return (unsigned) (g < 1 ? 1 : g > cap ? cap : g);
}

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

static __device__ __forceinline__ uint32_t
pp_pack(double D, int lab, int lb)
{
	uint32_t	m = (1u << lb) - 1;
	uint32_t	b = __float_as_uint(__double2float_ru(D));

	if (lb > PP_LB_MAX)
		return (uint32_t) lab;
	b = b >= 0x7f800000u ? 0x7f800000u : (b + m) & ~m;	/* NaN: +inf */
	return b | (uint32_t) lab;
}

#endif							/* PG_GPU_GPU_DRAW_CUH */
