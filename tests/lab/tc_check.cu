/*
 * tc_check.cu - exactness test and benchmark of the tensor-core assignment
 * (cuda/gpu/tc_*.cu) against a plain float64 reference kernel with the
 * reference arithmetic (sq_term, lowest index on ties).  A lab program: it
 * builds the tensor-core files with -DPGGPU_TC_LAB (the shapes the library
 * leaves out, and the hooks below), and plans each call with route.c's
 * planner, forcing the tensor cores (and a shape, a precision) as a test.
 *
 *   make lab     (tests/lab/tc_check; the Makefile's rule)
 *   ./tc_check            exactness: many shapes and data kinds; labels equal,
 *                         dist2 bit-identical, changed count right
 *   ./tc_check --quick    the same without N = 10^6
 *   ./tc_check --small    72 cases (for compute-sanitizer)
 *   ./tc_check --bench    N = 10^7: ms per call against the reference kernel,
 *                         fallback fraction, kernel shapes
 *
 * Data is generated on the GPU from counter-based hashes: every case is
 * reproducible from its printed parameters.
 */
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tc.cuh"

/* the lab's hooks in tc_assign.cu (PGGPU_TC_LAB) */
unsigned long long pggpu_tc_lab_fallbacks(const void *workspace);
void		pggpu_tc_lab_stages(int mask);

/*
 * device.cu's, which the lab does not link (one thread here: the attribute
 * set as asked)
 */
cudaError_t
gpu_smem_allow(const void *fn, size_t bytes)
{
	return cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int) bytes);
}

/* the tensor cores forced (tc_resident where it has a kernel, else tc_scan), and a shape */
static pggpu_route_force lab_force = {PGGPU_LABEL_TC_RESIDENT, 0, 0, 0, false};

static void
lab_variant(int mt, int nw, int prec)
{
	lab_force.tc_mt = mt;
	lab_force.tc_nw = nw;
	lab_force.tc_prec = prec;
}

/* the call's route, as the library plans it (the GPU's shape asked once) */
static const pggpu_route *
lab_route(int64_t n, int k, int d)
{
	static pggpu_gpu_shape shape;
	static pggpu_route r;

	if (shape.sm_count == 0)
	{
		cudaDeviceGetAttribute(&shape.sm_count, cudaDevAttrMultiProcessorCount, 0);
		cudaDeviceGetAttribute(&shape.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
	}
	pggpu_plan_step(n, k, d, &shape, 0, 1, true, &lab_force, &r);
	return &r;
}

/* the library's own choice: tensor cores or not */
static bool
tc_wanted(int k, int d)
{
	static const pggpu_route_force none = {};
	pggpu_gpu_shape shape = {132, 232448};
	pggpu_route r;

	pggpu_plan_step(1000000, k, d, &shape, 0, 1, true, &none, &r);
	return r.label != PGGPU_LABEL_LLOYD;
}

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
	exit(2); } } while (0)

/* ---- data ---------------------------------------------------------------- */

enum
{
	K_UNIFORM, K_BLOBS, K_DUPROWS, K_DUPCENT, K_CEQROWS, K_OFFSET, K_EXTREME,
	K_ROWSCALE, K_TIES, K_GAUSS, NKINDS
};
static const char *kind_name[NKINDS] = {
	"uniform", "blobs", "dup-rows", "dup-centroids", "centroids=rows", "offset1e6",
	"extreme1e150", "row-scales", "exact-ties", "gauss"
};

__host__ __device__ static uint64_t
mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

__device__ static double
u01(uint64_t key, uint64_t a, uint64_t b)
{
	return (double) (mix64(key ^ mix64(a * 0x100000001b3ULL + b)) >> 11) * 0x1p-53;
}

__device__ static double
gauss(uint64_t key, uint64_t a, uint64_t b)
{
	double		u1 = u01(key, a, 2 * b) + 0x1p-54;
	double		u2 = u01(key, a, 2 * b + 1);

	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

__device__ static double
blob_center(uint64_t seed, uint64_t b, int j)
{
	return 10.0 * u01(seed + 1, b, j);
}

__device__ static double
xval(int kind, uint64_t seed, int64_t i, int j)
{
	switch (kind)
	{
		case K_UNIFORM:
		case K_DUPCENT:
			return u01(seed, i, j);
		case K_BLOBS:
		case K_CEQROWS:
			return blob_center(seed, mix64(seed ^ i) % 16, j) + 0.5 * gauss(seed + 2, i, j);
		case K_DUPROWS:
			return u01(seed, i % 5, j);
		case K_OFFSET:
			return 1e6 + u01(seed, i, j);
		case K_EXTREME:
			return (u01(seed, i, j) - 0.5) * exp10(floor(u01(seed + 3, i, j) * 301.0) - 150.0);
		case K_ROWSCALE:
			{
				uint64_t	s = mix64(seed ^ (i * 3 + 1)) % 4;

				return gauss(seed, i, j) * (s == 0 ? 1e150 : s == 1 ? 1e-150 : 1.0);
			}
		case K_TIES:
			return floor(u01(seed, i, j) * 3.0);
		default:
			return gauss(seed, i, j);
	}
}

__device__ static double
cval(int kind, uint64_t seed, int64_t c, int j, int64_t n)
{
	switch (kind)
	{
		case K_BLOBS:
			return blob_center(seed, c % 16, j) + 0.5 * gauss(seed + 9, c, j);
		case K_DUPCENT:
			return u01(seed + 7, c / 2, j);	/* centroids 2m and 2m+1 equal */
		case K_CEQROWS:
			return xval(K_CEQROWS, seed, (c * 7919) % n, j);
		case K_OFFSET:
			return 1e6 + u01(seed + 7, c, j);
		case K_EXTREME:
			return xval(K_EXTREME, seed + 7, c, j);
		case K_ROWSCALE:
		case K_GAUSS:
			return gauss(seed + 7, c, j);
		case K_TIES:
			return floor(u01(seed + 7, c, j) * 3.0);
		default:
			return u01(seed + 7, c, j);
	}
}

/* every element of the allocated tiles; rows >= n are NaN (never to be read) */
__global__ void
gen_x(double *X, int64_t n, int64_t rows_alloc, int d, int log_b, int kind, uint64_t seed)
{
	int64_t		total = rows_alloc * d;

	for (int64_t e = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; e < total;
		 e += (int64_t) gridDim.x * blockDim.x)
	{
		int64_t		b = (int64_t) 1 << log_b;
		int64_t		tile = e / (b * d);
		int64_t		rem = e % (b * d);
		int			j = (int) (rem / b);
		int64_t		i = tile * b + rem % b;

		X[e] = i < n ? xval(kind, seed, i, j) : nan("");
	}
}

__global__ void
gen_c(double *C, int k, int d, int64_t n, int kind, uint64_t seed)
{
	for (int64_t e = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; e < (int64_t) k * d;
		 e += (int64_t) gridDim.x * blockDim.x)
		C[e] = cval(kind, seed, e / d, (int) (e % d), n);
}

/* ---- the reference --------------------------------------------------------- */

__device__ __forceinline__ double
sq_term(double acc, double x, double c)
{
	double		diff = __dsub_rn(x, c);

	return __dadd_rn(acc, __dmul_rn(diff, diff));
}

#define REF_BLOCK 256
#define REF_TK 8

/*
 * Thread per row; TK centroids at a time (independent chains), each summed
 * over j in order; strict < in index order: the reference's first minimum.
 * DR > 0: the row in registers (d <= DR).
 */
template <int DR>
__global__ void __launch_bounds__(REF_BLOCK)
ref_kernel(const double *__restrict__ X, int64_t n, int d, int log_b,
		   const double *__restrict__ C, int k, int32_t *labels, double *dist2)
{
	extern __shared__ double sC[];	/* chunk of cc centroids x d */
	int			cc = (int) (6144 / d) / REF_TK * REF_TK;
	int64_t		i = blockIdx.x * (int64_t) REF_BLOCK + threadIdx.x;
	bool		active = i < n;
	int64_t		b = (int64_t) 1 << log_b;
	const double *xi = X + (active ? (i >> log_b) * b * d + (i & (b - 1)) : 0);
	double		xr[DR > 0 ? DR : 1];
	double		best = INFINITY;
	int			bc = 0;

	if (cc < REF_TK)
		cc = REF_TK;
	if (DR > 0)
#pragma unroll
		for (int j = 0; j < DR; j++)
			xr[j] = active && j < d ? xi[(int64_t) j << log_b] : 0.0;
	for (int c0 = 0; c0 < k; c0 += cc)
	{
		int			nc = min(cc, k - c0);

		__syncthreads();
		for (int e = threadIdx.x; e < cc * d; e += REF_BLOCK)
			sC[e] = e < nc * d ? C[(int64_t) c0 * d + e] : 0.0;
		__syncthreads();
		if (!active)
			continue;
		for (int t0 = 0; t0 < nc; t0 += REF_TK)
		{
			double		acc[REF_TK];

#pragma unroll
			for (int t = 0; t < REF_TK; t++)
				acc[t] = 0.0;
			if (DR > 0)
			{
#pragma unroll
				for (int j = 0; j < DR; j++)
					if (j < d)
#pragma unroll
						for (int t = 0; t < REF_TK; t++)
							acc[t] = sq_term(acc[t], xr[j], sC[(t0 + t) * d + j]);
			}
			else
				for (int j = 0; j < d; j++)
				{
					double		xv = xi[(int64_t) j << log_b];

#pragma unroll
					for (int t = 0; t < REF_TK; t++)
						acc[t] = sq_term(acc[t], xv, sC[(t0 + t) * d + j]);
				}
#pragma unroll
			for (int t = 0; t < REF_TK; t++)
				if (t0 + t < nc && acc[t] < best)
				{
					best = acc[t];
					bc = c0 + t0 + t;
				}
		}
	}
	if (active)
	{
		labels[i] = bc;
		dist2[i] = best;
	}
}

static void
run_ref(const double *X, int64_t n, int d, int log_b, const double *C, int k,
		int32_t *labels, double *dist2)
{
	unsigned	grid = (unsigned) ((n + REF_BLOCK - 1) / REF_BLOCK);
	int			cc = std::max(REF_TK, (6144 / d) / REF_TK * REF_TK);
	size_t		shmem = sizeof(double) * cc * d;

	if (d <= 4)
		ref_kernel<4><<<grid, REF_BLOCK, shmem>>>(X, n, d, log_b, C, k, labels, dist2);
	else if (d <= 8)
		ref_kernel<8><<<grid, REF_BLOCK, shmem>>>(X, n, d, log_b, C, k, labels, dist2);
	else if (d <= 16)
		ref_kernel<16><<<grid, REF_BLOCK, shmem>>>(X, n, d, log_b, C, k, labels, dist2);
	else if (d <= 32)
		ref_kernel<32><<<grid, REF_BLOCK, shmem>>>(X, n, d, log_b, C, k, labels, dist2);
	else
	{
		CK(cudaFuncSetAttribute(ref_kernel<0>, cudaFuncAttributeMaxDynamicSharedMemorySize,
								(int) shmem));
		ref_kernel<0><<<grid, REF_BLOCK, shmem>>>(X, n, d, log_b, C, k, labels, dist2);
	}
	CK(cudaPeekAtLastError());
}

/* ---- checks ------------------------------------------------------------------ */

__global__ void
old_labels(int32_t *labels, int64_t n, int k, uint64_t seed)
{
	for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
		labels[i] = (int32_t) (mix64(seed ^ (uint64_t) i) % (uint64_t) (k + 2)) - 1;
}

struct cmp_out
{
	unsigned long long label_bad;
	unsigned long long dist_bad;
	unsigned long long changed;	/* rows where old != reference */
	unsigned long long first_bad;
};

__global__ void
compare(const int32_t *lab, const double *d2, const int32_t *rlab, const double *rd2,
		const int32_t *old, int64_t n, cmp_out *out)
{
	for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
	{
		bool		lb = lab != NULL && lab[i] != rlab[i];
		bool		db = d2 != NULL &&
			__double_as_longlong(d2[i]) != __double_as_longlong(rd2[i]);

		if (lb)
			atomicAdd(&out->label_bad, 1ULL);
		if (db)
			atomicAdd(&out->dist_bad, 1ULL);
		if (lb || db)
			atomicMin(&out->first_bad, (unsigned long long) i);
		if (old != NULL && old[i] != rlab[i])
			atomicAdd(&out->changed, 1ULL);
	}
}

static cmp_out
run_compare(const int32_t *lab, const double *d2, const int32_t *rlab, const double *rd2,
			const int32_t *old, int64_t n, cmp_out *dev)
{
	cmp_out		h = {0, 0, 0, ~0ULL};

	CK(cudaMemcpy(dev, &h, sizeof(h), cudaMemcpyHostToDevice));
	compare<<<1024, 256>>>(lab, d2, rlab, rd2, old, n, dev);
	CK(cudaPeekAtLastError());
	CK(cudaMemcpy(&h, dev, sizeof(h), cudaMemcpyDeviceToHost));
	return h;
}

static int64_t
rows_alloc(int64_t n, int log_b)
{
	int64_t		b = (int64_t) 1 << log_b;

	return (n + b - 1) / b * b;
}

struct bufs
{
	double	   *X, *C, *d2, *rd2;
	int32_t    *lab, *rlab, *old;
	void	   *ws;
	unsigned long long *changed;
	cmp_out    *cmp;
};

static int
check_case(bufs &B, int64_t n, int d, int k, int kind, int log_b, uint64_t seed, bool verbose)
{
	int64_t		ra = rows_alloc(n, log_b);
	unsigned long long ch0 = 12345, ch;
	int			bad = 0;

	gen_x<<<2048, 256>>>(B.X, n, ra, d, log_b, kind, seed);
	gen_c<<<256, 256>>>(B.C, k, d, n, kind, seed);
	CK(cudaPeekAtLastError());
	run_ref(B.X, n, d, log_b, B.C, k, B.rlab, B.rd2);
	old_labels<<<1024, 256>>>(B.old, n, k, seed);
	CK(cudaMemcpy(B.lab, B.old, sizeof(int32_t) * n, cudaMemcpyDeviceToDevice));
	CK(cudaMemset(B.d2, 0xff, sizeof(double) * n));	/* NaN: unwritten rows show */
	CK(cudaMemcpy(B.changed, &ch0, sizeof(ch0), cudaMemcpyHostToDevice));
	CK(pggpu_tc_assign(lab_route(n, k, d), xview{B.X, false}, n, d, log_b, B.C, k, B.ws, B.lab, B.d2, B.changed, 0));
	CK(cudaDeviceSynchronize());
	CK(cudaMemcpy(&ch, B.changed, sizeof(ch), cudaMemcpyDeviceToHost));

	unsigned long long fb = pggpu_tc_lab_fallbacks(B.ws);
	cmp_out		r = run_compare(B.lab, B.d2, B.rlab, B.rd2, B.old, n, B.cmp);

	if (r.label_bad || r.dist_bad || ch - ch0 != r.changed)
		bad = 1;

	/* second call: labels are already right, nothing changes */
	CK(cudaMemcpy(B.changed, &ch0, sizeof(ch0), cudaMemcpyHostToDevice));
	CK(cudaMemset(B.d2, 0xff, sizeof(double) * n));
	CK(pggpu_tc_assign(lab_route(n, k, d), xview{B.X, false}, n, d, log_b, B.C, k, B.ws, B.lab, B.d2, B.changed, 0));
	CK(cudaDeviceSynchronize());

	unsigned long long ch2;

	CK(cudaMemcpy(&ch2, B.changed, sizeof(ch2), cudaMemcpyDeviceToHost));
	cmp_out		r2 = run_compare(B.lab, B.d2, B.rlab, B.rd2, NULL, n, B.cmp);

	if (r2.label_bad || r2.dist_bad || ch2 != ch0)
		bad = 1;
	if (bad || verbose)
	{
		printf("%s n=%lld d=%d k=%d kind=%s log_b=%d: labels bad %llu, dist2 bad %llu, "
			   "changed %llu (want %llu), again: bad %llu/%llu changed %llu, fallbacks %llu",
			   bad ? "FAIL" : "ok  ", (long long) n, d, k, kind_name[kind], log_b,
			   r.label_bad, r.dist_bad, ch - ch0, r.changed, r2.label_bad, r2.dist_bad,
			   ch2 - ch0, fb);
		if (r.first_bad != ~0ULL)
		{
			int32_t		l1, l2;
			double		a1, a2;

			CK(cudaMemcpy(&l1, B.lab + r.first_bad, 4, cudaMemcpyDeviceToHost));
			CK(cudaMemcpy(&l2, B.rlab + r.first_bad, 4, cudaMemcpyDeviceToHost));
			CK(cudaMemcpy(&a1, B.d2 + r.first_bad, 8, cudaMemcpyDeviceToHost));
			CK(cudaMemcpy(&a2, B.rd2 + r.first_bad, 8, cudaMemcpyDeviceToHost));
			printf(" [row %llu: %d %.17g, reference %d %.17g]", r.first_bad, l1, a1, l2, a2);
		}
		printf("\n");
	}
	return bad;
}

static void
alloc_bufs(bufs &B, int64_t max_elems, int64_t max_n, int max_k, int max_d, size_t ws)
{
	CK(cudaMalloc(&B.X, sizeof(double) * max_elems));
	CK(cudaMalloc(&B.C, sizeof(double) * (size_t) max_k * max_d));
	CK(cudaMalloc(&B.d2, sizeof(double) * max_n));
	CK(cudaMalloc(&B.rd2, sizeof(double) * max_n));
	CK(cudaMalloc(&B.lab, sizeof(int32_t) * max_n));
	CK(cudaMalloc(&B.rlab, sizeof(int32_t) * max_n));
	CK(cudaMalloc(&B.old, sizeof(int32_t) * max_n));
	CK(cudaMalloc(&B.ws, ws));
	CK(cudaMalloc(&B.changed, sizeof(unsigned long long)));
	CK(cudaMalloc(&B.cmp, sizeof(cmp_out)));
}

/*
 * The f16 bound counts subnormal halves as exact operands (as the bit-accurate
 * models of the tensor cores do): check that the mma does not flush them.
 * A = 2^-24 (the least subnormal) everywhere, B = 2^10: each of the 16
 * products is 2^-14, the sum 2^-10 exactly.
 */
__global__ void
subnormal_probe(float *out)
{
	uint32_t	a = 0x00010001u,
				b = 0x64006400u;
	float		c[4] = {0, 0, 0, 0};

	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
				 "{%0,%1,%2,%3}, {%4,%4,%4,%4}, {%5,%5}, {%0,%1,%2,%3};"
				 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
				 : "r"(a), "r"(b));
	for (int e = 0; e < 4; e++)
		out[threadIdx.x * 4 + e] = c[e];
}

static bool
subnormals_exact(void)
{
	float	   *dev,
				h[128];
	bool		ok = true;

	CK(cudaMalloc(&dev, sizeof(h)));
	subnormal_probe<<<1, 32>>>(dev);
	CK(cudaMemcpy(h, dev, sizeof(h), cudaMemcpyDeviceToHost));
	CK(cudaFree(dev));
	for (int e = 0; e < 128; e++)
		ok = ok && h[e] == 0x1p-10f;
	printf("f16 mma, subnormal operands: %s (%g, want %g)\n", ok ? "exact" : "NOT EXACT",
		   (double) h[0], 0x1p-10);
	return ok;
}

/* a few cases, for compute-sanitizer */
static int
small(void)
{
	bufs		B;
	int			failed = 0,
				passed = 0;

	size_t		ws = 0;

	for (int d : {2, 8, 33})
		ws = std::max(ws, pggpu_tc_workspace_bytes(100003, 256, d));
	alloc_bufs(B, rows_alloc(100003, 10) * 33, 100003, 256, 33, ws);
	for (int prec = 1; prec <= 2; prec++)
	{
		lab_variant(0, 0, prec);
		for (int64_t n : {1000, 100003})
			for (int d : {2, 8, 33})
				for (int k : {7, 256})
					for (int kind : {K_BLOBS, K_DUPCENT, K_EXTREME})
						if (check_case(B, n, d, k, kind, n == 1000 ? 7 : 10, 5 + kind, false))
							failed++;
						else
							passed++;
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

static int
exactness(bool quick)
{
	const int64_t Ns[] = {1, 31, 1000, 100003, 1000000};
	const int	logbs[] = {16, 16, 7, 10, 16};
	const int	ds[] = {1, 2, 3, 8, 9, 32, 33, 128};
	const int	kk[] = {1, 2, 7, 64, 256, 1024};
	int			nN = quick ? 4 : 5;
	int64_t		max_elems = 0;
	size_t		ws = 0;
	bufs		B;
	int			passed = 0,
				failed = 0;

	for (int a = 0; a < nN; a++)
		for (int d : ds)
		{
			max_elems = std::max(max_elems, rows_alloc(Ns[a], logbs[a]) * d);
			for (int k : kk)
				ws = std::max(ws, pggpu_tc_workspace_bytes(Ns[a], k, d));
		}
	alloc_bufs(B, max_elems, Ns[nN - 1], 1024, 128, ws);
	if (!subnormals_exact())
		failed++;

	for (int prec = 1; prec <= 2; prec++)
	{
		uint64_t	seed = 1;

		lab_variant(0, 0, prec);
		for (int a = 0; a < nN; a++)
		{
			int			f0 = failed;

			for (int d : ds)
				for (int k : kk)
					for (int kind = 0; kind < NKINDS; kind++)
					{
						if (check_case(B, Ns[a], d, k, kind, logbs[a], seed++, false))
							failed++;
						else
							passed++;
					}
			printf("%s n=%lld: %d failed\n", prec == 1 ? "tf32" : "f16", (long long) Ns[a],
				   failed - f0);
			fflush(stdout);
		}
	}
	lab_variant(0, 0, 0);
	/* a full fallback list: the exact kernel finds the rows by their sentinels */
	for (int kind : {K_DUPCENT, K_TIES})
		if (check_case(B, Ns[nN - 1], 8, 64, kind, 16, 99 + kind, true))
			failed++;
		else
			passed++;
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

/* ---- benchmark --------------------------------------------------------------- */

/* the tensor ceiling for mma.sync m16n8k8 tf32: 8 independent chains a warp */
__global__ void
mma_peak(float *out, int iters)
{
	uint32_t	a[4],
				b0,
				b1;
	float		c[8][4];
	int			lane = threadIdx.x & 31;

	for (int e = 0; e < 4; e++)
		a[e] = __float_as_uint(1.0f + lane * 0x1p-10f + e * 0x1p-12f) & ~0x1fffu;
	b0 = __float_as_uint(0.5f + lane * 0x1p-11f) & ~0x1fffu;
	b1 = __float_as_uint(0.25f + lane * 0x1p-11f) & ~0x1fffu;
	for (int u = 0; u < 8; u++)
		for (int e = 0; e < 4; e++)
			c[u][e] = 0;
	for (int i = 0; i < iters; i++)
#pragma unroll
		for (int u = 0; u < 8; u++)
			asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
						 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
						 : "+f"(c[u][0]), "+f"(c[u][1]), "+f"(c[u][2]), "+f"(c[u][3])
						 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
	float		sum = 0;

	for (int u = 0; u < 8; u++)
		for (int e = 0; e < 4; e++)
			sum += c[u][e];
	out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

static float
median(std::vector<float> v)
{
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

/* one run of f on the default stream, timed by events, in ms */
template <typename F>
static float
timed(cudaEvent_t e0, cudaEvent_t e1, F f)
{
	float		ms;

	CK(cudaEventRecord(e0));
	f();
	CK(cudaEventRecord(e1));
	CK(cudaEventSynchronize(e1));
	CK(cudaEventElapsedTime(&ms, e0, e1));
	return ms;
}

static int
bench(void)
{
	const int64_t n = 10000000;
	const int	log_b = 20;
	const int	ds[] = {2, 8, 32};
	const int	kk[] = {8, 32, 64, 128, 256, 1024};
	int64_t		ra = rows_alloc(n, log_b);
	bufs		B;
	cudaEvent_t e0, e1;
	int			bad = 0;
	cudaDeviceProp prop;

	CK(cudaGetDeviceProperties(&prop, 0));
	printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
	alloc_bufs(B, ra * 32, n, 1024, 32, pggpu_tc_workspace_bytes(n, 1024, 32));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));

	/* the HBM ceiling: a large device-to-device copy (bytes read + written) */
	{
		size_t		bytes = sizeof(double) * ra * 16;
		std::vector<float> t;

		for (int r = 0; r < 6; r++)
		{
			float		ms = timed(e0, e1, [&] {
				CK(cudaMemcpyAsync((char *) B.X + bytes, B.X, bytes, cudaMemcpyDeviceToDevice));
			});

			if (r > 0)
				t.push_back(ms);
		}
		printf("device copy: %.0f GB/s (read + write)\n", 2.0 * bytes / median(t) / 1e6);
	}
	{
		int			iters = 4096,
					blocks = prop.multiProcessorCount * 4;
		float		ms;
		int			clk;

		mma_peak<<<blocks, 512>>>((float *) B.d2, 16);
		CK(cudaEventRecord(e0));
		mma_peak<<<blocks, 512>>>((float *) B.d2, iters);
		CK(cudaEventRecord(e1));
		CK(cudaEventSynchronize(e1));
		CK(cudaEventElapsedTime(&ms, e0, e1));
		CK(cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0));

		double		mmas = (double) blocks * 16 * iters * 8;

		printf("mma.sync m16n8k8 tf32: %.0f TFLOPS, %.2f per SM per clock at %.0f MHz\n",
			   mmas * 2048 / ms / 1e9, mmas / prop.multiProcessorCount / (ms * 1e-3) / (clk * 1e3),
			   clk / 1e3);
	}

	printf("(tc_ms: a call; main_ms: its first pass alone; cand_ms: the candidate pass;\n"
		   " ref_ms: the float64 reference kernel)\n");
	printf("%3s %5s %-12s %8s %8s %8s %8s %8s %9s %5s\n", "d", "k", "shape", "tc_ms", "main_ms",
		   "cand_ms", "ref_ms", "speedup", "uncertain", "bad");
	for (int d : ds)
	{
		gen_x<<<4096, 256>>>(B.X, n, ra, d, log_b, K_BLOBS, 42);
		CK(cudaPeekAtLastError());
		for (int k : kk)
		{
			gen_c<<<256, 256>>>(B.C, k, d, n, K_CEQROWS, 42);
			CK(cudaPeekAtLastError());

			std::vector<float> tr;

			for (int r = 0; r < 4; r++)
			{
				float		ms = timed(e0, e1, [&] { run_ref(B.X, n, d, log_b, B.C, k, B.rlab, B.rd2); });

				if (r > 0)
					tr.push_back(ms);
			}

			/* shape: m-tiles, warps, precision (1 tf32, 2 f16); 0: automatic */
			int			shapes[5][3] = {{0, 0, 0}, {2, 16, 1}, {2, 16, 2}, {2, 8, 2}, {4, 8, 2}};
			int			nshapes = d <= 10 ? 5 : 3;

			for (int s = 0; s < nshapes; s++)
			{
				std::vector<float> tt;
				unsigned long long ch0 = 0;
				auto		call = [&] {
					CK(pggpu_tc_assign(lab_route(n, k, d), xview{B.X, false}, n, d, log_b, B.C, k, B.ws, B.lab, B.d2, B.changed, 0));
				};

				lab_variant(shapes[s][0], shapes[s][1], shapes[s][2]);
				old_labels<<<1024, 256>>>(B.old, n, k, 7);
				CK(cudaMemcpy(B.lab, B.old, sizeof(int32_t) * n, cudaMemcpyDeviceToDevice));
				CK(cudaMemset(B.d2, 0xff, sizeof(double) * n));
				CK(cudaMemcpy(B.changed, &ch0, sizeof(ch0), cudaMemcpyHostToDevice));
				call();
				CK(cudaDeviceSynchronize());

				unsigned long long ch;

				CK(cudaMemcpy(&ch, B.changed, sizeof(ch), cudaMemcpyDeviceToHost));

				cmp_out		r = run_compare(B.lab, B.d2, B.rlab, B.rd2, B.old, n, B.cmp);
				unsigned long long fb = pggpu_tc_lab_fallbacks(B.ws);
				unsigned long long nbad = r.label_bad + r.dist_bad + (ch != r.changed);

				for (int rep = 0; rep < 12; rep++)
				{
					float		ms = timed(e0, e1, call);

					if (rep >= 2)
						tt.push_back(ms);
				}
				bad += nbad != 0;

				/* the first pass alone (results not complete: timing only) */
				std::vector<float> tm, tn;

				for (int mask : {1, 3})
				{
					pggpu_tc_lab_stages(mask);
					for (int rep = 0; rep < 7; rep++)
					{
						float		ms = timed(e0, e1, call);

						if (rep >= 2)
							(mask == 1 ? tm : tn).push_back(ms);
					}
				}
				pggpu_tc_lab_stages(7);

				char		shape[32];

				if (s == 0)
					snprintf(shape, sizeof(shape), "auto");
				else
					snprintf(shape, sizeof(shape), "%dx%d %s", shapes[s][0], shapes[s][1],
							 shapes[s][2] == 1 ? "tf32" : "f16");
				printf("%3d %5d %-12s %8.3f %8.3f %8.3f %8.3f %7.1fx %8.4f%% %5llu\n", d, k,
					   shape, median(tt), median(tm), median(tn) - median(tm), median(tr),
					   median(tr) / median(tt),
					   100.0 * fb / n, nbad);
				fflush(stdout);
			}
			lab_variant(0, 0, 0);
		}
	}
	printf("bench: %s; wanted(k, d): ", bad ? "MISMATCHES" : "all results exact");
	for (int d : ds)
		for (int k : kk)
			if (tc_wanted(k, d))
				printf("(%d,%d) ", k, d);
	printf("\n");
	return bad ? 1 : 0;
}

int
main(int argc, char **argv)
{
	bool		do_bench = false,
				quick = false,
				do_small = false;

	for (int a = 1; a < argc; a++)
		if (!strcmp(argv[a], "--bench"))
			do_bench = true;
		else if (!strcmp(argv[a], "--quick"))
			quick = true;
		else if (!strcmp(argv[a], "--small"))
			do_small = true;
		else
		{
			fprintf(stderr, "usage: %s [--quick | --small | --bench]\n", argv[0]);
			return 2;
		}
	return do_bench ? bench() : do_small ? small() : exactness(quick);
}
