/*
 * step.cu - one Lloyd step on the GPU (gpu_km_step): the launches of the
 * route that route.c planned (pggpu_plan_step, once per fit in
 * gpu_km_begin: s->route).  Labels by lloyd_kernel, the tensor cores
 * (tc_scan, tc_resident) or a matrix product certified row by row
 * (gemm_assign.cu: routes gemm, gemm_f16); sums in the same pass, or by
 * owned_update_kernel, sorted_update_kernel or lloyd_kernel from the
 * labels; then the partial sums become centroids (reduce_finalize_kernel,
 * or finalize_kernel); with cosine, the driver has the centroids scaled
 * to their norm after (gpu_km_normalize).
 * Three scalars come back to the host per iteration.
 */
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

#include "common.cuh"
#include "gemm_assign.cuh"
#include "lloyd.cuh"
#include "tc.cuh"

/*
 * A pass over more than RANGE_WORK squared differences (rows x centroids x
 * columns: a few tenths of a second on lloyd's kernel in float64; the
 * tensor cores, about 16 times as fast there, count a sixteenth) labels its
 * rows in ranges of whole tiles (route.ranged), each at most that much work
 * (or one tile), calling the caller's interrupt callback between them, so
 * that a cancel is answered within about that; then the pass sums the rows
 * by the labels given (as after the tensor cores), and the results are the
 * same.
 */
#define RANGE_WORK ((double) (1LL << 39))

double
step_range_work(const pggpu_data *ds)
{
	return ds->interrupt == NULL ? 0 : ds->poll_work > 0 ? ds->poll_work : RANGE_WORK;
}

/* blocks of fn for rows (per rows_per_block), as many as fit the SMs, at most max_grid */
static pggpu_status
grid_of(gpu_state *s, const void *fn, size_t shmem, int64_t rows, int64_t rows_per_block,
		int max_grid, int64_t *grid, pggpu_error *err)
{
	int			per_sm = 0;

	CU(gpu_smem_allow(fn, shmem));
	CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, BLOCK, shmem));
	*grid = (int64_t) (per_sm > 0 ? per_sm : 1) * s->sm_count;
	if (*grid > max_grid)
		*grid = max_grid;
	if (*grid > (rows + rows_per_block - 1) / rows_per_block)
		*grid = (rows + rows_per_block - 1) / rows_per_block;
	if (*grid < 1)
		*grid = 1;
	return PGGPU_OK;
}

/*
 * Labels, distances and changed (into the zeroed stats) of every row, range
 * by range: with the tensor cores, else with lloyd's kernel (no update).
 * May longjmp out of the interrupt callback: what is queued runs on, and
 * free_km syncs the stream before it frees.
 */
static pggpu_status
label_ranges(pggpu_data *ds, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	const pggpu_route *r = &s->route;
	const bool	tc = r->label != PGGPU_LABEL_LLOYD;
	int64_t		tile = TILE(ds);
	double		per_tile = (double) tile * ds->k * ds->d / (tc ? 16 : 1);
	double		work = step_range_work(ds);
	/* (no interrupt callback: one range, a weighted set's labels) */
	int64_t		tiles = work <= 0 ? (ds->n + tile - 1) / tile : per_tile >= work ? 1 : (int64_t) (work / per_tile);
	lloyd_fn	fn = lloyd_pick(r->tk, r->dr_label, UPD_NONE);
	pggpu_status st;

	CU(cudaMemsetAsync(s->stats, 0, sizeof(dev_stats), s->stream));
	for (int64_t r0 = 0; r0 < ds->n; r0 += tiles * tile)
	{
		int64_t		rows = ds->n - r0 < tiles * tile ? ds->n - r0 : tiles * tile;
		xview		X = xview_of(ds) + (r0 >> ds->log_b) * tile * ds->d;
		int64_t		grid;

		if (r0 > 0)
		{
			CU(cudaStreamSynchronize(s->stream));
			ds->interrupt(ds->interrupt_arg);
		}
		if (tc)
		{
			CU(pggpu_tc_assign(r, X, rows, ds->d, ds->log_b, s->C, ds->k, s->tc_ws, s->labels + r0,
							   s->dist2 + r0, &s->stats->changed, s->stream));
			continue;
		}
		if ((st = grid_of(s, (const void *) fn, r->label_smem, rows, BLOCK, s->max_grid, &grid, err)) != PGGPU_OK)
			return st;
		fn<<<(unsigned) grid, BLOCK, r->label_smem, s->stream>>>(X, rows, ds->d, ds->log_b, s->C, ds->k, 5,
																   s->labels + r0, s->dist2 + r0, s->sums,
																   s->cnt, s->part, s->block_part, s->stats);
		LAUNCHED(lloyd_kernel);
	}
	return PGGPU_OK;
}

pggpu_status
gpu_km_step(pggpu_data *ds, bool update, bool dists, pggpu_step_stats *out, pggpu_error *err)
{
	/*
	 * dists false: the product on halves leaves the rows it certifies
	 * unmeasured (dist2 stale, C_lab its centroids); the other routes
	 * measure each winner anyway, as they label it
	 */
	gpu_state  *s = ST(ds);
	const pggpu_route *r = &s->route;
	const int	k = ds->k;
	const int	d = ds->d;
	const bool	tc = r->label != PGGPU_LABEL_LLOYD;
	const bool	labels_given = tc || r->ranged;
	/* the summing pass (an assignment: lloyd's with no update, for the stats) */
	const pggpu_sum_route sum = update ? r->sum : labels_given ? PGGPU_SUM_LABELS_GIVEN : PGGPU_SUM_IN_PASS;
	const int	mode = update ? r->mode : UPD_NONE;
	const bool	owned = sum == PGGPU_SUM_OWNED;
	const size_t shmem = update ? r->smem : labels_given ? 0 : r->label_smem;
	const lloyd_fn fn = lloyd_pick(r->tk, labels_given ? PGGPU_LABELS_GIVEN : r->dr_label, mode);
	int64_t		grid = 0;
	int			fused = 0;
	pggpu_status st;

	s->pick_ready = false;
	s->dists_stale = false;
	s->counts_at = UPD_NONE;
	if (update && s->rw && sum != PGGPU_SUM_SORTED)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "weighted rows are summed by a kernel that needs %d KB of "
						  "shared memory a block, more than this GPU gives (%d KB)",
						  PGGPU_SORTED_SMEM / 1024, s->smem_optin / 1024);
	if ((st = x_layout(ds, false, err)) != PGGPU_OK)
		return st;
	if (s->labels_seeding)
	{
		/* the first pass counts every row as changed, as on the CPU */
		CU(cudaMemsetAsync(s->labels, 0xff, sizeof(int32_t) * ds->n, s->stream));
		s->labels_seeding = false;
	}
	if (r->ranged && (st = label_ranges(ds, err)) != PGGPU_OK)
		return st;

	/* the stats zeroed (with the tensor cores, by their first kernel; ranged, before the labels) */
	if (!labels_given)
		CU(cudaMemsetAsync(s->stats, 0, sizeof(dev_stats), s->stream));
	if (mode == UPD_SHARED || mode == UPD_GLOBAL)
	{
		CU(cudaMemsetAsync(s->sums, 0, sizeof(double) * (size_t) k * d, s->stream));
		CU(cudaMemsetAsync(s->cnt, 0, sizeof(unsigned long long) * k, s->stream));
		if (s->mass)
			CU(cudaMemsetAsync(s->mass, 0, sizeof(double) * k, s->stream));
	}
	/* the product labels; or the tensor cores, and sum too where the plan fuses (then theirs is the whole pass) */
	if (PGGPU_LABEL_IS_GEMM(r->label))
	{
		CU(cudaMemsetAsync(s->stats, 0, sizeof(dev_stats), s->stream));
		bool		was = s->gemm_f16;
		/* (the update's inertia then sums stale distances: not wanted) */
		const bool	lazy = !dists && r->label == PGGPU_LABEL_GEMM_F16 && was;
		int64_t		tally[2];

		if (lazy)
			CU(cudaMemcpyAsync(s->C_lab, s->C, sizeof(double) * k * d, cudaMemcpyDeviceToDevice, s->stream));
		if ((st = pggpu_gemm_label(ds, (cublasHandle_t) s->blas, xview_of(ds), s->C,
								   r->label == PGGPU_LABEL_GEMM_F16, &s->gemm_f16, s->gemm_ws, !lazy, s->labels,
								   s->dist2, &s->stats->changed, tally, s->stream, err)) != PGGPU_OK)
			return st;
		s->dists_stale = lazy;
		/* the plan's line says how the product on halves fares (DEBUG2, and the benchmarks' notes) */
		if (was)
			snprintf(ds->route + s->route_len, sizeof(ds->route) - s->route_len,
					 "; %.1f%% of rows uncertain in FP16, %.1f%% left to float64%s",
					 ds->n ? 100.0 * tally[0] / ds->n : 0.0, ds->n ? 100.0 * tally[1] / ds->n : 0.0,
					 s->gemm_f16 ? "" : 2 * tally[1] > ds->n ? ", then float64 alone (over half left)" :
					 ", then float64 alone (over half uncertain)");
	}
	else if (tc && !r->ranged)
		CU(pggpu_tc_assign_update(r, xview_of(ds), ds->n, d, ds->log_b, s->C, k, s->tc_ws, s->labels, s->dist2,
								  &s->stats->changed, update && sum == PGGPU_SUM_IN_PASS ? s->part : NULL,
								  s->block_part, s->part_rows, &fused, s->stats, sizeof(dev_stats),
								  s->stream));
	if (fused)
		grid = fused;
	else if (sum == PGGPU_SUM_SORTED)
		CU(pggpu_sorted_update(xview_of(ds), ds->n, d, ds->log_b, k, s->labels, s->dist2, s->rw, s->sums,
							   s->cnt, s->mass, s->block_part, s->max_grid, &grid, s->stream));
	else if (s->rw)				/* (a weighted set's labels are given: pggpu_plan_weighted) */
		CU(pggpu_weighted_inertia(s->dist2, s->rw, ds->n, s->block_part, s->max_grid, &grid, s->stream));
	else if (owned)
	{
		owned_fn	ofn = owned_kernel(d);

		if ((st = grid_of(s, (const void *) ofn, shmem, ds->n, (int64_t) 1 << pggpu_owned_lg_r(d),
						  s->part_rows, &grid, err)) != PGGPU_OK)
			return st;
		ofn<<<(unsigned) grid, BLOCK, shmem, s->stream>>>(xview_of(ds), ds->n, d, ds->log_b, k, pggpu_owned_lg_r(d),
														   s->labels, s->dist2, s->part, s->block_part);
		LAUNCHED(owned_update_kernel);
	}
	else
	{
		if ((st = grid_of(s, (const void *) fn, shmem, ds->n, BLOCK, s->max_grid, &grid, err)) != PGGPU_OK)
			return st;
		fn<<<(unsigned) grid, BLOCK, shmem, s->stream>>>(xview_of(ds), ds->n, d, ds->log_b, s->C, k,
														 update ? r->lg_lanes : 5, s->labels, s->dist2,
														 s->sums, s->cnt, s->part, s->block_part, s->stats);
		LAUNCHED(lloyd_kernel);
	}
	if (mode == UPD_PRIVATE)
	{
		/* after the fused pass, its dependent: it starts as the pass ends */
		cudaLaunchAttribute at;
		cudaLaunchConfig_t cfg = pggpu_launch_config(&at, (unsigned) ((k * d + k + 31) / 32),
													 RF_BLOCK, 0, s->stream, fused != 0);

		CU(cudaLaunchKernelEx(&cfg, reduce_finalize_kernel, (const double *) s->part,
							  (int64_t) k * d + k, (int) grid, s->sums, s->C, k, d,
							  (const double *) s->block_part, s->stats, s->stats_hd));
	}
	else
	{
		/* (a block 8,192 centroid values: one block took 27 us at k x d = 141 x 256) */
		const int64_t kd = (int64_t) k * d;

		finalize_kernel<<<(unsigned) (mode == UPD_NONE || kd <= 8192 ? 1 : kd / 8192 < 256 ? kd / 8192 : 256), 1024, 0,
						  s->stream>>>(s->C, s->sums, s->cnt, s->rw ? s->mass : NULL, k, d, mode, s->block_part,
									   (int) grid, s->stats);
		LAUNCHED(finalize_kernel);
	}
	/* the reduction mirrors the stats into stats_h itself: no copy */
	if ((st = fetch_stats(s, err, mode == UPD_PRIVATE)) != PGGPU_OK)
		return st;
	s->counts_at = mode;
	out->changed = (int64_t) s->stats_h->changed;
	out->empty = (int64_t) s->stats_h->empty;
	out->inertia = s->stats_h->inertia;
	return PGGPU_OK;
}

pggpu_status
pggpu_gpu_fresh_dists(pggpu_data *ds, pggpu_error *err)
{
	gpu_state  *s = ST(ds);
	pggpu_status st;

	if (!s->dists_stale)
		return PGGPU_OK;
	if ((st = x_layout(ds, false, err)) != PGGPU_OK ||
		(st = pggpu_gemm_dists(ds, xview_of(ds), s->C_lab, s->labels, s->dist2, s->stream, err)) != PGGPU_OK)
		return st;
	s->dists_stale = false;
	return PGGPU_OK;
}

/*
 * A warp a centroid, with pggpu_normalize's roundings exactly: the largest
 * |c_j| is the same in any order, each q_j = c_j / m and its square are
 * rounded alone, and the squares are added in column order (each lane's
 * handed to every lane in turn).  A thread a centroid, its d loads and
 * divisions one after another, took 0.32 ms a step at k = 256, d = 768 on
 * an H200 (7 % of the iteration).
 */
__global__ void __launch_bounds__(BLOCK)
normalize_kernel(double *C, int k, int d, double norm)
{
	const int64_t c = (blockIdx.x * (int64_t) blockDim.x + threadIdx.x) >> 5;
	const int	lane = threadIdx.x & 31;
	double	   *v = C + c * d;
	double		m = 0,
				ss = 0,
				den,
				f;

	if (c >= k)
		return;					/* (the whole warp) */
	for (int j = lane; j < d; j += 32)
		m = fmax(m, fabs(v[j]));
	for (int o = 16; o > 0; o >>= 1)
		m = fmax(m, __shfl_xor_sync(FULL, m, o));
	if (!(m > 0))
		return;
	for (int j0 = 0; j0 < d; j0 += 32)
	{
		const double q = j0 + lane < d ? v[j0 + lane] / m : 0,
					q2 = __dmul_rn(q, q);
		const int	w = d - j0 < 32 ? d - j0 : 32;

		for (int i = 0; i < w; i++)
			ss = __dadd_rn(ss, __shfl_sync(FULL, q2, i));
	}
	den = __dmul_rn(m, sqrt(ss));
	f = norm / den;
	if (den >= PGGPU_DBL_MIN && isfinite(f))
		for (int j = lane; j < d; j += 32)
			v[j] = __dmul_rn(v[j], f);
	else
	{
		/* (below double's normal range: pggpu_normalize_at says why) */
		const double g = norm / sqrt(ss);

		for (int j = lane; j < d; j += 32)
			v[j] = __dmul_rn(v[j] / m, g);
	}
}

pggpu_status
gpu_km_normalize(pggpu_data *ds, double norm, pggpu_error *err)
{
	gpu_state  *s = ST(ds);

	normalize_kernel<<<(unsigned) ((ds->k * (int64_t) 32 + BLOCK - 1) / BLOCK), BLOCK, 0, s->stream>>>(
		s->C, ds->k, ds->d, norm);
	LAUNCHED(normalize_kernel);
	return PGGPU_OK;
}
