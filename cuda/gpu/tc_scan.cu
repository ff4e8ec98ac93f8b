/*
 * tc_scan.cu - the tensor-core assignment with the centroids' tiles in
 * shared memory (any k; d <= TC_MAX_D): its preparation (tc_prep_mean,
 * tc_prep_tiles: the shift, the centroids as mma B fragments) and
 * tc_kernel, whose main pass (CAND false) labels every row it can certify
 * and lists the others, and whose candidate pass (CAND true) measures the
 * listed rows' candidates exactly (steps 1-3 of tc_common.cuh's outline).
 * tc_kernel walks tiles of rows through its passes, one function each
 * (tcs_rows, tcs_fragments, tcs_scan, tcs_merge or tcs_measure,
 * tcs_settle), over one shared-memory layout (tcs_smem, carved where
 * tc_shapes.h's tcs_place says, as tc_scan_smem sizes it).
 */
#include "tc_common.cuh"

__global__ void __launch_bounds__(PREP_BLOCK)
tc_prep_mean(const double *__restrict__ C, int k, int d, double *shift, tc_header *hdr, int f16)
{
	__shared__ double sh[TC_MAX_D];

	prep_mean(C, k, d, shift, sh, hdr, f16);
}

/* ||c~||^2 in scaled units, rounded to float32; *ok: every |c_j - s_j| <= RANGE */
/*
 * One thread per (n-tile, lane).  Block of n-tile nt: KS x 32 lanes x 2 floats
 * (B fragment of k-step ks: b0 = B[ks*8 + t][g], b1 = B[ks*8 + t + 4][g], g =
 * lane/4 the centroid, t = lane%4), then for t = 0..3 the accumulator start
 * {n[2t], n[2t+1], n[2t], n[2t+1]}, n = ||c~||^2 of the 8 centroids.  B rows
 * q: [0, d) big(c~), [d, 2d) big(c~), [2d, 3d) small(c~), then zeros.
 */
__global__ void
tc_prep_tiles(const double *__restrict__ C, int k, int d, int ks_n, int ntiles,
			  const double *__restrict__ shift, float *tiles, tc_header *hdr, int f16)
{
	const float sig = hdr->sigma;
	int64_t		id = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
	int			nt = (int) (id >> 5);
	int			lane = (int) (id & 31);
	int			g = lane >> 2;
	int			t = lane & 3;
	int			c = nt * 8 + g;
	int			ntf = ks_n * 64 + 16;
	float	   *blk = tiles + (int64_t) nt * ntf;

	if (nt >= ntiles)
		return;
	for (int ks = 0; ks < ks_n; ks++)
	{
		uint32_t	b[2];

		for (int h = 0; h < 2; h++)
		{
			b[h] = 0;
			/* tf32: b0 = B[8ks + t], b1 = B[8ks + t + 4]; f16: b0 = B[16ks + 2t, +1],
			 * b1 = B[16ks + 2t + 8, +9] (lower k in the low half) */
			for (int e = 0; e < (f16 ? 2 : 1); e++)
			{
				int			q = f16 ? ks * 16 + 2 * t + e + 8 * h : ks * 8 + t + 4 * h;
				int			j = q < d ? q : q < 2 * d ? q - d : q - 2 * d;

				if (c < k && q < 3 * d)
				{
					float		f = (float) (C[(int64_t) c * d + j] - shift[j]);

					if (!f16)
						b[h] = q < 2 * d ? to_tf32(f) : tf32_small(f);
					else
					{
						unsigned short hi = f16_rn(f * sig);
						unsigned short v = q < 2 * d ? hi : f16_rn(f * sig - f16_val(hi));

						b[h] |= (uint32_t) v << (16 * e);
					}
				}
			}
		}
		blk[ks * 64 + lane * 2] = __uint_as_float(b[0]);
		blk[ks * 64 + lane * 2 + 1] = __uint_as_float(b[1]);
	}
	if (t == 0)
	{
		float		cn = PAD_NORM;

		if (c < k)
		{
			bool		ok;

			cn = centroid_norm(C, c, d, shift, sig, &ok);
			note_centroid(hdr, ok, cn);
		}
		/* centroid 8 nt + g is column g: lane t' = g/2 holds it at g%2 and 2 + g%2 */
		blk[ks_n * 64 + (g >> 1) * 4 + (g & 1)] = cn;
		blk[ks_n * 64 + (g >> 1) * 4 + 2 + (g & 1)] = cn;
	}
}

/* ---- the tensor-core passes ----------------------------------------------------- */

/*
 * tc_kernel's shared memory, carved by tcs_place (tc_shapes.h), which
 * tc_scan_smem sizes by: the tiles, the shift, this warp's area and its
 * staging buffers.  A warp's area (warp_words): its rows as A words, then
 * per row the main pass's bound e2, best, second and index, or the
 * candidate pass's threshold T, least distance (bits), the row's index in
 * X, the least candidate, an overflow flag (32 more: a lane's counter),
 * and each lane's CSLOTS candidates (index, then row).
 */
struct tcs_smem
{
	float	   *B0;				/* the tiles (resident), or the buffer of even chunks */
	float	   *B1;				/* the buffer of odd chunks (streamed) */
	double	   *S;				/* the shift */
	uint32_t   *A;				/* the warp's rows as A words */
	float	   *E;				/* main: e2; cand: T */
	float	   *Rb;				/* main: the row's best, second, index */
	float	   *Rs;
	int		   *Ri;
	unsigned long long *Min;	/* cand: the row's least distance (bits) */
	long long  *RowG;			/* cand: the row's index in X */
	int		   *Idx;			/* cand: its least candidate at that distance */
	int		   *Over;			/* cand: a lane had more than CSLOTS */
	int		   *CI;				/* cand: [slot][lane] a lane's own candidates */
	unsigned char *CR;			/* cand: and their rows */
	double	   *Stg;			/* the warp's nb staging buffers */
};

template <int ROWS_W, bool CAND>
__device__ __forceinline__ tcs_smem
tcs_carve(float *smem, const tcs_places &pl, int stride, int warp, int nb, int sbuf)
{
	tcs_smem	m;
	const int	words_w = warp_words(ROWS_W, stride, CAND);

	m.B0 = smem;
	m.B1 = smem + pl.b1;
	m.S = (double *) (smem + pl.shift);
	m.A = (uint32_t *) (smem + pl.warps) + warp * words_w;
	m.E = (float *) m.A + ROWS_W * stride;
	m.Rb = m.E + ROWS_W;
	m.Rs = m.Rb + ROWS_W;
	m.Ri = (int *) (m.Rs + ROWS_W);
	/* (E + ROWS_W is 8-byte aligned: stride and ROWS_W even, the shift whole pairs) */
	m.Min = (unsigned long long *) (m.E + ROWS_W);
	m.RowG = (long long *) (m.Min + ROWS_W);
	m.Idx = (int *) (m.RowG + ROWS_W);
	m.Over = m.Idx + ROWS_W;
	m.CI = m.Over + ROWS_W + 32;
	m.CR = (unsigned char *) (m.CI + CSLOTS * 32);
	m.Stg = (double *) (smem + pl.stages) + warp * nb * sbuf;
	return m;
}

/* a lane's row rr of the tile: from its stage (pf), else from X */
template <int DMAX>
__device__ __forceinline__ void
tcs_values(double (&xv)[DMAX], bool pf, const double *stg, int rr, int lane, const xview xp, int d, int log_b)
{
	if (pf)
#pragma unroll
		for (int j = 0; j < DMAX; j++)
			xv[j] = j < d ? stg[rr * stage_doubles(d) + j * 32 + lane] : 0.0;
	else
		load_row<DMAX>(xv, xp, d, log_b);
}

/*
 * Pass 1, a lane a row (MT / 2 rows each): shifted, rounded and split into
 * the A words [xb | xs | xb]; main: the row's bound e2 (INFINITY: the exact
 * path); cand: its threshold T, its index in X, and its candidate state
 * cleared.  stg: the warp's staged rows (pf), else they are loaded.
 */
template <int MT, bool CAND, bool F16, int DMAX, int QMAX>
__device__ __forceinline__ void
tcs_rows(const tc_args &p, const xview X, const tcs_smem &sm, int stride, int64_t e0, int64_t nrows,
		 bool pf, const double *stg, bool all_exact, float maxcn, float sig, int lane)
{
	const int	d = p.d;
	const int	log_b = p.log_b;

#pragma unroll
	for (int rr = 0; rr < MT / 2; rr++)
	{
		int			lr = rr * 32 + lane;
		int64_t		r = e0 + lr;
		uint32_t   *arow = sm.A + lr * stride;
		float		e2 = INFINITY;
		bool		live = r < nrows;

		if (CAND && live)
		{
			e2 = p.list_t[r];	/* the threshold */
			live = !isnan(e2);
			r = p.list[r];
		}
		if (live)
		{
			const xview xp = tc_row(X, r, d, log_b);
			double		xv[DMAX];
			float		xn = 0;
			bool		ok = !all_exact;

			tcs_values<DMAX>(xv, pf, stg, rr, lane, xp, d, log_b);
#pragma unroll
			for (int j = 0; j < DMAX; j++)
				if (j < d)
				{
					float		f = (float) (xv[j] - sm.S[j]) * sig;
					float		v = -2.0f * f;	/* exact */

					ok = ok && fabsf(f) <= (F16 ? 0x1p14f : (float) RANGE);	/* NaN: false */
					xn = fmaf(f, f, xn);
					if (F16)
					{
						unsigned short hi = f16_rn(v);

						a_put<F16>(arow, j, hi);
						a_put<F16>(arow, d + j, f16_rn(v - f16_val(hi)));
						a_put<F16>(arow, 2 * d + j, hi);
					}
					else
					{
						uint32_t	big = tf32_rna(v);

						a_put<F16>(arow, j, big);
						a_put<F16>(arow, d + j, tf32_rna(v - __uint_as_float(big)));
						a_put<F16>(arow, 2 * d + j, big);
					}
				}
			for (int q = 3 * d; q < QMAX; q++)
				a_put<F16>(arow, q, 0);
			if (!CAND)
			{
				float		S = xn + maxcn;

				e2 = ok && S >= p.tiny ? p.coef * S + 0x1p-90f : INFINITY;
			}
		}
		else
		{
			for (int q = 0; q < QMAX; q++)
				a_put<F16>(arow, q, 0);
			e2 = CAND ? -INFINITY : INFINITY;	/* cand: no candidates */
		}
		sm.E[lr] = e2;
		if (CAND)
		{
			sm.Min[lr] = ~0ULL;
			sm.RowG[lr] = live ? r : 0;
			sm.Idx[lr] = INT_MAX;
			sm.Over[lr] = 0;
		}
	}
}

/*
 * Pass 2: the warp's rows as A fragments, a0 (g, t), a1 (g+8, t), a2 (g,
 * t+4), a3 (g+8, t+4); the rows' best and second cleared (cand: second is
 * the row's threshold)
 */
template <int MT, int KS, bool CAND>
__device__ __forceinline__ void
tcs_fragments(const tcs_smem &sm, int stride, int g, int t, uint32_t (&a)[MT][KS][4], float (&bg)[MT][2],
			  float (&sg)[MT][2], int (&ig)[MT][2])
{
#pragma unroll
	for (int m = 0; m < MT; m++)
	{
#pragma unroll
		for (int ks = 0; ks < KS; ks++)
#pragma unroll
			for (int h = 0; h < 2; h++)
			{
				uint2		w = *(const uint2 *) (sm.A + (m * 16 + g + 8 * h) * stride + ks * 8 + 2 * t);

				a[m][ks][h] = w.x;
				a[m][ks][2 + h] = w.y;
			}
#pragma unroll
		for (int h = 0; h < 2; h++)
		{
			bg[m][h] = INFINITY;
			sg[m][h] = CAND ? sm.E[m * 16 + g + 8 * h] : INFINITY;
			ig[m][h] = 0;
		}
	}
}

/*
 * Pass 3: every centroid against the warp's rows, chunk by chunk (streamed
 * chunks into the other buffer while this one is scanned), a packing group
 * of GROUP_NT n-tiles at a time; main: each row's best, its pair and the
 * second best (over the other pairs); cand: each centroid at or under the
 * row's threshold recorded in the lane's slots (*ncand).  buf: the
 * streamed buffer to fill next.
 */
template <int MT, int KS, bool CAND, bool F16>
__device__ __forceinline__ void
tcs_scan(const tc_args &p, const tcs_smem &sm, const uint32_t (&a)[MT][KS][4], float (&bg)[MT][2],
		 float (&sg)[MT][2], int (&ig)[MT][2], int &ncand, int &buf, int nch, bool resident, int lane)
{
	constexpr int NTF = KS * 64 + 16;
	const int	g = lane >> 2;
	const int	t = lane & 3;
	const int	ntiles = p.ntiles;
	const int	chunk_nt = p.chunk_nt;

	for (int ch = 0; ch < nch; ch++)
	{
		const float *sB = sm.B0;
		int			nt_ch = min(chunk_nt, ntiles - ch * chunk_nt);

		if (!resident)
		{
			int			nx = ch + 1 == nch ? 0 : ch + 1;

			__syncthreads();	/* everyone is done with the other buffer */
			load_chunk(buf ? sm.B0 : sm.B1, p.tiles + (int64_t) nx * chunk_nt * NTF,
					   min(chunk_nt, ntiles - nx * chunk_nt) * NTF);
			asm volatile("cp.async.wait_group 1;");
			__syncthreads();
			sB = buf ? sm.B1 : sm.B0;
			buf ^= 1;
		}
		for (int gr = 0; gr < nt_ch; gr += GROUP_NT)
		{
			int			ng = min(GROUP_NT, nt_ch - gr);
			float		bl[MT][2],
						sl[MT][2];
			const float *blk = sB + gr * NTF;
			uint32_t	j0 = 0;
			/* pair j of this lane: centroids base + 8 j + {0, 1} */
			int			base = (ch * chunk_nt + gr) * 8 + 2 * t;

#pragma unroll
			for (int m = 0; m < MT; m++)
#pragma unroll
				for (int h = 0; h < 2; h++)
					bl[m][h] = sl[m][h] = INFINITY;
#pragma unroll 2
			for (int nt = 0; nt < ng; nt++, blk += NTF, j0++)
			{
				float2		bv[KS];
				float4		cn = *(const float4 *) (blk + KS * 64 + 4 * t);

#pragma unroll
				for (int ks = 0; ks < KS; ks++)
					bv[ks] = *(const float2 *) (blk + ks * 64 + 2 * lane);
#pragma unroll
				for (int m = 0; m < MT; m++)
				{
					float		c[4];

					if (F16)
						mma_f16_init(c, a[m][0], __float_as_uint(bv[0].x), __float_as_uint(bv[0].y), cn);
					else
						mma_tf32_init(c, a[m][0], __float_as_uint(bv[0].x), __float_as_uint(bv[0].y), cn);
#pragma unroll
					for (int ks = 1; ks < KS; ks++)
						if (F16)
							mma_f16(c, a[m][ks], __float_as_uint(bv[ks].x), __float_as_uint(bv[ks].y));
						else
							mma_tf32(c, a[m][ks], __float_as_uint(bv[ks].x), __float_as_uint(bv[ks].y));
					if (!CAND)
					{
						top2(bl[m][0], sl[m][0], pack(fminf(c[0], c[1]), j0));
						top2(bl[m][1], sl[m][1], pack(fminf(c[2], c[3]), j0));
					}
					else if ((c[0] <= sg[m][0]) | (c[1] <= sg[m][0]) |
							 (c[2] <= sg[m][1]) | (c[3] <= sg[m][1]))
					{
						/* rare: record the candidates */
#pragma unroll
						for (int q = 0; q < 4; q++)
							if (c[q] <= sg[m][q >> 1])
							{
								int			row = m * 16 + g + 8 * (q >> 1);

								if (ncand < CSLOTS)
								{
									sm.CI[ncand * 32 + lane] = base + (int) j0 * 8 + (q & 1);
									sm.CR[ncand * 32 + lane] = (unsigned char) row;
									ncand++;
								}
								else
									sm.Over[row] = 1;
							}
					}
				}
			}
			if (!CAND)
			{
				/* merge the group */
#pragma unroll
				for (int m = 0; m < MT; m++)
#pragma unroll
					for (int h = 0; h < 2; h++)
					{
						uint32_t	jl = __float_as_uint(bl[m][h]) & 15u;

						if (bl[m][h] < bg[m][h])
						{
							sg[m][h] = fminf(bg[m][h], sl[m][h]);
							bg[m][h] = bl[m][h];
							ig[m][h] = base + (int) jl * 8;
						}
						else
							sg[m][h] = fminf(sg[m][h], bl[m][h]);
					}
			}
		}
	}
}

/* Pass 4 of the main pass: the quad's lanes merged, each row's (best, second, pair) to shared memory */
template <int MT>
__device__ __forceinline__ void
tcs_merge(const tcs_smem &sm, const float (&bg)[MT][2], const float (&sg)[MT][2], const int (&ig)[MT][2],
		  int g, int t)
{
#pragma unroll
	for (int m = 0; m < MT; m++)
#pragma unroll
		for (int h = 0; h < 2; h++)
		{
			float		b = bg[m][h],
						s = sg[m][h];
			int			i = ig[m][h];

#pragma unroll
			for (int o = 1; o <= 2; o <<= 1)
			{
				float		ob = __shfl_xor_sync(FULL, b, o);
				float		os = __shfl_xor_sync(FULL, s, o);
				int			oi = __shfl_xor_sync(FULL, i, o);

				s = fminf(fminf(s, os), fmaxf(b, ob));
				if (ob < b || (ob == b && oi < i))
				{
					b = ob;
					i = oi;
				}
			}
			if (t == 0)
			{
				int			row = m * 16 + g + 8 * h;

				sm.Rb[row] = b;
				sm.Rs[row] = s;
				sm.Ri[row] = i;
			}
		}
}

/*
 * Pass 4 of the candidate pass: the candidates measured exactly, least
 * distance (distances are >= 0: their bits order as they do), then lowest
 * index.  A lane takes its own; the second round measures again (cheaper
 * than keeping).
 */
template <int DMAX>
__device__ __forceinline__ void
tcs_measure(const tc_args &p, const xview X, const tcs_smem &sm, int ncand, int lane)
{
	const int	d = p.d;

	for (int round = 0; round < 2; round++)
	{
		__syncwarp();
		for (int e = 0; e < ncand; e++)
		{
			int			row = sm.CR[e * 32 + lane];
			int			c = sm.CI[e * 32 + lane];

			if (c < p.k)
			{
				const xview xp = tc_row(X, sm.RowG[row], d, p.log_b);
				const double *cp = p.C + (int64_t) c * d;
				double		xv[DMAX],
							cv[DMAX];
				double		acc = 0;

				/* every load in flight before the first use */
				load_row<DMAX>(xv, xp, d, p.log_b);
#pragma unroll
				for (int j = 0; j < DMAX; j++)
					cv[j] = j < d ? cp[j] : 0.0;
#pragma unroll
				for (int j = 0; j < DMAX; j++)
					if (j < d)
						acc = sq_term(acc, xv[j], cv[j]);

				unsigned long long key = (unsigned long long) __double_as_longlong(acc);

				if (round == 0)
					atomicMin(&sm.Min[row], key);
				else if (key == sm.Min[row])
					atomicMin(&sm.Idx[row], c);
			}
		}
	}
}

/*
 * Pass 5, a lane a row: main, a certain row's label (the nearer of its
 * pair, measured the reference's way; lower index on ties) and distance,
 * an uncertain one a sentinel and a place in the list; cand, a row whose
 * candidates were all measured gets the least.  Returns the rows of the
 * lane whose label changed.
 */
template <int MT, bool CAND, int DMAX>
__device__ __forceinline__ unsigned long long
tcs_settle(const tc_args &p, const xview X, const tcs_smem &sm, int64_t e0, int64_t nrows, bool pf,
		   const double *stg, bool all_exact, int lane)
{
	const int	d = p.d;
	const int	log_b = p.log_b;
	unsigned long long mine = 0;

#pragma unroll
	for (int rr = 0; rr < MT / 2; rr++)
	{
		int			lr = rr * 32 + lane;
		int64_t		r = e0 + lr;

		if (!CAND)
		{
			bool		valid = r < nrows;
			bool		cert = false;
			float		thr = NAN;

			if (valid)
			{
				int			old = pf ? ((const int32_t *) (stg + rr * stage_doubles(d) + d * 32))[lane]
					: p.labels[r];
				int			lab = 0;

				if (!all_exact)
				{
					float		b = sm.Rb[lr],
								s = sm.Rs[lr];

					/* the packing error of b and s: 2^-19 of their size each */
					float		e2 = 1.01f * (sm.E[lr] + 0x1.01p-19f * (fabsf(b) + fabsf(s)));

					cert = s - b > e2;
					lab = sm.Ri[lr];
					if (sm.E[lr] < INFINITY)
						thr = b + e2;
				}
				if (cert)
				{
					/* the pair lab, lab + 1: the nearer, lower index on ties */
					const xview xp = tc_row(X, r, d, log_b);
					const double *cp = p.C + (int64_t) lab * d;
					bool		two = lab + 1 < p.k;
					double		xv[DMAX];
					double		acc = 0,
								acc1 = 0;

					tcs_values<DMAX>(xv, pf, stg, rr, lane, xp, d, log_b);
#pragma unroll
					for (int j = 0; j < DMAX; j++)
						if (j < d)
						{
							acc = sq_term(acc, xv[j], cp[j]);
							if (two)
								acc1 = sq_term(acc1, xv[j], cp[d + j]);
						}
					if (two && acc1 < acc)
					{
						acc = acc1;
						lab++;
					}
					p.labels[r] = lab;
					p.dist2[r] = acc;
					mine += old != lab;
				}
				else
					p.labels[r] = INT_MIN + (old >= 0 && old < p.k ? old : p.k);
			}

			list_uncertain(p, lane, valid && !cert, r, thr);
		}
		else if (r < nrows && sm.E[lr] > -INFINITY && !sm.Over[lr] && sm.Idx[lr] != INT_MAX &&
				 !all_exact)
		{
			int64_t		row = p.list[r];
			int			lab = sm.Idx[lr];
			int			old = (int) ((int64_t) p.labels[row] - INT_MIN);

			p.labels[row] = lab;
			p.dist2[row] = __longlong_as_double((long long) sm.Min[lr]);
			mine += old != lab;
		}
	}
	return mine;
}

/*
 * XT: the rows' value type, 0 as p.X says (the main pass: one instance for
 * both), 1 doubles, 2 floats (the rescan of candidates, whose unrolled
 * loads need twice the registers when the type is decided as they run).
 * A CTA takes tiles of NW warps' rows in turn; each tile goes through the
 * passes above.
 */
template <int KS, int MT, int NW, bool CAND, bool F16, int XT = 0>
__global__ void __launch_bounds__(NW * 32, 1)
tc_kernel(const tc_args p)
{
	constexpr int ROWS_W = 16 * MT;
	constexpr int RT = ROWS_W * NW;
	constexpr int NTF = KS * 64 + 16;
	constexpr int QMAX = (F16 ? 16 : 8) * KS;	/* K of the mma, elements */
	constexpr int DMAX = QMAX / 3;
	extern __shared__ __align__(16) float smem[];
	const int	lane = threadIdx.x & 31;
	const int	warp = threadIdx.x >> 5;
	const int	g = lane >> 2;
	const int	t = lane & 3;
	const int	d = p.d;
	const int	log_b = p.log_b;
	const xview X = XT == 0 ? p.X : xview{p.X.p, XT == 2};
	const bool	f32 = X.f32;		/* rows held as floats: staged as floats (widen_staged) */
	const int	ntiles = p.ntiles;
	const int	chunk_nt = p.chunk_nt;
	const int	nch = (ntiles + chunk_nt - 1) / chunk_nt;
	const bool	resident = nch == 1;
	const int	stride = a_stride(KS);
	/* staging: nb buffers of MT/2 stages a warp */
	const int	nb = CAND || p.prefetch < 2 ? 1 : p.prefetch;	/* 1: none */
	const bool	pf = nb >= 2;
	const int	sbuf = (MT / 2) * stage_doubles(d);
	const tcs_smem sm = tcs_carve<ROWS_W, CAND>(smem, tcs_place(KS, chunk_nt, resident, d, NW,
																	warp_words(ROWS_W, stride, CAND)),
												 stride, warp, nb, sbuf);
	const bool	all_exact = p.hdr->flag != 0;
	const float maxcn = __uint_as_float(p.hdr->maxcn);
	const float sig = p.hdr->sigma;
	/* rows: main, all of them; cand, the list's first min(count, cap) */
	const int64_t nrows = CAND ? (int64_t) min(p.hdr->fallbacks, (unsigned long long) p.cap) : p.n;
	const int64_t nrt = (nrows + RT - 1) / RT;
	unsigned long long mine = 0;
	int			buf = 0;

	if ((CAND && all_exact) || blockIdx.x >= nrt)
		return;
	for (int j = threadIdx.x; j < d; j += blockDim.x)
		sm.S[j] = p.shift[j];
	if (!all_exact)
		load_chunk(sm.B0, p.tiles, min(chunk_nt, ntiles) * NTF);
	if (pf)
	{
		/* tiles 0 .. nb-2 of this CTA in flight (a group each, empty past the end) */
		for (int st = 0; st < nb - 1; st++)
			prefetch_rows<MT>(sm.Stg + st * sbuf, X, p.labels,
							  (blockIdx.x + (int64_t) st * gridDim.x) * RT + warp * ROWS_W,
							  p.n, d, log_b);
		cp_wait(nb - 1);		/* the centroids, the oldest group */
	}
	else if (resident)
		asm volatile("cp.async.wait_all;");
	__syncthreads();

	for (int64_t rt = blockIdx.x, it = 0; rt < nrt; rt += gridDim.x, it++)
	{
		const int64_t e0 = rt * RT + (int64_t) warp * ROWS_W;	/* row, or list entry */
		const double *stg = sm.Stg + (pf ? (int) (it % nb) : 0) * sbuf;

		if (pf)
		{
			/* tile it + nb - 1 into the buffer tile it - 1 used (this lane's own) */
			prefetch_rows<MT>(sm.Stg + (int) ((it + nb - 1) % nb) * sbuf, X, p.labels,
							  e0 + (int64_t) (nb - 1) * gridDim.x * RT, p.n, d, log_b);
			cp_wait(nb - 1);	/* this tile's rows */
			if (f32)
				widen_staged<MT>((double *) stg, d);
		}
		tcs_rows<MT, CAND, F16, DMAX, QMAX>(p, X, sm, stride, e0, nrows, pf, stg, all_exact, maxcn, sig, lane);
		__syncwarp();
		if (!all_exact)
		{
			uint32_t	a[MT][KS][4];
			float		bg[MT][2],
						sg[MT][2];	/* cand: the thresholds */
			int			ig[MT][2];
			int			ncand = 0;	/* cand: this lane's */

			tcs_fragments<MT, KS, CAND>(sm, stride, g, t, a, bg, sg, ig);
			tcs_scan<MT, KS, CAND, F16>(p, sm, a, bg, sg, ig, ncand, buf, nch, resident, lane);
			if (!CAND)
				tcs_merge<MT>(sm, bg, sg, ig, g, t);
			else
				tcs_measure<DMAX>(p, X, sm, ncand, lane);
			__syncwarp();
		}
		mine += tcs_settle<MT, CAND, DMAX>(p, X, sm, e0, nrows, pf, stg, all_exact, lane);
		__syncwarp();
	}
	if ((!resident && !all_exact) || pf)
		asm volatile("cp.async.wait_all;");

	for (int o = 16; o > 0; o >>= 1)
		mine += __shfl_xor_sync(FULL, mine, o);
	if (lane == 0 && mine)
		atomicAdd(p.changed, mine);
}

/* ---- the main pass with the centroids in registers (tc_resident) ------------------- */

/*
 * For small K and k <= 256 the main pass turns the product around: the
 * centroids are the mma's A operand (m-tiles of 16), held in registers by
 * every warp for the whole pass with their accumulator starts, and the rows
 * stream through shared memory as B fragments (n-tiles of 8 rows).  A
 * fragment then serves every row instead of 32, and a row's B fragment is
 * read once for all the centroids.  The arithmetic is the same as tc_kernel's
 * (the same products in the same k-steps, the same accumulator start), so is
 * the bound.
 *
 * Row g of m-tile j is centroid 16 j + 2 g, row g + 8 centroid 16 j + 2 g + 1:
 * a lane's accumulators c0, c2 are the pair (16 j + 2 g, + 1) against row 2t
 * of the n-tile, c1, c3 the same pair against row 2t + 1.  M-tiles 2G, 2G+1
 * make group G: a lane's 4 centroids 32 G + 2 g + {0, 1, 16, 17}; the
 * group's least value, G in its 4 low mantissa bits (<= 16 ulp, as
 * tc_kernel's n-tile index), goes into the row's best and second best (top2,
 * two chains, even and odd G, merged at the end).  The 8 lanes of a row
 * (g = 0..7) leave their (best, second) in shared memory; the row's own lane
 * merges them.  A group plays the part of tc_kernel's pair: the second best
 * is over the other groups, so a certain row's nearest centroid is in its
 * best group, and the 4 are measured in float64 (the nearest, lowest index
 * on ties, is the label).
 *
 * K layout in segments of DW (DMAX = QMAX / 3, or 8 for f16 at KS = 2 and
 * d <= 8), not d: rows [xb | xs | xb], centroids [cb | cb | cs], element j of
 * a segment at DW s + j, zeros beyond d: the positions are compile-time, so
 * a lane builds its row's words in registers.
 */

/*
 * The library's shapes: MT 2 m-tiles a warp, 16 warps a CTA for small K
 * (KS <= 4 tf32, <= 2 f16), else 8 (registers).  The lab build
 * (-DPGGPU_TC_LAB, tests/lab/tc_check) also has MT 4 x 8 and 2 x 8 warps
 * at small K, to compare them.
 */
template <int KS, int MT, int NW, bool F16>
static void
kernels(bool f32, tc_fn *main, tc_fn *cand)
{
	*main = tc_kernel<KS, MT, NW, false, F16>;
	*cand = f32 ? tc_kernel<KS, MT, NW, true, F16, 2> : tc_kernel<KS, MT, NW, true, F16, 1>;
}

template <int KS, bool F16>
static void
kernels_ks(int mt, int nw, bool f32, tc_fn *main, tc_fn *cand)
{
	*main = *cand = nullptr;
	if constexpr (KS <= (F16 ? 2 : 4))
	{
#ifdef PGGPU_TC_LAB
		if (mt == 4 && nw == 8)
			return kernels<KS, 4, 8, F16>(f32, main, cand);
		if (mt == 2 && nw == 8)
			return kernels<KS, 2, 8, F16>(f32, main, cand);
#endif
		if (mt == 2 && nw == 16)
			return kernels<KS, 2, 16, F16>(f32, main, cand);
	}
	else if (mt == 2 && nw == 8)
		return kernels<KS, 2, 8, F16>(f32, main, cand);
}

void
tc_scan_kernels(int ks, bool f16, int mt, int nw, bool f32, tc_fn *main, tc_fn *cand)
{
	*main = *cand = nullptr;
	if (f16)
		switch (ks)
		{
			case 1: return kernels_ks<1, true>(mt, nw, f32, main, cand);
			case 2: return kernels_ks<2, true>(mt, nw, f32, main, cand);
			case 3: return kernels_ks<3, true>(mt, nw, f32, main, cand);
			case 4: return kernels_ks<4, true>(mt, nw, f32, main, cand);
			case 5: return kernels_ks<5, true>(mt, nw, f32, main, cand);
			case 6: return kernels_ks<6, true>(mt, nw, f32, main, cand);
			default: return;
		}
	switch (ks)
	{
		case 1: return kernels_ks<1, false>(mt, nw, f32, main, cand);
		case 2: return kernels_ks<2, false>(mt, nw, f32, main, cand);
		case 3: return kernels_ks<3, false>(mt, nw, f32, main, cand);
		case 4: return kernels_ks<4, false>(mt, nw, f32, main, cand);
		case 5: return kernels_ks<5, false>(mt, nw, f32, main, cand);
		case 6: return kernels_ks<6, false>(mt, nw, f32, main, cand);
		case 7: return kernels_ks<7, false>(mt, nw, f32, main, cand);
		case 8: return kernels_ks<8, false>(mt, nw, f32, main, cand);
		case 9: return kernels_ks<9, false>(mt, nw, f32, main, cand);
		case 10: return kernels_ks<10, false>(mt, nw, f32, main, cand);
		case 11: return kernels_ks<11, false>(mt, nw, f32, main, cand);
		case 12: return kernels_ks<12, false>(mt, nw, f32, main, cand);
		default: return;
	}
}
