/*
 * pg_gpu_compute.h - the one meeting point of src/ (PostgreSQL) and cuda/
 * (compute).  Plain C: no postgres.h, no cuda_runtime.h.
 *
 * A data set is n rows of d columns (doubles, or floats: pggpu_dtype), pushed batch by batch
 * through staging buffers (pinned host memory on the GPU backend), then used
 * by one algorithm (k-means fit or nearest-centroid assignment).  Errors come
 * back as a status plus a message; nothing here calls exit() or longjmp()s,
 * except through the caller's own interrupt callback.
 *
 * Threads: data sets and the k-means calls on them may be used by several
 * threads at once, one data set a thread (the unit tests do).  The CPU
 * backend's passes may start threads of their own (pggpu_data_set_threads),
 * joined before the call returns; they never call back.  Matrix
 * products and the pinned-buffer cache are for one thread (a PostgreSQL
 * backend).
 */
#ifndef PG_GPU_COMPUTE_H
#define PG_GPU_COMPUTE_H

/*
 * The tests' knobs: linked into the test programs from the objects, not
 * exported by pg_gpu.so (nm -D shows none)
 */
#define PGGPU_TEST_HOOK __attribute__((visibility("hidden")))

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pggpu_status
{
	PGGPU_OK = 0,
	PGGPU_ERR_NO_GPU,			/* no usable GPU, or built without CUDA */
	PGGPU_ERR_GPU_MEMORY,		/* device memory exhausted */
	PGGPU_ERR_HOST_MEMORY,		/* host (pinned or plain) memory exhausted */
	PGGPU_ERR_CUDA,				/* any other CUDA failure */
	PGGPU_ERR_INVALID,			/* invalid argument: a caller bug */
	PGGPU_ERR_LIBRARY,			/* a library it needs (OpenBLAS) cannot be loaded */
	PGGPU_ERR_RANGE				/* values no double-precision scale can hold (see compute.c) */
} pggpu_status;

typedef struct pggpu_error
{
	pggpu_status code;
	char		msg[512];
} pggpu_error;

typedef enum pggpu_backend
{
	PGGPU_BACKEND_CPU = 0,
	PGGPU_BACKEND_GPU = 1
} pggpu_backend;

/* ---- devices ---------------------------------------------------------- */

/* true when this build contains the CUDA backend */
bool		pggpu_cuda_built(void);

/*
 * Number of usable GPUs (0 when none, the driver is missing, or the build has
 * no CUDA; err->msg then says why).  Initialises CUDA in the calling process
 * on first use.
 */
int			pggpu_gpu_count(pggpu_error *err);

typedef struct pggpu_device_info
{
	int			index;
	char		name[256];
	int			cc_major;
	int			cc_minor;
	int			multiprocessors;
	int64_t		memory_total;	/* bytes */
	int64_t		memory_free;	/* bytes */
	int			driver_version; /* 1000 * major + 10 * minor, as CUDA */
	int			runtime_version;
} pggpu_device_info;

pggpu_status pggpu_gpu_info(int index, pggpu_device_info *out, pggpu_error *err);

/*
 * The indexes of the usable GPUs (at most max) into usable, their number;
 * total: the GPUs CUDA sees, usable or not.  Makes no CUDA context.
 */
int			pggpu_gpu_list(int *usable, int max, int *total, pggpu_error *err);
/*
 * The CUDA contexts of n GPUs made at once, a thread a GPU (the first use of
 * a GPU in a process costs a context's making, a few hundred milliseconds:
 * made in turn, several GPUs would cost their sum); errors are left for the
 * GPUs' first real use to report.  Nothing without CUDA.
 */
void		pggpu_gpus_start(const int *gpus, int n);
/*
 * The same begun in the background, a detached thread a GPU (its signals
 * blocked), cuBLAS loaded too, for a caller with other work first
 * (gpu_knn reads its queries): its first use of a GPU or of cuBLAS waits
 * for what is still being made.  Nothing without CUDA, or where a thread
 * cannot be started.
 */
void		pggpu_gpus_warm(const int *gpus, int n);
/*
 * Waits for pggpu_gpus_warm's threads to end: a process leaving calls it
 * first, so that CUDA is not torn down (exit's handlers) under a thread
 * still making a context.
 */
void		pggpu_gpus_warmed(void);

/* ---- data sets ---------------------------------------------------------- */

typedef struct pggpu_data pggpu_data;

/*
 * Opens a data set of d columns.  expected_rows is a hint (0 if unknown) for
 * the first allocation; the set grows as batches arrive.  gpu_index picks the
 * GPU on the GPU backend.
 */
pggpu_status pggpu_data_open(pggpu_data **out, pggpu_backend backend,
							 int gpu_index, int d, int64_t expected_rows,
							 pggpu_error *err);

/*
 * The type the rows are pushed in.  FLOAT64 (the default): doubles.
 * FLOAT32: the caller's values are float32 values (pgvector's vector,
 * real[]), pushed as floats and held as floats (4 bytes a value, on the
 * CPU and on the GPU).  FLOAT16: the values are binary16 values (pgvector's
 * halfvec), pushed as halves (2 bytes a value through the staging buffers
 * and the copy to the GPU) and held as floats, each widened exactly as it
 * is pushed.  A float32 or half value is exact as a double, so every answer
 * is the one the same values pushed as doubles give, bit for bit (the tests
 * hold them to it).  An algorithm that rewrites the values (standard
 * scaling, a power-of-two scale) widens the rows to doubles first.  Set
 * before the first push.
 */
typedef enum pggpu_dtype
{
	PGGPU_FLOAT64 = 0,
	PGGPU_FLOAT32 = 1,
	PGGPU_FLOAT16 = 2
} pggpu_dtype;

pggpu_status pggpu_data_set_dtype(pggpu_data *ds, pggpu_dtype dtype, pggpu_error *err);
pggpu_dtype pggpu_data_dtype(const pggpu_data *ds);

/* bytes a value of the type takes as it is pushed (8, 4 or 2) */
int			pggpu_dtype_bytes(pggpu_dtype dtype);

/*
 * bytes a value of the type takes as a backend holds rows of d of them, the
 * larger of the two backends' (8, 4, or 2: the GPU holds halves of 32
 * columns or fewer as floats, 4)
 */
int			pggpu_dtype_held_bytes(pggpu_dtype dtype, int d);

/*
 * The staging buffer to fill next: structure-of-arrays, column j of row r at
 * buf[j * pggpu_data_batch_rows(ds) + r].  Valid until the next push.
 * pggpu_data_batch for a FLOAT64 set, pggpu_data_batch_f32 for a FLOAT32
 * set, pggpu_data_batch_f16 (binary16 bits) for a FLOAT16 set; each NULL on
 * a set of another type.
 */
double	   *pggpu_data_batch(pggpu_data *ds);
float	   *pggpu_data_batch_f32(pggpu_data *ds);
uint16_t   *pggpu_data_batch_f16(pggpu_data *ds);
int64_t		pggpu_data_batch_rows(const pggpu_data *ds);

/*
 * Hands over the first nrows rows of the staging buffer (0 < nrows <=
 * batch_rows).  On the GPU the copy runs asynchronously while the caller
 * fills the other staging buffer.
 */
pggpu_status pggpu_data_push(pggpu_data *ds, int64_t nrows, pggpu_error *err);

/*
 * As pggpu_data_push, the staging buffer holding its nrows rows by rows
 * instead: value j of row r at buf[r * d + j], as a parallel read's
 * workers write them.  The backend turns them into its columns: the GPU
 * on the device after the copy, the CPU in the calling thread (a
 * caller pushing to the CPU fills columns, which its workers can).
 */
pggpu_status pggpu_data_push_by_rows(pggpu_data *ds, int64_t nrows, pggpu_error *err);

/*
 * A FLOAT32 or FLOAT16 set with no rows yet held as doubles from its first
 * row: its rows still pushed in their type, by rows only
 * (pggpu_data_push_by_rows), each value widened exactly as it arrives.  For
 * a caller about to rewrite every value (cosine: pggpu_data_unit_rows), so
 * that the set never holds both copies.
 */
pggpu_status pggpu_data_hold_wide(pggpu_data *ds, pggpu_error *err);

/*
 * Every row of ds scaled to Euclidean norm 1, as pggpu_unit_row scales one
 * (a cosine fit's rows read as they are stored, their norms taken once on
 * the device; a zero row stays zero: the caller leaves those out), held
 * as doubles from then on.  Before any scaling (PGGPU_ERR_INVALID after).
 */
pggpu_status pggpu_data_unit_rows(pggpu_data *ds, pggpu_error *err);

/*
 * x (d values, stride apart) scaled to Euclidean norm 1, with the roundings
 * of pggpu_data_unit_rows and of the cosine centroids: |x| = m sqrt(sum
 * (x_j / m)^2) (m = max |x_j|), then x_j (1 / |x|); false, x untouched,
 * when it is zero.
 */
bool		pggpu_unit_row(double *x, int64_t stride, int d);

/*
 * m rows (row-major, m x d) pushed into ds, a batch at a time: row order[t]
 * of rows the t-th (order NULL: in order), weighing w[order[t]] (w NULL:
 * unweighted; else the set is weighted, pggpu_data_batch_weights).  Into a
 * FLOAT32 set each value is rounded to float, into a FLOAT16 one to a half
 * (exact for the values such a set is for).
 */
pggpu_status pggpu_data_push_rows(pggpu_data *ds, const double *rows, const double *w, const int64_t *order,
								  int64_t m, pggpu_error *err);

/*
 * Row weights (scikit-learn's sample_weight): row i weighs w_i >= 0
 * (finite).  A fit of a weighted set draws its seeds with probability
 * proportional to w_i (times D_i^2), moves each centroid to the weighted
 * mean of its rows (a cluster whose rows all weigh 0 keeps its centroid),
 * and sums w_i d_i^2 for its inertia; its sizes still count rows.  With
 * every weight 1 it is the unweighted fit, bit for bit.
 *
 * pggpu_data_batch_weights: the weights of the next push's rows (row r's
 * at [r], batch_rows of them); asking makes the set weighted, the rows
 * pushed before weighing 1.  NULL: out of host memory.  A push with a
 * negative, NaN or infinite weight fails (PGGPU_ERR_INVALID), its rows not
 * taken.
 * pggpu_data_set_weights: every row's weight at once (n values; NULL: the
 * set unweighted again), the same checks.
 * pggpu_data_weights: the rows' weights (NULL: unweighted), valid until
 * the next push.
 */
double	   *pggpu_data_batch_weights(pggpu_data *ds);
pggpu_status pggpu_data_set_weights(pggpu_data *ds, const double *w, pggpu_error *err);
const double *pggpu_data_weights(const pggpu_data *ds);

/*
 * Seconds spent in pggpu_data_push so far: on the GPU, waiting for the
 * host-to-device copies that the filling of the other buffer did not hide.
 */
double		pggpu_data_push_seconds(const pggpu_data *ds);

/* rows pushed so far */
int64_t		pggpu_data_rows(const pggpu_data *ds);
int			pggpu_data_cols(const pggpu_data *ds);
pggpu_backend pggpu_data_backend(const pggpu_data *ds);

/* "cpu", or the GPU's name */
const char *pggpu_data_device_name(const pggpu_data *ds);

/*
 * Parking: the rows out of device memory into pinned host memory (copied
 * only when they changed since the last time), the k-means state kept;
 * every call that needs the rows brings them back first (unpark).  So a
 * relation larger than the GPU's memory can be held as several parts of
 * which one at a time is on the GPU (pggpu_kmeans_parts parks each part
 * again after its step when it found it parked).  No-ops on the CPU.
 * Pushing to a parked set is an error.
 */
pggpu_status pggpu_data_park(pggpu_data *ds, pggpu_error *err);
pggpu_status pggpu_data_unpark(pggpu_data *ds, pggpu_error *err);
bool		pggpu_data_parked(const pggpu_data *ds);

/* Frees everything the set holds (device, pinned and host memory).  NULL ok. */
void		pggpu_data_close(pggpu_data *ds);

/* ---- k-means ------------------------------------------------------------ */

typedef enum pggpu_init
{
	PGGPU_INIT_KMEANSPP = 0,	/* k-means++ seeding, seeded */
	PGGPU_INIT_RANDOM,			/* k distinct rows, seeded */
	PGGPU_INIT_GIVEN,			/* init_centroids */
	PGGPU_INIT_PARALLEL			/* k-means|| (scalable k-means++), seeded: see seed.c */
} pggpu_init;

/*
 * The algorithm of a fit (fit.c, hier.c).  HIERARCHICAL: k-means of the
 * rows into about sqrt(k) groups, then of each group's rows into its share
 * of k (the same metric, seeding and settings), every row then labelled by
 * its nearest of the k centroids; it costs about N sqrt(k) an iteration
 * where Lloyd costs N k, and it is not Lloyd's fixed point.
 */
typedef enum pggpu_algorithm
{
	PGGPU_ALGORITHM_LLOYD = 0,
	PGGPU_ALGORITHM_HIERARCHICAL
} pggpu_algorithm;

/*
 * Called between iterations and seeding steps, and inside the backends'
 * passes at least every pggpu_data_set_poll_work's work; may longjmp (PostgreSQL's CHECK_FOR_INTERRUPTS): the
 * data set stays valid for pggpu_data_close.  Always on the calling thread.
 */
typedef void (*pggpu_interrupt_fn) (void *arg);

/* whether an interrupt is pending, without acting on it (InterruptPending) */
typedef bool (*pggpu_pending_fn) (void);

#define PGGPU_MAX_THREADS 64

/*
 * Threads for the CPU backend's passes over the rows (1 by default; clamped
 * to 1 .. PGGPU_MAX_THREADS; the GPU backend ignores it), from the next
 * k-means call or assignment on.  The other threads never call back: the
 * calling thread polls pending() and, when it says so, stops them and runs
 * the interrupt callback alone.  Without pending, a call that has a callback
 * runs on one thread.  Results do not depend on the number of threads.
 */
void		pggpu_data_set_threads(pggpu_data *ds, int threads, pggpu_pending_fn pending);

/*
 * The interrupt callback of pggpu_assign on this set (pggpu_kmeans takes its
 * own from its params; NULL there keeps this one).  NULL: none (default).
 */
void		pggpu_data_set_interrupts(pggpu_data *ds, pggpu_interrupt_fn fn, void *arg);

/*
 * The most work a backend does between two calls of the interrupt callback,
 * in squared differences (x_j - c_j)^2 (0: the backend's own, a few
 * milliseconds on the CPU, a few tenths of a second on the GPU, whose
 * passes are cut into launches over ranges of rows); results do not depend
 * on it.  Tests set it small to run the cut passes on small data.
 */
PGGPU_TEST_HOOK void pggpu_data_set_poll_work(pggpu_data *ds, double work);

/*
 * Tests: the GPU's labelling pass forced to one route (route.h: 1 lloyd,
 * 2 tc_scan, 3 tc_resident, 4 gemm; 0: the planner's choice) where it can run, and
 * no_fuse: tc_resident labels only, the update apart.  Results do not
 * depend on it.
 */
PGGPU_TEST_HOOK void pggpu_data_force_route(pggpu_data *ds, int label, bool no_fuse);
/* the GPU's k-means++ steps by a warp a block of the draw (pp_step_kernel), as on sets of millions of rows */
PGGPU_TEST_HOOK void pggpu_data_force_pp_warps(pggpu_data *ds, bool warps);

/*
 * The GPU's plan of the last k-means or assignment on ds, in one line
 * (which kernels labelled and summed, their shapes, and why), or "" (CPU)
 */
const char *pggpu_data_route(const pggpu_data *ds);

/*
 * For the choice of how many GPUs a k-means call uses (route.c, beside the
 * planner whose routes they price): a step's estimated ms on one GPU, of
 * rows (d columns, k clusters; k 0: a labelling pass), with double_only
 * as pggpu_data_set_double_only; and what a step over several GPUs' shares
 * costs beyond the shares' own steps (the k x d centroids and sums through
 * the host, and the update there).  Both fitted to H200s' measured steps.
 */
double		pggpu_estimate_step_ms(double rows, int d, int k, bool double_only);
double		pggpu_estimate_combine_ms(int k, int d);

/*
 * How rows are compared.  COSINE is spherical k-means: the caller gives rows
 * of unit length (it normalises them as it reads them and leaves out the
 * zero ones); centroids are kept at unit length (the normalised means, and
 * given centroids normalised), so the squared distance is 2 (1 - cos): the
 * inertia and assignment distances reported are the cosine distances 1 - cos.
 */
typedef enum pggpu_metric
{
	PGGPU_METRIC_EUCLIDEAN = 0,
	PGGPU_METRIC_COSINE,
	PGGPU_METRIC_INNER_PRODUCT	/* nearest neighbours only (pggpu_knn) */
} pggpu_metric;

/* the metric of the next k-means or assignment on ds (default EUCLIDEAN) */
void		pggpu_data_set_metric(pggpu_data *ds, pggpu_metric metric);

/*
 * double_only: the GPU's product for d > 32 runs in float64, not TF32
 * (default false).  The answers are the same either way (the TF32 route
 * measures every row it cannot certify in float64); this is for timing and
 * for users who want no reduced-precision arithmetic at all.
 */
void		pggpu_data_set_double_only(pggpu_data *ds, bool double_only);

typedef struct pggpu_kmeans_params
{
	int			k;
	int			max_iter;		/* >= 1 */
	double		tol;			/* stop when changed rows <= tol * n */
	pggpu_init	init;
	uint64_t	seed;
	const double *init_centroids;	/* k x d, row-major, for INIT_GIVEN */
	int			n_init;			/* starts (seeds from seed), the least inertia kept; 0 or 1: one */
	pggpu_algorithm algorithm;	/* (zero: Lloyd) */
	pggpu_interrupt_fn check_interrupts;	/* may be NULL */
	void	   *interrupt_arg;
	/*
	 * May be NULL: how far the fit is, on the calling thread, as start s
	 * (0-based, of n_init) begins seeding (iteration 0) and after each of
	 * its iterations.  It must not longjmp.
	 */
	void		(*progress) (void *arg, int start, int iteration);
	void	   *progress_arg;
} pggpu_kmeans_params;

typedef struct pggpu_kmeans_result
{
	double	   *centroids;		/* in: caller's k x d buffer, row-major */
	int64_t    *sizes;			/* in: caller's k buffer */
	int32_t    *labels;			/* in: caller's n buffer, or NULL (fit only) */
	double		inertia;		/* sum of squared distances to own centroid */
	int			iterations;		/* of the start kept (n_init); hierarchical: the most of its fits' */
	bool		converged;		/* of the start kept; hierarchical: all its fits */
	int64_t		changed;		/* out: rows whose label changed in the last iteration (of the start kept; hierarchical: of its fits, added) */
	int			groups;			/* out: hierarchical's groups (its first fit's k), else 0 */
	int64_t		trained;		/* out: hierarchical's rows its fits ran on, else 0 */
	double		seed_seconds;	/* out: choosing the initial centroids (all starts) */
	double		iterate_seconds;	/* out: the Lloyd iterations (all starts; not the final passes) */
} pggpu_kmeans_result;

/*
 * Lloyd's k-means over all rows of ds.  Labels are 0..k-1.  Unless the
 * centroids were given, clusters are numbered canonically: sorted by their
 * centroids, lexicographically (ties by size, larger first).  ds may be
 * used again (another fit, an assignment): each gives what it would alone.
 */
pggpu_status pggpu_kmeans(pggpu_data *ds, const pggpu_kmeans_params *p,
						  pggpu_kmeans_result *r, pggpu_error *err);

/*
 * Nearest centroid (0-based, lowest index on ties) and the Euclidean distance
 * to it (cosine: the cosine distance, the centroids normalised first) for
 * every row of ds.  centroids is k x d row-major.  distances may be
 * NULL.  ds may be used again, as after pggpu_kmeans.
 */
pggpu_status pggpu_assign(pggpu_data *ds, const double *centroids, int k,
						  int32_t *labels, double *distances,
						  pggpu_error *err);

/*
 * The transform: for the m rows first .. first + m - 1 of ds, each row's n
 * (1 <= n <= k) nearest of the k centroids (row-major) by pggpu_assign's
 * distance, nearest first, the lower index on ties: row first + i's r-th
 * at clusters[i n + r] (0-based) and distances[i n + r] (each m n long).
 * With n = 1, pggpu_assign's labels and distances.  ds may be used again.
 */
pggpu_status pggpu_transform(pggpu_data *ds, const double *centroids, int k, int n, int64_t first,
							 int64_t m, int32_t *clusters, double *distances, pggpu_error *err);

/*
 * Standard scaling (columns.c): each column's mean and standard deviation
 * (population, as scikit-learn's StandardScaler; a constant column gets 1)
 * over the rows of ds, into mean and std (d each, in the units pushed), and
 * every row replaced by (x - mean) / std.  The same on both backends.
 * PGGPU_ERR_RANGE when a mean or deviation overflows.
 */
pggpu_status pggpu_data_standardize(pggpu_data *ds, double *mean, double *std,
									pggpu_error *err);
/* the same over the union of several data sets' rows (parts; parked ones parked again) */
pggpu_status pggpu_data_standardize_parts(pggpu_data *const *parts, int nparts, double *mean,
										  double *std, pggpu_error *err);

/* every row replaced by (x - mean) / std with a stored model's scaling */
pggpu_status pggpu_data_shift_scale(pggpu_data *ds, const double *mean, const double *std,
									pggpu_error *err);

/*
 * Rows rows[0..m-1] (data-set order) into out, m x d row-major, as the
 * algorithms see them (scaled, unit length for cosine).  The k-means state
 * is left as it was.
 */
pggpu_status pggpu_data_get_rows(pggpu_data *ds, const int64_t *rows, int m, double *out,
								 pggpu_error *err);

/*
 * The nearest of the k centroids C (k x d row-major) to x, the lowest index
 * on ties, and the squared Euclidean distance to it (dist2 may be NULL):
 * the squares summed over the columns in order, as the CPU backend's pass.
 */
int			pggpu_nearest(const double *x, const double *C, int k, int d, double *dist2);

/* the k rows of C (k x d) scaled to unit length as the assignment's cosine does */
void		pggpu_unit_rows(double *C, int k, int d);

/*
 * The power-of-two scale every fit and assignment computes at (compute.c):
 * pggpu_magnitudes widens [*lo, *hi] (start: INFINITY, 0) to the non-zero
 * magnitudes of x; pggpu_scale_exponent gives the exponent e for them, 0
 * where they lie within [2^-500, 2^501) already (results bit-identical to
 * unscaled), so that 2^e x keeps its squares and their sums normal doubles
 * (values near 1e154 and up overflow when squared, near 1e-162 and down
 * underflow); PGGPU_ERR_RANGE where they span more than 2^1001.  For the
 * host's own arithmetic on a model's centroids (gpu_kmeans_predict).
 */
void		pggpu_magnitudes(const double *x, int64_t n, double *lo, double *hi);
pggpu_status pggpu_scale_exponent(double lo, double hi, int *e, pggpu_error *err);

/* whether row i is in the sample of rate p (0..1] drawn by seed (a counter hash) */
bool		pggpu_sampled(uint64_t seed, int64_t i, double p);

/*
 * The mean silhouette of m rows X (m x d, from pggpu_data_get_rows of ds)
 * labelled 0..k-1, as scikit-learn's silhouette_score on them (Euclidean;
 * cosine: 1 - cos), O(m^2 d); NaN when they hold fewer than two clusters.
 * Euclidean: X is first scaled in place by the power of two a fit would
 * scale them by (pggpu_scale_exponent), so that the silhouette, a ratio of
 * distances, is the same for data of any magnitude (bit-identical where
 * the data need no scaling).  Polls ds's interrupt callback.
 */
pggpu_status pggpu_silhouette(pggpu_data *ds, double *X, const int32_t *labels, int m,
							  int k, double *score, pggpu_error *err);

/*
 * A data set's scratch memory: malloc, freed by pggpu_scratch_free_all or
 * when the set closes, also after a longjmp out of a callback (NULL: out of
 * memory or of its 12 slots).  A source's sample hands its rows over in it.
 */
void	   *pggpu_scratch_alloc(pggpu_data *ds, size_t bytes);
void	   *pggpu_scratch_realloc(pggpu_data *ds, void *old, size_t bytes);
void		pggpu_scratch_free(pggpu_data *ds, void *p);
void		pggpu_scratch_free_all(pggpu_data *ds);

/*
 * A source of rows for k-means (fit.c): one data set, the parts of one
 * relation held apart (chunks streamed through one GPU, several GPUs), or
 * the nodes of a cluster, each holding its rows.  A fit sees them only
 * through these calls.  "Fit units" are 2^e times the caller's units (e
 * from range where the source has it, else from given centroids); squared
 * distances are in 2^2e times the caller's.
 *
 * range (may be NULL): the least and largest non-zero |value| of every row.
 *
 * step: every row labelled by the k centroids, C (fit units) where given,
 * else those the source holds (its last update's or its last C): the
 * labelling's clusters without rows (*empty), counts (NULL: not wanted),
 * inertia (cosine: 2 (1 - cos); NULL: not wanted, and the rows' distances
 * may then be measured only when farthest reads them) and the rows whose
 * label changed since the last step (begin: a new fit, all of them); labels
 * (NULL: not wanted) in row order.  With update, the source then holds
 * each cluster's mean of its rows (the old centroid where it has none;
 * cosine: scaled to norm 2^e, pggpu_centroids_update), so an iteration
 * moves no centroids between the driver and one holder.
 *
 * centroids: the k centroids the source holds, into C; counts: the last
 * step's counts.
 *
 * sample: the rows whose content key (compute_internal.h's pggpu_row_key)
 * pggpu_sampled(seed, key, rate) picks, in the caller's units, in any
 * order: *m of them (m x d, row-major) in *rows, the home's scratch memory
 * (pggpu_scratch_realloc of *rows, which may be NULL); their keys in *keys
 * likewise where the source has them at hand (else *keys stays NULL and
 * the driver computes them); their weights in *weights likewise where the
 * rows are weighted (else it stays NULL).
 *
 * sample_set (may be NULL): the rows sample would give, in the seeding
 * set's order (by key, then value), put into set (open, empty, on the
 * home's backend) in the caller's units without the host, *m of them;
 * PGGPU_ERR_INVALID where the source cannot (its rows on another GPU,
 * parked, in several parts): the driver then uses sample.
 *
 * farthest: the m rows farthest from their centroids in the last step
 * (distance > 0; ties: the least key), best first: their values (fit units),
 * squared distances and keys; *got of them (fewer where fewer qualify).
 *
 * home gives d and the metric, and holds the fit's host memory (freed when
 * it closes, also after a longjmp out of a callback or an interrupt).
 */
typedef struct pggpu_kmeans_source
{
	pggpu_data *home;
	int64_t		n;				/* rows in all */
	pggpu_status (*range) (void *arg, double *lo, double *hi, pggpu_error *err);
	pggpu_status (*step) (void *arg, const double *C, int k, int e, bool begin, bool update,
						  int64_t *empty, int64_t *counts, double *inertia, int64_t *changed,
						  int32_t *labels, pggpu_error *err);
	pggpu_status (*centroids) (void *arg, double *C, pggpu_error *err);
	pggpu_status (*counts) (void *arg, int64_t *counts, pggpu_error *err);
	pggpu_status (*sample) (void *arg, uint64_t seed, double rate, double **rows, uint64_t **keys,
							double **weights, int64_t *m, pggpu_error *err);
	pggpu_status (*sample_set) (void *arg, uint64_t seed, double rate, pggpu_data *set, int64_t *m,
								pggpu_error *err);
	pggpu_status (*farthest) (void *arg, int m, int e, double *rows, double *dist2, uint64_t *keys,
							  int *got, pggpu_error *err);
	void	   *arg;
} pggpu_kmeans_source;

/*
 * k-means over a source's rows: the one driver (fit.c), which pggpu_kmeans
 * and pggpu_kmeans_parts run too.  The same arguments and seed give the
 * same fit for the same rows however they are held or ordered: labels,
 * sizes and iterations alike, centroids and inertia to within the rounding
 * of adding the holders' sums in another order.
 */
pggpu_status pggpu_kmeans_over(const pggpu_kmeans_source *src, const pggpu_kmeans_params *p,
							   pggpu_kmeans_result *r, pggpu_error *err);

/*
 * pggpu_kmeans_over the union of the rows of nparts data sets (the same d
 * and metric; each on its own backend or GPU), labels in part order.  The
 * parts' interrupt callbacks and threads are theirs.
 */
pggpu_status pggpu_kmeans_parts(pggpu_data *const *parts, int nparts,
								const pggpu_kmeans_params *p, pggpu_kmeans_result *r,
								pggpu_error *err);

/*
 * A source's calls on local parts (a cluster's node answers with them for
 * its rows): a step over every part at 2^e times the rows as pushed, with
 * sums (NULL: labels only) and mass (NULL: not wanted) added in part order, inertia as a source's step
 * has it (NULL: not wanted) (a part found parked is
 * parked again after its share); the sample; the farthest rows (at the
 * parts' last step's scale); the range.
 */
pggpu_status pggpu_parts_step(pggpu_data *const *parts, int nparts, const double *C, int k, int e,
							  bool begin, double *sums, int64_t *counts, double *mass, double *inertia,
							  int64_t *changed, int32_t *labels, pggpu_error *err);
pggpu_status pggpu_parts_sample(pggpu_data *const *parts, int nparts, uint64_t seed, double rate,
								double **rows, uint64_t **keys, double **weights, int64_t *m, pggpu_error *err);
pggpu_status pggpu_parts_farthest(pggpu_data *const *parts, int nparts, int m, double *rows,
								  double *d2, uint64_t *keys, int *got, pggpu_error *err);
pggpu_status pggpu_parts_range(pggpu_data *const *parts, int nparts, double *lo, double *hi,
							   pggpu_error *err);

/*
 * The farthest rows' running best, *got of at most m, in d2 (descending,
 * then keys ascending): the slot a candidate (dv, kv) takes, those after it
 * moved down one, each with its `size` bytes of extra (may be NULL), for
 * the caller to fill; -1 when it is not among the m best.
 */
int			pggpu_farthest_slot(double *d2, uint64_t *keys, void *extra, size_t size, int m, int *got,
								double dv, uint64_t kv);

/*
 * One part's share of a Lloyd iteration: its rows (held at 2^e times as
 * pushed) labelled by the k centroids C (fit units), with sums (else NULL)
 * each cluster's sum of its rows (fit units, 0 where none; weighted: of
 * w_i x_i), their counts and (mass, may be NULL) their weights' sums; the
 * labelling's inertia (NULL: not wanted) and the rows whose label
 * changed since the last call (begin: a new state, every row counts as
 * changed).
 */
pggpu_status pggpu_kmeans_partial(pggpu_data *ds, const double *C, int k, int e, bool begin,
								  double *sums, int64_t *counts, double *mass, double *inertia,
								  int64_t *changed, pggpu_error *err);

/*
 * A holder's update from sums (fit units): C[c] := sums[c] / mass[c] where
 * mass[c] > 0 (mass NULL: the counts; else C[c] stays); cosine: every row
 * of C scaled to norm 2^e.  (The one GPU's update computes the same on the
 * device.)
 */
void		pggpu_centroids_update(double *C, const double *sums, const int64_t *counts, const double *mass,
								   int k, int d, pggpu_metric metric, int e);


/* ---- a sample of rows, drawn by their content (sample.c) ----------------- */

/*
 * The m rows of least priority among those offered, the priority a hash of
 * a row's values and the seed (ties: by value): m rows drawn uniformly
 * without replacement (all of them where fewer are offered), the same rows
 * in the same order whatever order they come in.  Host memory: m x d
 * doubles at most, grown as rows are kept.  For one thread.
 */
typedef struct pggpu_sample pggpu_sample;

pggpu_status pggpu_sample_open(pggpu_sample **out, int d, int64_t m, uint64_t seed,
							   pggpu_error *err);
/*
 * The type the sample keeps its rows in (before the first offer; default
 * FLOAT64): FLOAT32 for float32 values (offered as doubles, kept in half the
 * memory; the same sample in the same order)
 */
pggpu_status pggpu_sample_set_dtype(pggpu_sample *s, pggpu_dtype dtype, pggpu_error *err);
/* n rows offered: value j of row r at x[j * stride + r] */
pggpu_status pggpu_sample_offer(pggpu_sample *s, const double *x, int64_t stride, int64_t n,
								pggpu_error *err);
/*
 * The same with the rows' priorities given (prio[r] of row r, from
 * pggpu_sample_priorities with the sample's seed: a reader's workers may
 * compute them beside the reading; that one is a plain function of its
 * arguments, for any thread or process).
 */
pggpu_status pggpu_sample_offer_prio(pggpu_sample *s, const double *x, int64_t stride, int64_t n,
									 const uint64_t *prio, pggpu_error *err);
void		pggpu_sample_priorities(uint64_t *prio, const double *x, int64_t stride, int64_t n,
									int d, uint64_t seed);
/* the same for n rows row-major (row r at x + r * d), their priorities given (else an error) */
pggpu_status pggpu_sample_offer_rows(pggpu_sample *s, const double *x, int64_t n,
									 const uint64_t *prio, pggpu_error *err);
/*
 * Weighted rows: the weights of the next offer's rows (row r's at w[r]; the
 * sample weighted from its first offer, rows offered without weighing 1),
 * each kept row's weight by its slot (pggpu_sample_weights: NULL where
 * unweighted).  A weight other than 1 is mixed into its row's priority
 * (pggpu_sample_weigh_priorities: given priorities must be weighed too), so
 * that rows of equal values and other weights are other rows; all weights
 * 1 draw the unweighted sample.
 */
pggpu_status pggpu_sample_weigh(pggpu_sample *s, const double *w, pggpu_error *err);
void		pggpu_sample_weigh_priorities(uint64_t *prio, const double *w, int64_t n);
const double *pggpu_sample_weights(const pggpu_sample *s);
/* rows offered so far */
int64_t		pggpu_sample_offered(const pggpu_sample *s);
/*
 * A callback polled while pggpu_sample_result sorts (a sample of 10^7 rows
 * takes seconds); it may longjmp: the sample stays valid for close
 */
void		pggpu_sample_set_interrupts(pggpu_sample *s, pggpu_interrupt_fn fn, void *arg);
/*
 * The sample, taken once the offers are over: its rows (row-major, d each,
 * doubles or floats as pggpu_sample_set_dtype said) and their order (row
 * order[t] is the t-th: least priority first); returns how many (-1: out of
 * host memory).  Valid until close.
 */
int64_t		pggpu_sample_result(pggpu_sample *s, const void **rows, const int64_t **order);
void		pggpu_sample_close(pggpu_sample *s);

/* ---- matrix products ---------------------------------------------------- */

/*
 * A workspace for matrix products on one backend: three host buffers (pinned
 * on the GPU backend, so copies to and from the device run asynchronously),
 * and on the GPU its device buffers, streams and cuBLAS handle, all reused by
 * later products in the same workspace.
 */
typedef struct pggpu_matmul pggpu_matmul;

pggpu_status pggpu_matmul_open(pggpu_matmul **out, pggpu_backend backend,
							   int gpu_index, pggpu_error *err);

/* the host buffers */
#define PGGPU_MM_A 0
#define PGGPU_MM_B 1
#define PGGPU_MM_C 2

/*
 * Host buffer `which` with room for at least `bytes`; when it has to grow,
 * the first `keep` bytes of its contents are kept.  NULL (err set) when
 * memory runs out.  Valid until the next call for the same buffer or close.
 */
void	   *pggpu_matmul_buffer(pggpu_matmul *mm, int which, size_t bytes,
								size_t keep, pggpu_error *err);

typedef struct pggpu_matmul_params
{
	pggpu_dtype dtype;
	int64_t		m;				/* rows of A and C */
	int64_t		n;				/* columns of B and C */
	int64_t		k;				/* columns of A, rows of B */
	bool		allow_tf32;		/* float32 on the GPU: TF32 tensor cores */
	int64_t		gpu_memory;		/* most GPU bytes for operands; 0: what is free */
	pggpu_interrupt_fn check_interrupts;	/* may be NULL; may longjmp */
	void	   *interrupt_arg;
	/*
	 * pggpu_matmul_run_split: whether an interrupt is pending, polled while
	 * the GPUs' threads run (NULL with check_interrupts: one after another)
	 */
	pggpu_pending_fn pending;
} pggpu_matmul_params;

typedef struct pggpu_matmul_info
{
	int64_t		products;		/* BLAS calls made */
	int64_t		mb, nb, kb;		/* the blocks of m, n and k they worked on */
} pggpu_matmul_info;

/*
 * C := A B, all row-major and dense: A is m x k, B is k x n, C is m x n, of
 * p->dtype.  On the GPU (cuBLAS) the product is cut into blocks that stream
 * through the device with copies overlapping the arithmetic, so operands
 * larger than GPU memory work; on the CPU it is OpenBLAS, in row blocks.
 * Interrupts are checked between blocks; after a longjmp the workspace is
 * still valid for pggpu_matmul_close.  info may be NULL.
 */
pggpu_status pggpu_matmul_run(pggpu_matmul *mm, const pggpu_matmul_params *p,
							  const void *a, const void *b, void *c,
							  pggpu_matmul_info *info, pggpu_error *err);

/*
 * pggpu_matmul_run over n workspaces (several GPUs, or parts of one), A's
 * rows split between them in n contiguous shares, all at once (a thread a
 * workspace on the GPU, one after another on the CPU).  a, b and c may be
 * any one workspace's buffers.  An error names the GPU that failed, when
 * they are several; the first (in workspace order) is reported, after all
 * have stopped.
 */
pggpu_status pggpu_matmul_run_split(pggpu_matmul *const *mms, int n, const pggpu_matmul_params *p,
									const void *a, const void *b, void *c,
									pggpu_matmul_info *info, pggpu_error *err);

/*
 * Pinned host memory is slow to allocate, so buffers freed by closed
 * workspaces are kept for later ones in this process, up to this many bytes
 * (default 512 MB; 0 frees them at once).  Lowering the limit frees at once.
 */
void		pggpu_pinned_cache_limit(size_t bytes);
size_t		pggpu_pinned_cache_bytes(void);

/*
 * Pins [p, p + bytes) (whole pages) for the GPUs' copies, so that a device
 * copies out of it directly (the slots of a parallel read that the workers
 * fill, in shared memory): false where there is no GPU or the driver
 * refuses, the memory then used as it is.  Unpinned before it is unmapped.
 */
bool		pggpu_host_register(void *p, size_t bytes);
void		pggpu_host_unregister(void *p);

pggpu_backend pggpu_matmul_backend(const pggpu_matmul *mm);
const char *pggpu_matmul_device_name(const pggpu_matmul *mm);

/*
 * Frees the device side and every host buffer but `which`, which stays
 * valid until close (for reading a result out after the product).
 */
void		pggpu_matmul_keep_only(pggpu_matmul *mm, int which);

/* Waits for the device, then frees everything.  NULL ok. */
void		pggpu_matmul_close(pggpu_matmul *mm);

/* ---- nearest neighbours (gpu_knn) ---- */

typedef struct pggpu_knn pggpu_knn;

/* how a tile's pairs are measured (the tests force one; AUTO: as the backend chooses) */
typedef enum pggpu_knn_route
{
	PGGPU_KNN_AUTO = 0,
	PGGPU_KNN_PLAIN,			/* every pair by the plain loop */
	PGGPU_KNN_PRODUCT			/* a float32 product proposes, the plain loop measures the uncertain */
} pggpu_knn_route;

/*
 * The nearest rows of a base, given a tile of rows at a time, for each of
 * nq queries (Q: row-major, nq x d doubles, copied: held until close).
 * Distances by metric: EUCLIDEAN and COSINE (the caller's rows of unit
 * length) the squared distance, INNER_PRODUCT the negative inner product,
 * each as the plain loop computes it: columns in order, each term rounded,
 * never fused, the same on every backend.  Exact whatever the route: where
 * a float32 product proposes (|q - b|^2 = |q'|^2 + |b'|^2 - 2 q'.b' on
 * copies centred on the queries' mean), a rigorous bound on its error
 * picks the rows that could be among a query's nearest and the plain loop
 * measures them.
 */
pggpu_status pggpu_knn_open(pggpu_knn **out, pggpu_backend backend, int gpu_index, int d,
							pggpu_metric metric, const double *Q, int64_t nq, int n,
							pggpu_error *err);
/* called between blocks of a tile's work (as pggpu_data_set_interrupts') */
void		pggpu_knn_set_interrupts(pggpu_knn *kn, pggpu_interrupt_fn fn, void *arg);
/* the CPU backend's threads for its products (OpenBLAS's; 1 by default) */
void		pggpu_knn_set_threads(pggpu_knn *kn, int threads);
/* a test's forcing of the route of the sets opened after (AUTO: none; a product the backend cannot take runs plain) */
void		pggpu_knn_force_route(pggpu_knn_route route);
/* a test's forcing: the GPU holds at most this many queries at once, the rest in the host's memory (0: none) */
void		pggpu_knn_force_resident(int64_t queries);
/*
 * Begins a tile of up to `rows` rows of B, doubles or (f32) floats (the
 * rows' own precision: half the bytes to copy; the distances are the same
 * plain loop on their values), filled by pggpu_knn_put, then
 * pggpu_knn_start.  Two tiles alternate, so that one fills while the other
 * is compared; on the GPU the rows go straight to the device's memory.
 */
pggpu_status pggpu_knn_fill(pggpu_knn *kn, int64_t rows, bool f32, pggpu_error *err);
/*
 * n rows into the tile being filled, from its row `at`, of the tile's type:
 * by columns, value j of row r at v[j * pitch + r] (as the parts of a read
 * hold them), or (by_rows) at v[r * pitch + j].  pinned: v lies in memory
 * pinned for the GPUs (pggpu_host_register), which a device copies
 * directly; else the rows pass through a pinned buffer of the handle's.
 * Rows put by rows are turned on the device.  Returns once v may be reused.
 */
pggpu_status pggpu_knn_put(pggpu_knn *kn, int64_t at, const void *v, int64_t pitch, int64_t n, bool by_rows,
						   bool pinned, pggpu_error *err);
/*
 * Starts comparing the first nb rows of the tile filled with every query;
 * on the GPU it returns once the work is queued.  rank: NULL, or each row's
 * place in the caller's order (a permutation of 0..nb-1: ties go to the
 * lower rank, and the results name rows by it).  bound: NULL, or for each
 * query a distance (as above) that a row must not exceed to matter (the
 * caller's n-th nearest so far): a row beyond it may be left out of that
 * query's results.  A tile at a time: the one started is finished first.
 */
pggpu_status pggpu_knn_start(pggpu_knn *kn, int64_t nb, const int32_t *rank, const double *bound,
							 pggpu_error *err);
/* whether a tile is started and not yet finished */
bool		pggpu_knn_busy(const pggpu_knn *kn);
/*
 * The started tile's results (waiting for the device, interrupts polled):
 * for every query its n nearest of the tile's rows by (distance, rank), the
 * least first: the row's rank idx[i * n + r] (-1 past the rows, or past the
 * rows within the bound) and its distance dist[i * n + r].
 */
pggpu_status pggpu_knn_finish(pggpu_knn *kn, int64_t *idx, double *dist, pggpu_error *err);
/* pggpu_knn_fill, the nb rows of B (row-major doubles; f32: rounded to floats) put, start and finish */
pggpu_status pggpu_knn_tile(pggpu_knn *kn, const double *B, int64_t nb, bool f32, const int32_t *rank,
							const double *bound, int64_t *idx, double *dist, pggpu_error *err);
/* the route the tiles take, and the pairs compared and measured by the plain loop so far */
pggpu_knn_route pggpu_knn_route_taken(const pggpu_knn *kn);
void		pggpu_knn_counts(const pggpu_knn *kn, int64_t *pairs, int64_t *measured);
/* "cpu", or the GPU's name */
const char *pggpu_knn_device_name(const pggpu_knn *kn);
/* waits for the device (a started tile stopped early), then frees everything (NULL ok) */
void		pggpu_knn_close(pggpu_knn *kn);

#ifdef __cplusplus
}
#endif

#endif							/* PG_GPU_COMPUTE_H */
