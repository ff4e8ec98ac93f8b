#include "unit.h"

/* ---- a sample drawn by content (cuda/sample.c) ---------------------------------- */

/*
 * The sample of m rows must be the same rows in the same order however the
 * rows are offered (in order, reversed, in chunks of any size, by any
 * stride), a prefix of any larger sample by the same seed (the m least
 * priorities), all rows where m >= n, and uniform: over many seeds each row
 * is kept about m / n of the time.
 */

/*
 * the sample of D's rows offered in chunks of `chunk` rows in the order perm
 * (NULL: in order), their priorities given by the caller where given is set
 */
static bool given_prio;
static bool by_rows;			/* offered row-major (given_prio too) */
static bool kept_f32;			/* kept as floats (pggpu_sample_set_dtype) */

static int64_t
sample_rows(const dataset *D, const int64_t *perm, int64_t chunk, int64_t m, uint64_t seed,
			double *out)
{
	uint64_t   *prio = xmalloc(sizeof(uint64_t) * chunk);
	pggpu_error err = {0};
	pggpu_sample *s;
	const void *rows;
	const int64_t *order;
	int64_t		got;
	int			d = D->d;
	double	   *col;

	if (pggpu_sample_open(&s, d, m, seed, &err) != PGGPU_OK ||
		(kept_f32 && pggpu_sample_set_dtype(s, PGGPU_FLOAT32, &err) != PGGPU_OK))
	{
		CHECK(false, "sample_open: %s", err.msg);
		return -1;
	}
	/* a chunk column-major, stride chunk + 3 (not the row count) */
	col = xmalloc(sizeof(double) * (chunk + 3) * d);
	for (int64_t at = 0; at < D->n; at += chunk)
	{
		int64_t		n = D->n - at < chunk ? D->n - at : chunk;

		for (int64_t r = 0; r < n; r++)
			for (int j = 0; j < d; j++)
				col[j * (chunk + 3) + r] = D->X[(perm ? perm[at + r] : at + r) * d + j];
		if (given_prio)
			pggpu_sample_priorities(prio, col, chunk + 3, n, d, seed);
		if (by_rows)
		{
			double	   *rm = xmalloc(sizeof(double) * n * d);

			for (int64_t r = 0; r < n; r++)
				for (int j = 0; j < d; j++)
					rm[r * d + j] = col[j * (chunk + 3) + r];
			if (pggpu_sample_offer_rows(s, rm, n, prio, &err) != PGGPU_OK)
				CHECK(false, "sample_offer_rows: %s", err.msg);
			free(rm);
		}
		else if ((given_prio ? pggpu_sample_offer_prio(s, col, chunk + 3, n, prio, &err) :
				  pggpu_sample_offer(s, col, chunk + 3, n, &err)) != PGGPU_OK)
			CHECK(false, "sample_offer: %s", err.msg);
	}
	CHECK(pggpu_sample_offered(s) == D->n, "offered %lld of %lld", (long long) pggpu_sample_offered(s),
		  (long long) D->n);
	got = pggpu_sample_result(s, &rows, &order);
	for (int64_t t = 0; t < got; t++)
		for (int j = 0; j < d; j++)
			out[t * d + j] = kept_f32 ? (double) ((const float *) rows)[order[t] * d + j] :
				((const double *) rows)[order[t] * d + j];
	free(col);
	free(prio);
	pggpu_sample_close(s);
	return got;
}

static jmp_buf sample_jb;
static int	sample_polls;

static void
sample_stop(void *arg)
{
	(void) arg;
	sample_polls++;
	longjmp(sample_jb, 1);
}

void
test_sample(void)
{
	dataset		D = {0};
	int64_t		n = 3000;
	int			d = 5;
	int64_t    *perm;
	double	   *a,
			   *b;
	rng			r = rng_make(17);

	set_case("sample: order of the offers");
	gen_few(&D, n, d, 400, 3);	/* many duplicate rows */
	D.X[7 * d] = -0.0;			/* -0 and 0 are the same value */
	perm = xmalloc(sizeof(int64_t) * n);
	for (int64_t i = 0; i < n; i++)
		perm[i] = n - 1 - i;
	for (int64_t i = n - 1; i > 0; i--)
	{
		int64_t		j = (int64_t) (rng_u64(&r) % (uint64_t) (i + 1));
		int64_t		t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}
	a = xmalloc(sizeof(double) * n * d);
	b = xmalloc(sizeof(double) * n * d);
	{
		int64_t		m = 700;
		int64_t		ga = sample_rows(&D, NULL, n, m, 5, a);
		int64_t		gb = sample_rows(&D, perm, 37, m, 5, b);
		int64_t		gc;

		CHECK(ga == m && gb == m, "kept %lld and %lld of %lld", (long long) ga, (long long) gb,
			  (long long) m);
		CHECK(memcmp(a, b, sizeof(double) * m * d) == 0, "shuffled offers gave another sample");
		gc = sample_rows(&D, perm, 1, m, 5, b);
		CHECK(gc == m && memcmp(a, b, sizeof(double) * m * d) == 0, "one row an offer gave another sample");
		/* priorities computed apart (as a reader's workers do) */
		given_prio = true;
		gc = sample_rows(&D, perm, 53, m, 5, b);
		CHECK(gc == m && memcmp(a, b, sizeof(double) * m * d) == 0, "given priorities gave another sample");
		/* and the rows row by row, as a reader's workers turn them */
		by_rows = true;
		gc = sample_rows(&D, perm, 61, m, 5, b);
		by_rows = given_prio = false;
		CHECK(gc == m && memcmp(a, b, sizeof(double) * m * d) == 0, "rows offered row-major gave another sample");
		/* float32 values kept as floats: the same sample, the same order */
		kept_f32 = true;
		gc = sample_rows(&D, perm, 29, m, 5, b);
		kept_f32 = false;
		CHECK(gc == m && memcmp(a, b, sizeof(double) * m * d) == 0, "kept as floats gave another sample");
		/* another seed, another sample */
		sample_rows(&D, NULL, n, m, 6, b);
		CHECK(memcmp(a, b, sizeof(double) * m * d) != 0, "seeds 5 and 6 gave the same sample");

		set_case("sample: a prefix of a larger one");
		gc = sample_rows(&D, perm, 101, 1500, 5, b);
		CHECK(gc == 1500 && memcmp(a, b, sizeof(double) * m * d) == 0,
			  "the 700 of seed 5 are not the first of its 1500");
	}

	set_case("sample: all rows where m >= n");
	{
		int64_t		g = sample_rows(&D, perm, 64, n + 10, 9, a);
		double	   *x = xmalloc(sizeof(double) * n * d);
		double	   *y = xmalloc(sizeof(double) * n * d);
		int			eq = 1;

		CHECK(g == n, "kept %lld of %lld", (long long) g, (long long) n);
		/* the same multiset of rows: both sorted */
		memcpy(x, D.X, sizeof(double) * n * d);
		memcpy(y, a, sizeof(double) * n * d);
		for (int64_t i = 1; i < n; i++)	/* insertion sort by lexcmp */
			for (int64_t j = i; j > 0 && lexcmp(x + j * d, x + (j - 1) * d, d) < 0; j--)
				for (int c = 0; c < d; c++)
				{
					double		t = x[j * d + c];

					x[j * d + c] = x[(j - 1) * d + c];
					x[(j - 1) * d + c] = t;
				}
		for (int64_t i = 1; i < n; i++)
			for (int64_t j = i; j > 0 && lexcmp(y + j * d, y + (j - 1) * d, d) < 0; j--)
				for (int c = 0; c < d; c++)
				{
					double		t = y[j * d + c];

					y[j * d + c] = y[(j - 1) * d + c];
					y[(j - 1) * d + c] = t;
				}
		for (int64_t i = 0; i < n * d; i++)
			eq &= x[i] == y[i];
		CHECK(eq, "the sample of all rows is not the rows");
		free(x);
		free(y);
	}
	data_free(&D);

	set_case("sample: uniform");
	{
		int			nr = 20,
					m = 5,
					seeds = 4000;
		int			count[20] = {0};
		double		expect = (double) seeds * m / nr;
		double		sd = sqrt(seeds * ((double) m / nr) * (1 - (double) m / nr));

		gen_uniform(&D, nr, 3, -1, 1, 4);
		for (int s = 0; s < seeds; s++)
		{
			int64_t		g = sample_rows(&D, NULL, nr, m, (uint64_t) s, a);

			for (int64_t t = 0; t < g; t++)
				for (int i = 0; i < nr; i++)
					if (memcmp(a + t * 3, D.X + i * 3, sizeof(double) * 3) == 0)
						count[i]++;
		}
		for (int i = 0; i < nr; i++)
			CHECK(fabs(count[i] - expect) < 6 * sd, "row %d kept %d times of %d seeds (expected %.0f +- %.0f)",
				  i, count[i], seeds, expect, sd);
		data_free(&D);
	}

	set_case("sample: an interrupt while the result is sorted");
	{
		pggpu_error err = {0};
		pggpu_sample *s = NULL;
		int64_t		nr = 140000;
		double	   *x = xmalloc(sizeof(double) * nr * 2);
		const void *rows;
		const int64_t *order;

		for (int64_t i = 0; i < nr * 2; i++)
			x[i] = (double) (i % 100003);
		if (pggpu_sample_open(&s, 2, nr, 8, &err) == PGGPU_OK &&
			pggpu_sample_offer(s, x, nr, nr, &err) == PGGPU_OK)
		{
			pggpu_sample_set_interrupts(s, sample_stop, NULL);
			sample_polls = 0;
			if (setjmp(sample_jb) == 0)
			{
				pggpu_sample_result(s, &rows, &order);
				CHECK(false, "the sort of %lld rows never polled", (long long) nr);
			}
			else
				CHECK(sample_polls == 1, "polled %d times before the jump", sample_polls);
		}
		else
			CHECK(false, "sample of %lld rows: %s", (long long) nr, err.msg);
		pggpu_sample_close(s);
		free(x);
	}

	set_case("sample: errors");
	{
		pggpu_error err = {0};
		pggpu_sample *s = NULL;

		CHECK(pggpu_sample_open(&s, 0, 5, 1, &err) == PGGPU_ERR_INVALID && s == NULL, "d = 0 accepted");
		CHECK(pggpu_sample_open(&s, 3, 0, 1, &err) == PGGPU_ERR_INVALID && s == NULL, "m = 0 accepted");
		pggpu_sample_close(NULL);
		if (pggpu_sample_open(&s, 2, 4, 1, &err) == PGGPU_OK)
		{
			double		x[6] = {1, 2, 3, 4, 5, 6};
			const void *rows;
			const int64_t *order;

			CHECK(pggpu_sample_offer_rows(s, x, 3, NULL, &err) == PGGPU_ERR_INVALID,
				  "rows offered row by row without their priorities accepted");
			CHECK(pggpu_sample_offer(s, x, 3, 3, &err) == PGGPU_OK && pggpu_sample_offered(s) == 3,
				  "three rows offered: %lld counted", (long long) pggpu_sample_offered(s));
			CHECK(pggpu_sample_set_dtype(s, PGGPU_FLOAT32, &err) == PGGPU_ERR_INVALID,
				  "a sample's type changed after an offer");
			CHECK(pggpu_sample_result(s, &rows, &order) == 3, "a sample of 4 from 3 rows is not the 3");
			CHECK(pggpu_sample_offer(s, x, 3, 3, &err) == PGGPU_ERR_INVALID,
				  "rows offered to a sample already taken accepted");
			pggpu_sample_close(s);
		}
	}
	free(a);
	free(b);
	free(perm);
}
