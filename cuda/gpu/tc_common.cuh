/*
 * tc_common.cuh - what the tensor-core assignment's files share (tc_scan.cu,
 * tc_resident.cu, tc_assign.cu; the interface and contract: tc.cuh): the
 * arguments of its kernels, the workspace header, and the device helpers
 * (shift and rounding, fragments, the list of uncertain rows, staging).
 *
 * Approximate, then verify, in four kernels on one stream:
 *
 *  1. tc_prep_mean, tc_prep_tiles (O(k d)): the shift s = mean of the
 *     centroids; each centroid shifted in float64 and rounded to float32
 *     (c~), split into tf32 big + small parts and laid out as mma B fragments,
 *     8 centroids ("n-tile") per block, with ||c~||^2 as accumulator start.
 *
 *  2. tcr_kernel (K <= 3 k-steps, k <= 256; below) or
 *     tc_kernel<.., CAND = false> (one pass over the rows): a warp owns 16 MT
 *     rows, shifts and rounds them the same way (x~, scaled by -2: exact),
 *     holds them as mma A fragments in registers and walks all centroids in
 *     shared memory with mma.m16n8k8.tf32.  3xTF32: the K dimension carries
 *     [xb xs xb] against [cb cb cs], 3d terms padded to a multiple of 8.  The
 *     accumulator starts at ||c~||^2, so it ends as approximately
 *     a = ||c~||^2 - 2 x~.c~ = ||x~ - c~||^2 - ||x~||^2.  Epilogue in
 *     registers, per row and pair of centroids a lane holds (columns 2t,
 *     2t+1 of an n-tile): the smaller of the two, its n-tile within a group
 *     of 16 in the 4 low mantissa bits (<= 16 ulp, in the bound), into the
 *     row's best and second-best packed values; groups merge into (best,
 *     pair, second); the 4 lanes of a quad merge by shuffles.  The second
 *     best is over the other pairs, so 2 logic ops and 1 float add a value.
 *     A row is certain when second - best > e2 (tc_coef: a rigorous bound on
 *     the approximation's error for every centroid).  Then every centroid
 *     outside the best pair is strictly farther in float64 than the pair's
 *     nearer one: the two are measured with the reference formula and the
 *     nearer (lower index on ties) is the label, its distance dist2.  Other rows
 *     get a sentinel label (INT32_MIN + old label) and go to a list with a
 *     threshold T = best + e2 (NaN where the data is out of the float32
 *     comfort zone: range, underflow, NaN).
 *
 *  3. tc_kernel<.., CAND = true> (listed rows only): the same tensor-core
 *     scan again; every centroid whose approximation is <= T is a candidate
 *     (the set contains every centroid at least as near as the approximate
 *     best, so the exact nearest with all its ties); a lane keeps its own in
 *     shared memory (no atomics in the scan), then measures them exactly in
 *     float64: the least distance, lowest index wins.  A lane with more than
 *     CSLOTS leaves its rows to step 4.
 *
 *  f16: d >= 3 uses mma.m16n8k16 with f16 halves of the scaled data (the
 *     same 22-bit split, half the k-steps); d <= 2, tf32 (see tc_coef).
 *
 *  4. tc_exact_kernel: what is still a sentinel (T = NaN, or too many
 *     candidates) gets the full float64 scan, a thread per row, centroids
 *     through shared memory.  When the list was full, it finds the sentinels
 *     by scanning the labels, so the workspace stays small.
 *
 * d > TC_MAX_D: tc_exact_kernel does every row (correct, not fast).
 *
 * pggpu_tc_assign_update: where tc_resident applies and each warp's float64
 * sums (k d, and k counts) fit in shared memory beside its stages,
 * tcr_kernel<FUSE> is the whole Lloyd pass: a row it cannot certify is
 * measured at once by the warp against every centroid (the reference
 * arithmetic, lowest index on ties; no list, steps 3 and 4 do not run),
 * and every row is added to its warp's sums in a fixed order; the CTA adds
 * its warps' sums in warp order into its row of the caller's partial
 * sums.  Its preparation is one launch (tcr_prep_all: the shift, then
 * the fragments; no tc_prep_tiles), and the pass is its programmatic
 * dependent: it stages its first rows and C while the preparation runs,
 * then waits for it (griddepcontrol.wait).
 */
#ifndef PG_GPU_TC_COMMON_CUH
#define PG_GPU_TC_COMMON_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>

#include "tc.cuh"
#include "tc_shapes.h"

/* device.cu (common.cuh): fn's dynamic shared memory allowed up to bytes, raised only */
cudaError_t gpu_smem_allow(const void *fn, size_t bytes);

#define FULL 0xffffffffu
#define PAD_NORM 0x1p100f		/* ||c~||^2 of padding centroids: never best */
#define RANGE 0x1p40			/* |x - s| beyond this: exact path */
#define TINY 0x1p-60f			/* tf32: ||x~||^2 + max ||c~||^2 under this: exact path */
#define TINY_F16 64.0f			/* f16: the same, in scaled units (subnormal halves) */
#define EXACT_BLOCK 256
#define EXACT_TK 4

struct tc_header
{
	unsigned long long fallbacks;	/* rows sent to the list */
	unsigned int flag;			/* 1: centroids out of range, every row exact */
	unsigned int maxcn;			/* bits of max ||c~||^2 (a float >= 0, scaled) */
	float		sigma;			/* f16: data scale 2^e, max |c~| sigma in [2^10, 2^11) */
};

struct tc_args
{
	xview		X;
	int64_t		n;
	int			d;
	int			log_b;
	const double *C;
	int			k;
	const double *shift;
	const float *tiles;
	const uint4 *frags;			/* main pass with centroids in registers: A fragments */
	int			ntiles;
	int			chunk_nt;
	tc_header  *hdr;
	long long  *list;			/* uncertain rows */
	float	   *list_t;			/* their thresholds, NaN: exact scan */
	long long	cap;
	float		coef;			/* e2 = coef * S + ... (tc_coef) */
	float		tiny;			/* S under this: exact path */
	int			prefetch;		/* main pass: stages of rows in flight by cp.async (0, 2..4) */
	int32_t    *labels;
	double	   *dist2;
	unsigned long long *changed;
	double	   *part;			/* tc_resident with the update: a row of k d sums and k counts a CTA */
	double	   *block_part;		/* and its inertia */
};

/* ---- shared helpers --------------------------------------------------------- */

/*
 * The warp's rows with flag join the list of uncertain rows, with their
 * thresholds (one atomic a warp); past the list's capacity they are only
 * counted (tc_exact_kernel then finds them by their sentinel labels).
 */
static __device__ __forceinline__ void
list_uncertain(const tc_args &p, int lane, bool flag, int64_t r, float thr)
{
	unsigned	um = __ballot_sync(FULL, flag);

	if (um)
	{
		int			leader = __ffs(um) - 1;
		unsigned long long pos = 0;

		if (lane == leader)
			pos = atomicAdd(&p.hdr->fallbacks, (unsigned long long) __popc(um));
		pos = __shfl_sync(FULL, pos, leader) + __popc(um & ((1u << lane) - 1));
		if (flag && pos < (unsigned long long) p.cap)
		{
			p.list[pos] = r;
			p.list_t[pos] = thr;
		}
	}
}

/* row i of the tiled layout: column j at [j << log_b] */
static __device__ __forceinline__ xview
tc_row(xview X, int64_t i, int d, int log_b)
{
	int64_t		b = (int64_t) 1 << log_b;

	return X + (i >> log_b) * b * d + (i & (b - 1));
}

static __device__ __forceinline__ double
sq_term(double acc, double x, double c)
{
	double		diff = __dsub_rn(x, c);

	return __dadd_rn(acc, __dmul_rn(diff, diff));
}

static __device__ __forceinline__ uint32_t
to_tf32(float v)
{
	uint32_t	r;

	asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
	return r;
}

static __device__ __forceinline__ uint32_t
tf32_small(float v)
{
	return to_tf32(v - __uint_as_float(to_tf32(v)));	/* v - big(v) is exact */
}

/* cvt.rna.tf32 for finite v (2 integer ops; cvt is emulated with 3 and a branch) */
static __device__ __forceinline__ uint32_t
tf32_rna(float v)
{
	return (__float_as_uint(v) + 0x1000u) & 0xffffe000u;
}

static __device__ __forceinline__ unsigned short
f16_rn(float v)
{
	return __half_as_ushort(__float2half_rn(v));
}

static __device__ __forceinline__ float
f16_val(unsigned short h)
{
	return __half2float(__ushort_as_half(h));
}

/* c = a b + c, m16n8k8, tf32 inputs, float32 accumulators */
static __device__ __forceinline__ void
mma_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
	asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
		"{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
		: "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		: "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* the same, m16n8k16 with f16 inputs */
static __device__ __forceinline__ void
mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
	asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
		"{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
		: "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		: "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* c = a b + c, m16n8k8 with f16 inputs: the first half of m16n8k16's fragments (a0, a1; b0) */
static __device__ __forceinline__ void
mma_f16_k8(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t b0)
{
	asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
		"{%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
		: "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		: "r"(a0), "r"(a1), "r"(b0));
}

static __device__ __forceinline__ void
mma_f16_init(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, float4 c0)
{
	asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
		"{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
		: "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
		: "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1),
		  "f"(c0.x), "f"(c0.y), "f"(c0.z), "f"(c0.w));
}

/* c = a b + c0: the first k-step reads the ||c~||^2 quad in place (no copies) */
static __device__ __forceinline__ void
mma_tf32_init(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, float4 c0)
{
	asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
		"{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
		: "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
		: "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1),
		  "f"(c0.x), "f"(c0.y), "f"(c0.z), "f"(c0.w));
}

/* the 4 low mantissa bits carry the value's n-tile within its group */
static __device__ __forceinline__ float
pack(float v, uint32_t j)
{
	return __uint_as_float((__float_as_uint(v) & ~15u) | j);
}

/* pack with compile-time j and the mask ~15 in a register: one lop3 (two with both immediate) */
template <uint32_t J>
static __device__ __forceinline__ float
pack_r(float v, uint32_t msk)
{
	uint32_t	r;

	asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(__float_as_uint(v)), "r"(msk), "n"(J));
	return __uint_as_float(r);
}

/*
 * Best (exact) and second best of a stream.  max(b, p) = b + p - min(b, p)
 * moves one of the min/max off the integer/logic pipe (the bottleneck) to
 * the float pipe, at the cost of 2 roundings: the second best is within
 * 12 eps S of the exact one (in the bound).  Infinity (start) stays infinity.
 */
static __device__ __forceinline__ void
top2(float &b, float &s, float p)
{
	float		nb = fminf(b, p);

	s = fminf(s, __fsub_rn(__fadd_rn(b, p), nb));
	b = nb;
}

/* ---- preparation: shift and centroid tiles ---------------------------------- */

#define PREP_BLOCK 512			/* tc_prep_mean's and tcr_prep_all's threads (tc_resident: a thread an m-tile lane) */

/*
 * tc_prep_mean's work, for its block (PREP_BLOCK threads; every thread
 * returns): the shift into shift and into sh (shared, TC_MAX_D)
 */
static __device__ __forceinline__ void
prep_mean(const double *__restrict__ C, int k, int d, double *shift, double *sh, tc_header *hdr,
		  int f16)
{
	__shared__ double part[PREP_BLOCK];

	if (threadIdx.x == 0)
	{
		hdr->fallbacks = 0;
		hdr->flag = 0;
		hdr->maxcn = 0;
		hdr->sigma = 1.0f;
	}
	/* a warp a column (the columns' loads all in flight at once), a fixed order */
	for (int j = threadIdx.x >> 5; j < d; j += blockDim.x >> 5)
	{
		double		s = 0;

		for (int c = threadIdx.x & 31; c < k; c += 32)
			s += C[(int64_t) c * d + j];
		for (int o = 16; o > 0; o >>= 1)
			s += __shfl_xor_sync(FULL, s, o);	/* the same sum in every lane */
		if ((threadIdx.x & 31) == 0)
		{
			shift[j] = s / k;
			if (j < TC_MAX_D)
				sh[j] = s / k;
		}
	}
	__syncthreads();
	if (!f16 || d > TC_MAX_D)
		return;

	/* f16: the scale 2^e that puts max |c - s| in [2^10, 2^11) */
	double		m = 0;

	/* (e's column by steps, not e % d: a 64-bit remainder an element is slow) */
	const int	step = (int) (blockDim.x % d);
	int			j = (int) (threadIdx.x % d);

	for (int64_t e = threadIdx.x; e < (int64_t) k * d; e += blockDim.x)
	{
		m = fmax(m, fabs((double) (float) (C[e] - sh[j])));
		j += step;
		if (j >= d)
			j -= d;
	}
	part[threadIdx.x] = m;
	__syncthreads();
	for (int h = blockDim.x / 2; h > 0; h >>= 1)
	{
		if ((int) threadIdx.x < h)
			part[threadIdx.x] = fmax(part[threadIdx.x], part[threadIdx.x + h]);
		__syncthreads();
	}
	if (threadIdx.x == 0 && part[0] > 0 && part[0] < INFINITY)
		hdr->sigma = ldexpf(1.0f, max(-100, min(100, 10 - ilogb(part[0]))));
}

static __device__ __forceinline__ float
centroid_norm(const double *__restrict__ C, int c, int d, const double *__restrict__ shift,
			  float sig, bool *ok)
{
	double		s2 = 0;
	bool		good = true;

	for (int j = 0; j < d; j++)
	{
		double		v = C[(int64_t) c * d + j] - shift[j];
		double		f = (double) ((float) v * sig);

		good = good && fabs(v) <= RANGE;	/* false for NaN */
		s2 += f * f;
	}
	*ok = good;
	return (float) s2;
}

/* a centroid into the header: out of range (every row exact), or max ||c~||^2 */
static __device__ __forceinline__ void
note_centroid(tc_header *hdr, bool ok, float cn)
{
	if (!ok)
		atomicOr(&hdr->flag, 1u);
	else
		atomicMax(&hdr->maxcn, __float_as_uint(cn));
}

static __device__ __forceinline__ int
a_pos(int w)
{
	return (w & ~7) + ((w & 3) << 1) + ((w >> 2) & 1);
}

template <bool F16>
static __device__ __forceinline__ void
a_put(uint32_t *arow, int q, uint32_t v)
{
	if (F16)
		((unsigned short *) arow)[a_pos(q >> 1) * 2 + (q & 1)] = (unsigned short) v;
	else
		arow[a_pos(q)] = v;
}

static __device__ __forceinline__ void
cp_async16(void *smem, const void *gmem)
{
	unsigned	s = (unsigned) __cvta_generic_to_shared(smem);

	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem));
}

static __device__ __forceinline__ void
cp_async4(void *smem, const void *gmem)
{
	unsigned	s = (unsigned) __cvta_generic_to_shared(smem);

	asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(s), "l"(gmem));
}

static __device__ __forceinline__ void
cp_async8(void *smem, const void *gmem)
{
	unsigned	s = (unsigned) __cvta_generic_to_shared(smem);

	asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(s), "l"(gmem));
}

/* wait until at most n (0..3) of this thread's cp.async groups are pending */
static __device__ __forceinline__ void
cp_wait(int n)
{
	if (n <= 0)
		asm volatile("cp.async.wait_group 0;");
	else if (n == 1)
		asm volatile("cp.async.wait_group 1;");
	else if (n == 2)
		asm volatile("cp.async.wait_group 2;");
	else
		asm volatile("cp.async.wait_group 3;");
}

static __device__ __forceinline__ void
load_chunk(float *dst, const float *src, int floats)
{
	for (int e = threadIdx.x * 4; e < floats; e += blockDim.x * 4)
		cp_async16(dst + e, src + e);
	asm volatile("cp.async.commit_group;");
}

/* sentinel of an uncertain row: INT32_MIN + previous label (k when it was not in [0, k)) */
static __device__ __forceinline__ bool
is_sentinel(int32_t v, int k)
{
	return (int64_t) v - INT_MIN <= k;
}

/*
 * xv[j] := column j of the row at xp (j < d; 0.0 past it), its loads all
 * in flight at once: the value type decided once, outside the unrolled
 * loop (a branch a load costs the rescan kernels half their occupancy)
 */
template <int DW>
static __device__ __forceinline__ void
load_row(double *xv, xview xp, int d, int log_b)
{
	if (xp.f32)
	{
		const float *x = (const float *) xp.p;

#pragma unroll
		for (int j = 0; j < DW; j++)
			xv[j] = j < d ? (double) x[(int64_t) j << log_b] : 0.0;
	}
	else
	{
		const double *x = (const double *) xp.p;

#pragma unroll
		for (int j = 0; j < DW; j++)
			xv[j] = j < d ? x[(int64_t) j << log_b] : 0.0;
	}
}

/*
 * Rows held as floats are staged by prefetch_rows as they are, a float in
 * the first 4 bytes of its double's place (half the bytes from memory);
 * once their copies are done (cp_wait), each lane widens its own rows' in
 * place, so that the passes read doubles either way (and no register more:
 * tc_resident's kernels have none to spare).  A lane's copies are its own
 * to read: no sync.
 */
template <int MT>
static __device__ __forceinline__ void
widen_staged(double *sb, int d)
{
	int			lane = threadIdx.x & 31;

#pragma unroll 1
	for (int rr = 0; rr < MT / 2; rr++)
	{
		double	   *b = sb + rr * stage_doubles(d) + lane;

#pragma unroll 1
		for (int j = 0; j < d; j++)
			b[j * 32] = (double) ((const float *) (b + j * 32))[0];
	}
}

template <int MT, int DW = 0>
static __device__ __forceinline__ void
prefetch_rows(double *sb, xview X, const int32_t *labels, int64_t row0, int64_t n,
			  int d, int log_b)
{
	int			lane = threadIdx.x & 31;
	const int64_t bs = (int64_t) 1 << log_b;	/* column stride of a tile */

#pragma unroll
	for (int rr = 0; rr < MT / 2; rr++)
	{
		int64_t		r = row0 + rr * 32 + lane;
		double	   *b = sb + rr * stage_doubles(d);

		if (r < n && X.f32)
		{
			const float *xp = (const float *) tc_row(X, r, d, log_b).p;
			double	   *bj = b + lane;

			/* (not unrolled: tc_resident's kernels have no registers to spare) */
#pragma unroll 1
			for (int j = 0; j < d; j++, xp += bs, bj += 32)
				cp_async4(bj, xp);
			cp_async4((int32_t *) (b + d * 32) + lane, labels + r);
		}
		else if (r < n)
		{
			const double *xp = (const double *) tc_row(X, r, d, log_b).p;
			double	   *bj = b + lane;

			if constexpr (DW > 0)	/* d <= DW: the columns unrolled (tc_resident) */
			{
#pragma unroll
				for (int j = 0; j < DW; j++)
					if (j < d)
						cp_async8(bj + j * 32, xp + j * bs);
			}
			else				/* pointers stepped: no 64-bit shift a column */
				for (int j = 0; j < d; j++, xp += bs, bj += 32)
					cp_async8(bj, xp);
			cp_async4((int32_t *) (b + d * 32) + lane, labels + r);
		}
	}
	asm volatile("cp.async.commit_group;");
}

/*
 * KS k-steps (d <= 8 KS / 3), MT m-tiles of 16 rows per warp, NW warps.
 * Shared memory: centroid chunk buffer(s) of chunk_nt n-tiles (one buffer when
 * all centroids fit: loaded once per CTA), the shift, then per warp its rows,
 * then (main pass with p.prefetch = nb) per warp nb staging buffers of float64
 * rows and labels: the next nb - 1 tiles' rows are in flight while this one
 * is computed (nb >= 3 keeps enough bytes in flight to approach the HBM rate).
 */

/* ---- between the files ----------------------------------------------------- */

typedef void (*tc_fn) (const tc_args);

/* tc_scan.cu: its preparation kernels, and its two passes for (ks, f16, mt, nw, rows as floats), or nulls */
__global__ void tc_prep_mean(const double *__restrict__ C, int k, int d, double *shift, tc_header *hdr, int f16);
__global__ void tc_prep_tiles(const double *__restrict__ C, int k, int d, int ks_n, int ntiles,
							  const double *__restrict__ shift, float *tiles, tc_header *hdr, int f16);
void		tc_scan_kernels(int ks, bool f16, int mt, int nw, bool f32, tc_fn *main, tc_fn *cand);

/* tc_resident.cu: its preparation kernels, and its kernel of TC_RESIDENT_TABLE's row (fused: the sums too), or null */
__global__ void tcr_prep_frags(const double *__restrict__ C, int k, int d, int ks_n, int nm, int dmax,
							   const double *__restrict__ shift, uint4 *frags, tc_header *hdr, int f16);
__global__ void tcr_prep_all(const double *__restrict__ C, int k, int d, int ks_n, int nm, int dmax,
							 double *shift, uint4 *frags, tc_header *hdr, int f16, unsigned *zero,
							 int zero_words);
size_t		tcr_prep_smem(int k, int d);
tc_fn		tc_resident_kernel(int ks, bool f16, int nm, int dw, bool fused);

#endif							/* PG_GPU_TC_COMMON_CUH */
