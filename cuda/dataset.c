/*
 * dataset.c - the compute layer's data sets, backend-independent: rows on
 * one device (open, push in batches, park in host memory and back, close),
 * their scratch memory, and what surrounds them (errors, the clock, the
 * GPUs' list).  The backends' own parts are cuda/cpu/ and cuda/gpu/dataset.cu;
 * the k-means driver that uses them is compute.c.
 */
#include "compute_internal.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* a monotonic clock, for the timings the API reports */
double
pggpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

pggpu_status
pggpu_fail(pggpu_error *err, pggpu_status code, const char *fmt,...)
{
	va_list		ap;

	if (err)
	{
		err->code = code;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return code;
}

bool
pggpu_cuda_built(void)
{
	return pggpu_gpu_ops != NULL;
}

int
pggpu_gpu_count(pggpu_error *err)
{
	if (pggpu_gpu_ops == NULL)
	{
		pggpu_fail(err, PGGPU_ERR_NO_GPU, "pg_gpu was built without CUDA");
		return 0;
	}
	return pggpu_gpu_count_impl(err);
}

int
pggpu_gpu_list(int *usable, int max, int *total, pggpu_error *err)
{
	if (pggpu_gpu_ops == NULL)
	{
		*total = 0;
		pggpu_fail(err, PGGPU_ERR_NO_GPU, "pg_gpu was built without CUDA");
		return 0;
	}
	return pggpu_gpu_list_impl(usable, max, total, err);
}

static void
start_job(void *arg, int i, pggpu_stop *stop)
{
	(void) stop;
	pggpu_gpu_start_impl(((const int *) arg)[i]);
}

void
pggpu_gpus_start(const int *gpus, int n)
{
	pggpu_stop	stop;

	if (pggpu_gpu_ops != NULL && n > 1)
		pggpu_run_together(start_job, (void *) gpus, n, NULL, &stop);
}

/* pggpu_gpus_warm's threads not yet done */
static atomic_int warming;

static void *
warm_main(void *arg)
{
	pggpu_gpu_start_impl((int) (intptr_t) arg);
	pggpu_blas_load();
	atomic_fetch_sub(&warming, 1);
	return NULL;
}

void
pggpu_gpus_warm(const int *gpus, int n)
{
	sigset_t	all,
				old;
	pthread_attr_t attr;

	if (pggpu_gpu_ops == NULL || n < 1 || pthread_attr_init(&attr) != 0)
		return;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (int i = 0; i < n; i++)
	{
		pthread_t	tid;

		atomic_fetch_add(&warming, 1);
		if (pthread_create(&tid, &attr, warm_main, (void *) (intptr_t) gpus[i]) != 0)
			atomic_fetch_sub(&warming, 1);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
}

void
pggpu_gpus_warmed(void)
{
	struct timespec ms = {0, 1000000};

	while (atomic_load(&warming) > 0)
		nanosleep(&ms, NULL);
}

pggpu_status
pggpu_gpu_info(int index, pggpu_device_info *out, pggpu_error *err)
{
	if (pggpu_gpu_ops == NULL)
		return pggpu_fail(err, PGGPU_ERR_NO_GPU, "pg_gpu was built without CUDA");
	return pggpu_gpu_info_impl(index, out, err);
}

/* ---- data sets ---------------------------------------------------------- */

/*
 * Batch (= tile) size: about 8 MB of doubles per staging buffer, shrunk to
 * the expected row count for small tables, never under 1024 rows.
 */
static int
choose_log_b(int d, int64_t expected_rows)
{
	int			lb_max = 10;
	int			lb_want = 20;

	while (lb_max < 20 && ((int64_t) 8 << (lb_max + 1)) * d <= ((int64_t) 8 << 20))
		lb_max++;
	if (expected_rows > 0)
	{
		lb_want = 12;
		while (lb_want < 20 && ((int64_t) 1 << lb_want) < expected_rows)
			lb_want++;
	}
	return lb_want < lb_max ? lb_want : lb_max;
}

static pggpu_status
data_open(pggpu_data **out, pggpu_backend backend, int gpu_index, int d, int64_t expected_rows, bool lazy,
		  pggpu_error *err)
{
	pggpu_data *ds;
	const pggpu_ops *ops;
	pggpu_status st;

	*out = NULL;
	if (d < 1)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "a data set needs at least one column");
	if (backend == PGGPU_BACKEND_GPU)
	{
		if (pggpu_gpu_ops == NULL)
			return pggpu_fail(err, PGGPU_ERR_NO_GPU, "pg_gpu was built without CUDA");
		ops = pggpu_gpu_ops;
	}
	else
		ops = &pggpu_cpu_ops;

	ds = (pggpu_data *) calloc(1, sizeof(pggpu_data));
	if (ds == NULL)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	ds->ops = ops;
	ds->backend = backend;
	ds->d = d;
	ds->gpu_index = gpu_index;
	ds->log_b = choose_log_b(d, expected_rows);
	ds->threads = 1;
	ds->lazy_stage = lazy;
	strcpy(ds->device_name, "cpu");
	st = ops->open(ds, gpu_index, expected_rows, err);
	if (st != PGGPU_OK)
	{
		ops->close(ds);
		free(ds);
		return st;
	}
	*out = ds;
	return PGGPU_OK;
}

pggpu_status
pggpu_data_open(pggpu_data **out, pggpu_backend backend, int gpu_index, int d,
				int64_t expected_rows, pggpu_error *err)
{
	return data_open(out, backend, gpu_index, d, expected_rows, false, err);
}

pggpu_status
pggpu_data_open_lazy(pggpu_data **out, pggpu_backend backend, int gpu_index, int d,
					 int64_t expected_rows, pggpu_error *err)
{
	return data_open(out, backend, gpu_index, d, expected_rows, true, err);
}

void
pggpu_data_set_threads(pggpu_data *ds, int threads, pggpu_pending_fn pending)
{
	ds->threads = threads < 1 ? 1 : threads > PGGPU_MAX_THREADS ? PGGPU_MAX_THREADS : threads;
	ds->pending = pending;
}

void
pggpu_data_set_poll_work(pggpu_data *ds, double work)
{
	ds->poll_work = work > 0 ? work : 0;
}

void
pggpu_data_set_metric(pggpu_data *ds, pggpu_metric metric)
{
	ds->metric = metric;
}

void
pggpu_data_set_double_only(pggpu_data *ds, bool double_only)
{
	ds->double_only = double_only;
}

void
pggpu_data_force_route(pggpu_data *ds, int label, bool no_fuse)
{
	ds->force.label = label >= PGGPU_LABEL_LLOYD && label <= PGGPU_LABEL_GEMM_F16 ?
		(pggpu_label_route) label : PGGPU_LABEL_AUTO;
	ds->force.no_fuse = no_fuse;
}

void
pggpu_data_force_pp_warps(pggpu_data *ds, bool warps)
{
	ds->force.pp_warps = warps;
}

const char *
pggpu_data_route(const pggpu_data *ds)
{
	return ds->route;
}

void
pggpu_data_set_interrupts(pggpu_data *ds, pggpu_interrupt_fn fn, void *arg)
{
	ds->interrupt = fn;
	ds->interrupt_arg = arg;
}

pggpu_status
pggpu_data_set_dtype(pggpu_data *ds, pggpu_dtype dtype, pggpu_error *err)
{
	if (dtype != PGGPU_FLOAT64 && dtype != PGGPU_FLOAT32 && dtype != PGGPU_FLOAT16)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "no such value type: %d", (int) dtype);
	if (ds->n > 0)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "the value type of a data set is set before its first push");
	if (pggpu_data_dtype(ds) == dtype)
		return PGGPU_OK;
	ds->f32 = dtype == PGGPU_FLOAT32;
	ds->f16 = dtype == PGGPU_FLOAT16;
	ds->wide_fed = false;
	/* (narrow_held is the backend's: what its memory holds now, which the op compares with f32) */
	return ds->ops->dtype ? ds->ops->dtype(ds, err) : PGGPU_OK;
}

pggpu_dtype
pggpu_data_dtype(const pggpu_data *ds)
{
	return ds->f16 ? PGGPU_FLOAT16 : ds->f32 ? PGGPU_FLOAT32 : PGGPU_FLOAT64;
}

int
pggpu_dtype_bytes(pggpu_dtype dtype)
{
	return dtype == PGGPU_FLOAT16 ? (int) sizeof(uint16_t) :
		dtype == PGGPU_FLOAT32 ? (int) sizeof(float) : (int) sizeof(double);
}

int
pggpu_dtype_held_bytes(pggpu_dtype dtype, int d)
{
	if (dtype == PGGPU_FLOAT16)
		return d > PGGPU_GPU_FLOAT_HALVES_D ? (int) sizeof(uint16_t) : (int) sizeof(float);
	return dtype == PGGPU_FLOAT64 ? (int) sizeof(double) : (int) sizeof(float);
}

double *
pggpu_data_batch(pggpu_data *ds)
{
	return ds->f32 || ds->f16 ? NULL : (double *) ds->ops->batch(ds);
}

float *
pggpu_data_batch_f32(pggpu_data *ds)
{
	return ds->f32 ? (float *) ds->ops->batch(ds) : NULL;
}

uint16_t *
pggpu_data_batch_f16(pggpu_data *ds)
{
	return ds->f16 ? (uint16_t *) ds->ops->batch(ds) : NULL;
}

int64_t
pggpu_data_batch_rows(const pggpu_data *ds)
{
	return (int64_t) 1 << ds->log_b;
}

/* room for n weights in ds->w; false: out of memory */
static bool
weights_room(pggpu_data *ds, int64_t n)
{
	int64_t		cap = ds->w_cap;
	double	   *w;

	if (n <= cap && ds->w)
		return true;
	while (cap < n)
		cap = cap ? 2 * cap : 1024;
	if ((w = (double *) realloc(ds->w, sizeof(double) * cap)) == NULL)
		return false;
	ds->w = w;
	ds->w_cap = cap;
	return true;
}

/* the first of w[0 .. n-1] that no row may weigh (negative, NaN, infinite), or -1 */
static int64_t
bad_weight(const double *w, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		if (!(w[i] >= 0) || isinf(w[i]))
			return i;
	return -1;
}

static pggpu_status
bad_weight_error(pggpu_error *err, const double *w, int64_t i)
{
	return pggpu_fail(err, PGGPU_ERR_INVALID, "row %lld weighs %g: a weight is finite and at least 0",
					  (long long) i, w[i]);
}

double *
pggpu_data_batch_weights(pggpu_data *ds)
{
	int64_t		b = pggpu_data_batch_rows(ds);

	if (ds->w_batch == NULL)
	{
		if (!weights_room(ds, ds->n > 0 ? ds->n : 1) ||
			(ds->w_batch = (double *) malloc(sizeof(double) * b)) == NULL)
			return NULL;
		for (int64_t i = 0; i < ds->n; i++)
			ds->w[i] = 1.0;
		for (int64_t r = 0; r < b; r++)
			ds->w_batch[r] = 1.0;
		ds->w_stale = true;
		ds->w_ones = true;
	}
	return ds->w_batch;
}

/*
 * (every weight 1: no weights, so that such a set fits as the unweighted
 * one on every backend, bit for bit, by the same routes)
 */
const double *
pggpu_data_weights(const pggpu_data *ds)
{
	return ds->w_batch && !ds->w_ones ? ds->w : NULL;
}

/* w[0 .. n-1] noted: whether the set's weights are all 1 still */
static void
weights_noted(pggpu_data *ds, const double *w, int64_t n)
{
	for (int64_t i = 0; i < n && ds->w_ones; i++)
		ds->w_ones = w[i] == 1.0;
	ds->w_stale = true;
}

pggpu_status
pggpu_data_set_weights(pggpu_data *ds, const double *w, pggpu_error *err)
{
	int64_t		bad;

	if (w == NULL)
	{
		free(ds->w), free(ds->w_batch);
		ds->w = ds->w_batch = NULL;
		ds->w_cap = 0;
		ds->w_stale = true;
		return PGGPU_OK;
	}
	if ((bad = bad_weight(w, ds->n)) >= 0)
		return bad_weight_error(err, w, bad);
	if (pggpu_data_batch_weights(ds) == NULL)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	memcpy(ds->w, w, sizeof(double) * ds->n);
	ds->w_ones = true;
	weights_noted(ds, w, ds->n);
	return PGGPU_OK;
}

pggpu_status
pggpu_weights_sync(pggpu_data *ds, pggpu_error *err)
{
	pggpu_status st;

	if (!ds->w_stale)
		return PGGPU_OK;
	if ((st = ds->ops->km_weights(ds, pggpu_data_weights(ds), err)) != PGGPU_OK)
		return st;
	ds->w_stale = false;
	return PGGPU_OK;
}

/* the weights of the rows just pushed (n0 .. ds->n - 1) from wb */
static pggpu_status
weights_take(pggpu_data *ds, int64_t n0, const double *wb, pggpu_error *err)
{
	if (!weights_room(ds, ds->n))
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory for the rows' weights");
	memcpy(ds->w + n0, wb, sizeof(double) * (ds->n - n0));
	weights_noted(ds, wb, ds->n - n0);
	return PGGPU_OK;
}

static pggpu_status
push(pggpu_data *ds, int64_t nrows, bool by_rows, pggpu_error *err)
{
	double		t0;
	int64_t		n0 = ds->n,
				bad;
	pggpu_status st;

	if (nrows <= 0 || nrows > pggpu_data_batch_rows(ds))
		return pggpu_fail(err, PGGPU_ERR_INVALID, "batch of %lld rows out of range",
						  (long long) nrows);
	if (ds->parked)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "no rows may be pushed to a parked data set");
	/*
	 * (the staging batch holds floats or halves, the set doubles now: they
	 * would be taken as doubles; but a set held wide from its first row
	 * widens the rows it takes by rows)
	 */
	if ((ds->f32 || ds->f16) != ds->narrow_held && !(ds->wide_fed && by_rows))
		return pggpu_fail(err, PGGPU_ERR_INVALID, ds->wide_fed ?
						  "a float32 or float16 data set held as doubles from its first row takes its rows by rows" :
						  "no rows may be pushed to a float32 or float16 data set once its rows are held as doubles");
	if (ds->w_batch && (bad = bad_weight(ds->w_batch, nrows)) >= 0)
		return bad_weight_error(err, ds->w_batch, bad);
	t0 = pggpu_seconds();
	ds->range_known = false;
	st = ds->ops->push(ds, nrows, by_rows, err);
	ds->push_seconds += pggpu_seconds() - t0;
	if (st == PGGPU_OK && ds->w_batch)
		st = weights_take(ds, n0, ds->w_batch, err);
	return st;
}

/*
 * The value type the sources' rows are held in where every one holds them
 * narrow, in one type, unscaled (e 0): a copy of them can be held so too,
 * the same values in half or a quarter of the bytes; else FLOAT64
 */
static pggpu_dtype
narrow_type(pggpu_data *const *srcs, int nsrc, const int *e)
{
	pggpu_dtype dt = nsrc > 0 ? pggpu_data_dtype(srcs[0]) : PGGPU_FLOAT64;

	for (int i = 0; i < nsrc; i++)
		if (!srcs[i]->narrow_held || e[i] != 0 || pggpu_data_dtype(srcs[i]) != dt)
			return PGGPU_FLOAT64;
	return dt;
}

pggpu_status
pggpu_copy_rows(pggpu_data *dst, pggpu_data *const *srcs, int nsrc, const int *which, const int64_t *rows,
				int64_t m, const int *e, pggpu_error *err)
{
	int64_t		n0 = dst->n;
	bool		weighted = false;
	pggpu_dtype dt = narrow_type(srcs, nsrc, e);
	pggpu_status st;

	/* (a set of doubles with no rows yet takes the sources' narrow type; a narrow one, only theirs) */
	if (dst->n == 0 && !dst->wide_fed && pggpu_data_dtype(dst) == PGGPU_FLOAT64 && dt != PGGPU_FLOAT64 &&
		(st = pggpu_data_set_dtype(dst, dt, err)) != PGGPU_OK)
		return st;
	if (pggpu_data_dtype(dst) != PGGPU_FLOAT64 && pggpu_data_dtype(dst) != dt)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "a float32 or float16 data set takes copies of rows held so only");
	for (int i = 0; i < nsrc; i++)
		weighted |= pggpu_data_weights(srcs[i]) != NULL;
	if (weighted && pggpu_data_batch_weights(dst) == NULL)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	if ((st = dst->ops->copy_rows(dst, srcs, nsrc, which, rows, m, e, err)) != PGGPU_OK || !weighted)
		return st;
	if (!weights_room(dst, dst->n))
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory for the rows' weights");
	for (int64_t t = 0; t < m && n0 + t < dst->n; t++)
	{
		const double *sw = pggpu_data_weights(srcs[which ? which[t] : 0]);

		dst->w[n0 + t] = sw ? sw[rows[t]] : 1.0;
	}
	weights_noted(dst, dst->w + n0, dst->n - n0);
	return PGGPU_OK;
}

pggpu_status
pggpu_data_push(pggpu_data *ds, int64_t nrows, pggpu_error *err)
{
	return push(ds, nrows, false, err);
}

pggpu_status
pggpu_data_push_by_rows(pggpu_data *ds, int64_t nrows, pggpu_error *err)
{
	return push(ds, nrows, true, err);
}

pggpu_status
pggpu_data_hold_wide(pggpu_data *ds, pggpu_error *err)
{
	pggpu_status st;

	if (!(ds->f32 || ds->f16) || ds->n != 0 || ds->parked)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "only a float32 or float16 data set with no rows is held wide");
	if (ds->narrow_held && (st = ds->ops->widen(ds, err)) != PGGPU_OK)
		return st;
	ds->wide_fed = true;
	return PGGPU_OK;
}

double
pggpu_data_push_seconds(const pggpu_data *ds)
{
	return ds->push_seconds;
}

int64_t
pggpu_data_rows(const pggpu_data *ds)
{
	return ds->n;
}

int
pggpu_data_cols(const pggpu_data *ds)
{
	return ds->d;
}

pggpu_backend
pggpu_data_backend(const pggpu_data *ds)
{
	return ds->backend;
}

const char *
pggpu_data_device_name(const pggpu_data *ds)
{
	return ds->device_name;
}

pggpu_status
pggpu_data_push_rows(pggpu_data *ds, const double *rows, const double *w, const int64_t *order,
					 int64_t m, pggpu_error *err)
{
	int			d = ds->d;
	pggpu_status st;

	for (int64_t i0 = 0; i0 < m; i0 += pggpu_data_batch_rows(ds))
	{
		int64_t		b = pggpu_data_batch_rows(ds);
		int64_t		take = m - i0 < b ? m - i0 : b;
		double	   *buf = pggpu_data_batch(ds);
		float	   *buf32 = pggpu_data_batch_f32(ds);
		uint16_t   *buf16 = pggpu_data_batch_f16(ds);
		double	   *wb = w ? pggpu_data_batch_weights(ds) : NULL;

		if (!buf && !buf32 && !buf16)	/* (a lazy set's first batch) */
			return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "could not allocate the pinned staging buffers");
		if (w && !wb)
			return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		for (int64_t t = 0; wb && t < take; t++)
			wb[t] = w[order ? order[i0 + t] : i0 + t];

		/* by tiles of 32 rows: their cache lines serve 8 columns each (a column at a time: one a value) */
		for (int64_t t0 = 0; t0 < take; t0 += 32)
			for (int j = 0; j < d; j++)
				for (int64_t t = t0; t < take && t < t0 + 32; t++)
					pggpu_batch_put(buf, buf32, buf16, j * b + t, rows[(order ? order[i0 + t] : i0 + t) * d + j]);
		if ((st = pggpu_data_push(ds, take, err)) != PGGPU_OK)
			return st;
	}
	return PGGPU_OK;
}

bool
pggpu_data_parked(const pggpu_data *ds)
{
	return ds->parked;
}

pggpu_status
pggpu_data_park(pggpu_data *ds, pggpu_error *err)
{
	pggpu_status st = PGGPU_OK;

	if (!ds->parked && ds->ops->park && (st = ds->ops->park(ds, err)) == PGGPU_OK)
		ds->parked = true;
	return st;
}

pggpu_status
pggpu_data_unpark(pggpu_data *ds, pggpu_error *err)
{
	pggpu_status st = PGGPU_OK;

	if (ds->parked && (st = ds->ops->unpark(ds, err)) == PGGPU_OK)
		ds->parked = false;
	return st;
}

void
pggpu_data_close(pggpu_data *ds)
{
	if (ds == NULL)
		return;
	pggpu_data_close(ds->aux);
	pggpu_knn_close(ds->aux_knn);
	ds->ops->close(ds);
	pggpu_scratch_free_all(ds);
	free(ds->w);
	free(ds->w_batch);
	free(ds->step_space);
	free(ds);
}

/* ---- scratch memory ------------------------------------------------------- */

/* malloc, remembered in ds->scratch so that close frees it after a longjmp */
void *
pggpu_scratch_alloc(pggpu_data *ds, size_t bytes)
{
	for (int i = 0; i < (int) (sizeof(ds->scratch) / sizeof(ds->scratch[0])); i++)
		if (ds->scratch[i] == NULL)
			return ds->scratch[i] = malloc(bytes ? bytes : 1);
	return NULL;
}

/* old (from pggpu_scratch_alloc, or NULL) grown to bytes; NULL: old stays */
void *
pggpu_scratch_realloc(pggpu_data *ds, void *old, size_t bytes)
{
	for (int i = 0; i < (int) (sizeof(ds->scratch) / sizeof(ds->scratch[0])); i++)
		if (ds->scratch[i] == old)
		{
			void	   *p = realloc(old, bytes ? bytes : 1);

			if (p != NULL)
				ds->scratch[i] = p;
			return p;
		}
	return NULL;
}

/* frees one allocation of pggpu_scratch_alloc (NULL: none) */
void
pggpu_scratch_free(pggpu_data *ds, void *p)
{
	for (int i = 0; p != NULL && i < (int) (sizeof(ds->scratch) / sizeof(ds->scratch[0])); i++)
		if (ds->scratch[i] == p)
		{
			free(p);
			ds->scratch[i] = NULL;
			return;
		}
}

void
pggpu_scratch_free_all(pggpu_data *ds)
{
	for (int i = 0; i < (int) (sizeof(ds->scratch) / sizeof(ds->scratch[0])); i++)
	{
		free(ds->scratch[i]);
		ds->scratch[i] = NULL;
	}
}
