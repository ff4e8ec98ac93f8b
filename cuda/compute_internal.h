/*
 * compute_internal.h - what the k-means driver (compute.c) needs from a
 * backend.  The CPU backend (cpu/kmeans.c) is the reference; the CUDA
 * backend (gpu/) must compute the same thing.  Plain C, shared by
 * gcc and nvcc.
 *
 * Storage layout (both backends): "tiled structure-of-arrays".  Rows are
 * grouped in tiles of B = 2^log_b rows, the size of one staging batch; within
 * a tile each column is contiguous.  Element (i, j) lives at
 *     X[(i >> log_b) * B * d + j * B + (i & (B - 1))]
 * so a batch is copied as one contiguous block and a warp reading column j
 * of 32 consecutive rows reads 256 consecutive bytes.
 */
#ifndef PG_GPU_COMPUTE_INTERNAL_H
#define PG_GPU_COMPUTE_INTERNAL_H

#include "pg_gpu_compute.h"
#include "route.h"

#include <math.h>
#include <string.h>

#ifdef __CUDACC__
#define PGGPU_HD __host__ __device__ __forceinline__
#else
#define PGGPU_HD static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

struct pggpu_data
{
	const struct pggpu_ops *ops;
	pggpu_backend backend;
	int			d;
	int			log_b;			/* tile (= batch) is 2^log_b rows */
	int64_t		n;				/* rows pushed */
	int			k;				/* centroids in the k-means state */
	double		push_seconds;	/* time spent in pushes */
	char		device_name[256];
	int			gpu_index;		/* the GPU it is on (the GPU backend sets it), else pggpu_data_open's */
	int			scale_e;		/* the rows are held as 2^scale_e times the pushed ones (compute.c) */
	/* the least and largest non-zero |value| of the rows as pushed, while range_known (compute.c) */
	bool		range_known;
	double		range_lo;
	double		range_hi;
	void	   *impl;			/* the backend's own state */
	/* the driver's scratch memory: freed on close too, since the interrupt
	 * callback may longjmp out of an algorithm */
	void	   *scratch[16];
	/* a data set the driver made for this one's algorithm (k-means||'s
	 * candidates), closed with it for the same reason; NULL: none */
	pggpu_data *aux;
	/* the nearest-neighbour handle of a transform (pggpu_transform), likewise */
	pggpu_knn  *aux_knn;
	/* the sums and counts a step over parts adds (pggpu_parts_step), kept
	 * from step to step (fresh pages each step cost more than the adding);
	 * freed on close */
	void	   *step_space;
	size_t		step_space_bytes;
	/* the caller's interrupt callback (pggpu_data_set_interrupts, or
	 * pggpu_kmeans's while it runs), else NULL: a backend may call it inside
	 * long passes over the rows (it may longjmp, so nothing may be held then
	 * that close would not free) */
	pggpu_interrupt_fn interrupt;
	void	   *interrupt_arg;
	double		poll_work;		/* pggpu_data_set_poll_work, 0: the backend's */
	int			threads;		/* pggpu_data_set_threads */
	pggpu_pending_fn pending;
	pggpu_metric metric;		/* pggpu_data_set_metric */
	bool		double_only;	/* pggpu_data_set_double_only */
	pggpu_route_force force;	/* pggpu_data_force_route (tests), zeros: none */
	char		route[384];		/* the GPU's plan of the last k-means or assignment (route.h), or "" */
	bool		parked;			/* pggpu_data_park: rows out of device memory */
	/*
	 * pggpu_data_set_dtype FLOAT32: the rows are pushed as floats (the staging
	 * buffers hold floats); FLOAT16 (f16): as halves (binary16 bits).
	 * narrow_held: the backend holds them narrower than doubles, until its
	 * widen op (values rewritten need doubles): as floats, or where
	 * f16_held (the GPU's FLOAT16 sets) as halves.
	 */
	bool		f32;
	bool		f16;
	bool		wide_fed;		/* held as doubles from the first row, fed narrow (pggpu_data_hold_wide) */
	bool		narrow_held;
	bool		f16_held;
	/*
	 * pggpu_data_open_lazy: the GPU's pinned staging buffers made at the
	 * first batch, not at the open (the driver's sets are mostly filled by
	 * device copies, and pinning them cost milliseconds a set)
	 */
	bool		lazy_stage;
	/*
	 * Row weights (pggpu_data_batch_weights, pggpu_data_set_weights): w[i]
	 * of row i, n of them (room for w_cap), or NULL: unweighted; w_batch the
	 * staging weights of the next push; w_stale: w changed since the
	 * backend last took it (km_weights, by pggpu_weights_sync in km_begin)
	 */
	double	   *w;
	int64_t		w_cap;
	double	   *w_batch;
	bool		w_stale;
	bool		w_ones;			/* every weight is 1: the set fits as an unweighted one (pggpu_data_weights NULL) */
};

/* what one assignment pass reports */
typedef struct pggpu_step_stats
{
	int64_t		changed;		/* rows whose label changed */
	int64_t		empty;			/* clusters left with no rows (update only) */
	double		inertia;		/* sum of squared distances */
} pggpu_step_stats;

/* km_point modes for the distance array */
#define PGGPU_D2_KEEP  0		/* leave dist2 alone */
#define PGGPU_D2_SET   1		/* dist2 := |x - C[c]|^2 */
#define PGGPU_D2_MIN   2		/* dist2 := min(dist2, |x - C[c]|^2) */

/* km_pick modes */
#define PGGPU_PICK_SAMPLE   0	/* row drawn with probability ~ dist2 */
#define PGGPU_PICK_FARTHEST 1	/* row of largest dist2 > 0, then dist2 := -1 */

typedef struct pggpu_ops
{
	/* data */
	pggpu_status (*open) (pggpu_data *ds, int gpu_index, int64_t expected_rows,
						  pggpu_error *err);
	/* the staging buffer: doubles, or floats when ds->f32, or halves when ds->f16 */
	void	   *(*batch) (pggpu_data *ds);
	/*
	 * takes rows [0, nrows) of the batch, by columns or (by_rows) by rows;
	 * rows past nrows must read as 0
	 */
	pggpu_status (*push) (pggpu_data *ds, int64_t nrows, bool by_rows, pggpu_error *err);
	void		(*close) (pggpu_data *ds);
	/* the least and largest non-zero |value| (INFINITY and 0 when none) */
	pggpu_status (*range) (pggpu_data *ds, double *lo, double *hi, pggpu_error *err);
	pggpu_status (*scale) (pggpu_data *ds, double factor, pggpu_error *err);

	/* k-means state: centroids C (k x d row-major), labels, dist2 */
	pggpu_status (*km_begin) (pggpu_data *ds, int k, pggpu_error *err);
	pggpu_status (*km_put_centroids) (pggpu_data *ds, const double *C,
									  pggpu_error *err);
	pggpu_status (*km_get_centroids) (pggpu_data *ds, double *C,
									  pggpu_error *err);

	/*
	 * One Lloyd pass: label every row with its nearest centroid (lowest index
	 * on ties), keep its squared distance, count changed labels and sum the
	 * distances.  With update, also replace each centroid by the mean of its
	 * new rows; a centroid with no rows stays and is counted in st->empty.
	 * Without dists (the caller wants no inertia) a backend may leave the
	 * rows' distances to their centroids (those of this pass) to be measured
	 * when next read (km_point, km_pick, km_fetch, km_farthest), and
	 * st->inertia is then NaN: a Lloyd iteration needs only the labels
	 * (the CPU's GEMM route measures each winner's distance apart, 18 % of
	 * its iteration at d = 768, k = 256).
	 */
	pggpu_status (*km_step) (pggpu_data *ds, bool update, bool dists, pggpu_step_stats *st,
							 pggpu_error *err);
	pggpu_status (*km_counts) (pggpu_data *ds, int64_t *counts,
							   pggpu_error *err);
	/*
	 * C[c] := row; then dist2 per mode (PGGPU_D2_*).  next_key, when not
	 * NULL, is the key of the PGGPU_PICK_SAMPLE that will follow: a backend
	 * may draw it in the same pass over the rows.
	 */
	pggpu_status (*km_point) (pggpu_data *ds, int64_t row, int c, int mode,
							  const uint64_t *next_key, pggpu_error *err);
	/* a row by mode (PGGPU_PICK_*); *row = -1 when no row qualifies */
	pggpu_status (*km_pick) (pggpu_data *ds, int mode, uint64_t key,
							 int64_t *row, pggpu_error *err);
	/* copy labels and/or squared distances out (either may be NULL) */
	pggpu_status (*km_fetch) (pggpu_data *ds, int32_t *labels, double *dist2,
							  pggpu_error *err);

	/*
	 * Optional (NULL: the caller alternates km_pick and km_point): the
	 * k-means++ steps c0 .. c1-1 in a row, each a PGGPU_PICK_SAMPLE with
	 * keys[c - c0] then km_point(row, c, PGGPU_D2_MIN) with next key
	 * keys[c - c0 + 1] (when c + 1 < k), without a round trip to the caller
	 * per step.  rows[c - c0] gets each drawn row.  The steps stop before the
	 * first draw that finds no row; *done says how many were made.
	 */
	pggpu_status (*km_pp_steps) (pggpu_data *ds, int c0, int c1,
								 const uint64_t *keys, int64_t *rows,
								 int *done, pggpu_error *err);

	/* every centroid scaled to Euclidean norm `norm` (pggpu_normalize; cosine) */
	pggpu_status (*km_normalize) (pggpu_data *ds, double norm, pggpu_error *err);

	/*
	 * The rows' weights from now on (n values >= 0; NULL: all 1): row i is
	 * drawn (PGGPU_PICK_SAMPLE, the trials) with probability w_i dist2[i] /
	 * sum, a step's update moves each centroid to the w-weighted mean of its
	 * rows (those of weight 0 sum nothing: km_sums' mass) and its inertia
	 * sums w_i dist2[i].  Kept across km_begin.  The driver calls it
	 * (pggpu_weights_sync) with the set's weights (ds->w) at km_begin.
	 */
	pggpu_status (*km_weights) (pggpu_data *ds, const double *w, pggpu_error *err);

	/* C[j] := row rows[j] for j < m (m <= k of km_begin) */
	pggpu_status (*km_gather) (pggpu_data *ds, const int64_t *rows, int m, pggpu_error *err);

	/*
	 * Column statistics (standard scaling, columns.c): sums[t * d + j] := the
	 * sum over the rows of tile t of column j's terms, by pggpu_col_sum
	 * (center NULL: the values; else their squared differences from
	 * center[j]; each times its row's weight where km_weights gave some).
	 */
	pggpu_status (*col_sums) (pggpu_data *ds, const double *center, double *sums,
							  pggpu_error *err);
	/* every row's x_ij := (x_ij - sub[j]) / div[j]; the rows past n stay 0 */
	pggpu_status (*col_affine) (pggpu_data *ds, const double *sub, const double *div,
								pggpu_error *err);
	/*
	 * every row scaled to Euclidean norm 1 (pggpu_normalize_at; a zero row
	 * stays zero), the rows held as doubles (widened first)
	 */
	pggpu_status (*unit_rows) (pggpu_data *ds, pggpu_error *err);

	/*
	 * Optional (NULL: the rows never leave; the CPU's are in host memory):
	 * the rows out of device memory, into pinned host memory, and back
	 * (pggpu_data_park).  No other op runs on a parked set.
	 */
	pggpu_status (*park) (pggpu_data *ds, pggpu_error *err);
	pggpu_status (*unpark) (pggpu_data *ds, pggpu_error *err);

	/* every row's content key (pggpu_row_key of its values as pushed) */
	pggpu_status (*keys) (pggpu_data *ds, uint64_t *keys, pggpu_error *err);

	/* rows rows[0..m-1] as held (m x d, row-major) into out; the state untouched */
	pggpu_status (*get_rows) (pggpu_data *ds, const int64_t *rows, int64_t m, double *out,
							  pggpu_error *err);

	/*
	 * Greedy k-means++'s trials: rows[t] := the PGGPU_PICK_SAMPLE draw of
	 * keys[t] (-1: none) and pot[t] := its potential sum_i w_i min(dist2[i],
	 * |x_i - x_rows[t]|^2) (INFINITY where none) for t < m (w_i: km_weights',
	 * else 1), summed in the order of pggpu_trial_block and then over the
	 * blocks in order, so that both backends give the same bits; one round
	 * trip for all of them.  The state is left as it was.
	 */
	pggpu_status (*km_trials) (pggpu_data *ds, const uint64_t *keys, int m, int64_t *rows, double *pot,
							   pggpu_error *err);

	/*
	 * Optional (NULL: the caller alternates km_trials and km_point): greedy
	 * k-means++'s steps c0 .. c1-1 in a row without a round trip to the
	 * caller per step, as pggpu_seed_greedy makes them: the m trials of
	 * keys[(c - c0) m ..], the least potential drawn (the first on ties),
	 * then km_point(row, c, PGGPU_D2_MIN); a row already chosen has distance
	 * 0 and is never drawn.  rows[c - c0] gets each row chosen.  The steps
	 * stop before the first whose draws all find no row; *done says how
	 * many were made.  m <= PGGPU_TRIALS_MAX.
	 */
	pggpu_status (*km_greedy_steps) (pggpu_data *ds, int c0, int c1, const uint64_t *keys, int m,
									 int64_t *rows, int *done, pggpu_error *err);

	/*
	 * Optional (NULL: the rows go through the host): dst (empty, this
	 * backend's) gets, for t = 0..m-1 in that order, the row rows[t] of
	 * srcs[which[t]] (which NULL: of srcs[0]) as that source holds it, times
	 * 2^e[which[t]] (a normal double), as if pushed.  The sources are this
	 * backend's and not parked; on the GPU they may lie on other GPUs than
	 * dst (their rows come by peer copies).  dst float32 or float16 (then
	 * every source holds its rows so, e 0: pggpu_copy_rows sees to it):
	 * held so too.  PGGPU_ERR_INVALID where it cannot.  Called through
	 * dst's ops.
	 */
	pggpu_status (*copy_rows) (pggpu_data *dst, pggpu_data *const *srcs, int nsrc, const int *which,
							   const int64_t *rows, int64_t m, const int *e, pggpu_error *err);

	/*
	 * After a step with update: the sums of its rows by cluster (k x d, as
	 * the rows are held; 0 where none; weighted: of w_i x_i), their counts
	 * and (mass, may be NULL) their weights' sums (the counts where the set
	 * has no weights), as the step added them (its centroids are the one
	 * over the other, where the mass is > 0), so that a holder of several
	 * parts adds sums, not means times masses; PGGPU_ERR_INVALID after any
	 * other step.
	 */
	pggpu_status (*km_sums) (pggpu_data *ds, double *sums, int64_t *counts, double *mass, pggpu_error *err);

	/*
	 * Optional: ds->f32 or ds->f16 was just set (no rows yet); the backend's
	 * memory made ready for that type and ds->narrow_held set to what it now holds
	 * (it says what the memory holds until then: a type set twice)
	 */
	pggpu_status (*dtype) (pggpu_data *ds, pggpu_error *err);
	/* Optional (needed where narrow_held): the rows as doubles from now on */
	pggpu_status (*widen) (pggpu_data *ds, pggpu_error *err);

	/*
	 * Optional (NULL: the caller fetches every distance, km_fetch): the
	 * repair's candidates, the rows whose distance of the last step is
	 * positive and at least *floor := the m-th largest positive one
	 * (pggpu_farthest_rows); *count := how many, and where that is at most
	 * cap, rows[0 .. *count - 1] := their places, ascending, and d2 := their
	 * distances.
	 */
	pggpu_status (*km_farthest) (pggpu_data *ds, int m, int64_t cap, double *floor,
								 int64_t *count, int64_t *rows, double *d2, pggpu_error *err);
} pggpu_ops;

/* greedy k-means++'s trials a step at most */
#define PGGPU_TRIALS_MAX 32

extern const pggpu_ops pggpu_cpu_ops;

/*
 * The CPU backend's rows: as doubles (NULL while held narrower), as floats
 * or as halves (each NULL unless held so), element at of any (pggpu_at's
 * index, pggpu_cpu_value below), and the block of RB rows from i0 (a
 * multiple of RB) as doubles: the rows themselves (column j at the result +
 * j * *stride, the tile) or, held as floats or halves, converted into buf
 * (RB x d, *stride = RB)
 */
double	   *pggpu_cpu_rows(pggpu_data *ds);
const float *pggpu_cpu_rows_f32(pggpu_data *ds);
const uint16_t *pggpu_cpu_rows_f16(pggpu_data *ds);
const double *pggpu_cpu_block(pggpu_data *ds, int64_t i0, double *buf, int64_t *stride);

/*
 * The GPU holds a FLOAT16 set's halves as they are past this many columns,
 * floats up to it (gpu/dataset.cu's gpu_dtype: its tensor cores' scans,
 * tc_shapes.h's TC_MAX_D, stage rows of 4-byte values);
 * pggpu_dtype_held_bytes counts the same
 */
#define PGGPU_GPU_FLOAT_HALVES_D 32

/* halves (binary16): their conversions (half.h) */
#include "half.h"

static inline double
pggpu_cpu_value(const double *X, const float *Xf, const uint16_t *Xh, int64_t at)
{
	return X ? X[at] : Xf ? (double) Xf[at] : (double) pggpu_cpu_half(Xh[at]);
}

/* element at of a staging batch of its set's type (pggpu_data_batch, _f32, _f16: one not NULL) := v */
static inline void
pggpu_batch_put(double *buf, float *buf32, uint16_t *buf16, int64_t at, double v)
{
	if (buf32)
		buf32[at] = (float) v;
	else if (buf16)
		buf16[at] = pggpu_half_from_double(v);
	else
		buf[at] = v;
}

/* the CPU backend's col_sums, col_affine and unit_rows (cpu/columns.c), over its rows */
pggpu_status pggpu_cpu_col_sums(pggpu_data *ds, const double *center, double *sums,
								pggpu_error *err);
pggpu_status pggpu_cpu_col_affine(pggpu_data *ds, const double *sub, const double *div,
								  pggpu_error *err);
pggpu_status pggpu_cpu_unit_rows(pggpu_data *ds, pggpu_error *err);
/* the CPU backend's range and scale (cpu/columns.c) */
pggpu_status pggpu_cpu_range(pggpu_data *ds, double *lo, double *hi, pggpu_error *err);
pggpu_status pggpu_cpu_scale(pggpu_data *ds, double factor, pggpu_error *err);
/* the CPU backend's keys, get_rows and km_trials (cpu/trials.c), over its rows and draw's state */
void		pggpu_cpu_draw_state(pggpu_data *ds, const double **dist2, const double **rw);
pggpu_status pggpu_cpu_km_trials(pggpu_data *ds, const uint64_t *keys, int m, int64_t *rows,
								 double *pot, pggpu_error *err);
pggpu_status pggpu_cpu_keys(pggpu_data *ds, uint64_t *keys, pggpu_error *err);
pggpu_status pggpu_cpu_get_rows(pggpu_data *ds, const int64_t *rows, int64_t m, double *out,
								pggpu_error *err);
pggpu_status pggpu_cpu_copy_rows(pggpu_data *dst, pggpu_data *const *srcs, int nsrc, const int *which,
								 const int64_t *rows, int64_t m, const int *e, pggpu_error *err);
pggpu_status pggpu_cpu_trials(pggpu_data *ds, const double *dist2, const double *rw,
							  const int64_t *rows, int m, double *pot, pggpu_error *err);

/* CUDA backend (gpu/, or gpu/stand_in.c in builds without CUDA) */
extern const pggpu_ops *const pggpu_gpu_ops;
int			pggpu_gpu_count_impl(pggpu_error *err);
pggpu_status pggpu_gpu_info_impl(int index, pggpu_device_info *out,
								 pggpu_error *err);
int			pggpu_gpu_list_impl(int *usable, int max, int *total, pggpu_error *err);
void		pggpu_gpu_start_impl(int gpu);
/* cuBLAS loaded (dlopen) ahead of its first use: pggpu_gpus_warm's, from its thread */
void		pggpu_blas_load(void);

/* ---- matrix products (cpu/matmul.c, gpu/matmul.cu) ----------------------- */

struct pggpu_matmul
{
	pggpu_backend backend;
	char		device_name[256];
	void	   *host[3];		/* PGGPU_MM_A, _B, _C */
	size_t		host_cap[3];
	void	   *impl;			/* the GPU backend's state */
	int			gpu;			/* the GPU it is on, -1: the CPU */
	/* a thread of pggpu_matmul_run_split: leave between blocks when stopped(arg) */
	bool		(*stopped) (void *arg);
	void	   *stopped_arg;
};


/*
 * OpenBLAS, loaded on first use (cpu/matmul.c): NULL and *why when it
 * cannot be.  cblas.h's functions, its enums as the ints they are (no
 * cblas.h here: the GPU's files include this too).
 */
#define PGGPU_CBLAS_ROW_MAJOR 101
#define PGGPU_CBLAS_COL_MAJOR 102
#define PGGPU_CBLAS_NO_TRANS 111
#define PGGPU_CBLAS_TRANS 112

typedef struct pggpu_openblas
{
	void		(*dgemm) (int order, int ta, int tb, int m, int n, int k, double alpha,
						  const double *a, int lda, const double *b, int ldb, double beta,
						  double *c, int ldc);
	void		(*sgemm) (int order, int ta, int tb, int m, int n, int k, float alpha,
						  const float *a, int lda, const float *b, int ldb, float beta,
						  float *c, int ldc);
	void		(*set_threads) (int);	/* openblas_set_num_threads, or NULL */
} pggpu_openblas;

const pggpu_openblas *pggpu_openblas_load(const char **why);
void		pggpu_openblas_threads(const pggpu_openblas *ob, int threads);

/* the GPU side (gpu/stand_in.c stubs these in builds without CUDA) */
pggpu_status pggpu_gpu_mm_open(pggpu_matmul *mm, int gpu_index, pggpu_error *err);
void	   *pggpu_gpu_host_alloc(size_t bytes, size_t *got);
void		pggpu_gpu_host_free(void *p, size_t size);
/* (stops between blocks when mm->stopped says so: PGGPU_ERR_INVALID "stopped") */
pggpu_status pggpu_gpu_mm_run(pggpu_matmul *mm, const pggpu_matmul_params *p,
							  const void *a, const void *b, void *c,
							  pggpu_matmul_info *info, pggpu_error *err);
void		pggpu_gpu_mm_close(pggpu_matmul *mm);
/*
 * A product split over workspaces on GPUs that each keep all of b: each
 * copies its rows lo .. hi-1 of b from the host (stage_b: PGGPU_ERR_INVALID
 * where b would not stay whole), then workspace i the others' rows from
 * their GPUs (gather_b, the rows cuts[j] .. cuts[j+1]-1 of each j, cols
 * elements of es bytes a row); i's next run uses that b.  stage_b with b
 * NULL forgets it (the split does so once its runs are over).
 */
pggpu_status pggpu_gpu_mm_stage_b(pggpu_matmul *mm, const pggpu_matmul_params *p, const void *b, int64_t lo,
								  int64_t hi, pggpu_error *err);
pggpu_status pggpu_gpu_mm_gather_b(pggpu_matmul *const *mms, int n, int i, const int64_t *cuts, int64_t cols,
								   int64_t es, pggpu_error *err);

/* the CPU side (cpu/matmul.c): OpenBLAS's product in blocks of rows */
pggpu_status pggpu_cpu_mm_run(const pggpu_matmul_params *p, const void *a, const void *b, void *c,
							  pggpu_matmul_info *info, pggpu_error *err);

/* ---- several GPUs at once (together.c) ----------------------------------- */

/* set by the calling thread when an interrupt is pending: the jobs leave */
#ifdef __cplusplus
typedef struct pggpu_stop pggpu_stop;	/* (C++ files only pass it on) */
#else
typedef struct pggpu_stop
{
	_Atomic bool flag;
} pggpu_stop;
#endif

typedef void (*pggpu_job_fn) (void *arg, int i, pggpu_stop *stop);

/*
 * job(arg, i, stop) for i = 0 .. n-1 at once, a thread each, all signals
 * blocked in them; meanwhile the calling thread polls pending (may be NULL)
 * at least every millisecond and sets stop when it says so.  Returns as
 * soon as every job has ended.  The jobs must not call the caller's
 * interrupt callback.
 */
void		pggpu_run_together(pggpu_job_fn job, void *arg, int n, pggpu_pending_fn pending,
							   pggpu_stop *stop);
bool		pggpu_stopped(const pggpu_stop *stop);
bool		pggpu_stopped_arg(void *stop);

/* ---- the driver's own (compute.c, seed.c) --------------------------------- */

/* (the scratch memory: pg_gpu_compute.h) */

/*
 * compute.c: ds held at 2^e times its rows as pushed, e chosen so that their
 * squares (and the extra values', in the caller's units) are normal doubles
 */
pggpu_status pggpu_prepare_scale(pggpu_data *ds, const double *extra, int64_t nextra, int *e,
								 pggpu_error *err);
/* compute.c: the rows' least and largest non-zero |value| as pushed (cached); ds held at 2^e */
pggpu_status pggpu_data_range(pggpu_data *ds, double *lo, double *hi, pggpu_error *err);
pggpu_status pggpu_scale_to(pggpu_data *ds, int e, pggpu_error *err);

/*
 * dataset.c: the set's weights (ds->w) to its backend (km_weights) where
 * they changed since; each backend's km_begin calls it
 */
pggpu_status pggpu_weights_sync(pggpu_data *ds, pggpu_error *err);

/*
 * dataset.c: dst's copy_rows (see pggpu_ops), the rows' weights with them
 * where a source has weights.  An empty dst of doubles takes the value
 * type of sources that all hold their rows as floats (or all as halves),
 * unscaled: the same values, fewer bytes, the narrow routes.
 */
pggpu_status pggpu_copy_rows(pggpu_data *dst, pggpu_data *const *srcs, int nsrc, const int *which,
							 const int64_t *rows, int64_t m, const int *e, pggpu_error *err);

/* fit.c: the rows of the seeding set for k clusters of d columns (fewer: all of them) */
int64_t		pggpu_seed_rows(int k, int d);
/* dataset.c: pggpu_data_open, the staging buffers made at the first batch (lazy_stage) */
pggpu_status pggpu_data_open_lazy(pggpu_data **out, pggpu_backend backend, int gpu_index, int d,
								  int64_t expected_rows, pggpu_error *err);
pggpu_status pggpu_fit_open(pggpu_data *home, pggpu_backend backend, int64_t m, bool held,
							pggpu_data **out, pggpu_error *err);
void		pggpu_fit_close(pggpu_data *home, pggpu_data *sds);
pggpu_status pggpu_fit_set(const pggpu_kmeans_source *src, double rate, uint64_t seed, int64_t least,
						   pggpu_data **out, pggpu_error *err);
/*
 * hier.c: hierarchical's k centroids (fit units: 2^e the caller's) into C;
 * the groups of k (about sqrt(k), at most rows); each group's share of k
 * by its rows (tests)
 */
int			pggpu_hier_groups(int k, int64_t rows);
void		pggpu_hier_shares(const int64_t *rows, int g, int k, int *share);
pggpu_status pggpu_hierarchical(const pggpu_kmeans_source *src, const pggpu_kmeans_params *p, int e,
								double *C, pggpu_kmeans_result *r, pggpu_error *err);

/*
 * The seeding set's order of m sampled rows (fit.c): order := their places
 * 0..m-1 by key, then (equal keys) by value: rows (m x d, caller's units)
 * where given, else the tied rows' values from fetch(arg, places, n, out),
 * then (equal values) by weight (w, NULL: unweighted)
 */
pggpu_status pggpu_seed_order(pggpu_data *home, const uint64_t *keys, int64_t m, const double *rows, const double *w,
							  pggpu_status (*fetch) (void *arg, const int64_t *at, int64_t n, double *out,
													 pggpu_error *err),
							  void *arg, int64_t *order, pggpu_error *err);

/*
 * compute.c: clusters renumbered by their centroids (lexicographically, ties
 * by size), r's centroids and sizes and the n labels (may be NULL) with them
 */
pggpu_status pggpu_canonical_order(pggpu_kmeans_result *r, int k, int d, int32_t *labels,
								   int64_t n, pggpu_error *err);

/*
 * farthest.c: the repair's candidates among the distances D[0 .. n - 1] (a
 * backend's km_farthest): *floor := the m-th largest positive one (the
 * smallest positive one where there are fewer; 0 where none is), and the
 * rows with a positive distance at or beyond it, *count of them, the first
 * cap in rows (ascending) and d2; top: m doubles of workspace
 */
void		pggpu_farthest_rows(const double *D, int64_t n, int m, int64_t cap, double *top, double *floor,
								int64_t *count, int64_t *rows, double *d2);

/* compute.c: a monotonic clock (seconds); the seed of start s of n_init (0: seed) */
double		pggpu_seconds(void);
uint64_t	pggpu_start_seed(uint64_t seed, int s);

/* x[i] := ldexp(x[i], e), i < n, at a multiplication's cost where 2^e is normal (columns.c) */
void		pggpu_ldexp_all(double *x, int64_t n, int e);

/* a set found parked goes back out of device memory after its pass (st: the pass's) */
static inline pggpu_status
pggpu_repark(pggpu_data *ds, bool was_parked, pggpu_status st, pggpu_error *err)
{
	return st != PGGPU_OK || !was_parked ? st : pggpu_data_park(ds, err);
}

/* the caller's interrupt callback of a k-means call, if any (it may longjmp) */
static inline void
pggpu_interrupts(const pggpu_kmeans_params *p)
{
	if (p->check_interrupts)
		p->check_interrupts(p->interrupt_arg);
}

/*
 * seed.c: the initial centroids of k = ds->k after km_begin (ds scaled
 * already); k-means++ from row `first` (pggpu_seed_first: the seed's uniform
 * row; a weighted set's drawn by weight)
 */
int64_t		pggpu_seed_first(const pggpu_kmeans_params *p, const pggpu_data *ds);
/*
 * The weights a draw of rows by weight alone uses (the first centre, random
 * rows): the set's, NULL where it has none or they are all the same (> 0),
 * so that equal weights draw as none do
 */
const double *pggpu_weights_drawn(const pggpu_data *ds);
pggpu_status pggpu_seed_random(pggpu_data *ds, const pggpu_kmeans_params *p, pggpu_error *err);
pggpu_status pggpu_seed_kmeanspp(pggpu_data *ds, const pggpu_kmeans_params *p, int64_t first,
								 pggpu_error *err);
pggpu_status pggpu_seed_parallel(pggpu_data *ds, const pggpu_kmeans_params *p, pggpu_error *err);
/* greedy k-means++ (p->init 'k-means++'), 2 + floor(ln k) trials a step (pggpu_greedy_trials) */
int			pggpu_greedy_trials(int k);
pggpu_status pggpu_seed_greedy(pggpu_data *ds, const pggpu_kmeans_params *p, int64_t first,
							   pggpu_error *err);

/* error helper: fills err, returns code */
pggpu_status pggpu_fail(pggpu_error *err, pggpu_status code, const char *fmt,...)
#ifdef __GNUC__
			__attribute__((format(printf, 3, 4)))
#endif
			;

/* ---- shared arithmetic: identical on host and device ------------------- */

/* one rounding per operation on both sides (no fused multiply-add) */
#ifdef __CUDA_ARCH__
#define PGGPU_MUL(a, b) __dmul_rn((a), (b))
#define PGGPU_ADD(a, b) __dadd_rn((a), (b))
#else
#define PGGPU_MUL(a, b) ((a) * (b))
#define PGGPU_ADD(a, b) ((a) + (b))
#endif

/* DBL_MIN (2^-1022, the least normal double), for host and device code alike */
#define PGGPU_DBL_MIN 0x1p-1022

/* SplitMix64 finaliser: a good 64-bit mix, used as a counter-based RNG */
PGGPU_HD uint64_t
pggpu_mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* uniform double in (0, 1] for row i under key */
PGGPU_HD double
pggpu_uniform(uint64_t key, int64_t i)
{
	uint64_t	h = pggpu_mix64(key ^ pggpu_mix64((uint64_t) i));

	return (double) ((h >> 11) + 1) * (1.0 / 9007199254740992.0);
}

/*
 * The PGGPU_PICK_SAMPLE draw (k-means++): row i with probability w_i / sum w,
 * w_i = dist2[i] where it is > 0, else 0 (times the row's weight where the
 * set has km_weights: pggpu_draw_wt), in two exponential races, so that
 * a pass needs one hash and one logarithm per block of rows, not per row:
 *
 *  1. Blocks of PGGPU_DRAW_ROWS consecutive rows (block b: rows 256 b ..,
 *     the last one cut at n).  The block's weight S_b: lane l (0..31) sums
 *     w of rows 256 b + 32 r + l, r = 0..7, in order from 0.0; then for
 *     h = 16, 8, 4, 2, 1, lane l < h adds lane l + h's sum to its own;
 *     S_b is lane 0's (pggpu_draw_weight: the order a warp's butterfly of
 *     shuffles has, since a + b = b + a exactly).  The block with the least
 *     -log(pggpu_uniform(key, b)) / S_b (S_b > 0; lowest b on ties) wins:
 *     block b with probability S_b / sum S.
 *  2. In it, the row with the least -log(pggpu_uniform(pggpu_draw_row_key(
 *     key), i)) / w_i (w_i > 0; lowest i on ties): row i with probability
 *     w_i / S_b.
 *
 * No block of weight > 0: no row.  Both backends compute the same keys, so
 * they draw the same rows.
 */
#define PGGPU_DRAW_ROWS 256
#define PGGPU_DRAW_LANES 32

/* the key of stage 2 of the draw under key */
PGGPU_HD uint64_t
pggpu_draw_row_key(uint64_t key)
{
	return pggpu_mix64(key ^ 0xd1b54a32d192ed03ULL);
}

/* w_i as the draw counts it */
PGGPU_HD double
pggpu_draw_w(double d2)
{
	return d2 > 0 ? d2 : 0.0;
}

/* w_i of row i with row weights rw (km_weights; NULL: 1): rw[i] dist2[i] */
PGGPU_HD double
pggpu_draw_wt(const double *dist2, const double *rw, int64_t i)
{
	double		w = pggpu_draw_w(dist2[i]);

	return rw ? PGGPU_MUL(w, rw[i]) : w;
}

/* the key of the race for item i (block or row) of weight w under key */
PGGPU_HD double
pggpu_draw_key(uint64_t key, int64_t i, double w)
{
	return w > 0 ? -log(pggpu_uniform(key, i)) / w : INFINITY;
}

/* S_b of the block at rows i0 .. (i0 a multiple of PGGPU_DRAW_ROWS), rows < n */
PGGPU_HD double
pggpu_draw_weight(const double *dist2, const double *rw, int64_t i0, int64_t n)
{
	double		s[PGGPU_DRAW_LANES];

	for (int l = 0; l < PGGPU_DRAW_LANES; l++)
	{
		s[l] = 0.0;
		for (int r = 0; r < PGGPU_DRAW_ROWS / PGGPU_DRAW_LANES; r++)
		{
			int64_t		i = i0 + r * PGGPU_DRAW_LANES + l;

			if (i < n)
				s[l] = PGGPU_ADD(s[l], pggpu_draw_wt(dist2, rw, i));
		}
	}
	for (int h = PGGPU_DRAW_LANES / 2; h > 0; h >>= 1)
		for (int l = 0; l < h; l++)
			s[l] = s[l] + s[l + h];
	return s[0];
}

/*
 * c (d values, stride apart) scaled to Euclidean norm `norm` (spherical
 * k-means: the centroids after each update, given centroids; norm 1: the
 * rows, pggpu_unit_row); a zero vector stays zero (false).
 * The same roundings on the host and the GPU: |c| = m sqrt(sum (c_j / m)^2)
 * over j in order (m = max |c_j|: no square overflows), each operation
 * rounded on its own (no fused multiply-add); for c below double's normal
 * range (m < DBL_MIN), c_j / m times norm / sqrt(sum (c_j / m)^2).
 */
PGGPU_HD bool
pggpu_normalize_at(double *c, int64_t stride, int d, double norm)
{
	double		m = 0,
				ss = 0,
				den,
				f;

	for (int j = 0; j < d; j++)
		m = fmax(m, fabs(c[j * stride]));
	if (!(m > 0))
		return false;
	for (int j = 0; j < d; j++)
	{
		double		q = c[j * stride] / m;

		ss = PGGPU_ADD(ss, PGGPU_MUL(q, q));
	}
	den = PGGPU_MUL(m, sqrt(ss));
	f = norm / den;
	if (den >= PGGPU_DBL_MIN && isfinite(f))
		for (int j = 0; j < d; j++)
			c[j * stride] = PGGPU_MUL(c[j * stride], f);
	else
	{
		/*
		 * m (so |c|) below double's normal range (subnormal data): the one
		 * factor norm / |c| would overflow (to Infinity, and c to NaN) or be
		 * rounded in the subnormal product.  Divide by m first (|c_j / m| <=
		 * 1, the q above), then by the norm of c / m (sqrt(ss) >= 1, so
		 * norm / sqrt(ss) <= norm): neither step overflows.  Taken only
		 * where the usual factor fails, so that data in the normal range
		 * keep their one rounding and their results, bit for bit.
		 */
		double		g = norm / sqrt(ss);

		for (int j = 0; j < d; j++)
			c[j * stride] = PGGPU_MUL(c[j * stride] / m, g);
	}
	return true;
}

/* as pggpu_normalize_at, the values side by side */
PGGPU_HD void
pggpu_normalize(double *c, int d, double norm)
{
	(void) pggpu_normalize_at(c, 1, d, norm);
}

/* each of the k rows of C (k x d, row-major) scaled to norm `norm` */
PGGPU_HD void
pggpu_normalize_rows(double *C, int k, int d, double norm)
{
	for (int c = 0; c < k; c++)
		pggpu_normalize(C + (int64_t) c * d, d, norm);
}

/*
 * One tile's sum of a column's terms (col_sums): t = x (center NULL) or
 * (x - c)^2, times the row's weight w[r] where the set has weights (w NULL:
 * none), rows 0 .. rows-1 of the column (x at col[r]).  Lane l (0..31)
 * sums the terms of rows l, l + 32, l + 64, ... in order from 0.0; then for
 * h = 16, 8, 4, 2, 1, lane l < h adds lane l + h's sum to its own: the
 * order of a warp's butterfly of shuffles, so the GPU, a warp a column of a
 * tile, rounds as the host does.
 */
PGGPU_HD double
pggpu_col_term(double x, const double *center, int j)
{
	double		v;

	if (center == NULL)
		return x;
	v = PGGPU_ADD(x, -center[j]);
	return PGGPU_MUL(v, v);
}

/* a term of col_sums times its row's weight (w NULL: unweighted; w[r]: the tile's row r's) */
PGGPU_HD double
pggpu_col_weighed(double t, const double *w, int64_t r)
{
	return w ? PGGPU_MUL(w[r], t) : t;
}

PGGPU_HD double
pggpu_col_sum(const double *col, const double *w, int64_t rows, const double *center, int j)
{
	double		s[PGGPU_DRAW_LANES];

	for (int l = 0; l < PGGPU_DRAW_LANES; l++)
	{
		s[l] = 0.0;
		for (int64_t r = l; r < rows; r += PGGPU_DRAW_LANES)
			s[l] = PGGPU_ADD(s[l], pggpu_col_weighed(pggpu_col_term(col[r], center, j), w, r));
	}
	for (int h = PGGPU_DRAW_LANES / 2; h > 0; h >>= 1)
		for (int l = 0; l < h; l++)
			s[l] = s[l] + s[l + h];
	return s[0];
}

/* col_affine's value: one subtraction, one division, each rounded */
PGGPU_HD double
pggpu_affine(double x, double sub, double div)
{
	return PGGPU_ADD(x, -sub) / div;
}

/*
 * A row's content key: a hash of its values, the same for equal rows
 * wherever and in whatever order they arrive; seeding's draws are keyed by
 * it (fit.c).  Each value counts by its sign and mantissa and its binary
 * exponent less the row's largest, so that the key is also the same for
 * the row times any power of two (the scale a fit holds rows at, and data
 * of any magnitude: a fit of 2^530 x is 2^530 times the fit of x).  -0
 * counts as 0.  The terms are added modulo 2^64, in any order.
 */
/* the bits of v (v's as a uint64) */
PGGPU_HD uint64_t
pggpu_key_bits(double v)
{
	uint64_t	b;

#ifdef __CUDA_ARCH__
	b = (uint64_t) __double_as_longlong(v);
#else
	memcpy(&b, &v, sizeof(b));
#endif
	return b;
}

/*
 * frexp's exponent of v (0 for 0), from its bits where v is normal (frexp
 * itself, a library call, for subnormals): the keys of a sample's rows are
 * computed on the host too
 */
PGGPU_HD int
pggpu_key_exponent(double v)
{
	int			ex = 0;
	int			field = (int) ((pggpu_key_bits(v) >> 52) & 0x7ff);

	if (field != 0)
		return field - 1022;
	if (v != 0)
		(void) frexp(v, &ex);
	return ex;
}

PGGPU_HD uint64_t
pggpu_key_term(double v, int emax, int j)
{
	uint64_t	b = 0;

	if (v != 0)
	{
		uint64_t	bits = pggpu_key_bits(v);
		int			ex;

		/* frexp's mantissa's bits: v's sign and fraction, the exponent of [0.5, 1) */
		if (((bits >> 52) & 0x7ff) != 0)
		{
			b = (bits & 0x800fffffffffffffULL) | (1022ULL << 52);
			ex = (int) ((bits >> 52) & 0x7ff) - 1022;
		}
		else
			b = pggpu_key_bits(frexp(v, &ex));
		b ^= pggpu_mix64((uint64_t) (uint32_t) (emax - ex));
	}
	return pggpu_mix64(b ^ (0x9e3779b97f4a7c15ULL * (uint64_t) (j + 1)));
}

PGGPU_HD uint64_t
pggpu_key_final(uint64_t sum, int d)
{
	return pggpu_mix64(sum ^ (0xc2b2ae3d27d4eb4fULL * (uint64_t) d));
}

/* the key of row x (d values, element j at x[j * stride]) */
PGGPU_HD uint64_t
pggpu_row_key(const double *x, int64_t stride, int d)
{
	uint64_t	h = 0;
	int			emax = INT32_MIN;

	for (int j = 0; j < d; j++)
		if (x[j * stride] != 0 && pggpu_key_exponent(x[j * stride]) > emax)
			emax = pggpu_key_exponent(x[j * stride]);
	for (int j = 0; j < d; j++)
		h += pggpu_key_term(x[j * stride], emax, j);
	return pggpu_key_final(h, d);
}

/* greedy k-means++'s term of a row: w_i min(D_i, d_i) (negative D: 0) */
PGGPU_HD double
pggpu_trial_term(double D, double dt, const double *rw, int64_t i)
{
	double		m = pggpu_draw_w(dt < D ? dt : D);

	return rw ? PGGPU_MUL(m, rw[i]) : m;
}

/*
 * The potential's sum over one block of PGGPU_DRAW_ROWS rows, given their
 * terms t[q] (q = 0 .. 255, 0 past n): the order of pggpu_draw_weight (lane
 * l adds rows 32 r + l, r in order, from 0.0; then the butterfly)
 */
PGGPU_HD double
pggpu_trial_block(const double *t)
{
	double		s[PGGPU_DRAW_LANES];

	for (int l = 0; l < PGGPU_DRAW_LANES; l++)
	{
		s[l] = 0.0;
		for (int r = 0; r < PGGPU_DRAW_ROWS / PGGPU_DRAW_LANES; r++)
			s[l] = PGGPU_ADD(s[l], t[r * PGGPU_DRAW_LANES + l]);
	}
	for (int h = PGGPU_DRAW_LANES / 2; h > 0; h >>= 1)
		for (int l = 0; l < h; l++)
			s[l] = s[l] + s[l + h];
	return s[0];
}

/* element (i, j) of tiled SoA storage */
PGGPU_HD int64_t
pggpu_at(int64_t i, int j, int d, int log_b)
{
	int64_t		b = (int64_t) 1 << log_b;

	return (i >> log_b) * b * d + (int64_t) j * b + (i & (b - 1));
}

#ifdef __cplusplus
}
#endif

#endif							/* PG_GPU_COMPUTE_INTERNAL_H */
