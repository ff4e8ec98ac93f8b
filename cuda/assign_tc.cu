/*
 * assign_tc.cu - nearest-centroid assignment on tensor cores, exact
 * (interface and contract: assign_tc.cuh).
 *
 * Approximate, then verify, in four kernels on one stream:
 *
 *  1. tc_prep_mean, tc_prep_tiles (O(k d)): the shift s = mean of the
 *     centroids; each centroid shifted in float64 and rounded to float32
 *     (c~), split into tf32 big + small parts and laid out as mma B fragments,
 *     8 centroids ("n-tile") per block, with ||c~||^2 as accumulator start.
 *
 *  2. tc2_kernel (K <= 3 k-steps, k <= 256; below) or
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
 * pggpu_tc_assign_update: where tc2 applies and each warp's float64 sums
 * (k d, and k counts) fit in shared memory beside its stages, tc2<FUSE>
 * is the whole Lloyd pass: a row it cannot certify is measured at once by
 * the warp against every centroid (the reference arithmetic, lowest index
 * on ties; no list, steps 3 and 4 do not run), and every row is added to
 * its warp's sums in a fixed order; the CTA adds its warps' sums in warp
 * order into its row of the caller's partial sums.  Its preparation is one
 * launch (tc2_prep_all: the shift, then the fragments; no tc_prep_tiles),
 * and the pass is its programmatic dependent: it stages its first rows and
 * C while the preparation runs, then waits for it (griddepcontrol.wait).
 */
#include "assign_tc.cuh"

#include <cuda_fp16.h>

#include <atomic>
#include <climits>
#include <cmath>
#include <mutex>

#define TC_MAX_D 32				/* rows kept as A fragments in registers */
#define GROUP_NT 16				/* n-tiles per packing group: index in 4 bits */
#define FULL 0xffffffffu
#define PAD_NORM 0x1p100f		/* ||c~||^2 of padding centroids: never best */
#define RANGE 0x1p40			/* |x - s| beyond this: exact path */
#define TINY 0x1p-60f			/* tf32: ||x~||^2 + max ||c~||^2 under this: exact path */
#define TINY_F16 64.0f			/* f16: the same, in scaled units (subnormal halves) */
#define CSLOTS 16				/* candidate slots of a lane (its 2 MT row halves) */
#define EXACT_BLOCK 256
#define EXACT_TK 4
#define TC2_MAX_D 16			/* tc2: f16 KS <= 3 */
#define TC2_MAX_NM 16			/* tc2: m-tiles, 4-bit index */

struct tc_header
{
	unsigned long long fallbacks;	/* rows sent to the list */
	unsigned int flag;			/* 1: centroids out of range, every row exact */
	unsigned int maxcn;			/* bits of max ||c~||^2 (a float >= 0, scaled) */
	float		sigma;			/* f16: data scale 2^e, max |c~| sigma in [2^10, 2^11) */
};

struct tc_args
{
	const double *X;
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
	double	   *part;			/* tc2 with the update: a row of k d sums and k counts a CTA */
	double	   *block_part;		/* and its inertia */
	const unsigned *skip;		/* tc2<FUSE> (or NULL): the gate's word, set: the pass does nothing */
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
static __device__ __forceinline__ const double *
tc_row(const double *X, int64_t i, int d, int log_b)
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

#define PREP_BLOCK 512			/* tc_prep_mean's and tc2_prep_all's threads (tc2: a thread an m-tile lane) */

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

__global__ void __launch_bounds__(PREP_BLOCK)
tc_prep_mean(const double *__restrict__ C, int k, int d, double *shift, tc_header *hdr, int f16)
{
	__shared__ double sh[TC_MAX_D];

	prep_mean(C, k, d, shift, sh, hdr, f16);
}

/* ||c~||^2 in scaled units, rounded to float32; *ok: every |c_j - s_j| <= RANGE */
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
 * A rows in shared memory, one row per lane of phase 1, words permuted within
 * each k-step (w = 8 ks + r at 8 ks + 2 (r % 4) + r / 4) so that a lane of
 * phase 2 reads its (t, t + 4) pair with one 8-byte load; the row stride is
 * 8 (mod 16) words: conflict-free.  Elements q: [0, d) big, [d, 2d) small,
 * [2d, 3d) big, then zeros (tf32: a word each; f16: a half each).
 */
static __host__ __device__ __forceinline__ int
a_stride(int ks)
{
	return 8 * ks + (ks & 1 ? 0 : 8);
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

/* per-warp shared memory, in 4-byte words (host and device agree) */
static __host__ __device__ __forceinline__ int
warp_words(int rows_w, int stride, bool cand)
{
	/* main: A rows, e2, best, second, index; cand: A rows, T, row min (u64),
	 * row index, overflow flag, counter, candidates (index, row, distance) */
	return cand ? rows_w * (stride + 7) + 32 + CSLOTS * 40 : rows_w * (stride + 4);
}

/*
 * The rows of a warp's tile and their labels into staging buffer sb, each
 * lane its own rows: per rr, d x 32 doubles ([j][lane]) then 32 labels.
 */
static __host__ __device__ __forceinline__ int
stage_doubles(int d)
{
	return d * 32 + 16;
}

template <int MT, int DW = 0>
static __device__ __forceinline__ void
prefetch_rows(double *sb, const double *X, const int32_t *labels, int64_t row0, int64_t n,
			  int d, int log_b)
{
	int			lane = threadIdx.x & 31;
	const int64_t bs = (int64_t) 1 << log_b;	/* column stride of a tile */

#pragma unroll
	for (int rr = 0; rr < MT / 2; rr++)
	{
		int64_t		r = row0 + rr * 32 + lane;
		double	   *b = sb + rr * stage_doubles(d);

		if (r < n)
		{
			const double *xp = tc_row(X, r, d, log_b);
			double	   *bj = b + lane;

			if constexpr (DW > 0)	/* d <= DW: the columns unrolled (tc2) */
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
template <int KS, int MT, int NW, bool CAND, bool F16>
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
	const int	ntiles = p.ntiles;
	const int	chunk_nt = p.chunk_nt;
	const int	nch = (ntiles + chunk_nt - 1) / chunk_nt;
	const bool	resident = nch == 1;
	float	   *sB0 = smem;
	float	   *sB1 = smem + chunk_nt * NTF;
	double	   *sS = (double *) (smem + (resident ? 1 : 2) * chunk_nt * NTF);
	const int	stride = a_stride(KS);
	uint32_t   *sA = (uint32_t *) (sS + (d + 1) / 2 * 2) + warp * warp_words(ROWS_W, stride, CAND);
	float	   *sE = (float *) sA + ROWS_W * stride;	/* main: e2; cand: T */
	/* main */
	float	   *sRb = sE + ROWS_W;
	float	   *sRs = sRb + ROWS_W;
	int		   *sRi = (int *) (sRs + ROWS_W);
	/* cand: sE + ROWS_W is 8-byte aligned (stride, ROWS_W even; sS rounded) */
	unsigned long long *sMin = (unsigned long long *) (sE + ROWS_W);
	long long  *sRowG = (long long *) (sMin + ROWS_W);	/* cand: the row's index in X */
	int		   *sIdx = (int *) (sRowG + ROWS_W);
	int		   *sOver = sIdx + ROWS_W;
	int		   *sCI = sOver + ROWS_W + 32;	/* [slot][lane]: a lane's own candidates */
	unsigned char *sCR = (unsigned char *) (sCI + CSLOTS * 32);
	/* staging: after every warp's area; nb buffers of MT/2 stages a warp */
	const int	nb = CAND || p.prefetch < 2 ? 1 : p.prefetch;	/* 1: none */
	const bool	pf = nb >= 2;
	const int	sbuf = (MT / 2) * stage_doubles(d);
	double	   *sStg = (double *) ((float *) (sS + (d + 1) / 2 * 2) +
								   NW * warp_words(ROWS_W, stride, CAND)) + warp * nb * sbuf;
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
		sS[j] = p.shift[j];
	if (!all_exact)
		load_chunk(sB0, p.tiles, min(chunk_nt, ntiles) * NTF);
	if (pf)
	{
		/* tiles 0 .. nb-2 of this CTA in flight (a group each, empty past the end) */
		for (int st = 0; st < nb - 1; st++)
			prefetch_rows<MT>(sStg + st * sbuf, p.X, p.labels,
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
		const double *stg = sStg + (pf ? (int) (it % nb) : 0) * sbuf;

		if (pf)
		{
			/* tile it + nb - 1 into the buffer tile it - 1 used (this lane's own) */
			prefetch_rows<MT>(sStg + (int) ((it + nb - 1) % nb) * sbuf, p.X, p.labels,
							  e0 + (int64_t) (nb - 1) * gridDim.x * RT, p.n, d, log_b);
			cp_wait(nb - 1);	/* this tile's rows */
		}

		/* 1. a lane per row: shift, round; main: the bound; cand: the threshold */
#pragma unroll
		for (int rr = 0; rr < MT / 2; rr++)
		{
			int			lr = rr * 32 + lane;
			int64_t		r = e0 + lr;
			uint32_t   *arow = sA + lr * stride;
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
				const double *xp = tc_row(p.X, r, d, log_b);
				double		xv[DMAX];
				float		xn = 0;
				bool		ok = !all_exact;

				if (pf)
#pragma unroll
					for (int j = 0; j < DMAX; j++)
						xv[j] = j < d ? stg[rr * stage_doubles(d) + j * 32 + lane] : 0.0;
				else
#pragma unroll
					for (int j = 0; j < DMAX; j++)
						xv[j] = j < d ? xp[(int64_t) j << log_b] : 0.0;
#pragma unroll
				for (int j = 0; j < DMAX; j++)
					if (j < d)
					{
						float		f = (float) (xv[j] - sS[j]) * sig;
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
			sE[lr] = e2;
			if (CAND)
			{
				sMin[lr] = ~0ULL;
				sRowG[lr] = live ? r : 0;
				sIdx[lr] = INT_MAX;
				sOver[lr] = 0;
			}
		}
		__syncwarp();

		if (!all_exact)
		{
			/* 2. the rows as A fragments: a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4) */
			uint32_t	a[MT][KS][4];
			float		bg[MT][2],
						sg[MT][2];	/* cand: the thresholds */
			int			ig[MT][2];
			int			ncand = 0;	/* cand: this lane's */

#pragma unroll
			for (int m = 0; m < MT; m++)
			{
#pragma unroll
				for (int ks = 0; ks < KS; ks++)
#pragma unroll
					for (int h = 0; h < 2; h++)
					{
						uint2		w = *(const uint2 *) (sA + (m * 16 + g + 8 * h) * stride +
														  ks * 8 + 2 * t);

						a[m][ks][h] = w.x;
						a[m][ks][2 + h] = w.y;
					}
#pragma unroll
				for (int h = 0; h < 2; h++)
				{
					bg[m][h] = INFINITY;
					sg[m][h] = CAND ? sE[m * 16 + g + 8 * h] : INFINITY;
					ig[m][h] = 0;
				}
			}

			/* 3. all centroids */
			for (int ch = 0; ch < nch; ch++)
			{
				const float *sB = sB0;
				int			nt_ch = min(chunk_nt, ntiles - ch * chunk_nt);

				if (!resident)
				{
					int			nx = ch + 1 == nch ? 0 : ch + 1;

					__syncthreads();	/* everyone is done with the other buffer */
					load_chunk(buf ? sB0 : sB1, p.tiles + (int64_t) nx * chunk_nt * NTF,
							   min(chunk_nt, ntiles - nx * chunk_nt) * NTF);
					asm volatile("cp.async.wait_group 1;");
					__syncthreads();
					sB = buf ? sB1 : sB0;
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
								mma_f16_init(c, a[m][0], __float_as_uint(bv[0].x),
											 __float_as_uint(bv[0].y), cn);
							else
								mma_tf32_init(c, a[m][0], __float_as_uint(bv[0].x),
											  __float_as_uint(bv[0].y), cn);
#pragma unroll
							for (int ks = 1; ks < KS; ks++)
								if (F16)
									mma_f16(c, a[m][ks], __float_as_uint(bv[ks].x),
											__float_as_uint(bv[ks].y));
								else
									mma_tf32(c, a[m][ks], __float_as_uint(bv[ks].x),
											 __float_as_uint(bv[ks].y));
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
											sCI[ncand * 32 + lane] = base + (int) j0 * 8 + (q & 1);
											sCR[ncand * 32 + lane] = (unsigned char) row;
											ncand++;
										}
										else
											sOver[row] = 1;
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

			if (!CAND)
			{
				/* 4. merge the quad's lanes, then hand rows back to a lane each */
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

							sRb[row] = b;
							sRs[row] = s;
							sRi[row] = i;
						}
					}
			}
			else
			{
				/*
				 * 4. the candidates, exactly: least distance (distances are >= 0:
				 * their bits order as they do), then lowest index.  A lane takes
				 * its own; the second round measures again (cheaper than keeping).
				 */
				for (int round = 0; round < 2; round++)
				{
					__syncwarp();
					for (int e = 0; e < ncand; e++)
					{
						int			row = sCR[e * 32 + lane];
						int			c = sCI[e * 32 + lane];

						if (c < p.k)
						{
							const double *xp = tc_row(p.X, sRowG[row], d, log_b);
							const double *cp = p.C + (int64_t) c * d;
							double		xv[DMAX],
										cv[DMAX];
							double		acc = 0;

							/* every load in flight before the first use */
#pragma unroll
							for (int j = 0; j < DMAX; j++)
							{
								xv[j] = j < d ? xp[(int64_t) j << log_b] : 0.0;
								cv[j] = j < d ? cp[j] : 0.0;
							}
#pragma unroll
							for (int j = 0; j < DMAX; j++)
								if (j < d)
									acc = sq_term(acc, xv[j], cv[j]);

							unsigned long long key = (unsigned long long) __double_as_longlong(acc);

							if (round == 0)
								atomicMin(&sMin[row], key);
							else if (key == sMin[row])
								atomicMin(&sIdx[row], c);
						}
					}
				}
			}
			__syncwarp();
		}

		/* 5. a lane per row: the rows settled get their label and distance */
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
						float		b = sRb[lr],
									s = sRs[lr];

						/* the packing error of b and s: 2^-19 of their size each */
						float		e2 = 1.01f * (sE[lr] + 0x1.01p-19f * (fabsf(b) + fabsf(s)));

						cert = s - b > e2;
						lab = sRi[lr];
						if (sE[lr] < INFINITY)
							thr = b + e2;
					}
					if (cert)
					{
						/* the pair lab, lab + 1: the nearer, lower index on ties */
						const double *xp = tc_row(p.X, r, d, log_b);
						const double *cp = p.C + (int64_t) lab * d;
						bool		two = lab + 1 < p.k;
						double		xv[DMAX];
						double		acc = 0,
									acc1 = 0;

						if (pf)
#pragma unroll
							for (int j = 0; j < DMAX; j++)
								xv[j] = j < d ? stg[rr * stage_doubles(d) + j * 32 + lane] : 0.0;
						else
#pragma unroll
							for (int j = 0; j < DMAX; j++)
								xv[j] = j < d ? xp[(int64_t) j << log_b] : 0.0;
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
			else if (r < nrows && sE[lr] > -INFINITY && !sOver[lr] && sIdx[lr] != INT_MAX &&
					 !all_exact)
			{
				int64_t		row = p.list[r];
				int			lab = sIdx[lr];
				int			old = (int) ((int64_t) p.labels[row] - INT_MIN);

				p.labels[row] = lab;
				p.dist2[row] = __longlong_as_double((long long) sMin[lr]);
				mine += old != lab;
			}
		}
		__syncwarp();
	}
	if ((!resident && !all_exact) || pf)
		asm volatile("cp.async.wait_all;");

	for (int o = 16; o > 0; o >>= 1)
		mine += __shfl_xor_sync(FULL, mine, o);
	if (lane == 0 && mine)
		atomicAdd(p.changed, mine);
}

/* ---- the main pass with the centroids in registers (tc2) --------------------------- */

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
#define TC2_XS 36				/* row slots per 8-byte unit of the rows' B fragments (32 + 4) */

/* bytes of a warp's shared memory: rows as B fragments, the lanes' (best, second), nb stages */
static __host__ __device__ __forceinline__ int
tc2_warp_bytes(int ks, int d, int nb)
{
	return 4 * ks * TC2_XS * 8 + 4 * 4 * 8 * 16 + nb * stage_doubles(d) * 8;
}

/* bytes before the warps' areas: the shift (zeros to TC2_MAX_D), the centroids in float64 by pairs */
static __host__ __device__ __forceinline__ int
tc2_fixed_bytes(int k, int d)
{
	return TC2_MAX_D * 8 + (k + 1) / 2 * (d | 1) * 16;
}

/*
 * tc2 with the update: a warp's sums [j][c] (k d doubles: lanes of distinct
 * labels hit distinct banks) and counts [c]
 */
static __host__ __device__ __forceinline__ int
tc2_acc_bytes(int k, int d)
{
	return (k * d * 8 + k * 4 + 15) / 16 * 16;
}

/* E[q][.]: the (best, second) float4 of lane g for rows 2t, 2t+1 of n-tile q/4 (t = q%4) */
static __device__ __forceinline__ int
tc2_eslot(int q, int g)
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
tc2_prep_frags(const double *__restrict__ C, int k, int d, int ks_n, int nm, int dmax,
			   const double *__restrict__ shift, uint4 *frags, tc_header *hdr, int f16)
{
	prep_frags(blockIdx.x * blockDim.x + threadIdx.x, C, k, d, ks_n, nm, dmax, shift, frags, hdr,
			   f16, false);
}

/*
 * When tc2 fuses (no tc_prep_tiles): tc_prep_mean and tc2_prep_frags in one
 * block, one launch (the block's writes are its own after the barrier), on a
 * copy of C in shared memory (tc2_prep_smem): one trip to global memory for
 * C's loads, not one a step.  It also zeroes the caller's zero_words words
 * (pggpu_tc_assign_update's zero: no memset before it).
 */
__global__ void __launch_bounds__(PREP_BLOCK)
tc2_prep_all(const double *__restrict__ C, int k, int d, int ks_n, int nm, int dmax,
			 double *shift, uint4 *frags, tc_header *hdr, int f16, unsigned *zero, int zero_words,
			 pggpu_tc_gate gate)
{
	constexpr int U = 8;		/* loads in flight a thread */
	extern __shared__ double sCp[];	/* C (k d), then the shift (TC_MAX_D) */
	__shared__ bool closed;

	/* tc2<FUSE> may start beside this block: it waits for its results */
	asm volatile("griddepcontrol.launch_dependents;");
	if (gate.skip)
	{
		/* the last pass's counts, before they are zeroed (they may lie in zero) */
		if (threadIdx.x == 0)
			closed = *(volatile const unsigned long long *) gate.empty > 0 ||
				*(volatile const unsigned long long *) gate.changed <= gate.limit;
		__syncthreads();
		if (closed)
		{
			if (threadIdx.x == 0)
				*gate.skip = 1;	/* (the pass and the caller's next kernel read it) */
			return;
		}
	}
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

/* tc2_prep_all's shared memory (k d <= 256 x TC2_MAX_D: under 48 KB) */
static size_t
tc2_prep_smem(int k, int d)
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
tc2_mma(float (&c)[4], const uint4 (&a)[KS], const float4 &cq, const uint2 (&bx)[KS])
{
	static_assert(!HALF || (F16 && KS >= 2), "tc2: the half k-step is f16's, after a full one");
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
tc2_scan(const uint4 (&a)[NM][KS], const float4 (&cq)[NM], const uint2 (&bx)[NN][KS], uint32_t msk,
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
			tc2_mma<KS, F16, HALF>(c[nn], a[J], cq[J], bx[nn]);
			tc2_mma<KS, F16, HALF>(e[nn], a[J + 1], cq[J + 1], bx[nn]);
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
		tc2_scan<KS, F16, HALF, J + 2, NM, NN>(a, cq, bx, msk, b0, s0, b1, s1);
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
tc2_exact_row(const double2 *sC, int ps, int k, int d, const double *x, int lane, int *bl,
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
tc2_accumulate(double *sAcc, unsigned *sCnt, int k, int d, const double *x, unsigned peers, int lab)
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
tc2_kernel(const tc_args p)
{
	constexpr int QMAX = (F16 ? 16 : 8) * KS;
	static_assert(3 * DW <= QMAX && NM % 2 == 0, "tc2: segments of DW in K, groups of 2 m-tiles");
	static_assert(16 * NM <= 2048 / 4, "tc2: a word of sE (2 KB) a label for the peers' masks");
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
	const int	ps = d | 1;			/* double2 chunks a centroid pair (odd: fewer conflicts) */
	const int	nb = p.prefetch;
	const int	sbuf = stage_doubles(d);
	double	   *sS = (double *) smem;
	double2    *sC = (double2 *) (sS + TC2_MAX_D);
	/* warp w's area, and (FUSE) its sums after every warp's area */
	char	   *const wa0 = (char *) smem + tc2_fixed_bytes(k, d);
	const int	wab = tc2_warp_bytes(KS, d, nb);
	char	   *const sa0 = wa0 + NW * wab;
	const int	sab = tc2_acc_bytes(k, d);
	char	   *wb = wa0 + warp * wab;
	uint2	   *sX = (uint2 *) wb;	/* [unit (ks, t)][row slot] */
	float4	   *sE = (float4 *) (wb + 4 * KS * TC2_XS * 8);
	double	   *sStg = (double *) (wb + 4 * KS * TC2_XS * 8 + 2048);
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
	 * launched as its dependent (FUSE: tc2_prep_all), this runs beside it
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
	if (FUSE && p.skip && *(volatile const unsigned *) p.skip)
	{
		/* the gate closed (pggpu_tc_gate): nothing to do */
		asm volatile("cp.async.wait_all;");
		return;
	}

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
	for (int j = threadIdx.x; j < TC2_MAX_D; j += blockDim.x)
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
						((uint32_t *) &sX[(ks * 4 + tt) * TC2_XS + lane])[0] = wd[ks * 8 + tt];
					else
						sX[(ks * 4 + tt) * TC2_XS + lane] = make_uint2(wd[ks * 8 + tt], wd[ks * 8 + tt + 4]);
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
						bx[nn][ks] = sX[(ks * 4 + t) * TC2_XS + (n + nn) * 8 + g];
				}
				tc2_scan<KS, F16, HALF, 0, NM, NN>(a, cq, bx, msk, b0, s0, b1, s1);
#pragma unroll
				for (int nn = 0; nn < NN; nn++)
					sE[tc2_eslot((n + nn) * 4 + t, g)] =
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
					float2		v = ((const float2 *) (sE + tc2_eslot(q, 0)))[h];
					float		b = v.x,
								s = v.y;
					int			gi = 0;

#pragma unroll
					for (int gg = 1; gg < 8; gg++)
					{
						v = ((const float2 *) (sE + tc2_eslot(q, gg)))[h];
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

					tc2_exact_row<DW>(sC, ps, k, d, stg + src, lane, &bl, &bd);
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
					tc2_accumulate<DW>(sAcc, sCnt, k, d, stg, peers, lab);
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
				b += *(const double *) (wa0 + w * wab + 4 * KS * TC2_XS * 8);	/* its sE */
			p.block_part[blockIdx.x] = b;
		}
	}
}

/* ---- the exact scan ------------------------------------------------------------ */

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

		const double *xp = tc_row(p.X, active ? r : 0, d, p.log_b);
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

/* ---- host side ------------------------------------------------------------------ */

namespace
{

struct tc_layout
{
	size_t		shift;
	size_t		tiles;
	size_t		frags;			/* tc2's A fragments (0: none) */
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
	if (d <= TC2_MAX_D && k <= 16 * TC2_MAX_NM)
	{
		L.frags = off;
		off += align256(sizeof(uint4) * 32 * TC2_MAX_NM * 4);	/* KS + 1 <= 4 uint4 a lane and m-tile */
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
 * of 8: 44): taken as 48; tc2's last k-step of 8 (m16n8k8, HALF: the same
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

/* k-steps of the mma for d columns: 3d elements in steps of 8 (tf32) or 16 (f16) */
int
ks_of(int d, bool f16)
{
	return f16 ? (3 * d + 15) / 16 : (3 * d + 7) / 8;
}

typedef void (*tc_fn) (const tc_args);

struct tc_variant
{
	tc_fn		main;
	tc_fn		cand;
	int			mt;
	int			nw;
};

/* forced by the test program (0: automatic; only tests/tc_check sets them) */
int			force_mt = 0;
int			force_nw = 0;
int			force_prec = 0;		/* 1 tf32, 2 f16 */
int			stage_mask = 7;
int			prefetch_on = 4;	/* most staging buffers */

template <int KS, int MT, int NW, bool F16>
tc_variant
make_variant()
{
	return {tc_kernel<KS, MT, NW, false, F16>, tc_kernel<KS, MT, NW, true, F16>, MT, NW};
}

/* small K: three shapes (the test program compares them); else MT 2 x 8 warps */
template <int KS, bool F16>
tc_variant
variant_ks(int mt, int nw)
{
	if constexpr (KS <= (F16 ? 2 : 4))
	{
		if (mt == 4 && nw == 8)
			return make_variant<KS, 4, 8, F16>();
		if (mt == 2 && nw == 8)
			return make_variant<KS, 2, 8, F16>();
		return make_variant<KS, 2, 16, F16>();
	}
	return make_variant<KS, 2, 8, F16>();
}

tc_variant
pick_variant(int ks, bool f16)
{
	int			mt = force_mt ? force_mt : 2;
	int			nw = force_nw ? force_nw : 16;

	if (f16)
		switch (ks)
		{
			case 1: return variant_ks<1, true>(mt, nw);
			case 2: return variant_ks<2, true>(mt, nw);
			case 3: return variant_ks<3, true>(mt, nw);
			case 4: return variant_ks<4, true>(mt, nw);
			case 5: return variant_ks<5, true>(mt, nw);
			default: return variant_ks<6, true>(mt, nw);
		}
	switch (ks)
	{
		case 1: return variant_ks<1, false>(mt, nw);
		case 2: return variant_ks<2, false>(mt, nw);
		case 3: return variant_ks<3, false>(mt, nw);
		case 4: return variant_ks<4, false>(mt, nw);
		case 5: return variant_ks<5, false>(mt, nw);
		case 6: return variant_ks<6, false>(mt, nw);
		case 7: return variant_ks<7, false>(mt, nw);
		case 8: return variant_ks<8, false>(mt, nw);
		case 9: return variant_ks<9, false>(mt, nw);
		case 10: return variant_ks<10, false>(mt, nw);
		case 11: return variant_ks<11, false>(mt, nw);
		default: return variant_ks<12, false>(mt, nw);
	}
}

struct tc2_variant
{
	tc_fn		main;
	tc_fn		fused;			/* the same, with the centroid update */
	int			nm;
	int			nw;
	int			nwf;			/* fused's warps */
	int			dw;
};

/*
 * Warps a CTA (one CTA an SM): the centroids take NM (4 KS + 4) registers a
 * thread, the rest about 40; as many warps as 64K registers hold (8 to 16).
 * The fused kernel: about 40 more, and 2 fewer an m-tile with tc2_mma's half
 * k-step (the plain kernel spills when it counts them: ptxas).
 */
template <int KS, bool F16, int NM, int DW>
tc2_variant
make_tc2()
{
	constexpr bool HALF = F16 && KS >= 2 && 3 * DW <= 16 * KS - 8;	/* as tc2_kernel's */
	constexpr int R = NM * (4 * KS + 4) + (F16 && KS == 3 ? 56 : 40);
	constexpr int NW = R <= 128 ? 16 : R <= 168 ? 12 : R <= 200 ? 10 : 8;
	constexpr int RF = R + 40 - (HALF ? 2 * NM : 0);	/* (ptxas: less and the used variants spill) */
	constexpr int NWF = RF <= 128 ? 16 : RF <= 168 ? 12 : RF <= 200 ? 10 : 8;

	return {tc2_kernel<KS, F16, NM, NW, DW, false>, tc2_kernel<KS, F16, NM, NWF, DW, true>, NM, NW,
			NWF, DW};
}

/* segments of DMAX in K; f16 at KS = 2 also 8 (d <= 8: no columns computed in vain) */
template <int KS, bool F16, int NM>
tc2_variant
tc2_dw(int d)
{
	constexpr int DMAX = (F16 ? 16 : 8) * KS / 3;

	if constexpr (F16 && KS == 2)
		if (d <= 8)
			return make_tc2<KS, F16, NM, 8>();
	return make_tc2<KS, F16, NM, DMAX>();
}

template <int KS, bool F16>
tc2_variant
tc2_nm(int nm, int d)
{
	if (nm <= 4)
		return tc2_dw<KS, F16, 4>(d);
	if (nm <= 8)
		return tc2_dw<KS, F16, 8>(d);
	if constexpr (KS <= 2)
		if (nm <= 16)
			return tc2_dw<KS, F16, 16>(d);
	if constexpr (KS == 3)
		if (nm <= 12)
			return tc2_dw<KS, F16, 12>(d);
	return {nullptr, nullptr, 0, 0, 0, 0};
}

/* tc2 for K <= 3 k-steps and k within 16 m-tiles (12 at KS = 3); main: null otherwise */
tc2_variant
pick_tc2(int ks, bool f16, int k, int d)
{
	int			nm = (k + 15) / 16;

	if (d > TC2_MAX_D || nm > TC2_MAX_NM || force_mt || force_nw)
		return {nullptr, nullptr, 0, 0, 0, 0};
	if (f16)
		switch (ks)
		{
			case 1: return tc2_nm<1, true>(nm, d);
			case 2: return tc2_nm<2, true>(nm, d);
			case 3: return tc2_nm<3, true>(nm, d);
			default: break;
		}
	else
		switch (ks)
		{
			case 1: return tc2_nm<1, false>(nm, d);
			case 2: return tc2_nm<2, false>(nm, d);
			case 3: return tc2_nm<3, false>(nm, d);
			default: break;
		}
	return {nullptr, nullptr, 0, 0, 0, 0};
}

struct dev_info
{
	std::atomic<bool> known;
	int			sms;
	int			smem_optin;
};

/*
 * Each device's attributes, asked once: filled under a lock and published
 * by the flag (release; read with acquire), since data sets may be used by
 * several threads at once (pg_gpu_compute.h).
 */
static dev_info devs[64];
static std::mutex devs_lock;

static cudaError_t
device_info(int dev, const dev_info **out)
{
	dev_info   *di = &devs[dev];

	if (!di->known.load(std::memory_order_acquire))
	{
		std::lock_guard<std::mutex> hold(devs_lock);

		if (!di->known.load(std::memory_order_relaxed))
		{
			cudaError_t e;

			if ((e = cudaDeviceGetAttribute(&di->sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess ||
				(e = cudaDeviceGetAttribute(&di->smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev)) != cudaSuccess)
				return e;
			di->known.store(true, std::memory_order_release);
		}
	}
	*out = di;
	return cudaSuccess;
}

/*
 * Shared memory of a tensor-core pass; false when it cannot be laid out.
 * *pf: the main pass stages the next rows (when the centroids are resident
 * and the staging buffers fit too).
 */
bool
plan_smem(const dev_info &di, int ks, int ntiles, int d, int mt, int nw, bool cand,
		  int *chunk_nt, size_t *smem, int *pf)
{
	size_t		ntf_bytes = sizeof(float) * (ks * 64 + 16);
	size_t		fixed = sizeof(double) * ((d + 1) / 2 * 2) +
		4 * (size_t) nw * warp_words(16 * mt, a_stride(ks), cand);
	int			c;

	size_t		stage = sizeof(double) * (size_t) nw * (mt / 2) * stage_doubles(d);

	*pf = 0;
	if ((size_t) ntiles * ntf_bytes + fixed <= (size_t) di.smem_optin)
	{
		*chunk_nt = ntiles;		/* resident: loaded once per CTA */
		*smem = (size_t) ntiles * ntf_bytes + fixed;
		if (!cand && prefetch_on)
		{
			/* as many stages as fit, 2 to prefetch_on */
			int			nb = (int) (((size_t) di.smem_optin - *smem) / stage);

			if (nb > prefetch_on)
				nb = prefetch_on;
			if (nb >= 2)
			{
				*pf = nb;
				*smem += nb * stage;
			}
		}
		return true;
	}
	if (fixed >= (size_t) di.smem_optin)
		return false;
	/* two buffers, whole packing groups where they fit */
	c = (int) (((size_t) di.smem_optin - fixed) / 2 / ntf_bytes);
	if (c > 4 * GROUP_NT)
		c = 4 * GROUP_NT;
	if (c >= GROUP_NT)
		c = c / GROUP_NT * GROUP_NT;
	if (c < 1)
		return false;
	*chunk_nt = c;
	*smem = 2 * (size_t) c * ntf_bytes + fixed;
	return true;
}

/*
 * The fused tc2 only where ptxas kept every value in registers (no local
 * memory): a spilled variant (d > 8 with k near 256) is slower than the
 * two passes.
 */
bool
in_registers(tc_fn fn)
{
	cudaFuncAttributes fa;

	return cudaFuncGetAttributes(&fa, (const void *) fn) == cudaSuccess && fa.localSizeBytes == 0;
}

/*
 * tc2's shared memory with as many stages (2..prefetch_on) as fit, and
 * with fuse the warps' sums; false: none fit
 */
bool
plan_tc2(const dev_info &di, int ks, int k, int d, int nw, bool fuse, size_t *smem, int *pf)
{
	size_t		cap = (size_t) di.smem_optin;

	for (int nb = prefetch_on; nb >= 2; nb--)
	{
		size_t		s = tc2_fixed_bytes(k, d) + (size_t) nw * tc2_warp_bytes(ks, d, nb) +
			(fuse ? (size_t) nw * tc2_acc_bytes(k, d) : 0);

		if (s <= cap)
		{
			*smem = s;
			*pf = nb;
			return true;
		}
	}
	return false;
}

cudaError_t
launch_pass(tc_fn fn, const dev_info &di, int nw, size_t smem, int64_t rows_per_cta,
			int64_t rows, const tc_args &a, cudaStream_t stream, int max_ctas = INT_MAX,
			int *ctas = nullptr, bool dependent = false)
{
	int			per_sm = 0;
	cudaError_t e;

	if ((e = cudaFuncSetAttribute((const void *) fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
								  (int) smem)) != cudaSuccess)
		return e;
	if ((e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, (const void *) fn, nw * 32,
														   smem)) != cudaSuccess)
		return e;
	if (per_sm < 1)
		return cudaErrorInvalidConfiguration;

	int64_t		grid = (int64_t) per_sm * di.sms;
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

}								/* namespace */

/*
 * The test program's hooks (tests/tc_check.cu, built with -DPGGPU_TC_LAB from
 * this file): not in the library.
 */
#ifdef PGGPU_TC_LAB
/* rows the last call on this workspace did not certify at once (test program) */
unsigned long long
pggpu_tc_debug_fallbacks(const void *workspace)
{
	tc_header	h;

	if (cudaMemcpy(&h, workspace, sizeof(h), cudaMemcpyDeviceToHost) != cudaSuccess)
		return ~0ULL;
	return h.fallbacks;
}

/* test program: force a kernel shape (mt, nw) and precision (1 tf32, 2 f16), 0 for automatic */
void
pggpu_tc_debug_variant(int mt, int nw, int prec)
{
	force_mt = mt;
	force_nw = nw;
	force_prec = prec;
}

/*
 * test program: which passes run (1 main, 2 candidates, 4 exact; timing only),
 * and mask >> 4: most staging buffers (0: 4; 1: none)
 */
void
pggpu_tc_debug_stages(int mask)
{
	stage_mask = mask & 7;
	prefetch_on = (mask >> 4) == 0 ? 4 : (mask >> 4) == 1 ? 0 : mask >> 4;
}
#endif							/* PGGPU_TC_LAB */

/*
 * f16 (m16n8k16) where it takes fewer k-steps than tf32 (d >= 3) and the
 * scan dominates: measured on the H100 at d = 8, 15% faster at k = 1024, 6% at
 * k = 256, 10% slower at k <= 128 (its conversions); at d = 32 faster from k = 8
 */
static bool
use_f16(int d, int k)
{
	return (3 * d + 15) / 16 < (3 * d + 7) / 8 && (d > 10 || k >= 192);
}

/*
 * Measured on an H100 at N = 10^7 (tests/tc_check --bench): against the
 * float64 CUDA-core scan the tensor-core pass wins from k = 64 (d >= 3) and
 * k = 128 (d <= 2); it assigns only, so the centroid update is a pass of its own.
 */
bool
pggpu_tc_wanted(int k, int d)
{
	return d >= 1 && d <= TC_MAX_D && k >= (d <= 2 ? 128 : 64);
}

size_t
pggpu_tc_workspace_bytes(int64_t n, int k, int d)
{
	return layout_for(n, k, d).total;
}

cudaError_t
pggpu_tc_assign(const double *X, int64_t n, int d, int log_b, const double *C, int k,
				void *workspace, int32_t *labels, double *dist2,
				unsigned long long *changed, cudaStream_t stream)
{
	return pggpu_tc_assign_update(X, n, d, log_b, C, k, workspace, labels, dist2, changed,
								  nullptr, nullptr, 0, nullptr, nullptr, 0, nullptr, stream);
}

cudaError_t
pggpu_tc_assign_update(const double *X, int64_t n, int d, int log_b, const double *C, int k,
					   void *workspace, int32_t *labels, double *dist2,
					   unsigned long long *changed, double *part, double *block_part,
					   int max_parts, int *parts, void *zero, size_t zero_bytes,
					   const pggpu_tc_gate *gate, cudaStream_t stream)
{
	tc_layout	L = layout_for(n, k, d);
	char	   *ws = (char *) workspace;
	tc_args		a;
	int			dev;
	cudaError_t e;
	/* the caller's zero bytes, first: by the preparation where it is one launch, else here */
	auto		zero_first = [&]() -> cudaError_t
	{
		return zero && zero_bytes ? cudaMemsetAsync(zero, 0, zero_bytes, stream) : cudaSuccess;
	};

	if (gate && (n <= 0 || !gate->changed || !gate->empty || !gate->skip))
		return cudaErrorInvalidValue;
	if (n <= 0)
		return zero_first();
	if (d < 1 || k < 1 || log_b < 0 || log_b > 40)
		return cudaErrorInvalidValue;
	if ((e = cudaGetDevice(&dev)) != cudaSuccess)
		return e;
	if (dev < 0 || dev >= 64)
		return cudaErrorInvalidDevice;
	const dev_info *dip;

	if ((e = device_info(dev, &dip)) != cudaSuccess)
		return e;
	const dev_info &di = *dip;

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
	a.skip = nullptr;
	a.labels = labels;
	a.dist2 = dist2;
	a.changed = changed;
	a.part = part;
	a.block_part = block_part;
	if (parts)
		*parts = 0;

	size_t		exact_smem = sizeof(double) *
		(size_t) (d <= 6144 / EXACT_TK ? (6144 / d) / EXACT_TK * EXACT_TK : EXACT_TK) * d;

	if (exact_smem > 48 * 1024 &&
		(e = cudaFuncSetAttribute((const void *) tc_exact_kernel,
								  cudaFuncAttributeMaxDynamicSharedMemorySize,
								  (int) exact_smem)) != cudaSuccess)
		return e;
	if (d > TC_MAX_D)
	{
		if ((e = zero_first()) != cudaSuccess)
			return e;
		tc_exact_kernel<<<di.sms * 8, EXACT_BLOCK, exact_smem, stream>>>(a, 1);
		return cudaPeekAtLastError();
	}

	bool		f16 = force_prec ? force_prec == 2 : use_f16(d, k);
	int			ks = ks_of(d, f16);
	tc_variant	v = pick_variant(ks, f16);
	int			rows_cta = 16 * v.mt * v.nw;
	int			ch_main,
				ch_cand,
				pf_main,
				pf_cand;
	size_t		sm_main,
				sm_cand;

	if (!plan_smem(di, ks, a.ntiles, d, v.mt, v.nw, false, &ch_main, &sm_main, &pf_main) ||
		!plan_smem(di, ks, a.ntiles, d, v.mt, v.nw, true, &ch_cand, &sm_cand, &pf_cand))
		return cudaErrorInvalidConfiguration;	/* not for d <= 32 */
	a.coef = tc_coef(ks, f16);
	a.tiny = f16 ? TINY_F16 : TINY;

	tc2_variant v2 = L.frags ? pick_tc2(ks, f16, k, d) : tc2_variant{nullptr, nullptr, 0, 0, 0, 0};
	size_t		sm_tc2 = 0;
	int			pf_tc2 = 0;

	if (v2.main && !plan_tc2(di, ks, k, d, v2.nw, false, &sm_tc2, &pf_tc2))
		v2.main = nullptr;

	/* one pass labels and sums, where the warps' sums fit beside the stages */
	size_t		sm_fuse = 0;
	int			pf_fuse = 0;
	bool		fuse = v2.main && part && block_part && parts && max_parts > 0 &&
		(stage_mask & 1) && plan_tc2(di, ks, k, d, v2.nwf, true, &sm_fuse, &pf_fuse) &&
		in_registers(v2.fused);

	if (fuse)
	{
		int			zw = zero_bytes % 4 == 0 && zero_bytes / 4 <= PREP_BLOCK ? (int) (zero_bytes / 4) : 0;

		if (gate && !zw)
			return cudaErrorInvalidValue;	/* (a memset would zero the gate's counts first) */
		if (!zw && (e = zero_first()) != cudaSuccess)
			return e;
		tc2_prep_all<<<1, PREP_BLOCK, tc2_prep_smem(k, d), stream>>>(
			C, k, d, ks, v2.nm, v2.dw, (double *) a.shift, (uint4 *) a.frags, a.hdr, f16,
			zw ? (unsigned *) zero : nullptr, zw, gate ? *gate : pggpu_tc_gate{});
		a.skip = gate ? gate->skip : nullptr;
		if ((e = cudaPeekAtLastError()) != cudaSuccess)
			return e;
		a.prefetch = pf_fuse;
		return launch_pass(v2.fused, di, v2.nwf, sm_fuse, 32 * v2.nwf, n, a, stream, max_parts, parts,
						   true);
	}
	if (gate)
		return cudaErrorInvalidValue;	/* (no pass that can skip) */
	if ((e = zero_first()) != cudaSuccess)
		return e;
	tc_prep_mean<<<1, PREP_BLOCK, 0, stream>>>(C, k, d, (double *) a.shift, a.hdr, f16);
	if ((e = cudaPeekAtLastError()) != cudaSuccess)
		return e;
	/* the tiles of tc_kernel */
	tc_prep_tiles<<<(unsigned) ((a.ntiles * 32 + 255) / 256), 256, 0, stream>>>(
		C, k, d, ks, a.ntiles, a.shift, (float *) a.tiles, a.hdr, f16);
	if ((e = cudaPeekAtLastError()) != cudaSuccess)
		return e;
	if (v2.main)
	{
		tc2_prep_frags<<<(unsigned) ((v2.nm * 32 + 127) / 128), 128, 0, stream>>>(
			C, k, d, ks, v2.nm, v2.dw, a.shift, (uint4 *) a.frags, a.hdr, f16);
		if ((e = cudaPeekAtLastError()) != cudaSuccess)
			return e;
	}
	if ((stage_mask & 1) && v2.main)
	{
		a.prefetch = pf_tc2;
		if ((e = launch_pass(v2.main, di, v2.nw, sm_tc2, 32 * v2.nw, n, a, stream)) != cudaSuccess)
			return e;
	}
	else if (stage_mask & 1)
	{
		a.chunk_nt = ch_main;
		a.prefetch = pf_main;
		if ((e = launch_pass(v.main, di, v.nw, sm_main, rows_cta, n, a, stream)) != cudaSuccess)
			return e;
	}
	if (stage_mask & 2)
	{
		/* the list's length is on the device: enough CTAs for a full list */
		a.chunk_nt = ch_cand;
		a.prefetch = 0;
		if ((e = launch_pass(v.cand, di, v.nw, sm_cand, rows_cta, L.cap, a, stream)) != cudaSuccess)
			return e;
	}
	if (stage_mask & 4)
	{
		tc_exact_kernel<<<di.sms * 4, EXACT_BLOCK, exact_smem, stream>>>(a, 0);
		if ((e = cudaPeekAtLastError()) != cudaSuccess)
			return e;
	}
	return cudaSuccess;
}
