/*
 * tc_assign.cu - the tensor-core assignment's host side: the workspace's
 * layout, the bound that certifies a row (tc_coef), the exact rescan of the
 * rows it cannot certify (tc_exact_kernel, step 4), and the launches of the
 * route that route.c planned (tc_scan, tc_resident, or tc_resident fused
 * with the update).
 */
#include "tc_common.cuh"

/*
 * A thread per row, every centroid in order through shared memory, the
 * reference arithmetic with strict <: the reference's first minimum (label 0
 * and infinity when nothing is below infinity, as the reference).
 * mode 0: the rows still marked (the list's, or every row when the list
 * overflowed); mode 1: every row (d > TC_MAX_D).
 */
__global__ void __launch_bounds__(EXACT_BLOCK)
tc_exact_kernel(const tc_args p, int mode)
{
	extern __shared__ double sC[];
	const int	d = p.d;
	const int	k = p.k;
	const int	cc = max(EXACT_TK, (int) (6144 / d) / EXACT_TK * EXACT_TK);
	unsigned long long cnt = mode == 0 ? p.hdr->fallbacks : 0;
	bool		use_list = mode == 0 && cnt <= (unsigned long long) p.cap;
	int64_t		items = use_list ? (int64_t) cnt : p.n;
	unsigned long long mine = 0;

	if (mode == 0 && cnt == 0)
		return;
	for (int64_t base = (int64_t) blockIdx.x * EXACT_BLOCK; base < items;
		 base += (int64_t) gridDim.x * EXACT_BLOCK)
	{
		int64_t		item = base + threadIdx.x;
		int64_t		r = -1;
		int			old = 0;
		bool		active = false;

		if (item < items)
		{
			int32_t		v;

			r = use_list ? p.list[item] : item;
			v = p.labels[r];
			active = mode == 1 || is_sentinel(v, k);
			old = mode == 1 ? v : (int) ((int64_t) v - INT_MIN);
		}
		if (!__syncthreads_or(active))
			continue;

		const xview xp = tc_row(p.X, active ? r : 0, d, p.log_b);
		double		best = INFINITY;
		int			bc = 0;

		for (int c0 = 0; c0 < k; c0 += cc)
		{
			int			nc = min(cc, k - c0);

			__syncthreads();
			for (int e = threadIdx.x; e < cc * d; e += EXACT_BLOCK)
				sC[e] = e < nc * d ? p.C[(int64_t) c0 * d + e] : 0.0;
			__syncthreads();
			if (!active)
				continue;
			for (int t0 = 0; t0 < nc; t0 += EXACT_TK)
			{
				double		acc[EXACT_TK];

#pragma unroll
				for (int u = 0; u < EXACT_TK; u++)
					acc[u] = 0;
				for (int j = 0; j < d; j++)
				{
					double		xv = xp[(int64_t) j << p.log_b];

#pragma unroll
					for (int u = 0; u < EXACT_TK; u++)
						acc[u] = sq_term(acc[u], xv, sC[(t0 + u) * d + j]);
				}
#pragma unroll
				for (int u = 0; u < EXACT_TK; u++)
					if (t0 + u < nc && acc[u] < best)
					{
						best = acc[u];
						bc = c0 + t0 + u;
					}
			}
		}
		if (active)
		{
			p.labels[r] = bc;
			p.dist2[r] = best;
			mine += old != bc;
		}
	}
	for (int o = 16; o > 0; o >>= 1)
		mine += __shfl_xor_sync(FULL, mine, o);
	if ((threadIdx.x & 31) == 0 && mine)
		atomicAdd(p.changed, mine);
}


namespace
{

struct tc_layout
{
	size_t		shift;
	size_t		tiles;
	size_t		frags;			/* tc_resident's A fragments (0: none) */
	size_t		list;
	size_t		list_t;
	size_t		total;
	long long	cap;
};

size_t
align256(size_t v)
{
	return (v + 255) / 256 * 256;
}


/* the most uncertain rows listed (12 bytes each); more are found by a scan */
#define TC_LIST_MAX (1 << 20)

tc_layout
layout_for(int64_t n, int k, int d)
{
	tc_layout	L;
	size_t		off = 256;		/* header */
	int			ntiles = (k + 7) / 8;

	L.shift = off;
	off += align256(sizeof(double) * (d > 0 ? d : 1));
	L.tiles = off;
	if (d <= TC_MAX_D)
		off += align256(sizeof(float) * (size_t) ntiles * ((3 * d + 7) / 8 * 64 + 16));	/* tf32's, the larger */
	L.frags = 0;
	if (d <= TC_RESIDENT_MAX_D && k <= 16 * TC_RESIDENT_MAX_NM)
	{
		L.frags = off;
		off += align256(sizeof(uint4) * 32 * TC_RESIDENT_MAX_NM * 4);	/* KS + 1 <= 4 uint4 a lane and m-tile */
	}
	/* uncertain rows beyond the list are found by scanning the labels */
	L.cap = n <= 0 ? 1 : (long long) (n < 4096 + n / 8 ? n : 4096 + n / 8);
	if (L.cap > TC_LIST_MAX)
		L.cap = TC_LIST_MAX;	/* working space independent of n */
	L.list = off;
	off += align256(sizeof(long long) * (size_t) L.cap);
	L.list_t = off;
	off += align256(sizeof(float) * (size_t) L.cap);
	L.total = off;
	return L;
}

/*
 * The bound.  Notation: u = x - s, v = c - s (exact reals), x~ = fl32(fl64(u)),
 * c~ likewise, X = ||x~||^2, S = X + max_c ||c~||^2, eps = 2^-24, D_c the
 * float64 distance (the reference's), v_c the tensor cores' result for c.
 * |v_c + X - D_c| <= E_raw with, per source:
 *  - rounding the shift: |x~_j - u_j| <= (eps + 2^-53)|u_j|, so
 *    | ||x~ - c~||^2 - ||u - v||^2 | <= 2 ||u-v|| ||dx - dc|| + ||dx - dc||^2
 *    <= 4 eps (1+) (||u||^2 + ||v||^2): 4 eps S;
 *  - ||c~||^2 rounded to float32: eps S;
 *  - 3xTF32: x~ = xb + xs + rx with |xs| <= 2^-11 |x~|, |rx| <= 2^-22 |x~| (same
 *    for c~): the dropped xs cs, rx c, x rc are <= 3.01 2^-22 |x~_j||c~_j|
 *    each product; with the factor 2 and sum 2|x~.c~| <= S: 12.04 eps S;
 *  - the tensor cores' sums.  Bit-accurate models of mma.m16n8k8.tf32
 *    (Khattak & Mikaitis, "Accurate models of NVIDIA tensor cores", 2025;
 *    microsoft/MMA-Sim): products exact; the 8 products and C aligned to the
 *    largest exponent and truncated to 25 (Hopper) or 24 (Ampere, in two
 *    halves of 4) fractional bits, then the sum truncated to float32.  Every
 *    term and partial sum is <= 2S, so one k-step errs by < 9 2^-25 2S +
 *    2^-23 2S = 13 eps S (Hopper; Ampere 28 eps S): taken as 32 eps S;
 *  - the float64 distance itself: (d+1) 2^-53 D_c, D_c <= 2S: negligible;
 *    E's own float arithmetic and float32 underflow (S >= 2^-60): 3 eps S.
 * E_raw = (20 + 32 KS) eps S.
 * f16 (m16n8k16, d >= 3): the data are scaled by sigma = 2^e (exact) so that
 * max |c~| sigma is in [2^10, 2^11); rows with |x~_j| sigma > 2^14 go to the
 * exact scan (halves stop at 65504).  hi = rn16(v), lo = rn16(v - hi) is the
 * same 22-bit split (12 eps S); subnormal halves are products like any other
 * in the models above (exact), and cost at most 2^-25 absolute each, under
 * 2 eps S once S >= 64 (scaled units; smaller S: exact scan); one k-step of
 * 16 errs by < 17 2^-25 2S + 2^-23 2S = 21 eps S (Hopper; Ampere, two halves
 * of 8: 44): taken as 48; tc_resident's last k-step of 8 (m16n8k8, HALF: the same
 * products, 8 and C aligned and truncated) errs by less, 13 eps S (Ampere
 * 28), so the same 48 covers it.  E_raw = (22 + 48 KS) eps S.  The kernel keeps, per pair P of centroids
 * (2t, 2t+1 of an n-tile), p_P = min over P of v_c with the n-tile in the
 * low 4 bits (|p_P - min v| < 2^-19 |p_P|), b = min p_P (pair B, nearer
 * centroid c_B) and s within 12 eps S of the second least p_P (top2).  For
 * c outside B: D_c - D_cB >= (s - b) - 2 E_raw - 12 eps S - 2^-19 (1+)
 * (|s| + |b|), so a row is certain when s - b > e2 = 1.01 ((2 E_raw + 12)
 * + 2^-90 + 2^-19 (1+) (|s| + |b|)) (the 1.01: roundings of e2 and of
 * s - b), and its answer is the exact nearer of B's two.  Every centroid with
 * D_c <= D_cB has v_c <= b + e2: the candidates of step 3.
 * Rows with S < 2^-60 (float32 underflow) or |u_j| > 2^40 (range) go to the
 * exact scan; centroids with |v_j| > 2^40 send every row there.
 */
float
tc_coef(int ks, bool f16)
{
	return (float) ((f16 ? 56.0 + 96.0 * ks : 52.0 + 64.0 * ks) * 0x1p-24);
}

}								/* namespace */

#ifdef PGGPU_TC_LAB
/*
 * The lab's hooks (tests/lab/tc_check.cu builds these files with
 * -DPGGPU_TC_LAB): not in the library.
 */
static int	lab_stages = 7;		/* passes that run: 1 main, 2 candidates, 4 exact (timing only) */

unsigned long long
pggpu_tc_lab_fallbacks(const void *workspace)
{
	tc_header	h;

	if (cudaMemcpy(&h, workspace, sizeof(h), cudaMemcpyDeviceToHost) != cudaSuccess)
		return ~0ULL;
	return h.fallbacks;
}

void
pggpu_tc_lab_stages(int mask)
{
	lab_stages = mask & 7;
}
#define STAGE(bit) ((lab_stages & (bit)) != 0)
#else
#define STAGE(bit) true
#endif							/* PGGPU_TC_LAB */

size_t
pggpu_tc_workspace_bytes(int64_t n, int k, int d)
{
	return layout_for(n, k, d).total;
}

static cudaError_t
launch_pass(tc_fn fn, const pggpu_route *r, int nw, size_t smem, int64_t rows_per_cta,
			int64_t rows, const tc_args &a, cudaStream_t stream, int max_ctas = INT_MAX,
			int *ctas = nullptr, bool dependent = false)
{
	int			per_sm = 0;
	cudaError_t e;

	if (fn == nullptr)
		return cudaErrorInvalidDeviceFunction;	/* (a plan without its kernel: not in the table) */
	if ((e = gpu_smem_allow((const void *) fn, smem)) != cudaSuccess)
		return e;
	if ((e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, (const void *) fn, nw * 32,
														   smem)) != cudaSuccess)
		return e;
	if (per_sm < 1)
		return cudaErrorInvalidConfiguration;

	int64_t		grid = (int64_t) per_sm * r->dev.sm_count;
	int64_t		need = (rows + rows_per_cta - 1) / rows_per_cta;

	if (grid > need)
		grid = need;
	if (grid > max_ctas)
		grid = max_ctas;
	if (grid < 1)
		grid = 1;
	if (ctas)
		*ctas = (int) grid;
	cudaLaunchAttribute at;
	cudaLaunchConfig_t cfg = pggpu_launch_config(&at, (unsigned) grid, (unsigned) (nw * 32), smem,
												 stream, dependent);

	return cudaLaunchKernelEx(&cfg, fn, a);
}

cudaError_t
pggpu_tc_assign(const pggpu_route *r, xview X, int64_t n, int d, int log_b, const double *C,
				int k, void *workspace, int32_t *labels, double *dist2,
				unsigned long long *changed, cudaStream_t stream)
{
	return pggpu_tc_assign_update(r, X, n, d, log_b, C, k, workspace, labels, dist2, changed,
								  nullptr, nullptr, 0, nullptr, nullptr, 0, stream);
}

cudaError_t
pggpu_tc_assign_update(const pggpu_route *r, xview X, int64_t n, int d, int log_b,
					   const double *C, int k, void *workspace, int32_t *labels, double *dist2,
					   unsigned long long *changed, double *part, double *block_part,
					   int max_parts, int *parts, void *zero, size_t zero_bytes, cudaStream_t stream)
{
	tc_layout	L = layout_for(n, k, d);
	char	   *ws = (char *) workspace;
	tc_args		a;
	cudaError_t e;
	const int	smem_optin = r->dev.smem_optin;
	/* the caller's zero bytes, first: by the preparation where it is one launch, else here */
	auto		zero_first = [&]() -> cudaError_t
	{
		return zero && zero_bytes ? cudaMemsetAsync(zero, 0, zero_bytes, stream) : cudaSuccess;
	};

	if (parts)
		*parts = 0;
	if (n <= 0)
		return zero_first();
	if (d < 1 || k < 1 || log_b < 0 || log_b > 40)
		return cudaErrorInvalidValue;
	a.X = X;
	a.n = n;
	a.d = d;
	a.log_b = log_b;
	a.C = C;
	a.k = k;
	a.shift = (const double *) (ws + L.shift);
	a.tiles = (const float *) (ws + L.tiles);
	a.frags = L.frags ? (const uint4 *) (ws + L.frags) : nullptr;
	a.ntiles = (k + 7) / 8;
	a.chunk_nt = 0;
	a.hdr = (tc_header *) ws;
	a.list = (long long *) (ws + L.list);
	a.list_t = (float *) (ws + L.list_t);
	a.cap = L.cap;
	a.prefetch = 0;
	a.labels = labels;
	a.dist2 = dist2;
	a.changed = changed;
	a.part = part;
	a.block_part = block_part;

	size_t		exact_smem = sizeof(double) *
		(size_t) (d <= 6144 / EXACT_TK ? (6144 / d) / EXACT_TK * EXACT_TK : EXACT_TK) * d;

	if (exact_smem > 48 * 1024 &&
		(e = gpu_smem_allow((const void *) tc_exact_kernel, exact_smem)) != cudaSuccess)
		return e;
	if (d > TC_MAX_D)
	{
		if ((e = zero_first()) != cudaSuccess)
			return e;
		tc_exact_kernel<<<r->dev.sm_count * 8, EXACT_BLOCK, exact_smem, stream>>>(a, 1);
		return cudaPeekAtLastError();
	}

	const bool	f16 = r->f16;
	const int	ks = r->ks;
	const bool	resident = r->label == PGGPU_LABEL_TC_RESIDENT && L.frags;
	const bool	fuse = resident && r->sum == PGGPU_SUM_IN_PASS && part && block_part && parts &&
		max_parts > 0;

	a.coef = tc_coef(ks, f16);
	a.tiny = f16 ? TINY_F16 : TINY;
	if (fuse)
	{
		/* one pass labels and sums; its preparation one launch, the pass its dependent */
		size_t		sm_fuse;
		int			pf_fuse;
		int			zw = zero_bytes % 4 == 0 && zero_bytes / 4 <= PREP_BLOCK ? (int) (zero_bytes / 4) : 0;

		if (!tc_resident_smem(smem_optin, ks, k, d, r->nw_fused, true, &sm_fuse, &pf_fuse))
			return cudaErrorInvalidConfiguration;	/* (the plan checked it) */
		if (!zw && (e = zero_first()) != cudaSuccess)
			return e;
		tcr_prep_all<<<1, PREP_BLOCK, tcr_prep_smem(k, d), stream>>>(
			C, k, d, ks, r->nm, r->dw, (double *) a.shift, (uint4 *) a.frags, a.hdr, f16,
			zw ? (unsigned *) zero : nullptr, zw);
		if ((e = cudaPeekAtLastError()) != cudaSuccess)
			return e;
		a.prefetch = pf_fuse;
		return launch_pass(tc_resident_kernel(ks, f16, r->nm, r->dw, true), r, r->nw_fused, sm_fuse,
						   32 * r->nw_fused, n, a, stream, max_parts, parts, true);
	}

	/* tc_scan's candidate pass (and its main pass, unless tc_resident labels) */
	tc_fn		scan_main,
				scan_cand;
	int			ch_main,
				ch_cand,
				pf_main,
				pf_cand;
	size_t		sm_main,
				sm_cand;
	const int	rows_cta = 16 * r->mt * r->nw;

	tc_scan_kernels(ks, f16, r->mt, r->nw, X.f32, &scan_main, &scan_cand);
	if (!tc_scan_smem(smem_optin, ks, a.ntiles, d, r->mt, r->nw, false, &ch_main, &sm_main, &pf_main) ||
		!tc_scan_smem(smem_optin, ks, a.ntiles, d, r->mt, r->nw, true, &ch_cand, &sm_cand, &pf_cand))
		return cudaErrorInvalidConfiguration;	/* (the plan checked it) */
	if ((e = zero_first()) != cudaSuccess)
		return e;
	tc_prep_mean<<<1, PREP_BLOCK, 0, stream>>>(C, k, d, (double *) a.shift, a.hdr, f16);
	if ((e = cudaPeekAtLastError()) != cudaSuccess)
		return e;
	/* the candidate pass's tiles */
	tc_prep_tiles<<<(unsigned) ((a.ntiles * 32 + 255) / 256), 256, 0, stream>>>(
		C, k, d, ks, a.ntiles, a.shift, (float *) a.tiles, a.hdr, f16);
	if ((e = cudaPeekAtLastError()) != cudaSuccess)
		return e;
	if (resident)
	{
		size_t		sm_res;
		int			pf_res;

		if (!tc_resident_smem(smem_optin, ks, k, d, r->nw_res, false, &sm_res, &pf_res))
			return cudaErrorInvalidConfiguration;
		tcr_prep_frags<<<(unsigned) ((r->nm * 32 + 127) / 128), 128, 0, stream>>>(
			C, k, d, ks, r->nm, r->dw, a.shift, (uint4 *) a.frags, a.hdr, f16);
		if ((e = cudaPeekAtLastError()) != cudaSuccess)
			return e;
		a.prefetch = pf_res;
		if (STAGE(1) &&
			(e = launch_pass(tc_resident_kernel(ks, f16, r->nm, r->dw, false), r, r->nw_res, sm_res,
							 32 * r->nw_res, n, a, stream)) != cudaSuccess)
			return e;
	}
	else if (STAGE(1))
	{
		a.chunk_nt = ch_main;
		a.prefetch = pf_main;
		if ((e = launch_pass(scan_main, r, r->nw, sm_main, rows_cta, n, a, stream)) != cudaSuccess)
			return e;
	}
	if (STAGE(2))
	{
		/* the list's length is on the device: enough CTAs for a full list */
		a.chunk_nt = ch_cand;
		a.prefetch = 0;
		if ((e = launch_pass(scan_cand, r, r->nw, sm_cand, rows_cta, L.cap, a, stream)) != cudaSuccess)
			return e;
	}
	if (STAGE(4))
	{
		tc_exact_kernel<<<r->dev.sm_count * 4, EXACT_BLOCK, exact_smem, stream>>>(a, 0);
		if ((e = cudaPeekAtLastError()) != cudaSuccess)
			return e;
	}
	return cudaSuccess;
}
