/*
 * gpu/knn_tiles.cu - the rows of nearest neighbours' tiles into the
 * device's memory (knn.h: pggpu_knn_fill and put): copied from pinned
 * memory by the device (a parallel read's slots), else through a pinned
 * bounce buffer; rows put by rows turned into the tile's columns there.
 * knn.cu compares the tiles.
 */
#include "knn.cuh"

#include <cstring>

/* the rows put through the bounce buffer at most at once */
#define BOUNCE_BYTES ((size_t) 8 << 20)

extern "C" pggpu_status
pggpu_gpu_knn_fill(pggpu_knn *kn, int b, pggpu_error *err)
{
	knn_gpu    *g = (knn_gpu *) kn->impl;

	CU(cudaSetDevice(g->dev));
	return room(&g->in[b], &g->incap[b], kn->ld[b] * kn->d * (kn->f32[b] ? sizeof(float) : sizeof(double)), 1, err);
}

/* rows put by rows (n of d values, row-major) turned into the tile's columns (ld apart), 32 x 32 at a time */
template <typename T>
__global__ void
turn_kernel(const T *__restrict__ rows, int64_t n, int d, T *__restrict__ cols, int64_t ld)
{
	__shared__ T t[32][33];
	int64_t		r0 = (int64_t) blockIdx.x * 32;
	int			j0 = blockIdx.y * 32;

	for (int k = threadIdx.y; k < 32; k += blockDim.y)
		if (r0 + k < n && j0 + threadIdx.x < d)
			t[k][threadIdx.x] = rows[(r0 + k) * d + j0 + threadIdx.x];
	__syncthreads();
	for (int k = threadIdx.y; k < 32; k += blockDim.y)
		if (r0 + threadIdx.x < n && j0 + k < d)
			cols[(int64_t) (j0 + k) * ld + r0 + threadIdx.x] = t[threadIdx.x][k];
}

/*
 * n rows from src (host memory: pinned, or the bounce buffer) into tile b
 * at row at: by columns (pitch apart) straight, by rows (pitch apart)
 * through g->rows and turned; on the put stream, waited for
 */
static pggpu_status
put_rows(pggpu_knn *kn, knn_gpu *g, int b, int64_t at, const void *src, int64_t pitch, int64_t n, bool by_rows,
		 pggpu_error *err)
{
	bool		f32 = kn->f32[b];
	size_t		vb = f32 ? sizeof(float) : sizeof(double);
	int64_t		ld = kn->ld[b];
	int			d = kn->d;
	char	   *dst = (char *) g->in[b] + vb * (size_t) at;

	if (!by_rows)
		CU(cudaMemcpy2DAsync(dst, vb * ld, src, vb * pitch, vb * n, d, cudaMemcpyHostToDevice, g->put));
	else
	{
		pggpu_status st;
		dim3		grid((unsigned) ((n + 31) / 32), (unsigned) ((d + 31) / 32)),
					block(32, 8);

		if ((st = room(&g->rows, &g->rowscap, n * d * (int64_t) vb, 1, err)) != PGGPU_OK)
			return st;
		CU(cudaMemcpy2DAsync(g->rows, vb * d, src, vb * pitch, vb * d, n, cudaMemcpyHostToDevice, g->put));
		if (f32)
			turn_kernel<float><<<grid, block, 0, g->put>>>((const float *) g->rows, n, d, (float *) dst, ld);
		else
			turn_kernel<double><<<grid, block, 0, g->put>>>((const double *) g->rows, n, d, (double *) dst, ld);
		LAUNCHED("turn_kernel");
	}
	CU(cudaStreamSynchronize(g->put));
	return PGGPU_OK;
}

/*
 * Rows put: copied by the device straight from pinned memory, else
 * through the bounce buffer a slice of rows at a time (as they are laid)
 */
extern "C" pggpu_status
pggpu_gpu_knn_put(pggpu_knn *kn, int b, int64_t at, const void *v, int64_t pitch, int64_t n, bool by_rows,
				  bool pinned, pggpu_error *err)
{
	knn_gpu    *g = (knn_gpu *) kn->impl;
	size_t		vb = kn->f32[b] ? sizeof(float) : sizeof(double);
	int			d = kn->d;

	CU(cudaSetDevice(g->dev));
	if (pinned)
		return put_rows(kn, g, b, at, v, pitch, n, by_rows, err);
	if (g->bounce == NULL)
	{
		g->bounce_bytes = BOUNCE_BYTES > vb * d ? BOUNCE_BYTES : vb * d;
		CU(cudaMallocHost(&g->bounce, g->bounce_bytes));
	}
	for (int64_t r0 = 0; r0 < n;)
	{
		int64_t		c = (int64_t) (g->bounce_bytes / (vb * d));
		pggpu_status st;

		c = c < n - r0 ? c : n - r0;
		if (by_rows)
			for (int64_t r = 0; r < c; r++)
				memcpy((char *) g->bounce + vb * (size_t) (r * d), (const char *) v + vb * (size_t) ((r0 + r) * pitch),
					   vb * d);
		else
			for (int j = 0; j < d; j++)
				memcpy((char *) g->bounce + vb * (size_t) j * c, (const char *) v + vb * ((size_t) j * pitch + r0),
					   vb * c);
		if ((st = put_rows(kn, g, b, at + r0, g->bounce, by_rows ? d : c, c, by_rows, err)) != PGGPU_OK)
			return st;
		r0 += c;
	}
	return PGGPU_OK;
}

