/*
 * knn.c - nearest neighbours (gpu_knn): the front door of both backends.
 * The caller streams the base a tile at a time and merges each tile's
 * nearest rows into its own (src/knn.c); a tile's rows are compared with
 * every query on the CPU (cpu/knn.c) or the GPU (gpu/knn.cu), by one of
 * two routes that give the same answers: the plain loop for every pair
 * (the exact distances every placement computes alike), or a float32
 * product of centred copies that proposes, certified by
 * pggpu_knn_margin, the plain loop measuring only the pairs the bound
 * leaves uncertain.  Here: the queries' centred float copies and norms
 * (both backends'), the route, the two tile buffers, and the start/finish
 * of a tile (the GPU's returns at once, the CPU's works in finish).
 */
#include "knn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The product from this many columns: below it the plain loop is as fast
 * (a pair's d terms against its share of the product's traffic: on the
 * H100 the plain loop takes about 1.3 * 10^12 terms a second, the product
 * about 12 bytes a pair at 3 * 10^12 bytes a second)
 */
#define PRODUCT_MIN_D 16
/* and the GPU's at most this many neighbours a query (its block selection's lists) */
#define GPU_PRODUCT_MAX_N 32

/* the tests' forcing (pggpu_knn_force_route, pggpu_knn_force_resident) */
static pggpu_knn_route forced_route = PGGPU_KNN_AUTO;
int64_t		pggpu_knn_resident_queries = 0;

/* the queries' mean, their centred float copies and norms (the product's) */
static pggpu_status
centre_queries(pggpu_knn *kn, const double *Q, pggpu_error *err)
{
	int			d = kn->d;
	int64_t		nq = kn->nq;

	kn->mu = (double *) calloc((size_t) d, sizeof(double));
	kn->Qf = (float *) malloc(sizeof(float) * (size_t) (nq > 0 ? nq : 1) * (size_t) d);
	kn->qn = (double *) malloc(sizeof(double) * (size_t) (nq > 0 ? nq : 1));
	kn->qs = (double *) malloc(sizeof(double) * (size_t) (nq > 0 ? nq : 1));
	if (!kn->mu || !kn->Qf || !kn->qn || !kn->qs)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory for %lld queries", (long long) nq);
	/* the inner product is not moved by a shift: its copies stay where they are */
	if (kn->metric != PGGPU_METRIC_INNER_PRODUCT && nq > 0)
	{
		for (int64_t i = 0; i < nq; i++)
			for (int j = 0; j < d; j++)
				kn->mu[j] += Q[i * d + j];
		for (int j = 0; j < d; j++)
			kn->mu[j] /= (double) nq;
	}
	for (int64_t i = 0; i < nq; i++)
	{
		double		s = 0;

		for (int j = 0; j < d; j++)
		{
			float		f = (float) (Q[i * d + j] - kn->mu[j]);

			kn->Qf[i * d + j] = f;
			s += (double) f * f;
		}
		kn->qn[i] = s;
		kn->qs[i] = isfinite(s) && sqrt(s) <= PGGPU_KNN_MAX_NORM ? sqrt(s) : INFINITY;
	}
	return PGGPU_OK;
}

static pggpu_knn_route
choose_route(const pggpu_knn *kn)
{
	const char *why;
	bool		can = kn->backend == PGGPU_BACKEND_CPU ? pggpu_openblas_load(&why) != NULL : kn->n <= GPU_PRODUCT_MAX_N;

	if (!can || forced_route == PGGPU_KNN_PLAIN)
		return PGGPU_KNN_PLAIN;
	if (forced_route == PGGPU_KNN_PRODUCT)
		return PGGPU_KNN_PRODUCT;
	return kn->d >= PRODUCT_MIN_D ? PGGPU_KNN_PRODUCT : PGGPU_KNN_PLAIN;
}

pggpu_status
pggpu_knn_open(pggpu_knn **out, pggpu_backend backend, int gpu_index, int d, pggpu_metric metric,
			   const double *Q, int64_t nq, int n, pggpu_error *err)
{
	pggpu_knn  *kn;
	pggpu_status st;

	*out = NULL;
	if (d < 1 || nq < 0 || n < 1 || (metric != PGGPU_METRIC_EUCLIDEAN && metric != PGGPU_METRIC_COSINE &&
									  metric != PGGPU_METRIC_INNER_PRODUCT))
		return pggpu_fail(err, PGGPU_ERR_INVALID, "nearest neighbours of %lld rows of %d values, %d each, metric %d",
						  (long long) nq, d, n, (int) metric);
	kn = (pggpu_knn *) calloc(1, sizeof(pggpu_knn));
	if (kn == NULL)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	kn->backend = backend;
	kn->d = d;
	kn->n = n;
	kn->metric = metric;
	kn->nq = nq;
	kn->gpu = -1;
	kn->threads = 1;
	kn->route = choose_route(kn);
	*out = kn;
	kn->Q = (double *) malloc(sizeof(double) * (size_t) (nq > 0 ? nq : 1) * (size_t) d);
	kn->bound_copy = (double *) malloc(sizeof(double) * (size_t) (nq > 0 ? nq : 1));
	if (kn->Q == NULL || kn->bound_copy == NULL)
		st = pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory for %lld queries", (long long) nq);
	else
	{
		if (nq > 0)
			memcpy(kn->Q, Q, sizeof(double) * (size_t) nq * (size_t) d);
		st = centre_queries(kn, Q, err);
	}
	if (st == PGGPU_OK && backend == PGGPU_BACKEND_GPU)
	{
		/* (the device holds them now, unless it takes them a batch at a time) */
		if ((st = pggpu_gpu_knn_open(kn, gpu_index, err)) == PGGPU_OK && !kn->keep_queries)
		{
			free(kn->Q);
			free(kn->Qf);
			kn->Q = NULL;
			kn->Qf = NULL;
		}
	}
	else if (st == PGGPU_OK)
		snprintf(kn->device_name, sizeof(kn->device_name), "cpu");
	if (st != PGGPU_OK)
	{
		pggpu_knn_close(kn);
		*out = NULL;
	}
	return st;
}

void
pggpu_knn_set_interrupts(pggpu_knn *kn, pggpu_interrupt_fn fn, void *arg)
{
	kn->interrupt = fn;
	kn->interrupt_arg = arg;
}

void
pggpu_knn_set_threads(pggpu_knn *kn, int threads)
{
	kn->threads = threads > 1 ? threads : 1;
}

void
pggpu_knn_force_route(pggpu_knn_route route)
{
	forced_route = route;
}

void
pggpu_knn_force_resident(int64_t queries)
{
	pggpu_knn_resident_queries = queries;
}

pggpu_knn_route
pggpu_knn_route_taken(const pggpu_knn *kn)
{
	return kn->route;
}

void
pggpu_knn_counts(const pggpu_knn *kn, int64_t *pairs, int64_t *measured)
{
	*pairs = kn->pairs;
	*measured = kn->measured;
}

static void
buffer_free(pggpu_knn *kn, int b)
{
	free(kn->buf[b]);
	kn->buf[b] = NULL;
	kn->bufbytes[b] = 0;
}

pggpu_status
pggpu_knn_fill(pggpu_knn *kn, int64_t rows, bool f32, pggpu_error *err)
{
	/* the one not being compared (both free: the other than last time) */
	int			b = kn->busy ? 1 - kn->tile_buf : 1 - kn->cur;
	size_t		bytes;

	if (rows < 0 || rows > INT32_MAX)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "a tile of %lld rows", (long long) rows);
	rows = rows > 0 ? rows : 1;
	kn->f32[b] = f32;
	kn->ld[b] = rows;
	kn->cur = b;
	kn->filling = true;
	if (kn->backend == PGGPU_BACKEND_GPU)
	{
		pggpu_status st = pggpu_gpu_knn_fill(kn, b, err);

		if (st != PGGPU_OK)
			kn->filling = false;
		return st;
	}
	bytes = (f32 ? sizeof(float) : sizeof(double)) * (size_t) rows * kn->d;
	if (kn->bufbytes[b] < bytes)
	{
		buffer_free(kn, b);
		if ((kn->buf[b] = malloc(bytes)) == NULL)
		{
			kn->filling = false;
			return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory for a tile of %lld rows",
							  (long long) rows);
		}
		kn->bufbytes[b] = bytes;
	}
	return PGGPU_OK;
}

pggpu_status
pggpu_knn_put(pggpu_knn *kn, int64_t at, const void *v, int64_t pitch, int64_t n, bool by_rows, bool pinned,
			  pggpu_error *err)
{
	int			b = kn->cur;
	bool		f32 = kn->f32[b];
	int64_t		ld = kn->ld[b];
	int			d = kn->d;

	if (!kn->filling)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "rows put where no tile is being filled");
	if (at < 0 || n < 0 || at + n > ld || pitch < (by_rows ? d : n) || (n > 0 && v == NULL))
		return pggpu_fail(err, PGGPU_ERR_INVALID, "%lld rows (%lld apart) put at row %lld of a tile of %lld",
						  (long long) n, (long long) pitch, (long long) at, (long long) ld);
	if (n == 0)
		return PGGPU_OK;
	if (kn->backend == PGGPU_BACKEND_GPU)
		return pggpu_gpu_knn_put(kn, b, at, v, pitch, n, by_rows, pinned, err);
	if (!by_rows)
	{
		size_t		vb = f32 ? sizeof(float) : sizeof(double);

		for (int j = 0; j < d; j++)
			memcpy((char *) kn->buf[b] + vb * ((size_t) j * ld + at), (const char *) v + vb * (size_t) j * pitch,
				   vb * (size_t) n);
	}
	else if (f32)
		for (int64_t r = 0; r < n; r++)
			for (int j = 0; j < d; j++)
				((float *) kn->buf[b])[(int64_t) j * ld + at + r] = ((const float *) v)[r * pitch + j];
	else
		for (int64_t r = 0; r < n; r++)
			for (int j = 0; j < d; j++)
				((double *) kn->buf[b])[(int64_t) j * ld + at + r] = ((const double *) v)[r * pitch + j];
	return PGGPU_OK;
}

pggpu_status
pggpu_knn_start(pggpu_knn *kn, int64_t nb, const int32_t *rank, const double *bound, pggpu_error *err)
{
	if (kn->busy)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "a tile started before the last was finished");
	if (!kn->filling || nb < 0 || nb > kn->ld[kn->cur])
		return pggpu_fail(err, PGGPU_ERR_INVALID, "a tile of %lld rows", (long long) nb);
	kn->filling = false;
	kn->busy = true;
	kn->nb = nb;
	kn->tile_buf = kn->cur;
	kn->rank = NULL;
	kn->bound = NULL;
	if (rank && nb > 0)
	{
		if (kn->rank_cap < nb)
		{
			free(kn->rank_copy);
			kn->rank_cap = 0;
			if ((kn->rank_copy = (int32_t *) malloc(sizeof(int32_t) * (size_t) nb)) == NULL)
			{
				kn->busy = false;
				return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory for a tile of %lld rows",
								  (long long) nb);
			}
			kn->rank_cap = nb;
		}
		memcpy(kn->rank_copy, rank, sizeof(int32_t) * (size_t) nb);
		kn->rank = kn->rank_copy;
	}
	if (bound && kn->nq > 0)
	{
		memcpy(kn->bound_copy, bound, sizeof(double) * (size_t) kn->nq);
		kn->bound = kn->bound_copy;
	}
	kn->pairs += kn->nq * nb;
	if (kn->backend == PGGPU_BACKEND_GPU && kn->nq > 0)
	{
		pggpu_status st = pggpu_gpu_knn_start(kn, kn->tile_buf, nb, kn->rank, kn->bound, err);

		if (st != PGGPU_OK)
			kn->busy = false;
		return st;
	}
	return PGGPU_OK;
}

bool
pggpu_knn_busy(const pggpu_knn *kn)
{
	return kn->busy;
}

pggpu_status
pggpu_knn_finish(pggpu_knn *kn, int64_t *idx, double *dist, pggpu_error *err)
{
	pggpu_status st;

	if (!kn->busy)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "no tile started");
	kn->busy = false;
	for (int64_t i = 0; i < kn->nq * kn->n; i++)
		idx[i] = -1, dist[i] = INFINITY;
	if (kn->nq == 0)
		return PGGPU_OK;
	if (kn->backend == PGGPU_BACKEND_GPU)
		st = pggpu_gpu_knn_finish(kn, idx, dist, err);
	else
		st = kn->nb == 0 ? PGGPU_OK :
			pggpu_cpu_knn_run(kn, kn->buf[kn->tile_buf], kn->f32[kn->tile_buf], kn->ld[kn->tile_buf], kn->nb,
							  kn->rank, kn->bound, idx, dist, err);
	return st;
}

pggpu_status
pggpu_knn_tile(pggpu_knn *kn, const double *B, int64_t nb, bool f32, const int32_t *rank, const double *bound,
			   int64_t *idx, double *dist, pggpu_error *err)
{
	void	   *cols;
	pggpu_status st;

	/* (by columns, as a read's parts; the tests put by rows too) */
	if (nb < 0)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "a tile of %lld rows", (long long) nb);
	if ((st = pggpu_knn_fill(kn, nb, f32, err)) != PGGPU_OK)
		return st;
	if ((cols = malloc((f32 ? sizeof(float) : sizeof(double)) * (size_t) (nb > 0 ? nb : 1) * kn->d)) == NULL)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory for a tile of %lld rows", (long long) nb);
	for (int64_t r = 0; r < nb; r++)
		for (int j = 0; j < kn->d; j++)
		{
			if (f32)
				((float *) cols)[(int64_t) j * nb + r] = (float) B[r * kn->d + j];
			else
				((double *) cols)[(int64_t) j * nb + r] = B[r * kn->d + j];
		}
	st = pggpu_knn_put(kn, 0, cols, nb, nb, false, false, err);
	free(cols);
	if (st != PGGPU_OK || (st = pggpu_knn_start(kn, nb, rank, bound, err)) != PGGPU_OK)
		return st;
	return pggpu_knn_finish(kn, idx, dist, err);
}

const char *
pggpu_knn_device_name(const pggpu_knn *kn)
{
	return kn->device_name;
}

void
pggpu_knn_close(pggpu_knn *kn)
{
	if (kn == NULL)
		return;
	if (kn->impl)
		pggpu_gpu_knn_close(kn);
	buffer_free(kn, 0);
	buffer_free(kn, 1);
	free(kn->Q);
	free(kn->mu);
	free(kn->Qf);
	free(kn->qn);
	free(kn->qs);
	free(kn->bound_copy);
	free(kn->rank_copy);
	free(kn->ws);
	free(kn->wide);
	free(kn);
}
