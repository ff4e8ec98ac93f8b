/*
 * matmul.c - matrix-product workspaces, whatever the backend: their host
 * buffers (pinned where the GPU copies from them), the product's argument
 * checks and its dispatch to the GPU (gpu/matmul.cu) or the CPU
 * (cpu/matmul.c), and a product split over several workspaces, one a GPU,
 * run at once (pggpu_matmul_run_split).
 */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute_internal.h"

pggpu_status
pggpu_matmul_open(pggpu_matmul **out, pggpu_backend backend, int gpu_index,
				  pggpu_error *err)
{
	pggpu_matmul *mm = (pggpu_matmul *) calloc(1, sizeof(pggpu_matmul));
	pggpu_status st;

	*out = NULL;
	if (mm == NULL)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	mm->backend = backend;
	mm->gpu = -1;
	strcpy(mm->device_name, "cpu");
	if (backend == PGGPU_BACKEND_GPU &&
		(st = pggpu_gpu_mm_open(mm, gpu_index, err)) != PGGPU_OK)
	{
		pggpu_matmul_close(mm);
		return st;
	}
	*out = mm;
	return PGGPU_OK;
}

static void
host_free(pggpu_matmul *mm, int which)
{
	if (mm->backend == PGGPU_BACKEND_GPU)
		pggpu_gpu_host_free(mm->host[which], mm->host_cap[which]);
	else
		free(mm->host[which]);
	mm->host[which] = NULL;
	mm->host_cap[which] = 0;
}

static void *
host_alloc(pggpu_matmul *mm, size_t bytes, size_t *got)
{
	if (mm->backend == PGGPU_BACKEND_GPU)
		return pggpu_gpu_host_alloc(bytes, got);
	*got = bytes;
	return malloc(bytes);
}

void *
pggpu_matmul_buffer(pggpu_matmul *mm, int which, size_t bytes, size_t keep,
					pggpu_error *err)
{
	void	   *p;
	size_t		cap,
				got;

	if (which < 0 || which > 2)
	{
		pggpu_fail(err, PGGPU_ERR_INVALID, "no host buffer %d", which);
		return NULL;
	}
	if (bytes <= mm->host_cap[which])
		return mm->host[which];
	/* grow by at least half, so that a buffer filled row by row is cheap */
	cap = mm->host_cap[which] + mm->host_cap[which] / 2;
	if (cap < bytes)
		cap = bytes;
	p = host_alloc(mm, cap, &got);
	if (p == NULL && cap > bytes)
		p = host_alloc(mm, bytes, &got);
	if (p == NULL)
	{
		pggpu_fail(err, PGGPU_ERR_HOST_MEMORY,
				   "could not allocate %.1f MB of %shost memory for a matrix",
				   bytes / 1048576.0, mm->backend == PGGPU_BACKEND_GPU ? "pinned " : "");
		return NULL;
	}
	if (keep > mm->host_cap[which])
		keep = mm->host_cap[which];
	if (keep > 0)
		memcpy(p, mm->host[which], keep);
	host_free(mm, which);
	mm->host[which] = p;
	mm->host_cap[which] = got;
	return p;
}

pggpu_backend
pggpu_matmul_backend(const pggpu_matmul *mm)
{
	return mm->backend;
}

const char *
pggpu_matmul_device_name(const pggpu_matmul *mm)
{
	return mm->device_name;
}

void
pggpu_matmul_keep_only(pggpu_matmul *mm, int which)
{
	if (mm->impl != NULL)
		pggpu_gpu_mm_close(mm);
	for (int w = 0; w < 3; w++)
		if (w != which)
			host_free(mm, w);
}

void
pggpu_matmul_close(pggpu_matmul *mm)
{
	if (mm == NULL)
		return;
	if (mm->impl != NULL)
		pggpu_gpu_mm_close(mm);
	for (int w = 0; w < 3; w++)
		host_free(mm, w);
	free(mm);
}

pggpu_status
pggpu_matmul_run(pggpu_matmul *mm, const pggpu_matmul_params *p,
				 const void *a, const void *b, void *c,
				 pggpu_matmul_info *info, pggpu_error *err)
{
	pggpu_matmul_info dummy;

	if (info == NULL)
		info = &dummy;
	memset(info, 0, sizeof(*info));
	if (p->dtype != PGGPU_FLOAT64 && p->dtype != PGGPU_FLOAT32)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "unknown element type %d", (int) p->dtype);
	if (p->m < 1 || p->n < 1 || p->k < 1)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "empty product (%lld x %lld times %lld x %lld)",
						  (long long) p->m, (long long) p->k, (long long) p->k, (long long) p->n);
	/* BLAS takes 32-bit dimensions and leading dimensions */
	if (p->n > INT_MAX || p->k > INT_MAX)
		return pggpu_fail(err, PGGPU_ERR_INVALID,
						  "inner or column dimension over %d (k = %lld, n = %lld)",
						  INT_MAX, (long long) p->k, (long long) p->n);
	if (a == NULL || b == NULL || c == NULL)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "missing operand");
	if (mm->backend == PGGPU_BACKEND_GPU)
		return pggpu_gpu_mm_run(mm, p, a, b, c, info, err);
	return pggpu_cpu_mm_run(p, a, b, c, info, err);
}

/* a split product: the workspaces' shares of A's rows */
typedef struct split
{
	pggpu_matmul *const *mms;
	const pggpu_matmul_params *p;
	const char *a;
	const char *b;
	char	   *c;
	int64_t    *first;			/* a workspace's first row, n + 1 of them */
	pggpu_matmul_info *infos;
	pggpu_status *st;
	pggpu_error *errs;
	bool	   *done;
} split;

/* workspace i's rows of the product (interrupts as p says; stop: a thread's) */
static void
split_share(split *sp, int i, pggpu_stop *stop)
{
	pggpu_matmul_params q = *sp->p;
	int64_t		es = q.dtype == PGGPU_FLOAT64 ? 8 : 4;
	int64_t		r0 = sp->first[i];

	q.m = sp->first[i + 1] - r0;
	if (q.m == 0 || sp->done[i])
	{
		sp->done[i] = true;
		return;
	}
	if (stop)
	{
		q.check_interrupts = NULL;
		sp->mms[i]->stopped = pggpu_stopped_arg;
		sp->mms[i]->stopped_arg = stop;
	}
	sp->st[i] = pggpu_matmul_run(sp->mms[i], &q, sp->a + r0 * q.k * es, sp->b, sp->c + r0 * q.n * es,
								 &sp->infos[i], &sp->errs[i]);
	sp->mms[i]->stopped = NULL;
	sp->done[i] = sp->st[i] == PGGPU_OK || !pggpu_stopped(stop);
}

static void
split_job(void *arg, int i, pggpu_stop *stop)
{
	split_share((split *) arg, i, stop);
}

/* b staged by the workspaces together: its rows cut in as many parts, the cuts */
typedef struct staging
{
	split	   *sp;
	int			n;
	int64_t		cuts[PGGPU_MAX_THREADS + 1];
	pggpu_status st[PGGPU_MAX_THREADS];
} staging;

/* workspace i: its part of b from the host (its plan for its own rows of a) */
static void
stage_job(void *arg, int i, pggpu_stop *stop)
{
	staging    *sg = (staging *) arg;
	pggpu_matmul_params q = *sg->sp->p;

	(void) stop;
	q.m = sg->sp->first[i + 1] - sg->sp->first[i];
	sg->st[i] = pggpu_gpu_mm_stage_b(sg->sp->mms[i], &q, sg->sp->b, sg->cuts[i], sg->cuts[i + 1],
									 &sg->sp->errs[i]);
}

/* workspace i: the other parts of b from the other workspaces' GPUs */
static void
gather_job(void *arg, int i, pggpu_stop *stop)
{
	staging    *sg = (staging *) arg;

	(void) stop;
	sg->st[i] = pggpu_gpu_mm_gather_b(sg->sp->mms, sg->n, i, sg->cuts, sg->sp->p->n,
									  sg->sp->p->dtype == PGGPU_FLOAT64 ? 8 : 4, &sg->sp->errs[i]);
}

/*
 * Workspaces on GPUs that each keep all of b: each copies 1/n of b from the
 * host and the rest from the others' GPUs (NVLink where there is one), so
 * that the host's links carry b once, not once a GPU.  False where it does
 * not apply or fails: then each copies all of b itself, as alone.
 */
static bool
stage_shared_b(split *sp, int n)
{
	staging		sg;
	pggpu_stop	stop;
	bool		ok = true;

	sg.sp = sp;
	sg.n = n;
	for (int i = 0; i <= n; i++)
		sg.cuts[i] = sp->p->k * i / n;
	pggpu_run_together(stage_job, &sg, n, NULL, &stop);
	for (int i = 0; i < n; i++)
		ok &= sg.st[i] == PGGPU_OK;
	if (ok)
	{
		pggpu_run_together(gather_job, &sg, n, NULL, &stop);
		for (int i = 0; i < n; i++)
			ok &= sg.st[i] == PGGPU_OK;
	}
	for (int i = 0; i < n; i++)
		memset(&sp->errs[i], 0, sizeof(pggpu_error));
	return ok;
}

pggpu_status
pggpu_matmul_run_split(pggpu_matmul *const *mms, int n, const pggpu_matmul_params *p,
					   const void *a, const void *b, void *c, pggpu_matmul_info *info,
					   pggpu_error *err)
{
	int64_t		first[PGGPU_MAX_THREADS + 1];
	pggpu_matmul_info infos[PGGPU_MAX_THREADS];
	pggpu_status sts[PGGPU_MAX_THREADS];
	pggpu_error *errs;
	bool		done[PGGPU_MAX_THREADS];
	split		sp = {mms, p, (const char *) a, (const char *) b, (char *) c, first, infos, sts, NULL, done};
	bool		threads = p->pending != NULL || p->check_interrupts == NULL;
	bool		several = false;
	pggpu_status st = PGGPU_OK;

	if (n < 1 || n > PGGPU_MAX_THREADS)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "a product split over %d workspaces", n);
	if (n == 1)
		return pggpu_matmul_run(mms[0], p, a, b, c, info, err);
	if ((errs = (pggpu_error *) calloc(n, sizeof(pggpu_error))) == NULL)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	sp.errs = errs;
	for (int i = 0; i <= n; i++)
		first[i] = p->m * i / n;
	for (int i = 0; i < n; i++)
	{
		threads &= mms[i]->backend == PGGPU_BACKEND_GPU;
		several |= mms[i]->gpu != mms[0]->gpu;
		sts[i] = PGGPU_OK;
		done[i] = false;
		memset(&infos[i], 0, sizeof(infos[i]));
	}
	if (threads)
	{
		pggpu_stop	stop;

		/* (b shared where every workspace has rows: one of a's rows at least each) */
		if (p->m >= n && p->n * p->k >= (int64_t) 1 << 20)
			(void) stage_shared_b(&sp, n);
		pggpu_run_together(split_job, &sp, n, p->pending, &stop);
		/* (b staged is this call's: no later product may find it, whatever ended this one) */
		for (int i = 0; i < n; i++)
			(void) pggpu_gpu_mm_stage_b(mms[i], p, NULL, 0, 0, NULL);
		/* an interrupt seen pending: the callback here (it may longjmp) */
		if (pggpu_stopped(&stop) && p->check_interrupts)
			p->check_interrupts(p->interrupt_arg);
	}
	/* (on the CPU, whose OpenBLAS has threads of its own: one after another) */
	for (int i = 0; i < n; i++)
		if (!done[i])
			split_share(&sp, i, NULL);
	for (int i = 0; i < n && st == PGGPU_OK; i++)
		if (sts[i] != PGGPU_OK)
		{
			st = sts[i];
			*err = errs[i];
			if (several && mms[i]->gpu >= 0)
				snprintf(err->msg, sizeof(err->msg), "GPU %d: %s", mms[i]->gpu, errs[i].msg);
		}
	if (info)
	{
		*info = infos[0];
		for (int i = 1; i < n; i++)
			info->products += infos[i].products;
	}
	free(errs);
	return st;
}
