/*
 * fuzz_compute.c - libFuzzer target over the compute layer's argument
 * validation and data handling (CPU backend), built with AddressSanitizer
 * and UndefinedBehaviorSanitizer (make tests/fuzz/fuzz_compute; tests/run.sh runs
 * it for a fixed number of inputs from a fixed seed).
 *
 * Each input is a little program: open a data set of d columns (d from the
 * input, 0 and negative included) with any row hint, push batches of any
 * size (0 and too many included) holding any finite values (huge, tiny,
 * subnormal, signed zeros), then run k-means with any k, max_iter, tol,
 * init (invalid ones included) and seed, or nearest-centroid assignment with
 * any centroids (NaN and infinities included), or a matrix product of any
 * shape and element type (invalid ones included) with any values.
 * Every call must return a status (never crash, leak or touch memory out of
 * bounds), invalid arguments must give PGGPU_ERR_INVALID, and results that
 * come back OK must hold together: labels in range, sizes counting them,
 * finite products equal to a long-double product.
 */
#include "pg_gpu_compute.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct input
{
	const uint8_t *p;
	size_t		n;
} input;

static uint8_t
u8(input *in)
{
	if (in->n == 0)
		return 0;
	in->n--;
	return *in->p++;
}

static uint16_t
u16(input *in)
{
	return (uint16_t) (u8(in) | u8(in) << 8);
}

static uint64_t
u64(input *in)
{
	uint64_t	v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t) u8(in) << (8 * i);
	return v;
}

/* a value, special ones often; finite unless any_value */
static double
value(input *in, int any_value)
{
	static const double special[] = {0.0, -0.0, 1.0, -1.0, DBL_MAX, -DBL_MAX, DBL_MIN,
	5e-324, 1e300, -1e-300, 0.5, 3.0, NAN, INFINITY, -INFINITY};
	uint8_t		sel = u8(in);
	double		v;

	if (sel < 2 * (sizeof(special) / sizeof(special[0])))
		v = special[sel / 2];
	else if (sel < 200)
		v = (double) (int8_t) u8(in);
	else
	{
		uint64_t	bits = u64(in);

		memcpy(&v, &bits, sizeof(v));
	}
	if (!any_value && !isfinite(v))
		v = 1.0;
	return v;
}

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); abort(); } while (0)

static void
run_kmeans(input *in)
{
	pggpu_error err = {0};
	pggpu_data *ds = NULL;
	int			d = (int8_t) u8(in) % 9;
	int64_t		hint = (int16_t) u16(in);
	int			nbatches = u8(in) % 4;
	pggpu_status st;

	st = pggpu_data_open(&ds, PGGPU_BACKEND_CPU, 0, d, hint, &err);
	if (d < 1)
	{
		if (st != PGGPU_ERR_INVALID || ds != NULL)
			FAIL("open with d = %d: status %d", d, (int) st);
		return;
	}
	if (st != PGGPU_OK)
		FAIL("open d = %d hint %lld: %d %s", d, (long long) hint, (int) st, err.msg);
	for (int b = 0; b < nbatches; b++)
	{
		int64_t		B = pggpu_data_batch_rows(ds);
		int64_t		rows = (int64_t) (u8(in) % 70) - 2;	/* -2 .. 67 */
		double	   *buf = pggpu_data_batch(ds);
		int64_t		before = pggpu_data_rows(ds);

		if (buf == NULL)
			FAIL("no staging buffer");
		for (int64_t r = 0; r < rows && r < B; r++)
			for (int j = 0; j < d; j++)
				buf[j * B + r] = value(in, 0);
		st = pggpu_data_push(ds, rows, &err);
		if ((rows < 1 || rows > B) != (st == PGGPU_ERR_INVALID))
			FAIL("push of %lld rows (batch %lld): status %d", (long long) rows, (long long) B, (int) st);
		if (st == PGGPU_OK && pggpu_data_rows(ds) != before + rows)
			FAIL("rows %lld after pushing %lld onto %lld", (long long) pggpu_data_rows(ds),
				 (long long) rows, (long long) before);
		if (st == PGGPU_OK && rows < B)
			break;				/* a partial batch ends the data */
	}

	{
		int64_t		n = pggpu_data_rows(ds);
		int			k = (int8_t) u8(in);
		int			kk = k > 0 ? k : 1;
		double	   *C = (double *) calloc((size_t) kk * d, sizeof(double));
		int64_t    *sizes = (int64_t *) calloc(kk, sizeof(int64_t));
		int32_t    *labels = (int32_t *) calloc(n > 0 ? n : 1, sizeof(int32_t));
		double	   *dist = (double *) calloc(n > 0 ? n : 1, sizeof(double));

		/* standard scaling first, sometimes: OK (finite means, positive deviations) or out of range */
		if (u8(in) % 4 == 0)
		{
			double	   *mean = (double *) calloc(d, sizeof(double)),
					   *std = (double *) calloc(d, sizeof(double));

			st = pggpu_data_standardize(ds, mean, std, &err);
			if (n == 0 ? st != PGGPU_ERR_INVALID : st != PGGPU_OK && st != PGGPU_ERR_RANGE)
				FAIL("standardize n=%lld: status %d (%s)", (long long) n, (int) st, err.msg);
			for (int j = 0; st == PGGPU_OK && j < d; j++)
				if (!isfinite(mean[j]) || !(std[j] > 0) || !isfinite(std[j]))
					FAIL("standardize: column %d mean %g std %g", j, mean[j], std[j]);
			free(mean);
			free(std);
		}

		if (u8(in) % 2)
		{
			pggpu_kmeans_params p = {0};
			pggpu_kmeans_result r = {0};
			double	   *init = (double *) calloc((size_t) kk * d, sizeof(double));
			bool		bad;

			for (int i = 0; i < kk * d; i++)
				init[i] = value(in, 0);
			p.k = k;
			p.max_iter = (int8_t) u8(in);
			p.tol = value(in, 1);
			p.init = (pggpu_init) (u8(in) % 5);
			p.seed = u64(in);
			p.init_centroids = p.init == PGGPU_INIT_GIVEN && u8(in) % 4 ? init : NULL;
			p.n_init = u8(in) % 4;
			r.centroids = C;
			r.sizes = sizes;
			r.labels = labels;
			bad = k < 1 || k > n || p.max_iter < 1 || !(p.tol >= 0) ||
				(unsigned) p.init > PGGPU_INIT_PARALLEL ||
				(p.init == PGGPU_INIT_GIVEN && (p.init_centroids == NULL || p.n_init > 1));
			st = pggpu_kmeans(ds, &p, &r, &err);
			if (bad != (st == PGGPU_ERR_INVALID))
				FAIL("k-means k=%d n=%lld max_iter=%d tol=%g init=%d: status %d (%s)",
					 k, (long long) n, p.max_iter, p.tol, (int) p.init, (int) st, err.msg);
			if (st == PGGPU_OK)
			{
				int64_t		total = 0;

				for (int c = 0; c < k; c++)
					total += sizes[c];
				for (int64_t i = 0; i < n; i++)
					if (labels[i] < 0 || labels[i] >= k)
						FAIL("label %d of row %lld not in 0..%d", labels[i], (long long) i, k - 1);
				if (total != n || r.iterations < 1 || r.iterations > p.max_iter)
					FAIL("sizes sum to %lld of %lld rows; %d iterations of at most %d",
						 (long long) total, (long long) n, r.iterations, p.max_iter);
			}
			free(init);
		}
		else
		{
			for (int i = 0; i < kk * d; i++)
				C[i] = value(in, 1);
			st = pggpu_assign(ds, C, k, labels, u8(in) % 2 ? dist : NULL, &err);
			if ((k < 1) != (st == PGGPU_ERR_INVALID))
				FAIL("assign k=%d: status %d (%s)", k, (int) st, err.msg);
			if (st == PGGPU_OK)
				for (int64_t i = 0; i < n; i++)
					if (labels[i] < 0 || labels[i] >= k)
						FAIL("assigned label %d of row %lld not in 0..%d", labels[i], (long long) i, k - 1);
		}
		free(C);
		free(sizes);
		free(labels);
		free(dist);
	}
	pggpu_data_close(ds);
}

static void
run_matmul(input *in)
{
	pggpu_error err = {0};
	pggpu_matmul *mm = NULL;
	pggpu_matmul_params p = {0};
	pggpu_status st;
	size_t		es;
	bool		bad,
				finite = true;
	void	   *A,
			   *B,
			   *C;

	if (pggpu_matmul_open(&mm, PGGPU_BACKEND_CPU, 0, &err) != PGGPU_OK)
		FAIL("matmul_open: %s", err.msg);
	p.dtype = (pggpu_dtype) (u8(in) % 3);
	p.m = (int8_t) u8(in) % 20;
	p.k = (int8_t) u8(in) % 20;
	p.n = (int8_t) u8(in) % 20;
	bad = (unsigned) p.dtype > PGGPU_FLOAT32 || p.m < 1 || p.k < 1 || p.n < 1;
	es = p.dtype == PGGPU_FLOAT32 ? sizeof(float) : sizeof(double);
	A = pggpu_matmul_buffer(mm, PGGPU_MM_A, (p.m > 0 && p.k > 0 ? p.m * p.k : 1) * es, 0, &err);
	B = pggpu_matmul_buffer(mm, PGGPU_MM_B, (p.k > 0 && p.n > 0 ? p.k * p.n : 1) * es, 0, &err);
	C = pggpu_matmul_buffer(mm, PGGPU_MM_C, (p.m > 0 && p.n > 0 ? p.m * p.n : 1) * es, 0, &err);
	if (!A || !B || !C)
		FAIL("host buffers: %s", err.msg);
	if (!bad)
	{
		for (int64_t i = 0; i < p.m * p.k + p.k * p.n; i++)
		{
			double		v = value(in, 1);
			void	   *X = i < p.m * p.k ? A : B;
			int64_t		e = i < p.m * p.k ? i : i - p.m * p.k;

			if (p.dtype == PGGPU_FLOAT32)
				((float *) X)[e] = (float) v, v = (float) v;
			else
				((double *) X)[e] = v;
			finite &= isfinite(v) && fabs(v) < 1e15;
		}
	}
	st = pggpu_matmul_run(mm, &p, A, B, C, NULL, &err);
	if (bad != (st == PGGPU_ERR_INVALID))
		FAIL("matmul %lld x %lld x %lld type %d: status %d (%s)", (long long) p.m,
			 (long long) p.k, (long long) p.n, (int) p.dtype, (int) st, err.msg);
	if (st == PGGPU_OK && finite)
		for (int64_t i = 0; i < p.m; i++)
			for (int64_t j = 0; j < p.n; j++)
			{
				long double r = 0,
							s = 0;
				double		c;

				for (int64_t q = 0; q < p.k; q++)
				{
					long double x = p.dtype == PGGPU_FLOAT32
					? (long double) ((float *) A)[i * p.k + q] * ((float *) B)[q * p.n + j]
					: (long double) ((double *) A)[i * p.k + q] * ((double *) B)[q * p.n + j];

					r += x;
					s += fabsl(x);
				}
				c = p.dtype == PGGPU_FLOAT32 ? ((float *) C)[i * p.n + j] : ((double *) C)[i * p.n + j];
				if (!(fabsl(c - r) <= (p.dtype == PGGPU_FLOAT32 ? 1e-5L : 1e-12L) * s + 1e-300L))
					FAIL("C[%lld][%lld] = %.17g, expected %.17Lg", (long long) i, (long long) j, c, r);
			}
	pggpu_matmul_close(mm);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	input		in = {data, size};

	if (u8(&in) % 2)
		run_matmul(&in);
	else
		run_kmeans(&in);
	return 0;
}
