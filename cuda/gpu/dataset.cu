/*
 * dataset.cu - a data set on the GPU: its memory (the rows' room, grown,
 * widened, parked; their staging is push.cu's), their range and scaling,
 * the k-means state (centroids, labels, partial sums, the tensor cores'
 * workspace), and the backend's ops table.
 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "blas.cuh"
#include "common.cuh"
#include "gemm_assign.cuh"
#include "tc_shapes.h"
#include "tc.cuh"

/* ---- kernels -------------------------------------------------------------- */

/*
 * The largest |x| and the least non-zero |x|, as the bits of non-negative
 * doubles (which order as the doubles do); the least one complemented, so
 * that both are maxima and zeroed stats mean "none".
 */
__global__ void
range_kernel(xview x, int64_t len, dev_stats *stats)
{
	double		hi = 0,
				lo = INFINITY;

	for (int64_t e = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; e < len;
		 e += (int64_t) gridDim.x * blockDim.x)
	{
		double		a = fabs(x[e]);

		hi = fmax(hi, a);
		lo = a > 0 ? fmin(lo, a) : lo;
	}
	for (int o = 16; o > 0; o >>= 1)
	{
		hi = fmax(hi, __shfl_xor_sync(FULL, hi, o));
		lo = fmin(lo, __shfl_xor_sync(FULL, lo, o));
	}
	if ((threadIdx.x & 31) == 0)
	{
		atomicMax(&stats->hiabs_bits, (unsigned long long) __double_as_longlong(hi));
		if (lo < INFINITY)
			atomicMax(&stats->loabs_inv, ~(unsigned long long) __double_as_longlong(lo));
	}
}

/* a FLOAT32 or FLOAT16 set's rows into doubles (exact), as gpu_widen wants them */
__global__ void
widen_kernel(const float *__restrict__ src, double *__restrict__ dst, int64_t len)
{
	for (int64_t e = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; e < len;
		 e += (int64_t) gridDim.x * blockDim.x)
		dst[e] = (double) src[e];
}

__global__ void
widen_halves_kernel(const __half *__restrict__ src, double *__restrict__ dst, int64_t len)
{
	for (int64_t e = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; e < len;
		 e += (int64_t) gridDim.x * blockDim.x)
		dst[e] = (double) __half2float(src[e]);
}

__global__ void
scale_kernel(double *x, int64_t len, double f)
{
	for (int64_t e = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; e < len;
		 e += (int64_t) gridDim.x * blockDim.x)
		x[e] *= f;
}


__global__ void
counts_kernel(const int32_t *labels, int64_t n, int k, unsigned long long *cnt)
{
	extern __shared__ unsigned long long s_cnt[];
	bool		shared = k <= 4096;

	if (shared)
	{
		for (int c = threadIdx.x; c < k; c += blockDim.x)
			s_cnt[c] = 0;
		__syncthreads();
	}
	for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
		atomicAdd(shared ? &s_cnt[labels[i]] : &cnt[labels[i]], 1ULL);
	if (shared)
	{
		__syncthreads();
		for (int c = threadIdx.x; c < k; c += blockDim.x)
			if (s_cnt[c])
				atomicAdd(&cnt[c], s_cnt[c]);
	}
}


/*
 * per_block groups of 32 rows a block, columns to rows (to_rows) or back
 * (see x_at), through shared memory: the block's threads take a group's
 * slots (r, l) (l of the 32 in run r) in order, coalesced; a value lies in
 * shared memory by its row and column, rows XL_PITCH(d) apart (a run's 32
 * rows in distinct banks).  By columns slot (r, l) holds row l's column r;
 * by rows, p = 32 r + l: row p / d's column p % d.
 */
#define XL_PITCH(d) ((d) + 1)

template <typename T>
__global__ void __launch_bounds__(BLOCK)
x_layout_kernel(T *X, int64_t groups, int d, int log_b, bool to_rows, int per_block)
{
	extern __shared__ double xs_[];
	T		   *xs = (T *) xs_;
	const int64_t g0 = (int64_t) blockIdx.x * per_block;
	const int	ng = groups - g0 < per_block ? (int) (groups - g0) : per_block;
	const int	gv = 32 * d;	/* a group's values */

	for (int pass = 0; pass < 2; pass++)
	{
		/* by columns first when to_rows reads, or back writes */
		const bool	by_columns = to_rows == (pass == 0);

		for (int e = threadIdx.x; e < ng * gv; e += blockDim.x)
		{
			int			gq = e / gv,
						r = (e - gq * gv) >> 5,
						l = e & 31;
			int			p = r * 32 + l;
			int64_t		gi = g0 + gq;
			int64_t		at = (gi >> (log_b - 5)) * ((int64_t) d << log_b) +
				((gi & ((1 << (log_b - 5)) - 1)) << 5) + ((int64_t) r << log_b) + l;
			T		   *v = xs + (int64_t) gq * 32 * XL_PITCH(d) +
				(by_columns ? l * XL_PITCH(d) + r : (p / d) * XL_PITCH(d) + p % d);

			if (pass == 0)
				*v = X[at];
			else
				X[at] = *v;
		}
		__syncthreads();
	}
}

/* ---- data ----------------------------------------------------------------- */

static void row_cache_free(void);



/*
 * The two pinned staging buffers of a batch each (as doubles: a float or
 * half batch takes part of one), at the open or (lazy_stage) at the first
 * batch; false where they cannot be had
 */
bool
gpu_stage_alloc(pggpu_data *ds)
{
	gpu_state  *s = ST(ds);
	size_t		bytes = (size_t) TILE(ds) * ds->d * sizeof(double);

	for (int b = 0; b < 2; b++)
		if (s->stage[b] == NULL && cudaHostAlloc((void **) &s->stage[b], bytes, cudaHostAllocDefault) != cudaSuccess)
		{
			s->stage[b] = NULL;
			(void) cudaGetLastError();
			return false;
		}
	return true;
}

static pggpu_status
gpu_open(pggpu_data *ds, int gpu_index, int64_t expected_rows, pggpu_error *err)
{
	gpu_state  *s = (gpu_state *) calloc(1, sizeof(gpu_state));
	size_t		fr = 0,
				tot = 0;
	int64_t		tile_bytes = TILE(ds) * ds->d * (int64_t) sizeof(double);	/* (doubles until gpu_dtype) */
	int64_t		tiles;
	cudaDeviceProp p;

	if (s == NULL)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	ds->impl = s;
	pggpu_find_gpus(gpu_index, &s->dev, &p, err);
	if (s->dev < 0)
		return PGGPU_ERR_NO_GPU;
	ds->gpu_index = s->dev;		/* the GPU taken (-1 asked for the first) */
	CU(cudaSetDevice(s->dev));
	snprintf(ds->device_name, sizeof(ds->device_name), "%s", p.name);
	s->sm_count = p.multiProcessorCount;
	s->smem_optin = (int) p.sharedMemPerBlockOptin;
	CU(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
	s->stream_ok = true;
	gpu_sets_opened(s->dev);
	for (int b = 0; b < 2; b++)
	{
		CU(cudaEventCreateWithFlags(&s->copied[b], cudaEventDisableTiming));
		s->event_ok[b] = true;
	}
	if (!ds->lazy_stage && !gpu_stage_alloc(ds))
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "could not allocate %.1f MB of pinned host memory",
						  tile_bytes / 1048576.0);
	CU(gpu_pinned_take((void **) &s->stats_h, sizeof(dev_stats)));
	CU(cudaHostGetDevicePointer((void **) &s->stats_hd, s->stats_h, 0));

	/* first allocation: the expected rows, up to half of the free memory */
	CU(cudaMemGetInfo(&fr, &tot));
	tiles = expected_rows > 0 ? (expected_rows + TILE(ds) - 1) / TILE(ds) : 1;
	if (tiles * tile_bytes > (int64_t) (fr / 2))
		tiles = (int64_t) (fr / 2) / tile_bytes;
	if (tiles < 1)
		tiles = 1;
	if (gpu_mem_take(&s->X, tiles * tile_bytes, s->stream) != cudaSuccess)
	{
		return pggpu_fail(err, PGGPU_ERR_GPU_MEMORY,
						  "could not allocate %.1f MB of GPU memory for %d columns (%.1f MB free)",
						  tiles * tile_bytes / 1048576.0, ds->d, fr / 1048576.0);
	}
	s->cap_tiles = tiles;
	CU(gpu_mem_take((void **) &s->stats, sizeof(dev_stats), s->stream));
	/* (a pass may set only some of the stats, and all of them are copied back) */
	CU(cudaMemsetAsync(s->stats, 0, sizeof(dev_stats), s->stream));
	/* (X is then the set's on every stream: another set's may copy rows into it) */
	CU(cudaStreamSynchronize(s->stream));
	return PGGPU_OK;
}

static_assert(PGGPU_GPU_FLOAT_HALVES_D == TC_MAX_D, "compute_internal.h's columns of halves held as floats");

/*
 * A FLOAT32 set (no rows yet) holds its rows as floats on the device, a
 * FLOAT16 set as halves: X allocated again at a half or a quarter of the
 * bytes a row (the first allocation, made for doubles, may be a large part
 * of the GPU).  A FLOAT16 set of TC_MAX_D columns or fewer holds floats
 * (PGGPU_GPU_FLOAT_HALVES_D, which pggpu_dtype_held_bytes counts by),
 * its batches of halves widened on the device as they arrive: the tensor
 * cores' scans stage rows by asynchronous copies, of 4 bytes at least, and
 * a branch for halves there spills tc_resident's registers.
 */
static pggpu_status
gpu_dtype(pggpu_data *ds, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		tiles = s->cap_tiles;
	const bool	f16_held = ds->f16 && ds->d > PGGPU_GPU_FLOAT_HALVES_D;
	const int64_t halves = TILE(ds) * ds->d;

	if (ds->n != 0)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "the value type is set before the first row");
	CU(cudaStreamSynchronize(s->stream));
	gpu_mem_give(s->halves, s->stream);
	s->halves = NULL;
	if (ds->f16 && !f16_held && gpu_mem_take((void **) &s->halves, sizeof(uint16_t) * halves, s->stream) != cudaSuccess)
	{
		return pggpu_fail(err, PGGPU_ERR_GPU_MEMORY,
						  "could not allocate %.1f MB of GPU memory for a batch of %d columns",
						  sizeof(uint16_t) * halves / 1048576.0, ds->d);
	}
	if (ds->narrow_held == (ds->f32 || ds->f16) && ds->f16_held == f16_held)
		return PGGPU_OK;
	gpu_mem_give(s->X, s->stream);
	s->X = NULL;
	s->cap_tiles = 0;
	ds->narrow_held = ds->f32 || ds->f16;
	ds->f16_held = f16_held;
	if (gpu_mem_take(&s->X, tiles * TILE_BYTES(ds), s->stream) != cudaSuccess)
	{
		return pggpu_fail(err, PGGPU_ERR_GPU_MEMORY, "could not allocate %.1f MB of GPU memory for %d columns",
						  tiles * TILE_BYTES(ds) / 1048576.0, ds->d);
	}
	s->cap_tiles = tiles;
	CU(cudaStreamSynchronize(s->stream));
	return PGGPU_OK;
}

/*
 * A FLOAT32 or FLOAT16 set's rows as doubles from now on (an op is about to
 * rewrite their values: scale, affine, or rows copied in at a scale); for a
 * moment the GPU holds both copies
 */
pggpu_status
gpu_widen(pggpu_data *ds, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		len = s->cap_tiles * TILE(ds) * ds->d;
	double	   *x = NULL;

	if (!ds->narrow_held)
		return PGGPU_OK;
	if (s->X == NULL)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "a parked data set cannot be widened");
	/* no rows yet (pggpu_data_hold_wide): nothing to keep, the room made again */
	if (ds->n == 0)
	{
		CU(cudaStreamSynchronize(s->stream));
		gpu_mem_give(s->X, s->stream);
		s->X = NULL;
	}
	if (gpu_mem_take((void **) &x, sizeof(double) * len, s->stream) != cudaSuccess)
	{
		size_t		fr = 0,
					tot = 0;

		if (s->X == NULL)
			s->cap_tiles = 0;	/* (its room given back above: the set is to be closed) */
		cudaMemGetInfo(&fr, &tot);
		return pggpu_fail(err, PGGPU_ERR_GPU_MEMORY,
						  "could not allocate %.1f MB of GPU memory to hold %lld %s rows of %d columns as doubles (%.1f MB free)",
						  sizeof(double) * len / 1048576.0, (long long) ds->n, ds->f16_held ? "float16" : "float32",
						  ds->d, fr / 1048576.0);
	}
	if (s->X == NULL)
		CU(cudaMemsetAsync(x, 0, sizeof(double) * len, s->stream));
	else if (ds->f16_held)
	{
		widen_halves_kernel<<<grid_for(s, len), BLOCK, 0, s->stream>>>((const __half *) s->X, x, len);
		LAUNCHED(widen_halves_kernel);
	}
	else
	{
		widen_kernel<<<grid_for(s, len), BLOCK, 0, s->stream>>>((const float *) s->X, x, len);
		LAUNCHED(widen_kernel);
	}
	CU(cudaStreamSynchronize(s->stream));
	gpu_mem_give(s->X, s->stream);
	s->X = x;
	s->xh_valid = false;
	ds->narrow_held = false;
	ds->f16_held = false;
	return PGGPU_OK;
}

pggpu_status
gpu_grow(pggpu_data *ds, int64_t tiles, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		tile_bytes = TILE_BYTES(ds);
	int64_t		cap = s->cap_tiles * 2 > tiles ? s->cap_tiles * 2 : tiles;
	void	   *x = NULL;

	if (gpu_mem_take(&x, cap * tile_bytes, s->stream) != cudaSuccess)
	{
		size_t		fr = 0,
					tot = 0;

		cap = tiles;			/* retry without headroom */
		if (gpu_mem_take(&x, cap * tile_bytes, s->stream) != cudaSuccess)
		{
			cudaMemGetInfo(&fr, &tot);
			return pggpu_fail(err, PGGPU_ERR_GPU_MEMORY,
							  "the data do not fit in GPU memory: after %lld rows of %d columns, growing their copy from %.1f to %.1f MB failed (%.1f MB free of %.1f MB)",
							  (long long) ds->n, ds->d, s->cap_tiles * tile_bytes / 1048576.0,
							  cap * tile_bytes / 1048576.0, fr / 1048576.0, tot / 1048576.0);
		}
	}
	CU(cudaMemcpyAsync(x, s->X, s->cap_tiles * tile_bytes, cudaMemcpyDeviceToDevice, s->stream));
	CU(cudaStreamSynchronize(s->stream));
	gpu_mem_give(s->X, s->stream);
	s->X = x;
	s->cap_tiles = cap;
	return PGGPU_OK;
}

/*
 * X by rows (while seeding) or by columns (see x_at); range and scale take
 * either.  per_block groups a block, as many as shared memory holds (at
 * most 8): at d = 256 a measured row is then 64 sectors of doubles, not 256
 * (a value a sector by columns).  A group wider than shared memory: left
 * by columns.
 */
pggpu_status
x_layout(pggpu_data *ds, bool rows, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		groups = ((ds->n + TILE(ds) - 1) >> ds->log_b) << (ds->log_b - 5);
	int			d = ds->d;
	size_t		es = ds->f16_held ? sizeof(__half) : ds->narrow_held ? sizeof(float) : sizeof(double);
	size_t		group_bytes = es * 32 * XL_PITCH(d);
	int			per_block = 8;
	unsigned	grid;
	void		(*fn_h) (__half *, int64_t, int, int, bool, int) = x_layout_kernel<__half>;
	void		(*fn_f) (float *, int64_t, int, int, bool, int) = x_layout_kernel<float>;
	void		(*fn_d) (double *, int64_t, int, int, bool, int) = x_layout_kernel<double>;
	const void *fn = ds->f16_held ? (const void *) fn_h : ds->narrow_held ? (const void *) fn_f : (const void *) fn_d;
	pggpu_status st;

	if (s->x_rows == rows || d < 2 || group_bytes > (size_t) s->smem_optin || groups == 0)
		return PGGPU_OK;
	while (per_block > 1 && per_block * group_bytes > (size_t) s->smem_optin)
		per_block >>= 1;
	grid = (unsigned) ((groups + per_block - 1) / per_block);
	if ((st = smem_opt_in(fn, per_block * group_bytes, err)) != PGGPU_OK)
		return st;
	if (ds->f16_held)
		fn_h<<<grid, BLOCK, per_block * group_bytes, s->stream>>>((__half *) s->X, groups, d, ds->log_b, rows,
																 per_block);
	else if (ds->narrow_held)
		fn_f<<<grid, BLOCK, per_block * group_bytes, s->stream>>>((float *) s->X, groups, d, ds->log_b, rows,
																 per_block);
	else
		fn_d<<<grid, BLOCK, per_block * group_bytes, s->stream>>>((double *) s->X, groups, d, ds->log_b, rows,
																 per_block);
	LAUNCHED(x_layout_kernel);
	s->x_rows = rows;
	return PGGPU_OK;
}

static void
free_km(gpu_state *s)
{
	/* (a ranged pass interrupted may still run; the handle given back idle) */
	if (s->stream_ok)
		cudaStreamSynchronize(s->stream);
	gpu_mem_give(s->C, s->stream);
	gpu_mem_give(s->labels, s->stream);
	gpu_mem_give(s->dist2, s->stream);
	gpu_mem_give(s->sums, s->stream);
	gpu_mem_give(s->cnt, s->stream);
	gpu_mem_give(s->mass, s->stream);
	s->mass = NULL;
	gpu_mem_give(s->block_part, s->stream);
	gpu_mem_give(s->part, s->stream);
	gpu_mem_give(s->pick_key, s->stream);
	gpu_mem_give(s->pick_row, s->stream);
	gpu_mem_give(s->sep, s->stream);
	gpu_mem_give(s->wsum, s->stream);
	gpu_mem_give(s->pp_rows, s->stream);
	gpu_mem_give(s->tc_ws, s->stream);
	s->tc_ws = NULL;
	gpu_mem_give(s->trial_ws, s->stream);
	s->trial_ws = NULL;
	s->trial_ws_bytes = 0;
	gpu_mem_give(s->gemm_ws, s->stream);
	s->gemm_ws = NULL;
	gpu_mem_give(s->C_lab, s->stream);
	s->C_lab = NULL;
	s->dists_stale = false;
	pggpu_blas_give(s->dev, (cublasHandle_t) s->blas);
	s->blas = NULL;
	gpu_pinned_give(s->cnt_h);
	s->C = s->dist2 = s->sums = s->block_part = s->part = s->pick_key = s->wsum = NULL;
	s->sep = NULL;
	s->labels = NULL;
	s->cnt = s->cnt_h = NULL;
	s->pick_row = s->pp_rows = NULL;
}

static void
gpu_close(pggpu_data *ds)
{
	gpu_state  *s = ST(ds);
	int			was = -1;

	if (s == NULL)
		return;
	/* (its memory given back on its stream, on its GPU; the thread's GPU as it was after) */
	(void) cudaGetDevice(&was);
	(void) cudaSetDevice(s->dev);
	if (s->stream_ok)
		cudaStreamSynchronize(s->stream);
	free_km(s);
	gpu_mem_give(s->X, s->stream);
	gpu_mem_give(s->halves, s->stream);
	gpu_mem_give(s->turn_room, s->stream);
	cudaFreeHost(s->Xh);
	row_cache_free();
	gpu_mem_give(s->rw, s->stream);
	gpu_mem_give(s->stats, s->stream);
	gpu_pinned_give(s->stats_h);
	for (int b = 0; b < 2; b++)
	{
		cudaFreeHost(s->stage[b]);
		if (s->event_ok[b])
			cudaEventDestroy(s->copied[b]);
	}
	if (s->stream_ok)
	{
		/* (what was given back, back in the pool before it may be trimmed) */
		cudaStreamSynchronize(s->stream);
		cudaStreamDestroy(s->stream);
		gpu_sets_closed(s->dev);
	}
	if (was >= 0)
		(void) cudaSetDevice(was);
	(void) cudaGetLastError();
	free(s);
	ds->impl = NULL;
}

/*
 * Parked rows' device memory is not freed but kept for the next part to be
 * unparked (streaming: the parts take turns on the GPU): a part's buffer
 * may be more than the pool keeps (device.cu's POOL_KEEP), and mapping it
 * again costs milliseconds.  Two buffers (the part computing and the
 * part arriving); any data set's close gives them back, so nothing stays
 * after a call.
 */
#define ROW_CACHE 2
static struct
{
	void	   *p;
	size_t		bytes;
	int			dev;
}			row_cache[ROW_CACHE];
static std::mutex row_cache_lock;

/* a cached buffer of dev of at least bytes, or NULL */
static void *
row_cache_take(int dev, size_t bytes)
{
	std::lock_guard<std::mutex> g(row_cache_lock);

	for (int i = 0; i < ROW_CACHE; i++)
		if (row_cache[i].p && row_cache[i].dev == dev && row_cache[i].bytes >= bytes)
		{
			void	   *p = row_cache[i].p;

			row_cache[i].p = NULL;
			return p;
		}
	return NULL;
}

/* p kept for a later part (else freed: the cache is full) */
static void
row_cache_put(int dev, void *p, size_t bytes)
{
	{
		std::lock_guard<std::mutex> g(row_cache_lock);

		for (int i = 0; i < ROW_CACHE; i++)
			if (row_cache[i].p == NULL)
			{
				row_cache[i].p = p;
				row_cache[i].bytes = bytes;
				row_cache[i].dev = dev;
				return;
			}
	}
	gpu_mem_give(p, 0);
}

static void
row_cache_free(void)
{
	std::lock_guard<std::mutex> g(row_cache_lock);

	for (int i = 0; i < ROW_CACHE; i++)
		if (row_cache[i].p)
		{
			cudaSetDevice(row_cache[i].dev);
			gpu_mem_give(row_cache[i].p, 0);
			row_cache[i].p = NULL;
		}
}

/*
 * Parking: the rows to pinned host memory (copied only when they changed
 * since the last time), their device memory handed to the cache above; the
 * k-means state stays.  Unparking: device memory again (from the cache
 * where it has a buffer large enough) and the rows copied back, on the
 * set's own stream (the copy runs while another part computes).  What
 * streams a table larger than the GPU through it, a part at a time
 * (parts.c).
 */
pggpu_status
gpu_park(pggpu_data *ds, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		tiles = (ds->n + TILE(ds) - 1) >> ds->log_b;
	size_t		bytes = (size_t) tiles * TILE_BYTES(ds);
	pggpu_status st;

	if (s->X == NULL)
		return PGGPU_OK;
	if ((st = x_layout(ds, false, err)) != PGGPU_OK)
		return st;
	if (!s->xh_valid && tiles > 0)
	{
		if (s->Xh == NULL || s->xh_bytes < bytes)
		{
			cudaFreeHost(s->Xh);
			s->Xh = NULL;
			if (cudaHostAlloc(&s->Xh, bytes, cudaHostAllocDefault) != cudaSuccess)
			{
				s->Xh = NULL;
				(void) cudaGetLastError();
				return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY,
								  "could not allocate %.1f MB of pinned host memory to park rows",
								  bytes / 1048576.0);
			}
			s->xh_bytes = bytes;
		}
		CU(cudaMemcpyAsync(s->Xh, s->X, bytes, cudaMemcpyDeviceToHost, s->stream));
	}
	/* the set's work done before its buffer goes to another */
	CU(cudaStreamSynchronize(s->stream));
	s->xh_valid = true;
	row_cache_put(s->dev, s->X, (size_t) s->cap_tiles * TILE_BYTES(ds));
	s->X = NULL;
	s->cap_tiles = 0;
	/* (a parked set takes no more rows) */
	gpu_mem_give(s->turn_room, s->stream);
	s->turn_room = NULL;
	return PGGPU_OK;
}

pggpu_status
gpu_unpark(pggpu_data *ds, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		tiles = (ds->n + TILE(ds) - 1) >> ds->log_b;
	size_t		bytes = (size_t) (tiles > 0 ? tiles : 1) * TILE_BYTES(ds);
	size_t		fr = 0,
				tot = 0;

	if (s->X != NULL)
		return PGGPU_OK;
	if ((s->X = row_cache_take(s->dev, bytes)) == NULL &&
		gpu_mem_take(&s->X, bytes, s->stream) != cudaSuccess)
	{
		/* the cache's buffers back to the GPU, then once more */
		row_cache_free();
		CU(cudaSetDevice(s->dev));
		/* (given back on the legacy stream: done, so the pool can hand it out again) */
		CU(cudaStreamSynchronize(0));
		if (gpu_mem_take(&s->X, bytes, s->stream) != cudaSuccess)
		{
			cudaMemGetInfo(&fr, &tot);
			return pggpu_fail(err, PGGPU_ERR_GPU_MEMORY,
							  "could not allocate %.1f MB of GPU memory to unpark rows (%.1f MB free)",
							  bytes / 1048576.0, fr / 1048576.0);
		}
	}
	/* (a cached buffer may be larger: its tiles are all the set's own now) */
	s->cap_tiles = tiles > 0 ? tiles : 1;
	s->x_rows = false;
	if (tiles > 0)
		CU(cudaMemcpyAsync(s->X, s->Xh, bytes, cudaMemcpyHostToDevice, s->stream));
	return PGGPU_OK;
}

/* see pggpu_ops */
static pggpu_status
gpu_km_weights(pggpu_data *ds, const double *w, pggpu_error *err)
{
	gpu_state  *s = ST(ds);

	if (s->stream_ok)
		CU(cudaStreamSynchronize(s->stream));
	gpu_mem_give(s->rw, s->stream);
	s->rw = NULL;
	s->pick_ready = false;
	if (w == NULL || ds->n == 0)
		return PGGPU_OK;
	CU(gpu_mem_take((void **) &s->rw, sizeof(double) * ds->n, s->stream));
	CU(cudaMemcpyAsync(s->rw, w, sizeof(double) * ds->n, cudaMemcpyHostToDevice, s->stream));
	CU(cudaStreamSynchronize(s->stream));
	return PGGPU_OK;
}

int
grid_for(gpu_state *s, int64_t work)
{
	int64_t		g = (work + BLOCK - 1) / BLOCK;
	int64_t		cap = (int64_t) s->sm_count * 8;

	if (cap > MAX_BLOCKS)
		cap = MAX_BLOCKS;
	return (int) (g < 1 ? 1 : g > cap ? cap : g);
}

static int64_t
used_elems(pggpu_data *ds)
{
	return ((ds->n + TILE(ds) - 1) >> ds->log_b) * TILE(ds) * ds->d;
}

/*
 * copies the stats back and waits: the one sync of an iteration (mirrored:
 * a kernel wrote the ones wanted into stats_h itself, no copy)
 */
pggpu_status
fetch_stats(gpu_state *s, pggpu_error *err, bool mirrored)
{
	if (!mirrored)
		CU(cudaMemcpyAsync(s->stats_h, s->stats, sizeof(dev_stats), cudaMemcpyDeviceToHost, s->stream));
	CU(cudaStreamSynchronize(s->stream));
	return PGGPU_OK;
}

static pggpu_status
gpu_range(pggpu_data *ds, double *lo, double *hi, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		len = used_elems(ds);
	unsigned long long inv;
	pggpu_status st;

	CU(cudaMemsetAsync(s->stats, 0, sizeof(dev_stats), s->stream));
	range_kernel<<<grid_for(s, len), BLOCK, 0, s->stream>>>(xview_of(ds), len, s->stats);
	LAUNCHED(range_kernel);
	if ((st = fetch_stats(s, err)) != PGGPU_OK)
		return st;
	memcpy(hi, &s->stats_h->hiabs_bits, sizeof(double));
	inv = ~s->stats_h->loabs_inv;
	if (s->stats_h->loabs_inv == 0)
		*lo = INFINITY;
	else
		memcpy(lo, &inv, sizeof(double));
	return PGGPU_OK;
}

static pggpu_status
gpu_scale(pggpu_data *ds, double factor, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		len = used_elems(ds);
	pggpu_status st;

	if ((st = gpu_widen(ds, err)) != PGGPU_OK)
		return st;
	scale_kernel<<<grid_for(s, len), BLOCK, 0, s->stream>>>((double *) s->X, len, factor);
	LAUNCHED(scale_kernel);
	s->xh_valid = false;
	return PGGPU_OK;
}

/* ---- k-means -------------------------------------------------------------- */

static pggpu_status
gpu_km_begin(pggpu_data *ds, int k, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		n = ds->n > 0 ? ds->n : 1;
	int64_t		kd = (int64_t) k * ds->d;
	pggpu_status st;

	free_km(s);
	if ((st = pggpu_weights_sync(ds, err)) != PGGPU_OK)
		return st;
	CU(gpu_mem_take((void **) &s->C, sizeof(double) * kd, s->stream));
	if (s->rw)
		CU(gpu_mem_take((void **) &s->mass, sizeof(double) * k, s->stream));
	CU(gpu_mem_take((void **) &s->sums, sizeof(double) * (kd + k), s->stream));
	CU(gpu_mem_take((void **) &s->cnt, sizeof(unsigned long long) * k, s->stream));
	CU(gpu_mem_take((void **) &s->labels, sizeof(int32_t) * n, s->stream));
	CU(gpu_mem_take((void **) &s->dist2, sizeof(double) * n, s->stream));
	CU(gpu_mem_take((void **) &s->block_part, sizeof(double) * MAX_BLOCKS, s->stream));
	/* the fit's route (route.c), and the per-block partial sums it needs */
	s->max_grid = s->sm_count * (2048 / BLOCK);
	if (s->max_grid > MAX_BLOCKS)
		s->max_grid = MAX_BLOCKS;
	{
		pggpu_gpu_shape shape = {s->sm_count, s->smem_optin};
		pggpu_route_force lloyd = ds->force;
		cublasHandle_t h;
		pggpu_error berr = {};

		pggpu_plan_step(ds->n, k, ds->d, &shape, step_range_work(ds), s->max_grid, !ds->double_only,
						&ds->force, &s->route);
		/* the product needs cuBLAS: without it (not installed), lloyd_kernel */
		if (PGGPU_LABEL_IS_GEMM(s->route.label))
		{
			if (pggpu_blas_take(s->dev, s->stream, &h, &berr) == PGGPU_OK)
				s->blas = h;
			else
			{
				lloyd.label = PGGPU_LABEL_LLOYD;
				pggpu_plan_step(ds->n, k, ds->d, &shape, step_range_work(ds), s->max_grid, false, &lloyd,
								&s->route);
			}
		}
		/* the FP16 product's copy of the rows (2 bytes a value): where it does not fit, float64 */
		if (s->route.label == PGGPU_LABEL_GEMM_F16)
		{
			s->gemm_ws_bytes = pggpu_gemm_workspace_bytes(n, k, ds->d, ds->log_b, true, ds->narrow_held);
			if (gpu_mem_take(&s->gemm_ws, s->gemm_ws_bytes, s->stream) != cudaSuccess)
			{
				lloyd.label = PGGPU_LABEL_GEMM;
				pggpu_plan_step(ds->n, k, ds->d, &shape, step_range_work(ds), s->max_grid, false, &lloyd,
								&s->route);
			}
		}
		if (s->rw)
			pggpu_plan_weighted(&s->route);
		pggpu_route_describe(&s->route, ds->route, sizeof(ds->route));
		s->route_len = strlen(ds->route);
	}
	s->part_rows = s->route.part_rows;
	if (s->part_rows > 0)
		CU(gpu_mem_take((void **) &s->part, sizeof(double) * (kd + k) * s->part_rows, s->stream));
	CU(gpu_mem_take((void **) &s->pick_key, sizeof(double) * MAX_BLOCKS, s->stream));
	CU(gpu_mem_take((void **) &s->pick_row, sizeof(long long) * MAX_BLOCKS, s->stream));
	CU(gpu_mem_take((void **) &s->sep, sizeof(float) * k, s->stream));
	CU(gpu_mem_take((void **) &s->wsum, sizeof(double) * ((n + PGGPU_DRAW_ROWS - 1) / PGGPU_DRAW_ROWS), s->stream));
	CU(gpu_mem_take((void **) &s->pp_rows, sizeof(long long) * k, s->stream));
	if (s->route.label == PGGPU_LABEL_GEMM)
	{
		s->gemm_ws_bytes = pggpu_gemm_workspace_bytes(n, k, ds->d, ds->log_b, false, ds->narrow_held);
		CU(gpu_mem_take(&s->gemm_ws, s->gemm_ws_bytes, s->stream));
	}
	else if (s->route.label == PGGPU_LABEL_GEMM_F16)
	{
		if ((st = x_layout(ds, false, err)) != PGGPU_OK ||
			(st = pggpu_gemm_prepare(ds, k, xview_of(ds), s->gemm_ws, s->stream, err)) != PGGPU_OK)
			return st;
		s->gemm_f16 = true;
		CU(gpu_mem_take((void **) &s->C_lab, sizeof(double) * kd, s->stream));
	}
	else if (s->route.label != PGGPU_LABEL_LLOYD)
		CU(gpu_mem_take(&s->tc_ws, pggpu_tc_workspace_bytes(n, k, ds->d), s->stream));
	CU(gpu_pinned_take((void **) &s->cnt_h, sizeof(unsigned long long) * k));
	CU(cudaMemsetAsync(s->labels, 0xff, sizeof(int32_t) * n, s->stream));
	s->pick_ready = false;
	s->labels_seeding = false;
	s->counts_at = UPD_NONE;
	return PGGPU_OK;
}

static pggpu_status
gpu_put_centroids(pggpu_data *ds, const double *C, pggpu_error *err)
{
	gpu_state  *s = ST(ds);

	/* (from pageable memory: C may be reused once this returns; the step follows in the stream) */
	CU(cudaMemcpyAsync(s->C, C, sizeof(double) * ds->k * ds->d, cudaMemcpyHostToDevice, s->stream));
	return PGGPU_OK;
}

static pggpu_status
gpu_get_centroids(pggpu_data *ds, double *C, pggpu_error *err)
{
	gpu_state  *s = ST(ds);

	CU(cudaMemcpyAsync(C, s->C, sizeof(double) * ds->k * ds->d, cudaMemcpyDeviceToHost, s->stream));
	CU(cudaStreamSynchronize(s->stream));
	return PGGPU_OK;
}

static pggpu_status
gpu_km_counts(pggpu_data *ds, int64_t *counts, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int			k = ds->k;
	size_t		shmem = k <= 4096 ? sizeof(unsigned long long) * k : 0;
	static_assert(sizeof(double) == sizeof(unsigned long long), "cnt_h holds k doubles as well");

	/* the last update step counted its rows: those counts (a pass over the labels saved) */
	if (s->counts_at == UPD_PRIVATE)
		CU(cudaMemcpyAsync(s->cnt_h, s->sums + (int64_t) k * ds->d, sizeof(double) * k, cudaMemcpyDeviceToHost,
						   s->stream));
	else
	{
		if (s->counts_at == UPD_NONE)
		{
			CU(cudaMemsetAsync(s->cnt, 0, sizeof(unsigned long long) * k, s->stream));
			counts_kernel<<<grid_for(s, ds->n), BLOCK, shmem, s->stream>>>(s->labels, ds->n, k, s->cnt);
			LAUNCHED(counts_kernel);
		}
		CU(cudaMemcpyAsync(s->cnt_h, s->cnt, sizeof(unsigned long long) * k, cudaMemcpyDeviceToHost, s->stream));
	}
	CU(cudaStreamSynchronize(s->stream));
	for (int c = 0; c < k; c++)
		counts[c] = s->counts_at == UPD_PRIVATE ? (int64_t) ((const double *) s->cnt_h)[c] : (int64_t) s->cnt_h[c];
	return PGGPU_OK;
}


static pggpu_status
gpu_km_sums(pggpu_data *ds, double *sums, int64_t *counts, double *mass, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		kd = (int64_t) ds->k * ds->d;
	int			k = ds->k;

	if (s->counts_at == UPD_NONE)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "no step with update to take sums of");
	/* (UPD_PRIVATE: the counts follow the sums, as doubles; else in cnt) */
	CU(cudaMemcpyAsync(sums, s->sums, sizeof(double) * kd, cudaMemcpyDeviceToHost, s->stream));
	CU(cudaMemcpyAsync(s->cnt_h, s->counts_at == UPD_PRIVATE ? (const void *) (s->sums + kd) : (const void *) s->cnt,
					   sizeof(double) * k, cudaMemcpyDeviceToHost, s->stream));
	if (mass && s->mass)
		CU(cudaMemcpyAsync(mass, s->mass, sizeof(double) * k, cudaMemcpyDeviceToHost, s->stream));
	CU(cudaStreamSynchronize(s->stream));
	for (int c = 0; c < k; c++)
		counts[c] = s->counts_at == UPD_PRIVATE ? (int64_t) ((const double *) s->cnt_h)[c] : (int64_t) s->cnt_h[c];
	for (int c = 0; mass && !s->mass && c < k; c++)
		mass[c] = (double) counts[c];
	return PGGPU_OK;
}

static pggpu_status
gpu_km_fetch(pggpu_data *ds, int32_t *labels, double *dist2, pggpu_error *err)
{
	gpu_state  *s = ST(ds);

	if (dist2)
	{
		pggpu_status st = pggpu_gpu_fresh_dists(ds, err);

		if (st != PGGPU_OK)
			return st;
	}
	CU(cudaStreamSynchronize(s->stream));
	if (labels && ds->n > 0)
		CU(cudaMemcpy(labels, s->labels, sizeof(int32_t) * ds->n, cudaMemcpyDeviceToHost));
	if (dist2 && ds->n > 0)
		CU(cudaMemcpy(dist2, s->dist2, sizeof(double) * ds->n, cudaMemcpyDeviceToHost));
	return PGGPU_OK;
}

/*
 * Every op but open makes its set's GPU current first: CUDA's current device
 * is the calling thread's, and one thread may work on sets of several GPUs
 * (parts.c), or on one after another thread's
 */
template <typename F, F f> struct on_gpu;
template <typename R, typename... A, R (*f) (pggpu_data *, A...)>
struct on_gpu<R (*) (pggpu_data *, A...), f>
{
	static R call(pggpu_data *ds, A... a)
	{
		if (ds->impl != NULL && ST(ds)->dev >= 0)
			(void) cudaSetDevice(ST(ds)->dev);
		return f(ds, a...);
	}
};
#define ON_GPU(f) on_gpu<decltype(&f), &f>::call

static const pggpu_ops gpu_ops = {
	gpu_open,
	ON_GPU(gpu_batch),
	ON_GPU(gpu_push),
	ON_GPU(gpu_close),
	ON_GPU(gpu_range),
	ON_GPU(gpu_scale),
	ON_GPU(gpu_km_begin),
	ON_GPU(gpu_put_centroids),
	ON_GPU(gpu_get_centroids),
	ON_GPU(gpu_km_step),
	ON_GPU(gpu_km_counts),
	ON_GPU(gpu_km_point),
	ON_GPU(gpu_km_pick),
	ON_GPU(gpu_km_fetch),
	ON_GPU(gpu_km_pp_steps),
	ON_GPU(gpu_km_normalize),
	ON_GPU(gpu_km_weights),
	ON_GPU(gpu_km_gather),
	ON_GPU(gpu_col_sums),
	ON_GPU(gpu_col_affine),
	ON_GPU(gpu_unit_rows),
	ON_GPU(gpu_park),
	ON_GPU(gpu_unpark),
	ON_GPU(gpu_keys),
	ON_GPU(gpu_get_rows),
	ON_GPU(gpu_km_trials),
	ON_GPU(gpu_km_greedy_steps),
	ON_GPU(gpu_copy_rows),
	ON_GPU(gpu_km_sums),
	ON_GPU(gpu_dtype),
	ON_GPU(gpu_widen),
	ON_GPU(gpu_km_farthest),
};

extern "C" const pggpu_ops *const pggpu_gpu_ops = &gpu_ops;

