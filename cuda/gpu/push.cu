/*
 * push.cu - a GPU data set's staging: the caller fills one of two pinned
 * buffers while the other is copied on the set's stream, and each batch
 * lands as one tile of the tiled structure-of-arrays layout of
 * compute_internal.h: by columns as it is, halves widened to floats where
 * the set holds floats; by rows (a parallel read's parts as its workers
 * wrote them) through the device's room for one batch, turned into the
 * tile's columns there.
 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstring>

#include "common.cuh"

/* a batch of halves into a FLOAT16 set's tile of floats (exact; d <= TC_MAX_D) */
__global__ void
halves_to_floats_kernel(const __half *__restrict__ src, float *__restrict__ dst, int64_t len)
{
	for (int64_t e = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; e < len;
		 e += (int64_t) gridDim.x * blockDim.x)
		dst[e] = __half2float(src[e]);
}

/*
 * A batch pushed by rows (in: row r's value j at r * d + j, nrows of them)
 * into its tile's columns (out: j * b + r), rows past nrows zero; a block
 * turns 32 rows of 32 columns through shared memory, so that both the
 * reads and the writes run along 32 values.  Halves held as floats, and a
 * wide set's floats and halves (pggpu_data_hold_wide), are widened
 * (exactly) on the way.
 */
template <typename Tin, typename Tout>
__device__ __forceinline__ Tout
turned(Tin v)
{
	return (Tout) v;
}

template <>
__device__ __forceinline__ float
turned<uint16_t, float>(uint16_t v)
{
	return __half2float(__ushort_as_half(v));
}

template <>
__device__ __forceinline__ double
turned<uint16_t, double>(uint16_t v)
{
	return (double) __half2float(__ushort_as_half(v));
}

template <typename Tin, typename Tout>
__global__ void
turn_rows_kernel(const Tin *__restrict__ in, Tout *__restrict__ out, int64_t nrows, int d, int64_t b)
{
	__shared__ Tout t[32][33];
	const int	j0 = blockIdx.x * 32;
	const int64_t r0 = (int64_t) blockIdx.y * 32;

	for (int y = threadIdx.y; y < 32; y += blockDim.y)
	{
		const int64_t r = r0 + y;
		const int	j = j0 + threadIdx.x;

		t[y][threadIdx.x] = r < nrows && j < d ? turned<Tin, Tout>(in[r * d + j]) : (Tout) 0;
	}
	__syncthreads();
	for (int y = threadIdx.y; y < 32; y += blockDim.y)
	{
		const int	j = j0 + y;

		if (j < d)
			out[(int64_t) j * b + r0 + threadIdx.x] = t[threadIdx.x][y];
	}
}

template <typename Tin, typename Tout>
static void
turn_rows(gpu_state *s, const void *in, void *out, int64_t nrows, int d, int64_t b)
{
	dim3		grid((unsigned) ((d + 31) / 32), (unsigned) (b / 32));

	turn_rows_kernel<Tin, Tout><<<grid, dim3(32, 8), 0, s->stream>>>((const Tin *) in, (Tout *) out, nrows, d, b);
}

/* (a float batch takes half of a staging buffer) */
void *
gpu_batch(pggpu_data *ds)
{
	/* (a lazy set's staging buffers at its first batch; NULL where they cannot be had) */
	if (ST(ds)->stage[ST(ds)->cur] == NULL && !gpu_stage_alloc(ds))
		return NULL;
	return ST(ds)->stage[ST(ds)->cur];
}

/*
 * A batch by rows: copied as it is (its nrows rows only) into the device's
 * room for one (made at the first), then turned into the tile's columns
 */
static pggpu_status
push_by_rows(pggpu_data *ds, const char *buf, int64_t nrows, size_t size, int64_t tile, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	const int64_t b = TILE(ds);
	char	   *x = (char *) s->X + tile * TILE_BYTES(ds);

	if (s->turn_room == NULL && gpu_mem_take(&s->turn_room, size * b * ds->d, s->stream) != cudaSuccess)
	{
		return pggpu_fail(err, PGGPU_ERR_GPU_MEMORY,
						  "could not allocate %.1f MB of GPU memory for a batch of %d columns",
						  size * b * ds->d / 1048576.0, ds->d);
	}
	CU(cudaMemcpyAsync(s->turn_room, buf, size * nrows * ds->d, cudaMemcpyHostToDevice, s->stream));
	/* (a set held wide from its first row widens floats and halves: pggpu_data_hold_wide) */
	if (ds->wide_fed && !ds->narrow_held && ds->f32)
		turn_rows<float, double>(s, s->turn_room, x, nrows, ds->d, b);
	else if (ds->wide_fed && !ds->narrow_held && ds->f16)
		turn_rows<uint16_t, double>(s, s->turn_room, x, nrows, ds->d, b);
	else if (ds->f16 && !ds->f16_held)
		turn_rows<uint16_t, float>(s, s->turn_room, x, nrows, ds->d, b);
	else if (size == sizeof(uint16_t))
		turn_rows<uint16_t, uint16_t>(s, s->turn_room, x, nrows, ds->d, b);
	else if (size == sizeof(float))
		turn_rows<float, float>(s, s->turn_room, x, nrows, ds->d, b);
	else
		turn_rows<double, double>(s, s->turn_room, x, nrows, ds->d, b);
	LAUNCHED(turn_rows_kernel);
	return PGGPU_OK;
}

pggpu_status
gpu_push(pggpu_data *ds, int64_t nrows, bool by_rows, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		b = TILE(ds);
	int64_t		tile = ds->n >> ds->log_b;
	char	   *buf = (char *) s->stage[s->cur];
	/* a staged value's */
	size_t		size = ds->f16 ? sizeof(uint16_t) : ds->f32 ? sizeof(float) : sizeof(double);
	pggpu_status st;

	if (s->finished)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "no batch may follow a partial batch");
	if ((st = x_layout(ds, false, err)) != PGGPU_OK)
		return st;
	for (int j = 0; j < ds->d && nrows < b && !by_rows; j++)
		memset(buf + (j * b + nrows) * size, 0, size * (b - nrows));
	if (tile >= s->cap_tiles && (st = gpu_grow(ds, tile + 1, err)) != PGGPU_OK)
		return st;
	/* (a FLOAT32 set's floats, a FLOAT16 set's halves, as they are: the device holds them so) */
	if (by_rows)
	{
		if ((st = push_by_rows(ds, buf, nrows, size, tile, err)) != PGGPU_OK)
			return st;
	}
	else if (ds->f16 && !ds->f16_held)
	{
		const int64_t len = b * ds->d;

		CU(cudaMemcpyAsync(s->halves, buf, sizeof(uint16_t) * len, cudaMemcpyHostToDevice, s->stream));
		halves_to_floats_kernel<<<grid_for(s, len), BLOCK, 0, s->stream>>>(
			(const __half *) s->halves, (float *) s->X + tile * len, len);
		LAUNCHED(halves_to_floats_kernel);
	}
	else
		CU(cudaMemcpyAsync((char *) s->X + tile * TILE_BYTES(ds), buf, TILE_BYTES(ds), cudaMemcpyHostToDevice,
						   s->stream));
	CU(cudaEventRecord(s->copied[s->cur], s->stream));
	ds->n += nrows;
	s->xh_valid = false;
	s->finished = nrows < b;
	/* the other buffer is refilled next: its copy must be done */
	s->cur ^= 1;
	CU(cudaEventSynchronize(s->copied[s->cur]));
	return PGGPU_OK;
}
