/*
 * bench_matmul.c - TFLOP/s of pggpu_matmul_run beside cuBLAS called directly,
 * in one process, on the same data.
 *
 *   tests/bench/bench_matmul gpu|cpu [-G LIST ...] [N ...]  (default N: 4096 8192; float64)
 *
 * For each N (an N x N by N x N product) it prints, per row:
 *   pg_gpu      pggpu_matmul_run, host to host: pinned host buffers in, the
 *               blocked pipeline (copies overlapping products), C back in host
 *               memory: what gpu_matmul pays after reading its operands;
 *   cublas      cublasDgemm on operands already on the GPU (the ceiling);
 *   cublas+copy cudaMemcpy A and B in, cublasDgemm, cudaMemcpy C out, in turn:
 *               the straightforward host-to-host way.
 *   split LIST  pggpu_matmul_run_split over a workspace on each GPU of LIST
 *               ("0,1"; "0,0": two on GPU 0), A's rows in as many shares,
 *               at once: what gpu_matmul does with pg_gpu.gpus (or
 *               pg_gpu.parts); with each -G given.
 * Times are medians of REPS runs after one warm-up; FLOP = 2 N^3.
 * With cpu, only the pg_gpu row (OpenBLAS) is measured.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pg_gpu_compute.h"

#ifdef BENCH_CUBLAS
#include <cublas_v2.h>
#include <cuda_runtime.h>
#endif

#define REPS 7

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int
cmp(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

static double
median(double *t, int n)
{
	qsort(t, n, sizeof(double), cmp);
	return t[n / 2];
}

static void
report(const char *what, long n, double sec)
{
	printf("%-12s %6ld x %-6ld %10.3f ms %9.2f TFLOP/s\n", what, n, n, sec * 1e3,
		   2.0 * n * n * n / sec / 1e12);
}

static void
die(const pggpu_error *err)
{
	fprintf(stderr, "error: %s\n", err->msg);
	exit(1);
}

/* the split product over a workspace on each GPU of list ("0,1") */
static void
bench_split(const char *list, pggpu_backend backend, const pggpu_matmul_params *p,
			const double *A, const double *B, double *C)
{
	pggpu_matmul *mms[16];
	pggpu_error err = {0};
	int			n = 0;
	double		t[REPS];
	char		what[64];

	for (const char *s = list; *s && n < 16; s = strchr(s, ',') ? strchr(s, ',') + 1 : s + strlen(s))
		if (pggpu_matmul_open(&mms[n++], backend, atoi(s), &err) != PGGPU_OK)
			die(&err);
	if (pggpu_matmul_run_split(mms, n, p, A, B, C, NULL, &err) != PGGPU_OK)
		die(&err);
	for (int r = 0; r < REPS; r++)
	{
		double		t0 = now();

		if (pggpu_matmul_run_split(mms, n, p, A, B, C, NULL, &err) != PGGPU_OK)
			die(&err);
		t[r] = now() - t0;
	}
	snprintf(what, sizeof(what), "split %s", list);
	report(what, p->m, median(t, REPS));
	for (int i = 0; i < n; i++)
		pggpu_matmul_close(mms[i]);
}

#ifdef BENCH_CUBLAS
#define CK(x) do { if ((x) != 0) { fprintf(stderr, "%s failed\n", #x); exit(1); } } while (0)

static void
bench_cublas(long n, const double *A, const double *B, double *C)
{
	size_t		bytes = (size_t) n * n * sizeof(double);
	double	   *dA,
			   *dB,
			   *dC;
	cublasHandle_t h;
	cudaEvent_t e0,
				e1;
	const double one = 1.0,
				zero = 0.0;
	double		t[REPS];

	CK(cudaMalloc((void **) &dA, bytes));
	CK(cudaMalloc((void **) &dB, bytes));
	CK(cudaMalloc((void **) &dC, bytes));
	CK(cublasCreate(&h));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	CK(cudaMemcpy(dA, A, bytes, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(dB, B, bytes, cudaMemcpyHostToDevice));
	CK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, dB, n, dA, n, &zero, dC, n));
	CK(cudaDeviceSynchronize());
	for (int r = 0; r < REPS; r++)
	{
		float		ms;

		CK(cudaEventRecord(e0, 0));
		CK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, dB, n, dA, n, &zero, dC, n));
		CK(cudaEventRecord(e1, 0));
		CK(cudaEventSynchronize(e1));
		CK(cudaEventElapsedTime(&ms, e0, e1));
		t[r] = ms / 1e3;
	}
	report("cublas", n, median(t, REPS));
	for (int r = 0; r < REPS; r++)
	{
		double		t0 = now();

		CK(cudaMemcpy(dA, A, bytes, cudaMemcpyHostToDevice));
		CK(cudaMemcpy(dB, B, bytes, cudaMemcpyHostToDevice));
		CK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, dB, n, dA, n, &zero, dC, n));
		CK(cudaMemcpy(C, dC, bytes, cudaMemcpyDeviceToHost));
		t[r] = now() - t0;
	}
	report("cublas+copy", n, median(t, REPS));
	cublasDestroy(h);
	cudaFree(dA);
	cudaFree(dB);
	cudaFree(dC);
}
#endif

int
main(int argc, char **argv)
{
	pggpu_backend backend;
	pggpu_matmul *mm;
	pggpu_error err = {0};
	long		defaults[] = {4096, 8192};
	const char *splits[16];
	int			nsplits = 0;
	long		sizes[64];
	int			nsizes = 0;

	if (argc < 2 || (strcmp(argv[1], "gpu") != 0 && strcmp(argv[1], "cpu") != 0))
	{
		fprintf(stderr, "usage: %s gpu|cpu [-G LIST ...] [N ...]\n", argv[0]);
		return 2;
	}
	for (int a = 2; a < argc; a++)
		if (strcmp(argv[a], "-G") == 0 && a + 1 < argc && nsplits < 16)
			splits[nsplits++] = argv[++a];
		else if (nsizes < 64)
			sizes[nsizes++] = atol(argv[a]);
	if (nsizes == 0)
	{
		sizes[nsizes++] = defaults[0];
		sizes[nsizes++] = defaults[1];
	}
	backend = strcmp(argv[1], "gpu") == 0 ? PGGPU_BACKEND_GPU : PGGPU_BACKEND_CPU;
	if (pggpu_matmul_open(&mm, backend, -1, &err) != PGGPU_OK)
		die(&err);
	printf("device: %s, float64, median of %d runs\n", pggpu_matmul_device_name(mm), REPS);
	for (int s = 0; s < nsizes; s++)
	{
		long		n = sizes[s];
		size_t		bytes = (size_t) n * n * sizeof(double);
		double	   *A = pggpu_matmul_buffer(mm, PGGPU_MM_A, bytes, 0, &err);
		double	   *B = pggpu_matmul_buffer(mm, PGGPU_MM_B, bytes, 0, &err);
		double	   *C = pggpu_matmul_buffer(mm, PGGPU_MM_C, bytes, 0, &err);
		pggpu_matmul_params p = {0};
		pggpu_matmul_info info;
		double		t[REPS];
		int			reps = backend == PGGPU_BACKEND_GPU ? REPS : 3;

		if (!A || !B || !C)
			die(&err);
		for (long i = 0; i < n * n; i++)
		{
			A[i] = (double) ((i * 7919) % 2001) / 1000.0 - 1.0;
			B[i] = (double) ((i * 104729) % 1999) / 1000.0 - 1.0;
		}
		p.dtype = PGGPU_FLOAT64;
		p.m = p.n = p.k = n;
		if (pggpu_matmul_run(mm, &p, A, B, C, &info, &err) != PGGPU_OK)
			die(&err);
		for (int r = 0; r < reps; r++)
		{
			double		t0 = now();

			if (pggpu_matmul_run(mm, &p, A, B, C, &info, &err) != PGGPU_OK)
				die(&err);
			t[r] = now() - t0;
		}
		report("pg_gpu", n, median(t, reps));
		printf("             (%lld block products of %lld x %lld x %lld)\n", (long long) info.products,
			   (long long) info.mb, (long long) info.kb, (long long) info.nb);
		for (int g = 0; g < nsplits; g++)
			bench_split(splits[g], backend, &p, A, B, C);
#ifdef BENCH_CUBLAS
		if (backend == PGGPU_BACKEND_GPU)
			bench_cublas(n, A, B, C);
#endif
	}
	pggpu_matmul_close(mm);
	return 0;
}
