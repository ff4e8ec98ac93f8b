/*
 * common.cuh - what the CUDA sources of cuda/gpu/ share: CUDA error
 * reporting and the choice of GPU, the data kernels' block constants, a data
 * set's GPU state (gpu_state), the warp and block reductions, the data's
 * layout (x_at), and the functions one file of the backend calls in another.
 * CUDA C++ only.
 *
 * The backend's files, a concern each, are listed with what each holds in
 * docs/layout.md ("cuda/gpu/"), the one list: tests/maps.sh fails when a
 * file is missing from it.
 *
 * Arithmetic matches cpu/kmeans.c: squared distances summed over columns in
 * order with __dsub_rn/__dmul_rn/__dadd_rn, which are never fused.
 */
#ifndef PG_GPU_GPU_COMMON_CUH
#define PG_GPU_GPU_COMMON_CUH

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "compute_internal.h"
#include "route.h"
#include "xview.cuh"

#ifndef PGGPU_MIN_CC
#define PGGPU_MIN_CC 90			/* the oldest architecture the build targets */
#endif

/* fills err from a CUDA error (out of memory: PGGPU_ERR_GPU_MEMORY) */
pggpu_status pggpu_cuda_fail(pggpu_error *err, cudaError_t e, const char *what);

#define CU(call) do { cudaError_t e_ = (call); \
	if (e_ != cudaSuccess) return pggpu_cuda_fail(err, e_, #call); } while (0)
#define LAUNCHED(name) CU(cudaPeekAtLastError())

/*
 * Walks the GPUs once: returns how many are usable and, in *chosen and *props,
 * the first usable one that is `want` (any, when want < 0), or -1.  Without
 * one, err says why.
 */
int			pggpu_find_gpus(int want, int *chosen, cudaDeviceProp *props, pggpu_error *err);

/*
 * Memory a data set takes and gives back often (device.cu): its own device
 * memory from its GPU's stream-ordered pool, on its stream (usable on
 * another stream only once that stream has been waited for); pinned host
 * buffers, mapped; a set opened and closed on a GPU counted, so that the
 * last close gives everything kept back
 */
cudaError_t gpu_mem_take(void **p, size_t bytes, cudaStream_t stream);
void		gpu_mem_give(void *p, cudaStream_t stream);
cudaError_t gpu_pinned_take(void **p, size_t bytes);
void		gpu_pinned_give(void *p);
void		gpu_sets_opened(int dev);
void		gpu_sets_closed(int dev);

#define BLOCK 256				/* threads per block of the data kernels */
#define DJ 32					/* columns per centroid tile in shared memory */
#define MAX_BLOCKS 4096			/* per-block partial arrays */
#define FULL 0xffffffffu
#define SMEM_SUMS_LIMIT (100 * 1024)	/* per-block sums in shared memory up to this */
#define RESIDENT_LIMIT (64 * 1024)	/* centroids stay in shared memory up to this */
#ifndef UPD_BATCH
#define UPD_BATCH 4				/* rows per batch of loads in the private update */
#endif
#define STG_STRIDE 34			/* UPD_PRIVATE staging: doubles per column of a warp's rows */
#ifndef LLOYD_MIN_BLOCKS
#define LLOYD_MIN_BLOCKS 1		/* __launch_bounds__ blocks per SM of lloyd_kernel */
#endif

struct dev_stats
{
	unsigned long long changed;
	unsigned long long empty;
	double		inertia;
	unsigned long long hiabs_bits;	/* range_kernel: the largest |x| */
	unsigned long long loabs_inv;	/* and ~ the least non-zero |x| (0: none) */
	double		pick_key;
	long long	pick_row;
	unsigned int pp_stalled;	/* km_pp_steps: a draw found no row */
	unsigned int parts_done;	/* reduce_finalize_kernel's blocks done */
};

struct gpu_state
{
	int			dev;
	int			sm_count;
	int			smem_optin;
	cudaStream_t stream;
	bool		stream_ok;
	double	   *stage[2];		/* pinned staging buffers (floats in a FLOAT32 set's, halves in a FLOAT16 one's) */
	uint16_t   *halves;			/* a FLOAT16 set held as floats (d <= TC_MAX_D): a batch of halves on
								 * the device, widened into X */
	void	   *turn_room;		/* a batch pushed by rows, on the device, before its turn into X */
	cudaEvent_t copied[2];
	bool		event_ok[2];
	int			cur;
	bool		finished;
	void	   *X;				/* device data, cap_tiles tiles of doubles, or of floats where
								 * ds->narrow_held, halves where ds->f16_held (NULL while parked);
								 * kernels read it through xview_of */
	int64_t		cap_tiles;
	/* parked (pggpu_data_park): the rows in pinned host memory, xh_tiles tiles, by columns */
	void	   *Xh;
	size_t		xh_bytes;
	bool		xh_valid;		/* Xh holds X's rows as they are (no push, scale, affine since) */
	/* k-means state */
	double	   *C;
	int32_t    *labels;
	double	   *dist2;
	double	   *sums;
	unsigned long long *cnt;
	double	   *block_part;		/* per-block partial inertia */
	double	   *part;			/* per-block partial sums (UPD_PRIVATE, owned), or NULL */
	int			part_rows;		/* blocks part has room for */
	int			max_grid;		/* most blocks a Lloyd pass launches */
	double	   *pick_key;		/* MAX_BLOCKS partial picks */
	long long  *pick_row;
	/* k-means++: the next draw, made in the pass of the last centre */
	bool		pick_ready;
	uint64_t	pick_ready_key;
	int			pick_parts;		/* blocks whose partial picks it left */
	float	   *sep;			/* k: separations from the newest centre (rounded down) */
	double	   *wsum;			/* the blocks' weights in the draw, while seeding */
	double	   *rw;				/* the rows' weights (km_weights), or NULL */
	double	   *mass;			/* k: the clusters' weights of an update (while rw), or NULL */
	long long  *pp_rows;		/* k: the rows km_pp_steps drew */
	int			pp_blocks_per_sm;	/* pp_step_kernel's occupancy, 0: not known yet */
	void	   *tc_ws;			/* the tensor cores' workspace, when they label */
	void	   *trial_ws;		/* greedy k-means++'s trials (trials.cu), or NULL */
	size_t		trial_ws_bytes;
	bool		labels_seeding;	/* labels hold pp_pack's words while seeding */
	int			counts_at;		/* the counts of the labels, as the last update step left them:
								 * UPD_PRIVATE after the sums, UPD_SHARED / UPD_GLOBAL in cnt,
								 * UPD_NONE none (km_counts then counts the labels) */
	bool		x_rows;			/* X lies by rows (see x_at) */
	dev_stats  *stats;			/* device */
	dev_stats  *stats_h;		/* pinned: copied back, or written by reduce_finalize_kernel */
	dev_stats  *stats_hd;		/* stats_h's device address (mapped) */
	unsigned long long *cnt_h;	/* pinned, k */
	pggpu_route route;			/* the fit's plan (gpu_km_begin) */
	void	   *blas;			/* label gemm: its cuBLAS handle (blas.cuh) */
	void	   *gemm_ws;		/* and its workspace */
	size_t		gemm_ws_bytes;
	bool		gemm_f16;		/* label gemm_f16: the product is still the one on halves */
	/*
	 * a step that wanted no distances left dist2 stale (the product on
	 * halves certifies most rows without measuring them): measured from the
	 * labels and C_lab (k x d, that step's centroids) before anything reads
	 * dist2 (pggpu_gpu_fresh_dists)
	 */
	bool		dists_stale;
	double	   *C_lab;
	size_t		route_len;		/* strlen of the plan's line in ds->route (then the product's figures) */
};

#define ST(ds) ((gpu_state *) (ds)->impl)
#define TILE(ds) ((int64_t) 1 << (ds)->log_b)
/* bytes of a value of ds's rows on the device, and of a tile of them */
#define X_SIZE(ds) ((ds)->f16_held ? sizeof(uint16_t) : (ds)->narrow_held ? sizeof(float) : sizeof(double))
#define TILE_BYTES(ds) (TILE(ds) * (ds)->d * (int64_t) X_SIZE(ds))

/* ---- device helpers ------------------------------------------------------- */

__device__ __forceinline__ double
warp_sum(double v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(FULL, v, o);
	return v;
}

/* block-wide sum in a fixed order; every thread gets the result */
static __device__ double
block_sum(double v)
{
	__shared__ double part[32];
	int			lane = threadIdx.x & 31;
	int			warp = threadIdx.x >> 5;

	v = warp_sum(v);
	__syncthreads();
	if (lane == 0)
		part[warp] = v;
	__syncthreads();
	v = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.0;
	if (warp == 0)
		v = warp_sum(v);
	if (threadIdx.x == 0)
		part[0] = v;
	__syncthreads();
	return part[0];
}

__device__ __forceinline__ double
sq_term(double acc, double x, double c)
{
	double		diff = __dsub_rn(x, c);

	return __dadd_rn(acc, __dmul_rn(diff, diff));
}

/* (key, row) pairs: smaller key wins, then smaller row */
__device__ __forceinline__ bool
pick_better(double ka, long long ra, double kb, long long rb)
{
	return ka < kb || (ka == kb && ra < rb);
}

/* the warp's minimum (key, row), in every lane */
__device__ __forceinline__ void
warp_pick_min(double *bk, long long *br)
{
	for (int o = 16; o > 0; o >>= 1)
	{
		double		ok = __shfl_xor_sync(FULL, *bk, o);
		long long	orow = __shfl_xor_sync(FULL, *br, o);

		if (pick_better(ok, orow, *bk, *br))
			*bk = ok, *br = orow;
	}
}

/*
 * The block's minimum (key, row): the result in thread 0.  (key, row) pairs
 * are totally ordered, so the minimum does not depend on the order.
 */
static __device__ void
block_pick_min(double *bk, long long *br)
{
	__shared__ double sk[32];
	__shared__ long long sr[32];

	warp_pick_min(bk, br);
	if ((threadIdx.x & 31) == 0)
		sk[threadIdx.x >> 5] = *bk, sr[threadIdx.x >> 5] = *br;
	__syncthreads();
	if (threadIdx.x == 0)
		for (int w = 1; w < (int) (blockDim.x >> 5); w++)
			if (pick_better(sk[w], sr[w], *bk, *br))
				*bk = sk[w], *br = sr[w];
}

/* ds's rows as the kernels read them (xview.cuh) */
static inline xview
xview_of(const pggpu_data *ds)
{
	return xview{ST(ds)->X, ds->narrow_held && !ds->f16_held, ds->f16_held};
}

/*
 * While seeding, the data may lie "by rows" (x_rows in gpu_state): in each
 * group of 32 rows of a tile, whose d columns are d runs of 32 doubles a
 * tile apart, value j of the group's row r is at position p = r d + j of the
 * runs taken in order (run p / 32, place p % 32), so a row's values are
 * contiguous (across at most ceil(d / 32) + 1 runs): a k-means++ step reads
 * the few rows it measures, scattered, in 2 sectors of 32 bytes a row at
 * d = 8, not 8.  The same memory, permuted in place (x_layout_kernel);
 * every other kernel wants the columns, and gets them back first.  Wider
 * rows too, where a group's fit in shared memory (doubles to d = 900): at
 * d = 256 a row is 64 sectors, not 256.  Up to X_ROWS_MAX_D columns a
 * k-means++ step loads PP_CH columns a round, beyond it PP_CH_WIDE.
 */
#define X_ROWS_MAX_D 32

__device__ __forceinline__ int64_t
x_at(int64_t i, int j, int d, int log_b, bool rows)
{
	if (!rows)
		return pggpu_at(i, j, d, log_b);

	int64_t		t = (i >> log_b) * ((int64_t) d << log_b);
	int			q = (int) (i & (((int64_t) 1 << log_b) - 1));
	int			p = (q & 31) * d + j;

	return t + ((int64_t) (p >> 5) << log_b) + (q & ~31) + (p & 31);
}


/* ---- between the backend's files ------------------------------------------ */

/* dataset.cu */
/* dst[e] := src[e] for e < len (floats widened: exact) */
__global__ void widen_kernel(const float *__restrict__ src, double *__restrict__ dst, int64_t len);
__global__ void widen_halves_kernel(const __half *__restrict__ src, double *__restrict__ dst, int64_t len);
int			grid_for(gpu_state *s, int64_t work);
pggpu_status fetch_stats(gpu_state *s, pggpu_error *err, bool mirrored = false);
pggpu_status x_layout(pggpu_data *ds, bool rows, pggpu_error *err);

/* dist2 measured where a step left it stale (step.cu); every reader of dist2 calls it first */
pggpu_status pggpu_gpu_fresh_dists(pggpu_data *ds, pggpu_error *err);
/* X's room grown to at least tiles tiles, the rows kept */
pggpu_status gpu_grow(pggpu_data *ds, int64_t tiles, pggpu_error *err);
/* a FLOAT32 set's rows held as doubles from now on (see pggpu_ops) */
pggpu_status gpu_widen(pggpu_data *ds, pggpu_error *err);

/* step.cu: the work between interrupt checks of a ranged pass (0: none) */
double		step_range_work(const pggpu_data *ds);
pggpu_status gpu_km_step(pggpu_data *ds, bool update, bool dists, pggpu_step_stats *out, pggpu_error *err);
/* cosine: every centroid scaled to norm `norm` after an update (step.cu) */
pggpu_status gpu_km_normalize(pggpu_data *ds, double norm, pggpu_error *err);

/* seed.cu */
pggpu_status gpu_km_point(pggpu_data *ds, int64_t row, int c, int mode, const uint64_t *next_key,
						  pggpu_error *err);
pggpu_status gpu_km_pp_steps(pggpu_data *ds, int c0, int c1, const uint64_t *keys, int64_t *rows,
							 int *done, pggpu_error *err);
pggpu_status gpu_km_pick(pggpu_data *ds, int mode, uint64_t key, int64_t *row, pggpu_error *err);
pggpu_status gpu_km_gather(pggpu_data *ds, const int64_t *rows, int m, pggpu_error *err);
pggpu_status gpu_draw_rows(pggpu_data *ds, const uint64_t *keys, int m, long long *rows, pggpu_error *err);
/* a kernel's dynamic shared memory past 48 KB opted in; a step of k-means++ (pp_step_kernel) launched */
pggpu_status smem_opt_in(const void *fn, size_t shmem, pggpu_error *err);
pggpu_status pp_launch_step(pggpu_data *ds, int c, bool set, bool pick, uint64_t key, const dev_stats *stats,
							pggpu_error *err);

/* trials.cu */
typedef struct trial_ws
{
	double	   *cand;			/* m x d: the trials' rows */
	double	   *bsum;			/* m x nblocks: their potentials' block sums */
	double	   *pot;			/* m */
	long long  *rows;			/* m: the rows drawn (-1: none) */
	double	   *part_key;		/* m x parts: the draws' first stage (km_greedy_steps) */
	double	   *dist;			/* m x n: the rows' squared distances to them (km_greedy_steps), or NULL */
	long long  *part_row;
	long long  *choice;			/* the trial a step keeps (km_greedy_steps) */
	unsigned long long *keys;	/* the draws' keys (km_greedy_steps) */
	unsigned   *arrive;			/* m: a draw's blocks arrived (km_greedy_steps' trial_draw_kernel) */
	int64_t		nblocks;		/* blocks of the draw */
} trial_ws;
pggpu_status trial_workspace(pggpu_data *ds, int m, int parts, bool keep_dist, int nkeys, trial_ws *w,
							 pggpu_error *err);
pggpu_status launch_trials(pggpu_data *ds, const trial_ws *w, int m, const dev_stats *stats,
						   pggpu_error *err);
pggpu_status gpu_keys(pggpu_data *ds, uint64_t *keys, pggpu_error *err);
pggpu_status gpu_get_rows(pggpu_data *ds, const int64_t *rows, int64_t m, double *out, pggpu_error *err);
/* farthest.cu: the repair's candidates (op km_farthest) */
pggpu_status gpu_km_farthest(pggpu_data *ds, int m, int64_t cap, double *floor, int64_t *count, int64_t *rows,
							 double *d2, pggpu_error *err);
pggpu_status gpu_km_trials(pggpu_data *ds, const uint64_t *keys, int m, int64_t *rows, double *pot,
						   pggpu_error *err);
pggpu_status gpu_km_greedy_steps(pggpu_data *ds, int c0, int c1, const uint64_t *keys, int m, int64_t *rows,
								 int *done, pggpu_error *err);
/* dataset.cu: the pinned staging buffers (at the open, or a lazy set's first batch) */
bool		gpu_stage_alloc(pggpu_data *ds);
/* device.cu: fn's dynamic shared memory allowed up to bytes on this device (raised only) */
cudaError_t gpu_smem_allow(const void *fn, size_t bytes);
/* matmul.cu: whether dst's GPU may read peer's memory (enabled on first ask) */
bool		gpu_peer_access(int dst, int peer);
pggpu_status gpu_copy_rows(pggpu_data *dst, pggpu_data *const *srcs, int nsrc, const int *which,
						   const int64_t *rows, int64_t m, const int *e, pggpu_error *err);

/* dataset.cu: park and unpark (see pggpu_ops) */
pggpu_status gpu_park(pggpu_data *ds, pggpu_error *err);
pggpu_status gpu_unpark(pggpu_data *ds, pggpu_error *err);

/* columns.cu */
pggpu_status gpu_col_sums(pggpu_data *ds, const double *center, double *sums, pggpu_error *err);
/* push.cu: the staging buffer to fill, and a batch of it pushed (see pggpu_ops) */
void	   *gpu_batch(pggpu_data *ds);
pggpu_status gpu_push(pggpu_data *ds, int64_t nrows, bool by_rows, pggpu_error *err);
pggpu_status gpu_col_affine(pggpu_data *ds, const double *sub, const double *div, pggpu_error *err);
pggpu_status gpu_unit_rows(pggpu_data *ds, pggpu_error *err);

#endif							/* PG_GPU_GPU_COMMON_CUH */
