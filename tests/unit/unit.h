/*
 * unit.h - what the unit tests of the compute layer (the files of
 * tests/unit, built into tests/unit/unit_compute) share: bookkeeping, data sets,
 * k-means runs and the naive reference, comparisons (common.c), the types
 * and helpers one subject lends another, and each subject's entry.
 */
#ifndef PG_GPU_UNIT_H
#define PG_GPU_UNIT_H

#include "pg_gpu_compute.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* check_at with the caller's line */
#define CHECK(ok, ...) check_at((ok), __LINE__, __VA_ARGS__)

/* the shape grid's initialisations (kmeans.c; the kernel grid's too) */
#define I_GIVEN 1
#define I_PP    2
#define I_RAND  4
#define I_PAR   8			/* k-means|| */
#define I_ALL   15

/* matrix products' element types (matmul.c; the kernel grid's too) */
#define F64 PGGPU_FLOAT64
#define F32 PGGPU_FLOAT32

typedef struct rng
{
	uint64_t	s;
	bool		have_spare;
	double		spare;
} rng;

typedef struct dataset
{
	int64_t		n;
	int			d;
	double	   *X;				/* n x d, row-major */
	int32_t    *group;			/* generating blob/point of each row, or NULL */
	int			ngroups;
} dataset;

typedef struct km_out
{
	pggpu_status st;
	double	   *C;				/* k x d */
	int64_t    *sizes;
	int32_t    *labels;
	double		inertia;
	int			iters;
	bool		conv;
} km_out;

typedef void (*range_fn) (void *arg, int64_t lo, int64_t hi);

typedef struct range_task
{
	range_fn	fn;
	void	   *arg;
	int64_t		lo,
				hi;
} range_task;

typedef struct nearest_job
{
	const dataset *D;
	const double *C;
	int			k;
	int32_t    *lab;
	double	   *best;			/* or NULL */
} nearest_job;

typedef enum data_kind
{
	DATA_BLOBS,					/* param blobs (0: k), sep apart */
	DATA_UNIFORM,				/* uniform in [-10, 10) */
	DATA_SAME,					/* all rows identical: value * (1..d) */
	DATA_FEW,					/* param distinct integer points */
	DATA_FAR					/* blobs + param given centroids far from all rows */
} data_kind;

typedef enum grid_mode
{
	MODE_CI,					/* always */
	MODE_FULL_GPU				/* --full: GPU only (too slow for the CPU) */
} grid_mode;

typedef struct grid_case
{
	const char *name;
	int64_t		n;
	int			d;
	int			k;
	data_kind	kind;
	int			param;
	double		value;			/* blobs: sep (0: 20); same: the value (0: 1.5) */
	unsigned	inits;
	int			max_iter;
	int64_t		hint;			/* expected_rows; -1: exactly n */
	bool		no_cmp;			/* backends may legitimately differ: no GPU/CPU compare */
	grid_mode	mode;
} grid_case;

extern int	n_passed;
extern int	n_failed;
extern char case_name[200];
extern bool full_grid;	/* --full */
extern bool verbose;	/* --verbose: a line per k-means run */
extern bool have_gpu;
extern int	unit_gpus;		/* GPUs CUDA sees (0: none) */
extern char no_gpu_why[600];
extern int	gpu_skipped;	/* GPU cases not run for want of a GPU */
extern __thread bool in_worker;	/* a kernel-grid worker thread: no CHECK, no output */
extern int	interrupt_calls;
extern int	interrupt_jump_at;	/* longjmp on this call; 0: never */
extern void *interrupt_seen_arg;
extern jmp_buf interrupt_env;
extern bool small_grid;	/* --small: N <= 1000, float64 (for compute-sanitizer) */

/* common.c */
void set_case(const char *fmt,...);
bool check_at(bool ok, int line, const char *fmt,...);
void *xmalloc(size_t bytes);
double now_s(void);
const char *be_name(pggpu_backend be);
const char *init_name(pggpu_init init);
rng rng_make(uint64_t seed);
uint64_t rng_u64(rng *r);
double rng_unif(rng *r);
double rng_gauss(rng *r);
void data_free(dataset *D);
void data_alloc(dataset *D, int64_t n, int d, bool groups);
void gen_blobs(dataset *D, int64_t n, int d, int nb, double sep, uint64_t seed);
void gen_uniform(dataset *D, int64_t n, int d, double lo, double hi, uint64_t seed);
void gen_same(dataset *D, int64_t n, int d, double value);
void gen_few(dataset *D, int64_t n, int d, int m, uint64_t seed);
pggpu_data *load_quiet(pggpu_backend be, const dataset *D, int64_t hint, char *why, size_t whylen);
pggpu_data *load(pggpu_backend be, const dataset *D, int64_t hint);
/* how load_typed pushes D: its staging batches by columns or by rows, or pggpu_data_push_rows */
typedef enum load_how
{
	LOAD_COLUMNS,
	LOAD_BY_ROWS,
	LOAD_PUSH_ROWS
} load_how;

/* D (values of dtype) on be as dtype, pushed as how says */
pggpu_data *load_typed(pggpu_backend be, const dataset *D, pggpu_dtype dtype, load_how how);
pggpu_data *load_quiet_on(pggpu_backend be, int gpu, const dataset *D, int64_t hint, char *why, size_t whylen);
pggpu_data *load_on(pggpu_backend be, int gpu, const dataset *D, int64_t hint);
void km_alloc(km_out *o, int64_t n, int k, int d);
void km_free(km_out *o);
bool km_run_quiet(pggpu_backend be, const dataset *D, int64_t hint,
			 const pggpu_kmeans_params *p, km_out *o, char *why, size_t whylen);
bool km_run(pggpu_backend be, const dataset *D, int64_t hint,
	   const pggpu_kmeans_params *p, km_out *o);
double sqdist(const double *x, const double *c, int d);
int nearest(const double *x, const double *C, int k, int d, double *best_out);
int ncpu(void);
void *range_main(void *p);
void parallel_range(range_fn fn, void *arg, int64_t n, double work);
void nearest_range(void *arg, int64_t lo, int64_t hi);
void nearest_all(const dataset *D, const double *C, int k, int32_t *lab, double *best);
bool ref_lloyd(const dataset *D, int k, const double *init, int max_iter, double tol,
		  km_out *o);
bool rel_close(double a, double b, double tol);
void cmp_labels(const char *what, const int32_t *a, const int32_t *b, int64_t n);
void cmp_centroids(const char *what, const double *a, const double *b, int k, int d,
			  double tol);
void cmp_sizes(const char *what, const int64_t *a, const int64_t *b, int k);
void fit_set(pggpu_data *ds, const pggpu_kmeans_params *p, km_out *o, pggpu_error *err);
void cmp_km(const char *what, const km_out *a, const km_out *b, int64_t n, int k, int d,
	   double tol);
int lexcmp(const double *x, const double *y, int d);
void check_sane(const char *what, const dataset *D, int k, pggpu_init init, const km_out *o,
		   int64_t sample);
void check_blobs(const char *what, const dataset *D, int k, pggpu_init init, const km_out *o);
int64_t affordable_rows(int64_t n, int k, int d);

/* kmeans.c */
void make_data(const grid_case *gc, dataset *D);
double *make_init(const grid_case *gc, const dataset *D);
void test_grid(void);
void test_sample(void);
void test_dtype(void);
void test_reference(void);
void test_loading_on(pggpu_backend be);
void test_hint_independence(void);
void test_loading(void);
void test_assign(void);
void test_scaling(void);
void test_mixed_magnitudes(void);
void test_fit_only(void);
void test_standardize(void);
void test_silhouette(void);
void test_mm_split(void);
void test_parts(void);

/* errors.c */
void expect_error(pggpu_status st, const pggpu_error *err, pggpu_status want, const char *what);
void test_errors_on(pggpu_backend be);
void test_errors(void);

/* interrupts.c */
void on_interrupt(void *arg);
void test_interrupts_on(pggpu_backend be);
void test_interrupts_in_pass(void);
bool test_pending(void);
void test_threads(void);
void test_poll_by_work(void);
void test_poll_work_results(void);
void test_interrupts(void);

/* draw.c */
void test_draw(void);
void test_weighted_draw(void);
void test_pp_kernels(void);
void test_transform(void);
void test_hierarchical(void);
/* weights.c */
void test_sample_weights(void);
void test_cpu_gemm(void);
void test_n_init(void);
void test_reuse(void);
void cmp_exact(const char *what, const km_out *a, const km_out *b, int64_t n, int k, int d);

/* matmul.c */
pggpu_matmul *mm_open(pggpu_backend be);
bool mm_product(pggpu_matmul *mm, const pggpu_matmul_params *p, bool mixed, uint64_t seed,
		   pggpu_matmul_info *info);
pggpu_matmul_params mm_params(pggpu_dtype t, int64_t m, int64_t k, int64_t n, int64_t gpu_memory);
void mm_set_case(const char *what, pggpu_backend be, const pggpu_matmul_params *p);
void test_mm_products(void);
void test_mm_buffers(void);
void test_mm_reuse(void);
void test_mm_blocks(void);
void test_mm_nonfinite(void);
void test_mm_errors(void);
void test_mm_interrupts(void);
void test_mm_pinned_cache(void);

/* kernel_grid.c */
void test_kernel_grid(void);

/* cosine.c */
void test_cosine(void);
/* knn.c */
void test_knn(void);

/* routes.c */
void test_route_table(void);
void print_route_table(void);	/* --route-table: docs/routes.md's table */
void test_routes_gpu(void);

#endif							/* PG_GPU_UNIT_H */
