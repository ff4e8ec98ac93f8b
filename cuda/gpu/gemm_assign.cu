/*
 * gemm_assign.cu - nearest-centroid labels for many columns (d > 32) by a
 * matrix product, exact: in float64 (route gemm), or on halves, centred
 * and scaled copies (route gemm_f16, below).
 *
 * |x - c|^2 = |x|^2 + |c|^2 - 2 x.c: cuBLAS DGEMM (float64 tensor cores on
 * Hopper) computes x.c for a chunk of rows against every centroid into S
 * (a row's k products adjacent, at most GEMM_S_BYTES), top2_kernel takes
 * each row's smallest a_c = |c|^2 - 2 S_c and its second smallest (a warp
 * a row, so that large k keeps the GPU busy), and certify_kernel decides
 * (a thread a row, the row's values read coalesced).  The product's
 * rounding is bounded: every a_c is within E of the reference's distance
 * (cpu/kmeans.c: sum over j in order of (x_j - c_j)^2, each operation
 * rounded) less |x|^2, with E = 1.01 (4 d + 8) 2^-53 (|x|^2 + max |c|^2)
 * (the norms and each dot product err by at most d 2^-53 (1 + ...) of
 * |x|^2 + |c|^2, and so does the reference's own sum).  A row whose second
 * smallest is more than 2 E above the smallest is certain: its label is
 * the smallest's centroid and its distance is measured the reference's
 * way.  Other rows (near ties) measure every centroid within 2 E of the
 * smallest the reference's way, lowest index on ties.  So labels and
 * distances are exactly the CPU's.  Data far from the origin (|x|^2 much
 * larger than the distances) make more rows uncertain: slower, never
 * wrong.
 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <type_traits>

#include "blas.cuh"
#include "common.cuh"
#include "gemm_assign.cuh"
#include "gemm_measure.cuh"

#define GEMM_S_BYTES ((size_t) 256 << 20)	/* the products of a chunk, at most */

/*
 * |c|^2 of every centroid, and the largest (bits of a non-negative double):
 * a warp a centroid, its lanes' terms summed by the warp (in any order the
 * float64 sum is within the (d + 2) 2^-52 the bounds allow; a thread a
 * centroid, d terms in turn on few blocks, took 23 us at k = 141, d = 256)
 */
__global__ void
centroid_norms_kernel(const double *__restrict__ C, int k, int d, double *nc,
					  unsigned long long *ncmax)
{
	const int64_t c = (blockIdx.x * (int64_t) blockDim.x + threadIdx.x) >> 5;
	const int	lane = threadIdx.x & 31;
	double		s = 0;

	if (c >= k)
		return;
	for (int j = lane; j < d; j += 32)
		s = __dadd_rn(s, __dmul_rn(C[c * d + j], C[c * d + j]));
	s = warp_sum(s);
	if (lane == 0)
	{
		nc[c] = s;
		atomicMax(ncmax, (unsigned long long) __double_as_longlong(s));
	}
}

template <typename T>
__global__ void __launch_bounds__(BLOCK)
top2_kernel(const T *__restrict__ S, int64_t rows, int k, const double *__restrict__ nc, double f,
			double *top_a, double *top_b, int32_t *top_c)
{
	top2_rows(S, rows, k, nc, f, top_a, top_b, top_c);
}

/*
 * A thread a row, after top2_kernel on the float64 products of rows g0 ..
 * g0 + rows - 1 of X (row t = g - g0, its products at S + t k).
 */
template <typename T>
__global__ void __launch_bounds__(BLOCK)
certify_kernel(const T *__restrict__ X, int64_t g0, int64_t rows, int d, int log_b,
			   const double *__restrict__ C, int k, const double *__restrict__ S,
			   const double *__restrict__ nc, const unsigned long long *ncmax_bits,
			   const double *__restrict__ top_a, const double *__restrict__ top_b,
			   const int32_t *__restrict__ top_c,
			   int32_t *labels, double *dist2, unsigned long long *changed)
{
	int64_t		t = blockIdx.x * (int64_t) blockDim.x + threadIdx.x;
	unsigned long long moved = 0;

	if (t < rows)
	{
		const int64_t g = g0 + t;
		const T    *x = X + pggpu_at(g, 0, d, log_b);
		const int64_t xs = (int64_t) 1 << log_b;	/* x_j at x[j xs] */
		const double best = top_a[t],
					second = top_b[t];
		const int	bi = top_c[t];
		double		nx;
		double		exact = row_measure(x, xs, C + (int64_t) bi * d, NULL, d, &nx);
		double		e = product_bound(d, nx, ncmax_bits);
		int			label = bi;

		if (!(second - best > 2 * e))
		{
			/* a near tie: every centroid within 2 E, measured exactly */
			const double *s = S + t * k;
			double		lim = best + 2 * e;

			label = -1;
			for (int c = 0; c < k; c++)
				if (!(__dsub_rn(nc[c], __dmul_rn(2.0, s[c])) > lim))
				{
					double		dc = row_measure(x, xs, C + (int64_t) c * d, NULL, d, NULL);

					if (label < 0 || dc < exact)
						exact = dc, label = c;
				}
		}
		moved = labels[g] != label;
		labels[g] = label;
		dist2[g] = exact;
	}
	moved = __reduce_add_sync(0xffffffffu, (unsigned) moved);
	if ((threadIdx.x & 31) == 0 && moved)
		atomicAdd(changed, moved);
}

/*
 * A warp a row, after top2_kernel on the float64 products of the rows
 * list[0 .. rows - 1], gathered by columns into U (x_j of the t-th at U[t +
 * j rows]), row t's products at S + t k: certify_kernel's decision, its
 * lanes sharing the row's norm and measuring the near-tied centroids
 * between them (a thread a row left a pass's few listed rows to a few
 * SMs: 3.3 ms of a 24 ms iteration at d = 768, k = 1024, 1 % listed).
 */
__global__ void __launch_bounds__(BLOCK)
listed_certify_kernel(const double *__restrict__ U, int64_t rows, int d, const int64_t *__restrict__ list,
					  const double *__restrict__ C, int k, const double *__restrict__ S,
					  const double *__restrict__ nc, const unsigned long long *ncmax_bits,
					  const double *__restrict__ top_a, const double *__restrict__ top_b,
					  const int32_t *__restrict__ top_c,
					  int32_t *labels, double *dist2, unsigned long long *changed)
{
	const int64_t t = (blockIdx.x * (int64_t) blockDim.x + threadIdx.x) >> 5;
	const int	lane = threadIdx.x & 31;

	if (t >= rows)
		return;

	const double *x = U + t;
	const double best = top_a[t],
				second = top_b[t];
	double		nx = 0,
				exact = INFINITY;
	int			label = -1;

	for (int j = lane; j < d; j += 32)
		nx += x[(int64_t) j * rows] * x[(int64_t) j * rows];
	nx = warp_sum(nx);

	double		e = product_bound(d, nx, ncmax_bits);

	if (second - best > 2 * e)
	{
		/* certain: the best, measured by one lane */
		label = top_c[t];
		if (lane == 0)
			exact = row_measure(x, rows, C + (int64_t) label * d, NULL, d, NULL);
	}
	else
	{
		/* a near tie: every centroid within 2 E measured exactly, a lane each; the least, lowest index */
		const double *s = S + t * k;
		double		lim = best + 2 * e;

		for (int c = lane; c < k; c += 32)
			if (!(__dsub_rn(nc[c], __dmul_rn(2.0, s[c])) > lim))
			{
				double		dc = row_measure(x, rows, C + (int64_t) c * d, NULL, d, NULL);

				if (label < 0 || dc < exact)
					exact = dc, label = c;
			}
		for (int o = 16; o > 0; o >>= 1)
		{
			double		oe = __shfl_xor_sync(FULL, exact, o);
			int			ol = __shfl_xor_sync(FULL, label, o);

			if (ol >= 0 && (label < 0 || oe < exact || (oe == exact && ol < label)))
				exact = oe, label = ol;
		}
	}
	if (lane == 0)
	{
		const int64_t g = list[t];

		if (labels[g] != label)
			atomicAdd(changed, 1ULL);
		labels[g] = label;
		dist2[g] = exact;
	}
}

/*
 * ---- gemm_f16 ----------------------------------------------------------------
 *
 * The same, from a product on halves (cuBLAS, FP16 tensor cores with
 * float32 accumulation, CUBLAS_COMPUTE_32F: about ten times DGEMM's rate on
 * an H100, twice TF32's, and half TF32's operand bytes).  Once per fit the
 * rows are copied as x~ = half(2^f (x - mu)): mu the column means (so that
 * |x - mu|, not |x|, sets the product's error), 2^f bringing the largest
 * |x_j - mu_j| into [2^12, 2^13) (copy_scale), each value rounded to the
 * nearest half (11 significant bits, as TF32's).  Each step copies the
 * centroids so, and a_c = |c - mu|^2 - 2 2^-2f (x~ . c~) = |x - c|^2 -
 * |x - mu|^2 + err, with |err| <= A:
 *   |x~ . c~ - 2^2f (x - mu).(c - mu)| <= 2^2f (2^-10 + 2^-20 + d 2^-22)
 *     |x - mu| |c - mu| (each input within 2^-11 relative; the products of
 *     halves exact in float32; the d additions truncated, 2^-23 each of
 *     the terms so far, doubled for the tensor cores' alignment of a
 *     block's addends to the largest) + 2^-24 sqrt(d) (|x~| + |c~|) + d
 *     2^-48 (values under the halves' normal range, 2^-14, rounded to
 *     their subnormals, within 2^-25 absolute);
 *   |c - mu|^2 in float64 within (d + 2) 2^-52 of it;
 * all with 1 % to spare.  The reference distance (cpu/kmeans.c: rounded
 * non-negative terms, summed) is within eps = 1.01 (d + 3) 2^-53 of
 * |x - c|^2 relative.  So a centroid with a_c - a_best > 2 A + 2.05 eps
 * (|a_c| + |x - mu|^2 + A) is farther than the best by the reference's
 * measure too: a row whose second smallest passes that is certain, and is
 * certain (its best is the label; where a step wants the distances, each
 * row is measured against its label the reference's way after).  For the
 * other rows, while the chunk's products are in hand (gemm_label.cu:
 * label_f16_kernel, or label_rows_kernel), the nearest of the centroids
 * the same test cannot rule out by the reference's measure wins, the
 * lowest index on ties (nearest_listed:
 * their sums taken by a warp in another order rule out most, the rest
 * measured the reference's way; above 4096 centroids, a row of more than
 * LISTED_MEASURED candidates measures them all, nearest_block).  Near ties
 * have a few such candidates, 2 to 9 on embeddings at k = 4096 to 20,000
 * (the float64 product of every uncertain row against every centroid was
 * most of an iteration there), blobs of many centroids each a few hundred;
 * a row with more than label_f16_kernel's cap of them is left to that
 * product.  Labels and distances are the CPU's exactly.  NaN or overflow
 * (given centroids more than 8 times the data's extent from its mean)
 * fails the test: every row is left to the float64 product.
 *
 * Where the data leave too many rows to that product (11 bits cannot tell
 * their centroids apart, and more candidates than the cap are within the
 * bound: tight clusters far from the data's mean, or many
 * centroids in one), a pass that leaves more than half of its rows to it
 * makes the fit's later passes use the float64 product alone (*f16 =
 * false): the answers are the same.  (Uncertain rows measured in
 * label_f16_kernel count only at F16_UNCERTAIN_K centroids or fewer.)
 */

/*
 * A pass that finds more than half of its rows uncertain at this many
 * centroids or fewer also hands the fit's later passes to the float64
 * product: measuring a row's candidates costs more than its products with
 * so few centroids.  On an H200, 10^6 rows of Gaussian blobs (95 to 99.9 %
 * uncertain), ms a pass, FP16 against float64 alone: d = 256, k = 141:
 * 12.5, 5.3; k = 256: 13.7, 5.5; k = 512: 17.4, 8.7; d = 128, k = 256: 5.4,
 * 3.4; but k = 1024: 9.1, 10.1 (BENCHMARKS.md section 11).
 */
#define F16_UNCERTAIN_K 512

/* sums[j] += x(i, j) over rows i: block (j, g), rows g BLOCK + t, stepping gridDim.y BLOCK */
__global__ void __launch_bounds__(BLOCK)
column_sum_kernel(xview X, int64_t n, int d, int log_b, double *sums)
{
	__shared__ double part[BLOCK / 32];
	int			j = blockIdx.x;
	double		s = 0;

	for (int64_t i = blockIdx.y * (int64_t) BLOCK + threadIdx.x; i < n; i += (int64_t) gridDim.y * BLOCK)
		s += X[pggpu_at(i, j, d, log_b)];
	for (int o = 16; o > 0; o >>= 1)
		s += __shfl_xor_sync(FULL, s, o);
	if ((threadIdx.x & 31) == 0)
		part[threadIdx.x >> 5] = s;
	__syncthreads();
	if (threadIdx.x == 0)
	{
		for (int w = 1; w < BLOCK / 32; w++)
			s += part[w];
		atomicAdd(&sums[j], s);
	}
}

/* the sums become means; and the largest |x_j - mu_j| (mode 1), or the copy (mode 2) */
__global__ void
centre_kernel(xview X, int64_t n, int d, int log_b, double *mu,
			  unsigned long long *maxabs_bits, __half *Xf, int64_t len, int mode)
{
	double		scale = mode == 2 ? copy_scale(maxabs_bits) : 1.0,
				hi = 0;

	if (mode == 0)
	{
		for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < d; j += gridDim.x * blockDim.x)
			mu[j] /= (double) n;
		return;
	}
	for (int64_t e = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; e < len;
		 e += (int64_t) gridDim.x * blockDim.x)
	{
		int64_t		i = (e / ((int64_t) d << log_b) << log_b) + (e & (((int64_t) 1 << log_b) - 1));
		int			j = (int) ((e >> log_b) % d);
		double		v = i < n ? X[e] - mu[j] : 0.0;

		if (mode == 1)
			hi = fmax(hi, fabs(v));
		else
			Xf[e] = __double2half(v * scale);	/* nearest */
	}
	if (mode == 1)
	{
		for (int o = 16; o > 0; o >>= 1)
			hi = fmax(hi, __shfl_xor_sync(FULL, hi, o));
		if ((threadIdx.x & 31) == 0)
			atomicMax(maxabs_bits, (unsigned long long) __double_as_longlong(hi));
	}
}

/* a warp a centroid: c~ (k x d, row-major), |c - mu|^2, and their largest (bits) */
__global__ void
centroid_f16_kernel(const double *__restrict__ C, int k, int d, const double *__restrict__ mu,
					 const unsigned long long *maxabs_bits, __half *Cf, double *nc,
					 unsigned long long *ncmax)
{
	int			c = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int			lane = threadIdx.x & 31;
	double		scale = copy_scale(maxabs_bits),
				s = 0;
	bool		wild = false;

	if (c >= k)
		return;
	for (int j = lane; j < d; j += 32)
	{
		double		v = C[(int64_t) c * d + j] - mu[j];

		s += v * v;
		wild |= !(fabs(v * scale) < 0x1p15);	/* a half's range (NaN too) */
		Cf[(int64_t) c * d + j] = wild ? __double2half(0.0) : __double2half(v * scale);
	}
	for (int o = 16; o > 0; o >>= 1)
	{
		s += __shfl_xor_sync(FULL, s, o);
		wild |= __shfl_xor_sync(FULL, (int) wild, o);
	}
	if (lane == 0)
	{
		nc[c] = s;
		/* a wild centroid makes the bound infinite: every row measured exactly */
		atomicMax(ncmax, (unsigned long long) __double_as_longlong(wild ? INFINITY : s));
	}
}

/*
 * |x - mu|^2 of every row, once per fit: the same sum as row_measure's norm
 * (columns in order, each operation rounded), so that the certifying test
 * is the one it made from the row's own read until 1.11
 */
__global__ void __launch_bounds__(BLOCK)
row_norms_kernel(xview X, int64_t n, int d, int log_b, const double *__restrict__ mu, double *nxc)
{
	for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x)
	{
		const int64_t at = pggpu_at(i, 0, d, log_b),
					xs = (int64_t) 1 << log_b;
		double		s = 0;

		for (int j = 0; j < d; j++)
		{
			double		y = X[at + j * xs] - mu[j];

			s = __dadd_rn(s, __dmul_rn(y, y));
		}
		nxc[i] = s;
	}
}

/* dist2[i] of every row, from its label and the centroids C that gave it (pggpu_gemm_dists) */
template <typename T>
__global__ void __launch_bounds__(BLOCK)
label_dists_kernel(const T *__restrict__ X, int64_t n, int d, int log_b, const double *__restrict__ C,
				   const int32_t *__restrict__ labels, double *dist2)
{
	for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x)
		dist2[i] = row_measure(X + pggpu_at(i, 0, d, log_b), (int64_t) 1 << log_b, C + (int64_t) labels[i] * d, NULL,
							   d, NULL);
}

/* U (rows x d, by columns: x_j of the t-th at U[t + j rows]) = the rows list[0 .. rows - 1] of X */
__global__ void
gather_kernel(xview X, int d, int log_b, const int64_t *__restrict__ list, int64_t rows, double *U)
{
	for (int64_t e = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; e < rows * d;
		 e += (int64_t) gridDim.x * blockDim.x)
	{
		int64_t		t = e % rows;
		int			j = (int) (e / rows);

		U[e] = X[pggpu_at(list[t], j, d, log_b)];
	}
}

/* gather_kernel's blocks for rows x d values */
static unsigned
gather_grid(int64_t rows, int d)
{
	int64_t		g = (rows * d + BLOCK - 1) / BLOCK;

	return (unsigned) (g < 8192 ? g : 8192);
}

/* ---- the workspace and the passes ----------------------------------------- */

/*
 * The workspace: the products of a chunk of rows (S: float64, or float32
 * with f16; a row's k adjacent), each row's two smallest and the best's
 * index (the float64 product's), |c|^2 (k) and their largest; then with
 * f16 |c - mu|^2 and their largest, the centroids' copy (k x d halves), mu
 * (d), the largest |x_j - mu_j|, a span's rows left to the float64
 * product and two counts (label_f16_kernel's), the rows gathered for it
 * (as many as S holds in float64), every row's |x - mu|^2 (8 bytes a row),
 * and the rows' copy (the tiles of X, halves: 2 bytes a value); and for
 * rows held as floats (f32), room for the tiles of a chunk widened to
 * doubles, the float64 product's operand (at most XD_BYTES, or one tile:
 * the chunks of whole tiles are cut to fit).
 */
#define XD_BYTES GEMM_S_BYTES
/*
 * The f16 route reads how many rows it left to the float64 product (a wait
 * for the GPU) once a span of chunks, up to this many rows (8 bytes a row
 * kept for the list).
 */
#define SPAN_ROWS ((int64_t) 1 << 20)
typedef struct gemm_layout
{
	size_t		s_bytes,
				top,
				nc,
				ncmax,
				nc32,
				ncmax32,
				cf,
				mu,
				maxabs,
				over,
				counts,
				u,
				nxc,
				xf,
				xd,
				total;
	int64_t		chunk_rows;		/* rows of a chunk (whole tiles, or R) */
	int64_t		cap_rows;		/* the most rows a chunk of this workspace has */
	int64_t		top_rows;		/* rows of the top-2 arrays: a chunk's, or gathered rows' */
	int64_t		span_rows;		/* f16: rows between two reads of the counts (chunks' worth) */
	bool		whole;			/* chunks of whole tiles */
	int64_t		u_rows;			/* gathered rows at once */
	int64_t		xd_tiles;		/* f32: tiles widened at once (the float64 chunks' most) */
} gemm_layout;

static size_t
up256(size_t b)
{
	return (b + 255) / 256 * 256;
}

/* rows of a chunk of S bytes of es-byte products: whole tiles where one fits, else multiples of 32 */
static int64_t
chunk_of(size_t s_bytes, size_t es, int k, int64_t B, bool *whole)
{
	int64_t		per = (int64_t) (s_bytes / es);

	*whole = per >= (int64_t) k * B;
	return *whole ? per / ((int64_t) k * B) * B : per / k / 32 * 32;
}

/*
 * es: the product's element size (float64 chunks in an f16 workspace: half
 * the rows); f32: the rows are held as floats or halves (widened into xd
 * for a float64 product)
 */
static gemm_layout
layout_of(int64_t n, int k, int d, int log_b, bool f16, size_t es, bool f32)
{
	const size_t ws_es = f16 ? sizeof(float) : sizeof(double);
	const int64_t B = (int64_t) 1 << log_b;
	const int64_t tiles = (n + B - 1) >> log_b;
	/*
	 * S holds the float64 products of every tile where that is within
	 * GEMM_S_BYTES, in either workspace: then a set's float64 pass is one
	 * chunk (a hierarchical group's 7,000 x 256, k = 141, was 4 chunks of a
	 * product, a top-2 and a certifying pass each, in turn: 4 x 46 us of
	 * certifying on 8 blocks, an iteration 0.58 ms on an H200)
	 */
	size_t		need = sizeof(double) * (size_t) k * (size_t) (tiles > 0 ? tiles * B : 1);
	size_t		s = need < GEMM_S_BYTES ? need : GEMM_S_BYTES;
	gemm_layout l;
	bool		w;

	if (s < sizeof(double) * 32 * (size_t) k)
		s = sizeof(double) * 32 * (size_t) k;
	l.s_bytes = up256(s);
	l.chunk_rows = chunk_of(l.s_bytes, es, k, B, &l.whole);
	l.cap_rows = chunk_of(l.s_bytes, ws_es, k, B, &w);
	l.span_rows = l.cap_rows;
	if (f16 && l.span_rows < SPAN_ROWS)
		l.span_rows = n < SPAN_ROWS ? (n > l.cap_rows ? n : l.cap_rows) : SPAN_ROWS;
	/* gathered rows: their products fill S, their values at most GEMM_S_BYTES */
	l.u_rows = (int64_t) (l.s_bytes / (sizeof(double) * k));
	if (l.u_rows > (int64_t) (GEMM_S_BYTES / (sizeof(double) * d)))
		l.u_rows = (int64_t) (GEMM_S_BYTES / (sizeof(double) * d));
	if (l.u_rows < 1)
		l.u_rows = 1;
	l.top_rows = l.cap_rows > l.u_rows ? l.cap_rows : l.u_rows;
	l.top = l.s_bytes;
	l.nc = l.top + up256((2 * sizeof(double) + sizeof(int32_t)) * (size_t) l.top_rows);
	l.ncmax = l.nc + up256(sizeof(double) * (size_t) k);
	l.nc32 = l.ncmax + 256;
	l.ncmax32 = l.nc32 + (f16 ? up256(sizeof(double) * (size_t) k) : 0);
	l.cf = l.ncmax32 + (f16 ? 256 : 0);
	l.mu = l.cf + (f16 ? up256(sizeof(__half) * (size_t) k * d) : 0);
	l.maxabs = l.mu + (f16 ? up256(sizeof(double) * (size_t) d) : 0);
	l.over = l.maxabs + (f16 ? 256 : 0);
	l.counts = l.over + (f16 ? up256(sizeof(int64_t) * (size_t) l.span_rows) : 0);
	l.u = l.counts + (f16 ? 256 : 0);
	l.nxc = l.u + (f16 ? up256(sizeof(double) * (size_t) l.u_rows * d) : 0);
	l.xf = l.nxc + (f16 ? up256(sizeof(double) * (size_t) (n > 0 ? n : 1)) : 0);
	l.xd = l.xf + up256(f16 ? sizeof(__half) * (size_t) (tiles > 0 ? tiles : 1) * ((size_t) d << log_b) : 0);
	l.xd_tiles = 0;
	if (f32)
	{
		l.xd_tiles = (int64_t) (XD_BYTES / (sizeof(double) * ((size_t) d << log_b)));
		l.xd_tiles = l.xd_tiles < 1 ? 1 : l.xd_tiles < tiles ? l.xd_tiles : tiles > 0 ? tiles : 1;
		if (es == sizeof(double) && l.whole && l.chunk_rows > l.xd_tiles * B)
			l.chunk_rows = l.xd_tiles * B;
	}
	l.total = l.xd + sizeof(double) * (size_t) l.xd_tiles * ((size_t) d << log_b);
	return l;
}

size_t
pggpu_gemm_workspace_bytes(int64_t n, int k, int d, int log_b, bool f16, bool f32)
{
	return layout_of(n, k, d, log_b, f16, f16 ? sizeof(float) : sizeof(double), f32).total;
}

pggpu_status
pggpu_gemm_prepare(pggpu_data *ds, int k, xview X, void *ws, cudaStream_t stream,
				   pggpu_error *err)
{
	const gemm_layout l = layout_of(ds->n, k, ds->d, ds->log_b, true, sizeof(float), X.f32 || X.f16);
	char	   *w = (char *) ws;
	double	   *mu = (double *) (w + l.mu);
	unsigned long long *maxabs = (unsigned long long *) (w + l.maxabs);
	const int64_t tiles = (ds->n + ((int64_t) 1 << ds->log_b) - 1) >> ds->log_b;
	const int64_t len = tiles * ((int64_t) ds->d << ds->log_b);
	int64_t		g = (ds->n + BLOCK - 1) / BLOCK;
	const unsigned grid = (unsigned) (len / BLOCK < 4096 ? len / BLOCK + 1 : 4096);

	CU(cudaMemsetAsync(mu, 0, sizeof(double) * ds->d, stream));
	CU(cudaMemsetAsync(maxabs, 0, sizeof(*maxabs), stream));
	if (ds->n == 0)
		return PGGPU_OK;
	/* d column blocks, each over enough row slabs to fill the GPU */
	g = g < 4096 / ds->d + 1 ? g : 4096 / ds->d + 1;
	column_sum_kernel<<<dim3((unsigned) ds->d, (unsigned) g), BLOCK, 0, stream>>>(X, ds->n, ds->d, ds->log_b, mu);
	LAUNCHED(column_sum_kernel);
	for (int mode = 0; mode < 3; mode++)
	{
		centre_kernel<<<mode == 0 ? 1 : grid, BLOCK, 0, stream>>>(X, ds->n, ds->d, ds->log_b, mu, maxabs,
																  (__half *) (w + l.xf), len, mode);
		LAUNCHED(centre_kernel);
	}
	g = (ds->n + BLOCK - 1) / BLOCK;
	row_norms_kernel<<<(unsigned) (g < 4096 ? g : 4096), BLOCK, 0, stream>>>(X, ds->n, ds->d, ds->log_b, mu,
																			  (double *) (w + l.nxc));
	LAUNCHED(row_norms_kernel);
	return PGGPU_OK;
}

pggpu_status
pggpu_gemm_dists(pggpu_data *ds, xview X, const double *C, const int32_t *labels, double *dist2,
				 cudaStream_t stream, pggpu_error *err)
{
	const int64_t g = (ds->n + BLOCK - 1) / BLOCK;
	const unsigned grid = (unsigned) (g < 8192 ? g : 8192);

	if (ds->n == 0)
		return PGGPU_OK;
	if (X.f16)
		label_dists_kernel<__half><<<grid, BLOCK, 0, stream>>>((const __half *) X.p, ds->n, ds->d, ds->log_b, C,
															   labels, dist2);
	else if (X.f32)
		label_dists_kernel<float><<<grid, BLOCK, 0, stream>>>((const float *) X.p, ds->n, ds->d, ds->log_b, C,
															  labels, dist2);
	else
		label_dists_kernel<double><<<grid, BLOCK, 0, stream>>>((const double *) X.p, ds->n, ds->d, ds->log_b, C,
															   labels, dist2);
	LAUNCHED(label_dists_kernel);
	return PGGPU_OK;
}

/* the top-2 arrays of a workspace */
#define TOP_A(w, l) ((double *) ((w) + (l).top))
#define TOP_B(w, l) (TOP_A(w, l) + (l).top_rows)
#define TOP_C(w, l) ((int32_t *) (TOP_B(w, l) + (l).top_rows))

/*
 * The f16 route, after a span's chunks: how many rows label_f16_kernel
 * could not certify (tally[0] += ), and those of them it left (over,
 * tally[1] += ) labelled by the float64 product, gathered u_rows at a time
 */
static pggpu_status
finish_span(pggpu_data *ds, cublasHandle_t h, xview X, const double *C, const gemm_layout *l, char *w,
			int32_t *labels, double *dist2, unsigned long long *changed, int64_t tally[2],
			cudaStream_t stream, pggpu_error *err)
{
	const int64_t *over = (const int64_t *) (w + l->over);
	unsigned int *counts = (unsigned int *) (w + l->counts);
	unsigned int got[2];
	double	   *U = (double *) (w + l->u);

	CU(cudaMemcpyAsync(got, counts, sizeof(got), cudaMemcpyDeviceToHost, stream));
	CU(cudaStreamSynchronize(stream));
	CU(cudaMemsetAsync(counts, 0, sizeof(got), stream));
	tally[0] += got[1];
	tally[1] += got[0];
	for (int64_t t0 = 0; t0 < got[0]; t0 += l->u_rows)
	{
		int64_t		rows = got[0] - t0 < l->u_rows ? got[0] - t0 : l->u_rows;
		pggpu_status ps;

		gather_kernel<<<gather_grid(rows, ds->d), BLOCK, 0, stream>>>(X, ds->d, ds->log_b, over + t0, rows, U);
		LAUNCHED(gather_kernel);
		if ((ps = pggpu_blas_row_products(h, false, C, ds->k, ds->d, U, (int) rows, 0, (int) rows, w, 0, 1,
										  err)) != PGGPU_OK)
			return ps;
		top2_kernel<double><<<warps_grid(rows), BLOCK, 0, stream>>>((const double *) w, rows, ds->k,
																	(const double *) (w + l->nc), 1.0,
																	TOP_A(w, *l), TOP_B(w, *l), TOP_C(w, *l));
		LAUNCHED(top2_kernel);
		listed_certify_kernel<<<warps_grid(rows), BLOCK, 0, stream>>>(
			U, rows, ds->d, over + t0, C, ds->k, (const double *) w, (const double *) (w + l->nc),
			(const unsigned long long *) (w + l->ncmax), TOP_A(w, *l), TOP_B(w, *l), TOP_C(w, *l),
			labels, dist2, changed);
		LAUNCHED(listed_certify_kernel);
	}
	return PGGPU_OK;
}

pggpu_status
pggpu_gemm_label(pggpu_data *ds, cublasHandle_t h, xview X, const double *C, bool f16_ws,
				 bool *f16, void *ws, bool measure, int32_t *labels, double *dist2, unsigned long long *changed,
				 int64_t tally_out[2], cudaStream_t stream, pggpu_error *err)
{
	const int	k = ds->k,
				d = ds->d;
	const int64_t B = (int64_t) 1 << ds->log_b;
	const int64_t n = ds->n;
	const bool	h16 = f16_ws && *f16;
	const gemm_layout l = layout_of(n, k, d, ds->log_b, f16_ws, h16 ? sizeof(float) : sizeof(double), X.f32 || X.f16);
	char	   *w = (char *) ws;
	double	   *xd = (double *) (w + l.xd);
	int64_t		rows,
				tally[2] = {0, 0},
				span0 = 0,		/* f16: the first row of the span being filled */
				widened = -1;	/* f32: the first tile xd holds */
	/*
	 * the interrupt callback between chunks once this much work (n k d) has
	 * been queued since the last call, the products counting a sixteenth as
	 * the tensor cores do (step.cu's RANGE_WORK): a wait a chunk (15 an
	 * iteration at 10^6 rows, k = 1024) left the GPU idle between them
	 */
	const double poll = 16 * step_range_work(ds);
	double		queued = 0;
	pggpu_status ps;

	CU(cudaMemsetAsync(w + l.ncmax, 0, sizeof(unsigned long long), stream));
	centroid_norms_kernel<<<warps_grid(k), BLOCK, 0, stream>>>(
		C, k, d, (double *) (w + l.nc), (unsigned long long *) (w + l.ncmax));
	LAUNCHED(centroid_norms_kernel);
	if (h16)
	{
		CU(cudaMemsetAsync(w + l.ncmax32, 0, sizeof(unsigned long long), stream));
		centroid_f16_kernel<<<(unsigned) ((k + 3) / 4), 128, 0, stream>>>(
			C, k, d, (const double *) (w + l.mu), (const unsigned long long *) (w + l.maxabs),
			(__half *) (w + l.cf), (double *) (w + l.nc32), (unsigned long long *) (w + l.ncmax32));
		LAUNCHED(centroid_f16_kernel);
		CU(cudaMemsetAsync(w + l.counts, 0, 2 * sizeof(unsigned int), stream));
	}
	for (int64_t g0 = 0; g0 < n; g0 += rows)
	{
		const int64_t at = (g0 >> ds->log_b) * B * d + (g0 & (B - 1));	/* the chunk's first x */

		/* whole tiles; or up to chunk_rows rows, not past the tile's end */
		rows = n - g0 < l.chunk_rows ? n - g0 : l.chunk_rows;
		if (!l.whole)
		{
			/* a tile in parts of even size (not 3328 rows and 768: a product and a pass on too few rows) */
			const int64_t parts = (B + l.chunk_rows - 1) / l.chunk_rows,
						even = ((B + parts - 1) / parts + 31) / 32 * 32;

			if (rows > even)
				rows = even;
			if (rows > B - (g0 & (B - 1)))
				rows = B - (g0 & (B - 1));
		}
		if (h16 && g0 - span0 + rows > l.span_rows)
		{
			/* the span is done: its rows left over labelled (S is free: the products are spent) */
			if ((ps = finish_span(ds, h, X, C, &l, w, labels, dist2, changed, tally, stream, err)) != PGGPU_OK)
				return ps;
			span0 = g0;
		}
		if (g0 > 0 && ds->interrupt && queued >= poll)
		{
			/* (what is queued runs on: free_km syncs before it frees) */
			CU(cudaStreamSynchronize(stream));
			ds->interrupt(ds->interrupt_arg);
			queued = 0;
		}
		queued += (double) rows * k * d;
		/* the float64 product of rows held as floats or halves: the chunk's tiles widened into xd */
		const double *xa = (const double *) X.p + at;

		if (!h16 && (X.f32 || X.f16))
		{
			const int64_t t0 = g0 >> ds->log_b,
						nt = ((g0 + rows - 1) >> ds->log_b) - t0 + 1;
			const unsigned wg = (unsigned) ((nt * B * d + BLOCK - 1) / BLOCK < 8192 ?
											(nt * B * d + BLOCK - 1) / BLOCK : 8192);

			if (widened != t0 && X.f16)
			{
				widen_halves_kernel<<<wg, BLOCK, 0, stream>>>((const __half *) X.p + t0 * B * d, xd, nt * B * d);
				LAUNCHED(widen_halves_kernel);
				widened = t0;
			}
			else if (widened != t0)
			{
				widen_kernel<<<wg, BLOCK, 0, stream>>>((const float *) X.p + t0 * B * d, xd, nt * B * d);
				LAUNCHED(widen_kernel);
				widened = t0;
			}
			xa = xd + (at - t0 * B * d);
		}
		/* whole tiles: a batch a tile (its B rows' products B k apart); else one batch */
		ps = pggpu_blas_row_products(h, h16, h16 ? (const void *) (w + l.cf) : (const void *) C, k, d,
									 h16 ? (const void *) ((const __half *) (w + l.xf) + at) :
									 (const void *) xa, (int) B, l.whole ? B * d : 0,
									 l.whole ? (int) B : (int) rows, w, l.whole ? (int64_t) k * B : 0,
									 l.whole ? (int) ((rows + B - 1) / B) : 1, err);
		if (ps != PGGPU_OK)
			return ps;
		if (!h16)
		{
			top2_kernel<double><<<warps_grid(rows), BLOCK, 0, stream>>>(
				(const double *) w, rows, k, (const double *) (w + l.nc), 1.0, TOP_A(w, l), TOP_B(w, l),
				TOP_C(w, l));
			LAUNCHED(top2_kernel);
			if (X.f16)
				certify_kernel<__half><<<(unsigned) ((rows + BLOCK - 1) / BLOCK), BLOCK, 0, stream>>>(
					(const __half *) X.p, g0, rows, d, ds->log_b, C, k, (const double *) w,
					(const double *) (w + l.nc), (const unsigned long long *) (w + l.ncmax), TOP_A(w, l),
					TOP_B(w, l), TOP_C(w, l), labels, dist2, changed);
			else if (X.f32)
				certify_kernel<float><<<(unsigned) ((rows + BLOCK - 1) / BLOCK), BLOCK, 0, stream>>>(
					(const float *) X.p, g0, rows, d, ds->log_b, C, k, (const double *) w,
					(const double *) (w + l.nc), (const unsigned long long *) (w + l.ncmax), TOP_A(w, l),
					TOP_B(w, l), TOP_C(w, l), labels, dist2, changed);
			else
				certify_kernel<double><<<(unsigned) ((rows + BLOCK - 1) / BLOCK), BLOCK, 0, stream>>>(
					(const double *) X.p, g0, rows, d, ds->log_b, C, k, (const double *) w,
					(const double *) (w + l.nc), (const unsigned long long *) (w + l.ncmax), TOP_A(w, l),
					TOP_B(w, l), TOP_C(w, l), labels, dist2, changed);
			LAUNCHED(certify_kernel);
			continue;
		}
		/* the chunk's rows labelled while its products are in hand */
		pggpu_label_f16(X, (const float *) w, (const double *) (w + l.nc32),
						(const unsigned long long *) (w + l.ncmax32), (const unsigned long long *) (w + l.maxabs),
						(const double *) (w + l.nxc), (int64_t *) (w + l.over), (unsigned int *) (w + l.counts),
						g0, rows, k, d, ds->log_b, C, labels, changed, stream);
		LAUNCHED(label_f16_kernel);
	}
	if (h16 && n > span0 &&
		(ps = finish_span(ds, h, X, C, &l, w, labels, dist2, changed, tally, stream, err)) != PGGPU_OK)
		return ps;
	/* the certain rows' distances, where wanted (the uncertain ones' again: the same) */
	if (h16 && measure && (ps = pggpu_gemm_dists(ds, X, C, labels, dist2, stream, err)) != PGGPU_OK)
		return ps;
	if (h16 && (2 * tally[1] > n || (2 * tally[0] > n && k <= F16_UNCERTAIN_K)))
		*f16 = false;
	tally_out[0] = h16 ? tally[0] : -1;
	tally_out[1] = h16 ? tally[1] : -1;
	return PGGPU_OK;
}
