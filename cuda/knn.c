/*
 * knn.c - nearest neighbours (gpu_knn): the front door of both backends.
 * The caller streams the base a tile at a time and merges each tile's
 * nearest rows into its own (src/knn.c); a tile's rows are compared with
 * every query by the plain loop (the exact distances every placement
 * computes alike), on the CPU (cpu/knn.c) or the GPU (gpu/knn.cu).
 */
#include "compute_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	*out = kn;
	if (backend == PGGPU_BACKEND_GPU)
	{
		if ((st = pggpu_gpu_knn_open(kn, gpu_index, Q, err)) != PGGPU_OK)
		{
			pggpu_knn_close(kn);
			*out = NULL;
			return st;
		}
		return PGGPU_OK;
	}
	snprintf(kn->device_name, sizeof(kn->device_name), "cpu");
	kn->Q = (double *) malloc(sizeof(double) * (size_t) (nq > 0 ? nq : 1) * (size_t) d);
	if (kn->Q == NULL)
	{
		pggpu_knn_close(kn);
		*out = NULL;
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory for %lld queries", (long long) nq);
	}
	if (nq > 0)
		memcpy(kn->Q, Q, sizeof(double) * (size_t) nq * (size_t) d);
	return PGGPU_OK;
}

void
pggpu_knn_set_interrupts(pggpu_knn *kn, pggpu_interrupt_fn fn, void *arg)
{
	kn->interrupt = fn;
	kn->interrupt_arg = arg;
}

pggpu_status
pggpu_knn_tile(pggpu_knn *kn, const double *B, int64_t nb, int64_t *idx, double *dist, pggpu_error *err)
{
	if (nb < 0)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "a tile of %lld rows", (long long) nb);
	if (kn->nq == 0)
		return PGGPU_OK;
	if (kn->backend == PGGPU_BACKEND_GPU)
		return pggpu_gpu_knn_tile(kn, B, nb, idx, dist, err);
	return pggpu_cpu_knn_tile(kn, B, nb, idx, dist, err);
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
	free(kn->Q);
	free(kn->ws);
	free(kn);
}
