/*
 * gpu/knn.cu - nearest neighbours on the GPU, a tile of the base against
 * every query by either route (knn.c), queued on a stream at start and
 * collected at finish, so that the caller fills the next tile meanwhile.
 *
 * Plain: each pair's plain loop over the columns in order
 * (__dsub_rn/__dmul_rn/__dadd_rn, never fused: cpu/knn.c's lanes sum
 * alike), a thread 4 x 4 pairs, both tiles of rows staged in shared memory
 * DJ columns at a time, each distance at its row's key (below); then each
 * query's n least by (distance, key): a block a query where n <= SEL_K (one
 * read of the distances), else CUB's segmented stable sort of all of them
 * (ties keep the lower key).  Queries in batches (PAIRS_MAX pairs at most),
 * queued up to QUEUED_TERMS of work at start, the rest from finish.
 *
 * The tile's rows are put straight into the device's memory (copied from
 * the read's pinned slots, or through a pinned bounce buffer; rows put by
 * rows turned there) by columns ld apart, then widened or copied nb apart,
 * with each row's key
 * (the caller's rank, or the row): ties go to the lower key, and the
 * results name rows by it.
 *
 * Product (n <= SEL_K): the tile's rows less mu rounded to float and their
 * norms (convert_kernel, a thread a row), cuBLAS's float32 product with a
 * batch of queries PGGPU_KNN_KC columns a slice (S, a query's row of
 * products), then a block a query (cert_kernel): the m-th least upper bound
 * A + margin over the tile, and every row whose lower bound A - margin is
 * not above it (nor above the caller's bound) measured by the plain loop
 * into the block's lists; the same answers as the plain route.
 *
 * Queries that would take more than half the device's free memory stay in
 * the host's (pinned), a batch of them copied over for each tile's batch.
 *
 * A tile stopped by close (an interrupt) leaves early: the kernels read a
 * flag at their start that close sets from another stream.
 */
#include "blas.cuh"
#include "common.cuh"
#include "knn.cuh"

#include <cub/device/device_segmented_sort.cuh>

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#define KT 16					/* a block's threads a side */
#define RT 4					/* a thread's queries, and its rows of the tile */
#define PT (KT * RT)			/* a block's queries, and its rows of the tile */
#define PAIRS_MAX ((int64_t) 1 << 24)	/* (query, row) pairs a batch at most (plain) */
#define PRODUCTS_MAX ((int64_t) 1 << 26)	/* products a batch at most (the product's S) */
#define STAGED_QUERIES ((int64_t) 1 << 16)	/* queries on the device at once where they cannot all be */
/*
 * a tile's work queued at once at most, in pairs' terms (about 0.1 s of the
 * plain loop on an H100): start queues that much, finish the rest as it
 * goes, so that an interrupt leaves that much at most to finish
 */
#define QUEUED_TERMS ((int64_t) 1 << 37)
#define SEL_THREADS 64			/* a block of the selections (its lists: 24 kB of shared memory) */
#define SEL_K 32				/* and the most neighbours it selects (else a sort) */


/*
 * A block's PT x PT pairs (queries q0.., rows b0..), each thread RT x RT
 * of them (queries ty + KT i, rows tx + KT j): both tiles of rows staged in
 * shared memory DJ columns at a time (the queries by rows, the tile's rows
 * by columns, nb apart), each pair's sum over the columns in order (as
 * cpu/knn.c's lanes); each distance at its row's key (rank, or the row) of
 * the query's nb
 */
__global__ void __launch_bounds__(KT * KT)
pair_kernel(const double *__restrict__ Q, int64_t nq, const double *__restrict__ B, int64_t nb, int d,
			const int32_t *__restrict__ rank, bool inner, double *__restrict__ D, const int *stop)
{
	__shared__ double qs[PT][DJ + 1];
	__shared__ double bs[PT][DJ + 1];
	int			tx = threadIdx.x,
				ty = threadIdx.y,
				t = ty * KT + tx;
	int64_t		q0 = (int64_t) blockIdx.y * PT,
				b0 = (int64_t) blockIdx.x * PT;
	double		s[RT][RT];

	if (*(volatile const int *) stop)
		return;
	for (int i = 0; i < RT; i++)
		for (int j = 0; j < RT; j++)
			s[i][j] = 0;
	for (int j0 = 0; j0 < d; j0 += DJ)
	{
		int			jn = min(DJ, d - j0);

		/* PT rows of DJ columns each: a warp's loads along a query's row, along a column of the tile */
		for (int l = t; l < PT * DJ; l += KT * KT)
		{
			int			r = l / DJ,
						c = l % DJ,
						br = l % PT,
						bc = l / PT;

			qs[r][c] = q0 + r < nq && c < jn ? Q[(q0 + r) * d + j0 + c] : 0;
			bs[br][bc] = b0 + br < nb && bc < jn ? B[(int64_t) (j0 + bc) * nb + b0 + br] : 0;
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
				D[q * nb + (rank ? rank[r] : r)] = inner ? -s[i][j] : s[i][j];
		}
}

/* (av, ai) before (bv, bi): the lesser distance, then the lower row */
__device__ __forceinline__ bool
before(double av, int32_t ai, double bv, int32_t bi)
{
	return av < bv || (av == bv && ai < bi);
}


/* one pair by the plain loop, the row's columns ld apart (a thread of pair_kernel, alone) */
__device__ __forceinline__ double
plain_pair(const double *__restrict__ q, const double *__restrict__ b, int64_t ld, int d, bool inner)
{
	double		s = 0;

	for (int j = 0; j < d; j++)
	{
		if (inner)
			s = __dadd_rn(s, __dmul_rn(q[j], b[j * ld]));
		else
		{
			double		u = __dsub_rn(q[j], b[j * ld]);

			s = __dadd_rn(s, __dmul_rn(u, u));
		}
	}
	return inner ? -s : s;
}

/* (v, i) into a thread's list of its cnt (< m: grows) least, in order */
__device__ __forceinline__ void
list_add(double (*sv)[SEL_THREADS], int32_t (*si)[SEL_THREADS], int t, int *cnt, int m, double v, int32_t i)
{
	int			p;

	if (*cnt == m && !before(v, i, sv[m - 1][t], si[m - 1][t]))
		return;
	p = *cnt < m ? (*cnt)++ : m - 1;
	for (; p > 0 && before(v, i, sv[p - 1][t], si[p - 1][t]); p--)
	{
		sv[p][t] = sv[p - 1][t];
		si[p][t] = si[p - 1][t];
	}
	sv[p][t] = v;
	si[p][t] = i;
}

/*
 * The m least of the threads' lists, in m rounds of the least of their
 * heads: into outd/outi (NULL: not kept; past every list: inf and
 * INT32_MAX); returns the m-th value.  Every thread of the block calls it.
 */
__device__ double
lists_merge(double (*sv)[SEL_THREADS], int32_t (*si)[SEL_THREADS], double *wv, int32_t *wi, int cnt, int m,
			double *outd, int32_t *outi)
{
	int			t = threadIdx.x,
				lane = t & 31,
				warp = t >> 5,
				head = 0;
	double		last = INFINITY;

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
		if (t == 0 && outd)
		{
			outd[r] = v;
			outi[r] = i;
		}
		last = v;
		__syncthreads();
	}
	return last;
}

/*
 * Each query's m <= SEL_K least of its nb distances by (distance, row), a
 * block a query: each thread keeps the least of its rows (every
 * SEL_THREADS-th) in order in shared memory, then lists_merge.  Reads the
 * distances once, where a sort of all of them moves each several times.
 */
__global__ void __launch_bounds__(SEL_THREADS)
select_kernel(const double *__restrict__ D, int64_t nb, int m, double *__restrict__ outd,
			  int32_t *__restrict__ outi, const int *stop)
{
	__shared__ double sv[SEL_K][SEL_THREADS];
	__shared__ int32_t si[SEL_K][SEL_THREADS];
	__shared__ double wv[SEL_THREADS / 32];
	__shared__ int32_t wi[SEL_THREADS / 32];
	int			t = threadIdx.x,
				cnt = 0;
	const double *row = D + (int64_t) blockIdx.x * nb;

	if (*(volatile const int *) stop)
		return;
	for (int64_t r = t; r < nb; r += SEL_THREADS)
		list_add(sv, si, t, &cnt, m, row[r], (int32_t) r);
	lists_merge(sv, si, wv, wi, cnt, m, outd + (int64_t) blockIdx.x * m, outi + (int64_t) blockIdx.x * m);
}

/* a float tile's nb rows (columns ld apart) widened, exactly, into x (nb apart) */
__global__ void
widen_kernel(const float *__restrict__ f, int64_t ld, int64_t nb, int d, double *__restrict__ x)
{
	int64_t		r = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (r < nb)
		for (int j = blockIdx.y; j < d; j += gridDim.y)
			x[(int64_t) j * nb + r] = (double) f[(int64_t) j * ld + r];
}

/*
 * The tile's rows less mu rounded to float, and the norms of those floats
 * (a thread a row, by columns nb apart as B): bs inf where too large for
 * the product
 */
__global__ void
convert_kernel(const double *__restrict__ B, int64_t nb, int d, const double *__restrict__ mu,
			   float *__restrict__ Bf, double *__restrict__ bn, double *__restrict__ bs, const int *stop)
{
	int64_t		r = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
	double		s = 0;

	if (*(volatile const int *) stop || r >= nb)
		return;
	for (int j = 0; j < d; j++)
	{
		float		f = __double2float_rn(__dsub_rn(B[(int64_t) j * nb + r], mu[j]));

		Bf[(int64_t) j * nb + r] = f;
		s = __dadd_rn(s, __dmul_rn((double) f, (double) f));
	}
	bn[r] = s;
	bs[r] = isfinite(s) && sqrt(s) <= PGGPU_KNN_MAX_NORM ? sqrt(s) : INFINITY;
}

/*
 * A query's m least of the tile, certified (a block a query of a batch):
 * the proposals A from its row of products S, the m-th least upper bound
 * A + margin, then every row whose lower bound is not above that (nor
 * above bound[q]) measured by the plain loop into the threads' lists (ties
 * and results by the rows' keys: rank, or the row), and lists_merge.  Rows
 * too large for the product are always measured.
 */
__global__ void __launch_bounds__(SEL_THREADS)
cert_kernel(const float *__restrict__ S, int64_t nb, const double *__restrict__ qn, const double *__restrict__ qs,
			const double *__restrict__ bn, const double *__restrict__ bs, const double *__restrict__ bound,
			const double *__restrict__ Q, const double *__restrict__ B, const int32_t *__restrict__ rank, int d,
			int m, bool inner, double h,
			double *__restrict__ outd, int32_t *__restrict__ outi, unsigned long long *measured, const int *stop)
{
	__shared__ double sv[SEL_K][SEL_THREADS];
	__shared__ int32_t si[SEL_K][SEL_THREADS];
	__shared__ double wv[SEL_THREADS / 32];
	__shared__ int32_t wi[SEL_THREADS / 32];
	int			t = threadIdx.x,
				cnt = 0;
	int64_t		q = blockIdx.x;
	const float *row = S + q * nb;
	double		qnq = qn[q],
				qsq = qs[q],
				tau;
	unsigned long long count = 0;

	if (*(volatile const int *) stop)
		return;
	for (int64_t r = t; r < nb; r += SEL_THREADS)
	{
		double		up = INFINITY;

		if (qsq <= PGGPU_KNN_MAX_NORM && bs[r] <= PGGPU_KNN_MAX_NORM)
			up = (inner ? -(double) row[r] : qnq + bn[r] - 2 * (double) row[r]) +
				pggpu_knn_margin(qsq, bs[r], h, d);
		list_add(sv, si, t, &cnt, m, up, (int32_t) r);
	}
	tau = lists_merge(sv, si, wv, wi, cnt, m, NULL, NULL);
	if (bound && bound[q] < tau)
		tau = bound[q];
	cnt = 0;
	for (int64_t r = t; r < nb; r += SEL_THREADS)
	{
		double		lo = -INFINITY;

		if (qsq <= PGGPU_KNN_MAX_NORM && bs[r] <= PGGPU_KNN_MAX_NORM)
			lo = (inner ? -(double) row[r] : qnq + bn[r] - 2 * (double) row[r]) -
				pggpu_knn_margin(qsq, bs[r], h, d);
		if (lo <= tau)
		{
			list_add(sv, si, t, &cnt, m, plain_pair(Q + q * d, B + r, nb, d, inner), rank ? rank[r] : (int32_t) r);
			count++;
		}
	}
	if (count)
		atomicAdd(measured, count);
	lists_merge(sv, si, wv, wi, cnt, m, outd + q * m, outi + q * m);
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
pggpu_gpu_knn_open(pggpu_knn *kn, int gpu_index, pggpu_error *err)
{
	knn_gpu    *g = (knn_gpu *) calloc(1, sizeof(knn_gpu));
	cudaDeviceProp prop;
	int64_t		nq = kn->nq,
				d = kn->d,
				out = nq * kn->n;
	pggpu_status st;

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
	CU(cudaStreamCreateWithFlags(&g->ctl, cudaStreamNonBlocking));
	CU(cudaStreamCreateWithFlags(&g->put, cudaStreamNonBlocking));
	CU(cudaMalloc((void **) &g->stop, sizeof(int)));
	CU(cudaMemset(g->stop, 0, sizeof(int)));
	CU(cudaMallocHost((void **) &g->hone, sizeof(int)));
	*g->hone = 1;
	CU(cudaMalloc((void **) &g->measured, sizeof(unsigned long long)));
	CU(cudaMemset(g->measured, 0, sizeof(unsigned long long)));
	CU(cudaMallocHost((void **) &g->hmeasured, sizeof(unsigned long long)));
	*g->hmeasured = 0;
	if (nq == 0)
		return PGGPU_OK;
	/*
	 * The queries on the device whole where they take at most half of its
	 * free memory; else (or as a test forces) they stay in the host's
	 * memory, pinned, and go over a batch at a time for every tile
	 */
	{
		size_t		free_b = 0,
					total_b = 0;
		double		need = (double) nq * d * (kn->route == PGGPU_KNN_PRODUCT ? 12 : 8) + (double) out * 12;

		CU(cudaMemGetInfo(&free_b, &total_b));
		g->qrows = nq;
		if (pggpu_knn_resident_queries > 0 && pggpu_knn_resident_queries < nq)
			g->qrows = pggpu_knn_resident_queries;
		else if (need > free_b / 2.0)
			g->qrows = STAGED_QUERIES < nq ? STAGED_QUERIES : nq;
	}
	if (g->qrows < nq)
	{
		CU(cudaHostRegister(kn->Q, sizeof(double) * (size_t) (nq * d), cudaHostRegisterPortable));
		g->q_registered = true;
		if (kn->route == PGGPU_KNN_PRODUCT)
		{
			CU(cudaHostRegister(kn->Qf, sizeof(float) * (size_t) (nq * d), cudaHostRegisterPortable));
			g->qf_registered = true;
		}
		kn->keep_queries = true;
	}
	CU(cudaMalloc((void **) &g->Q, sizeof(double) * (size_t) (g->qrows * d)));
	if (g->qrows == nq)
		CU(cudaMemcpy(g->Q, kn->Q, sizeof(double) * (size_t) (nq * d), cudaMemcpyHostToDevice));
	CU(cudaMalloc((void **) &g->od, sizeof(double) * (size_t) out));
	CU(cudaMalloc((void **) &g->oi, sizeof(int32_t) * (size_t) out));
	CU(cudaMallocHost((void **) &g->hd, sizeof(double) * (size_t) out));
	CU(cudaMallocHost((void **) &g->hi, sizeof(int32_t) * (size_t) out));
	CU(cudaMalloc((void **) &g->bound, sizeof(double) * (size_t) nq));
	CU(cudaMallocHost((void **) &g->hbound, sizeof(double) * (size_t) nq));
	if (kn->route == PGGPU_KNN_PRODUCT)
	{
		if ((st = pggpu_blas_open(g->s, &g->handle, err)) != PGGPU_OK)
			return st;
		g->handle_ok = true;
		CU(cudaMalloc((void **) &g->Qf, sizeof(float) * (size_t) (g->qrows * d)));
		CU(cudaMalloc((void **) &g->qn, sizeof(double) * (size_t) nq));
		CU(cudaMalloc((void **) &g->qs, sizeof(double) * (size_t) nq));
		CU(cudaMalloc((void **) &g->mu, sizeof(double) * (size_t) d));
		if (g->qrows == nq)
			CU(cudaMemcpy(g->Qf, kn->Qf, sizeof(float) * (size_t) (nq * d), cudaMemcpyHostToDevice));
		CU(cudaMemcpy(g->qn, kn->qn, sizeof(double) * (size_t) nq, cudaMemcpyHostToDevice));
		CU(cudaMemcpy(g->qs, kn->qs, sizeof(double) * (size_t) nq, cudaMemcpyHostToDevice));
		CU(cudaMemcpy(g->mu, kn->mu, sizeof(double) * (size_t) d, cudaMemcpyHostToDevice));
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

/* queries q0.. on the device: where they all are, or the batch staged there */
static const double *
queries(const pggpu_knn *kn, const knn_gpu *g, int64_t q0)
{
	return g->qrows == kn->nq ? g->Q + q0 * kn->d : g->Q;
}

static const float *
queries_f(const pggpu_knn *kn, const knn_gpu *g, int64_t q0)
{
	return g->qrows == kn->nq ? g->Qf + q0 * kn->d : g->Qf;
}

/* where the queries stay on the host: nq of them from q0 copied over (f: their floats too) */
static pggpu_status
stage_queries(const pggpu_knn *kn, knn_gpu *g, int64_t q0, int64_t nq, bool f, pggpu_error *err)
{
	if (g->qrows == kn->nq)
		return PGGPU_OK;
	CU(cudaMemcpyAsync(g->Q, kn->Q + q0 * kn->d, sizeof(double) * (size_t) (nq * kn->d), cudaMemcpyHostToDevice,
					   g->s));
	if (f)
		CU(cudaMemcpyAsync(g->Qf, kn->Qf + q0 * kn->d, sizeof(float) * (size_t) (nq * kn->d),
						   cudaMemcpyHostToDevice, g->s));
	return PGGPU_OK;
}

/* queries a batch of the started tile: pairs at most (one query at least), within the device's and most */
static int64_t
batch_queries(const knn_gpu *g, int64_t pairs, int64_t most)
{
	int64_t		qb = pairs / g->nb;

	qb = qb < 1 ? 1 : qb > g->qrows ? g->qrows : qb;
	return qb > most ? most : qb;
}

/*
 * The plain route's batches from query q0 while the work queued stays
 * under the budget (one at least): every pair, then each query's m least
 * (od, oi: m apart); returns the next batch's first query
 */
static pggpu_status
plain_batches(pggpu_knn *kn, knn_gpu *g, int64_t *q0p, pggpu_error *err)
{
	int			d = kn->d;
	int64_t		nb = g->nb,
				m = g->m,
				qb = batch_queries(g, PAIRS_MAX, 65535 * PT),	/* (blocks in y) */
				done = 0;
	bool		inner = kn->metric == PGGPU_METRIC_INNER_PRODUCT;
	pggpu_status st;

	if ((st = pairs_room(g, qb * nb, err)) != PGGPU_OK ||
		(st = room((void **) &g->off, &g->offcap, qb + 1, sizeof(int64_t), err)) != PGGPU_OK)
		return st;
	/* a pair's cost in terms: its d, and its share of the selection (a sort's, many) */
	int64_t		cost = d + (m <= SEL_K ? 8 : 512);

	for (int64_t q0 = *q0p; q0 < kn->nq && (done == 0 || done + qb * nb * cost <= QUEUED_TERMS); q0 += qb)
	{
		int64_t		nq = kn->nq - q0 < qb ? kn->nq - q0 : qb;
		dim3		block(KT, KT);
		dim3		grid((unsigned) ((nb + PT - 1) / PT), (unsigned) ((nq + PT - 1) / PT));

		if ((st = stage_queries(kn, g, q0, nq, false, err)) != PGGPU_OK)
			return st;
		pair_kernel<<<grid, block, 0, g->s>>>(queries(kn, g, q0), nq, g->B, nb, d, g->ranked ? g->rank : NULL,
											   inner, g->D, g->stop);
		LAUNCHED("pair_kernel");
		if (m <= SEL_K)
			select_kernel<<<(unsigned) nq, SEL_THREADS, 0, g->s>>>(g->D, nb, (int) m, g->od + q0 * m,
																  g->oi + q0 * m, g->stop);
		else
		{
			if ((st = sort_batch(g, nq, nb, err)) != PGGPU_OK)
				return st;
			CU(cudaMemcpy2DAsync(g->od + q0 * m, sizeof(double) * m, g->Ds, sizeof(double) * nb,
								 sizeof(double) * m, nq, cudaMemcpyDeviceToDevice, g->s));
			CU(cudaMemcpy2DAsync(g->oi + q0 * m, sizeof(int32_t) * m, g->Is, sizeof(int32_t) * nb,
								 sizeof(int32_t) * m, nq, cudaMemcpyDeviceToDevice, g->s));
		}
		LAUNCHED("the selection");
		g->plain_measured += nq * nb;
		done += nq * nb * cost;
		*q0p = q0 + nq;
	}
	return PGGPU_OK;
}

/* the product's: a batch of queries' products and certified selection at a time, as plain_batches */
static pggpu_status
product_batches(pggpu_knn *kn, knn_gpu *g, int64_t *q0p, pggpu_error *err)
{
	int			d = kn->d;
	int64_t		nb = g->nb,
				m = g->m,
				qb = batch_queries(g, PRODUCTS_MAX, INT32_MAX),
				done = 0;
	double		h = pggpu_knn_depth(d);
	pggpu_status st;

	if ((st = room((void **) &g->S, &g->scap, qb * nb, sizeof(float), err)) != PGGPU_OK)
		return st;
	/* a pair's cost in the plain loop's terms (the float product: about d / 8) */
	int64_t		cost = d / 8 + 8;

	for (int64_t q0 = *q0p; q0 < kn->nq && (done == 0 || done + qb * nb * cost <= QUEUED_TERMS); q0 += qb)
	{
		int64_t		nq = kn->nq - q0 < qb ? kn->nq - q0 : qb;

		if ((st = stage_queries(kn, g, q0, nq, true, err)) != PGGPU_OK)
			return st;
		for (int j0 = 0; j0 < d; j0 += PGGPU_KNN_KC)
			if ((st = pggpu_blas_sgemm_nn(g->handle, (int) nb, (int) nq, d - j0 < PGGPU_KNN_KC ? d - j0 : PGGPU_KNN_KC,
										  g->Bf + (int64_t) j0 * nb, (int) nb, queries_f(kn, g, q0) + j0, d,
										  j0 ? 1.0f : 0.0f, g->S, (int) nb, err)) != PGGPU_OK)
				return st;
		cert_kernel<<<(unsigned) nq, SEL_THREADS, 0, g->s>>>(g->S, nb, g->qn + q0, g->qs + q0, g->bn, g->bs,
															g->bounded ? g->bound + q0 : NULL, queries(kn, g, q0), g->B,
															g->ranked ? g->rank : NULL, d, (int) m,
															kn->metric == PGGPU_METRIC_INNER_PRODUCT, h,
															g->od + q0 * m, g->oi + q0 * m, g->measured,
															g->stop);
		LAUNCHED("cert_kernel");
		done += nq * nb * cost;
		*q0p = q0 + nq;
	}
	return PGGPU_OK;
}

/*
 * The started tile's next batches, up to the budget; after the last, its
 * results on their way to the host
 */
static pggpu_status
queue_batches(pggpu_knn *kn, knn_gpu *g, pggpu_error *err)
{
	pggpu_status st = kn->route == PGGPU_KNN_PRODUCT ? product_batches(kn, g, &g->q_next, err) :
		plain_batches(kn, g, &g->q_next, err);

	if (st != PGGPU_OK || g->q_next < kn->nq)
		return st;
	CU(cudaMemcpyAsync(g->hd, g->od, sizeof(double) * (size_t) (kn->nq * g->m), cudaMemcpyDeviceToHost, g->s));
	CU(cudaMemcpyAsync(g->hi, g->oi, sizeof(int32_t) * (size_t) (kn->nq * g->m), cudaMemcpyDeviceToHost, g->s));
	CU(cudaMemcpyAsync(g->hmeasured, g->measured, sizeof(unsigned long long), cudaMemcpyDeviceToHost, g->s));
	return PGGPU_OK;
}

extern "C" pggpu_status
pggpu_gpu_knn_start(pggpu_knn *kn, int b, int64_t nb, const int32_t *rank, const double *bound, pggpu_error *err)
{
	knn_gpu    *g = (knn_gpu *) kn->impl;
	int			d = kn->d;
	int64_t		ld = kn->ld[b];
	int64_t		m = nb < kn->n ? nb : kn->n;	/* rows a query gets from this tile */
	pggpu_status st;

	g->m = 0;
	if (nb == 0)
		return PGGPU_OK;
	CU(cudaSetDevice(g->dev));
	if ((st = room((void **) &g->B, &g->bcap, nb * d, sizeof(double), err)) != PGGPU_OK)
		return st;
	if (kn->route == PGGPU_KNN_PRODUCT &&
		((st = room((void **) &g->Bf, &g->fcap, nb * d, sizeof(float), err)) != PGGPU_OK ||
		 (st = room((void **) &g->bn, &g->ncap, nb, sizeof(double), err)) != PGGPU_OK ||
		 (st = room((void **) &g->bs, &g->scap_rows, nb, sizeof(double), err)) != PGGPU_OK))
		return st;
	/* the tile as put (columns ld apart, every put waited for) to B, nb apart, floats widened */
	if (kn->f32[b])
	{
		dim3		grid((unsigned) ((nb + BLOCK - 1) / BLOCK), (unsigned) (d < 65535 ? d : 65535));

		widen_kernel<<<grid, BLOCK, 0, g->s>>>((const float *) g->in[b], ld, nb, d, g->B);
		LAUNCHED("widen_kernel");
	}
	else
		CU(cudaMemcpy2DAsync(g->B, sizeof(double) * nb, g->in[b], sizeof(double) * ld, sizeof(double) * nb, d,
							 cudaMemcpyDeviceToDevice, g->s));
	if (rank)
	{
		if (g->hrcap < nb)
		{
			cudaFreeHost(g->hrank);
			g->hrank = NULL;
			g->hrcap = 0;
			CU(cudaMallocHost((void **) &g->hrank, sizeof(int32_t) * (size_t) nb));
			g->hrcap = nb;
		}
		if ((st = room((void **) &g->rank, &g->rcap, nb, sizeof(int32_t), err)) != PGGPU_OK)
			return st;
		memcpy(g->hrank, rank, sizeof(int32_t) * (size_t) nb);
		CU(cudaMemcpyAsync(g->rank, g->hrank, sizeof(int32_t) * (size_t) nb, cudaMemcpyHostToDevice, g->s));
	}
	if (bound)
	{
		memcpy(g->hbound, bound, sizeof(double) * (size_t) kn->nq);
		CU(cudaMemcpyAsync(g->bound, g->hbound, sizeof(double) * (size_t) kn->nq, cudaMemcpyHostToDevice, g->s));
	}
	if (kn->route == PGGPU_KNN_PRODUCT)
	{
		convert_kernel<<<(unsigned) ((nb + BLOCK - 1) / BLOCK), BLOCK, 0, g->s>>>(g->B, nb, d, g->mu, g->Bf, g->bn,
																				  g->bs, g->stop);
		LAUNCHED("convert_kernel");
	}
	g->nb = nb;
	g->m = m;
	g->ranked = rank != NULL;
	g->bounded = bound != NULL;
	g->q_next = 0;
	return queue_batches(kn, g, err);
}

extern "C" pggpu_status
pggpu_gpu_knn_finish(pggpu_knn *kn, int64_t *idx, double *dist, pggpu_error *err)
{
	knn_gpu    *g = (knn_gpu *) kn->impl;
	int64_t		m = g->m,
				n = kn->n;
	cudaError_t e;

	if (m == 0)
		return PGGPU_OK;
	CU(cudaSetDevice(g->dev));
	for (;;)
	{
		pggpu_status st;

		/* the interrupt callback between looks (it may leave: close stops what is queued) */
		while ((e = cudaStreamQuery(g->s)) == cudaErrorNotReady)
		{
			if (kn->interrupt)
				kn->interrupt(kn->interrupt_arg);
			usleep(50);
		}
		CU(e);
		if (g->q_next >= kn->nq)
			break;
		if ((st = queue_batches(kn, g, err)) != PGGPU_OK)
			return st;
	}
	g->m = 0;
	for (int64_t i = 0; i < kn->nq; i++)
		for (int64_t r = 0; r < m; r++)
		{
			int32_t		row = g->hi[i * m + r];

			/* (past the rows within the bound: INT32_MAX) */
			idx[i * n + r] = row >= 0 && row < INT32_MAX ? row : -1;
			dist[i * n + r] = row >= 0 && row < INT32_MAX ? g->hd[i * m + r] : INFINITY;
		}
	kn->measured = g->plain_measured + (int64_t) *g->hmeasured;
	if (kn->interrupt)
		kn->interrupt(kn->interrupt_arg);
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
		/* a tile in flight: its kernels leave at their start */
		if (g->s_ok && g->stop && g->hone && cudaStreamQuery(g->s) == cudaErrorNotReady)
		{
			cudaMemcpyAsync(g->stop, g->hone, sizeof(int), cudaMemcpyHostToDevice, g->ctl);
			cudaStreamSynchronize(g->ctl);
		}
		if (g->s_ok)
			cudaStreamSynchronize(g->s);
		if (g->handle_ok)
			pggpu_blas_close(g->handle);
		if (g->q_registered)
			cudaHostUnregister(kn->Q);
		if (g->qf_registered)
			cudaHostUnregister(kn->Qf);
		cudaFree(g->Q);
		cudaFree(g->Qf);
		cudaFree(g->qn);
		cudaFree(g->qs);
		cudaFree(g->mu);
		cudaFree(g->in[0]);
		cudaFree(g->in[1]);
		cudaFreeHost(g->bounce);
		cudaFree(g->rows);
		cudaFree(g->B);
		cudaFree(g->Bf);
		cudaFree(g->bn);
		cudaFree(g->bs);
		cudaFree(g->S);
		cudaFree(g->bound);
		cudaFree(g->rank);
		cudaFreeHost(g->hrank);
		cudaFree(g->D);
		cudaFree(g->Ds);
		cudaFree(g->I);
		cudaFree(g->Is);
		cudaFree(g->off);
		cudaFree(g->tmp);
		cudaFree(g->od);
		cudaFree(g->oi);
		cudaFree(g->measured);
		cudaFree(g->stop);
		cudaFreeHost(g->hd);
		cudaFreeHost(g->hi);
		cudaFreeHost(g->hbound);
		cudaFreeHost(g->hmeasured);
		cudaFreeHost(g->hone);
		if (g->ctl)
			cudaStreamDestroy(g->ctl);
		if (g->put)
			cudaStreamDestroy(g->put);
		if (g->s_ok)
			cudaStreamDestroy(g->s);
	}
	free(g);
	kn->impl = NULL;
}
