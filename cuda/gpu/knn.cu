/*
 * gpu/knn.cu - nearest neighbours on the GPU.  A tile of the base against a
 * batch of queries: each pair's plain loop over the columns in order
 * (__dsub_rn/__dmul_rn/__dadd_rn, never fused: cpu/knn.c's lanes sum
 * alike), a thread 4 x 4 pairs, both tiles of rows staged in shared memory
 * DJ columns at a time; then each query's n least by (distance, row): a
 * block a query where n <= SEL_K (one read of the distances), else CUB's
 * segmented stable sort of all of them (ties keep the lower row); the
 * first n copied out.  At most PAIRS_MAX pairs at once: queries in batches.
 */
#include "common.cuh"

#include <cub/device/device_segmented_sort.cuh>

#include <cstdio>
#include <cstdlib>

#define KT 16					/* a block's threads a side */
#define RT 4					/* a thread's queries, and its rows of the tile */
#define PT (KT * RT)			/* a block's queries, and its rows of the tile */
#define PAIRS_MAX ((int64_t) 1 << 24)	/* (query, row) pairs a batch at most */
#define SEL_THREADS 64			/* select_kernel's block (its lists: 24 kB of shared memory) */
#define SEL_K 32				/* and the most neighbours it selects (else a sort) */

struct knn_gpu
{
	int			dev;
	cudaStream_t s;
	bool		s_ok;
	double	   *Q;				/* nq x d */
	double	   *B;				/* a tile's rows, bcap x d */
	int64_t		bcap;
	double	   *D;				/* a batch's distances, and sorted */
	double	   *Ds;
	int32_t    *I;				/* their rows, and sorted */
	int32_t    *Is;
	int64_t		pcap;
	int64_t    *off;			/* the batch's segments (queries + 1) */
	int64_t		offcap;
	void	   *tmp;			/* CUB's */
	size_t		tmpcap;
	int32_t    *hi;				/* the rows copied out, before widening */
	int64_t		hicap;
};

/*
 * A block's PT x PT pairs (queries q0.., rows b0..), each thread RT x RT
 * of them (queries ty + KT i, rows tx + KT j): both tiles of rows staged in
 * shared memory DJ columns at a time, each pair's sum over the columns in
 * order (as cpu/knn.c's lanes)
 */
__global__ void __launch_bounds__(KT * KT)
pair_kernel(const double *__restrict__ Q, int64_t nq, const double *__restrict__ B, int64_t nb, int d,
			bool inner, double *__restrict__ D)
{
	__shared__ double qs[PT][DJ + 1];
	__shared__ double bs[PT][DJ + 1];
	int			tx = threadIdx.x,
				ty = threadIdx.y,
				t = ty * KT + tx;
	int64_t		q0 = (int64_t) blockIdx.y * PT,
				b0 = (int64_t) blockIdx.x * PT;
	double		s[RT][RT];

	for (int i = 0; i < RT; i++)
		for (int j = 0; j < RT; j++)
			s[i][j] = 0;
	for (int j0 = 0; j0 < d; j0 += DJ)
	{
		int			jn = min(DJ, d - j0);

		/* PT rows of DJ columns each: a warp's loads along a row */
		for (int l = t; l < PT * DJ; l += KT * KT)
		{
			int			r = l / DJ,
						c = l % DJ;

			qs[r][c] = q0 + r < nq && c < jn ? Q[(q0 + r) * d + j0 + c] : 0;
			bs[r][c] = b0 + r < nb && c < jn ? B[(b0 + r) * d + j0 + c] : 0;
		}
		__syncthreads();
		for (int c = 0; c < jn; c++)
		{
			double		a[RT],
						b[RT];

			for (int i = 0; i < RT; i++)
				a[i] = qs[ty + KT * i][c], b[i] = bs[tx + KT * i][c];
			for (int i = 0; i < RT; i++)
				for (int j = 0; j < RT; j++)
				{
					if (inner)
						s[i][j] = __dadd_rn(s[i][j], __dmul_rn(a[i], b[j]));
					else
					{
						double		u = __dsub_rn(a[i], b[j]);

						s[i][j] = __dadd_rn(s[i][j], __dmul_rn(u, u));
					}
				}
		}
		__syncthreads();
	}
	for (int i = 0; i < RT; i++)
		for (int j = 0; j < RT; j++)
		{
			int64_t		q = q0 + ty + KT * i,
						r = b0 + tx + KT * j;

			if (q < nq && r < nb)
				D[q * nb + r] = inner ? -s[i][j] : s[i][j];
		}
}

/* (av, ai) before (bv, bi): the lesser distance, then the lower row */
__device__ __forceinline__ bool
before(double av, int32_t ai, double bv, int32_t bi)
{
	return av < bv || (av == bv && ai < bi);
}

/*
 * Each query's m <= SEL_K least of its nb distances by (distance, row), a
 * block a query: each thread keeps the least of its rows (every
 * SEL_THREADS-th) in order in shared memory, then m rounds take the least
 * of the threads' heads.  Reads the distances once, where a sort of all of
 * them moves each several times.
 */
__global__ void __launch_bounds__(SEL_THREADS)
select_kernel(const double *__restrict__ D, int64_t nb, int m, double *__restrict__ outd,
			  int32_t *__restrict__ outi)
{
	__shared__ double sv[SEL_K][SEL_THREADS];
	__shared__ int32_t si[SEL_K][SEL_THREADS];
	__shared__ double wv[SEL_THREADS / 32];
	__shared__ int32_t wi[SEL_THREADS / 32];
	int			t = threadIdx.x,
				lane = t & 31,
				warp = t >> 5;
	const double *row = D + (int64_t) blockIdx.x * nb;
	int			cnt = 0,
				head = 0;

	for (int64_t r = t; r < nb; r += SEL_THREADS)
	{
		double		v = row[r];
		int32_t		i = (int32_t) r;
		int			p;

		if (cnt == m && !before(v, i, sv[m - 1][t], si[m - 1][t]))
			continue;
		p = cnt < m ? cnt++ : m - 1;
		for (; p > 0 && before(v, i, sv[p - 1][t], si[p - 1][t]); p--)
		{
			sv[p][t] = sv[p - 1][t];
			si[p][t] = si[p - 1][t];
		}
		sv[p][t] = v;
		si[p][t] = i;
	}
	for (int r = 0; r < m; r++)
	{
		double		v = head < cnt ? sv[head][t] : INFINITY;
		int32_t		i = head < cnt ? si[head][t] : INT32_MAX;

		for (int o = 16; o > 0; o >>= 1)
		{
			double		ov = __shfl_down_sync(FULL, v, o);
			int32_t		oi = __shfl_down_sync(FULL, i, o);

			if (before(ov, oi, v, i))
				v = ov, i = oi;
		}
		if (lane == 0)
			wv[warp] = v, wi[warp] = i;
		__syncthreads();
		v = wv[0], i = wi[0];
		for (int w = 1; w < SEL_THREADS / 32; w++)
			if (before(wv[w], wi[w], v, i))
				v = wv[w], i = wi[w];
		/* (rows are one thread's each: its head is the winner or not) */
		if (head < cnt && si[head][t] == i)
			head++;
		if (t == 0)
		{
			outd[(int64_t) blockIdx.x * m + r] = v;
			outi[(int64_t) blockIdx.x * m + r] = i;
		}
		__syncthreads();
	}
}

/* the rows of every segment 0..nb-1, and the segments' offsets */
__global__ void
rows_kernel(int32_t *I, int64_t nq, int64_t nb, int64_t *off)
{
	int64_t		i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < nq * nb)
		I[i] = (int32_t) (i % nb);
	if (i <= nq)
		off[i] = i * nb;
}

/* (re)allocates *p for want elements of size bytes, where it holds fewer */
static pggpu_status
room(void **p, int64_t *cap, int64_t want, size_t size, pggpu_error *err)
{
	if (*cap >= want)
		return PGGPU_OK;
	if (*p)
		cudaFree(*p);
	*p = NULL;
	*cap = 0;
	CU(cudaMalloc(p, (size_t) want * size));
	*cap = want;
	return PGGPU_OK;
}

/* room for want pairs: distances and rows, as computed and as sorted */
static pggpu_status
pairs_room(knn_gpu *g, int64_t want, pggpu_error *err)
{
	if (g->pcap >= want)
		return PGGPU_OK;
	cudaFree(g->D);
	cudaFree(g->Ds);
	cudaFree(g->I);
	cudaFree(g->Is);
	g->D = g->Ds = NULL;
	g->I = g->Is = NULL;
	g->pcap = 0;
	CU(cudaMalloc((void **) &g->D, sizeof(double) * (size_t) want));
	CU(cudaMalloc((void **) &g->Ds, sizeof(double) * (size_t) want));
	CU(cudaMalloc((void **) &g->I, sizeof(int32_t) * (size_t) want));
	CU(cudaMalloc((void **) &g->Is, sizeof(int32_t) * (size_t) want));
	g->pcap = want;
	return PGGPU_OK;
}

extern "C" pggpu_status
pggpu_gpu_knn_open(pggpu_knn *kn, int gpu_index, const double *Q, pggpu_error *err)
{
	knn_gpu    *g = (knn_gpu *) calloc(1, sizeof(knn_gpu));
	cudaDeviceProp prop;

	if (g == NULL)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	kn->impl = g;
	g->dev = -1;
	if (pggpu_find_gpus(gpu_index, &g->dev, &prop, err) == 0 || g->dev < 0)
		return PGGPU_ERR_NO_GPU;
	kn->gpu = g->dev;
	snprintf(kn->device_name, sizeof(kn->device_name), "%s", prop.name);
	CU(cudaSetDevice(g->dev));
	CU(cudaStreamCreateWithFlags(&g->s, cudaStreamNonBlocking));
	g->s_ok = true;
	if (kn->nq > 0)
	{
		CU(cudaMalloc((void **) &g->Q, sizeof(double) * (size_t) kn->nq * kn->d));
		CU(cudaMemcpy(g->Q, Q, sizeof(double) * (size_t) kn->nq * kn->d, cudaMemcpyHostToDevice));
	}
	return PGGPU_OK;
}

/*
 * Each query's distances of a batch (D) sorted with their rows (m > SEL_K):
 * into Ds and Is, nb apart, ties in row order (a stable sort)
 */
static pggpu_status
sort_batch(knn_gpu *g, int64_t nq, int64_t nb, pggpu_error *err)
{
	int64_t		pairs = nq * nb;
	size_t		tmp_bytes = 0;

	rows_kernel<<<(unsigned) ((pairs + BLOCK) / BLOCK), BLOCK, 0, g->s>>>(g->I, nq, nb, g->off);
	LAUNCHED("rows_kernel");
	CU(cub::DeviceSegmentedSort::StableSortPairs(NULL, tmp_bytes, g->D, g->Ds, g->I, g->Is, pairs,
												  nq, g->off, g->off + 1, g->s));
	if (tmp_bytes > g->tmpcap)
	{
		cudaFree(g->tmp);
		g->tmp = NULL;
		g->tmpcap = 0;
		CU(cudaMalloc(&g->tmp, tmp_bytes));
		g->tmpcap = tmp_bytes;
	}
	CU(cub::DeviceSegmentedSort::StableSortPairs(g->tmp, tmp_bytes, g->D, g->Ds, g->I, g->Is, pairs,
												  nq, g->off, g->off + 1, g->s));
	return PGGPU_OK;
}

extern "C" pggpu_status
pggpu_gpu_knn_tile(pggpu_knn *kn, const double *B, int64_t nb, int64_t *idx, double *dist,
				   pggpu_error *err)
{
	knn_gpu    *g = (knn_gpu *) kn->impl;
	int			d = kn->d,
				n = kn->n;
	int64_t		m = nb < n ? nb : n;	/* rows a query gets from this tile */
	int64_t		qb;				/* queries a batch */
	int64_t		ld;				/* a query's distances apart in Ds and Is */
	bool		inner = kn->metric == PGGPU_METRIC_INNER_PRODUCT;
	pggpu_status st;

	for (int64_t i = 0; i < kn->nq * n; i++)
		idx[i] = -1, dist[i] = INFINITY;
	if (nb == 0)
		return PGGPU_OK;
	ld = m <= SEL_K ? m : nb;
	if (nb > INT32_MAX)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "a tile of %lld rows", (long long) nb);
	qb = PAIRS_MAX / nb;
	qb = qb < 1 ? 1 : qb > kn->nq ? kn->nq : qb;
	qb = qb > 65535 * PT ? 65535 * PT : qb;	/* (blocks in y) */
	CU(cudaSetDevice(g->dev));
	if ((st = room((void **) &g->B, &g->bcap, nb * d, sizeof(double), err)) != PGGPU_OK ||
		(st = pairs_room(g, qb * nb, err)) != PGGPU_OK ||
		(st = room((void **) &g->off, &g->offcap, qb + 1, sizeof(int64_t), err)) != PGGPU_OK)
		return st;
	if (g->hicap < qb * m)
	{
		free(g->hi);
		g->hicap = 0;
		g->hi = (int32_t *) malloc(sizeof(int32_t) * (size_t) (qb * m));
		if (g->hi == NULL)
			return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		g->hicap = qb * m;
	}
	CU(cudaMemcpyAsync(g->B, B, sizeof(double) * (size_t) nb * d, cudaMemcpyHostToDevice, g->s));
	for (int64_t q0 = 0; q0 < kn->nq; q0 += qb)
	{
		int64_t		nq = kn->nq - q0 < qb ? kn->nq - q0 : qb;
		dim3		block(KT, KT);
		dim3		grid((unsigned) ((nb + PT - 1) / PT), (unsigned) ((nq + PT - 1) / PT));

		pair_kernel<<<grid, block, 0, g->s>>>(g->Q + q0 * d, nq, g->B, nb, d, inner, g->D);
		LAUNCHED("pair_kernel");
		if (m <= SEL_K)
			select_kernel<<<(unsigned) nq, SEL_THREADS, 0, g->s>>>(g->D, nb, (int) m, g->Ds, g->Is);
		else if ((st = sort_batch(g, nq, nb, err)) != PGGPU_OK)
			return st;
		LAUNCHED("the selection");
		/* each query's first m: distances straight into dist (n apart), rows through hi */
		CU(cudaMemcpy2DAsync(dist + q0 * n, sizeof(double) * n, g->Ds, sizeof(double) * ld,
							 sizeof(double) * m, nq, cudaMemcpyDeviceToHost, g->s));
		CU(cudaMemcpy2DAsync(g->hi, sizeof(int32_t) * m, g->Is, sizeof(int32_t) * ld,
							 sizeof(int32_t) * m, nq, cudaMemcpyDeviceToHost, g->s));
		CU(cudaStreamSynchronize(g->s));
		for (int64_t i = 0; i < nq; i++)
			for (int64_t r = 0; r < m; r++)
				idx[(q0 + i) * n + r] = g->hi[i * m + r];
		if (kn->interrupt)
			kn->interrupt(kn->interrupt_arg);
	}
	return PGGPU_OK;
}

extern "C" void
pggpu_gpu_knn_close(pggpu_knn *kn)
{
	knn_gpu    *g = (knn_gpu *) kn->impl;

	if (g == NULL)
		return;
	if (g->dev >= 0)
	{
		cudaSetDevice(g->dev);
		if (g->s_ok)
			cudaStreamSynchronize(g->s);
		cudaFree(g->Q);
		cudaFree(g->B);
		cudaFree(g->D);
		cudaFree(g->Ds);
		cudaFree(g->I);
		cudaFree(g->Is);
		cudaFree(g->off);
		cudaFree(g->tmp);
		if (g->s_ok)
			cudaStreamDestroy(g->s);
	}
	free(g->hi);
	free(g);
	kn->impl = NULL;
}
