/*
 * trials.cu - what the driver's seeding reads of the rows on the GPU
 * (pggpu_ops keys, get_rows, km_trials and km_greedy_steps): their content
 * keys, rows by index, and greedy k-means++'s trials, bit for bit
 * cpu/trials.c's: the same terms (compute_internal.h), summed in the same
 * order, one step at a time or a batch of steps on the device.
 */
#include <cuda_runtime.h>

#include <climits>

#include "common.cuh"
#include "draw.cuh"

/* a thread a row: its key from its values as pushed */
__global__ void
keys_kernel(xview X, int64_t n, int d, int log_b, bool x_rows,
			unsigned long long *keys)
{
	for (int64_t i = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
	{
		uint64_t	h = 0;
		int			emax = INT_MIN;

		for (int j = 0; j < d; j++)
		{
			double		v = X[x_at(i, j, d, log_b, x_rows)];

			if (v != 0 && pggpu_key_exponent(v) > emax)
				emax = pggpu_key_exponent(v);
		}
		for (int j = 0; j < d; j++)
			h += pggpu_key_term(X[x_at(i, j, d, log_b, x_rows)], emax, j);
		keys[i] = pggpu_key_final(h, d);
	}
}

pggpu_status
gpu_keys(pggpu_data *ds, uint64_t *keys, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	unsigned long long *dk = NULL;

	if (ds->n == 0)
		return PGGPU_OK;
	CU(cudaMallocAsync((void **) &dk, sizeof(unsigned long long) * ds->n, s->stream));
	keys_kernel<<<grid_for(s, ds->n), BLOCK, 0, s->stream>>>(xview_of(ds), ds->n, ds->d, ds->log_b, s->x_rows, dk);
	if (cudaPeekAtLastError() == cudaSuccess)
		(void) cudaMemcpyAsync(keys, dk, sizeof(uint64_t) * ds->n, cudaMemcpyDeviceToHost, s->stream);
	(void) cudaFreeAsync(dk, s->stream);
	LAUNCHED(keys_kernel);
	CU(cudaStreamSynchronize(s->stream));
	return PGGPU_OK;
}

/* out[t] := X[rows[t]] (row-major), a block a row; zeros for a row -1 */
__global__ void
rows_gather_kernel(xview X, int d, int log_b, bool x_rows, const long long *rows,
				   double *out)
{
	long long	r = rows[blockIdx.x];

	for (int j = threadIdx.x; j < d; j += blockDim.x)
		out[(int64_t) blockIdx.x * d + j] = r < 0 ? 0.0 : X[x_at(r, j, d, log_b, x_rows)];
}

/* rows a gather at most (its grid's blocks) */
#define GATHER_ROWS 65536

pggpu_status
gpu_get_rows(pggpu_data *ds, const int64_t *rows, int64_t m, double *out, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		chunk = m < GATHER_ROWS ? m : GATHER_ROWS;
	char	   *buf = NULL;
	cudaError_t e = cudaSuccess;

	if (m == 0)
		return PGGPU_OK;
	CU(cudaMallocAsync((void **) &buf, (sizeof(long long) + sizeof(double) * ds->d) * chunk, s->stream));
	for (int64_t i0 = 0; i0 < m && e == cudaSuccess; i0 += chunk)
	{
		int64_t		take = m - i0 < chunk ? m - i0 : chunk;
		double	   *dout = (double *) (buf + sizeof(long long) * chunk);

		e = cudaMemcpyAsync(buf, rows + i0, sizeof(long long) * take, cudaMemcpyHostToDevice, s->stream);
		if (e == cudaSuccess)
		{
			rows_gather_kernel<<<(unsigned) take, 128, 0, s->stream>>>(xview_of(ds), ds->d, ds->log_b, s->x_rows,
																	   (const long long *) buf, dout);
			e = cudaPeekAtLastError();
		}
		if (e == cudaSuccess)
			e = cudaMemcpyAsync(out + i0 * ds->d, dout, sizeof(double) * ds->d * take, cudaMemcpyDeviceToHost,
								s->stream);
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(s->stream);	/* rows and out are pageable: the next chunk reuses buf */
	}
	(void) cudaFreeAsync(buf, s->stream);
	CU(e);
	CU(cudaStreamSynchronize(s->stream));
	return PGGPU_OK;
}

/* a value as dst holds it: a double, or (a narrow copy: the value a float or half already) narrowed, exactly */
template <typename T> __device__ __forceinline__ T held_as(double v);
template <> __device__ __forceinline__ double held_as<double>(double v) { return v; }
template <> __device__ __forceinline__ float held_as<float>(double v) { return (float) v; }
template <> __device__ __forceinline__ __half held_as<__half>(double v) { return __double2half(v); }

/*
 * dst's rows 0 .. m-1 (its tiles, column-major inside) := src's rows
 * rows[t] times f, and the rest of the last tile 0 (as a push leaves it);
 * a thread a value, t fastest: dst written in runs, src's rows gathered
 */
template <typename T>
__global__ void
copy_rows_kernel(xview X, int d, int log_b, bool x_rows, const long long *rows,
				 int64_t m, int64_t padded, double f, T *Y, int log_bd)
{
	for (int64_t q = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; q < padded * d;
		 q += (int64_t) gridDim.x * blockDim.x)
	{
		int64_t		t = q % padded;
		int			j = (int) (q / padded);

		Y[pggpu_at(t, j, d, log_bd)] = held_as<T>(t < m ? X[x_at(rows[t], j, d, log_b, x_rows)] * f : 0.0);
	}
}

/* Z (m x d, by columns) := the rows rows[t] of X times f: one source's rows, to be placed */
__global__ void
gather_rows_kernel(xview X, int d, int log_b, bool x_rows, const long long *rows,
				   int64_t m, double f, double *Z)
{
	for (int64_t q = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; q < m * d;
		 q += (int64_t) gridDim.x * blockDim.x)
		Z[q] = X[x_at(rows[q % m], (int) (q / m), d, log_b, x_rows)] * f;
}

/* dst's row at[t] := Z's row t (m x d, by columns); at == NULL: the rest of the last tile from m, 0 */
template <typename T>
__global__ void
place_rows_kernel(const double *__restrict__ Z, int64_t m, const long long *at, int64_t padded, int d,
				  T *Y, int log_bd)
{
	int64_t		len = at ? m : padded - m;

	for (int64_t q = blockIdx.x * (int64_t) blockDim.x + threadIdx.x; q < len * d;
		 q += (int64_t) gridDim.x * blockDim.x)
	{
		int64_t		t = q % len;
		int			j = (int) (q / len);

		if (at)
			Y[pggpu_at(at[t], j, d, log_bd)] = held_as<T>(Z[q]);
		else
			Y[pggpu_at(m + t, j, d, log_bd)] = held_as<T>(0.0);
	}
}

/* place_rows_kernel into dst's X as dst holds it (count: the values written) */
static void
launch_place(pggpu_data *dst, const double *Z, int64_t m, const long long *at, int64_t padded, int64_t count)
{
	gpu_state  *t = ST(dst);
	unsigned	g = grid_for(t, count);

	if (dst->f16_held)
		place_rows_kernel<<<g, BLOCK, 0, t->stream>>>(Z, m, at, padded, dst->d, (__half *) t->X, dst->log_b);
	else if (dst->narrow_held)
		place_rows_kernel<<<g, BLOCK, 0, t->stream>>>(Z, m, at, padded, dst->d, (float *) t->X, dst->log_b);
	else
		place_rows_kernel<<<g, BLOCK, 0, t->stream>>>(Z, m, at, padded, dst->d, (double *) t->X, dst->log_b);
}

/*
 * Source p's rows of a copy of several sources (part of gpu_copy_rows):
 * gathered on its GPU, brought to dst's (a peer copy: NVLink where there is
 * one) and placed at their places there.  idx: the rows, then the places.
 */
static pggpu_status
copy_from(pggpu_data *dst, pggpu_data *src, const int64_t *idx, int64_t mp, double f, pggpu_error *err)
{
	gpu_state  *s = ST(src);
	gpu_state  *t = ST(dst);
	long long  *rows = NULL,
			   *at = NULL;
	double	   *z = NULL,
			   *zd = NULL;
	size_t		bytes = sizeof(double) * mp * dst->d;
	cudaError_t e;

	/* (cudaMalloc, not the stream-ordered pool: peer access maps the former only) */
	CU(cudaSetDevice(s->dev));
	if ((e = cudaMalloc((void **) &rows, sizeof(long long) * mp)) == cudaSuccess &&
		(e = cudaMalloc((void **) &z, bytes)) == cudaSuccess &&
		(e = cudaMemcpyAsync(rows, idx, sizeof(long long) * mp, cudaMemcpyHostToDevice, s->stream)) == cudaSuccess)
	{
		gather_rows_kernel<<<grid_for(s, mp * dst->d), BLOCK, 0, s->stream>>>(
			xview_of(src), src->d, src->log_b, s->x_rows, rows, mp, f, z);
		e = cudaGetLastError();
	}
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(s->stream);
	if (e == cudaSuccess && s->dev != t->dev)
	{
		/* (peer access on, where the GPUs allow it: else CUDA stages the copy through the host) */
		(void) gpu_peer_access(t->dev, s->dev);
		if ((e = cudaSetDevice(t->dev)) == cudaSuccess && (e = cudaMalloc((void **) &zd, bytes)) == cudaSuccess)
			e = cudaMemcpyPeerAsync(zd, t->dev, z, s->dev, bytes, t->stream);
	}
	if (e == cudaSuccess && (e = cudaSetDevice(t->dev)) == cudaSuccess &&
		(e = cudaMalloc((void **) &at, sizeof(long long) * mp)) == cudaSuccess &&
		(e = cudaMemcpyAsync(at, idx + mp, sizeof(long long) * mp, cudaMemcpyHostToDevice, t->stream)) == cudaSuccess)
	{
		launch_place(dst, zd ? zd : z, mp, at, 0, mp * dst->d);
		e = cudaGetLastError();
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(t->stream);
	}
	/* (cudaFree waits for the device's work: nothing of these is still in use) */
	(void) cudaSetDevice(t->dev);
	(void) cudaFree(at);
	(void) cudaFree(zd);
	(void) cudaSetDevice(s->dev);
	(void) cudaFree(rows);
	(void) cudaFree(z);
	(void) cudaSetDevice(t->dev);
	if (e == cudaErrorMemoryAllocation)
	{
		(void) cudaGetLastError();
		return pggpu_fail(err, PGGPU_ERR_GPU_MEMORY, "the seeding rows do not fit in GPU memory");
	}
	CU(e);
	return PGGPU_OK;
}

/*
 * see pggpu_ops: dst empty.  One source on dst's GPU: a device-to-device
 * gather; else each source's rows gathered on its GPU and placed (copy_from)
 */
pggpu_status
gpu_copy_rows(pggpu_data *dst, pggpu_data *const *srcs, int nsrc, const int *which, const int64_t *rows,
			  int64_t m, const int *e, pggpu_error *err)
{
	gpu_state  *t = ST(dst);
	int64_t		padded = (m + TILE(dst) - 1) / TILE(dst) * TILE(dst);
	bool		narrow = dst->narrow_held;
	pggpu_status st;

	if (dst->n != 0 || m < 1 || nsrc < 1)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "rows cannot be copied from these data sets to that one");
	for (int p = 0; p < nsrc; p++)
		if (srcs[p]->backend != PGGPU_BACKEND_GPU || srcs[p]->impl == NULL || srcs[p]->parked ||
			srcs[p]->d != dst->d || e[p] < -1022 || e[p] > 1023)
			return pggpu_fail(err, PGGPU_ERR_INVALID, "rows cannot be copied from these data sets to that one");
	for (int64_t i = 0; i < m; i++)
	{
		int			p = which ? which[i] : 0;

		if (p < 0 || p >= nsrc || rows[i] < 0 || rows[i] >= srcs[p]->n)
			return pggpu_fail(err, PGGPU_ERR_INVALID, "row %lld is not in the data set", (long long) rows[i]);
	}
	/* (dst holds doubles where the rows come scaled or wider than it holds them) */
	for (int p = 0; p < nsrc; p++)
		narrow &= srcs[p]->narrow_held && srcs[p]->f16_held == dst->f16_held && e[p] == 0;
	if ((st = x_layout(dst, false, err)) != PGGPU_OK || (!narrow && (st = gpu_widen(dst, err)) != PGGPU_OK) ||
		(padded / TILE(dst) > t->cap_tiles && (st = gpu_grow(dst, padded / TILE(dst), err)) != PGGPU_OK))
		return st;
	if (nsrc == 1 && ST(srcs[0])->dev == t->dev)
	{
		gpu_state  *s = ST(srcs[0]);
		long long  *drows = NULL;

		/* (on src's stream: dst's X is not in use, src's may be) */
		CU(cudaMallocAsync((void **) &drows, sizeof(long long) * m, s->stream));
		static_assert(sizeof(long long) == sizeof(int64_t), "the rows as the caller has them");
		if (cudaMemcpyAsync(drows, rows, sizeof(long long) * m, cudaMemcpyHostToDevice, s->stream) == cudaSuccess)
		{
			unsigned	g = grid_for(s, padded * dst->d);
			xview		X = xview_of(srcs[0]);
			double		f = ldexp(1.0, e[0]);

			if (dst->f16_held)
				copy_rows_kernel<<<g, BLOCK, 0, s->stream>>>(X, dst->d, srcs[0]->log_b, s->x_rows, drows, m, padded,
															 f, (__half *) t->X, dst->log_b);
			else if (dst->narrow_held)
				copy_rows_kernel<<<g, BLOCK, 0, s->stream>>>(X, dst->d, srcs[0]->log_b, s->x_rows, drows, m, padded,
															 f, (float *) t->X, dst->log_b);
			else
				copy_rows_kernel<<<g, BLOCK, 0, s->stream>>>(X, dst->d, srcs[0]->log_b, s->x_rows, drows, m, padded,
															 f, (double *) t->X, dst->log_b);
			(void) cudaPeekAtLastError();
		}
		(void) cudaFreeAsync(drows, s->stream);
		CU(cudaGetLastError());
		CU(cudaStreamSynchronize(s->stream));
	}
	else
	{
		int64_t    *idx = (int64_t *) malloc(sizeof(int64_t) * 2 * m);

		if (idx == NULL)
			return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		if (padded > m)
		{
			launch_place(dst, NULL, m, NULL, padded, (padded - m) * dst->d);
			(void) cudaPeekAtLastError();
		}
		st = PGGPU_OK;
		for (int p = 0; p < nsrc && st == PGGPU_OK; p++)
		{
			int64_t		mp = 0;

			for (int64_t i = 0; i < m; i++)
				if ((which ? which[i] : 0) == p)
					idx[mp++] = rows[i];
			for (int64_t i = 0, q = 0; i < m; i++)
				if ((which ? which[i] : 0) == p)
					idx[mp + q++] = i;
			if (mp > 0)
				st = copy_from(dst, srcs[p], idx, mp, ldexp(1.0, e[p]), err);
		}
		free(idx);
		if (st != PGGPU_OK)
			return st;
		CU(cudaGetLastError());
		CU(cudaStreamSynchronize(t->stream));
	}
	dst->n = m;
	t->xh_valid = false;
	t->finished = m < padded;
	return PGGPU_OK;
}

/*
 * Candidates measured at once a pass over a block's rows (registers):
 * TRIAL_CHUNK, or TRIAL_FEW a block where the rows' blocks are too few to
 * fill the GPU (a seeding set of 65,536 rows is 256 blocks; a hierarchical
 * group's of 7,000, 28): the candidates then split between blocks too
 * (blockIdx.y), and a thread's chain of dependent steps is a quarter as
 * long.  Measured on an H200 (Nsight Compute), 7,000 rows of 256, 6
 * candidates: 57 us a pass in chunks of 8 on float64 rows, 137 us on
 * floats read through xview (its branch a value kept the loads from
 * overlapping); the rows' own type and chunks of 2 on 3 x 28 blocks,
 * 45 us on floats.  (A row's base address taken once, then column j at
 * j << log_b, not x_at's sum a value: the seeding 20 % slower, not kept.)
 */
#define TRIAL_CHUNK 8
#define TRIAL_FEW 2

/*
 * Measured on an H100 (65,536 rows of 768, 8 candidates; reading the rows
 * alone 132 us): the candidates read from global memory a value at a time
 * took 520-730 us however the rows' loads were grouped; staged in shared
 * memory column by column (TRIAL_COLS columns at a time, the candidates of
 * a column side by side, two a load) with TRIAL_LOADS of a row's values
 * loaded before they are used, 149 us.
 */
#define TRIAL_LOADS 16
/*
 * On few blocks (TRIAL_FEW) a thread's loads are a wait each round, and no
 * other block's work hides them: there 64 of a row's values (floats or
 * halves; 32 doubles) are loaded a round, kept in their own type.
 */
#define TRIAL_FEW_LOADS(T) (sizeof(T) > sizeof(float) ? 32 : 64)
#define TRIAL_COLS 512
static_assert(TRIAL_COLS % TRIAL_LOADS == 0 && TRIAL_COLS % 64 == 0 && TRIAL_CHUNK % 2 == 0 &&
			  TRIAL_FEW % 2 == 0, "trials_kernel's staging");
static_assert(TRIAL_COLS >= PGGPU_DRAW_ROWS, "trials_kernel's terms fit the staging memory");

/*
 * A block of PGGPU_DRAW_ROWS threads a block of the draw's rows: thread
 * 32 r + l takes row 256 b + 32 r + l, measures it against the candidates
 * (CH at a time: those of chunks blockIdx.y, blockIdx.y + gridDim.y, ...)
 * and leaves its terms in shared memory; warp 0 then sums them in
 * pggpu_trial_block's order (lane l: r = 0..7 in order, then the
 * butterfly).  Each candidate's sums are the same however the candidates
 * are chunked.  X: the rows as the set holds them (T: double, float or
 * __half), read as doubles.  dout, when not NULL: the squared distances
 * too, dout[t * n + i] (summed as pp_step_kernel sums them).  stats, when
 * not NULL: nothing to do once a draw of km_greedy_steps failed.
 */
template <typename T, int CH, int L>
__global__ void __launch_bounds__(PGGPU_DRAW_ROWS)
trials_kernel(const T *__restrict__ X, int64_t n, int d, int log_b, bool x_rows,
			  const double *__restrict__ dist2, const double *__restrict__ rw,
			  const double *__restrict__ cand, int m, double *bsum, int64_t nblocks, double *dout,
			  const dev_stats *stats)
{
	/* the candidates' columns j0 .. j0 + TRIAL_COLS - 1 ([j][c]); then the terms (t) */
	__shared__ double2 cs[TRIAL_COLS * CH / 2];
	double		(*t)[PGGPU_DRAW_ROWS] = (double (*)[PGGPU_DRAW_ROWS]) cs;
	int64_t		b = blockIdx.x;
	int64_t		i = b * PGGPU_DRAW_ROWS + threadIdx.x;
	int			lane = threadIdx.x & 31;

	if (stats && stats->pp_stalled)
		return;
	for (int c0 = blockIdx.y * CH; c0 < m; c0 += gridDim.y * CH)
	{
		double		acc[CH];
		int			mc = m - c0 < CH ? m - c0 : CH;

#pragma unroll
		for (int c = 0; c < CH; c++)
			acc[c] = 0.0;
		for (int j0 = 0; j0 < d; j0 += TRIAL_COLS)
		{
			int			cols = d - j0 < TRIAL_COLS ? d - j0 : TRIAL_COLS;

			__syncthreads();	/* the last columns (or terms) read */
			for (int q = threadIdx.x; q < cols * CH; q += blockDim.x)
				((double *) cs)[q] = q % CH < mc ? cand[(int64_t) (c0 + q % CH) * d + j0 + q / CH] : 0.0;
			__syncthreads();
			for (int j1 = 0; i < n && j1 < cols; j1 += L)
			{
				T			x[L];

#pragma unroll
				for (int jj = 0; jj < L; jj++)
					x[jj] = j1 + jj < cols ? X[x_at(i, j0 + j1 + jj, d, log_b, x_rows)] : (T) 0;
#pragma unroll
				for (int jj = 0; jj < L; jj++)
					if (j1 + jj < cols)
#pragma unroll
						for (int c = 0; c < CH; c += 2)
						{
							double2		v = cs[((j1 + jj) * CH + c) / 2];

							acc[c] = sq_term(acc[c], (double) x[jj], v.x);
							acc[c + 1] = sq_term(acc[c + 1], (double) x[jj], v.y);
						}
			}
		}
		__syncthreads();		/* t overlays the columns */
#pragma unroll
		for (int c = 0; c < CH; c++)
		{
			t[c][threadIdx.x] = i < n && c < mc ? pggpu_trial_term(dist2[i], acc[c], rw, i) : 0.0;
			if (dout && i < n && c < mc)
				dout[(int64_t) (c0 + c) * n + i] = acc[c];
		}
		__syncthreads();
		if (threadIdx.x < 32)
			for (int c = 0; c < mc; c++)
			{
				double		sum = 0.0;

				for (int r = 0; r < PGGPU_DRAW_ROWS / 32; r++)
					sum = __dadd_rn(sum, t[c][r * 32 + lane]);
				for (int o = 16; o > 0; o >>= 1)
					sum = __dadd_rn(sum, __shfl_xor_sync(FULL, sum, o));
				if (lane == 0)
					bsum[(int64_t) (c0 + c) * nblocks + b] = sum;
			}
		__syncthreads();
	}
}

/* a thread a candidate: its blocks' sums in order (INFINITY for no row) */
__global__ void
trials_total_kernel(const double *bsum, int64_t nblocks, int m, const long long *rows, double *pot)
{
	int			c = blockIdx.x * blockDim.x + threadIdx.x;
	double		s = 0.0;

	if (c >= m)
		return;
	for (int64_t b = 0; b < nblocks; b++)
		s = __dadd_rn(s, bsum[(int64_t) c * nblocks + b]);
	pot[c] = rows[c] < 0 ? INFINITY : s;
}

/*
 * The workspace of m trials (kept with the k-means state, grown): their
 * values, block sums, potentials and rows, and for km_greedy_steps the
 * draws' partial picks (parts a trial), with keep_dist the rows' squared
 * distances to the trials, and nkeys keys
 */
pggpu_status
trial_workspace(pggpu_data *ds, int m, int parts, bool keep_dist, int nkeys, trial_ws *w, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	int64_t		nblocks = (ds->n + PGGPU_DRAW_ROWS - 1) / PGGPU_DRAW_ROWS;
	size_t		dists = keep_dist ? (size_t) m * ds->n : 0;
	size_t		doubles = (size_t) m * ds->d + (size_t) m * nblocks + m + (size_t) m * parts + dists;
	size_t		bytes = sizeof(double) * doubles + sizeof(long long) * (m + (size_t) m * parts + 1) +
		sizeof(unsigned long long) * nkeys + sizeof(unsigned) * m;

	static_assert(sizeof(double) == sizeof(long long), "the workspace's pieces stay aligned");
	if (s->trial_ws_bytes < bytes)
	{
		CU(cudaStreamSynchronize(s->stream));
		gpu_mem_give(s->trial_ws, s->stream);
		s->trial_ws = NULL;
		s->trial_ws_bytes = 0;
		CU(gpu_mem_take(&s->trial_ws, bytes, s->stream));
		s->trial_ws_bytes = bytes;
	}
	w->nblocks = nblocks;
	w->cand = (double *) s->trial_ws;
	w->bsum = w->cand + (size_t) m * ds->d;
	w->pot = w->bsum + (size_t) m * nblocks;
	w->part_key = w->pot + m;
	w->dist = dists > 0 ? w->part_key + (size_t) m * parts : NULL;
	w->rows = (long long *) (w->part_key + (size_t) m * parts + dists);
	w->part_row = w->rows + m;
	w->choice = w->part_row + (size_t) m * parts;
	w->keys = (unsigned long long *) (w->choice + 1);
	w->arrive = (unsigned *) (w->keys + nkeys);
	return PGGPU_OK;
}

/* trials_kernel, CH candidates a block at a time, chunks of them on gy blocks, the rows as ds holds them */
template <int CH>
static void
launch_trials_chunks(pggpu_data *ds, const trial_ws *w, int m, const dev_stats *stats, unsigned gy)
{
	gpu_state  *s = ST(ds);
	dim3		grid((unsigned) w->nblocks, gy);
	xview		X = xview_of(ds);

	if (X.f16)
		trials_kernel<__half, CH, (CH == TRIAL_FEW ? TRIAL_FEW_LOADS(__half) : TRIAL_LOADS)>
			<<<grid, PGGPU_DRAW_ROWS, 0, s->stream>>>(
			(const __half *) X.p, ds->n, ds->d, ds->log_b, s->x_rows, s->dist2, s->rw, w->cand, m, w->bsum,
			w->nblocks, w->dist, stats);
	else if (X.f32)
		trials_kernel<float, CH, (CH == TRIAL_FEW ? TRIAL_FEW_LOADS(float) : TRIAL_LOADS)>
			<<<grid, PGGPU_DRAW_ROWS, 0, s->stream>>>(
			(const float *) X.p, ds->n, ds->d, ds->log_b, s->x_rows, s->dist2, s->rw, w->cand, m, w->bsum,
			w->nblocks, w->dist, stats);
	else
		trials_kernel<double, CH, (CH == TRIAL_FEW ? TRIAL_FEW_LOADS(double) : TRIAL_LOADS)>
			<<<grid, PGGPU_DRAW_ROWS, 0, s->stream>>>(
			(const double *) X.p, ds->n, ds->d, ds->log_b, s->x_rows, s->dist2, s->rw, w->cand, m, w->bsum,
			w->nblocks, w->dist, stats);
}

/* the block sums of m trials whose values are in w->cand (trials_kernel) */
pggpu_status
launch_trials(pggpu_data *ds, const trial_ws *w, int m, const dev_stats *stats, pggpu_error *err)
{
	gpu_state  *s = ST(ds);

	/* (every SM two blocks at least: else the candidates split between blocks) */
	if (w->nblocks * ((m + TRIAL_CHUNK - 1) / TRIAL_CHUNK) < 2 * s->sm_count)
		launch_trials_chunks<TRIAL_FEW>(ds, w, m, stats, (unsigned) ((m + TRIAL_FEW - 1) / TRIAL_FEW));
	else
		launch_trials_chunks<TRIAL_CHUNK>(ds, w, m, stats, 1);
	LAUNCHED(trials_kernel);
	return PGGPU_OK;
}

/*
 * The draws (seed.cu), the candidates' values, the potentials, and one copy
 * back and wait for all of it
 */
pggpu_status
gpu_km_trials(pggpu_data *ds, const uint64_t *keys, int m, int64_t *rows, double *pot, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	trial_ws	w;
	pggpu_status st;

	if (m < 1)
		return PGGPU_OK;
	if ((st = pggpu_gpu_fresh_dists(ds, err)) != PGGPU_OK ||
		(st = trial_workspace(ds, m, 0, false, 0, &w, err)) != PGGPU_OK ||
		(st = gpu_draw_rows(ds, keys, m, w.rows, err)) != PGGPU_OK)
		return st;
	rows_gather_kernel<<<(unsigned) m, 128, 0, s->stream>>>(xview_of(ds), ds->d, ds->log_b, s->x_rows, w.rows, w.cand);
	LAUNCHED(rows_gather_kernel);
	if ((st = launch_trials(ds, &w, m, NULL, err)) != PGGPU_OK)
		return st;
	trials_total_kernel<<<1, 32 * ((m + 31) / 32), 0, s->stream>>>(w.bsum, w.nblocks, m, w.rows, w.pot);
	LAUNCHED(trials_total_kernel);
	static_assert(sizeof(long long) == sizeof(int64_t), "rows as the draws leave them");
	CU(cudaMemcpyAsync(pot, w.pot, sizeof(double) * m, cudaMemcpyDeviceToHost, s->stream));
	CU(cudaMemcpyAsync(rows, w.rows, sizeof(long long) * m, cudaMemcpyDeviceToHost, s->stream));
	CU(cudaStreamSynchronize(s->stream));
	return PGGPU_OK;
}

/* ---- greedy k-means++, steps batched (km_greedy_steps) ----------------------- */

/*
 * A step's m draws at once, both stages in one launch (blockIdx.y the
 * trial): each block's partial pick (as pick_kernel's SAMPLE) into
 * part_*[y * gridDim.x + x]; the trial's last block to arrive (arrive[y]
 * counts to gridDim.x, then wraps to 0 for the next step) takes the least
 * of them (as pick_final_kernel's SAMPLE), draws the row in that block of
 * the draw into rows[y] (-1: none) and copies its values into cand[y]
 * (rows_gather_kernel's).  One launch, not two: a hierarchical group's
 * seeding is 141 steps of small kernels, 16 groups at once, and their
 * launches bound it.
 */
__global__ void
trial_draw_kernel(const double *dist2, const double *rw, int64_t n, const unsigned long long *keys,
				  double *part_key, long long *part_row, unsigned *arrive, xview X, int d, int log_b,
				  bool x_rows, long long *rows, double *cand, const dev_stats *stats)
{
	__shared__ bool last;
	__shared__ long long s_row;
	const int	t = blockIdx.y;
	const int	nparts = gridDim.x;
	double		bk = INFINITY;
	long long	br = LLONG_MAX;

	if (stats->pp_stalled)
		return;
	grid_draw_blocks(dist2, rw, n, keys[t], &bk, &br);
	block_pick_min(&bk, &br);
	if (threadIdx.x == 0)
	{
		part_key[(int64_t) t * nparts + blockIdx.x] = bk;
		part_row[(int64_t) t * nparts + blockIdx.x] = br;
		__threadfence();		/* the part, before it counts as arrived */
		last = atomicInc(&arrive[t], (unsigned) nparts - 1) == (unsigned) nparts - 1;
	}
	__syncthreads();
	if (!last)
		return;
	__threadfence();
	/* the least of the parts (read from L2: other blocks wrote them in this launch) */
	block_parts_min(part_key + (int64_t) t * nparts, part_row + (int64_t) t * nparts, nparts, &bk, &br);
	if (threadIdx.x == 0)
		s_row = bk == INFINITY ? -1 : br;
	__syncthreads();
	br = block_draw_row(dist2, rw, n, s_row, keys[t]);
	if (threadIdx.x == 0)
		s_row = br, rows[t] = br;
	__syncthreads();
	for (int j = threadIdx.x; j < d; j += blockDim.x)
		cand[(int64_t) t * d + j] = s_row < 0 ? 0.0 : X[x_at(s_row, j, d, log_b, x_rows)];
}

/*
 * The update of block blk of the draw, a warp's (pp_step_kernel's for the
 * centre c, without measuring a row again): the trial kept left each row's
 * squared distance to it (dt, n of them), summed as pp_step_kernel sums
 * it; a row whose distance is below D takes it and the label c (its word,
 * pp_pack), and the weight of its block of the draw is recomputed (wsum).
 */
static __device__ __forceinline__ void
greedy_update_block(const double *dt, int64_t blk, int64_t n, int c, int lb, uint32_t *words, double *dist2,
					const double *rw, double *wsum)
{
	int			lane = threadIdx.x & 31;
	bool		closer = false;
	double		wt[PGGPU_DRAW_ROWS / 32];

#pragma unroll
	for (int r = 0; r < PGGPU_DRAW_ROWS / 32; r++)
	{
		int64_t		i = blk * PGGPU_DRAW_ROWS + r * 32 + lane;

		wt[r] = 0.0;
		if (i < n)
		{
			double		D = dist2[i];

			if (dt[i] < D)
			{
				D = dt[i];
				dist2[i] = D;
				words[i] = pp_pack(D, c, lb);
				closer = true;
			}
			wt[r] = rw ? PGGPU_MUL(pggpu_draw_w(D), rw[i]) : D;
		}
	}
	if (__any_sync(FULL, closer))
	{
		double		S = warp_draw_weight(wt);

		if (lane == 0)
			wsum[blk] = S;
	}
}

/*
 * The step's choice, by every block: each trial's potential, its blocks'
 * sums added in order (trials_total_kernel's), the least of those drawn
 * (the first on ties: pggpu_seed_greedy's) into *choice; then C[c] := that
 * row and the separations (as pp_next_kernel); and where the trials' own
 * distances were kept (dist not NULL), the update, a warp a block of the
 * draw (one launch, not two: see trial_draw_kernel).  None drawn:
 * pp_stalled.
 */
__global__ void
greedy_next_kernel(const double *bsum, int64_t nblocks, int m, const long long *drawn,
				   xview X, int d, int log_b, bool x_rows, double *C, int c, float *sep,
				   long long *rows, long long *choice, const double *dist, int64_t n, int lb,
				   uint32_t *words, double *dist2, const double *rw, double *wsum, dev_stats *stats)
{
	extern __shared__ double cn[];
	__shared__ double s_pot[PGGPU_TRIALS_MAX];
	__shared__ long long s_row;
	__shared__ int s_best;

	if (stats->pp_stalled)
		return;
	for (int t = threadIdx.x; t < m; t += blockDim.x)
	{
		double		s = 0.0;

		for (int64_t b = 0; b < nblocks; b++)
			s = __dadd_rn(s, bsum[(int64_t) t * nblocks + b]);
		s_pot[t] = s;
	}
	__syncthreads();
	if (threadIdx.x == 0)
	{
		int			best = -1;

		for (int t = 0; t < m; t++)
			if (drawn[t] >= 0 && (best < 0 || s_pot[t] < s_pot[best]))
				best = t;
		s_best = best;
		s_row = best < 0 ? -1 : drawn[best];
		if (blockIdx.x == 0)
			*choice = best;
	}
	__syncthreads();
	if (s_row < 0)
	{
		if (blockIdx.x == 0 && threadIdx.x == 0)
			stats->pp_stalled = 1;
		return;
	}
	if (blockIdx.x == 0 && threadIdx.x == 0)
		rows[c] = s_row;
	if (dist)
		for (int64_t blk = (blockIdx.x * (int64_t) blockDim.x + threadIdx.x) >> 5; blk * PGGPU_DRAW_ROWS < n;
			 blk += ((int64_t) gridDim.x * blockDim.x) >> 5)
			greedy_update_block(dist + (int64_t) s_best * n, blk, n, c, lb, words, dist2, rw, wsum);
	for (int j = threadIdx.x; j < d; j += blockDim.x)
	{
		cn[j] = X[x_at(s_row, j, d, log_b, x_rows)];
		if (blockIdx.x == 0)
			C[(int64_t) c * d + j] = cn[j];
	}
	__syncthreads();
	grid_separations(C, c, d, cn, sep);
}

/*
 * The trials' distances kept for the update at most (bytes; beyond, a
 * step measures the rows against the centre kept again, pp_step_kernel)
 */
#define GREEDY_DIST_MAX ((double) (1 << 30))

/*
 * See pggpu_ops: per step three launches, the m draws (trial_draw_kernel),
 * the trials' potentials and distances (trials_kernel), the choice and the
 * update of the distances (greedy_next_kernel), with no host between
 * steps; one sync a batch
 */
pggpu_status
gpu_km_greedy_steps(pggpu_data *ds, int c0, int c1, const uint64_t *keys, int m, int64_t *rows,
					int *done, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	dev_stats  *stalled = s->stats;
	int			grid = grid_for(s, ds->n);
	int			lb = pp_lbits(ds->k);
	uint32_t   *words = (uint32_t *) s->labels;	/* see pp_pack */
	bool		keep = (double) m * ds->n * sizeof(double) <= GREEDY_DIST_MAX;
	trial_ws	w;
	pggpu_status st;

	if (m < 1 || m > PGGPU_TRIALS_MAX)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "%d trials a step: 1 to %d", m, PGGPU_TRIALS_MAX);
	if ((st = pggpu_gpu_fresh_dists(ds, err)) != PGGPU_OK ||
		(st = trial_workspace(ds, m, grid, keep, m * (c1 - c0), &w, err)) != PGGPU_OK ||
		(st = smem_opt_in((const void *) greedy_next_kernel, sizeof(double) * ds->d, err)) != PGGPU_OK)
		return st;
	s->pick_ready = false;
	s->counts_at = UPD_NONE;	/* (the labels become the words) */
	static_assert(sizeof(unsigned long long) == sizeof(uint64_t), "the keys as the host has them");
	CU(cudaMemcpyAsync(w.keys, keys, sizeof(uint64_t) * m * (c1 - c0), cudaMemcpyHostToDevice, s->stream));
	CU(cudaMemsetAsync(&stalled->pp_stalled, 0, sizeof(stalled->pp_stalled), s->stream));
	CU(cudaMemsetAsync(s->pp_rows + c0, 0xff, sizeof(long long) * (c1 - c0), s->stream));
	CU(cudaMemsetAsync(w.arrive, 0, sizeof(unsigned) * m, s->stream));
	for (int c = c0; c < c1; c++)
	{
		const unsigned long long *kc = w.keys + (int64_t) m * (c - c0);
		/* (the separations' blocks, or the update's, a warp a block of the draw) */
		const int64_t upd = keep ? (w.nblocks + SEP_THREADS / 32 - 1) / (SEP_THREADS / 32) : 0;
		const unsigned next_grid = upd > sep_grid(s, c) ? (unsigned) upd : sep_grid(s, c);

		trial_draw_kernel<<<dim3((unsigned) grid, (unsigned) m), BLOCK, 0, s->stream>>>(
			s->dist2, s->rw, ds->n, kc, w.part_key, w.part_row, w.arrive, xview_of(ds), ds->d, ds->log_b,
			s->x_rows, w.rows, w.cand, stalled);
		LAUNCHED(trial_draw_kernel);
		if ((st = launch_trials(ds, &w, m, stalled, err)) != PGGPU_OK)
			return st;
		greedy_next_kernel<<<next_grid, SEP_THREADS, sizeof(double) * ds->d, s->stream>>>(
			w.bsum, w.nblocks, m, w.rows, xview_of(ds), ds->d, ds->log_b, s->x_rows, s->C, c, s->sep, s->pp_rows,
			w.choice, keep ? w.dist : NULL, ds->n, lb, words, s->dist2, s->rw, s->wsum, stalled);
		LAUNCHED(greedy_next_kernel);
		if (keep)
			continue;
		if ((st = pp_launch_step(ds, c, false, false, 0, stalled, err)) != PGGPU_OK)
			return st;
	}
	CU(cudaMemcpyAsync(s->cnt_h, s->pp_rows + c0, sizeof(long long) * (c1 - c0), cudaMemcpyDeviceToHost,
					   s->stream));
	if ((st = fetch_stats(s, err)) != PGGPU_OK)
		return st;
	*done = 0;
	while (*done < c1 - c0 && (long long) s->cnt_h[*done] >= 0)
	{
		rows[*done] = (int64_t) s->cnt_h[*done];
		(*done)++;
	}
	return PGGPU_OK;
}
