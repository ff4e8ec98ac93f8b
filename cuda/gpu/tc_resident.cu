/*
 * tc_resident.cu - the tensor-core assignment with the centroids resident
 * in registers (K <= 3 k-steps, k <= 16 NM centroids, d <= TC_RESIDENT_MAX_D):
 * the centroids are the mma's A operand, the rows stream through shared
 * memory; with FUSE the same pass also sums the rows into their warps'
 * sums (the whole Lloyd pass).  Its kernels are TC_RESIDENT_TABLE's rows
 * (tc_shapes.h).  Its functions and kernels are named tcr_*.
 */
#include "tc_common.cuh"

/* E[q][.]: the (best, second) float4 of lane g for rows 2t, 2t+1 of n-tile q/4 (t = q%4) */
static __device__ __forceinline__ int
tcr_eslot(int q, int g)
{
	return q * 8 + (g ^ (((q & 3) << 1) | ((q >> 2) & 1)));
}

/*
 * One thread per (m-tile, lane): the A fragments of KS k-steps (uint4 each)
 * then the accumulator start {n(2g), n(2g), n(2g+1), n(2g+1)} of centroids
 * 16 j + 2 g, + 1.  Elements q of a centroid, segments of dmax (the kernel's
 * DW): [0, dmax) big(c~), [dmax, 2 dmax) big(c~), [2 dmax, 3 dmax) small(c~),
 * zero past d and past 3 dmax.
 */
static __device__ __forceinline__ void
prep_frags(int id, const double *__restrict__ C, int k, int d, int ks_n, int nm, int dmax,
		   const double *__restrict__ shift, uint4 *frags, tc_header *hdr, int f16, bool set_hdr)
{
	const float sig = hdr->sigma;
	int			j = id >> 5;
	int			lane = id & 31;
	int			g = lane >> 2;
	int			t = lane & 3;

	if (j >= nm)
		return;
	for (int ks = 0; ks < ks_n; ks++)
	{
		uint32_t	r[4];

		for (int reg = 0; reg < 4; reg++)
		{
			int			c = 16 * j + 2 * g + (reg & 1);

			r[reg] = 0;
			for (int e = 0; e < (f16 ? 2 : 1); e++)
			{
				int			q = f16 ? ks * 16 + 2 * t + e + 8 * (reg >> 1) : ks * 8 + t + 4 * (reg >> 1);
				int			seg = q / dmax;
				int			jj = q - seg * dmax;

				if (c < k && seg < 3 && jj < d)
				{
					float		f = (float) (C[(int64_t) c * d + jj] - shift[jj]);

					if (!f16)
						r[reg] = seg < 2 ? to_tf32(f) : tf32_small(f);
					else
					{
						unsigned short hi = f16_rn(f * sig);
						unsigned short v = seg < 2 ? hi : f16_rn(f * sig - f16_val(hi));

						r[reg] |= (uint32_t) v << (16 * e);
					}
				}
			}
		}
		frags[(j * (ks_n + 1) + ks) * 32 + lane] = make_uint4(r[0], r[1], r[2], r[3]);
	}

	float		cn[2];

	for (int h = 0; h < 2; h++)
	{
		int			c = 16 * j + 2 * g + h;
		bool		ok;

		cn[h] = c < k ? centroid_norm(C, c, d, shift, sig, &ok) : PAD_NORM;
		/* set_hdr: tc_prep_tiles's part, when it does not run */
		if (set_hdr && t == 0 && c < k)
			note_centroid(hdr, ok, cn[h]);
	}
	frags[(j * (ks_n + 1) + ks_n) * 32 + lane] =
		make_uint4(__float_as_uint(cn[0]), __float_as_uint(cn[0]), __float_as_uint(cn[1]),
				   __float_as_uint(cn[1]));
}

/* beside tc_prep_tiles, which sets the header */
__global__ void
tcr_prep_frags(const double *__restrict__ C, int k, int d, int ks_n, int nm, int dmax,
			   const double *__restrict__ shift, uint4 *frags, tc_header *hdr, int f16)
{
	prep_frags(blockIdx.x * blockDim.x + threadIdx.x, C, k, d, ks_n, nm, dmax, shift, frags, hdr,
			   f16, false);
}

/*
 * When tc_resident fuses (no tc_prep_tiles): tc_prep_mean and tcr_prep_frags in one
 * block, one launch (the block's writes are its own after the barrier), on a
 * copy of C in shared memory (tcr_prep_smem): one trip to global memory for
 * C's loads, not one a step.  It also zeroes the caller's zero_words words
 * (pggpu_tc_assign_update's zero: no memset before it).
 */
__global__ void __launch_bounds__(PREP_BLOCK)
tcr_prep_all(const double *__restrict__ C, int k, int d, int ks_n, int nm, int dmax,
			 double *shift, uint4 *frags, tc_header *hdr, int f16, unsigned *zero, int zero_words)
{
	constexpr int U = 8;		/* loads in flight a thread */
	extern __shared__ double sCp[];	/* C (k d), then the shift (TC_MAX_D) */

	/* tcr_kernel<FUSE> may start beside this block: it waits for its results */
	asm volatile("griddepcontrol.launch_dependents;");
	/* the caller's words to zero (its counters, which the pass adds to once this is done) */
	if ((int) threadIdx.x < zero_words)
		zero[threadIdx.x] = 0;
	double	   *sh = sCp + k * d;
	const int	kd = k * d;

	for (int e0 = 0; e0 < kd; e0 += U * PREP_BLOCK)
	{
		double		v[U];

#pragma unroll
		for (int u = 0; u < U; u++)
		{
			int			e = e0 + u * PREP_BLOCK + (int) threadIdx.x;

			v[u] = e < kd ? C[e] : 0.0;
		}
#pragma unroll
		for (int u = 0; u < U; u++)
			if (e0 + u * PREP_BLOCK + (int) threadIdx.x < kd)
				sCp[e0 + u * PREP_BLOCK + threadIdx.x] = v[u];
	}
	__syncthreads();
	prep_mean(sCp, k, d, shift, sh, hdr, f16);
	__syncthreads();
	for (int id = threadIdx.x; id < nm * 32; id += blockDim.x)
		prep_frags(id, sCp, k, d, ks_n, nm, dmax, sh, frags, hdr, f16, true);
}

/* tcr_prep_all's shared memory (k d <= 256 x TC_RESIDENT_MAX_D: under 48 KB) */
size_t
tcr_prep_smem(int k, int d)
{
	return sizeof(double) * ((size_t) k * d + TC_MAX_D);
}

/*
 * c = the m-tile's accumulators against the n-tile's B fragments.  HALF: K's
 * last 8 elements are zeros (3 DW <= 16 KS - 8), so the last k-step is an
 * m16n8k8 on the first half of its fragments: half the tensor work, and a[KS-1]'s
 * .z, .w are never read, so they take no registers.
 */
template <int KS, bool F16, bool HALF>
static __device__ __forceinline__ void
tcr_mma(float (&c)[4], const uint4 (&a)[KS], const float4 &cq, const uint2 (&bx)[KS])
{
	static_assert(!HALF || (F16 && KS >= 2), "tc_resident: the half k-step is f16's, after a full one");
	const uint32_t av0[4] = {a[0].x, a[0].y, a[0].z, a[0].w};

	if (F16)
		mma_f16_init(c, av0, bx[0].x, bx[0].y, cq);
	else
		mma_tf32_init(c, av0, bx[0].x, bx[0].y, cq);
#pragma unroll
	for (int ks = 1; ks < KS; ks++)
	{
		const uint32_t av[4] = {a[ks].x, a[ks].y, a[ks].z, a[ks].w};

		if (HALF && ks == KS - 1)
			mma_f16_k8(c, a[ks].x, a[ks].y, bx[ks].x);
		else if (F16)
			mma_f16(c, av, bx[ks].x, bx[ks].y);
		else
			mma_tf32(c, av, bx[ks].x, bx[ks].y);
	}
}

/*
 * m-tiles J.. NM-1 of an n-tile into the rows' (best, second).  Group G =
 * m-tiles 2G, 2G+1: a lane's 4 centroids 32 G + 2 g + {0, 1, 16, 17}; their
 * least value, G in the low bits, into chain G % 2 (two chains: more
 * independent work); the chains merge in the caller.
 */
template <int KS, bool F16, bool HALF, int J, int NM, int NN>
static __device__ __forceinline__ void
tcr_scan(const uint4 (&a)[NM][KS], const float4 (&cq)[NM], const uint2 (&bx)[NN][KS], uint32_t msk,
		 float (&b0)[NN][2], float (&s0)[NN][2], float (&b1)[NN][2], float (&s1)[NN][2])
{
	if constexpr (J < NM)
	{
		constexpr int G = J / 2;
		constexpr int H = G & 1;
		float		c[NN][4],
					e[NN][4];

#pragma unroll
		for (int nn = 0; nn < NN; nn++)
		{
			tcr_mma<KS, F16, HALF>(c[nn], a[J], cq[J], bx[nn]);
			tcr_mma<KS, F16, HALF>(e[nn], a[J + 1], cq[J + 1], bx[nn]);
		}
#pragma unroll
		for (int nn = 0; nn < NN; nn++)
		{
			float		p0 = pack_r<G>(fminf(fminf(c[nn][0], c[nn][2]), fminf(e[nn][0], e[nn][2])), msk);
			float		p1 = pack_r<G>(fminf(fminf(c[nn][1], c[nn][3]), fminf(e[nn][1], e[nn][3])), msk);

			if (G < 2)
			{
				b0[nn][H] = p0;
				b1[nn][H] = p1;
			}
			else
			{
				top2(b0[nn][H], s0[nn][H], p0);
				top2(b1[nn][H], s1[nn][H], p1);
			}
		}
		tcr_scan<KS, F16, HALF, J + 2, NM, NN>(a, cq, bx, msk, b0, s0, b1, s1);
	}
}

/*
 * FUSE: the nearest centroid of the row at x (x[j * 32]: a lane's column of
 * a stage) by the reference arithmetic, every centroid, the warp together:
 * lane l the pairs l, l + 32, ... in order with strict <, then the warp's
 * least value, lowest index on ties (as tc_exact_kernel: label 0 and
 * infinity when nothing is below infinity).  Every lane gets the result.
 */
template <int DW>
static __device__ __forceinline__ void
tcr_exact_row(const double2 *sC, int ps, int k, int d, const double *x, int lane, int *bl,
			  double *bd)
{
	double		xv[DW];
	double		bv = INFINITY;
	int			bi = INT_MAX;

#pragma unroll
	for (int j = 0; j < DW; j++)
		xv[j] = j < d ? x[j * 32] : 0.0;
	for (int pr = lane; pr < (k + 1) / 2; pr += 32)
	{
		const double2 *cp = sC + pr * ps;
		double		a0 = 0,
					a1 = 0;

		/* columns j >= d add (0 - 0)^2 = +0: exact */
#pragma unroll
		for (int j = 0; j < DW; j++)
		{
			double2		cv = j < d ? cp[j] : make_double2(0.0, 0.0);

			a0 = sq_term(a0, xv[j], cv.x);
			a1 = sq_term(a1, xv[j], cv.y);
		}
		if (a0 < bv)
		{
			bv = a0;
			bi = 2 * pr;
		}
		if (2 * pr + 1 < k && a1 < bv)
		{
			bv = a1;
			bi = 2 * pr + 1;
		}
	}
	for (int o = 16; o > 0; o >>= 1)
	{
		double		ov = __shfl_xor_sync(FULL, bv, o);
		int			oi = __shfl_xor_sync(FULL, bi, o);

		if (ov < bv || (ov == bv && oi < bi))
		{
			bv = ov;
			bi = oi;
		}
	}
	*bl = bv < INFINITY ? bi : 0;
	*bd = bv;
}

/*
 * FUSE: the rows of one label into the warp's sums and counts, by the
 * lowest lane of that label (peers: the lanes with it, this one the lowest):
 * each sum gets its rows in lane order, whatever the scheduling, and the
 * leaders' labels differ, so their sums and counts too (no atomics).  x: the
 * stage, column j of lane l at x[j * 32 + l].
 */
template <int DW>
static __device__ __forceinline__ void
tcr_accumulate(double *sAcc, unsigned *sCnt, int k, int d, const double *x, unsigned peers, int lab)
{
	constexpr int H = DW < 4 ? DW : 4;	/* columns a batch (8 spill at d = 8) */
	const int	lead = __ffs(peers) - 1;

	sCnt[lab] += __popc(peers);
	/* a batch's loads, then its stores: one latency a batch, not a column */
#pragma unroll
	for (int j0 = 0; j0 < DW; j0 += H)
	{
		double		av[H];

#pragma unroll
		for (int j = 0; j < H; j++)
			av[j] = j0 + j < d ? sAcc[(j0 + j) * k + lab] + x[(j0 + j) * 32 + lead] : 0.0;
		for (unsigned m = peers & (peers - 1); m; m &= m - 1)
		{
			const int	l = __ffs(m) - 1;

#pragma unroll
			for (int j = 0; j < H; j++)
				if (j0 + j < d)
					av[j] += x[(j0 + j) * 32 + l];
		}
#pragma unroll
		for (int j = 0; j < H; j++)
			if (j0 + j < d)
				sAcc[(j0 + j) * k + lab] = av[j];
	}
}

/*
 * NM m-tiles (16 NM >= k), KS k-steps, NW warps (as many as the registers allow), each on tiles of 32 rows
 * (a lane a row, staged by cp.async p.prefetch >= 2 deep as in tc_kernel).
 *
 * Measured (ncu, H100, N = 10^7, d = 8, k = 256: KS 2, f16, NM 16, NW 8):
 * 908 us, 255 registers (the centroids' fragments take 192), so 8 warps an
 * SM, 2 a scheduler; issue 0.51 a scheduler, DRAM 26%: latency-bound with
 * too few warps.  Its 40M mma.m16n8k16 alone are about 0.3 ms at the
 * tensor cores' dense f16 rate.  A next step: split the centroids of a row
 * tile between two warps (half the registers, twice the warps), merging
 * their (best, second) in shared memory.
 *
 * FUSE (the update too, 2 stages, 227 KB of shared memory): 1.17 ms
 * there at first, against 0.91 + 0.13 (candidates) + 0.42 ms
 * (owned_update_kernel) for the two passes; then 1.01 ms with the half
 * k-step (HALF: 1.07), the sums added by each label's lowest lane (no
 * rounds: 1.02) and prefetch_rows<2, DW>.  1.01 ms: 492M warp instructions, issue
 * 0.50 a scheduler, 252 registers; of its stall samples about 40% in the
 * scan (its 169 instructions an n-tile: 32 mma, 78 FMNMX, 28 FADD, 18
 * LOP3), 17% step 3, 13% the sums, 4% __match_any_sync's latency, 10%
 * step 1 and the stages, 3% the rows not certified (0.26% of the rows, a
 * warp's scan each).  An exact max in top2 (3 ALU instructions, not 2 and
 * 2 FADD) measured no faster.  Its warps (NWF, from an estimate 40
 * registers a thread above the plain kernel's) may be fewer.
 *
 * Then (2026-11-23, ncu 949 us, in a fit 982 us): NN = 4 n-tiles a scan
 * (2.5% + 0.5%), the peers' masks in shared memory instead of
 * __match_any_sync (2%), C staged with its loads in flight, and the
 * preparation beside the pass (programmatic launch, 1%).  Its stalls: 27%
 * wait (fixed latencies: mma, FMNMX chains), 12% short scoreboard (shared
 * loads; step 3's random centroid pairs and the sums' random labels: 38% of
 * the shared wavefronts are bank conflicts), 12% a pipe busy (ALU 46%); by
 * region 31% the scan, 14% step 3's float64, 12% step 1, 17% the sums.
 * Measured and not kept: more warps (k = 128 at 10 or 12 warps is no faster
 * than at 8), 16-byte cp.async stages, the sums as swizzled 16-byte pairs
 * (both slower: registers).
 */
template <int KS, bool F16, int NM, int NW, int DW, bool FUSE>
__global__ void __launch_bounds__(NW * 32, 1)
tcr_kernel(const tc_args p)
{
	constexpr int QMAX = (F16 ? 16 : 8) * KS;
	static_assert(3 * DW <= QMAX && NM % 2 == 0, "tc_resident: segments of DW in K, groups of 2 m-tiles");
	static_assert(16 * NM <= 2048 / 4, "tc_resident: a word of sE (2 KB) a label for the peers' masks");
	constexpr int NWD = 8 * KS;	/* 32-bit words of a row */
	constexpr bool HALF = F16 && KS >= 2 && 3 * DW <= 16 * KS - 8;	/* last k-step m16n8k8 */
	constexpr int RT = 32 * NW;
	/*
	 * n-tiles a scan: more independent mma and minima in flight where the
	 * registers hold them (ptxas: the plain variants spill with 2, the
	 * fused tf32 and 4-m-tile ones with 4).  H100, d = 8, k = 256: 1 to 2
	 * 2.5% faster an iteration, 2 to 4 0.5% more (k = 128: 2%).
	 */
	constexpr int NN = !FUSE ? 1 : F16 && NM >= 8 ? 4 : 2;
	extern __shared__ __align__(16) float smem[];
	const int	lane = threadIdx.x & 31;
	const int	warp = threadIdx.x >> 5;
	const int	g = lane >> 2;
	const int	t = lane & 3;
	const int	d = p.d;
	const int	k = p.k;
	const int	log_b = p.log_b;
	const bool	f32 = p.X.f32;		/* rows held as floats: staged as floats (widen_staged) */
	const int	ps = d | 1;			/* double2 chunks a centroid pair (odd: fewer conflicts) */
	const int	nb = p.prefetch;
	const int	sbuf = stage_doubles(d);
	double	   *sS = (double *) smem;
	double2    *sC = (double2 *) (sS + TC_RESIDENT_MAX_D);
	/* warp w's area, and (FUSE) its sums after every warp's area */
	char	   *const wa0 = (char *) smem + tcr_fixed_bytes(k, d);
	const int	wab = tcr_warp_bytes(KS, d, nb);
	char	   *const sa0 = wa0 + NW * wab;
	const int	sab = tcr_acc_bytes(k, d);
	char	   *wb = wa0 + warp * wab;
	uint2	   *sX = (uint2 *) wb;	/* [unit (ks, t)][row slot] */
	float4	   *sE = (float4 *) (wb + 4 * KS * TC_RESIDENT_XS * 8);
	double	   *sStg = (double *) (wb + 4 * KS * TC_RESIDENT_XS * 8 + 2048);
	/* FUSE: this warp's sums [j][c] and counts [c] */
	double	   *sAcc = (double *) (sa0 + warp * sab);
	unsigned   *sCnt = (unsigned *) (sAcc + k * d);
	double		ine = 0;		/* FUSE: this lane's rows' distances, in order */
	const int64_t nrows = p.n;
	const int64_t nrt = (nrows + RT - 1) / RT;
	unsigned long long mine = 0;
	/* ~15, in a register: per lane, so ptxas keeps it instead of copying it from a uniform one */
	const uint32_t msk = ~15u ^ ((uint32_t) (nrows < 0) & (uint32_t) lane);
	uint4		a[NM][KS];
	float4		cq[NM];

	if (!FUSE && blockIdx.x >= nrt)
		return;					/* (FUSE: the grid is at most nrt, and every CTA writes its row) */

	/*
	 * First what does not need the preparation's results (C is its input):
	 * launched as its dependent (FUSE: tcr_prep_all), this runs beside it
	 */
	/* C into pairs: U loads in flight a thread, then their stores (one trip, not U) */
	constexpr int U = 4;

	for (int e0 = threadIdx.x; e0 < k * d; e0 += U * NW * 32)
	{
		double		v[U];

#pragma unroll
		for (int u = 0; u < U; u++)
			v[u] = e0 + u * NW * 32 < k * d ? p.C[e0 + u * NW * 32] : 0.0;
#pragma unroll
		for (int u = 0; u < U; u++)
		{
			int			e = e0 + u * NW * 32;
			int			c = e / d;
			int			j = e - c * d;

			if (e >= k * d)
				break;
			((double *) sC)[((c >> 1) * ps + j) * 2 + (c & 1)] = v[u];
			if ((k & 1) && c == k - 1)
				((double *) sC)[((c >> 1) * ps + j) * 2 + 1] = 0.0;
		}
	}
	if (FUSE)
		for (int e = lane; e < k * d + k; e += 32)
			if (e < k * d)
				sAcc[e] = 0.0;
			else
				sCnt[e - k * d] = 0;
	for (int st = 0; st < nb - 1; st++)
		prefetch_rows<2, DW>(sStg + st * sbuf, p.X, p.labels,
						 (blockIdx.x + (int64_t) st * gridDim.x) * RT + warp * 32, p.n, d, log_b);

	/* then the header, shift and fragments, once the preparation is done (no-op if not dependent) */
	asm volatile("griddepcontrol.wait;" ::: "memory");

	const bool	all_exact = p.hdr->flag != 0;
	const float maxcn = __uint_as_float(p.hdr->maxcn);
	const float sig = p.hdr->sigma;

	if (!all_exact)
#pragma unroll
		for (int j = 0; j < NM; j++)
		{
#pragma unroll
			for (int ks = 0; ks < KS; ks++)
				a[j][ks] = p.frags[(j * (KS + 1) + ks) * 32 + lane];

			uint4		w = p.frags[(j * (KS + 1) + KS) * 32 + lane];

			cq[j] = make_float4(__uint_as_float(w.x), __uint_as_float(w.y),
								__uint_as_float(w.z), __uint_as_float(w.w));
		}
	for (int j = threadIdx.x; j < TC_RESIDENT_MAX_D; j += blockDim.x)
		sS[j] = j < d ? p.shift[j] : 0.0;
	__syncthreads();

	/* stage cur holds this tile's rows; stage nxt (the one the last tile used) gets tile + nb - 1 */
	for (int64_t rt = blockIdx.x, cur = 0, nxt = nb - 1; rt < nrt; rt += gridDim.x,
		 cur = cur + 1 == nb ? 0 : cur + 1, nxt = nxt + 1 == nb ? 0 : nxt + 1)
	{
		const int64_t e0 = rt * RT + (int64_t) warp * 32;
		const double *stg = sStg + (int) cur * sbuf;
		const int64_t r = e0 + lane;
		const bool	valid = r < nrows;
		float		e2 = INFINITY;

		prefetch_rows<2, DW>(sStg + (int) nxt * sbuf, p.X, p.labels,
						 e0 + (int64_t) (nb - 1) * gridDim.x * RT, p.n, d, log_b);
		cp_wait(nb - 1);
		if (f32)
			widen_staged<2>((double *) stg, d);

		/* 1. a lane per row: shift, round, split; the row's words into its B fragments */
		{
			uint32_t	wd[NWD];

#pragma unroll
			for (int w = 0; w < NWD; w++)
				wd[w] = 0;
			if (valid)
			{
				float		xn = 0;
				bool		ok = !all_exact;

				double		xv[DW];

				/* columns j >= d: x = s = 0, f = 0, zero words, xn unchanged */
#pragma unroll
				for (int j = 0; j < DW; j++)
					xv[j] = j < d ? stg[j * 32 + lane] : 0.0;
#pragma unroll
				for (int j = 0; j < DW; j++)
					{
						float		f = (float) (xv[j] - sS[j]) * sig;
						float		v = -2.0f * f;	/* exact */

						ok = ok && fabsf(f) <= (F16 ? 0x1p14f : (float) RANGE);	/* NaN: false */
						xn = fmaf(f, f, xn);
						if (F16)
						{
							unsigned short hi = f16_rn(v);
							unsigned short lo = f16_rn(v - f16_val(hi));
							const int	q[3] = {j, DW + j, 2 * DW + j};
							const unsigned short hv[3] = {hi, lo, hi};

#pragma unroll
							for (int s = 0; s < 3; s++)
								wd[q[s] >> 1] |= (uint32_t) hv[s] << (16 * (q[s] & 1));
						}
						else
						{
							uint32_t	big = tf32_rna(v);

							wd[j] = big;
							wd[DW + j] = tf32_rna(v - __uint_as_float(big));
							wd[2 * DW + j] = big;
						}
					}

				float		S = xn + maxcn;

				e2 = ok && S >= p.tiny ? p.coef * S + 0x1p-90f : INFINITY;
			}
#pragma unroll
			for (int ks = 0; ks < KS; ks++)
#pragma unroll
				for (int tt = 0; tt < 4; tt++)
					if (HALF && ks == KS - 1)	/* the m16n8k8 reads .x only */
						((uint32_t *) &sX[(ks * 4 + tt) * TC_RESIDENT_XS + lane])[0] = wd[ks * 8 + tt];
					else
						sX[(ks * 4 + tt) * TC_RESIDENT_XS + lane] = make_uint2(wd[ks * 8 + tt], wd[ks * 8 + tt + 4]);
		}
		__syncwarp();

		/* 2. every n-tile of 8 rows against all centroids */
		if (!all_exact)
		{
#pragma unroll 1
			for (int n = 0; n < 4; n += NN)
			{
				uint2		bx[NN][KS];
				float		b0[NN][2],
							s0[NN][2],
							b1[NN][2],
							s1[NN][2];

#pragma unroll
				for (int nn = 0; nn < NN; nn++)
				{
					s0[nn][0] = s0[nn][1] = s1[nn][0] = s1[nn][1] = INFINITY;
#pragma unroll
					for (int ks = 0; ks < KS; ks++)
						bx[nn][ks] = sX[(ks * 4 + t) * TC_RESIDENT_XS + (n + nn) * 8 + g];
				}
				tcr_scan<KS, F16, HALF, 0, NM, NN>(a, cq, bx, msk, b0, s0, b1, s1);
#pragma unroll
				for (int nn = 0; nn < NN; nn++)
					sE[tcr_eslot((n + nn) * 4 + t, g)] =
						make_float4(fminf(b0[nn][0], b0[nn][1]),
									fminf(fminf(s0[nn][0], s0[nn][1]),
										  __fsub_rn(__fadd_rn(b0[nn][0], b0[nn][1]), fminf(b0[nn][0], b0[nn][1]))),
									fminf(b1[nn][0], b1[nn][1]),
									fminf(fminf(s1[nn][0], s1[nn][1]),
										  __fsub_rn(__fadd_rn(b1[nn][0], b1[nn][1]), fminf(b1[nn][0], b1[nn][1]))));
			}
			__syncwarp();
		}

		/* 3. a lane per row: merge its 8 lanes; settle it, or list it (FUSE: measure it) */
		{
			bool		cert = false;
			float		thr = NAN;
			int			old = 0;
			int			lab = 0;
			double		dist = 0;

			if (valid)
			{
				old = ((const int32_t *) (stg + d * 32))[lane];

				if (!all_exact)
				{
					const int	q = (lane >> 3) * 4 + ((lane >> 1) & 3);
					const int	h = lane & 1;
					float2		v = ((const float2 *) (sE + tcr_eslot(q, 0)))[h];
					float		b = v.x,
								s = v.y;
					int			gi = 0;

#pragma unroll
					for (int gg = 1; gg < 8; gg++)
					{
						v = ((const float2 *) (sE + tcr_eslot(q, gg)))[h];
						s = fminf(fminf(s, v.y), fmaxf(b, v.x));
						if (v.x < b)
						{
							b = v.x;
							gi = gg;
						}
					}

					/* the packing error of b and s: 2^-19 of their size each */
					float		e2x = 1.01f * (e2 + 0x1.01p-19f * (fabsf(b) + fabsf(s)));

					cert = s - b > e2x;
					lab = 32 * (int) (__float_as_uint(b) & 15u) + 2 * gi;
					if (e2 < INFINITY)
						thr = b + e2x;
				}
				if (cert)
				{
					/*
					 * the group lab + {0, 1, 16, 17} (pairs P, P + 8): the
					 * nearest, lower index on ties
					 */
					double		acc[4];

#pragma unroll
					for (int u = 0; u < 2; u++)
					{
						/* pair P + 8u (P itself again past k) */
						const double2 *cp = sC + ((lab >> 1) + (u && lab + 16 < k ? 8 : 0)) * ps;
						double		xv[DW];
						double2		cv[DW];
						double		a0 = 0,
									a1 = 0;

						/* every load first; columns j >= d add (0 - 0)^2 = +0: exact */
#pragma unroll
						for (int j = 0; j < DW; j++)
						{
							xv[j] = j < d ? stg[j * 32 + lane] : 0.0;
							cv[j] = j < d ? cp[j] : make_double2(0.0, 0.0);
						}
#pragma unroll
						for (int j = 0; j < DW; j++)
						{
							a0 = sq_term(a0, xv[j], cv[j].x);
							a1 = sq_term(a1, xv[j], cv[j].y);
						}
						acc[2 * u] = a0;
						acc[2 * u + 1] = a1;
					}

					double		best = acc[0];
					int			bl = lab;

#pragma unroll
					for (int u = 1; u < 4; u++)
					{
						int			c = lab + (u & 1) + 16 * (u >> 1);

						if (c < k && acc[u] < best)
						{
							best = acc[u];
							bl = c;
						}
					}

					lab = bl;
					dist = best;
				}
			}
			if (FUSE)
			{
				/* the rows not certified: the warp measures every centroid for each */
				unsigned	um = __ballot_sync(FULL, valid && !cert);

				if (lane == 0 && um)
					atomicAdd(&p.hdr->fallbacks, (unsigned long long) __popc(um));
				for (; um; um &= um - 1)
				{
					int			src = __ffs(um) - 1;
					int			bl;
					double		bd;

					tcr_exact_row<DW>(sC, ps, k, d, stg + src, lane, &bl, &bd);
					if (lane == src)
					{
						lab = bl;
						dist = bd;
					}
				}

				/*
				 * the lanes of this row's label: a bit a lane in the label's
				 * word of sE (free after the merge; k <= 512 words), the same
				 * mask as __match_any_sync's, whose latency was 4% of the
				 * kernel's stalls (measured: 2% faster an iteration)
				 */
				unsigned   *sM = (unsigned *) sE;

				__syncwarp();
				if (valid)
					sM[lab] = 0;
				__syncwarp();
				if (valid)
					atomicOr(&sM[lab], 1u << lane);
				__syncwarp();

				unsigned	peers = valid ? sM[lab] : 1u << lane;

				if (valid)
				{
					p.labels[r] = lab;
					p.dist2[r] = dist;
					mine += old != lab;
					ine += dist;
				}
				if (valid && (peers & ((1u << lane) - 1)) == 0)
					tcr_accumulate<DW>(sAcc, sCnt, k, d, stg, peers, lab);
			}
			else
			{
				if (valid)
				{
					if (cert)
					{
						p.labels[r] = lab;
						p.dist2[r] = dist;
						mine += old != lab;
					}
					else
						p.labels[r] = INT_MIN + (old >= 0 && old < k ? old : k);
				}
				list_uncertain(p, lane, valid && !cert, r, thr);
			}
		}
		__syncwarp();
	}
	asm volatile("cp.async.wait_all;");
	/* the next kernel (FUSE: the partial sums' reduction) may launch; it waits for this one's end */
	asm volatile("griddepcontrol.launch_dependents;");

	for (int o = 16; o > 0; o >>= 1)
		mine += __shfl_xor_sync(FULL, mine, o);
	if (lane == 0 && mine)
		atomicAdd(p.changed, mine);
	if (FUSE)
	{
		/* the CTA's row of sums and counts: the warps' added in warp order */
		double	   *row = p.part + (int64_t) blockIdx.x * ((int64_t) k * d + k);

		for (int o = 16; o > 0; o >>= 1)
			ine += __shfl_down_sync(FULL, ine, o);
		if (lane == 0)
			((double *) sE)[0] = ine;	/* lane 0's sum: a fixed order */
		__syncthreads();
		for (int e = threadIdx.x; e < k * d + k; e += NW * 32)
		{
			double		v = 0;

			if (e < k * d)
			{
				int			c = e / d;
				int			j = e - c * d;

				for (int w = 0; w < NW; w++)
					v += ((const double *) (sa0 + w * sab))[j * k + c];
			}
			else
			{
				unsigned long long m = 0;

				for (int w = 0; w < NW; w++)
					m += ((const unsigned *) ((const double *) (sa0 + w * sab) + k * d))[e - k * d];
				v = (double) m;
			}
			row[e] = v;
		}
		if (threadIdx.x == 0)
		{
			double		b = 0;

			for (int w = 0; w < NW; w++)
				b += *(const double *) (wa0 + w * wab + 4 * KS * TC_RESIDENT_XS * 8);	/* its sE */
			p.block_part[blockIdx.x] = b;
		}
	}
}

/* ---- the exact scan ------------------------------------------------------------ */


/* TC_RESIDENT_TABLE's kernels, in its order */
struct resident_row
{
	int			ks,
				f16,
				nm,
				dw;
	tc_fn		main,
				fused;
};

/* the fused kernel only where the row has one (no instance otherwise) */
template <int KS, bool F16, int NM, int DW, int NWF>
static tc_fn
fused_kernel()
{
	if constexpr (NWF > 0)
		return tcr_kernel<KS, F16, NM, NWF, DW, true>;
	else
		return nullptr;
}

#define TC_RESIDENT_ROW(KS, F16, NM, DW, NW, NWF) \
	{KS, F16, NM, DW, tcr_kernel<KS, (bool) F16, NM, NW, DW, false>, fused_kernel<KS, (bool) F16, NM, DW, NWF>()},

static const resident_row resident_rows[] = {TC_RESIDENT_TABLE(TC_RESIDENT_ROW)};

tc_fn
tc_resident_kernel(int ks, bool f16, int nm, int dw, bool fused)
{
	for (const resident_row &r : resident_rows)
		if (r.ks == ks && r.f16 == (int) f16 && r.nm == nm && r.dw == dw)
			return fused ? r.fused : r.main;
	return nullptr;
}
